//! The names of the kernel side's maps, globals and programs, as user space finds them in the
//! object, and what each program is for. The kernel side names them by its statics and
//! functions (aya's attribute macros take no constants): a unit test of the profiler
//! (`bpf::tests::the_object_has_exactly_the_named_programs_and_maps`) holds the object to
//! these lists, both ways.

/// The maps and the globals user space sets before load.
pub mod map {
    pub const ANNOUNCED: &str = "ANNOUNCED";
    pub const ANNOUNCED_BY_TGID: &str = "ANNOUNCED_BY_TGID";
    pub const ARMED: &str = "ARMED";
    pub const CGROUPS: &str = "CGROUPS";
    pub const CGROUP_STATS: &str = "CGROUP_STATS";
    pub const CONFIG: &str = "CONFIG";
    pub const CTX_PROBE: &str = "CTX_PROBE";
    pub const DROPPED: &str = "DROPPED";
    pub const EVENTS: &str = "EVENTS";
    pub const EVERY: &str = "EVERY";
    pub const HOLDER_OF: &str = "HOLDER_OF";
    pub const IA32_SLOT_OF_NR: &str = "IA32_SLOT_OF_NR";
    pub const LAYOUT: &str = "LAYOUT";
    pub const NEXT_PROCESS: &str = "NEXT_PROCESS";
    pub const OFF_CPU: &str = "OFF_CPU";
    pub const OFF_CPU_BY_TID: &str = "OFF_CPU_BY_TID";
    pub const PROCESSES: &str = "PROCESSES";
    pub const PROCESS_PIDS: &str = "PROCESS_PIDS";
    pub const RAN: &str = "RAN";
    pub const SLOT_OF_NR: &str = "SLOT_OF_NR";
    pub const SLOW_CALLS: &str = "SLOW_CALLS";
    pub const SLOW_LOST: &str = "SLOW_LOST";
    pub const STACKS: &str = "STACKS";
    pub const START: &str = "START";
    pub const START_BY_TID: &str = "START_BY_TID";
    pub const SYSCALLS: &str = "SYSCALLS";
    pub const TIMER_START: &str = "TIMER_START";
    pub const TIMER_TOTAL: &str = "TIMER_TOTAL";
    pub const TRACKED: &str = "TRACKED";
    pub const TRACKED_BY_TGID: &str = "TRACKED_BY_TGID";
    /// Kernel-only: the zeroed row a new cgroup's entry is created from.
    pub const ZERO_STATS: &str = "ZERO_STATS";

    /// Every map above (the globals `CONFIG` and `LAYOUT` are `.rodata`, not maps).
    pub const ALL: [&str; 29] = [
        ANNOUNCED,
        ANNOUNCED_BY_TGID,
        ARMED,
        CGROUPS,
        CGROUP_STATS,
        CTX_PROBE,
        DROPPED,
        EVENTS,
        EVERY,
        HOLDER_OF,
        IA32_SLOT_OF_NR,
        NEXT_PROCESS,
        OFF_CPU,
        OFF_CPU_BY_TID,
        PROCESSES,
        PROCESS_PIDS,
        RAN,
        SLOT_OF_NR,
        SLOW_CALLS,
        SLOW_LOST,
        STACKS,
        START,
        START_BY_TID,
        SYSCALLS,
        TIMER_START,
        TIMER_TOTAL,
        TRACKED,
        TRACKED_BY_TGID,
        ZERO_STATS,
    ];
}

/// What a kernel program is for: where the reports that break the profiler's cost down put it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Times the traced syscalls: a front end's entry or exit (the syscall tracepoints'
    /// pair, or an fentry/fexit pair per slot).
    SyscallTiming,
    /// Times 32-bit calls on the raw `sys_enter`/`sys_exit`: runs for every syscall of the
    /// machine.
    Compat,
    /// Counts every call of the traced processes (`--syscalls all`) on the raw tracepoints:
    /// runs for every syscall of the machine.
    Every,
    /// `--off-cpu` and `--slow`: runs at every context switch and wakeup of the machine.
    Sched,
    /// Follows forks and exits of the traced processes.
    Process,
    /// The loader's context probe, and the benchmark's floors (empty programs, minimal timers).
    Probe,
}

impl Role {
    /// Whether the program runs for events of the whole machine (every syscall, every
    /// switch), traced or not.
    #[must_use]
    pub const fn machine_wide(self) -> bool {
        matches!(self, Self::Compat | Self::Every | Self::Sched)
    }

    /// Whether its runs are the cost of timing syscalls (what `serve --self-cost` divides by
    /// the traced calls).
    #[must_use]
    pub const fn times_syscalls(self) -> bool {
        matches!(self, Self::SyscallTiming | Self::Compat | Self::Every)
    }
}

/// The programs.
pub mod program {
    pub const SYSCALL_ENTER: &str = "syscall_enter";
    pub const SYSCALL_EXIT: &str = "syscall_exit";
    /// `syscall_enter` for the sized syscalls (read, write...): keeps the requested size.
    pub const SYSCALL_ENTER_SIZED: &str = "syscall_enter_sized";
    pub const COMPAT_ENTER: &str = "compat_enter";
    pub const COMPAT_EXIT: &str = "compat_exit";
    pub const EVERY_ENTER: &str = "every_enter";
    pub const EVERY_EXIT: &str = "every_exit";
    pub const FENTRY_SOCKETCALL: &str = "fentry_socketcall";
    pub const TASK_NEWTASK: &str = "task_newtask";
    pub const PROCESS_EXIT: &str = "process_exit";
    pub const SCHED_SWITCH: &str = "sched_switch";
    pub const SCHED_WAKEUP: &str = "sched_wakeup";
    pub const BTF_SCHED_SWITCH: &str = "btf_sched_switch";
    pub const BTF_SCHED_WAKEUP: &str = "btf_sched_wakeup";
    pub const CTX_PROBE: &str = "ctx_probe";
    pub const NOOP: &str = "noop";
    pub const RAW_NOOP: &str = "raw_noop";
    pub const TIMER_ENTER: &str = "timer_enter";
    pub const TIMER_EXIT: &str = "timer_exit";
    pub const RAW_TIMER_ENTER: &str = "raw_timer_enter";
    pub const RAW_TIMER_EXIT: &str = "raw_timer_exit";
    pub const FENTRY_NOOP: &str = "fentry_noop";
    pub const FEXIT_NOOP: &str = "fexit_noop";
    pub const FENTRY_TIMER: &str = "fentry_timer";
    pub const FEXIT_TIMER: &str = "fexit_timer";
    /// The fentry front end's programs per slot: `fentry_N`/`fexit_N` on the x86_64 table's
    /// functions, `fentry32_N`/`fexit32_N` on the ia32 table's (N = 0..MAX_SYSCALL_SLOTS).
    pub const FENTRY_SLOT: &str = "fentry_";
    pub const FEXIT_SLOT: &str = "fexit_";
    pub const FENTRY32_SLOT: &str = "fentry32_";
    pub const FEXIT32_SLOT: &str = "fexit32_";
}

/// Every program with a fixed name, and its role.
pub const PROGRAMS: [(&str, Role); 25] = [
    (program::SYSCALL_ENTER, Role::SyscallTiming),
    (program::SYSCALL_EXIT, Role::SyscallTiming),
    (program::SYSCALL_ENTER_SIZED, Role::SyscallTiming),
    (program::FENTRY_SOCKETCALL, Role::SyscallTiming),
    (program::COMPAT_ENTER, Role::Compat),
    (program::COMPAT_EXIT, Role::Compat),
    (program::EVERY_ENTER, Role::Every),
    (program::EVERY_EXIT, Role::Every),
    (program::TASK_NEWTASK, Role::Process),
    (program::PROCESS_EXIT, Role::Process),
    (program::SCHED_SWITCH, Role::Sched),
    (program::SCHED_WAKEUP, Role::Sched),
    (program::BTF_SCHED_SWITCH, Role::Sched),
    (program::BTF_SCHED_WAKEUP, Role::Sched),
    (program::CTX_PROBE, Role::Probe),
    (program::NOOP, Role::Probe),
    (program::RAW_NOOP, Role::Probe),
    (program::TIMER_ENTER, Role::Probe),
    (program::TIMER_EXIT, Role::Probe),
    (program::RAW_TIMER_ENTER, Role::Probe),
    (program::RAW_TIMER_EXIT, Role::Probe),
    (program::FENTRY_NOOP, Role::Probe),
    (program::FEXIT_NOOP, Role::Probe),
    (program::FENTRY_TIMER, Role::Probe),
    (program::FEXIT_TIMER, Role::Probe),
];

/// The role of the program named `name`: one of [`PROGRAMS`], or the fentry front end's
/// per-slot programs ([`program::FENTRY_SLOT`]...); `None` for a name the kernel side does not
/// have.
#[must_use]
pub fn role_of(name: &str) -> Option<Role> {
    PROGRAMS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, role)| *role)
        .or_else(|| slot_program(name).map(|_| Role::SyscallTiming))
}

/// The slot of a per-slot fentry program (`fentry_3` → 3), `None` for any other name.
#[must_use]
pub fn slot_program(name: &str) -> Option<u32> {
    use program::{FENTRY_SLOT, FENTRY32_SLOT, FEXIT_SLOT, FEXIT32_SLOT};
    for prefix in [FENTRY32_SLOT, FEXIT32_SLOT, FENTRY_SLOT, FEXIT_SLOT] {
        if let Some(digits) = name.strip_prefix(prefix)
            && let Ok(slot) = digits.parse::<u32>()
            && (slot as usize) < crate::MAX_SYSCALL_SLOTS
        {
            return Some(slot);
        }
    }
    None
}
