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
}
