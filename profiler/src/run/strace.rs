//! Reading `strace -c`'s summary table, for the side-by-side with the kernel's figures.

use super::model::StraceRow;

/// Parses the `-c` table:
/// `% time  seconds  usecs/call  calls  errors  syscall`, rows until the `total` line.
/// Rows whose errors column is empty have no errors.
#[must_use]
pub fn parse_summary(text: &str) -> Vec<StraceRow> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 5 || fields[0].starts_with('%') || fields[0].starts_with('-') {
            continue;
        }
        let name = fields[fields.len() - 1];
        if name == "total" {
            break;
        }
        let numbers: Vec<&str> = fields[..fields.len() - 1].to_vec();
        // time%, seconds, usecs/call, calls[, errors]
        let (Some(seconds), Some(calls)) = (
            numbers.get(1).and_then(|s| s.parse::<f64>().ok()),
            numbers.get(3).and_then(|s| s.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let errors = numbers
            .get(4)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0);
        rows.push(StraceRow {
            syscall: name.to_owned(),
            calls,
            errors,
            seconds,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_with_and_without_errors() {
        let text = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 57.10    0.000704          20        34        13 openat
 30.82    0.000380          16        23           close
------ ----------- ----------- --------- --------- ----------------
100.00    0.001233          19        64        13 total
";
        let rows = parse_summary(text);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            StraceRow {
                syscall: "openat".into(),
                calls: 34,
                errors: 13,
                seconds: 0.000_704
            }
        );
        assert_eq!((rows[1].calls, rows[1].errors), (23, 0));
        assert!((rows[1].ns_per_call() - 16521.7).abs() < 1.0);
    }
}
