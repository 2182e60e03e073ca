//! `+fallback`: a strategy with a slow db-scan running beside it in the
//! same instance, so whatever the strategy loses is still cancelled.

use crate::canceller::{Canceller, Capabilities, InstanceRole, StrategyCounters};
use crate::crash::CrashPoint;
use crate::db_scan::DbScan;
use crate::domain::{Micros, OrderId};
use crate::error::Result;
use crate::store::StoreStats;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// A strategy with a `fallback-scan` running beside it in the same instance.
#[derive(Debug)]
pub struct WithFallback {
    strategy: Box<dyn Canceller>,
    fallback: DbScan,
}

impl WithFallback {
    pub fn new(strategy: Box<dyn Canceller>, fallback: DbScan) -> WithFallback {
        WithFallback { strategy, fallback }
    }
}

#[async_trait]
impl Canceller for WithFallback {
    fn name(&self) -> &str {
        self.strategy.name()
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = self.strategy.capabilities();
        caps.notes
            .push("runs with fallback-scan: lost work is cancelled by the slow scan".into());
        caps
    }

    async fn setup(&self) -> Result<()> {
        self.strategy.setup().await
    }

    fn crash_points(&self) -> &'static [CrashPoint] {
        self.strategy.crash_points()
    }

    /// The strategy's role; the fallback scan runs in every instance alike.
    fn role(&self) -> InstanceRole {
        self.strategy.role()
    }

    async fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> Result<()> {
        self.strategy.schedule(order_id, expire_at_us).await
    }

    async fn paid(&self, order_id: OrderId) -> Result<()> {
        self.strategy.paid(order_id).await
    }

    fn started(&self) -> bool {
        self.strategy.started()
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        let (a, b) = tokio::join!(
            self.strategy.run(shutdown.clone()),
            self.fallback.run(shutdown)
        );
        a.and(b)
    }

    async fn teardown(&self) -> Result<()> {
        self.strategy.teardown().await
    }

    /// Both paths share one store, so its counters already hold both.
    fn store_stats(&self) -> StoreStats {
        self.strategy.store_stats()
    }

    fn counters(&self) -> StrategyCounters {
        let mut counters = self.strategy.counters();
        for (k, v) in self.fallback.counters() {
            counters.insert(format!("fallback_{k}"), v);
        }
        counters
    }
}
