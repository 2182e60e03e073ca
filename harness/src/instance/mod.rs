//! Canceller instances as separate OS processes, so a kill is real.
//!
//! The harness starts `delaybench worker` once per instance with a
//! [`WorkerSpec`] in the environment. The protocol is line-based:
//! - worker -> harness (stdout): `{"ready":true}` once running, then a
//!   [`Flush`](protocol::Flush) JSON line at least every [`FLUSH_EVERY`](protocol::FLUSH_EVERY) and one last flush
//!   (`"last": true`) when it stops. A flush carries the worker's counters so
//!   far and what it measured since the previous flush, so a worker that dies
//!   of anything (the OOM killer, an operator's `kill -9`, a panic) loses at
//!   most its last second;
//! - harness -> worker (stdin): `s <order_id> <expire_at_us> <committed_at_us>`
//!   to schedule, `m` to start measuring (end of warm-up), `b` for a
//!   barrier (the worker flushes with `"barrier": true` once every
//!   schedule sent before it has returned), `c <point>` / `p <point>` to
//!   arm a crash or a stall at a crash point, `d` to disarm them, `r <n>`
//!   to ask its role now (it answers `{"answer":{"asked":n,"role":"leader"}}`
//!   at once, from its strategy's own state: a fault aimed at a role acts
//!   on the instance that holds it when the fault fires); EOF to stop.
//!
//! A worker that dies without its last flush is an event of the run
//! ([`WorkerEvent`](crate::model::WorkerEvent)): the pool keeps its measurements, sends new orders to
//! the live instances and, if the scenario says so, starts a fresh process.
//! Logs go to stderr, which the worker inherits.
//!
//! A worker can also run on another host, started there by `delaybench
//! agent` ([`crate::agent`]), which relays the same lines over TCP.

mod pool;
mod protocol;
mod worker;

pub use pool::{Pool, PoolRecord, Said};
pub use protocol::WorkerSpec;
pub use worker::worker_main;
