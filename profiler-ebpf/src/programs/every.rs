//! Every call of the traced processes, timed or not: calls, errors and time per syscall
//! number, so that a report can say what share of the processes' syscall time its table leaves
//! out. Counted inside the raw compat programs where they run (`count_every`: a map lookup more
//! per syscall of the machine), else by a pair of its own on the raw `sys_enter`/`sys_exit`
//! tracepoints (`every_enter`, `every_exit`: with fentry, or a 64-bit server under `run`, and
//! only for `--syscalls all`).

use super::*;

/// At a raw `sys_enter`: a traced process's call, whatever its number, starts here.
#[inline(always)]
pub(crate) fn every_begin(ctx: &RawTracePointContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if traced_process((pid_tgid >> 32) as u32).is_none() {
        return;
    }
    let Some(key) = every_key(ctx.arg::<u64>(1), is_ia32(ctx.arg::<*const u8>(0))) else {
        return;
    };
    match thread_start_created(pid_tgid as u32) {
        // SAFETY: only this thread writes its own entry between its syscall entry and exit.
        Some(start) => unsafe {
            (*start).every_start_ns = bpf_ktime_get_ns();
            (*start).every_key = key;
        },
        None => count_drop(DropReason::IdOutOfRange),
    }
}

/// At a raw `sys_exit`: ends the call [`every_begin`] started in this thread's entry `start`
/// (any other thread finds none and returns).
#[inline(always)]
pub(crate) fn every_end(ctx: &RawTracePointContext, start: *mut ThreadStart) {
    // SAFETY: this thread's own entry.
    let (started, key) = unsafe { ((*start).every_start_ns, (*start).every_key) };
    if started == 0 {
        return;
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
}

/// raw `sys_enter`, where the compat programs are not attached.
#[raw_tracepoint]
pub fn every_enter(ctx: RawTracePointContext) -> u32 {
    every_begin(&ctx);
    0
}

/// raw `sys_exit`, where the compat programs are not attached.
#[raw_tracepoint]
pub fn every_exit(ctx: RawTracePointContext) -> u32 {
    if let Some(start) = thread_start(bpf_get_current_pid_tgid() as u32) {
        every_end(&ctx, start);
    }
    0
}
