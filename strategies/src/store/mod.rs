//! The order store: the schema contract and every state transition, on
//! PostgreSQL, MariaDB/MySQL and SQLite through one code path (sqlx `Any`).
//!
//! The transitions themselves live in [`orders`](self) (create, pay) and
//! [`cancel`](self) (the one cancel function), each transaction run by
//! [`tx`](self)'s retrying `in_tx!`; [`reads`](self) reads orders back;
//! [`handle`](self) holds connecting and schema installation; [`stats`](self)
//! the counters that make the canceller's database cost measurable.

mod anti_patterns;
mod cancel;
mod handle;
mod location;
mod orders;
mod outbox;
mod probe;
mod reads;
mod sql;
mod stats;
mod timer;
mod tx;

pub use anti_patterns::AntiPattern;
pub use cancel::ScanBatch;
pub use handle::{OrderStore, ScanIndex};
pub use location::{identifier, DbKind, DbLocation, DbServer};
pub use outbox::{OutboxLeft, OutboxRow};
pub use probe::{RowsEstimate, ServerReads};
pub use reads::OrderRow;
pub use stats::StoreStats;
