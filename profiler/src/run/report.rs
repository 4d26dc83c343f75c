//! The text report of `profiler run`: per scenario, the runs, the kernel-timed syscalls, server
//! CPU, mp workers, a side-by-side comparison, and the baseline and strace columns.

use std::fmt::Write as _;

use profiler_common::names::Role;

use super::{
    Experiment, RunOptions,
    model::{
        ProgramCost, RunKind, RunResult, ScenarioResult, Variant, VariantResult, merge_histograms,
    },
};
use crate::{
    export::Metadata,
    inference::Verdict,
    report::{
        document::{Document, Part, Section},
        table::{Table, errors_cell},
        units::{duration, duration_ns, percent},
    },
    samples::{Spread, gini, median, outliers},
    stats::{ReturnUnit, Snapshot, calls_per_request, per_request},
};

/// The whole report.
#[must_use]
pub fn render(experiment: &Experiment, options: &RunOptions, metadata: &Metadata) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "syscall-profiler {} — profiler run",
        metadata.profiler_version
    );
    let _ = writeln!(
        out,
        "kernel {}, {} ({} CPUs online)",
        metadata.kernel, metadata.cpu_model, metadata.cpus_online
    );
    let cpus = |c: &[usize]| {
        if c.is_empty() {
            "any".to_owned()
        } else {
            c.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
        }
    };
    let _ = writeln!(
        out,
        "server CPUs {}, client CPUs {}; workload {}, payload {} B{}{}",
        cpus(&options.server_cpus),
        cpus(&options.client_cpus),
        options.workload,
        options.payload,
        options
            .rate
            .map_or(String::new(), |r| format!(", open loop at {r:.0} req/s")),
        if options.idle_conns > 0 {
            format!(", {} idle connections", options.idle_conns)
        } else {
            String::new()
        },
    );
    let _ = writeln!(
        out,
        "syscalls timed in the kernel: {}",
        options
            .syscalls
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(why) = &experiment.stopped_early {
        let _ = writeln!(
            out,
            "PARTIAL: the experiment stopped early ({why}); everything measured until then follows."
        );
    }
    out.push_str(&document(experiment).to_text());
    let _ = writeln!(
        out,
        "\nTotal time {:.1}s.",
        experiment.elapsed.as_secs_f64()
    );
    out
}

/// The report's parts and sections, one part per scenario: what the terminal prints and every
/// export carries.
#[must_use]
pub fn document(experiment: &Experiment) -> Document {
    let across = across_cpu_sets(experiment);
    let mut parts = vec![verdicts_part(experiment, &across)];
    parts.extend(experiment.scenarios.iter().map(part));
    parts.extend(cpu_sets_part(&across));
    Document { parts }
}

/// The heading of the part every report opens with.
pub use crate::comparison::VERDICTS_HEADING;

/// The answer first: per scenario, each comparison with its interval, level, pairs and
/// verdict; where the time goes per request; the noise line; with a CPU-set sweep, whether
/// the verdicts change with the CPU set. The detailed tables follow in the scenarios' parts.
fn verdicts_part(experiment: &Experiment, across: &[AcrossSets<'_>]) -> Part {
    let mut sections = Vec::new();
    for s in &experiment.scenarios {
        let mut table = Table::new(["comparison", "change [interval] (level, pairs)", "verdict"]);
        for (v, reference, c) in s.variant_changes() {
            table.row([
                format!(
                    "{} against {} (QPS, {} {})",
                    v.variant,
                    reference.variant,
                    c.of.name(),
                    if s.slices.is_some() { "slices" } else { "runs" }
                ),
                c.qps.cell("pairs"),
                c.verdict_words(),
            ]);
        }
        for (of, relative_to, what) in [
            (RunKind::Profiled, RunKind::Baseline, "profiler's cost"),
            (RunKind::Strace, RunKind::Profiled, "strace's cost"),
        ] {
            let what = if s.slices.is_some() && of == RunKind::Profiled {
                "profiler's cost above the attached floor"
            } else {
                what
            };
            for (v, c) in s.kind_changes(of, relative_to) {
                table.row([
                    format!(
                        "{what}, {} (QPS, {} against {})",
                        v.variant,
                        of.name(),
                        relative_to.name()
                    ),
                    c.qps.cell("pairs"),
                    c.verdict_words(),
                ]);
            }
        }
        let pairs = s
            .variants
            .iter()
            .map(|v| v.runs.iter().map(|r| r.run).max().unwrap_or(0))
            .max()
            .unwrap_or(0);
        let mut section = Section {
            title: match &s.slices {
                Some(d) => format!(
                    "{} (concurrency {}, server CPUs {}): {} block{} of slices of warm servers, {}",
                    s.title,
                    s.concurrency,
                    super::cpu_list(&s.server_cpus),
                    d.blocks,
                    if d.blocks == 1 { "" } else { "s" },
                    s.stopped
                ),
                None => format!(
                    "{} (concurrency {}, server CPUs {}): {pairs} round{} of runs, {}",
                    s.title,
                    s.concurrency,
                    super::cpu_list(&s.server_cpus),
                    if pairs == 1 { "" } else { "s" },
                    s.stopped
                ),
            },
            ..Section::default()
        };
        if table.is_empty() {
            section
                .notes
                .push("nothing to compare: one server and no baseline runs".to_owned());
        } else {
            section.table = Some(table);
        }
        section.notes.extend(findings(s));
        section.notes.extend(slices_notes(s));
        section.notes.extend(time_per_request_lines(s));
        section.notes.extend(noise_line(s));
        sections.push(section);
    }
    // One line per comparison over the CPU sets (its rows, one per set, say the same).
    let mut notes: Vec<String> = Vec::new();
    for row in across {
        let line = format!(
            "across CPU sets, {}: {} against {}: {}",
            row.scenario, row.variant.variant, row.reference.variant, row.across
        );
        if !notes.contains(&line) {
            notes.push(line);
        }
    }
    let mut part = Part {
        heading: VERDICTS_HEADING.to_owned(),
        notes: Vec::new(),
        sections,
    };
    if !notes.is_empty() {
        part.sections.push(Section {
            title: "Across server CPU sets: does the verdict change with the CPU count?".to_owned(),
            notes,
            ..Section::default()
        });
    }
    part
}

/// The warm engine's findings, a line per comparison: beside QPS, the quiet figures (server
/// CPU per request, p99, calls per request of each syscall) with their intervals; the calls
/// per request that Holm's correction finds changed are named with both medians.
fn findings(s: &ScenarioResult) -> Vec<String> {
    if s.slices.is_none() {
        return Vec::new();
    }
    let mut lines = Vec::new();
    let line = |what: String, c: &super::model::PairedChange| {
        let mut parts = vec![format!(
            "QPS {} ({})",
            c.verdict.words("faster", "slower"),
            c.qps.cell("pairs")
        )];
        if let Some(cpu) = &c.cpu_per_request {
            parts.push(format!("server CPU/req {}", cpu.cell("pairs")));
        }
        parts.push(format!("p99 {}", c.p99.cell("pairs")));
        let changed: Vec<String> = c
            .calls_per_request
            .iter()
            .filter(|x| x.differs)
            .map(|x| {
                format!(
                    "{} {:.2} → {:.2} ({})",
                    x.syscall,
                    x.relative_to,
                    x.of,
                    x.change.cell("pairs")
                )
            })
            .collect();
        if !c.calls_per_request.is_empty() {
            parts.push(if changed.is_empty() {
                "calls/req the same in every syscall".to_owned()
            } else {
                format!("calls/req {}", changed.join(", "))
            });
        }
        format!("finding, {what}: {}", parts.join("; "))
    };
    for (v, reference, c) in s.variant_changes() {
        lines.push(line(
            format!("{} against {}", v.variant, reference.variant),
            &c,
        ));
    }
    for (v, c) in s.kind_changes(RunKind::Profiled, RunKind::Baseline) {
        lines.push(line(
            format!("profiled {} against its baseline slices", v.variant),
            &c,
        ));
    }
    lines
}

/// How the warm engine sliced the scenario, where its time went, and what its baseline means.
fn slices_notes(s: &ScenarioResult) -> Vec<String> {
    let Some(d) = &s.slices else {
        return Vec::new();
    };
    let window = match d.window {
        crate::loadgen::Stop::Requests(n) => format!("{n} requests"),
        crate::loadgen::Stop::Duration(t) => duration_ns(t.as_nanos() as f64),
    };
    let mut notes = vec![
        format!(
            "slices: each server started once and traced by one session; a window of {window} ({}), after a warm-up of {} requests at each switch; every block visits each server once in a random order (seed {:#x}), a comparison's pair is its two slices of one block",
            d.how, d.warmup, d.seed
        ),
        format!(
            "time: {} (target: at least 80% in requests)",
            d.budget.line()
        ),
    ];
    if s.variants
        .iter()
        .any(|v| v.slices.iter().any(|x| x.kind == RunKind::Baseline))
    {
        notes.push("baseline slices keep the programs attached and stop counting that server: the profiler's cost shown is its cost above the attached floor (the programs run and find the server untracked); `profiler bench overhead` measures that floor per call".to_owned());
    }
    if d.other_calls > 0 {
        notes.push(format!(
            "{} calls of other servers were counted inside windows (in that window's syscall table; calls per request count each server's own)",
            d.other_calls
        ));
    }
    notes.extend(d.restarted.iter().map(|r| format!("restarted: {r}")));
    if d.baseline_calls > 0 {
        notes.push(format!(
            "warning: {} calls were counted in baseline slices, whose server should not be counted",
            d.baseline_calls
        ));
    }
    notes
}

/// Where the time goes per request, a line per variant: the on-CPU kernel time of each traced
/// syscall per finished request, largest first (the total time where the split is off).
fn time_per_request_lines(s: &ScenarioResult) -> Vec<String> {
    s.variants
        .iter()
        .filter(|v| v.failure.is_none())
        .filter_map(|v| {
            let requests = requests_of(v);
            if requests == 0 {
                return None;
            }
            let merged = v.merged_syscalls();
            let split = merged.syscalls.iter().any(|x| x.off_cpu.is_some());
            let mut rows: Vec<(&str, f64)> = merged
                .syscalls
                .iter()
                .filter(|x| x.calls > 0)
                .map(|x| {
                    let ns = x.time_split().map_or(x.total_ns, |(on, ..)| on);
                    (
                        x.name.as_str(),
                        per_request(ns as f64, requests).unwrap_or(0.0),
                    )
                })
                .collect();
            if rows.is_empty() {
                return None;
            }
            rows.sort_by(|a, b| b.1.total_cmp(&a.1));
            let total: f64 = rows.iter().map(|r| r.1).sum();
            let top: Vec<String> = rows
                .iter()
                .take(5)
                .map(|(name, ns)| format!("{name} {}", duration_ns(*ns)))
                .collect();
            Some(format!(
                "where the time goes, {}: {} {} in the traced syscalls per request: {}{}",
                v.variant,
                duration_ns(total),
                if split {
                    "on-CPU"
                } else {
                    "(total, on and off the CPU)"
                },
                top.join(", "),
                if rows.len() > 5 { ", …" } else { "" }
            ))
        })
        .collect()
}

/// One comparison (a variant against the first) on one server CPU set of a sweep, and what
/// its verdicts over every set say.
struct AcrossSets<'a> {
    /// The scenario without its CPU set, and the concurrency: "... c=1".
    scenario: String,
    s: &'a ScenarioResult,
    variant: &'a VariantResult,
    reference: &'a VariantResult,
    change: super::model::PairedChange,
    /// [`across_verdict`] over the sets.
    across: String,
}

/// With scenarios on more than one server CPU set (`--server-cpus A --server-cpus B`): every
/// variant against the first, per CPU set, and whether the verdict changes between the sets;
/// empty without a sweep. The verdict block and the final table both read it.
fn across_cpu_sets(experiment: &Experiment) -> Vec<AcrossSets<'_>> {
    let mut sets: Vec<&Vec<usize>> = experiment
        .scenarios
        .iter()
        .map(|s| &s.server_cpus)
        .collect();
    sets.sort();
    sets.dedup();
    if sets.len() < 2 {
        return Vec::new();
    }
    // (scenario, concurrency, variant) → the QPS verdicts over the CPU sets; a sweep's
    // scenarios differ only in the " [server CPUs ...]" their titles end with.
    let key = |s: &ScenarioResult, v: &VariantResult| {
        let base = s.title.split(" [server CPUs").next().unwrap_or(&s.title);
        (base.to_owned(), s.concurrency, v.variant.clone())
    };
    let mut rows = Vec::new();
    for s in &experiment.scenarios {
        for (v, reference, c) in s.variant_changes() {
            rows.push((key(s, v), s, v, reference, c));
        }
    }
    let acrosses: Vec<String> = rows
        .iter()
        .map(|(k, ..)| {
            let verdicts: Vec<&Verdict> = rows
                .iter()
                .filter(|r| r.0 == *k)
                .map(|r| &r.4.verdict)
                .collect();
            across_verdict(&verdicts)
        })
        .collect();
    rows.into_iter()
        .zip(acrosses)
        .map(|((k, s, variant, reference, change), across)| AcrossSets {
            scenario: format!("{} c={}", k.0, s.concurrency),
            s,
            variant,
            reference,
            change,
            across,
        })
        .collect()
}

/// The final table of a CPU-set sweep: does the CPU count change the verdict?
fn cpu_sets_part(across: &[AcrossSets<'_>]) -> Option<Part> {
    if across.is_empty() {
        return None;
    }
    let mut table = Table::new([
        "scenario",
        "server CPUs",
        "variant",
        "against",
        "pairs",
        "QPS change [interval] (level, pairs)",
        "verdict (QPS)",
        "across CPU sets",
    ]);
    for row in across {
        table.row([
            row.scenario.clone(),
            super::cpu_list(&row.s.server_cpus),
            row.variant.variant.to_string(),
            row.reference.variant.to_string(),
            row.change.pairs.to_string(),
            row.change.qps.cell("pairs"),
            row.change.verdict_words(),
            row.across.clone(),
        ]);
    }
    let mut section = Section::new(
        "Does the CPU count change the verdict? (each variant against the first, per server CPU set)",
        table,
    );
    section.notes.push(
        "The changes and verdicts of each scenario's \"Variants against\" table, side by side over the CPU sets; measurements of different CPU sets are never pooled. The answer changes with the CPU count only where both sets are decided and differ; where one is undecided, the data cannot say.".to_owned(),
    );
    Some(Part {
        heading: "Across server CPU sets".to_owned(),
        notes: Vec::new(),
        sections: vec![section],
    })
}

fn part(s: &ScenarioResult) -> Part {
    let runs = s
        .variants
        .iter()
        .map(|v| v.of_kind(RunKind::Profiled).count())
        .max()
        .unwrap_or(0);
    let (runs, unit) = match &s.slices {
        Some(_) => (
            s.variants
                .iter()
                .map(|v| {
                    v.slices
                        .iter()
                        .filter(|x| x.kind == RunKind::Profiled)
                        .count()
                })
                .max()
                .unwrap_or(0),
            "slice",
        ),
        None => (runs, "run"),
    };
    let heading = format!(
        "{} (concurrency {}, {} {unit}{}{})",
        s.title,
        s.concurrency,
        runs,
        if runs == 1 { "" } else { "s" },
        if s.title.contains("[server CPUs") {
            String::new()
        } else {
            format!(", server CPUs {}", super::cpu_list(&s.server_cpus))
        }
    );
    let mut notes: Vec<String> = s
        .variants
        .iter()
        .filter_map(|v| Some(format!("{}: {}", v.variant, v.failure.as_deref()?)))
        .collect();
    if !s.shared_cpus.is_empty() {
        notes.push(format!(
            "warning: the load generator runs on CPU {} too, which the server uses: client and server compete for it, and the figures measure both (give --client-cpus outside --server-cpus)",
            super::cpu_list(&s.shared_cpus)
        ));
    }
    let mut sections = runs_sections(s);
    sections.extend(noise_section(s));
    sections.extend(syscall_section(s));
    sections.extend(off_cpu_section(s));
    sections.extend(cpu_section(s));
    sections.extend(workers_sections(s));
    sections.extend(side_by_side(s));
    sections.extend(variants_section(s));
    sections.extend(baseline_section(s));
    sections.extend(cost_section(s));
    sections.extend(strace_sections(s));
    sections.extend(slow_sections(s));
    Part {
        heading,
        notes,
        sections,
    }
}

/// `--slow`: per variant, its slowest calls over the profiled runs, grouped by stack.
fn slow_sections(s: &ScenarioResult) -> Vec<Section> {
    s.variants
        .iter()
        .filter_map(|v| {
            let slow = v.merged_slow()?;
            Some(slow.section(&format!(
                "{}: {}",
                crate::export::summary::SLOW_TITLE,
                v.variant
            )))
        })
        .collect()
}

fn runs_sections(s: &ScenarioResult) -> Vec<Section> {
    let mut table = Table::new([
        "variant", "run", "QPS", "p50", "p99", "p99.9", "max", "requests", "errors",
    ]);
    let mut warnings = Vec::new();
    for v in &s.variants {
        // A run whose server died measured a dead server: shown as failed, never compared.
        for r in v
            .of_kind(RunKind::Profiled)
            .filter(|r| r.server_died.is_some())
        {
            table.row(
                [
                    v.variant.to_string(),
                    r.run.to_string(),
                    "failed".to_owned(),
                ]
                .into_iter()
                .chain(latency_cells(&r.load.latency))
                .chain([r.load.requests.to_string(), r.load.errors.to_string()]),
            );
        }
        let runs: Vec<&RunResult> = v
            .of_kind(RunKind::Profiled)
            .filter(|r| r.server_died.is_none())
            .collect();
        let qps: Vec<f64> = runs.iter().map(|r| r.load.qps()).collect();
        let flagged = outliers(&qps);
        for (i, r) in runs.iter().enumerate() {
            let l = &r.load.latency;
            let mark = if flagged.contains(&i) {
                " (outlier)"
            } else {
                ""
            };
            table.row(
                [
                    v.variant.to_string(),
                    if s.slices.is_some() {
                        format!(
                            "{} slices",
                            v.slices
                                .iter()
                                .filter(|x| x.kind == RunKind::Profiled)
                                .count()
                        )
                    } else {
                        format!("{}{mark}", r.run)
                    },
                    format!("{:.0}", r.load.qps()),
                ]
                .into_iter()
                .chain(latency_cells(l))
                .chain([r.load.requests.to_string(), r.load.errors.to_string()]),
            );
        }
        if runs.len() > 1 {
            let spread = Spread::of(&qps).unwrap_or_default();
            let all = v
                .merged_latency()
                .map_or_else(Default::default, |h| latency_cells(&h));
            table.row(
                [
                    v.variant.to_string(),
                    "all".to_owned(),
                    format!(
                        "{} ({:.0}…{:.0})",
                        spread.mean_and_sigma(),
                        spread.min,
                        spread.max
                    ),
                ]
                .into_iter()
                .chain(all)
                .chain([
                    runs.iter()
                        .map(|r| r.load.requests)
                        .sum::<u64>()
                        .to_string(),
                    runs.iter()
                        .map(|r| r.load.errors.total())
                        .sum::<u64>()
                        .to_string(),
                ]),
            );
        }
        for i in flagged {
            warnings.push(format!(
                "warning: {} run {}: {:.0} QPS lies more than 3 MADs from the median {:.0}; an interrupted or disturbed run (rerun, or use more --runs)",
                v.variant,
                runs[i].run,
                qps[i],
                median(&qps)
            ));
        }
        if let Some(first) = runs.first().filter(|_| runs.len() >= 3)
            && qps.len() >= 3
            && first.load.qps() < 0.8 * median(&qps[1..])
        {
            warnings.push(format!(
                "warning: {} run 1 was much slower than the rest: a cold start (caches, CPU frequency); consider a longer --warmup",
                v.variant
            ));
        }
    }
    let mut runs = Section::new("End to end (load generator)", table);
    for v in &s.variants {
        let connect = merge_histograms(
            v.of_kind(RunKind::Profiled)
                .map(|r| r.load.connect_latency.as_ref()),
        );
        if let Some(c) = connect.filter(|c| !c.is_empty()) {
            runs.notes.push(format!(
                "{}: connect() p50 {}, p99 {}",
                v.variant,
                duration(c.value_at_quantile(0.5)),
                duration(c.value_at_quantile(0.99))
            ));
        }
    }
    runs.notes.extend(warnings);
    let mut sections = vec![runs];
    sections.extend(open_loop_section(s));
    sections
}

/// Every run's noise: the share of the server CPUs' time that other tasks and steal took,
/// and who took the most.
fn noise_section(s: &ScenarioResult) -> Option<Section> {
    let mut table = Table::new([
        "variant",
        "kind",
        "run",
        "QPS",
        "others + steal",
        "largest",
        "disturbed",
    ]);
    for v in &s.variants {
        for r in &v.runs {
            let Some(n) = &r.noise else { continue };
            table.row([
                v.variant.to_string(),
                r.kind.name().to_owned(),
                r.run.to_string(),
                format!("{:.0}", r.load.qps()),
                percent(n.share(), 1.0),
                n.top.first().map_or("-".to_owned(), |(comm, pid, _)| {
                    format!("'{comm}' (pid {pid})")
                }),
                if n.disturbed() { "yes" } else { "" }.to_owned(),
            ]);
        }
    }
    if table.is_empty() {
        return None;
    }
    let mut section = Section::new(
        "The machine's noise (per run: the server CPUs' time taken by other tasks and steal)",
        table,
    );
    section.notes.push(NOISE_NOTE.to_owned());
    Some(section)
}

/// How the noise is measured and what is done with a disturbed run.
const NOISE_NOTE: &str = "Other tasks: every task of the machine but the server and the profiler (its load generator included), from each task's scheduler time (/proc/PID/task/TID/schedstat) over the measured window; a task not pinned to the server's CPUs counts in proportion of its allowed CPUs that are the server's. Steal from /proc/stat, in 10 ms ticks (one tick is not counted: it would flag a short run on its own). A run is disturbed above 10%. Disturbed runs are kept, neither retried nor excluded: leaving out runs by a noise rule would make the intervals' level conditional on it, and the sign test already bounds what one disturbed pair can do (it moves one sign); the noise makes the intervals wider, so a sequential run adds pairs, and an undecided verdict says when the machine was the noise.";

/// The scenario's noise in one line: how many runs were disturbed, the worst, the median share.
#[must_use]
pub fn noise_line(s: &ScenarioResult) -> Option<String> {
    let runs: Vec<(&VariantResult, &RunResult, &crate::noise::Noise)> = s
        .variants
        .iter()
        .flat_map(|v| {
            v.runs
                .iter()
                .filter_map(move |r| Some((v, r, r.noise.as_ref()?)))
        })
        .collect();
    if runs.is_empty() {
        return None;
    }
    let shares: Vec<f64> = runs.iter().map(|(.., n)| n.share()).collect();
    let disturbed = runs.iter().filter(|(.., n)| n.disturbed()).count();
    let (wv, wr, worst) = runs
        .iter()
        .max_by(|a, b| a.2.share().total_cmp(&b.2.share()))
        .copied()?;
    Some(if disturbed == 0 {
        format!(
            "noise: no run disturbed (other tasks and steal took a median {} of the server CPUs' time, at most {})",
            percent(median(&shares), 1.0),
            percent(worst.share(), 1.0)
        )
    } else {
        format!(
            "noise: {disturbed} of {} runs DISTURBED (> 10% of the server CPUs' time taken by other tasks or steal; median {}); worst, {} {} {}: {}",
            runs.len(),
            percent(median(&shares), 1.0),
            wv.variant,
            wr.kind.name(),
            wr.run,
            worst.describe()
        )
    })
}

/// p50, p99, p99.9 and max of a latency histogram, as table cells.
fn latency_cells(h: &hdrhistogram::Histogram<u64>) -> [String; 4] {
    [
        duration(h.value_at_quantile(0.50)),
        duration(h.value_at_quantile(0.99)),
        duration(h.value_at_quantile(0.999)),
        duration(h.max()),
    ]
}

/// Open loop (`--rate`): latency from each request's intended send time (coordinated omission
/// corrected) next to the latency from its actual send; empty in closed loop.
fn open_loop_section(s: &ScenarioResult) -> Option<Section> {
    let mut table = Table::new([
        "variant",
        "run",
        "p50",
        "p99",
        "p99.9",
        "max",
        "corrected p50",
        "corrected p99",
        "corrected p99.9",
        "corrected max",
        "sent late p50",
        "sent late p99",
    ]);
    let mut rows = 0;
    for v in &s.variants {
        for r in v.of_kind(RunKind::Profiled) {
            let Some(c) = &r.load.corrected_latency else {
                continue;
            };
            table.row(
                [v.variant.to_string(), r.run.to_string()]
                    .into_iter()
                    .chain(latency_cells(&r.load.latency))
                    .chain(latency_cells(c))
                    .chain(lateness_cells(r.load.send_lateness.as_ref())),
            );
            rows += 1;
        }
    }
    (rows > 0).then(|| {
        Section::new(
            "Open loop: latency from the actual send, and corrected (from each request's intended send time, as wrk2); how late the generator sent (a large 'sent late' means the generator, not the server, was late)",
            table,
        )
    })
}

/// The p50 and p99 of how late the open loop sent its requests.
fn lateness_cells(late: Option<&hdrhistogram::Histogram<u64>>) -> [String; 2] {
    match late {
        Some(h) if !h.is_empty() => [0.5, 0.99].map(|q| duration(h.value_at_quantile(q))),
        _ => ["—".to_owned(), "—".to_owned()],
    }
}

fn requests_of(v: &VariantResult) -> u64 {
    v.of_kind(RunKind::Profiled)
        .map(RunResult::requests_finished)
        .sum()
}

fn syscall_section(s: &ScenarioResult) -> Option<Section> {
    // With the split (run's default), each call's mean on the CPU and blocked, beside its mean.
    let merged: Vec<_> = s
        .variants
        .iter()
        .map(|v| (v, v.merged_syscalls()))
        .collect();
    let split = merged
        .iter()
        .any(|(_, m)| m.syscalls.iter().any(|x| x.time_split().is_some()));
    let mut columns = vec!["variant", "syscall", "calls", "calls/req", "errors", "mean"];
    if split {
        columns.extend(["on-CPU", "blocked"]);
    }
    columns.extend(["p50", "p99", "max", "total", "share"]);
    let mut table = Table::new(columns);
    let mut events = Vec::new();
    let mut dropped = Vec::new();
    for (v, merged) in &merged {
        let requests = requests_of(v);
        let total_time = merged.total_ns() as f64;
        let mut rows: Vec<_> = merged.syscalls.iter().filter(|x| x.calls > 0).collect();
        rows.sort_by_key(|x| std::cmp::Reverse(x.total_ns));
        for x in rows {
            let mut row = vec![
                v.variant.to_string(),
                x.name.clone(),
                x.calls.to_string(),
                calls_per_request(x.calls, requests)
                    .map_or_else(|| "-".to_owned(), |c| format!("{c:.2}")),
                error_share_cell(x),
                duration_ns(x.mean_ns()),
            ];
            if split {
                let per_call = |ns: u64| duration_ns(ns as f64 / x.calls as f64);
                match x.time_split() {
                    Some((on, blocked, _)) => row.extend([per_call(on), per_call(blocked)]),
                    None => row.extend(["-".to_owned(), "-".to_owned()]),
                }
            }
            row.extend([
                duration(x.quantile_ns(0.5)),
                duration(x.quantile_ns(0.99)),
                duration(x.max_ns),
                duration(x.total_ns),
                percent(x.total_ns as f64, total_time),
            ]);
            table.row(row);
            if let Some(r) = x.returned.as_ref().filter(|r| r.per_call.total() > 0) {
                events.push(format!("{} {}: {}", v.variant, x.name, r.line()));
            }
        }
        let lost = merged.dropped.lost();
        if lost > 0 {
            dropped.push(format!("{}: {lost} calls not recorded", v.variant));
        }
    }
    if table.is_empty() {
        return None;
    }
    let mut section = Section::new("Syscalls (timed in the kernel, all profiled runs)", table);
    section.notes = events;
    let not_seen: Vec<&String> = {
        let mut lines: Vec<&String> = Vec::new();
        for (_, merged) in &merged {
            for line in &merged.not_seen {
                if !lines.contains(&line) {
                    lines.push(line);
                }
            }
        }
        lines
    };
    section
        .notes
        .push(match (dropped.is_empty(), not_seen.is_empty()) {
            (true, true) => "dropped: 0 (every call was recorded)".to_owned(),
            (true, false) => "dropped: 0".to_owned(),
            (false, _) => format!("dropped: {}", dropped.join("; ")),
        });
    section
        .notes
        .extend(not_seen.into_iter().map(|l| format!("not seen: {l}")));
    for (v, merged) in &merged {
        if let Some(left_out) = merged.left_out() {
            section
                .notes
                .push(format!("{}: {}", v.variant, left_out.line()));
        }
    }
    Some(section)
}

/// With `--off-cpu` (the default): per variant and syscall, where the calls' time went.
fn off_cpu_section(s: &ScenarioResult) -> Option<Section> {
    let mut table = Table::new(
        ["variant", "syscall"]
            .into_iter()
            .chain(crate::report::table::OFF_CPU_COLUMNS),
    );
    for v in &s.variants {
        let merged = v.merged_syscalls();
        let mut rows: Vec<_> = merged.syscalls.iter().collect();
        rows.sort_by_key(|x| std::cmp::Reverse(x.total_ns));
        for x in rows {
            if let Some(cells) = crate::report::table::off_cpu_cells(x) {
                table.row(
                    [v.variant.to_string(), x.name.clone()]
                        .into_iter()
                        .chain(cells),
                );
            }
        }
    }
    (!table.is_empty()).then(|| Section::new(crate::report::table::OFF_CPU_TITLE, table))
}

/// "10000 (50.0% EAGAIN)" style.
fn error_share_cell(x: &crate::stats::SyscallSummary) -> String {
    match x.errors.top() {
        Some((class, n)) if x.calls > 0 => {
            format!(
                "{} ({} {})",
                x.errors.total(),
                percent(n as f64, x.calls as f64),
                class.name()
            )
        }
        _ => errors_cell(x),
    }
}

fn cpu_section(s: &ScenarioResult) -> Option<Section> {
    let mut table = Table::new(["variant", "CPU/req", "system share", "CPU busy"]);
    for v in &s.variants {
        let mut cpu = super::model::CpuTime::default();
        let (mut requests, mut elapsed) = (0u64, 0.0f64);
        for r in v.of_kind(RunKind::Profiled) {
            if let Some(c) = r.server_cpu {
                cpu.add(&c);
                requests += r.requests_finished();
                elapsed += r.load.elapsed.as_secs_f64();
            }
        }
        if requests == 0 {
            continue;
        }
        table.row([
            v.variant.to_string(),
            duration_ns(per_request(cpu.on_cpu_ns as f64, requests).unwrap_or(0.0)),
            percent(cpu.system_ns as f64, (cpu.user_ns + cpu.system_ns) as f64),
            percent(cpu.on_cpu_ns as f64, elapsed * 1e9),
        ]);
    }
    (!table.is_empty()).then(|| {
        Section::new(
            "Server CPU (on-CPU time from schedstat; system share from the 10 ms tick samples)",
            table,
        )
    })
}

fn workers_sections(s: &ScenarioResult) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let why = s
        .mp_workers
        .as_ref()
        .map_or(String::new(), |(n, why)| format!("; {n} workers: {why}"));
    for v in s
        .variants
        .iter()
        .filter(|v| v.variant.builtin() == Some(Variant::Mp))
    {
        // Each run has its own workers (new pids): one table for the first run, a line for each.
        for (i, run) in v.of_kind(RunKind::Profiled).enumerate() {
            let Some((table, summary)) = worker_distribution(&run.syscalls) else {
                continue;
            };
            if i == 0 {
                out.push(Section::new(
                    format!(
                        "mp workers (SO_REUSEPORT distribution{why}), run {}",
                        run.run
                    ),
                    table,
                ));
            }
            if let Some(section) = out.last_mut() {
                section.notes.push(format!("run {}: {summary}", run.run));
            }
        }
    }
    out
}

/// Per worker of one run: accept calls, successful accepts, share; and a summary line.
fn worker_distribution(snapshot: &Snapshot) -> Option<(Table, String)> {
    let slots: Vec<usize> = snapshot
        .syscalls
        .iter()
        .enumerate()
        .filter(|(_, x)| x.name == "accept" || x.name == "accept4")
        .map(|(i, _)| i)
        .collect();
    if slots.is_empty() {
        return None;
    }
    let rows: Vec<(u32, u64, u64)> = snapshot
        .processes
        .iter()
        .map(|p| {
            let calls: u64 = slots
                .iter()
                .map(|&i| p.syscalls.get(i).map_or(0, |x| x.calls))
                .sum();
            let errors: u64 = slots
                .iter()
                .map(|&i| p.syscalls.get(i).map_or(0, |x| x.errors))
                .sum();
            (p.pid, calls, calls - errors)
        })
        .filter(|(_, calls, _)| *calls > 0)
        .collect();
    if rows.is_empty() {
        return None;
    }
    let accepted: Vec<u64> = rows.iter().map(|r| r.2).collect();
    let total: u64 = accepted.iter().sum();
    let mut table = Table::new(["worker pid", "accept calls", "accepted", "share"]);
    for (pid, calls, ok) in &rows {
        table.row([
            pid.to_string(),
            calls.to_string(),
            ok.to_string(),
            percent(*ok as f64, total as f64),
        ]);
    }
    let spread =
        Spread::of(&accepted.iter().map(|&a| a as f64).collect::<Vec<_>>()).unwrap_or_default();
    let summary = format!(
        "{} worker{}, accepted mean {:.1} ± {:.1}, Gini {:.3}",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        spread.mean,
        spread.stddev,
        gini(&accepted)
    );
    Some((table, summary))
}

fn side_by_side(s: &ScenarioResult) -> Option<Section> {
    let measured: Vec<&VariantResult> = s
        .variants
        .iter()
        .filter(|v| v.of_kind(RunKind::Profiled).next().is_some())
        .collect();
    if measured.len() < 2 {
        return None;
    }
    let mut header = vec!["metric".to_owned()];
    header.extend(measured.iter().map(|v| v.variant.to_string()));
    let mut table = Table::new(header);
    // Each variant's runs merged once, with its requests: every row reads them.
    let merged: Vec<(&VariantResult, Snapshot, u64)> = measured
        .iter()
        .map(|v| (*v, v.merged_syscalls(), requests_of(v)))
        .collect();
    let row = |name: &str, f: &dyn Fn(&VariantResult, &Snapshot, u64) -> String| {
        let mut cells = vec![name.to_owned()];
        for (v, m, requests) in &merged {
            cells.push(f(v, m, *requests));
        }
        cells
    };
    let any = |name: &str, f: &dyn Fn(&crate::stats::SyscallSummary) -> bool| {
        merged
            .iter()
            .any(|(_, m, _)| m.syscall(name).is_some_and(f))
    };
    let qps = |v: &VariantResult| -> Vec<f64> {
        v.of_kind(RunKind::Profiled).map(|r| r.load.qps()).collect()
    };
    let latency = |v: &VariantResult, q: f64| -> String {
        v.merged_latency()
            .map_or("-".to_owned(), |h| duration(h.value_at_quantile(q)))
    };
    let per_call = |name: &'static str| {
        move |_: &VariantResult, m: &Snapshot, _: u64| {
            m.syscall(name)
                .filter(|x| x.calls > 0)
                .map_or("-".to_owned(), |x| duration_ns(x.mean_ns()))
        }
    };
    let failed = |v: &VariantResult| v.failure.is_some();
    table.row(row("QPS (mean of runs)", &|v, _, _| {
        if failed(v) {
            "failed".to_owned()
        } else {
            format!("{:.0}", Spread::of(&qps(v)).unwrap_or_default().mean)
        }
    }));
    table.row(row("QPS σ", &|v, _, _| {
        if failed(v) {
            "failed".to_owned()
        } else {
            format!("{:.0}", Spread::of(&qps(v)).unwrap_or_default().stddev)
        }
    }));
    table.row(row("latency p50", &|v, _, _| latency(v, 0.5)));
    table.row(row("latency p99", &|v, _, _| latency(v, 0.99)));
    table.row(row("latency p99.9", &|v, _, _| latency(v, 0.999)));
    for name in [
        "close",
        "accept",
        "accept4",
        "read",
        "write",
        "epoll_wait",
        "epoll_ctl",
        "fcntl",
    ] {
        if any(name, &|x| x.calls > 0) {
            table.row(row(&format!("{name} mean"), &per_call(name)));
            if any(name, &|x| x.off_cpu.is_some()) {
                table.row(row(&format!("{name} on-CPU"), &|_, m, _| {
                    m.syscall(name)
                        .and_then(|x| Some((x.time_split()?.0, x.calls)))
                        .filter(|(_, calls)| *calls > 0)
                        .map_or("-".to_owned(), |(on, calls)| {
                            duration_ns(on as f64 / calls as f64)
                        })
                }));
            }
        }
    }
    table.row(row("accept calls/req", &|_, m, req| {
        let calls: u64 = ["accept", "accept4"]
            .iter()
            .filter_map(|n| m.syscall(n))
            .map(|x| x.calls)
            .sum();
        calls_per_request(calls, req).map_or_else(|| "-".to_owned(), |c| format!("{c:.2}"))
    }));
    table.row(row("accept EAGAIN", &|_, m, _| {
        let (calls, again) = ["accept", "accept4"]
            .iter()
            .filter_map(|n| m.syscall(n))
            .fold((0, 0), |(c, a), x| {
                (
                    c + x.calls,
                    a + x.errors.get(profiler_common::ErrnoClass::Again),
                )
            });
        percent(again as f64, calls as f64)
    }));
    table.row(row("syscalls/req", &|_, m, req| {
        calls_per_request(m.syscalls.iter().map(|x| x.calls).sum(), req)
            .map_or_else(|| "-".to_owned(), |c| format!("{c:.2}"))
    }));
    table.row(row("syscall time/req", &|_, m, req| {
        per_request(m.total_ns() as f64, req).map_or_else(|| "-".to_owned(), duration_ns)
    }));
    for (unit, label) in [
        (ReturnUnit::Events, "epoll events/call"),
        (ReturnUnit::Bytes, "bytes/read or write"),
    ] {
        table.row(row(label, &|_, m, _| {
            let mut h = crate::stats::LatencyHistogram::default();
            for r in m.syscalls.iter().filter_map(|x| x.returned_as(unit)) {
                h.merge(&r.per_call);
            }
            if h.total() > 0 {
                format!("{:.2}", h.mean())
            } else {
                "-".to_owned()
            }
        }));
    }
    table.row(row("server CPU/req", &|v, _, _| {
        let (ns, req) = v
            .of_kind(RunKind::Profiled)
            .filter_map(|r| r.server_cpu.map(|c| (c, r.requests_finished())))
            .fold((0u64, 0u64), |(n, q), (c, r)| (n + c.on_cpu_ns, q + r));
        per_request(ns as f64, req).map_or_else(|| "-".to_owned(), duration_ns)
    }));
    let mut section = Section::new("Side by side", table);
    // A server's syscall time per request counts every thread of it; where that exceeds what a
    // client waited, say why rather than leave it looking impossible.
    let beyond: Vec<String> = merged
        .iter()
        .filter_map(|(v, m, requests)| {
            let p50 = v.merged_latency()?.value_at_quantile(0.5) as f64;
            let per_request = per_request(m.total_ns() as f64, *requests)?;
            (p50 > 0.0 && per_request > p50).then(|| {
                format!(
                    "{} ({} against a p50 of {})",
                    v.variant,
                    duration_ns(per_request),
                    duration(p50 as u64)
                )
            })
        })
        .collect();
    if !beyond.is_empty() {
        section.notes.push(format!(
            "syscall time/req exceeds the client's p50 latency for {}: it sums the time of every thread of the server, waiting included: epoll_wait blocked between requests (while the next client connects), workers with nothing to do (mp), calls that overlap other requests' (concurrency above 1). The on-CPU time per request (On and off the CPU) is what serving costs.",
            beyond.join(", ")
        ));
    }
    Some(section)
}

/// Every variant against the first: is the difference real? Run i of each variant was made
/// next to the other's run i (the variants take turns), so they are compared in pairs, with
/// the same intervals and verdicts as the overhead table.
fn variants_section(s: &ScenarioResult) -> Option<Section> {
    let changes = s.variant_changes();
    let reference = changes.first()?.1;
    let mut table = Table::new([
        "variant",
        "pairs",
        "runs",
        "QPS",
        "reference QPS",
        "QPS change [interval] (level, pairs)",
        "p50 change",
        "p99 change",
        "verdict (QPS)",
    ]);
    for (v, _, c) in &changes {
        table.row([
            v.variant.to_string(),
            c.pairs.to_string(),
            c.of.name().to_owned(),
            format!("{:.0}", c.qps_of),
            format!("{:.0}", c.qps_relative_to),
            c.qps.cell("pairs"),
            c.p50.cell("pairs"),
            c.p99.cell("pairs"),
            c.verdict_words(),
        ]);
    }
    let mut section = Section::new(
        format!(
            "Variants against {} (run i of each made next to the other's; QPS and latency changes in % of {})",
            reference.variant, reference.variant
        ),
        table,
    );
    section.notes.push(interval_note(s));
    section.notes.push(
        "The runs compared are the baseline runs (nothing attached) when there are, else the profiled ones.".to_owned(),
    );
    Some(section)
}

/// How the intervals and verdicts of `s` were made, under each table of them.
#[must_use]
pub fn interval_note(s: &ScenarioResult) -> String {
    let design = &s.judge.design;
    let how = if design.sequential {
        format!(
            "pairs were added until every comparison was decided, looking at the data only at {} pairs, each look spending an equal share of the 5% (so the interval at the stop covers the true median change with at least the level printed, ≥{:.1}%, however the stop was chosen); this scenario stopped: {}",
            design.looks_text(),
            100.0 * design.level(),
            s.stopped
        )
    } else {
        format!(
            "a fixed count of pairs ({}); with fewer than {} pairs no interval reaches 95%",
            s.stopped,
            crate::inference::fewest_for(crate::inference::TARGET_LEVEL)
        )
    };
    format!(
        "Each change is the median of the pairs' changes with the sign test's interval (order statistics of the changes; distribution-free, its level exact), the level it achieves and the pairs it is made of: {how}. The verdict is about QPS: \"faster\"/\"slower\" when the interval excludes 0, \"same within {}%\" when it lies inside ±{}% (--equivalence), else \"undecided\" with the reason. \"also\" names the other figures (p50, p99, server CPU/req) whose change Holm's correction over the three finds at the same error.",
        s.judge.margin_pct, s.judge.margin_pct
    )
}

fn baseline_section(s: &ScenarioResult) -> Option<Section> {
    paired_section(
        s,
        RunKind::Profiled,
        RunKind::Baseline,
        "Profiler overhead (--baseline: the same load with nothing attached; profiled run i against baseline run i)",
    )
}

/// `--explain-cost`: per variant, each kernel program's runs and time per request (medians over
/// the profiled runs, from the kernel's own statistics), their sum, and the server CPU per
/// request that profiling added (profiled minus baseline medians): what is left is what the
/// kernel does around the programs.
fn cost_section(s: &ScenarioResult) -> Option<Section> {
    let mut table = Table::new(["variant", "program", "runs/req", "ns/run", "ns/req"]);
    for v in s.variants.iter().filter(|v| v.failure.is_none()) {
        let runs: Vec<&RunResult> = v
            .of_kind(RunKind::Profiled)
            .filter(|r| !r.programs.is_empty() && r.requests_finished() > 0)
            .collect();
        if runs.is_empty() {
            continue;
        }
        let mut names: Vec<&str> = runs
            .iter()
            .flat_map(|r| r.programs.iter().map(|p| p.name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        // Per run, the sum of `pick` over its programs per finished request; a median over runs.
        let per_request = |r: &RunResult, pick: &dyn Fn(&ProgramCost) -> f64| {
            r.programs.iter().map(pick).sum::<f64>() / r.requests_finished() as f64
        };
        let over_runs =
            |f: &dyn Fn(&RunResult) -> f64| median(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
        for name in &names {
            let of = |value: fn(&ProgramCost) -> f64| {
                over_runs(&|r| per_request(r, &|p| if p.name == *name { value(p) } else { 0.0 }))
            };
            let runs_per_req = of(|p| p.runs as f64);
            let ns_per_req = of(|p| p.ns as f64);
            table.row([
                v.variant.to_string(),
                (*name).to_owned(),
                format!("{runs_per_req:.1}"),
                format!("{:.0}", ns_per_req / runs_per_req.max(f64::MIN_POSITIVE)),
                format!("{ns_per_req:.0}"),
            ]);
        }
        // The syscall programs run for the load generator's calls too (early exits): the
        // server's share is its own traced calls at the programs' mean cost per call.
        // The sched programs run at every switch of the machine, the raw compat ones (32-bit
        // timing on the tracepoints) at every syscall: neither per traced call.
        let role = |p: &ProgramCost| profiler_common::names::role_of(&p.name);
        let machine_wide = |p: &ProgramCost| role(p).is_some_and(Role::machine_wide);
        let server_calls = over_runs(&|r| {
            r.syscalls.syscalls.iter().map(|s| s.calls).sum::<u64>() as f64
                / r.requests_finished() as f64
        });
        let per_call = over_runs(&|r| {
            let (runs, ns) = r
                .programs
                .iter()
                .filter(|p| role(p) == Some(Role::SyscallTiming))
                .fold((0, 0), |(runs, ns), p| (runs + p.runs, ns + p.ns));
            // An enter and an exit run per call.
            2.0 * ns as f64 / runs.max(1) as f64
        });
        let machine =
            over_runs(&|r| per_request(r, &|p| if machine_wide(p) { p.ns as f64 } else { 0.0 }));
        let server_share = server_calls * per_call;
        let mut total_row = |what: String, ns: f64| {
            table.row([
                v.variant.to_string(),
                what,
                "-".to_owned(),
                "-".to_owned(),
                format!("{ns:.0}"),
            ]);
        };
        total_row(
            format!(
                "the server's traced calls: {server_calls:.1}/req × {per_call:.0} ns (enter + exit)"
            ),
            server_share,
        );
        total_row(
            "machine-wide programs (sched at every switch, compat at every syscall)".to_owned(),
            machine,
        );
        if let Some((of_ns, to_ns)) = v
            .paired_change(RunKind::Profiled, RunKind::Baseline, &s.judge)
            .and_then(|c| c.cpu_per_request_ns)
        {
            let added = of_ns - to_ns;
            total_row("server CPU added (profiled - baseline)".to_owned(), added);
            total_row(
                "left: around the programs".to_owned(),
                added - server_share - machine,
            );
        }
    }
    if table.is_empty() {
        return None;
    }
    let mut section = Section::new(
        "Where the profiling cost goes (--explain-cost: the kernel's own program statistics, medians over the profiled runs)",
        table,
    );
    section.notes.push("Runs and ns per request of each attached program over the measured window, as the kernel counts them (bpf(2) BPF_ENABLE_STATS; each figure includes the statistics' own two clock reads). Syscall programs run in the caller's context: the server's calls, and the load generator's calls of the traced syscalls, whose programs exit early (fentry_N/fexit_N time slot N's syscall), so the server's share is its own traced calls per request (from the kernel's table) at the programs' mean cost per call, an estimate on the low side (early exits are cheaper); sched programs run at every context switch of the machine and the raw compat programs (32-bit timing on the tracepoint front end) at every syscall, the load generator's included (counted whole: a bound from above). With --baseline, the server CPU added is the profiled runs' median on-CPU time per request minus the baseline runs'; what is left is the kernel's work around the programs: the syscall tracepoints' slow path on every syscall of the server (or the fentry trampolines), the records built for the tracepoints, and the cache lines the programs and their maps take from the server's own work.".to_owned());
    Some(section)
}

/// `of` runs against `relative_to` runs, paired by run number: QPS and latency changes with
/// their intervals, and the verdict.
fn paired_section(
    s: &ScenarioResult,
    of: RunKind,
    relative_to: RunKind,
    title: &str,
) -> Option<Section> {
    let mut table = Table::new([
        "variant".to_owned(),
        "pairs".to_owned(),
        format!("QPS {}", of.name()),
        format!("QPS {}", relative_to.name()),
        "QPS change [interval] (level, pairs)".to_owned(),
        "p50 change".to_owned(),
        "p99 change".to_owned(),
        "server CPU/req change".to_owned(),
        "verdict (QPS)".to_owned(),
    ]);
    for (v, c) in s.kind_changes(of, relative_to) {
        table.row([
            v.variant.to_string(),
            c.pairs.to_string(),
            format!("{:.0}", c.qps_of),
            format!("{:.0}", c.qps_relative_to),
            c.qps.cell("pairs"),
            c.p50.cell("pairs"),
            c.p99.cell("pairs"),
            match (&c.cpu_per_request, c.cpu_per_request_ns) {
                (Some(i), Some((of_ns, to_ns))) => format!(
                    "{} ({} → {})",
                    i.cell("pairs"),
                    duration_ns(to_ns),
                    duration_ns(of_ns)
                ),
                _ => "-".to_owned(),
            },
            c.verdict_words(),
        ]);
    }
    if table.is_empty() {
        return None;
    }
    let mut section = Section::new(title, table);
    section.notes.push(interval_note(s));
    section.notes.push(PAIRED_NOTE.to_owned());
    Some(section)
}

/// How the paired runs are made, under each paired table.
const PAIRED_NOTE: &str = "The two runs of a pair are made back to back, in ABBA order (the profiled run first in odd pairs, second in even ones). Server CPU/req is the server's on-CPU time per finished request from schedstat (the kernel programs run in its context, so this is what profiling adds to it), with the two medians.";

/// Whether the verdict on one comparison changes with the server CPU set.
fn across_verdict(verdicts: &[&Verdict]) -> String {
    if verdicts.len() < 2 {
        return "-".to_owned();
    }
    let decided: Vec<&&Verdict> = verdicts.iter().filter(|v| v.decided()).collect();
    if decided.len() < verdicts.len() {
        return "undecided on a set: the data cannot say".to_owned();
    }
    if decided.iter().all(|v| ***v == *verdicts[0]) {
        "same verdict".to_owned()
    } else {
        "CHANGES with the CPU set".to_owned()
    }
}

fn strace_sections(s: &ScenarioResult) -> Vec<Section> {
    let mut table = Table::new([
        "variant",
        "syscall",
        "kernel calls/req",
        "strace calls/req",
        "kernel mean",
        "strace per call",
        "strace ÷ kernel",
    ]);
    for v in &s.variants {
        let Some(rows) = strace_rows(v) else {
            continue;
        };
        let merged = v.merged_syscalls();
        let req = requests_of(v).max(1) as f64;
        // strace sees the server's whole life, warm-up included.
        let st_req = v
            .of_kind(RunKind::Strace)
            .map(|r| r.requests_finished() + r.warmup_requests)
            .sum::<u64>()
            .max(1) as f64;
        for row in &rows {
            let kernel = merged.syscall(&row.syscall).filter(|x| x.calls > 0);
            table.row([
                v.variant.to_string(),
                row.syscall.clone(),
                kernel.map_or("-".to_owned(), |k| format!("{:.2}", k.calls as f64 / req)),
                format!("{:.2}", row.calls as f64 / st_req),
                kernel.map_or("-".to_owned(), |k| duration_ns(k.mean_ns())),
                duration_ns(row.ns_per_call()),
                kernel.map_or("-".to_owned(), |k| {
                    format!("{:.1}×", row.ns_per_call() / k.mean_ns().max(1.0))
                }),
            ]);
        }
    }
    if table.is_empty() {
        return Vec::new();
    }
    let mut out = vec![Section::new(
        "strace -f -c against the kernel's timing (--strace, all strace runs)",
        table,
    )];
    out.extend(paired_section(
        s,
        RunKind::Strace,
        RunKind::Profiled,
        "strace's own cost (strace run i against profiled run i)",
    ));
    out
}

/// strace's rows summed over a variant's strace runs; `None` without a strace run.
pub(crate) fn strace_rows(v: &VariantResult) -> Option<Vec<super::model::StraceRow>> {
    let mut runs = v.of_kind(RunKind::Strace).peekable();
    runs.peek()?;
    let mut rows: Vec<super::model::StraceRow> = Vec::new();
    for run in runs {
        for r in &run.strace {
            match rows.iter_mut().find(|x| x.syscall == r.syscall) {
                Some(x) => {
                    x.calls += r.calls;
                    x.errors += r.errors;
                    x.seconds += r.seconds;
                }
                None => rows.push(r.clone()),
            }
        }
    }
    Some(rows)
}
