//! `profiler top`: a live view over the same tracing session as `attach` (`--pid`, `--all`,
//! `--cgroup`, `-- CMD`), refreshed every interval: session → snapshot each interval → its
//! difference from the last → [`model::frame`] → the terminal view ([`tui`]) or, when stdout
//! is not a terminal or with `--batch`, one plain table per interval.
//!
//! It adds no counting path: each refresh is the difference of two snapshots of the counters
//! `attach` reads, so the batch tables' calls add up to attach's over the same workload (the
//! differential suite checks it against strace).

pub mod model;
pub mod tui;

use std::{
    io::IsTerminal as _,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::Result;

use crate::{
    process::describe_exit,
    stats::Snapshot,
    trace::{self, Trace, TraceRequest},
};

/// What `profiler top` was asked to do.
#[derive(Clone, Debug)]
pub struct TopOptions {
    /// What to trace.
    pub trace: TraceRequest,
    /// How often the view refreshes.
    pub interval: Duration,
    /// Plain tables, one per interval, even on a terminal.
    pub batch: bool,
    /// Stop after this many refreshes.
    pub iterations: Option<u64>,
    /// The view at the start (`--sort`, `--group`, `--filter`).
    pub view: model::ViewSpec,
}

/// The session and the counters as last read: one refresh at a time.
pub struct Source {
    trace: Trace,
    open_ended: bool,
    started: Instant,
    /// The counters at the last refresh, and when.
    last: (Instant, Snapshot),
    /// The command's exit status, once it has exited.
    command_status: Option<i32>,
    /// Refreshes so far.
    pub refreshes: u64,
}

/// Why the view ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// `q`, Ctrl-C, SIGTERM, SIGHUP.
    Quit,
    /// `--iterations` reached.
    Iterations,
    /// Every traced process exited (the command with this status, when one was started).
    Exited(Option<i32>),
}

impl Source {
    fn new(trace: Trace, request: &TraceRequest) -> Self {
        Self {
            trace,
            open_ended: request.open_ended(),
            started: Instant::now(),
            last: (Instant::now(), Snapshot::default()),
            command_status: None,
            refreshes: 0,
        }
    }

    /// The counters since the last refresh (and since the start), and the window's length.
    pub fn refresh(&mut self) -> Result<(Snapshot, Snapshot, f64)> {
        let session = &mut self.trace.session;
        session.flush_logs();
        session.remember_cgroup_names();
        let now = session.snapshot()?;
        let seconds = self.last.0.elapsed().as_secs_f64();
        let delta = now.since(&self.last.1);
        self.last = (Instant::now(), now.clone());
        self.refreshes += 1;
        Ok((delta, now, seconds))
    }

    /// Whether everything traced has exited (never for `--all` or `--cgroup`).
    pub fn exited(&mut self) -> Result<Option<Ended>> {
        if let Some(child) = &self.trace.child
            && self.command_status.is_none()
            && let Some(code) = child.try_wait()?
        {
            self.command_status = Some(code);
        }
        let command_done = self.trace.child.is_none() || self.command_status.is_some();
        if command_done && !self.open_ended && !self.trace.session.any_tracked_alive()? {
            return Ok(Some(Ended::Exited(self.command_status)));
        }
        Ok(None)
    }

    /// What is traced, for the heading.
    #[must_use]
    pub fn describe(&self, request: &TraceRequest) -> String {
        self.trace.describe(request)
    }

    /// Seconds since the start.
    #[must_use]
    pub fn uptime(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The session's front end, as the heading names it.
    #[must_use]
    pub fn front(&self) -> String {
        self.trace.session.syscall_front().describe()
    }
}

/// Runs `profiler top`; returns the exit code (the command's, when one was started and
/// exited, like attach).
pub fn run(options: &TopOptions) -> Result<i32> {
    if options.interval < Duration::from_millis(100) {
        anyhow::bail!(
            "--interval {}: give 100ms or more (each refresh reads every counter)",
            humantime::format_duration(options.interval)
        );
    }
    let stop = trace::stop_on_signals()?;
    let batch = options.batch || !std::io::stdout().is_terminal();
    let trace = Trace::start(&options.trace)?;
    let mut source = Source::new(trace, &options.trace);
    let ended = if batch {
        batch_loop(&mut source, options, &stop)
    } else {
        tui::run(&mut source, options, &stop)
    };
    let child = source.trace.child.take();
    let status = source.command_status;
    drop(source);
    let ended = match ended {
        Ok(e) => e,
        Err(e) => {
            if let Some(child) = child {
                child.kill();
            }
            return Err(e);
        }
    };
    if let Some(child) = child
        && status.is_none()
    {
        // A command we started still running when the view ends goes with us.
        child.kill();
    }
    Ok(match ended {
        Ended::Exited(Some(code)) => {
            if code != 0 {
                crate::errln!("The command {}.", describe_exit(code));
            }
            code
        }
        _ => 0,
    })
}

/// Sleeps until `until` in short steps, or until `stop` is set.
fn sleep_until(until: Instant, stop: &AtomicBool) {
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(20)));
    }
}

/// `--batch`: one plain table per interval on stdout, and a last one for the calls made since
/// the last when the view ends (so the tables add up to every call).
fn batch_loop(source: &mut Source, options: &TopOptions, stop: &AtomicBool) -> Result<Ended> {
    crate::errln!(
        "top: {} of {}, every {} ({}). Ctrl-C to stop.",
        options.trace.syscall_names(", "),
        source.describe(&options.trace),
        humantime::format_duration(options.interval),
        source.front()
    );
    let mut process_names = model::Names::default();
    let mut next = Instant::now() + options.interval;
    loop {
        sleep_until(next, stop);
        next += options.interval;
        let ended = if stop.load(Ordering::Relaxed) {
            Some(Ended::Quit)
        } else {
            source.exited()?
        };
        let (delta, _, seconds) = source.refresh()?;
        let frame = model::frame(&delta, seconds, &options.view, &mut process_names);
        let title = format!(
            "--- top: interval {} ({:.2}s, {:.1}s since the start{}) ---",
            source.refreshes,
            seconds,
            source.uptime(),
            if ended.is_some() { ", the last" } else { "" }
        );
        crate::output::stdout(&model::batch_table(&frame, &options.view, &title));
        if let Some(ended) = ended {
            return Ok(ended);
        }
        if options.iterations.is_some_and(|n| source.refreshes >= n) {
            return Ok(Ended::Iterations);
        }
    }
}
