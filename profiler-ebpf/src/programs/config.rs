//! The configuration user space freezes into `.rodata` before load ([`Config`]), read in one
//! way: volatile, so LLVM does not fold the defaults, while the verifier, seeing frozen
//! memory, still drops the branches an option leaves off.

use super::*;

/// Set by the loader (`override_global("CONFIG", ..)`), frozen.
#[unsafe(no_mangle)]
pub(crate) static CONFIG: Config = Config::OFF;

macro_rules! read {
    ($field:ident) => {
        // SAFETY: a read of a frozen, initialised static.
        unsafe { core::ptr::read_volatile(&CONFIG.$field) }
    };
}

/// The profiler's own process, never traced (0 for none).
#[inline(always)]
pub(crate) fn self_tgid() -> u32 {
    read!(self_tgid)
}

/// `--all`: every process.
#[inline(always)]
pub(crate) fn trace_all() -> bool {
    read!(trace_all) != 0
}

/// `--cgroup`: the processes of the cgroups in `CGROUPS`.
#[inline(always)]
pub(crate) fn trace_cgroups() -> bool {
    read!(trace_cgroups) != 0
}

/// `--all --by-cgroup`: every call also under its cgroup's id.
#[inline(always)]
pub(crate) fn by_cgroup() -> bool {
    read!(by_cgroup) != 0
}

/// `--off-cpu` (and `--slow`): each call split into on-CPU, blocked and runnable time.
#[inline(always)]
pub(crate) fn split_off_cpu() -> bool {
    read!(split_off_cpu) != 0
}

/// Per-thread state in the hash maps keyed by id, not the arrays ([`Config::per_thread_hash`]).
#[inline(always)]
pub(crate) fn per_thread_hash() -> bool {
    read!(per_thread_hash) != 0
}

/// The compat programs count every call too ([`Config::count_every`]).
#[inline(always)]
pub(crate) fn count_every() -> bool {
    read!(count_every) != 0
}

/// `--slow`: the threshold in ns (0: off).
#[inline(always)]
pub(crate) fn slow_ns() -> u64 {
    read!(slow_ns)
}

/// The loader's own process, for `ctx_probe`.
#[inline(always)]
pub(crate) fn probe_tgid() -> u32 {
    read!(probe_tgid)
}

/// The syscall the raw minimal timer (the bench's) times.
#[inline(always)]
pub(crate) fn raw_timed_nr() -> u64 {
    read!(raw_timed_nr)
}

/// The fentry front end: slot `slot`'s entry (its flags), a constant of each program copy.
#[inline(always)]
pub(crate) fn slot_entry(slot: usize) -> SlotEntry {
    // SAFETY: a read of a frozen, initialised static; `slot` is below MAX_SYSCALL_SLOTS.
    unsafe { core::ptr::read_volatile(&CONFIG.slot_entries[slot & (MAX_SYSCALL_SLOTS - 1)]) }
}
