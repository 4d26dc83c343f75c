//! The kernel side of syscall-profiler: one program on `sys_enter_*` and one on `sys_exit_*` for
//! every syscall in the chosen set, timing each call of the tracked processes into per-CPU maps.
//!
//! Hot path (every traced syscall): array lookups only, no hash maps, no atomics, no helper calls
//! but the clock and the current task id. Options add to it only when given (frozen `.rodata`
//! flags the verifier folds): `--off-cpu` one more array entry, `--slow` a compare (its stack
//! walks happen at switch-outs and past the threshold), `--by-cgroup` a hash lookup by cgroup id.
//! Process tracking (fork, exit) is off the hot path and is the only place that logs (aya-log)
//! or uses an atomic.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// The bpf target's core has no fetch_add (no compare-and-swap); the intrinsic lowers to BPF's
// atomic add with fetch (kernel 5.12+).
#![cfg_attr(target_arch = "bpf", feature(core_intrinsics))]
#![cfg_attr(target_arch = "bpf", allow(internal_features))]
// Record fields are read by asm loads with the offset in the instruction (see `field`).
#![cfg_attr(target_arch = "bpf", feature(asm_experimental_arch))]

#[cfg(target_arch = "bpf")]
mod programs {
    use core::intrinsics::{AtomicOrdering, atomic_xadd};

    use aya_ebpf::{
        bindings::BPF_F_USER_STACK,
        helpers::{
            bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
            bpf_get_current_task, bpf_ktime_get_ns, bpf_probe_read_kernel,
        },
        macros::{map, raw_tracepoint, tracepoint},
        maps::{Array, HashMap, PerCpuArray, PerCpuHashMap, RingBuf, StackTrace},
        programs::{RawTracePointContext, TracePointContext, tracing::StackIdContext},
    };
    use aya_log_ebpf::{info, warn};
    use profiler_common::{
        ANNOUNCE_SLOT, DERIVED_PROCESS, DROP_REASONS, DropReason, ErrnoClass, FIELD_ABSENT,
        FIRST_FORKED_PROCESS, HIST_BUCKETS, LatencyBuckets, MAX_CGROUP_IDS, MAX_PROCESSES,
        MAX_SYSCALL_NR, MAX_SYSCALL_SLOTS, NO_PROCESS, OFF_BLOCKED, OFF_RUNNABLE, OVERFLOW_PROCESS,
        OffCpu, PT_REGS_CS, PT_REGS_ORIG_AX, ProcessStats, RECORD_HEADER, RECORD_WINDOW,
        RecordLayout, STACK_NOT_TAKEN, SlotEntry, SlowCall, SyscallSlot, ThreadStart, USER32_CS,
        bucket_index, entry_counts_events, entry_forks, entry_slot, forked_process_index,
        slot_of_entry, switched_out_runnable,
    };

    /// The profiler's own process, never traced (its polling and /proc reads under `--all`);
    /// 0 for none (the tests count their own calls). Set by the loader, frozen.
    #[unsafe(no_mangle)]
    static SELF_TGID: u32 = 0;

    /// 1 to time every process on the machine (`--all`); set by the loader before load.
    #[unsafe(no_mangle)]
    static TRACE_ALL: u8 = 0;

    /// 1 to time the processes of the cgroups in `CGROUPS` (`--cgroup`); set by the loader.
    #[unsafe(no_mangle)]
    static TRACE_CGROUPS: u8 = 0;

    /// 1 with `--all --by-cgroup`: every call is also counted under its cgroup's id in
    /// `CGROUP_STATS`; set by the loader, frozen.
    #[unsafe(no_mangle)]
    static BY_CGROUP: u8 = 0;

    /// `--by-cgroup`: cgroup id → calls, errors and time per slot; one entry without it, sized
    /// to `MAX_CGROUP_IDS` with it.
    #[map]
    static CGROUP_STATS: PerCpuHashMap<u64, ProcessStats> = PerCpuHashMap::with_max_entries(1, 0);

    /// Zeros, the first value of a cgroup's entry (too large for the BPF stack).
    #[map]
    static ZERO_STATS: PerCpuArray<ProcessStats> = PerCpuArray::with_max_entries(1, 0);

    /// `--cgroup`: cgroup id (of a named cgroup or one below it) → the named cgroup's dense
    /// index, under which its processes' calls are counted. Filled by user space.
    #[map]
    static CGROUPS: HashMap<u64, u32> = HashMap::with_max_entries(MAX_CGROUP_IDS, 0);

    /// Where this kernel's records keep the fields read below; set by the loader before load
    /// from the tracepoints' format files and BTF (`profiler::bpf::layout`).
    #[unsafe(no_mangle)]
    static LAYOUT: RecordLayout = RecordLayout {
        sys_exit_nr: FIELD_ABSENT,
        sys_exit_ret: FIELD_ABSENT,
        newtask_pid: FIELD_ABSENT,
        newtask_clone_flags: FIELD_ABSENT,
        process_exit_group_dead: FIELD_ABSENT,
        task_signal: 0,
        signal_live: 0,
        switch_prev_state: FIELD_ABSENT,
        switch_next_pid: FIELD_ABSENT,
        wakeup_pid: FIELD_ABSENT,
        _pad: 0,
    };

    /// 1 with `--off-cpu`: split each call into on-CPU, blocked and runnable time (the sched
    /// programs are attached then); set by the loader, frozen, so the verifier drops the split
    /// from the hot path when it is 0.
    #[unsafe(no_mangle)]
    static SPLIT_OFF_CPU: u8 = 0;

    /// `--slow`: calls at least this long (ns) are sent to `SLOW_CALLS` with their stacks; 0
    /// (frozen) leaves it out of the hot path. User space turns the split on with it.
    #[unsafe(no_mangle)]
    static SLOW_NS: u64 = 0;

    /// `--slow`: the slow calls ([`SlowCall`]); one page without it, sized by the loader.
    #[map]
    static SLOW_CALLS: RingBuf = RingBuf::with_byte_size(4096, 0);

    /// `--slow`: slow calls the ring buffer had no room for (entry 0).
    #[map]
    static SLOW_LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

    /// `--slow`: kernel stacks taken at switch-out and user stacks taken at a slow call's
    /// return; one entry without it, sized by the loader.
    #[map]
    static STACKS: StackTrace = StackTrace::with_max_entries(1, 0);

    /// `--slow`: per tgid, the first 8 bytes of the name it was last announced under (see
    /// `announce`); one entry without it, sized from `pid_max` with it.
    #[map]
    static ANNOUNCED: Array<u64> = Array::with_max_entries(1, 0);

    #[inline(always)]
    fn slow_ns() -> u64 {
        // SAFETY: a frozen .rodata word.
        unsafe { core::ptr::read_volatile(&SLOW_NS) }
    }

    /// Reads one `LAYOUT` offset. Volatile, so LLVM does not fold the zeros above; the verifier
    /// still sees a constant, because the loader freezes `.rodata` (BPF_F_RDONLY_PROG).
    #[inline(always)]
    fn layout(field: &u32) -> u32 {
        // SAFETY: a read of an initialised static.
        unsafe { core::ptr::read_volatile(field) }
    }

    /// Tracked processes: `TRACKED[tgid]` is the process's dense index + 1, or 0. Sized from
    /// `kernel.pid_max` at load.
    #[map]
    static TRACKED: Array<u32> = Array::with_max_entries(1, 0);

    /// The syscall in flight per thread (entry time and process index); sized from `pid_max`.
    #[map]
    static START: Array<ThreadStart> = Array::with_max_entries(1, 0);

    /// With `--off-cpu`, per thread inside a traced call: its off-CPU parts ([`OffCpu`]); sized
    /// from `pid_max` then, else one entry.
    #[map]
    static OFF_CPU: Array<OffCpu> = Array::with_max_entries(1, 0);

    /// Syscall number → [`SlotEntry`], filled by user space.
    #[map]
    static SLOT_OF_NR: Array<SlotEntry> = Array::with_max_entries(MAX_SYSCALL_NR, 0);

    /// The same for 32-bit (ia32) syscall numbers, which `compat_enter` sees: the traced
    /// syscalls that exist in the ia32 table, under the same slots.
    #[map]
    static IA32_SLOT_OF_NR: Array<SlotEntry> = Array::with_max_entries(MAX_SYSCALL_NR, 0);

    /// Per slot: counters and latency histogram.
    #[map]
    static SYSCALLS: PerCpuArray<SyscallSlot> =
        PerCpuArray::with_max_entries(MAX_SYSCALL_SLOTS as u32, 0);

    /// Per slot: histogram of the events returned per call (epoll_wait and friends only).
    #[map]
    static EVENTS: PerCpuArray<LatencyBuckets> =
        PerCpuArray::with_max_entries(MAX_SYSCALL_SLOTS as u32, 0);

    /// Per tracked process (dense index): calls, errors and time per slot.
    #[map]
    static PROCESSES: PerCpuArray<ProcessStats> = PerCpuArray::with_max_entries(MAX_PROCESSES, 0);

    /// Dense index → tgid, so user space can name the processes the kernel started tracking.
    #[map]
    static PROCESS_PIDS: Array<u32> = Array::with_max_entries(MAX_PROCESSES, 0);

    /// Dense indexes handed out to forked processes so far (entry 0), counted from
    /// `FIRST_FORKED_PROCESS`.
    #[map]
    static NEXT_PROCESS: Array<u64> = Array::with_max_entries(1, 0);

    /// Entry 0 is set to 1 by user space once every program is attached. Exit programs are
    /// attached before entry programs, so until then an exit without an entry is a call that began
    /// before tracing did, not a lost one; from then on at most one per thread can be.
    #[map]
    static ARMED: Array<u32> = Array::with_max_entries(1, 0);

    /// Events that could not be recorded, by [`DropReason`].
    #[map]
    static DROPPED: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_REASONS as u32, 0);

    const CLONE_THREAD: u64 = 0x0001_0000;

    #[inline(always)]
    fn count_drop(reason: DropReason) {
        if let Some(counter) = DROPPED.get_ptr_mut(reason as u32) {
            // SAFETY: per-CPU value, and tracepoint programs run with preemption disabled.
            unsafe { *counter += 1 };
        }
    }

    /// The dense process index of `tgid`, `NO_PROCESS` under `--all`, its cgroup's index under
    /// `--cgroup`, `None` when not traced.
    #[inline(always)]
    fn traced_process(tgid: u32) -> Option<u32> {
        // SAFETY: read-only globals patched by the loader; volatile so they are not folded.
        if tgid == unsafe { core::ptr::read_volatile(&SELF_TGID) } {
            return None;
        }
        // SAFETY: as above.
        let all = unsafe { core::ptr::read_volatile(&TRACE_ALL) } != 0;
        // SAFETY: as above.
        let cgroups = unsafe { core::ptr::read_volatile(&TRACE_CGROUPS) } != 0;
        if cgroups {
            // SAFETY: a plain helper call; the map lookup returns a copy.
            let id = unsafe { bpf_get_current_cgroup_id() };
            return unsafe { CGROUPS.get(&id) }.copied();
        }
        match TRACKED.get(tgid) {
            Some(&index) if index != 0 => Some(index - 1),
            _ if all => Some(NO_PROCESS),
            // A process beyond the map (pid_max raised while tracing) was never tracked: its
            // fork, if a tracked process made it, was counted as lost in `task_newtask`.
            _ => None,
        }
    }

    /// Counts an exit whose entry was not seen, under its syscall's slot and in `DROPPED`;
    /// `entry` is the syscall's slot-table entry. A new child's return from a fork had no entry
    /// and loses nothing.
    #[inline(always)]
    fn count_missing_start(entry: SlotEntry, ret: i64) {
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

    /// Reads the `SIZE`-byte field at `offset` in the tracepoint record, zero-extended. The
    /// verifier accepts ctx reads only at an offset written in the instruction, so there is one
    /// load per position of the record window, each an asm block with its offset in the
    /// instruction (plain loads were merged by LLVM into one load through a computed pointer,
    /// which the verifier refuses). `offset` comes from the frozen `LAYOUT`, which the verifier
    /// knows as a constant: it walks only the load that matches, and a record too short for a
    /// load that is never taken does not refuse the attach. Anything else reads as zero.
    #[inline(always)]
    fn field<const SIZE: usize>(ctx: &TracePointContext, offset: u32) -> u64 {
        use aya_ebpf::EbpfContext as _;
        let record = ctx.as_ptr();
        // The window's bounds as literals (seq! takes no constants), checked against the shared ones.
        const { assert!(RECORD_HEADER == 8 && RECORD_WINDOW == 72) };
        seq_macro::seq!(AT in 8..72 {
            if AT % SIZE == 0 && offset == AT {
                let value: u64;
                // SAFETY: the loader checked that a SIZE-byte field lies at AT in this record;
                // the verifier checks it again against the record's size at attach.
                unsafe {
                    match SIZE {
                        1 => core::arch::asm!("{v} = *(u8 *)({r} + {at})", v = out(reg) value, r = in(reg) record, at = const AT, options(readonly, nostack, preserves_flags)),
                        4 => core::arch::asm!("{v} = *(u32 *)({r} + {at})", v = out(reg) value, r = in(reg) record, at = const AT, options(readonly, nostack, preserves_flags)),
                        8 => core::arch::asm!("{v} = *(u64 *)({r} + {at})", v = out(reg) value, r = in(reg) record, at = const AT, options(readonly, nostack, preserves_flags)),
                        _ => return 0,
                    }
                }
                return value;
            }
        });
        0
    }

    #[tracepoint]
    pub fn syscall_enter(_ctx: TracePointContext) -> u32 {
        let pid_tgid = bpf_get_current_pid_tgid();
        let Some(process) = traced_process((pid_tgid >> 32) as u32) else {
            return 0;
        };
        match START.get_ptr_mut(pid_tgid as u32) {
            // SAFETY: only this thread writes its own entry between its syscall entry and exit.
            Some(start) => unsafe {
                (*start).start_ns = bpf_ktime_get_ns();
                (*start).process = process;
                (*start).compat_entry = 0;
            },
            None => count_drop(DropReason::IdOutOfRange),
        }
        reset_off_cpu(pid_tgid as u32);
        0
    }

    /// At a traced call's entry: its off-CPU parts start from zero.
    #[inline(always)]
    fn reset_off_cpu(tid: u32) {
        if split_off_cpu()
            && let Some(off) = OFF_CPU.get_ptr_mut(tid)
        {
            // SAFETY: this thread's own entry; the sched programs touch it only while the
            // thread is inside a call and off the CPU, which it is not now.
            unsafe { *off = OffCpu::default() };
        }
    }

    /// Whether the syscall whose registers are `regs` came from 32-bit (ia32) code: the
    /// syscalls: tracepoints skip those calls (x86 defines ARCH_TRACE_IGNORE_COMPAT_SYSCALLS),
    /// so the raw programs below time them. (A 64-bit program issuing `int $0x80` runs with the
    /// 64-bit selector and is seen by neither.)
    #[inline(always)]
    fn is_ia32(regs: *const u8) -> bool {
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
        let nr = ctx.arg::<u64>(1);
        let entry = IA32_SLOT_OF_NR.get(nr as u32).copied().unwrap_or(0);
        if entry == 0 {
            return 0;
        }
        let pid_tgid = bpf_get_current_pid_tgid();
        let Some(process) = traced_process((pid_tgid >> 32) as u32) else {
            return 0;
        };
        if !is_ia32(ctx.arg::<*const u8>(0)) {
            return 0;
        }
        if slot_of_entry(entry).is_none() {
            count_drop(DropReason::Ia32Socketcall);
            return 0;
        }
        match START.get_ptr_mut(pid_tgid as u32) {
            // SAFETY: only this thread writes its own entry between its syscall entry and exit.
            Some(start) => unsafe {
                (*start).start_ns = bpf_ktime_get_ns();
                (*start).process = process;
                (*start).compat_entry = entry;
            },
            None => count_drop(DropReason::IdOutOfRange),
        }
        reset_off_cpu(pid_tgid as u32);
        0
    }

    /// raw `sys_exit`: ends a 32-bit call that `compat_enter` timed. Calls timed by the
    /// syscall tracepoints carry no compat entry and are left to `syscall_exit`. An exit with
    /// no entry is looked at only once every program is attached, for a traced process, and
    /// only a 32-bit one is counted here.
    #[raw_tracepoint]
    pub fn compat_exit(ctx: RawTracePointContext) -> u32 {
        let pid_tgid = bpf_get_current_pid_tgid();
        let Some(start_ptr) = START.get_ptr_mut(pid_tgid as u32) else {
            return 0;
        };
        // SAFETY: this thread's own entry.
        let start = unsafe { *start_ptr };
        let ret = ctx.arg::<i64>(1);
        if start.start_ns == 0 {
            if ARMED.get(0).is_some_and(|&armed| armed != 0)
                && traced_process((pid_tgid >> 32) as u32).is_some()
            {
                let regs = ctx.arg::<*const u8>(0);
                if is_ia32(regs) {
                    // SAFETY: as in `is_ia32`.
                    let nr =
                        unsafe { bpf_probe_read_kernel(regs.add(PT_REGS_ORIG_AX).cast::<u64>()) }
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
        if start.compat_entry == 0 {
            return 0;
        }
        // SAFETY: a plain helper call.
        let now = unsafe { bpf_ktime_get_ns() };
        // SAFETY: as above.
        unsafe { (*start_ptr).start_ns = 0 };
        account(&ctx, pid_tgid, start, start.compat_entry, ret, now);
        0
    }

    #[inline(always)]
    fn split_off_cpu() -> bool {
        // SAFETY: a frozen .rodata byte.
        unsafe { core::ptr::read_volatile(&SPLIT_OFF_CPU) != 0 }
    }

    /// sched:sched_switch, `--off-cpu`: the current (previous) task leaves the CPU, inside a
    /// traced call or not; the next one comes back to it. Two array lookups per switch, a clock
    /// read only for a thread inside a traced call.
    #[tracepoint]
    pub fn sched_switch(ctx: TracePointContext) -> u32 {
        let prev = bpf_get_current_pid_tgid() as u32;
        let in_call = START.get(prev).is_some_and(|s| s.start_ns != 0);
        let mut now = 0;
        if in_call && let Some(off) = OFF_CPU.get_ptr_mut(prev) {
            // SAFETY: a plain helper call.
            now = unsafe { bpf_ktime_get_ns() };
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

    /// The exit path looks up only the thread's own entry: its process index was stored at entry,
    /// so the common case needs no tracking lookup (only a missing entry asks whether it should
    /// have been there). The clock is read once the entry is known to be there: every untraced
    /// caller of a traced syscall runs this program, and a clock read was most of its cost (the
    /// lookup it now includes in a traced call's time is a few ns, against µs calls).
    #[tracepoint]
    pub fn syscall_exit(ctx: TracePointContext) -> u32 {
        let pid_tgid = bpf_get_current_pid_tgid();
        // A thread beyond the map: its entry was counted as lost in `syscall_enter`.
        let Some(start_ptr) = START.get_ptr_mut(pid_tgid as u32) else {
            return 0;
        };
        // SAFETY: this thread's own entry.
        let start = unsafe { *start_ptr };
        let nr = field::<4>(&ctx, layout(&LAYOUT.sys_exit_nr)) as u32 as i32;
        if start.start_ns == 0 {
            // Untraced, or traced but its entry was missed (in flight when tracing began).
            if ARMED.get(0).is_some_and(|&armed| armed != 0)
                && traced_process((pid_tgid >> 32) as u32).is_some()
            {
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
        let entry = SLOT_OF_NR.get(nr as u32).copied().unwrap_or(0);
        account(&ctx, pid_tgid, start, entry, ret, now);
        0
    }

    /// Adds one finished call to its slot's counters and histograms, its process's (or
    /// cgroup's) row, and sends it to user space past the `--slow` threshold. Every front end
    /// (the syscall tracepoints, the raw compat programs) ends its calls here.
    #[inline(always)]
    fn account<C: StackIdContext>(
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
            && let Some(off) = OFF_CPU.get(pid_tgid as u32)
        {
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
            let bucket = bucket_index(ret as u64) as usize & (HIST_BUCKETS - 1);
            // SAFETY: per-CPU value, as above.
            if let Some(count) = unsafe { &mut *events }.counts.get_mut(bucket) {
                *count += 1;
            }
        }

        // SAFETY: a frozen .rodata byte.
        if unsafe { core::ptr::read_volatile(&BY_CGROUP) } != 0 {
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

    /// `--slow`, in `sched_switch` for a traced call that blocks: the first time its process
    /// does so under its current name (new, or after an exec), tells user space, which then
    /// reads the process's mappings while the call waits. A process that exits right after its
    /// slow call is then symbolized all the same. Only a call that blocks announces: one merely
    /// preempted may be the dynamic loader's, before the libraries are mapped.
    #[inline(always)]
    fn announce() {
        let pid_tgid = bpf_get_current_pid_tgid();
        let tgid = (pid_tgid >> 32) as u32;
        let comm = bpf_get_current_comm().unwrap_or_default();
        let name = u64::from_ne_bytes([
            comm[0], comm[1], comm[2], comm[3], comm[4], comm[5], comm[6], comm[7],
        ]);
        let Some(seen) = ANNOUNCED.get_ptr_mut(tgid) else {
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

    /// `--slow`: completes `call` with the user stack and the thread's name, and sends it to
    /// user space; counts it in `SLOW_LOST` when the ring buffer is full. Off the hot path: only
    /// calls past the threshold get here.
    #[inline(always)]
    fn report_slow<C: StackIdContext>(ctx: &C, call: SlowCall) {
        let Some(mut entry) = SLOW_CALLS.reserve::<SlowCall>(0) else {
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
        entry.write(SlowCall {
            user_stack,
            comm: bpf_get_current_comm().unwrap_or_default(),
            ..call
        });
        entry.submit(0);
    }

    /// `--by-cgroup`: the call under the current cgroup's id, whose entry is made on its first
    /// call (a full table is counted in `DROPPED`).
    #[inline(always)]
    fn count_cgroup(slot: u32, elapsed: u64, failed: bool) {
        // SAFETY: a plain helper call.
        let id = unsafe { bpf_get_current_cgroup_id() };
        let mut entry = CGROUP_STATS.get_ptr_mut(id);
        if entry.is_none() {
            let Some(zero) = ZERO_STATS.get_ptr(0) else {
                return;
            };
            // SAFETY: a map value nobody writes; another CPU inserting the same id first
            // (EEXIST) is fine, the lookup below finds it.
            let _ = CGROUP_STATS.insert(id, unsafe { &*zero }, 0);
            entry = CGROUP_STATS.get_ptr_mut(id);
        }
        let Some(stats) = entry else {
            count_drop(DropReason::CgroupTableFull);
            return;
        };
        // SAFETY: per-CPU value, preemption disabled.
        let stats = unsafe { &mut *stats };
        let slot = slot as usize & (MAX_SYSCALL_SLOTS - 1);
        if let Some(calls) = stats.calls.get_mut(slot) {
            *calls += 1;
        }
        if let Some(total) = stats.total_ns.get_mut(slot) {
            *total += elapsed;
        }
        if failed && let Some(errors) = stats.errors.get_mut(slot) {
            *errors += 1;
        }
    }

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
        match TRACKED.get(parent) {
            Some(&index) if index != 0 => {}
            _ => return 0,
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
        if let Some(start) = START.get_ptr_mut(pid_tgid as u32) {
            // SAFETY: the exiting thread's own entry.
            unsafe { (*start).start_ns = 0 };
        }
        if !group_dead(&ctx) {
            return 0;
        }
        let tgid = (pid_tgid >> 32) as u32;
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
    fn group_dead(ctx: &TracePointContext) -> bool {
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

    /// The loader's own process, for `ctx_probe`; set before load.
    #[unsafe(no_mangle)]
    static PROBE_TGID: u32 = 0;

    /// What `ctx_probe` saw: the caller's pid_tgid and the two words after the common header.
    #[map]
    static CTX_PROBE: Array<[u64; 3]> = Array::with_max_entries(1, 0);

    /// Attached alone, to sys_exit_getppid, before the real load: records the first two words
    /// after the record header of the context the kernel really hands BPF programs, for the
    /// loader's own getppid(). BPF programs on syscall tracepoints do not get the trace record
    /// but a copy the kernel builds for them (`perf_call_bpf_exit`), and older kernels built it
    /// with an 8-byte header whatever the record's (6.1-rt: `__syscall_nr` at 12 in the format
    /// file, at 8 for BPF). The loader finds the number and the return value in these words.
    #[tracepoint]
    pub fn ctx_probe(ctx: TracePointContext) -> u32 {
        let pid_tgid = bpf_get_current_pid_tgid();
        // SAFETY: a read-only global patched by the loader.
        if (pid_tgid >> 32) as u32 != unsafe { core::ptr::read_volatile(&PROBE_TGID) } {
            return 0;
        }
        let first = field::<8>(&ctx, RECORD_HEADER);
        let second = field::<8>(&ctx, RECORD_HEADER + 8);
        if let Some(seen) = CTX_PROBE.get_ptr_mut(0) {
            // SAFETY: a plain store into the map's one value.
            unsafe { *seen = [pid_tgid, first, second] };
        }
        0
    }

    // What follows is for `profiler bench overhead` alone: the limits the profiler is measured
    // against, on both attach points (per-syscall tracepoints and the raw sys_enter/sys_exit).

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
    static TIMER_START: Array<u64> = Array::with_max_entries(1, 0);

    /// The minimal timer's total, the one per-CPU counter it keeps.
    #[map]
    static TIMER_TOTAL: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

    /// The syscall the raw minimal timer times; set by the loader.
    #[unsafe(no_mangle)]
    static RAW_TIMED_NR: u64 = u64::MAX;

    /// What every syscall timer must do at entry: read the clock, store it for the thread.
    #[inline(always)]
    fn timer_start() {
        let tid = bpf_get_current_pid_tgid() as u32;
        if let Some(start) = TIMER_START.get_ptr_mut(tid) {
            // SAFETY: this thread's own entry.
            unsafe { *start = bpf_ktime_get_ns() };
        }
    }

    /// And at exit: read the clock again, add the difference to a per-CPU counter.
    #[inline(always)]
    fn timer_stop() {
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
        // SAFETY: a read-only global patched by the loader.
        if ctx.arg::<u64>(1) == unsafe { core::ptr::read_volatile(&RAW_TIMED_NR) } {
            timer_start();
        }
        0
    }

    #[raw_tracepoint]
    pub fn raw_timer_exit(_ctx: RawTracePointContext) -> u32 {
        timer_stop();
        0
    }

    #[panic_handler]
    fn panic(_info: &core::panic::PanicInfo) -> ! {
        loop {}
    }

    #[unsafe(link_section = "license")]
    #[unsafe(no_mangle)]
    static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
}

#[cfg(not(target_arch = "bpf"))]
fn main() {
    // Built for the host only by workspace-wide commands; the real build targets bpfel-unknown-none.
}
