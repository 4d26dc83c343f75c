//! The kernel side of syscall-profiler (`programs/`). The syscalls are timed by one of two front
//! ends: the syscall tracepoint pair (`syscall_enter`/`syscall_exit`, `timing.rs`), the same two
//! on the `sys_enter_*`/`sys_exit_*` tracepoints of every syscall in the chosen set, with 32-bit
//! calls timed by the raw compat pair (`compat_enter`/`compat_exit` on `sys_enter`/`sys_exit`,
//! `compat.rs`); or, where the kernel allows it, fentry/fexit pairs per slot and syscall table
//! (`fentry_N`/`fexit_N`, `fentry32_N`/`fexit32_N`, plus `fentry_socketcall`: `fentry.rs`) on
//! the functions the tables call. Either times each call of the tracked processes into per-CPU
//! maps. Beside them: the raw `every_enter`/`every_exit` pair (`every.rs`), counting every call
//! of the traced processes per syscall number; process tracking (`task_newtask`, `process_exit`:
//! `process.rs`); and `--off-cpu`'s scheduler programs (`sched_switch`, `sched_wakeup`,
//! BTF-typed or classic: `sched.rs`). `--slow` has no program of its own: its maps and helpers
//! (`slow.rs`) run in `sched_switch` (stacks, who held the CPU) and at a call's end (`account`).
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
