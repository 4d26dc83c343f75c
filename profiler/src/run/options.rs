//! From the command line to a [`RunOptions`]: defaults, validation, the `comprehensive` preset.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context as _, Result, bail};
use clap::{Args, ValueEnum};

use super::{
    RUN_SYSCALLS, RunOptions, ScenarioSpec,
    model::{RunningServer, Subject, UserServer, Variant},
    server,
};
use crate::{
    bpf::Syscall,
    export::ExportArgs,
    loadgen::{Stop, Workload},
    parse::parse_duration,
    slow::SlowArgs,
};

/// `profiler run` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler run                                      # all four variants, serial (with baselines), then concurrency 10: pairs until decided, 2 minutes at most
    profiler run --variants lt,et --runs 8            # a fixed 8 pairs (the sign test's range: 99.2%)
    profiler run --variants lt,et --equivalence 5%    # \"same\" when the interval lies within ±5%
    profiler run --variants lt,et --concurrency 10,50,100 --requests 20000
    profiler run --workload http --duration 5s --concurrency 50
    profiler run --baseline --strace                  # the profiler's own overhead, and strace's distortion
    profiler run --idle-conns 10000 --lt-epollout --variants lt,et
    profiler run --preset comprehensive               # the reference suite in one command")]
pub struct RunArgs {
    /// Server variants, comma-separated [default: all four, or none with --server-cmd].
    #[arg(long, value_delimiter = ',', value_enum)]
    pub variants: Option<Vec<Variant>>,
    /// Your own server as NAME=CMD (repeatable): a shell command with `{port}` where the port
    /// goes, driven like the built-in variants (load, baselines, syscall timing, reports), e.g.
    /// 'nginx=nginx -c /etc/my.conf -g "daemon off;" -e stderr' with `listen {port}` in its
    /// config made by you, or 'mine=./server --port {port}'.
    #[arg(long, value_name = "NAME=CMD", value_parser = parse_server_cmd, conflicts_with = "preset")]
    pub server_cmd: Vec<UserServer>,
    /// A server already running, at HOST:PORT (with --pid): measured where it is, neither
    /// started nor stopped; the only server of the run.
    #[arg(long, value_name = "HOST:PORT", requires = "pid", conflicts_with_all = ["variants", "server_cmd", "preset", "strace", "server_cpus", "workers", "lt_epollout"])]
    pub target: Option<String>,
    /// The process of the --target server: one pid, or several (`"$(pidof nginx)"`, or
    /// comma-separated). Every process that holds its listening socket is traced (a
    /// pre-forked server's workers too), with the children they fork; a pid that holds none
    /// is refused.
    #[arg(long, requires = "target", value_parser = parse_pids)]
    pub pid: Option<PidList>,
    /// Traffic.
    #[arg(long, value_enum, default_value_t = Workload::ShortEcho)]
    pub workload: Workload,
    /// Concurrent clients; a list sweeps it (e.g. 10,50,100). Default: 1 (serial), plus one
    /// run at 10.
    #[arg(short, long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub concurrency: Vec<u64>,
    /// Requests of each measured window: of each slice of the warm servers (default: calibrated
    /// to the machine, see docs/HOW_IT_MEASURES.md), or with --runs of each whole run
    /// [default: 2000].
    #[arg(short = 'n', long, conflicts_with = "duration", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Length of each measured window instead of a request count (e.g. 100ms for slices, 5s
    /// for whole runs); requests still in flight at its end count neither way.
    #[arg(short, long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Whole runs instead of slices of warm servers: each variant's server started, traced and
    /// stopped N times, a fixed count (pairs for the comparisons) [default: the warm engine,
    /// pairs of slices added until every comparison is decided, within --max-pairs and
    /// --max-time].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000), conflicts_with_all = ["max_pairs", "max_time"])]
    pub runs: Option<u32>,
    /// Gone: pairs are pairs of slices now; kept to say so.
    #[arg(long, hide = true)]
    pub max_runs: Option<String>,
    /// Without --runs: the most pairs (blocks of slices) a scenario makes while its
    /// comparisons are undecided.
    #[arg(long, default_value_t = DEFAULT_MAX_PAIRS, value_parser = clap::value_parser!(u32).range(8..=8192))]
    pub max_pairs: u32,
    /// Without --runs: the time the slices of the whole experiment may take while comparisons
    /// are undecided (shared out among the scenarios), e.g. 2m or 90s.
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub max_time: Duration,
    /// The equivalence margin: two servers whose QPS interval lies within ±this are "the same
    /// within" it (e.g. 2% or 0.5%).
    #[arg(long, default_value_t = crate::inference::DEFAULT_MARGIN_PCT, value_parser = crate::parse::parse_percent)]
    pub equivalence: f64,
    /// Warm-up before each whole run (--runs), or each warm server's first (calibrating)
    /// warm-up: a request count (500) or a duration (1s); 0 for none. Slices warm up by
    /// themselves after each switch.
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
    /// Register the level-triggered variants' (lt, lt-pure) client sockets for EPOLLOUT too
    /// ("EPOLLOUT noise").
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
    /// Where the profiling cost goes: the kernel times every program run during the
    /// experiment (bpf(2) BPF_ENABLE_STATS: on while the profiler runs, nothing machine-wide
    /// is written), and a table per scenario gives
    /// each program's time per request; with --baseline, against the server CPU per request
    /// that profiling added.
    #[arg(long)]
    pub explain_cost: bool,
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
    /// Syscalls to time, comma-separated. `all` also counts every other syscall of the traced
    /// processes (calls, errors, time) and lists them; with the tracepoint front end the share
    /// of syscall time the table leaves out is printed anyway.
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

/// `--pid`'s pids: separated by spaces (`"$(pidof nginx)"`) or commas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PidList(pub Vec<u32>);

fn parse_pids(text: &str) -> Result<PidList, String> {
    let pids: Result<Vec<u32>, String> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(|w| {
            w.parse::<u32>().map_err(|_| {
                format!("'{w}' is not a pid: give pids as numbers, e.g. 1234 or \"$(pidof nginx)\"")
            })
        })
        .collect();
    match pids? {
        p if p.is_empty() => Err("no pid given: e.g. --pid 1234".to_owned()),
        p => Ok(PidList(p)),
    }
}

/// `--target HOST:PORT --pid PID...`: the address resolved; the processes that hold the socket
/// listening there found, each pid given checked to be one of them; named after the first
/// given.
fn running_server(target: &str, given: &[u32]) -> Result<RunningServer> {
    use std::net::ToSocketAddrs as _;
    let addr = target
        .to_socket_addrs()
        .with_context(|| format!("--target {target}: give HOST:PORT (e.g. 127.0.0.1:8080)"))?
        .next()
        .with_context(|| format!("--target {target}: the name resolves to no address"))?;
    for &pid in given {
        if pid == std::process::id() {
            bail!("--pid {pid} is the profiler itself: give the server's pid");
        }
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            bail!("--pid {pid}: no such process");
        }
    }
    let owners = crate::process::listening_socket_owners(addr);
    if owners.is_empty() {
        bail!(
            "--target {target}: no process of this network namespace listens there: start the server, or give the address it listens on"
        );
    }
    if let Some(stranger) = given.iter().find(|p| !owners.contains(p)) {
        bail!(
            "--pid {stranger} does not hold the socket listening on {addr} (the processes that do: {}): give one of them",
            owners
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let first = given[0];
    let comm = std::fs::read_to_string(format!("/proc/{first}/comm"))
        .with_context(|| format!("--pid {first}: no such process"))?;
    // The pids given first (the first names the server), then the other owners.
    let mut pids = given.to_vec();
    pids.extend(owners.into_iter().filter(|o| !given.contains(o)));
    Ok(RunningServer {
        name: format!("{}-{first}", comm.trim()),
        pids,
        addr,
    })
}

/// The CPUs process `pid` may run on.
fn process_cpus(pid: u32) -> Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid (empty) set for the kernel to fill.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid set and its size.
    if unsafe { libc::sched_getaffinity(pid as i32, std::mem::size_of_val(&set), &raw mut set) }
        != 0
    {
        bail!(
            "--pid {pid}: reading its CPUs: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(cpuset::affinity::cpus_in(&set))
}

/// `--server-cmd NAME=CMD`: a name (letters, digits, `-`, `_`, `.`) and a command with `{port}`.
fn parse_server_cmd(text: &str) -> Result<UserServer, String> {
    let Some((name, command)) = text.split_once('=') else {
        return Err(format!(
            "'{text}' has no NAME=: write it as NAME=CMD, e.g. 'mine=./server --port {{port}}'"
        ));
    };
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!(
            "'{name}' is not a server name: use letters, digits, '-', '_' or '.' before the '='"
        ));
    }
    if name.parse::<Variant>().is_ok() {
        return Err(format!(
            "'{name}' is a built-in variant's name: give your server another"
        ));
    }
    if command.trim().is_empty() {
        return Err(format!("{name}: no command after the '='"));
    }
    if !command.contains("{port}") {
        return Err(format!(
            "{name}: the command has no {{port}}: the profiler picks a free port for each run and puts it there (e.g. './server --port {{port}}')"
        ));
    }
    Ok(UserServer {
        name: name.to_owned(),
        command: command.trim().to_owned(),
    })
}

/// `profiler run --preset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// The reference experiments: serial and concurrent, strace, mp, cold and warm caches,
    /// 10000 idle connections.
    Comprehensive,
}

/// Requests per run when neither `--requests` nor `--duration` is given: short runs, many
/// pairs (the machine's drift between runs, not the requests within one, is the noise).
pub const DEFAULT_REQUESTS: u64 = 2_000;
/// Runs of a scenario that has nothing to compare (one variant, no baseline) without `--runs`.
pub const DEFAULT_RUNS: u32 = 3;
/// `--max-runs` (whole runs): the most pairs a scenario adds while undecided.
pub const DEFAULT_MAX_RUNS: u32 = 30;
/// `--max-pairs`: the most blocks of slices a scenario makes while undecided.
pub const DEFAULT_MAX_PAIRS: u32 = 4096;

/// Validates `args` and builds the options (syscall names are resolved by the caller's check of
/// tracefs first).
pub fn from_args(args: &RunArgs) -> Result<RunOptions> {
    if let Some(n) = &args.max_runs {
        bail!(
            "--max-runs {n}: without --runs, run compares slices of warm servers, not whole runs: bound their pairs with --max-pairs (default {DEFAULT_MAX_PAIRS}) or the time with --max-time, or give --runs N for N whole runs"
        );
    }
    let running = match (&args.target, &args.pid) {
        (Some(target), Some(pids)) => Some(running_server(target, &pids.0)?),
        _ => None,
    };
    let builtin = match &args.variants {
        Some(v) => v.clone(),
        None if args.server_cmd.is_empty() && running.is_none() => Variant::ALL.to_vec(),
        None => Vec::new(),
    };
    let mut variants: Vec<Subject> = Vec::new();
    for v in builtin
        .into_iter()
        .map(Subject::from)
        .chain(args.server_cmd.iter().cloned().map(Subject::Command))
        .chain(running.clone().map(Subject::Running))
    {
        if variants.iter().any(|known| known.name() == v.name()) {
            if matches!(v, Subject::Command(_)) {
                bail!(
                    "--server-cmd {}: the name is taken by another --server-cmd; give each server its own name",
                    v.name()
                );
            }
            continue;
        }
        variants.push(v);
    }
    let workload = args.workload;
    if let Some(rate) = args.rate
        && !(rate.is_finite() && rate > 0.0)
    {
        bail!("--rate {rate} is not a positive number of requests per second");
    }
    // The CPUs this process may use (taskset, cpusets), not merely how many there are.
    let allowed = crate::cpus::allowed_cpus().unwrap_or_else(|_| {
        (0..std::thread::available_parallelism().map_or(1, std::num::NonZero::get)).collect()
    });
    let mut cpu_sets = Vec::new();
    for list in &args.server_cpus {
        cpu_sets
            .push(crate::cpus::parse_allowed_cpu_list(list, &allowed).context("--server-cpus")?);
    }
    let server_cpus = match (cpu_sets.first(), allowed.first()) {
        (Some(set), _) => set.clone(),
        (None, Some(&first)) if allowed.len() >= 2 => vec![first],
        _ => Vec::new(),
    };
    let client_cpus = match (&args.client_cpus, allowed.last()) {
        (Some(list), _) => {
            crate::cpus::parse_allowed_cpu_list(list, &allowed).context("--client-cpus")?
        }
        (None, Some(&last)) if allowed.len() >= 2 => vec![last],
        _ => Vec::new(),
    };
    let warmup = parse_warmup(&args.warmup)?;
    let stop = match (args.requests, args.duration) {
        (Some(n), _) => Stop::Requests(n),
        (None, Some(d)) => Stop::Duration(d),
        (None, None) => Stop::Requests(DEFAULT_REQUESTS),
    };
    if let Some(rate) = args.rate {
        check_rate(rate, stop)?;
    }
    // The load generator's timers (tokio's) fire on a 1 ms wheel: a shorter timeout would not
    // be the timeout asked for.
    if args.timeout < std::time::Duration::from_millis(1) {
        bail!(
            "--timeout {:?} is below the 1 ms the load generator's timers can honour: give at least 1ms",
            args.timeout
        );
    }
    // --runs N: that many pairs of whole runs; else pairs until decided (of slices on the warm
    // engine, else of whole runs, at most DEFAULT_MAX_RUNS).
    let runs = args.runs.unwrap_or(DEFAULT_MAX_RUNS);
    let sequential = args.runs.is_none();
    let name = |c: u64| scenario_title(workload, stop, c);
    let mut scenarios = match args.preset {
        Some(Preset::Comprehensive) => comprehensive(),
        None if args.concurrency.is_empty() => {
            // The default experiment measures its own cost where it is largest: serially.
            let mut serial = ScenarioSpec::new(name(1), 1, stop, runs);
            serial.baseline = true;
            serial.sequential = sequential;
            let mut concurrent = ScenarioSpec::new(name(10), 10, stop, runs);
            concurrent.sequential = sequential;
            vec![serial, concurrent]
        }
        None => args
            .concurrency
            .iter()
            .map(|&c| {
                let mut s = ScenarioSpec::new(name(c), c as usize, stop, runs);
                s.sequential = sequential;
                s
            })
            .collect(),
    };
    if cpu_sets.len() > 1 {
        // A sweep over server CPU sets: every scenario once per set.
        scenarios = scenarios
            .into_iter()
            .flat_map(|s| {
                cpu_sets.iter().map(move |set| {
                    let mut s = s.clone();
                    let list: Vec<String> = set.iter().map(usize::to_string).collect();
                    s.title = format!("{} [server CPUs {}]", s.title, list.join(","));
                    s.server_cpus = Some(set.clone());
                    s
                })
            })
            .collect();
    }
    for s in &mut scenarios {
        s.baseline |= args.baseline;
        s.strace |= args.strace;
        s.drop_caches |= args.drop_caches;
        // Nothing to compare (one server, no baseline): no pairs to add until decided.
        let servers = s.variants.as_ref().map_or(variants.len(), Vec::len);
        if s.sequential && servers < 2 && !s.baseline {
            s.sequential = false;
            s.runs = DEFAULT_RUNS;
        }
    }
    if (args.drop_caches || scenarios.iter().any(|s| s.drop_caches))
        && std::fs::metadata("/proc/sys/vm/drop_caches").is_err()
    {
        bail!("--drop-caches needs /proc/sys/vm/drop_caches, which this system does not have");
    }
    let needs_servers = variants.iter().any(|v| v.builtin().is_some()) || args.preset.is_some();
    let server_bin = match &args.server_bin {
        Some(p) => p.clone(),
        None if !needs_servers => PathBuf::new(),
        None => server::default_server_binary().context(
            "the `servers` binary is not next to profiler: build it (`cargo build --release -p servers`) or pass --server-bin PATH",
        )?,
    };
    // A running server stays on the CPUs it has: the report says which.
    let server_cpus = match &running {
        Some(r) => process_cpus(r.pids[0])?,
        None => server_cpus,
    };
    let (syscalls, every) = Syscall::resolve_choice(&args.syscalls)?;
    Ok(RunOptions {
        variants,
        scenarios,
        workload,
        payload: usize::try_from(args.payload).unwrap_or(64),
        rate: args.rate,
        warmup,
        server_cpus,
        client_cpus,
        workers: args.workers.map(|w| w as usize),
        idle_conns: args.idle_conns as usize,
        lt_epollout: args.lt_epollout,
        off_cpu: !args.no_off_cpu,
        explain_cost: args.explain_cost,
        margin_pct: args.equivalence,
        max_time: args.runs.is_none().then_some(args.max_time),
        max_pairs: args.max_pairs as usize,
        slice: match (args.runs, args.requests, args.duration) {
            (None, Some(n), _) => Some(Stop::Requests(n)),
            (None, None, Some(d)) => Some(Stop::Duration(d)),
            _ => None,
        },
        slow: args.slow.slow,
        slow_top: args.slow.slow_top,
        syscalls,
        every,
        syscall_attach: None,
        server_bin,
        timeout: args.timeout,
        progress: true,
    })
}

/// An open-loop rate that cannot make the run: no request inside a `--duration`, or `-n` requests
/// that would take more than a year.
fn check_rate(rate: f64, stop: Stop) -> Result<()> {
    let interval = 1.0 / rate;
    match stop {
        Stop::Duration(d) if interval > d.as_secs_f64() => bail!(
            "--rate {rate} sends a request every {} but the run lasts {}: raise --rate or lengthen --duration",
            crate::report::units::duration_ns(interval * 1e9),
            crate::report::units::duration_ns(d.as_secs_f64() * 1e9),
        ),
        Stop::Requests(n) if n as f64 * interval > 365.0 * 86_400.0 => bail!(
            "--rate {rate} would take {} to send {n} requests: raise --rate or lower --requests",
            crate::report::units::duration_ns(n as f64 * interval * 1e9),
        ),
        _ => Ok(()),
    }
}

fn scenario_title(workload: Workload, stop: Stop, concurrency: u64) -> String {
    let amount = match stop {
        Stop::Requests(n) => format!("{n} requests"),
        Stop::Duration(d) => format!("{:.1}s", d.as_secs_f64()),
    };
    let kind = match workload {
        Workload::ShortEcho => "short-connection echo",
        Workload::KeepAliveEcho => "keep-alive echo",
        Workload::HttpKeepAlive => "HTTP keep-alive",
    };
    if concurrency == 1 {
        format!("{amount}, serial {kind}")
    } else {
        format!("{amount}, {kind} at concurrency {concurrency}")
    }
}

/// `500` (requests), `1s` (duration), or `0` (none).
fn parse_warmup(s: &str) -> Result<Option<Stop>> {
    let s = s.trim();
    if s == "0" {
        return Ok(None);
    }
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Some(Stop::Requests(n)));
    }
    parse_duration(s)
        .map(|d| Some(Stop::Duration(d)))
        .map_err(|e| {
            anyhow::anyhow!("--warmup {e}; or give a request count such as 500, or 0 for none")
        })
}

/// The reference suite (`epoll-4core-vs-20core-experiment`): short runs, long runs, a
/// concurrency sweep, strace against the kernel, the mp worker distribution, cold against warm.
#[must_use]
pub fn comprehensive() -> Vec<ScenarioSpec> {
    let all = Variant::ALL.to_vec();
    let mut short = ScenarioSpec::new(
        "Short runs: 100 serial requests ×3",
        1,
        Stop::Requests(100),
        3,
    );
    short.variants = Some(all.clone());
    let long = ScenarioSpec::new(
        "Long runs: 10000 serial requests ×3",
        1,
        Stop::Requests(10_000),
        3,
    );
    let mut sweep: Vec<ScenarioSpec> = [10usize, 50, 100]
        .into_iter()
        .map(|c| {
            let mut s = ScenarioSpec::new(
                format!("Concurrency sweep: {c} clients, 10000 requests"),
                c,
                Stop::Requests(10_000),
                1,
            );
            s.variants = Some(vec![Variant::Lt, Variant::Et, Variant::Mp]);
            s
        })
        .collect();
    let mut strace = ScenarioSpec::new(
        "strace against the kernel: 10000 serial requests",
        1,
        Stop::Requests(10_000),
        1,
    );
    strace.variants = Some(vec![Variant::Lt, Variant::Et, Variant::LtPure]);
    strace.strace = true;
    let mut mp = ScenarioSpec::new(
        "mp worker distribution: 4 workers, 10 clients",
        10,
        Stop::Requests(10_000),
        1,
    );
    mp.variants = Some(vec![Variant::Mp]);
    mp.workers = Some(4);
    let mut cold = ScenarioSpec::new(
        "Cold start: drop_caches before each run",
        1,
        Stop::Requests(1000),
        5,
    );
    cold.variants = Some(vec![Variant::Lt]);
    cold.drop_caches = true;
    let mut warm = ScenarioSpec::new(
        "Warm: the same without drop_caches",
        1,
        Stop::Requests(1000),
        4,
    );
    warm.variants = Some(vec![Variant::Lt]);
    let mut out = vec![short, long];
    out.append(&mut sweep);
    out.extend([strace, mp, cold, warm]);
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            crate::cpus::parse_allowed_cpu_list("0", &[0, 1]).unwrap(),
            vec![0]
        );
        assert_eq!(
            crate::cpus::parse_allowed_cpu_list("0-1", &[0, 1]).unwrap(),
            vec![0, 1]
        );
        assert!(
            crate::cpus::parse_allowed_cpu_list("2", &[0, 1])
                .unwrap_err()
                .to_string()
                .contains("not online")
        );
        assert!(
            crate::cpus::parse_allowed_cpu_list("a", &[0, 1])
                .unwrap_err()
                .to_string()
                .contains("not a CPU list")
        );
        assert!(crate::cpus::parse_allowed_cpu_list("1-0", &[0, 1]).is_err());
        // Under taskset -c 2-3 only those may be named.
        assert_eq!(
            crate::cpus::parse_allowed_cpu_list("3", &[2, 3]).unwrap(),
            vec![3]
        );
        assert!(
            crate::cpus::parse_allowed_cpu_list("0", &[2, 3])
                .unwrap_err()
                .to_string()
                .contains("CPUs 2,3")
        );
    }

    #[test]
    fn warmup_forms() {
        assert_eq!(parse_warmup("0").unwrap(), None);
        assert_eq!(parse_warmup("500").unwrap(), Some(Stop::Requests(500)));
        assert_eq!(
            parse_warmup("1s").unwrap(),
            Some(Stop::Duration(Duration::from_secs(1)))
        );
        assert!(parse_warmup("soon").is_err());
    }

    #[test]
    fn comprehensive_covers_the_reference_parts() {
        let s = comprehensive();
        assert!(s.iter().any(|x| x.strace));
        assert!(s.iter().any(|x| x.drop_caches));
        assert!(s.iter().any(|x| x.workers == Some(4)));
        assert_eq!(
            s.iter()
                .filter(|x| x.title.starts_with("Concurrency sweep"))
                .count(),
            3
        );
    }
}
