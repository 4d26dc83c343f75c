//! `--off-cpu`: a traced thread's time off the CPU, kept by the scheduler programs.

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

// Its size, as both sides agree on it (no implicit padding in either).
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

// SAFETY: five u64, then four 4-byte fields (one explicit padding): no implicit padding.
pod!(OffCpu);
