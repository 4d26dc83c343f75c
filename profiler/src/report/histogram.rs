//! bcc-style ASCII histograms (`low -> high : count |****|`), power-of-two rows built from the
//! kernel's finer log-linear buckets.

use std::fmt::Write as _;

use super::units::duration;
use crate::stats::LatencyHistogram;

const BAR_WIDTH: usize = 40;

/// Renders `hist` with one row per power of two between its first and last non-empty bucket.
/// `as_duration` labels rows as durations (ns), else as plain counts.
#[must_use]
pub fn log2_histogram(title: &str, hist: &LatencyHistogram, as_duration: bool) -> String {
    let mut rows: Vec<(u64, u64, u64)> = Vec::new(); // (low, high, count) per power of two
    for b in hist.buckets() {
        // Every kernel bucket lies within one power of two, so it maps to exactly one row.
        let (low, high) = if b.low == 0 {
            (0, 0)
        } else {
            let exp = b.low.ilog2();
            (1u64 << exp, (1u64 << exp << 1) - 1)
        };
        match rows.last_mut() {
            Some(last) if last.0 == low => last.2 += b.count,
            _ => rows.push((low, high, b.count)),
        }
    }
    // Fill empty powers of two between the rows so the shape reads correctly.
    let mut filled: Vec<(u64, u64, u64)> = Vec::new();
    for row in rows {
        if let Some(&(_, prev_high, _)) = filled.last() {
            let mut low = prev_high + 1;
            while low < row.0 {
                let high = if low == 0 { 0 } else { low * 2 - 1 };
                filled.push((low, high, 0));
                low = high + 1;
            }
        }
        filled.push(row);
    }
    let max = filled.iter().map(|r| r.2).max().unwrap_or(0).max(1);
    let label = |v: u64| {
        if as_duration {
            duration(v)
        } else {
            v.to_string()
        }
    };
    let mut out = String::new();
    let _ = writeln!(out, "{title}");
    let _ = writeln!(
        out,
        "{:>22} : {:<10} distribution",
        if as_duration { "latency" } else { "value" },
        "count"
    );
    for (low, high, count) in filled {
        let stars = ((count as f64 / max as f64) * BAR_WIDTH as f64).round() as usize;
        let stars = if count > 0 { stars.max(1) } else { 0 };
        let _ = writeln!(
            out,
            "{:>9} -> {:<9} : {:<10} |{:<width$}|",
            label(low),
            label(high),
            count,
            "*".repeat(stars),
            width = BAR_WIDTH
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_cover_powers_of_two_with_gaps_filled() {
        let mut h = LatencyHistogram::default();
        h.record_n(1000, 10); // 512..1023
        h.record_n(5000, 5); // 4096..8191
        let out = log2_histogram("close", &h, true);
        assert!(out.contains("512ns -> 1.02µs"), "{out}");
        assert!(out.contains("4.10µs -> 8.19µs"), "{out}");
        // The empty 1024..4095 rows are present with zero counts.
        assert_eq!(
            out.lines().filter(|l| l.contains(" : 0 ")).count(),
            2,
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains(": 10") && l.contains(&"*".repeat(BAR_WIDTH)))
        );
    }
}
