//! The counters of a syscall (per slot, per CPU) and of a row (a process or a cgroup), and the
//! classes they count errors and drops by.

use crate::{LatencyBuckets, MAX_SYSCALL_NR, MAX_SYSCALL_SLOTS};

/// Cgroup ids `--cgroup` can trace: the named cgroups and every cgroup below them.
pub const MAX_CGROUP_IDS: u32 = 4096;

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
    /// ENOENT (2): no such file or directory, the common failure of openat, stat and access
    /// (a program probing paths).
    NoEnt = 7,
}

/// Number of [`ErrnoClass`] values.
pub const ERRNO_CLASSES: usize = 8;

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
        Self::NoEnt,
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
            2 => Self::NoEnt,
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
            Self::NoEnt => "ENOENT",
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
    /// A thread or process id beyond the per-thread maps: arrays sized from `kernel.pid_max` at
    /// load, or hash maps that are full.
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
            Self::IdOutOfRange => {
                "thread id beyond the per-thread maps (arrays sized by pid_max at the start, or hash maps full)"
            }
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
    /// Where the slot histograms its return value (`EVENTS`: epoll's events, the read/write
    /// family's bytes), the sum of the successful calls' return values.
    pub returned: u64,
    /// Where the slot is sized ([`entry_sized`](crate::entry_sized)), the successful calls
    /// that transferred fewer bytes than asked.
    pub short: u64,
}

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

// SAFETY: a #[repr(C)] struct of u64 fields and arrays: no padding, no invalid bit patterns.
pod!(SyscallStats);

// SAFETY: a #[repr(C)] struct of u64 arrays: no padding, no invalid bit patterns.
pod!(RowStats);

// SAFETY: three #[repr(C)] structs of u64, all multiples of 8 bytes: no padding.
pod!(SyscallSlot);

/// Keys of the `EVERY` map: a 64-bit syscall's number, or [`MAX_SYSCALL_NR`] + an ia32 one.
pub const EVERY_KEYS: u32 = 2 * MAX_SYSCALL_NR;

/// The `EVERY` key of syscall `nr` of the 64-bit table, or of the ia32 table when `ia32`;
/// `None` for a number beyond the tables.
#[inline(always)]
#[must_use]
pub const fn every_key(nr: u64, ia32: bool) -> Option<u32> {
    if nr >= MAX_SYSCALL_NR as u64 {
        return None;
    }
    Some(nr as u32 + if ia32 { MAX_SYSCALL_NR } else { 0 })
}

/// Every call of the traced processes, timed or not, per syscall number and CPU (the `EVERY`
/// map): what the table leaves out is the rest of their syscall time.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OtherCalls {
    /// Completed calls.
    pub calls: u64,
    /// Failed calls.
    pub errors: u64,
    /// Their time from entry to exit, ns.
    pub total_ns: u64,
}

// SAFETY: a #[repr(C)] struct of u64 fields: no padding, no invalid bit patterns.
pod!(OtherCalls);
