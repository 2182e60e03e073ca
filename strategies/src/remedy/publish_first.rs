//! `redis-zset-publish-first`: the mistake the outbox fixes, as a wrapper.

use crate::canceller::{Canceller, Capabilities, InstanceRole, StrategyCounters};
use crate::crash::CrashPoint;
use crate::domain::{Micros, OrderId};
use crate::error::Result;
use crate::store::StoreStats;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

/// A strategy correct in every step of its own, whose order service calls
/// `schedule` *inside* the creating transaction
/// ([`crate::strategy_info::StrategyInfo::schedules_before_commit`]). A
/// checkout that then fails rolls the order back, and its schedule stays:
/// a phantom, which fires at the deadline on an order that never existed
/// (counted as `missing` attempts, reported as phantom schedules). The
/// wrapper only renames it and says so in its capabilities.
#[derive(Debug)]
pub struct PublishFirst {
    name: &'static str,
    strategy: Box<dyn Canceller>,
}

impl PublishFirst {
    pub fn new(name: &'static str, strategy: Box<dyn Canceller>) -> PublishFirst {
        PublishFirst { name, strategy }
    }
}

#[async_trait]
impl Canceller for PublishFirst {
    fn name(&self) -> &str {
        self.name
    }

    fn capabilities(&self) -> Capabilities {
        let mut caps = self.strategy.capabilities();
        caps.notes.push(
            "TEACHING VARIANT: scheduled before the order's transaction commits; a rolled-back \
             checkout leaves a phantom schedule behind (run with `checkout-abort-ratio` > 0)"
                .into(),
        );
        caps
    }

    async fn setup(&self) -> Result<()> {
        self.strategy.setup().await
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
        self.strategy.run(shutdown).await
    }

    async fn teardown(&self) -> Result<()> {
        self.strategy.teardown().await
    }

    fn crash_points(&self) -> &'static [CrashPoint] {
        self.strategy.crash_points()
    }

    fn role(&self) -> InstanceRole {
        self.strategy.role()
    }

    fn store_stats(&self) -> StoreStats {
        self.strategy.store_stats()
    }

    fn counters(&self) -> StrategyCounters {
        self.strategy.counters()
    }
}
