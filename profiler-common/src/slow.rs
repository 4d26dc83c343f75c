//! `--slow`: the record of a slow call and the sizes of its ring buffer and stack map.

/// `--slow`: one traced call that lasted at least the threshold, as the exit program sends it
/// through the `SLOW_CALLS` ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowCall {
    /// The call's latency, ns.
    pub duration_ns: u64,
    /// Its time switched out and not runnable, ns.
    pub blocked_ns: u64,
    /// Its time runnable but not running, ns.
    pub runnable_ns: u64,
    /// The return value (a negative errno on failure).
    pub ret: i64,
    /// `bpf_ktime_get_ns()` when it returned.
    pub end_ns: u64,
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The syscall's slot.
    pub slot: u32,
    /// Kernel stack id in `STACKS`, taken where the call waited longest (its longest
    /// switched-out interval); [`STACK_NOT_TAKEN`] when it never left the CPU; another
    /// negative value is the helper's error (-EEXIST: a different stack held its bucket).
    pub kernel_stack: i32,
    /// User stack id in `STACKS` at the call's return, or the helper's negative error.
    pub user_stack: i32,
    /// Explicit padding.
    pub _pad: u32,
    /// The thread's name (`comm`), NUL-padded.
    pub comm: [u8; 16],
}

/// Bytes of user stack sent with a slow call, from the thread's stack pointer up: what user
/// space unwinds with the binaries' DWARF call frame information (`.eh_frame`), as
/// `perf --call-graph dwarf` does (8 KiB by default there). Frames whose return addresses lie
/// deeper are cut; the report says so.
pub const USER_STACK_BYTES: usize = 16384;

/// The stack is copied in pieces of this size, so that a copy stops at the end of the stack's
/// mapping with what it read so far instead of failing whole.
pub const USER_STACK_CHUNK: usize = 1024;

/// `--slow`: a task that ran on a CPU, as the per-CPU `RAN` ring keeps the last
/// [`RAN_SEGMENTS`] of them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ran {
    /// When it was switched in, ns (`bpf_ktime_get_ns`); 0 before the first switch seen.
    pub start_ns: u64,
    /// When it was switched out, ns.
    pub end_ns: u64,
    /// Its thread id (0: the CPU was idle).
    pub pid: u32,
    /// Explicit padding.
    pub _pad: u32,
    /// Its name, NUL-padded.
    pub comm: [u8; 16],
}

/// How many of a CPU's last runs `RAN` keeps: a runnable interval with more switches than
/// this on its CPU is attributed in part (`Holders::attributed_ns` says how much).
pub const RAN_SEGMENTS: usize = 8;

/// `--slow`, per CPU: the last tasks that ran on it, a ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RanRing {
    /// When the task on the CPU now was switched in, ns.
    pub current_start: u64,
    /// Where the next run is written (modulo [`RAN_SEGMENTS`]).
    pub next: u32,
    /// Explicit padding.
    pub _pad: u32,
    /// The runs.
    pub segments: [Ran; RAN_SEGMENTS],
}

/// A task that held the CPU while a traced call's thread waited runnable for it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    /// How long it ran while the thread waited, ns (0: an empty entry).
    pub ns: u64,
    /// Its thread id (0: the CPU was idle, a wakeup's latency).
    pub pid: u32,
    /// Explicit padding.
    pub _pad: u32,
    /// Its name, NUL-padded.
    pub comm: [u8; 16],
}

/// Threads whose holders `HOLDER_OF` keeps at once (least recently used ones go first).
pub const HOLDER_THREADS: u32 = 16384;

/// How many holders a call keeps: the longest ones.
pub const HOLDERS: usize = 4;

/// `--slow`: who held the CPU while a traced call's thread was runnable (`HOLDER_OF`, by
/// thread id), filled when the thread gets the CPU back, sent with the call if it is slow.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holders {
    /// The start of the call these belong to (`ThreadStart::start_ns`): an entry of an
    /// earlier call is stale.
    pub call_start: u64,
    /// The runnable time found in the CPUs' rings, ns (at most the call's runnable time).
    pub attributed_ns: u64,
    /// The longest holders, unordered.
    pub top: [Holder; HOLDERS],
}

const _: () = assert!(core::mem::size_of::<RanRing>() == 16 + 40 * RAN_SEGMENTS);
const _: () = assert!(core::mem::size_of::<Holders>() == 16 + 32 * HOLDERS);

// SAFETY: u64, u32 and byte fields with explicit padding: no implicit padding, any bit
// pattern valid.
pod!(RanRing);
// SAFETY: as above.
pod!(Holders);

/// `--slow`: a slow call's ring buffer record: the call, who held its CPU while it was
/// runnable, the user registers the unwinder starts from, and a copy of the top of the user
/// stack. (An announcement is a bare [`SlowCall`].)
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowCallStack {
    /// The call.
    pub call: SlowCall,
    /// Who held the CPU while it was runnable (`call_start` 0: nobody was found).
    pub holders: Holders,
    /// The user instruction pointer at the syscall (in the libc wrapper, say).
    pub ip: u64,
    /// The user stack pointer at the syscall: `stack[0]` is the byte at this address.
    pub sp: u64,
    /// The user frame pointer register (rbp) at the syscall, whatever it holds.
    pub bp: u64,
    /// Bytes of `stack` copied: whole [`USER_STACK_CHUNK`]s, and the last one up to the
    /// stack's end where it ran past it; 0 for a 32-bit caller
    /// (its stack is not unwound with x86_64 rules) or when nothing could be read.
    pub stack_len: u64,
    /// The user stack from `sp` up.
    pub stack: [u8; USER_STACK_BYTES],
}

// Its size: the call, four u64 and the stack, no padding.
const _: () = assert!(core::mem::size_of::<SlowCallStack>() == 80 + 144 + 32 + USER_STACK_BYTES);

// SAFETY: a SlowCall (see there), u64 fields and bytes: no implicit padding, any bit pattern
// valid.
pod!(SlowCallStack);

/// [`SlowCall::slot`] of a record that is no call but an announcement: this process (new, or
/// under a new name since an exec) has a traced call off the CPU now, so user space should read
/// its mappings while it still runs, before a slow call's record and the process's exit race.
pub const ANNOUNCE_SLOT: u32 = u32::MAX;

/// [`SlowCall::kernel_stack`] of a call that never left the CPU: no switch-out to take a
/// kernel stack at.
pub const STACK_NOT_TAKEN: i32 = i32::MIN;

/// The byte size of the `SLOW_CALLS` ring buffer with `--slow` (a power of two of pages):
/// about 500 slow calls with their stacks between two reads of user space.
pub const SLOW_RING_BYTES: u32 = 1 << 23;

/// Entries of the `STACKS` stack trace map with `--slow` (each 127 frames, 1 KiB).
pub const SLOW_STACK_ENTRIES: u32 = 8192;

// Its size, as both sides agree on it (no implicit padding in either).
const _: () = assert!(core::mem::size_of::<SlowCall>() == 80);

// SAFETY: five u64, six 4-byte fields (one explicit padding), 16 bytes: no implicit
// padding, any bit pattern valid.
pod!(SlowCall);
