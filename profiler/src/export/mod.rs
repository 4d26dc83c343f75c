//! Exports: what `attach` and `run` measured, written in formats other tools read.
//!
//! Both commands first turn their results into one [`ExportData`]; every format reads only that,
//! so a format is written once for both commands.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::stats::Snapshot;

/// Version of the JSON schema (`docs/EXPORT_SCHEMA.md`); bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Where and how the measurements were made.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Metadata {
    /// `attach` or `run`.
    pub command: String,
    /// `uname -r`.
    pub kernel: String,
    /// CPU model from /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs online.
    pub cpus_online: usize,
    /// profiler version.
    pub profiler_version: String,
    /// Start time, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// Wall time of the whole command, seconds.
    pub duration_s: f64,
    /// Command-specific settings: workload, payload, concurrency, server/client CPUs, pids, ...
    pub settings: BTreeMap<String, String>,
}

impl Metadata {
    /// Reads the machine facts; `command` and `settings` are the caller's.
    #[must_use]
    pub fn collect(command: &str) -> Self {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_owned()))
            })
            .unwrap_or_default();
        let started_unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            command: command.to_owned(),
            kernel,
            cpu_model,
            cpus_online: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            profiler_version: env!("CARGO_PKG_VERSION").to_owned(),
            started_unix_s,
            duration_s: 0.0,
            settings: BTreeMap::new(),
        }
    }
}

/// End-to-end results of the load generator for one measurement.
#[derive(Clone, Debug)]
pub struct LoadSummary {
    /// Requests completed correctly.
    pub requests: u64,
    /// Measured wall time, seconds.
    pub elapsed_s: f64,
    /// Correct requests per second.
    pub qps: f64,
    /// Per-request latency, ns.
    pub latency: Histogram<u64>,
    /// Failed requests by kind (`refused`, `reset`, `timeout`, ...), zero kinds left out.
    pub errors: BTreeMap<String, u64>,
    /// Server CPU time during the measurement, ns (user, system), when known.
    pub server_cpu_ns: Option<(u64, u64)>,
}

/// One cell of the results: a variant's run (or all runs together, or a whole `attach`).
#[derive(Clone, Debug)]
pub struct Measurement {
    /// Server variant (`lt`, `et`, ...); `None` for `attach`.
    pub variant: Option<String>,
    /// Concurrency of the load; `None` for `attach`.
    pub concurrency: Option<usize>,
    /// Run number from 1; `None` for the aggregate over runs, and for `attach`.
    pub run: Option<u32>,
    /// What the kernel programs measured.
    pub syscalls: Snapshot,
    /// What the load generator measured (`run` only).
    pub load: Option<LoadSummary>,
}

/// Everything an export writes.
#[derive(Clone, Debug)]
pub struct ExportData {
    /// Machine and settings.
    pub metadata: Metadata,
    /// The measurements, per run and aggregated.
    pub measurements: Vec<Measurement>,
    /// True when the command was interrupted or failed part-way: what was measured until then.
    pub partial: bool,
}
