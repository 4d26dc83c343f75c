//! `--off-cpu`: where a thread inside a traced call spends its time off the CPU, from the
//! scheduler's tracepoints.

use super::*;

/// sched:sched_switch, `--off-cpu`: the current (previous) task leaves the CPU, inside a
/// traced call or not; the next one comes back to it. Two array lookups per switch, a clock
/// read only for a thread inside a traced call.
#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let prev = bpf_get_current_pid_tgid() as u32;
    let in_call = START.get(prev).is_some_and(|s| s.start_ns != 0);
    let mut now = 0;
    if slow_ns() != 0 {
        // SAFETY: a plain helper call.
        now = unsafe { bpf_ktime_get_ns() };
        record_run(prev, now);
    }
    if in_call && let Some(off) = OFF_CPU.get_ptr_mut(prev) {
        if now == 0 {
            // SAFETY: a plain helper call.
            now = unsafe { bpf_ktime_get_ns() };
        }
        let state = field::<8>(&ctx, layout(&LAYOUT.switch_prev_state));
        // SAFETY: the entry of the task switching out on this CPU: nothing else writes it now.
        unsafe {
            (*off).since_ns = now;
            (*off).out_ns = now;
            (*off).state = if switched_out_runnable(state) {
                OFF_RUNNABLE
            } else {
                OFF_BLOCKED
            };
        }
        if slow_ns() != 0 {
            // Where it leaves the CPU: the kernel stack of the task switching out.
            let stack = match ctx.get_stackid(&STACKS, 0) {
                Ok(id) => id as i32,
                Err(e) => e,
            };
            // SAFETY: as above.
            unsafe { (*off).pending_stack = stack };
            if !switched_out_runnable(state) {
                announce();
            }
        }
    }
    let next = field::<4>(&ctx, layout(&LAYOUT.switch_next_pid)) as u32;
    if let Some(off) = OFF_CPU.get_ptr_mut(next) {
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
                    && let Some(start) = START.get(next)
                {
                    attribute_runnable(next, start.start_ns, off.since_ns, now);
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
    0
}

/// sched:sched_wakeup, `--off-cpu`: a blocked thread inside a traced call becomes runnable;
/// from now until it runs it waits for a CPU, not for its event.
#[tracepoint]
pub fn sched_wakeup(ctx: TracePointContext) -> u32 {
    let pid = field::<4>(&ctx, layout(&LAYOUT.wakeup_pid)) as u32;
    if let Some(off) = OFF_CPU.get_ptr_mut(pid) {
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
    0
}
