//! What the kernel measured, merged over CPUs: the one data model every report and export reads.

use hdrhistogram::Histogram;
use profiler_common::{
    DROP_REASONS, DropReason, ERRNO_CLASSES, ErrnoClass, HIST_BUCKETS, SyscallSlot, bucket_index,
    bucket_lower_bound, bucket_upper_bound,
};
use serde::Serialize;

/// A kernel log-linear histogram (32 sub-buckets per power of two, exact below 64), merged over
/// CPUs. Values are ns for latencies, or counts for events and bytes per call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            counts: vec![0; HIST_BUCKETS],
        }
    }
}

/// One non-empty bucket: every value in `low..=high` was counted `count` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Smallest value of the bucket (inclusive).
    pub low: u64,
    /// Largest value of the bucket (inclusive).
    pub high: u64,
    /// Values that fell into it.
    pub count: u64,
}

impl LatencyHistogram {
    /// Adds one CPU's buckets.
    pub fn add_counts(&mut self, counts: &[u64]) {
        for (mine, theirs) in self.counts.iter_mut().zip(counts) {
            *mine += theirs;
        }
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &Self) {
        self.add_counts(&other.counts);
    }

    /// Records `count` values equal to `value` (for tests and synthetic data).
    pub fn record_n(&mut self, value: u64, count: u64) {
        self.counts[bucket_index(value) as usize] += count;
    }

    /// Total values recorded.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The non-empty buckets, in increasing order.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, &count)| {
                let i = i as u32;
                Bucket {
                    low: bucket_lower_bound(i),
                    high: bucket_upper_bound(i),
                    count,
                }
            })
    }

    /// The value at quantile `q` (0..=1): the midpoint of the bucket holding that rank, so it is
    /// within half a bucket (1/64 of the value) of the exact answer. 0 when empty.
    #[must_use]
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        self.bucket_at_quantile(q).map_or(0, midpoint)
    }

    /// The bucket that holds the value at quantile `q` (0..=1); `None` when empty.
    #[must_use]
    pub fn bucket_at_quantile(&self, q: f64) -> Option<Bucket> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        self.buckets().find(|b| {
            seen += b.count;
            seen >= rank
        })
    }

    /// The same distribution as an `hdrhistogram` (3 significant digits): each bucket's count is
    /// recorded at the bucket's midpoint.
    ///
    /// # Panics
    ///
    /// Never: 3 significant digits is a valid precision, and the histogram resizes itself to
    /// any u64.
    #[must_use]
    pub fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
        for b in self.buckets() {
            h.record_n(midpoint(b), b.count)
                .expect("auto-resizing histogram accepts any u64");
        }
        h
    }

    /// Bucket-wise difference `self - earlier` (counters only grow, so this is what happened
    /// between two snapshots).
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            counts: self
                .counts
                .iter()
                .zip(&earlier.counts)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }

    /// Mean of the recorded values, from bucket midpoints.
    #[must_use]
    pub fn mean(&self) -> f64 {
        let total = self.total();
        if total == 0 {
            return 0.0;
        }
        self.buckets()
            .map(|b| midpoint(b) as f64 * b.count as f64)
            .sum::<f64>()
            / total as f64
    }

    /// Smallest and largest bucket bounds that hold values.
    #[must_use]
    pub fn range(&self) -> Option<(u64, u64)> {
        let first = self.buckets().next()?;
        let last = self.buckets().last()?;
        Some((first.low, last.high))
    }
}

fn midpoint(b: Bucket) -> u64 {
    b.low + (b.high - b.low) / 2
}

/// Failed calls by errno class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrnoCounts(pub [u64; ERRNO_CLASSES]);

impl ErrnoCounts {
    /// All failed calls.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The most frequent class and its count, if any call failed.
    #[must_use]
    pub fn top(&self) -> Option<(ErrnoClass, u64)> {
        ErrnoClass::ALL
            .iter()
            .zip(self.0)
            .filter(|(_, n)| *n > 0)
            .max_by_key(|(_, n)| *n)
            .map(|(c, n)| (*c, n))
    }

    /// Count of one class.
    #[must_use]
    pub fn get(&self, class: ErrnoClass) -> u64 {
        self.0[class as usize]
    }
}

/// What a syscall's return value counts, where the kernel histograms it per call: the ready
/// events of the epoll calls, the bytes of the read/write family. Every report and export
/// shows a histogram of it as "{key} per call", named, described and bucketed from here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnUnit {
    /// Ready events (epoll_wait, epoll_pwait, epoll_pwait2).
    Events,
    /// Bytes read or written (the read/write family).
    Bytes,
}

impl ReturnUnit {
    /// Every unit, in the order the exports list them.
    pub const ALL: [Self; 2] = [Self::Events, Self::Bytes];

    /// What `syscall`'s return value counts, if the kernel histograms it: the one list.
    #[must_use]
    pub fn of(syscall: &str) -> Option<Self> {
        match syscall {
            "epoll_wait" | "epoll_pwait" | "epoll_pwait2" => Some(Self::Events),
            "read" | "write" | "recvfrom" | "sendto" | "readv" | "writev" | "recvmsg"
            | "sendmsg" | "pread64" | "pwrite64" => Some(Self::Bytes),
            _ => None,
        }
    }

    /// Whether `syscall`'s third argument is the size it asks to transfer and its return value
    /// the bytes it did (read, write, recvfrom, sendto, pread64, pwrite64), so that a short
    /// call is known: the one list. The vectored ones (readv, writev, recvmsg, sendmsg) take
    /// their sizes in user memory, which is not read.
    #[must_use]
    pub fn sized(syscall: &str) -> bool {
        matches!(
            syscall,
            "read" | "write" | "recvfrom" | "sendto" | "pread64" | "pwrite64"
        )
    }

    /// `events` or `bytes`: "{key} per call", JSON's `{key}_per_call`, Prometheus's
    /// `syscall_{key}_per_call`.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::Bytes => "bytes",
        }
    }

    /// The Prometheus histogram's help.
    #[must_use]
    pub fn help(self) -> &'static str {
        match self {
            Self::Events => "Ready events returned per epoll call.",
            Self::Bytes => {
                "Bytes transferred per successful call of the read/write family (its return value)."
            }
        }
    }

    /// What a call that returned 0 got: "no event", "0 bytes" (a read's end of file).
    #[must_use]
    pub fn zero(self) -> &'static str {
        match self {
            Self::Events => "no event",
            Self::Bytes => "0 bytes",
        }
    }

    /// Prometheus bucket upper bounds, each the `high` of a kernel bucket: 0, then `2^k - 1`
    /// for k = 1..=16 (events: exact kernel buckets), or every other power of two up to 16 MiB
    /// (bytes).
    #[must_use]
    pub fn bounds(self) -> Vec<u64> {
        let top = match self {
            Self::Events => (1..=16).collect::<Vec<u32>>(),
            Self::Bytes => (1..=12).map(|k| 2 * k).collect(),
        };
        std::iter::once(0)
            .chain(top.into_iter().map(|k| (1u64 << k) - 1))
            .collect()
    }
}

/// What the calls of a syscall returned, per call, and what that counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Returned {
    /// What the return value counts.
    pub unit: ReturnUnit,
    /// One value per successful call (failed calls return an errno, not a count), in the
    /// kernel's buckets (exact below 64, then 1/32 of the value wide).
    pub per_call: LatencyHistogram,
    /// The exact sum of those values.
    pub total: u64,
    /// For a sized syscall ([`ReturnUnit::sized`]), the calls that transferred fewer bytes
    /// than asked; `None` where that is not known.
    pub short: Option<u64>,
}

impl Returned {
    /// The exact mean per successful call (0 without one).
    #[must_use]
    pub fn mean(&self) -> f64 {
        self.total as f64 / self.per_call.total().max(1) as f64
    }

    /// The bucket that holds quantile `q`, as `(low, high)`: "4096" where it holds one value,
    /// "4096–4223" where it is wider (a bucket's midpoint would print 4159 for reads that all
    /// returned 4096).
    #[must_use]
    pub fn quantile_text(&self, q: f64) -> String {
        match self.per_call.bucket_at_quantile(q) {
            Some(b) if b.low == b.high => b.low.to_string(),
            Some(b) => format!("{}–{}", b.low, b.high),
            None => "-".to_owned(),
        }
    }

    /// The share of successful calls that transferred fewer bytes than asked, where known.
    #[must_use]
    pub fn short_share(&self) -> Option<f64> {
        self.short
            .map(|short| short as f64 / self.per_call.total().max(1) as f64)
    }

    /// The share of calls that returned 0 (no event; end of file).
    #[must_use]
    pub fn zero_share(&self) -> f64 {
        let zero: u64 = self
            .per_call
            .buckets()
            .filter(|b| b.high == 0)
            .map(|b| b.count)
            .sum();
        zero as f64 / self.per_call.total().max(1) as f64
    }

    /// "2.10 events per call (p50 2, p99 7, max 9), no event in 3.2% of calls", or the same
    /// in bytes (quantiles as the kernel's buckets where they hold several values).
    #[must_use]
    pub fn line(&self) -> String {
        let mut line = format!(
            "{:.2} {} per call (p50 {}, p99 {}, max {}), {} in {:.1}% of calls",
            self.mean(),
            self.unit.key(),
            self.quantile_text(0.5),
            self.quantile_text(0.99),
            self.quantile_text(1.0),
            self.unit.zero(),
            100.0 * self.zero_share()
        );
        if let Some(share) = self.short_share() {
            line.push_str(&format!(
                ", short (fewer bytes than asked) in {:.1}%",
                100.0 * share
            ));
        }
        line
    }
}

/// Everything measured for one syscall.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyscallSummary {
    /// Syscall name.
    pub name: String,
    /// Completed calls.
    pub calls: u64,
    /// Failed calls by errno class.
    pub errors: ErrnoCounts,
    /// Sum of all call latencies, ns.
    pub total_ns: u64,
    /// Fastest call, ns (0 when no calls).
    pub min_ns: u64,
    /// Slowest call, ns.
    pub max_ns: u64,
    /// Exits without a recorded entry (in flight when tracing began).
    pub dropped: u64,
    /// Latency distribution, ns.
    pub latency: LatencyHistogram,
    /// What the calls returned, per call, where the return value is a count
    /// ([`ReturnUnit::of`]: epoll's events, the read/write family's bytes), else `None`.
    pub returned: Option<Returned>,
    /// With `--off-cpu`: where the calls' time went, on or off the CPU; else `None`.
    pub off_cpu: Option<OffCpuSplit>,
}

/// A syscall's time split by what its thread was doing (`--off-cpu`): on a CPU, switched out
/// waiting (blocked), or runnable and waiting for a CPU. The three add up to the total latency:
/// on-CPU is what the other two leave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffCpuSplit {
    /// Time switched out and not runnable, ns, over all calls.
    pub blocked_ns: u64,
    /// Time runnable but not running, ns, over all calls.
    pub runnable_ns: u64,
    /// Each call's on-CPU time, ns.
    pub on_cpu: LatencyHistogram,
}

impl OffCpuSplit {
    /// Adds `other`'s time into this one.
    pub fn add(&mut self, other: &Self) {
        self.blocked_ns += other.blocked_ns;
        self.runnable_ns += other.runnable_ns;
        self.on_cpu.add_counts(&other.on_cpu.counts);
    }

    /// What happened between `earlier` and `self`.
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            blocked_ns: self.blocked_ns.saturating_sub(earlier.blocked_ns),
            runnable_ns: self.runnable_ns.saturating_sub(earlier.runnable_ns),
            on_cpu: self.on_cpu.since(&earlier.on_cpu),
        }
    }
}

impl SyscallSummary {
    /// With `--off-cpu`: total on-CPU, blocked and runnable time, ns (adding up to `total_ns`).
    #[must_use]
    pub fn time_split(&self) -> Option<(u64, u64, u64)> {
        let split = self.off_cpu.as_ref()?;
        let off = split.blocked_ns + split.runnable_ns;
        Some((
            self.total_ns.saturating_sub(off),
            split.blocked_ns,
            split.runnable_ns,
        ))
    }

    /// One CPU's counters of one slot as read from the kernel (`SYSCALLS`); the histogram of
    /// returned counts is read from its own map. With `off_cpu`, the split too.
    #[must_use]
    pub fn of_slot(name: &str, slot: &SyscallSlot, off_cpu: bool) -> Self {
        let s = &slot.stats;
        let mut latency = LatencyHistogram::default();
        latency.add_counts(&slot.latency.counts);
        Self {
            name: name.to_owned(),
            calls: s.calls,
            errors: ErrnoCounts(s.errors),
            total_ns: s.total_ns,
            min_ns: if s.calls > 0 { s.min_ns } else { 0 },
            max_ns: s.max_ns,
            dropped: s.dropped,
            latency,
            // The histogram is in its own map: the caller adds it.
            returned: ReturnUnit::of(name).map(|unit| Returned {
                unit,
                per_call: LatencyHistogram::default(),
                total: s.returned,
                short: ReturnUnit::sized(name).then_some(s.short),
            }),
            off_cpu: off_cpu.then(|| {
                let mut on_cpu = LatencyHistogram::default();
                on_cpu.add_counts(&slot.on_cpu.counts);
                OffCpuSplit {
                    blocked_ns: s.blocked_ns,
                    runnable_ns: s.runnable_ns,
                    on_cpu,
                }
            }),
        }
    }

    /// Adds `other` (the same syscall on another CPU, or in another run) into this one: the
    /// one merge, used for the kernel's per-CPU values and for runs alike. Events and the
    /// off-CPU split, and the returned counts, merge where both sides have them.
    pub fn add(&mut self, other: &Self) {
        if other.calls > 0 && (self.calls == 0 || other.min_ns < self.min_ns) {
            self.min_ns = other.min_ns;
        }
        self.max_ns = self.max_ns.max(other.max_ns);
        self.calls += other.calls;
        self.total_ns += other.total_ns;
        self.dropped += other.dropped;
        for (a, b) in self.errors.0.iter_mut().zip(other.errors.0) {
            *a += b;
        }
        self.latency.merge(&other.latency);
        if let (Some(a), Some(b)) = (&mut self.returned, &other.returned) {
            a.per_call.merge(&b.per_call);
            a.total += b.total;
            a.short = a.short.zip(b.short).map(|(x, y)| x + y);
        }
        if let (Some(a), Some(b)) = (&mut self.off_cpu, &other.off_cpu) {
            a.add(b);
        }
    }

    /// The latency at quantile `q`, ns: the histogram's answer (its bucket's midpoint, within
    /// 1/64 of the exact value) kept within the exact minimum and maximum the kernel recorded,
    /// so that a p99 never reads above the max (a midpoint can lie above the largest value of
    /// its bucket). 0 without calls.
    #[must_use]
    pub fn quantile_ns(&self, q: f64) -> u64 {
        let v = self.latency.value_at_quantile(q);
        if self.calls == 0 || self.min_ns > self.max_ns {
            return v;
        }
        v.clamp(self.min_ns, self.max_ns)
    }

    /// What the calls returned, if it counts `unit`.
    #[must_use]
    pub fn returned_as(&self, unit: ReturnUnit) -> Option<&Returned> {
        self.returned.as_ref().filter(|r| r.unit == unit)
    }

    /// Mean latency in ns.
    #[must_use]
    pub fn mean_ns(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.calls as f64
        }
    }

    /// What happened between `earlier` and `self`. min/max come from the histogram's bounds,
    /// as the kernel keeps only running extremes.
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        let latency = self.latency.since(&earlier.latency);
        let (min_ns, max_ns) = latency.range().unwrap_or((0, 0));
        let mut errors = ErrnoCounts::default();
        for (i, e) in errors.0.iter_mut().enumerate() {
            *e = self.errors.0[i].saturating_sub(earlier.errors.0[i]);
        }
        Self {
            name: self.name.clone(),
            calls: self.calls.saturating_sub(earlier.calls),
            errors,
            total_ns: self.total_ns.saturating_sub(earlier.total_ns),
            min_ns,
            max_ns: max_ns.min(self.max_ns),
            dropped: self.dropped.saturating_sub(earlier.dropped),
            latency,
            returned: match (&self.returned, &earlier.returned) {
                (Some(a), Some(b)) => Some(Returned {
                    unit: a.unit,
                    per_call: a.per_call.since(&b.per_call),
                    total: a.total.saturating_sub(b.total),
                    short: a.short.zip(b.short).map(|(x, y)| x.saturating_sub(y)),
                }),
                (a, _) => a.clone(),
            },
            off_cpu: match (&self.off_cpu, &earlier.off_cpu) {
                (Some(a), Some(b)) => Some(a.since(b)),
                (a, _) => a.clone(),
            },
        }
    }
}

/// One row's totals for one syscall (a process's or a cgroup's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RowSyscall {
    /// Completed calls.
    pub calls: u64,
    /// Failed calls.
    pub errors: u64,
    /// Total latency, ns.
    pub total_ns: u64,
}

impl RowSyscall {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Self) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.total_ns += other.total_ns;
    }

    /// Takes `other`'s counts away from these (never below zero).
    pub fn subtract(&mut self, other: &Self) {
        self.calls = self.calls.saturating_sub(other.calls);
        self.errors = self.errors.saturating_sub(other.errors);
        self.total_ns = self.total_ns.saturating_sub(other.total_ns);
    }
}

impl RowSummary {
    /// Adds `other`'s per-syscall counts to these, slot by slot.
    pub fn add(&mut self, other: &Self) {
        for (a, b) in self.syscalls.iter_mut().zip(&other.syscalls) {
            a.add(b);
        }
    }
}

/// One row of the per-process or per-cgroup table: a tracked process's counters (a worker of
/// the multi-process server, say), or with `--cgroup`/`--by-cgroup` a cgroup's (`pid` 0).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowSummary {
    /// Process id; 0 for the shared "other processes" entry past the table's size.
    pub pid: u32,
    /// Per syscall, in the session's syscall order.
    pub syscalls: Vec<RowSyscall>,
    /// `--cgroup`: this row is a cgroup's (its path below the root), not a process's.
    pub cgroup: Option<String>,
    /// The container that cgroup is, when it is one's.
    pub container: Option<crate::container::Container>,
}

impl RowSummary {
    /// Calls over all syscalls.
    #[must_use]
    pub fn total_calls(&self) -> u64 {
        self.syscalls.iter().map(|s| s.calls).sum()
    }

    /// What happened between `earlier` and `self`.
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            pid: self.pid,
            cgroup: self.cgroup.clone(),
            container: self.container.clone(),
            syscalls: self
                .syscalls
                .iter()
                .zip(&earlier.syscalls)
                .map(|(a, b)| RowSyscall {
                    calls: a.calls.saturating_sub(b.calls),
                    errors: a.errors.saturating_sub(b.errors),
                    total_ns: a.total_ns.saturating_sub(b.total_ns),
                })
                .collect(),
        }
    }
}

/// Counts of events that could not be recorded, by [`DropReason`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DropCounts(pub [u64; DROP_REASONS]);

impl DropCounts {
    /// Events missing from the statistics (excludes coarse attribution such as a full process
    /// table, whose calls are still counted).
    #[must_use]
    pub fn lost(&self) -> u64 {
        DropReason::ALL
            .iter()
            .filter(|r| r.loses_events())
            .map(|r| self.0[*r as usize])
            .sum()
    }

    /// Non-zero reasons with their counts.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|r| (*r, self.0[*r as usize]))
            .filter(|(_, n)| *n > 0)
    }
}

/// Everything the kernel programs counted, from their load (or the last `Session::reset`) to
/// the read; [`Snapshot::since`] gives what happened between two reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// One entry per timed syscall, in the session's order.
    pub syscalls: Vec<SyscallSummary>,
    /// Rows ([`RowSummary`]): the tracked processes that made at least one timed call, or the
    /// cgroups (`--cgroup`, `--by-cgroup`).
    pub processes: Vec<RowSummary>,
    /// Events that could not be recorded.
    pub dropped: DropCounts,
    /// What the programs could not see, one line each (32-bit processes' calls to a syscall
    /// with no ia32 number, processes beyond a raised `pid_max`, ...): with any, the reports
    /// do not say that every call was recorded.
    pub not_seen: Vec<String>,
    /// Every call of the traced processes per syscall, the table's and the rest, largest time
    /// first; `None` where they were not counted (see [`EveryCall`]).
    pub every: Option<Vec<EveryCall>>,
}

/// Every call of the traced processes to one syscall, timed in the table or not: counted from
/// the raw `sys_enter`/`sys_exit` tracepoints (`every_enter`, `every_exit`), so the share of
/// syscall time the table leaves out compares like with like.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EveryCall {
    /// The syscall's name (the 64-bit table's, or the ia32 table's for a 32-bit call).
    pub name: String,
    /// A 32-bit (ia32) call.
    pub ia32: bool,
    /// Whether the table times this syscall.
    pub in_table: bool,
    /// Completed calls.
    pub calls: u64,
    /// Failed calls.
    pub errors: u64,
    /// Their time, entry to exit, ns.
    pub total_ns: u64,
}

/// The syscall time the table leaves out ([`Snapshot::left_out`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LeftOut {
    /// Its share of every call's time, 0–1.
    pub share: f64,
    /// All the traced processes' syscall time, ns.
    pub total_ns: u64,
    /// The syscalls left out, largest time first, with their shares of all the time.
    pub largest: Vec<(String, f64)>,
}

impl LeftOut {
    /// One line: the share and the largest syscalls it is made of.
    #[must_use]
    pub fn line(&self) -> String {
        if self.largest.is_empty() {
            return "left out: none of the traced processes' syscall time (every syscall they made is in the table)".to_owned();
        }
        let names: Vec<String> = self
            .largest
            .iter()
            .take(5)
            .map(|(name, share)| format!("{name} {:.1}%", share * 100.0))
            .collect();
        let more = self.largest.len().saturating_sub(5);
        format!(
            "left out: {:.1}% of the traced processes' syscall time is in syscalls not in the table: {}{}",
            self.share * 100.0,
            names.join(", "),
            if more > 0 {
                format!(" and {more} more (--syscalls all lists them)")
            } else {
                String::new()
            }
        )
    }
}

impl Snapshot {
    /// What the table leaves out of the traced processes' syscall time; `None` where every
    /// call was not counted.
    #[must_use]
    pub fn left_out(&self) -> Option<LeftOut> {
        let every = self.every.as_ref()?;
        let total_ns: u64 = every.iter().map(|e| e.total_ns).sum();
        let share = |ns: u64| {
            if total_ns == 0 {
                0.0
            } else {
                ns as f64 / total_ns as f64
            }
        };
        let mut largest: Vec<(String, u64)> = Vec::new();
        for e in every.iter().filter(|e| !e.in_table && e.calls > 0) {
            match largest.iter_mut().find(|(name, _)| *name == e.name) {
                Some((_, ns)) => *ns += e.total_ns,
                None => largest.push((e.name.clone(), e.total_ns)),
            }
        }
        largest.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Some(LeftOut {
            share: share(largest.iter().map(|(_, ns)| ns).sum()),
            total_ns,
            largest: largest
                .into_iter()
                .map(|(name, ns)| (name, share(ns)))
                .collect(),
        })
    }

    /// The entry for one syscall by name.
    #[must_use]
    pub fn syscall(&self, name: &str) -> Option<&SyscallSummary> {
        self.syscalls.iter().find(|s| s.name == name)
    }

    /// The entry for one process by pid.
    #[must_use]
    pub fn process(&self, pid: u32) -> Option<&RowSummary> {
        self.processes.iter().find(|p| p.pid == pid)
    }

    /// Time spent in all timed syscalls, ns.
    #[must_use]
    pub fn total_ns(&self) -> u64 {
        self.syscalls.iter().map(|s| s.total_ns).sum()
    }

    /// Adds `other` (another run of the same syscall set) into `self`.
    pub fn merge(&mut self, other: &Self) {
        for theirs in &other.syscalls {
            match self.syscalls.iter_mut().find(|s| s.name == theirs.name) {
                Some(mine) => mine.add(theirs),
                None => self.syscalls.push(theirs.clone()),
            }
        }
        for theirs in &other.processes {
            match self
                .processes
                .iter_mut()
                .find(|p| p.pid == theirs.pid && p.cgroup == theirs.cgroup)
            {
                Some(mine) => mine.add(theirs),
                None => self.processes.push(theirs.clone()),
            }
        }
        for (a, b) in self.dropped.0.iter_mut().zip(other.dropped.0) {
            *a += b;
        }
        for line in &other.not_seen {
            if !self.not_seen.contains(line) {
                self.not_seen.push(line.clone());
            }
        }
        self.every = match (self.every.take(), &other.every) {
            (Some(mut mine), Some(theirs)) => {
                merge_every(&mut mine, theirs, |a, b| a + b);
                Some(mine)
            }
            // Merged into an empty snapshot (the first run), or not counted on one side.
            (None, Some(theirs)) if self.syscalls.is_empty() => Some(theirs.clone()),
            _ => None,
        };
    }

    /// What happened between `earlier` and `self`.
    #[must_use]
    pub fn since(&self, earlier: &Self) -> Self {
        let syscalls = self
            .syscalls
            .iter()
            .map(|s| match earlier.syscall(&s.name) {
                Some(e) => s.since(e),
                None => s.clone(),
            })
            .collect();
        let processes = self
            .processes
            .iter()
            // A row is a process or a cgroup (pid 0): the same key as `merge`.
            .map(|p| {
                match earlier
                    .processes
                    .iter()
                    .find(|e| e.pid == p.pid && e.cgroup == p.cgroup)
                {
                    Some(e) => p.since(e),
                    None => p.clone(),
                }
            })
            .filter(|p| p.total_calls() > 0)
            .collect();
        let mut dropped = DropCounts::default();
        for (i, d) in dropped.0.iter_mut().enumerate() {
            *d = self.dropped.0[i].saturating_sub(earlier.dropped.0[i]);
        }
        let every = self.every.as_ref().map(|now| {
            let mut delta = now.clone();
            if let Some(then) = &earlier.every {
                merge_every(&mut delta, then, u64::saturating_sub);
            }
            delta.retain(|e| e.calls > 0);
            sort_every(&mut delta);
            delta
        });
        Self {
            syscalls,
            processes,
            dropped,
            not_seen: self.not_seen.clone(),
            every,
        }
    }
}

/// Combines `theirs` into `mine` syscall by syscall with `op` (a sum, or a difference).
fn merge_every(mine: &mut Vec<EveryCall>, theirs: &[EveryCall], op: fn(u64, u64) -> u64) {
    for t in theirs {
        match mine
            .iter_mut()
            .find(|m| m.name == t.name && m.ia32 == t.ia32)
        {
            Some(m) => {
                m.calls = op(m.calls, t.calls);
                m.errors = op(m.errors, t.errors);
                m.total_ns = op(m.total_ns, t.total_ns);
            }
            None => mine.push(EveryCall {
                calls: op(0, t.calls),
                errors: op(0, t.errors),
                total_ns: op(0, t.total_ns),
                ..t.clone()
            }),
        }
    }
    sort_every(mine);
}

/// Largest time first, then by name.
pub fn sort_every(every: &mut [EveryCall]) {
    every.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.name.cmp(&b.name))
            .then(a.ia32.cmp(&b.ia32))
    });
}

/// A latency quantile as the reports name it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantile {
    /// The fraction, 0.5 for the median.
    pub q: f64,
    /// Its name in tables: `p99.9`.
    pub label: &'static str,
    /// Its name in field and column names: `p99_9` (`p99_9_ns` in JSON and CSV).
    pub key: &'static str,
}

/// The quantiles of a syscall's latency every report and export shows, in this order: the
/// terminal and Markdown tables' columns, JSON's `pN_ns` fields and percentile maps, CSV's
/// columns. The one list; a format that shows fewer says so beside its columns.
pub const QUANTILES: [Quantile; 4] = [
    Quantile {
        q: 0.5,
        label: "p50",
        key: "p50",
    },
    Quantile {
        q: 0.9,
        label: "p90",
        key: "p90",
    },
    Quantile {
        q: 0.99,
        label: "p99",
        key: "p99",
    },
    Quantile {
        q: 0.999,
        label: "p99.9",
        key: "p99_9",
    },
];

/// A per-syscall figure's value: a count (calls, ns) or a mean.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// A whole number (calls, nanoseconds).
    Count(u64),
    /// A mean (nanoseconds), shown with one decimal in text formats.
    Mean(f64),
    /// Not known for this syscall (short calls of one that asks for no size): an empty CSV
    /// cell, no JSON field, no Prometheus or OTLP series.
    Absent,
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Count(n) => write!(f, "{n}"),
            Self::Mean(x) => write!(f, "{x:.1}"),
            Self::Absent => Ok(()),
        }
    }
}

/// Where a figure is a counter: its Prometheus family (after the `syscall_profiler_` prefix),
/// its OTLP sum metric, and the label that tells it from the family's other figures, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterSeries {
    /// The Prometheus counter family, `syscall_calls_total`.
    pub family: &'static str,
    /// The OTLP metric (a monotonic cumulative sum), `syscall.calls`.
    pub otlp: &'static str,
    /// The family's HELP text (OTLP's description).
    pub help: &'static str,
    /// `("errno", "EAGAIN")` for one errno class's series; `None` for the family's one series.
    pub label: Option<(&'static str, &'static str)>,
}

/// One flat per-syscall figure, declared once: its name, meaning and unit, how to read it from
/// a [`SyscallSummary`], and where it appears. CSV has one column per figure, in
/// [`syscall_figures`]' order; JSON one field per figure with `json` (errors are nested there);
/// Prometheus and OTLP one counter series per figure with a `counter` series (OTLP leaves out
/// a labelled series' zeros, as it leaves out errno classes never seen). A new per-syscall
/// figure is one entry here (and its field in `SyscallSummary`); histograms and the off-CPU
/// split keep their own sections in each format.
pub struct Figure {
    /// The CSV column and, with `json`, the JSON field: `calls`, `p99_ns`.
    pub key: String,
    /// What it means, for documentation and Prometheus's HELP.
    pub help: &'static str,
    /// Whether JSON's syscall objects carry it as a field of its own.
    pub json: bool,
    /// Its counter series (Prometheus, OTLP), if it is one.
    pub counter: Option<CounterSeries>,
    /// Its value for one syscall.
    pub value: Box<dyn Fn(&SyscallSummary) -> Value + Send + Sync>,
}

/// The flat per-syscall figures in their one order (CSV's columns): calls, errors (then one
/// per errno class), total, mean, min and max time, the [`QUANTILES`], drops, short calls.
#[must_use]
pub fn syscall_figures() -> Vec<Figure> {
    fn figure(
        key: &str,
        help: &'static str,
        json: bool,
        counter: Option<CounterSeries>,
        value: impl Fn(&SyscallSummary) -> Value + Send + Sync + 'static,
    ) -> Figure {
        Figure {
            key: key.to_owned(),
            help,
            json,
            counter,
            value: Box::new(value),
        }
    }
    const ERRORS_HELP: &str = "Failed syscalls by errno (other: any errno not named).";
    let mut figures = vec![
        figure(
            "calls",
            "Completed syscalls.",
            true,
            Some(CounterSeries {
                family: "syscall_calls_total",
                otlp: "syscall.calls",
                help: "Completed syscalls.",
                label: None,
            }),
            |s| Value::Count(s.calls),
        ),
        // JSON nests the errors as {total, by_errno}.
        figure("errors", "Failed syscalls.", false, None, |s| {
            Value::Count(s.errors.total())
        }),
    ];
    for class in ErrnoClass::ALL {
        figures.push(figure(
            &format!("errors_{}", class.name().to_lowercase()),
            ERRORS_HELP,
            false,
            Some(CounterSeries {
                family: "syscall_errors_total",
                otlp: "syscall.errors",
                help: ERRORS_HELP,
                label: Some(("errno", class.name())),
            }),
            move |s| Value::Count(s.errors.get(class)),
        ));
    }
    figures.extend([
        figure(
            "total_ns",
            "Sum of the calls' latencies, ns.",
            true,
            None,
            |s| Value::Count(s.total_ns),
        ),
        figure("mean_ns", "Mean latency, ns.", true, None, |s| {
            Value::Mean(s.mean_ns())
        }),
        figure(
            "min_ns",
            "Fastest call, ns (0 without calls).",
            true,
            None,
            |s| Value::Count(s.min_ns),
        ),
        figure("max_ns", "Slowest call, ns.", true, None, |s| {
            Value::Count(s.max_ns)
        }),
    ]);
    for q in QUANTILES {
        figures.push(figure(
            &format!("{}_ns", q.key),
            "A latency quantile, ns (its kernel bucket's midpoint, within 1/64 of the exact value).",
            true,
            None,
            move |s| Value::Count(s.quantile_ns(q.q)),
        ));
    }
    const DROPPED_HELP: &str = "Syscall exits without a recorded entry (in flight at attach).";
    figures.push(figure(
        "dropped",
        DROPPED_HELP,
        true,
        Some(CounterSeries {
            family: "syscall_dropped_total",
            otlp: "syscall.dropped",
            help: DROPPED_HELP,
            label: None,
        }),
        |s| Value::Count(s.dropped),
    ));
    // JSON has it as bytes_per_call's short_share.
    const SHORT_HELP: &str = "Successful calls that transferred fewer bytes than asked (read, write, recvfrom, sendto, pread64, pwrite64).";
    figures.push(figure(
        "short_calls",
        SHORT_HELP,
        false,
        Some(CounterSeries {
            family: "syscall_short_calls_total",
            otlp: "syscall.short_calls",
            help: SHORT_HELP,
            label: None,
        }),
        |s| {
            s.returned_as(ReturnUnit::Bytes)
                .and_then(|r| r.short)
                .map_or(Value::Absent, Value::Count)
        },
    ));
    figures
}

/// Any figure per request (calls, ns in a syscall, the server's CPU ns), the one formula every
/// report, chart and export uses: over the requests the load generator finished, correct or
/// failed (the server made calls and spent time for the failed ones too). `None` without
/// requests.
#[must_use]
pub fn per_request(amount: f64, requests_finished: u64) -> Option<f64> {
    (requests_finished > 0).then(|| amount / requests_finished as f64)
}

/// Calls per request: [`per_request`] of a count.
#[must_use]
pub fn calls_per_request(calls: u64, requests_finished: u64) -> Option<f64> {
    per_request(calls as f64, requests_finished)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run report divided by finished requests (correct and failed), the exports by correct
    /// ones only: 200 calls over 100 correct and 100 failed requests read 1.0 in one and 2.0 in
    /// the other. Both use this one definition now.
    #[test]
    fn calls_per_request_counts_every_finished_request() {
        assert_eq!(calls_per_request(200, 200), Some(1.0));
        assert_eq!(calls_per_request(5, 0), None);
        let mut errors = std::collections::BTreeMap::new();
        errors.insert("reset".to_owned(), 100);
        let m = crate::export::Measurement {
            variant: Some("lt".into()),
            concurrency: Some(1),
            run: Some(1),
            server_cpus: None,
            syscalls: Snapshot::default(),
            load: Some(crate::export::LoadSummary {
                requests: 100,
                elapsed_s: 1.0,
                qps: 100.0,
                latency: hdrhistogram::Histogram::new(3).unwrap(),
                errors,
                server_cpu_ns: None,
                server_on_cpu_ns: None,
                noise: None,
            }),
            failure: None,
            slow: None,
            slices: Vec::new(),
        };
        let close = SyscallSummary {
            name: "close".into(),
            calls: 200,
            ..Default::default()
        };
        assert_eq!(m.calls_per_request(&close), Some(1.0));
    }

    /// `since` keyed rows by pid alone, so two `--cgroup` rows (both pid 0) were subtracted
    /// from each other; it keys them by (pid, cgroup) like `merge`.
    #[test]
    fn since_keeps_cgroup_rows_apart() {
        let row = |cgroup: &str, calls: u64| RowSummary {
            pid: 0,
            syscalls: vec![RowSyscall {
                calls,
                errors: 0,
                total_ns: calls,
            }],
            cgroup: Some(cgroup.to_owned()),
            container: None,
        };
        let earlier = Snapshot {
            processes: vec![row("/a", 10), row("/b", 1000)],
            ..Snapshot::default()
        };
        let now = Snapshot {
            processes: vec![row("/a", 30), row("/b", 1500)],
            ..Snapshot::default()
        };
        let delta = now.since(&earlier);
        let calls = |c: &str| {
            delta
                .processes
                .iter()
                .find(|p| p.cgroup.as_deref() == Some(c))
                .map(|p| p.syscalls[0].calls)
        };
        assert_eq!((calls("/a"), calls("/b")), (Some(20), Some(500)));
    }

    /// Exact quantile of a sorted sample (nearest rank).
    fn exact(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    fn check_distribution(mut values: Vec<u64>) {
        let mut h = LatencyHistogram::default();
        for &v in &values {
            h.record_n(v, 1);
        }
        values.sort_unstable();
        assert_eq!(h.total(), values.len() as u64);
        let hdr = h.to_hdr();
        for q in [0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let want = exact(&values, q);
            let bucket = bucket_index(want);
            let width = bucket_upper_bound(bucket) - bucket_lower_bound(bucket) + 1;
            let got = h.value_at_quantile(q);
            assert!(
                got.abs_diff(want) <= width,
                "q={q}: got {got}, exact {want}, bucket width {width}"
            );
            // hdrhistogram adds its own 1/1000 resolution on top of the bucket midpoint.
            let from_hdr = hdr.value_at_quantile(q);
            assert!(
                from_hdr.abs_diff(want) <= width + want / 500,
                "hdr q={q}: got {from_hdr}, exact {want}, bucket width {width}"
            );
        }
    }

    /// A call of 329 µs alone in its bucket: the bucket's midpoint is above it, and a p99 of
    /// the histogram would read above the max (seen: p99 332 µs, max 329 µs); the summary's
    /// quantiles stay within the recorded minimum and maximum.
    #[test]
    fn quantiles_never_exceed_the_max() {
        let mut s = SyscallSummary {
            calls: 100,
            min_ns: 1000,
            max_ns: 329_000,
            ..Default::default()
        };
        s.latency.record_n(1000, 99);
        s.latency.record_n(329_000, 1);
        assert!(
            s.latency.value_at_quantile(1.0) > 329_000,
            "the midpoint is above"
        );
        assert_eq!(s.quantile_ns(1.0), 329_000);
        assert_eq!(s.quantile_ns(0.999), 329_000);
        assert_eq!(s.quantile_ns(0.5), 1000);
    }

    #[test]
    fn uniform_distribution_percentiles_within_bucket_width() {
        check_distribution((1..=100_000).map(|i| i * 37).collect());
    }

    #[test]
    fn bimodal_distribution_percentiles_within_bucket_width() {
        // 90% fast calls around 800 ns, 10% slow ones around 20 ms: a syscall table's usual shape.
        let mut v: Vec<u64> = (0..9000).map(|i| 700 + (i % 200)).collect();
        v.extend((0..1000).map(|i| 19_000_000 + i * 2000));
        check_distribution(v);
    }

    #[test]
    fn geometric_distribution_percentiles_within_bucket_width() {
        let mut x = 1.0f64;
        let v = (0..5000)
            .map(|_| {
                x *= 1.004;
                x as u64
            })
            .collect();
        check_distribution(v);
    }

    #[test]
    fn since_subtracts_counts_and_keeps_names() {
        let mut a = SyscallSummary {
            name: "close".into(),
            calls: 10,
            total_ns: 1000,
            ..Default::default()
        };
        a.latency.record_n(100, 10);
        let mut b = a.clone();
        b.calls = 15;
        b.total_ns = 6000;
        b.latency.record_n(1000, 5);
        let d = b.since(&a);
        assert_eq!((d.calls, d.total_ns, d.latency.total()), (5, 5000, 5));
        let (lo, hi) = d.latency.range().unwrap();
        assert!(lo <= 1000 && hi >= 1000);
    }

    #[test]
    fn errno_top_picks_the_most_frequent() {
        let mut e = ErrnoCounts::default();
        e.0[ErrnoClass::Again as usize] = 5;
        e.0[ErrnoClass::Pipe as usize] = 9;
        assert_eq!(e.top(), Some((ErrnoClass::Pipe, 9)));
        assert_eq!(e.total(), 14);
    }
}
