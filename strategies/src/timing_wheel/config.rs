//! Configuration of the `timing-wheel` strategy.

use crate::domain::Share;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[strategies.timing-wheel]` in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TimingWheelConfig {
    /// Tick length (default `1ms`). Deadlines are rounded up to the next
    /// tick, so lateness includes up to one tick, never less than zero.
    #[serde(with = "humantime_serde")]
    pub tick: Duration,
    /// log2 of slots per level (default 6 = 64 slots, at most 6).
    pub slot_bits: u32,
    /// Levels (default 6). With the defaults the wheel spans 2^36 ticks,
    /// about 795 days at 1 ms; later deadlines wait in an overflow list.
    pub levels: u32,
    /// Orders cancelled per transaction when many fire at once (default 100).
    pub batch_size: u32,
    /// What an instance reloads on start (default false): its own share of
    /// the PENDING orders, `id % instances = its index`, the orders the
    /// harness's pool sends it. true: every PENDING order, as before
    /// 2026-12-05, which also takes back orders rerouted to it while their
    /// owner was down, at the cost of every instance holding the whole
    /// backlog after a restart (two instances with 10M pending: 20M
    /// reloaded, 10M held twice).
    pub reload_all: bool,
    /// This instance's share, set by the worker that runs it (not read
    /// from a scenario). `None` (a lone instance, a test): every order.
    #[serde(skip)]
    pub share: Option<Share>,
}

impl Default for TimingWheelConfig {
    fn default() -> Self {
        TimingWheelConfig {
            tick: Duration::from_millis(1),
            slot_bits: 6,
            levels: 6,
            batch_size: 100,
            reload_all: false,
            share: None,
        }
    }
}

impl TimingWheelConfig {
    /// The orders a reload reads: this instance's share, or all of them.
    pub fn reload_share(&self) -> Option<Share> {
        self.share.filter(|s| !self.reload_all && s.of > 1)
    }

    /// Checks ranges; `field` is the config path used in the message.
    pub fn validate(&self, field: &str) -> Result<()> {
        if self.tick < Duration::from_micros(100) || self.tick > Duration::from_secs(60) {
            return Err(Error::Config(format!(
                "{field}.tick = {:?} is out of range; accepted: 100us to 60s",
                self.tick
            )));
        }
        super::wheel::WheelConfig::new(self.slot_bits, self.levels)
            .validate()
            .map_err(|e| {
                Error::Config(format!(
                    "{field}.slot-bits = {} / levels = {}: {e}",
                    self.slot_bits, self.levels
                ))
            })?;
        if !(1..=10_000).contains(&self.batch_size) {
            return Err(Error::Config(format!(
                "{field}.batch-size = {} is out of range; accepted: 1 to 10000",
                self.batch_size
            )));
        }
        Ok(())
    }
}
