//! `--cgroup` (which cgroups are traced) and `--by-cgroup` (every call also under its cgroup).

use super::*;

/// `--by-cgroup`: cgroup id → calls, errors and time per slot; one entry without it, sized
/// to `MAX_CGROUP_IDS` with it.
#[map]
pub(crate) static CGROUP_STATS: PerCpuHashMap<u64, RowStats> =
    PerCpuHashMap::with_max_entries(1, 0);

/// Zeros, the first value of a cgroup's entry (too large for the BPF stack).
#[map]
pub(crate) static ZERO_STATS: PerCpuArray<RowStats> = PerCpuArray::with_max_entries(1, 0);

/// `--cgroup`: cgroup id (of a named cgroup or one below it) → the named cgroup's dense
/// index, under which its processes' calls are counted. Filled by user space.
#[map]
pub(crate) static CGROUPS: HashMap<u64, u32> = HashMap::with_max_entries(MAX_CGROUP_IDS, 0);

/// `--by-cgroup`: the call under the current cgroup's id, whose entry is made on its first
/// call (a full table is counted in `DROPPED`).
#[inline(always)]
pub(crate) fn count_cgroup(slot: u32, elapsed: u64, failed: bool) {
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
