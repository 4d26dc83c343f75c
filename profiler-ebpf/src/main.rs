//! The kernel side of syscall-profiler: an enter and an exit program on the
//! `sys_enter_*`/`sys_exit_*` tracepoints of every syscall in the chosen set, or, on the fentry
//! front end, an fentry/fexit pair per traced syscall on the function its table calls; either
//! times each call of the tracked processes into per-CPU maps.
//!
//! Hot path (every traced syscall): array lookups only, no hash maps, no atomics, no helper calls
//! but the clock and the current task id. Options add to it only when given (frozen `.rodata`
//! flags the verifier folds): `--off-cpu` one more array entry, `--slow` a compare (its stack
//! walks happen at switch-outs and past the threshold), `--cgroup` a hash lookup of the current
//! cgroup id (in place of the process's array entry) and `--by-cgroup` one more for its row.
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
mod programs;

#[cfg(not(target_arch = "bpf"))]
fn main() {
    // Built for the host only by workspace-wide commands; the real build targets bpfel-unknown-none.
}
