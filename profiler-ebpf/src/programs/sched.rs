//! `--off-cpu`: where a thread inside a traced call spends its time off the CPU, from the
//! scheduler's tracepoints. Two front ends share one body: BTF-typed raw tracepoints
//! (`tp_btf/sched_switch`, `tp_btf/sched_wakeup`: their `TP_PROTO` arguments, task pointers
//! read with plain loads; chosen where the kernel has BTF), which run before any record is
//! formatted, and the classic `sched:` tracepoints (their records, from the format files)
//! where it has not. The classic tracepoint fills a record (two comms, pids, priorities) on
//! every switch of the machine before the program runs.

use super::*;

/// sched:sched_switch (classic), `--off-cpu`.
#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let prev = bpf_get_current_pid_tgid() as u32;
    let next = field::<4>(&ctx, layout(&LAYOUT.switch_next_pid)) as u32;
    on_switch(&ctx, prev, next, || {
        switched_out_runnable(field::<8>(&ctx, layout(&LAYOUT.switch_prev_state)))
    });
    0
}

/// sched:sched_wakeup (classic), `--off-cpu`.
#[tracepoint]
pub fn sched_wakeup(ctx: TracePointContext) -> u32 {
    on_wakeup(field::<4>(&ctx, layout(&LAYOUT.wakeup_pid)) as u32);
    0
}

/// tp_btf sched_switch, `--off-cpu`: `TP_PROTO(bool preempt, struct task_struct *prev, struct
/// task_struct *next, unsigned int prev_state)` (the four-argument form, 5.18 on; the loader
/// checks it in BTF).
#[btf_tracepoint(function = "sched_switch")]
pub fn btf_sched_switch(ctx: BtfTracePointContext) -> u32 {
    // Both tids by plain loads: no helper call on the path every switch of the machine takes.
    let prev = task_pid(ctx.arg(1));
    let next = task_pid(ctx.arg(2));
    on_switch(&ctx, prev, next, || {
        // Preempted, or not asking to sleep: still in the run queue (what the classic
        // tracepoint reports as TASK_REPORT_MAX or 0).
        ctx.arg::<u64>(0) as u8 != 0 || ctx.arg::<u64>(3) as u32 == 0
    });
    0
}

/// tp_btf sched_wakeup, `--off-cpu`: `TP_PROTO(struct task_struct *p)`.
#[btf_tracepoint(function = "sched_wakeup")]
pub fn btf_sched_wakeup(ctx: BtfTracePointContext) -> u32 {
    on_wakeup(task_pid(ctx.arg(0)));
    0
}

/// `task->pid` (the thread id), at the BTF offset the loader found. A plain load: the argument
/// is a BTF-typed pointer, and the offset, read from the frozen `LAYOUT`, is a constant to the
/// verifier, which checks the load against `struct task_struct` (no helper call, unlike
/// `bpf_probe_read_kernel`, which costs ~30 ns a read here).
#[inline(always)]
fn task_pid(task: *const u8) -> u32 {
    // SAFETY: a task pointer the tracepoint passed, at a member's offset; the verifier
    // checks both, and such loads are fault-handled.
    unsafe { core::ptr::read_volatile(task.add(layout(&LAYOUT.task_pid) as usize).cast::<u32>()) }
}

/// `prev` (the current task) leaves the CPU, inside a traced call or not; `next` comes back
/// to it. Two array lookups per switch, a clock read only for a thread inside a traced call;
/// `runnable` (whether the previous task stays in the run queue) is asked only for such a
/// thread.
#[inline(always)]
fn on_switch<C: StackIdContext>(ctx: &C, prev: u32, next: u32, runnable: impl FnOnce() -> bool) {
    // SAFETY: a plain load from the switching-out task's entry.
    let in_call = thread_start(prev).is_some_and(|s| unsafe { (*s).start_ns } != 0);
    let mut now = 0;
    if slow_ns() != 0 {
        // SAFETY: a plain helper call.
        now = unsafe { bpf_ktime_get_ns() };
        record_run(prev, now);
    }
    if in_call && let Some(off) = thread_off_cpu(prev) {
        if now == 0 {
            // SAFETY: a plain helper call.
            now = unsafe { bpf_ktime_get_ns() };
        }
        let runnable = runnable();
        // SAFETY: the entry of the task switching out on this CPU: nothing else writes it now.
        unsafe {
            (*off).since_ns = now;
            (*off).out_ns = now;
            (*off).state = if runnable { OFF_RUNNABLE } else { OFF_BLOCKED };
        }
        if slow_ns() != 0 {
            // Where it leaves the CPU: the kernel stack of the task switching out.
            let stack = match ctx.get_stackid(&STACKS, 0) {
                Ok(id) => id as i32,
                Err(e) => e,
            };
            // SAFETY: as above.
            unsafe { (*off).pending_stack = stack };
            if !runnable {
                announce();
            }
        }
    }
    if let Some(off) = thread_off_cpu(next) {
        // SAFETY: the entry of the task switching in on this CPU.
        let off = unsafe { &mut *off };
        if off.since_ns != 0 {
            if now == 0 {
                // SAFETY: a plain helper call.
                now = unsafe { bpf_ktime_get_ns() };
            }
            let part = now.saturating_sub(off.since_ns);
            if off.state == OFF_RUNNABLE {
                off.runnable_ns += part;
                if slow_ns() != 0
                    && let Some(start) = thread_start(next)
                {
                    // SAFETY: a plain load from the switching-in task's entry.
                    let started = unsafe { (*start).start_ns };
                    attribute_runnable(next, started, off.since_ns, now);
                }
            } else {
                off.blocked_ns += part;
            }
            off.since_ns = 0;
            let away = now.saturating_sub(off.out_ns);
            if slow_ns() != 0 && away > off.longest_ns {
                off.longest_ns = away;
                off.longest_stack = off.pending_stack;
            }
        }
    }
}

/// A blocked thread inside a traced call becomes runnable; from now until it runs it waits for
/// a CPU, not for its event.
#[inline(always)]
fn on_wakeup(pid: u32) {
    if let Some(off) = thread_off_cpu(pid) {
        // SAFETY: a woken task's entry; its own CPU does not switch it in before the wakeup
        // completes (the wakeup holds its runqueue's lock).
        let off = unsafe { &mut *off };
        if off.since_ns != 0 && off.state == OFF_BLOCKED {
            // SAFETY: a plain helper call.
            let now = unsafe { bpf_ktime_get_ns() };
            off.blocked_ns += now.saturating_sub(off.since_ns);
            off.since_ns = now;
            off.state = OFF_RUNNABLE;
        }
    }
}
