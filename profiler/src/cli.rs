//! The command line (clap definitions only).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::{bpf::DEFAULT_SYSCALLS, loadgen::Workload, run::RUN_SYSCALLS, run::model::Variant};

/// Per-syscall latency of network servers, measured in the kernel with eBPF.
#[derive(Debug, Parser)]
#[command(name = "profiler", version, about, long_about = None, after_help = EXAMPLES)]
pub struct Cli {
    /// Show kernel-side diagnostics (forks followed, exits) and setup details.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "\
EXAMPLES:
    profiler attach --pid 1234 --duration 10s          # time the default syscalls of pid 1234
    profiler attach --syscalls close,read -- ./server   # start ./server and trace it, like strace -c
    profiler attach --all --syscalls epoll_wait --hist # every process, with histograms
    profiler bench overhead                             # what tracing adds per syscall
    profiler serve --pid 1234                           # Prometheus /metrics on 127.0.0.1:9464";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Time the syscalls of running processes (and their children), or of a command.
    Attach(AttachArgs),
    /// Run the epoll server experiments: every variant under load, syscalls timed in the kernel.
    Run(Box<RunArgs>),
    /// Core-to-core round-trip latency of the ways two threads can talk.
    C2c(C2cArgs),
    /// Measure the profiler itself.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Keep timing processes and serve the counters as Prometheus metrics on /metrics.
    Serve(ServeArgs),
}

/// `profiler c2c` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler c2c                                  # every mechanism, two CPUs picked for you
    profiler c2c --cpus 0,1 --round-trips 100000
    profiler c2c --mechanisms pipe,eventfd,unix-socket")]
pub struct C2cArgs {
    /// The two CPUs, as A,B (A starts each round trip).
    #[arg(long, value_parser = parse_cpu_pair)]
    pub cpus: Option<(usize, usize)>,
    /// Round trips per mechanism.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub round_trips: u64,
    /// Mechanisms, comma-separated, or `all`: spin-false-sharing, spin-aligned, spsc-ring,
    /// mutex-condvar, unix-socket, pipe, eventfd, rdma.
    #[arg(long, default_value = "all")]
    pub mechanisms: String,
    /// Upper bound on each mechanism's run.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub time_limit: Duration,
    /// Don't load the kernel programs (no syscall columns; no root needed).
    #[arg(long)]
    pub no_syscalls: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Parses `A,B` into two CPU numbers.
pub fn parse_cpu_pair(s: &str) -> Result<(usize, usize), String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    match parts.as_slice() {
        [a, b] => match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) if a != b => Ok((a, b)),
            (Ok(_), Ok(_)) => Err(format!(
                "'{s}' names one CPU twice: give two different CPUs, e.g. 0,1"
            )),
            _ => Err(format!("'{s}' is not two CPU numbers: use A,B such as 0,1")),
        },
        _ => Err(format!("'{s}' is not two CPU numbers: use A,B such as 0,1")),
    }
}

/// `profiler attach` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler attach --pid 1234 --duration 10s
    profiler attach --pid 1234 --pid 1240 --interval 1s --hist
    profiler attach --syscalls accept4,close,epoll_wait,read,write -- ./server --port 8080")]
pub struct AttachArgs {
    /// A process to trace (repeatable); the children it forks are followed.
    #[arg(short, long = "pid", value_name = "PID", conflicts_with = "command")]
    pub pids: Vec<u32>,
    /// Trace every process on the machine.
    #[arg(long, conflicts_with_all = ["pids", "command"])]
    pub all: bool,
    /// Trace only the processes named: not the children they had already forked (found in
    /// /proc), nor those they fork from now on.
    #[arg(long, conflicts_with = "all")]
    pub no_children: bool,
    /// Trace the processes of this cgroup v2 and of the cgroups below it (repeatable; a
    /// per-cgroup table follows): a path relative to the cgroup2 mount (/sys/fs/cgroup, or
    /// /sys/fs/cgroup/unified on hybrid hosts), or absolute below it.
    #[arg(long = "cgroup", value_name = "PATH", conflicts_with_all = ["pids", "all", "command"])]
    pub cgroups: Vec<String>,
    /// With --all: also count every call under its cgroup, with a per-cgroup table (and a
    /// `cgroup` label on the per-cgroup series).
    #[arg(long, requires = "all", conflicts_with_all = ["pids", "cgroups", "command"])]
    pub by_cgroup: bool,
    /// Stop after this long (e.g. 10s, 500ms, 2m); default: until Ctrl-C or the traced processes exit.
    #[arg(short, long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Syscalls to time, comma-separated.
    #[arg(short, long, value_delimiter = ',', default_values = DEFAULT_SYSCALLS)]
    pub syscalls: Vec<String>,
    /// Also print a table for each interval of this length (e.g. 1s; at least 20ms, the
    /// polling period).
    #[arg(short, long, value_parser = parse_interval)]
    pub interval: Option<Duration>,
    /// Add bcc-style ASCII latency histograms.
    #[arg(long)]
    pub hist: bool,
    /// Split each call's time into on-CPU, blocked (switched out, waiting) and runnable
    /// (waiting for a CPU), from sched_switch and sched_wakeup; costs a little on every context
    /// switch of the machine.
    #[arg(long)]
    pub off_cpu: bool,
    /// The slowest calls, with their stacks.
    #[command(flatten)]
    pub slow: SlowArgs,
    /// A command to start and trace from its first syscall.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Files to write the results to.
    #[command(flatten)]
    pub exports: ExportArgs,
}

/// `--slow` and `--slow-top`, shared by `attach` and `run`.
#[derive(Clone, Debug, Default, Args)]
pub struct SlowArgs {
    /// Record every traced call at least this long (e.g. 1ms) with its kernel and user stacks,
    /// and print the slowest, grouped by stack (turns --off-cpu on).
    #[arg(long, value_name = "THRESHOLD", value_parser = parse_duration)]
    pub slow: Option<Duration>,
    /// How many stacks --slow prints, slowest call first.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10,
        requires = "slow",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub slow_top: u32,
}

/// Export flags shared by `attach` and `run`; `-` means stdout (one export at most).
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "Exports")]
pub struct ExportArgs {
    /// Everything measured, as JSON (schema: docs/EXPORT_SCHEMA.md).
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// One CSV row per (variant, run, syscall).
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// HdrHistogram percentile tables (.hgrm) and interval logs (.hlog) per (variant, syscall).
    #[arg(long, value_name = "DIR")]
    pub export_hdr: Option<PathBuf>,
    /// Prometheus text exposition format (classic histograms, counters).
    #[arg(long, value_name = "FILE")]
    pub export_prom: Option<PathBuf>,
    /// The report's tables as Markdown.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// A self-contained HTML report with SVG charts.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

/// `profiler serve` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler serve --pid 1234                       # metrics on http://127.0.0.1:9464/metrics
    profiler serve --all --listen 0.0.0.0:9464      # every process, reachable from other hosts
    profiler serve --pid 1234 --syscalls read,write,close")]
pub struct ServeArgs {
    /// A process to trace (repeatable); the children it forks are followed.
    #[arg(
        short,
        long = "pid",
        value_name = "PID",
        required_unless_present_any = ["all", "cgroups"]
    )]
    pub pids: Vec<u32>,
    /// Trace every process on the machine.
    #[arg(long, conflicts_with = "pids")]
    pub all: bool,
    /// Trace the processes of this cgroup v2 and the cgroups below it (repeatable); the series
    /// of each get a `cgroup` label.
    #[arg(long = "cgroup", value_name = "PATH", conflicts_with_all = ["pids", "all"])]
    pub cgroups: Vec<String>,
    /// With --all: also count every call under its cgroup (series with a `cgroup` label).
    #[arg(long, requires = "all", conflicts_with_all = ["pids", "cgroups"])]
    pub by_cgroup: bool,
    /// Address to serve /metrics on; loopback unless you name another.
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Syscalls to time, comma-separated.
    #[arg(short, long, value_delimiter = ',', default_values = DEFAULT_SYSCALLS)]
    pub syscalls: Vec<String>,
    /// Split each call's time into on-CPU, blocked and runnable (series with a `state` label).
    #[arg(long)]
    pub off_cpu: bool,
}

/// `profiler run` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler run                                      # all four variants: 3 × 10000 serial requests, then concurrency 10
    profiler run --variants lt,et --concurrency 10,50,100 --requests 20000
    profiler run --workload http --duration 5s --concurrency 50
    profiler run --baseline --strace                  # the profiler's own overhead, and strace's distortion
    profiler run --idle-conns 10000 --lt-epollout --variants lt,et
    profiler run --preset comprehensive               # the reference suite in one command")]
pub struct RunArgs {
    /// Server variants, comma-separated.
    #[arg(long, value_delimiter = ',', value_enum, default_values_t = Variant::ALL)]
    pub variants: Vec<Variant>,
    /// Traffic.
    #[arg(long, value_enum, default_value_t = Workload::ShortEcho)]
    pub workload: Workload,
    /// Concurrent clients; a list sweeps it (e.g. 10,50,100). Default: 1 (serial), plus one
    /// run at 10.
    #[arg(short, long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub concurrency: Vec<u64>,
    /// Requests per run [default: 10000].
    #[arg(short = 'n', long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Length of each run instead of a request count (e.g. 5s).
    #[arg(short, long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Measured runs per variant.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: Option<u32>,
    /// Warm-up before each run: a request count (500) or a duration (1s); 0 for none.
    #[arg(long, default_value = "500")]
    pub warmup: String,
    /// Echo payload in bytes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=(16 << 20)))]
    pub payload: u64,
    /// Open loop at this many requests per second (latency also corrected for coordinated omission).
    #[arg(long, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// CPUs for the server, e.g. 0 or 0-1 [default on 2+ CPUs: 0]; repeat it to sweep CPU sets
    /// (`--server-cpus 0 --server-cpus 0-1`: does the core count change the verdict?).
    #[arg(long)]
    pub server_cpus: Vec<String>,
    /// CPUs for the load generator [default on 2+ CPUs: the last one].
    #[arg(long)]
    pub client_cpus: Option<String>,
    /// Worker processes of the mp variant [default: max(2, server CPUs)].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub workers: Option<u64>,
    /// Idle connections held open during each measurement (the 10000-idle scenario).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub idle_conns: u32,
    /// Register lt's client sockets for EPOLLOUT too ("EPOLLOUT noise").
    #[arg(long)]
    pub lt_epollout: bool,
    /// Do not split each call into on-CPU, blocked and runnable time (the sched_switch and
    /// sched_wakeup programs then stay detached).
    #[arg(long, conflicts_with = "slow")]
    pub no_off_cpu: bool,
    /// The slowest calls of each variant, with their stacks.
    #[command(flatten)]
    pub slow: SlowArgs,
    /// Also run each variant without programs attached, a run after each profiled run: the
    /// profiler's overhead, with a confidence interval over the pairs. The default experiment
    /// does this for its serial scenario.
    #[arg(long)]
    pub baseline: bool,
    /// Also run each variant under `strace -f -c`, a run after each profiled run: strace's
    /// per-call time next to the kernel's, and its cost in QPS.
    #[arg(long)]
    pub strace: bool,
    /// Drop the page cache before each run (cold start).
    #[arg(long)]
    pub drop_caches: bool,
    /// A ready-made suite with its own scenarios, request counts and runs (so it takes no
    /// --concurrency, --requests, --duration or --runs).
    #[arg(long, value_enum, conflicts_with_all = ["concurrency", "requests", "duration", "runs"])]
    pub preset: Option<Preset>,
    /// Syscalls to time, comma-separated.
    #[arg(short, long, value_delimiter = ',', default_values = RUN_SYSCALLS)]
    pub syscalls: Vec<String>,
    /// The servers binary [default: `servers` next to this executable].
    #[arg(long, value_name = "PATH")]
    pub server_bin: Option<PathBuf>,
    /// Per-request timeout.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Files to write the results to.
    #[command(flatten)]
    pub exports: ExportArgs,
}

/// `profiler run --preset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// The reference experiments: serial and concurrent, strace, mp, cold and warm caches,
    /// 10000 idle connections.
    Comprehensive,
}

/// `profiler bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// ns added per traced syscall, against no programs and against empty programs (the floor).
    Overhead(OverheadArgs),
}

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

/// The longest duration any option takes (larger ones overflow deadlines).
const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// `--interval`: a duration no shorter than attach's 20 ms polling period (a shorter one was
/// silently 20 ms).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(20) {
        return Err(format!(
            "'{s}' is shorter than the 20ms the counters are polled at: give 20ms or more"
        ));
    }
    Ok(d)
}

/// Parses `10s`, `500ms`, `2m`, `1h`; a bare number means seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let parsed = if s.chars().all(|c| c.is_ascii_digit() || c == '.') && !s.is_empty() {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| Duration::try_from_secs_f64(v).unwrap_or(Duration::MAX))
    } else {
        humantime::parse_duration(s).ok()
    };
    match parsed {
        Some(d) if d > MAX_DURATION => Err(format!(
            "'{s}' is longer than a year: give a duration such as 10s, 5m or 2h"
        )),
        Some(d) if !d.is_zero() => Ok(d),
        Some(_) => Err(format!(
            "'{s}' is zero: give a positive duration such as 10s or 500ms"
        )),
        None => Err(format!(
            "'{s}' is not a duration: use a number with a unit, such as 10s, 500ms or 2m"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_bare_seconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("100000000000000000000").is_err());
        assert!(parse_duration("100000000000000000000s").is_err());
        assert!(
            parse_duration("2y")
                .unwrap_err()
                .contains("longer than a year")
        );
        assert!(
            parse_duration("fast")
                .unwrap_err()
                .contains("not a duration")
        );
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }
}
