//! Which rate a sweep offers next: doubling from `start-rate` until a step
//! fails (or `max-rate`), then bisecting between the highest rate that held
//! and the lowest that failed; or every listed rate in turn.

use crate::model::sweep::{self, SweepStep};

/// Discovery stops bisecting when the gap is below this share of the rate.
const BISECT_RESOLUTION: f64 = 0.05;

/// The next rate to offer, from the steps so far; `None` when done.
pub(super) fn next_rate(config: &crate::scenario::Sweep, steps: &[SweepStep]) -> Option<f64> {
    if !config.rates.is_empty() {
        return config.rates.get(steps.len()).copied();
    }
    let (held, failed) = sweep::max_sustainable(steps);
    match (held, failed) {
        // Still doubling.
        (Some(h), None) => (h < config.max_rate).then(|| (h * 2.0).min(config.max_rate)),
        // The first rate failed: no bisection below it.
        (None, _) => None,
        (Some(h), Some(f)) => {
            // Every step after the first failure is a bisection.
            let first_failure = steps.iter().position(|s| !s.holds).unwrap_or(0);
            let bisections = steps.len() - first_failure - 1;
            (bisections < config.bisect as usize)
                .then(|| bisect(h, f))
                .flatten()
        }
    }
}

/// The next rate of a bisection between the highest rate that held and the
/// lowest that failed: their midpoint, rounded ([`round_rate`]); `None`
/// once the gap is within [`BISECT_RESOLUTION`] of `held`, or rounding
/// leaves no rate strictly between the two.
pub(super) fn bisect(held: f64, failed: f64) -> Option<f64> {
    let mid = round_rate((held + failed) / 2.0);
    (failed - held > BISECT_RESOLUTION * held && mid > held && mid < failed).then_some(mid)
}

/// Rates read better whole: to 2 significant digits above 100.
fn round_rate(rate: f64) -> f64 {
    if rate < 100.0 {
        return rate.round().max(1.0);
    }
    let step = 10f64.powf(rate.log10().floor() - 1.0);
    (rate / step).round() * step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Sweep;

    fn step(rate: f64, holds: bool) -> SweepStep {
        SweepStep {
            rate,
            holds,
            ..SweepStep::default()
        }
    }

    /// Plays discovery against a strategy that holds up to `limit`.
    fn discover(config: &Sweep, limit: f64) -> Vec<f64> {
        let mut steps = Vec::new();
        let mut next = Some(config.start_rate);
        while let Some(rate) = next {
            steps.push(step(rate, rate <= limit));
            next = next_rate(config, &steps);
            assert!(steps.len() < 50, "discovery does not end: {steps:?}");
        }
        steps.iter().map(|s| s.rate).collect()
    }

    #[test]
    fn discovery_doubles_then_bisects_then_stops() {
        let config = Sweep::default();
        assert_eq!(
            discover(&config, 1000.0),
            vec![100.0, 200.0, 400.0, 800.0, 1600.0, 1200.0, 1000.0, 1100.0]
        );
        // The first rate fails: nothing below it is tried.
        assert_eq!(discover(&config, 50.0), vec![100.0]);
        // Never past max-rate, and a strategy holding there stops there.
        let capped = Sweep {
            max_rate: 500.0,
            ..Sweep::default()
        };
        assert_eq!(discover(&capped, 1e9), vec![100.0, 200.0, 400.0, 500.0]);
        let no_bisect = Sweep {
            bisect: 0,
            ..Sweep::default()
        };
        assert_eq!(discover(&no_bisect, 300.0), vec![100.0, 200.0, 400.0]);
    }

    #[test]
    fn listed_rates_all_run_in_order() {
        let config = Sweep {
            rates: vec![50.0, 500.0, 100.0],
            ..Sweep::default()
        };
        let mut steps = vec![step(50.0, true)];
        assert_eq!(next_rate(&config, &steps), Some(500.0));
        steps.push(step(500.0, false));
        assert_eq!(next_rate(&config, &steps), Some(100.0));
        steps.push(step(100.0, true));
        assert_eq!(next_rate(&config, &steps), None);
    }

    #[test]
    fn rates_round_to_two_significant_digits() {
        assert_eq!(round_rate(1234.0), 1200.0);
        assert_eq!(round_rate(150.0), 150.0);
        assert_eq!(round_rate(75.4), 75.0);
        assert_eq!(round_rate(0.2), 1.0);
    }

    #[test]
    fn a_bisection_stops_within_the_resolution_or_without_a_rate_between() {
        assert_eq!(bisect(800.0, 1600.0), Some(1200.0));
        assert_eq!(bisect(1200.0, 1600.0), Some(1400.0));
        // 1500 to 1560 is a gap of 4 %, under the 5 % resolution.
        assert_eq!(bisect(1500.0, 1560.0), None);
        // Rounding to two digits leaves nothing strictly between.
        assert_eq!(bisect(1000.0, 1100.0), None);
    }
}
