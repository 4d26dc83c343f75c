//! Process tracking: the dense process indexes (named, forked, overflow) and a thread's call in
//! flight.

use crate::SlotEntry;
#[cfg(doc)]
use crate::{MAX_SYSCALL_NR, OtherCalls, every_key};

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
    /// Every call of a traced process ([`EVERY`](OtherCalls)): `bpf_ktime_get_ns()` at entry,
    /// 0 when none is in flight.
    pub every_start_ns: u64,
    /// Its [`every_key`]: the syscall number, the ia32 table's above [`MAX_SYSCALL_NR`].
    pub every_key: u32,
    /// Explicit padding.
    pub _pad: u32,
    /// The size the call asked to transfer (its third argument) where its slot is sized
    /// ([`entry_sized`](crate::entry_sized)), else 0.
    pub requested: u64,
}

/// [`ThreadStart::process`] of a call timed under `--all` in a process nobody named.
pub const NO_PROCESS: u32 = u32::MAX;

// SAFETY: u64 + u32 + u32, u64 + u32 + explicit u32 padding, u64: no implicit padding, any
// bit pattern valid.
pod!(ThreadStart);
