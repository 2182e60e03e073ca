//! Configuration of the `timing-wheel` strategy.

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
}

impl Default for TimingWheelConfig {
    fn default() -> Self {
        TimingWheelConfig {
            tick: Duration::from_millis(1),
            slot_bits: 6,
            levels: 6,
            batch_size: 100,
        }
    }
}

impl TimingWheelConfig {
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
