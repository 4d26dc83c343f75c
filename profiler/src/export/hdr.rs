//! `--export-hdr DIR`: per (variant, syscall) an HdrHistogram percentile distribution (`.hgrm`) and
//! an interval log (`.hlog`) of V2 compressed histograms, one interval per run.
//!
//! Histograms hold nanoseconds (each kernel bucket's count recorded at the bucket's midpoint, 3
//! significant digits). The `.hgrm` table prints microseconds (value unit scaling ratio 1000), as
//! HdrHistogram's `outputPercentileDistribution(out, 5, 1000.0)` does for ns data; the interval
//! log keeps ns (its max column is divided by 1000, noted in its `MaxValueDivisor` header).

use std::{
    fmt::Write as _,
    path::Path,
    time::{Duration, UNIX_EPOCH},
};

use anyhow::{Context as _, Result, anyhow};
use hdrhistogram::{
    Histogram,
    serialization::{V2DeflateSerializer, interval_log},
};

use super::{ExportData, Measurement, atomic::write_atomic};

/// Value unit scaling ratio of the `.hgrm` tables: ns in the histogram, µs in the table.
pub const HGRM_SCALING_RATIO: f64 = 1000.0;

/// Percentile ticks per half distance of the `.hgrm` tables (HdrHistogram's usual 5).
pub const HGRM_TICKS_PER_HALF: u32 = 5;

/// One exported (variant, syscall): its file stem and histograms.
pub struct HdrSeries {
    /// File stem: `close`, `lt.close`, `lt-c64.close`.
    pub stem: String,
    /// The `.hgrm` histogram: the aggregate over runs (or the runs merged when there is none).
    pub total: Histogram<u64>,
    /// Interval log entries: (run label, duration in seconds, histogram), in run order.
    pub intervals: Vec<(String, f64, Histogram<u64>)>,
}

/// The series to export, one per (variant, concurrency, syscall) that made calls.
pub fn series(data: &ExportData) -> Result<Vec<HdrSeries>> {
    let mut out = Vec::new();
    let mut seen: Vec<&Measurement> = Vec::new();
    for group in &data.measurements {
        if seen.iter().any(|s| s.same_group(group)) {
            continue;
        }
        seen.push(group);
        let aggregate = data
            .measurements
            .iter()
            .find(|m| m.same_group(group) && m.run.is_none());
        let runs = data.runs_of(group);
        let interval_sources: Vec<&Measurement> = if runs.is_empty() {
            aggregate.into_iter().collect()
        } else {
            runs
        };
        for name in data.syscall_names() {
            let intervals: Vec<(String, f64, Histogram<u64>)> = interval_sources
                .iter()
                .map(|m| {
                    let h = m
                        .syscalls
                        .syscall(name)
                        .map_or_else(empty, |s| s.latency.to_hdr());
                    (
                        m.run
                            .map_or_else(|| "all".to_owned(), |r| format!("run{r}")),
                        duration_s(m, data),
                        h,
                    )
                })
                .collect();
            let total = if let Some(s) = aggregate.and_then(|a| a.syscalls.syscall(name)) {
                s.latency.to_hdr()
            } else {
                let mut merged = empty();
                for (_, _, h) in &intervals {
                    merged
                        .add(h)
                        .map_err(|e| anyhow!("merging runs of {name}: {e:?}"))?;
                }
                merged
            };
            if total.is_empty() {
                continue;
            }
            out.push(HdrSeries {
                stem: stem(group, name),
                total,
                intervals,
            });
        }
    }
    Ok(out)
}

/// Writes `<stem>.hgrm` and `<stem>.hlog` for every series into `dir` (created if missing).
pub fn write_dir(dir: &Path, data: &ExportData) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating directory '{}'", dir.display()))?;
    let mut written = std::collections::HashSet::new();
    for s in series(data)? {
        let (hgrm, hlog) = (format!("{}.hgrm", s.stem), format!("{}.hlog", s.stem));
        write_atomic(
            &dir.join(&hgrm),
            percentile_distribution(&s.total).as_bytes(),
        )?;
        write_atomic(&dir.join(&hlog), &interval_log(&s, data)?)?;
        written.extend([hgrm, hlog]);
    }
    // The directory holds this measurement's histograms only: an earlier export's files for
    // syscalls or variants not measured now would read as part of it. Only files an earlier
    // export wrote (its manifest names them) are removed: never another program's.
    let manifest = dir.join(MANIFEST);
    let before = std::fs::read_to_string(&manifest).unwrap_or_default();
    for name in before
        .lines()
        .filter(|n| is_ours(n) && !written.contains(*n))
    {
        let path = dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&path)
                .with_context(|| format!("removing the stale '{}'", path.display()))?;
        }
    }
    let mut names: Vec<&String> = written.iter().collect();
    names.sort();
    let mut list = names
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    list.push('\n');
    write_atomic(&manifest, list.as_bytes())?;
    Ok(())
}

/// The list of files the last `--export-hdr` into a directory wrote, kept in it.
pub const MANIFEST: &str = ".syscall-profiler-hdr";

/// A plain `<stem>.hgrm`/`<stem>.hlog` name, no path: what the manifest may name.
fn is_ours(name: &str) -> bool {
    (name.ends_with(".hgrm") || name.ends_with(".hlog"))
        && !name.contains('/')
        && !name.starts_with('.')
}

fn empty() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits is valid")
}

/// A measurement's length: the load generator's measured time, else the command's wall time.
fn duration_s(m: &Measurement, data: &ExportData) -> f64 {
    m.load
        .as_ref()
        .map_or(data.metadata.duration_s, |l| l.elapsed_s)
        .max(0.0)
}

fn stem(m: &Measurement, syscall: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut prefix = m.variant.as_deref().map(clean).unwrap_or_default();
    if let Some(c) = m.concurrency {
        prefix.push_str(&format!("-c{c}"));
    }
    if prefix.is_empty() {
        clean(syscall)
    } else {
        format!("{prefix}.{}", clean(syscall))
    }
}

/// The `.hgrm` table: `Value Percentile TotalCount 1/(1-Percentile)` rows, then the footer, exactly
/// as HdrHistogram's `outputPercentileDistribution` prints them (values in µs).
#[must_use]
pub fn percentile_distribution(h: &Histogram<u64>) -> String {
    let digits = usize::from(h.sigfig());
    let mut out = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for v in h.iter_quantiles(HGRM_TICKS_PER_HALF) {
        total += v.count_since_last_iteration();
        let value = v.value_iterated_to() as f64 / HGRM_SCALING_RATIO;
        let q = v.quantile_iterated_to();
        if q < 1.0 {
            let _ = writeln!(
                out,
                "{value:>12.digits$} {q:>2.12} {total:>10} {:>14.2}",
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(out, "{value:>12.digits$} {q:>2.12} {total:>10}");
        }
    }
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean(), h.stdev(), h.max() as f64)
    };
    let r = HGRM_SCALING_RATIO;
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.digits$}, StdDeviation   = {:>12.digits$}]",
        mean / r,
        stdev / r
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.digits$}, Total count    = {:>12}]",
        max / r,
        h.len()
    );
    let sub_buckets = (2.0 * 10f64.powi(i32::from(h.sigfig())))
        .log2()
        .ceil()
        .exp2() as u64;
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        sub_buckets
    );
    out
}

/// The interval log: StartTime/BaseTime = the command's start, one tagged interval per run, laid
/// back to back (runs' own start times are not recorded; their lengths are).
pub fn interval_log(s: &HdrSeries, data: &ExportData) -> Result<Vec<u8>> {
    let start = UNIX_EPOCH + Duration::from_secs(data.metadata.started_unix_s);
    let mut buf = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut builder = interval_log::IntervalLogWriterBuilder::new();
    builder
        .add_comment(&format!(
            "syscall-profiler {} export: {}, latency in ns",
            data.metadata.profiler_version, s.stem
        ))
        .add_comment(&data.partial_note().map_or_else(
            || "complete".to_owned(),
            |note| format!("partial: {}", note.replace('\n', " ")),
        ))
        .with_start_time(start)
        .with_base_time(start)
        .with_max_value_divisor(HGRM_SCALING_RATIO);
    let mut writer = builder.begin_log_with(&mut buf, &mut serializer)?;
    writer.write_comment(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"",
    )?;
    let mut offset = 0.0;
    for (label, length_s, h) in &s.intervals {
        let tag_text = format!("{}.{label}", s.stem);
        let tag = interval_log::Tag::new(&tag_text);
        writer
            .write_histogram(
                h,
                Duration::from_secs_f64(offset),
                Duration::from_secs_f64(*length_s),
                tag,
            )
            .map_err(|e| anyhow!("writing the interval log of {}: {e}", s.stem))?;
        offset += length_s;
    }
    Ok(buf)
}
