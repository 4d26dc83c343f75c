//! `--export-json`: everything measured, with the histogram buckets themselves. The schema is
//! `docs/EXPORT_SCHEMA.md`; bump [`SCHEMA_VERSION`](super::SCHEMA_VERSION) on incompatible changes.

use std::collections::BTreeMap;

use anyhow::Result;
use hdrhistogram::Histogram;
use profiler_common::{DropReason, ErrnoClass};
use serde::Serialize;

use super::{
    Comparison, ExportData, Exporter, LoadSummary, Measurement, Metadata, SCHEMA_VERSION,
    StraceComparison,
};
use crate::{
    report,
    stats::{
        Bucket, Figure, QUANTILES, ReturnUnit, Snapshot, SyscallSummary, Value, syscall_figures,
    },
};

/// The JSON format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Json;

impl Exporter for Json {
    fn name(&self) -> &'static str {
        "JSON"
    }

    fn render(&self, data: &ExportData) -> Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(&Document::from(data))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// The stable name of a drop reason in exports.
#[must_use]
pub fn drop_reason_key(reason: DropReason) -> &'static str {
    match reason {
        DropReason::NoStart => "no_start",
        DropReason::IdOutOfRange => "id_out_of_range",
        DropReason::NoSlot => "no_slot",
        DropReason::ProcessTableFull => "process_table_full",
        DropReason::CgroupTableFull => "cgroup_table_full",
        DropReason::Ia32Socketcall => "ia32_socketcall",
    }
}

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    partial: bool,
    failures: &'a [String],
    metadata: &'a Metadata,
    measurements: Vec<MeasurementJson<'a>>,
    comparisons: &'a [Comparison],
    strace: &'a [StraceComparison],
    /// Every section of the report, as the terminal showed it (cells as printed).
    report: std::borrow::Cow<'a, report::document::Document>,
}

impl<'a> From<&'a ExportData> for Document<'a> {
    fn from(data: &'a ExportData) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            partial: data.partial || !data.failures.is_empty(),
            failures: &data.failures,
            metadata: &data.metadata,
            measurements: data
                .measurements
                .iter()
                .map(MeasurementJson::from)
                .collect(),
            comparisons: &data.comparisons,
            strace: &data.strace,
            report: data.document(),
        }
    }
}

#[derive(Serialize)]
struct MeasurementJson<'a> {
    variant: Option<&'a str>,
    concurrency: Option<usize>,
    run: Option<u32>,
    /// `run`: the CPUs the server ran on ("0-1", "any"); null for `attach`.
    server_cpus: Option<&'a str>,
    failure: Option<&'a str>,
    load: Option<LoadJson<'a>>,
    syscalls: Vec<SyscallJson<'a>>,
    processes: Vec<ProcessJson<'a>>,
    dropped: DroppedJson,
    /// What the programs could not see (empty when nothing was left out).
    not_seen: &'a [String],
    /// Every call of the traced processes per syscall, the table's and the rest; null where
    /// they were not counted.
    every_syscall: Option<&'a [crate::stats::EveryCall]>,
    /// The share of their syscall time in syscalls the table leaves out (0–1); null where
    /// every call was not counted.
    left_out_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slow: Option<&'a crate::slow::SlowReport>,
    /// `run`'s warm engine: the slices the measurement sums.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    slices: &'a [super::Slice],
}

impl<'a> From<&'a Measurement> for MeasurementJson<'a> {
    fn from(m: &'a Measurement) -> Self {
        Self {
            variant: m.variant.as_deref(),
            concurrency: m.concurrency,
            run: m.run,
            server_cpus: m.server_cpus.as_deref(),
            failure: m.failure.as_deref(),
            load: m.load.as_ref().map(LoadJson::from),
            syscalls: {
                let figures: Vec<Figure> =
                    syscall_figures().into_iter().filter(|f| f.json).collect();
                m.syscalls
                    .syscalls
                    .iter()
                    .map(|s| SyscallJson::new(s, m, &figures))
                    .collect()
            },
            processes: processes(&m.syscalls),
            dropped: DroppedJson::from(&m.syscalls),
            not_seen: &m.syscalls.not_seen,
            every_syscall: m.syscalls.every.as_deref(),
            left_out_share: m.syscalls.left_out().map(|l| l.share),
            slow: m.slow.as_ref(),
            slices: &m.slices,
        }
    }
}

#[derive(Serialize)]
struct LoadJson<'a> {
    requests: u64,
    elapsed_s: f64,
    qps: f64,
    errors: &'a BTreeMap<String, u64>,
    server_cpu_ns: Option<CpuJson>,
    latency_ns: RecordedJson,
    /// One run's noise on the server's CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    noise: Option<&'a crate::noise::Noise>,
}

#[derive(Serialize)]
struct CpuJson {
    user: u64,
    system: u64,
}

impl<'a> From<&'a LoadSummary> for LoadJson<'a> {
    fn from(l: &'a LoadSummary) -> Self {
        Self {
            requests: l.requests,
            elapsed_s: l.elapsed_s,
            qps: l.qps,
            errors: &l.errors,
            server_cpu_ns: l
                .server_cpu_ns
                .map(|(user, system)| CpuJson { user, system }),
            latency_ns: RecordedJson::from(&l.latency),
            noise: l.noise.as_ref(),
        }
    }
}

/// An hdrhistogram as count, mean, percentiles and its non-empty buckets.
#[derive(Serialize)]
struct RecordedJson {
    count: u64,
    min: u64,
    mean: f64,
    max: u64,
    stdev: f64,
    percentiles: BTreeMap<&'static str, u64>,
    buckets: Vec<Bucket>,
}

impl From<&Histogram<u64>> for RecordedJson {
    fn from(h: &Histogram<u64>) -> Self {
        let empty = h.is_empty();
        Self {
            count: h.len(),
            min: if empty { 0 } else { h.min() },
            mean: if empty { 0.0 } else { h.mean() },
            max: if empty { 0 } else { h.max() },
            stdev: if empty { 0.0 } else { h.stdev() },
            percentiles: QUANTILES
                .iter()
                .map(|q| (q.key, h.value_at_quantile(q.q)))
                .collect(),
            buckets: h
                .iter_recorded()
                .map(|v| Bucket {
                    low: h.lowest_equivalent(v.value_iterated_to()),
                    high: v.value_iterated_to(),
                    count: v.count_at_value(),
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct SyscallJson<'a> {
    name: &'a str,
    /// One field per JSON figure of [`syscall_figures`]: `calls`, `total_ns`, `mean_ns`,
    /// `min_ns`, `max_ns`, `p50_ns` … `p99_9_ns`, `dropped`.
    #[serde(flatten)]
    figures: serde_json::Map<String, serde_json::Value>,
    errors: ErrorsJson,
    calls_per_request: Option<f64>,
    latency_buckets: Vec<Bucket>,
    /// `events_per_call` (the epoll calls) and `bytes_per_call` (the read/write family): the
    /// one of [`crate::stats::ReturnUnit`] the syscall returns, or both null.
    events_per_call: Option<ReturnedJson>,
    bytes_per_call: Option<ReturnedJson>,
    off_cpu: Option<OffCpuJson>,
}

/// `--off-cpu`: the calls' time on and off the CPU (the three totals add up to `total_ns`).
#[derive(Serialize)]
struct OffCpuJson {
    on_cpu_ns: u64,
    blocked_ns: u64,
    runnable_ns: u64,
    on_cpu_p50_ns: u64,
    on_cpu_p99_ns: u64,
    on_cpu_buckets: Vec<Bucket>,
}

impl<'a> SyscallJson<'a> {
    fn new(s: &'a SyscallSummary, m: &Measurement, figures: &[Figure]) -> Self {
        Self {
            name: &s.name,
            figures: figures
                .iter()
                .filter_map(|f| {
                    let value = match (f.value)(s) {
                        Value::Count(n) => serde_json::Value::from(n),
                        Value::Mean(x) => serde_json::Value::from(x),
                        Value::Absent => return None,
                    };
                    Some((f.key.clone(), value))
                })
                .collect(),
            errors: ErrorsJson {
                total: s.errors.total(),
                by_errno: ErrnoClass::ALL
                    .iter()
                    .map(|c| (c.name(), s.errors.get(*c)))
                    .filter(|(_, n)| *n > 0)
                    .collect(),
            },
            calls_per_request: m.calls_per_request(s),
            latency_buckets: s.latency.buckets().collect(),
            events_per_call: returned(s, ReturnUnit::Events),
            bytes_per_call: returned(s, ReturnUnit::Bytes),
            off_cpu: s.time_split().zip(s.off_cpu.as_ref()).map(
                |((on_cpu_ns, blocked_ns, runnable_ns), split)| OffCpuJson {
                    on_cpu_ns,
                    blocked_ns,
                    runnable_ns,
                    on_cpu_p50_ns: split.on_cpu.value_at_quantile(0.5),
                    on_cpu_p99_ns: split.on_cpu.value_at_quantile(0.99),
                    on_cpu_buckets: split.on_cpu.buckets().collect(),
                },
            ),
        }
    }
}

#[derive(Serialize)]
struct ErrorsJson {
    total: u64,
    by_errno: BTreeMap<&'static str, u64>,
}

#[derive(Serialize)]
struct ReturnedJson {
    calls: u64,
    /// The exact sum of the returned values.
    total: u64,
    mean: f64,
    p50: u64,
    p99: u64,
    max: u64,
    /// The share of calls that returned 0 (no event; end of file).
    zero_share: f64,
    /// The share that transferred fewer bytes than asked (read, write, recvfrom, sendto,
    /// pread64, pwrite64; null for the others).
    short_share: Option<f64>,
    buckets: Vec<Bucket>,
}

/// `s`'s histogram of returned counts if they count `unit`.
fn returned(s: &SyscallSummary, unit: ReturnUnit) -> Option<ReturnedJson> {
    let r = s.returned_as(unit)?;
    let h = &r.per_call;
    Some(ReturnedJson {
        calls: h.total(),
        total: r.total,
        mean: r.mean(),
        p50: h.value_at_quantile(0.5),
        p99: h.value_at_quantile(0.99),
        max: h.range().map_or(0, |r| r.1),
        zero_share: r.zero_share(),
        short_share: r.short_share(),
        buckets: h.buckets().collect(),
    })
}

#[derive(Serialize)]
struct ProcessJson<'a> {
    /// 0 is the shared "other processes" entry (or a cgroup's row).
    pid: u32,
    /// `--cgroup`: the cgroup this row counts (its path below the root), else null.
    cgroup: Option<&'a str>,
    /// The container that cgroup is, when it is one's (runtime, id, name, kubernetes, source).
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a crate::container::Container>,
    calls: u64,
    errors: u64,
    total_ns: u64,
    syscalls: BTreeMap<&'a str, crate::stats::RowSyscall>,
}

fn processes(snapshot: &Snapshot) -> Vec<ProcessJson<'_>> {
    snapshot
        .processes
        .iter()
        .map(|p| ProcessJson {
            pid: p.pid,
            cgroup: p.cgroup.as_deref(),
            container: p.container.as_ref(),
            calls: p.total_calls(),
            errors: p.syscalls.iter().map(|s| s.errors).sum(),
            total_ns: p.syscalls.iter().map(|s| s.total_ns).sum(),
            syscalls: snapshot
                .syscalls
                .iter()
                .zip(&p.syscalls)
                .filter(|(_, s)| s.calls > 0)
                .map(|(name, s)| (name.name.as_str(), *s))
                .collect(),
        })
        .collect()
}

#[derive(Serialize)]
struct DroppedJson {
    lost: u64,
    by_reason: BTreeMap<&'static str, u64>,
}

impl From<&Snapshot> for DroppedJson {
    fn from(s: &Snapshot) -> Self {
        Self {
            lost: s.dropped.lost(),
            by_reason: DropReason::ALL
                .iter()
                .map(|r| (drop_reason_key(*r), s.dropped.0[*r as usize]))
                .collect(),
        }
    }
}
