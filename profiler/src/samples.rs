//! Summary statistics of small samples, the one home of every figure a report derives from
//! repeated measurements: median, spread (mean, sample standard deviation, range), the MAD
//! outlier rule and the Gini coefficient. (The kernel's own counters live in [`crate::stats`].)

use serde::Serialize;

/// Median of `values`; NaN when there are none (no value, not a zero one).
#[must_use]
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    }
}

/// Mean, sample standard deviation, range and median of a sample (QPS over runs, say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// How many values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1; 0 for one value).
    pub stddev: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Median.
    pub median: f64,
}

impl Spread {
    /// "12345 ± 321", or "12345 ± —" for one value: a single run has no spread to show (it
    /// used to print "± 0", as if the runs had agreed).
    #[must_use]
    pub fn mean_and_sigma(&self) -> String {
        if self.n < 2 {
            format!("{:.0} ± —", self.mean)
        } else {
            format!("{:.0} ± {:.0}", self.mean, self.stddev)
        }
    }

    /// The spread of `values`; `None` when there are none.
    #[must_use]
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Some(Self {
            n,
            mean,
            stddev: var.sqrt(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            median: median(values),
        })
    }
}

/// Indexes of the values more than 3 scaled MADs (MAD × 1.4826, the normal-consistent
/// estimate of σ) from the median, and more than 10% away from it: hyperfine-style outliers.
/// (With three runs the MAD alone flags ordinary noise; the 10% floor keeps to real disturbances.)
/// Needs at least three values.
#[must_use]
pub fn outliers(values: &[f64]) -> Vec<usize> {
    if values.len() < 3 {
        return Vec::new();
    }
    let m = median(values);
    let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    let mad = median(&deviations) * 1.4826;
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| {
            let d = (*v - m).abs();
            d > 3.0 * mad && d > 0.10 * m.abs()
        })
        .map(|(i, _)| i)
        .collect()
}

/// Gini coefficient of a distribution (0 = perfectly even, 1 = all in one place).
#[must_use]
pub fn gini(values: &[u64]) -> f64 {
    let n = values.len();
    let total: u64 = values.iter().sum();
    if n < 2 || total == 0 {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    // G = (2 Σ i·x_i) / (n Σ x_i) − (n + 1) / n, with i from 1.
    let weighted: f64 = sorted
        .iter()
        .enumerate()
        .map(|(i, &x)| (i as f64 + 1.0) * x as f64)
        .sum();
    (2.0 * weighted) / (n as f64 * total as f64) - (n as f64 + 1.0) / n as f64
}

/// Resamples behind every [`MedianInterval`].
pub const BOOTSTRAP_RESAMPLES: usize = 10_000;

/// A median with its 95% bootstrap percentile interval: the 2.5th and 97.5th percentiles of the
/// medians of [`BOOTSTRAP_RESAMPLES`] resamples (with replacement, fixed seed: the same data
/// give the same interval). With 5 values or fewer the interval is their range; with one value
/// it is that value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MedianInterval {
    /// How many values.
    pub n: usize,
    /// Their median.
    pub median: f64,
    /// Lower end of the 95% interval.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

impl MedianInterval {
    /// The interval of `values`; `None` when there are none (or one is not finite).
    #[must_use]
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let n = values.len();
        let mut next = resample_stream(n as u64);
        let mut resample = vec![0.0; n];
        let mut medians: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
            .map(|_| {
                for slot in &mut resample {
                    *slot = values[(next() % n as u64) as usize];
                }
                median(&resample)
            })
            .collect();
        medians.sort_by(f64::total_cmp);
        let at = |q: f64| medians[((q * (BOOTSTRAP_RESAMPLES - 1) as f64).round()) as usize];
        Some(Self {
            n,
            median: median(values),
            low: at(0.025),
            high: at(0.975),
        })
    }

    /// The change of `b`'s median against `a`'s, in % of `a`'s, for two independent samples
    /// (two machines, two builds: no pairs): its 95% interval from [`BOOTSTRAP_RESAMPLES`]
    /// resamples of each side (fixed seed). `None` when a side has fewer than two values (no
    /// spread to judge by), a value is not finite, or `a`'s median is 0.
    #[must_use]
    pub fn of_change(a: &[f64], b: &[f64]) -> Option<Self> {
        let finite = |v: &[f64]| v.len() >= 2 && v.iter().all(|x| x.is_finite());
        let base = median(a);
        if !finite(a) || !finite(b) || base == 0.0 {
            return None;
        }
        let mut next = resample_stream((a.len() * 1000 + b.len()) as u64);
        let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
        let mut changes: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
            .filter_map(|_| {
                for slot in &mut ra {
                    *slot = a[(next() % a.len() as u64) as usize];
                }
                for slot in &mut rb {
                    *slot = b[(next() % b.len() as u64) as usize];
                }
                let base = median(&ra);
                (base != 0.0).then(|| 100.0 * (median(&rb) / base - 1.0))
            })
            .collect();
        if changes.is_empty() {
            return None;
        }
        changes.sort_by(f64::total_cmp);
        let at = |q: f64| changes[((q * (changes.len() - 1) as f64).round()) as usize];
        Some(Self {
            n: a.len().min(b.len()),
            median: 100.0 * (median(b) / base - 1.0),
            low: at(0.025),
            high: at(0.975),
        })
    }

    /// Whether the interval contains 0: no change that the noise could not explain.
    #[must_use]
    pub fn within_noise(&self) -> bool {
        self.low <= 0.0 && self.high >= 0.0
    }
}

/// splitmix64: a fixed, dependency-free stream of resample indexes, seeded by the sample's shape
/// (the same data give the same interval).
fn resample_stream(seed: u64) -> impl FnMut() -> u64 {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ seed;
    move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "exact results: medians and Gini of small integers"
)]
mod tests {
    use super::*;

    #[test]
    fn median_intervals_cover_the_median_and_say_when_zero_is_inside() {
        let tight = MedianInterval::of(&[-2.1, -1.9, -2.0, -2.2, -1.8, -2.05, -1.95]).unwrap();
        assert_eq!((tight.n, tight.median), (7, -2.0));
        assert!(tight.low <= -2.0 && tight.high >= -2.0 && tight.high < 0.0);
        assert!(!tight.within_noise());
        // Few values: the interval is their range.
        let few = MedianInterval::of(&[-3.0, 1.0, 0.5]).unwrap();
        assert_eq!((few.low, few.median, few.high), (-3.0, 0.5, 1.0));
        assert!(few.within_noise());
        let one = MedianInterval::of(&[4.0]).unwrap();
        assert_eq!((one.low, one.high), (4.0, 4.0));
        assert_eq!(MedianInterval::of(&[]), None);
        assert_eq!(MedianInterval::of(&[1.0, f64::NAN]), None);
        // Two independent samples: B 10% above A, clearly; and two that overlap.
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let faster = MedianInterval::of_change(&a, &[110.0, 111.0, 109.0, 110.5, 109.5]).unwrap();
        assert!((faster.median - 10.0).abs() < 1e-9);
        assert!(faster.low > 5.0 && faster.high < 15.0, "{faster:?}");
        let same = MedianInterval::of_change(&a, &[99.0, 101.5, 100.0, 98.5, 101.0]).unwrap();
        assert!(same.within_noise(), "{same:?}");
        assert_eq!(
            MedianInterval::of_change(&a, &[120.0]),
            None,
            "one run: no interval"
        );
        // The same values, the same interval.
        let again = MedianInterval::of(&[-2.1, -1.9, -2.0, -2.2, -1.8, -2.05, -1.95]).unwrap();
        assert_eq!(tight, again);
    }

    #[test]
    fn the_reference_lt_pure_run_1_is_an_outlier() {
        // The reference's 4-core short runs: LT-PURE run 1 at 1339 QPS among ~14.3k.
        assert_eq!(outliers(&[1339.3, 14316.4, 14259.2]), vec![0]);
        // Its LT runs vary by 20% and none is flagged.
        assert!(outliers(&[14856.6, 15496.7, 12903.2]).is_empty());
        assert!(outliers(&[100.0, 100.0, 100.0]).is_empty());
        // 9% above two close runs: noise on a shared machine, not flagged.
        assert!(outliers(&[4600.0, 4232.0, 4193.0]).is_empty());
        assert!(outliers(&[1.0, 2.0]).is_empty());
    }

    #[test]
    fn gini_of_even_and_uneven_distributions() {
        assert!(gini(&[48, 50, 42, 47]) < 0.05, "the reference's MP workers");
        assert!((gini(&[0, 0, 0, 100]) - 0.75).abs() < 1e-9);
        assert_eq!(gini(&[5, 5]), 0.0);
        assert_eq!(gini(&[]), 0.0);
    }

    #[test]
    fn spread_has_sample_stddev_and_none_for_no_values() {
        let s = Spread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!((s.n, s.mean), (8, 5.0));
        assert!((s.stddev - 2.138).abs() < 0.001);
        assert_eq!((s.min, s.max, s.median), (2.0, 9.0, 4.5));
        assert_eq!(Spread::of(&[]), None);
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[3.0, 1.0]), 2.0);
    }
}
