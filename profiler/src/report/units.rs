//! Human-readable durations and counts: `812ns`, `1.25µs`, `20.1ms`, `3.02s`.

/// Formats nanoseconds with three significant digits and a unit.
#[must_use]
pub fn duration_ns(ns: f64) -> String {
    if !ns.is_finite() || ns <= 0.0 {
        return "0".to_owned();
    }
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if unit == "ns" || value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    // 999.6 would round up to "1000": move to the next unit instead.
    let rounded = format!("{value:.digits$}");
    if rounded.len() > 3 && !rounded.contains('.') && unit != "s" && rounded.starts_with("1000") {
        return duration_ns(ns + 0.5 * 10f64.powi(if unit == "ns" { 0 } else { 3 }));
    }
    format!("{rounded}{unit}")
}

/// [`duration_ns`] for integers.
#[must_use]
pub fn duration(ns: u64) -> String {
    duration_ns(ns as f64)
}

/// A percentage with one decimal.
#[must_use]
pub fn percent(part: f64, whole: f64) -> String {
    if whole <= 0.0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", 100.0 * part / whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_three_significant_digits_and_a_unit() {
        assert_eq!(duration(812), "812ns");
        assert_eq!(duration(1250), "1.25µs");
        assert_eq!(duration(20_100_000), "20.1ms");
        assert_eq!(duration(3_020_000_000), "3.02s");
        assert_eq!(duration(0), "0");
        assert_eq!(duration(999_999), "1.00ms");
        assert_eq!(duration(999), "999ns");
    }
}
