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

/// [`SlowCall::slot`] of a record that is no call but an announcement: this process (new, or
/// under a new name since an exec) has a traced call off the CPU now, so user space should read
/// its mappings while it still runs, before a slow call's record and the process's exit race.
pub const ANNOUNCE_SLOT: u32 = u32::MAX;

/// [`SlowCall::kernel_stack`] of a call that never left the CPU: no switch-out to take a
/// kernel stack at.
pub const STACK_NOT_TAKEN: i32 = i32::MIN;

/// The byte size of the `SLOW_CALLS` ring buffer with `--slow` (a power of two of pages):
/// about 11900 records between two reads of user space.
pub const SLOW_RING_BYTES: u32 = 1 << 20;

/// Entries of the `STACKS` stack trace map with `--slow` (each 127 frames, 1 KiB).
pub const SLOW_STACK_ENTRIES: u32 = 8192;

// Its size, as both sides agree on it (no implicit padding in either).
const _: () = assert!(core::mem::size_of::<SlowCall>() == 80);

// SAFETY: five u64, six 4-byte fields (one explicit padding), 16 bytes: no implicit
// padding, any bit pattern valid.
pod!(SlowCall);
