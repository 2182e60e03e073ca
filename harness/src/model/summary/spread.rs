//! A repeated strategy's spread: each figure's median, min and max over
//! the repetitions.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A repeated strategy's figures. The `summary.json` beside it is the
/// median repetition's run (its namespace, order counts, examples) with
/// two exceptions that keep it from reading better than what happened:
/// `lateness_us` holds the medians and `anomalies` the worst repetition's
/// count of each kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// Repetitions that ran (status ok).
    pub count: u32,
    /// The folders of the repetitions, relative to the strategy's folder.
    pub folders: Vec<String>,
    /// Figure name (see [`figures`]) -> spread. A figure is absent when any
    /// repetition lacks it (say, too few samples for that percentile).
    pub figures: BTreeMap<String, Spread>,
    /// Repetitions that did not measure, as `repeat k: status: reason`.
    #[serde(default)]
    pub not_measured: Vec<String>,
    /// Figures computed from the repetitions' own summaries when read,
    /// for runs made before the figure was written (in no JSON file).
    #[serde(skip)]
    pub derived: Vec<String>,
}

/// Median, min and max of one figure over the repetitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (at least one).
    pub(super) fn of(mut values: Vec<f64>) -> Spread {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Spread {
            median,
            min: values[0],
            max: values[n - 1],
        }
    }

    /// Whether the two ranges are disjoint: a difference larger than the spread.
    pub fn differs_from(&self, other: &Spread) -> bool {
        self.max < other.min || other.max < self.min
    }

    /// Whether this range of `n` repetitions and `other`'s of `m`
    /// separate: disjoint, with at least [`MIN_REPETITIONS`] each (the
    /// caller sees that both come from one run). With no real difference
    /// two ranges are disjoint by chance 1 in [`chance_one_in`]`(n, m)`.
    pub fn separated_from(&self, n: u32, other: &Spread, m: u32) -> bool {
        n >= MIN_REPETITIONS && m >= MIN_REPETITIONS && self.differs_from(other)
    }
}

/// Repetitions each side needs before its range may separate it: two
/// ranges of two are disjoint by chance alone 1 time in 3, of three 1 in
/// 10.
pub const MIN_REPETITIONS: u32 = 3;

/// With no real difference, two ranges of `n` and `m` repetitions fail to
/// overlap by chance with probability 2 / C(n+m, n): "1 in C(n+m, n)/2",
/// rounded down so the chance never reads smaller than it is (2 in 35 is
/// "1 in 17").
pub fn chance_one_in(n: u32, m: u32) -> u64 {
    let (n, m) = (u64::from(n), u64::from(m));
    let mut c: u64 = 1;
    for k in 1..=n.min(m) {
        c = c * (n + m + 1 - k) / k;
    }
    c / 2
}
