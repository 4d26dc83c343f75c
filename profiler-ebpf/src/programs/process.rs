//! Process tracking, off the hot path: children of traced processes are traced from their
//! first call; a process that exits is forgotten. The only place that logs or uses an atomic.

use super::*;

pub(crate) const CLONE_THREAD: u64 = 0x0001_0000;

/// task:task_newtask runs in the parent before the child can run: a child process of a
/// tracked process is tracked from its first syscall. Threads share their tgid, so only new
/// processes need an entry.
#[tracepoint]
pub fn task_newtask(ctx: TracePointContext) -> u32 {
    let child = field::<4>(&ctx, layout(&LAYOUT.newtask_pid)) as u32 as i32;
    let clone_flags = field::<8>(&ctx, layout(&LAYOUT.newtask_clone_flags));
    if clone_flags & CLONE_THREAD != 0 {
        return 0;
    }
    let parent = (bpf_get_current_pid_tgid() >> 32) as u32;
    if tracked(parent) == 0 {
        return 0;
    }
    let Some(next) = NEXT_PROCESS.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: the map value is an 8-byte aligned u64 that lives as long as the map.
    // SeqCst on purpose: LLVM lowers a Relaxed add to BPF's plain XADD, which returns the
    // operand instead of the old value (seen with LLVM 22; the kernel test for forks caught it).
    let taken = unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::SeqCst }>(next, 1) };
    let mut index = forked_process_index(taken);
    if index >= OVERFLOW_PROCESS {
        index = OVERFLOW_PROCESS;
        count_drop(DropReason::ProcessTableFull);
        warn!(
            &ctx,
            "process table full: pid {} counted under 'other processes'", child
        );
    } else if let Some(pid) = PROCESS_PIDS.get_ptr_mut(index) {
        // SAFETY: this index was handed to this fork alone by the atomic above.
        unsafe { *pid = child as u32 };
    }
    if per_thread_hash() {
        match TRACKED_BY_TGID.insert(child as u32, index + 1, 0) {
            Ok(()) => info!(
                &ctx,
                "tracking pid {} (forked by {}) as process #{}", child, parent, index
            ),
            Err(_) => count_drop(DropReason::IdOutOfRange),
        }
        return 0;
    }
    match TRACKED.get_ptr_mut(child as u32) {
        Some(entry) => {
            // SAFETY: a plain u32 store; user space reads it only.
            unsafe { *entry = index + 1 };
            info!(
                &ctx,
                "tracking pid {} (forked by {}) as process #{}", child, parent, index
            );
        }
        None => count_drop(DropReason::IdOutOfRange),
    }
    0
}

/// sched:sched_process_exit, for every exiting thread: forget its in-flight entry (a thread
/// that dies inside a call that never returns, such as exit_group, must not leave a stale
/// entry for whoever reuses the id). For the last thread of a process: stop tracking its pid
/// so a new process that reuses the number is not traced by mistake. Its counters stay for
/// user space to read.
#[tracepoint]
pub fn process_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    if per_thread_hash() {
        // The thread's entries go with it (there were none if it made no traced call).
        let _ = START_BY_TID.remove(tid);
        let _ = OFF_CPU_BY_TID.remove(tid);
    } else if let Some(start) = START.get_ptr_mut(tid) {
        // SAFETY: the exiting thread's own entry.
        unsafe {
            (*start).start_ns = 0;
            (*start).every_start_ns = 0;
        };
    }
    if !group_dead(&ctx) {
        return 0;
    }
    let tgid = (pid_tgid >> 32) as u32;
    if per_thread_hash() {
        if TRACKED_BY_TGID.remove(tgid).is_ok() {
            info!(&ctx, "process {} exited", tgid);
        }
        let _ = ANNOUNCED_BY_TGID.remove(tgid);
        return 0;
    }
    if let Some(entry) = TRACKED.get_ptr_mut(tgid) {
        // SAFETY: a plain u32 load and store.
        unsafe {
            if *entry != 0 {
                info!(&ctx, "process {} exited", tgid);
                *entry = 0;
            }
        }
    }
    0
}

/// Whether the exiting thread is the last of its process. Kernels 6.16 and later say so in
/// the record (`group_dead`). Earlier ones (Debian 12's 6.1, 6.1-rt, the 6.12 LTS) do not,
/// but do_exit() has already decremented `current->signal->live` when the tracepoint fires,
/// so the process is dead when it reads 0. Two threads exiting together may both read 0 and
/// both untrack (harmless); none can read 0 while another thread lives.
#[inline(always)]
pub(crate) fn group_dead(ctx: &TracePointContext) -> bool {
    let offset = layout(&LAYOUT.process_exit_group_dead);
    if offset != FIELD_ABSENT {
        return field::<1>(ctx, offset) != 0;
    }
    // SAFETY: reads of kernel memory through the helper, which fails instead of faulting;
    // the offsets come from this kernel's BTF.
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let Ok(signal) = bpf_probe_read_kernel(
            task.add(layout(&LAYOUT.task_signal) as usize)
                .cast::<*const u8>(),
        ) else {
            return false;
        };
        bpf_probe_read_kernel(
            signal
                .add(layout(&LAYOUT.signal_live) as usize)
                .cast::<i32>(),
        )
        .is_ok_and(|live| live == 0)
    }
}
