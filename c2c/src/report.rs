//! The c2c report: per-mechanism statistics, the table, and its JSON form.

use std::fmt;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{CpuPair, Mechanism, TscInfo, mechanisms::PingPong};

/// Everything one `profiler c2c` run measured. `Display` prints the table.
#[derive(Debug, Clone, Serialize)]
pub struct C2cReport {
    /// The two CPUs and what they share.
    pub cpus: CpuPair,
    /// The cycle counter and its calibrated frequency.
    pub tsc: TscInfo,
    /// Round trips asked for per mechanism.
    pub round_trips_requested: u64,
    /// Time bound per mechanism, in seconds.
    pub time_limit_s: f64,
    /// Whether a syscall timer was given.
    pub syscall_timer: bool,
    /// One row per mechanism, in the order asked for.
    pub results: Vec<MechanismResult>,
    /// Ctrl-C stopped it: the mechanisms after the last row were not measured.
    pub interrupted: bool,
}

impl C2cReport {
    /// The first row for `mechanism`, if it was asked for.
    pub fn result(&self, mechanism: Mechanism) -> Option<&MechanismResult> {
        self.results.iter().find(|r| r.mechanism == mechanism)
    }
}

/// One mechanism's row.
#[derive(Debug, Clone, Serialize)]
pub struct MechanismResult {
    /// Which mechanism.
    pub mechanism: Mechanism,
    /// Bytes carried initiator to responder per round trip.
    pub message_bytes: usize,
    /// Bytes carried back as the acknowledgement.
    pub ack_bytes: usize,
    /// What happened.
    pub outcome: Outcome,
}

/// What happened to one mechanism.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Measured.
    Measured(Measurement),
    /// Not measurable here (e.g. no RDMA device); no figures are given.
    Unavailable {
        /// Why.
        reason: String,
    },
    /// The measurement failed.
    Failed {
        /// The error and its causes.
        error: String,
    },
}

impl Outcome {
    /// The measurement, when there is one.
    pub fn measurement(&self) -> Option<&Measurement> {
        match self {
            Outcome::Measured(m) => Some(m),
            _ => None,
        }
    }
}

/// Statistics of one measured mechanism.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    /// Round trips timed (fewer than asked when the time limit stopped the run).
    pub round_trips: u64,
    /// The time limit stopped the run.
    pub hit_time_limit: bool,
    /// Wall time of the timed loop, in nanoseconds.
    pub elapsed_ns: u64,
    /// Round-trip latency in nanoseconds.
    pub ns: LatencyStats,
    /// Round-trip latency in TSC cycles.
    pub cycles: LatencyStats,
    /// Round trips completed per second over the timed loop.
    pub round_trips_per_s: f64,
    /// Syscall time inside the round trips, when a timer was given to a syscall mechanism.
    pub syscalls: Option<SyscallShare>,
}

/// Latency summary; percentiles are hdrhistogram values (3 significant figures).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Exact mean.
    pub mean: f64,
    /// Mean of the round trips at or below p99: the typical cost without preemptions and
    /// interrupts (histogram values, so within 0.1 %).
    pub mean_to_p99: f64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

impl LatencyStats {
    fn from_histogram(histogram: &Histogram<u64>, mean: f64) -> Self {
        let p99 = histogram.value_at_quantile(0.99);
        let (sum, count) = histogram
            .iter_recorded()
            .filter(|v| v.value_iterated_to() <= p99)
            .fold((0f64, 0u64), |(sum, count), v| {
                let n = v.count_at_value();
                (sum + v.value_iterated_to() as f64 * n as f64, count + n)
            });
        Self {
            mean,
            mean_to_p99: if count > 0 { sum / count as f64 } else { 0.0 },
            p50: histogram.value_at_quantile(0.5),
            p99,
            max: histogram.max(),
        }
    }
}

/// The syscall part of a round trip, from the kernel programs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyscallShare {
    /// Syscalls counted during the timed loop (both threads).
    pub calls: u64,
    /// Their summed kernel time, in nanoseconds.
    pub total_ns: u64,
    /// Syscalls per round trip.
    pub calls_per_round_trip: f64,
    /// Kernel time per round trip, in nanoseconds (both threads' syscalls, so it can exceed
    /// the round trip only if they overlap in time).
    pub ns_per_round_trip: f64,
    /// `ns_per_round_trip` over the mean round trip.
    pub share_of_round_trip: f64,
}

impl Measurement {
    pub(crate) fn from_ping_pong(run: &PingPong, tsc: &TscInfo) -> Self {
        let done = run.done.max(1);
        let mean_ticks = run.sum_ticks as f64 / done as f64;
        let mean_ns = tsc.to_ns(1) * mean_ticks;
        let elapsed_ns = tsc.to_ns(run.elapsed_ticks);
        let syscalls = run.syscalls.map(|s| {
            let ns_per_round_trip = s.total_ns as f64 / done as f64;
            SyscallShare {
                calls: s.calls,
                total_ns: s.total_ns,
                calls_per_round_trip: s.calls as f64 / done as f64,
                ns_per_round_trip,
                share_of_round_trip: if mean_ns > 0.0 {
                    ns_per_round_trip / mean_ns
                } else {
                    0.0
                },
            }
        });
        Self {
            round_trips: run.done,
            hit_time_limit: run.hit_time_limit,
            elapsed_ns: elapsed_ns as u64,
            ns: LatencyStats::from_histogram(&run.ns, mean_ns),
            cycles: LatencyStats::from_histogram(&run.ticks, mean_ticks),
            round_trips_per_s: if elapsed_ns > 0.0 {
                run.done as f64 * 1e9 / elapsed_ns
            } else {
                0.0
            },
            syscalls,
        }
    }
}

/// A short description of how each mechanism carries the message.
fn how(mechanism: Mechanism) -> &'static str {
    match mechanism {
        Mechanism::SpinFalseSharing => "both sides' counters on one 64 B line",
        Mechanism::SpinAligned => "each side's counters on its own 128 B line",
        Mechanism::SpscRing => "rtrb rings, spin-polled",
        Mechanism::MutexCondvar => "futex sleep/wake",
        Mechanism::UnixSocket => "SOCK_STREAM pair, blocking",
        Mechanism::Pipe => "two pipes, blocking",
        Mechanism::EventFd => "eventfd doorbells, message in shared memory",
        Mechanism::Rdma => "",
    }
}

const HEADER: [&str; 15] = [
    "mechanism",
    "round trips",
    "mean cyc",
    "p50 cyc",
    "p99 cyc",
    "max cyc",
    "mean ns",
    "p50 ns",
    "p99 ns",
    "max ns",
    "round trips/s",
    "syscalls/rt",
    "syscall ns/rt",
    "syscall share",
    "note",
];

fn row(result: &MechanismResult) -> Vec<String> {
    let mut cells = vec![result.mechanism.name().to_owned()];
    match &result.outcome {
        Outcome::Measured(m) => {
            cells.push(m.round_trips.to_string());
            for s in [&m.cycles, &m.ns] {
                cells.push(format!("{:.0}", s.mean));
                cells.push(s.p50.to_string());
                cells.push(s.p99.to_string());
                cells.push(s.max.to_string());
            }
            cells.push(format!("{:.0}", m.round_trips_per_s));
            match &m.syscalls {
                Some(s) => {
                    cells.push(format!("{:.1}", s.calls_per_round_trip));
                    cells.push(format!("{:.0}", s.ns_per_round_trip));
                    cells.push(format!("{:.0}%", s.share_of_round_trip * 100.0));
                }
                None => cells.extend(std::iter::repeat_n(String::new(), 3)),
            }
            let mut note = how(result.mechanism).to_owned();
            if m.hit_time_limit {
                note.push_str("; stopped by the time limit");
            }
            cells.push(note);
        }
        Outcome::Unavailable { reason } => {
            cells.extend(std::iter::repeat_n("-".to_owned(), HEADER.len() - 5));
            cells.extend(std::iter::repeat_n(String::new(), 3));
            cells.push(reason.clone());
        }
        Outcome::Failed { error } => {
            cells.extend(std::iter::repeat_n("-".to_owned(), HEADER.len() - 5));
            cells.extend(std::iter::repeat_n(String::new(), 3));
            cells.push(format!("failed: {error}"));
        }
    }
    cells
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

impl fmt::Display for C2cReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counter = if self.tsc.is_tsc {
            "TSC"
        } else {
            "counter (CLOCK_MONOTONIC, no TSC)"
        };
        writeln!(
            f,
            "core-to-core round trips: 64-byte message, small ack; {}",
            self.cpus
        )?;
        writeln!(
            f,
            "{counter}: {:.3} GHz calibrated against CLOCK_MONOTONIC, reads advance in steps of {} ticks ({:.1} ns); constant_tsc: {}, nonstop_tsc: {}",
            self.tsc.frequency_hz / 1e9,
            self.tsc.resolution_ticks,
            self.tsc.to_ns(self.tsc.resolution_ticks),
            yes_no(self.tsc.constant_tsc),
            yes_no(self.tsc.nonstop_tsc)
        )?;
        writeln!(
            f,
            "bound per mechanism: {} round trips or {} s, whichever comes first; each round trip timed on CPU {}{}",
            self.round_trips_requested,
            self.time_limit_s,
            self.cpus.initiator.cpu,
            if self.syscall_timer {
                "; syscall columns: the sending calls (write, sendto) of both threads, timed by the kernel programs (blocked reads are waits, left out)"
            } else {
                "; no syscall timer, so no syscall columns"
            }
        )?;
        writeln!(f)?;
        let rows: Vec<Vec<String>> = std::iter::once(HEADER.map(str::to_owned).to_vec())
            .chain(self.results.iter().map(row))
            .collect();
        let last = HEADER.len() - 1;
        let widths: Vec<usize> = (0..HEADER.len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for r in &rows {
            let mut line = String::new();
            for (c, cell) in r.iter().enumerate() {
                let w = widths[c];
                let text = match c {
                    0 => format!("{cell:<w$}"),
                    c if c == last => cell.clone(),
                    _ => format!("{cell:>w$}"),
                };
                if c > 0 {
                    line.push_str("  ");
                }
                line.push_str(&text);
            }
            writeln!(f, "{}", line.trim_end())?;
        }
        if self.interrupted {
            writeln!(f, "interrupted: only the mechanisms above were measured")?;
        }
        Ok(())
    }
}
