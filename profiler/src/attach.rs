//! `profiler attach`: time the syscalls of running processes, or of a command it starts, and print
//! the table when the duration ends, the command exits, or on Ctrl-C.

use std::{
    io::Write as _,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use crate::{
    bpf::{Session, SessionConfig, Syscall, Target},
    process::StoppedChild,
    report::{histogram::log2_histogram, table},
    stats::Snapshot,
};

/// What `profiler attach` was asked to do.
#[derive(Clone, Debug)]
pub struct AttachOptions {
    /// Running processes to trace.
    pub pids: Vec<u32>,
    /// Trace every process.
    pub all: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Print a table of the last interval this often.
    pub interval: Option<Duration>,
    /// Syscalls to time.
    pub syscalls: Vec<Syscall>,
    /// Add ASCII histograms.
    pub histograms: bool,
    /// A command to start and trace from its first syscall.
    pub command: Vec<String>,
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

/// Runs `profiler attach` and prints its report to stdout. Returns the exit code to use: the
/// command's own when one was started (like `strace -c`), else 0.
pub fn run(options: &AttachOptions) -> Result<i32> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("installing the Ctrl-C handler")?;
    }

    let child = if options.command.is_empty() { None } else { Some(StoppedChild::spawn(&options.command, false)?) };
    let target = if options.all { Target::All } else { Target::Processes(options.pids.clone()) };
    let config = SessionConfig { syscalls: options.syscalls.clone(), target, noop: false };
    let mut session = match Session::start(&config) {
        Ok(s) => s,
        Err(e) => {
            if let Some(child) = child {
                child.kill();
            }
            return Err(e.into());
        }
    };
    if let Some(child) = &child {
        session.track(child.pid)?;
        child.resume()?;
    }
    let what = match (&child, options.all) {
        (Some(_), _) => format!("'{}'", options.command.join(" ")),
        (None, true) => "all processes".to_owned(),
        (None, false) => format!("pid {}", options.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")),
    };
    let names: Vec<&str> = options.syscalls.iter().map(|s| s.name.as_str()).collect();
    eprintln!("Tracing {} of {what}. Ctrl-C to stop.", names.join(", "));

    let started = Instant::now();
    let mut last_interval = (Instant::now(), Snapshot::default());
    let reason = loop {
        std::thread::sleep(Duration::from_millis(20));
        session.flush_logs();
        if interrupted.load(Ordering::Relaxed) {
            break StopReason::Interrupted;
        }
        if let Some(child) = &child
            && let Some(code) = child.try_wait()?
        {
            break StopReason::CommandExited(code);
        }
        if options.duration.is_some_and(|d| started.elapsed() >= d) {
            break StopReason::Duration;
        }
        if child.is_none() && !options.all && !any_alive(&session.tracked_pids()?) {
            break StopReason::TargetsExited;
        }
        if let Some(every) = options.interval
            && last_interval.0.elapsed() >= every
        {
            let now = session.snapshot()?;
            let delta = now.since(&last_interval.1);
            println!("--- last {:.2}s ---", last_interval.0.elapsed().as_secs_f64());
            print!("{}", table::syscall_table(&delta));
            let _ = std::io::stdout().flush();
            last_interval = (Instant::now(), now);
        }
    };
    let snapshot = session.snapshot()?;
    session.flush_logs();
    drop(session);
    let elapsed = started.elapsed();

    let ended = match reason {
        StopReason::Duration => "duration reached".to_owned(),
        StopReason::Interrupted => "interrupted".to_owned(),
        StopReason::CommandExited(code) => format!("command exited with status {code}"),
        StopReason::TargetsExited => "every traced process exited".to_owned(),
    };
    println!("Traced for {:.2}s ({ended}).", elapsed.as_secs_f64());
    print!("{}", table::syscall_table(&snapshot));
    if snapshot.processes.len() > 1 {
        println!();
        println!("Per process:");
        print!("{}", table::process_table(&snapshot));
    }
    if options.histograms {
        for s in snapshot.syscalls.iter().filter(|s| s.calls > 0) {
            println!();
            print!("{}", log2_histogram(&format!("{} latency", s.name), &s.latency, true));
            if let Some(events) = s.events.as_ref().filter(|e| e.total() > 0) {
                println!();
                print!("{}", log2_histogram(&format!("{} events per call", s.name), events, false));
            }
        }
    }
    // A command we started that is still running when tracing stops goes with us.
    if let Some(child) = child
        && !matches!(reason, StopReason::CommandExited(_))
    {
        child.kill();
    }
    Ok(match reason {
        StopReason::CommandExited(code) => code,
        _ => 0,
    })
}

fn any_alive(pids: &[u32]) -> bool {
    pids.iter().any(|pid| {
        // A zombie still has /proc/PID; its state letter is Z.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
            .is_some_and(|zombie| !zombie)
    })
}
