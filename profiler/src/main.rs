//! The `profiler` command.

use std::process::ExitCode;

use anyhow::Result;
use c2c::{C2cOptions, Mechanism, SyscallTimer};
use clap::Parser as _;
use profiler::{
    attach::{self, AttachOptions},
    bench,
    bpf::SyscallAttach,
    c2c_timer::KernelSyscallTimer,
};

use crate::cli::{BenchCommand, C2cArgs, Cli, Command};

mod cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // While the process has one thread: a namespace of its own if tracefs must be mounted.
    let private_tracefs = profiler::bpf::environment::mount_tracefs_privately();
    let level = match cli.verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        _ => log::LevelFilter::Debug,
    };
    // The libraries' own debug lines (aya's BTF relocations: thousands of lines) only at -vvv.
    let libraries = match cli.verbose {
        0..=2 => log::LevelFilter::Warn,
        _ => log::LevelFilter::Debug,
    };
    env_logger::Builder::new()
        .filter_level(libraries)
        .filter_module("profiler", level)
        .format_timestamp(None)
        .init();
    if let Err(e) = private_tracefs {
        log::debug!("tracefs is not mounted and could not be mounted privately: {e}");
    }
    match run(cli) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            profiler::errln!("Error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Attach(args) => {
            let args = *args;
            profiler::export::check_export_args(&args.exports)?;
            let options = AttachOptions {
                trace: args.session.trace_request(
                    cli.syscall_attach,
                    !args.no_children,
                    args.command,
                )?,
                duration: args.duration,
                interval: args.interval,
                histograms: args.hist,
                exports: args.exports,
                otlp: args.otlp.checked()?,
            };
            attach::run(&options)
        }
        Command::Run(args) => profiler::run::main(&args, cli.syscall_attach),
        Command::Top(args) => {
            let args = *args;
            let view = args.view();
            let options = profiler::top::TopOptions {
                trace: args
                    .session
                    .trace_request(cli.syscall_attach, true, args.command)?,
                interval: args.interval,
                batch: args.batch,
                iterations: args.iterations,
                view,
            };
            profiler::top::run(&options)
        }
        Command::Diff(args) => profiler::diff::main(&args),
        Command::GenerateAssets { dir } => {
            cli::generate_assets(&dir)?;
            Ok(0)
        }
        Command::C2c(args) => run_c2c(&args, cli.syscall_attach),
        Command::Bench(BenchCommand::Overhead(args)) => {
            bench::overhead::run(&args)?;
            Ok(0)
        }
        Command::Bench(BenchCommand::Precision(args)) => {
            bench::precision::run(&args)?;
            Ok(0)
        }
        Command::Serve(args) => {
            if args.session.slow.slow.is_some() && args.record_minutes == 0 {
                anyhow::bail!(
                    "--slow keeps the slowest calls in the flight recorder, which --record-minutes 0 turns off; give --record-minutes 1 or more"
                );
            }
            let options = profiler::serve::ServeOptions {
                trace: args
                    .session
                    .trace_request(cli.syscall_attach, true, Vec::new())?,
                listen: args.listen,
                otlp: args.otlp.checked()?,
                web_config: args.web_config,
                user: args.user,
                self_cost: args.self_cost,
                recorder: (args.record_minutes > 0).then(|| profiler::serve::RecorderOptions {
                    window: std::time::Duration::from_secs(u64::from(args.record_minutes) * 60),
                    every: args.record_every,
                    triggers: args.record_when,
                    dir: args.record_dir.unwrap_or_else(std::env::temp_dir),
                }),
            };
            profiler::serve::run(&options)?;
            Ok(0)
        }
    }
}

/// `[3/8] pipe: p50 5.21 µs` (or why it has no figures) on stderr.
fn c2c_progress(result: &c2c::MechanismResult, done: usize, of: usize) {
    let what = match &result.outcome {
        c2c::Outcome::Measured(m) => format!(
            "p50 {:.2} µs, p99 {:.2} µs over {} round trips",
            m.ns.p50 as f64 / 1e3,
            m.ns.p99 as f64 / 1e3,
            m.round_trips
        ),
        c2c::Outcome::Unavailable { reason } => format!("not measured: {reason}"),
        c2c::Outcome::Failed { error } => format!("failed: {error}"),
    };
    profiler::errln!("[{done}/{of}] {}: {what}", result.mechanism);
}

fn run_c2c(args: &C2cArgs, syscall_attach: Option<SyscallAttach>) -> Result<i32> {
    // Ctrl-C ends the mechanism in progress at its time limit, then prints what was measured.
    let interrupt = profiler::trace::stop_on_signals()?;
    let options = C2cOptions {
        cpus: args.cpus,
        round_trips: args.round_trips,
        mechanisms: Mechanism::parse_list(&args.mechanisms)?,
        time_limit: args.time_limit,
        interrupt: Some(interrupt),
        // A line per mechanism on stderr as it finishes, terminal or not (the table follows).
        on_result: Some(c2c_progress),
    };
    let mut timer = if args.no_syscalls {
        None
    } else {
        match KernelSyscallTimer::new(syscall_attach) {
            Ok(t) => Some(t),
            Err(e) => {
                profiler::errln!(
                    "note: no syscall columns ({e}); pass --no-syscalls to silence this"
                );
                None
            }
        }
    };
    let report = c2c::run(&options, timer.as_mut().map(|t| t as &mut dyn SyscallTimer))?;
    if args.json {
        profiler::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        profiler::output::stdout(&report.to_string());
    }
    Ok(if report.interrupted { 130 } else { 0 })
}
