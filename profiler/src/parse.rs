//! Values of the command line's options that more than one command takes (durations).

use std::time::Duration;

/// The longest duration any option takes (larger ones overflow deadlines).
const MAX_DURATION: Duration = Duration::from_hours(8760);

/// `--interval`: a duration no shorter than attach's 20 ms polling period (a shorter one was
/// silently 20 ms).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(20) {
        return Err(format!(
            "'{s}' is shorter than the 20ms the counters are polled at: give 20ms or more"
        ));
    }
    Ok(d)
}

/// `--slow`: a threshold with its unit (`10ms`, `500us`, `1s`). A bare number is refused: `--slow
/// 1` read as one second, where a user meant a millisecond as often as not.
pub fn parse_threshold(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "'{s}' has no unit: give one, such as {t}ms, {t}us or {t}s"
        ));
    }
    parse_duration(s)
}

/// Parses `10s`, `500ms`, `2m`, `1h`; a bare number means seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let parsed = if s.chars().all(|c| c.is_ascii_digit() || c == '.') && !s.is_empty() {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| Duration::try_from_secs_f64(v).unwrap_or(Duration::MAX))
    } else {
        humantime::parse_duration(s).ok()
    };
    match parsed {
        Some(d) if d > MAX_DURATION => Err(format!(
            "'{s}' is longer than a year: give a duration such as 10s, 5m or 2h"
        )),
        Some(d) if !d.is_zero() => Ok(d),
        Some(_) => Err(format!(
            "'{s}' is zero: give a positive duration such as 10s or 500ms"
        )),
        None => Err(format!(
            "'{s}' is not a duration: use a number with a unit, such as 10s, 500ms or 2m"
        )),
    }
}

/// "2%", "2" or "0.5%": a margin in %, positive and below 100.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 100.0 => Ok(v),
        _ => Err(format!(
            "'{text}' is not a margin: give a percentage above 0 and below 100, e.g. 2% or 0.5%"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_need_a_unit() {
        assert_eq!(parse_threshold("10ms").unwrap(), Duration::from_millis(10));
        let e = parse_threshold("1").unwrap_err();
        assert!(e.contains("has no unit") && e.contains("1ms"), "{e}");
    }

    #[test]
    fn durations_parse_with_units_and_bare_seconds() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("100000000000000000000").is_err());
        assert!(parse_duration("100000000000000000000s").is_err());
        assert!(
            parse_duration("2y")
                .unwrap_err()
                .contains("longer than a year")
        );
        assert!(
            parse_duration("fast")
                .unwrap_err()
                .contains("not a duration")
        );
    }
}
