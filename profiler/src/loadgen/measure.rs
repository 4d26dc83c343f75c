//! What one runtime measures (histograms and counters, owned by that runtime alone) and how the
//! runtimes' measurements are merged.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::{errors::ErrorCounts, workload::Completed};

/// Significant digits of every latency histogram.
pub(crate) const SIGNIFICANT_DIGITS: u8 = 3;
/// Highest latency a histogram holds exactly, in ns (one hour); longer ones are clamped to it.
pub(crate) const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// An empty latency histogram in ns, 3 significant digits, 1 ns to one hour.
pub(crate) fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid")
}

/// Measurements of the clients of one runtime.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeStats {
    pub requests: u64,
    pub latency: Histogram<u64>,
    pub corrected: Option<Histogram<u64>>,
    /// Open loop: how late each request was sent (actual minus intended send time).
    pub late: Option<Histogram<u64>>,
    pub connect: Option<Histogram<u64>>,
    pub errors: ErrorCounts,
}

impl RuntimeStats {
    /// Empty stats; `open_loop` adds the corrected histogram, `short` the connect histogram.
    pub fn new(open_loop: bool, short: bool) -> Self {
        RuntimeStats {
            requests: 0,
            latency: latency_histogram(),
            corrected: open_loop.then(latency_histogram),
            late: open_loop.then(latency_histogram),
            connect: short.then(latency_histogram),
            errors: ErrorCounts::default(),
        }
    }

    /// Records a request sent at `sent` (intended for `intended` in open loop) that completed.
    pub fn record(&mut self, sent: Instant, intended: Option<Instant>, done: &Completed) {
        self.requests += 1;
        self.latency.saturating_record(nanos(done.end - sent));
        if let (Some(h), Some(intended)) = (&mut self.corrected, intended) {
            h.saturating_record(nanos(done.end.saturating_duration_since(intended)));
        }
        if let (Some(h), Some(intended)) = (&mut self.late, intended) {
            h.saturating_record(nanos(sent.saturating_duration_since(intended)));
        }
        if let (Some(h), Some(c)) = (&mut self.connect, done.connect) {
            h.saturating_record(nanos(c));
        }
    }

    /// Adds `other`'s measurements to these.
    pub fn merge(&mut self, other: &RuntimeStats) {
        self.requests += other.requests;
        self.errors.merge(&other.errors);
        // Same bounds everywhere, so adding cannot fail.
        let add = |into: &mut Histogram<u64>, from: &Histogram<u64>| {
            into.add(from).expect("histograms share their bounds");
        };
        add(&mut self.latency, &other.latency);
        if let (Some(a), Some(b)) = (&mut self.corrected, &other.corrected) {
            add(a, b);
        }
        if let (Some(a), Some(b)) = (&mut self.late, &other.late) {
            add(a, b);
        }
        if let (Some(a), Some(b)) = (&mut self.connect, &other.connect) {
            add(a, b);
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_and_merge() {
        let t0 = Instant::now();
        let done = Completed {
            end: t0 + Duration::from_micros(50),
            connect: Some(Duration::from_micros(10)),
        };
        let mut a = RuntimeStats::new(true, true);
        a.record(
            t0,
            Some(t0.checked_sub(Duration::from_micros(100)).unwrap()),
            &done,
        );
        let mut b = RuntimeStats::new(true, true);
        b.record(t0, Some(t0), &done);
        b.errors.timeout = 2;
        a.merge(&b);
        assert_eq!(a.requests, 2);
        assert_eq!(a.errors.timeout, 2);
        assert_eq!(a.latency.len(), 2);
        let us = |v: u64| v / 1000;
        assert_eq!(us(a.latency.value_at_quantile(0.5)), 50);
        assert_eq!(us(a.corrected.as_ref().unwrap().max()), 150);
        assert_eq!(us(a.connect.as_ref().unwrap().min()), 10);
    }

    #[test]
    fn huge_latency_is_clamped_not_lost() {
        let mut h = latency_histogram();
        h.saturating_record(u64::MAX);
        assert_eq!(h.len(), 1);
        assert!(h.max() >= MAX_LATENCY_NS);
    }
}
