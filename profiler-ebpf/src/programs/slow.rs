//! `--slow`: calls past the threshold go to user space with their stacks; processes are
//! announced so that user space reads their mappings in time.

use super::*;

/// `--slow`: the slow calls ([`SlowCall`]); one page without it, sized by the loader.
#[map]
pub(crate) static SLOW_CALLS: RingBuf = RingBuf::with_byte_size(4096, 0);

/// `--slow`: slow calls the ring buffer had no room for (entry 0).
#[map]
pub(crate) static SLOW_LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// `--slow`: kernel stacks taken at switch-out and user stacks taken at a slow call's
/// return; one entry without it, sized by the loader.
#[map]
pub(crate) static STACKS: StackTrace = StackTrace::with_max_entries(1, 0);

/// `--slow`: the last tasks each CPU ran ([`RanRing`]), written at every switch.
#[map]
pub(crate) static RAN: PerCpuArray<RanRing> = PerCpuArray::with_max_entries(1, 0);

/// `--slow`: by thread id, who held the CPU while its call waited runnable ([`Holders`]);
/// one entry without --slow, sized by the loader.
#[map]
pub(crate) static HOLDER_OF: LruHashMap<u32, Holders> = LruHashMap::with_max_entries(1, 0);

/// An empty [`Holders`], the value a thread's first entry is created with (read-only data,
/// not a 144-byte value on the BPF stack).
static NO_HOLDERS: Holders = Holders {
    call_start: 0,
    attributed_ns: 0,
    top: [Holder {
        ns: 0,
        pid: 0,
        _pad: 0,
        comm: [0; 16],
    }; HOLDERS],
};

/// `--slow`, at every switch: the task leaving the CPU (the current one) ran from the last
/// switch until `now`; the CPU's ring keeps it.
#[inline(always)]
pub(crate) fn record_run(prev: u32, now: u64) {
    let Some(ring) = RAN.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's own entry; preemption is disabled in a tracepoint program.
    let ring = unsafe { &mut *ring };
    let i = ring.next as usize & (RAN_SEGMENTS - 1);
    if let Some(segment) = ring.segments.get_mut(i) {
        segment.start_ns = ring.current_start;
        segment.end_ns = now;
        segment.pid = prev;
        segment.comm = bpf_get_current_comm().unwrap_or_default();
    }
    ring.next = ring.next.wrapping_add(1);
    ring.current_start = now;
}

/// `--slow`, when thread `tid`, inside the call that started at `call_start`, gets the CPU
/// back after waiting runnable since `since`: the tasks this CPU ran meanwhile, from its ring,
/// are added to the call's holders (the longest [`HOLDERS`] kept).
#[inline(always)]
pub(crate) fn attribute_runnable(tid: u32, call_start: u64, since: u64, now: u64) {
    let Some(ring) = RAN.get_ptr(0) else {
        return;
    };
    if HOLDER_OF.get_ptr_mut(&tid).is_none() {
        let _ = HOLDER_OF.insert(&tid, &NO_HOLDERS, 0);
    }
    let Some(holders) = HOLDER_OF.get_ptr_mut(&tid) else {
        return;
    };
    // SAFETY: this CPU's ring and the switching-in thread's own entry, which only this CPU
    // writes now.
    let (ring, holders) = unsafe { (&*ring, &mut *holders) };
    if holders.call_start != call_start {
        // SAFETY: zeroing the entry in place (plain integers), not through the stack.
        unsafe { core::ptr::write_bytes(&raw mut *holders, 0, 1) };
        holders.call_start = call_start;
    }
    for segment in &ring.segments {
        let from = segment.start_ns.max(since);
        let to = segment.end_ns.min(now);
        if segment.end_ns == 0 || to <= from {
            continue;
        }
        let ns = to - from;
        holders.attributed_ns += ns;
        // The same task again, else an empty entry, else the shortest if this is longer.
        let mut at = HOLDERS;
        let (mut shortest, mut shortest_ns) = (0, u64::MAX);
        for (j, holder) in holders.top.iter().enumerate() {
            if holder.ns != 0 && holder.pid == segment.pid {
                at = j;
                break;
            }
            if holder.ns < shortest_ns {
                (shortest, shortest_ns) = (j, holder.ns);
            }
        }
        if let Some(holder) = holders.top.get_mut(at) {
            holder.ns += ns;
        } else if let Some(holder) = holders.top.get_mut(shortest)
            && ns > holder.ns
        {
            *holder = Holder {
                ns,
                pid: segment.pid,
                _pad: 0,
                comm: segment.comm,
            };
        }
    }
}

/// `--slow`: per tgid, the first 8 bytes of the name it was last announced under (see
/// `announce`); one entry without it, sized from `pid_max` with it.
#[map]
pub(crate) static ANNOUNCED: Array<u64> = Array::with_max_entries(1, 0);

/// `ANNOUNCED` where the per-thread state is in hash maps ([`per_thread_hash`]), by tgid.
#[map]
pub(crate) static ANNOUNCED_BY_TGID: HashMap<u32, u64> = HashMap::with_max_entries(1, 0);

/// The tgid's `ANNOUNCED` entry, created in the hash where it is one.
#[inline(always)]
fn announced(tgid: u32) -> Option<*mut u64> {
    if !per_thread_hash() {
        return ANNOUNCED.get_ptr_mut(tgid);
    }
    if let Some(seen) = ANNOUNCED_BY_TGID.get_ptr_mut(tgid) {
        return Some(seen);
    }
    // BPF_ANY: two threads of one process may race to create it; either value is 0.
    ANNOUNCED_BY_TGID.insert(tgid, 0, 0).ok()?;
    ANNOUNCED_BY_TGID.get_ptr_mut(tgid)
}

/// `--slow`, in `sched_switch` for a traced call that blocks: the first time its process
/// does so under its current name (new, or after an exec), tells user space, which then
/// reads the process's mappings while the call waits. A process that exits right after its
/// slow call is then symbolized all the same. Only a call that blocks announces: one merely
/// preempted may be the dynamic loader's, before the libraries are mapped.
#[inline(always)]
pub(crate) fn announce() {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let comm = bpf_get_current_comm().unwrap_or_default();
    let name = u64::from_ne_bytes([
        comm[0], comm[1], comm[2], comm[3], comm[4], comm[5], comm[6], comm[7],
    ]);
    let Some(seen) = announced(tgid) else {
        return;
    };
    // SAFETY: a plain u64 load and store; two threads of one process racing here at worst
    // announce it twice.
    unsafe {
        if *seen == name {
            return;
        }
        *seen = name;
    }
    if let Some(mut entry) = SLOW_CALLS.reserve::<SlowCall>(0) {
        entry.write(SlowCall {
            pid: tgid,
            tid: pid_tgid as u32,
            slot: ANNOUNCE_SLOT,
            // SAFETY: a plain helper call.
            end_ns: unsafe { bpf_ktime_get_ns() },
            kernel_stack: STACK_NOT_TAKEN,
            user_stack: STACK_NOT_TAKEN,
            comm,
            ..SlowCall::default()
        });
        entry.submit(0);
    }
}

/// `--slow`: completes `call` with the user stack (a frame-pointer walk, and the registers and
/// top of the stack for user space's DWARF unwinding) and the thread's name, and sends it to
/// user space; counts it in `SLOW_LOST` when the ring buffer is full. Off the hot path: only
/// calls past the threshold get here.
#[inline(always)]
pub(crate) fn report_slow<C: StackIdContext>(ctx: &C, call: SlowCall) {
    let Some(mut entry) = SLOW_CALLS.reserve::<SlowCallStack>(0) else {
        if let Some(lost) = SLOW_LOST.get_ptr_mut(0) {
            // SAFETY: per-CPU value, preemption disabled.
            unsafe { *lost += 1 };
        }
        return;
    };
    let user_stack = match ctx.get_stackid(&STACKS, u64::from(BPF_F_USER_STACK)) {
        Ok(id) => id as i32,
        Err(e) => e,
    };
    let record = entry.as_mut_ptr();
    // SAFETY: `record` is the reserved entry, written field by field (it is far larger than
    // the BPF stack); the registers are read from the task's own pt_regs, the stack from
    // its user memory, both with the probe-read helpers, which fail rather than fault.
    unsafe {
        (*record).call = SlowCall {
            user_stack,
            comm: bpf_get_current_comm().unwrap_or_default(),
            ..call
        };
        // Copied map value to ring buffer entry, never through the BPF stack (512 bytes).
        let call_start = call.end_ns - call.duration_ns;
        match HOLDER_OF.get_ptr(&call.tid) {
            Some(h) if (*h).call_start == call_start => {
                core::ptr::copy_nonoverlapping(h, &raw mut (*record).holders, 1);
            }
            _ => core::ptr::write_bytes(&raw mut (*record).holders, 0, 1),
        }
        let regs = bpf_task_pt_regs(bpf_get_current_task_btf()) as u64;
        let reg = |offset: usize| {
            bpf_probe_read_kernel((regs + offset as u64) as *const u64).unwrap_or_default()
        };
        let (ip, sp, bp, cs) = (
            reg(PT_REGS_IP),
            reg(PT_REGS_SP),
            reg(PT_REGS_BP),
            reg(PT_REGS_CS),
        );
        (*record).ip = ip;
        (*record).sp = sp;
        (*record).bp = bp;
        let mut copied = 0u64;
        // A 32-bit caller's stack is not unwound with x86_64's rules: no copy.
        if cs != USER32_CS && sp != 0 {
            let stack = (*record).stack.as_mut_ptr();
            for chunk in 0..USER_STACK_BYTES / USER_STACK_CHUNK {
                let offset = chunk * USER_STACK_CHUNK;
                let read = probe_read_user_raw(
                    stack.add(offset).cast(),
                    USER_STACK_CHUNK as u32,
                    (sp + offset as u64) as *const core::ffi::c_void,
                );
                if read != 0 {
                    // The chunk ran past the stack's end (its mapping ends on a page
                    // boundary, sometimes less than a chunk above sp: a shallow stack, as
                    // ASLR places it): the bytes up to that page boundary, where the
                    // outermost frames' return addresses are.
                    let at = sp + offset as u64;
                    let left = (4096 - (at & 4095)) as u32 & (USER_STACK_CHUNK as u32 - 1);
                    if left != 0
                        && probe_read_user_raw(
                            stack.add(offset).cast(),
                            left,
                            at as *const core::ffi::c_void,
                        ) == 0
                    {
                        copied += u64::from(left);
                    }
                    break;
                }
                copied += USER_STACK_CHUNK as u64;
            }
        }
        (*record).stack_len = copied;
    }
    entry.submit(0);
}
