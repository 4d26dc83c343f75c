//! From the command line to a [`RunOptions`]: defaults, validation, the `comprehensive` preset.

use anyhow::{Context as _, Result, bail};

use super::{RunOptions, ScenarioSpec, model::Variant, server};
use crate::{
    bpf::Syscall,
    cli::{Preset, RunArgs, parse_duration},
    loadgen::{Stop, Workload},
};

/// Requests per run when neither `--requests` nor `--duration` is given.
pub const DEFAULT_REQUESTS: u64 = 10_000;
/// Runs per scenario when `--runs` is not given.
pub const DEFAULT_RUNS: u32 = 3;

/// Validates `args` and builds the options (syscall names are resolved by the caller's check of
/// tracefs first).
pub fn from_args(args: &RunArgs) -> Result<RunOptions> {
    let mut variants = Vec::new();
    for &v in &args.variants {
        if !variants.contains(&v) {
            variants.push(v);
        }
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
    let runs = args.runs.unwrap_or(DEFAULT_RUNS);
    let name = |c: u64| scenario_title(workload, stop, c);
    let mut scenarios = match args.preset {
        Some(Preset::Comprehensive) => comprehensive(),
        None if args.concurrency.is_empty() => {
            // The default experiment measures its own cost where it is largest: serially.
            let mut serial = ScenarioSpec::new(name(1), 1, stop, runs);
            serial.baseline = true;
            vec![serial, ScenarioSpec::new(name(10), 10, stop, 1)]
        }
        None => args
            .concurrency
            .iter()
            .map(|&c| ScenarioSpec::new(name(c), c as usize, stop, runs))
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
    }
    if (args.drop_caches || scenarios.iter().any(|s| s.drop_caches))
        && std::fs::metadata("/proc/sys/vm/drop_caches").is_err()
    {
        bail!("--drop-caches needs /proc/sys/vm/drop_caches, which this system does not have");
    }
    let server_bin = match &args.server_bin {
        Some(p) => p.clone(),
        None => server::default_server_binary().context(
            "the `servers` binary is not next to profiler: build it (`cargo build --release -p servers`) or pass --server-bin PATH",
        )?,
    };
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
        slow: args.slow.slow,
        slow_top: args.slow.slow_top,
        syscalls: Syscall::resolve_list(&args.syscalls)?,
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
