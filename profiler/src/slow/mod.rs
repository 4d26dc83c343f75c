//! `--slow THRESHOLD`: the traced calls that lasted at least the threshold, each with where it
//! waited (the kernel stack at its longest switch-out) and which code made it (the user stack at
//! its return), grouped by identical stacks.
//!
//! The exit program sends each slow call through a ring buffer ([`SlowCall`]); a
//! [`Collector`]'s reader thread reads it as records arrive (so a process's mappings are read
//! while it still runs, as soon as the kernel announces one of its calls blocking), and its
//! symbolizer thread symbolizes each new stack once ([`symbols`]) and adds the call to its group.
//! Calls the ring buffer had no room for are counted in the kernel and reported, never dropped
//! silently.

pub mod symbols;
pub mod unwind;

use std::{
    collections::HashMap,
    os::fd::AsRawFd as _,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use aya::maps::{MapData, PerCpuArray, RingBuf, StackTraceMap};
use clap::Args;
use profiler_common::{ANNOUNCE_SLOT, Holders, STACK_NOT_TAKEN, SlowCall, SlowCallStack};
use serde::Serialize;

use self::symbols::{Frame, ProcessMaps, Symbols};
use crate::{
    parse::parse_threshold,
    report::{document::Section, table::Table, units::duration},
};

/// `--slow` and `--slow-top`, shared by `attach`, `run` and `serve`.
#[derive(Clone, Debug, Default, Args)]
pub struct SlowArgs {
    /// Record every traced call at least this long (e.g. 1ms) with its kernel and user stacks,
    /// and print the slowest, grouped by stack (turns --off-cpu on).
    #[arg(long, value_name = "THRESHOLD", value_parser = parse_threshold)]
    pub slow: Option<Duration>,
    /// How many stacks --slow prints, slowest call first (serve: keeps per flight-recorder
    /// interval).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10,
        requires = "slow",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub slow_top: u32,
}

/// What the kernel side of `--slow` hands user space: the ring buffer, the stacks, the losses.
pub struct SlowMaps {
    /// The slow calls, as the exit program writes them.
    pub ring: RingBuf<MapData>,
    /// The stacks their ids name.
    pub stacks: StackTraceMap<MapData>,
    /// Calls the ring buffer had no room for, per CPU.
    pub lost: PerCpuArray<MapData, u64>,
}

/// The slowest call of a group, as it was recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlowSample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The thread's name.
    pub comm: String,
    /// Latency, ns.
    pub duration_ns: u64,
    /// Time running, ns.
    pub on_cpu_ns: u64,
    /// Time switched out and not runnable, ns.
    pub blocked_ns: u64,
    /// Time runnable but not running, ns.
    pub runnable_ns: u64,
    /// Return value (negative: -errno).
    pub ret: i64,
    /// Who held the CPU while it was runnable, longest first (the tasks the CPU it ran on next
    /// ran meanwhile, from that CPU's last runs).
    pub runnable_by: Vec<CpuHolder>,
    /// How much of `runnable_ns` `runnable_by` accounts for (the rest: more switches than the
    /// kernel keeps per CPU, or ones it missed).
    pub runnable_attributed_ns: u64,
}

/// A task that ran on the CPU while a slow call's thread waited runnable for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuHolder {
    /// Its name (`swapper/N`: the CPU was idle, a wakeup's latency).
    pub comm: String,
    /// Its thread id (0: idle).
    pub pid: u32,
    /// How long it ran meanwhile, ns.
    pub ns: u64,
}

impl SlowSample {
    /// "runnable 4.75ms: the CPU ran 'kworker/0:1' (pid 12) 3.10ms, 'profiler' (pid 34)
    /// 1.20ms", or `None` when it was never runnable or nobody was found.
    #[must_use]
    pub fn runnable_line(&self) -> Option<String> {
        if self.runnable_ns == 0 || self.runnable_by.is_empty() {
            return None;
        }
        let holders: Vec<String> = self
            .runnable_by
            .iter()
            .map(|h| {
                // The idle task holds an idle CPU: the thread was woken and the CPU had still
                // to wake up and switch to it, not a task in its way.
                if h.pid == 0 {
                    format!("nothing (idle, waking up) {}", duration(h.ns))
                } else {
                    format!("'{}' (pid {}) {}", h.comm, h.pid, duration(h.ns))
                }
            })
            .collect();
        let mut line = format!(
            "runnable {}: its CPU ran {}",
            duration(self.runnable_ns),
            holders.join(", ")
        );
        let shown: u64 = self.runnable_by.iter().map(|h| h.ns).sum();
        if shown + self.runnable_ns / 20 < self.runnable_ns {
            line.push_str(&format!(
                " ({} of it attributed)",
                duration(self.runnable_attributed_ns.min(self.runnable_ns))
            ));
        }
        Some(line)
    }
}

/// The holders of a call's record, longest first; none when the record is of another call.
fn holders_of(holders: &Holders, call: &SlowCall) -> (Vec<CpuHolder>, u64) {
    let call_start = call.end_ns.saturating_sub(call.duration_ns);
    if holders.call_start == 0 || holders.call_start != call_start {
        return (Vec::new(), 0);
    }
    let mut top: Vec<CpuHolder> = holders
        .top
        .iter()
        .filter(|h| h.ns > 0)
        .map(|h| CpuHolder {
            comm: comm_of(&h.comm),
            pid: h.pid,
            ns: h.ns,
        })
        .collect();
    top.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.pid.cmp(&b.pid)));
    (top, holders.attributed_ns)
}

/// The slow calls of one syscall that had the same stacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SlowGroup {
    /// The syscall.
    pub syscall: String,
    /// How many calls.
    pub count: u64,
    /// Their total latency, ns.
    pub total_ns: u64,
    /// Their total time switched out and not runnable, ns.
    pub blocked_ns: u64,
    /// Their total time runnable but not running, ns.
    pub runnable_ns: u64,
    /// The slowest of them.
    pub slowest: SlowSample,
    /// Where they waited longest (the kernel stack at the longest switch-out), innermost
    /// first; empty when they never left the CPU or the stack was not recorded (`kernel_note`).
    pub kernel_stack: Vec<Frame>,
    /// Why `kernel_stack` is empty, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_note: Option<String>,
    /// The code that made the call (the user stack at its return), innermost first.
    pub user_stack: Vec<Frame>,
    /// Why `user_stack` is empty, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_note: Option<String>,
}

impl SlowGroup {
    /// Mean latency, ns.
    #[must_use]
    pub fn mean_ns(&self) -> u64 {
        self.total_ns / self.count.max(1)
    }

    /// Mean on-CPU time, ns.
    #[must_use]
    pub fn mean_on_cpu_ns(&self) -> u64 {
        self.total_ns
            .saturating_sub(self.blocked_ns + self.runnable_ns)
            / self.count.max(1)
    }
}

/// Everything `--slow` found in one trace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SlowReport {
    /// The threshold, ns.
    pub threshold_ns: u64,
    /// Slow calls recorded.
    pub recorded: u64,
    /// Slow calls the ring buffer had no room for (not in `groups`).
    pub lost: u64,
    /// How many groups the reports show (`--slow-top`); `groups` has them all.
    pub top: u32,
    /// One per syscall and pair of stacks, the group with the slowest call first.
    pub groups: Vec<SlowGroup>,
    /// Groups left out to bound memory (`serve`'s flight recorder keeps `--slow-top` per
    /// interval): their calls are in `recorded`, not in `groups`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub groups_not_kept: u64,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if signature"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SlowReport {
    /// Adds `other`'s calls (another run of the same experiment).
    pub fn merge(&mut self, other: &Self) {
        self.threshold_ns = self.threshold_ns.max(other.threshold_ns);
        self.top = self.top.max(other.top);
        self.recorded += other.recorded;
        self.lost += other.lost;
        self.groups_not_kept += other.groups_not_kept;
        for group in &other.groups {
            let same = self.groups.iter_mut().find(|g| {
                g.syscall == group.syscall
                    && g.kernel_stack == group.kernel_stack
                    && g.user_stack == group.user_stack
            });
            match same {
                Some(g) => g.absorb(group),
                None => self.groups.push(group.clone()),
            }
        }
        sort_slowest_first(&mut self.groups);
    }

    /// The first line: threshold, counts, losses.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut line = format!(
            "{} call{} of {} or more, {} stack{}",
            self.recorded,
            if self.recorded == 1 { "" } else { "s" },
            duration(self.threshold_ns),
            self.groups.len(),
            if self.groups.len() == 1 { "" } else { "s" },
        );
        if self.groups_not_kept > 0 {
            line.push_str(&format!(
                " ({} more stacks, the least slow, not kept)",
                self.groups_not_kept
            ));
        }
        if self.lost > 0 {
            line.push_str(&format!(
                "; ring buffer full: {} slow calls not recorded",
                self.lost
            ));
        } else {
            line.push_str("; none lost");
        }
        line
    }

    /// The terminal's form: the `top` groups with the slowest calls, each with its stacks.
    #[must_use]
    pub fn to_text(&self) -> String {
        format!(
            "\nSlowest calls (--slow: {}; by slowest call, top {}):\n{}",
            self.summary(),
            self.top,
            self.groups_text()
        )
    }

    /// The `top` groups, each with its stacks a frame per line (the terminal's form: a stack
    /// in a table cell makes rows hundreds of characters wide).
    #[must_use]
    pub fn groups_text(&self) -> String {
        use std::fmt::Write as _;
        let top = self.top as usize;
        let mut out = String::new();
        for (i, g) in self.groups.iter().take(top).enumerate() {
            let s = &g.slowest;
            let _ = writeln!(
                out,
                "#{} {}: {} call{}, slowest {} (on-CPU {}, blocked {}, runnable {}), mean {}; slowest by pid {} tid {} '{}', returned {}",
                i + 1,
                g.syscall,
                g.count,
                if g.count == 1 { "" } else { "s" },
                duration(s.duration_ns),
                duration(s.on_cpu_ns),
                duration(s.blocked_ns),
                duration(s.runnable_ns),
                duration(g.mean_ns()),
                s.pid,
                s.tid,
                s.comm,
                s.ret,
            );
            if let Some(line) = s.runnable_line() {
                let _ = writeln!(out, "    {line}");
            }
            let _ = writeln!(out, "    kernel, where it waited longest:");
            write_stack(&mut out, &g.kernel_stack, g.kernel_note.as_deref());
            let _ = writeln!(out, "    user, the code that called:");
            write_stack(&mut out, &g.user_stack, g.user_note.as_deref());
        }
        out
    }

    /// The same as a report section (Markdown, HTML, JSON report): a row per group, the stacks
    /// as frames joined innermost first.
    #[must_use]
    pub fn section(&self, title: &str) -> Section {
        let top = self.top as usize;
        let mut table = Table::new([
            "#",
            "syscall",
            "calls",
            "slowest",
            "on-CPU",
            "blocked",
            "runnable",
            "mean",
            "slowest call",
            "kernel stack",
            "user stack",
        ]);
        for (i, g) in self.groups.iter().take(top).enumerate() {
            let s = &g.slowest;
            table.row([
                (i + 1).to_string(),
                g.syscall.clone(),
                g.count.to_string(),
                duration(s.duration_ns),
                duration(s.on_cpu_ns),
                duration(s.blocked_ns),
                duration(s.runnable_ns),
                duration(g.mean_ns()),
                match s.runnable_line() {
                    Some(line) => format!(
                        "pid {} tid {} '{}' ret {}; {line}",
                        s.pid, s.tid, s.comm, s.ret
                    ),
                    None => format!("pid {} tid {} '{}' ret {}", s.pid, s.tid, s.comm, s.ret),
                },
                joined(&g.kernel_stack, g.kernel_note.as_deref()),
                joined(&g.user_stack, g.user_note.as_deref()),
            ]);
        }
        let mut section = Section::new(title, table);
        section.text = Some(self.groups_text());
        section.notes.push(format!("--slow: {}", self.summary()));
        section
            .notes
            .push("Stacks innermost first; the kernel stack is taken where the call waited longest (its longest time off the CPU), the user stack at its return.".to_owned());
        section
    }
}

fn write_stack(out: &mut String, frames: &[Frame], note: Option<&str>) {
    use std::fmt::Write as _;
    if frames.is_empty() {
        let _ = writeln!(out, "      ({})", note.unwrap_or("empty"));
    }
    for f in frames {
        let _ = writeln!(out, "      {}", f.short());
    }
}

fn joined(frames: &[Frame], note: Option<&str>) -> String {
    if frames.is_empty() {
        return format!("({})", note.unwrap_or("empty"));
    }
    frames
        .iter()
        .map(Frame::short)
        .collect::<Vec<_>>()
        .join(" ← ")
}

impl SlowGroup {
    fn absorb(&mut self, other: &Self) {
        self.count += other.count;
        self.total_ns += other.total_ns;
        self.blocked_ns += other.blocked_ns;
        self.runnable_ns += other.runnable_ns;
        if other.slowest.duration_ns > self.slowest.duration_ns {
            self.slowest = other.slowest.clone();
        }
    }
}

fn sort_slowest_first(groups: &mut [SlowGroup]) {
    groups.sort_by(|a, b| {
        b.slowest
            .duration_ns
            .cmp(&a.slowest.duration_ns)
            .then(b.count.cmp(&a.count))
    });
}

/// Why a stack id names no stack.
fn stack_note(id: i32, user: bool) -> String {
    match id {
        STACK_NOT_TAKEN => "never left the CPU: no switch-out to take a kernel stack at".to_owned(),
        e if e == -libc::EEXIST => {
            "not recorded: another stack held its slot in the stack map".to_owned()
        }
        e if e == -libc::EFAULT && user => {
            "not recorded: the user stack could not be read".to_owned()
        }
        e if e < 0 => format!("not recorded (error {})", -e),
        _ => "missing from the stack map".to_owned(),
    }
}

/// A slow call as the reader hands it to the symbolizer: the record, its process's mappings as
/// read while it ran (`None`: it had exited), and the addresses of its stacks.
struct Arrived {
    call: SlowCall,
    comm: String,
    maps: Option<Arc<ProcessMaps>>,
    kernel: Option<Vec<u64>>,
    user: Option<Vec<u64>>,
    /// The user registers (ip, sp, bp) at the syscall and the stack copied from sp up, for
    /// DWARF unwinding (empty: not copied).
    regs: (u64, u64, u64),
    stack: Vec<u8>,
    /// Who held the CPU while it was runnable.
    holders: Holders,
}

/// The symbolizer thread's state.
struct Groups {
    syscalls: Vec<String>,
    symbols: Symbols,
    /// Kernel stack id → frames (ids are never reused: the map has no REUSE flag).
    kernel: HashMap<i32, Vec<Frame>>,
    /// (pid, name, user stack id) → frames: the same addresses mean other code in another
    /// process, or after an exec.
    user: HashMap<(u32, String, i32), Vec<Frame>>,
    /// DWARF unwinding of the copied user stacks.
    unwinders: unwind::Unwinders,
    /// (pid, name, unwound addresses) → frames.
    unwound: HashMap<(u32, String, Vec<u64>), Vec<Frame>>,
    /// The groups so far, shared with [`Collector::take`].
    grouped: Arc<Mutex<Grouped>>,
}

/// The slow calls grouped since the last [`Collector::take`].
#[derive(Default)]
struct Grouped {
    groups: HashMap<GroupKey, SlowGroup>,
    recorded: u64,
}

/// A group: the syscall's slot, the kernel stack, the user stack.
type GroupKey = (u32, Vec<Frame>, Vec<Frame>);

impl Groups {
    fn add(&mut self, arrived: Arrived) {
        let Arrived {
            call,
            comm,
            maps,
            kernel,
            user,
            regs,
            stack,
            holders,
        } = arrived;
        let kernel = if let Some(f) = self.kernel.get(&call.kernel_stack) {
            f.clone()
        } else {
            let frames = kernel.map(|a| self.symbols.kernel(&a)).unwrap_or_default();
            if call.kernel_stack >= 0 {
                self.kernel.insert(call.kernel_stack, frames.clone());
            }
            frames
        };
        let unwound = match &maps {
            Some(maps) if !stack.is_empty() => self.unwinders.unwind(call.pid, maps, regs, &stack),
            _ => unwind::Unwound::default(),
        };
        let user_key = (call.pid, comm.clone(), call.user_stack);
        let user = if !unwound.addresses.is_empty() {
            // DWARF first: it finds the callers that keep no frame pointer.
            let key = (call.pid, comm.clone(), unwound.addresses);
            if let Some(f) = self.unwound.get(&key) {
                f.clone()
            } else {
                let mut frames = self.symbols.user(maps.as_deref(), &key.2);
                if unwound.truncated {
                    frames.push(Frame::cut(unwind::USER_STACK_BYTES));
                }
                self.unwound.insert(key, frames.clone());
                frames
            }
        } else if let Some(f) = self.user.get(&user_key) {
            f.clone()
        } else {
            let frames = user
                .map(|a| self.symbols.user(maps.as_deref(), &a))
                .unwrap_or_default();
            if call.user_stack >= 0 {
                self.user.insert(user_key, frames.clone());
            }
            frames
        };
        let on_cpu = call
            .duration_ns
            .saturating_sub(call.blocked_ns + call.runnable_ns);
        let (runnable_by, runnable_attributed_ns) = holders_of(&holders, &call);
        let sample = SlowSample {
            pid: call.pid,
            tid: call.tid,
            comm,
            duration_ns: call.duration_ns,
            on_cpu_ns: on_cpu,
            blocked_ns: call.blocked_ns,
            runnable_ns: call.runnable_ns,
            ret: call.ret,
            runnable_by,
            runnable_attributed_ns,
        };
        let syscall = self
            .syscalls
            .get(call.slot as usize)
            .cloned()
            .unwrap_or_else(|| format!("slot {}", call.slot));
        let one = SlowGroup {
            syscall,
            count: 1,
            total_ns: call.duration_ns,
            blocked_ns: call.blocked_ns,
            runnable_ns: call.runnable_ns,
            slowest: sample,
            kernel_note: kernel
                .is_empty()
                .then(|| stack_note(call.kernel_stack, false)),
            user_note: user.is_empty().then(|| stack_note(call.user_stack, true)),
            kernel_stack: kernel.clone(),
            user_stack: user.clone(),
        };
        let mut grouped = self
            .grouped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        grouped.recorded += 1;
        grouped
            .groups
            .entry((call.slot, kernel, user))
            .and_modify(|g| g.absorb(&one))
            .or_insert(one);
    }
}

/// The reader's view of the processes: the mappings read for each, under the name it had.
#[derive(Default)]
struct Processes(HashMap<u32, (String, Arc<ProcessMaps>)>);

impl Processes {
    /// The mappings of `pid`, read now if it is new or has a new name (an exec), or if they
    /// miss one of `addresses` (a library loaded since). A new read replaces the last one only
    /// if it places as many of `addresses`: a process that is exiting has its address space
    /// half torn down, and a frame-pointer walk through a frame without one yields addresses
    /// that no mapping will ever hold.
    fn maps(&mut self, pid: u32, comm: &str, addresses: &[u64]) -> Option<Arc<ProcessMaps>> {
        let known = self
            .0
            .get(&pid)
            .filter(|(name, _)| name == comm)
            .map(|(_, maps)| Arc::clone(maps));
        if let Some(maps) = &known
            && maps.placed(addresses) == addresses.len()
        {
            return known;
        }
        let Some(read) = ProcessMaps::read(pid) else {
            return known;
        };
        if known
            .as_ref()
            .is_some_and(|old| old.placed(addresses) > read.placed(addresses))
        {
            return known;
        }
        let read = Arc::new(read);
        self.0.insert(pid, (comm.to_owned(), Arc::clone(&read)));
        Some(read)
    }
}

fn comm_of(raw: &[u8; 16]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    crate::output::printable(&String::from_utf8_lossy(&raw[..end]))
}

/// The instruction pointers of stack `id`, innermost first.
fn addresses(stacks: &StackTraceMap<MapData>, id: i32) -> Option<Vec<u64>> {
    let id = u32::try_from(id).ok()?;
    let trace = stacks.get(&id, 0).ok()?;
    Some(trace.frames().iter().map(|f| f.ip).collect())
}

/// The threads that read the slow calls as they arrive (the reader: records, mappings, stack
/// addresses) and symbolize and group them (the symbolizer), so that a slow symbolization never
/// delays the reading of a process's mappings.
pub struct Collector {
    stop: Arc<AtomicBool>,
    reader: JoinHandle<SlowMaps>,
    symbolizer: JoinHandle<()>,
    grouped: Arc<Mutex<Grouped>>,
    /// The calls the ring buffer had no room for, as the reader last read them.
    lost: Arc<AtomicU64>,
    /// `lost` at the last [`Collector::take`].
    lost_taken: u64,
    threshold: Duration,
    top: u32,
}

/// CLOCK_MONOTONIC in ns: the clock of `bpf_ktime_get_ns`, which stamps [`SlowCall::end_ns`].
#[must_use]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

impl Collector {
    /// Starts reading `maps` (from [`crate::bpf::Session::start_slow_collector`]); `syscalls`
    /// are the session's, in slot order; the report will show the `top` slowest groups; calls
    /// that returned before `since_ns` (CLOCK_MONOTONIC, [`monotonic_ns`]) are skipped: what a
    /// warm-up before a counter reset left in the ring buffer.
    #[must_use]
    pub fn spawn(
        maps: SlowMaps,
        syscalls: Vec<String>,
        threshold: Duration,
        top: u32,
        since_ns: u64,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let (send, receive) = std::sync::mpsc::channel::<Arrived>();
        let lost = Arc::new(AtomicU64::new(0));
        let lost_seen = Arc::clone(&lost);
        let reader = std::thread::spawn(move || {
            let mut maps = maps;
            let mut processes = Processes::default();
            loop {
                // Read the stop flag before draining, so the last drain follows the detach.
                let stopping = flag.load(Ordering::Acquire);
                read_records(&mut maps, &mut processes, since_ns, &send);
                if let Ok(per_cpu) = maps.lost.get(&0, 0) {
                    lost_seen.store(per_cpu.iter().sum(), Ordering::Release);
                }
                if stopping {
                    break;
                }
                wait_readable(&maps.ring, Duration::from_millis(50));
            }
            maps
        });
        let grouped = Arc::new(Mutex::new(Grouped::default()));
        let shared = Arc::clone(&grouped);
        let symbolizer = std::thread::spawn(move || {
            let mut groups = Groups {
                syscalls,
                symbols: Symbols::new(),
                kernel: HashMap::new(),
                user: HashMap::new(),
                unwinders: unwind::Unwinders::default(),
                unwound: HashMap::new(),
                grouped: shared,
            };
            groups.symbols.warm_up();
            for arrived in receive {
                groups.add(arrived);
            }
        });
        Self {
            stop,
            reader,
            symbolizer,
            grouped,
            lost,
            lost_taken: 0,
            threshold,
            top,
        }
    }

    /// The slow calls symbolized since the last take (or the start), and the ones the ring
    /// buffer had no room for meanwhile, keeping at most `keep` groups, the slowest (the rest
    /// are counted in [`SlowReport::groups_not_kept`]): `serve`'s flight recorder takes one per
    /// interval while the collector runs on. A call still being symbolized goes to the next.
    pub fn take(&mut self, keep: usize) -> SlowReport {
        let taken = std::mem::take(
            &mut *self
                .grouped
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let lost_now = self.lost.load(Ordering::Acquire);
        let lost = lost_now.saturating_sub(self.lost_taken);
        self.lost_taken = lost_now;
        let mut report = Self::report(self.threshold, self.top, taken, lost);
        if report.groups.len() > keep {
            report.groups_not_kept = (report.groups.len() - keep) as u64;
            report.groups.truncate(keep);
        }
        report
    }

    fn report(threshold: Duration, top: u32, grouped: Grouped, lost: u64) -> SlowReport {
        let mut list: Vec<SlowGroup> = grouped.groups.into_values().collect();
        sort_slowest_first(&mut list);
        SlowReport {
            threshold_ns: u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX),
            recorded: grouped.recorded,
            lost,
            top,
            groups: list,
            groups_not_kept: 0,
        }
    }

    /// Reads what is left (call it once the programs are detached) and returns the report:
    /// every call since the start, or since the last [`Collector::take`].
    #[must_use]
    pub fn finish(self) -> SlowReport {
        self.stop.store(true, Ordering::Release);
        let reader = self.reader.join().ok();
        let symbolizer = self.symbolizer.join();
        let grouped = std::mem::take(
            &mut *self
                .grouped
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let lost = reader
            .and_then(|maps| maps.lost.get(&0, 0).ok())
            .map_or(0, |per_cpu| per_cpu.iter().sum::<u64>())
            .saturating_sub(self.lost_taken);
        let report = Self::report(self.threshold, self.top, grouped, lost);
        if symbolizer.is_err() {
            // What it had grouped is kept; what came after is not, and that is said.
            crate::errln!(
                "warning: --slow: the symbolizer thread failed; the slow calls after its failure are not in the report"
            );
        }
        report
    }
}

/// Reads every record in the ring buffer: an announcement only has its process's mappings read;
/// a slow call (from `since_ns` on) goes to the symbolizer with its mappings and stacks.
fn read_records(
    maps: &mut SlowMaps,
    processes: &mut Processes,
    since_ns: u64,
    send: &std::sync::mpsc::Sender<Arrived>,
) {
    while let Some(item) = maps.ring.next() {
        if item.len() < size_of::<SlowCall>() {
            continue;
        }
        // SAFETY: the kernel wrote a whole SlowCall (checked length); read unaligned, as the
        // ring buffer only promises 8-byte alignment, which SlowCall needs anyway.
        let call: SlowCall = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
        let item_len = item.len();
        // A slow call's record carries its registers and stack after the call; the stack is
        // copied out (up to its copied length) before the record is released.
        let (regs, stack, holders) = if item_len >= size_of::<SlowCallStack>() {
            // SAFETY: a whole SlowCallStack (checked length) starts with the call and the
            // holders, plain integers; read unaligned.
            let holders: Holders =
                unsafe { std::ptr::read_unaligned(item[size_of::<SlowCall>()..].as_ptr().cast()) };
            let header = size_of::<SlowCall>() + size_of::<Holders>();
            let word = |i: usize| {
                let at = header + 8 * i;
                u64::from_ne_bytes(item[at..at + 8].try_into().unwrap_or_default())
            };
            let (ip, sp, bp, len) = (word(0), word(1), word(2), word(3));
            let start = header + 32;
            let len = (len as usize).min(unwind::USER_STACK_BYTES);
            ((ip, sp, bp), item[start..start + len].to_vec(), holders)
        } else {
            ((0, 0, 0), Vec::new(), Holders::default())
        };
        drop(item);
        let comm = comm_of(&call.comm);
        if call.slot == ANNOUNCE_SLOT {
            processes.maps(call.pid, &comm, &[]);
            continue;
        }
        if call.end_ns < since_ns {
            continue;
        }
        let kernel = addresses(&maps.stacks, call.kernel_stack);
        let user = addresses(&maps.stacks, call.user_stack);
        let process = processes.maps(call.pid, &comm, user.as_deref().unwrap_or_default());
        let _ = send.send(Arrived {
            call,
            comm,
            maps: process,
            kernel,
            user,
            regs,
            stack,
            holders,
        });
    }
}

/// Waits until the ring buffer has data, at most `limit`.
fn wait_readable(ring: &RingBuf<MapData>, limit: Duration) {
    let mut fd = libc::pollfd {
        fd: ring.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd for the duration of the call.
    unsafe { libc::poll(&raw mut fd, 1, ms) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(syscall: &str, slowest: u64, count: u64, user: &str) -> SlowGroup {
        SlowGroup {
            syscall: syscall.into(),
            count,
            total_ns: slowest * count,
            blocked_ns: slowest * count / 2,
            runnable_ns: 0,
            slowest: SlowSample {
                pid: 1,
                tid: 1,
                comm: "x".into(),
                duration_ns: slowest,
                on_cpu_ns: slowest / 2,
                blocked_ns: slowest / 2,
                runnable_ns: 0,
                ret: 1,
                runnable_by: Vec::new(),
                runnable_attributed_ns: 0,
            },
            kernel_stack: vec![],
            kernel_note: Some(stack_note(STACK_NOT_TAKEN, false)),
            user_stack: vec![Frame {
                function: user.into(),
                module: Some("/tmp/helper".into()),
            }],
            user_note: None,
        }
    }

    #[test]
    fn merging_runs_adds_up_the_same_stacks_and_keeps_the_slowest_first() {
        let mut a = SlowReport {
            threshold_ns: 10_000_000,
            recorded: 3,
            lost: 1,
            top: 1,
            groups: vec![group("read", 20_000_000, 3, "slow_path")],
            ..SlowReport::default()
        };
        let b = SlowReport {
            threshold_ns: 10_000_000,
            recorded: 2,
            lost: 0,
            top: 10,
            groups: vec![
                group("read", 30_000_000, 1, "slow_path"),
                group("read", 25_000_000, 1, "other"),
            ],
            ..SlowReport::default()
        };
        a.merge(&b);
        assert_eq!((a.recorded, a.lost, a.groups.len()), (5, 1, 2));
        assert_eq!(a.groups[0].count, 4);
        assert_eq!(a.groups[0].slowest.duration_ns, 30_000_000);
        assert_eq!(a.groups[1].user_stack[0].function, "other");
        let text = a.to_text();
        assert!(
            text.contains("ring buffer full: 1 slow calls not recorded"),
            "{text}"
        );
        assert!(text.contains("slow_path (helper)"), "{text}");
        assert!(text.contains("never left the CPU"), "{text}");
        let section = a.section("Slowest calls");
        assert_eq!(
            section
                .table
                .as_ref()
                .map(|t| t.to_markdown().lines().count()),
            Some(4),
            "a header, its rule and the two groups (top 10 after the merge)"
        );
    }

    #[test]
    fn stack_errors_are_named() {
        assert!(stack_note(-libc::EEXIST, true).contains("another stack"));
        assert!(stack_note(-libc::EFAULT, true).contains("could not be read"));
        assert!(stack_note(STACK_NOT_TAKEN, false).contains("never left the CPU"));
    }

    #[test]
    fn comm_stops_at_the_first_nul() {
        let mut raw = [0u8; 16];
        raw[..6].copy_from_slice(b"helper");
        assert_eq!(comm_of(&raw), "helper");
        assert_eq!(comm_of(&[b'a'; 16]), "a".repeat(16));
    }
}
