//! The maps every program shares: which processes are traced, the call in flight per thread,
//! the slot tables, the per-slot and per-process counters, and what could not be recorded.

use super::*;

/// Tracked processes: `TRACKED[tgid]` is the process's dense index + 1, or 0. Sized from
/// `kernel.pid_max` at load.
#[map]
pub(crate) static TRACKED: Array<u32> = Array::with_max_entries(1, 0);

/// The syscall in flight per thread (entry time and process index); sized from `pid_max`.
#[map]
pub(crate) static START: Array<ThreadStart> = Array::with_max_entries(1, 0);

/// With `--off-cpu`, per thread inside a traced call: its off-CPU parts ([`OffCpu`]); sized
/// from `pid_max` then, else one entry.
#[map]
pub(crate) static OFF_CPU: Array<OffCpu> = Array::with_max_entries(1, 0);

/// Syscall number → [`SlotEntry`], filled by user space.
#[map]
pub(crate) static SLOT_OF_NR: Array<SlotEntry> = Array::with_max_entries(MAX_SYSCALL_NR, 0);

/// The same for 32-bit (ia32) syscall numbers, which `compat_enter` sees: the traced
/// syscalls that exist in the ia32 table, under the same slots.
#[map]
pub(crate) static IA32_SLOT_OF_NR: Array<SlotEntry> = Array::with_max_entries(MAX_SYSCALL_NR, 0);

/// Every call of the traced processes by [`every_key`] (`every_enter`/`every_exit`).
#[map]
pub(crate) static EVERY: PerCpuArray<OtherCalls> = PerCpuArray::with_max_entries(EVERY_KEYS, 0);

/// Per slot: counters and latency histogram.
#[map]
pub(crate) static SYSCALLS: PerCpuArray<SyscallSlot> =
    PerCpuArray::with_max_entries(MAX_SYSCALL_SLOTS as u32, 0);

/// Per slot: histogram of the events returned per call (epoll_wait and friends only).
#[map]
pub(crate) static EVENTS: PerCpuArray<LatencyBuckets> =
    PerCpuArray::with_max_entries(MAX_SYSCALL_SLOTS as u32, 0);

/// Per tracked process (dense index): calls, errors and time per slot.
#[map]
pub(crate) static PROCESSES: PerCpuArray<RowStats> =
    PerCpuArray::with_max_entries(MAX_PROCESSES, 0);

/// Dense index → tgid, so user space can name the processes the kernel started tracking.
#[map]
pub(crate) static PROCESS_PIDS: Array<u32> = Array::with_max_entries(MAX_PROCESSES, 0);

/// Dense indexes handed out to forked processes so far (entry 0), counted from
/// `FIRST_FORKED_PROCESS`.
#[map]
pub(crate) static NEXT_PROCESS: Array<u64> = Array::with_max_entries(1, 0);

/// Entry 0 is set to 1 by user space once every program is attached. Exit programs are
/// attached before entry programs, so until then an exit without an entry is a call that began
/// before tracing did, not a lost one; from then on at most one per thread can be.
#[map]
pub(crate) static ARMED: Array<u32> = Array::with_max_entries(1, 0);

/// Events that could not be recorded, by [`DropReason`].
#[map]
pub(crate) static DROPPED: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_REASONS as u32, 0);

#[inline(always)]
pub(crate) fn count_drop(reason: DropReason) {
    if let Some(counter) = DROPPED.get_ptr_mut(reason as u32) {
        // SAFETY: per-CPU value, and tracepoint programs run with preemption disabled.
        unsafe { *counter += 1 };
    }
}
