//! The report of an [`ExportData`] that carries none of its own (`attach`, serve's flight
//! recordings): per measurement its syscall table and, for several processes, its per-process
//! table. `run` brings its own report (`run::report`), with its load and verdicts.

use super::{ExportData, Measurement};
use crate::{
    report::{
        document::{Document, Part, Section},
        table::{self, Table},
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
