//! `profiler diff A.json B.json`: two saved runs (`--export-json` of `run` or `attach`) from two
//! machines, kernels or builds, compared cell by cell: per (variant, concurrency, server CPUs),
//! QPS and client latency; per syscall, calls per request, mean and percentiles. Where both
//! sides have two runs or more, each change has a 95% interval from the runs (two independent
//! samples: no pairs across machines) and a verdict; with fewer, the change is shown without
//! one, and said so. What differs in the two files' metadata (kernel, CPUs, settings) comes
//! first, since it is what a reader must weigh every change against.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::{
    export::{Metadata, SCHEMA_VERSION, atomic::write_atomic},
    inference::{Estimate, Verdict, holm},
    report::{
        document::{Document, Part, Section},
        table::Table,
        units::duration_ns,
    },
    samples::median,
};

/// `profiler diff` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler run --export-json a.json        # on one machine (or kernel, or build)
    profiler run --export-json b.json        # on the other
    profiler diff a.json b.json              # B against A
    profiler diff a.json b.json --export-md diff.md --export-json diff.json")]
pub struct DiffArgs {
    /// The reference: a `--export-json` file of `profiler run` or `profiler attach`.
    pub a: PathBuf,
    /// The one compared with it (changes are B against A, in % of A).
    pub b: PathBuf,
    /// Write the comparison as JSON (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Write the comparison's tables as Markdown.
    #[arg(long, value_name = "FILE", alias = "export-markdown")]
    pub export_md: Option<PathBuf>,
    /// Write the comparison as one self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub export_html: Option<PathBuf>,
    /// The equivalence margin: a figure whose interval lies within ±this is "the same within"
    /// it (e.g. 2% or 0.5%).
    #[arg(long, default_value_t = crate::inference::DEFAULT_MARGIN_PCT, value_parser = crate::parse::parse_percent)]
    pub equivalence: f64,
}

/// What `diff` reads of a saved run: the subset of the JSON export it compares.
#[derive(Debug, Deserialize)]
struct Saved {
    schema_version: u32,
    #[serde(default)]
    partial: bool,
    metadata: Metadata,
    measurements: Vec<SavedMeasurement>,
    /// The measurements as written, to tell two identical files.
    #[serde(skip)]
    raw: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct SavedMeasurement {
    variant: Option<String>,
    concurrency: Option<usize>,
    run: Option<u32>,
    #[serde(default)]
    server_cpus: Option<String>,
    #[serde(default)]
    failure: Option<String>,
    load: Option<SavedLoad>,
    syscalls: Vec<SavedSyscall>,
}

#[derive(Debug, Deserialize)]
struct SavedLoad {
    qps: f64,
    latency_ns: SavedLatency,
}

#[derive(Debug, Deserialize)]
struct SavedLatency {
    count: u64,
    percentiles: BTreeMap<String, u64>,
}

#[derive(Debug, Deserialize)]
struct SavedSyscall {
    name: String,
    calls: u64,
    mean_ns: f64,
    p50_ns: u64,
    p99_ns: u64,
    calls_per_request: Option<f64>,
}

/// One cell of the results: (variant, concurrency, server CPUs); `attach` has one, all `None`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Cell {
    /// The server variant (`run`), or `None` for `attach`.
    pub variant: Option<String>,
    /// Client connections (`run`).
    pub concurrency: Option<usize>,
    /// The server's CPUs (`run`).
    pub server_cpus: Option<String>,
}

impl Cell {
    fn of(m: &SavedMeasurement) -> Self {
        Self {
            variant: m.variant.clone(),
            concurrency: m.concurrency,
            server_cpus: m.server_cpus.clone(),
        }
    }

    fn label(&self) -> String {
        match &self.variant {
            None => "attach".to_owned(),
            Some(v) => format!(
                "{v}, c={}, CPUs {}",
                self.concurrency.map_or("?".to_owned(), |c| c.to_string()),
                self.server_cpus.as_deref().unwrap_or("?")
            ),
        }
    }
}

/// One compared figure of one cell: both sides' medians over their runs and B's change.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The cell.
    #[serde(flatten)]
    pub cell: Cell,
    /// The syscall, for per-syscall figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// "qps", "p50_ns", "p99_ns" (client latency), "mean_ns", "calls_per_request", ...
    pub figure: String,
    /// Runs of A and of B that carried the figure.
    pub runs: (usize, usize),
    /// Median over A's runs (or A's one measurement).
    pub a: f64,
    /// Median over B's runs.
    pub b: f64,
    /// (b − a) / a in %, of the medians.
    pub change_pct: f64,
    /// The Hodges-Lehmann shift with its Mann-Whitney interval (independent samples), where
    /// both sides have runs; its interval where they have enough for 95%.
    pub estimate: Option<Estimate>,
    /// The verdict: higher, lower (Holm's correction over every figure of the diff), the same
    /// within the margin, or undecided with the reason; "identical" for identical files.
    pub verdict: String,
}

/// The whole comparison, as `--export-json` writes it.
#[derive(Debug, Serialize)]
pub struct Diff {
    /// The two files, A first.
    pub files: (String, String),
    /// Each metadata field whose values differ: (field, A, B).
    pub metadata_differences: Vec<(String, String, String)>,
    /// Per cell: QPS and client latency.
    pub load: Vec<Change>,
    /// Per cell and syscall.
    pub syscalls: Vec<Change>,
    /// Cells only one side has: (cell, "A" or "B").
    pub unmatched: Vec<(Cell, &'static str)>,
    /// The report, as printed.
    pub report: Document,
}

/// Runs `profiler diff`.
pub fn main(args: &DiffArgs) -> Result<i32> {
    for path in [&args.export_json, &args.export_md, &args.export_html]
        .into_iter()
        .flatten()
    {
        if path.as_os_str() != "-" {
            crate::export::atomic::check_writable(path)?;
        }
    }
    let a = load(&args.a)?;
    let b = load(&args.b)?;
    if a.metadata.command != b.metadata.command {
        bail!(
            "{} is an export of `profiler {}` and {} of `profiler {}`: their measurements have nothing in common to compare; give two exports of the same command",
            args.a.display(),
            a.metadata.command,
            args.b.display(),
            b.metadata.command
        );
    }
    let diff = compare(&args.a, &a, &args.b, &b, args.equivalence);
    if diff.load.is_empty() && diff.syscalls.is_empty() {
        bail!(
            "{} and {} have no cell in common (variant, concurrency, server CPUs) with figures on both sides: nothing to compare",
            args.a.display(),
            args.b.display()
        );
    }
    let text = diff.report.to_text();
    let to_stdout = [&args.export_json, &args.export_md, &args.export_html]
        .into_iter()
        .flatten()
        .any(|p| p.as_os_str() == "-");
    if to_stdout {
        crate::output::stderr(&text);
    } else {
        crate::output::stdout(&text);
    }
    let write = |path: &Path, bytes: &[u8]| -> Result<()> {
        if path.as_os_str() == "-" {
            crate::output::stdout(&String::from_utf8_lossy(bytes));
            Ok(())
        } else {
            write_atomic(path, bytes)
        }
    };
    if let Some(path) = &args.export_json {
        write(path, &serde_json::to_vec_pretty(&diff)?)?;
    }
    if let Some(path) = &args.export_md {
        write(
            path,
            format!("# profiler diff\n\n{}", diff.report.to_markdown()).as_bytes(),
        )?;
    }
    if let Some(path) = &args.export_html {
        write(path, html_page(&diff).as_bytes())?;
    }
    Ok(0)
}

/// Reads and checks one saved run; every way it can be unusable is one line.
fn load(path: &Path) -> Result<Saved> {
    // A device or a pipe (/dev/zero) would be read forever: exports are regular files.
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!(
            "{} is not a regular file: give files written by `profiler run --export-json` or `profiler attach --export-json`",
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not JSON: give files written by `profiler run --export-json` or `profiler attach --export-json`",
            path.display()
        )
    })?;
    let version = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64);
    match version {
        None => bail!(
            "{} has no schema_version: it is not a `--export-json` file of this profiler",
            path.display()
        ),
        Some(v) if v != u64::from(SCHEMA_VERSION) => bail!(
            "{} has schema_version {v}, this profiler reads {SCHEMA_VERSION}: export it again with this version (`profiler run --export-json`)",
            path.display()
        ),
        Some(_) => {}
    }
    let raw = value
        .get("measurements")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    let mut saved: Saved = serde_json::from_value(value)
        .with_context(|| format!("{} does not have the export's shape", path.display()))?;
    saved.raw = raw;
    debug_assert_eq!(saved.schema_version, SCHEMA_VERSION);
    if saved.measurements.is_empty() {
        bail!("{} has no measurements", path.display());
    }
    Ok(saved)
}

/// Every measurement of a side, by cell: its runs (completed ones), and its aggregate.
struct Side<'a> {
    runs: BTreeMap<Cell, Vec<&'a SavedMeasurement>>,
    aggregate: BTreeMap<Cell, &'a SavedMeasurement>,
}

impl<'a> Side<'a> {
    /// With `cpus_as` set, every cell's server CPUs read as that (one CPU set per side, two
    /// machines: their cells are compared with each other).
    fn of(saved: &'a Saved, cpus_as: Option<&str>) -> Self {
        let mut runs: BTreeMap<Cell, Vec<&SavedMeasurement>> = BTreeMap::new();
        let mut aggregate = BTreeMap::new();
        for m in &saved.measurements {
            let mut cell = Cell::of(m);
            if let Some(cpus) = cpus_as {
                cell.server_cpus = Some(cpus.to_owned());
            }
            if m.run.is_some() {
                if m.failure.is_none() {
                    runs.entry(cell).or_default().push(m);
                }
            } else {
                aggregate.insert(cell, m);
            }
        }
        Self { runs, aggregate }
    }

    fn cells(&self) -> BTreeSet<Cell> {
        self.aggregate
            .keys()
            .chain(self.runs.keys())
            .cloned()
            .collect()
    }

    /// The measurements a figure is taken from: the runs, or the one aggregate (attach).
    fn samples(&self, cell: &Cell) -> Vec<&'a SavedMeasurement> {
        match self.runs.get(cell) {
            Some(runs) if !runs.is_empty() => runs.clone(),
            _ => self.aggregate.get(cell).into_iter().copied().collect(),
        }
    }
}

/// One per-syscall figure of a measurement (`None`: not measured there).
type SyscallFigure = fn(&SavedSyscall) -> Option<f64>;

/// Compares B with A.
fn compare(a_path: &Path, a: &Saved, b_path: &Path, b: &Saved, margin: f64) -> Diff {
    // Two machines, one CPU set each (all 4 cores against all 20): their cells are the same
    // experiment, compared as "A→B" rather than left unmatched.
    let sets = |saved: &Saved| -> BTreeSet<Option<String>> {
        saved
            .measurements
            .iter()
            .map(|m| m.server_cpus.clone())
            .collect()
    };
    let (sets_a, sets_b) = (sets(a), sets(b));
    let joined = match (sets_a.iter().next(), sets_b.iter().next()) {
        (Some(Some(x)), Some(Some(y))) if sets_a.len() == 1 && sets_b.len() == 1 && x != y => {
            Some(format!("{x}→{y}"))
        }
        _ => None,
    };
    let (side_a, side_b) = (
        Side::of(a, joined.as_deref()),
        Side::of(b, joined.as_deref()),
    );
    let (cells_a, cells_b) = (side_a.cells(), side_b.cells());
    let mut unmatched: Vec<(Cell, &'static str)> = cells_a
        .difference(&cells_b)
        .map(|c| (c.clone(), "A"))
        .collect();
    unmatched.extend(cells_b.difference(&cells_a).map(|c| (c.clone(), "B")));
    let mut load = Vec::new();
    let mut syscalls = Vec::new();
    for cell in cells_a.intersection(&cells_b) {
        let (ra, rb) = (side_a.samples(cell), side_b.samples(cell));
        let loads = |runs: &[&SavedMeasurement], f: &dyn Fn(&SavedLoad) -> Option<f64>| {
            runs.iter()
                .filter_map(|m| m.load.as_ref().and_then(f))
                .collect::<Vec<f64>>()
        };
        let latency = |q: &'static str| {
            move |l: &SavedLoad| {
                (l.latency_ns.count > 0)
                    .then(|| l.latency_ns.percentiles.get(q).map(|&v| v as f64))
                    .flatten()
            }
        };
        for (figure, f) in [
            (
                "qps",
                &(|l: &SavedLoad| Some(l.qps)) as &dyn Fn(&SavedLoad) -> Option<f64>,
            ),
            ("p50_ns", &latency("p50")),
            ("p99_ns", &latency("p99")),
        ] {
            let (va, vb) = (loads(&ra, f), loads(&rb, f));
            if let Some(change) = change(cell, None, figure, &va, &vb) {
                load.push(change);
            }
        }
        // Syscalls with calls on at least one side: the others have nothing to compare.
        let names: BTreeSet<&str> = ra
            .iter()
            .chain(&rb)
            .flat_map(|m| m.syscalls.iter())
            .filter(|s| s.calls > 0)
            .map(|s| s.name.as_str())
            .collect();
        for name in names {
            let values = |runs: &[&SavedMeasurement], f: SyscallFigure| {
                runs.iter()
                    .filter_map(|m| m.syscalls.iter().find(|s| s.name == name).and_then(f))
                    .collect::<Vec<f64>>()
            };
            let figures: [(&str, SyscallFigure); 4] = [
                ("calls_per_request", |s| s.calls_per_request),
                ("mean_ns", |s| (s.calls > 0).then_some(s.mean_ns)),
                ("p50_ns", |s| (s.calls > 0).then_some(s.p50_ns as f64)),
                ("p99_ns", |s| (s.calls > 0).then_some(s.p99_ns as f64)),
            ];
            for (figure, f) in figures {
                let (va, vb) = (values(&ra, f), values(&rb, f));
                if let Some(change) = change(cell, Some(name), figure, &va, &vb) {
                    syscalls.push(change);
                }
            }
        }
    }
    let identical = a.raw == b.raw;
    judge(&mut load, &mut syscalls, identical, margin);
    let metadata_differences = metadata_differences(&a.metadata, &b.metadata);
    let mut diff = Diff {
        files: (a_path.display().to_string(), b_path.display().to_string()),
        metadata_differences,
        load,
        syscalls,
        unmatched,
        report: Document::default(),
    };
    diff.report = document(&diff, a.partial, b.partial);
    if let Some(joined) = joined {
        diff.report.parts[0].notes.push(format!(
            "A and B each ran on one server CPU set, different ones ({joined}): their cells are compared with each other"
        ));
    }
    diff
}

/// B's change against A for one figure, `None` when a side has no value; its verdict comes
/// from [`judge`], over all figures together.
fn change(
    cell: &Cell,
    syscall: Option<&str>,
    figure: &str,
    a: &[f64],
    b: &[f64],
) -> Option<Change> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (ma, mb) = (median(a), median(b));
    let change_pct = if ma == 0.0 {
        f64::NAN
    } else {
        100.0 * (mb / ma - 1.0)
    };
    Some(Change {
        cell: cell.clone(),
        syscall: syscall.map(str::to_owned),
        figure: figure.to_owned(),
        runs: (a.len(), b.len()),
        a: ma,
        b: mb,
        change_pct,
        estimate: Estimate::shift(a, b),
        verdict: String::new(),
    })
}

/// Every figure's verdict. A diff compares dozens of figures: "higher" or "lower" only where
/// Holm's correction over all of them rejects "no change" at 5% (so the chance that any of
/// them is wrong stays at most 5%) and the interval excludes 0; "the same within" the margin
/// where the interval lies inside it; else undecided, with why.
fn judge(load: &mut [Change], syscalls: &mut [Change], identical: bool, margin: f64) {
    let all: Vec<&mut Change> = load.iter_mut().chain(syscalls.iter_mut()).collect();
    let p_values: Vec<f64> = all
        .iter()
        .map(|c| {
            c.estimate
                .filter(|e| e.interval.is_some())
                .map_or(1.0, |e| e.p_value)
        })
        .collect();
    let rejected = holm(&p_values, 1.0 - crate::inference::TARGET_LEVEL);
    for (c, rejected) in all.into_iter().zip(rejected) {
        c.verdict = if identical {
            "identical".to_owned()
        } else {
            match &c.estimate {
                None => "undecided: no value to compare".to_owned(),
                Some(e) if e.interval.is_none() => {
                    if c.runs.0 < 2 || c.runs.1 < 2 {
                        format!(
                            "undecided: {} and {} measurement(s) have no spread to judge by",
                            c.runs.0, c.runs.1
                        )
                    } else {
                        format!(
                            "undecided: {} and {} runs cannot give a 95% interval (4 each can)",
                            c.runs.0, c.runs.1
                        )
                    }
                }
                Some(e) => match Verdict::of(e, margin, "runs") {
                    Verdict::Higher | Verdict::Lower if !rejected => format!(
                        "undecided: not beyond noise once {} figures are weighed together (Holm)",
                        p_values.len()
                    ),
                    v => v.words("higher", "lower"),
                },
            }
        };
    }
}

/// The metadata fields whose values differ, settings included (absent: "—").
fn metadata_differences(a: &Metadata, b: &Metadata) -> Vec<(String, String, String)> {
    let mut fields = vec![
        ("command".to_owned(), a.command.clone(), b.command.clone()),
        ("kernel".to_owned(), a.kernel.clone(), b.kernel.clone()),
        (
            "cpu_model".to_owned(),
            a.cpu_model.clone(),
            b.cpu_model.clone(),
        ),
        (
            "cpus_online".to_owned(),
            a.cpus_online.to_string(),
            b.cpus_online.to_string(),
        ),
        (
            "profiler_version".to_owned(),
            a.profiler_version.clone(),
            b.profiler_version.clone(),
        ),
    ];
    let keys: BTreeSet<&String> = a.settings.keys().chain(b.settings.keys()).collect();
    for key in keys {
        let get = |m: &Metadata| {
            m.settings
                .get(key)
                .cloned()
                .unwrap_or_else(|| "—".to_owned())
        };
        fields.push((format!("settings.{key}"), get(a), get(b)));
    }
    fields.retain(|(_, x, y)| x != y);
    fields
}

/// The report: what differs, then the load and syscall tables.
fn document(diff: &Diff, a_partial: bool, b_partial: bool) -> Document {
    let mut part = Part {
        heading: format!("B ({}) against A ({})", diff.files.1, diff.files.0),
        notes: Vec::new(),
        sections: Vec::new(),
    };
    part.sections.push(verdict_section(diff));
    for (partial, name) in [(a_partial, "A"), (b_partial, "B")] {
        if partial {
            part.notes.push(format!(
                "{name} is partial (interrupted, or a run failed): its failed runs are left out"
            ));
        }
    }
    let mut what = Table::new(["field", "A", "B"]);
    for (field, a, b) in &diff.metadata_differences {
        what.row([field.clone(), a.clone(), b.clone()]);
    }
    let mut section = Section::new("What differs between A and B", what);
    if diff.metadata_differences.is_empty() {
        section.table = None;
        section
            .notes
            .push("Same kernel, CPUs, version and settings.".to_owned());
    }
    part.sections.push(section);

    let fmt = |figure: &str, v: f64| match figure {
        "qps" => format!("{v:.0}"),
        "calls_per_request" => format!("{v:.2}"),
        _ => duration_ns(v),
    };
    let change_cell = |c: &Change| match &c.estimate {
        Some(e) if e.interval.is_some() => e.cell("runs"),
        _ if c.change_pct.is_finite() => format!("{:+.1}%", c.change_pct),
        _ => "—".to_owned(),
    };
    let mut load = Table::new([
        "cell",
        "figure",
        "runs A/B",
        "A",
        "B",
        "B against A [interval] (level, runs)",
        "verdict",
    ]);
    for c in &diff.load {
        load.row([
            c.cell.label(),
            match c.figure.as_str() {
                "qps" => "QPS".to_owned(),
                "p50_ns" => "latency p50".to_owned(),
                _ => "latency p99".to_owned(),
            },
            format!("{}/{}", c.runs.0, c.runs.1),
            fmt(&c.figure, c.a),
            fmt(&c.figure, c.b),
            change_cell(c),
            c.verdict.clone(),
        ]);
    }
    if !load.is_empty() {
        part.sections.push(Section::new("Load: B against A", load));
    }
    let mut calls = Table::new([
        "cell",
        "syscall",
        "figure",
        "runs A/B",
        "A",
        "B",
        "B against A [interval] (level, runs)",
        "verdict",
    ]);
    for c in &diff.syscalls {
        calls.row([
            c.cell.label(),
            c.syscall.clone().unwrap_or_default(),
            match c.figure.as_str() {
                "calls_per_request" => "calls/request".to_owned(),
                "mean_ns" => "mean per call".to_owned(),
                "p50_ns" => "p50 per call".to_owned(),
                _ => "p99 per call".to_owned(),
            },
            format!("{}/{}", c.runs.0, c.runs.1),
            fmt(&c.figure, c.a),
            fmt(&c.figure, c.b),
            change_cell(c),
            c.verdict.clone(),
        ]);
    }
    if !calls.is_empty() {
        let mut section = Section::new("Syscalls: B against A", calls);
        section.notes.push(INTERVAL_NOTE.to_owned());
        part.sections.push(section);
    }
    for (cell, side) in &diff.unmatched {
        part.notes
            .push(format!("{} is only in {side}: not compared", cell.label()));
    }
    Document { parts: vec![part] }
}

/// The answer first: how many figures changed, and which.
fn verdict_section(diff: &Diff) -> Section {
    let all: Vec<&Change> = diff.load.iter().chain(&diff.syscalls).collect();
    let mut section = Section {
        title: "Verdicts: B against A".to_owned(),
        ..Section::default()
    };
    if all.iter().any(|c| c.verdict == "identical") {
        section
            .notes
            .push("A and B hold identical measurements: nothing changed.".to_owned());
        return section;
    }
    let count = |word: &str| all.iter().filter(|c| c.verdict.starts_with(word)).count();
    section.notes.push(format!(
        "{} figures compared: {} higher, {} lower, {} the same within the margin, {} undecided (each with why below; Holm's correction over all of them keeps the chance of any wrong \"higher\" or \"lower\" at most 5%).",
        all.len(),
        count("higher"),
        count("lower"),
        count("same"),
        count("undecided")
    ));
    let mut table = Table::new(["cell", "figure", "B against A", "verdict"]);
    for c in all
        .iter()
        .filter(|c| c.verdict == "higher" || c.verdict == "lower")
    {
        table.row([
            c.cell.label(),
            match &c.syscall {
                Some(name) => format!("{name} {}", c.figure),
                None => c.figure.clone(),
            },
            c.estimate.map_or("—".to_owned(), |e| e.cell("runs")),
            c.verdict.clone(),
        ]);
    }
    if !table.is_empty() {
        section.table = Some(table);
    }
    section
}

/// How the changes are computed, under the syscall table.
const INTERVAL_NOTE: &str = "Each figure is the median over a side's runs (an attach file has one measurement). A change is B against A in %: the Hodges-Lehmann shift of the logarithms of the two sides' runs, with the Mann-Whitney interval from the exact distribution of U (independent samples: runs on two machines are not pairs) and the level it achieves; 3 runs a side cannot reach 95%, 4 can. \"higher\"/\"lower\" only where Holm's correction over every figure of the diff rejects \"no change\"; \"same within\" the margin (--equivalence) where the interval lies inside it. Syscalls with no calls on either side are left out. Per-call p50 and p99 are each run's kernel histogram percentiles (within 1/64).";

fn html_page(diff: &Diff) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>syscall-profiler diff</title>\n<style>{}</style></head><body>\n<h1>syscall-profiler diff</h1>\n{}</body></html>\n",
        crate::export::html::STYLE,
        diff.report.to_html()
    )
}
