//! Deterministic synthetic [`ExportData`] shaped like real `run` and `attach` results, for the
//! export tests and benchmarks (no kernel, no servers needed).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use profiler_common::ErrnoClass;

use super::{ExportData, LoadSummary, Measurement, Metadata};
use crate::stats::{LatencyHistogram, ProcessSummary, ProcessSyscall, Snapshot, SyscallSummary};

/// The size of a synthetic `run`.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Server variants.
    pub variants: Vec<String>,
    /// Concurrency levels per variant.
    pub concurrencies: Vec<usize>,
    /// Measured runs per (variant, concurrency).
    pub runs: u32,
    /// Syscall names.
    pub syscalls: Vec<String>,
    /// Distinct latency values recorded per syscall and run.
    pub values_per_syscall: usize,
    /// Tracked processes per measurement.
    pub processes: usize,
}

impl Shape {
    /// A small `run`: two variants, one concurrency, three runs, four syscalls.
    #[must_use]
    pub fn small() -> Self {
        Self {
            variants: vec!["lt".into(), "et".into()],
            concurrencies: vec![10],
            runs: 3,
            syscalls: ["accept4", "close", "epoll_wait", "read"]
                .map(String::from)
                .to_vec(),
            values_per_syscall: 2000,
            processes: 1,
        }
    }

    /// A comprehensive `run`: four variants, three concurrencies, five runs, eight syscalls,
    /// 64 processes.
    #[must_use]
    pub fn comprehensive() -> Self {
        Self {
            variants: crate::run::model::Variant::ALL
                .map(|v| v.name().to_owned())
                .to_vec(),
            concurrencies: vec![1, 10, 100],
            runs: 5,
            syscalls: crate::bpf::DEFAULT_SYSCALLS
                .iter()
                .chain(&["write", "writev"])
                .map(|s| (*s).to_owned())
                .collect(),
            values_per_syscall: 20_000,
            processes: 64,
        }
    }
}

/// xorshift64*: reproducible numbers without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A latency-like value: mostly ~1 µs, a tail up to tens of ms.
    fn latency(&mut self, scale: u64) -> u64 {
        let r = self.next();
        let base = 300 + (r % 2000) * scale / 4;
        if r.is_multiple_of(50) {
            base * (1 + (r >> 32) % 20_000)
        } else {
            base
        }
    }
}

fn syscall(rng: &mut Rng, name: &str, scale: u64, values: usize) -> SyscallSummary {
    let mut s = SyscallSummary {
        name: name.to_owned(),
        min_ns: u64::MAX,
        ..Default::default()
    };
    let is_epoll = name.starts_with("epoll");
    let mut events = LatencyHistogram::default();
    for _ in 0..values {
        let v = rng.latency(scale);
        let n = 1 + rng.next() % 3;
        s.latency.record_n(v, n);
        s.calls += n;
        s.total_ns += v * n;
        s.min_ns = s.min_ns.min(v);
        s.max_ns = s.max_ns.max(v);
        if is_epoll {
            events.record_n(rng.next() % 9, n);
        }
    }
    if s.calls == 0 {
        s.min_ns = 0;
    }
    if name == "read" || name == "accept4" {
        s.errors.0[ErrnoClass::Again as usize] = s.calls / 7;
        s.errors.0[ErrnoClass::ConnReset as usize] = s.calls / 1000;
    }
    s.dropped = u64::from(name == "epoll_wait");
    if is_epoll {
        s.events = Some(events);
    }
    s
}

fn snapshot(rng: &mut Rng, shape: &Shape, scale: u64) -> Snapshot {
    let syscalls: Vec<SyscallSummary> = shape
        .syscalls
        .iter()
        .map(|n| syscall(rng, n, scale, shape.values_per_syscall))
        .collect();
    let processes = (0..shape.processes)
        .map(|i| ProcessSummary {
            cgroup: None,
            pid: if i + 1 == shape.processes && shape.processes > 1 {
                0
            } else {
                1000 + i as u32
            },
            syscalls: syscalls
                .iter()
                .map(|s| ProcessSyscall {
                    calls: s.calls / shape.processes as u64,
                    errors: s.errors.total() / shape.processes as u64,
                    total_ns: s.total_ns / shape.processes as u64,
                })
                .collect(),
        })
        .collect();
    let mut snap = Snapshot {
        syscalls,
        processes,
        ..Default::default()
    };
    snap.dropped.0[0] = snap.syscalls.iter().map(|s| s.dropped).sum();
    snap
}

/// Adds `run` into `total` (the aggregate over runs).
fn accumulate(total: &mut Snapshot, run: &Snapshot) {
    if total.syscalls.is_empty() {
        *total = run.clone();
        return;
    }
    for (t, r) in total.syscalls.iter_mut().zip(&run.syscalls) {
        for b in r.latency.buckets() {
            t.latency.record_n(b.low, b.count);
        }
        if let (Some(te), Some(re)) = (&mut t.events, &r.events) {
            for b in re.buckets() {
                te.record_n(b.low, b.count);
            }
        }
        t.calls += r.calls;
        t.total_ns += r.total_ns;
        t.min_ns = t.min_ns.min(r.min_ns);
        t.max_ns = t.max_ns.max(r.max_ns);
        t.dropped += r.dropped;
        for (a, b) in t.errors.0.iter_mut().zip(r.errors.0) {
            *a += b;
        }
    }
    for (t, r) in total.processes.iter_mut().zip(&run.processes) {
        for (a, b) in t.syscalls.iter_mut().zip(&r.syscalls) {
            a.calls += b.calls;
            a.errors += b.errors;
            a.total_ns += b.total_ns;
        }
    }
    for (a, b) in total.dropped.0.iter_mut().zip(run.dropped.0) {
        *a += b;
    }
}

fn load(rng: &mut Rng, calls: u64, scale: u64) -> LoadSummary {
    let mut latency = Histogram::<u64>::new(3).expect("3 significant digits is valid");
    for _ in 0..2000 {
        latency
            .record(20_000 + rng.latency(scale) * 10)
            .expect("auto-resizing histogram accepts any u64");
    }
    let requests = calls.max(1);
    let elapsed_s = 2.0 + (rng.next() % 100) as f64 / 100.0;
    LoadSummary {
        requests,
        elapsed_s,
        qps: requests as f64 / elapsed_s,
        latency,
        errors: BTreeMap::from([("reset".to_owned(), rng.next() % 3)]),
        server_cpu_ns: Some((1_000_000_000, 2_000_000_000)),
        server_on_cpu_ns: Some(3_000_000_000),
    }
}

/// A `run`-like result: per (variant, concurrency) every run, then their aggregate.
#[must_use]
pub fn run_data(shape: &Shape) -> ExportData {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut metadata = Metadata {
        command: "run".into(),
        kernel: "6.18.0-test".into(),
        cpu_model: "Synthetic CPU".into(),
        cpus_online: 2,
        profiler_version: env!("CARGO_PKG_VERSION").into(),
        started_unix_s: 1_700_000_000,
        duration_s: 60.0,
        settings: BTreeMap::new(),
    };
    metadata
        .settings
        .insert("workload".into(), "short-echo".into());
    metadata.settings.insert("payload".into(), "64".into());
    let mut measurements = Vec::new();
    for (vi, variant) in shape.variants.iter().enumerate() {
        for &concurrency in &shape.concurrencies {
            let mut total = Snapshot::default();
            let mut requests = 0;
            let mut loads = Vec::new();
            for run in 1..=shape.runs {
                let snap = snapshot(&mut rng, shape, 1 + vi as u64);
                accumulate(&mut total, &snap);
                let calls = snap
                    .syscalls
                    .iter()
                    .find(|s| s.name == "accept4")
                    .map_or(10_000, |s| s.calls);
                let l = load(&mut rng, calls, 1 + vi as u64);
                requests += l.requests;
                measurements.push(Measurement {
                    variant: Some(variant.clone()),
                    concurrency: Some(concurrency),
                    run: Some(run),
                    syscalls: snap,
                    load: Some(l.clone()),
                    failure: None,
                    slow: None,
                });
                loads.push(l);
            }
            let mut latency = Histogram::<u64>::new(3).expect("3 significant digits is valid");
            for l in &loads {
                latency.add(&l.latency).expect("same precision");
            }
            let elapsed_s: f64 = loads.iter().map(|l| l.elapsed_s).sum();
            measurements.push(Measurement {
                variant: Some(variant.clone()),
                concurrency: Some(concurrency),
                run: None,
                syscalls: total,
                load: Some(LoadSummary {
                    requests,
                    elapsed_s,
                    qps: requests as f64 / elapsed_s,
                    latency,
                    errors: BTreeMap::new(),
                    server_cpu_ns: None,
                    server_on_cpu_ns: None,
                }),
                failure: None,
                slow: None,
            });
        }
    }
    ExportData::new(metadata, measurements)
}

/// An `attach`-like result: one measurement, no variant, no load.
#[must_use]
pub fn attach_data() -> ExportData {
    let mut rng = Rng(42);
    let shape = Shape {
        processes: 3,
        ..Shape::small()
    };
    let mut metadata = Metadata::collect("attach");
    metadata.duration_s = 5.0;
    metadata.settings.insert("pids".into(), "1234".into());
    ExportData::of_trace(metadata, snapshot(&mut rng, &shape, 1), false)
}
