//! `serve`'s flight recorder (after Rezolus's hindsight): the last N minutes of counters, one
//! snapshot of what happened per interval, in a ring of fixed length. `GET /recording`, SIGUSR2
//! or a trigger (`--record-when close:p99>1ms`) writes them as a JSON export whose measurements
//! are the intervals (`run` 1, 2, ... oldest first), which `profiler diff` reads as runs: two
//! recordings are compared interval against interval, with intervals of confidence. With
//! `--slow`, each interval also keeps its slowest calls with their stacks (`--slow-top` groups).

use std::{
    collections::VecDeque,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Result, bail};

use crate::{
    export::{ExportData, Exporter as _, Measurement, Metadata},
    slow::{Collector, SlowReport},
    stats::Snapshot,
};

/// `--record-when SYSCALL:pQ>DURATION`: write a recording when an interval's quantile of a
/// syscall's latency crosses a threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Trigger {
    pub syscall: String,
    /// 0.5 for p50, 0.99 for p99, 0.999 for p99.9.
    pub quantile: f64,
    pub threshold: Duration,
}

impl std::str::FromStr for Trigger {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("{s:?}: {why}; give SYSCALL:pQ>DURATION, e.g. close:p99>1ms or read:p50>200us")
        };
        let (syscall, rest) = s.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let (quantile, threshold) = rest.split_once('>').ok_or_else(|| bad("no '>'"))?;
        let digits = quantile
            .strip_prefix('p')
            .ok_or_else(|| bad("the quantile is not pNN"))?;
        let percent: f64 = digits.parse().map_err(|_| bad("the quantile is not pNN"))?;
        if !(percent > 0.0 && percent < 100.0) {
            return Err(bad("the quantile must lie between p0 and p100"));
        }
        let threshold = crate::parse::parse_duration(threshold).map_err(|e| bad(&e))?;
        if syscall.is_empty() {
            return Err(bad("no syscall"));
        }
        Ok(Self {
            syscall: syscall.to_owned(),
            quantile: percent / 100.0,
            threshold,
        })
    }
}

/// One interval of the ring.
struct Interval {
    /// What happened in it.
    snapshot: Snapshot,
    /// `--slow`: its slowest calls, with their stacks.
    slow: Option<SlowReport>,
    /// Its end, seconds since the Unix epoch.
    end_unix_s: f64,
}

/// The ring and what writes it out.
pub struct Recorder {
    every: Duration,
    capacity: usize,
    ring: VecDeque<Interval>,
    last: Option<(Instant, Snapshot)>,
    triggers: Vec<Trigger>,
    /// When a trigger last wrote a recording: at most one per window, so that a syscall that
    /// stays slow does not fill the disk.
    triggered: Option<Instant>,
    dir: PathBuf,
    /// `--slow`: the collector of the slow calls, taken from at each interval, and how many
    /// groups each interval keeps.
    slow: Option<(Collector, usize)>,
}

impl Recorder {
    /// Keeps `window` of intervals of `every`, writing triggered and SIGUSR2 recordings into
    /// `dir`.
    #[must_use]
    pub fn new(window: Duration, every: Duration, triggers: Vec<Trigger>, dir: PathBuf) -> Self {
        let capacity = usize::try_from(window.as_millis() / every.as_millis().max(1))
            .unwrap_or(1)
            .max(1);
        Self {
            every,
            capacity,
            ring: VecDeque::with_capacity(capacity),
            last: None,
            triggers,
            triggered: None,
            dir,
            slow: None,
        }
    }

    /// Keeps each interval's slow calls too, at most `keep` groups of them (the slowest).
    #[must_use]
    pub fn with_slow(mut self, collector: Collector, keep: usize) -> Self {
        self.slow = Some((collector, keep.max(1)));
        self
    }

    /// How many intervals it keeps.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The memory the ring takes when full, estimated from one interval's snapshot (its
    /// histograms dominate): `None` before the first interval.
    #[must_use]
    pub fn full_bytes(&self) -> Option<usize> {
        // The slow calls' groups are bounded by `keep`: the largest interval's stand for all.
        let slow = self
            .ring
            .iter()
            .filter_map(|i| i.slow.as_ref().map(slow_bytes))
            .max()
            .unwrap_or(0);
        let keep = self.slow.as_ref().map_or(0, |(_, keep)| *keep);
        self.ring.back().map(|i| {
            (snapshot_bytes(&i.snapshot) + slow.max(keep * SLOW_GROUP_BYTES)) * self.capacity
        })
    }

    /// Whether an interval is due.
    #[must_use]
    pub fn due(&self) -> bool {
        self.last
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= self.every)
    }

    /// Takes `now` (the cumulative counters) as the end of an interval; the first call only
    /// starts the first one. Returns the trigger that fired, if one did.
    pub fn push(&mut self, now: Snapshot) -> Option<String> {
        let interval = self.last.as_ref().map(|(_, last)| now.since(last));
        self.last = Some((Instant::now(), now));
        // Taken at the first call too: what came before the first interval is not in it.
        let slow = self
            .slow
            .as_mut()
            .map(|(collector, keep)| collector.take(*keep));
        let interval = interval?;
        let fired = self.check_triggers(&interval);
        if self.ring.len() == self.capacity {
            self.ring.pop_front();
        }
        self.ring.push_back(Interval {
            snapshot: interval,
            slow,
            end_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        });
        fired
    }

    fn check_triggers(&mut self, interval: &Snapshot) -> Option<String> {
        let window = self.every * u32::try_from(self.capacity).unwrap_or(u32::MAX);
        if self.triggered.is_some_and(|t| t.elapsed() < window) {
            return None;
        }
        for t in &self.triggers {
            let Some(s) = interval.syscall(&t.syscall) else {
                continue;
            };
            if s.calls == 0 {
                continue;
            }
            let value = Duration::from_nanos(s.quantile_ns(t.quantile));
            if value > t.threshold {
                self.triggered = Some(Instant::now());
                return Some(format!(
                    "{} p{} was {:?} (> {:?})",
                    t.syscall,
                    t.quantile * 100.0,
                    value,
                    t.threshold
                ));
            }
        }
        None
    }

    /// The recording: `metadata` (serve's), with one measurement per interval kept, oldest
    /// first, numbered as runs.
    #[must_use]
    pub fn recording(&self, mut metadata: Metadata) -> ExportData {
        metadata.settings.insert(
            "recording".into(),
            format!(
                "{} intervals of {:?} (at most {}), the last ending at {:.0} (Unix seconds)",
                self.ring.len(),
                self.every,
                self.capacity,
                self.ring.back().map_or(0.0, |i| i.end_unix_s)
            ),
        );
        metadata.duration_s = self.every.as_secs_f64() * self.ring.len() as f64;
        let measurements = self
            .ring
            .iter()
            .enumerate()
            .map(|(i, interval)| Measurement {
                variant: None,
                concurrency: None,
                run: Some(u32::try_from(i + 1).unwrap_or(u32::MAX)),
                server_cpus: None,
                syscalls: interval.snapshot.clone(),
                load: None,
                failure: None,
                slow: interval.slow.clone(),
                slices: Vec::new(),
            })
            .collect();
        ExportData::new(metadata, measurements)
    }

    /// The recording as JSON bytes.
    pub fn recording_json(&self, metadata: Metadata) -> Result<Vec<u8>> {
        if self.ring.is_empty() {
            bail!(
                "no interval recorded yet (the first ends {:?} after serve starts)",
                self.every
            );
        }
        crate::export::json::Json.render(&self.recording(metadata))
    }

    /// Writes the recording into the recordings' directory; its path.
    pub fn write(&self, metadata: Metadata, why: &str) -> Result<PathBuf> {
        let bytes = self.recording_json(metadata)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let path = self
            .dir
            .join(format!("syscall-profiler-recording-{stamp}.json"));
        crate::export::atomic::write_atomic(&path, &bytes)?;
        crate::errln!(
            "flight recorder: {} intervals ({why}) written to {}",
            self.ring.len(),
            path.display()
        );
        Ok(path)
    }

    /// Whether the recordings' directory can be written (checked at start).
    pub fn check_dir(dir: &Path) -> Result<()> {
        let probe = dir.join(format!(".syscall-profiler-probe-{}", std::process::id()));
        std::fs::write(&probe, b"").map_err(|e| {
            anyhow::anyhow!(
                "--record-dir {}: cannot write there ({e}); give a writable directory with --record-dir",
                dir.display()
            )
        })?;
        let _ = std::fs::remove_file(probe);
        Ok(())
    }
}

/// A slow-call group's size in memory with typical stacks (about 20 frames each).
const SLOW_GROUP_BYTES: usize = 4096;

/// An estimate of a slow report's size in memory: its groups' frames and names.
fn slow_bytes(r: &SlowReport) -> usize {
    r.groups
        .iter()
        .map(|g| {
            let frames: usize = g
                .kernel_stack
                .iter()
                .chain(&g.user_stack)
                .map(|f| 48 + f.function.len() + f.module.as_ref().map_or(0, String::len))
                .sum();
            std::mem::size_of_val(g) + frames
        })
        .sum()
}

/// An estimate of a snapshot's size in memory: its histograms' buckets and rows.
fn snapshot_bytes(s: &Snapshot) -> usize {
    let per_syscall: usize = s
        .syscalls
        .iter()
        .map(|x| std::mem::size_of_val(x) + x.latency.buckets().count() * 16)
        .sum();
    per_syscall + s.processes.len() * (64 + s.syscalls.len() * 24) + std::mem::size_of::<Snapshot>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_parse_or_say_what_is_wrong() {
        let t: Trigger = "close:p99>1ms".parse().unwrap();
        assert_eq!(t.syscall, "close");
        assert!((t.quantile - 0.99).abs() < 1e-9);
        assert_eq!(t.threshold, Duration::from_millis(1));
        let t: Trigger = "read:p99.9>250us".parse().unwrap();
        assert!((t.quantile - 0.999).abs() < 1e-9);
        for bad in [
            "close",
            "close:99>1ms",
            "close:p99",
            "close:p100>1ms",
            ":p99>1ms",
            "close:p99>fast",
        ] {
            let err = bad.parse::<Trigger>().unwrap_err();
            assert!(err.contains("SYSCALL:pQ>DURATION"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_ring_keeps_the_last_intervals() {
        let mut r = Recorder::new(
            Duration::from_secs(3),
            Duration::from_secs(1),
            Vec::new(),
            PathBuf::from("."),
        );
        assert_eq!(r.capacity(), 3);
        assert!(r.push(Snapshot::default()).is_none());
        for _ in 0..5 {
            r.push(Snapshot::default());
        }
        assert_eq!(r.ring.len(), 3);
        let data = r.recording(Metadata::collect("serve"));
        let runs: Vec<Option<u32>> = data.measurements.iter().map(|m| m.run).collect();
        assert_eq!(runs, [Some(1), Some(2), Some(3)]);
    }
}
