//! 32-bit (ia32) calls, which the `syscalls:` tracepoints skip: a second front end on the raw
//! `sys_enter`/`sys_exit` tracepoints.

use super::*;

/// Whether the syscall whose registers are `regs` came from 32-bit (ia32) code: the
/// syscalls: tracepoints skip those calls (x86 defines ARCH_TRACE_IGNORE_COMPAT_SYSCALLS),
/// so the raw programs below time them. (A 64-bit program issuing `int $0x80` runs with the
/// 64-bit selector and is seen by neither.)
#[inline(always)]
pub(crate) fn is_ia32(regs: *const u8) -> bool {
    // SAFETY: a read of kernel memory through the helper, which fails instead of faulting.
    unsafe { bpf_probe_read_kernel(regs.add(PT_REGS_CS).cast::<u64>()) }
        .is_ok_and(|cs| cs == USER32_CS)
}

/// raw `sys_enter`, attached with the profiler's programs: a 32-bit process's call to a
/// traced syscall (looked up by its ia32 number) is timed here. The cheap test first: only
/// a number that is traced in the ia32 table (or a 64-bit call with the same number) reads
/// the registers.
#[raw_tracepoint]
pub fn compat_enter(ctx: RawTracePointContext) -> u32 {
    if count_every() {
        every_begin(&ctx);
    }
    let nr = ctx.arg::<u64>(1);
    let entry = IA32_SLOT_OF_NR.get(nr as u32).copied().unwrap_or(0);
    if entry == 0 {
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(process) = traced_process((pid_tgid >> 32) as u32) else {
        return 0;
    };
    let regs = ctx.arg::<*const u8>(0);
    if !is_ia32(regs) {
        return 0;
    }
    if slot_of_entry(entry).is_none() {
        count_drop(DropReason::Ia32Socketcall);
        return 0;
    }
    let requested = if entry_sized(entry) {
        requested_size(regs)
    } else {
        0
    };
    begin_call(pid_tgid, process, entry, requested);
    0
}

/// raw `sys_exit`: ends a 32-bit call that `compat_enter` timed. Calls timed by the
/// syscall tracepoints carry no compat entry and are left to `syscall_exit`. An exit with
/// no entry is looked at only once every program is attached, for a traced process, and
/// only a 32-bit one is counted here.
#[raw_tracepoint]
pub fn compat_exit(ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(start_ptr) = thread_start(pid_tgid as u32) else {
        return 0;
    };
    if count_every() {
        every_end(&ctx, start_ptr);
    }
    // SAFETY: this thread's own entry.
    let start = unsafe { *start_ptr };
    let ret = ctx.arg::<i64>(1);
    if start.start_ns == 0 {
        if armed_and_traced(pid_tgid) {
            let regs = ctx.arg::<*const u8>(0);
            if is_ia32(regs) {
                // SAFETY: as in `is_ia32`.
                let nr = unsafe { bpf_probe_read_kernel(regs.add(PT_REGS_ORIG_AX).cast::<u64>()) }
                    .unwrap_or(u64::MAX);
                if let Some(&entry) = IA32_SLOT_OF_NR.get(nr as u32)
                    && slot_of_entry(entry).is_some()
                {
                    count_missing_start(entry, ret);
                }
            }
        }
        return 0;
    }
    let mut entry = start.compat_entry;
    if entry == 0 {
        // A 64-bit call still open here: `syscall_exit` did not see its exit, because the exit
        // is a 32-bit one: an execve that landed in a 32-bit program (the syscall tracepoints
        // skip compat exits). The kernel set its number to the ia32 execve's for that first
        // return (`__set_personality_ia32`), so the ia32 table names it.
        let regs = ctx.arg::<*const u8>(0);
        if !is_ia32(regs) {
            return 0;
        }
        // SAFETY: as in `is_ia32`.
        let nr = unsafe { bpf_probe_read_kernel(regs.add(PT_REGS_ORIG_AX).cast::<u64>()) }
            .unwrap_or(u64::MAX);
        entry = IA32_SLOT_OF_NR.get(nr as u32).copied().unwrap_or(0);
        if slot_of_entry(entry).is_none() {
            return 0;
        }
    }
    // SAFETY: a plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: as above.
    unsafe { (*start_ptr).start_ns = 0 };
    account(&ctx, pid_tgid, start, entry, ret, now);
    0
}
