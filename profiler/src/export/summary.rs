//! The report of an [`ExportData`] that carries none of its own (`attach`, or data made in a
//! test): a load section when there was load, and per measurement its syscall table and, for
//! several processes, its per-process table.

use super::{ExportData, Measurement};
use crate::{
    report::{
        document::{Document, Part, Section},
        table::{self, Table},
        units::duration,
    },
    stats::SyscallSummary,
};

/// The title of `--slow`'s section.
pub const SLOW_TITLE: &str = "Slowest calls";

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
            text: None,
        };
        if section.table.is_none() {
            section
                .notes
                .insert(0, "No timed syscalls were made.".into());
        }
        sections.push(section);
        if let Some(t) = table::off_cpu_table(&m.syscalls) {
            sections.push(Section::new(
                format!("{}: {}", table::OFF_CPU_TITLE, m.label()),
                t,
            ));
        }
        if table::per_process_rows(&m.syscalls) {
            sections.push(Section::new(
                format!("{}: {}", table::process_title(&m.syscalls), m.label()),
                table::process_summary(&m.syscalls),
            ));
        }
        if let Some(slow) = &m.slow {
            sections.push(slow.section(&format!("{}: {}", SLOW_TITLE, m.label())));
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
            spread.map_or_else(|| "-".into(), |s| s.mean_and_sigma()),
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
    let per_request = |s: &SyscallSummary| m.calls_per_request(s);
    table::syscall_summary(
        &m.syscalls,
        m.load
            .is_some()
            .then_some(&per_request as &table::PerRequest<'_>),
    )
}
