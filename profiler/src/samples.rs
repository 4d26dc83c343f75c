//! Summary statistics of small samples, the one home of every figure a report derives from
//! repeated measurements: median, spread (mean, sample standard deviation, range), the MAD
//! outlier rule and the Gini coefficient. (The kernel's own counters live in [`crate::stats`];
//! intervals and verdicts in [`crate::inference`].)

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

#[cfg(test)]
#[expect(
    clippy::float_cmp,
    reason = "exact results: medians and Gini of small integers"
)]
mod tests {
    use super::*;

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
