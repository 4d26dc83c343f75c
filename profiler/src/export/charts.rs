//! The HTML report's comparative charts, drawn as inline SVG (no script, no external asset: the
//! page is one file that opens anywhere, prints, and can be mailed; a value shows on hover
//! through SVG `<title>`s). Every chart is per scenario (a concurrency and a server CPU set,
//! never pooled), and a variant has one colour in every chart ([`Palette`]).
//!
//! Why not a charting library: the ones that give zoom and tooltips (ECharts, Plotly, uPlot)
//! need a script, 50 KB to 3 MB of it inlined per report, and a browser with JavaScript; the
//! charts here answer "which is faster, and where does the time go" with bars, lines and
//! percentile curves that SVG draws as well, and the report stays readable in a mail client.

use std::fmt::Write as _;

use super::{ExportData, Measurement};
use crate::{
    report::{table::escape_html as esc, units::duration},
    stats::{SyscallSummary, per_request},
};

/// Chart width, px.
pub(crate) const WIDTH: f64 = 760.0;

/// One colour per variant, in order of first appearance, the same in every chart.
pub(crate) const COLOURS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// Syscall colours of the stacked time-per-request bars (distinct from the CPU states').
const SYSCALL_COLOURS: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#bab0ac",
    "#a0cbe8", "#ffbe7d", "#86bcb6", "#d4a6c8",
];

/// The CPU states, as the flame graph colours them.
const STATES: [(&str, &str); 3] = [
    ("on the CPU", "#2ca02c"),
    ("blocked", "#3182bd"),
    ("runnable", "#d62728"),
];

/// Curves drawn from fewer values than this are left out of the percentile charts (and named
/// under them): a p99 of 20 calls is one call.
pub(crate) const MIN_CURVE_VALUES: u64 = 100;

/// Variant → colour.
pub(crate) struct Palette(Vec<String>);

impl Palette {
    /// The variants of `summaries`, in order.
    pub(crate) fn of(summaries: &[&Measurement]) -> Self {
        let mut names: Vec<String> = Vec::new();
        for m in summaries {
            let name = variant_name(m);
            if !names.contains(&name) {
                names.push(name);
            }
        }
        Self(names)
    }

    /// The colour of `m`'s variant.
    pub(crate) fn colour(&self, m: &Measurement) -> &'static str {
        self.colour_of(&variant_name(m))
    }

    /// The colour of the variant named `name`.
    pub(crate) fn colour_of(&self, name: &str) -> &'static str {
        let i = self.0.iter().position(|n| n == name).unwrap_or(0);
        COLOURS[i % COLOURS.len()]
    }
}

fn variant_name(m: &Measurement) -> String {
    m.variant
        .clone()
        .unwrap_or_else(|| "all traced processes".to_owned())
}

/// One scenario: its heading and its variants' summary measurements.
pub(crate) struct Scenario<'a> {
    /// "concurrency 10, server CPUs 0" (empty for attach).
    pub(crate) title: String,
    /// Concurrency (None: attach).
    pub(crate) concurrency: Option<usize>,
    /// Server CPUs.
    pub(crate) server_cpus: Option<String>,
    /// One per variant.
    pub(crate) members: Vec<&'a Measurement>,
}

/// The summaries grouped by (concurrency, server CPUs), in order of first appearance.
pub(crate) fn scenarios<'a>(summaries: &[&'a Measurement]) -> Vec<Scenario<'a>> {
    let mut out: Vec<Scenario<'a>> = Vec::new();
    for m in summaries {
        if let Some(s) = out
            .iter_mut()
            .find(|s| s.concurrency == m.concurrency && s.server_cpus == m.server_cpus)
        {
            s.members.push(m);
            continue;
        }
        let title = match (m.concurrency, &m.server_cpus) {
            (None, _) => String::new(),
            (Some(c), Some(cpus)) => format!("concurrency {c}, server CPUs {cpus}"),
            (Some(c), None) => format!("concurrency {c}"),
        };
        out.push(Scenario {
            title,
            concurrency: m.concurrency,
            server_cpus: m.server_cpus.clone(),
            members: vec![m],
        });
    }
    out
}

fn svg_open(out: &mut String, height: f64, label: &str) {
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" role=\"img\" aria-label=\"{}\">",
        esc(label)
    );
}

/// A "nice" axis maximum (1, 2 or 5 times a power of ten) at or above `v`.
pub(crate) fn nice_max(v: f64) -> f64 {
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

pub(crate) fn short(v: f64) -> String {
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
pub(crate) fn y_axis(out: &mut String, left: f64, top: f64, w: f64, h: f64, max: f64, unit: &str) {
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

/// A vertical whisker at `x` from `y1` to `y2`, with caps `cap` wide on each side.
pub(crate) fn whisker(out: &mut String, x: f64, y1: f64, y2: f64, cap: f64) {
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
pub(crate) fn legend_row(out: &mut String, left: f64, y: f64, entries: &[(&str, &str)]) {
    let mut x = left;
    for (what, colour) in entries {
        let _ = writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"8\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{y:.1}\">{}</text>",
            y - 8.0,
            x + 18.0,
            esc(what)
        );
        x += 30.0 + 7.0 * what.chars().count() as f64;
    }
}

/// One scenario's QPS: a bar per variant (its colour), the mean over runs, the runs as dots and
/// their range as a whisker, "mean ± σ" under it ("± —" for one run).
pub(crate) fn qps_chart(data: &ExportData, scenario: &Scenario, palette: &Palette) -> String {
    let groups: Vec<(&Measurement, Vec<f64>)> = scenario
        .members
        .iter()
        .filter(|m| m.load.is_some())
        .map(|m| (*m, data.qps_of(m).0))
        .collect();
    let (left, top, h) = (70.0, 14.0, 180.0);
    let w = WIDTH - left - 20.0;
    let max = nice_max(
        groups
            .iter()
            .flat_map(|(_, q)| q.iter().copied())
            .fold(0.0, f64::max),
    );
    let mut out = String::new();
    svg_open(&mut out, top + h + 44.0, "QPS per variant");
    y_axis(&mut out, left, top, w, h, max, "");
    let slot = w / groups.len().max(1) as f64;
    let y_of = |v: f64| top + h - h * v / max;
    for (i, (m, qps)) in groups.iter().enumerate() {
        let Some(spread) = crate::samples::Spread::of(qps) else {
            continue;
        };
        let bw = (slot * 0.6).min(120.0);
        let x = left + slot * i as f64 + (slot - bw) / 2.0;
        let _ = writeln!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{}\" opacity=\"0.8\"><title>{}: mean {:.0} QPS over {} run(s)</title></rect>",
            y_of(spread.mean),
            h * spread.mean / max,
            palette.colour(m),
            esc(&m.label()),
            spread.mean,
            spread.n
        );
        let cx = x + bw / 2.0;
        if spread.n > 1 {
            whisker(&mut out, cx, y_of(spread.min), y_of(spread.max), 6.0);
        }
        for v in qps {
            let _ = writeln!(
                out,
                "<circle cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#000\" opacity=\"0.6\"><title>{v:.0}</title></circle>",
                y_of(*v)
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>",
            top + h + 16.0,
            esc(&variant_name(m))
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
        "<text x=\"12\" y=\"{0:.1}\" transform=\"rotate(-90 12 {0:.1})\" text-anchor=\"middle\">requests/s</text>",
        top + h / 2.0
    );
    out.push_str("</svg>\n");
    out
}

/// A variant's line over concurrency: its name, colour, and (concurrency index, QPS spread).
type Line = (String, &'static str, Vec<(usize, crate::samples::Spread)>);

/// QPS against concurrency for one server CPU set: a line per variant through its mean QPS at
/// each concurrency (evenly spaced), the runs' range as whiskers.
pub(crate) fn qps_by_concurrency_chart(
    data: &ExportData,
    scenarios: &[&Scenario],
    palette: &Palette,
) -> String {
    let mut levels: Vec<usize> = scenarios.iter().filter_map(|s| s.concurrency).collect();
    levels.sort_unstable();
    levels.dedup();
    let mut variants: Vec<String> = Vec::new();
    for s in scenarios {
        for m in &s.members {
            let name = variant_name(m);
            if !variants.contains(&name) {
                variants.push(name);
            }
        }
    }
    // variant → (level index, spread, colour)
    let mut lines: Vec<Line> = Vec::new();
    for name in &variants {
        let mut points = Vec::new();
        let mut colour = COLOURS[0];
        for s in scenarios {
            let Some(m) = s.members.iter().find(|m| variant_name(m) == *name) else {
                continue;
            };
            colour = palette.colour(m);
            let Some(level) = s
                .concurrency
                .and_then(|c| levels.iter().position(|&l| l == c))
            else {
                continue;
            };
            if let (_, Some(spread)) = data.qps_of(m) {
                points.push((level, spread));
            }
        }
        points.sort_by_key(|p| p.0);
        lines.push((name.clone(), colour, points));
    }
    let (left, top, h) = (70.0, 14.0, 200.0);
    let w = WIDTH - left - 40.0;
    let max = nice_max(
        lines
            .iter()
            .flat_map(|(_, _, p)| p.iter().map(|(_, s)| s.max))
            .fold(0.0, f64::max),
    );
    let x_of = |i: usize| {
        if levels.len() < 2 {
            left + w / 2.0
        } else {
            left + 20.0 + (w - 40.0) * i as f64 / (levels.len() - 1) as f64
        }
    };
    let y_of = |v: f64| top + h - h * v / max;
    let mut out = String::new();
    svg_open(&mut out, top + h + 52.0, "QPS against concurrency");
    y_axis(&mut out, left, top, w, h, max, "");
    for (i, level) in levels.iter().enumerate() {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{level}</text>",
            x_of(i),
            top + h + 14.0
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">concurrency (client connections)</text>",
        left + w / 2.0,
        top + h + 28.0
    );
    for (vi, (name, colour, points)) in lines.iter().enumerate() {
        // Each variant's points a little apart, so that whiskers at one concurrency do not hide
        // each other.
        let nudge = 6.0 * (vi as f64 - (lines.len() as f64 - 1.0) / 2.0);
        let x_of = |i: usize| x_of(i) + nudge;
        let path: Vec<String> = points
            .iter()
            .map(|(i, s)| format!("{:.1},{:.1}", x_of(*i), y_of(s.mean)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"><title>{}</title></polyline>",
            path.join(" "),
            esc(name)
        );
        for (i, s) in points {
            let x = x_of(*i);
            if s.n > 1 {
                whisker(&mut out, x, y_of(s.min), y_of(s.max), 4.0);
            }
            let _ = writeln!(
                out,
                "<circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{colour}\"><title>{} at concurrency {}: {}</title></circle>",
                y_of(s.mean),
                esc(name),
                levels[*i],
                s.mean_and_sigma()
            );
        }
    }
    let entries: Vec<(&str, &str)> = lines.iter().map(|(n, c, _)| (n.as_str(), *c)).collect();
    legend_row(&mut out, left, top + h + 46.0, &entries);
    out.push_str("</svg>\n");
    out
}

/// One curve of a percentile chart.
pub(crate) struct Curve<'a> {
    /// Its legend.
    pub(crate) label: String,
    /// Its colour.
    pub(crate) colour: &'static str,
    /// Values it is drawn from.
    pub(crate) count: u64,
    /// Value at a quantile (0..=1), ns.
    pub(crate) at: Box<dyn Fn(f64) -> u64 + 'a>,
}

/// The percentile spectrum: latency (log axis) at each percentile, on a "nines" axis where x is
/// log10(1 / (1 - q)): 0 at the minimum, 1 at p90, 2 at p99, 3 at p99.9, 4 at p99.99. Curves
/// from fewer than [`MIN_CURVE_VALUES`] values are left out and named in the legend.
pub(crate) fn spectrum_chart(curves: &[Curve], height: f64) -> String {
    const NINES: f64 = 4.0;
    const STEPS: u32 = 80;
    let (drawn, hidden): (Vec<&Curve>, Vec<&Curve>) =
        curves.iter().partition(|c| c.count >= MIN_CURVE_VALUES);
    let points: Vec<Vec<(f64, u64)>> = drawn
        .iter()
        .map(|c| {
            (0..=STEPS)
                .map(|i| {
                    let x = NINES * f64::from(i) / f64::from(STEPS);
                    (x, (c.at)(1.0 - 10f64.powf(-x)).max(1))
                })
                .collect()
        })
        .collect();
    let lows = points.iter().flatten().map(|p| p.1).min().unwrap_or(1);
    let highs = points.iter().flatten().map(|p| p.1).max().unwrap_or(10);
    let lo = (lows as f64).log10().floor();
    let hi = (highs as f64).log10().ceil().max(lo + 1.0);
    let (left, top, h) = (70.0, 14.0, height);
    let legend_h = 16.0 * (drawn.len() + usize::from(!hidden.is_empty())) as f64;
    let w = WIDTH - left - 20.0;
    let x_of = |x: f64| left + w * x / NINES;
    let y_of = |ns: u64| top + h - h * ((ns as f64).log10() - lo) / (hi - lo);
    let mut out = String::new();
    svg_open(&mut out, top + h + 30.0 + legend_h, "latency by percentile");
    let mut decade = lo;
    while decade <= hi {
        let ns = 10f64.powf(decade) as u64;
        let y = y_of(ns);
        let _ = writeln!(
            out,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + w,
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
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1:.1}\" stroke=\"#eee\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{label}</text>",
            x_of(x),
            top + h,
            top + h + 14.0
        );
    }
    for (i, (c, pts)) in drawn.iter().zip(&points).enumerate() {
        let line: Vec<String> = pts
            .iter()
            .map(|(x, ns)| format!("{:.1},{:.1}", x_of(*x), y_of(*ns)))
            .collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"><title>{}</title></polyline>",
            line.join(" "),
            c.colour,
            esc(&c.label)
        );
        let y = top + h + 30.0 + 16.0 * i as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{left}\" y=\"{:.1}\" width=\"12\" height=\"4\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{y:.1}\">{} — {} values, p50 {}, p99 {}, p99.9 {}</text>",
            y - 6.0,
            c.colour,
            left + 18.0,
            esc(&c.label),
            c.count,
            duration((c.at)(0.5)),
            duration((c.at)(0.99)),
            duration((c.at)(0.999))
        );
    }
    if !hidden.is_empty() {
        let names: Vec<String> = hidden
            .iter()
            .map(|c| format!("{} ({})", c.label, c.count))
            .collect();
        let _ = writeln!(
            out,
            "<text x=\"{left}\" y=\"{:.1}\" fill=\"#666\">not drawn, fewer than {MIN_CURVE_VALUES} values: {}</text>",
            top + h + 30.0 + 16.0 * drawn.len() as f64,
            esc(&names.join(", "))
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Where one request's time goes in the server's syscalls, per variant: a bar split by syscall
/// (ns per request: calls per request × mean) and one split by CPU state (with `--off-cpu`),
/// with the client's p50 latency marked.
pub(crate) fn time_per_request_chart(scenario: &Scenario, palette: &Palette) -> Option<String> {
    let members: Vec<(&Measurement, u64)> = scenario
        .members
        .iter()
        .filter_map(|m| {
            let requests = m.requests_finished()?;
            (requests > 0).then_some((*m, requests))
        })
        .collect();
    if members.is_empty() {
        return None;
    }
    // Syscalls by total time over the scenario, largest first: one colour each.
    let mut names: Vec<(&str, u64)> = Vec::new();
    for (m, _) in &members {
        for s in &m.syscalls.syscalls {
            match names.iter_mut().find(|(n, _)| *n == s.name) {
                Some(entry) => entry.1 += s.total_ns,
                None => names.push((&s.name, s.total_ns)),
            }
        }
    }
    names.retain(|(_, t)| *t > 0);
    names.sort_by_key(|(_, t)| std::cmp::Reverse(*t));
    let colour_of = |name: &str| {
        let i = names.iter().position(|(n, _)| *n == name).unwrap_or(0);
        SYSCALL_COLOURS[i % SYSCALL_COLOURS.len()]
    };
    let per = |amount: f64, requests: u64| per_request(amount, requests).unwrap_or(0.0);
    let per_request = |s: &SyscallSummary, requests: u64| per(s.total_ns as f64, requests);
    let split = members
        .iter()
        .all(|(m, _)| m.syscalls.syscalls.iter().all(|s| s.off_cpu.is_some()));
    let total_of = |m: &Measurement, requests: u64| -> f64 {
        m.syscalls
            .syscalls
            .iter()
            .map(|s| per_request(s, requests))
            .sum()
    };
    let p50 = |m: &Measurement| {
        m.load
            .as_ref()
            .map_or(0.0, |l| l.latency.value_at_quantile(0.5) as f64)
    };
    let max = nice_max(
        members
            .iter()
            .map(|(m, r)| total_of(m, *r).max(p50(m)))
            .fold(0.0, f64::max),
    );
    let bars_per = if split { 2.0 } else { 1.0 };
    let row_h = 14.0 * bars_per + 14.0;
    let (left, top) = (110.0, 10.0);
    let width = WIDTH - left - 30.0;
    let height = row_h * members.len() as f64;
    let legend_rows = 2.0;
    let mut out = String::new();
    svg_open(
        &mut out,
        top + height + 30.0 + 18.0 * legend_rows,
        "time per request by syscall and CPU state",
    );
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let x = left + width * f64::from(i) / 4.0;
        let _ = writeln!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + height,
            top + height + 14.0,
            duration(v as u64)
        );
    }
    let x_of = |ns: f64| left + width * ns / max;
    for (row, (m, requests)) in members.iter().enumerate() {
        let y = top + row_h * row as f64;
        let _ = writeln!(
            out,
            "<rect x=\"2\" y=\"{:.1}\" width=\"6\" height=\"{:.1}\" fill=\"{}\"/><text x=\"12\" y=\"{:.1}\" font-weight=\"bold\">{}</text>",
            y + 4.0,
            row_h - 12.0,
            palette.colour(m),
            y + 15.0,
            esc(&variant_name(m))
        );
        // By syscall.
        let mut x = 0.0;
        let mut ordered: Vec<&SyscallSummary> = m.syscalls.syscalls.iter().collect();
        ordered.sort_by_key(|s| names.iter().position(|(n, _)| *n == s.name));
        for s in ordered {
            let v = per_request(s, *requests);
            if v <= 0.0 {
                continue;
            }
            let _ = writeln!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"12\" fill=\"{}\"><title>{} {}: {} per request ({:.2} calls)</title></rect>",
                x_of(x),
                y + 4.0,
                x_of(v) - left,
                colour_of(&s.name),
                esc(&variant_name(m)),
                esc(&s.name),
                duration(v as u64),
                per(s.calls as f64, *requests)
            );
            x += v;
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>",
            x_of(x) + 4.0,
            y + 14.0,
            duration(x as u64)
        );
        // By CPU state.
        if split {
            let (mut on, mut blocked, mut runnable) = (0.0, 0.0, 0.0);
            for s in &m.syscalls.syscalls {
                if let Some((o, b, r)) = s.time_split() {
                    on += per(o as f64, *requests);
                    blocked += per(b as f64, *requests);
                    runnable += per(r as f64, *requests);
                }
            }
            let mut x = 0.0;
            for ((what, colour), v) in STATES.iter().zip([on, blocked, runnable]) {
                if v <= 0.0 {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"12\" fill=\"{colour}\"><title>{} {what}: {} per request</title></rect>",
                    x_of(x),
                    y + 18.0,
                    x_of(v) - left,
                    esc(&variant_name(m)),
                    duration(v as u64)
                );
                x += v;
            }
        }
        // The client's p50, for scale.
        let p = p50(m);
        if p > 0.0 {
            let _ = writeln!(
                out,
                "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"#000\" stroke-dasharray=\"3,2\"><title>{3} client latency p50: {4}</title></line>",
                x_of(p),
                y + 2.0,
                y + row_h - 8.0,
                esc(&variant_name(m)),
                duration(p as u64)
            );
        }
    }
    let syscalls: Vec<(&str, &str)> = names.iter().map(|(n, _)| (*n, colour_of(n))).collect();
    legend_row(&mut out, left, top + height + 34.0, &syscalls);
    if split {
        let mut states: Vec<(&str, &str)> = STATES.to_vec();
        states.push(("┆ client p50", "#000"));
        legend_row(&mut out, left, top + height + 52.0, &states);
    }
    out.push_str("</svg>\n");
    Some(out)
}

/// Calls per request (per second for attach) of one scenario: per syscall, a bar per variant.
pub(crate) fn calls_chart(
    data: &ExportData,
    scenario: &Scenario,
    palette: &Palette,
    per_request: bool,
) -> String {
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
    let members = &scenario.members;
    let names: Vec<&str> = names
        .into_iter()
        .filter(|n| members.iter().any(|m| value(m, n) > 0.0))
        .collect();
    if names.is_empty() {
        return "<p>No timed syscalls were made.</p>\n".to_owned();
    }
    let (left, top, h) = (70.0, 14.0, 160.0);
    let w = WIDTH - left - 20.0;
    let max = nice_max(
        names
            .iter()
            .flat_map(|n| members.iter().map(|m| value(m, n)))
            .fold(0.0, f64::max),
    );
    let mut out = String::new();
    svg_open(&mut out, top + h + 44.0, "calls per request");
    y_axis(&mut out, left, top, w, h, max, "");
    let slot = w / names.len() as f64;
    let bw = slot * 0.8 / members.len().max(1) as f64;
    for (j, name) in names.iter().enumerate() {
        let x0 = left + slot * j as f64 + slot * 0.1;
        for (i, m) in members.iter().enumerate() {
            let v = value(m, name);
            let _ = writeln!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bw:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} {}: {:.3}</title></rect>",
                x0 + bw * i as f64,
                top + h - h * v / max,
                h * v / max,
                palette.colour(m),
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
    let entries: Vec<(String, &str)> = members
        .iter()
        .map(|m| (variant_name(m), palette.colour(m)))
        .collect();
    let entries: Vec<(&str, &str)> = entries.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    legend_row(&mut out, left, top + h + 38.0, &entries);
    out.push_str("</svg>\n");
    out
}
