//! The cycle counter used to time each round trip, and its frequency found by calibrating it
//! against `CLOCK_MONOTONIC`.

use std::{fs, thread, time::Duration};

use serde::Serialize;

/// Reads the cycle counter: `rdtsc` after an `lfence` on x86-64, so earlier loads finish first;
/// `CLOCK_MONOTONIC` nanoseconds elsewhere.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: lfence (SSE2) and rdtsc exist on every x86-64 CPU; neither touches memory.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the kernel to fill; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The cycle counter and what is known about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TscInfo {
    /// The counter is the x86 TSC (false: `CLOCK_MONOTONIC` stands in, one "cycle" per ns).
    pub is_tsc: bool,
    /// Counter ticks per second, measured against `CLOCK_MONOTONIC`.
    pub frequency_hz: f64,
    /// Smallest non-zero step between two back-to-back reads (some CPUs, e.g. AMD Zen, advance
    /// the TSC in steps of tens of cycles), so latencies are quantised to this.
    pub resolution_ticks: u64,
    /// `/proc/cpuinfo` lists `constant_tsc`: the TSC ticks at a fixed rate whatever the clock.
    pub constant_tsc: bool,
    /// `/proc/cpuinfo` lists `nonstop_tsc`: the TSC keeps ticking in deep C-states.
    pub nonstop_tsc: bool,
}

impl TscInfo {
    /// Calibrates the counter: several ~20 ms windows against `CLOCK_MONOTONIC`, median taken.
    pub fn calibrate() -> Self {
        let flags = cpu_flags();
        let has = |f: &str| flags.iter().any(|x| x == f);
        Self {
            is_tsc: cfg!(target_arch = "x86_64"),
            frequency_hz: calibrate_hz(5, Duration::from_millis(20)),
            resolution_ticks: resolution(),
            constant_tsc: has("constant_tsc"),
            nonstop_tsc: has("nonstop_tsc"),
        }
    }

    /// Converts counter ticks to nanoseconds.
    pub fn to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e9 / self.frequency_hz
    }

    /// Converts nanoseconds to counter ticks (saturating).
    pub fn to_ticks(&self, ns: f64) -> u64 {
        (ns * self.frequency_hz / 1e9) as u64
    }
}

fn calibrate_hz(windows: usize, window: Duration) -> f64 {
    if !cfg!(target_arch = "x86_64") {
        return 1e9;
    }
    let mut rates: Vec<f64> = (0..windows)
        .filter_map(|_| {
            let (m0, t0) = paired_read();
            thread::sleep(window);
            let (m1, t1) = paired_read();
            let dm = m1.checked_sub(m0)?;
            let dt = t1.checked_sub(t0)?;
            (dm > 0).then(|| dt as f64 * 1e9 / dm as f64)
        })
        .collect();
    if rates.is_empty() {
        return 1e9;
    }
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// The smallest non-zero difference between consecutive counter reads.
fn resolution() -> u64 {
    let mut best = u64::MAX;
    let mut last = now();
    for _ in 0..10_000 {
        let t = now();
        let step = t.wrapping_sub(last);
        if step > 0 {
            best = best.min(step);
        }
        last = t;
    }
    if best == u64::MAX { 1 } else { best }
}

/// A (monotonic ns, counter) pair read as close together as possible: the tightest of a few tries.
fn paired_read() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..16 {
        let a = now();
        let m = monotonic_ns();
        let b = now();
        let width = b.wrapping_sub(a);
        if width < best.0 {
            best = (width, m, a + width / 2);
        }
    }
    (best.1, best.2)
}

/// The `flags` line of the first CPU in `/proc/cpuinfo` (empty when unreadable).
fn cpu_flags() -> Vec<String> {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("flags"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, flags)| flags.split_whitespace().map(str::to_owned).collect())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_is_plausible_and_agrees_with_sleep() {
        let tsc = TscInfo::calibrate();
        assert!(
            tsc.frequency_hz > 1e8 && tsc.frequency_hz < 1e11,
            "{}",
            tsc.frequency_hz
        );
        let t0 = now();
        thread::sleep(Duration::from_millis(30));
        let ns = tsc.to_ns(now() - t0);
        assert!(
            (29e6..500e6).contains(&ns),
            "30 ms sleep measured as {ns} ns"
        );
        assert!(tsc.resolution_ticks >= 1 && tsc.to_ns(tsc.resolution_ticks) < 1_000.0);
    }
}
