//! The kernel programs, one file per concern: [`config`] (what user space sets before load),
//! [`maps`], [`record`] (reading tracepoint records), [`timing`] (the syscall tracepoints'
//! front end and the accounting every front end shares), [`compat`] (32-bit calls), [`every`] (every call of the traced processes), [`fentry`] (the fentry/fexit front end), [`sched`]
//! (`--off-cpu`), [`process`] (fork and exit), [`cgroup`], [`slow`]. The loader's context probe
//! (`probe.rs`) and the benchmark's limits (`bench.rs`) are here too but built into objects of
//! their own (`src/bin/`), so loading the profiler does not load them.

pub(crate) use core::intrinsics::{AtomicOrdering, atomic_xadd};

pub(crate) use aya_ebpf::{
    bindings::BPF_F_USER_STACK,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_get_current_task, bpf_get_current_task_btf, bpf_ktime_get_ns, bpf_probe_read_kernel,
        bpf_task_pt_regs, generated::bpf_probe_read_user as probe_read_user_raw,
    },
    macros::{btf_tracepoint, fentry, fexit, map, raw_tracepoint, tracepoint},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap, RingBuf, StackTrace},
    programs::{
        BtfTracePointContext, FEntryContext, FExitContext, RawTracePointContext, TracePointContext,
        tracing::StackIdContext,
    },
};
pub(crate) use aya_log_ebpf::{info, warn};
pub(crate) use profiler_common::{
    ANNOUNCE_SLOT, Config, DERIVED_PROCESS, DROP_REASONS, DropReason, EVERY_KEYS, ErrnoClass,
    FIELD_ABSENT, FIRST_FORKED_PROCESS, HIST_BUCKETS, HOLDERS, Holder, Holders, LatencyBuckets,
    MAX_CGROUP_IDS, MAX_PROCESSES, MAX_SYSCALL_NR, MAX_SYSCALL_SLOTS, NO_PROCESS, OFF_BLOCKED,
    OFF_RUNNABLE, OVERFLOW_PROCESS, OffCpu, OtherCalls, PT_REGS_BP, PT_REGS_CS, PT_REGS_DX,
    PT_REGS_IP, PT_REGS_ORIG_AX, PT_REGS_SP, RAN_SEGMENTS, RECORD_HEADER, RECORD_WINDOW, RanRing,
    RecordLayout, RowStats, STACK_NOT_TAKEN, SlotEntry, SlowCall, SlowCallStack, SyscallSlot,
    ThreadStart, USER_STACK_BYTES, USER_STACK_CHUNK, USER32_CS, bucket_index, entry_counts_events,
    entry_forks, entry_sized, entry_slot, every_key, forked_process_index, slot_of_entry,
    switched_out_runnable,
};

mod cgroup;
mod compat;
mod config;
mod every;
mod fentry;
mod maps;
mod process;
mod record;
mod sched;
mod slow;
mod timing;

pub(crate) use self::{
    cgroup::*, compat::*, config::*, every::*, fentry::*, maps::*, process::*, record::*, sched::*,
    slow::*, timing::*,
};

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
