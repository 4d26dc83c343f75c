//! `profiler run`: start each server variant, drive it with the load generator, time its
//! syscalls in the kernel, and join both in one report (the reference experiments, without
//! strace's distortion).

pub mod model;
pub mod options;
pub mod report;
pub mod server;
pub mod slices;
pub mod strace;

use std::{
    cell::RefCell,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use self::{
    model::{RunKind, RunResult, ScenarioResult, Subject, Variant, VariantResult},
    server::{Server, ServerSpec},
};
use crate::{
    bpf::{Session, SessionConfig, Syscall, SyscallAttach, Target},
    export::{self, Comparison, ExportData, LoadSummary, Measurement, Metadata, StraceComparison},
    loadgen::{self, LoadSpec, Stop, Workload},
    stats::Snapshot,
};

/// `profiler run`: measure, print the report, write the exports. Returns the exit code: 0, 1 when
/// a variant failed, 130 when interrupted.
pub fn main(args: &options::RunArgs, syscall_attach: Option<SyscallAttach>) -> Result<i32> {
    export::check_export_args(&args.exports)?;
    // The servers are traced by pid, which the kernel gives in the host's numbering.
    if crate::process::in_child_pid_namespace() {
        return Err(crate::error::SetupError::ChildPidNamespace.into());
    }
    let mut options = options::from_args(args)?;
    options.syscall_attach = syscall_attach;
    options.progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut metadata = Metadata::collect("run");
    let experiment = run(&options)?;
    metadata.duration_s = experiment.elapsed.as_secs_f64();
    settings(&mut metadata, &options);
    // Which front end timed the syscalls (the first profiled run's; every run loads the same).
    if let Some(front) = experiment
        .scenarios
        .iter()
        .flat_map(|s| &s.variants)
        .flat_map(|v| &v.runs)
        .find_map(|r| r.front.clone())
    {
        metadata.settings.insert("attach".into(), front);
    }
    // An export sent to stdout keeps stdout to itself; the report goes to stderr then.
    let report = report::render(&experiment, &options, &metadata);
    if args
        .exports
        .files()
        .iter()
        .any(|(_, p)| p.as_os_str() == "-")
    {
        crate::output::stderr(&report);
    } else {
        crate::output::stdout(&report);
    }
    let data = to_export(&experiment, metadata);
    export::write_exports(&args.exports, &data)?;
    let failed = experiment
        .scenarios
        .iter()
        .flat_map(|s| &s.variants)
        .any(|v| v.failure.is_some());
    Ok(if experiment.stopped_early.is_some() {
        130
    } else {
        i32::from(failed)
    })
}

fn settings(metadata: &mut Metadata, options: &RunOptions) {
    let list = |c: &[usize]| c.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let s = &mut metadata.settings;
    s.insert(
        "variants".into(),
        options
            .variants
            .iter()
            .map(Subject::name)
            .collect::<Vec<_>>()
            .join(","),
    );
    for v in &options.variants {
        if let Subject::Command(c) = v {
            s.insert(format!("server_cmd.{}", c.name), c.command.clone());
        }
    }
    s.insert("workload".into(), options.workload.to_string());
    s.insert("payload_bytes".into(), options.payload.to_string());
    s.insert("server_cpus".into(), list(&options.server_cpus));
    s.insert("client_cpus".into(), list(&options.client_cpus));
    s.insert(
        "concurrency".into(),
        options
            .scenarios
            .iter()
            .map(|x| x.concurrency.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    s.insert(
        "runs".into(),
        options
            .scenarios
            .iter()
            .map(|x| x.runs.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    s.insert(
        "syscalls".into(),
        options
            .syscalls
            .iter()
            .map(|x| x.name.clone())
            .collect::<Vec<_>>()
            .join(","),
    );
    if let Some(rate) = options.rate {
        s.insert("rate".into(), format!("{rate}"));
    }
    if options.idle_conns > 0 {
        s.insert("idle_conns".into(), options.idle_conns.to_string());
    }
}

/// A CPU set as the kernel writes it ("0-1,4"), or "any" for an unpinned side.
#[must_use]
pub fn cpu_list(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        "any".to_owned()
    } else {
        crate::cpus::format_cpu_list(cpus)
    }
}

/// Every profiled run as a measurement, plus one aggregate per (scenario, variant).
#[must_use]
pub fn to_export(experiment: &Experiment, metadata: Metadata) -> ExportData {
    let mut measurements = Vec::new();
    let mut failures = Vec::new();
    for scenario in &experiment.scenarios {
        for v in &scenario.variants {
            if let Some(failure) = &v.failure {
                failures.push(format!(
                    "{}, concurrency {}: {failure}",
                    v.variant, scenario.concurrency
                ));
            }
            let runs: Vec<&RunResult> = v.of_kind(RunKind::Profiled).collect();
            // The warm engine's one run per kind is the sum of its slices, not a run.
            let sliced = !v.slices.is_empty();
            for r in &runs {
                measurements.push(Measurement {
                    variant: Some(v.variant.to_string()),
                    concurrency: Some(scenario.concurrency),
                    run: (!sliced).then_some(r.run),
                    server_cpus: Some(cpu_list(&scenario.server_cpus)),
                    syscalls: r.syscalls.clone(),
                    load: Some(load_summary(&[*r])),
                    failure: r
                        .server_died
                        .as_ref()
                        .map(|how| format!("the server {how}")),
                    slow: r.slow.clone(),
                    slices: v
                        .slices
                        .iter()
                        .map(model::SliceFigures::to_export)
                        .collect(),
                });
            }
            if runs.len() > 1 {
                measurements.push(Measurement {
                    variant: Some(v.variant.to_string()),
                    concurrency: Some(scenario.concurrency),
                    run: None,
                    server_cpus: Some(cpu_list(&scenario.server_cpus)),
                    syscalls: v.merged_syscalls(),
                    load: Some(load_summary(&runs)),
                    failure: v.failure.clone(),
                    slow: v.merged_slow(),
                    slices: Vec::new(),
                });
            }
        }
    }
    let mut comparisons = Vec::new();
    let mut strace = Vec::new();
    for scenario in &experiment.scenarios {
        for (of, relative_to) in [
            (RunKind::Profiled, RunKind::Baseline),
            (RunKind::Strace, RunKind::Profiled),
        ] {
            for (v, change) in scenario.kind_changes(of, relative_to) {
                comparisons.push(Comparison {
                    variant: v.variant.to_string(),
                    concurrency: scenario.concurrency,
                    reference: None,
                    change,
                });
            }
        }
        for v in scenario.variants.iter().filter(|v| v.failure.is_none()) {
            let kernel = v.merged_syscalls();
            for row in report::strace_rows(v).unwrap_or_default() {
                strace.push(StraceComparison {
                    variant: v.variant.to_string(),
                    concurrency: scenario.concurrency,
                    kernel_mean_ns: kernel
                        .syscall(&row.syscall)
                        .filter(|x| x.calls > 0)
                        .map(super::stats::SyscallSummary::mean_ns),
                    strace_ns_per_call: row.ns_per_call(),
                    strace_calls: row.calls,
                    syscall: row.syscall,
                });
            }
        }
    }
    for scenario in &experiment.scenarios {
        for (v, reference, change) in scenario.variant_changes() {
            comparisons.push(Comparison {
                variant: v.variant.to_string(),
                concurrency: scenario.concurrency,
                reference: Some(reference.variant.to_string()),
                change,
            });
        }
    }
    let partial = experiment.stopped_early.is_some() || !failures.is_empty();
    let mut data = ExportData::new(metadata, measurements).partial(partial);
    data.failures = failures;
    data.report = Some(report::document(experiment));
    data.comparisons = comparisons;
    data.strace = strace;
    data
}

fn load_summary(runs: &[&RunResult]) -> LoadSummary {
    let latency = model::merge_histograms(runs.iter().map(|r| Some(&r.load.latency)))
        .expect("a summary is made of at least one run");
    let mut errors = std::collections::BTreeMap::new();
    for r in runs {
        for (kind, n) in r.load.errors.by_kind() {
            if n > 0 {
                *errors.entry(kind.to_string()).or_insert(0) += n;
            }
        }
    }
    let cpu = runs.iter().try_fold((0, 0), |(u, s), r| {
        r.server_cpu.map(|c| (u + c.user_ns, s + c.system_ns))
    });
    let on_cpu = runs
        .iter()
        .try_fold(0, |t, r| r.server_cpu.map(|c| t + c.on_cpu_ns));
    let requests: u64 = runs.iter().map(|r| r.load.requests).sum();
    let elapsed_s: f64 = runs.iter().map(|r| r.load.elapsed.as_secs_f64()).sum();
    LoadSummary {
        requests,
        elapsed_s,
        qps: runs.iter().map(|r| r.load.qps()).sum::<f64>() / runs.len() as f64,
        latency,
        errors,
        server_cpu_ns: cpu,
        server_on_cpu_ns: on_cpu,
        // One run's own; several runs together have none.
        noise: match runs {
            [one] => one.noise.clone(),
            _ => None,
        },
    }
}

/// Syscalls `profiler run` times by default: the default set (writes included) plus what the
/// reference's full strace table shows besides (epoll_ctl, fcntl).
pub const RUN_SYSCALLS: &[&str] =
    &crate::bpf::syscall_names::concat::<12>(crate::bpf::DEFAULT_SYSCALLS, &["epoll_ctl", "fcntl"]);

/// One part of an experiment: the same load against every variant, `runs` times.
#[derive(Clone, Debug)]
pub struct ScenarioSpec {
    /// Heading in the report.
    pub title: String,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Requests or duration per run.
    pub stop: Stop,
    /// Profiled runs per variant.
    pub runs: u32,
    /// Variants, when not the experiment's.
    pub variants: Option<Vec<Variant>>,
    /// As many runs again without programs attached, each after its profiled run.
    pub baseline: bool,
    /// As many runs again under `strace -f -c`, each after its profiled (and baseline) run.
    pub strace: bool,
    /// Drop the page cache before each run.
    pub drop_caches: bool,
    /// Pairs are added until the comparisons are decided, `runs` at most (else `runs` exactly).
    pub sequential: bool,
    /// Workers for mp, when not the experiment's.
    pub workers: Option<usize>,
    /// Server CPUs, when not the experiment's (a CPU-set sweep).
    pub server_cpus: Option<Vec<usize>>,
}

impl ScenarioSpec {
    /// A plain scenario: profiled runs only.
    #[must_use]
    pub fn new(title: impl Into<String>, concurrency: usize, stop: Stop, runs: u32) -> Self {
        Self {
            title: title.into(),
            concurrency,
            stop,
            runs,
            variants: None,
            baseline: false,
            strace: false,
            drop_caches: false,
            sequential: false,
            workers: None,
            server_cpus: None,
        }
    }
}

/// Everything `profiler run` was asked to do.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Servers under test, in order: built-in variants and `--server-cmd` commands.
    pub variants: Vec<Subject>,
    /// The parts of the experiment, in order.
    pub scenarios: Vec<ScenarioSpec>,
    /// Traffic.
    pub workload: Workload,
    /// Echo payload, bytes.
    pub payload: usize,
    /// Open-loop rate, requests per second.
    pub rate: Option<f64>,
    /// Warm-up before each measured run.
    pub warmup: Option<Stop>,
    /// Server CPUs.
    pub server_cpus: Vec<usize>,
    /// Load generator CPUs.
    pub client_cpus: Vec<usize>,
    /// mp workers (`--workers`); None: [`RunOptions::mp_workers`] decides.
    pub workers: Option<usize>,
    /// Idle connections held open during each measurement.
    pub idle_conns: usize,
    /// Register lt's client sockets for EPOLLOUT too.
    pub lt_epollout: bool,
    /// Split each call into on-CPU, blocked and runnable time (on unless `--no-off-cpu`).
    pub off_cpu: bool,
    /// `--explain-cost`: the kernel times every program run; each profiled run keeps them.
    pub explain_cost: bool,
    /// `--equivalence`: the margin inside which two servers are "the same", %.
    pub margin_pct: f64,
    /// `--max-time` for sequential scenarios: the time their runs may take together.
    pub max_time: Option<Duration>,
    /// `--max-pairs`: the most blocks of slices a scenario of the warm engine makes.
    pub max_pairs: usize,
    /// `--requests`/`--duration` on the warm engine: each slice's window (else calibrated).
    pub slice: Option<Stop>,
    /// `--slow`: record the calls at least this long with their stacks.
    pub slow: Option<Duration>,
    /// `--slow-top`: how many stacks the report shows per variant.
    pub slow_top: u32,
    /// Syscalls to time.
    pub syscalls: Vec<Syscall>,
    /// Whether every call of the servers is counted too (`--syscalls all`).
    pub every: crate::bpf::CountEvery,
    /// `--attach`: how the servers' syscalls are timed (`None`: the default, auto).
    pub syscall_attach: Option<SyscallAttach>,
    /// The `servers` binary.
    pub server_bin: PathBuf,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Show a progress bar (when stderr is a terminal).
    pub progress: bool,
}

impl RunOptions {
    /// Runs one round of `spec` makes: each variant once, and its baseline and strace runs.
    #[must_use]
    pub fn runs_per_round(&self, spec: &ScenarioSpec) -> u32 {
        let variants = spec.variants.as_ref().map_or(self.variants.len(), Vec::len);
        variants as u32 * (1 + u32::from(spec.baseline) + u32::from(spec.strace))
    }

    /// The server CPUs of `spec`: its own (a CPU-set sweep) or the experiment's.
    #[must_use]
    pub fn server_cpus_of(&self, spec: &ScenarioSpec) -> Vec<usize> {
        spec.server_cpus
            .clone()
            .unwrap_or_else(|| self.server_cpus.clone())
    }

    /// How many workers mp runs in `spec`, and why: the scenario's or `--workers`, else
    /// max(2, server CPUs), since one worker has no distribution to show (the servers' own
    /// default is one per CPU, and the server has one CPU on a 2-CPU machine).
    #[must_use]
    pub fn mp_workers(&self, spec: &ScenarioSpec) -> (usize, String) {
        if let Some(w) = spec.workers {
            return (w, "set by the scenario".to_owned());
        }
        if let Some(w) = self.workers {
            return (w, "--workers".to_owned());
        }
        let cpus = match self.server_cpus_of(spec).len() {
            0 => crate::cpus::allowed_cpus().map_or(1, |c| c.len()),
            n => n,
        };
        (
            cpus.max(2),
            format!(
                "max(2, {cpus} server CPU{}), as one worker would show no distribution",
                if cpus == 1 { "" } else { "s" }
            ),
        )
    }
}

/// Everything measured, possibly cut short.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// The scenarios, in order.
    pub scenarios: Vec<ScenarioResult>,
    /// Set when it stopped early (Ctrl-C or a fault): why.
    pub stopped_early: Option<String>,
    /// Wall time.
    pub elapsed: Duration,
}

/// Runs the experiment. Faults in one variant are recorded and the rest goes on; Ctrl-C stops
/// after the current run, and what was measured is returned either way.
pub fn run(options: &RunOptions) -> Result<Experiment> {
    crate::bpf::environment::prepare()?;
    let builtin = options.scenarios.iter().any(|s| s.variants.is_some())
        || options.variants.iter().any(|v| v.builtin().is_some());
    if builtin && !options.server_bin.is_file() {
        bail!(
            "server binary {} not found: build it with `cargo build --release -p servers` or pass --server-bin PATH",
            options.server_bin.display()
        );
    }
    if options.scenarios.iter().any(|s| s.strace)
        && crate::process::resolve_program("strace").is_err()
    {
        bail!("--strace needs strace: apt-get install strace");
    }
    // Ctrl-C ends the run in progress within a load check (50 ms) and the teardown; the
    // completed runs are still written.
    let interrupted = crate::trace::stop_on_signals()?;
    server::raise_nofile_limit(options.idle_conns as u64 + 4096);
    // --explain-cost: the kernel times program runs while the experiment lasts.
    let _stats = if options.explain_cost {
        let stats = crate::bpf::BpfStats::enable()
            .context("--explain-cost (leave it out to run without the statistics)")?;
        crate::errln!(
            "--explain-cost: the kernel times every program run while the experiment runs (each run then costs two more clock reads); the statistics end with this process"
        );
        Some(stats)
    } else {
        None
    };

    let started = Instant::now();
    let progress = Progress::new(options);
    let mut scenarios = Vec::new();
    let mut stopped_early = None;
    // Servers whose every request failed in a run: they are not run again in later scenarios.
    let mut hopeless: Vec<(Subject, String)> = Vec::new();
    // The warm engine's sessions detaching in the background (joined before returning).
    let mut detaching = Vec::new();
    'scenarios: for spec in &options.scenarios {
        let variants: Vec<Subject> = spec.variants.as_ref().map_or_else(
            || options.variants.clone(),
            |v| v.iter().copied().map(Subject::from).collect(),
        );
        let server_cpus = options.server_cpus_of(spec);
        let shared_cpus: Vec<usize> = if server_cpus.is_empty() || options.client_cpus.is_empty() {
            // Unpinned on either side: they can share any CPU.
            Vec::new()
        } else {
            options
                .client_cpus
                .iter()
                .copied()
                .filter(|c| server_cpus.contains(c))
                .collect()
        };
        let warm = slices::applies(options, spec, variants.len());
        let judge = model::Judge {
            design: if warm {
                crate::inference::Design::sequential_doubling(options.max_pairs)
            } else if spec.sequential {
                crate::inference::Design::sequential(spec.runs as usize)
            } else {
                crate::inference::Design::fixed(spec.runs as usize)
            },
            margin_pct: options.margin_pct,
        };
        let mut result = ScenarioResult {
            title: spec.title.clone(),
            concurrency: spec.concurrency,
            variants: variants
                .iter()
                .map(|variant| VariantResult {
                    variant: variant.clone(),
                    runs: Vec::new(),
                    slices: Vec::new(),
                    failure: None,
                })
                .collect(),
            mp_workers: variants
                .contains(&Subject::Builtin(Variant::Mp))
                .then(|| options.mp_workers(spec)),
            server_cpus,
            shared_cpus,
            judge,
            stopped: if spec.sequential {
                format!("{} pairs, the most --max-runs allows", spec.runs)
            } else {
                format!("--runs {}", spec.runs)
            },
            slices: None,
        };
        // This scenario's share of the time budget: what is left, shared out among the
        // scenarios left in proportion of the runs a round of each makes.
        let deadline = options.max_time.map(|budget| {
            let left = budget.saturating_sub(started.elapsed());
            let weight = |s: &ScenarioSpec| f64::from(options.runs_per_round(s));
            let rest: f64 = options.scenarios[scenarios.len()..]
                .iter()
                .map(weight)
                .sum();
            Instant::now() + left.mul_f64(weight(spec) / rest.max(1.0))
        });
        // Variants take turns run by run (lt 1, et 1, lt 2, et 2, ...), the first of each
        // round rotating, so that a disturbance of the machine hits every variant alike and
        // run i of two variants were made next to each other (they are compared in pairs).
        let mut finished = vec![false; variants.len()];
        for (i, v) in variants.iter().enumerate() {
            if let Some((_, why)) = hopeless.iter().find(|(h, _)| h == v) {
                finished[i] = true;
                result.variants[i].failure =
                    Some(format!("not run: in an earlier scenario, {why}"));
            }
        }
        if warm {
            progress.println(&format!(
                "{}: warm servers, slices in blocks of a random order",
                spec.title
            ));
            let why = slices::run_scenario(
                options,
                spec,
                &variants,
                &mut result,
                deadline,
                &interrupted,
                &|line| progress.println(line),
                &mut detaching,
            )?;
            for (v, failure) in result
                .variants
                .iter()
                .filter_map(|v| Some((v, v.failure.as_ref()?)))
            {
                progress.println(&format!("warning: {}: {failure}", v.variant));
            }
            progress.println(&format!("{}: {}", spec.title, result.stopped));
            if let Some(why) = why {
                stopped_early = Some("interrupted".to_owned());
                why.clone_into(&mut result.stopped);
                scenarios.push(result);
                break 'scenarios;
            }
            scenarios.push(result);
            continue;
        }
        let plan = run_plan(spec.runs, spec.baseline, spec.strace);
        let mut stopped = false;
        'rounds: for round in 1..=spec.runs {
            let round_started = Instant::now();
            for turn in 0..variants.len() {
                let i = (turn + round as usize - 1) % variants.len();
                if finished[i] {
                    continue;
                }
                let variant = &variants[i];
                let vr = &mut result.variants[i];
                for &(kind, number) in plan.iter().filter(|(_, n)| *n == round) {
                    if interrupted.load(Ordering::Relaxed) {
                        stopped = true;
                        break 'rounds;
                    }
                    progress.start_run(&spec.title, variant, kind, number, spec.stop);
                    match measure_run(
                        options,
                        spec,
                        variant,
                        kind,
                        number,
                        &progress,
                        &interrupted,
                    ) {
                        Ok(None) => {
                            // Interrupted: the run in progress is not a run that was asked for.
                            stopped = true;
                            break 'rounds;
                        }
                        Ok(Some(run)) => {
                            progress.finished_run(&run);
                            if vr.failure.is_none()
                                && let Some(why) = too_many_failures(&run)
                            {
                                progress.println(&format!("warning: {variant}: {why}"));
                                vr.failure = Some(why);
                            }
                            if let Some(how) = &run.server_died {
                                vr.failure = Some(format!(
                                    "the server {how} during {} run {number}",
                                    kind.name()
                                ));
                            }
                            // Every request failed: more runs would measure the same
                            // failures; what the failures were is in the message.
                            let all_failed = run.load.requests == 0 && run.load.errors.total() > 0;
                            if all_failed && run.server_died.is_none() {
                                let why = too_many_failures(&run).unwrap_or_default();
                                vr.failure = Some(format!(
                                    "every request failed, so no more runs of it were made: {why}"
                                ));
                                hopeless.push((
                                    variant.clone(),
                                    format!("every request failed: {why}"),
                                ));
                            }
                            let died = run.server_died.is_some();
                            vr.runs.push(run);
                            if died || all_failed {
                                finished[i] = true;
                                break;
                            }
                        }
                        Err(e) => {
                            let message = format!("{} run {number}: {e:#}", kind.name());
                            progress.println(&format!("warning: {variant}: {message}"));
                            vr.failure = Some(message);
                            finished[i] = true;
                            break;
                        }
                    }
                }
            }
            if !result.judge.design.sequential {
                continue;
            }
            let pairs = round as usize;
            if result.judge.design.is_look(pairs) && result.decided() {
                result.stopped = format!("every comparison decided at {pairs} pairs");
                progress.println(&format!("{}: {}", spec.title, result.stopped));
                break;
            }
            // Reaching spec.runs ends the loop with the stop text set at the start.
            if round < spec.runs
                && let Some(deadline) = deadline
                && Instant::now() + round_started.elapsed() > deadline
            {
                // Another round would end past this scenario's share of --max-time.
                result.stopped = format!(
                    "the time budget (--max-time {}) was spent after {pairs} pairs",
                    humantime::format_duration(options.max_time.unwrap_or_default())
                );
                progress.println(&format!("{}: {}", spec.title, result.stopped));
                break;
            }
        }
        let results = std::mem::take(&mut result.variants);
        // Interrupted: the variants that had begun (a variant not yet run is not a result).
        result.variants = results
            .into_iter()
            .filter(|v| !stopped || !v.runs.is_empty() || v.failure.is_some())
            .collect();
        if stopped {
            stopped_early = Some("interrupted".to_owned());
            "interrupted (Ctrl-C)".clone_into(&mut result.stopped);
            scenarios.push(result);
            break 'scenarios;
        }
        scenarios.push(result);
    }
    if stopped_early.is_none() && interrupted.load(Ordering::Relaxed) {
        // Ctrl-C during the last run: that run finished, but the user asked to stop.
        stopped_early = Some("interrupted".to_owned());
    }
    for d in detaching {
        let _ = d.join();
    }
    progress.finish();
    Ok(Experiment {
        scenarios,
        stopped_early,
        elapsed: started.elapsed(),
    })
}

/// More than 1% of a run's requests failed: its figures describe the failures more than the
/// server. Says how many, of which kinds, and what to do.
fn too_many_failures(run: &RunResult) -> Option<String> {
    let failed = run.load.errors.total();
    let all = failed + run.load.requests;
    if all == 0 || failed * 100 <= all {
        return None;
    }
    let mut kinds: Vec<_> = run
        .load
        .errors
        .by_kind()
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    kinds.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let causes: Vec<String> = kinds
        .iter()
        .map(|(kind, n)| format!("{kind} {n}: {}", kind.hint()))
        .collect();
    Some(format!(
        "{failed} of {all} requests failed ({:.1}%) in {} run {}: {}",
        100.0 * failed as f64 / all as f64,
        run.kind.name(),
        run.run,
        causes.join("; ")
    ))
}

/// One run: start the server (tracked from its first syscall when profiled), warm up, zero the
/// kernel counters, measure, read, stop. `None` when `cancel` cut it short.
fn measure_run(
    options: &RunOptions,
    spec: &ScenarioSpec,
    variant: &Subject,
    kind: RunKind,
    number: u32,
    progress: &Progress,
    cancel: &Arc<AtomicBool>,
) -> Result<Option<RunResult>> {
    if spec.drop_caches {
        server::drop_caches()?;
    }
    let strace_out = tempfile::NamedTempFile::new().context("creating strace's output file")?;
    let server_spec = server_spec(
        options,
        spec,
        variant,
        (kind == RunKind::Strace).then(|| strace_out.path().to_path_buf()),
    );
    let session: RefCell<Option<Session>> = RefCell::new(None);
    let mut server = Server::start(&server_spec, |pid| {
        if kind == RunKind::Profiled {
            let request = trace_request(options);
            let s = Session::start(&SessionConfig {
                // The compat programs run for every syscall of the machine (~150 ns a call on
                // this VM, docs/BENCHMARKS.md): only for a server that is not a 64-bit ELF
                // program (a 32-bit one, or a script).
                compat: !crate::process::is_elf64(&server_spec.program()),
                ..request.session_config(Target::Processes(traced(variant, pid)))
            })?;
            *session.borrow_mut() = Some(s);
        }
        Ok(())
    })?;
    let idle = idle_connections(options, server.addr)?;

    let mut load_spec = LoadSpec::new(server.addr, options.workload);
    load_spec.concurrency = spec.concurrency;
    load_spec.payload = options.payload;
    load_spec.rate = options.rate;
    load_spec.client_cpus.clone_from(&options.client_cpus);
    load_spec.timeout = options.timeout;
    load_spec.cancel = Some(Arc::clone(cancel));
    let mut warmup_requests = 0;
    if let Some(warmup) = options.warmup {
        let mut warm = load_spec.clone();
        warm.stop = warmup;
        warm.rate = None;
        let report = loadgen::run(&warm).context("warm-up")?;
        warmup_requests = report.requests + report.errors.total();
    }
    if cancel.load(Ordering::Relaxed) {
        drop(idle);
        drop(session);
        server.stop(false)?;
        return Ok(None);
    }
    load_spec.stop = spec.stop;
    let counter = Arc::new(AtomicU64::new(0));
    load_spec.progress = Some(Arc::clone(&counter));

    let mut session = session.into_inner();
    if let Some(s) = &mut session {
        s.reset()?;
    }
    // --slow: from the reset on, like the counters (what the warm-up left is skipped). The
    // collector's threads (reading, unwinding, symbolizing) run on the client CPUs, as the load
    // generator does: on a server CPU they would be what delays the server (the CPU holders of
    // its slow calls showed them there).
    let slow = match &mut session {
        Some(s) => {
            let _restore = collector_cpus(&options.client_cpus);
            s.start_slow_collector(options.slow_top, crate::slow::monotonic_ns())?
        }
        None => None,
    };
    let pids = match &session {
        Some(s) => s.tracked_pids()?,
        // Unprofiled: the server and every process under it (mp's workers, a user server's).
        None => traced(variant, server.pid()),
    };
    let cpu_before = server::cpu_time(&pids);
    let noise = crate::noise::Probe::start(&options.server_cpus_of(spec));
    let programs_before = match &session {
        Some(s) if options.explain_cost => s.program_run_stats(),
        _ => Vec::new(),
    };
    let ticker = progress.follow(Arc::clone(&counter), spec.stop);
    let load = loadgen::run(&load_spec);
    drop(ticker);
    let syscalls = match &session {
        Some(s) => settled_snapshot(s)?,
        None => Snapshot::default(),
    };
    let pids_after = match &session {
        Some(s) => s.tracked_pids()?,
        None => traced(variant, server.pid()),
    };
    let cpu_after = server::cpu_time(&pids_after);
    let noise = noise.finish(&pids_after);
    let programs = match &session {
        Some(s) if options.explain_cost => program_costs(&programs_before, &s.program_run_stats()),
        _ => Vec::new(),
    };
    let front = session.as_ref().map(|s| s.syscall_front().describe());
    let server_died = server
        .exit_status()?
        .map(|how| format!("{how}{}", server.stderr_tail()));
    drop(idle);
    drop(session);
    let slow = slow.map(crate::slow::Collector::finish);
    server.stop(kind == RunKind::Strace && !cancel.load(Ordering::Relaxed))?;
    let load = load?;
    if load.interrupted {
        return Ok(None);
    }

    let strace = if kind == RunKind::Strace {
        strace::parse_summary(&std::fs::read_to_string(strace_out.path()).unwrap_or_default())
    } else {
        Vec::new()
    };
    let server_cpu =
        (kind != RunKind::Strace && server_died.is_none()).then(|| cpu_after.since(&cpu_before));
    Ok(Some(RunResult {
        run: number,
        kind,
        load,
        syscalls,
        strace,
        server_cpu,
        server_died,
        warmup_requests,
        slow,
        programs,
        front,
        noise: Some(noise),
    }))
}

/// How `variant`'s server is started in `spec` (under strace, writing its summary to the path
/// given).
fn server_spec(
    options: &RunOptions,
    spec: &ScenarioSpec,
    variant: &Subject,
    strace: Option<PathBuf>,
) -> ServerSpec {
    ServerSpec {
        binary: options.server_bin.clone(),
        variant: variant.clone(),
        protocol: if options.workload == Workload::HttpKeepAlive {
            "http"
        } else {
            "echo"
        },
        cpus: options.server_cpus_of(spec),
        workers: Some(options.mp_workers(spec).0),
        lt_epollout: options.lt_epollout,
        nofile: (options.idle_conns > 0).then_some(options.idle_conns as u64 + 1024),
        strace: strace.map(|path| {
            (
                path,
                options.syscalls.iter().map(|s| s.name.clone()).collect(),
            )
        }),
    }
}

/// The idle connections `--idle-conns` holds open to the server at `addr` (none without it).
fn idle_connections(
    options: &RunOptions,
    addr: std::net::SocketAddr,
) -> Result<Option<Vec<std::net::TcpStream>>> {
    (options.idle_conns > 0)
        .then(|| server::open_idle_connections(addr, options.idle_conns))
        .transpose()
}

/// What a profiled run traces: the run's syscalls and options, on the processes given later.
fn trace_request(options: &RunOptions) -> crate::trace::TraceRequest {
    crate::trace::TraceRequest {
        syscalls: options.syscalls.clone(),
        every: options.every,
        syscall_attach: options.syscall_attach,
        pids: Vec::new(),
        all: false,
        children: true,
        command: Vec::new(),
        off_cpu: options.off_cpu,
        cgroups: Vec::new(),
        by_cgroup: false,
        cgroup_top: None,
        slow: options.slow,
        slow_top: options.slow_top,
    }
}

/// The processes a profiled run traces from the start: the one started, or every process of
/// a running server that holds its listening socket, with the children they had forked
/// already (the kernel programs follow the ones forked later).
fn traced(variant: &Subject, pid: u32) -> Vec<u32> {
    let roots = match variant {
        Subject::Running(r) => r.pids.clone(),
        _ => vec![pid],
    };
    let mut all: Vec<u32> = Vec::new();
    for root in roots {
        for p in server::with_descendants(root) {
            if !all.contains(&p) {
                all.push(p);
            }
        }
    }
    all
}

/// Each program's runs and run time between two readings of the kernel's statistics.
fn program_costs(
    before: &[(String, u64, Duration)],
    after: &[(String, u64, Duration)],
) -> Vec<model::ProgramCost> {
    after
        .iter()
        .map(|(name, runs, time)| {
            let (runs_before, time_before) = before
                .iter()
                .find(|(n, ..)| n == name)
                .map_or((0, Duration::ZERO), |(_, r, t)| (*r, *t));
            model::ProgramCost {
                name: name.clone(),
                runs: runs.saturating_sub(runs_before),
                ns: u64::try_from(time.saturating_sub(time_before).as_nanos()).unwrap_or(u64::MAX),
            }
        })
        .filter(|p| p.runs > 0)
        .collect()
}

/// The client has its last answer before the server has closed that connection: wait (at most
/// 200 ms) until two snapshots 10 ms apart agree, so the run's last close is in its table.
fn settled_snapshot(session: &Session) -> Result<Snapshot> {
    let calls = |s: &Snapshot| s.syscalls.iter().map(|x| x.calls).sum::<u64>();
    let deadline = Instant::now() + Duration::from_millis(200);
    let mut last = session.snapshot()?;
    loop {
        std::thread::sleep(Duration::from_millis(10));
        let now = session.snapshot()?;
        if calls(&now) == calls(&last) || Instant::now() >= deadline {
            return Ok(now);
        }
        last = now;
    }
}

/// Progress on stderr: a bar on a terminal; otherwise (a pipe, a log file, CI) a line per
/// finished run, so that a long experiment is never silent.
struct Progress {
    bar: indicatif::ProgressBar,
    /// stderr is not a terminal: print a line per finished run.
    lines: bool,
    /// Runs finished and planned, for the lines.
    done: std::cell::Cell<u32>,
    planned: u32,
    current: std::cell::RefCell<String>,
}

impl Progress {
    fn new(options: &RunOptions) -> Self {
        let planned = options
            .scenarios
            .iter()
            .map(|s| s.runs * options.runs_per_round(s))
            .sum();
        let bar = if options.progress {
            indicatif::ProgressBar::with_draw_target(
                Some(0),
                indicatif::ProgressDrawTarget::stderr(),
            )
        } else {
            indicatif::ProgressBar::hidden()
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {msg:40} [{bar:30}] {pos}/{len} {rate} {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .with_key(
                "rate",
                |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0}/s", state.per_sec());
                },
            )
            .progress_chars("=> "),
        );
        Self {
            bar,
            lines: !options.progress,
            done: std::cell::Cell::new(0),
            planned,
            current: std::cell::RefCell::new(String::new()),
        }
    }

    fn start_run(&self, title: &str, variant: &Subject, kind: RunKind, number: u32, stop: Stop) {
        let what = format!("{title}: {variant} {} {number}", kind.name());
        // The length is known before the load starts (the bar said 0/0 through the warm-up).
        self.bar.set_length(match stop {
            Stop::Requests(n) => n,
            Stop::Duration(d) => d.as_millis() as u64,
        });
        self.bar.set_position(0);
        self.bar.set_message(what.clone());
        *self.current.borrow_mut() = what;
    }

    /// Without a terminal: "[3/24] 10000 requests, ...: lt profiled 1: 11768 QPS in 0.85 s".
    fn finished_run(&self, run: &RunResult) {
        self.done.set(self.done.get() + 1);
        if self.lines {
            crate::errln!(
                "[{}/{}] {}: {:.0} QPS in {:.2} s",
                self.done.get(),
                self.planned.max(self.done.get()),
                self.current.borrow(),
                run.load.qps(),
                run.load.elapsed.as_secs_f64()
            );
        }
    }

    /// Moves the bar with the load generator's counter until the returned guard is dropped.
    fn follow(&self, counter: Arc<AtomicU64>, stop: Stop) -> Option<ProgressTicker> {
        if self.bar.is_hidden() {
            return None;
        }
        let len = match stop {
            Stop::Requests(n) => n,
            Stop::Duration(d) => d.as_millis() as u64,
        };
        self.bar.set_length(len);
        let bar = self.bar.clone();
        let done = Arc::new(AtomicBool::new(false));
        let done2 = Arc::clone(&done);
        let started = Instant::now();
        let handle = std::thread::spawn(move || {
            while !done2.load(Ordering::Relaxed) {
                let pos = match stop {
                    Stop::Requests(_) => counter.load(Ordering::Relaxed),
                    Stop::Duration(_) => started.elapsed().as_millis() as u64,
                };
                bar.set_position(pos);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Some(ProgressTicker {
            done,
            handle: Some(handle),
        })
    }

    fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            crate::errln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

struct ProgressTicker {
    done: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ProgressTicker {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The order of one variant's runs. Interleaved, so that the machine's drift over the
/// experiment is not read as the profiler's cost: pair i is profiled run i and baseline run i
/// back to back, in ABBA order (profiled first in odd pairs, baseline first in even ones), so
/// that neither kind always follows the other's teardown; strace run i after the pair.
#[must_use]
pub fn run_plan(runs: u32, baseline: bool, strace: bool) -> Vec<(RunKind, u32)> {
    let mut plan = Vec::new();
    for r in 1..=runs {
        if baseline && r % 2 == 0 {
            plan.extend([(RunKind::Baseline, r), (RunKind::Profiled, r)]);
        } else {
            plan.push((RunKind::Profiled, r));
            if baseline {
                plan.push((RunKind::Baseline, r));
            }
        }
        if strace {
            plan.push((RunKind::Strace, r));
        }
    }
    plan
}

/// Sets this thread's CPUs to `cpus` until the guard drops, so that the threads it starts
/// meanwhile inherit them; `None` (nothing changed) when `cpus` is empty or cannot be set.
pub fn collector_cpus(cpus: &[usize]) -> Option<crate::cpus::affinity::RestoreOnDrop> {
    use crate::cpus::affinity;
    if cpus.is_empty() {
        return None;
    }
    let before = affinity::current().ok()?;
    affinity::pin_current_to(cpus).ok()?;
    Some(affinity::RestoreOnDrop(before))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs alternate which kind goes first (ABBA), strace after each pair.
    #[test]
    fn baseline_pairs_alternate_their_order() {
        use RunKind::{Baseline as B, Profiled as P, Strace as S};
        assert_eq!(
            run_plan(4, true, false),
            vec![
                (P, 1),
                (B, 1),
                (B, 2),
                (P, 2),
                (P, 3),
                (B, 3),
                (B, 4),
                (P, 4)
            ]
        );
        assert_eq!(
            run_plan(2, true, true),
            vec![(P, 1), (B, 1), (S, 1), (B, 2), (P, 2), (S, 2)]
        );
        assert_eq!(run_plan(2, false, false), vec![(P, 1), (P, 2)]);
    }
}
