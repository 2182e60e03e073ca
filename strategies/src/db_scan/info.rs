//! db-scan and its teaching variant, as the registry lists them.

use crate::strategy_info::{Role, StrategyInfo};

pub const DB_SCAN: StrategyInfo = StrategyInfo {
    name: "db-scan",
    summary: "periodic indexed SELECT of due PENDING orders, batch after batch",
    good: &[
        "it needs nothing but the database: the orders table and its index are the schedule, so no process death, broker or cache can lose a deadline",
        "any number of instances share the work (`FOR UPDATE SKIP LOCKED`, or one leader by lock where the database has none) and its cost per cancel does not grow with the pending orders held",
    ],
    bad: &[
        "every order is late by up to the scan interval plus a batch's time: the interval trades lateness for database load",
        "it reads the database every interval, also when nothing is due",
    ],
    reads_the_orders_table: true,
    schedule_does_nothing: true,
    ..StrategyInfo::BASE
};

pub const DB_SCAN_NOINDEX: StrategyInfo = StrategyInfo {
    name: "db-scan-noindex",
    summary: "TEACHING: db-scan without the index its query needs (every scan reads the \
              whole orders table; cost grows with the backlog)",
    role: Role::Teaching,
    reads_the_orders_table: true,
    schedule_does_nothing: true,
    ..StrategyInfo::BASE
};
