//! The types and the histogram arithmetic that the kernel programs (`profiler-ebpf`) and the
//! profiler share. Everything here is `#[repr(C)]`, plain old data and zero-initialisable, so a
//! map value means the same on both sides of the boundary.
#![cfg_attr(not(test), no_std)]
#![expect(
    clippy::inline_always,
    reason = "the eBPF programs call these on every traced syscall: inlined, not a BPF-to-BPF call"
)]
#![expect(
    clippy::pub_underscore_fields,
    reason = "the explicit padding of #[repr(C)] structs shared with the kernel, public so that \
              both sides build them with struct literals"
)]

/// `unsafe impl aya::Pod` for user space (the `user` feature), beside each map value type; the
/// SAFETY argument is written above each use.
macro_rules! pod {
    ($t:ty) => {
        #[cfg(feature = "user")]
        unsafe impl aya::Pod for $t {}
    };
}

mod config;
mod counters;
mod histogram;
pub mod names;
mod process;
mod sched;
mod slots;
mod slow;

pub use self::{config::*, counters::*, histogram::*, process::*, sched::*, slots::*, slow::*};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_entries_round_trip_and_zero_means_untimed() {
        for slot in [0, 1, MAX_SYSCALL_SLOTS as u32 - 1] {
            for events in [false, true] {
                let entry = encode_slot_entry(slot, events);
                assert_eq!(slot_of_entry(entry), Some(slot));
                assert_eq!(entry_counts_events(entry), events);
            }
        }
        assert_eq!(slot_of_entry(0), None);
    }

    #[test]
    fn forked_indexes_start_after_the_named_and_end_in_the_overflow() {
        assert_eq!(forked_process_index(0), FIRST_FORKED_PROCESS);
        assert_eq!(
            forked_process_indexes(0),
            FIRST_FORKED_PROCESS..FIRST_FORKED_PROCESS
        );
        assert_eq!(forked_process_indexes(2).len(), 2);
        assert_eq!(forked_process_index(u64::MAX / 2), OVERFLOW_PROCESS);
        assert_eq!(forked_process_indexes(u64::MAX / 2).end, OVERFLOW_PROCESS);
    }

    #[test]
    fn bucket_count_covers_sixty_seconds() {
        assert_eq!(HIST_BUCKETS, 1024);
        const { assert!(MAX_TRACKABLE_VALUE >= 60_000_000_000) };
        assert_eq!(bucket_index(MAX_TRACKABLE_VALUE) as usize, HIST_BUCKETS - 1);
        assert_eq!(bucket_index(u64::MAX) as usize, HIST_BUCKETS - 1);
    }

    #[test]
    fn small_values_are_exact() {
        for v in 0..EXACT_BELOW {
            assert_eq!(u64::from(bucket_index(v)), v);
            assert_eq!(bucket_lower_bound(v as u32), v);
            assert_eq!(bucket_upper_bound(v as u32), v);
        }
    }

    #[test]
    fn every_value_lies_within_its_bucket_bounds() {
        // Every power of two, its neighbours, and a spread of values in between.
        let mut values = Vec::new();
        for exp in 0..40u32 {
            let p = 1u64 << exp;
            for v in [p - 1, p, p + 1, p + p / 3, p + p / 2, 2 * p - 1] {
                values.push(v);
            }
        }
        for &v in &values {
            let b = bucket_index(v);
            let clamped = v.min(MAX_TRACKABLE_VALUE);
            assert!(
                bucket_lower_bound(b) <= clamped && clamped <= bucket_upper_bound(b),
                "value {v} bucket {b} [{}, {}]",
                bucket_lower_bound(b),
                bucket_upper_bound(b)
            );
        }
    }

    #[test]
    fn buckets_are_contiguous_and_at_most_one_32nd_wide() {
        for b in 0..HIST_BUCKETS as u32 - 1 {
            assert_eq!(bucket_upper_bound(b) + 1, bucket_lower_bound(b + 1));
            let lo = bucket_lower_bound(b);
            let width = bucket_upper_bound(b) - lo + 1;
            assert!(
                width * 32 <= lo.max(32),
                "bucket {b} at {lo} is {width} wide"
            );
        }
    }

    #[test]
    fn log2_floor_matches_leading_zeros() {
        for exp in 0..64u32 {
            let p = 1u64 << exp;
            assert_eq!(log2_floor(p), exp);
            assert_eq!(log2_floor(p | (p - 1)), exp);
        }
    }

    #[test]
    fn errno_classes() {
        assert_eq!(ErrnoClass::of(11), ErrnoClass::Again);
        assert_eq!(ErrnoClass::of(4), ErrnoClass::Intr);
        // The kernel's restart codes: EINTR or a restart, decided after sys_exit.
        for restart in [512, 513, 514, 516] {
            assert_eq!(ErrnoClass::of(restart), ErrnoClass::Restart, "{restart}");
        }
        assert_eq!(
            ErrnoClass::of(515),
            ErrnoClass::Other,
            "ENOIOCTLCMD is no interruption"
        );
        assert_eq!(ErrnoClass::of(104), ErrnoClass::ConnReset);
        assert_eq!(ErrnoClass::of(2), ErrnoClass::NoEnt);
    }
}
