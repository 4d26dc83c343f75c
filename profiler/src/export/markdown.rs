//! `--export-markdown`: the report as GitHub-flavoured Markdown, ready to paste: the settings,
//! then every section of the report (the terminal's, for `run`).

use std::fmt::Write as _;

use anyhow::Result;

use super::{ExportData, Exporter};
use crate::report::table::Table;

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
        let mut t = Table::new(["setting", "value"]);
        for (k, v) in &md.settings {
            t.row([k.clone(), v.clone()]);
        }
        out.push_str(&t.to_markdown());
        out.push('\n');
    }
    out.push_str(&data.document().to_markdown());
    out
}
