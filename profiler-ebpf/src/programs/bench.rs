//! For `profiler bench overhead` alone: the limits the profiler is measured against, on each
//! attach point (per-syscall tracepoints, the raw sys_enter/sys_exit, fentry/fexit).

use crate::programs::*;

/// Does nothing: attached in place of the real programs, it measures the floor cost of the
/// tracepoint mechanism itself.
#[tracepoint]
pub fn noop(_ctx: TracePointContext) -> u32 {
    0
}

/// The same on the raw tracepoints, which run for every syscall of every process.
#[raw_tracepoint]
pub fn raw_noop(_ctx: RawTracePointContext) -> u32 {
    0
}

/// The minimal timer's entry time per thread (sized from `pid_max`).
#[map]
pub(crate) static TIMER_START: Array<u64> = Array::with_max_entries(1, 0);

/// The minimal timer's total, the one per-CPU counter it keeps.
#[map]
pub(crate) static TIMER_TOTAL: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// What every syscall timer must do at entry: read the clock, store it for the thread.
#[inline(always)]
pub(crate) fn timer_start() {
    let tid = bpf_get_current_pid_tgid() as u32;
    if let Some(start) = TIMER_START.get_ptr_mut(tid) {
        // SAFETY: this thread's own entry.
        unsafe { *start = bpf_ktime_get_ns() };
    }
}

/// And at exit: read the clock again, add the difference to a per-CPU counter.
#[inline(always)]
pub(crate) fn timer_stop() {
    // SAFETY: a plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(start) = TIMER_START.get_ptr_mut(tid) else {
        return;
    };
    // SAFETY: this thread's own entry; the total is per-CPU, preemption disabled.
    unsafe {
        if *start != 0 {
            if let Some(total) = TIMER_TOTAL.get_ptr_mut(0) {
                *total += now - *start;
            }
            *start = 0;
        }
    }
}

/// The minimal timer on one syscall's tracepoints.
#[tracepoint]
pub fn timer_enter(_ctx: TracePointContext) -> u32 {
    timer_start();
    0
}

#[tracepoint]
pub fn timer_exit(_ctx: TracePointContext) -> u32 {
    timer_stop();
    0
}

/// The minimal timer on the raw tracepoints: entry filters by the syscall number (its
/// second argument); exit finds an entry only for the timed syscall.
#[raw_tracepoint]
pub fn raw_timer_enter(ctx: RawTracePointContext) -> u32 {
    if ctx.arg::<u64>(1) == raw_timed_nr() {
        timer_start();
    }
    0
}

#[raw_tracepoint]
pub fn raw_timer_exit(_ctx: RawTracePointContext) -> u32 {
    timer_stop();
    0
}

/// The empty pair on fentry/fexit (one function: the first syscall's).
#[fentry]
pub fn fentry_noop(_ctx: FEntryContext) -> u32 {
    0
}

#[fexit]
pub fn fexit_noop(_ctx: FExitContext) -> u32 {
    0
}

/// The minimal timer on fentry/fexit.
#[fentry]
pub fn fentry_timer(_ctx: FEntryContext) -> u32 {
    timer_start();
    0
}

#[fexit]
pub fn fexit_timer(_ctx: FExitContext) -> u32 {
    timer_stop();
    0
}
