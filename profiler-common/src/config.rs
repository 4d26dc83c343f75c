//! What user space tells the programs before load: the options (`Config`) and where this
//! kernel puts the fields the programs read (`RecordLayout`, tracepoint records, `pt_regs`).

/// The code segment selector of 32-bit (ia32) user code on x86_64 (`__USER32_CS`): what
/// `pt_regs.cs` holds during a 32-bit process's syscall.
pub const USER32_CS: u64 = 0x23;
/// Offset of `cs` in x86_64's `struct pt_regs` (user ABI, the same on every kernel).
pub const PT_REGS_CS: usize = 17 * 8;
/// Offset of `dx` in x86_64's `struct pt_regs`: a syscall's third argument, in the x86_64 and
/// the ia32 conventions alike (read's count, recvfrom's size).
pub const PT_REGS_DX: usize = 12 * 8;
/// Offsets of `bp`, `ip` and `sp` in x86_64's `struct pt_regs`: the user registers a slow
/// call's stack is unwound from.
pub const PT_REGS_BP: usize = 4 * 8;
/// See [`PT_REGS_BP`].
pub const PT_REGS_IP: usize = 16 * 8;
/// See [`PT_REGS_BP`].
pub const PT_REGS_SP: usize = 19 * 8;
/// Offset of `orig_ax` (the syscall number) in x86_64's `struct pt_regs`.
pub const PT_REGS_ORIG_AX: usize = 15 * 8;

/// The common header every tracepoint record starts with (`common_type`, `common_flags`,
/// `common_preempt_count`, `common_pid`); programs may not read it, and no field we read lies in it.
pub const RECORD_HEADER: u32 = 8;

/// How many bytes of a tracepoint record the programs can read a field from: a field is read
/// at a constant offset (the verifier allows no other ctx access), so the kernel side has one
/// read per position of this window and the verifier, which knows the offset from the frozen
/// `.rodata`, keeps only the one that matches.
pub const RECORD_WINDOW: u32 = 72;

/// What user space sets before load, as one read-only global (`CONFIG`, frozen: the verifier
/// folds the options that are off out of the hot path), the way libbpf-tools set `rodata`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// `--slow`: calls at least this long (ns) go to user space with their stacks; 0 for off.
    pub slow_ns: u64,
    /// The syscall the benchmark's raw minimal timer times (`u64::MAX` for none).
    pub raw_timed_nr: u64,
    /// The profiler's own process, never traced (0 for none: the tests count their own calls).
    pub self_tgid: u32,
    /// The loader's own process, for the context probe.
    pub probe_tgid: u32,
    /// 1 for `--all`.
    pub trace_all: u8,
    /// 1 for `--cgroup`.
    pub trace_cgroups: u8,
    /// 1 for `--all --by-cgroup`.
    pub by_cgroup: u8,
    /// 1 for `--off-cpu` (and `--slow`).
    pub split_off_cpu: u8,
    /// 1 where the per-thread state is keyed by thread id in hash maps (`START_BY_TID`, ...),
    /// sized by the threads that can exist, instead of arrays indexed by id and sized by
    /// `kernel.pid_max`: a large `pid_max` (systemd's 4194304), or one raised while tracing.
    pub per_thread_hash: u8,
    /// 1 where the raw compat programs (`compat_enter`/`compat_exit`, which every syscall of the
    /// machine runs anyway) also count every call of the traced processes: a map lookup more
    /// per syscall, where two programs of their own (`every_enter`/`every_exit`) cost a
    /// program dispatch each.
    pub count_every: u8,
    /// Explicit padding.
    pub _pad: [u8; 2],
    /// The fentry front end: each slot's [`SlotEntry`](crate::SlotEntry) (flags included),
    /// which its programs, one pair per slot, read with the slot as a constant.
    pub slot_entries: [u32; crate::MAX_SYSCALL_SLOTS],
}

impl Config {
    /// Every option off.
    pub const OFF: Self = Self {
        slow_ns: 0,
        raw_timed_nr: u64::MAX,
        self_tgid: 0,
        probe_tgid: 0,
        trace_all: 0,
        trace_cgroups: 0,
        by_cgroup: 0,
        split_off_cpu: 0,
        per_thread_hash: 0,
        count_every: 0,
        _pad: [0; 2],
        slot_entries: [0; crate::MAX_SYSCALL_SLOTS],
    };
}

/// Where the fields the programs read lie on *this* kernel, found by the loader in the
/// tracepoints' `format` files and the kernel's BTF, and handed to the programs as one read-only
/// global (`LAYOUT`). Layouts differ between kernels: `__syscall_nr` is at 8 on 6.1 and 6.18 but
/// at 12 on 6.1-rt (whose common header has `common_preempt_lazy_count`), and
/// `sched_process_exit` has `group_dead` only from 6.16 on.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordLayout {
    /// `syscalls:sys_exit_*`: offset of `int __syscall_nr`.
    pub sys_exit_nr: u32,
    /// `syscalls:sys_exit_*`: offset of `long ret`.
    pub sys_exit_ret: u32,
    /// `task:task_newtask`: offset of `pid_t pid` (the child).
    pub newtask_pid: u32,
    /// `task:task_newtask`: offset of `clone_flags` (8 bytes).
    pub newtask_clone_flags: u32,
    /// `sched:sched_process_exit`: offset of `bool group_dead`, or [`FIELD_ABSENT`] on kernels
    /// before 6.16, which then use `task_signal` and `signal_live`.
    pub process_exit_group_dead: u32,
    /// BTF: byte offset of `signal` in `struct task_struct` (used when `group_dead` is absent).
    pub task_signal: u32,
    /// BTF: byte offset of `live` (an `atomic_t`) in `struct signal_struct`.
    pub signal_live: u32,
    /// `sched:sched_switch`: offset of `long prev_state` (the previous task is the current one).
    pub switch_prev_state: u32,
    /// `sched:sched_switch`: offset of `pid_t next_pid` (64 on 6.1-rt, hence the 72-byte window).
    pub switch_next_pid: u32,
    /// `sched:sched_wakeup`: offset of `pid_t pid` (the task woken).
    pub wakeup_pid: u32,
    /// BTF: byte offset of `pid` in `struct task_struct`, for the raw `sched_switch` and
    /// `sched_wakeup` programs (which get task pointers, not records); [`FIELD_ABSENT`] when
    /// the loader chose the classic tracepoints.
    pub task_pid: u32,
}

/// A [`RecordLayout`] offset for a field this kernel's record does not have (no field lies in
/// the [`RECORD_HEADER`], so 0 is free).
pub const FIELD_ABSENT: u32 = 0;

// SAFETY: u32 fields only: no padding, any bit pattern valid.
pod!(RecordLayout);

// SAFETY: integer fields with explicit padding, any bit pattern valid.
pod!(Config);
