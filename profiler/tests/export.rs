//! Every export format, checked by a real consumer of it where one exists: promtool for the
//! Prometheus text, the PyPI `hdrhistogram` package for the interval logs, headless Chromium for
//! the HTML report, serde_json for JSON; and the `attach` command writing them end to end.
//!
//! A missing consumer is a failure naming the package to install, never a silent skip.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use profiler::{
    export::{
        ExportArgs, ExportData, Exporter, csv::Csv, hdr, html::Html, json::Json,
        markdown::Markdown, prometheus::Prometheus, write_exports,
    },
    stats::ReturnUnit,
};

#[path = "fixtures/synthetic.rs"]
mod synthetic;

mod common;

use common::serial;
use synthetic::{Shape, attach_data, run_data};

fn scratch(name: &str) -> PathBuf {
    common::scratch("export", name)
}

fn text(exporter: &dyn Exporter, data: &ExportData) -> String {
    String::from_utf8(exporter.render(data).unwrap()).unwrap()
}

// ---------- JSON ----------

#[test]
fn json_has_schema_version_metadata_and_buckets_that_add_up_to_the_calls() {
    let data = run_data(&Shape::small());
    let v: serde_json::Value = serde_json::from_str(&text(&Json, &data)).unwrap();
    assert_eq!(v["schema_version"], profiler::export::SCHEMA_VERSION);
    assert_eq!(v["partial"], false);
    assert_eq!(v["metadata"]["command"], "run");
    let ms = v["measurements"].as_array().unwrap();
    assert_eq!(ms.len(), data.measurements.len());
    for (m, original) in ms.iter().zip(&data.measurements) {
        assert_eq!(m["variant"].as_str(), original.variant.as_deref());
        assert_eq!(m["run"].as_u64(), original.run.map(u64::from));
        assert!(m["load"]["qps"].as_f64().unwrap() > 0.0);
        let load_count: u64 = m["load"]["latency_ns"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["count"].as_u64().unwrap())
            .sum();
        assert_eq!(load_count, original.load.as_ref().unwrap().latency.len());
        for (s, o) in m["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&original.syscalls.syscalls)
        {
            assert_eq!(s["name"], o.name.as_str());
            assert_eq!(s["calls"].as_u64().unwrap(), o.calls);
            let buckets = s["latency_buckets"].as_array().unwrap();
            let sum: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
            assert_eq!(sum, o.calls, "{}: bucket counts add up to calls", o.name);
            for b in buckets {
                assert!(b["low"].as_u64().unwrap() <= b["high"].as_u64().unwrap());
            }
            assert_eq!(
                s["p99_ns"].as_u64().unwrap(),
                o.latency.value_at_quantile(0.99)
            );
            for unit in ReturnUnit::ALL {
                let of_unit = o.returned.as_ref().is_some_and(|r| r.unit == unit);
                let field = &s[format!("{}_per_call", unit.key())];
                assert_eq!(!field.is_null(), of_unit, "{}: {field}", o.name);
                if of_unit {
                    let r = o.returned.as_ref().unwrap();
                    assert_eq!(field["calls"].as_u64(), Some(r.per_call.total()));
                    assert!((field["zero_share"].as_f64().unwrap() - r.zero_share()).abs() < 1e-9);
                }
            }
            if o.errors.total() > 0 {
                assert_eq!(
                    s["errors"]["by_errno"]["EAGAIN"].as_u64().unwrap(),
                    o.errors.0[0]
                );
            }
        }
        assert!(m["dropped"]["by_reason"]["no_start"].is_u64());
    }
}

#[test]
fn json_of_attach_has_null_variant_and_run() {
    let v: serde_json::Value = serde_json::from_str(&text(&Json, &attach_data())).unwrap();
    let m = &v["measurements"][0];
    assert!(m["variant"].is_null() && m["run"].is_null() && m["load"].is_null());
    assert_eq!(m["processes"].as_array().unwrap().len(), 3);
}

// ---------- CSV ----------

#[test]
fn csv_has_a_header_and_one_row_per_variant_run_syscall() {
    let data = run_data(&Shape::small());
    let out = text(&Csv, &data);
    let lines: Vec<&str> = out.lines().collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(
        header[..5],
        ["variant", "concurrency", "run", "server_cpus", "syscall"]
    );
    let rows = &lines[1..];
    let expected: usize = data
        .measurements
        .iter()
        .map(|m| m.syscalls.syscalls.len())
        .sum();
    assert_eq!(rows.len(), expected);
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for (row, (m, s)) in rows.iter().zip(
        data.measurements
            .iter()
            .flat_map(|m| m.syscalls.syscalls.iter().map(move |s| (m, s))),
    ) {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{row}");
        assert_eq!(cells[col("variant")], m.variant.as_deref().unwrap());
        assert_eq!(
            cells[col("run")],
            m.run.map(|r| r.to_string()).unwrap_or_default()
        );
        assert_eq!(cells[col("syscall")], s.name);
        assert_eq!(cells[col("calls")].parse::<u64>().unwrap(), s.calls);
        assert_eq!(
            cells[col("p99_9_ns")].parse::<u64>().unwrap(),
            s.latency.value_at_quantile(0.999)
        );
    }
}

#[test]
fn csv_quotes_fields_with_commas() {
    let mut data = run_data(&Shape {
        runs: 1,
        ..Shape::small()
    });
    data.measurements[0].variant = Some("odd,\"name\"".into());
    let out = text(&Csv, &data);
    assert!(
        out.lines()
            .nth(1)
            .unwrap()
            .starts_with("\"odd,\"\"name\"\"\","),
        "{out}"
    );
}

// ---------- Prometheus ----------

fn promtool_check(exposition: &str) {
    use std::io::Write as _;
    let promtool = common::require_tool("promtool", "prometheus");
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && report.trim().is_empty(),
        "promtool check metrics:\n{report}"
    );
}

#[test]
fn prometheus_output_passes_promtool_for_run_and_attach_data() {
    promtool_check(&text(&Prometheus, &run_data(&Shape::small())));
    promtool_check(&text(&Prometheus, &attach_data()));
}

/// (le, cumulative count) of one series' buckets.
fn buckets_of(exposition: &str, series_prefix: &str) -> Vec<(String, u64)> {
    exposition
        .lines()
        .filter(|l| l.starts_with(series_prefix))
        .map(|l| {
            let le = l
                .split("le=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_owned();
            (le, l.rsplit(' ').next().unwrap().parse().unwrap())
        })
        .collect()
}

#[test]
fn prometheus_value_at_a_kernel_bucket_high_lands_in_that_le_and_one_more_in_the_next() {
    use profiler::stats::{LatencyHistogram, SyscallSummary};
    // 127 ns is the high of the kernel bucket [126, 127]; 128 ns opens [128, 131]; 255/256 likewise.
    for (value, le_in, le_below) in [
        (127u64, "0.000000127", "0.000000063"),
        (128, "0.000000255", "0.000000127"),
        (255, "0.000000255", "0.000000127"),
        (256, "0.000000511", "0.000000255"),
        (1_048_575, "0.001048575", "0.000524287"),
        (1_048_576, "0.002097151", "0.001048575"),
    ] {
        let mut data = attach_data();
        let mut latency = LatencyHistogram::default();
        latency.record_n(value, 1);
        data.measurements[0].syscalls.syscalls = vec![SyscallSummary {
            name: "close".into(),
            calls: 1,
            total_ns: value,
            min_ns: value,
            max_ns: value,
            latency,
            ..Default::default()
        }];
        let out = text(&Prometheus, &data);
        let buckets = buckets_of(
            &out,
            "syscall_profiler_syscall_latency_seconds_bucket{syscall=\"close\"",
        );
        let count_at = |le: &str| {
            buckets
                .iter()
                .find(|(l, _)| l == le)
                .unwrap_or_else(|| panic!("no le={le}"))
                .1
        };
        assert_eq!(
            count_at(le_in),
            1,
            "{value} ns must be counted at le={le_in}"
        );
        assert_eq!(
            count_at(le_below),
            0,
            "{value} ns must not be counted at le={le_below}"
        );
        assert_eq!(count_at("+Inf"), 1);
        assert!(
            out.contains("syscall_profiler_syscall_latency_seconds_count{syscall=\"close\"} 1")
        );
        promtool_check(&out);
    }
}

#[test]
fn prometheus_buckets_are_cumulative_and_inf_equals_count() {
    let data = run_data(&Shape::small());
    let out = text(&Prometheus, &data);
    let m = data.summaries()[0];
    for s in &m.syscalls.syscalls {
        let prefix = format!(
            "syscall_profiler_syscall_latency_seconds_bucket{{syscall=\"{}\",variant=\"lt\",concurrency=\"10\",server_cpus=\"0\"",
            s.name
        );
        let buckets = buckets_of(&out, &prefix);
        assert_eq!(buckets.len(), 32, "31 power-of-two bounds and +Inf");
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative");
        assert_eq!(buckets.last().unwrap(), &("+Inf".to_owned(), s.calls));
        let errors = format!(
            "syscall_profiler_syscall_errors_total{{syscall=\"{}\",variant=\"lt\",concurrency=\"10\",server_cpus=\"0\",errno=\"EAGAIN\"}} {}",
            s.name, s.errors.0[0]
        );
        assert!(out.contains(&errors), "missing {errors}");
    }
    assert!(
        !out.contains("run=\""),
        "runs are summarised by their aggregate"
    );
}

// ---------- HdrHistogram ----------

const DECODE: &str = r#"
import sys, json
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
out = []
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600 * 10**9, 3))
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    out.append({"count": h.get_total_count(),
                "p": {str(p): h.get_value_at_percentile(p) for p in (50.0, 90.0, 99.0, 99.9, 100.0)},
                "recorded": [[v.value_iterated_to, v.count_at_value_iterated_to] for v in h.get_recorded_iterator()],
                "start": h.get_start_time_stamp(), "end": h.get_end_time_stamp()})
print(json.dumps(out))
"#;

#[test]
fn hdr_interval_logs_decode_with_the_pypi_package_to_the_same_counts_and_percentiles() {
    let python = common::python::python();
    let data = run_data(&Shape::small());
    let dir = scratch("hdr");
    hdr::write_dir(&dir, &data).unwrap();
    let series = hdr::series(&data).unwrap();
    assert_eq!(series.len(), 2 * 4, "one per (variant, syscall)");
    for s in &series {
        assert!(dir.join(format!("{}.hgrm", s.stem)).is_file());
        let log = dir.join(format!("{}.hlog", s.stem));
        let out = Command::new(&python)
            .args(["-c", DECODE])
            .arg(&log)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "decoding {}: {}",
            log.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let decoded: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let decoded = decoded.as_array().unwrap();
        assert_eq!(
            decoded.len(),
            s.intervals.len(),
            "{}: one interval per run",
            s.stem
        );
        assert_eq!(decoded.len(), 3);
        for (d, (_, _, h)) in decoded.iter().zip(&s.intervals) {
            assert_eq!(
                d["count"].as_u64().unwrap(),
                h.len(),
                "{} total count",
                s.stem
            );
            // The whole distribution survives: every recorded value with its count.
            let theirs: Vec<(u64, u64)> = d["recorded"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
                .collect();
            let ours: Vec<(u64, u64)> = h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect();
            assert_eq!(theirs, ours, "{}: recorded values and counts", s.stem);
            // Percentiles agree up to one rank (Python rounds the rank, Rust takes its ceiling).
            let n = h.len() as f64;
            for (p, q) in [
                ("50.0", 0.5),
                ("90.0", 0.9),
                ("99.0", 0.99),
                ("99.9", 0.999),
                ("100.0", 1.0),
            ] {
                let theirs = d["p"][p].as_u64().unwrap();
                let low = h.value_at_quantile((q - 1.0 / n).max(0.0));
                let high = h.value_at_quantile((q + 1.0 / n).min(1.0));
                assert!(
                    (low..=high).contains(&theirs) || h.equivalent(theirs, h.value_at_quantile(q)),
                    "{} p{p}: python {theirs}, rust {low}..={high}",
                    s.stem
                );
            }
        }
    }
}

#[test]
fn hgrm_table_matches_the_hdrhistogram_layout() {
    let data = run_data(&Shape::small());
    let s = &hdr::series(&data).unwrap()[0];
    let table = hdr::percentile_distribution(&s.total);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "       Value     Percentile TotalCount 1/(1-Percentile)"
    );
    assert_eq!(lines[1], "");
    let rows: Vec<Vec<&str>> = lines[2..]
        .iter()
        .take_while(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(rows.len() > 20);
    assert!(
        rows[..rows.len() - 1].iter().all(|r| r.len() == 4),
        "value, percentile, total count, 1/(1-p)"
    );
    let last = rows.last().unwrap();
    assert_eq!(
        (last.len(), last[1]),
        (3, "1.000000000000"),
        "the 100% row has no 1/(1-p)"
    );
    assert_eq!(last[2].parse::<u64>().unwrap(), s.total.len());
    // Values are µs (ratio 1000): the median row is within the histogram's precision of p50.
    let median = rows
        .iter()
        .find(|r| r[1].parse::<f64>().unwrap() >= 0.5)
        .unwrap();
    let p50_us = s.total.value_at_quantile(0.5) as f64 / 1000.0;
    assert!(
        (median[0].parse::<f64>().unwrap() - p50_us).abs() <= p50_us * 0.002 + 0.001,
        "{median:?} vs {p50_us}"
    );
    let footer: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("#["))
        .copied()
        .collect();
    assert_eq!(footer.len(), 3);
    assert!(
        footer[0].starts_with("#[Mean    = ") && footer[1].contains("Total count    = "),
        "{footer:?}"
    );
    assert!(
        footer[2].contains("SubBuckets     =         2048"),
        "{footer:?}"
    );
}

// ---------- Markdown ----------

#[test]
fn markdown_tables_have_as_many_cells_as_columns() {
    for data in [run_data(&Shape::small()), attach_data()] {
        let out = text(&Markdown, &data);
        let mut width = None;
        for line in out.lines() {
            if !line.starts_with('|') {
                width = None;
                continue;
            }
            let cells = line.replace("\\|", "").matches('|').count();
            assert_eq!(
                *width.get_or_insert(cells),
                cells,
                "ragged table row: {line}"
            );
        }
        assert!(out.contains("| syscall | calls |"));
    }
}

// ---------- HTML ----------

/// Renders `html` in headless Chromium; returns the screenshot's pixels' (distinct colours,
/// share of non-white) and the browser's stderr.
fn chromium_render(html: &Path, dir: &Path) -> (usize, f64, String) {
    let chromium = common::require_tool("chromium", "chromium");
    let shot = dir.join("shot.png");
    let profile = dir.join("profile");
    std::fs::create_dir_all(&profile).unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1000,1400",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", html.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("chromium.log")).unwrap())
        .spawn()
        .unwrap();
    let status = common::wait_or_kill(&mut child, Duration::from_mins(1))
        .unwrap_or_else(|| panic!("chromium did not finish within 60 s"));
    let log = std::fs::read_to_string(dir.join("chromium.log")).unwrap_or_default();
    assert!(
        status.success() && shot.is_file(),
        "chromium failed ({status}):\n{log}"
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    let distinct: std::collections::HashSet<&[u8]> = pixels.iter().copied().collect();
    let non_white = pixels
        .iter()
        .filter(|p| p[..3].iter().any(|c| *c < 240))
        .count();
    (distinct.len(), non_white as f64 / pixels.len() as f64, log)
}

fn check_report(name: &str, data: &ExportData) {
    let dir = scratch(name);
    let page = dir.join("report.html");
    let html = text(&Html, data);
    assert!(
        !html.contains("http://")
            || html
                .matches("http://")
                .all(|_| html.contains("xmlns=\"http://www.w3.org/2000/svg\""))
    );
    assert!(
        !html.contains("<script") && !html.contains("<link") && !html.contains("src="),
        "self-contained"
    );
    std::fs::write(&page, &html).unwrap();
    let (colours, ink, log) = chromium_render(&page, &dir);
    assert!(
        colours > 20,
        "{name}: screenshot looks blank ({colours} distinct colours)"
    );
    assert!(
        ink > 0.02,
        "{name}: only {:.2}% of the screenshot is not white",
        ink * 100.0
    );
    // Chromium logs every console message, SVG attribute errors included, as
    // `INFO:CONSOLE:<line>] "Error: ..."`; the page has no script, so any is a fault.
    for bad in [":CONSOLE", "Uncaught", "Failed to load resource"] {
        assert!(
            !log.contains(bad),
            "{name}: console error in chromium's log:\n{log}"
        );
    }
}

/// The `<svg>` charts of a page, each with the heading (`<h2>`/`<h3>`) above it.
fn charts(html: &str) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let mut heading = String::new();
    let mut rest = html;
    while let Some(at) = rest.find("<svg") {
        let before = &rest[..at];
        if let Some(h) = before.rfind("<h3>").or_else(|| before.rfind("<h2>")) {
            let end = before[h..].find("</h").map_or(before.len(), |e| h + e);
            before[h + 4..end].clone_into(&mut heading);
        }
        let end = rest[at..].find("</svg>").expect("closed svg") + at;
        out.push((heading.clone(), &rest[at..end]));
        rest = &rest[end..];
    }
    out
}

#[test]
fn html_report_renders_in_headless_chromium_for_run_and_attach_data() {
    let run = run_data(&Shape::small());
    let html = text(&Html, &run);
    let charts = charts(&html);
    // One scenario (concurrency 10, CPUs 0): QPS, client latency, time per request, one
    // percentile chart per syscall (4), calls per request; no concurrency sweep, no baseline.
    assert_eq!(
        charts.len(),
        1 + 1 + 1 + 4 + 1,
        "{:#?}",
        charts.iter().map(|c| &c.0).collect::<Vec<_>>()
    );
    assert!(!html.contains("QPS against concurrency"));
    // A variant has one colour in every chart: lt the first, et the second.
    for (heading, svg) in &charts {
        assert!(
            svg.contains("#1f77b4") && svg.contains("#ff7f0e"),
            "{heading}: lt and et in their colours"
        );
    }
    assert!(html.contains("Client latency by percentile") && html.contains("Where a request"));
    check_report("html-run", &run);
    let attach = attach_data();
    let html = text(&Html, &attach);
    assert!(html.contains("Calls per second") && !html.contains("Throughput"));
    check_report("html-attach", &attach);
}

/// A sweep over concurrency gets its QPS-against-concurrency line, a line per variant, and
/// every chart stays within one scenario; a syscall with fewer than 100 calls is named, not
/// drawn.
#[test]
fn html_report_draws_a_line_per_variant_over_concurrency_and_hides_thin_curves() {
    let mut shape = Shape::small();
    shape.concurrencies = vec![1, 10, 100];
    let mut data = run_data(&shape);
    // et's reads at concurrency 100: five calls.
    for m in data
        .measurements
        .iter_mut()
        .filter(|m| m.variant.as_deref() == Some("et") && m.concurrency == Some(100))
    {
        let read = m
            .syscalls
            .syscalls
            .iter_mut()
            .find(|s| s.name == "read")
            .unwrap();
        read.latency = profiler::stats::LatencyHistogram::default();
        read.latency.record_n(1500, 5);
        read.calls = 5;
    }
    let html = text(&Html, &data);
    let charts = charts(&html);
    let line = charts
        .iter()
        .find(|(h, _)| h.starts_with("QPS against concurrency"))
        .expect("a QPS-against-concurrency chart");
    assert_eq!(line.1.matches("<polyline").count(), 2, "a line per variant");
    for level in ["1", "10", "100"] {
        assert!(
            line.1.contains(&format!(">{level}</text>")),
            "concurrency {level} on the axis"
        );
    }
    let qps_charts = charts
        .iter()
        .filter(|(_, svg)| svg.contains("aria-label=\"QPS per variant\""))
        .count();
    assert_eq!(qps_charts, 3, "one QPS chart per scenario");
    let (_, thin) = charts
        .iter()
        .find(|(h, _)| h.starts_with("read — concurrency 100"))
        .expect("read at concurrency 100");
    assert_eq!(
        thin.matches("<polyline").count(),
        1,
        "et's five reads are not drawn"
    );
    assert!(
        thin.contains("not drawn, fewer than 100 values: et (5)"),
        "{thin}"
    );
    check_report("html-sweep", &data);
}

// ---------- write_exports ----------

#[test]
fn write_exports_writes_every_format_and_nothing_else() {
    let dir = scratch("all");
    let args = ExportArgs {
        export_json: Some(dir.join("r.json")),
        export_csv: Some(dir.join("r.csv")),
        export_hdr: Some(dir.join("hdr")),
        export_prom: Some(dir.join("r.prom")),
        export_markdown: Some(dir.join("r.md")),
        report: Some(dir.join("r.html")),
        export_folded: None,
        export_pprof: Some(dir.join("r.pb.gz")),
    };
    let mut data = run_data(&Shape::small());
    data.partial = true;
    write_exports(&args, &data).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "hdr", "r.csv", "r.html", "r.json", "r.md", "r.pb.gz", "r.prom"
        ],
        "no temporary files left"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r.json")).unwrap()).unwrap();
    assert_eq!(json["partial"], true);
    // 16 histograms and the manifest of what this export wrote.
    assert_eq!(std::fs::read_dir(dir.join("hdr")).unwrap().count(), 17);
    assert!(
        dir.join("hdr")
            .join(profiler::export::hdr::MANIFEST)
            .is_file()
    );
}

#[test]
fn bad_export_paths_fail_before_measuring_with_one_line() {
    let two_stdout = ExportArgs {
        export_json: Some("-".into()),
        export_csv: Some("-".into()),
        ..Default::default()
    };
    let e = profiler::export::check_export_args(&two_stdout)
        .unwrap_err()
        .to_string();
    assert!(e.contains("stdout") && !e.contains('\n'), "{e}");
    let missing = ExportArgs {
        export_json: Some("/nonexistent-xyz/r.json".into()),
        ..Default::default()
    };
    let e = profiler::export::check_export_args(&missing)
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not exist"), "{e}");
    let hdr_stdout = ExportArgs {
        export_hdr: Some("-".into()),
        ..Default::default()
    };
    assert!(profiler::export::check_export_args(&hdr_stdout).is_err());
}

#[test]
fn two_exports_to_one_file_or_an_unwritable_one_fail_before_measuring() {
    let dir = std::env::temp_dir().join(format!("profiler-same-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let same = ExportArgs {
        export_json: Some(dir.join("x")),
        export_csv: Some(dir.join(".").join("x")),
        ..Default::default()
    };
    let e = profiler::export::check_export_args(&same)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--export-json") && e.contains("--export-csv") && e.contains("same file"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    // The same through a symlink to an existing file.
    std::fs::write(dir.join("real.json"), b"").unwrap();
    std::os::unix::fs::symlink(dir.join("real.json"), dir.join("link.json")).unwrap();
    let linked = ExportArgs {
        export_json: Some(dir.join("real.json")),
        report: Some(dir.join("link.json")),
        ..Default::default()
    };
    assert!(profiler::export::check_export_args(&linked).is_err());
    let unwritable = ExportArgs {
        export_prom: Some("/proc/profiler.prom".into()),
        ..Default::default()
    };
    let e = profiler::export::check_export_args(&unwritable)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--export-prom") && e.contains("/proc"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------- attach, end to end (loads BPF: root) ----------

#[test]
fn attach_writes_its_exports_for_a_command() {
    let _serial = serial();
    let dir = scratch("attach-cmd");
    let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args(["attach", "--syscalls", "close,read"])
        .arg("--export-json")
        .arg(dir.join("a.json"))
        .arg("--export-prom")
        .arg(dir.join("a.prom"))
        .arg("--export-hdr")
        .arg(dir.join("hdr"))
        .args([
            "--",
            "/bin/sh",
            "-c",
            "for i in 1 2 3 4 5 6 7 8 9 10; do cat /dev/null; done",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "attach failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("a.json")).unwrap()).unwrap();
    assert_eq!(json["metadata"]["command"], "attach");
    assert_eq!(json["partial"], false);
    let m = &json["measurements"][0];
    assert!(m["variant"].is_null() && m["run"].is_null());
    let close = m["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "close")
        .unwrap();
    assert!(
        close["calls"].as_u64().unwrap() >= 10,
        "each cat closes at least one file: {close}"
    );
    promtool_check(&std::fs::read_to_string(dir.join("a.prom")).unwrap());
    assert!(dir.join("hdr/close.hgrm").is_file() && dir.join("hdr/close.hlog").is_file());
}

/// `attach --off-cpu`: a sleeping call is blocked in the table, the JSON and the Prometheus
/// series (which promtool accepts), and the three parts add up to the latency.
#[test]
fn attach_off_cpu_splits_a_sleep_into_blocked_time_in_every_export() {
    let _serial = serial();
    let dir = scratch("attach-off-cpu");
    let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args(["attach", "--off-cpu", "--syscalls", "clock_nanosleep"])
        .arg("--export-json")
        .arg(dir.join("a.json"))
        .arg("--export-prom")
        .arg(dir.join("a.prom"))
        .arg("--export-markdown")
        .arg(dir.join("a.md"))
        .args(["--", "/bin/sh", "-c", "sleep 0.05; sleep 0.05"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "attach failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("On and off the CPU"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("a.json")).unwrap()).unwrap();
    let sleep = json["measurements"][0]["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "clock_nanosleep")
        .unwrap();
    let split = &sleep["off_cpu"];
    let part = |k: &str| split[k].as_u64().unwrap();
    let total = sleep["total_ns"].as_u64().unwrap();
    assert_eq!(sleep["calls"], 2, "{sleep}");
    assert_eq!(
        part("on_cpu_ns") + part("blocked_ns") + part("runnable_ns"),
        total
    );
    assert!(
        part("blocked_ns") as f64 > 0.9 * total as f64,
        "a sleep is blocked: {split}"
    );
    let prom = std::fs::read_to_string(dir.join("a.prom")).unwrap();
    promtool_check(&prom);
    assert!(
        prom.contains("syscall_time_seconds_total{syscall=\"clock_nanosleep\",state=\"blocked\"}"),
        "{prom}"
    );
    assert!(prom.contains("syscall_on_cpu_seconds_bucket"));
    assert!(
        std::fs::read_to_string(dir.join("a.md"))
            .unwrap()
            .contains("### On and off the CPU")
    );
}

/// `attach --slow`: two 50 ms sleeps are the two slow calls, in the terminal, the JSON (with a
/// kernel stack in the sleep and a user stack in libc) and the Markdown and HTML reports.
#[test]
fn attach_slow_reports_the_slow_calls_in_every_document_format() {
    let _serial = serial();
    let dir = scratch("attach-slow");
    let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args([
            "attach",
            "--slow",
            "20ms",
            "--syscalls",
            "clock_nanosleep,close",
        ])
        .arg("--export-json")
        .arg(dir.join("a.json"))
        .arg("--export-markdown")
        .arg(dir.join("a.md"))
        .arg("--report")
        .arg(dir.join("a.html"))
        .arg("--export-folded")
        .arg(dir.join("a.folded"))
        .args(["--", "/bin/sh", "-c", "sleep 0.05; sleep 0.05"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "attach failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("Slowest calls (--slow: 2 calls of 20.0ms or more"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("a.json")).unwrap()).unwrap();
    let slow = &json["measurements"][0]["slow"];
    assert_eq!(slow["recorded"], 2, "{slow}");
    assert_eq!(slow["lost"], 0, "{slow}");
    assert_eq!(slow["threshold_ns"], 20_000_000, "{slow}");
    let groups = slow["groups"].as_array().unwrap();
    assert_eq!(
        groups
            .iter()
            .map(|g| g["count"].as_u64().unwrap())
            .sum::<u64>(),
        2
    );
    for g in groups {
        assert_eq!(g["syscall"], "clock_nanosleep", "{g}");
        assert!(g["slowest"]["duration_ns"].as_u64().unwrap() >= 20_000_000);
        let names = |key: &str| -> Vec<String> {
            g[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["function"].as_str().unwrap().to_owned())
                .collect()
        };
        assert!(
            names("kernel_stack")
                .iter()
                .any(|f| f.contains("nanosleep")),
            "{g}"
        );
        assert!(
            g["user_stack"][0]["module"]
                .as_str()
                .is_some_and(|m| m.contains("libc")),
            "{g}"
        );
    }
    // The folded stacks: `comm;user;-;kernel;[state] MICROSECONDS`, adding up to the two
    // sleeps, and read by a real flame-graph tool (inferno, the Rust port of flamegraph.pl).
    let folded = std::fs::read_to_string(dir.join("a.folded")).unwrap();
    let mut total_us = 0;
    for line in folded.lines() {
        let (stack, value) = line.rsplit_once(' ').expect("STACK VALUE");
        total_us += value.parse::<u64>().expect("an integer value");
        let frames: Vec<&str> = stack.split(';').collect();
        assert_eq!(frames[0], "sleep", "{line}");
        assert!(frames.contains(&"-"), "{line}");
        assert!(
            ["[on-CPU]", "[blocked]", "[runnable]"].contains(frames.last().unwrap()),
            "{line}"
        );
        assert!(frames.iter().any(|f| f.contains("nanosleep")), "{line}");
    }
    let slow_ns: u64 = groups.iter().map(|g| g["total_ns"].as_u64().unwrap()).sum();
    assert!(
        total_us.abs_diff(slow_ns / 1000) <= 3,
        "{total_us} µs folded, {slow_ns} ns slow: {folded}"
    );
    assert!(folded.contains(";[blocked] "), "{folded}");
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(
        &mut inferno::flamegraph::Options::default(),
        folded.lines(),
        &mut svg,
    )
    .expect("inferno draws the folded stacks");
    let svg = String::from_utf8(svg).unwrap();
    assert!(
        svg.contains("clock_nanosleep") && svg.contains("[blocked]"),
        "{svg}"
    );
    let md = std::fs::read_to_string(dir.join("a.md")).unwrap();
    assert!(md.contains("### Slowest calls"), "{md}");
    assert!(md.contains("clock_nanosleep"), "{md}");
    let html = std::fs::read_to_string(dir.join("a.html")).unwrap();
    assert!(
        html.contains("<h3>Slowest calls"),
        "no slow section in the HTML"
    );
    // The report draws the same stacks as a flame graph: a frame per stack level, the states on
    // top, each with its time as its tooltip.
    assert!(
        html.contains("<svg class=\"flame\""),
        "no flame graph in the HTML"
    );
    for frame in ["<title>sleep: ", "<title>[blocked]: ", "clock_nanosleep"] {
        assert!(html.contains(frame), "the flame graph lacks {frame}");
    }
}

/// `attach --cgroup A --cgroup B`: the per-cgroup rows reach the JSON (a `cgroup` field) and
/// Prometheus (series with a `cgroup` label, which promtool accepts), with exact close counts.
#[test]
fn attach_by_cgroup_labels_its_rows_and_series() {
    let _serial = serial();
    // Wherever cgroup2 is mounted (unified or hybrid); `--cgroup` takes paths relative to it.
    let root = profiler::cgroup::cgroup2_root().expect("this test needs a cgroup2 mount");
    let dir = scratch("attach-cgroup");
    let names = [
        format!("syscall-profiler-export-{}-a", std::process::id()),
        format!("syscall-profiler-export-{}-b", std::process::id()),
    ];
    for n in &names {
        std::fs::create_dir(root.join(n)).unwrap();
    }
    // Each shell joins its cgroup, waits for attach to be tracing, then closes -1 N times.
    let workers: Vec<std::process::Child> = names
        .iter()
        .zip([20, 30])
        .map(|(n, closes)| {
            Command::new("python3")
                .arg("-c")
                .arg(format!(
                    "import os, time\nopen('{}/{n}/cgroup.procs', 'w').write(str(os.getpid()))\ntime.sleep(1.5)\nfor _ in range({closes}):\n    try: os.close(-1)\n    except OSError: pass\n",
                    root.display()
                ))
                .spawn()
                .unwrap()
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args(["attach", "--syscalls", "close", "--duration", "3s"])
        .args(["--cgroup", &names[0], "--cgroup", &names[1]])
        .arg("--export-json")
        .arg(dir.join("c.json"))
        .arg("--export-prom")
        .arg(dir.join("c.prom"))
        .output()
        .unwrap();
    for mut w in workers {
        let _ = w.wait();
    }
    for n in &names {
        let _ = std::fs::remove_dir(root.join(n));
    }
    assert!(
        out.status.success(),
        "attach failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("c.json")).unwrap()).unwrap();
    let processes = json["measurements"][0]["processes"].as_array().unwrap();
    for (n, closes) in names.iter().zip([20, 30]) {
        let row = processes
            .iter()
            .find(|p| p["cgroup"] == format!("/{n}"))
            .unwrap_or_else(|| panic!("no row for {n}: {processes:?}"));
        assert_eq!(row["syscalls"]["close"]["errors"], closes, "{row}");
    }
    let prom = std::fs::read_to_string(dir.join("c.prom")).unwrap();
    promtool_check(&prom);
    assert!(
        prom.contains(&format!(
            "syscall_profiler_cgroup_syscall_errors_total{{syscall=\"close\",cgroup=\"/{}\"}} 30",
            names[1]
        )),
        "{prom}"
    );
}

/// Ctrl-C, SIGTERM and SIGHUP (a closed terminal) all end attach the same way: table and exports.
#[test]
fn attach_interrupted_by_ctrl_c_sigterm_or_sighup_still_exports_complete_results() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let _serial = serial();
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let mut attach = Command::new(env!("CARGO_BIN_EXE_profiler"))
            .args([
                "attach",
                "--pid",
                &sleeper.id().to_string(),
                "--export-json",
                "-",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait for "Tracing ..." on stderr? The report goes to stderr when JSON takes stdout, so wait a
        // fixed, generous time for the programs to load instead.
        std::thread::sleep(Duration::from_secs(3));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(attach.id() as i32, signal) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while attach.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "attach did not stop on signal {signal}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = attach.wait_with_output().unwrap();
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not only the JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        assert_eq!(json["partial"], false, "Ctrl-C is attach's normal end");
        assert_eq!(json["metadata"]["settings"]["stopped"], "interrupted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Traced for"),
            "the table went to stderr"
        );
    }
}

/// `--export-hdr` into a directory that holds other files: a second export removes the files
/// the first one wrote that it does not write again (a variant no longer measured), and never
/// a `.hgrm` or `.hlog` it did not write (it used to delete every one of them).
#[test]
fn hdr_export_removes_only_its_own_stale_files() {
    let dir = scratch("hdr-manifest");
    let theirs = dir.join("someone-elses.hgrm");
    std::fs::write(&theirs, "not ours").unwrap();
    let two = run_data(&Shape::small());
    hdr::write_dir(&dir, &two).unwrap();
    let stems: Vec<String> = hdr::series(&two)
        .unwrap()
        .into_iter()
        .map(|s| s.stem)
        .collect();
    let one = run_data(&Shape {
        variants: vec!["lt".into()],
        ..Shape::small()
    });
    hdr::write_dir(&dir, &one).unwrap();
    let kept: Vec<String> = hdr::series(&one)
        .unwrap()
        .into_iter()
        .map(|s| s.stem)
        .collect();
    for stem in &stems {
        let exists = dir.join(format!("{stem}.hgrm")).exists();
        assert_eq!(exists, kept.contains(stem), "{stem}");
    }
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "not ours");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The sample values of `go tool pprof -raw`, summed per sample type, in its order.
fn raw_totals(raw: &str) -> Vec<i64> {
    let mut lines = raw.lines().skip_while(|l| !l.starts_with("Samples:"));
    lines.next();
    lines.next(); // the sample types' names
    let mut totals: Vec<i64> = Vec::new();
    for line in lines {
        // "          1   20123456 ...: 1 2 3 " — values before the colon; a sample's label
        // lines and the locations' table follow.
        let Some((values, _)) = line.split_once(':') else {
            break;
        };
        let values: Vec<i64> = values
            .split_whitespace()
            .map_while(|v| v.parse().ok())
            .collect();
        if values.is_empty() {
            continue;
        }
        totals.resize(values.len(), 0);
        for (t, v) in totals.iter_mut().zip(values) {
            *t += v;
        }
    }
    totals
}

/// `attach --slow --export-pprof` on the slow-path helper: `go tool pprof -raw` reads the
/// file, its totals per sample type equal the JSON's (calls, wall, on-CPU, blocked, runnable
/// over the slow groups), and `-top` names the helper's slow path among the functions.
/// Without `--slow`, one sample per syscall: the same calls and time as the JSON's table.
#[test]
fn pprof_export_is_read_by_go_tool_pprof_with_the_json_totals() {
    let _serial = serial();
    let dir = scratch("pprof");
    let helper = dir.join("slow_path");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&helper)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/helpers/slow_path.c"
        ))
        .status()
        .unwrap();
    assert!(status.success());
    for slow in [true, false] {
        let (json, pprof) = (
            dir.join(format!("{slow}.json")),
            dir.join(format!("{slow}.pb.gz")),
        );
        let mut command = Command::new(env!("CARGO_BIN_EXE_profiler"));
        command.args(["attach", "--syscalls", "read,write"]);
        if slow {
            command.args(["--slow", "10ms"]);
        }
        let out = command
            .arg("--export-json")
            .arg(&json)
            .arg("--export-pprof")
            .arg(&pprof)
            .arg("--")
            .arg(&helper)
            .args(["3", "20"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let data = common::read_json(&json);
        let m = &data["measurements"][0];
        let raw = common::go_pprof(&["-raw"], &pprof);
        let totals = raw_totals(&raw);
        if slow {
            let groups = m["slow"]["groups"].as_array().unwrap();
            let sum = |f: &dyn Fn(&serde_json::Value) -> i64| groups.iter().map(f).sum::<i64>();
            let n = |g: &serde_json::Value, k: &str| g[k].as_i64().unwrap();
            let wall = sum(&|g| n(g, "total_ns"));
            let blocked = sum(&|g| n(g, "blocked_ns"));
            let runnable = sum(&|g| n(g, "runnable_ns"));
            assert_eq!(
                totals,
                [
                    sum(&|g| n(g, "count")),
                    wall,
                    wall - blocked - runnable,
                    blocked,
                    runnable
                ],
                "{raw}"
            );
            assert!(totals[0] >= 3, "the three slow reads at least: {raw}");
            let top = common::go_pprof(&["-top", "-cum", "-sample_index=wall"], &pprof);
            assert!(
                top.contains("slow_path") && top.contains("syscall read"),
                "{top}"
            );
            assert!(
                raw.contains("--slow"),
                "the comment says the threshold: {raw}"
            );
        } else {
            let rows = m["syscalls"].as_array().unwrap();
            let calls: i64 = rows.iter().map(|s| s["calls"].as_i64().unwrap()).sum();
            let total: i64 = rows.iter().map(|s| s["total_ns"].as_i64().unwrap()).sum();
            assert_eq!(totals, [calls, total], "{raw}");
            assert!(calls >= 3 + 60, "{raw}");
        }
    }
}
