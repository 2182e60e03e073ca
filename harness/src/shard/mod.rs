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
mod protocol;
mod remote;

pub use process::generate_main;
pub use remote::{Running, ShardBase, Shards};
