//! Exports: what `attach` and `run` measured, written in formats other tools read.
//!
//! Both commands first turn their results into one [`ExportData`]; every format reads only that,
//! so a format is written once for both commands. Each single-file format is an [`Exporter`]; the
//! HdrHistogram export writes a directory ([`hdr::files`]). [`write_exports`] writes every format
//! the user asked for, each file atomically ([`atomic`]).

pub mod atomic;
pub mod charts;
pub mod csv;
pub mod flamegraph;
pub mod folded;
pub mod hdr;
pub mod html;
pub mod json;
pub mod markdown;
pub mod otlp;
pub mod pprof;
pub mod prometheus;
pub mod prometheus_proto;
pub mod summary;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use anyhow::{Result, bail};
use clap::Args;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use self::atomic::Destination;
use crate::{
    comparison::PairedChange,
    report::document::Document,
    slow::SlowReport,
    stats::{Snapshot, SyscallSummary},
};

/// Version of the JSON schema (`docs/EXPORT_SCHEMA.md`); bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 4;

/// Where and how the measurements were made.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
                s.lines().find_map(|l| {
                    l.strip_prefix("model name")
                        .and_then(|r| r.split_once(':'))
                        .map(|(_, v)| v.trim().to_owned())
                })
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
    /// Server CPU time during the measurement, ns (user, system: tick-sampled), when known.
    pub server_cpu_ns: Option<(u64, u64)>,
    /// Server on-CPU time during the measurement, ns (exact, from schedstat), when known.
    pub server_on_cpu_ns: Option<u64>,
    /// One run's noise: what else ran on the server's CPUs (`None` for several runs together).
    pub noise: Option<crate::noise::Noise>,
}

/// One cell of the results: a variant's run (or all runs together, or a whole `attach`).
#[derive(Clone, Debug, Default)]
pub struct Measurement {
    /// Server variant (`lt`, `et`, ...); `None` for `attach`.
    pub variant: Option<String>,
    /// Concurrency of the load; `None` for `attach`.
    pub concurrency: Option<usize>,
    /// Run number from 1; `None` for the aggregate over runs, and for `attach`.
    pub run: Option<u32>,
    /// The CPUs the server ran on, as a kernel CPU list ("0-1"; "any" unpinned); `None` for
    /// `attach`. Measurements on different CPU sets are never pooled.
    pub server_cpus: Option<String>,
    /// What the kernel programs measured.
    pub syscalls: Snapshot,
    /// What the load generator measured (`run` only).
    pub load: Option<LoadSummary>,
    /// Why this run (or, for an aggregate, one of its variant's runs) failed: its figures are
    /// not a measurement of the server, and are not compared.
    pub failure: Option<String>,
    /// `--slow`: the calls past the threshold, grouped by stack.
    pub slow: Option<SlowReport>,
    /// `run`'s warm engine: the slices this measurement sums, in the order they were made
    /// (empty elsewhere).
    pub slices: Vec<Slice>,
}

/// One slice of `run`'s warm engine: a measured window of one server, as its pairs compare it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Slice {
    /// The block it was made in (1-based): a comparison pairs two servers' slices of a block.
    pub block: u32,
    /// "profiled", or "baseline" (the programs attached, this server not counted).
    pub kind: &'static str,
    /// Correct requests of the window.
    pub requests: u64,
    /// Correct requests per second of the window.
    pub qps: f64,
    /// Latency quantiles of the window, ns.
    pub p50_ns: f64,
    /// p99, ns.
    pub p99_ns: f64,
    /// The server's on-CPU time per finished request over the window, ns (null: not read).
    pub cpu_ns_per_request: Option<f64>,
    /// Profiled slices: calls per finished request of each timed syscall.
    pub calls_per_request: BTreeMap<String, f64>,
}

/// Everything an export writes.
#[derive(Clone, Debug, Default)]
pub struct ExportData {
    /// Machine and settings.
    pub metadata: Metadata,
    /// The measurements, per run and aggregated.
    pub measurements: Vec<Measurement>,
    /// True when the command was interrupted or failed part-way: what was measured until then.
    pub partial: bool,
    /// One line per failed run or variant ("et, concurrency 1: the server exited with status
    /// 3 during profiled run 1"); a failure makes the data partial.
    pub failures: Vec<String>,
    /// The command's own report (`run`: every section of the terminal's), which the Markdown,
    /// HTML and JSON exports carry whole; `None`: the report is built from the measurements
    /// ([`summary::document`]).
    pub report: Option<Document>,
    /// `run --baseline` and `--strace`: the paired comparisons, as numbers.
    pub comparisons: Vec<Comparison>,
    /// `run --strace`: strace's time per call next to the kernel's, per syscall.
    pub strace: Vec<StraceComparison>,
}

/// One variant's paired comparison in one scenario (profiled against baseline, or strace
/// against profiled).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Server variant.
    pub variant: String,
    /// Concurrency of the scenario.
    pub concurrency: usize,
    /// Set for a comparison between variants: the variant `variant` is compared with (the
    /// first one of the run); `None` for a variant's profiled/baseline or strace/profiled runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The pairs and the changes with their intervals.
    #[serde(flatten)]
    pub change: PairedChange,
}

/// strace's view of one syscall of one variant, summed over its strace runs, next to the
/// kernel's over the profiled runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StraceComparison {
    /// Server variant.
    pub variant: String,
    /// Concurrency of the scenario.
    pub concurrency: usize,
    /// Syscall.
    pub syscall: String,
    /// Calls strace counted.
    pub strace_calls: u64,
    /// strace's time per call, ns.
    pub strace_ns_per_call: f64,
    /// The kernel programs' mean, ns (`None` when the syscall was not timed).
    pub kernel_mean_ns: Option<f64>,
}

impl ExportData {
    /// What a trace of processes (`attach`, `serve`) measured: one measurement, no variant.
    #[must_use]
    pub fn of_trace(metadata: Metadata, syscalls: Snapshot, partial: bool) -> Self {
        Self::new(
            metadata,
            vec![Measurement {
                variant: None,
                concurrency: None,
                run: None,
                server_cpus: None,
                syscalls,
                load: None,
                failure: None,
                slow: None,
                slices: Vec::new(),
            }],
        )
        .partial(partial)
    }

    /// The same, with `--slow`'s report in the one measurement.
    #[must_use]
    pub fn with_slow(mut self, slow: Option<SlowReport>) -> Self {
        if let Some(m) = self.measurements.first_mut() {
            m.slow = slow;
        }
        self
    }

    /// Measurements with no report, comparison or failure of their own.
    #[must_use]
    pub fn new(metadata: Metadata, measurements: Vec<Measurement>) -> Self {
        Self {
            metadata,
            measurements,
            partial: false,
            failures: Vec::new(),
            report: None,
            comparisons: Vec::new(),
            strace: Vec::new(),
        }
    }

    /// The same, marked partial or not.
    #[must_use]
    pub fn partial(mut self, partial: bool) -> Self {
        self.partial = partial;
        self
    }

    /// The report every document format renders: the command's own, or one built from the
    /// measurements.
    #[must_use]
    pub fn document(&self) -> std::borrow::Cow<'_, Document> {
        match &self.report {
            Some(d) => std::borrow::Cow::Borrowed(d),
            None => std::borrow::Cow::Owned(summary::document(self)),
        }
    }

    /// The partial banner every format shows, when the data is partial.
    #[must_use]
    pub fn partial_note(&self) -> Option<String> {
        if !self.partial && self.failures.is_empty() {
            return None;
        }
        Some(if self.failures.is_empty() {
            "the command was interrupted; these are the measurements until then".to_owned()
        } else {
            format!(
                "{} failed: {}",
                if self.failures.len() == 1 {
                    "a run"
                } else {
                    "runs"
                },
                self.failures.join("; ")
            )
        })
    }
}

/// One single-file export format.
pub trait Exporter {
    /// Short name for messages (`JSON`, `CSV`, ...).
    fn name(&self) -> &'static str;

    /// The whole file.
    fn render(&self, data: &ExportData) -> Result<Vec<u8>>;
}

impl Measurement {
    /// `lt c=64 run 2`, `lt c=64 (all runs)`, or `attach` when there is no variant.
    #[must_use]
    pub fn label(&self) -> String {
        let mut out = self
            .variant
            .clone()
            .unwrap_or_else(|| "all traced processes".to_owned());
        if let Some(c) = self.concurrency {
            out.push_str(&format!(" c={c}"));
        }
        if let Some(cpus) = &self.server_cpus {
            out.push_str(&format!(" CPUs {cpus}"));
        }
        match self.run {
            Some(r) => out.push_str(&format!(" run {r}")),
            None if self.variant.is_some() => out.push_str(" (all runs)"),
            None => {}
        }
        out
    }

    /// Whether `other` is a measurement of the same variant and concurrency.
    #[must_use]
    pub fn same_group(&self, other: &Self) -> bool {
        self.variant == other.variant
            && self.concurrency == other.concurrency
            && self.server_cpus == other.server_cpus
    }

    /// Calls of `syscall` per finished request ([`crate::stats::calls_per_request`]), when the
    /// load generator counted requests.
    #[must_use]
    pub fn calls_per_request(&self, syscall: &SyscallSummary) -> Option<f64> {
        crate::stats::calls_per_request(syscall.calls, self.requests_finished()?)
    }

    /// The requests the load generator finished, correct or failed: the denominator of every
    /// per-request figure ([`crate::stats::per_request`]); `None` without a load.
    #[must_use]
    pub fn requests_finished(&self) -> Option<u64> {
        let load = self.load.as_ref()?;
        Some(load.requests + load.errors.values().sum::<u64>())
    }
}

impl ExportData {
    /// One measurement per (variant, concurrency), in first-seen order: the aggregate over runs
    /// (`run == None`) when there is one, else every run of the group.
    #[must_use]
    pub fn summaries(&self) -> Vec<&Measurement> {
        let mut out: Vec<&Measurement> = Vec::new();
        for m in &self.measurements {
            if out.iter().any(|o| o.same_group(m)) {
                continue;
            }
            match self
                .measurements
                .iter()
                .find(|a| a.same_group(m) && a.run.is_none())
            {
                Some(aggregate) => out.push(aggregate),
                None => out.extend(self.measurements.iter().filter(|r| r.same_group(m))),
            }
        }
        out
    }

    /// The individual runs (`run == Some`) of `group`'s variant and concurrency, by run number.
    #[must_use]
    pub fn runs_of(&self, group: &Measurement) -> Vec<&Measurement> {
        let mut runs: Vec<&Measurement> = self
            .measurements
            .iter()
            .filter(|m| m.same_group(group) && m.run.is_some())
            .collect();
        runs.sort_by_key(|m| m.run);
        runs
    }

    /// Syscall names over all measurements, in first-seen order.
    #[must_use]
    pub fn syscall_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for m in &self.measurements {
            for s in &m.syscalls.syscalls {
                if !names.contains(&s.name.as_str()) {
                    names.push(&s.name);
                }
            }
        }
        names
    }
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
    #[arg(long, visible_alias = "export-prometheus", value_name = "FILE")]
    pub export_prom: Option<PathBuf>,
    /// The report's tables as Markdown.
    #[arg(long, visible_alias = "export-md", value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// A self-contained HTML report with SVG charts (and a flame graph with --slow).
    #[arg(
        long = "export-html",
        visible_alias = "report",
        value_name = "FILE.html"
    )]
    pub report: Option<PathBuf>,
    /// The --slow calls as folded stacks for flame graphs (flamegraph.pl, inferno, speedscope):
    /// `comm;user frames;-;kernel frames;[state] MICROSECONDS`, one line per stack and state
    /// (on-CPU, blocked, runnable).
    #[arg(long, value_name = "FILE", requires = "slow")]
    pub export_folded: Option<PathBuf>,
    /// A gzipped pprof profile (profile.proto) for `go tool pprof`, Pyroscope, Parca: the
    /// --slow calls by stack (calls, wall, on-CPU, blocked, runnable ns), else one sample per
    /// syscall (docs/EXPORT_SCHEMA.md).
    #[arg(long, value_name = "FILE")]
    pub export_pprof: Option<PathBuf>,
}

/// Checks the export flags before measuring, so a bad path fails in a second, not after a run:
/// at most one goes to stdout, file parents exist, `--export-hdr` is not stdout.
pub fn check_export_args(args: &ExportArgs) -> Result<()> {
    let files = args.files();
    let to_stdout: Vec<&str> = files
        .iter()
        .filter(|(_, p)| p.as_os_str() == "-")
        .map(|(f, _)| *f)
        .collect();
    if to_stdout.len() > 1 {
        bail!(
            "{} all write to stdout ('-'): send at most one export to stdout, the others to files",
            to_stdout.join(", ")
        );
    }
    for (flag, path) in files {
        if path.as_os_str() == "-" {
            continue;
        }
        let parent = atomic::directory_of(path);
        if !parent.is_dir() {
            bail!(
                "{flag} {}: directory '{}' does not exist; create it first",
                path.display(),
                parent.display()
            );
        }
        if path.is_dir() {
            bail!(
                "{flag} {}: is a directory; give a file name",
                path.display()
            );
        }
        atomic::check_writable(path).map_err(|e| {
            anyhow::anyhow!("{flag} {}: {e}; choose a writable path", path.display())
        })?;
    }
    let mut seen: Vec<(&str, &Path, FileIdentity)> = Vec::new();
    for (flag, path) in args.files() {
        if path.as_os_str() == "-" {
            continue;
        }
        let id = FileIdentity::of(path);
        if let Some((other, other_path, _)) = seen.iter().find(|(_, _, i)| *i == id) {
            bail!(
                "{other} {} and {flag} {} are the same file: the second would overwrite the first; give each export its own file",
                other_path.display(),
                path.display()
            );
        }
        seen.push((flag, path, id));
    }
    if let Some(dir) = &args.export_hdr {
        if dir.as_os_str() == "-" {
            bail!("--export-hdr writes several files: give a directory, not '-'");
        }
        if dir.exists() && !dir.is_dir() {
            bail!(
                "--export-hdr {}: exists and is not a directory; give a directory",
                dir.display()
            );
        }
    }
    Ok(())
}

/// What makes two paths one file: device and inode when it exists (links and `./` followed),
/// else its absolute path with the directory resolved.
#[derive(Debug, PartialEq, Eq)]
enum FileIdentity {
    Existing(u64, u64),
    New(std::path::PathBuf),
}

impl FileIdentity {
    fn of(path: &Path) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        if let Ok(meta) = std::fs::metadata(path) {
            return Self::Existing(meta.dev(), meta.ino());
        }
        let dir = atomic::directory_of(path);
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        Self::New(dir.join(path.file_name().unwrap_or_default()))
    }
}

/// Writes every export `args` asks for. A format that fails does not stop the others; the
/// failures are reported together at the end.
/// (The arguments were checked before the measurement: a directory removed since fails its own
/// exports only, not the ones whose paths are still fine.)
pub fn write_exports(args: &ExportArgs, data: &ExportData) -> Result<()> {
    let mut failures: Vec<String> = Vec::new();
    for (_, exporter, path) in FILE_EXPORTS {
        let Some(path) = path(args) else { continue };
        let written = exporter
            .render(data)
            .and_then(|bytes| Destination::parse(path).write(&bytes));
        if let Err(e) = written {
            failures.push(format!("{} export: {e:#}", exporter.name()));
        }
    }
    if let Some(dir) = &args.export_hdr
        && let Err(e) = hdr::write_dir(dir, data)
    {
        failures.push(format!("HdrHistogram export: {e:#}"));
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

/// The one table of single-file exports: each one's flag, its format, and where
/// [`ExportArgs`] keeps its path. A new format is a row here, a field in `ExportArgs` and its
/// `Exporter`.
type PathOf = fn(&ExportArgs) -> Option<&Path>;
const FILE_EXPORTS: [(&str, &dyn Exporter, PathOf); 7] = [
    ("--export-json", &json::Json, |a| a.export_json.as_deref()),
    ("--export-csv", &csv::Csv, |a| a.export_csv.as_deref()),
    ("--export-prom", &prometheus::Prometheus, |a| {
        a.export_prom.as_deref()
    }),
    ("--export-markdown", &markdown::Markdown, |a| {
        a.export_markdown.as_deref()
    }),
    ("--export-html", &html::Html, |a| a.report.as_deref()),
    ("--export-folded", &folded::Folded, |a| {
        a.export_folded.as_deref()
    }),
    ("--export-pprof", &pprof::Pprof, |a| {
        a.export_pprof.as_deref()
    }),
];

impl ExportArgs {
    /// The single-file flags that were given, with their flag names.
    #[must_use]
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        FILE_EXPORTS
            .iter()
            .filter_map(|(flag, _, path)| path(self).map(|p| (*flag, p)))
            .collect()
    }

    /// Whether any export was asked for.
    #[must_use]
    pub fn any(&self) -> bool {
        !self.files().is_empty() || self.export_hdr.is_some()
    }
}

impl ExportData {
    /// QPS of `group`'s runs (or of the group itself when it has no runs) and their spread.
    #[must_use]
    pub fn qps_of(&self, group: &Measurement) -> (Vec<f64>, Option<crate::samples::Spread>) {
        let runs = self.runs_of(group);
        let sources: Vec<&Measurement> = if runs.is_empty() { vec![group] } else { runs };
        let qps: Vec<f64> = sources
            .iter()
            .filter_map(|m| m.load.as_ref().map(|l| l.qps))
            .collect();
        let spread = crate::samples::Spread::of(&qps);
        (qps, spread)
    }
}
