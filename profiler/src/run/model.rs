//! What `profiler run` measured: scenarios × variants × runs, and the statistics over runs.

use std::{fmt, str::FromStr};

use serde::Serialize;

use crate::{loadgen::LoadReport, stats::Snapshot};

/// A server variant under test (the `servers --mode` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Variant {
    /// Level-triggered, accept in a loop until EAGAIN.
    Lt,
    /// Edge-triggered everywhere.
    Et,
    /// Level-triggered, one accept per readiness event.
    LtPure,
    /// Several edge-triggered worker processes on SO_REUSEPORT sockets.
    Mp,
}

impl Variant {
    /// All four, in the reference tables' order.
    pub const ALL: [Self; 4] = [Self::Lt, Self::Et, Self::LtPure, Self::Mp];

    /// The `--mode` name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Lt => "lt",
            Self::Et => "et",
            Self::LtPure => "lt-pure",
            Self::Mp => "mp",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown variant '{s}': use lt, et, lt-pure or mp"))
    }
}

/// How a run was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RunKind {
    /// With the kernel programs attached.
    Profiled,
    /// Without any tracing (`--baseline`): the profiler's overhead is the difference.
    Baseline,
    /// Under `strace -f -c` (`--strace`).
    Strace,
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
    pub variant: Variant,
    /// Runs, profiled first, then baseline and strace runs.
    pub runs: Vec<RunResult>,
    /// Set when the variant could not be measured at all: why.
    pub failure: Option<String>,
}

impl VariantResult {
    /// The runs of one kind.
    pub fn of_kind(&self, kind: RunKind) -> impl Iterator<Item = &RunResult> {
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

/// One part of the experiment: a workload at one concurrency, every variant.
#[derive(Clone, Debug)]
pub struct ScenarioResult {
    /// Heading, e.g. "10000 serial short connections".
    pub title: String,
    /// Concurrency of the load.
    pub concurrency: usize,
    /// One per variant.
    pub variants: Vec<VariantResult>,
}

/// Spread of a sample: what every table of runs shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Mean.
    pub mean: f64,
    /// Standard deviation (n - 1).
    pub stddev: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Median.
    pub median: f64,
}

impl Spread {
    /// Of `values` (all zero when empty).
    #[must_use]
    pub fn of(values: &[f64]) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Self {
            mean,
            stddev: var.sqrt(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            median: median(values),
        }
    }
}

/// Median of `values` (0 when empty).
#[must_use]
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Indexes of the values more than 3 scaled MADs (MAD × 1.4826, the normal-consistent
/// estimate of σ) from the median, and more than 10% away from it: hyperfine-style outliers.
/// (With three runs the MAD alone flags ordinary noise; the 10% floor keeps to real disturbances.)
/// Needs at least three values.
#[must_use]
pub fn outliers(values: &[f64]) -> Vec<usize> {
    if values.len() < 3 {
        return Vec::new();
    }
    let m = median(values);
    let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    let mad = median(&deviations) * 1.4826;
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| {
            let d = (*v - m).abs();
            d > 3.0 * mad && d > 0.10 * m.abs()
        })
        .map(|(i, _)| i)
        .collect()
}

/// Gini coefficient of a distribution (0 = perfectly even, 1 = all in one place).
#[must_use]
pub fn gini(values: &[u64]) -> f64 {
    let n = values.len();
    let total: u64 = values.iter().sum();
    if n < 2 || total == 0 {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    // G = (2 Σ i·x_i) / (n Σ x_i) − (n + 1) / n, with i from 1.
    let weighted: f64 = sorted
        .iter()
        .enumerate()
        .map(|(i, &x)| (i as f64 + 1.0) * x as f64)
        .sum();
    (2.0 * weighted) / (n as f64 * total as f64) - (n as f64 + 1.0) / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_lt_pure_run_1_is_an_outlier() {
        // The reference's 4-core short runs: LT-PURE run 1 at 1339 QPS among ~14.3k.
        assert_eq!(outliers(&[1339.3, 14316.4, 14259.2]), vec![0]);
        // Its LT runs vary by 20% and none is flagged.
        assert!(outliers(&[14856.6, 15496.7, 12903.2]).is_empty());
        assert!(outliers(&[100.0, 100.0, 100.0]).is_empty());
        // 9% above two close runs: noise on a shared machine, not flagged.
        assert!(outliers(&[4600.0, 4232.0, 4193.0]).is_empty());
        assert!(outliers(&[1.0, 2.0]).is_empty());
    }

    #[test]
    fn gini_of_even_and_uneven_distributions() {
        assert!(gini(&[48, 50, 42, 47]) < 0.05, "the reference's MP workers");
        assert!((gini(&[0, 0, 0, 100]) - 0.75).abs() < 1e-9);
        assert_eq!(gini(&[5, 5]), 0.0);
        assert_eq!(gini(&[]), 0.0);
    }

    #[test]
    fn spread_has_sample_stddev() {
        let s = Spread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean, 5.0);
        assert!((s.stddev - 2.138).abs() < 0.001);
        assert_eq!((s.min, s.max, s.median), (2.0, 9.0, 4.5));
    }

    #[test]
    fn variant_names_round_trip() {
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>(), Ok(v));
        }
        assert!(
            "ltt"
                .parse::<Variant>()
                .unwrap_err()
                .contains("lt, et, lt-pure or mp")
        );
    }
}
