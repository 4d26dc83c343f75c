//! Syscall timing: the front end on the `syscalls:` tracepoints (`syscall_enter`,
//! `syscall_exit`), [`begin_call`], where every front end starts a call, and [`account`],
//! where every front end ends one: a new front end (`compat.rs`, `fentry.rs`) calls them with
//! what it read and needs no other change.

use super::*;

/// The dense process index of `tgid`, `NO_PROCESS` under `--all`, its cgroup's index under
/// `--cgroup`, `None` when not traced.
#[inline(always)]
pub(crate) fn traced_process(tgid: u32) -> Option<u32> {
    if tgid == self_tgid() {
        return None;
    }
    let all = trace_all();
    let cgroups = trace_cgroups();
    if cgroups {
        // SAFETY: a plain helper call; the map lookup returns a copy.
        let id = unsafe { bpf_get_current_cgroup_id() };
        return unsafe { CGROUPS.get(&id) }.copied();
    }
    match tracked(tgid) {
        0 if all => Some(NO_PROCESS),
        index if index != 0 => Some(index - 1),
        // A process beyond the map (pid_max raised while tracing) was never tracked: its
        // fork, if a tracked process made it, was counted as lost in `task_newtask`.
        _ => None,
    }
}

/// Counts an exit whose entry was not seen, under its syscall's slot and in `DROPPED`;
/// `entry` is the syscall's slot-table entry. A new child's return from a fork had no entry
/// and loses nothing.
#[inline(always)]
pub(crate) fn count_missing_start(entry: SlotEntry, ret: i64) {
    if entry_forks(entry) && ret == 0 {
        return;
    }
    let Some(slot) = slot_of_entry(entry) else {
        count_drop(DropReason::NoStart);
        return;
    };
    if let Some(data) = SYSCALLS.get_ptr_mut(slot) {
        // SAFETY: per-CPU value, preemption disabled.
        unsafe { (*data).stats.dropped += 1 };
    }
    count_drop(DropReason::NoStart);
}

#[tracepoint]
pub fn syscall_enter(_ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(process) = traced_process((pid_tgid >> 32) as u32) else {
        return 0;
    };
    begin_call(pid_tgid, process, 0, 0);
    0
}

/// Offset of a `sys_enter_*` record's third argument: `args[]` follows the 8-byte common
/// header and the 4-byte syscall number, 8-aligned, on every kernel (`syscall_trace_enter`).
const SYS_ENTER_ARG2: u32 = 16 + 2 * 8;

/// `syscall_enter` for the sized syscalls (read's count is their third argument), attached
/// only to their tracepoints, whose records all hold three arguments: it keeps the size.
#[tracepoint]
pub fn syscall_enter_sized(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(process) = traced_process((pid_tgid >> 32) as u32) else {
        return 0;
    };
    begin_call(pid_tgid, process, 0, field::<8>(&ctx, SYS_ENTER_ARG2));
    0
}

/// A sized call's requested size, from the user registers of its syscall (`regs`: the
/// `pt_regs` the syscall functions and the raw tracepoints get); 0 if unreadable.
#[inline(always)]
pub(crate) fn requested_size(regs: *const u8) -> u64 {
    // SAFETY: a read of kernel memory through the helper, which fails instead of faulting.
    unsafe { bpf_probe_read_kernel(regs.add(PT_REGS_DX).cast::<u64>()) }.unwrap_or(0)
}

/// A traced thread enters a call: its start time, process and requested size (0 but for a
/// sized syscall) in its `START` entry (`compat_entry`: the raw compat programs' slot-table
/// entry, 0 for every other front end), its off-CPU parts from zero. Every front end starts its calls here.
#[inline(always)]
pub(crate) fn begin_call(pid_tgid: u64, process: u32, compat_entry: SlotEntry, requested: u64) {
    match thread_start_created(pid_tgid as u32) {
        // SAFETY: only this thread writes its own entry between its syscall entry and exit.
        Some(start) => unsafe {
            (*start).start_ns = bpf_ktime_get_ns();
            (*start).process = process;
            (*start).compat_entry = compat_entry;
            (*start).requested = requested;
        },
        None => count_drop(DropReason::IdOutOfRange),
    }
    reset_off_cpu(pid_tgid as u32);
}

/// Whether every program is attached (`ARMED`) and the thread's process is traced: then an
/// exit without an entry is a lost call, and a 32-bit socketcall one not timed.
#[inline(always)]
pub(crate) fn armed_and_traced(pid_tgid: u64) -> bool {
    ARMED.get(0).is_some_and(|&armed| armed != 0)
        && traced_process((pid_tgid >> 32) as u32).is_some()
}

/// At a traced call's entry: its off-CPU parts start from zero.
#[inline(always)]
pub(crate) fn reset_off_cpu(tid: u32) {
    if split_off_cpu()
        && let Some(off) = thread_off_cpu_created(tid)
    {
        // SAFETY: this thread's own entry; the sched programs touch it only while the
        // thread is inside a call and off the CPU, which it is not now.
        unsafe { *off = OffCpu::default() };
    }
}

/// The exit path looks up only the thread's own entry: its process index was stored at entry,
/// so the common case needs no tracking lookup (only a missing entry asks whether it should
/// have been there). The clock is read once the entry is known to be there: every untraced
/// caller of a traced syscall runs this program, and a clock read was most of its cost (the
/// lookup it now includes in a traced call's time is a few ns, against µs calls).
#[tracepoint]
pub fn syscall_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    // A thread beyond the map: its entry was counted as lost in `syscall_enter`.
    let Some(start_ptr) = thread_start(pid_tgid as u32) else {
        return 0;
    };
    // SAFETY: this thread's own entry.
    let start = unsafe { *start_ptr };
    let nr = field::<4>(&ctx, layout(&LAYOUT.sys_exit_nr)) as u32 as i32;
    if start.start_ns == 0 {
        // Untraced, or traced but its entry was missed (in flight when tracing began).
        if armed_and_traced(pid_tgid) {
            let entry = SLOT_OF_NR.get(nr as u32).copied().unwrap_or(0);
            let ret = field::<8>(&ctx, layout(&LAYOUT.sys_exit_ret)) as i64;
            count_missing_start(entry, ret);
        }
        return 0;
    }
    // SAFETY: a plain helper call.
    let now = unsafe { bpf_ktime_get_ns() };
    // SAFETY: as above.
    unsafe { (*start_ptr).start_ns = 0 };
    let ret = field::<8>(&ctx, layout(&LAYOUT.sys_exit_ret)) as i64;
    // A call begun as a 32-bit one and ending as a 64-bit one (an execve from a 32-bit program
    // into a 64-bit one) keeps its entry's syscall: the record's number is the ia32 one.
    let entry = if start.compat_entry != 0 {
        start.compat_entry
    } else {
        SLOT_OF_NR.get(nr as u32).copied().unwrap_or(0)
    };
    account(&ctx, pid_tgid, start, entry, ret, now);
    0
}

/// Adds one finished call to its slot's counters and histograms, its process's (or
/// cgroup's) row, and sends it to user space past the `--slow` threshold. Every front end
/// (the syscall tracepoints, the raw compat programs) ends its calls here.
#[inline(always)]
pub(crate) fn account<C: StackIdContext>(
    ctx: &C,
    pid_tgid: u64,
    start: ThreadStart,
    entry: SlotEntry,
    ret: i64,
    now: u64,
) {
    // The shape 6.1's verifier needs: a compare here, the mask at the per-process update.
    let slot = entry_slot(entry);
    if slot >= MAX_SYSCALL_SLOTS as u32 {
        count_drop(DropReason::NoSlot);
        return;
    }
    let Some(data) = SYSCALLS.get_ptr_mut(slot) else {
        return;
    };
    // SAFETY: per-CPU value; preemption is disabled while a tracepoint program runs.
    let data = unsafe { &mut *data };
    let process = start.process;
    let start_requested = start.requested;
    let start = start.start_ns;
    let elapsed = now.saturating_sub(start);
    let failed = ret < 0;

    let stats = &mut data.stats;
    if stats.calls == 0 || elapsed < stats.min_ns {
        stats.min_ns = elapsed;
    }
    if elapsed > stats.max_ns {
        stats.max_ns = elapsed;
    }
    stats.calls += 1;
    stats.total_ns += elapsed;
    if failed {
        let class = ErrnoClass::of(ret.unsigned_abs()) as usize;
        if let Some(count) = stats.errors.get_mut(class) {
            *count += 1;
        }
    }
    let bucket = bucket_index(elapsed) as usize & (HIST_BUCKETS - 1);
    if let Some(count) = data.latency.counts.get_mut(bucket) {
        *count += 1;
    }
    if split_off_cpu()
        && let Some(off) = thread_off_cpu(pid_tgid as u32)
    {
        // SAFETY: this thread's own entry, which the sched programs leave alone while it runs.
        let off = unsafe { &*off };
        let (blocked, runnable) = (off.blocked_ns, off.runnable_ns);
        data.stats.blocked_ns += blocked;
        data.stats.runnable_ns += runnable;
        let on_cpu = elapsed.saturating_sub(blocked + runnable);
        let bucket = bucket_index(on_cpu) as usize & (HIST_BUCKETS - 1);
        if let Some(count) = data.on_cpu.counts.get_mut(bucket) {
            *count += 1;
        }
        let threshold = slow_ns();
        if threshold != 0 && elapsed >= threshold {
            let kernel_stack = if off.longest_ns > 0 {
                off.longest_stack
            } else {
                STACK_NOT_TAKEN
            };
            report_slow(
                ctx,
                SlowCall {
                    duration_ns: elapsed,
                    blocked_ns: blocked,
                    runnable_ns: runnable,
                    ret,
                    end_ns: now,
                    pid: (pid_tgid >> 32) as u32,
                    tid: pid_tgid as u32,
                    slot,
                    kernel_stack,
                    ..SlowCall::default()
                },
            );
        }
    }

    if entry_counts_events(entry)
        && !failed
        && let Some(events) = EVENTS.get_ptr_mut(slot)
    {
        data.stats.returned += ret as u64;
        if entry_sized(entry) && (ret as u64) < start_requested {
            data.stats.short += 1;
        }
        let bucket = bucket_index(ret as u64) as usize & (HIST_BUCKETS - 1);
        // SAFETY: per-CPU value, as above.
        if let Some(count) = unsafe { &mut *events }.counts.get_mut(bucket) {
            *count += 1;
        }
    }
    if by_cgroup() {
        count_cgroup(slot, elapsed, failed);
    }

    // The first named process's counters are derived in user space (totals minus the rest).
    if process != NO_PROCESS
        && process != DERIVED_PROCESS
        && let Some(per_process) = PROCESSES.get_ptr_mut(process)
    {
        // SAFETY: per-CPU value, as above.
        let per_process = unsafe { &mut *per_process };
        let slot = slot as usize & (MAX_SYSCALL_SLOTS - 1);
        if let Some(calls) = per_process.calls.get_mut(slot) {
            *calls += 1;
        }
        if let Some(total) = per_process.total_ns.get_mut(slot) {
            *total += elapsed;
        }
        if failed && let Some(errors) = per_process.errors.get_mut(slot) {
            *errors += 1;
        }
    }
}
