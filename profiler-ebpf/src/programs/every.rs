//! Every call of the traced processes, timed or not (`every_enter`, `every_exit` on the raw
//! `sys_enter`/`sys_exit` tracepoints): calls, errors and time per syscall number, so that a
//! report can say what share of the processes' syscall time its table leaves out.

use super::*;

/// raw `sys_enter`: a traced process's call, whatever its number, starts here.
#[raw_tracepoint]
pub fn every_enter(ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if traced_process((pid_tgid >> 32) as u32).is_none() {
        return 0;
    }
    let Some(key) = every_key(ctx.arg::<u64>(1), is_ia32(ctx.arg::<*const u8>(0))) else {
        return 0;
    };
    match thread_start_created(pid_tgid as u32) {
        // SAFETY: only this thread writes its own entry between its syscall entry and exit.
        Some(start) => unsafe {
            (*start).every_start_ns = bpf_ktime_get_ns();
            (*start).every_key = key;
        },
        None => count_drop(DropReason::IdOutOfRange),
    }
    0
}

/// raw `sys_exit`: ends the call `every_enter` started (any other thread's exit finds no
/// start and returns).
#[raw_tracepoint]
pub fn every_exit(ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(start) = thread_start(pid_tgid as u32) else {
        return 0;
    };
    // SAFETY: this thread's own entry.
    let (started, key) = unsafe { ((*start).every_start_ns, (*start).every_key) };
    if started == 0 {
        return 0;
    }
    // SAFETY: a plain helper call; then this thread's own entry, as above.
    let now = unsafe { bpf_ktime_get_ns() };
    unsafe { (*start).every_start_ns = 0 };
    if let Some(counts) = EVERY.get_ptr_mut(key) {
        // SAFETY: per-CPU value; preemption is disabled while a tracepoint program runs.
        let counts = unsafe { &mut *counts };
        counts.calls += 1;
        counts.total_ns += now.saturating_sub(started);
        if ctx.arg::<i64>(1) < 0 {
            counts.errors += 1;
        }
    }
    0
}
