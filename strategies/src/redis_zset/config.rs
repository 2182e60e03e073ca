//! Configuration of `redis-zset` (also used by its two teaching variants,
//! `redis-zset-nonatomic` and `redis-keyspace-expiry`).

use crate::error::{Error, Result};
use crate::redact;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// `[strategies.redis-zset]` in a scenario file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct RedisZsetConfig {
    /// Redis URL (default `redis://127.0.0.1:6379`); may carry a password
    /// (`redis://:secret@host:6379/0`), which `Debug` and errors hide.
    /// `redis+cluster://host:port` selects Redis Cluster, with that node as
    /// the seed (e.g. `redis+cluster://127.0.0.1:7000` for
    /// `scripts/services.sh redis-cluster`).
    pub url: String,
    /// Number of shards, each a pair of ZSETs in one hash slot, claimed by
    /// a loop of its own in every instance; read it through
    /// [`RedisZsetConfig::shards`]. Left out: 1 on one Redis node, 4 on a
    /// Redis Cluster (`redis+cluster://`), where the shards spread the keys
    /// over the masters. Never change it while orders are scheduled: the
    /// shard of an order is its id's hash modulo the shards.
    ///
    /// Why 1 on one node: Redis runs each script on one thread, so more
    /// shards add no speed there, and each shard's loop cancels its own
    /// smaller batches in transactions of its own that contend in the
    /// database. Under the storm preset (100 000 orders due together, 2
    /// instances, claim-batch 500) one shard drained 13 240 and 13 475
    /// cancels/s, four 10 055 (results/claim-batch, interleaved 1, 4, 1),
    /// PostgreSQL's CPU per cancel 72 µs against 96.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<u32>,
    /// Members moved from `delay` to `processing` per claim script call and
    /// cancelled per transaction (default 500, as db-scan's storm batch and
    /// rabbit's `batch-size`). Under the storm preset with four shards, 500
    /// drained 10 199 and 10 246 cancels/s, 100 drained 8 787 and 8 432
    /// (results/claim-batch, interleaved 500, 100, 500, 100). A claim takes
    /// only what is due, so a larger batch adds no wait at a low rate.
    pub claim_batch: u32,
    /// A claimed member not acked within this time is given back to the
    /// delay set by the reclaimer (default `5s`). Longer than a cancel
    /// batch takes, or claims are retried while still being worked on.
    #[serde(with = "humantime_serde")]
    pub visibility_timeout: Duration,
    /// Longest sleep between passes (default `1s`): bounds lateness when a
    /// wake message is lost (e.g. while the subscriber reconnects).
    #[serde(with = "humantime_serde")]
    pub max_sleep: Duration,
    /// How often each worker returns expired claims (default `1s`).
    #[serde(with = "humantime_serde")]
    pub reclaim_interval: Duration,
}

impl Default for RedisZsetConfig {
    fn default() -> Self {
        RedisZsetConfig {
            url: "redis://127.0.0.1:6379".into(),
            shards: None,
            claim_batch: 500,
            visibility_timeout: Duration::from_secs(5),
            max_sleep: Duration::from_secs(1),
            reclaim_interval: Duration::from_secs(1),
        }
    }
}

impl fmt::Debug for RedisZsetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisZsetConfig")
            .field("url", &redact::url(&self.url))
            .field("shards", &self.shards())
            .field("claim_batch", &self.claim_batch)
            .field("visibility_timeout", &self.visibility_timeout)
            .field("max_sleep", &self.max_sleep)
            .field("reclaim_interval", &self.reclaim_interval)
            .finish()
    }
}

impl RedisZsetConfig {
    /// The shards in effect: `shards` as given, else 1 on one Redis node
    /// and 4 on a Redis Cluster (see the field).
    pub fn shards(&self) -> u32 {
        self.shards
            .unwrap_or(if crate::redis_cluster::is_cluster(&self.url) {
                4
            } else {
                1
            })
    }

    /// Checks ranges; `field` is the config path used in the message.
    pub fn validate(&self, field: &str) -> Result<()> {
        if crate::redis_cluster::is_cluster(&self.url) {
            crate::redis_cluster::seed_url(&self.url)
                .and_then(|_| crate::redis_cluster::client(&self.url))
                .map_err(|e| Error::Config(format!("{field}.url: {e}")))?;
        } else {
            let scheme_ok = ["redis://", "rediss://", "redis+unix://"]
                .iter()
                .any(|s| self.url.starts_with(s));
            let why = if scheme_ok {
                crate::tls::redis_client(&self.url).err()
            } else {
                Some("unknown scheme".to_string())
            };
            if let Some(why) = why {
                return Err(Error::Config(format!(
                    "{field}.url = `{}` is not a valid Redis URL ({why}); accepted: \
                     redis://[:password@]host[:port][/db], rediss://… (TLS; the CA with \
                     ?cacert=FILE, a client certificate with &cert=FILE&key=FILE), or \
                     redis+cluster://[:password@]host:port (a seed node of a Redis Cluster)",
                    redact::url(&self.url)
                )));
            }
        }
        if !(1..=1024).contains(&self.shards()) {
            return Err(Error::Config(format!(
                "{field}.shards = {} is out of range; accepted: 1 to 1024",
                self.shards()
            )));
        }
        if !(1..=5_000).contains(&self.claim_batch) {
            return Err(Error::Config(format!(
                "{field}.claim-batch = {} is out of range; accepted: 1 to 5000",
                self.claim_batch
            )));
        }
        let ranges = [
            ("visibility-timeout", self.visibility_timeout),
            ("max-sleep", self.max_sleep),
            ("reclaim-interval", self.reclaim_interval),
        ];
        for (name, value) in ranges {
            if value < Duration::from_millis(1) || value > Duration::from_secs(3600) {
                return Err(Error::Config(format!(
                    "{field}.{name} = {value:?} is out of range; accepted: 1ms to 1h"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_debug_hides_the_password() {
        assert!(RedisZsetConfig::default().validate("x").is_ok());
        let config = RedisZsetConfig {
            url: "redis://:hunter2@127.0.0.1:6379/0".into(),
            ..RedisZsetConfig::default()
        };
        assert!(config.validate("x").is_ok());
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn shards_left_out_are_one_on_a_node_and_four_on_a_cluster() {
        let node = RedisZsetConfig::default();
        assert_eq!(node.shards(), 1);
        let cluster = RedisZsetConfig {
            url: "redis+cluster://127.0.0.1:7000".into(),
            ..RedisZsetConfig::default()
        };
        assert_eq!(cluster.shards(), 4);
        let given = RedisZsetConfig {
            shards: Some(3),
            ..cluster
        };
        assert_eq!(given.shards(), 3);
        let written: RedisZsetConfig = serde_json::from_str(r#"{"shards": 2}"#).unwrap();
        assert_eq!(written.shards(), 2);
        let left_out: RedisZsetConfig = serde_json::from_str(r#"{"claim-batch": 10}"#).unwrap();
        assert_eq!((left_out.shards, left_out.shards()), (None, 1));
    }

    #[test]
    fn validation_names_the_field() {
        let bad = RedisZsetConfig {
            claim_batch: 0,
            ..RedisZsetConfig::default()
        };
        let msg = bad
            .validate("strategies.redis-zset")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("strategies.redis-zset.claim-batch"), "{msg}");
        let bad = RedisZsetConfig {
            url: "http://:hunter2@x".into(),
            ..RedisZsetConfig::default()
        };
        let msg = bad
            .validate("strategies.redis-zset")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("strategies.redis-zset.url"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
    }
}
