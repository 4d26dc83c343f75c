//! The log-linear histogram both sides share: 64 exact buckets, then 32 per power of two, and the
//! arithmetic from a value to its bucket and back.

/// Exact buckets below this value (`2 * SUB_BUCKETS`): a bucket per nanosecond.
pub const EXACT_BELOW: u64 = 2 * SUB_BUCKETS as u64;

/// log2 of the linear sub-buckets per power of two.
pub const SUB_BUCKET_BITS: u32 = 5;

/// Linear sub-buckets per power of two: each bucket is at most 1/32 of its value wide.
pub const SUB_BUCKETS: u32 = 1 << SUB_BUCKET_BITS;

/// The highest power of two covered: values up to `2^36 - 1` ns (68.7 s); larger are clamped.
pub const MAX_EXPONENT: u32 = 35;

/// Buckets of one [`LatencyBuckets`]: 64 exact ones, then 32 per power of two from 2^6 to 2^35.
pub const HIST_BUCKETS: usize =
    (EXACT_BELOW as usize) + ((MAX_EXPONENT - 5) * SUB_BUCKETS) as usize;

/// The largest value that lands in its own bucket; anything above is counted in the last one.
pub const MAX_TRACKABLE_VALUE: u64 = (1u64 << (MAX_EXPONENT + 1)) - 1;

/// A log-linear histogram of one CPU: [`HIST_BUCKETS`] counters indexed by [`bucket_index`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyBuckets {
    /// Count per bucket.
    pub counts: [u64; HIST_BUCKETS],
}

impl Default for LatencyBuckets {
    fn default() -> Self {
        Self {
            counts: [0; HIST_BUCKETS],
        }
    }
}

/// The bucket of `value` (ns, or events): exact below [`EXACT_BELOW`], then 32 linear buckets per
/// power of two; values above [`MAX_TRACKABLE_VALUE`] share the last bucket. Loop-free, so the
/// verifier sees a straight line; the result is always `< HIST_BUCKETS`.
#[inline(always)]
#[must_use]
pub const fn bucket_index(value: u64) -> u32 {
    let v = if value > MAX_TRACKABLE_VALUE {
        MAX_TRACKABLE_VALUE
    } else {
        value
    };
    if v < EXACT_BELOW {
        return v as u32;
    }
    let exp = log2_floor(v); // 6..=35
    let sub = ((v >> (exp - SUB_BUCKET_BITS)) as u32) & (SUB_BUCKETS - 1);
    EXACT_BELOW as u32 + (exp - 6) * SUB_BUCKETS + sub
}

/// floor(log2(v)) for v > 0, by a fixed sequence of halvings (BPF has no count-leading-zeros).
#[inline(always)]
#[must_use]
pub const fn log2_floor(v: u64) -> u32 {
    let mut x = v;
    let mut r = 0;
    if x >= 1 << 32 {
        x >>= 32;
        r += 32;
    }
    if x >= 1 << 16 {
        x >>= 16;
        r += 16;
    }
    if x >= 1 << 8 {
        x >>= 8;
        r += 8;
    }
    if x >= 1 << 4 {
        x >>= 4;
        r += 4;
    }
    if x >= 1 << 2 {
        x >>= 2;
        r += 2;
    }
    if x >= 1 << 1 {
        r += 1;
    }
    r
}

/// The smallest value that lands in bucket `index`.
#[must_use]
pub const fn bucket_lower_bound(index: u32) -> u64 {
    if (index as u64) < EXACT_BELOW {
        return index as u64;
    }
    let rel = index - EXACT_BELOW as u32;
    let exp = 6 + rel / SUB_BUCKETS;
    let sub = (rel % SUB_BUCKETS) as u64;
    (SUB_BUCKETS as u64 + sub) << (exp - SUB_BUCKET_BITS)
}

/// The largest value that lands in bucket `index` (inclusive).
#[must_use]
pub const fn bucket_upper_bound(index: u32) -> u64 {
    if index as usize + 1 >= HIST_BUCKETS {
        return MAX_TRACKABLE_VALUE;
    }
    bucket_lower_bound(index + 1) - 1
}

// SAFETY: a #[repr(C)] array of u64: no padding, no invalid bit patterns.
pod!(LatencyBuckets);
