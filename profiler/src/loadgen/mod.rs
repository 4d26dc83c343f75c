//! The load generator: drives a server with short-connection echo, keep-alive echo or HTTP
//! keep-alive traffic and measures per-request latency in HDR histograms.
//!
//! [`run`] is synchronous. Inside, one current-thread tokio runtime runs per client CPU, each on
//! its own OS thread (pinned when [`LoadSpec::client_cpus`] is given) with its share of the
//! clients; each runtime keeps its own histograms and counters, merged once at the end, so the
//! generator adds no cross-thread traffic per request beyond one shared ticket counter.
//!
//! ```no_run
//! use profiler::loadgen::{self, LoadSpec, Stop, Workload};
//!
//! let mut spec = LoadSpec::new("127.0.0.1:8080".parse()?, Workload::ShortEcho);
//! spec.concurrency = 10;
//! spec.stop = Stop::Requests(10_000);
//! let report = loadgen::run(&spec)?;
//! println!("{:.0} req/s, p99 {} ns, errors: {}", report.qps(),
//!     report.latency.value_at_quantile(0.99), report.errors);
//! # Ok::<(), anyhow::Error>(())
//! ```

mod blocking;
mod engine;
mod errors;
mod http;
mod measure;
mod workload;

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64},
    },
    time::Duration,
};

use hdrhistogram::Histogram;

pub use self::{
    errors::{ErrorCounts, RequestErrorKind, SpecError},
    workload::{HTTP_REQUEST, ParseWorkloadError, Workload},
};

/// Default payload of the echo workloads, in bytes.
pub const DEFAULT_PAYLOAD: usize = 64;
/// Default per-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// When a load run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After exactly this many requests over all clients (completed ok plus failed).
    Requests(u64),
    /// After this much time; requests still in flight then are counted neither ok nor failed.
    Duration(Duration),
}

/// Everything that defines one load run.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Server address.
    pub addr: SocketAddr,
    /// Kind of traffic.
    pub workload: Workload,
    /// Concurrent clients, each with at most one request in flight (1 = serial).
    pub concurrency: usize,
    /// When to stop.
    pub stop: Stop,
    /// Echo payload in bytes (ignored by HTTP).
    pub payload: usize,
    /// Open loop at this many requests per second over all clients (each client sends at fixed
    /// intervals of `concurrency / rate`); `None` = closed loop, as fast as answers come.
    pub rate: Option<f64>,
    /// CPUs for the client threads, one runtime per entry, clients split round-robin across
    /// them; empty = one unpinned runtime.
    pub client_cpus: Vec<usize>,
    /// Per-request limit, connect included; a request over it counts as a timeout.
    pub timeout: Duration,
    /// Incremented once per finished request (ok or failed), e.g. for a progress bar.
    pub progress: Option<Arc<AtomicU64>>,
    /// Set (by a Ctrl-C handler) to end the run early: every client stops within
    /// [`CANCEL_CHECK`], and the report says it was [`LoadReport::interrupted`].
    pub cancel: Option<Arc<AtomicBool>>,
}

/// How often a running load checks [`LoadSpec::cancel`].
pub const CANCEL_CHECK: Duration = Duration::from_millis(50);

impl LoadSpec {
    /// A serial run of 1000 requests with the default payload and timeout, unpinned.
    pub fn new(addr: SocketAddr, workload: Workload) -> Self {
        LoadSpec {
            addr,
            workload,
            concurrency: 1,
            stop: Stop::Requests(1000),
            payload: DEFAULT_PAYLOAD,
            rate: None,
            client_cpus: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            progress: None,
            cancel: None,
        }
    }

    /// Checks the values [`run`] cannot work with.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.concurrency == 0 {
            return Err(SpecError::ZeroConcurrency);
        }
        if self.payload == 0 && self.workload.is_echo() {
            return Err(SpecError::ZeroPayload);
        }
        if let Some(rate) = self.rate
            && !(rate.is_finite() && rate > 0.0)
        {
            return Err(SpecError::BadRate(rate));
        }
        if self.timeout.is_zero() {
            return Err(SpecError::ZeroTimeout);
        }
        if let Some(&cpu) = self
            .client_cpus
            .iter()
            .find(|&&c| c >= libc::CPU_SETSIZE as usize)
        {
            return Err(SpecError::CpuOutOfRange(cpu));
        }
        Ok(())
    }
}

/// What a load run measured.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Requests that completed correctly.
    pub requests: u64,
    /// From the first client's start to the last client's end.
    pub elapsed: Duration,
    /// Latency of correct requests in ns (3 significant digits), from send (for short
    /// connections: from just before connect()) to the last byte of the answer.
    pub latency: Histogram<u64>,
    /// Open loop only: latency from each request's intended send time (wrk2's coordinated
    /// omission correction), in ns.
    pub corrected_latency: Option<Histogram<u64>>,
    /// Open loop only: how late the generator sent each request (actual minus intended send
    /// time, in ns; 1 ns for one sent on time). Large values say the generator, not the server,
    /// was late: the corrected latency then charges the server for the generator's delay.
    pub send_lateness: Option<Histogram<u64>>,
    /// Short connections only: connect() time of correct requests, in ns.
    pub connect_latency: Option<Histogram<u64>>,
    /// Failed requests by kind.
    pub errors: ErrorCounts,
    /// Cut short by [`LoadSpec::cancel`]: not the run that was asked for.
    pub interrupted: bool,
}

impl LoadReport {
    /// Adds `other`'s requests, time, histograms and errors to these (windows measured one
    /// after another: their QPS together is the requests over the summed time).
    pub fn add(&mut self, other: &LoadReport) {
        self.requests += other.requests;
        self.elapsed += other.elapsed;
        // Every histogram of the load generator has the same bounds: adding cannot fail.
        let _ = self.latency.add(&other.latency);
        for (a, b) in [
            (&mut self.corrected_latency, &other.corrected_latency),
            (&mut self.send_lateness, &other.send_lateness),
            (&mut self.connect_latency, &other.connect_latency),
        ] {
            match (a.as_mut(), b) {
                (Some(a), Some(b)) => {
                    let _ = a.add(b);
                }
                (None, Some(b)) => *a = Some(b.clone()),
                _ => {}
            }
        }
        self.errors.merge(&other.errors);
        self.interrupted |= other.interrupted;
    }

    /// Correct requests per second of elapsed time.
    pub fn qps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }
}

/// Runs the load described by `spec` against its server and returns the measurements.
///
/// Blocks the calling thread until the run ends. Failed requests are counted in
/// [`LoadReport::errors`], not returned; an `Err` means the run could not take place (invalid
/// spec, a client CPU that cannot be pinned to, no threads).
pub fn run(spec: &LoadSpec) -> anyhow::Result<LoadReport> {
    spec.validate()?;
    engine::run(spec)
}

/// [`run`], or for one closed-loop echo client and a request count the serial client without a
/// runtime (blocking sockets, on the calling thread): the same requests, measured the same
/// way, with the least of the client's own jitter. `run`'s warm engine drives its slices so.
pub fn run_lean(spec: &LoadSpec) -> anyhow::Result<LoadReport> {
    spec.validate()?;
    if blocking::applies(spec) {
        Ok(blocking::run(spec))
    } else {
        engine::run(spec)
    }
}

#[cfg(test)]
mod tests;
