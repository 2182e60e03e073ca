//! What a strategy is, apart from its code: its name, what it needs, what
//! it is for, what choosing it means, and what the order service must do
//! for it. Each strategy's module declares its own [`StrategyInfo`]
//! constants (`db_scan::DB_SCAN`, ...); [`crate::registry`] lists them, each
//! beside its constructor, in one line.
//!
//! A leaf module on purpose: the strategies import it, and the registry
//! imports the strategies, so it can live in neither.

use crate::canceller::Service;

/// A strategy the registry knows about.
#[derive(Debug, Clone, Copy)]
pub struct StrategyInfo {
    /// Its name in `--strategies`, reports and namespaces.
    pub name: &'static str,
    /// One line for `--help` and reports.
    pub summary: &'static str,
    /// Services needed besides the order database.
    pub requires: &'static [Service],
    /// What the entry is for; only [`Role::Strategy`] runs by default.
    pub role: Role,
    /// What choosing it means beyond the measured numbers, for decision
    /// records (`delaybench adr`): each a "Good, because ..." clause. The
    /// services it needs are said apart, from `requires`.
    pub good: &'static [&'static str],
    /// Each a "Bad, because ..." clause.
    pub bad: &'static [&'static str],
    /// It finds due orders by reading the orders table itself (the db-scans,
    /// db-timer): a fallback scan beside it would only repeat its work, so
    /// `+fallback` is refused and `fallback-scan.enabled` leaves it alone.
    pub reads_the_orders_table: bool,
    /// Its [`Canceller::schedule`](crate::canceller::Canceller::schedule)
    /// does nothing: the orders table is its schedule, and it finds every
    /// order there by itself (db-scan, db-timer). The harness hands its
    /// instances no schedule call, so nothing waits on one (a paused
    /// instance included), and reports its schedule path as not applicable
    /// instead of measuring the harness's own hop to a call that does
    /// nothing. The conformance suite checks it: its orders are never
    /// scheduled there either, and must still be cancelled.
    pub schedule_does_nothing: bool,
    /// The order service's creating transaction also announces the
    /// deadline (`NOTIFY` on PostgreSQL), which wakes its instances.
    pub notifies_deadline: bool,
    /// The order service calls `schedule` *inside* the creating
    /// transaction, before it commits (a teaching variant's mistake);
    /// every other strategy is scheduled after the commit, or by the outbox.
    pub schedules_before_commit: bool,
    /// It can drop an order's timer when the order is paid
    /// ([`Canceller::paid`](crate::canceller::Canceller::paid)), so a paid
    /// order's deadline costs no cancel attempt. The order service then
    /// tells it of each payment, unless `strategies.drop-paid-timers` is
    /// off (the naive form, where the timer fires and the conditional
    /// UPDATE finds the order paid). Teaching variants leave it off: their
    /// damage shows on the paid orders' firings.
    pub drops_paid_timers: bool,
    /// A starting instance reads every PENDING order from the database
    /// before it takes work (the wheel, whose schedule lives in memory):
    /// what an instance restart costs grows with the pending orders.
    pub reloads_pending_on_start: bool,
    /// What its measured rates owe to a weaker promise than the others
    /// keep, printed beside each maximum rate (sweep report, README), so
    /// the number never reads better than what happened without it.
    pub rate_caveat: Option<&'static str>,
}

/// What a registry entry is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A way to build a shop: runs by default, and its anomalies fail a run.
    Strategy,
    /// A known mistake reproduced on purpose: off by default (run only when
    /// named in `--strategies`), expected to show damage.
    Teaching,
    /// A yardstick for the others (`ceiling`): off by default in `run`,
    /// run first by `sweep`; its anomalies fail a run like a strategy's.
    Baseline,
}

impl StrategyInfo {
    /// A plain strategy's entry: `name`, no service, [`Role::Strategy`],
    /// nothing asked of the order service; set the rest with struct update.
    pub const BASE: StrategyInfo = StrategyInfo {
        name: "",
        summary: "",
        requires: &[],
        role: Role::Strategy,
        good: &[],
        bad: &[],
        reads_the_orders_table: false,
        schedule_does_nothing: false,
        notifies_deadline: false,
        schedules_before_commit: false,
        drops_paid_timers: false,
        reloads_pending_on_start: false,
        rate_caveat: None,
    };

    /// A teaching variant (see [`Role::Teaching`]).
    pub fn is_teaching(&self) -> bool {
        self.role == Role::Teaching
    }

    /// Whether its schedule leaves the database (a broker, Redis), so a
    /// transactional outbox can carry it there (`+outbox`).
    pub fn schedules_outside_the_database(&self) -> bool {
        !self.requires.is_empty()
    }
}

/// Entries are equal when their names are: a name is the registry's key.
impl PartialEq for StrategyInfo {
    fn eq(&self, other: &StrategyInfo) -> bool {
        self.name == other.name
    }
}

impl Eq for StrategyInfo {}
