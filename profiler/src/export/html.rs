//! `--export-html FILE.html` (alias `--report`): one self-contained page (inline CSS and SVG, no
//! script, no external asset) with the report's charts ([`super::charts`]: per scenario, a
//! colour per variant) and then every section of the report as tables: QPS per variant with the
//! spread of runs, QPS against concurrency, baseline against profiled QPS with the interval of
//! the change, the client's latency percentiles, where a request's time goes (by syscall and
//! by CPU state), the percentile spectrum of each syscall with the variants compared, calls
//! per request (per second for `attach`), and strace's time per call against the kernel's.

use std::fmt::Write as _;

use anyhow::Result;

use super::{
    Comparison, ExportData, Exporter, StraceComparison,
    charts::{
        COLOURS, Curve, Palette, WIDTH, calls_chart, legend_row, nice_max,
        qps_by_concurrency_chart, qps_chart, scenarios, spectrum_chart, time_per_request_chart,
        whisker, y_axis,
    },
};
use crate::{
    comparison::{RunKind, VERDICTS_HEADING},
    report::{
        table::{Table, escape_html as esc},
        units::duration_ns,
    },
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
    // The answer first (`run`'s verdicts), before the settings and charts.
    let document = data.document();
    let (verdicts, rest): (Vec<&crate::report::document::Part>, Vec<_>) = document
        .parts
        .iter()
        .partition(|p| p.heading == VERDICTS_HEADING);
    for part in verdicts {
        out.push_str(
            &crate::report::document::Document {
                parts: vec![part.clone()],
            }
            .to_html(),
        );
    }
    if !md.settings.is_empty() {
        let mut t = Table::new(["setting", "value"]);
        for (k, v) in &md.settings {
            t.row([k.clone(), v.clone()]);
        }
        out.push_str(&t.to_html());
    }

    let summaries = data.summaries();
    let palette = Palette::of(&summaries);
    let scenarios = scenarios(&summaries);
    let heading = |out: &mut String, s: &super::charts::Scenario| {
        if !s.title.is_empty() {
            let _ = writeln!(out, "<h3>{}</h3>", esc(&s.title));
        }
    };
    if summaries.iter().any(|m| m.load.is_some()) {
        out.push_str("<h2>Throughput</h2>\n");
        out.push_str(
            "<p class=\"note\">Per scenario (a concurrency and a server CPU set: never pooled), each variant's mean QPS over its runs; the dots are the runs, the whisker their range. A variant has one colour in every chart.</p>\n",
        );
        for s in &scenarios {
            heading(&mut out, s);
            out.push_str(&qps_chart(data, s, &palette));
        }
        // QPS against concurrency, per server CPU set, where there are several concurrencies.
        let mut sets: Vec<Option<String>> = Vec::new();
        for s in &scenarios {
            if !sets.contains(&s.server_cpus) {
                sets.push(s.server_cpus.clone());
            }
        }
        for set in sets {
            let of_set: Vec<&super::charts::Scenario> =
                scenarios.iter().filter(|s| s.server_cpus == set).collect();
            let mut levels: Vec<usize> = of_set.iter().filter_map(|s| s.concurrency).collect();
            levels.sort_unstable();
            levels.dedup();
            if levels.len() < 2 {
                continue;
            }
            let _ = writeln!(
                out,
                "<h2>QPS against concurrency{}</h2>",
                set.as_deref()
                    .map(|c| format!(", server CPUs {}", esc(c)))
                    .unwrap_or_default()
            );
            out.push_str(&qps_by_concurrency_chart(data, &of_set, &palette));
        }
    }
    let baselines: Vec<&Comparison> = data
        .comparisons
        .iter()
        .filter(|c| c.reference.is_none() && c.change.relative_to == RunKind::Baseline)
        .collect();
    if !baselines.is_empty() {
        out.push_str("<h2>Profiled against baseline QPS</h2>\n");
        out.push_str(
            "<p class=\"note\">Median QPS of the baseline runs (nothing attached, grey) and of the profiled runs made next to each (the variant's colour); the whisker is the 95% interval of the paired change, drawn around the profiled bar.</p>\n",
        );
        out.push_str(&baseline_chart(&baselines, &palette));
    }

    if summaries.iter().any(|m| m.load.is_some()) {
        out.push_str("<h2>Client latency by percentile</h2>\n");
        out.push_str(
            "<p class=\"note\">Each request's latency as the load generator saw it, at each percentile on a log \"nines\" axis (50%, 90%, 99%, 99.9%, 99.99%), per scenario; log latency axis.</p>\n",
        );
        for s in &scenarios {
            let curves: Vec<Curve> = s
                .members
                .iter()
                .filter_map(|m| {
                    let l = m.load.as_ref()?;
                    Some(Curve {
                        label: m.variant.clone().unwrap_or_default(),
                        colour: palette.colour(m),
                        count: l.latency.len(),
                        at: Box::new(move |q| l.latency.value_at_quantile(q)),
                    })
                })
                .collect();
            heading(&mut out, s);
            out.push_str(&spectrum_chart(&curves, 160.0));
        }
        out.push_str("<h2>Where a request's time goes</h2>\n");
        out.push_str(
            "<p class=\"note\">Per variant, the time its server spent in each timed syscall per finished request (calls per request × mean; top bar) and, with --off-cpu, that time by CPU state (bottom bar); the dashed line is the client's p50 latency. The server's time counts every thread, waiting included: epoll_wait blocked between requests, idle workers (mp) and calls that overlap other requests' (concurrency above 1) can make it exceed the latency a client sees; the on-CPU part is what serving costs.</p>\n",
        );
        for s in &scenarios {
            if let Some(chart) = time_per_request_chart(s, &palette) {
                heading(&mut out, s);
                out.push_str(&chart);
            }
        }
    }

    out.push_str("<h2>Latency by percentile, per syscall</h2>\n");
    let _ = writeln!(
        out,
        "<p class=\"note\">One chart per scenario and syscall, the variants compared in their colours: latency at each percentile on a log \"nines\" axis, from the kernel's buckets (each at most 1/32 of its value wide; a percentile is its bucket's midpoint, within 1/64), as HdrHistogram plots are drawn; curves from fewer than {} calls are not drawn (their percentiles are a few calls), only named.</p>",
        super::charts::MIN_CURVE_VALUES
    );
    let mut any = false;
    for s in &scenarios {
        for name in data.syscall_names() {
            let curves: Vec<Curve> = s
                .members
                .iter()
                .filter_map(|m| {
                    let sc = m.syscalls.syscall(name).filter(|x| x.latency.total() > 0)?;
                    Some(Curve {
                        label: m
                            .variant
                            .clone()
                            .unwrap_or_else(|| "all traced processes".to_owned()),
                        colour: palette.colour(m),
                        count: sc.latency.total(),
                        at: Box::new(move |q| sc.latency.value_at_quantile(q)),
                    })
                })
                .collect();
            if curves.is_empty() {
                continue;
            }
            any = true;
            let _ = writeln!(
                out,
                "<h3>{}{}</h3>",
                esc(name),
                if s.title.is_empty() {
                    String::new()
                } else {
                    format!(" — {}", esc(&s.title))
                }
            );
            out.push_str(&spectrum_chart(&curves, 130.0));
        }
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
    for s in &scenarios {
        heading(&mut out, s);
        out.push_str(&calls_chart(data, s, &palette, per_request));
    }

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
    out.push_str(
        &crate::report::document::Document {
            parts: rest.into_iter().cloned().collect(),
        }
        .to_html(),
    );
    out.push_str("</body></html>\n");
    out
}

/// Per variant and concurrency: the baseline's median QPS and the profiled runs', with the
/// interval of the paired change around the profiled bar.
fn baseline_chart(comparisons: &[&Comparison], palette: &Palette) -> String {
    let (left, top, h) = (70.0, 20.0, 200.0);
    let w = WIDTH - left - 20.0;
    // The interval of the change around the profiled bar; none (the median alone) where the
    // pairs cannot give one.
    let interval = |c: &Comparison| {
        let base = c.change.qps_relative_to;
        let (low, high) = c
            .change
            .qps
            .interval
            .map_or((c.change.qps.median, c.change.qps.median), |i| {
                (i.low, i.high)
            });
        (base * (1.0 + low / 100.0), base * (1.0 + high / 100.0))
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
            (c.change.qps_of, "profiled", palette.colour_of(&c.variant)),
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
            "<text x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + h + 32.0,
            esc(&q.cell("pairs"))
        );
        let _ = writeln!(
            out,
            "<text x=\"{mid:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            top + h + 48.0,
            esc(&c.change.verdict.words("faster", "slower"))
        );
    }
    legend_row(
        &mut out,
        left,
        top + h + 64.0,
        &[
            ("baseline", "#9e9e9e"),
            ("profiled (the variant's colour)", "#555"),
        ],
    );
    out.push_str("</svg>\n");
    out
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
