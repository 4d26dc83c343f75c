//! Reading `strace -c`'s summary table, for the side-by-side with the kernel's figures.

use super::model::StraceRow;

/// Parses the `-c` tables:
/// `% time  seconds  usecs/call  calls  errors  syscall`, rows until each `total` line. A
/// process that ran in 32-bit mode too gets a second table ("System call usage summary for 32
/// bit mode"): its rows are added to the same names (the first parser stopped at the first
/// total, and missed every 32-bit call). Rows whose errors column is empty have no errors.
#[must_use]
pub fn parse_summary(text: &str) -> Vec<StraceRow> {
    let mut rows: Vec<StraceRow> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 5 || fields[0].starts_with('%') || fields[0].starts_with('-') {
            continue;
        }
        let name = fields[fields.len() - 1];
        if name == "total" {
            continue;
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
        match rows.iter_mut().find(|r| r.syscall == name) {
            Some(r) => {
                r.calls += calls;
                r.errors += errors;
                r.seconds += seconds;
            }
            None => rows.push(StraceRow {
                syscall: name.to_owned(),
                calls,
                errors,
                seconds,
            }),
        }
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

    /// A process that execs a 32-bit program: strace prints a second table for its 32-bit
    /// calls, whose rows were left out.
    #[test]
    fn the_32_bit_table_adds_to_the_first() {
        let text = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 61.00    0.000488           4       102       100 close
 39.00    0.000312         156         2           execve
------ ----------- ----------- --------- --------- ----------------
100.00    0.000800           7       104       100 total
System call usage summary for 32 bit mode:
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.011537          11      1000      1000 close
------ ----------- ----------- --------- --------- ----------------
100.00    0.011537          11      1000      1000 total
";
        let rows = parse_summary(text);
        let close = rows.iter().find(|r| r.syscall == "close").unwrap();
        assert_eq!((close.calls, close.errors), (1102, 1100));
        assert_eq!(
            rows.iter().find(|r| r.syscall == "execve").unwrap().calls,
            2
        );
    }
}
