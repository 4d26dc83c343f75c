//! The object of the loader's context probe (`programs/probe.rs`), attached alone before the
//! real load to find where this kernel hands BPF programs a syscall's number and return value.
//! It shares the record reading and configuration with the profiler's programs.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// The bpf target's core has no fetch_add (no compare-and-swap); the intrinsic lowers to BPF's
// atomic add with fetch (kernel 5.12+).
#![cfg_attr(target_arch = "bpf", feature(core_intrinsics))]
#![cfg_attr(target_arch = "bpf", allow(internal_features))]
// Record fields are read by asm loads with the offset in the instruction (see `field`).
#![cfg_attr(target_arch = "bpf", feature(asm_experimental_arch))]

#[cfg(target_arch = "bpf")]
#[path = "../programs/mod.rs"]
mod programs;

#[cfg(target_arch = "bpf")]
#[path = "../programs/probe.rs"]
mod probe;

#[cfg(not(target_arch = "bpf"))]
fn main() {
    // Built for the host only by workspace-wide commands; the real build targets bpfel-unknown-none.
}
