//! Reading tracepoint records: where this kernel keeps each field ([`RecordLayout`], frozen
//! by the loader) and the one way a field is loaded.

use super::*;

/// Where this kernel's records keep the fields read below; set by the loader before load
/// from the tracepoints' format files and BTF (`profiler::bpf::layout`).
#[unsafe(no_mangle)]
pub(crate) static LAYOUT: RecordLayout = RecordLayout {
    sys_exit_nr: FIELD_ABSENT,
    sys_exit_ret: FIELD_ABSENT,
    newtask_pid: FIELD_ABSENT,
    newtask_clone_flags: FIELD_ABSENT,
    process_exit_group_dead: FIELD_ABSENT,
    task_signal: 0,
    signal_live: 0,
    switch_prev_state: FIELD_ABSENT,
    switch_next_pid: FIELD_ABSENT,
    wakeup_pid: FIELD_ABSENT,
    task_pid: FIELD_ABSENT,
};

/// Reads one `LAYOUT` offset. Volatile, so LLVM does not fold the zeros above; the verifier
/// still sees a constant, because the loader freezes `.rodata` (BPF_F_RDONLY_PROG).
#[inline(always)]
pub(crate) fn layout(field: &u32) -> u32 {
    // SAFETY: a read of an initialised static.
    unsafe { core::ptr::read_volatile(field) }
}

/// Reads the `SIZE`-byte field at `offset` in the tracepoint record, zero-extended. The
/// verifier accepts ctx reads only at an offset written in the instruction, so there is one
/// load per position of the record window, each an asm block with its offset in the
/// instruction (plain loads were merged by LLVM into one load through a computed pointer,
/// which the verifier refuses). `offset` comes from the frozen `LAYOUT`, which the verifier
/// knows as a constant: it walks only the load that matches, and a record too short for a
/// load that is never taken does not refuse the attach. Anything else reads as zero.
#[inline(always)]
pub(crate) fn field<const SIZE: usize>(ctx: &TracePointContext, offset: u32) -> u64 {
    use aya_ebpf::EbpfContext as _;
    let record = ctx.as_ptr();
    // The window's bounds as literals (seq! takes no constants), checked against the shared ones.
    const { assert!(RECORD_HEADER == 8 && RECORD_WINDOW == 72) };
    seq_macro::seq!(AT in 8..72 {
        if AT % SIZE == 0 && offset == AT {
            let value: u64;
            // SAFETY: the loader checked that a SIZE-byte field lies at AT in this record;
            // the verifier checks it again against the record's size at attach.
            unsafe {
                match SIZE {
                    1 => core::arch::asm!("{v} = *(u8 *)({r} + {at})", v = out(reg) value, r = in(reg) record, at = const AT, options(readonly, nostack, preserves_flags)),
                    4 => core::arch::asm!("{v} = *(u32 *)({r} + {at})", v = out(reg) value, r = in(reg) record, at = const AT, options(readonly, nostack, preserves_flags)),
                    8 => core::arch::asm!("{v} = *(u64 *)({r} + {at})", v = out(reg) value, r = in(reg) record, at = const AT, options(readonly, nostack, preserves_flags)),
                    _ => return 0,
                }
            }
            return value;
        }
    });
    0
}
