//! `profiler bench overhead`: what timing a syscall costs, against the physical limit.
//!
//! A dup()+close() loop runs in this process with only `close` traced, under each configuration
//! in turn, round after round (each round in a rotated order), so the machine's drift hits all
//! of them alike:
//! - nothing attached;
//! - the empty pair: do-nothing programs at the attach point (the mechanism's own cost);
//! - the minimal timer: what every syscall timer must do (clock read at entry stored per thread,
//!   clock read at exit, the difference added to one per-CPU counter). Any timer pays this, so it
//!   is the floor the profiler is held to;
//! - the profiler's programs, tracking this process;
//! - the equivalent bpftrace one-liner, where bpftrace is installed;
//! - the empty pair and the minimal timer again on the raw `sys_enter`/`sys_exit` tracepoints;
//! - where the kernel accepts fentry/fexit (not when locked down), the profiler, the empty pair
//!   and the minimal timer on them too, side by side with the tracepoints.
//!
//! Then the tax on work nobody asked to trace: (a) an untraced process making the traced syscall
//! (the loop here, while the profiler tracks another process), and (b) a traced process making
//! an untraced syscall (a getppid() loop here, while the profiler times `close`).
//!
//! Figures of merit, per round: (config − nothing) ÷ (minimal timer − nothing) and
//! (config − nothing) ÷ (empty pair − nothing); the tables give their medians and ranges.

use std::{
    io::{BufRead as _, BufReader},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use clap::Args;

use crate::{
    bpf::{
        AttachPoint, CountEvery, PerThread, Programs, SchedAttach, Session, SessionConfig, Syscall,
        SyscallAttach, Target,
    },
    inference::{Estimate, Method, TARGET_LEVEL},
    report::table::Table,
    samples::median,
};

/// `profiler bench overhead` options.
#[derive(Debug, Args)]
pub struct OverheadArgs {
    /// dup()+close() iterations per measurement.
    #[arg(long, default_value_t = 400_000, value_parser = clap::value_parser!(u64).range(1000..))]
    pub iterations: u64,
    /// Rounds; each round measures every configuration once, in turn (the targets are judged
    /// over at least 9).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Skip the bpftrace comparison even when bpftrace is installed.
    #[arg(long)]
    pub no_bpftrace: bool,
}

/// One way of tracing `close`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    /// No programs.
    Nothing,
    /// Do-nothing programs.
    Empty(AttachPoint),
    /// The minimal timer.
    MinimalTimer(AttachPoint),
    /// The profiler's programs, on the syscall tracepoints.
    Profiler,
    /// The profiler's programs on another front end than the tracepoints (fentry/fexit).
    ProfilerOn(AttachPoint),
    /// The profiler's programs with `--off-cpu` (sched_switch, sched_wakeup), on the raw
    /// tracepoints where the kernel allows (what a session chooses).
    ProfilerOffCpu,
    /// The same on the classic `sched:` tracepoints (the fallback where BTF is missing).
    ProfilerOffCpuClassic,
    /// The profiler's programs with `--slow 1s`: nothing is past it, so this is the cost of
    /// watching (the kernel stack taken at each switch-out of a traced call).
    ProfilerSlow,
    /// The profiler's programs with `--slow 1ns` and the collector reading: every call is
    /// recorded (ring buffer, user stack, name) and grouped in user space.
    ProfilerSlowEvery,
    /// The profiler's programs counting every call too (`--syscalls all` where the compat
    /// programs do not run: the raw `every_enter`/`every_exit` pair beside them).
    ProfilerEvery,
    /// The profiler's programs with the compat pair (32-bit timing), as `attach` loads them,
    /// not counting every call.
    ProfilerCompat,
    /// The same counting every call inside the compat pair: `attach`'s default.
    ProfilerCompatEvery,
    /// The profiler's programs with the per-thread state in hash maps (what a large
    /// `kernel.pid_max` chooses), against the arrays of `Profiler`.
    ProfilerHash,
    /// bpftrace's hist() one-liner.
    Bpftrace,
    /// Do-nothing programs on the raw sched_switch and sched_wakeup: `--off-cpu`'s floor.
    EmptySched,
    /// The empty pair with the kernel's statistics on: their own cost per program run.
    EmptyStats,
    /// The profiler with the kernel's statistics on, as `serve --self-cost` runs it.
    ProfilerStats,
}

impl Config {
    fn label(self) -> String {
        match self {
            // The floors as their front end names them.
            Self::Empty(point) => format!("empty pair{}", point.front().row),
            Self::MinimalTimer(point) => format!("minimal timer{}", point.front().row),
            Self::ProfilerOn(point) => format!("syscall-profiler{}", point.front().row),
            other => other.fixed_label().unwrap_or_default().to_owned(),
        }
    }

    /// The label of a configuration that is not a front end's floor.
    fn fixed_label(self) -> Option<&'static str> {
        Some(match self {
            Self::Empty(_) | Self::MinimalTimer(_) | Self::ProfilerOn(_) => return None,
            Self::Nothing => "nothing attached",
            Self::Profiler => "syscall-profiler",
            Self::ProfilerOffCpu => "syscall-profiler --off-cpu",
            Self::ProfilerOffCpuClassic => "syscall-profiler --off-cpu, classic sched tracepoints",
            Self::ProfilerSlow => "syscall-profiler --slow 1s",
            Self::ProfilerSlowEvery => "syscall-profiler --slow 1ns",
            Self::ProfilerEvery => "syscall-profiler --syscalls all",
            Self::ProfilerCompat => "syscall-profiler + compat, not counting every call",
            Self::ProfilerCompatEvery => "syscall-profiler + compat counting every call",
            Self::ProfilerHash => "syscall-profiler, per-thread hash maps",
            Self::Bpftrace => "bpftrace one-liner",
            Self::EmptySched => "empty sched pair, raw_tp",
            Self::EmptyStats => "empty pair, statistics on",
            Self::ProfilerStats => "syscall-profiler, statistics on",
        })
    }

    /// The `--slow` threshold of the configuration.
    fn slow(self) -> Option<std::time::Duration> {
        match self {
            Self::ProfilerSlow => Some(std::time::Duration::from_secs(1)),
            Self::ProfilerSlowEvery => Some(std::time::Duration::from_nanos(1)),
            _ => None,
        }
    }

    fn programs(self) -> Option<Programs> {
        match self {
            Self::Empty(point) => Some(Programs::Empty(point)),
            Self::EmptyStats => Some(Programs::Empty(AttachPoint::Tracepoint)),
            Self::MinimalTimer(point) => Some(Programs::MinimalTimer(point)),
            Self::EmptySched => Some(Programs::EmptySched),
            Self::Profiler
            | Self::ProfilerOn(_)
            | Self::ProfilerOffCpu
            | Self::ProfilerOffCpuClassic
            | Self::ProfilerSlow
            | Self::ProfilerSlowEvery
            | Self::ProfilerEvery
            | Self::ProfilerCompat
            | Self::ProfilerCompatEvery
            | Self::ProfilerHash
            | Self::ProfilerStats => Some(Programs::Profiler),
            Self::Nothing | Self::Bpftrace => None,
        }
    }
}

/// The loop a measurement times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// dup() + close(): close is the traced syscall.
    DupClose,
    /// getppid(): a syscall nobody traces.
    Getppid,
    /// A pipe ping-pong with a child on the same CPU: two context switches per iteration.
    PingPong,
}

/// Whose calls the programs time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracked {
    /// This process, which runs the loop.
    Me,
    /// Another process (an idle child): the loop here is untraced.
    Other,
}

/// One measured row: a configuration, the loop it timed, whom it tracked.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Which configuration.
    pub config: Config,
    /// Which loop.
    pub workload: Workload,
    /// Whom the programs tracked.
    pub tracked: Tracked,
    /// ns per iteration, one per round.
    pub samples: Vec<f64>,
    /// ns per program run as the kernel measured it (bpf(2) `BPF_ENABLE_STATS`), per program
    /// name, one per round.
    pub program_ns: Vec<(String, f64)>,
    /// With the statistics on (`EmptyStats`, `ProfilerStats`): the syscall programs' run time
    /// per iteration as the kernel counted it, one per round (`serve --self-cost`'s ns per
    /// traced call, as this loop's closes are the traced calls).
    pub self_ns: Vec<f64>,
}

impl Measured {
    fn new(config: Config, workload: Workload, tracked: Tracked) -> Self {
        Self {
            config,
            workload,
            tracked,
            samples: Vec::new(),
            program_ns: Vec::new(),
            self_ns: Vec::new(),
        }
    }

    /// Median of the samples.
    #[must_use]
    pub fn median(&self) -> f64 {
        median(&self.samples)
    }

    fn is(&self, config: Config, workload: Workload, tracked: Tracked) -> bool {
        self.config == config && self.workload == workload && self.tracked == tracked
    }
}

/// The rows of the main table: close traced in this process, every configuration (each front
/// end's where the kernel gives it: `given`).
fn main_rows(bpftrace: bool, given: &[AttachPoint]) -> Vec<Measured> {
    let mut configs = vec![
        Config::Nothing,
        Config::Empty(AttachPoint::Tracepoint),
        Config::MinimalTimer(AttachPoint::Tracepoint),
        Config::Profiler,
        Config::ProfilerOffCpu,
        Config::ProfilerSlow,
        Config::ProfilerEvery,
        Config::ProfilerHash,
        Config::EmptyStats,
        Config::ProfilerStats,
    ];
    if bpftrace {
        configs.push(Config::Bpftrace);
    }
    // Every other front end the kernel gives: the profiler on it, where it times syscalls,
    // and its floors.
    for &point in given.iter().filter(|&&p| p != AttachPoint::Tracepoint) {
        if point.front().help.is_some() {
            configs.push(Config::ProfilerOn(point));
        }
        configs.extend([Config::Empty(point), Config::MinimalTimer(point)]);
    }
    configs
        .into_iter()
        .map(|c| Measured::new(c, Workload::DupClose, Tracked::Me))
        .collect()
}

/// The rows of the tax table, each with its own baseline row where it is not in the main table.
fn tax_rows(fentry: bool) -> Vec<Measured> {
    let mut rows = vec![
        // (a) the profiler tracks another process; this one closes untraced.
        Measured::new(Config::Profiler, Workload::DupClose, Tracked::Other),
        Measured::new(Config::ProfilerEvery, Workload::DupClose, Tracked::Other),
        Measured::new(Config::ProfilerCompat, Workload::DupClose, Tracked::Other),
        Measured::new(
            Config::ProfilerCompatEvery,
            Workload::DupClose,
            Tracked::Other,
        ),
        // (b) close is traced in this process, which calls getppid.
        Measured::new(Config::Nothing, Workload::Getppid, Tracked::Me),
        Measured::new(
            Config::Empty(AttachPoint::Tracepoint),
            Workload::Getppid,
            Tracked::Me,
        ),
        Measured::new(Config::Profiler, Workload::Getppid, Tracked::Me),
        Measured::new(Config::ProfilerEvery, Workload::Getppid, Tracked::Me),
        Measured::new(Config::ProfilerCompat, Workload::Getppid, Tracked::Me),
        Measured::new(Config::ProfilerCompatEvery, Workload::Getppid, Tracked::Me),
        Measured::new(
            Config::Empty(AttachPoint::RawTracepoint),
            Workload::Getppid,
            Tracked::Me,
        ),
        Measured::new(
            Config::MinimalTimer(AttachPoint::RawTracepoint),
            Workload::Getppid,
            Tracked::Me,
        ),
        // The cost of --off-cpu per context switch: a ping-pong nobody traces, with the
        // profiler's programs and with the sched ones added.
        Measured::new(Config::Profiler, Workload::PingPong, Tracked::Other),
        Measured::new(Config::ProfilerOffCpu, Workload::PingPong, Tracked::Other),
        Measured::new(
            Config::ProfilerOffCpuClassic,
            Workload::PingPong,
            Tracked::Other,
        ),
        // Its floor: empty programs on the same two tracepoints, against nothing attached.
        Measured::new(Config::Nothing, Workload::PingPong, Tracked::Other),
        Measured::new(Config::EmptySched, Workload::PingPong, Tracked::Other),
        // --slow's costs where it works: a ping-pong whose reads are traced, so each round
        // trip has two traced calls that leave the CPU (a kernel stack each with --slow, and two
        // records with --slow 1ns).
        Measured::new(Config::ProfilerOffCpu, Workload::PingPong, Tracked::Me),
        Measured::new(Config::ProfilerSlow, Workload::PingPong, Tracked::Me),
        Measured::new(Config::ProfilerSlowEvery, Workload::PingPong, Tracked::Me),
    ];
    if fentry {
        // (a) and (b) on fentry: an untraced caller of close runs the trampoline and the
        // programs' early exit; getppid has no program at all.
        rows.extend([
            Measured::new(
                Config::ProfilerOn(AttachPoint::Fentry),
                Workload::DupClose,
                Tracked::Other,
            ),
            Measured::new(
                Config::ProfilerOn(AttachPoint::Fentry),
                Workload::Getppid,
                Tracked::Me,
            ),
            Measured::new(
                Config::Empty(AttachPoint::Fentry),
                Workload::Getppid,
                Tracked::Me,
            ),
        ]);
    }
    rows
}

/// Runs the benchmark and prints its tables.
pub fn run(args: &OverheadArgs) -> Result<()> {
    let results = measure(args)?;
    crate::output::stdout(&render(&results, args));
    Ok(())
}

/// Measures every row `args.rounds` times.
pub fn measure(args: &OverheadArgs) -> Result<Vec<Measured>> {
    let close = vec![Syscall::resolve("close")?];
    let bpftrace = !args.no_bpftrace && which("bpftrace");
    if !bpftrace && !args.no_bpftrace {
        crate::errln!("bpftrace is not installed: its row is left out (apt-get install bpftrace)");
    }
    let mut given = Vec::new();
    for point in AttachPoint::ALL {
        match crate::bpf::front_refused(point) {
            None => given.push(point),
            Some(why) => crate::errln!("{} is not measured here: {why}", point.front().name),
        }
    }
    pin_to_last_cpu();
    let other = IdleChild::start()?;
    let mut results = main_rows(bpftrace, &given);
    results.extend(tax_rows(given.contains(&AttachPoint::Fentry)));
    let rows = results.len();
    let started = std::time::Instant::now();
    for round in 0..args.rounds as usize {
        // Where it is, on stderr, a line per round: the whole takes a few minutes.
        if round > 0 {
            let per_round = started.elapsed() / round as u32;
            crate::errln!(
                "bench overhead: round {}/{} ({} configurations each), about {:.0} s left",
                round + 1,
                args.rounds,
                rows,
                (per_round * (args.rounds - round as u32)).as_secs_f64()
            );
        } else {
            crate::errln!(
                "bench overhead: round 1/{} ({rows} configurations each)",
                args.rounds
            );
        }
        // A rotated order each round, so no configuration always follows the same one.
        for i in 0..rows {
            let m = &mut results[(i + round) % rows];
            let (ns, programs) = measure_one(m, &close, other.pid(), args.iterations)
                .with_context(|| format!("round {}: {}", round + 1, m.config.label()))?;
            m.samples.push(ns);
            if matches!(m.config, Config::EmptyStats | Config::ProfilerStats) {
                let total: u128 = programs.iter().map(|(_, _, time)| time.as_nanos()).sum();
                m.self_ns.push(total as f64 / args.iterations as f64);
            }
        }
    }
    // One more round with the kernel timing every program run: where the added cost goes. Its
    // loop times are left out above, as the statistics themselves cost time.
    let stats = crate::bpf::BpfStats::enable()?;
    // The untraced process's closes too: what the tax (a) is made of.
    // And the sched programs' own cost per run, from the untraced ping-pong.
    for m in results.iter_mut().filter(|m| {
        m.config.programs().is_some()
            && (m.workload == Workload::DupClose
                || (m.workload == Workload::PingPong && m.tracked == Tracked::Other))
    }) {
        let (_, programs) = measure_one(m, &close, other.pid(), args.iterations)
            .with_context(|| format!("profiling round: {}", m.config.label()))?;
        m.program_ns.extend(
            programs
                .into_iter()
                .map(|(name, runs, time)| (name, time.as_nanos() as f64 / runs as f64)),
        );
    }
    drop(stats);
    Ok(results)
}

/// A program's name, runs and run time, as the kernel's statistics count them.
type ProgramRuns = (String, u64, Duration);

/// ns per iteration, and the runs and run time of each attached program that ran at least once
/// per iteration (from the kernel's own statistics: zeros unless they are on).
fn measure_one(
    m: &Measured,
    close: &[Syscall],
    other: u32,
    iterations: u64,
) -> Result<(f64, Vec<ProgramRuns>)> {
    let me = std::process::id();
    let run = |workload| match workload {
        Workload::DupClose => dup_close_loop(iterations),
        Workload::Getppid => getppid_loop(iterations),
        Workload::PingPong => ping_pong_loop(iterations / PING_PONG_SHARE),
    };
    if m.config == Config::Bpftrace {
        let mut tracer = BpftraceGuard::start(me)?;
        let ns = run(m.workload);
        tracer.stop();
        return Ok((ns, Vec::new()));
    }
    let Some(programs) = m.config.programs() else {
        return Ok((run(m.workload), Vec::new()));
    };
    // The traced ping-pong times its reads; everything else times close.
    let syscalls = if m.workload == Workload::PingPong && m.tracked == Tracked::Me {
        vec![Syscall::resolve("read")?]
    } else {
        close.to_vec()
    };
    let slow = m.config.slow();
    // On before the programs load, off when this measurement ends.
    let _stats = if matches!(m.config, Config::EmptyStats | Config::ProfilerStats) {
        Some(crate::bpf::BpfStats::enable()?)
    } else {
        None
    };
    let target = Target::Processes(vec![match m.tracked {
        Tracked::Me => me,
        Tracked::Other => other,
    }]);
    let mut session = Session::start(&SessionConfig {
        programs,
        off_cpu: matches!(
            m.config,
            Config::ProfilerOffCpu | Config::ProfilerOffCpuClassic
        ),
        sched_attach: if m.config == Config::ProfilerOffCpuClassic {
            SchedAttach::Classic
        } else {
            SchedAttach::Auto
        },
        slow,
        syscall_attach: Some(SyscallAttach::Only(match m.config {
            Config::ProfilerOn(point) => point,
            _ => AttachPoint::Tracepoint,
        })),
        // As `run` times its 64-bit servers: the syscall-timing programs alone, comparable
        // with the floors (the compat programs' cost is the raw_tp empty pair's); with them
        // where the configuration measures them.
        compat: matches!(
            m.config,
            Config::ProfilerCompat | Config::ProfilerCompatEvery
        ),
        per_thread: if m.config == Config::ProfilerHash {
            PerThread::Hash
        } else {
            PerThread::Array
        },
        count_every: match m.config {
            Config::ProfilerEvery => CountEvery::Always,
            Config::ProfilerCompatEvery => CountEvery::Auto,
            _ => CountEvery::Never,
        },
        ..SessionConfig::new(syscalls.clone(), target)
    })?;
    // --slow 1ns records every call: read them as `attach --slow` does, or they would be lost.
    let collector = if m.config == Config::ProfilerSlowEvery {
        session.start_slow_collector(1, 0)?
    } else {
        None
    };
    let ns = run(m.workload);
    let runs = session.program_run_stats();
    let programs_ns = runs
        .into_iter()
        .filter(|(_, runs, _)| {
            *runs
                >= match m.workload {
                    Workload::PingPong => iterations / PING_PONG_SHARE,
                    _ => iterations,
                }
        })
        .collect();
    if let Some(collector) = collector {
        let snapshot = session.snapshot()?;
        let calls: u64 = snapshot.syscalls.iter().map(|s| s.calls).sum();
        drop(session);
        let report = collector.finish();
        // The benchmark checks itself: every call past 1 ns was recorded or counted lost.
        if report.recorded + report.lost < calls {
            bail!(
                "--slow 1ns: {} recorded and {} lost of {calls} calls",
                report.recorded,
                report.lost
            );
        }
        return Ok((ns, Vec::new()));
    }
    // The benchmark checks itself: the timers must have timed the loop's closes.
    if m.workload == Workload::DupClose && m.tracked == Tracked::Me {
        match programs {
            Programs::Profiler => {
                let snapshot = session.snapshot()?;
                let close = snapshot.syscall("close");
                let timed = close.map_or(0, |s| s.calls);
                if timed < iterations {
                    bail!("only {timed} of {iterations} closes were timed");
                }
                if m.config == Config::ProfilerOffCpu
                    && close.and_then(|s| s.off_cpu.as_ref()).is_none()
                {
                    bail!("--off-cpu split nothing");
                }
            }
            Programs::MinimalTimer(_) => {
                if session.timer_total_ns()? == 0 {
                    bail!("the minimal timer timed nothing");
                }
            }
            Programs::Empty(_) | Programs::EmptySched => {}
        }
    }
    Ok((ns, programs_ns))
}

/// An idle child process for the profiler to track while this one runs untraced; killed on drop.
struct IdleChild(Child);

impl IdleChild {
    fn start() -> Result<Self> {
        crate::process::die_with_parent(&mut Command::new("sleep"))
            .arg("86400")
            .stdin(Stdio::null())
            .spawn()
            .map(Self)
            .context("starting an idle child (sleep) to track")
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for IdleChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The ping-pong runs this fraction of the iterations (a round trip costs ~10 closes; a quarter
/// keeps its per-switch figures out of the machine's noise).
const PING_PONG_SHARE: u64 = 4;

/// ns per round trip of one byte through two pipes between this process and a child pinned to
/// the same CPU (two context switches each), after a warm-up of a tenth.
fn ping_pong_loop(iterations: u64) -> f64 {
    let (mut ping, mut pong) = ([0; 2], [0; 2]);
    // SAFETY: valid two-element arrays.
    if unsafe { libc::pipe(ping.as_mut_ptr()) != 0 || libc::pipe(pong.as_mut_ptr()) != 0 } {
        return f64::NAN;
    }
    // SAFETY: the child answers each byte until the pipe closes, with raw libc calls only, and
    // leaves with _exit; it inherits this process's CPU affinity (the last CPU).
    let child = unsafe { libc::fork() };
    if child == 0 {
        let mut byte = 0u8;
        // SAFETY: see above. The ends the parent uses are closed here, so that its closing
        // them ends the loop.
        unsafe {
            libc::close(ping[1]);
            libc::close(pong[0]);
            while libc::read(ping[0], (&raw mut byte).cast(), 1) == 1 {
                libc::write(pong[1], (&raw const byte).cast(), 1);
            }
            libc::_exit(0);
        }
    }
    // SAFETY: the child's ends, which this side does not use.
    unsafe {
        libc::close(ping[0]);
        libc::close(pong[1]);
    }
    let round_trip = || {
        let mut byte = 1u8;
        // SAFETY: one byte each way through our own pipes.
        unsafe {
            libc::write(ping[1], (&raw const byte).cast(), 1);
            libc::read(pong[0], (&raw mut byte).cast(), 1);
        }
    };
    for _ in 0..iterations / 10 {
        round_trip();
    }
    let start = Instant::now();
    for _ in 0..iterations {
        round_trip();
    }
    let ns = start.elapsed().as_nanos() as f64 / iterations.max(1) as f64;
    // SAFETY: closing our pipes ends the child, which is then reaped.
    unsafe {
        libc::close(ping[1]);
        libc::close(pong[0]);
        if child > 0 {
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
    }
    ns
}

/// ns per iteration of getppid(), after a warm-up of a tenth.
fn getppid_loop(iterations: u64) -> f64 {
    let run = |n: u64| {
        for _ in 0..n {
            // SAFETY: getppid cannot fail. The raw syscall, so libc cannot cache it.
            unsafe { libc::syscall(libc::SYS_getppid) };
        }
    };
    run(iterations / 10);
    let start = Instant::now();
    run(iterations);
    start.elapsed().as_nanos() as f64 / iterations as f64
}

/// ns per iteration of `dup(0 or a pipe end)` + `close`, after a warm-up of a tenth.
fn dup_close_loop(iterations: u64) -> f64 {
    let mut fds = [0; 2];
    // SAFETY: a valid two-element array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return f64::NAN;
    }
    let run = |n: u64| {
        for _ in 0..n {
            // SAFETY: dup of our own descriptor, then close of the copy.
            unsafe {
                let fd = libc::dup(fds[0]);
                libc::close(fd);
            }
        }
    };
    run(iterations / 10);
    let start = Instant::now();
    run(iterations);
    let elapsed = start.elapsed();
    // SAFETY: closing our own descriptors.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    elapsed.as_nanos() as f64 / iterations as f64
}

fn pin_to_last_cpu() {
    // SAFETY: plain libc calls on a zeroed cpu_set_t.
    unsafe {
        let cpus = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus - 1, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw const set);
    }
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// bpftrace running the one-liner against this process; killed on drop.
struct BpftraceGuard {
    child: Option<Child>,
}

impl BpftraceGuard {
    fn start(pid: u32) -> Result<Self> {
        let script = format!(
            "tracepoint:syscalls:sys_enter_close /pid == {pid}/ {{ @start[tid] = nsecs; }} \
             tracepoint:syscalls:sys_exit_close /@start[tid]/ {{ @ns = hist(nsecs - @start[tid]); delete(@start[tid]); }}"
        );
        let mut child = crate::process::die_with_parent(&mut Command::new("bpftrace"))
            .args(["-e", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting bpftrace")?;
        // bpftrace prints "Attaching N probes..." once the probes are in place.
        let stdout = child.stdout.take().context("bpftrace stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                if line.contains("Attaching") {
                    let _ = tx.send(());
                }
                line.clear();
            }
        });
        let mut guard = Self { child: Some(child) };
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            guard.stop();
            bail!("bpftrace did not attach within 30 s");
        }
        // "Attaching" is printed just before the attach calls; give them a moment to finish.
        std::thread::sleep(Duration::from_millis(300));
        Ok(guard)
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for BpftraceGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Per round, `(row - baseline) / (reference - baseline)`: the ratio pair by pair within a
/// round, so the machine's drift between rounds cancels out. Rounds where the reference added
/// nothing measurable are left out.
#[must_use]
pub fn round_ratios(row: &Measured, reference: &Measured, baseline: &Measured) -> Vec<f64> {
    baseline
        .samples
        .iter()
        .zip(&reference.samples)
        .zip(&row.samples)
        .filter(|((b, r), _)| **r > **b)
        .map(|((b, r), x)| (x - b) / (r - b))
        .collect()
}

/// "1.23" and "1.01 … 1.52": median and range of per-round ratios.
fn ratio_cells(ratios: &[f64]) -> (String, String) {
    if ratios.is_empty() {
        return ("-".to_owned(), "-".to_owned());
    }
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (
        format!("{:.2}", median(ratios)),
        format!("{lo:.2} … {hi:.2}"),
    )
}

fn min_max(samples: &[f64]) -> String {
    let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = samples.iter().copied().fold(0.0, f64::max);
    format!("{lo:.0} … {hi:.0}")
}

/// Each value halved (two context switches, or two traced calls, per round trip).
fn halves(values: &[f64]) -> Vec<f64> {
    values.iter().map(|x| x / 2.0).collect()
}

/// Per-round `(row - baseline)`.
fn round_added(row: &Measured, baseline: &Measured) -> Vec<f64> {
    row.samples
        .iter()
        .zip(&baseline.samples)
        .map(|(x, b)| x - b)
        .collect()
}

/// A per-round figure with the sign test's interval over the rounds: "+151 ns [+120, +190]
/// (96.9%, 9 rounds)"; "within noise: -12 ns [-40, +30] (…)" when the interval contains 0
/// (noise is not a negative cost); "+151 ns (4 rounds: no 95% interval)" with too few rounds.
fn ns_cell(per_round: &[f64]) -> String {
    let Some(e) = Estimate::paired(per_round, 1.0 - TARGET_LEVEL, Method::SignTest, None) else {
        return "not measurable".to_owned();
    };
    match e.interval {
        None => format!("{:+.0} ns ({} rounds: no 95% interval)", e.median, e.n),
        Some(i) => format!(
            "{}{:+.0} ns [{:+.0}, {:+.0}] ({:.1}%, {} rounds)",
            if e.contains_zero() {
                "within noise: "
            } else {
                ""
            },
            e.median,
            i.low,
            i.high,
            100.0 * i.level,
            e.n
        ),
    }
}

/// `serve --self-cost`'s figure against the loop's, both with the statistics on, per round:
/// its ns per traced call (the programs' run time per close) less the empty pair's under the
/// same statistics (the statistics' own clock reads and the empty bodies, which the empty
/// pair's loop time holds too) is the programs' work as the kernel counts it; the loop's added
/// time over the empty pair is the same work as the caller pays it. The interval of their
/// per-round difference decides only where it leaves 0 out (the kernel counts more, or less);
/// one that holds 0 shows no difference at this noise, which is not agreement.
fn self_cost_lines(empty: &Measured, profiler: &Measured) -> String {
    let per_round =
        |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(x, y)| x - y).collect() };
    let counted = per_round(&profiler.self_ns, &empty.self_ns);
    let paid = round_added(profiler, empty);
    let difference = per_round(&counted, &paid);
    let verdict = match Estimate::paired(&difference, 1.0 - TARGET_LEVEL, Method::SignTest, None) {
        Some(e) if e.interval.is_some() => {
            if e.contains_zero() {
                "undecided (no difference shown at this noise)"
            } else if e.median > 0.0 {
                "differ: the kernel counts more than the loop pays"
            } else {
                "differ: the kernel counts less than the loop pays"
            }
        }
        _ => "undecided (too few rounds for an interval)",
    };
    format!(
        "  serve --self-cost, per traced call ...... {:.0} ns (the programs' run time per close, statistics on), of which the statistics' own clock reads and empty bodies {:.0} ns (the empty pair's)\n    \
         the programs' work as the kernel counts it {}; as the loop pays it (over the empty pair, statistics on) {}\n    \
         the kernel's count against the loop's: {}: {verdict}\n",
        median(&profiler.self_ns),
        median(&empty.self_ns),
        ns_cell(&counted),
        ns_cell(&paid),
        ns_cell(&difference),
    )
}

/// A target on per-round values (ratios, or ns): "1.05 [0.98, 1.12] (96.9%, 9 rounds): met"
/// when the whole interval is at or below `limit`, "not met" when it is wholly above,
/// "undecided" when it straddles the limit or the rounds give no interval.
fn target_cell(per_round: &[f64], limit: f64, unit: &str) -> String {
    let Some(e) = Estimate::paired(per_round, 1.0 - TARGET_LEVEL, Method::SignTest, None) else {
        return "not measurable".to_owned();
    };
    let decimals = usize::from(unit.is_empty()) * 2;
    let v = |x: f64| format!("{x:.decimals$}{unit}");
    match e.interval {
        None => format!(
            "{}: undecided ({} rounds cannot give a 95% interval)",
            v(e.median),
            e.n
        ),
        Some(i) => format!(
            "{} [{}, {}] ({:.1}%, {} rounds): {}",
            v(e.median),
            v(i.low),
            v(i.high),
            100.0 * i.level,
            e.n,
            if i.high <= limit {
                "met"
            } else if i.low > limit {
                "not met"
            } else {
                "undecided (the interval straddles the target)"
            }
        ),
    }
}

/// The tables: ns per iteration (median over rounds), added ns, the ratios of added cost to the
/// minimal timer's and to the empty pair's (medians of per-round ratios, with their ranges);
/// the verdicts against the targets; the tax on untraced work; the kernel's own program times.
#[must_use]
pub fn render(results: &[Measured], args: &OverheadArgs) -> String {
    use Workload::{DupClose, Getppid};
    let find = |c: Config, w: Workload, t: Tracked| results.iter().find(|m| m.is(c, w, t));
    let tp = AttachPoint::Tracepoint;
    let raw = AttachPoint::RawTracepoint;
    let (Some(nothing), Some(empty), Some(timer)) = (
        find(Config::Nothing, DupClose, Tracked::Me),
        find(Config::Empty(tp), DupClose, Tracked::Me),
        find(Config::MinimalTimer(tp), DupClose, Tracked::Me),
    ) else {
        return "no measurements\n".to_owned();
    };
    let mut table = Table::new([
        "configuration",
        "ns/iter (median)",
        "min … max",
        "added ns",
        "× timer",
        "× timer min … max",
        "× empty",
        "× empty min … max",
    ]);
    for m in results
        .iter()
        .filter(|m| m.workload == DupClose && m.tracked == Tracked::Me)
    {
        let base = m.config == Config::Nothing;
        let dash = || ("-".to_owned(), "-".to_owned());
        let (t, t_range) = if base {
            dash()
        } else {
            ratio_cells(&round_ratios(m, timer, nothing))
        };
        let (e, e_range) = if base {
            dash()
        } else {
            ratio_cells(&round_ratios(m, empty, nothing))
        };
        table.row([
            m.config.label(),
            format!("{:.0}", m.median()),
            min_max(&m.samples),
            if base {
                "-".to_owned()
            } else {
                format!("{:.0}", m.median() - nothing.median())
            },
            t,
            t_range,
            e,
            e_range,
        ]);
    }
    let mut out = format!(
        "dup()+close() loop, {} iterations, {} rounds, close traced in this process.\n\
         × timer = (config - nothing) / (minimal timer - nothing), × empty = (config - nothing) / (empty pair - nothing), per round; raw_tp rows are on the raw sys_enter/sys_exit tracepoints\n",
        args.iterations, args.rounds
    );
    out.push_str(&table.render());

    // The targets.
    out.push_str("\nTargets (medians of per-round figures, with the sign test's interval over the rounds and the level it achieves; met or not met only when the whole interval is on one side):\n");
    if let Some(profiler) = find(Config::Profiler, DupClose, Tracked::Me) {
        out.push_str(&format!(
            "  profiler's added cost ≤ 1.15 × the minimal timer's ......... {}\n",
            target_cell(&round_ratios(profiler, timer, nothing), 1.15, "")
        ));
        if let Some(split) = find(Config::ProfilerOffCpu, DupClose, Tracked::Me) {
            let more: Vec<f64> = round_ratios(split, profiler, nothing)
                .iter()
                .map(|r| 100.0 * (r - 1.0))
                .collect();
            out.push_str(&format!(
                "  --off-cpu adds ≤ 20% to the profiler's added cost per call ... {}\n",
                target_cell(&more, 20.0, "%")
            ));
        }
        if let (Some(with), Some(without)) = (
            find(Config::ProfilerOffCpu, Workload::PingPong, Tracked::Other),
            find(Config::Profiler, Workload::PingPong, Tracked::Other),
        ) {
            // Two context switches per round trip.
            let per_switch: Vec<f64> = round_added(with, without).iter().map(|x| x / 2.0).collect();
            out.push_str(&format!(
                "  --off-cpu costs ≤ 50 ns per context switch ................. {} (pipe ping-pong on one CPU, {:.0} ns per round trip without it)\n",
                target_cell(&per_switch, 50.0, " ns"),
                without.median()
            ));
            if let Some(classic) = find(
                Config::ProfilerOffCpuClassic,
                Workload::PingPong,
                Tracked::Other,
            ) {
                out.push_str(&format!(
                    "    (the classic sched tracepoints, the fallback without BTF: {} per context switch)\n",
                    ns_cell(&halves(&round_added(classic, without)))
                ));
            }
            if let (Some(empty), Some(nothing)) = (
                find(Config::EmptySched, Workload::PingPong, Tracked::Other),
                find(Config::Nothing, Workload::PingPong, Tracked::Other),
            ) {
                let over: Vec<f64> = round_added(with, without)
                    .iter()
                    .zip(round_added(empty, nothing))
                    .map(|(ours, floor)| (ours - floor) / 2.0)
                    .collect();
                out.push_str(&format!(
                    "    of which the floor, empty programs on the same tracepoints: {}; the programs' own work over it: {}\n",
                    ns_cell(&halves(&round_added(empty, nothing))),
                    ns_cell(&over)
                ));
            }
        }
        if let Some(hash) = find(Config::ProfilerHash, DupClose, Tracked::Me) {
            out.push_str(&format!(
                "  per-thread hash maps (a large pid_max) against the arrays .. {} per traced call\n",
                ns_cell(&round_added(hash, profiler))
            ));
        }
        if let (Some(every), Some(compat)) = (
            find(Config::ProfilerCompatEvery, DupClose, Tracked::Other),
            find(Config::ProfilerCompat, DupClose, Tracked::Other),
        ) {
            out.push_str(&format!(
                "  the share left out (attach's default, in the compat pair), untraced dup+close {}\n",
                ns_cell(&round_added(every, compat))
            ));
        }
        if let (Some(every), Some(compat)) = (
            find(Config::ProfilerCompatEvery, Workload::Getppid, Tracked::Me),
            find(Config::ProfilerCompat, Workload::Getppid, Tracked::Me),
        ) {
            out.push_str(&format!(
                "  the share left out, per call of a traced process not in the table {} (getppid)\n",
                ns_cell(&round_added(every, compat))
            ));
        }
        if let (Some(every), Some(timed)) = (
            find(Config::ProfilerEvery, Workload::Getppid, Tracked::Me),
            find(Config::Profiler, Workload::Getppid, Tracked::Me),
        ) {
            out.push_str(&format!(
                "  --syscalls all per call of a traced process not in the table {} (getppid; its floor, an empty raw_tp pair, is row (b) below)\n",
                ns_cell(&round_added(every, timed))
            ));
        }
        if let (Some(every), Some(timed)) = (
            find(Config::ProfilerEvery, DupClose, Tracked::Other),
            find(Config::Profiler, DupClose, Tracked::Other),
        ) {
            out.push_str(&format!(
                "  --syscalls all (its own pair), untraced dup+close ........... {}\n",
                ns_cell(&round_added(every, timed))
            ));
        }
        if let Some(slow) = find(Config::ProfilerSlow, DupClose, Tracked::Me)
            && let Some(split) = find(Config::ProfilerOffCpu, DupClose, Tracked::Me)
        {
            out.push_str(&format!(
                "  --slow 1s per call that stays on the CPU, over --off-cpu ..... {}\n",
                ns_cell(&round_added(slow, split))
            ));
        }
        if let (Some(split), Some(slow), Some(every)) = (
            find(Config::ProfilerOffCpu, Workload::PingPong, Tracked::Me),
            find(Config::ProfilerSlow, Workload::PingPong, Tracked::Me),
            find(Config::ProfilerSlowEvery, Workload::PingPong, Tracked::Me),
        ) {
            // Two traced reads leave the CPU per round trip.
            out.push_str(&format!(
                "  --slow 1s per traced call that leaves the CPU (its kernel stack) {} (traced pipe ping-pong, {:.0} ns per round trip with --off-cpu)\n",
                ns_cell(&halves(&round_added(slow, split))),
                split.median()
            ));
            out.push_str(&format!(
                "  --slow 1ns per recorded call (ring buffer, user stack, reading) {}\n",
                ns_cell(&halves(&round_added(every, slow)))
            ));
        }
        if let (Some(empty_stats), Some(profiler_stats)) = (
            find(Config::EmptyStats, DupClose, Tracked::Me),
            find(Config::ProfilerStats, DupClose, Tracked::Me),
        ) {
            out.push_str(&self_cost_lines(empty_stats, profiler_stats));
        }
        if let Some(bpftrace) = find(Config::Bpftrace, DupClose, Tracked::Me) {
            out.push_str(&format!(
                "  profiler's added cost ≤ 0.5 × bpftrace's ................... {}\n",
                target_cell(&round_ratios(profiler, bpftrace, nothing), 0.5, "")
            ));
        }
        if let (Some(fentry), Some(fentry_timer), Some(fentry_empty)) = (
            find(
                Config::ProfilerOn(AttachPoint::Fentry),
                DupClose,
                Tracked::Me,
            ),
            find(
                Config::MinimalTimer(AttachPoint::Fentry),
                DupClose,
                Tracked::Me,
            ),
            find(Config::Empty(AttachPoint::Fentry), DupClose, Tracked::Me),
        ) {
            out.push_str(&format!(
                "  fentry: profiler's added cost ≤ 1.15 × fentry's minimal timer {}\n",
                target_cell(&round_ratios(fentry, fentry_timer, nothing), 1.15, "")
            ));
            out.push_str(&format!(
                "  per traced close, added: tracepoint {} (empty pair {}), fentry {} (empty pair {}); fentry ÷ tracepoint {:.2}\n",
                ns_cell(&round_added(profiler, nothing)),
                ns_cell(&round_added(empty, nothing)),
                ns_cell(&round_added(fentry, nothing)),
                ns_cell(&round_added(fentry_empty, nothing)),
                median(&round_ratios(fentry, profiler, nothing)),
            ));
        }
        if let (Some(raw_empty), Some(raw_timer)) = (
            find(Config::Empty(raw), DupClose, Tracked::Me),
            find(Config::MinimalTimer(raw), DupClose, Tracked::Me),
        ) {
            out.push_str(&format!(
                "  raw_tp against tracepoints, per close (per-round differences): empty pair {}, minimal timer {}\n",
                ns_cell(&round_added(raw_empty, empty)),
                ns_cell(&round_added(raw_timer, timer))
            ));
        }
    }

    // The tax on untraced work.
    let mut tax = Table::new([
        "untraced work",
        "configuration",
        "ns/iter (median)",
        "added ns [interval] (level, rounds)",
        "added min … max",
        "over the floor [interval]",
    ]);
    let getppid_nothing = find(Config::Nothing, Getppid, Tracked::Me);
    // Each row over nothing attached, and over its mechanism's floor (per-round differences).
    let mut tax_row =
        |what: &str, m: Option<&Measured>, base: Option<&Measured>, floor: Option<&Measured>| {
            if let (Some(m), Some(base)) = (m, base) {
                let added = round_added(m, base);
                let lo = added.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = added.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let over = match floor {
                    Some(f) if !std::ptr::eq(f, m) => ns_cell(&round_added(m, f)),
                    _ => "(the floor)".to_owned(),
                };
                tax.row([
                    what.to_owned(),
                    m.config.label(),
                    format!("{:.0}", m.median()),
                    ns_cell(&added),
                    format!("{lo:+.0} … {hi:+.0}"),
                    over,
                ]);
            }
        };
    let a = "(a) untraced process, close";
    tax_row(a, Some(empty), Some(nothing), Some(empty));
    tax_row(
        a,
        find(Config::Profiler, DupClose, Tracked::Other),
        Some(nothing),
        Some(empty),
    );
    let fentry_empty = find(Config::Empty(AttachPoint::Fentry), DupClose, Tracked::Me);
    tax_row(a, fentry_empty, Some(nothing), fentry_empty);
    tax_row(
        a,
        find(
            Config::ProfilerOn(AttachPoint::Fentry),
            DupClose,
            Tracked::Other,
        ),
        Some(nothing),
        fentry_empty,
    );
    let b = "(b) traced process, getppid";
    let tp_floor = find(Config::Empty(tp), Getppid, Tracked::Me);
    let raw_floor = find(Config::Empty(raw), Getppid, Tracked::Me);
    let fentry_floor = find(Config::Empty(AttachPoint::Fentry), Getppid, Tracked::Me);
    for (config, floor) in [
        (Config::Empty(tp), tp_floor),
        (Config::Profiler, tp_floor),
        (Config::Empty(raw), raw_floor),
        (Config::MinimalTimer(raw), raw_floor),
        (Config::Empty(AttachPoint::Fentry), fentry_floor),
        (Config::ProfilerOn(AttachPoint::Fentry), fentry_floor),
    ] {
        tax_row(
            b,
            find(config, Getppid, Tracked::Me),
            getppid_nothing,
            floor,
        );
    }
    let c = "(c) untraced ping-pong, per round trip";
    let pong_nothing = find(Config::Nothing, Workload::PingPong, Tracked::Other);
    let pong_floor = find(Config::EmptySched, Workload::PingPong, Tracked::Other);
    for config in [
        Config::EmptySched,
        Config::Profiler,
        Config::ProfilerOffCpu,
        Config::ProfilerOffCpuClassic,
    ] {
        tax_row(
            c,
            find(config, Workload::PingPong, Tracked::Other),
            pong_nothing,
            pong_floor,
        );
    }
    if !tax.is_empty() {
        out.push_str(
            "\nThe tax on work nobody traces, over nothing attached (target: at most 15 ns, or the mechanism's floor if higher;\n\
             for (a) the floor is the empty pair, whose programs run for every process that calls close; for (b) it is the\n\
             empty pair's cost on other syscalls, or the raw_tp empty pair's, which runs for every syscall; for (c), two\n\
             context switches and two wakeups a round trip, it is empty programs on the raw sched_switch and sched_wakeup):\n",
        );
        out.push_str(&tax.render());
    }

    let mut programs = Table::new([
        "configuration",
        "program",
        "ns per run (median)",
        "min … max",
    ]);
    for m in results {
        let mut names: Vec<&str> = m.program_ns.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let samples: Vec<f64> = m
                .program_ns
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .collect();
            let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            programs.row([
                match (m.workload, m.tracked) {
                    (Workload::PingPong, _) => format!("{} (untraced ping-pong)", m.config.label()),
                    (_, Tracked::Me) => m.config.label(),
                    (_, Tracked::Other) => format!("{} (a) untraced process", m.config.label()),
                },
                name.to_owned(),
                format!("{:.1}", median(&samples)),
                format!("{lo:.1} … {hi:.1}"),
            ]);
        }
    }
    if !programs.is_empty() {
        out.push_str("\nProgram run time as the kernel counts it, in one extra round with the kernel's statistics on (BPF_ENABLE_STATS)\n(each figure includes the statistics' own two clock reads; raw_tp programs run for every syscall, so their\nper-run figure averages over dup and close):\n");
        out.push_str(&programs.render());
    }
    if round_ratios(timer, empty, nothing).len() < timer.samples.len() {
        out.push_str(
            "warning: in some rounds the reference added no measurable cost; those rounds have no ratio\n",
        );
    }
    out
}
