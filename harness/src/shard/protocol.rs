//! What a shard and the harness say to each other.

use crate::model::GeneratorHealth;
use serde::{Deserialize, Serialize};
use strategies::registry::Variant;
use strategies::{DbLocation, StrategyOptions};

/// What a shard process runs with (in its environment, as a worker's spec).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ShardSpec {
    pub(super) shard: u32,
    pub(super) shards: u32,
    /// The strategy, for the order service's side of it (an outbox).
    pub(super) strategy: Variant,
    pub(super) options: StrategyOptions,
    pub(super) location: DbLocation,
    pub(super) connections: u32,
    /// Orders created before this (after t0, µs) are warm-up.
    pub(super) measured_from_us: i64,
    /// Minus its host's clock offset.
    pub(super) clock_correction_us: i64,
}

/// A shard's last line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct End {
    pub(super) health: GeneratorHealth,
    /// Its lag histogram as `(value, count)` pairs.
    pub(super) lags: Vec<(u64, u64)>,
}
