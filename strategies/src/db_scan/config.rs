//! Configuration of `db-scan` (and of `fallback-scan`, which is a slow db-scan).

use crate::error::{Error, Result};
pub use crate::store::ScanIndex;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `[strategies.db-scan]` in a scenario file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct DbScanConfig {
    /// Time between scans (default `250ms`). Lateness is roughly uniform
    /// over `[0, interval]` plus the time a batch takes.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Orders claimed and cancelled per transaction (default 200). A scan
    /// repeats batch after batch until one comes back short.
    pub batch_size: u32,
    /// The index the scan reads (default `status-expire`, the schema's
    /// `(status, expire_at_us)`; `partial-pending` replaces it with
    /// `(expire_at_us) WHERE status = 'PENDING'` on PostgreSQL and SQLite).
    pub index: ScanIndex,
}

impl Default for DbScanConfig {
    fn default() -> Self {
        DbScanConfig {
            interval: Duration::from_millis(250),
            batch_size: 200,
            index: ScanIndex::StatusExpire,
        }
    }
}

impl DbScanConfig {
    /// Checks ranges; `field` is the config path used in the message.
    pub fn validate(&self, field: &str) -> Result<()> {
        if self.interval < Duration::from_millis(1) || self.interval > Duration::from_secs(3600) {
            return Err(Error::Config(format!(
                "{field}.interval = {:?} is out of range; accepted: 1ms to 1h",
                self.interval
            )));
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

/// `[strategies.fallback-scan]`: a low-frequency db-scan that runs beside
/// any strategy and catches what it lost. Its cancels are recorded with
/// `cancelled_by = 'fallback-scan'`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct FallbackScanConfig {
    /// Run the fallback scan beside the strategy (default false).
    pub enabled: bool,
    /// Time between fallback scans (default `2s`).
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// Orders per fallback transaction (default 500).
    pub batch_size: u32,
    /// Only orders at least this far past their deadline are taken (default
    /// `1s`), so the fallback does not race the strategy for fresh work.
    #[serde(with = "humantime_serde")]
    pub grace: Duration,
}

impl Default for FallbackScanConfig {
    fn default() -> Self {
        FallbackScanConfig {
            enabled: false,
            interval: Duration::from_secs(2),
            batch_size: 500,
            grace: Duration::from_secs(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let bad = DbScanConfig {
            batch_size: 0,
            ..DbScanConfig::default()
        };
        let msg = bad.validate("strategies.db-scan").unwrap_err().to_string();
        assert!(msg.contains("strategies.db-scan.batch-size"), "{msg}");
        assert!(DbScanConfig::default().validate("x").is_ok());
    }
}
