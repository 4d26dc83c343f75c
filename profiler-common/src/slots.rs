//! The syscall slots: which syscalls are timed (the number → slot table user space fills)
//! and the flags of its entries.

/// How many syscalls one session can time at once (slots of the per-syscall maps).
pub const MAX_SYSCALL_SLOTS: usize = 32;

/// Size of the syscall-number → slot table; larger than any x86_64/aarch64 syscall number.
pub const MAX_SYSCALL_NR: u32 = 1024;

/// Bit set in a [`SLOT_OF_NR`](SlotEntry) entry for syscalls whose return value is an event count
/// (epoll_wait, epoll_pwait, epoll_pwait2), which also fill the events-per-call histogram.
pub const SLOT_FLAG_EVENTS: u32 = 1 << 16;

/// Bit set in a slot-table entry for the syscalls that return twice, once in the child (clone,
/// clone3, fork, vfork): a child's return (0) has no entry of its own and is no lost call.
pub const SLOT_FLAG_FORKS: u32 = 1 << 17;

/// Whether an entry is of a syscall that returns in a new child too.
#[inline(always)]
#[must_use]
pub const fn entry_forks(entry: SlotEntry) -> bool {
    entry & SLOT_FLAG_FORKS != 0
}

/// A slot-table entry (ia32 table only) of a syscall that is not timed but counted as not
/// seen ([`DropReason::Ia32Socketcall`]); its slot reads as none.
pub const IA32_NOT_TIMED: SlotEntry = SLOT_FLAG_FORKS << 1;

/// Bit set in a slot-table entry for the syscalls whose third argument is the size they were
/// asked to transfer and whose return value the bytes they did (read, write, recvfrom, sendto,
/// pread64, pwrite64): their entry keeps the size, their exit counts the short ones.
pub const SLOT_FLAG_SIZED: u32 = SLOT_FLAG_FORKS << 2;

/// Whether an entry is of a syscall whose third argument is its requested size.
#[inline(always)]
#[must_use]
pub const fn entry_sized(entry: SlotEntry) -> bool {
    entry & SLOT_FLAG_SIZED != 0
}

/// An entry of the syscall-number → slot table: `slot + 1` in the low 16 bits (0 = not timed),
/// flags above.
pub type SlotEntry = u32;

/// The [`SlotEntry`] user space writes for `slot`; `events` for syscalls whose return value is
/// an event count.
#[inline(always)]
#[must_use]
pub const fn encode_slot_entry(slot: u32, events: bool) -> SlotEntry {
    (slot + 1) | if events { SLOT_FLAG_EVENTS } else { 0 }
}

/// The slot an entry names; `MAX_SYSCALL_SLOTS` or more (u32::MAX for entry 0) when the
/// syscall is not timed. The kernel's hot path uses this form: compared with
/// `MAX_SYSCALL_SLOTS` and then masked, it keeps 6.1's verifier sure of the bound, where the
/// `Option` of [`slot_of_entry`] let LLVM drop the mask and 6.1 refused the program
/// ("R0 unbounded memory access").
#[inline(always)]
#[must_use]
pub const fn entry_slot(entry: SlotEntry) -> u32 {
    (entry & 0xffff).wrapping_sub(1)
}

/// The slot an entry names, or `None` for a syscall that is not timed (entry 0).
#[inline(always)]
#[must_use]
pub const fn slot_of_entry(entry: SlotEntry) -> Option<u32> {
    match entry_slot(entry) {
        slot if slot < MAX_SYSCALL_SLOTS as u32 => Some(slot),
        _ => None,
    }
}

/// Whether an entry's syscall also fills the events-per-call histogram.
#[inline(always)]
#[must_use]
pub const fn entry_counts_events(entry: SlotEntry) -> bool {
    entry & SLOT_FLAG_EVENTS != 0
}
