//! The store's counters: what a store's owner did to the database,
//! app-side, counted as it happens (`Counters`) and read as a serialisable
//! snapshot ([`StoreStats`]) that adds across instances and subtracts over
//! a window; and the estimate of the server's reads made from them.

use super::probe::{ReadingSums, RowsEstimate};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// Declares the store's counters once: the atomic `Counters` a store
/// updates, the serialisable [`StoreStats`] snapshot, and their arithmetic.
macro_rules! store_counters {
    ($($(#[$doc:meta])* $field:ident),* $(,)?) => {
        /// Counts of what a store's owner did to the database, app-side.
        #[derive(Debug, Default)]
        pub(super) struct Counters {
            $(pub(super) $field: AtomicU64,)*
        }

        impl Counters {
            pub(super) fn snapshot(&self) -> StoreStats {
                StoreStats { $($field: self.$field.load(Ordering::Relaxed),)* }
            }
        }

        /// A snapshot of a store's counters (see `OrderStore::stats`).
        /// A counter missing from older JSON reads as 0.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct StoreStats {
            $($(#[$doc])* pub $field: u64,)*
        }

        impl StoreStats {
            /// Adds another snapshot (several instances of one strategy).
            pub fn add(&mut self, other: &StoreStats) {
                $(self.$field += other.$field;)*
            }

            /// What happened since `earlier` (counters only grow).
            pub fn since(&self, earlier: &StoreStats) -> StoreStats {
                StoreStats { $($field: self.$field - earlier.$field,)* }
            }
        }
    };
}

store_counters! {
    /// SQL statements sent, including `BEGIN`/`COMMIT`.
    statements,
    transactions,
    /// Transactions retried after a deadlock, serialization failure or busy database.
    retries,
    /// Rows returned by scans (`db-scan`'s cost on the read side).
    rows_read,
    /// Rows the database server read inside this store's transactions, as
    /// the server counted them between BEGIN and COMMIT (PostgreSQL, once
    /// `OrderStore::set_server_reads` is on; 0 otherwise), each reading
    /// times the `k` transactions it stands for: exact when every
    /// transaction is read; sampled, the numerator of the estimate
    /// ([`StoreStats::server_rows_read_estimate`]).
    server_rows_read,
    /// Transactions whose server-side reads were read (two readings each).
    server_reads_probes,
    /// Time those readings took, µs (the probe's own cost, on the path).
    server_reads_probe_us,
    /// Transactions that could have been read, read or not: those that
    /// reached COMMIT while the probe was on and knew the namespace's
    /// relations (the estimate's `N`).
    server_reads_eligible,
    /// The transactions the readings stand for, `Σ k` (the estimate's `N̂`).
    server_reads_weight,
    /// `Σ k(k - 1)`, `Σ k(k - 1)·rows` and `Σ k(k - 1)·rows²` over the
    /// readings: the estimate's variance, expanded into sums.
    server_reads_spread_weight,
    server_rows_read_spread,
    server_rows_read_spread_squares,
    /// `cancel_if_due` calls, one per order id.
    cancel_attempts,
    /// Attempts that cancelled the order; the rest were absorbed.
    cancelled,
    already_paid,
    already_cancelled,
    not_due,
    missing,
}

impl StoreStats {
    /// The rows the server read inside the counted transactions, and the
    /// estimate's variance (0 when every transaction was read): a ratio
    /// estimate from the sampled readings (see `probe::ReadingSums`).
    /// `None` where nothing was read.
    pub fn server_rows_read_estimate(&self) -> Option<RowsEstimate> {
        self.reading_sums().estimate()
    }

    fn reading_sums(&self) -> ReadingSums {
        ReadingSums {
            eligible: self.server_reads_eligible,
            readings: self.server_reads_probes,
            weight: self.server_reads_weight,
            weighted_rows: self.server_rows_read,
            spread_weight: self.server_reads_spread_weight,
            spread_rows: self.server_rows_read_spread,
            spread_squares: self.server_rows_read_spread_squares,
        }
    }
}
