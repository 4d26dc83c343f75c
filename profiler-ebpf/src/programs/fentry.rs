//! The fentry/fexit front end (`--attach fentry`): programs on the kernel functions the
//! syscall tables call (`__x64_sys_close`; for 32-bit callers the ia32 table's entry,
//! `__ia32_sys_close`), so no syscall tracepoint is enabled and no task takes the syscall
//! entry's slow path for it. A loaded tracing program has one target, so there is a pair of
//! programs per slot and per table, generated below; each knows its slot as a constant
//! (no syscall-number lookup) and reads its flags from `Config::slot_entries`. Calls start
//! in [`begin_call`] and end in [`account`], as with the tracepoints.

use super::*;

/// Slot `slot`'s function's entry; its one argument is the syscall's `pt_regs`, where a sized
/// syscall's requested size is.
#[inline(always)]
fn enter(ctx: &FEntryContext, slot: usize) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if let Some(process) = traced_process((pid_tgid >> 32) as u32) {
        let requested = if entry_sized(slot_entry(slot)) {
            requested_size(ctx.arg::<*const u8>(0))
        } else {
            0
        };
        begin_call(pid_tgid, process, 0, requested);
    }
    0
}

/// The return of slot `slot`'s function; its return value follows its one argument (the
/// `pt_regs` pointer).
#[inline(always)]
fn exit(ctx: &FExitContext, slot: usize) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(start_ptr) = thread_start(pid_tgid as u32) else {
        return 0;
    };
    // SAFETY: this thread's own entry.
    let start = unsafe { *start_ptr };
    let entry = slot_entry(slot);
    let ret = ctx.arg::<i64>(1);
    if start.start_ns == 0 {
        // A new child never returns through its parent's clone function: no fork case here.
        if armed_and_traced(pid_tgid) {
            count_missing_start(entry, ret);
        }
        return 0;
    }
    // SAFETY: a plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: as above.
    unsafe { (*start_ptr).start_ns = 0 };
    account(ctx, pid_tgid, start, entry, ret, now);
    0
}

// The copies' count is the slots'; seq! takes literals only.
const _: () = assert!(MAX_SYSCALL_SLOTS == 32);

seq_macro::seq!(N in 0..32 {
    /// Slot N's 64-bit function, entry.
    #[fentry]
    pub fn fentry_~N(ctx: FEntryContext) -> u32 {
        enter(&ctx, N)
    }

    /// Slot N's 64-bit function, return.
    #[fexit]
    pub fn fexit_~N(ctx: FExitContext) -> u32 {
        exit(&ctx, N)
    }

    /// Slot N's ia32 function, entry.
    #[fentry]
    pub fn fentry32_~N(ctx: FEntryContext) -> u32 {
        enter(&ctx, N)
    }

    /// Slot N's ia32 function, return.
    #[fexit]
    pub fn fexit32_~N(ctx: FExitContext) -> u32 {
        exit(&ctx, N)
    }
});

/// On the ia32 `socketcall` function when a traced syscall (accept) has no ia32 number of its
/// own: a traced 32-bit process's socketcall is counted as not timed, as the compat
/// tracepoint programs count it.
#[fentry]
pub fn fentry_socketcall(_ctx: FEntryContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if armed_and_traced(pid_tgid) {
        count_drop(DropReason::Ia32Socketcall);
    }
    0
}
