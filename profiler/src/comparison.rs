//! What a comparison of two kinds of runs found ([`PairedChange`]) and the kinds of run
//! ([`RunKind`]): `run` computes them (`run::model`), the exports and reports print them. Here,
//! below both, so that an export needs nothing from `run`.

use serde::Serialize;

use crate::inference::{Estimate, Verdict};

/// The heading of the verdicts part, which every report of a run opens with.
pub const VERDICTS_HEADING: &str = "Verdicts";

/// How a run was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// With the kernel programs attached.
    Profiled,
    /// Without any tracing (`--baseline`): the profiler's overhead is the difference.
    Baseline,
    /// Under `strace -f -c` (`--strace`).
    Strace,
}

impl RunKind {
    /// "profiled", "baseline" or "strace": as messages and table headings name it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Profiled => "profiled",
            Self::Baseline => "baseline",
            Self::Strace => "strace",
        }
    }
}

/// Runs of one kind against runs of another, paired by run number (run i of each was made back
/// to back, so slow drift of the machine falls inside a pair, not between the kinds): each
/// pair's change in percent of the `relative_to` run, as a median with the sign test's
/// interval at the scenario's latest look, and a verdict on QPS.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairedChange {
    /// The kind measured (profiled against baseline; strace against profiled).
    pub of: RunKind,
    /// The kind it is compared with.
    pub relative_to: RunKind,
    /// Pairs where both runs completed with a live server.
    pub pairs: usize,
    /// Median QPS of the `of` runs of those pairs.
    pub qps_of: f64,
    /// Median QPS of the `relative_to` runs.
    pub qps_relative_to: f64,
    /// QPS change, %.
    pub qps: Estimate,
    /// p50 latency change, %.
    pub p50: Estimate,
    /// p99 latency change, %.
    pub p99: Estimate,
    /// Change of the server's on-CPU time per finished request (schedstat, exact), %: what
    /// the programs running in the server's own context add, a far quieter witness of the
    /// profiler's cost than QPS on a shared machine. `None` without CPU times on both sides.
    pub cpu_per_request: Option<Estimate>,
    /// Median on-CPU ns per request of the `of` runs and of the `relative_to` runs.
    pub cpu_per_request_ns: Option<(f64, f64)>,
    /// The verdict, on QPS alone: higher (faster), lower (slower), the same within the margin,
    /// or undecided with the reason.
    pub verdict: Verdict,
    /// Calls per request of each syscall (the warm engine's slices, counted on each server's
    /// own processes): the medians either side and the change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls_per_request: Vec<CallsChange>,
    /// The quiet figures (p50, p99, server CPU per request, calls per request) whose change
    /// Holm's correction over all of them finds at the look's error: "p99 higher".
    pub also: Vec<String>,
}

/// One syscall's calls per request, one side against the other.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallsChange {
    /// The syscall.
    pub syscall: String,
    /// Median calls per request of the `of` side.
    pub of: f64,
    /// Median of the `relative_to` side.
    pub relative_to: f64,
    /// The change, %.
    pub change: Estimate,
    /// Holm's correction over the quiet figures finds it changed.
    pub differs: bool,
}

impl PairedChange {
    /// The verdict in words ("faster", "slower; also p99 higher", "same within 2%", ...).
    #[must_use]
    pub fn verdict_words(&self) -> String {
        let main = self.verdict.words("faster", "slower");
        if self.also.is_empty() {
            main
        } else {
            format!("{main}; also {}", self.also.join(", "))
        }
    }
}
