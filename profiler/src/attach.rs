//! `profiler attach`: time the syscalls of running processes, or of a command it starts, and print
//! the table when the duration ends, the command exits, or on Ctrl-C.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use crate::{
    bpf::{GroupExit, Programs, Session, SessionConfig, Syscall, Target},
    cli::ExportArgs,
    export::{self, ExportData, Measurement, Metadata},
    output,
    process::{StoppedChild, Targets, describe_exit, resolve_targets},
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
    /// Also trace the children of `pids`: those already running and those forked from now on.
    pub children: bool,
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
    /// Files to write the results to (`--export-json` and friends).
    pub exports: ExportArgs,
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
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        // A closed terminal or a dropped ssh session: stop and write, as for SIGTERM.
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("installing the Ctrl-C handler")?;
    }

    let child = if options.command.is_empty() {
        None
    } else {
        Some(StoppedChild::spawn(&options.command, false, None, false)?)
    };
    let (target, targets) = if options.all {
        (Target::All, Targets::default())
    } else {
        let targets = match resolve_targets(&options.pids, options.children) {
            Ok(t) => t,
            Err(e) => {
                if let Some(child) = child {
                    child.kill();
                }
                return Err(e.into());
            }
        };
        (Target::Processes(targets.named().to_vec()), targets)
    };
    let config = SessionConfig {
        syscalls: options.syscalls.clone(),
        target,
        programs: Programs::Profiler,
        group_exit: GroupExit::Auto,
        follow_forks: options.children,
    };
    let mut session = match Session::start(&config) {
        Ok(s) => s,
        Err(e) => {
            if let Some(child) = child {
                child.kill();
            }
            return Err(e.into());
        }
    };
    // Descendants found in /proc may have exited since: those are skipped, not an error.
    let mut descendants = 0;
    for &pid in targets.descendant_pids() {
        match session.track_if_running(pid) {
            Ok(tracked) => descendants += usize::from(tracked),
            Err(e) => {
                if let Some(child) = child {
                    child.kill();
                }
                return Err(e.into());
            }
        }
    }
    if let Some(child) = &child {
        if let Err(e) = session.track(child.pid) {
            child.kill();
            return Err(e.into());
        }
        child.resume()?;
    }
    for note in &targets.notes {
        crate::errln!("note: {note}");
    }
    let children = if options.children {
        " and the children they fork"
    } else {
        ""
    };
    let what = match (&child, options.all) {
        (Some(_), _) => format!("'{}'{children}", options.command.join(" ")),
        (None, true) => "all processes".to_owned(),
        (None, false) => {
            let named = targets.named();
            let pids = named
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            match descendants {
                0 => format!("pid {pids}{children}"),
                n => format!(
                    "pid {pids} and {n} running descendant{} ({} processes){children}",
                    if n == 1 { "" } else { "s" },
                    named.len() + n
                ),
            }
        }
    };
    let names: Vec<&str> = options.syscalls.iter().map(|s| s.name.as_str()).collect();
    crate::errln!("Tracing {} of {what}. Ctrl-C to stop.", names.join(", "));

    let metadata = Metadata::collect("attach");
    // An export sent to stdout keeps stdout to itself; the human report goes to stderr then.
    let report_to_stderr = options
        .exports
        .files()
        .iter()
        .any(|(_, p)| p.as_os_str() == "-");
    let emit = |text: &str| {
        if report_to_stderr {
            output::stderr(text);
        } else {
            output::stdout(text);
        }
    };
    let started = Instant::now();
    let mut last_interval = (Instant::now(), Snapshot::default());
    // The command's status once it has exited; tracing goes on while what it started lives on,
    // as with `strace -f`.
    let mut command_status = None;
    let outcome = (|| -> Result<StopReason> {
        Ok(loop {
            std::thread::sleep(Duration::from_millis(20));
            session.flush_logs();
            if interrupted.load(Ordering::Relaxed) {
                break match command_status {
                    Some(code) => StopReason::CommandExited(code),
                    None => StopReason::Interrupted,
                };
            }
            if let Some(child) = &child
                && command_status.is_none()
                && let Some(code) = child.try_wait()?
            {
                command_status = Some(code);
                if session.any_tracked_alive()? {
                    crate::errln!(
                        "The command {}; tracing the processes it started until they exit (Ctrl-C to stop).",
                        describe_exit(code)
                    );
                }
            }
            if options.duration.is_some_and(|d| started.elapsed() >= d) {
                break StopReason::Duration;
            }
            if (child.is_none() || command_status.is_some())
                && !options.all
                && !session.any_tracked_alive()?
            {
                break match command_status {
                    Some(code) => StopReason::CommandExited(code),
                    None => StopReason::TargetsExited,
                };
            }
            if let Some(every) = options.interval
                && last_interval.0.elapsed() >= every
            {
                let now = session.snapshot()?;
                let delta = now.since(&last_interval.1);
                emit(&format!(
                    "--- last {:.2}s ---\n",
                    last_interval.0.elapsed().as_secs_f64()
                ));
                emit(&table::syscall_table(&delta));
                last_interval = (Instant::now(), now);
            }
        })
    })();
    // The counters cover the time from the last attach to this snapshot: not the load before it
    // nor the detach after it.
    let elapsed = session.traced_for();
    let final_snapshot = session.snapshot().map_err(anyhow::Error::from);
    session.flush_logs();
    drop(session);
    let measured = match (outcome, final_snapshot) {
        (Ok(reason), Ok(snapshot)) => Ok((reason, snapshot)),
        (Err(error), last) => Err((error, last.ok())),
        (Ok(_), Err(error)) => Err((error, None)),
    };
    let (reason, snapshot) = match measured {
        Ok(measured) => measured,
        Err((error, last)) => {
            // Reading failed part-way: write what was measured until then, marked partial.
            let earlier = (last_interval.1 != Snapshot::default()).then(|| last_interval.1.clone());
            if let Some(snapshot) = last.or(earlier) {
                let data = export_data(
                    options,
                    metadata,
                    snapshot,
                    elapsed,
                    "reading the counters failed",
                    true,
                );
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
    if snapshot.processes.len() > 1 {
        report.push_str("\nPer process:\n");
        report.push_str(&table::process_table(&snapshot));
    }
    if options.histograms {
        for s in snapshot.syscalls.iter().filter(|s| s.calls > 0) {
            report.push('\n');
            report.push_str(&log2_histogram(
                &format!("{} latency", s.name),
                &s.latency,
                true,
            ));
            if let Some(events) = s.events.as_ref().filter(|e| e.total() > 0) {
                report.push('\n');
                report.push_str(&log2_histogram(
                    &format!("{} events per call", s.name),
                    events,
                    false,
                ));
            }
        }
    }
    emit(&report);
    // Ctrl-C is how attach normally ends, so what it measured is complete, not partial.
    let data = export_data(options, metadata, snapshot, elapsed, &ended, false);
    let exported = export::write_exports(&options.exports, &data);
    // A command we started that is still running when tracing stops goes with us.
    if let Some(child) = child
        && command_status.is_none()
    {
        child.kill();
    }
    exported?;
    Ok(match reason {
        StopReason::CommandExited(code) => code,
        _ => 0,
    })
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
    let pids = if options.all {
        "all".to_owned()
    } else {
        options
            .pids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let settings = [
        ("pids", pids),
        ("command", options.command.join(" ")),
        (
            "syscalls",
            options
                .syscalls
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
        (
            "duration",
            options
                .duration
                .map(|d| humantime::format_duration(d).to_string())
                .unwrap_or_default(),
        ),
        ("stopped", ended.to_owned()),
    ];
    metadata.settings.extend(
        settings
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_owned(), v)),
    );
    ExportData {
        metadata,
        measurements: vec![Measurement {
            variant: None,
            concurrency: None,
            run: None,
            syscalls: snapshot,
            load: None,
            failure: None,
        }],
        partial,
        failures: Vec::new(),
    }
}
