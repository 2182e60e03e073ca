//! `[sweep]`: how `delaybench sweep` varies the rate.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[sweep]`: how `delaybench sweep` looks for each strategy's highest
/// rate. Every step is a whole run of the scenario at one offered rate,
/// with its own warm-up, measured window and namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Sweep {
    /// Offered rates to run, each one (default empty: discover them, from
    /// `start-rate` doubling until a step fails, then bisecting).
    pub rates: Vec<f64>,
    /// Discovery's first rate, orders/s (default 100).
    pub start_rate: f64,
    /// Discovery never offers more than this, orders/s (default 20000).
    pub max_rate: f64,
    /// Discovery halves the gap between the highest rate that held and the
    /// lowest that failed this many times (default 3).
    pub bisect: u32,
    /// A step holds only if p99 lateness at commit is at most this (default 500ms).
    #[serde(with = "humantime_serde")]
    pub bound: Duration,
    /// ... and the harness keeps up: p99 of its lag to commit and of the
    /// schedule path at most this (default 100ms).
    #[serde(with = "humantime_serde")]
    pub keep_up: Duration,
}

impl Default for Sweep {
    fn default() -> Self {
        Sweep {
            rates: Vec::new(),
            start_rate: 100.0,
            max_rate: 20_000.0,
            bisect: 3,
            bound: Duration::from_millis(500),
            keep_up: Duration::from_millis(100),
        }
    }
}

impl Sweep {
    pub(super) fn validate(&self) -> Result<()> {
        let rate_ok = |r: f64| r > 0.0 && r <= 100_000.0;
        for (i, r) in self.rates.iter().enumerate() {
            if !rate_ok(*r) {
                bail!("field `sweep.rates[{i}]` = {r} is out of range; accepted values: more than 0 up to 100000 orders/s");
            }
        }
        if !rate_ok(self.start_rate) {
            bail!("field `sweep.start-rate` = {} is out of range; accepted values: more than 0 up to 100000 orders/s", self.start_rate);
        }
        if !(self.max_rate >= self.start_rate && self.max_rate <= 100_000.0) {
            bail!("field `sweep.max-rate` = {} is out of range; accepted values: `sweep.start-rate` ({}) up to 100000 orders/s", self.max_rate, self.start_rate);
        }
        if self.bisect > 10 {
            bail!(
                "field `sweep.bisect` = {} is out of range; accepted values: 0 to 10",
                self.bisect
            );
        }
        if self.bound.is_zero() || self.keep_up.is_zero() {
            bail!("fields `sweep.bound` and `sweep.keep-up` accept 1ms or more");
        }
        Ok(())
    }
}
