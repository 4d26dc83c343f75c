//! Core-to-core latency benchmark (`harness = false`).
//!
//! 1. Prints the full `profiler c2c` table for this machine (every mechanism, default bounds:
//!    1,000,000 round trips or 10 s each). Skip it with `--no-table`.
//! 2. Runs spin-false-sharing and spin-aligned back to back, in alternating order, `--rounds`
//!    times (default 21 pairs, `--round-trips` each, default 50,000), so the two runs of a pair
//!    see the same machine state (on a 2-vCPU VM shared with builds, that state moves a lot).
//!    Prints each pair and the median of the per-pair ratios of the mean-to-p99 round trip (the
//!    mean without the top 1 %, i.e. without preemptions; the TSC's step size makes p50 too
//!    coarse), and exits non-zero unless false sharing is slower than aligned by at least
//!    `--margin` (default 5 %).
//!
//! `cargo bench -p c2c --bench c2c -- [--no-table] [--rounds N] [--round-trips N] [--margin F]`

use std::{process::ExitCode, time::Duration};

use c2c::{C2cOptions, Measurement, Mechanism, Outcome, run};

struct Args {
    table: bool,
    rounds: usize,
    round_trips: u64,
    margin: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        table: true,
        rounds: 21,
        round_trips: 50_000,
        margin: 0.05,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--no-table" => args.table = false,
            "--rounds" => {
                args.rounds = value("--rounds")?
                    .parse()
                    .map_err(|e| format!("--rounds: {e}"))?;
            }
            "--round-trips" => {
                args.round_trips = value("--round-trips")?
                    .parse()
                    .map_err(|e| format!("--round-trips: {e}"))?;
            }
            "--margin" => {
                args.margin = value("--margin")?
                    .parse()
                    .map_err(|e| format!("--margin: {e}"))?;
            }
            // cargo bench passes --bench; libtest-style filters are ignored.
            _ => {}
        }
    }
    if args.rounds == 0 || args.round_trips == 0 {
        return Err("--rounds and --round-trips must be at least 1".into());
    }
    Ok(args)
}

/// Measures both variants in one `run` (one TSC calibration), in the given order.
fn measure_pair(
    order: [Mechanism; 2],
    round_trips: u64,
) -> Result<(Measurement, Measurement), String> {
    let opts = C2cOptions {
        round_trips,
        mechanisms: order.to_vec(),
        time_limit: Duration::from_secs(10),
        ..C2cOptions::default()
    };
    let report = run(&opts, None).map_err(|e| format!("{e:#}"))?;
    let get = |mechanism: Mechanism| match report.result(mechanism).map(|r| &r.outcome) {
        Some(Outcome::Measured(m)) => Ok(m.clone()),
        other => Err(format!("{mechanism}: {other:?}")),
    };
    Ok((
        get(Mechanism::SpinFalseSharing)?,
        get(Mechanism::SpinAligned)?,
    ))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("Error: {e}");
            return ExitCode::from(2);
        }
    };

    if args.table {
        match run(&C2cOptions::default(), None) {
            Ok(report) => println!("{report}"),
            Err(e) => {
                eprintln!("Error: {e:#}");
                return ExitCode::FAILURE;
            }
        }
    }

    println!(
        "false sharing vs aligned: {} pairs of back-to-back runs ({} round trips each, order \
         alternating), so both variants of a pair see the same machine state; load average: {}",
        args.rounds,
        args.round_trips,
        load_average()
    );
    let mut ratios = Vec::new();
    let (mut fs_typical, mut al_typical, mut fs_mean, mut al_mean) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds {
        let order = if round % 2 == 0 {
            [Mechanism::SpinFalseSharing, Mechanism::SpinAligned]
        } else {
            [Mechanism::SpinAligned, Mechanism::SpinFalseSharing]
        };
        let (fs, al) = match measure_pair(order, args.round_trips) {
            Ok(pair) => pair,
            Err(e) => {
                eprintln!("Error: {e}");
                return ExitCode::FAILURE;
            }
        };
        let ratio = fs.ns.mean_to_p99 / al.ns.mean_to_p99;
        println!(
            "  pair {round:>2}: mean-to-p99 false sharing {:>6.1} ns, aligned {:>6.1} ns, ratio {ratio:.3}   \
             (p50 {} / {} ns, mean {:.1} / {:.1} ns)",
            fs.ns.mean_to_p99, al.ns.mean_to_p99, fs.ns.p50, al.ns.p50, fs.ns.mean, al.ns.mean
        );
        ratios.push(ratio);
        fs_typical.push(fs.ns.mean_to_p99);
        al_typical.push(al.ns.mean_to_p99);
        fs_mean.push(fs.ns.mean);
        al_mean.push(al.ns.mean);
    }
    let ratio = median(&ratios);
    let slower = ratios.iter().filter(|r| **r > 1.0).count();
    println!(
        "median mean-to-p99: false sharing {:.1} ns, aligned {:.1} ns; median mean: {:.1} / {:.1} ns",
        median(&fs_typical),
        median(&al_typical),
        median(&fs_mean),
        median(&al_mean),
    );
    println!(
        "median pair ratio (false sharing / aligned): {ratio:.3}; false sharing slower in {slower} of {} pairs; \
         load average now: {}",
        ratios.len(),
        load_average()
    );
    if ratio >= 1.0 + args.margin {
        println!(
            "PASS: false sharing is slower than aligned by {:.1} % (margin {:.0} %)",
            (ratio - 1.0) * 100.0,
            args.margin * 100.0
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "FAIL: false sharing is not slower than aligned by the {:.0} % margin (mean-to-p99 ratio {ratio:.3})",
            args.margin * 100.0
        );
        ExitCode::FAILURE
    }
}

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    }
}
