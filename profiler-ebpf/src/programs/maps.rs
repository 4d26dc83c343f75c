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

/// `START` where the per-thread state is in hash maps ([`per_thread_hash`]): an entry per
/// thread that made a traced call, created at its entry, deleted when the thread exits; sized
/// from the threads that can exist (one entry otherwise). `OFF_CPU_BY_TID` likewise.
#[map]
pub(crate) static START_BY_TID: HashMap<u32, ThreadStart> = HashMap::with_max_entries(1, 0);

/// See [`START_BY_TID`].
#[map]
pub(crate) static OFF_CPU_BY_TID: HashMap<u32, OffCpu> = HashMap::with_max_entries(1, 0);

/// Thread `tid`'s call in flight, from the array or the hash ([`per_thread_hash`]).
#[inline(always)]
pub(crate) fn thread_start(tid: u32) -> Option<*mut ThreadStart> {
    if per_thread_hash() {
        START_BY_TID.get_ptr_mut(tid)
    } else {
        START.get_ptr_mut(tid)
    }
}

/// [`thread_start`], creating the hash's entry: at the entry of a traced call.
#[inline(always)]
pub(crate) fn thread_start_created(tid: u32) -> Option<*mut ThreadStart> {
    if !per_thread_hash() {
        return START.get_ptr_mut(tid);
    }
    if let Some(start) = START_BY_TID.get_ptr_mut(tid) {
        return Some(start);
    }
    // BPF_NOEXIST: only this thread creates its own entry.
    START_BY_TID.insert(tid, ThreadStart::default(), 1).ok()?;
    START_BY_TID.get_ptr_mut(tid)
}

/// Thread `tid`'s off-CPU parts (`--off-cpu`), from the array or the hash.
#[inline(always)]
pub(crate) fn thread_off_cpu(tid: u32) -> Option<*mut OffCpu> {
    if per_thread_hash() {
        OFF_CPU_BY_TID.get_ptr_mut(tid)
    } else {
        OFF_CPU.get_ptr_mut(tid)
    }
}

/// [`thread_off_cpu`], creating the hash's entry: at the entry of a traced call.
#[inline(always)]
pub(crate) fn thread_off_cpu_created(tid: u32) -> Option<*mut OffCpu> {
    if !per_thread_hash() {
        return OFF_CPU.get_ptr_mut(tid);
    }
    if let Some(off) = OFF_CPU_BY_TID.get_ptr_mut(tid) {
        return Some(off);
    }
    OFF_CPU_BY_TID.insert(tid, OffCpu::default(), 1).ok()?;
    OFF_CPU_BY_TID.get_ptr_mut(tid)
}

/// `TRACKED` where the per-thread state is in hash maps ([`per_thread_hash`]): tgid → dense
/// index + 1, an entry per tracked process (user space writes the named ones,
/// `task_newtask` the forked), deleted when the process exits.
#[map]
pub(crate) static TRACKED_BY_TGID: HashMap<u32, u32> = HashMap::with_max_entries(1, 0);

/// Process `tgid`'s `TRACKED` value (dense index + 1, or 0), from the array or the hash.
#[inline(always)]
pub(crate) fn tracked(tgid: u32) -> u32 {
    let entry = if per_thread_hash() {
        TRACKED_BY_TGID.get_ptr_mut(tgid)
    } else {
        TRACKED.get_ptr_mut(tgid)
    };
    // SAFETY: a plain u32 load.
    entry.map_or(0, |index| unsafe { *index })
}

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
