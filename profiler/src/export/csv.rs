//! `--export-csv`: one row per (variant, concurrency, run, syscall), with a header row. An empty
//! `run` is the aggregate over runs (or a whole `attach`); empty load columns mean no load generator.

use std::fmt::Write as _;

use anyhow::Result;
use profiler_common::ErrnoClass;

use super::{ExportData, Exporter};

/// The CSV format (RFC 4180: comma-separated, fields with commas or quotes quoted).
#[derive(Clone, Copy, Debug, Default)]
pub struct Csv;

/// The header row's columns, in order.
pub const COLUMNS: &[&str] = &[
    "variant",
    "concurrency",
    "run",
    "syscall",
    "calls",
    "errors",
    "errors_eagain",
    "errors_eintr",
    "errors_econnreset",
    "errors_epipe",
    "errors_ebadf",
    "errors_other",
    "errors_erestart",
    "total_ns",
    "mean_ns",
    "min_ns",
    "max_ns",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "p99_9_ns",
    "dropped",
    "calls_per_request",
    "requests",
    "qps",
    "partial",
    "failure",
];

impl Exporter for Csv {
    fn name(&self) -> &'static str {
        "CSV"
    }

    fn render(&self, data: &ExportData) -> Result<Vec<u8>> {
        let mut out = COLUMNS.join(",");
        out.push('\n');
        for m in &data.measurements {
            for s in &m.syscalls.syscalls {
                let mut row: Vec<String> = vec![
                    m.variant.as_deref().map(quote).unwrap_or_default(),
                    opt(m.concurrency),
                    opt(m.run),
                    quote(&s.name),
                    s.calls.to_string(),
                    s.errors.total().to_string(),
                ];
                row.extend(ErrnoClass::ALL.iter().map(|c| s.errors.get(*c).to_string()));
                row.extend([
                    s.total_ns.to_string(),
                    format!("{:.1}", s.mean_ns()),
                    s.min_ns.to_string(),
                    s.max_ns.to_string(),
                ]);
                row.extend(
                    super::QUANTILES
                        .iter()
                        .map(|(q, _)| s.latency.value_at_quantile(*q).to_string()),
                );
                row.push(s.dropped.to_string());
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
                let _ = writeln!(out, "{}", row.join(","));
            }
        }
        Ok(out.into_bytes())
    }
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

    /// The header names one error column per errno class, in the order the rows write them.
    #[test]
    fn the_error_columns_are_the_errno_classes_in_order() {
        let start = COLUMNS.iter().position(|c| *c == "errors_eagain").unwrap();
        let named: Vec<String> = ErrnoClass::ALL
            .iter()
            .map(|c| format!("errors_{}", c.name().to_lowercase()))
            .collect();
        assert_eq!(COLUMNS[start..start + named.len()], named[..]);
        assert_eq!(COLUMNS[start + named.len()], "total_ns");
    }
}
