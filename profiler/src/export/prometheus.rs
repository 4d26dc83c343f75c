//! `--export-prom` and `profiler serve`: the Prometheus text exposition format (0.0.4).
//!
//! Kernel buckets hold `[low, high]` inclusive integer nanoseconds; a Prometheus bucket counts
//! observations `<= le`. Every `le` here is the `high` of a kernel bucket, so a kernel bucket lies
//! wholly at or below an `le` or wholly above it, and no count moves to the wrong bucket (the bug of
//! ebpf_exporter issue #488, which used the lower bound). To keep a scrape small the kernel's 32
//! buckets per power of two are merged to one: `le = (2^k - 1) ns`.

use std::fmt::Write as _;

use anyhow::Result;
use profiler_common::{DropReason, MAX_TRACKABLE_VALUE};

use super::{ExportData, Exporter, Measurement, json::drop_reason_key};
use crate::stats::{LatencyHistogram, ReturnUnit, Value, syscall_figures};

/// The Prometheus text format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Prometheus;

impl Exporter for Prometheus {
    fn name(&self) -> &'static str {
        "Prometheus"
    }

    fn render(&self, data: &ExportData) -> Result<Vec<u8>> {
        Ok(render(data).into_bytes())
    }
}

/// Metric name prefix.
pub const PREFIX: &str = "syscall_profiler";

/// Latency bucket upper bounds in ns: `2^k - 1` for k = 6..=36 (63 ns .. 68.7 s), each the
/// `high` of a kernel bucket; the last is the kernel's largest trackable value.
#[must_use]
pub fn latency_bounds_ns() -> Vec<u64> {
    (6..=36).map(|k| (1u64 << k) - 1).collect()
}

/// Cumulative counts at each bound (`<= bound`), then the total for `+Inf`. When the kernel
/// clamped values above its largest bucket (`clamped`), that bucket's count goes to `+Inf` only.
#[must_use]
pub fn cumulative(hist: &LatencyHistogram, bounds: &[u64], clamped: bool) -> (Vec<u64>, u64) {
    let mut counts = vec![0u64; bounds.len()];
    let mut total = 0;
    for b in hist.buckets() {
        total += b.count;
        if clamped && b.high == MAX_TRACKABLE_VALUE {
            continue;
        }
        // The first bound at or above the bucket's high holds the whole bucket (bounds are highs).
        let first = bounds.partition_point(|&le| le < b.high);
        for c in &mut counts[first..] {
            *c += b.count;
        }
    }
    (counts, total)
}

/// The native histogram family `serve` adds to its protobuf exposition.
pub const NATIVE_LATENCY_FAMILY: &str = "syscall_profiler_syscall_latency_native_seconds";

/// Each syscall's latency of every summary measurement, for the native histogram family (the
/// protobuf exposition: [`super::prometheus_proto`]), with the labels of the text format's.
#[must_use]
pub fn native_series(data: &ExportData) -> Vec<super::prometheus_proto::NativeSeries<'_>> {
    data.summaries()
        .into_iter()
        .flat_map(|m| {
            m.syscalls
                .syscalls
                .iter()
                .map(move |s| super::prometheus_proto::NativeSeries {
                    labels: labels(m, &s.name),
                    latency: &s.latency,
                    sum_s: s.total_ns as f64 / 1e9,
                })
        })
        .collect()
}

/// Renders every summary measurement of `data` (see [`ExportData::summaries`]).
#[must_use]
pub fn render(data: &ExportData) -> String {
    let summaries = data.summaries();
    let mut out = String::with_capacity(16 * 1024);
    if let Some(note) = data.partial_note() {
        // One comment line: a failure's text may hold a newline (a server's stderr tail).
        let _ = writeln!(out, "# partial: {}", note.replace('\n', " "));
    }
    let latency_bounds = latency_bounds_ns();
    let latency_le: Vec<String> = latency_bounds
        .iter()
        .map(|ns| format_float(*ns as f64 / 1e9))
        .collect();

    family(
        &mut out,
        "syscall_latency_seconds",
        "histogram",
        "Syscall latency, entry to exit.",
    );
    for m in &summaries {
        for s in &m.syscalls.syscalls {
            let labels = labels(m, &s.name);
            let (counts, total) =
                cumulative(&s.latency, &latency_bounds, s.max_ns > MAX_TRACKABLE_VALUE);
            histogram(
                &mut out,
                "syscall_latency_seconds",
                &labels,
                &latency_le,
                &counts,
                total,
                s.total_ns as f64 / 1e9,
            );
        }
    }
    // The profiler's own quantiles (the reports' p50 … p99.9), cumulative since start: what a
    // native histogram's `histogram_quantile` is checked against, and a p99 for scrapers
    // without native histograms.
    family(
        &mut out,
        "syscall_latency_quantiles_seconds",
        "summary",
        "Syscall latency quantiles since start, from the kernel's histogram (each within 1/64 of the value it names, within the call's min and max).",
    );
    for m in &summaries {
        for s in &m.syscalls.syscalls {
            let labels = labels(m, &s.name);
            for q in &crate::stats::QUANTILES {
                let _ = writeln!(
                    out,
                    "{PREFIX}_syscall_latency_quantiles_seconds{{{labels},quantile=\"{}\"}} {}",
                    q.q,
                    format_float(s.quantile_ns(q.q) as f64 / 1e9)
                );
            }
            let _ = writeln!(
                out,
                "{PREFIX}_syscall_latency_quantiles_seconds_sum{{{labels}}} {}",
                format_float(s.total_ns as f64 / 1e9)
            );
            let _ = writeln!(
                out,
                "{PREFIX}_syscall_latency_quantiles_seconds_count{{{labels}}} {}",
                s.calls
            );
        }
    }
    // The per-syscall counters, one family per declared series family, in declaration order.
    let figures = syscall_figures();
    let mut families: Vec<(&str, &str)> = Vec::new();
    for series in figures.iter().filter_map(|f| f.counter) {
        if !families.iter().any(|(name, _)| *name == series.family) {
            families.push((series.family, series.help));
        }
    }
    for (name, help) in families {
        // A family whose every value is absent (short calls, no sized syscall traced) is left
        // out, header and all.
        let mut series_lines = String::new();
        for m in &summaries {
            for s in &m.syscalls.syscalls {
                let labels = labels(m, &s.name);
                for (series, value) in figures.iter().filter_map(|f| {
                    let value = (f.value)(s);
                    f.counter
                        .filter(|p| p.family == name && value != Value::Absent)
                        .map(|p| (p, value))
                }) {
                    let extra = series
                        .label
                        .map(|(k, v)| format!(",{k}=\"{}\"", escape(v)))
                        .unwrap_or_default();
                    let _ = writeln!(series_lines, "{PREFIX}_{name}{{{labels}{extra}}} {value}");
                }
            }
        }
        if !series_lines.is_empty() {
            family(&mut out, name, "counter", help);
            out.push_str(&series_lines);
        }
    }
    if summaries
        .iter()
        .any(|m| m.syscalls.syscalls.iter().any(|s| s.off_cpu.is_some()))
    {
        family(
            &mut out,
            "syscall_time_seconds_total",
            "counter",
            "Time inside syscalls by what the thread was doing (--off-cpu): on_cpu, blocked (switched out, waiting), runnable (waiting for a CPU); the three add up to the latency sum.",
        );
        for m in &summaries {
            for s in &m.syscalls.syscalls {
                let Some((on, blocked, runnable)) = s.time_split() else {
                    continue;
                };
                let labels = labels(m, &s.name);
                for (state, ns) in [("on_cpu", on), ("blocked", blocked), ("runnable", runnable)] {
                    let _ = writeln!(
                        out,
                        "{PREFIX}_syscall_time_seconds_total{{{labels},state=\"{state}\"}} {}",
                        format_float(ns as f64 / 1e9)
                    );
                }
            }
        }
        family(
            &mut out,
            "syscall_on_cpu_seconds",
            "histogram",
            "On-CPU time of each syscall (--off-cpu): its latency less the time off the CPU.",
        );
        for m in &summaries {
            for s in &m.syscalls.syscalls {
                let (Some((on, _, _)), Some(split)) = (s.time_split(), &s.off_cpu) else {
                    continue;
                };
                let (counts, total) = cumulative(&split.on_cpu, &latency_bounds, false);
                histogram(
                    &mut out,
                    "syscall_on_cpu_seconds",
                    &labels(m, &s.name),
                    &latency_le,
                    &counts,
                    total,
                    on as f64 / 1e9,
                );
            }
        }
    }
    for unit in ReturnUnit::ALL {
        if !summaries.iter().any(|m| {
            m.syscalls
                .syscalls
                .iter()
                .any(|s| s.returned_as(unit).is_some())
        }) {
            continue;
        }
        let name = format!("syscall_{}_per_call", unit.key());
        let bounds = unit.bounds();
        let le: Vec<String> = bounds.iter().map(u64::to_string).collect();
        family(&mut out, &name, "histogram", unit.help());
        for m in &summaries {
            for s in &m.syscalls.syscalls {
                if let Some(r) = s.returned_as(unit) {
                    let labels = labels(m, &s.name);
                    let (counts, total) = cumulative(&r.per_call, &bounds, false);
                    histogram(
                        &mut out,
                        &name,
                        &labels,
                        &le,
                        &counts,
                        total,
                        r.total as f64,
                    );
                }
            }
        }
    }
    if summaries
        .iter()
        .any(|m| m.syscalls.processes.iter().any(|p| p.cgroup.is_some()))
    {
        type Value = fn(&crate::stats::RowSyscall) -> String;
        let families: [(&str, &str, Value); 3] = [
            (
                "cgroup_syscall_calls_total",
                "Completed syscalls per cgroup (--cgroup, --by-cgroup).",
                |c| c.calls.to_string(),
            ),
            (
                "cgroup_syscall_errors_total",
                "Failed syscalls per cgroup (--cgroup, --by-cgroup).",
                |c| c.errors.to_string(),
            ),
            (
                "cgroup_syscall_seconds_total",
                "Time inside syscalls per cgroup (--cgroup, --by-cgroup).",
                |c| format_float(c.total_ns as f64 / 1e9),
            ),
        ];
        for (name, help, value) in families {
            family(&mut out, name, "counter", help);
            for m in &summaries {
                for p in &m.syscalls.processes {
                    let Some(cgroup) = &p.cgroup else { continue };
                    let container = p
                        .container
                        .iter()
                        .flat_map(crate::container::Container::labels)
                        .fold(String::new(), |mut out, (k, v)| {
                            let _ = write!(out, ",{k}=\"{}\"", escape(&v));
                            out
                        });
                    for (s, counts) in m.syscalls.syscalls.iter().zip(&p.syscalls) {
                        let labels = format!(
                            "{},cgroup=\"{}\"{container}",
                            labels(m, &s.name),
                            escape(cgroup)
                        );
                        let _ = writeln!(out, "{PREFIX}_{name}{{{labels}}} {}", value(counts));
                    }
                }
            }
        }
    }
    family(
        &mut out,
        "dropped_events_total",
        "counter",
        "Events the kernel programs could not record, by reason.",
    );
    for m in &summaries {
        let base = group_labels(m);
        for reason in DropReason::ALL {
            let sep = if base.is_empty() { "" } else { "," };
            let labels = format!("{base}{sep}reason=\"{}\"", drop_reason_key(reason));
            sample(
                &mut out,
                "dropped_events_total",
                &labels,
                "",
                m.syscalls.dropped.0[reason as usize],
            );
        }
    }
    // What the table leaves out (where every call was counted: the tracepoint front end's
    // default, or --syscalls all); absent, never 0, where it was not measured.
    if summaries.iter().any(|m| m.syscalls.left_out().is_some()) {
        family(
            &mut out,
            "left_out_share",
            "gauge",
            "Share (0 to 1) of the traced processes' syscall time in syscalls the table does not time, from every call counted on the raw tracepoints.",
        );
        for m in &summaries {
            if let Some(left) = m.syscalls.left_out() {
                let _ = writeln!(
                    out,
                    "{PREFIX}_left_out_share{{{}}} {}",
                    group_labels(m),
                    format_float(left.share)
                );
            }
        }
    }
    if summaries.iter().any(|m| m.load.is_some()) {
        family(
            &mut out,
            "load_requests_total",
            "counter",
            "Requests the load generator completed correctly.",
        );
        for m in &summaries {
            if let Some(load) = &m.load {
                sample(
                    &mut out,
                    "load_requests_total",
                    &group_labels(m),
                    "",
                    load.requests,
                );
            }
        }
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {PREFIX}_{name} {help}");
    let _ = writeln!(out, "# TYPE {PREFIX}_{name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, extra: &str, value: u64) {
    let _ = writeln!(out, "{PREFIX}_{name}{{{labels}{extra}}} {value}");
}

fn histogram(
    out: &mut String,
    name: &str,
    labels: &str,
    le: &[String],
    counts: &[u64],
    total: u64,
    sum: f64,
) {
    for (le, count) in le.iter().zip(counts) {
        let _ = writeln!(
            out,
            "{PREFIX}_{name}_bucket{{{labels},le=\"{le}\"}} {count}"
        );
    }
    let _ = writeln!(
        out,
        "{PREFIX}_{name}_bucket{{{labels},le=\"+Inf\"}} {total}"
    );
    let _ = writeln!(out, "{PREFIX}_{name}_sum{{{labels}}} {}", format_float(sum));
    let _ = writeln!(out, "{PREFIX}_{name}_count{{{labels}}} {total}");
}

/// `syscall="close",variant="lt",...`: the syscall, then the measurement's group labels.
fn labels(m: &Measurement, syscall: &str) -> String {
    let group = group_labels(m);
    let sep = if group.is_empty() { "" } else { "," };
    format!("syscall=\"{}\"{sep}{group}", escape(syscall))
}

/// `variant`, `concurrency` and `run` where the measurement has them.
fn group_labels(m: &Measurement) -> String {
    let mut parts = Vec::new();
    if let Some(v) = &m.variant {
        parts.push(format!("variant=\"{}\"", escape(v)));
    }
    if let Some(c) = m.concurrency {
        parts.push(format!("concurrency=\"{c}\""));
    }
    if let Some(r) = m.run {
        parts.push(format!("run=\"{r}\""));
    }
    if let Some(cpus) = &m.server_cpus {
        parts.push(format!("server_cpus=\"{}\"", escape(cpus)));
    }
    parts.join(",")
}

/// A label value with `\`, `"` and newlines escaped as the text format requires.
#[must_use]
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A float as Go's strconv parses it: shortest round-trip decimal, no exponent surprises.
pub fn format_float(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "0".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use profiler_common::{bucket_index, bucket_upper_bound};

    use super::*;

    #[test]
    fn every_bound_is_the_high_of_a_kernel_bucket() {
        for b in latency_bounds_ns()
            .into_iter()
            .chain(ReturnUnit::ALL.into_iter().flat_map(ReturnUnit::bounds))
        {
            assert_eq!(
                bucket_upper_bound(bucket_index(b)),
                b,
                "bound {b} splits a kernel bucket"
            );
        }
        assert_eq!(*latency_bounds_ns().last().unwrap(), MAX_TRACKABLE_VALUE);
    }

    #[test]
    fn value_at_a_bound_is_in_that_bucket_and_one_more_is_in_the_next() {
        let bounds = latency_bounds_ns();
        for (i, &b) in bounds.iter().enumerate().take(bounds.len() - 1) {
            let mut at = LatencyHistogram::default();
            at.record_n(b, 1);
            let (counts, total) = cumulative(&at, &bounds, false);
            assert_eq!((counts[i], total), (1, 1), "{b} ns must count at le={b}");
            assert!(
                i == 0 || counts[i - 1] == 0,
                "{b} ns must not count below le={b}"
            );
            let mut above = LatencyHistogram::default();
            above.record_n(b + 1, 1);
            let (counts, _) = cumulative(&above, &bounds, false);
            assert_eq!(
                (counts[i], counts[i + 1]),
                (0, 1),
                "{} ns belongs to le={}",
                b + 1,
                bounds[i + 1]
            );
        }
    }

    #[test]
    fn cumulative_counts_equal_exact_counts_of_values_at_or_below_each_bound() {
        let values: Vec<u64> = (0..20_000u64)
            .map(|i| (i * i * 7919) % 5_000_000 + i % 97)
            .collect();
        let mut h = LatencyHistogram::default();
        for &v in &values {
            h.record_n(v, 1);
        }
        let bounds = latency_bounds_ns();
        let (counts, total) = cumulative(&h, &bounds, false);
        assert_eq!(total, values.len() as u64);
        for (le, got) in bounds.iter().zip(counts) {
            let exact = values.iter().filter(|v| *v <= le).count() as u64;
            assert_eq!(got, exact, "le={le}");
        }
    }

    #[test]
    fn clamped_values_count_only_under_inf() {
        let bounds = latency_bounds_ns();
        let mut h = LatencyHistogram::default();
        h.record_n(MAX_TRACKABLE_VALUE + 5, 2);
        let (counts, total) = cumulative(&h, &bounds, true);
        assert_eq!((*counts.last().unwrap(), total), (0, 2));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
