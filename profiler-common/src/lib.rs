//! The types and the histogram arithmetic that the kernel programs (`profiler-ebpf`) and the
//! profiler share. Everything here is `#[repr(C)]`, plain old data and zero-initialisable, so a
//! map value means the same on both sides of the boundary.
#![cfg_attr(not(test), no_std)]
#![expect(
    clippy::inline_always,
    reason = "the eBPF programs call these on every traced syscall: inlined, not a BPF-to-BPF call"
)]
#![expect(
    clippy::pub_underscore_fields,
    reason = "the explicit padding of #[repr(C)] structs shared with the kernel, public so that \
              both sides build them with struct literals"
)]

/// How many syscalls one session can time at once (slots of the per-syscall maps).
pub const MAX_SYSCALL_SLOTS: usize = 32;

/// Size of the syscall-number → slot table; larger than any x86_64/aarch64 syscall number.
pub const MAX_SYSCALL_NR: u32 = 1024;

/// Cgroup ids `--cgroup` can trace: the named cgroups and every cgroup below them.
pub const MAX_CGROUP_IDS: u32 = 4096;

/// How many processes get their own per-process counters. The last index collects every process
/// beyond that (see [`OVERFLOW_PROCESS`]), so nothing is lost when a server forks more.
pub const MAX_PROCESSES: u32 = 1024;

/// The dense index whose per-process counters the kernel does not keep: user space derives them
/// as the totals minus every other process. The first process named is usually the only one, so
/// the hot path skips the per-process update in the common case.
pub const DERIVED_PROCESS: u32 = 0;

/// Dense indexes below this are handed out by user space (the processes it was asked to track);
/// the kernel's fork handler hands out the ones from here on, so the two never race.
pub const FIRST_FORKED_PROCESS: u32 = 128;

/// Dense process index shared by every tracked process past the first `MAX_PROCESSES - 1`.
pub const OVERFLOW_PROCESS: u32 = MAX_PROCESSES - 1;

/// Exact buckets below this value (`2 * SUB_BUCKETS`): a bucket per nanosecond.
pub const EXACT_BELOW: u64 = 2 * SUB_BUCKETS as u64;

/// log2 of the linear sub-buckets per power of two.
pub const SUB_BUCKET_BITS: u32 = 5;

/// Linear sub-buckets per power of two: each bucket is at most 1/32 of its value wide.
pub const SUB_BUCKETS: u32 = 1 << SUB_BUCKET_BITS;

/// The highest power of two covered: values up to `2^36 - 1` ns (68.7 s); larger are clamped.
pub const MAX_EXPONENT: u32 = 35;

/// Buckets of one [`LatencyBuckets`]: 64 exact ones, then 32 per power of two from 2^6 to 2^35.
pub const HIST_BUCKETS: usize =
    (EXACT_BELOW as usize) + ((MAX_EXPONENT - 5) * SUB_BUCKETS) as usize;

/// The largest value that lands in its own bucket; anything above is counted in the last one.
pub const MAX_TRACKABLE_VALUE: u64 = (1u64 << (MAX_EXPONENT + 1)) - 1;

/// Bit set in a [`SLOT_OF_NR`](SlotEntry) entry for syscalls whose return value is an event count
/// (epoll_wait, epoll_pwait, epoll_pwait2), which also fill the events-per-call histogram.
pub const SLOT_FLAG_EVENTS: u32 = 1 << 16;

/// Bit set in a slot-table entry for the syscalls that return twice, once in the child (clone,
/// clone3, fork, vfork): a child's return (0) has no entry of its own and is no lost call.
pub const SLOT_FLAG_FORKS: u32 = 1 << 17;

/// Whether an entry is of a syscall that returns in a new child too.
#[inline(always)]
#[must_use]
pub const fn entry_forks(entry: SlotEntry) -> bool {
    entry & SLOT_FLAG_FORKS != 0
}

/// A slot-table entry (ia32 table only) of a syscall that is not timed but counted as not
/// seen ([`DropReason::Ia32Socketcall`]); its slot reads as none.
pub const IA32_NOT_TIMED: SlotEntry = SLOT_FLAG_FORKS << 1;

/// The code segment selector of 32-bit (ia32) user code on x86_64 (`__USER32_CS`): what
/// `pt_regs.cs` holds during a 32-bit process's syscall.
pub const USER32_CS: u64 = 0x23;
/// Offset of `cs` in x86_64's `struct pt_regs` (user ABI, the same on every kernel).
pub const PT_REGS_CS: usize = 17 * 8;
/// Offset of `orig_ax` (the syscall number) in x86_64's `struct pt_regs`.
pub const PT_REGS_ORIG_AX: usize = 15 * 8;

/// An entry of the syscall-number → slot table: `slot + 1` in the low 16 bits (0 = not timed),
/// flags above.
pub type SlotEntry = u32;

/// The [`SlotEntry`] user space writes for `slot`; `events` for syscalls whose return value is
/// an event count.
#[inline(always)]
#[must_use]
pub const fn encode_slot_entry(slot: u32, events: bool) -> SlotEntry {
    (slot + 1) | if events { SLOT_FLAG_EVENTS } else { 0 }
}

/// The slot an entry names; `MAX_SYSCALL_SLOTS` or more (u32::MAX for entry 0) when the
/// syscall is not timed. The kernel's hot path uses this form: compared with
/// `MAX_SYSCALL_SLOTS` and then masked, it keeps 6.1's verifier sure of the bound, where the
/// `Option` of [`slot_of_entry`] let LLVM drop the mask and 6.1 refused the program
/// ("R0 unbounded memory access").
#[inline(always)]
#[must_use]
pub const fn entry_slot(entry: SlotEntry) -> u32 {
    (entry & 0xffff).wrapping_sub(1)
}

/// The slot an entry names, or `None` for a syscall that is not timed (entry 0).
#[inline(always)]
#[must_use]
pub const fn slot_of_entry(entry: SlotEntry) -> Option<u32> {
    match entry_slot(entry) {
        slot if slot < MAX_SYSCALL_SLOTS as u32 => Some(slot),
        _ => None,
    }
}

/// Whether an entry's syscall also fills the events-per-call histogram.
#[inline(always)]
#[must_use]
pub const fn entry_counts_events(entry: SlotEntry) -> bool {
    entry & SLOT_FLAG_EVENTS != 0
}

/// The dense index of the fork numbered `taken` (from 0) in a session, the forks past the
/// table sharing [`OVERFLOW_PROCESS`].
#[inline(always)]
#[must_use]
pub const fn forked_process_index(taken: u64) -> u32 {
    let index = FIRST_FORKED_PROCESS as u64 + taken;
    if index < OVERFLOW_PROCESS as u64 {
        index as u32
    } else {
        OVERFLOW_PROCESS
    }
}

/// The dense indexes of a session's forked processes after `forks` forks: user space reads
/// their counters and pids over this range.
#[must_use]
pub const fn forked_process_indexes(forks: u64) -> core::ops::Range<u32> {
    FIRST_FORKED_PROCESS..forked_process_index(forks)
}

/// The common header every tracepoint record starts with (`common_type`, `common_flags`,
/// `common_preempt_count`, `common_pid`); programs may not read it, and no field we read lies in it.
pub const RECORD_HEADER: u32 = 8;

/// How many bytes of a tracepoint record the programs can read a field from: a field is read
/// at a constant offset (the verifier allows no other ctx access), so the kernel side has one
/// read per position of this window and the verifier, which knows the offset from the frozen
/// `.rodata`, keeps only the one that matches.
pub const RECORD_WINDOW: u32 = 72;

/// What user space sets before load, as one read-only global (`CONFIG`, frozen: the verifier
/// folds the options that are off out of the hot path), the way libbpf-tools set `rodata`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// `--slow`: calls at least this long (ns) go to user space with their stacks; 0 for off.
    pub slow_ns: u64,
    /// The syscall the benchmark's raw minimal timer times (`u64::MAX` for none).
    pub raw_timed_nr: u64,
    /// The profiler's own process, never traced (0 for none: the tests count their own calls).
    pub self_tgid: u32,
    /// The loader's own process, for the context probe.
    pub probe_tgid: u32,
    /// 1 for `--all`.
    pub trace_all: u8,
    /// 1 for `--cgroup`.
    pub trace_cgroups: u8,
    /// 1 for `--all --by-cgroup`.
    pub by_cgroup: u8,
    /// 1 for `--off-cpu` (and `--slow`).
    pub split_off_cpu: u8,
    /// Explicit padding.
    pub _pad: u32,
}

impl Config {
    /// Every option off.
    pub const OFF: Self = Self {
        slow_ns: 0,
        raw_timed_nr: u64::MAX,
        self_tgid: 0,
        probe_tgid: 0,
        trace_all: 0,
        trace_cgroups: 0,
        by_cgroup: 0,
        split_off_cpu: 0,
        _pad: 0,
    };
}

/// Where the fields the programs read lie on *this* kernel, found by the loader in the
/// tracepoints' `format` files and the kernel's BTF, and handed to the programs as one read-only
/// global (`LAYOUT`). Layouts differ between kernels: `__syscall_nr` is at 8 on 6.1 and 6.18 but
/// at 12 on 6.1-rt (whose common header has `common_preempt_lazy_count`), and
/// `sched_process_exit` has `group_dead` only from 6.16 on.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordLayout {
    /// `syscalls:sys_exit_*`: offset of `int __syscall_nr`.
    pub sys_exit_nr: u32,
    /// `syscalls:sys_exit_*`: offset of `long ret`.
    pub sys_exit_ret: u32,
    /// `task:task_newtask`: offset of `pid_t pid` (the child).
    pub newtask_pid: u32,
    /// `task:task_newtask`: offset of `clone_flags` (8 bytes).
    pub newtask_clone_flags: u32,
    /// `sched:sched_process_exit`: offset of `bool group_dead`, or [`FIELD_ABSENT`] on kernels
    /// before 6.16, which then use `task_signal` and `signal_live`.
    pub process_exit_group_dead: u32,
    /// BTF: byte offset of `signal` in `struct task_struct` (used when `group_dead` is absent).
    pub task_signal: u32,
    /// BTF: byte offset of `live` (an `atomic_t`) in `struct signal_struct`.
    pub signal_live: u32,
    /// `sched:sched_switch`: offset of `long prev_state` (the previous task is the current one).
    pub switch_prev_state: u32,
    /// `sched:sched_switch`: offset of `pid_t next_pid` (64 on 6.1-rt, hence the 72-byte window).
    pub switch_next_pid: u32,
    /// `sched:sched_wakeup`: offset of `pid_t pid` (the task woken).
    pub wakeup_pid: u32,
    /// Explicit padding.
    pub _pad: u32,
}

/// A [`RecordLayout`] offset for a field this kernel's record does not have (no field lies in
/// the [`RECORD_HEADER`], so 0 is free).
pub const FIELD_ABSENT: u32 = 0;

/// The errno classes counted per syscall, in the order of [`SyscallStats::errors`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrnoClass {
    /// EAGAIN / EWOULDBLOCK (11): nothing ready, the non-blocking path.
    Again = 0,
    /// EINTR (4): interrupted by a signal.
    Intr = 1,
    /// ECONNRESET (104): the peer reset the connection.
    ConnReset = 2,
    /// EPIPE (32): write to a connection the peer closed.
    Pipe = 3,
    /// EBADF (9): not an open descriptor.
    BadFd = 4,
    /// Any other errno.
    Other = 5,
    /// The kernel's internal restart codes (ERESTARTSYS 512, ERESTARTNOINTR 513,
    /// ERESTARTNOHAND 514, ERESTART_RESTARTBLOCK 516): the call was interrupted by a signal,
    /// and what the program sees is decided after `sys_exit`, at signal delivery: EINTR, or a
    /// restart it never sees (SA_RESTART, no handler), which enters the syscall again.
    Restart = 6,
}

/// Number of [`ErrnoClass`] values.
pub const ERRNO_CLASSES: usize = 7;

impl ErrnoClass {
    /// Every class, in array order.
    pub const ALL: [Self; ERRNO_CLASSES] = [
        Self::Again,
        Self::Intr,
        Self::ConnReset,
        Self::Pipe,
        Self::BadFd,
        Self::Other,
        Self::Restart,
    ];

    /// The class of a positive errno value. `sys_exit` sees the kernel's internal restart
    /// codes before signal delivery turns them into EINTR or a restart: they are their own
    /// class, [`ErrnoClass::Restart`], not EINTR, which a program may never have seen.
    #[inline(always)]
    #[must_use]
    pub const fn of(errno: u64) -> Self {
        match errno {
            11 => Self::Again,
            4 => Self::Intr,
            512 | 513 | 514 | 516 => Self::Restart,
            104 => Self::ConnReset,
            32 => Self::Pipe,
            9 => Self::BadFd,
            _ => Self::Other,
        }
    }

    /// The errno's symbolic name, as `strace` prints it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Again => "EAGAIN",
            Self::Intr => "EINTR",
            Self::ConnReset => "ECONNRESET",
            Self::Pipe => "EPIPE",
            Self::BadFd => "EBADF",
            Self::Other => "other",
            Self::Restart => "ERESTART",
        }
    }
}

/// Why an event could not be recorded; the index into the `DROPPED` counters.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// A syscall exit without its entry: the programs were attached (or the process was tracked)
    /// while the call was already in flight.
    NoStart = 0,
    /// A thread or process id beyond the per-thread maps (sized from `kernel.pid_max` at load).
    IdOutOfRange = 1,
    /// A syscall number with no slot (cannot happen unless the slot table was changed under us).
    NoSlot = 2,
    /// A fork beyond [`MAX_PROCESSES`]: counted together under [`OVERFLOW_PROCESS`], not lost.
    ProcessTableFull = 3,
    /// `--by-cgroup`: a cgroup beyond [`MAX_CGROUP_IDS`]: its calls are in the totals but in
    /// no cgroup's row.
    CgroupTableFull = 4,
    /// A 32-bit process's socketcall(2), not timed: a traced syscall (accept) has no ia32
    /// number of its own there, and socketcall multiplexes the socket calls.
    Ia32Socketcall = 5,
}

/// Number of [`DropReason`] values.
pub const DROP_REASONS: usize = 6;

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [Self; DROP_REASONS] = [
        Self::NoStart,
        Self::IdOutOfRange,
        Self::NoSlot,
        Self::ProcessTableFull,
        Self::CgroupTableFull,
        Self::Ia32Socketcall,
    ];

    /// Short description for reports.
    #[must_use]
    pub const fn describe(self) -> &'static str {
        match self {
            Self::NoStart => "exit without entry (call in flight at attach)",
            Self::IdOutOfRange => "thread id beyond pid_max-sized map",
            Self::NoSlot => "syscall number without a slot",
            Self::ProcessTableFull => "process table full (counted under 'other processes')",
            Self::CgroupTableFull => "cgroup table full (in the totals, in no cgroup's row)",
            Self::Ia32Socketcall => {
                "socketcall(2) of a 32-bit process, not timed (accept has no ia32 syscall of its own)"
            }
        }
    }

    /// Whether events of this kind are missing from the statistics (as opposed to only being
    /// attributed coarsely).
    #[must_use]
    pub const fn loses_events(self) -> bool {
        !matches!(self, Self::ProcessTableFull | Self::CgroupTableFull)
    }
}

/// Per-syscall statistics of one CPU (a `PerCpuArray` value, one per slot).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallStats {
    /// Completed calls (successful or not).
    pub calls: u64,
    /// Sum of the latencies of all calls, in ns.
    pub total_ns: u64,
    /// Fastest call, in ns (meaningless while `calls == 0`).
    pub min_ns: u64,
    /// Slowest call, in ns.
    pub max_ns: u64,
    /// Failed calls by [`ErrnoClass`].
    pub errors: [u64; ERRNO_CLASSES],
    /// Exits of this syscall that had no entry timestamp ([`DropReason::NoStart`]).
    pub dropped: u64,
    /// With `--off-cpu`: the calls' time switched out and not runnable (blocked), ns.
    pub blocked_ns: u64,
    /// With `--off-cpu`: the calls' time runnable but not running, ns.
    pub runnable_ns: u64,
}

/// A log-linear histogram of one CPU: [`HIST_BUCKETS`] counters indexed by [`bucket_index`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyBuckets {
    /// Count per bucket.
    pub counts: [u64; HIST_BUCKETS],
}

impl Default for LatencyBuckets {
    fn default() -> Self {
        Self {
            counts: [0; HIST_BUCKETS],
        }
    }
}

/// The entry of a syscall in flight on one thread (`START` map, indexed by thread id).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadStart {
    /// `bpf_ktime_get_ns()` at entry; 0 when no traced call is in flight.
    pub start_ns: u64,
    /// Dense index of the thread's process (see `TRACKED`), or [`NO_PROCESS`].
    pub process: u32,
    /// 0 for a call timed by the syscall tracepoints; for a 32-bit (ia32) call, timed by the
    /// raw `sys_enter`/`sys_exit` programs, its slot-table entry (never 0).
    pub compat_entry: SlotEntry,
}

/// Where a thread inside a traced call spends its time off the CPU (`OFF_CPU` map, indexed by
/// thread id, with `--off-cpu`): reset at entry, split at each `sched_switch` and
/// `sched_wakeup`, read at exit, where the call's on-CPU time is its latency minus both parts.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffCpu {
    /// When it left the CPU or was woken (the start of the current off-CPU part); 0 while on it.
    pub since_ns: u64,
    /// Time switched out voluntarily and not yet woken (sleeping, waiting), ns.
    pub blocked_ns: u64,
    /// Time runnable but not running (preempted, or woken and waiting for a CPU), ns.
    pub runnable_ns: u64,
    /// When it last left the CPU (the start of the whole switched-out interval, which
    /// `since_ns` splits at the wakeup); `--slow` measures the interval from it.
    pub out_ns: u64,
    /// `--slow`: the longest switched-out interval of the call so far, ns (0: none yet).
    pub longest_ns: u64,
    /// [`OFF_BLOCKED`] or [`OFF_RUNNABLE`]: what the current off-CPU part is.
    pub state: u32,
    /// `--slow`: the kernel stack id (or the helper's negative error) taken when the thread
    /// last left the CPU.
    pub pending_stack: i32,
    /// `--slow`: the kernel stack id of the longest interval (meaningful once `longest_ns` > 0).
    pub longest_stack: i32,
    /// Explicit padding.
    pub _pad: u32,
}

/// `--slow`: one traced call that lasted at least the threshold, as the exit program sends it
/// through the `SLOW_CALLS` ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowCall {
    /// The call's latency, ns.
    pub duration_ns: u64,
    /// Its time switched out and not runnable, ns.
    pub blocked_ns: u64,
    /// Its time runnable but not running, ns.
    pub runnable_ns: u64,
    /// The return value (a negative errno on failure).
    pub ret: i64,
    /// `bpf_ktime_get_ns()` when it returned.
    pub end_ns: u64,
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The syscall's slot.
    pub slot: u32,
    /// Kernel stack id in `STACKS`, taken where the call waited longest (its longest
    /// switched-out interval); [`STACK_NOT_TAKEN`] when it never left the CPU; another
    /// negative value is the helper's error (-EEXIST: a different stack held its bucket).
    pub kernel_stack: i32,
    /// User stack id in `STACKS` at the call's return, or the helper's negative error.
    pub user_stack: i32,
    /// Explicit padding.
    pub _pad: u32,
    /// The thread's name (`comm`), NUL-padded.
    pub comm: [u8; 16],
}

/// [`SlowCall::slot`] of a record that is no call but an announcement: this process (new, or
/// under a new name since an exec) has a traced call off the CPU now, so user space should read
/// its mappings while it still runs, before a slow call's record and the process's exit race.
pub const ANNOUNCE_SLOT: u32 = u32::MAX;

/// [`SlowCall::kernel_stack`] of a call that never left the CPU: no switch-out to take a
/// kernel stack at.
pub const STACK_NOT_TAKEN: i32 = i32::MIN;

/// The byte size of the `SLOW_CALLS` ring buffer with `--slow` (a power of two of pages):
/// about 11900 records between two reads of user space.
pub const SLOW_RING_BYTES: u32 = 1 << 20;

/// Entries of the `STACKS` stack trace map with `--slow` (each 127 frames, 1 KiB).
pub const SLOW_STACK_ENTRIES: u32 = 8192;

// The sizes both sides agree on (no implicit padding in either).
const _: () = assert!(core::mem::size_of::<SlowCall>() == 80);
const _: () = assert!(core::mem::size_of::<OffCpu>() == 56);

/// [`OffCpu::state`]: switched out while sleeping or waiting.
pub const OFF_BLOCKED: u32 = 1;
/// [`OffCpu::state`]: preempted, or woken and waiting in the run queue.
pub const OFF_RUNNABLE: u32 = 2;

/// Whether a task switched out with this `sched_switch` `prev_state` is still runnable: the
/// tracepoint reports 0 (TASK_RUNNING, a yield) or TASK_REPORT_MAX (0x100, preempted) for a
/// task that stays in the run queue, and one bit of 0x01..=0x80 for a sleep state.
#[must_use]
pub const fn switched_out_runnable(prev_state: u64) -> bool {
    prev_state.trailing_zeros() >= 8
}

/// [`ThreadStart::process`] of a call timed under `--all` in a process nobody named.
pub const NO_PROCESS: u32 = u32::MAX;

/// Everything the exit program updates for one syscall on one CPU, in one map value so the hot
/// path does a single lookup for both.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallSlot {
    /// Counters.
    pub stats: SyscallStats,
    /// Latency histogram, in ns.
    pub latency: LatencyBuckets,
    /// With `--off-cpu`: histogram of each call's on-CPU time (latency minus off-CPU), ns.
    pub on_cpu: LatencyBuckets,
}

/// One row's counters on one CPU, indexed by slot. A row is a tracked process (`PROCESSES`, the
/// multi-process server's per-worker table) or a cgroup (`CGROUP_STATS`, `--by-cgroup`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowStats {
    /// Completed calls per slot.
    pub calls: [u64; MAX_SYSCALL_SLOTS],
    /// Failed calls per slot.
    pub errors: [u64; MAX_SYSCALL_SLOTS],
    /// Total latency per slot, in ns.
    pub total_ns: [u64; MAX_SYSCALL_SLOTS],
}

impl Default for RowStats {
    fn default() -> Self {
        Self {
            calls: [0; MAX_SYSCALL_SLOTS],
            errors: [0; MAX_SYSCALL_SLOTS],
            total_ns: [0; MAX_SYSCALL_SLOTS],
        }
    }
}

/// The bucket of `value` (ns, or events): exact below [`EXACT_BELOW`], then 32 linear buckets per
/// power of two; values above [`MAX_TRACKABLE_VALUE`] share the last bucket. Loop-free, so the
/// verifier sees a straight line; the result is always `< HIST_BUCKETS`.
#[inline(always)]
#[must_use]
pub const fn bucket_index(value: u64) -> u32 {
    let v = if value > MAX_TRACKABLE_VALUE {
        MAX_TRACKABLE_VALUE
    } else {
        value
    };
    if v < EXACT_BELOW {
        return v as u32;
    }
    let exp = log2_floor(v); // 6..=35
    let sub = ((v >> (exp - SUB_BUCKET_BITS)) as u32) & (SUB_BUCKETS - 1);
    EXACT_BELOW as u32 + (exp - 6) * SUB_BUCKETS + sub
}

/// floor(log2(v)) for v > 0, by a fixed sequence of halvings (BPF has no count-leading-zeros).
#[inline(always)]
#[must_use]
pub const fn log2_floor(v: u64) -> u32 {
    let mut x = v;
    let mut r = 0;
    if x >= 1 << 32 {
        x >>= 32;
        r += 32;
    }
    if x >= 1 << 16 {
        x >>= 16;
        r += 16;
    }
    if x >= 1 << 8 {
        x >>= 8;
        r += 8;
    }
    if x >= 1 << 4 {
        x >>= 4;
        r += 4;
    }
    if x >= 1 << 2 {
        x >>= 2;
        r += 2;
    }
    if x >= 1 << 1 {
        r += 1;
    }
    r
}

/// The smallest value that lands in bucket `index`.
#[must_use]
pub const fn bucket_lower_bound(index: u32) -> u64 {
    if (index as u64) < EXACT_BELOW {
        return index as u64;
    }
    let rel = index - EXACT_BELOW as u32;
    let exp = 6 + rel / SUB_BUCKETS;
    let sub = (rel % SUB_BUCKETS) as u64;
    (SUB_BUCKETS as u64 + sub) << (exp - SUB_BUCKET_BITS)
}

/// The largest value that lands in bucket `index` (inclusive).
#[must_use]
pub const fn bucket_upper_bound(index: u32) -> u64 {
    if index as usize + 1 >= HIST_BUCKETS {
        return MAX_TRACKABLE_VALUE;
    }
    bucket_lower_bound(index + 1) - 1
}

#[cfg(feature = "user")]
mod pod {
    use super::{
        Config, LatencyBuckets, OffCpu, RecordLayout, RowStats, SlowCall, SyscallSlot,
        SyscallStats, ThreadStart,
    };

    // SAFETY: all three are #[repr(C)] structs of u64 fields and arrays, with no padding and no
    // invalid bit patterns.
    unsafe impl aya::Pod for SyscallStats {}
    // SAFETY: as above.
    unsafe impl aya::Pod for LatencyBuckets {}
    // SAFETY: as above.
    unsafe impl aya::Pod for RowStats {}
    // SAFETY: as above (three such structs, all multiples of 8 bytes).
    unsafe impl aya::Pod for SyscallSlot {}
    // SAFETY: five u64, then four 4-byte fields (one explicit padding): no implicit padding.
    unsafe impl aya::Pod for OffCpu {}
    // SAFETY: five u64, six 4-byte fields (one explicit padding), 16 bytes: no implicit
    // padding, any bit pattern valid.
    unsafe impl aya::Pod for SlowCall {}
    // SAFETY: u64 + u32 + explicit u32 padding: no implicit padding, any bit pattern valid.
    unsafe impl aya::Pod for ThreadStart {}
    // SAFETY: u32 fields only: no padding, any bit pattern valid.
    unsafe impl aya::Pod for RecordLayout {}
    // SAFETY: integer fields with explicit padding, any bit pattern valid.
    unsafe impl aya::Pod for Config {}
}

#[cfg(test)]
mod tests {

    #[test]
    fn slot_entries_round_trip_and_zero_means_untimed() {
        for slot in [0, 1, MAX_SYSCALL_SLOTS as u32 - 1] {
            for events in [false, true] {
                let entry = encode_slot_entry(slot, events);
                assert_eq!(slot_of_entry(entry), Some(slot));
                assert_eq!(entry_counts_events(entry), events);
            }
        }
        assert_eq!(slot_of_entry(0), None);
    }

    #[test]
    fn forked_indexes_start_after_the_named_and_end_in_the_overflow() {
        assert_eq!(forked_process_index(0), FIRST_FORKED_PROCESS);
        assert_eq!(
            forked_process_indexes(0),
            FIRST_FORKED_PROCESS..FIRST_FORKED_PROCESS
        );
        assert_eq!(forked_process_indexes(2).len(), 2);
        assert_eq!(forked_process_index(u64::MAX / 2), OVERFLOW_PROCESS);
        assert_eq!(forked_process_indexes(u64::MAX / 2).end, OVERFLOW_PROCESS);
    }

    use super::*;

    #[test]
    fn bucket_count_covers_sixty_seconds() {
        assert_eq!(HIST_BUCKETS, 1024);
        const { assert!(MAX_TRACKABLE_VALUE >= 60_000_000_000) };
        assert_eq!(bucket_index(MAX_TRACKABLE_VALUE) as usize, HIST_BUCKETS - 1);
        assert_eq!(bucket_index(u64::MAX) as usize, HIST_BUCKETS - 1);
    }

    #[test]
    fn small_values_are_exact() {
        for v in 0..EXACT_BELOW {
            assert_eq!(u64::from(bucket_index(v)), v);
            assert_eq!(bucket_lower_bound(v as u32), v);
            assert_eq!(bucket_upper_bound(v as u32), v);
        }
    }

    #[test]
    fn every_value_lies_within_its_bucket_bounds() {
        // Every power of two, its neighbours, and a spread of values in between.
        let mut values = Vec::new();
        for exp in 0..40u32 {
            let p = 1u64 << exp;
            for v in [p - 1, p, p + 1, p + p / 3, p + p / 2, 2 * p - 1] {
                values.push(v);
            }
        }
        for &v in &values {
            let b = bucket_index(v);
            let clamped = v.min(MAX_TRACKABLE_VALUE);
            assert!(
                bucket_lower_bound(b) <= clamped && clamped <= bucket_upper_bound(b),
                "value {v} bucket {b} [{}, {}]",
                bucket_lower_bound(b),
                bucket_upper_bound(b)
            );
        }
    }

    #[test]
    fn buckets_are_contiguous_and_at_most_one_32nd_wide() {
        for b in 0..HIST_BUCKETS as u32 - 1 {
            assert_eq!(bucket_upper_bound(b) + 1, bucket_lower_bound(b + 1));
            let lo = bucket_lower_bound(b);
            let width = bucket_upper_bound(b) - lo + 1;
            assert!(
                width * 32 <= lo.max(32),
                "bucket {b} at {lo} is {width} wide"
            );
        }
    }

    #[test]
    fn log2_floor_matches_leading_zeros() {
        for exp in 0..64u32 {
            let p = 1u64 << exp;
            assert_eq!(log2_floor(p), exp);
            assert_eq!(log2_floor(p | (p - 1)), exp);
        }
    }

    #[test]
    fn errno_classes() {
        assert_eq!(ErrnoClass::of(11), ErrnoClass::Again);
        assert_eq!(ErrnoClass::of(4), ErrnoClass::Intr);
        // The kernel's restart codes: EINTR or a restart, decided after sys_exit.
        for restart in [512, 513, 514, 516] {
            assert_eq!(ErrnoClass::of(restart), ErrnoClass::Restart, "{restart}");
        }
        assert_eq!(
            ErrnoClass::of(515),
            ErrnoClass::Other,
            "ENOIOCTLCMD is no interruption"
        );
        assert_eq!(ErrnoClass::of(104), ErrnoClass::ConnReset);
        assert_eq!(ErrnoClass::of(2), ErrnoClass::Other);
    }
}
