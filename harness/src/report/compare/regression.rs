//! What counts as worse: a figure that is worse when it goes up
//! ([`WORSE_WHEN_UP`]) regresses when the repetitions' min–max ranges part
//! upwards, or, with no spread to judge by, when it grew by more than a
//! threshold; `--fail-on-regression` ends with [`crate::exit::REGRESSION`].

use super::super::table::{shown, Shown};
use crate::model::summary::{chance_one_in, Summary, MIN_REPETITIONS};

/// How `compare` judges a difference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// When either run was not repeated (no spread to judge by), a figure
    /// counts as worse only when it grew by more than this share of the
    /// base's value (0.25: more than 25 %).
    pub single_run_threshold: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            single_run_threshold: 0.25,
        }
    }
}

/// A figure of one strategy that got worse beyond the spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    pub strategy: String,
    /// What the figure is, in words (`lateness p90 ms`).
    pub figure: &'static str,
    /// Base → other, formatted, and by which rule it counts as worse.
    pub detail: String,
}

/// How `compare --fail-on-regression` ends when a figure got worse;
/// `main` exits with [`crate::exit::REGRESSION`] on it.
#[derive(Debug)]
pub struct Regressed(pub Vec<Regression>);

impl std::fmt::Display for Regressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list: Vec<String> = self
            .0
            .iter()
            .map(|r| format!("{} {}", r.strategy, r.figure))
            .collect();
        write!(
            f,
            "{} figure(s) worse beyond the spread: {}",
            self.0.len(),
            list.join(", ")
        )
    }
}

impl std::error::Error for Regressed {}

/// The figures that are worse when they go up, by their name in
/// `summary::figures`, with what the regression list calls them. Both rows
/// figures are listed: a run has the one its database measures.
const WORSE_WHEN_UP: [(&str, &str); 14] = [
    ("p50", "lateness p50 ms"),
    ("p90", "lateness p90 ms"),
    ("p99", "lateness p99 ms"),
    ("p999", "lateness p99.9 ms"),
    ("max", "lateness max ms"),
    ("commit_p99", "lateness at commit p99 ms"),
    ("anomalies", "anomalies"),
    ("stmts_per_cancel", "DB statements per cancel"),
    ("attempts_per_cancel", "cancel attempts per cancel"),
    ("canceller_rows_per_cancel", "DB rows read per cancel"),
    (
        "server_rows_per_cancel",
        "DB rows read per cancel (whole run)",
    ),
    ("broker_msgs_per_cancel", "broker messages per cancel"),
    ("redis_cmds_per_cancel", "Redis commands per cancel"),
    (
        "cpu_all_us_per_cancel",
        "CPU µs per cancel (every service and the workers)",
    ),
];

/// Every figure of [`WORSE_WHEN_UP`] that went up from `base` to `other`
/// beyond the spread.
pub(super) fn regressions_of(
    base: &Summary,
    other: &Summary,
    options: CompareOptions,
) -> Vec<Regression> {
    WORSE_WHEN_UP
        .iter()
        .filter_map(|&(key, figure)| {
            let (b, o) = (shown(base, key)?, shown(other, key)?);
            let why = regression(b, o, options)?;
            let show = |v: f64| {
                if key.starts_with('p') || key == "max" || key == "commit_p99" {
                    format!("{:.1}", v / 1000.0)
                } else {
                    format!("{v:.1}")
                }
            };
            Some(Regression {
                strategy: base.strategy.name().to_string(),
                figure,
                detail: format!("{} → {}: {why}", show(b.value), show(o.value)),
            })
        })
        .collect()
}

/// Why `other` is worse than `base` beyond the spread, for a figure that
/// is worse when it goes up; `None` when it is not. With repetitions on
/// both sides: the other's min–max range lies wholly above the base's.
/// Otherwise there is no spread to judge by, and the rule is a relative
/// threshold: the other's value exceeds the base's by more than
/// `single_run_threshold` of it (any rise from 0 counts).
fn regression(base: Shown, other: Shown, options: CompareOptions) -> Option<String> {
    let enough = base.repetitions.min(other.repetitions) >= MIN_REPETITIONS;
    match (base.spread, other.spread) {
        (Some((_, base_max)), Some((other_min, _))) if enough => {
            (other_min > base_max).then(|| {
                format!(
                    "the repetitions' min–max ranges do not overlap (by chance alone 1 in {})",
                    chance_one_in(base.repetitions, other.repetitions)
                )
            })
        }
        (spread, _) => {
            let limit = base.value * (1.0 + options.single_run_threshold);
            (other.value > limit).then(|| {
                format!(
                    "more than {:.0} % up, {}",
                    options.single_run_threshold * 100.0,
                    if spread.is_some() {
                        format!(
                            "with too few repetitions ({} and {}) to judge by their spread",
                            base.repetitions, other.repetitions
                        )
                    } else {
                        "with no spread to judge by".to_string()
                    }
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(value: f64) -> Shown {
        Shown {
            value,
            spread: None,
            repetitions: 1,
        }
    }

    fn repeated(min: f64, median: f64, max: f64) -> Shown {
        Shown {
            value: median,
            spread: Some((min, max)),
            repetitions: 3,
        }
    }

    #[test]
    fn repeated_runs_regress_only_when_the_ranges_part_upwards() {
        let options = CompareOptions::default();
        let base = repeated(90.0, 100.0, 110.0);
        assert!(regression(base, repeated(111.0, 115.0, 120.0), options).is_some());
        // Overlapping ranges: noise, however far the medians moved.
        assert!(regression(base, repeated(105.0, 200.0, 300.0), options).is_none());
        // Better beyond the spread is no regression.
        assert!(regression(base, repeated(50.0, 60.0, 70.0), options).is_none());
        // The single-run threshold plays no part where both have a spread.
        let strict = CompareOptions {
            single_run_threshold: 0.0,
        };
        assert!(regression(base, repeated(100.0, 109.0, 110.0), strict).is_none());
        // Two repetitions a side: their ranges decide nothing, the
        // relative threshold does, and says why.
        let two = |s: Shown| Shown {
            repetitions: 2,
            ..s
        };
        let why = regression(two(base), two(repeated(111.0, 115.0, 120.0)), options);
        assert!(why.is_none(), "{why:?}");
        let why = regression(two(base), two(repeated(130.0, 140.0, 150.0)), options).unwrap();
        assert!(why.contains("too few repetitions (2 and 2)"), "{why}");
    }

    #[test]
    fn without_a_spread_the_relative_threshold_decides() {
        let default = CompareOptions::default();
        assert_eq!(default.single_run_threshold, 0.25);
        assert!(regression(single(100.0), single(126.0), default).is_some());
        assert!(regression(single(100.0), single(124.0), default).is_none());
        let loose = CompareOptions {
            single_run_threshold: 0.5,
        };
        assert!(regression(single(100.0), single(126.0), loose).is_none());
        // Any rise from 0 counts (a first anomaly); staying at 0 does not.
        assert!(regression(single(0.0), single(1.0), default).is_some());
        assert!(regression(single(0.0), single(0.0), default).is_none());
        // One side repeated, the other not: still no spread to compare.
        let base = repeated(90.0, 100.0, 200.0);
        assert!(regression(base, single(130.0), default).is_some());
    }
}
