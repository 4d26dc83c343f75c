//! `--report FILE.html`: one self-contained page (inline CSS and SVG, no script, no external asset)
//! with the report's charts and tables: QPS per variant with the spread of runs, latency
//! distribution per syscall per variant, calls per request (calls per second for `attach`).

use std::fmt::Write as _;

use anyhow::Result;
use profiler_common::log2_floor;

use super::{
    ExportData, Exporter, Measurement,
    markdown::{MdTable, load_table, process_table, syscall_table_parts},
};
use crate::{report::units::duration, stats::LatencyHistogram};

/// The HTML report format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Html;

impl Exporter for Html {
    fn name(&self) -> &'static str {
        "HTML report"
    }

    fn render(&self, data: &ExportData) -> Result<Vec<u8>> {
        Ok(render(data).into_bytes())
    }
}

const COLOURS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
const WIDTH: f64 = 760.0;
const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;background:#fff;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px}
td{text-align:right}td:first-child,th:first-child{text-align:left}th{background:#f0f0f0}
.partial{background:#fff3cd;border:1px solid #e0c060;padding:8px}.note{color:#555;font-size:13px;margin:2px 0}
svg{display:block;margin:8px 0}svg text{font-family:sans-serif;font-size:11px;fill:#333}";

/// The whole page.
#[must_use]
pub fn render(data: &ExportData) -> String {
    let md = &data.metadata;
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    let _ = writeln!(
        out,
        "<title>syscall-profiler report: {}</title>",
        esc(&md.command)
    );
    let _ = writeln!(out, "<style>{STYLE}</style></head><body>");
    out.push_str("<h1>syscall-profiler report</h1>\n");
    if let Some(note) = data.partial_note() {
        let _ = writeln!(
            out,
            "<p class=\"partial\"><b>Partial:</b> {}.</p>",
            esc(&note)
        );
    }
    let _ = writeln!(
        out,
        "<p><code>profiler {}</code> on kernel {}, {} ({} CPUs), {:.1} s, profiler {}.</p>",
        esc(&md.command),
        esc(&md.kernel),
        esc(&md.cpu_model),
        md.cpus_online,
        md.duration_s,
        esc(&md.profiler_version)
    );
    if !md.settings.is_empty() {
        let mut t = MdTable::new(&["setting", "value"]);
        for (k, v) in &md.settings {
            t.row(vec![k.clone(), v.clone()]);
        }
        out.push_str(&table(&t));
    }

    let summaries = data.summaries();
    if summaries.iter().any(|m| m.load.is_some()) {
        out.push_str("<h2>Throughput</h2>\n");
        out.push_str(&qps_chart(data, &summaries));
        out.push_str(&table(&load_table(data, &summaries)));
    }

    out.push_str("<h2>Latency distribution per syscall</h2>\n");
    out.push_str(
        "<p class=\"note\">Share of calls per power-of-two latency range (log scale).</p>\n",
    );
    let mut any = false;
    for name in data.syscall_names() {
        let series: Vec<(String, &LatencyHistogram)> = summaries
            .iter()
            .filter_map(|m| {
                m.syscalls
                    .syscall(name)
                    .filter(|s| s.latency.total() > 0)
                    .map(|s| (m.label(), &s.latency))
            })
            .collect();
        if series.is_empty() {
            continue;
        }
        any = true;
        let _ = writeln!(out, "<h3>{}</h3>", esc(name));
        out.push_str(&distribution_chart(&series));
    }
    if !any {
        out.push_str("<p>No timed syscalls were made.</p>\n");
    }

    let per_request = summaries
        .iter()
        .any(|m| m.load.as_ref().is_some_and(|l| l.requests > 0));
    out.push_str(if per_request {
        "<h2>Calls per request</h2>\n"
    } else {
        "<h2>Calls per second</h2>\n"
    });
    out.push_str(&calls_chart(data, &summaries, per_request));

    for m in &summaries {
        let _ = writeln!(out, "<h2>Syscalls: {}</h2>", esc(&m.label()));
        let (t, notes) = syscall_table_parts(m);
        match t {
            Some(t) => out.push_str(&table(&t)),
            None => out.push_str("<p>No timed syscalls were made.</p>\n"),
        }
        for n in notes {
            let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(&n));
        }
        if m.syscalls.processes.len() > 1 {
            out.push_str("<h3>Per process</h3>\n");
            out.push_str(&table(&process_table(m)));
        }
    }
    out.push_str("</body></html>\n");
    out
}

/// Text escaped for HTML and SVG.
#[must_use]
pub fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn table(t: &MdTable) -> String {
    let mut out = String::from("<table><thead><tr>");
    for h in t.header() {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for r in t.rows() {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", esc(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// A "nice" axis maximum (1, 2 or 5 times a power of ten) at or above `v`.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|m| *m >= v)
        .unwrap_or(10.0 * p)
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Horizontal gridlines and y labels for a chart area.
fn y_axis(out: &mut String, left: f64, top: f64, w: f64, h: f64, max: f64, unit: &str) {
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = top + h - h * f64::from(i) / 4.0;
        let _ = writeln!(
            out,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>",
            left + w
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}{unit}</text>",
            left - 6.0,
            y + 4.0,
            short(v)
        );
    }
}

fn qps_chart(data: &ExportData, summaries: &[&Measurement]) -> String {
    let groups: Vec<(&Measurement, Vec<f64>)> = summaries
        .iter()
        .filter(|m| m.load.is_some())
        .map(|m| (*m, data.qps_of(m).0))
        .collect();
    let (left, top, h) = (70.0, 20.0, 220.0);
    let w = WIDTH - left - 20.0;
    let max = nice_max(
        groups
            .iter()
            .flat_map(|(_, q)| q.iter().copied())
            .fold(0.0, f64::max),
    );
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{}\" role=\"img\" aria-label=\"QPS per variant\">\n",
        top + h + 50.0
    );
    y_axis(&mut out, left, top, w, h, max, "");
    let slot = w / groups.len().max(1) as f64;
    let y_of = |v: f64| top + h - h * v / max;
    for (i, (m, qps)) in groups.iter().enumerate() {
        let Some(spread) = crate::statistics::Spread::of(qps) else {
            continue;
        };
        let x = left + slot * i as f64 + slot * 0.2;
        let bw = slot * 0.6;
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{colour}\" opacity=\"0.75\"><title>{}: mean {:.0} QPS over {} run(s)</title></rect>",
            y_of(spread.mean),
            h * spread.mean / max,
            esc(&m.label()),
            spread.mean,
            spread.n
        );
        let cx = x + bw / 2.0;
        // Whisker: min … max of the runs; dots: each run.
        let _ = writeln!(
            out,
            "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"#000\" stroke-width=\"1.5\"/>",
            y_of(spread.min),
            y_of(spread.max)
        );
        for v in [spread.min, spread.max] {
            let _ = writeln!(
                out,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#000\" stroke-width=\"1.5\"/>",
                cx - 6.0,
                y_of(v),
                cx + 6.0,
                y_of(v)
            );
        }
        for v in qps {
            let _ = writeln!(
                out,
                "<circle cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#000\" opacity=\"0.6\"/>",
                y_of(*v)
            );
        }
        let label = m.variant.clone().unwrap_or_default()
            + &m.concurrency.map(|c| format!(" c={c}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + h + 16.0,
            esc(&label)
        );
        let _ = writeln!(
            out,
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:.0} ± {:.0}</text>",
            top + h + 32.0,
            spread.mean,
            spread.stddev
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">requests/s</text>",
        top + h / 2.0,
        top + h / 2.0
    );
    out.push_str("</svg>\n");
    out
}

/// Share of values per power-of-two bin (bin k holds 2^k .. 2^(k+1)-1; bin 0 also holds 0).
fn log2_shares(h: &LatencyHistogram) -> Vec<(u32, f64)> {
    let total = h.total().max(1) as f64;
    let mut bins: Vec<(u32, f64)> = Vec::new();
    for b in h.buckets() {
        let k = log2_floor(b.low.max(1));
        match bins.last_mut() {
            Some((last, share)) if *last == k => *share += b.count as f64 / total,
            _ => bins.push((k, b.count as f64 / total)),
        }
    }
    bins
}

fn distribution_chart(series: &[(String, &LatencyHistogram)]) -> String {
    let shares: Vec<Vec<(u32, f64)>> = series.iter().map(|(_, h)| log2_shares(h)).collect();
    let lo = shares.iter().flatten().map(|(k, _)| *k).min().unwrap_or(0);
    let hi = shares
        .iter()
        .flatten()
        .map(|(k, _)| *k)
        .max()
        .unwrap_or(0)
        .max(lo + 1);
    let max = nice_max(
        shares
            .iter()
            .flatten()
            .map(|(_, s)| s * 100.0)
            .fold(0.0, f64::max),
    );
    let (left, top, h) = (60.0, 14.0, 180.0);
    let legend_h = 16.0 * series.len() as f64;
    let w = WIDTH - left - 20.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{:.0}\" role=\"img\">\n",
        top + h + 36.0 + legend_h
    );
    y_axis(&mut out, left, top, w, h, max, "%");
    let bins = f64::from(hi - lo + 1);
    let x_of = |k: u32| left + w * (f64::from(k - lo) + 0.5) / bins;
    let step = ((hi - lo + 1) / 12).max(1);
    for k in (lo..=hi).step_by(step as usize) {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x_of(k),
            top + h + 14.0,
            duration(1u64 << k)
        );
    }
    for (i, ((label, hist), bins)) in series.iter().zip(&shares).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut points = String::new();
        for k in lo..=hi {
            let share = bins.iter().find(|(b, _)| *b == k).map_or(0.0, |(_, s)| *s) * 100.0;
            let _ = write!(points, "{:.1},{:.1} ", x_of(k), top + h - h * share / max);
        }
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>",
            points.trim_end()
        );
        for (k, s) in bins {
            let _ = writeln!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{colour}\"><title>{}: {:.2}% of calls from {}</title></circle>",
                x_of(*k),
                top + h - h * s * 100.0 / max,
                esc(label),
                s * 100.0,
                duration(1u64 << k)
            );
        }
        let y = top + h + 32.0 + 16.0 * i as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{left}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{colour}\"/>",
            y - 6.0
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{y:.1}\">{} — {} calls, p50 {}, p99 {}</text>",
            left + 18.0,
            esc(label),
            hist.total(),
            duration(hist.value_at_quantile(0.5)),
            duration(hist.value_at_quantile(0.99))
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Grouped bars: per syscall, one bar per summary measurement.
fn calls_chart(data: &ExportData, summaries: &[&Measurement], per_request: bool) -> String {
    let names = data.syscall_names();
    let value = |m: &Measurement, name: &str| -> f64 {
        let Some(s) = m.syscalls.syscall(name) else {
            return 0.0;
        };
        if per_request {
            m.calls_per_request(s).unwrap_or(0.0)
        } else if data.metadata.duration_s > 0.0 {
            s.calls as f64 / data.metadata.duration_s
        } else {
            s.calls as f64
        }
    };
    let names: Vec<&str> = names
        .into_iter()
        .filter(|n| summaries.iter().any(|m| value(m, n) > 0.0))
        .collect();
    if names.is_empty() {
        return "<p>No timed syscalls were made.</p>\n".to_owned();
    }
    let (left, top, h) = (70.0, 14.0, 200.0);
    let w = WIDTH - left - 20.0;
    let max = nice_max(
        names
            .iter()
            .flat_map(|n| summaries.iter().map(|m| value(m, n)))
            .fold(0.0, f64::max),
    );
    let legend_h = 16.0 * summaries.len() as f64;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{:.0}\" role=\"img\">\n",
        top + h + 36.0 + legend_h
    );
    y_axis(&mut out, left, top, w, h, max, "");
    let slot = w / names.len() as f64;
    let bw = slot * 0.8 / summaries.len().max(1) as f64;
    for (j, name) in names.iter().enumerate() {
        let x0 = left + slot * j as f64 + slot * 0.1;
        for (i, m) in summaries.iter().enumerate() {
            let v = value(m, name);
            let _ = writeln!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} {}: {:.3}</title></rect>",
                x0 + bw * i as f64,
                top + h - h * v / max,
                h * v / max,
                COLOURS[i % COLOURS.len()],
                esc(&m.label()),
                esc(name),
                v
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x0 + slot * 0.4,
            top + h + 14.0,
            esc(name)
        );
    }
    for (i, m) in summaries.iter().enumerate() {
        let y = top + h + 32.0 + 16.0 * i as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{left}\" y=\"{:.1}\" width=\"12\" height=\"8\" fill=\"{}\"/>",
            y - 8.0,
            COLOURS[i % COLOURS.len()]
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{y:.1}\">{}</text>",
            left + 18.0,
            esc(&m.label())
        );
    }
    out.push_str("</svg>\n");
    out
}
