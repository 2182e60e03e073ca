//! `db-scan`: periodically cancel every due PENDING order, found on the
//! `(status, expire_at_us)` index, batch after batch until none is left.
//!
//! Several instances stay correct: where the database has `FOR UPDATE SKIP
//! LOCKED` (PostgreSQL, MariaDB 10.6+) each batch claims its rows so
//! instances take disjoint work; on SQLite, which has no row locks, scanners
//! may read the same ids and the conditional UPDATE in `cancel_if_due` lets
//! exactly one win (the others' attempts are counted as absorbed). We chose
//! SKIP LOCKED over a single advisory-lock leader because it spreads the
//! work and survives an instance dying mid-scan without lock hand-over.

mod config;
mod info;

pub use config::{DbScanConfig, FallbackScanConfig, ScanIndex};
pub use info::{DB_SCAN, DB_SCAN_NOINDEX};

use crate::canceller::{Canceller, Capabilities, StrategyCounters};
use crate::crash::CrashPoint;
use crate::domain::{Micros, OrderId};
use crate::error::Result;
use crate::store::{OrderStore, StoreStats};
use async_trait::async_trait;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

/// `orders.cancelled_by` of the fallback scan beside another strategy.
pub const FALLBACK_BY: &str = "fallback-scan";

/// The db-scan strategy (also used, slower and with a grace period, as
/// `fallback-scan`).
#[derive(Debug)]
pub struct DbScan {
    store: OrderStore,
    interval: Duration,
    batch_size: u32,
    /// Only orders at least this far past their deadline are scanned.
    grace_us: Micros,
    /// Written to `orders.cancelled_by`: `db-scan`, `db-scan-noindex` or
    /// `fallback-scan`.
    by: &'static str,
    /// Set up by `setup` (a fallback scan keeps the schema's index).
    index: ScanIndex,
    scans: AtomicU64,
    batches: AtomicU64,
    errors: AtomicU64,
}

impl DbScan {
    /// The `db-scan` strategy.
    pub fn new(store: OrderStore, config: &DbScanConfig) -> Self {
        let mut scan = Self::with_parts(
            store,
            config.interval,
            config.batch_size,
            Duration::ZERO,
            "db-scan",
        );
        scan.index = config.index;
        scan
    }

    /// The `db-scan-noindex` teaching variant: db-scan after dropping the
    /// index its query needs, so every scan reads the whole orders table
    /// and the cost per cancel grows with the number of orders held.
    pub fn without_index(store: OrderStore, config: &DbScanConfig) -> Self {
        let mut scan = Self::with_parts(
            store,
            config.interval,
            config.batch_size,
            Duration::ZERO,
            "db-scan-noindex",
        );
        scan.index = ScanIndex::None;
        scan
    }

    /// The `fallback-scan` that runs beside another strategy.
    pub fn fallback(store: OrderStore, config: &FallbackScanConfig) -> Self {
        Self::with_parts(
            store,
            config.interval,
            config.batch_size,
            config.grace,
            FALLBACK_BY,
        )
    }

    fn with_parts(
        store: OrderStore,
        interval: Duration,
        batch_size: u32,
        grace: Duration,
        by: &'static str,
    ) -> Self {
        DbScan {
            store,
            interval,
            batch_size,
            grace_us: i64::try_from(grace.as_micros()).unwrap_or(i64::MAX),
            by,
            index: ScanIndex::StatusExpire,
            scans: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    /// One scan: batches until a batch comes back short.
    async fn scan_once(&self, shutdown: &CancellationToken) -> Result<()> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        // The grace only narrows which orders are looked at; each cancel
        // compares the deadline with the time of its own UPDATE.
        cancel_until_short(
            &self.store,
            Claim::Due {
                grace_us: self.grace_us,
            },
            self.batch_size,
            self.by,
            shutdown,
            &self.batches,
        )
        .await?;
        Ok(())
    }
}

/// What a strategy that finds due orders by claiming them from the orders
/// table (db-scan, db-timer) can do: everything lives in the database, so
/// it survives any instance and needs nothing else; several instances
/// split the work only where claims skip locked rows.
pub(crate) fn claiming_capabilities(store: &OrderStore, mut notes: Vec<String>) -> Capabilities {
    if !store.claims_with_skip_locked() {
        notes.push(
            "this database has no FOR UPDATE SKIP LOCKED: several instances read the same \
             due ids and each tries to cancel them (the conditional UPDATE keeps it \
             correct, the work is repeated); run one instance"
                .into(),
        );
    }
    Capabilities {
        durable_across_restart: true,
        arbitrary_delay: true,
        needs_fallback: false,
        // Without row locks (SQLite) scanners read the same due ids:
        // still correct, but each repeats the others' work.
        multi_instance_safe: store.claims_with_skip_locked(),
        instance_owns_its_orders: false,
        requires: Vec::new(),
        notes,
    }
}

/// What each batch of [`cancel_until_short`] claims.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Claim {
    /// Orders at least `grace_us` past their deadline (db-scan,
    /// fallback-scan, and db-timer's standbys).
    Due { grace_us: Micros },
    /// Orders past their deadline, after `due_first` (an order the caller
    /// knows is due: cancelled first, without a claim, in the first batch);
    /// the short batch also reads the next PENDING order (db-timer).
    DueThenPeek { due_first: Option<OrderId> },
}

/// What one [`cancel_until_short`] did, over all its batches.
#[derive(Debug, Default)]
pub(crate) struct Drained {
    /// Ids the claims returned.
    pub claimed: usize,
    /// Orders the batches cancelled.
    pub cancelled: usize,
    /// The last batch's [`crate::store::ScanBatch::next_pending`].
    pub next_pending: Option<(Micros, OrderId)>,
}

/// The claim-and-cancel loop db-scan, db-timer and the ceiling share: batch
/// after batch (each one `FOR UPDATE SKIP LOCKED` claim and its cancels, in
/// one transaction) until a batch comes back short or `shutdown` fires.
pub(crate) async fn cancel_until_short(
    store: &OrderStore,
    claim: Claim,
    batch_size: u32,
    by: &str,
    shutdown: &CancellationToken,
    batches: &AtomicU64,
) -> Result<Drained> {
    let mut drained = Drained::default();
    let mut claim = claim;
    while !shutdown.is_cancelled() {
        let batch = match claim {
            Claim::Due { grace_us } => store.scan_and_cancel_due(grace_us, batch_size, by).await?,
            Claim::DueThenPeek { due_first } => {
                claim = Claim::DueThenPeek { due_first: None };
                store
                    .scan_and_cancel_due_then_peek(batch_size, by, due_first)
                    .await?
            }
        };
        batches.fetch_add(1, Ordering::Relaxed);
        drained.claimed += batch.claimed;
        drained.cancelled += batch.cancelled.len();
        drained.next_pending = batch.next_pending;
        if batch.claimed < batch_size as usize {
            break;
        }
    }
    Ok(drained)
}

#[async_trait]
impl Canceller for DbScan {
    fn name(&self) -> &str {
        self.by
    }

    fn capabilities(&self) -> Capabilities {
        let mut notes = vec![format!(
            "lateness is bounded by the scan interval ({:?}) plus batch time; \
             the database is read every interval even when nothing is due",
            self.interval
        )];
        match self.index {
            ScanIndex::StatusExpire => {}
            ScanIndex::PartialPending => notes.push(
                "scans read the partial index (expire_at_us) WHERE status = 'PENDING'".into(),
            ),
            ScanIndex::None => notes.push(
                "TEACHING: no index on status or deadline, so every scan reads the whole \
                 orders table; the rows read per cancel grow with the orders held"
                    .into(),
            ),
        }
        claiming_capabilities(&self.store, notes)
    }

    async fn setup(&self) -> Result<()> {
        self.store.set_scan_index(self.index).await
    }

    /// Nothing to do: the orders table is the schedule.
    async fn schedule(&self, _order_id: OrderId, _expire_at_us: Micros) -> Result<()> {
        Ok(())
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = ticker.tick() => {}
            }
            if let Err(e) = self.scan_once(&shutdown).await {
                // A transient failure must not stop cancelling: count it,
                // report it, and try again next interval.
                self.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(strategy = self.by, error = %e, "scan failed; retrying next interval");
            }
        }
    }

    async fn teardown(&self) -> Result<()> {
        Ok(())
    }

    fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    fn counters(&self) -> StrategyCounters {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StrategyCounters::from([
            ("scans".to_string(), get(&self.scans)),
            ("batches".to_string(), get(&self.batches)),
            ("errors".to_string(), get(&self.errors)),
        ])
    }

    /// None. The claim (`SELECT ... FOR UPDATE SKIP LOCKED`) and the cancel
    /// happen inside one transaction in one store call
    /// ([`OrderStore::scan_and_cancel_due`]), so there is no place in this
    /// strategy's own path between them: a crash mid-transaction only rolls
    /// it back and drops the row locks, which the next scan takes again.
    /// After the commit there is nothing to acknowledge (the orders table is
    /// the schedule), so `after-commit-before-ack` does not exist here.
    fn crash_points(&self) -> &'static [CrashPoint] {
        &[]
    }
}
