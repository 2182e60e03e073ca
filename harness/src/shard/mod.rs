//! The generator on other hosts: one shard per `[hosts]` agent
//! (`generator = "agents"`), each a `delaybench generate` process the agent
//! starts, driving the orders whose id falls in its slot (`id % shards`,
//! so an order's creation and its payment callback stay on one host, in
//! order) against the database from there.
//!
//! A shard is the order service only. The canceller instances stay where
//! the pool has them; a shard tells the harness each order it created and
//! each payment it applied, and the harness hands them on to the pool, as
//! the local driver does: one hop more between an order's commit and its
//! `schedule` (the schedule path's figures carry it).
//!
//! The protocol, over the agent's relay (`crate::agent`):
//! - harness -> shard: one [`Event`](crate::workload::Event) per line as
//!   JSON, then `go <t0_us>`: the first order's time on the harness's
//!   clock (the shard's own clock is corrected onto it, as a worker's is);
//! - shard -> harness: `{"ready":true}` once connected, then `s <id>
//!   <expire_at_us> <committed_at_us>` per order created, `f <id>` per
//!   payment applied, `m` when its first measured event is due, and last
//!   an [`End`] line with its health and lag histogram.
//!
//! A shard that ends without its `End` fails the strategy's run: the load
//! it was to make is unknown.

mod process;
mod remote;

pub use process::generate_main;
pub use remote::{ShardBase, Shards};

use crate::model::GeneratorHealth;
use serde::{Deserialize, Serialize};
use strategies::registry::Variant;
use strategies::{DbLocation, StrategyOptions};

/// What a shard process runs with (in its environment, as a worker's spec).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ShardSpec {
    shard: u32,
    shards: u32,
    /// The strategy, for the order service's side of it (an outbox).
    strategy: Variant,
    options: StrategyOptions,
    location: DbLocation,
    connections: u32,
    /// Orders created before this (after t0, µs) are warm-up.
    measured_from_us: i64,
    /// Minus its host's clock offset.
    clock_correction_us: i64,
}

/// A shard's last line.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct End {
    health: GeneratorHealth,
    /// Its lag histogram as `(value, count)` pairs.
    lags: Vec<(u64, u64)>,
}
