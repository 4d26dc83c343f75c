//! `--export-html FILE.html` (alias `--report`): one self-contained page (inline CSS and SVG, no script, no external asset)
//! with the report's charts and then every section of the report as tables: QPS per variant with
//! the spread of runs, baseline against profiled QPS with the interval of the change, the
//! percentile spectrum of each syscall, calls per request (per second for `attach`), and
//! strace's time per call against the kernel's.

use std::fmt::Write as _;

use anyhow::Result;

use super::{Comparison, ExportData, Exporter, Measurement, StraceComparison};
use crate::{
    report::{
        table::{Table, escape_html as esc},
        units::{duration, duration_ns},
    },
    run::model::RunKind,
    stats::LatencyHistogram,
};

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
pub(crate) const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;background:#fff;max-width:1100px}
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
        let mut t = Table::new(["setting", "value"]);
        for (k, v) in &md.settings {
            t.row([k.clone(), v.clone()]);
        }
        out.push_str(&t.to_html());
    }

    let summaries = data.summaries();
    if summaries.iter().any(|m| m.load.is_some()) {
        out.push_str("<h2>Throughput</h2>\n");
        out.push_str(&qps_chart(data, &summaries));
    }
    let baselines: Vec<&Comparison> = data
        .comparisons
        .iter()
        .filter(|c| c.reference.is_none() && c.change.relative_to == RunKind::Baseline)
        .collect();
    if !baselines.is_empty() {
        out.push_str("<h2>Profiled against baseline QPS</h2>\n");
        out.push_str(
            "<p class=\"note\">Median QPS of the baseline runs (nothing attached) and of the profiled runs made right after each; the whisker is the 95% interval of the paired change, drawn around the profiled bar.</p>\n",
        );
        out.push_str(&baseline_chart(&baselines));
    }

    out.push_str("<h2>Latency by percentile, per syscall</h2>\n");
    out.push_str(
        "<p class=\"note\">Latency at each percentile on a log \"nines\" axis (50%, 90%, 99%, 99.9%, 99.99%), from the kernel's buckets (each within 1/32 of its value), as HdrHistogram plots are drawn; log latency axis.</p>\n",
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
        out.push_str(&spectrum_chart(&series));
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

    if !data.strace.is_empty() {
        out.push_str("<h2>strace's time per call against the kernel's</h2>\n");
        out.push_str(
            "<p class=\"note\">Per syscall: the kernel programs' mean over the profiled runs, and strace -f -c's time per call over the strace runs (its own overhead included).</p>\n",
        );
        out.push_str(&strace_chart(&data.strace));
    }

    let flames: Vec<(String, String)> = summaries
        .iter()
        .filter_map(|m| {
            let slow = m.slow.as_ref()?;
            Some((
                m.label(),
                super::flamegraph::svg(m.variant.as_deref(), slow)?,
            ))
        })
        .collect();
    if !flames.is_empty() {
        out.push_str("<h2>Where the slow calls' time went (flame graph)</h2>\n");
        out.push_str(
            "<p class=\"note\">The --slow calls' stacks, root at the bottom: the thread, its user frames (outermost first), <code>-</code>, the kernel frames, and on top what the thread was doing: <span style=\"color:#2ca02c\">on the CPU</span>, <span style=\"color:#3182bd\">blocked</span> or <span style=\"color:#d62728\">runnable</span> (waiting for a CPU). A frame's width is the time of the calls through it; hover for its name and time. <code>--export-folded</code> writes the same stacks for other flame-graph tools.</p>\n",
        );
        for (label, svg) in flames {
            let _ = writeln!(out, "<h3>{}</h3>", esc(&label));
            out.push_str(&svg);
        }
    }
    out.push_str(&data.document().to_html());
    out.push_str("</body></html>\n");
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
        let Some(spread) = crate::samples::Spread::of(qps) else {
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
        whisker(&mut out, cx, y_of(spread.min), y_of(spread.max), 6.0);
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
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + h + 32.0,
            spread.mean_and_sigma()
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

/// The percentile spectrum: latency (log axis) at each percentile, on a "nines" axis where x is
/// log10(1 / (1 - q)): 0 at the minimum, 1 at p90, 2 at p99, 3 at p99.9, 4 at p99.99.
fn spectrum_chart(series: &[(String, &LatencyHistogram)]) -> String {
    const NINES: f64 = 4.0;
    const STEPS: u32 = 80;
    let points: Vec<Vec<(f64, u64)>> = series
        .iter()
        .map(|(_, h)| {
            (0..=STEPS)
                .map(|i| {
                    let x = NINES * f64::from(i) / f64::from(STEPS);
                    (x, h.value_at_quantile(1.0 - 10f64.powf(-x)).max(1))
                })
                .collect()
        })
        .collect();
    let lows = points.iter().flatten().map(|p| p.1).min().unwrap_or(1);
    let highs = points.iter().flatten().map(|p| p.1).max().unwrap_or(10);
    let lo = (lows as f64).log10().floor();
    let hi = (highs as f64).log10().ceil().max(lo + 1.0);
    let (left, top, h) = (70.0, 14.0, 200.0);
    let legend_h = 16.0 * series.len() as f64;
    let w = WIDTH - left - 20.0;
    let x_of = |x: f64| left + w * x / NINES;
    let y_of = |ns: u64| top + h - h * ((ns as f64).log10() - lo) / (hi - lo);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{:.0}\" role=\"img\">\n",
        top + h + 36.0 + legend_h
    );
    let mut decade = lo;
    while decade <= hi {
        let ns = 10f64.powf(decade) as u64;
        let y = y_of(ns);
        let _ = writeln!(
            out,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>",
            left + w
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            y + 4.0,
            duration(ns)
        );
        decade += 1.0;
    }
    for (x, label) in [
        (0.0, "0%"),
        (2f64.log10(), "50%"),
        (1.0, "90%"),
        (2.0, "99%"),
        (3.0, "99.9%"),
        (4.0, "99.99%"),
    ] {
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"#eee\"/>",
            x_of(x),
            top + h
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            x_of(x),
            top + h + 14.0
        );
    }
    for (i, ((label, hist), pts)) in series.iter().zip(&points).enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let line: Vec<String> = pts
            .iter()
            .map(|(x, ns)| format!("{:.1},{:.1}", x_of(*x), y_of(*ns)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"><title>{}</title></polyline>",
            line.join(" "),
            esc(label)
        );
        let y = top + h + 32.0 + 16.0 * i as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{left}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{colour}\"/>",
            y - 6.0
        );
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{y:.1}\">{} — {} calls, p50 {}, p99 {}, p99.99 {}</text>",
            left + 18.0,
            esc(label),
            hist.total(),
            duration(hist.value_at_quantile(0.5)),
            duration(hist.value_at_quantile(0.99)),
            duration(hist.value_at_quantile(0.9999))
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Per variant and concurrency: the baseline's median QPS and the profiled runs', with the
/// interval of the paired change around the profiled bar.
fn baseline_chart(comparisons: &[&Comparison]) -> String {
    let (left, top, h) = (70.0, 20.0, 200.0);
    let w = WIDTH - left - 20.0;
    let interval = |c: &Comparison| {
        let base = c.change.qps_relative_to;
        (
            base * (1.0 + c.change.qps.low / 100.0),
            base * (1.0 + c.change.qps.high / 100.0),
        )
    };
    let max = nice_max(
        comparisons
            .iter()
            .map(|c| {
                c.change
                    .qps_of
                    .max(c.change.qps_relative_to)
                    .max(interval(c).1)
            })
            .fold(0.0, f64::max),
    );
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{:.0}\" role=\"img\" aria-label=\"baseline and profiled QPS\">\n",
        top + h + 70.0
    );
    y_axis(&mut out, left, top, w, h, max, "");
    let slot = w / comparisons.len().max(1) as f64;
    let y_of = |v: f64| top + h - h * v / max;
    for (i, c) in comparisons.iter().enumerate() {
        let x0 = left + slot * i as f64 + slot * 0.15;
        let bw = slot * 0.3;
        for (j, (value, what, colour)) in [
            (c.change.qps_relative_to, "baseline", "#9e9e9e"),
            (c.change.qps_of, "profiled", COLOURS[0]),
        ]
        .into_iter()
        .enumerate()
        {
            let x = x0 + bw * j as f64;
            let _ = writeln!(
                out,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{} c={} {what}: median {value:.0} QPS over {} pair(s)</title></rect>",
                y_of(value),
                bw * 0.9,
                h * value / max,
                esc(&c.variant),
                c.concurrency,
                c.change.pairs
            );
        }
        let cx = x0 + bw * 1.45;
        let (lo, hi) = interval(c);
        whisker(&mut out, cx, y_of(lo), y_of(hi), 5.0);
        let mid = x0 + bw;
        let q = &c.change.qps;
        let _ = writeln!(
            out,
            "<text x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} c={}</text>",
            top + h + 16.0,
            esc(&c.variant),
            c.concurrency
        );
        let _ = writeln!(
            out,
            "<text x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{:+.1}% [{:+.1}, {:+.1}]</text>",
            top + h + 32.0,
            q.median,
            q.low,
            q.high
        );
        let _ = writeln!(
            out,
            "<text x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + h + 48.0,
            if q.n < 2 {
                "one pair"
            } else if q.within_noise() {
                "within noise"
            } else {
                "beyond noise"
            }
        );
    }
    legend_row(
        &mut out,
        left,
        top + h + 64.0,
        &[("baseline", "#9e9e9e"), ("profiled", COLOURS[0])],
    );
    out.push_str("</svg>\n");
    out
}

/// A vertical whisker at `x` from `y1` to `y2`, with caps `cap` wide on each side.
fn whisker(out: &mut String, x: f64, y1: f64, y2: f64, cap: f64) {
    let line = |out: &mut String, (x1, y1, x2, y2): (f64, f64, f64, f64)| {
        let _ = writeln!(
            out,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"#000\" stroke-width=\"1.5\"/>"
        );
    };
    line(out, (x, y1, x, y2));
    for y in [y1, y2] {
        line(out, (x - cap, y, x + cap, y));
    }
}

/// One legend line at `y`: a swatch and a name per entry, side by side.
fn legend_row(out: &mut String, left: f64, y: f64, entries: &[(&str, &str)]) {
    for (i, (what, colour)) in entries.iter().enumerate() {
        let x = left + 130.0 * i as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"8\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{y:.1}\">{what}</text>",
            y - 8.0,
            x + 18.0
        );
    }
}

/// Horizontal bars, two per (variant, syscall): the kernel's mean and strace's time per call.
fn strace_chart(rows: &[StraceComparison]) -> String {
    let row_h = 26.0;
    let (left, top) = (150.0, 10.0);
    let w = WIDTH - left - 90.0;
    let max = nice_max(
        rows.iter()
            .map(|r| r.strace_ns_per_call.max(r.kernel_mean_ns.unwrap_or(0.0)))
            .fold(0.0, f64::max),
    );
    let h = row_h * rows.len() as f64;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{:.0}\" role=\"img\" aria-label=\"strace against the kernel\">\n",
        top + h + 40.0
    );
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let x = left + w * f64::from(i) / 4.0;
        let _ = writeln!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + h,
            top + h + 14.0,
            duration_ns(v)
        );
    }
    for (i, r) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{} c={} {}</text>",
            left - 6.0,
            y + row_h * 0.6,
            esc(&r.variant),
            r.concurrency,
            esc(&r.syscall)
        );
        let bars = [
            (r.kernel_mean_ns, "kernel", COLOURS[0]),
            (Some(r.strace_ns_per_call), "strace", COLOURS[1]),
        ];
        for (j, (value, what, colour)) in bars.into_iter().enumerate() {
            let Some(value) = value else { continue };
            let by = y + 3.0 + 10.0 * j as f64;
            let _ = writeln!(
                out,
                "<rect x=\"{left}\" y=\"{by:.1}\" width=\"{:.1}\" height=\"9\" fill=\"{colour}\"><title>{} {} {what}: {}</title></rect>",
                w * value / max,
                esc(&r.variant),
                esc(&r.syscall),
                duration_ns(value)
            );
        }
        if let Some(k) = r.kernel_mean_ns.filter(|k| *k > 0.0) {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\">{:.1}×</text>",
                left + w * r.strace_ns_per_call.max(k) / max + 6.0,
                y + row_h * 0.6,
                r.strace_ns_per_call / k
            );
        }
    }
    legend_row(
        &mut out,
        left,
        top + h + 32.0,
        &[("kernel mean", COLOURS[0]), ("strace per call", COLOURS[1])],
    );
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
