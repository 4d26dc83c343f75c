//! `profiler c2c`: core-to-core latency of the ways two cores can talk.
//!
//! Two threads pinned to two CPUs exchange a 64-byte message and a small acknowledgement
//! through each [`Mechanism`]; every round trip is timed with the TSC on the initiating CPU.
//! For the syscall mechanisms an optional [`SyscallTimer`] (the profiler's kernel programs,
//! `profiler::c2c_timer`) splits each round trip into syscall time and the rest. [`run`]
//! returns a [`C2cReport`] whose `Display` is the table and which serialises to JSON.
#![expect(
    clippy::inline_always,
    reason = "the spin loops and TSC reads are inside the timed round trip: a call there would \
              be measured too"
)]

mod mechanisms;
mod report;
pub mod topology;
pub mod tsc;

use std::{fmt, fs, path::Path, str::FromStr, time::Duration};

use anyhow::{Result, bail};
use serde::{Serialize, Serializer};

use self::{
    mechanisms::{PingPongConfig, ping_pong, wire_sizes},
    topology::format_cpu_list,
};
pub use self::{
    report::{C2cReport, LatencyStats, Measurement, MechanismResult, Outcome, SyscallShare},
    topology::{CacheInfo, CpuInfo, CpuPair, Topology},
    tsc::TscInfo,
};

/// Where the kernel lists RDMA (InfiniBand verbs) devices.
pub const INFINIBAND_CLASS: &str = "/sys/class/infiniband";

/// What to measure.
#[derive(Debug, Clone)]
pub struct C2cOptions {
    /// The initiating and the responding CPU; `None` picks two online CPUs this process may
    /// use, preferring two different physical cores.
    pub cpus: Option<(usize, usize)>,
    /// Round trips per mechanism (at least 1).
    pub round_trips: u64,
    /// Mechanisms to measure, in this order.
    pub mechanisms: Vec<Mechanism>,
    /// Upper bound on each mechanism's timed loop; at least one round trip is always made.
    pub time_limit: Duration,
    /// Set by a Ctrl-C handler: no mechanism starts after it; the report holds those measured.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Called with each mechanism's result as it finishes, with its place and the count: a
    /// run of all mechanisms takes tens of seconds, and says how it goes.
    pub on_result: Option<fn(&MechanismResult, usize, usize)>,
}

impl Default for C2cOptions {
    fn default() -> Self {
        Self {
            cpus: None,
            round_trips: 1_000_000,
            mechanisms: Mechanism::ALL.to_vec(),
            time_limit: Duration::from_secs(10),
            interrupt: None,
            on_result: None,
        }
    }
}

/// A way for two threads to exchange a message and an acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    /// Spin-waiting on atomic flags; the counters each side keeps of its own work share one
    /// 64-byte line (false sharing).
    SpinFalseSharing,
    /// Spin-waiting on atomic flags; each side's counters on a 128-byte-aligned line of its
    /// own.
    SpinAligned,
    /// A lock-free single-producer single-consumer ring each way (`rtrb`), spin-polled.
    SpscRing,
    /// A mutex-protected mailbox with a condition variable each way.
    MutexCondvar,
    /// A `SOCK_STREAM` UNIX domain socket pair, blocking `read`/`write`.
    UnixSocket,
    /// Two pipes, blocking `read`/`write`.
    Pipe,
    /// Two eventfds as doorbells (blocking `read`/`write`), the message in shared memory.
    EventFd,
    /// RDMA verbs; reported as present-but-not-implemented or absent, never measured here.
    Rdma,
}

impl Mechanism {
    /// Every mechanism, in report order.
    pub const ALL: [Mechanism; 8] = [
        Mechanism::SpinFalseSharing,
        Mechanism::SpinAligned,
        Mechanism::SpscRing,
        Mechanism::MutexCondvar,
        Mechanism::UnixSocket,
        Mechanism::Pipe,
        Mechanism::EventFd,
        Mechanism::Rdma,
    ];

    /// The kebab-case name used on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Mechanism::SpinFalseSharing => "spin-false-sharing",
            Mechanism::SpinAligned => "spin-aligned",
            Mechanism::SpscRing => "spsc-ring",
            Mechanism::MutexCondvar => "mutex-condvar",
            Mechanism::UnixSocket => "unix-socket",
            Mechanism::Pipe => "pipe",
            Mechanism::EventFd => "eventfd",
            Mechanism::Rdma => "rdma",
        }
    }

    /// Whether each round trip is made of blocking syscalls the [`SyscallTimer`] is asked to time.
    pub const fn uses_syscalls(self) -> bool {
        matches!(
            self,
            Mechanism::UnixSocket | Mechanism::Pipe | Mechanism::EventFd
        )
    }

    /// Parses a comma-separated list such as `pipe,eventfd` (`all` means every mechanism).
    pub fn parse_list(list: &str) -> Result<Vec<Self>, ParseMechanismError> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if name.eq_ignore_ascii_case("all") {
                out.extend(Self::ALL);
            } else {
                out.push(name.parse()?);
            }
        }
        if out.is_empty() {
            return Err(ParseMechanismError {
                given: list.to_owned(),
            });
        }
        Ok(out)
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl Serialize for Mechanism {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// A mechanism name that is not one of [`Mechanism::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mechanism `{given}`; valid names: {}", valid_names())]
pub struct ParseMechanismError {
    /// The text that did not parse.
    pub given: String,
}

fn valid_names() -> String {
    Mechanism::ALL.map(Mechanism::name).join(", ")
}

impl FromStr for Mechanism {
    type Err = ParseMechanismError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('_', "-");
        let wanted = if wanted == "event-fd" {
            "eventfd"
        } else {
            &wanted
        };
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name() == wanted)
            .ok_or_else(|| ParseMechanismError {
                // Keep the message one line whatever was typed.
                given: s.escape_debug().to_string(),
            })
    }
}

/// Kernel-side timing of the syscalls made during one mechanism's timed loop; the CLI
/// implements it with the eBPF programs tracking this process's threads.
///
/// [`run`] calls [`begin`](Self::begin) right before a syscall mechanism's timed loop and
/// [`end`](Self::end) right after it, both from the initiating thread (the caller of [`run`]).
/// During the loop the only syscalls this process makes are the two threads' reads and writes.
pub trait SyscallTimer {
    /// Starts counting.
    fn begin(&mut self) -> Result<()>;
    /// Stops counting and returns what was counted since [`begin`](Self::begin).
    fn end(&mut self) -> Result<SyscallTime>;
}

/// Syscalls counted by a [`SyscallTimer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SyscallTime {
    /// Completed syscalls.
    pub calls: u64,
    /// Their summed duration in the kernel, entry to exit, in nanoseconds.
    pub total_ns: u64,
}

/// RDMA devices in `/sys/class/infiniband`-style directory `class_dir` (empty when absent).
pub fn rdma_devices(class_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(class_dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// What the RDMA row says, given the devices found.
pub fn rdma_reason(devices: &[String]) -> String {
    if devices.is_empty() {
        "no RDMA device present".to_owned()
    } else {
        format!(
            "RDMA device present ({}), but the RDMA path is not implemented in this build (no RDMA libraries)",
            devices.join(", ")
        )
    }
}

/// Measures every mechanism in `opts` between two pinned threads.
///
/// The calling thread is the initiator: it is pinned to the first CPU for each mechanism and
/// its affinity is restored afterwards. A mechanism that fails becomes a `failed` row; only
/// bad options or unreadable topology make the whole run fail.
pub fn run(opts: &C2cOptions, timer: Option<&mut dyn SyscallTimer>) -> Result<C2cReport> {
    if opts.round_trips == 0 {
        bail!("round trips must be at least 1");
    }
    if opts.mechanisms.is_empty() {
        bail!("no mechanism selected; valid names: {}", valid_names());
    }
    let topology = Topology::default();
    let allowed = topology::allowed_cpus()?;
    let (a, b) = match opts.cpus {
        Some((a, b)) => {
            if a == b {
                bail!("the two CPUs must differ (got {a} twice)");
            }
            let online = topology.online_cpus()?;
            for cpu in [a, b] {
                if !online.contains(&cpu) {
                    bail!(
                        "CPU {cpu} is not online (online: {})",
                        format_cpu_list(&online)
                    );
                }
                if !allowed.contains(&cpu) {
                    bail!(
                        "this process may not run on CPU {cpu} (allowed: {})",
                        format_cpu_list(&allowed)
                    );
                }
            }
            (a, b)
        }
        None => topology.pick_pair(&allowed)?,
    };
    let cpus = topology.pair(a, b)?;
    let tsc = TscInfo::calibrate();

    let mut timer = timer;
    let mut results = Vec::with_capacity(opts.mechanisms.len());
    let mut interrupted = false;
    for &mechanism in &opts.mechanisms {
        if opts
            .interrupt
            .as_ref()
            .is_some_and(|i| i.load(std::sync::atomic::Ordering::Relaxed))
        {
            interrupted = true;
            break;
        }
        let (message_bytes, ack_bytes) = wire_sizes(mechanism);
        let outcome = if mechanism == Mechanism::Rdma {
            Outcome::Unavailable {
                reason: rdma_reason(&rdma_devices(Path::new(INFINIBAND_CLASS))),
            }
        } else {
            let config = PingPongConfig {
                mechanism,
                initiator_cpu: a,
                responder_cpu: b,
                round_trips: opts.round_trips,
                time_limit: opts.time_limit,
                tsc: &tsc,
            };
            let mechanism_timer = match timer.as_deref_mut() {
                Some(t) if mechanism.uses_syscalls() => Some(t as &mut dyn SyscallTimer),
                _ => None,
            };
            match ping_pong(&config, mechanism_timer) {
                Ok(run) => Outcome::Measured(Measurement::from_ping_pong(&run, &tsc)),
                Err(e) => {
                    log::warn!("c2c: {mechanism} failed: {e:#}");
                    Outcome::Failed {
                        error: format!("{e:#}"),
                    }
                }
            }
        };
        let result = MechanismResult {
            mechanism,
            message_bytes,
            ack_bytes,
            outcome,
        };
        if let Some(report) = opts.on_result {
            report(&result, results.len() + 1, opts.mechanisms.len());
        }
        results.push(result);
    }
    Ok(C2cReport {
        cpus,
        tsc,
        round_trips_requested: opts.round_trips,
        time_limit_s: opts.time_limit.as_secs_f64(),
        syscall_timer: timer.is_some(),
        results,
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// The ping-pong tests each need both CPUs; running them in parallel would only measure
    /// each other.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    fn small(mechanisms: Vec<Mechanism>) -> C2cOptions {
        C2cOptions {
            cpus: None,
            round_trips: 2_000,
            mechanisms,
            time_limit: Duration::from_secs(5),
            interrupt: None,
            on_result: None,
        }
    }

    /// Counts calls and pretends each took 100 ns, to check the plumbing.
    struct FakeTimer {
        began: u32,
        ended: u32,
    }

    impl SyscallTimer for FakeTimer {
        fn begin(&mut self) -> Result<()> {
            self.began += 1;
            Ok(())
        }
        fn end(&mut self) -> Result<SyscallTime> {
            self.ended += 1;
            Ok(SyscallTime {
                calls: 8_000,
                total_ns: 800_000,
            })
        }
    }

    #[test]
    fn every_mechanism_completes_with_ordered_stats() {
        let _guard = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let opts = small(Mechanism::ALL.to_vec());
        let report = run(&opts, None).expect("run");
        assert_eq!(report.results.len(), Mechanism::ALL.len());
        for result in &report.results {
            if result.mechanism == Mechanism::Rdma {
                assert!(matches!(result.outcome, Outcome::Unavailable { .. }));
                continue;
            }
            let m = match &result.outcome {
                Outcome::Measured(m) => m,
                other => panic!("{} did not complete: {other:?}", result.mechanism),
            };
            assert_eq!(m.round_trips, 2_000, "{}", result.mechanism);
            assert!(!m.hit_time_limit);
            for s in [&m.ns, &m.cycles] {
                assert!(s.mean > 0.0, "{} mean {}", result.mechanism, s.mean);
                assert!(s.p50 > 0, "{}", result.mechanism);
                assert!(
                    s.p50 <= s.p99 && s.p99 <= s.max,
                    "{} {s:?}",
                    result.mechanism
                );
                assert!(s.mean <= s.max as f64 * 1.01);
            }
            assert!(m.round_trips_per_s > 0.0);
            assert!(m.syscalls.is_none());
        }
        let table = report.to_string();
        for m in Mechanism::ALL {
            assert!(table.contains(m.name()), "{m} missing from\n{table}");
        }
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["results"][0]["mechanism"], "spin-false-sharing");
        eprintln!("{table}");
    }

    #[test]
    fn timer_is_used_only_around_syscall_mechanisms() {
        let _guard = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut timer = FakeTimer { began: 0, ended: 0 };
        let opts = small(vec![
            Mechanism::SpinAligned,
            Mechanism::Pipe,
            Mechanism::EventFd,
        ]);
        let report = run(&opts, Some(&mut timer)).expect("run");
        assert_eq!((timer.began, timer.ended), (2, 2));
        let spin = report.results[0].outcome.measurement().unwrap();
        assert!(spin.syscalls.is_none());
        let pipe = report.results[1].outcome.measurement().unwrap();
        let share = pipe.syscalls.as_ref().expect("syscall share");
        assert_eq!(share.calls, 8_000);
        assert!((share.ns_per_round_trip - 400.0).abs() < 1e-9);
        assert!((share.calls_per_round_trip - 4.0).abs() < 1e-9);
        assert!(share.share_of_round_trip > 0.0);
        assert!(report.to_string().contains("syscall"));
    }

    #[test]
    fn time_limit_bounds_the_run_and_reports_the_count() {
        let _guard = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let opts = C2cOptions {
            cpus: None,
            round_trips: u64::MAX,
            mechanisms: vec![Mechanism::Pipe],
            time_limit: Duration::from_millis(200),
            interrupt: None,
            on_result: None,
        };
        let started = std::time::Instant::now();
        let report = run(&opts, None).expect("run");
        assert!(started.elapsed() < Duration::from_secs(5));
        let m = report.results[0].outcome.measurement().unwrap();
        assert!(m.hit_time_limit);
        assert!(m.round_trips > 0);
        assert!(report.to_string().contains("time limit"));
    }

    #[test]
    fn rdma_absent_is_reported_as_such() {
        let missing = Path::new("/nonexistent/sys/class/infiniband");
        assert!(rdma_devices(missing).is_empty());
        assert_eq!(rdma_reason(&[]), "no RDMA device present");
        let present = rdma_reason(&["mlx5_0".to_owned()]);
        assert!(present.contains("mlx5_0") && present.contains("not implemented"));
        // On this machine: whatever sysfs says, the row never carries figures.
        let report = run(&small(vec![Mechanism::Rdma]), None).expect("run");
        let row = &report.results[0];
        match &row.outcome {
            Outcome::Unavailable { reason } => {
                if rdma_devices(Path::new(INFINIBAND_CLASS)).is_empty() {
                    assert_eq!(reason, "no RDMA device present");
                }
            }
            other => panic!("RDMA row has {other:?}"),
        }
        assert!(
            report.to_string().contains("no RDMA device present")
                || !rdma_devices(Path::new(INFINIBAND_CLASS)).is_empty()
        );
    }

    #[test]
    fn mechanism_names_parse_and_errors_list_valid_names() {
        for m in Mechanism::ALL {
            assert_eq!(m.name().parse::<Mechanism>(), Ok(m));
            assert_eq!(m.to_string(), m.name());
        }
        assert_eq!("Event_FD".parse::<Mechanism>(), Ok(Mechanism::EventFd));
        let err = "tcp".parse::<Mechanism>().unwrap_err().to_string();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains("`tcp`"));
        for m in Mechanism::ALL {
            assert!(err.contains(m.name()), "{err}");
        }
        let err = "a\nb".parse::<Mechanism>().unwrap_err().to_string();
        assert!(!err.contains('\n'), "{err}");
        assert_eq!(
            Mechanism::parse_list("pipe, eventfd").unwrap(),
            vec![Mechanism::Pipe, Mechanism::EventFd]
        );
        assert_eq!(
            Mechanism::parse_list("all").unwrap(),
            Mechanism::ALL.to_vec()
        );
        assert!(Mechanism::parse_list("pipe,nope").is_err());
        assert!(Mechanism::parse_list("").is_err());
    }

    #[test]
    fn bad_options_are_errors_not_panics() {
        let mut opts = small(vec![Mechanism::Pipe]);
        opts.round_trips = 0;
        assert!(run(&opts, None).is_err());
        let mut opts = small(vec![]);
        opts.mechanisms.clear();
        assert!(run(&opts, None).is_err());
        let mut opts = small(vec![Mechanism::Pipe]);
        opts.cpus = Some((0, 0));
        assert!(run(&opts, None).is_err());
        opts.cpus = Some((0, 100_000));
        assert!(run(&opts, None).is_err());
    }
}
