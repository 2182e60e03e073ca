//! Configuration of `db-timer`.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[strategies.db-timer]` in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct DbTimerConfig {
    /// The longest an instance sleeps while its `LISTEN` connection is up
    /// (PostgreSQL; default `5s`). A new order with an earlier deadline
    /// wakes it by `NOTIFY`, so this bounds lateness only when a
    /// notification is lost; it also caps how stale the instance's view
    /// of the earliest deadline can get.
    #[serde(with = "humantime_serde")]
    pub max_sleep: Duration,
    /// The longest an instance sleeps without a listener (default `250ms`,
    /// db-scan's interval): always on MariaDB and SQLite, and on PostgreSQL
    /// while the listener reconnects. Nothing wakes it early there, so an
    /// order whose deadline comes before the instance's next wake is up to
    /// this late (plus batch time); orders due after it are cancelled at
    /// their deadline.
    #[serde(with = "humantime_serde")]
    pub poll_max_sleep: Duration,
    /// Orders claimed and cancelled per transaction (default 200), as db-scan's.
    pub batch_size: u32,
}

impl Default for DbTimerConfig {
    fn default() -> Self {
        DbTimerConfig {
            max_sleep: Duration::from_secs(5),
            poll_max_sleep: Duration::from_millis(250),
            batch_size: 200,
        }
    }
}

impl DbTimerConfig {
    /// Checks ranges; `field` is the config path used in the message.
    pub fn validate(&self, field: &str) -> Result<()> {
        for (name, value) in [
            ("max-sleep", self.max_sleep),
            ("poll-max-sleep", self.poll_max_sleep),
        ] {
            if value < Duration::from_millis(1) || value > Duration::from_secs(3600) {
                return Err(Error::Config(format!(
                    "{field}.{name} = {value:?} is out of range; accepted: 1ms to 1h"
                )));
            }
        }
        if !(1..=10_000).contains(&self.batch_size) {
            return Err(Error::Config(format!(
                "{field}.batch-size = {} is out of range; accepted: 1 to 10000",
                self.batch_size
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        assert!(DbTimerConfig::default().validate("x").is_ok());
        let bad = DbTimerConfig {
            batch_size: 0,
            ..DbTimerConfig::default()
        };
        let msg = bad.validate("strategies.db-timer").unwrap_err().to_string();
        assert!(msg.contains("strategies.db-timer.batch-size"), "{msg}");
        let bad = DbTimerConfig {
            poll_max_sleep: Duration::ZERO,
            ..DbTimerConfig::default()
        };
        let msg = bad.validate("strategies.db-timer").unwrap_err().to_string();
        assert!(msg.contains("strategies.db-timer.poll-max-sleep"), "{msg}");
        let bad = DbTimerConfig {
            max_sleep: Duration::from_secs(7200),
            ..DbTimerConfig::default()
        };
        let msg = bad.validate("strategies.db-timer").unwrap_err().to_string();
        assert!(msg.contains("strategies.db-timer.max-sleep"), "{msg}");
    }
}
