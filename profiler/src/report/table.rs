//! The per-syscall table: one header row naming the columns, then one row per syscall.

use std::fmt::Write as _;

use super::units::{duration, duration_ns, percent};
use crate::stats::{QUANTILES, Snapshot, SyscallSummary};

/// A table: column names and rows of cells, built once and rendered as text, Markdown or HTML
/// (the first column left-aligned, the rest right-aligned: names, then numbers).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Table {
    #[serde(rename = "columns")]
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    #[must_use]
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Self {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (as many cells as columns).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Whether no row was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Renders with two spaces between columns; the first column left-aligned, the rest right.
    #[must_use]
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate().take(columns) {
                let pad = widths[i] - cell.chars().count();
                if i == 0 {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str("  ");
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// GitHub-flavoured Markdown: header, alignment row, rows; `|` escaped in cells.
    #[must_use]
    pub fn to_markdown(&self) -> String {
        let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
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
        let align: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { ":---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", align.join("|"));
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    /// An HTML `<table>`, cells escaped (the page's CSS aligns the columns).
    #[must_use]
    pub fn to_html(&self) -> String {
        let mut out = String::from("<table><thead><tr>");
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", escape_html(h));
        }
        out.push_str("</tr></thead><tbody>\n");
        for r in &self.rows {
            out.push_str("<tr>");
            for c in r {
                let _ = write!(out, "<td>{}</td>", escape_html(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
        out
    }
}

/// Text escaped for HTML and SVG.
#[must_use]
pub fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// "12 (EAGAIN)" style: the error count and its most frequent errno.
#[must_use]
pub fn errors_cell(s: &SyscallSummary) -> String {
    match s.errors.top() {
        None => "0".to_owned(),
        Some((class, _)) if s.errors.total() > 0 => {
            format!("{} ({})", s.errors.total(), class.name())
        }
        Some(_) => "0".to_owned(),
    }
}

/// Calls per request of a syscall, where the measurement had load.
pub type PerRequest<'a> = dyn Fn(&SyscallSummary) -> Option<f64> + 'a;

/// The per-syscall table of a snapshot (the syscalls that were called, by total time) and the
/// lines under it: events per call, drops. With `per_request` (a measurement with load), a
/// calls-per-request column. `None` for the table when no timed call was made. `attach`
/// prints it and every export of a trace carries it.
pub fn syscall_summary(
    snapshot: &Snapshot,
    per_request: Option<&PerRequest<'_>>,
) -> (Option<Table>, Vec<String>) {
    let total_time = snapshot.total_ns() as f64;
    let mut columns = vec!["syscall", "calls", "errors", "total", "mean"];
    columns.extend(QUANTILES.iter().map(|q| q.label));
    columns.extend(["max", "share"]);
    if per_request.is_some() {
        columns.push("calls/request");
    }
    columns.push("dropped");
    let mut table = Table::new(columns);
    let mut rows: Vec<&SyscallSummary> = snapshot
        .syscalls
        .iter()
        .filter(|s| s.calls > 0 || s.dropped > 0)
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    for s in &rows {
        let mut row = vec![
            s.name.clone(),
            s.calls.to_string(),
            errors_cell(s),
            duration(s.total_ns),
            duration_ns(s.mean_ns()),
        ];
        row.extend(QUANTILES.iter().map(|q| duration(s.quantile_ns(q.q))));
        row.extend([duration(s.max_ns), percent(s.total_ns as f64, total_time)]);
        if let Some(per_request) = per_request {
            row.push(per_request(s).map_or_else(|| "-".into(), |c| format!("{c:.3}")));
        }
        row.push(s.dropped.to_string());
        table.row(row);
    }
    let mut notes = Vec::new();
    for s in &snapshot.syscalls {
        if let Some(r) = s.returned.as_ref().filter(|r| r.per_call.total() > 0) {
            notes.push(format!("{}: {}", s.name, r.line()));
        }
    }
    let lost = snapshot.dropped.lost();
    notes.push(format!(
        "dropped: {lost}{}",
        if lost == 0 && snapshot.not_seen.is_empty() {
            " (every call was recorded)"
        } else {
            ""
        }
    ));
    for line in &snapshot.not_seen {
        notes.push(format!("not seen: {line}"));
    }
    if let Some(left_out) = snapshot.left_out() {
        notes.push(left_out.line());
    }
    for (reason, count) in snapshot.dropped.nonzero() {
        notes.push(format!("  {count} {}", reason.describe()));
    }
    ((!rows.is_empty()).then_some(table), notes)
}

/// The columns of [`off_cpu_cells`], after the syscall's name.
pub const OFF_CPU_COLUMNS: [&str; 8] = [
    "calls",
    "mean",
    "on-CPU",
    "blocked",
    "runnable",
    "blocked share",
    "on-CPU p50",
    "on-CPU p99",
];

/// With `--off-cpu`: per call, the mean latency and its mean on-CPU, blocked and runnable parts,
/// the blocked share of the time, and the on-CPU time's p50 and p99. `None` without the split
/// or without calls.
#[must_use]
pub fn off_cpu_cells(s: &SyscallSummary) -> Option<Vec<String>> {
    let (on, blocked, runnable) = s.time_split().filter(|_| s.calls > 0)?;
    let split = s.off_cpu.as_ref()?;
    let per_call = |ns: u64| duration_ns(ns as f64 / s.calls as f64);
    Some(vec![
        s.calls.to_string(),
        duration_ns(s.mean_ns()),
        per_call(on),
        per_call(blocked),
        per_call(runnable),
        percent(blocked as f64, s.total_ns as f64),
        duration(split.on_cpu.value_at_quantile(0.5)),
        duration(split.on_cpu.value_at_quantile(0.99)),
    ])
}

/// With `--off-cpu`: where each syscall's time went, one row per called syscall; `None`
/// without the split.
#[must_use]
pub fn off_cpu_table(snapshot: &Snapshot) -> Option<Table> {
    let mut table = Table::new(std::iter::once("syscall").chain(OFF_CPU_COLUMNS));
    let mut rows: Vec<&SyscallSummary> = snapshot.syscalls.iter().collect();
    rows.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
    for s in rows {
        if let Some(cells) = off_cpu_cells(s) {
            table.row(std::iter::once(s.name.clone()).chain(cells));
        }
    }
    (!table.is_empty()).then_some(table)
}

/// Whether a snapshot gets a per-process (or per-cgroup) table: with more than one process, or
/// with any cgroup row (`--cgroup`, `--by-cgroup`), even one.
#[must_use]
pub fn per_process_rows(snapshot: &Snapshot) -> bool {
    snapshot.processes.len() > 1 || snapshot.processes.iter().any(|p| p.cgroup.is_some())
}

/// The title of the off-CPU section, in every report.
pub const OFF_CPU_TITLE: &str = "On and off the CPU (--off-cpu: per call, from sched_switch and sched_wakeup; on-CPU + blocked + runnable = mean)";

/// The final table of `profiler attach` and the lines under it, as text.
#[must_use]
pub fn syscall_table(snapshot: &Snapshot) -> String {
    let (table, notes) = syscall_summary(snapshot, None);
    let mut out = table.map_or_else(
        || "no timed syscalls were made by the traced processes\n".to_owned(),
        |t| t.render(),
    );
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    out
}

/// `--syscalls all`: every syscall the traced processes made, timed in the table or not, from
/// the raw tracepoints' count; `None` where every call was not counted.
#[must_use]
pub fn every_syscall_table(snapshot: &Snapshot) -> Option<Table> {
    let every = snapshot.every.as_ref()?;
    let total: u64 = every.iter().map(|e| e.total_ns).sum();
    let mut table = Table::new([
        "syscall", "calls", "errors", "total", "mean", "share", "in table",
    ]);
    for e in every {
        table.row([
            if e.ia32 {
                format!("{} (32-bit)", e.name)
            } else {
                e.name.clone()
            },
            e.calls.to_string(),
            e.errors.to_string(),
            duration(e.total_ns),
            duration_ns(e.total_ns as f64 / e.calls.max(1) as f64),
            percent(e.total_ns as f64, total as f64),
            if e.in_table { "yes" } else { "no" }.to_owned(),
        ]);
    }
    Some(table)
}

/// The title of [`every_syscall_table`].
pub const EVERY_SYSCALL_TITLE: &str = "Every syscall of the traced processes (--syscalls all: counted on the raw sys_enter/sys_exit tracepoints, entry to exit)";

/// Per-process table (the multi-process server's workers): one row per process.
#[must_use]
pub fn process_summary(snapshot: &Snapshot) -> Table {
    let by_cgroup = snapshot.processes.iter().any(|p| p.cgroup.is_some());
    let containers = snapshot.processes.iter().any(|p| p.container.is_some());
    let mut header = vec![if by_cgroup { "cgroup" } else { "pid" }.to_owned()];
    if containers {
        header.push("container".into());
    }
    header.extend(["calls".into(), "errors".into(), "total".into()]);
    header.extend(
        snapshot
            .syscalls
            .iter()
            .map(|s| format!("{} calls", s.name)),
    );
    let mut table = Table::new(header);
    for p in &snapshot.processes {
        let errors: u64 = p.syscalls.iter().map(|s| s.errors).sum();
        let total: u64 = p.syscalls.iter().map(|s| s.total_ns).sum();
        let mut row = vec![match (&p.cgroup, p.pid) {
            (Some(cgroup), _) => cgroup.clone(),
            (None, 0) => "other".to_owned(),
            (None, pid) => pid.to_string(),
        }];
        if containers {
            row.push(
                p.container
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), crate::container::Container::display),
            );
        }
        row.extend([
            p.total_calls().to_string(),
            errors.to_string(),
            duration(total),
        ]);
        row.extend(p.syscalls.iter().map(|s| s.calls.to_string()));
        table.row(row);
    }
    table
}

/// The title of [`process_summary`]'s section: "Per cgroup" when its rows are cgroups'
/// (`--cgroup`), else "Per process".
#[must_use]
pub fn process_title(snapshot: &Snapshot) -> &'static str {
    if snapshot.processes.iter().any(|p| p.cgroup.is_some()) {
        "Per cgroup"
    } else {
        "Per process"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_one_header_and_a_row_per_called_syscall() {
        let mut close = SyscallSummary {
            name: "close".into(),
            calls: 3,
            total_ns: 3000,
            max_ns: 1500,
            ..Default::default()
        };
        close.latency.record_n(1000, 3);
        let unused = SyscallSummary {
            name: "read".into(),
            ..Default::default()
        };
        let snap = Snapshot {
            syscalls: vec![close, unused],
            ..Default::default()
        };
        let out = syscall_table(&snap);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("syscall")
                && lines[0].contains("p99.9")
                && lines[0].contains("dropped")
        );
        assert!(lines[1].starts_with("close"));
        assert!(lines[1].contains("1.00µs"), "{}", lines[1]);
        assert!(!out.contains("\nread"));
    }
}
