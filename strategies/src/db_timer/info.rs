//! db-timer, as the registry lists it.

use crate::strategy_info::StrategyInfo;

pub const DB_TIMER: StrategyInfo = StrategyInfo {
    name: "db-timer",
    summary: "the database alone: the leading instance sleeps until the earliest PENDING \
              deadline, woken by LISTEN/NOTIFY on PostgreSQL (adaptive polling elsewhere), \
              the others stand by",
    good: &[
        "it needs nothing but the database, and the orders table is the schedule: no process death can lose a deadline",
        "it cancels at the deadline rather than at the next scan: the leader sleeps until the earliest PENDING deadline",
    ],
    bad: &[
        "one leader (an advisory lock) cancels while the others stand by, so one instance and one transaction per deadline bound its rate",
        "LISTEN/NOTIFY wakes it only on PostgreSQL: elsewhere it polls, and an order due before the next wake is up to poll-max-sleep late",
        "a paused or stuck leader keeps its lead: its orders wait for the standby's claim of overdue orders (up to about twice poll-max-sleep)",
        "the creating transaction sends one NOTIFY per order",
    ],
    reads_the_orders_table: true,
    schedule_does_nothing: true,
    notifies_deadline: true,
    ..StrategyInfo::BASE
};
