//! What `profiler run` measured: scenarios × variants × runs, and the statistics over runs.

use serde::Serialize;
/// A built-in server variant: the servers crate's one description of them.
pub use servers::Variant;

pub use crate::comparison::{CallsChange, PairedChange, RunKind};
use crate::{
    inference::{Design, Estimate, Verdict, holm},
    loadgen::LoadReport,
    stats::Snapshot,
};

/// A server under test: one of the built-in variants, or a command of the user's
/// (`--server-cmd NAME=CMD`) driven through the same load, baselines, timing and reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// The `servers` binary in one of its modes.
    Builtin(Variant),
    /// The user's own server.
    Command(UserServer),
    /// A server already running (`--target HOST:PORT --pid PID`): measured where it is, never
    /// started or stopped by us.
    Running(RunningServer),
}

/// `--target HOST:PORT --pid PID`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunningServer {
    /// How the reports name it: its command name and pid (`nginx-1234`).
    pub name: String,
    /// The processes that hold its listening socket (a pre-forked server's master and
    /// workers), all traced, with their threads and the children they fork; the first is the
    /// one named.
    pub pids: Vec<u32>,
    /// Where the load goes.
    pub addr: std::net::SocketAddr,
}

/// `--server-cmd NAME=CMD`: a server the project did not build.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserServer {
    /// How the reports name it.
    pub name: String,
    /// A shell command line with `{port}` where the port goes (the profiler picks a free one
    /// for each run).
    pub command: String,
}

impl Subject {
    /// How the reports and exports name it (`lt`, or the user's name).
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Builtin(v) => v.name(),
            Self::Command(c) => &c.name,
            Self::Running(r) => &r.name,
        }
    }

    /// The built-in variant, if it is one.
    #[must_use]
    pub fn builtin(&self) -> Option<Variant> {
        match self {
            Self::Builtin(v) => Some(*v),
            Self::Command(_) | Self::Running(_) => None,
        }
    }
}

impl From<Variant> for Subject {
    fn from(v: Variant) -> Self {
        Self::Builtin(v)
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// CPU time a server spent during a measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuTime {
    /// Time on a CPU, ns, exact (the scheduler's own count, /proc/PID/task/*/schedstat).
    pub on_cpu_ns: u64,
    /// User time, ns (sampled at the scheduler tick: 10 ms granularity).
    pub user_ns: u64,
    /// System time, ns (sampled at the scheduler tick).
    pub system_ns: u64,
}

impl CpuTime {
    /// `self - earlier`.
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            on_cpu_ns: self.on_cpu_ns.saturating_sub(earlier.on_cpu_ns),
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            system_ns: self.system_ns.saturating_sub(earlier.system_ns),
        }
    }

    /// Adds `other`.
    pub fn add(&mut self, other: &Self) {
        self.on_cpu_ns += other.on_cpu_ns;
        self.user_ns += other.user_ns;
        self.system_ns += other.system_ns;
    }
}

/// One row of strace's `-c` summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StraceRow {
    /// Syscall name.
    pub syscall: String,
    /// Calls strace counted.
    pub calls: u64,
    /// Failed calls.
    pub errors: u64,
    /// Time strace attributes to the calls, seconds.
    pub seconds: f64,
}

impl StraceRow {
    /// strace's time per call, ns.
    #[must_use]
    pub fn ns_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.seconds * 1e9 / self.calls as f64
        }
    }
}

/// One measured run of one variant.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// 1-based within its kind.
    pub run: u32,
    /// How it was made.
    pub kind: RunKind,
    /// End-to-end results.
    pub load: LoadReport,
    /// Kernel measurements of the measured window (empty for baseline and strace runs).
    pub syscalls: Snapshot,
    /// strace's table (strace runs only).
    pub strace: Vec<StraceRow>,
    /// Server CPU time over the measured window.
    pub server_cpu: Option<CpuTime>,
    /// Set when the server died during the run: how.
    pub server_died: Option<String>,
    /// Requests of the warm-up before the measured window (ok + failed): strace sees the
    /// server's whole life, so its calls per request count them too.
    pub warmup_requests: u64,
    /// `--slow`: the run's calls past the threshold (profiled runs only).
    pub slow: Option<crate::slow::SlowReport>,
    /// `--explain-cost`: each attached program's runs and run time over the measured window,
    /// as the kernel counts them (profiled runs only).
    pub programs: Vec<ProgramCost>,
    /// The front end that timed the syscalls (profiled runs): `fentry`, `tracepoint`, or
    /// `tracepoint (fentry: why not)`.
    pub front: Option<String>,
    /// What else ran on the server's CPUs during the measured window.
    pub noise: Option<crate::noise::Noise>,
}

/// One kernel program's share of a run (`--explain-cost`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramCost {
    /// The program's name (`syscall_exit`, `fexit_3`, `btf_sched_switch`).
    pub name: String,
    /// Runs in the window.
    pub runs: u64,
    /// Their total run time, ns, as the kernel times it (its two clock reads included).
    pub ns: u64,
}

impl RunResult {
    /// Requests finished (ok or failed).
    #[must_use]
    pub fn requests_finished(&self) -> u64 {
        self.load.requests + self.load.errors.total()
    }
}

/// One variant within a scenario.
#[derive(Clone, Debug)]
pub struct VariantResult {
    /// Which server.
    pub variant: Subject,
    /// Runs, profiled first, then baseline and strace runs. Measured in slices (the warm
    /// engine): one run per kind, the sum of that kind's slices.
    pub runs: Vec<RunResult>,
    /// The warm engine's slices, in the order they were made (empty for whole runs).
    pub slices: Vec<SliceFigures>,
    /// Set when the variant could not be measured at all: why.
    pub failure: Option<String>,
}

/// One slice's figures (the warm engine, `run::slices`): what a pair compares.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SliceFigures {
    /// The block it was made in (1-based): slices of one block are paired.
    pub block: u32,
    /// Profiled, or baseline (the programs attached, this server not counted).
    pub kind: RunKind,
    /// Correct requests of the measured window.
    pub requests: u64,
    /// Correct requests per second of the window.
    pub qps: f64,
    /// Latency quantiles of the window, ns.
    pub p50_ns: f64,
    /// p99, ns.
    pub p99_ns: f64,
    /// The server's on-CPU time per finished request over the window, ns.
    pub cpu_ns_per_request: Option<f64>,
    /// Profiled slices: calls per finished request of each timed syscall (the session's
    /// order), counted on the server's own processes.
    pub calls_per_request: Vec<(String, f64)>,
}

impl SliceFigures {
    /// As the exports carry it.
    #[must_use]
    pub fn to_export(&self) -> crate::export::Slice {
        crate::export::Slice {
            block: self.block,
            kind: self.kind.name(),
            requests: self.requests,
            qps: self.qps,
            p50_ns: self.p50_ns,
            p99_ns: self.p99_ns,
            cpu_ns_per_request: self.cpu_ns_per_request,
            calls_per_request: self.calls_per_request.iter().cloned().collect(),
        }
    }

    fn figures(&self) -> Figures {
        Figures {
            number: self.block,
            qps: self.qps,
            p50: self.p50_ns,
            p99: self.p99_ns,
            cpu: self.cpu_ns_per_request,
            calls: self.calls_per_request.clone(),
        }
    }
}

/// What a pair compares, of a whole run or of a slice.
#[derive(Clone, Debug)]
struct Figures {
    /// The run number, or the block: pairs are made of equal numbers.
    number: u32,
    qps: f64,
    p50: f64,
    p99: f64,
    cpu: Option<f64>,
    calls: Vec<(String, f64)>,
}

impl RunResult {
    fn figures(&self) -> Figures {
        let requests = self.requests_finished();
        Figures {
            number: self.run,
            qps: self.load.qps(),
            p50: self.load.latency.value_at_quantile(0.5) as f64,
            p99: self.load.latency.value_at_quantile(0.99) as f64,
            cpu: self
                .server_cpu
                .filter(|c| c.on_cpu_ns > 0)
                .and_then(|c| crate::stats::per_request(c.on_cpu_ns as f64, requests)),
            calls: Vec::new(),
        }
    }
}

impl VariantResult {
    /// The runs of one kind.
    pub fn of_kind(&self, kind: RunKind) -> impl Iterator<Item = &RunResult> + Clone {
        self.runs.iter().filter(move |r| r.kind == kind)
    }

    /// End-to-end latency of all profiled runs together (`None` without runs).
    #[must_use]
    pub fn merged_latency(&self) -> Option<hdrhistogram::Histogram<u64>> {
        merge_histograms(
            self.of_kind(RunKind::Profiled)
                .map(|r| Some(&r.load.latency)),
        )
    }

    /// Kernel measurements of all profiled runs together.
    #[must_use]
    pub fn merged_syscalls(&self) -> Snapshot {
        let mut merged = Snapshot::default();
        for run in self.of_kind(RunKind::Profiled) {
            merged.merge(&run.syscalls);
        }
        merged
    }

    /// `--slow`: the slow calls of every profiled run together.
    #[must_use]
    pub fn merged_slow(&self) -> Option<crate::slow::SlowReport> {
        let mut runs = self
            .of_kind(RunKind::Profiled)
            .filter_map(|r| r.slow.as_ref());
        let mut merged = runs.next()?.clone();
        for r in runs {
            merged.merge(r);
        }
        Some(merged)
    }
}

/// How a scenario's comparisons are judged: when its pairs are looked at, and the equivalence
/// margin inside which two servers are "the same".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judge {
    /// Fixed (`--runs N`) or sequential (pairs added until decided).
    pub design: Design,
    /// `--equivalence`, %.
    pub margin_pct: f64,
}

impl VariantResult {
    /// The `of` runs against the `relative_to` runs of the same number; `None` without a
    /// complete pair.
    #[must_use]
    pub fn paired_change(
        &self,
        of: RunKind,
        relative_to: RunKind,
        judge: &Judge,
    ) -> Option<PairedChange> {
        paired(
            &self.figures(of),
            &self.figures(relative_to),
            of,
            relative_to,
            judge,
        )
    }

    /// This variant against `reference`, run i against run i (the variants take turns, so
    /// those were made next to each other): their baseline runs where both have them (nothing
    /// attached), else their profiled runs. `None` without a complete pair.
    #[must_use]
    pub fn against(&self, reference: &VariantResult, judge: &Judge) -> Option<PairedChange> {
        let kind = if !self.figures(RunKind::Baseline).is_empty()
            && !reference.figures(RunKind::Baseline).is_empty()
        {
            RunKind::Baseline
        } else {
            RunKind::Profiled
        };
        let mut change = paired(
            &self.figures(kind),
            &reference.figures(kind),
            kind,
            kind,
            judge,
        )?;
        // Baseline slices count nothing in the kernel: the calls per request are the profiled
        // slices' (the same blocks, paired the same way).
        if kind == RunKind::Baseline && !self.slices.is_empty() {
            change.calls_per_request = paired(
                &self.figures(RunKind::Profiled),
                &reference.figures(RunKind::Profiled),
                RunKind::Profiled,
                RunKind::Profiled,
                judge,
            )
            .map(|c| c.calls_per_request)
            .unwrap_or_default();
        }
        Some(change)
    }

    /// What pairs compare of `kind`: its slices (the warm engine), else its runs that
    /// completed with a live server.
    fn figures(&self, kind: RunKind) -> Vec<Figures> {
        if self.slices.is_empty() {
            self.alive(kind).map(RunResult::figures).collect()
        } else {
            self.slices
                .iter()
                .filter(|s| s.kind == kind && s.requests > 0)
                .map(SliceFigures::figures)
                .collect()
        }
    }

    /// Runs of `kind` that completed with a live server.
    fn alive(&self, kind: RunKind) -> impl Iterator<Item = &RunResult> + Clone {
        self.of_kind(kind)
            .filter(|r| r.server_died.is_none() && r.load.requests > 0)
    }
}

/// `of` figures against `relative_to` figures of the same number (run, or block of slices):
/// each pair's change, as a median with its interval at the design's latest look, and the
/// verdict on QPS. The quiet figures (p50, p99, server CPU per request, calls per request of
/// each syscall) are one family under Holm's correction at the error one look may spends.
fn paired(
    of_figures: &[Figures],
    relative: &[Figures],
    of: RunKind,
    relative_to: RunKind,
    judge: &Judge,
) -> Option<PairedChange> {
    let mut pairs: Vec<(&Figures, &Figures)> = of_figures
        .iter()
        .filter_map(|a| {
            relative
                .iter()
                .find(|b| b.number == a.number)
                .map(|b| (a, b))
        })
        .collect();
    // In the order they were made: the looks take the first n.
    pairs.sort_by_key(|(a, _)| a.number);
    if pairs.is_empty() {
        return None;
    }
    let change = |with: f64, without: f64| 100.0 * (with - without) / without;
    let changes = |f: &dyn Fn(&Figures) -> Option<f64>| -> Vec<f64> {
        pairs
            .iter()
            .filter_map(|(a, b)| Some((f(a)?, f(b)?)))
            .filter(|(_, b)| *b > 0.0)
            .map(|(a, b)| change(a, b))
            .collect()
    };
    let design = &judge.design;
    let qps_change = design.estimate(&changes(&|f| Some(f.qps)))?;
    let p50 = design.estimate(&changes(&|f| Some(f.p50)))?;
    let p99 = design.estimate(&changes(&|f| Some(f.p99)))?;
    let cpu_per_request = design.estimate(&changes(&|f| f.cpu));
    let cpu_pairs: Vec<(f64, f64)> = pairs
        .iter()
        .filter_map(|(a, b)| Some((a.cpu?, b.cpu?)))
        .collect();
    let medians = |v: &[(f64, f64)]| {
        let of: Vec<f64> = v.iter().map(|p| p.0).collect();
        let to: Vec<f64> = v.iter().map(|p| p.1).collect();
        (crate::samples::median(&of), crate::samples::median(&to))
    };
    let cpu_medians = (!cpu_pairs.is_empty()).then(|| medians(&cpu_pairs));
    // Calls per request of each syscall either side makes (slices only).
    let mut names: Vec<&str> = Vec::new();
    for (a, b) in &pairs {
        for (name, _) in a.calls.iter().chain(&b.calls) {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
    }
    let calls_of = |f: &Figures, name: &str| {
        f.calls
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0.0, |(_, c)| *c)
    };
    let calls_per_request: Vec<CallsChange> = names
        .iter()
        .filter_map(|&name| {
            let values: Vec<(f64, f64)> = pairs
                .iter()
                .filter(|(a, b)| !a.calls.is_empty() && !b.calls.is_empty())
                .map(|(a, b)| (calls_of(a, name), calls_of(b, name)))
                .collect();
            let (of_median, relative_median) = medians(&values);
            if values.is_empty() || relative_median == 0.0 {
                return None;
            }
            let change = design.estimate(
                &values
                    .iter()
                    .filter(|(_, b)| *b > 0.0)
                    .map(|&(a, b)| change(a, b))
                    .collect::<Vec<_>>(),
            )?;
            Some(CallsChange {
                syscall: name.to_owned(),
                of: of_median,
                relative_to: relative_median,
                change,
                differs: false,
            })
        })
        .collect();
    // The quiet figures, as one family under Holm at the error one look may spend; only where
    // a look has been made (an interval exists).
    let (found, also): (Vec<String>, Vec<String>) = {
        let mut family: Vec<(String, &Estimate)> =
            vec![("p50".to_owned(), &p50), ("p99".to_owned(), &p99)];
        if let Some(c) = &cpu_per_request {
            family.push(("server CPU/req".to_owned(), c));
        }
        for c in &calls_per_request {
            family.push((format!("{} calls/req", c.syscall), &c.change));
        }
        family.retain(|(_, e)| e.interval.is_some());
        let p_values: Vec<f64> = family.iter().map(|(_, e)| e.p_value).collect();
        holm(&p_values, design.alpha_per_look)
            .into_iter()
            .zip(&family)
            .filter(|(rejected, (_, e))| *rejected && !e.contains_zero())
            .map(|(_, (name, e))| {
                (
                    name.clone(),
                    format!("{name} {}", if e.median > 0.0 { "higher" } else { "lower" }),
                )
            })
            .unzip()
    };
    let calls_per_request = calls_per_request
        .into_iter()
        .map(|mut c| {
            c.differs = found.contains(&format!("{} calls/req", c.syscall));
            c
        })
        .collect();
    Some(PairedChange {
        of,
        relative_to,
        pairs: pairs.len(),
        qps_of: crate::samples::median(&pairs.iter().map(|(a, _)| a.qps).collect::<Vec<_>>()),
        qps_relative_to: crate::samples::median(
            &pairs.iter().map(|(_, b)| b.qps).collect::<Vec<_>>(),
        ),
        verdict: Verdict::of(&qps_change, judge.margin_pct, "pairs"),
        qps: qps_change,
        p50,
        p99,
        cpu_per_request,
        cpu_per_request_ns: cpu_medians,
        calls_per_request,
        also,
    })
}

/// The sum of the histograms given (those present), or `None` when there are none.
pub fn merge_histograms<'a>(
    histograms: impl IntoIterator<Item = Option<&'a hdrhistogram::Histogram<u64>>>,
) -> Option<hdrhistogram::Histogram<u64>> {
    let mut sum: Option<hdrhistogram::Histogram<u64>> = None;
    for h in histograms.into_iter().flatten() {
        match &mut sum {
            // Every latency histogram has the load generator's bounds, so adding cannot fail.
            Some(s) => {
                let _ = s.add(h);
            }
            None => sum = Some(h.clone()),
        }
    }
    sum
}

impl ScenarioResult {
    /// Each variant with its reference (the first variant of the scenario that did not fail),
    /// for the comparisons between variants.
    #[must_use]
    pub fn against_reference(&self) -> Vec<(&VariantResult, &VariantResult)> {
        let mut ok = self.variants.iter().filter(|v| v.failure.is_none());
        let Some(reference) = ok.next() else {
            return Vec::new();
        };
        ok.map(|v| (v, reference)).collect()
    }

    /// Every variant against its reference, with the change.
    #[must_use]
    pub fn variant_changes(&self) -> Vec<(&VariantResult, &VariantResult, PairedChange)> {
        self.against_reference()
            .into_iter()
            .filter_map(|(v, r)| Some((v, r, v.against(r, &self.judge)?)))
            .collect()
    }

    /// Every variant's `of` runs against its `relative_to` runs (profiled against baseline,
    /// strace against profiled), with the change.
    #[must_use]
    pub fn kind_changes(
        &self,
        of: RunKind,
        relative_to: RunKind,
    ) -> Vec<(&VariantResult, PairedChange)> {
        self.variants
            .iter()
            .filter(|v| v.failure.is_none())
            .filter_map(|v| Some((v, v.paired_change(of, relative_to, &self.judge)?)))
            .collect()
    }

    /// Whether the comparisons that decide how many pairs to make (variants against the
    /// reference, profiled against baseline) are all decided.
    #[must_use]
    pub fn decided(&self) -> bool {
        let variants = self.variant_changes();
        let overhead = self.kind_changes(RunKind::Profiled, RunKind::Baseline);
        variants.iter().all(|(_, _, c)| c.verdict.decided())
            && overhead.iter().all(|(_, c)| c.verdict.decided())
    }
}

/// One part of the experiment: a workload at one concurrency, every variant.
#[derive(Clone, Debug)]
pub struct ScenarioResult {
    /// Heading, e.g. "10000 serial short connections".
    pub title: String,
    /// Concurrency of the load.
    pub concurrency: usize,
    /// One per variant.
    pub variants: Vec<VariantResult>,
    /// When mp ran: its workers per run, and why that many.
    pub mp_workers: Option<(usize, String)>,
    /// The CPUs the server ran on (empty: any); a sweep (`--server-cpus A --server-cpus B`)
    /// has a scenario per set, never pooled with another.
    pub server_cpus: Vec<usize>,
    /// CPUs the load generator shared with the server (empty: none, the usual case).
    pub shared_cpus: Vec<usize>,
    /// How its comparisons are judged.
    pub judge: Judge,
    /// Why it made no more pairs: "every comparison decided at 12 pairs", "the time budget
    /// was spent", "30 pairs, the most --max-runs allows", "--runs 3".
    pub stopped: String,
    /// Measured on the warm engine: how it was sliced, and where the time went (`None`:
    /// whole runs).
    pub slices: Option<super::slices::SliceDesign>,
}
