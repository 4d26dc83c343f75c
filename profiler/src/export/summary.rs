//! The report of an [`ExportData`] that carries none of its own (`attach`, or data made in a
//! test): a load section when there was load, and per measurement its syscall table and, for
//! several processes, its per-process table.

use super::{ExportData, Measurement};
use crate::{
    report::{
        document::{Document, Part, Section},
        table::{Table, errors_cell},
        units::{duration, duration_ns, percent},
    },
    stats::SyscallSummary,
};

/// The report built from the measurements alone.
#[must_use]
pub fn document(data: &ExportData) -> Document {
    let summaries = data.summaries();
    let mut sections = Vec::new();
    if summaries.iter().any(|m| m.load.is_some()) {
        sections.push(Section::new("Load", load_table(data, &summaries)));
    }
    for m in &summaries {
        let (table, notes) = syscall_table_parts(m);
        let mut section = Section {
            title: format!("Syscalls: {}", m.label()),
            table,
            notes,
        };
        if section.table.is_none() {
            section
                .notes
                .insert(0, "No timed syscalls were made.".into());
        }
        sections.push(section);
        if m.syscalls.processes.len() > 1 {
            sections.push(Section::new(
                format!("Per process: {}", m.label()),
                process_table(m),
            ));
        }
    }
    Document {
        parts: vec![Part {
            heading: String::new(),
            notes: Vec::new(),
            sections,
        }],
    }
}

fn load_table(data: &ExportData, summaries: &[&Measurement]) -> Table {
    let mut t = Table::new([
        "variant",
        "concurrency",
        "runs",
        "QPS mean ± σ",
        "QPS min … max",
        "requests",
        "p50",
        "p99",
        "p99.9",
        "errors",
    ]);
    for m in summaries.iter().filter(|m| m.load.is_some()) {
        let (_, spread) = data.qps_of(m);
        let load = m.load.as_ref().expect("filtered on load");
        let q = |q: f64| {
            if load.latency.is_empty() {
                "-".to_owned()
            } else {
                duration(load.latency.value_at_quantile(q))
            }
        };
        let errors: u64 = load.errors.values().sum();
        t.row(vec![
            m.variant.clone().unwrap_or_default(),
            m.concurrency.map(|c| c.to_string()).unwrap_or_default(),
            spread.map_or(0, |s| s.n).to_string(),
            spread.map_or_else(
                || "-".into(),
                |s| format!("{:.0} ± {:.0}", s.mean, s.stddev),
            ),
            spread.map_or_else(|| "-".into(), |s| format!("{:.0} … {:.0}", s.min, s.max)),
            load.requests.to_string(),
            q(0.5),
            q(0.99),
            q(0.999),
            errors.to_string(),
        ]);
    }
    t
}

/// The syscall table of one measurement and the lines under it (events per call, drops).
fn syscall_table_parts(m: &Measurement) -> (Option<Table>, Vec<String>) {
    let snapshot = &m.syscalls;
    let total_time = snapshot.total_ns() as f64;
    let mut t = Table::new([
        "syscall",
        "calls",
        "errors",
        "total",
        "mean",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "share",
        "calls/request",
        "dropped",
    ]);
    let mut rows: Vec<&SyscallSummary> = snapshot
        .syscalls
        .iter()
        .filter(|s| s.calls > 0 || s.dropped > 0)
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    for s in &rows {
        let q = |q: f64| duration(s.latency.value_at_quantile(q));
        t.row(vec![
            s.name.clone(),
            s.calls.to_string(),
            errors_cell(s),
            duration(s.total_ns),
            duration_ns(s.mean_ns()),
            q(0.5),
            q(0.9),
            q(0.99),
            q(0.999),
            duration(s.max_ns),
            percent(s.total_ns as f64, total_time),
            m.calls_per_request(s)
                .map_or_else(|| "-".into(), |c| format!("{c:.3}")),
            s.dropped.to_string(),
        ]);
    }
    let mut notes = Vec::new();
    for s in &snapshot.syscalls {
        if let Some(events) = s.events.as_ref().filter(|e| e.total() > 0) {
            notes.push(format!(
                "{}: {:.2} events per call (p50 {}, p99 {}, max {}).",
                s.name,
                events.mean(),
                events.value_at_quantile(0.5),
                events.value_at_quantile(0.99),
                events.range().map_or(0, |r| r.1)
            ));
        }
    }
    let lost = snapshot.dropped.lost();
    notes.push(format!(
        "Dropped events: {lost}{}.",
        if lost == 0 {
            " (every call was recorded)"
        } else {
            ""
        }
    ));
    for (reason, count) in snapshot.dropped.nonzero() {
        notes.push(format!("{count} {}.", reason.describe()));
    }
    (if rows.is_empty() { None } else { Some(t) }, notes)
}

fn process_table(m: &Measurement) -> Table {
    let names: Vec<String> = m
        .syscalls
        .syscalls
        .iter()
        .map(|s| format!("{} calls", s.name))
        .collect();
    let mut header = vec!["pid", "calls", "errors", "total"];
    header.extend(names.iter().map(String::as_str));
    let mut t = Table::new(header);
    for p in &m.syscalls.processes {
        let mut row = vec![
            if p.pid == 0 {
                "other".to_owned()
            } else {
                p.pid.to_string()
            },
            p.total_calls().to_string(),
            p.syscalls.iter().map(|s| s.errors).sum::<u64>().to_string(),
            duration(p.syscalls.iter().map(|s| s.total_ns).sum()),
        ];
        row.extend(p.syscalls.iter().map(|s| s.calls.to_string()));
        t.row(row);
    }
    t
}
