//! `profiler attach`: time the syscalls of running processes, or of a command it starts, and print
//! the table when the duration ends, the command exits, or on Ctrl-C.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::Result;

use crate::{
    export::{self, ExportArgs, ExportData, Metadata},
    output,
    process::describe_exit,
    report::{document::Section, histogram::log2_histogram, table},
    stats::Snapshot,
    trace::{self, Trace, TraceRequest},
};

/// What `profiler attach` was asked to do.
#[derive(Clone, Debug)]
pub struct AttachOptions {
    /// What to trace: syscalls, processes, a command.
    pub trace: TraceRequest,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Print a table of the last interval this often.
    pub interval: Option<Duration>,
    /// Add ASCII histograms.
    pub histograms: bool,
    /// Files to write the results to (`--export-json` and friends).
    pub exports: ExportArgs,
    /// `--otlp-endpoint URL`, pushed every `--otlp-interval` and once at the end.
    pub otlp: Option<(String, Duration)>,
}

/// Why tracing stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The duration elapsed.
    Duration,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// The started command exited with this status code (128 + signal when killed).
    CommandExited(i32),
    /// Every traced process exited.
    TargetsExited,
}

/// Runs `profiler attach`, prints its report to stdout (stderr when an export takes stdout) and
/// writes the exports asked for. Returns the exit code to use: the
/// command's own when one was started (like `strace -c`), else 0.
pub fn run(options: &AttachOptions) -> Result<i32> {
    let stop = trace::stop_on_signals()?;
    let mut trace = Trace::start(&options.trace)?;
    crate::errln!(
        "Tracing {} of {}. Ctrl-C to stop.",
        options.trace.syscall_names(", "),
        trace.describe(&options.trace)
    );
    let mut metadata = Metadata::collect("attach");
    metadata
        .settings
        .insert("attach".into(), trace.session.syscall_front().describe());
    let emit = Emit::new(&options.exports);
    let mut poll = Poll::default();
    if let Some((url, _)) = &options.otlp {
        poll.otlp = Some(crate::export::otlp::Pusher::new(
            url,
            &trace.describe(&options.trace),
        )?);
    }
    let outcome = poll.until_stopped(&mut trace, options, &stop, emit);
    finish(trace, options, metadata, emit, &poll, outcome)
}

/// Where the human report goes: stdout, or stderr when an export takes stdout.
#[derive(Clone, Copy)]
struct Emit {
    to_stderr: bool,
}

impl Emit {
    fn new(exports: &ExportArgs) -> Self {
        Self {
            to_stderr: exports.files().iter().any(|(_, p)| p.as_os_str() == "-"),
        }
    }

    fn print(self, text: &str) {
        if self.to_stderr {
            output::stderr(text);
        } else {
            output::stdout(text);
        }
    }
}

/// The polling loop's state.
struct Poll {
    started: Instant,
    /// The start of the current `--interval` and the counters then.
    interval: (Instant, Snapshot),
    /// `--otlp-endpoint`: where to push, and when it last did.
    otlp: Option<crate::export::otlp::Pusher>,
    otlp_pushed: Option<Instant>,
    /// The command's status once it has exited; tracing goes on while what it started lives
    /// on, as with `strace -f`.
    command_status: Option<i32>,
}

impl Default for Poll {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            interval: (Instant::now(), Snapshot::default()),
            otlp: None,
            otlp_pushed: None,
            command_status: None,
        }
    }
}

impl Poll {
    /// Polls every 20 ms until a stop condition holds, printing the `--interval` tables.
    fn until_stopped(
        &mut self,
        trace: &mut Trace,
        options: &AttachOptions,
        stop: &AtomicBool,
        emit: Emit,
    ) -> Result<StopReason> {
        let session = &mut trace.session;
        let open_ended = options.trace.open_ended();
        loop {
            std::thread::sleep(Duration::from_millis(20));
            session.flush_logs();
            session.remember_cgroup_names();
            if stop.load(Ordering::Relaxed) {
                return Ok(match self.command_status {
                    Some(code) => StopReason::CommandExited(code),
                    None => StopReason::Interrupted,
                });
            }
            if let Some(child) = &trace.child
                && self.command_status.is_none()
                && let Some(code) = child.try_wait()?
            {
                self.command_status = Some(code);
                if session.any_tracked_alive()? {
                    crate::errln!(
                        "The command {}; tracing the processes it started until they exit (Ctrl-C to stop).",
                        describe_exit(code)
                    );
                }
            }
            if options
                .duration
                .is_some_and(|d| self.started.elapsed() >= d)
            {
                return Ok(StopReason::Duration);
            }
            if (trace.child.is_none() || self.command_status.is_some())
                && !open_ended
                && !session.any_tracked_alive()?
            {
                return Ok(match self.command_status {
                    Some(code) => StopReason::CommandExited(code),
                    None => StopReason::TargetsExited,
                });
            }
            if let (Some(pusher), Some((_, every))) = (&self.otlp, &options.otlp)
                && self.otlp_pushed.is_none_or(|t| t.elapsed() >= *every)
            {
                self.otlp_pushed = Some(Instant::now());
                let data =
                    ExportData::of_trace(Metadata::collect("attach"), session.snapshot()?, false);
                // A collector that is down costs a line, not the trace.
                if let Err(e) = pusher.push(&data) {
                    crate::errln!("warning: OTLP: {e:#}");
                }
            }
            if let Some(every) = options.interval
                && self.interval.0.elapsed() >= every
            {
                let now = session.snapshot()?;
                let delta = now.since(&self.interval.1);
                emit.print(&format!(
                    "--- last {:.2}s ---\n",
                    self.interval.0.elapsed().as_secs_f64()
                ));
                emit.print(&table::syscall_table(&delta));
                self.interval = (Instant::now(), now);
            }
        }
    }
}

/// Reads the counters a last time, detaches, prints the report and writes the exports. When
/// polling or the last read failed, what was measured until then is written, marked partial.
fn finish(
    trace: Trace,
    options: &AttachOptions,
    metadata: Metadata,
    emit: Emit,
    poll: &Poll,
    outcome: Result<StopReason>,
) -> Result<i32> {
    let Trace {
        mut session,
        child,
        slow,
        ..
    } = trace;
    // The counters cover the time from the last attach to this snapshot: not the load before it
    // nor the detach after it.
    let elapsed = session.traced_for();
    let front = session.syscall_front().name();
    let final_snapshot = session.snapshot().map_err(anyhow::Error::from);
    session.flush_logs();
    drop(session);
    // After the detach: every slow call is in the ring buffer by now.
    let slow = slow.map(crate::slow::Collector::finish);
    let measured = match (outcome, final_snapshot) {
        (Ok(reason), Ok(snapshot)) => Ok((reason, snapshot)),
        (Err(error), last) => Err((error, last.ok())),
        (Ok(_), Err(error)) => Err((error, None)),
    };
    let (reason, snapshot) = match measured {
        Ok(measured) => measured,
        Err((error, last)) => {
            let earlier = (poll.interval.1 != Snapshot::default()).then(|| poll.interval.1.clone());
            if let Some(snapshot) = last.or(earlier) {
                let data = export_data(
                    options,
                    metadata,
                    snapshot,
                    elapsed,
                    "reading the counters failed",
                    true,
                )
                .with_slow(slow);
                if let Err(e) = export::write_exports(&options.exports, &data) {
                    crate::errln!("Error: {e:#}");
                }
            }
            if let Some(child) = child {
                child.kill();
            }
            return Err(error);
        }
    };

    let ended = match reason {
        StopReason::Duration => "duration reached".to_owned(),
        StopReason::Interrupted => "interrupted".to_owned(),
        StopReason::CommandExited(code) => format!("command exited with status {code}"),
        StopReason::TargetsExited => "every traced process exited".to_owned(),
    };
    let mut report = format!("Traced for {:.2}s ({ended}).\n", elapsed.as_secs_f64());
    report.push_str(&table::syscall_table(&snapshot));
    match table::every_syscall_table(&snapshot) {
        Some(t) if options.trace.every == crate::bpf::CountEvery::Always => {
            report.push_str(&Section::new(table::EVERY_SYSCALL_TITLE, t).to_text());
        }
        Some(_) => {}
        None => report.push_str(&format!(
            "left out: not measured (the {front} front end spares every syscall the raw tracepoints that count the rest; --syscalls all counts them)\n",
        )),
    }
    if let Some(t) = table::off_cpu_table(&snapshot) {
        report.push_str(&Section::new(table::OFF_CPU_TITLE, t).to_text());
    }
    if table::per_process_rows(&snapshot) {
        let per = table::process_summary(&snapshot);
        report.push_str(&Section::new(table::process_title(&snapshot), per).to_text());
    }
    if options.histograms {
        report.push_str(&histograms(&snapshot));
    }
    if let Some(slow) = &slow {
        report.push_str(&slow.to_text());
    }
    emit.print(&report);
    // Ctrl-C is how attach normally ends, so what it measured is complete, not partial.
    let data = export_data(options, metadata, snapshot, elapsed, &ended, false).with_slow(slow);
    // The last push: the final counts.
    if let Some(pusher) = &poll.otlp
        && let Err(e) = pusher.push(&data)
    {
        crate::errln!("warning: OTLP: {e:#}");
    }
    let exported = export::write_exports(&options.exports, &data);
    // A command we started that is still running when tracing stops goes with us.
    if let Some(child) = child
        && poll.command_status.is_none()
    {
        child.kill();
    }
    exported?;
    Ok(match reason {
        StopReason::CommandExited(code) => code,
        _ => 0,
    })
}

/// `--hist`: the latency histogram of every called syscall, and its events per call.
fn histograms(snapshot: &Snapshot) -> String {
    let mut out = String::new();
    for s in snapshot.syscalls.iter().filter(|s| s.calls > 0) {
        out.push('\n');
        out.push_str(&log2_histogram(
            &format!("{} latency", s.name),
            &s.latency,
            true,
        ));
        if let Some(r) = s.returned.as_ref().filter(|r| r.per_call.total() > 0) {
            out.push('\n');
            out.push_str(&log2_histogram(
                &format!("{} {} per call", s.name, r.unit.key()),
                &r.per_call,
                false,
            ));
        }
    }
    out
}

/// What `attach` measured, as the one model every export reads: one measurement, no variant.
fn export_data(
    options: &AttachOptions,
    mut metadata: Metadata,
    snapshot: Snapshot,
    elapsed: Duration,
    ended: &str,
    partial: bool,
) -> ExportData {
    metadata.duration_s = elapsed.as_secs_f64();
    options.trace.describe_in(&mut metadata);
    if let Some(d) = options.duration {
        metadata
            .settings
            .insert("duration".into(), humantime::format_duration(d).to_string());
    }
    metadata.settings.insert("stopped".into(), ended.to_owned());
    ExportData::of_trace(metadata, snapshot, partial)
}
