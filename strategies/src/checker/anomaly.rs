//! The anomalies as one table. Each row is one anomaly: the key
//! `summary.json` writes its count and examples under, the column the
//! reports show, what it means (as the reports' glossary says it) and where
//! its count comes from: a checker query and what its placeholders take, or
//! the instances' outcomes, which the harness counts. Everything that lists
//! anomalies walks this table (the checker's queries, the counts and
//! examples and their JSON, the totals, `worst`, the reports' columns), so
//! a new anomaly is one row here plus its query text in
//! [`super::queries`]. The row order is the order everywhere: in
//! `summary.json` and in every report.

use super::queries;
use crate::domain::Micros;

/// Where an anomaly's count comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The checker's query over the schema contract: each id it returns is
    /// one occurrence, and the first few are kept as examples.
    Query { sql: &'static str, binds: Binds },
    /// The instances' own outcomes, counted by the harness: the database
    /// keeps no trace of it, so the checker cannot see it and there are no
    /// example ids.
    Instances,
}

/// What a query's `?` placeholders take, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binds {
    None,
    /// How long past its deadline an order may still be PENDING, then the
    /// time of the check.
    DrainAndCheckTime,
    /// How far apart two hosts' corrected clocks may be (0 on one host).
    ClockTolerance,
}

impl Binds {
    /// The values to bind, from the checker's arguments.
    pub fn values(
        self,
        drain_us: Micros,
        check_time_us: Micros,
        clock_tolerance_us: Micros,
    ) -> Vec<Micros> {
        match self {
            Binds::None => Vec::new(),
            Binds::ClockTolerance => vec![clock_tolerance_us],
            Binds::DrainAndCheckTime => vec![drain_us, check_time_us],
        }
    }
}

/// One row, as the table below spells it.
struct Row {
    key: &'static str,
    column: &'static str,
    means: &'static str,
    source: Source,
}

/// Declares [`Anomaly`], [`Anomaly::ALL`] and the rows from one list, so a
/// variant cannot exist without its row nor a row without its variant.
/// Used once, right below.
macro_rules! anomaly_table {
    ($(
        $variant:ident {
            key: $key:literal,
            column: $column:literal,
            means: $means:literal,
            counted_by: $source:expr $(,)?
        }
    ),+ $(,)?) => {
        /// One kind of anomaly, a row of the table. Every count must be 0
        /// for a correct strategy.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Anomaly {
            $(
                #[doc = concat!("`", $key, "`: ", $means, ".")]
                $variant,
            )+
        }

        impl Anomaly {
            /// Every anomaly, in the table's order.
            pub const ALL: [Anomaly; COUNT] = [$(Anomaly::$variant),+];
        }

        /// How many rows the table has.
        pub(super) const COUNT: usize = [$($key),+].len();

        /// In the order of [`Anomaly`]'s variants, so a variant's
        /// discriminant is its row's index.
        static ROWS: [Row; COUNT] = [$(
            Row { key: $key, column: $column, means: $means, source: $source },
        )+];
    };
}

anomaly_table! {
    EarlyCancels {
        key: "early_cancels",
        column: "early",
        means: "cancelled before its deadline (by its own stamp, or by a payment that found it cancelled)",
        counted_by: Source::Query { sql: queries::EARLY_CANCELS, binds: Binds::ClockTolerance },
    },
    PaidThenCancelled {
        key: "paid_then_cancelled",
        column: "paid-then-cancelled",
        means: "a paid order ended CANCELLED",
        counted_by: Source::Query { sql: queries::PAID_THEN_CANCELLED, binds: Binds::None },
    },
    DuplicateReleases {
        key: "duplicate_releases",
        column: "duplicate-releases",
        means: "stock released more than once",
        counted_by: Source::Query { sql: queries::DUPLICATE_RELEASES, binds: Binds::None },
    },
    MissedCancels {
        key: "missed_cancels",
        column: "missed",
        means: "still PENDING `drain` after its deadline",
        counted_by: Source::Query {
            sql: queries::MISSED_CANCELS,
            binds: Binds::DrainAndCheckTime,
        },
    },
    RefundErrors {
        key: "refund_errors",
        column: "refund-errors",
        means: "a captured payment not applied-or-refunded exactly once",
        counted_by: Source::Query { sql: queries::REFUND_ERRORS, binds: Binds::None },
    },
    StockMismatches {
        key: "stock_mismatches",
        column: "stock-mismatches",
        means: "SKUs whose stock is not initial minus what live orders hold",
        counted_by: Source::Query { sql: queries::STOCK_MISMATCHES, binds: Binds::None },
    },
    UnreleasedCancels {
        key: "unreleased_cancels",
        column: "unreleased",
        means: "cancelled without a release",
        counted_by: Source::Query { sql: queries::UNRELEASED_CANCELS, binds: Binds::None },
    },
    OrphanReleases {
        key: "orphan_releases",
        column: "orphan-releases",
        means: "released but not cancelled",
        counted_by: Source::Query { sql: queries::ORPHAN_RELEASES, binds: Binds::None },
    },
    // The harness sums the instances' `missing` outcomes (attempts on an
    // order that is not in the database) into this count.
    PhantomSchedules {
        key: "phantom_schedules",
        column: "phantom-schedules",
        means: "cancel attempts on orders that never existed: scheduled inside a transaction \
                that rolled back, or delivered before its commit",
        counted_by: Source::Instances,
    },
}

impl Anomaly {
    fn row(self) -> &'static Row {
        &ROWS[self.index()]
    }

    /// Where its count and examples are stored: its row's index.
    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// The anomaly written under `key` in `summary.json`.
    pub(super) fn from_key(key: &str) -> Option<Anomaly> {
        Anomaly::ALL.into_iter().find(|a| a.key() == key)
    }

    /// Its key in `summary.json`, under `anomalies` and `anomaly_examples`.
    pub fn key(self) -> &'static str {
        self.row().key
    }

    /// Its column in the reports.
    pub fn column(self) -> &'static str {
        self.row().column
    }

    /// What it means, in the words of the reports' glossary.
    pub fn means(self) -> &'static str {
        self.row().means
    }

    /// Where its count comes from.
    pub fn source(self) -> Source {
        self.row().source
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_names_its_own_anomaly() {
        for anomaly in Anomaly::ALL {
            assert_eq!(Anomaly::from_key(anomaly.key()), Some(anomaly));
        }
        assert_eq!(Anomaly::from_key("no_such_anomaly"), None);
    }

    #[test]
    fn keys_and_columns_are_unique() {
        for a in Anomaly::ALL {
            for b in Anomaly::ALL.into_iter().filter(|b| *b != a) {
                assert_ne!(a.key(), b.key());
                assert_ne!(a.column(), b.column());
            }
        }
    }

    #[test]
    fn a_query_binds_as_many_values_as_it_has_placeholders() {
        for anomaly in Anomaly::ALL {
            if let Source::Query { sql, binds } = anomaly.source() {
                let placeholders = sql.matches('?').count();
                assert_eq!(binds.values(1, 2, 3).len(), placeholders, "{anomaly:?}");
            }
        }
    }
}
