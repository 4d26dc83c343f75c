//! What repeated runs allow a report to conclude, and nothing more.
//!
//! - Paired runs (two variants, or profiled against baseline, made back to back): the median of
//!   the pairs' changes with the **sign test's** interval, order statistics k and n+1−k of the
//!   changes. It assumes nothing of their distribution but independence, and its level is
//!   exact: 1 − 2·P(Binomial(n, ½) ≤ k−1). With fewer than 6 pairs no k reaches 95%: there is
//!   no interval, and the verdict is "undecided".
//! - Independent samples (`profiler diff`: two machines, no pairs): the **Hodges-Lehmann** shift
//!   with the **Mann-Whitney** interval, on the logarithm of the values (a change in %), from the
//!   exact null distribution of U.
//! - **Sequential runs** ([`Design`]): `profiler run` adds pairs until its comparisons are decided.
//!   Looking at the data after every pair and stopping once they look decided would make the
//!   error grow with the looks, so the data are looked at only at fixed pair counts, and each
//!   look spends a share of the 5% (Bonferroni alpha spending): the interval reported at the
//!   stop covers the true median with at least the design's level, whatever the rule that
//!   chose to stop.
//! - Several figures in one verdict: [`holm`].
//!
//! docs/HOW_IT_MEASURES.md ("Verdicts") states the method; the tests below simulate it.

use serde::Serialize;

/// The level every interval aims at, two-sided.
pub const TARGET_LEVEL: f64 = 0.95;
/// The equivalence margin when `--equivalence` is not given, in % (run and diff).
pub const DEFAULT_MARGIN_PCT: f64 = 2.0;
/// Pair counts a sequential design looks at, up to its maximum (which is always a look).
const LOOKS: &[usize] = &[
    8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1000,
];

/// Pair counts the warm engine's sequential design looks at (pairs of slices come by the
/// hundred: doubling keeps the looks, and the error each may spend, few).
const DOUBLING_LOOKS: &[usize] = &[8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192];

/// P(X ≤ k) for X ~ Binomial(n, ½), exactly enough for any n a run makes.
#[must_use]
pub fn sign_cdf(n: usize, k: usize) -> f64 {
    let ln2n = n as f64 * std::f64::consts::LN_2;
    let mut ln_choose = 0.0_f64;
    let mut sum = 0.0;
    for i in 0..=k.min(n) {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        sum += (ln_choose - ln2n).exp();
    }
    sum.min(1.0)
}

/// The sign test's order statistic for `n` values at a two-sided error of at most `alpha`: the
/// largest k with 2·P(B ≤ k−1) ≤ alpha, and the error it achieves; `None` when even the range
/// (k = 1) errs more often.
#[must_use]
pub fn sign_order(n: usize, alpha: f64) -> Option<(usize, f64)> {
    // P(B ≤ k−1) built up term by term (one pass: the warm engine looks at thousands of pairs).
    let ln2n = n as f64 * std::f64::consts::LN_2;
    let mut ln_choose = 0.0_f64;
    let mut cdf = 0.0_f64;
    let mut best = None;
    for k in 1..=n.div_ceil(2) {
        let i = k - 1;
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        cdf += (ln_choose - ln2n).exp();
        let err = 2.0 * cdf.min(1.0);
        if err > alpha {
            break;
        }
        best = Some((k, err));
    }
    best
}

/// The fewest values whose sign-test interval reaches `level`.
#[must_use]
pub fn fewest_for(level: f64) -> usize {
    // The range of n values misses with probability 2^(1-n): n = 1 + log2(1 / (1 - level)).
    (1..=64)
        .find(|&n| sign_order(n, 1.0 - level).is_some())
        .unwrap_or(usize::MAX)
}

/// How an interval was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Order statistics of the sign test, over paired changes, at one fixed count.
    SignTest,
    /// The same at the last look of a sequential design; the level is the design's.
    SignTestSequential,
    /// Hodges-Lehmann shift with the Mann-Whitney interval (independent samples).
    MannWhitney,
}

/// An interval and the level it achieves.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// Lower end, % change.
    pub low: f64,
    /// Upper end, % change.
    pub high: f64,
    /// The probability that intervals made this way cover the true median change: exact for a
    /// fixed count, the guaranteed lower bound for a sequential design.
    pub level: f64,
    /// How it was made.
    pub method: Method,
}

/// A median change in %, with its interval where the data can give one at [`TARGET_LEVEL`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    /// Pairs the estimate is made of (independent samples: the smaller side's runs).
    pub n: usize,
    /// Values measured: pairs run (of which the last look used `n`), or the larger side's runs.
    pub measured: usize,
    /// The median change, %: of the pairs' changes, or the Hodges-Lehmann shift.
    pub median: f64,
    /// The interval; `None` when `n` cannot give one at the target level.
    pub interval: Option<Interval>,
    /// Two-sided p-value of "no change" (sign test, or Mann-Whitney).
    pub p_value: f64,
    /// The run-to-run noise: 1.4826 × the median absolute deviation of the changes, %.
    pub noise: f64,
}

impl Estimate {
    /// The paired changes `values` (in %, in the order they were made) at one fixed count:
    /// their median and the sign test's interval at `1 − alpha`. `None` without a finite value.
    #[must_use]
    pub fn paired(values: &[f64], alpha: f64, method: Method, level: Option<f64>) -> Option<Self> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let interval = sign_order(n, alpha).map(|(k, err)| Interval {
            low: sorted[k - 1],
            high: sorted[n - k],
            level: level.unwrap_or(1.0 - err),
            method,
        });
        let (up, down) = (
            values.iter().filter(|v| **v > 0.0).count(),
            values.iter().filter(|v| **v < 0.0).count(),
        );
        let p_value = if up + down == 0 {
            1.0
        } else {
            (2.0 * sign_cdf(up + down, up.min(down))).min(1.0)
        };
        Some(Self {
            n,
            measured: n,
            median: crate::samples::median(values),
            interval,
            p_value,
            noise: scaled_mad(values),
        })
    }

    /// B's change against A in % for two independent samples (`profiler diff`): the
    /// Hodges-Lehmann shift of the logarithms (of the values themselves when one is not
    /// positive, in % of A's median) with the Mann-Whitney interval at [`TARGET_LEVEL`]. `None`
    /// when a side is empty, a value is not finite, or A's median is 0 on the linear scale.
    #[must_use]
    #[expect(
        clippy::many_single_char_names,
        reason = "the textbook's names: samples a and b of sizes m and n, differences d"
    )]
    pub fn shift(a: &[f64], b: &[f64]) -> Option<Self> {
        let finite = |v: &[f64]| !v.is_empty() && v.iter().all(|x| x.is_finite());
        if !finite(a) || !finite(b) {
            return None;
        }
        let logs = a.iter().chain(b).all(|v| *v > 0.0);
        let base = crate::samples::median(a).abs();
        if !logs && base == 0.0 {
            return None;
        }
        let scale = |v: f64| if logs { v.ln() } else { v };
        let to_pct = |d: f64| {
            if logs {
                100.0 * d.exp_m1()
            } else {
                100.0 * d / base
            }
        };
        let mut d: Vec<f64> = b
            .iter()
            .flat_map(|&y| a.iter().map(move |&x| scale(y) - scale(x)))
            .collect();
        d.sort_by(f64::total_cmp);
        let (m, n) = (a.len(), b.len());
        let mn = m * n;
        let cdf = mann_whitney_cdf(m, n);
        let alpha = 1.0 - TARGET_LEVEL;
        let order = (1..=mn.div_ceil(2))
            .take_while(|&k| 2.0 * cdf[k - 1] <= alpha)
            .last();
        let interval = order.map(|k| Interval {
            low: to_pct(d[k - 1]),
            high: to_pct(d[mn - k]),
            level: 1.0 - 2.0 * cdf[k - 1],
            method: Method::MannWhitney,
        });
        let below = d.iter().filter(|x| **x < 0.0).count() as f64
            + 0.5 * d.iter().filter(|x| **x == 0.0).count() as f64;
        let tail = below.min(mn as f64 - below).floor() as usize;
        let changes: Vec<f64> = d.iter().map(|&x| to_pct(x)).collect();
        Some(Self {
            n: m.min(n),
            measured: m.max(n),
            median: to_pct(crate::samples::median(&d)),
            interval,
            p_value: (2.0 * cdf[tail]).min(1.0),
            noise: scaled_mad(&changes),
        })
    }

    /// Whether the interval contains 0 (no interval: it might).
    #[must_use]
    pub fn contains_zero(&self) -> bool {
        self.interval.is_none_or(|i| i.low <= 0.0 && i.high >= 0.0)
    }

    /// "+1.2% [-0.4, +2.9] (96.9%, 6 pairs)", or "+1.2% (3 pairs: no 95% interval)".
    #[must_use]
    pub fn cell(&self, unit: &str) -> String {
        let used = if self.measured > self.n {
            format!("{} of {} {unit}", self.n, self.measured)
        } else {
            format!("{} {unit}", self.n)
        };
        match &self.interval {
            Some(i) => format!(
                "{:+.1}% [{:+.1}, {:+.1}] ({}{:.1}%, {used})",
                self.median,
                i.low,
                i.high,
                if i.method == Method::SignTestSequential {
                    "≥"
                } else {
                    ""
                },
                100.0 * i.level
            ),
            None => format!(
                "{:+.1}% ({used}: no {:.0}% interval)",
                self.median,
                100.0 * TARGET_LEVEL
            ),
        }
    }
}

/// 1.4826 × the median absolute deviation: σ for normal data, robust to a disturbed run.
fn scaled_mad(values: &[f64]) -> f64 {
    let m = crate::samples::median(values);
    let dev: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
    1.4826 * crate::samples::median(&dev)
}

/// P(U ≤ u) for u = 0..=m·n, U the Mann-Whitney statistic of samples of m and n with no
/// difference: the coefficients of the Gaussian binomial [m+n choose m]_q over C(m+n, m).
fn mann_whitney_cdf(m: usize, n: usize) -> Vec<f64> {
    // rows[k]: the coefficients of [N choose k]_q for the current N, k ≤ m.
    let mut rows: Vec<Vec<f64>> = vec![vec![1.0]];
    for big in 1..=m + n {
        let kmax = big.min(m);
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(kmax + 1);
        for k in 0..=kmax {
            // [N, k] = [N-1, k-1] + q^k [N-1, k]
            let len = k * (big - k) + 1;
            let mut row = vec![0.0; len];
            if k >= 1
                && let Some(prev) = rows.get(k - 1)
            {
                for (u, c) in prev.iter().enumerate() {
                    row[u] += c;
                }
            }
            if k < big
                && let Some(prev) = rows.get(k)
            {
                for (u, c) in prev.iter().enumerate() {
                    row[u + k] += c;
                }
            }
            next.push(row);
        }
        rows = next;
    }
    let counts = &rows[m];
    let total: f64 = counts.iter().sum();
    let mut acc = 0.0;
    counts
        .iter()
        .map(|c| {
            acc += c;
            (acc / total).min(1.0)
        })
        .collect()
}

/// Holm's step-down correction: which of the hypotheses with these p-values are rejected with
/// the chance of any false rejection kept at most `alpha` (under any dependence).
#[must_use]
pub fn holm(p_values: &[f64], alpha: f64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..p_values.len()).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut rejected = vec![false; p_values.len()];
    for (rank, &i) in order.iter().enumerate() {
        if p_values[i] > alpha / (p_values.len() - rank) as f64 {
            break;
        }
        rejected[i] = true;
    }
    rejected
}

/// When `profiler run` looks at its pairs, and what each look may spend of the 5%.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Design {
    /// Pair counts at which the data are looked at, in order; the last is the most pairs run.
    pub looks: Vec<usize>,
    /// The two-sided error each look may spend.
    pub alpha_per_look: f64,
    /// Whether pairs are added until decided (`false`: `--runs N`, one look at N).
    pub sequential: bool,
}

impl Design {
    /// `--runs N`: one look, at N pairs, at the full 5%.
    #[must_use]
    pub fn fixed(pairs: usize) -> Self {
        Self {
            looks: vec![pairs],
            alpha_per_look: 1.0 - TARGET_LEVEL,
            sequential: false,
        }
    }

    /// Pairs added until decided, at most `max_pairs`: looks at 8, 12, 16, 24, 32, … and at
    /// `max_pairs`, each spending an equal share of the 5%; a look too early to reach its share
    /// spends nothing and is dropped. Below 8 pairs it is [`Design::fixed`].
    #[must_use]
    pub fn sequential(max_pairs: usize) -> Self {
        Self::sequential_at(LOOKS, max_pairs)
    }

    /// The warm engine's design: looks at 8, 16, 32, 64, … (doubling) and at `max_pairs`,
    /// each spending an equal share of the 5%, as [`Design::sequential`].
    #[must_use]
    pub fn sequential_doubling(max_pairs: usize) -> Self {
        Self::sequential_at(DOUBLING_LOOKS, max_pairs)
    }

    fn sequential_at(candidates: &[usize], max_pairs: usize) -> Self {
        let mut looks: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&n| n < max_pairs)
            .collect();
        looks.push(max_pairs);
        let alpha = 1.0 - TARGET_LEVEL;
        loop {
            let share = alpha / looks.len() as f64;
            let before = looks.len();
            looks.retain(|&n| sign_order(n, share).is_some());
            if looks.len() == before {
                break;
            }
        }
        if looks.len() < 2 {
            return Self::fixed(max_pairs);
        }
        Self {
            alpha_per_look: alpha / looks.len() as f64,
            looks,
            sequential: true,
        }
    }

    /// The level every interval of the design achieves at least: 1 − the sum of the errors its
    /// looks spend (the union bound over the looks, whichever is reported).
    #[must_use]
    pub fn level(&self) -> f64 {
        let spent: f64 = self
            .looks
            .iter()
            .filter_map(|&n| sign_order(n, self.alpha_per_look).map(|(_, err)| err))
            .sum();
        1.0 - spent
    }

    /// The latest look at or before `pairs` pairs.
    #[must_use]
    pub fn last_look(&self, pairs: usize) -> Option<usize> {
        self.looks.iter().copied().rfind(|&n| n <= pairs)
    }

    /// Whether `pairs` is a look.
    #[must_use]
    pub fn is_look(&self, pairs: usize) -> bool {
        self.looks.contains(&pairs)
    }

    /// The estimate from `changes` (in %, in the order the pairs were made) at the latest look:
    /// the first n of them. Before the first look of a sequential design there is no interval.
    /// With a fixed design the count run is the look, whatever it is.
    #[must_use]
    pub fn estimate(&self, changes: &[f64]) -> Option<Estimate> {
        if !self.sequential {
            return Estimate::paired(changes, self.alpha_per_look, Method::SignTest, None);
        }
        let mut e = if let Some(n) = self.last_look(changes.len()) {
            Estimate::paired(
                &changes[..n],
                self.alpha_per_look,
                Method::SignTestSequential,
                Some(self.level()),
            )?
        } else {
            // No look yet: the median alone, and no pair counted by a look.
            let mut e = Estimate::paired(changes, 0.0, Method::SignTestSequential, None)?;
            e.interval = None;
            e.n = 0;
            e
        };
        e.measured = changes.len();
        Some(e)
    }

    /// Looks, for the report: "8, 12, 16, 24, 30".
    #[must_use]
    pub fn looks_text(&self) -> String {
        self.looks
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What a comparison concludes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// The interval lies above 0.
    Higher,
    /// The interval lies below 0.
    Lower,
    /// The interval contains 0 and lies inside ±margin.
    Same {
        /// The equivalence margin, %.
        margin_pct: f64,
    },
    /// Neither: too few pairs for an interval, or an interval wider than the margin around 0.
    Undecided {
        /// Why, in a sentence.
        reason: String,
    },
}

impl Verdict {
    /// The verdict of `e` with an equivalence margin of `margin` %: "pairs" or "runs" names
    /// what `e.n` counts.
    #[must_use]
    pub fn of(e: &Estimate, margin: f64, unit: &str) -> Self {
        let Some(i) = e.interval else {
            return Self::Undecided {
                reason: if e.n == 0 {
                    format!(
                        "{} {unit} are fewer than the design's first look",
                        e.measured
                    )
                } else if unit == "pairs" {
                    format!(
                        "{} {unit} cannot give a {:.0}% interval (it takes {})",
                        e.n,
                        100.0 * TARGET_LEVEL,
                        fewest_for(TARGET_LEVEL)
                    )
                } else {
                    format!(
                        "{} {unit} cannot give a {:.0}% interval",
                        e.n,
                        100.0 * TARGET_LEVEL
                    )
                },
            };
        };
        if i.low > 0.0 {
            Self::Higher
        } else if i.high < 0.0 {
            Self::Lower
        } else if i.low >= -margin && i.high <= margin {
            Self::Same { margin_pct: margin }
        } else {
            Self::Undecided {
                reason: format!(
                    "after {} {unit} the machine's run-to-run noise (±{:.1}%) is larger than the difference",
                    e.measured, e.noise
                ),
            }
        }
    }

    /// Decided: higher, lower or the same.
    #[must_use]
    pub fn decided(&self) -> bool {
        !matches!(self, Self::Undecided { .. })
    }

    /// In words, with `up`/`down` for the two directions ("faster"/"slower").
    #[must_use]
    pub fn words(&self, up: &str, down: &str) -> String {
        match self {
            Self::Higher => up.to_owned(),
            Self::Lower => down.to_owned(),
            Self::Same { margin_pct } => format!("same within {margin_pct}%"),
            Self::Undecided { reason } => format!("undecided: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64 and Box-Muller: synthetic experiments with a fixed seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn uniform(&mut self) -> f64 {
            ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    /// Distributions with a known median, as run-to-run changes in %.
    #[derive(Clone, Copy, Debug)]
    enum Dist {
        /// Normal, σ 5%, median 1.
        Normal,
        /// Lognormal, skewed: exp(N(0, 1)) − 1 + 2, median 2.
        LogNormal,
        /// Cauchy (no mean at all), scale 3, median −1: the disturbed runs of a shared machine.
        Cauchy,
    }

    impl Dist {
        const ALL: [Self; 3] = [Self::Normal, Self::LogNormal, Self::Cauchy];
        fn median(self) -> f64 {
            match self {
                Self::Normal => 1.0,
                Self::LogNormal => 2.0,
                Self::Cauchy => -1.0,
            }
        }
        fn draw(self, rng: &mut Rng) -> f64 {
            match self {
                Self::Normal => 1.0 + 5.0 * rng.normal(),
                Self::LogNormal => rng.normal().exp() - 1.0 + 2.0,
                Self::Cauchy => -1.0 + 3.0 * (std::f64::consts::PI * (rng.uniform() - 0.5)).tan(),
            }
        }
    }

    const EXPERIMENTS: usize = 10_000;

    /// The calibration: 10,000 synthetic experiments per n = 3…30 and distribution. Where
    /// the sign test gives an interval, it covers the median at least 94% of the time and the
    /// printed level is the coverage achieved (within the simulation's error); with fewer than
    /// 6 pairs there is no interval and the verdict is "undecided".
    #[test]
    fn fixed_count_intervals_cover_at_the_level_they_print() {
        let mut rng = Rng(7);
        let mut table = String::new();
        for n in 3..=30 {
            for dist in Dist::ALL {
                let mut covered = 0_u32;
                let mut level = None;
                for _ in 0..EXPERIMENTS {
                    let values: Vec<f64> = (0..n).map(|_| dist.draw(&mut rng)).collect();
                    let e = Estimate::paired(&values, 0.05, Method::SignTest, None).unwrap();
                    match e.interval {
                        None => {
                            assert!(n < 6, "n {n}: no interval");
                            assert!(matches!(
                                Verdict::of(&e, 2.0, "pairs"),
                                Verdict::Undecided { .. }
                            ));
                        }
                        Some(i) => {
                            level = Some(i.level);
                            if i.low <= dist.median() && dist.median() <= i.high {
                                covered += 1;
                            }
                        }
                    }
                }
                if let Some(level) = level {
                    let coverage = f64::from(covered) / EXPERIMENTS as f64;
                    table.push_str(&format!("{n} {dist:?} {level:.4} {coverage:.4}\n"));
                    assert!(coverage >= 0.94, "n {n} {dist:?}: coverage {coverage}");
                    // 4 standard errors of a proportion near 0.95 over 10,000 experiments.
                    assert!(
                        (coverage - level).abs() < 0.009,
                        "n {n} {dist:?}: printed {level}, achieved {coverage}"
                    );
                }
            }
        }
        println!("n distribution printed-level coverage\n{table}");
    }

    /// The sequential design, stopped by the most eager rule (the first look whose interval
    /// excludes 0 or lies inside ±2%), still covers the median at least at the level it prints.
    #[test]
    fn sequential_intervals_cover_whatever_the_stopping_rule() {
        let mut rng = Rng(11);
        for max in [12, 20, 30] {
            let design = Design::sequential(max);
            assert!(
                design.sequential && design.level() >= TARGET_LEVEL,
                "{design:?}"
            );
            for dist in Dist::ALL {
                // A true median of 0 too: where stopping early is most tempting to get wrong.
                for shift in [0.0, -dist.median()] {
                    let truth = dist.median() + shift;
                    let mut covered = 0_u32;
                    for _ in 0..EXPERIMENTS {
                        let values: Vec<f64> =
                            (0..max).map(|_| dist.draw(&mut rng) + shift).collect();
                        let mut reported = None;
                        for &look in &design.looks {
                            let e = design.estimate(&values[..look]).unwrap();
                            reported = e.interval;
                            if Verdict::of(&e, 2.0, "pairs").decided() {
                                break;
                            }
                        }
                        let i = reported.unwrap();
                        if i.low <= truth && truth <= i.high {
                            covered += 1;
                        }
                    }
                    let coverage = f64::from(covered) / EXPERIMENTS as f64;
                    assert!(
                        coverage >= design.level() - 0.005,
                        "max {max} {dist:?} shift {shift}: coverage {coverage} < {}",
                        design.level()
                    );
                }
            }
        }
    }

    #[test]
    fn designs_look_where_their_share_is_reachable() {
        let d = Design::sequential(30);
        assert_eq!(d.looks, vec![8, 12, 16, 24, 30]);
        assert!((d.alpha_per_look - 0.01).abs() < 1e-12);
        assert!(d.level() > 0.96 && d.level() < 1.0, "{}", d.level());
        assert_eq!(d.last_look(15), Some(12));
        assert_eq!(d.last_look(7), None);
        // Too few for two looks: one fixed look.
        assert_eq!(Design::sequential(6), Design::fixed(6));
        // The example: 6 pairs give the range at 96.9%.
        let e = Design::fixed(6)
            .estimate(&[2.6, 3.0, 8.0, 5.0, 4.0, 6.0])
            .unwrap();
        let i = e.interval.unwrap();
        assert_eq!((i.low, i.high), (2.6, 8.0));
        assert!((i.level - 0.96875).abs() < 1e-9);
        assert_eq!(e.cell("pairs"), "+4.5% [+2.6, +8.0] (96.9%, 6 pairs)");
        assert_eq!(Verdict::of(&e, 2.0, "pairs"), Verdict::Higher);
        // Three pairs (the old default): the range covers 75%, no verdict.
        let three = Design::fixed(3).estimate(&[-15.7, -10.9, -28.7]).unwrap();
        assert!(three.interval.is_none());
        assert_eq!(
            Verdict::of(&three, 2.0, "pairs").words("faster", "slower"),
            "undecided: 3 pairs cannot give a 95% interval (it takes 6)"
        );
        assert_eq!(fewest_for(0.95), 6);
    }

    #[test]
    fn verdicts_say_same_only_inside_the_margin() {
        let e = |values: &[f64]| Design::fixed(values.len()).estimate(values).unwrap();
        let same = e(&[0.5, -0.3, 1.1, -1.0, 0.2, 0.9, -0.6, 0.4]);
        assert_eq!(
            Verdict::of(&same, 2.0, "pairs"),
            Verdict::Same { margin_pct: 2.0 }
        );
        let wide = e(&[5.0, -6.0, 1.0, -2.0, 3.0, -4.0, 0.5, 2.5]);
        let v = Verdict::of(&wide, 2.0, "pairs");
        assert!(
            v.words("faster", "slower")
                .starts_with("undecided: after 8 pairs the machine's run-to-run noise (±"),
            "{v:?}"
        );
        assert_eq!(
            Verdict::of(&e(&[-3.0, -2.0, -5.0, -4.0, -3.5, -2.5]), 2.0, "pairs"),
            Verdict::Lower
        );
    }

    #[test]
    fn holm_rejects_step_down() {
        assert_eq!(holm(&[0.01, 0.04, 0.03], 0.05), vec![true, false, false]);
        assert_eq!(holm(&[0.01, 0.02, 0.012], 0.05), vec![true, true, true]);
        assert_eq!(holm(&[0.2, 0.001], 0.05), vec![false, true]);
        assert!(holm(&[], 0.05).is_empty());
    }

    #[test]
    fn mann_whitney_distribution_is_exact() {
        // m = n = 2: U takes 0,1,2,2,3,4 over the C(4,2) = 6 arrangements.
        let cdf = mann_whitney_cdf(2, 2);
        let expect = [1.0 / 6.0, 2.0 / 6.0, 4.0 / 6.0, 5.0 / 6.0, 1.0];
        for (c, e) in cdf.iter().zip(expect) {
            assert!((c - e).abs() < 1e-12, "{cdf:?}");
        }
        // 3 against 3 cannot reach 95% (2/20 = 10%); 4 against 4 can (2/70).
        assert!(
            Estimate::shift(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0])
                .unwrap()
                .interval
                .is_none()
        );
        let four =
            Estimate::shift(&[100.0, 101.0, 99.0, 100.5], &[110.0, 111.0, 109.0, 110.5]).unwrap();
        let i = four.interval.unwrap();
        assert!((i.level - (1.0 - 2.0 / 70.0)).abs() < 1e-9, "{i:?}");
        assert!(
            i.low > 5.0 && i.high < 15.0 && (four.median - 10.0).abs() < 1.0,
            "{four:?}"
        );
        assert!(four.p_value < 0.05);
    }

    /// Independent samples differing by a known shift on the log scale: the Mann-Whitney
    /// interval covers it at least at its printed level.
    #[test]
    fn shift_intervals_cover_at_their_level() {
        let mut rng = Rng(5);
        for m in [4, 6, 10] {
            let mut covered = 0_u32;
            let mut level = 0.0;
            let truth = 100.0 * (0.05_f64).exp_m1();
            for _ in 0..EXPERIMENTS / 2 {
                let a: Vec<f64> = (0..m)
                    .map(|_| 1000.0 * (0.1 * rng.normal()).exp())
                    .collect();
                let b: Vec<f64> = (0..m)
                    .map(|_| 1000.0 * (0.05 + 0.1 * rng.normal()).exp())
                    .collect();
                let i = Estimate::shift(&a, &b).unwrap().interval.unwrap();
                level = i.level;
                if i.low <= truth && truth <= i.high {
                    covered += 1;
                }
            }
            let coverage = f64::from(covered) / (EXPERIMENTS / 2) as f64;
            assert!(coverage >= level - 0.012, "m {m}: {coverage} < {level}");
        }
    }
}
