//! The loader's probe of the context BPF programs on `sys_exit_*` really get.

use crate::programs::*;

/// What `ctx_probe` saw: the caller's pid_tgid and the two words after the common header.
#[map]
pub(crate) static CTX_PROBE: Array<[u64; 3]> = Array::with_max_entries(1, 0);

/// Attached alone, to sys_exit_getppid, before the real load: records the first two words
/// after the record header of the context the kernel really hands BPF programs, for the
/// loader's own getppid(). BPF programs on syscall tracepoints do not get the trace record
/// but a copy the kernel builds for them (`perf_call_bpf_exit`), and older kernels built it
/// with an 8-byte header whatever the record's (6.1-rt: `__syscall_nr` at 12 in the format
/// file, at 8 for BPF). The loader finds the number and the return value in these words.
#[tracepoint]
pub fn ctx_probe(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if (pid_tgid >> 32) as u32 != probe_tgid() {
        return 0;
    }
    let first = field::<8>(&ctx, RECORD_HEADER);
    let second = field::<8>(&ctx, RECORD_HEADER + 8);
    if let Some(seen) = CTX_PROBE.get_ptr_mut(0) {
        // SAFETY: a plain store into the map's one value.
        unsafe { *seen = [pid_tgid, first, second] };
    }
    0
}
