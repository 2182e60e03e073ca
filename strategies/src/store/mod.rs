//! The order store: the schema contract and every state transition, on
//! PostgreSQL, MariaDB/MySQL and SQLite through one code path (sqlx `Any`).
//!
//! The transitions themselves live in [`orders`](self) (create, pay, the one
//! cancel function); [`handle`](self) holds connecting and schema
//! installation; [`stats`](self) the counters that make the canceller's
//! database cost measurable.

mod anti_patterns;
mod handle;
mod location;
mod orders;
mod outbox;
mod probe;
mod sql;
mod stats;
mod timer;

pub use anti_patterns::AntiPattern;
pub use handle::{OrderStore, ScanIndex};
pub use location::{identifier, DbKind, DbLocation, DbServer};
pub use orders::{OrderRow, ScanBatch};
pub use outbox::OutboxRow;
pub use probe::{RowsEstimate, ServerReads};
pub use stats::StoreStats;
