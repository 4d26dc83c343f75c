//! `--export-markdown`: the report's tables as GitHub-flavoured Markdown, ready to paste.

use std::fmt::Write as _;

use anyhow::Result;

use super::{ExportData, Exporter, Measurement};
use crate::{
    report::{
        table::errors_cell,
        units::{duration, duration_ns, percent},
    },
    stats::SyscallSummary,
};

/// The Markdown format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Markdown;

impl Exporter for Markdown {
    fn name(&self) -> &'static str {
        "Markdown"
    }

    fn render(&self, data: &ExportData) -> Result<Vec<u8>> {
        Ok(render(data).into_bytes())
    }
}

/// A Markdown table: header, alignment row (first column left, the rest right), rows.
#[derive(Debug, Default)]
pub struct MdTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl MdTable {
    /// A table with these columns.
    #[must_use]
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Column names.
    #[must_use]
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// The rows, as added.
    #[must_use]
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// The table's text, cells with `|` escaped.
    #[must_use]
    pub fn render(&self) -> String {
        let line = |cells: &[String]| {
            format!(
                "| {} |\n",
                cells
                    .iter()
                    .map(|c| cell(c))
                    .collect::<Vec<_>>()
                    .join(" | ")
            )
        };
        let mut out = line(&self.header);
        let align: Vec<String> = (0..self.header.len())
            .map(|i| {
                if i == 0 {
                    ":---".to_owned()
                } else {
                    "---:".to_owned()
                }
            })
            .collect();
        out.push_str(&format!("|{}|\n", align.join("|")));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The whole report.
#[must_use]
pub fn render(data: &ExportData) -> String {
    let md = &data.metadata;
    let mut out = String::from("# syscall-profiler report\n\n");
    if let Some(note) = data.partial_note() {
        let _ = writeln!(out, "> **Partial:** {}.\n", note.replace('\n', " "));
    }
    let _ = writeln!(
        out,
        "`profiler {}` on kernel {}, {} ({} CPUs), {:.1} s, profiler {}.\n",
        md.command, md.kernel, md.cpu_model, md.cpus_online, md.duration_s, md.profiler_version
    );
    if !md.settings.is_empty() {
        let mut t = MdTable::new(&["setting", "value"]);
        for (k, v) in &md.settings {
            t.row(vec![k.clone(), v.clone()]);
        }
        out.push_str(&t.render());
        out.push('\n');
    }
    let summaries = data.summaries();
    if summaries.iter().any(|m| m.load.is_some()) {
        out.push_str("## Load\n\n");
        out.push_str(&load_table(data, &summaries).render());
        out.push('\n');
    }
    for m in &summaries {
        let _ = writeln!(out, "## Syscalls: {}\n", m.label());
        out.push_str(&syscall_table(m));
        out.push('\n');
        if m.syscalls.processes.len() > 1 {
            let _ = writeln!(out, "Per process:\n");
            out.push_str(&process_table(m).render());
            out.push('\n');
        }
    }
    out
}

pub(crate) fn load_table(data: &ExportData, summaries: &[&Measurement]) -> MdTable {
    let mut t = MdTable::new(&[
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
pub(crate) fn syscall_table_parts(m: &Measurement) -> (Option<MdTable>, Vec<String>) {
    let snapshot = &m.syscalls;
    let total_time = snapshot.total_ns() as f64;
    let mut t = MdTable::new(&[
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

fn syscall_table(m: &Measurement) -> String {
    let (table, notes) = syscall_table_parts(m);
    let mut out = table.map_or_else(
        || "No timed syscalls were made.\n".to_owned(),
        |t| t.render(),
    );
    for note in notes {
        let _ = write!(out, "\n{note}\n");
    }
    out
}

pub(crate) fn process_table(m: &Measurement) -> MdTable {
    let names: Vec<String> = m
        .syscalls
        .syscalls
        .iter()
        .map(|s| format!("{} calls", s.name))
        .collect();
    let mut header = vec!["pid", "calls", "errors", "total"];
    header.extend(names.iter().map(String::as_str));
    let mut t = MdTable::new(&header);
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
