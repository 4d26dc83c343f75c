//! `--export-csv`: one row per (variant, concurrency, run, syscall), with a header row. An empty
//! `run` is the aggregate over runs (or a whole `attach`); empty load columns mean no load generator.

use std::fmt::Write as _;

use anyhow::Result;

use super::{ExportData, Exporter};
use crate::stats::syscall_figures;

/// The CSV format (RFC 4180: comma-separated, fields with commas or quotes quoted).
#[derive(Clone, Copy, Debug, Default)]
pub struct Csv;

/// The header row's columns, in order: the measurement's, then one per syscall figure
/// ([`syscall_figures`], where the errno classes and the quantiles come from their one list
/// each), then the load's, so a row and its header cannot disagree.
#[must_use]
pub fn columns() -> Vec<String> {
    let mut columns: Vec<String> = ["variant", "concurrency", "run", "server_cpus", "syscall"]
        .map(String::from)
        .to_vec();
    columns.extend(syscall_figures().into_iter().map(|f| f.key));
    columns
        .extend(["calls_per_request", "requests", "qps", "partial", "failure"].map(String::from));
    columns.extend(CGROUP_COLUMNS.map(String::from));
    columns
}

/// The last columns: empty on a syscall's row; on a cgroup's (`--cgroup`, `--by-cgroup`: its
/// calls, errors and time per syscall, the other figures empty) its path and its container.
const CGROUP_COLUMNS: [&str; 7] = [
    "cgroup",
    "container_runtime",
    "container_id",
    "container_name",
    "k8s_namespace",
    "k8s_pod",
    "k8s_container",
];

impl Exporter for Csv {
    fn name(&self) -> &'static str {
        "CSV"
    }

    fn render(&self, data: &ExportData) -> Result<Vec<u8>> {
        let figures = syscall_figures();
        let mut out = columns().join(",");
        out.push('\n');
        for m in &data.measurements {
            for s in &m.syscalls.syscalls {
                let mut row = leading(m, &s.name);
                row.extend(figures.iter().map(|f| (f.value)(s).to_string()));
                row.push(
                    m.calls_per_request(s)
                        .map(|c| format!("{c:.4}"))
                        .unwrap_or_default(),
                );
                row.push(opt(m.load.as_ref().map(|l| l.requests)));
                row.push(
                    m.load
                        .as_ref()
                        .map(|l| format!("{:.1}", l.qps))
                        .unwrap_or_default(),
                );
                row.push(data.partial_note().is_some().to_string());
                row.push(m.failure.as_deref().map(quote).unwrap_or_default());
                row.extend(CGROUP_COLUMNS.map(|_| String::new()));
                let _ = writeln!(out, "{}", row.join(","));
            }
            for p in &m.syscalls.processes {
                let Some(cgroup) = &p.cgroup else { continue };
                let container = p
                    .container
                    .as_ref()
                    .map(crate::container::Container::labels)
                    .unwrap_or_default();
                for (s, counts) in m.syscalls.syscalls.iter().zip(&p.syscalls) {
                    let mut row = leading(m, &s.name);
                    row.extend(figures.iter().map(|f| match f.key.as_str() {
                        "calls" => counts.calls.to_string(),
                        "errors" => counts.errors.to_string(),
                        "total_ns" => counts.total_ns.to_string(),
                        _ => String::new(),
                    }));
                    row.extend(std::iter::repeat_n(String::new(), 3));
                    row.push(data.partial_note().is_some().to_string());
                    row.push(m.failure.as_deref().map(quote).unwrap_or_default());
                    row.push(quote(cgroup));
                    row.extend(CGROUP_COLUMNS[1..].iter().map(|column| {
                        container
                            .iter()
                            .find(|(k, _)| k == column)
                            .map(|(_, v)| quote(v))
                            .unwrap_or_default()
                    }));
                    let _ = writeln!(out, "{}", row.join(","));
                }
            }
        }
        Ok(out.into_bytes())
    }
}

/// A row's first five columns: the measurement's, then the syscall's name.
fn leading(m: &super::Measurement, syscall: &str) -> Vec<String> {
    vec![
        m.variant.as_deref().map(quote).unwrap_or_default(),
        opt(m.concurrency),
        opt(m.run),
        m.server_cpus.as_deref().map(quote).unwrap_or_default(),
        quote(syscall),
    ]
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// A field as RFC 4180 wants it: quoted (quotes doubled) when it holds a comma, quote or newline.
#[must_use]
pub fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row has as many fields as the header, and the header names the columns as the
    /// schema (docs/EXPORT_SCHEMA.md) lists them.
    #[test]
    fn rows_match_the_header() {
        assert_eq!(
            columns().join(","),
            "variant,concurrency,run,server_cpus,syscall,calls,errors,errors_eagain,errors_eintr,\
             errors_econnreset,errors_epipe,errors_ebadf,errors_other,errors_erestart,errors_enoent,total_ns,\
             mean_ns,min_ns,max_ns,p50_ns,p90_ns,p99_ns,p99_9_ns,dropped,short_calls,calls_per_request,\
             requests,qps,partial,failure,cgroup,container_runtime,container_id,container_name,\
             k8s_namespace,k8s_pod,k8s_container"
        );
        let mut snapshot = crate::stats::Snapshot::default();
        snapshot.syscalls.push(crate::stats::SyscallSummary {
            name: "read".into(),
            calls: 3,
            ..Default::default()
        });
        let data = ExportData {
            measurements: vec![super::super::Measurement {
                syscalls: snapshot,
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = String::from_utf8(Csv.render(&data).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].split(',').count(), columns().len(), "{}", lines[1]);
    }
}
