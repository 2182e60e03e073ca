//! Everything a strategy's measured window starts from: the schema, the
//! strategy set up once, what it declares, the order service's store, the
//! links the faults act on, its instances running, and then the backlog
//! and the storm, written and handed to the instances as live orders are.

use super::bench::Bench;
use super::links::Links;
use super::placement::Placement;
use crate::backlog::{self, Backends};
use crate::instance::{Pool, WorkerSpec};
use crate::model::records::BacklogRecord;
use crate::scenario::Scenario;
use crate::storm::{self, STORM_FIRST_ID};
use anyhow::{Context, Result};
use std::sync::Arc;
use strategies::registry::Deployment;
use strategies::{Canceller, Capabilities, CrashPoint, DbLocation, OrderStore};

/// A strategy ready to measure.
#[derive(Debug)]
pub(super) struct SetUp {
    pub(super) deployment: Deployment,
    /// The order service's side: its store writes the outbox rows and
    /// announces deadlines where the deployment asks it to.
    pub(super) bench: Bench,
    /// What the strategy declares, with the deployment's notes and its
    /// crash points added for the report.
    pub(super) capabilities: Capabilities,
    pub(super) crash_points: &'static [CrashPoint],
    pub(super) pool: Arc<Pool>,
    /// What each instance was started with (the backlog's recovery starts
    /// them again).
    pub(super) specs: Vec<WorkerSpec>,
    /// The proxies in front of the services: the ones a network fault acts
    /// on, and `[network]`'s.
    pub(super) links: Links,
    /// The label of the instances' database sessions.
    pub(super) session: String,
    /// The `[hosts]` agents the instances run on, and their clocks.
    pub(super) placement: Placement,
    /// Where the strategy holds its schedule besides the database.
    pub(super) backends: Backends,
    /// The backlog held, once handed to the instances.
    pub(super) backlog: Option<HeldBacklog>,
    /// The storm, once handed to the instances.
    pub(super) storm: Option<storm::Prepared>,
    /// The server's rows read before the window (whole-run count).
    pub(super) rows_before: Option<u64>,
}

/// A `[backlog]` in the database and in the instances.
#[derive(Debug)]
pub(super) struct HeldBacklog {
    pub(super) record: BacklogRecord,
    pub(super) size: u64,
}

impl SetUp {
    /// Sets the strategy up on `location`; `set_up` receives the instance
    /// that ran `setup`, for the caller to tear down with whatever happens.
    pub(super) async fn build(
        deployment: Deployment,
        scenario: &Scenario,
        location: &DbLocation,
        set_up: &mut Option<Box<dyn Canceller>>,
    ) -> Result<SetUp> {
        let mut bench = Bench::open(location, scenario).await?;
        // Setup runs on a connection of its own whose row counts are flushed
        // before the reading that starts the whole-run count: PostgreSQL
        // publishes a backend's counts up to 10 s late otherwise, and an index
        // built in setup (db-scan's `index` option: a heap scan of a 1M-order
        // backlog) read as 700 rows per cancel of run cost.
        let setup_store = OrderStore::connect(location, 1).await?;
        set_up
            .insert(deployment.instance(setup_store.clone())?)
            .setup()
            .await
            .context("strategy setup")?;
        setup_store.flush_statistics().await;
        setup_store.close().await;
        let control = deployment.instance(OrderStore::connect(location, 2).await?)?;
        let mut capabilities = control.capabilities();
        let points: Vec<&str> = control.crash_points().iter().map(|p| p.as_str()).collect();
        capabilities.notes.push(format!(
            "crash points its path has (crash-at, pause-instance): {}",
            if points.is_empty() {
                "none".to_string()
            } else {
                points.join(", ")
            }
        ));
        capabilities.notes.extend(deployment.notes());
        let rows_before = crate::db_stats::rows_read(&bench.store).await?;
        let options = deployment.options();
        let links = Links::route(scenario, &capabilities.requires, location, options).await?;
        if links.order_service.is_some() {
            // Under `[network]` the order service is across the link too;
            // the schema went in directly, before.
            bench.store.close().await;
            bench.store =
                OrderStore::connect(&links.order_service_location, bench.connections).await?;
        }
        bench.store = deployment.order_service_store(bench.store);
        let (worker_location, worker_options) = (&links.instance_location, &links.instance_options);
        let session = strategies::store::identifier(&format!("{}_w", location.resource_prefix()));
        let placement = Placement::read(scenario, location).await?;
        let specs: Vec<WorkerSpec> = (0..scenario.instances)
            .map(|instance| {
                let (agent, clock_correction_us) = placement.of(instance);
                WorkerSpec {
                    strategy: deployment.variant(),
                    instance,
                    instances: scenario.instances,
                    location: worker_location.clone(),
                    options: worker_options.clone(),
                    session: session.clone(),
                    retry: scenario.schedule_retry.clone(),
                    measure: scenario.measure.clone(),
                    agent,
                    clock_correction_us,
                }
            })
            .collect();
        let pool = Pool::spawn(specs.clone(), scenario.restart_dead_instances).await?;
        let backends = Backends::of(
            &capabilities,
            &options.redis_zset.url,
            &options.rabbit.url,
            location.resource_prefix(),
        );
        // The backlog, like the storm below, goes in once the instances run
        // and reaches the strategy only through `schedule`, each order on
        // one instance, as orders accumulate live. Written before the start,
        // every wheel instance reloaded all of it (and was handed it again),
        // so a backlog of N cost each worker N twice over. A backlog of 0 is
        // measured too: the baseline of the holding and recovery figures.
        let backlog = match &scenario.backlog {
            Some(b) => {
                let size = b.pending.first().copied().unwrap_or(0);
                let held_before = backlog::holdings(&backends, &pool, &bench.store).await;
                let (expire, insert_s) = backlog::insert(
                    &bench.store,
                    backlog::BACKLOG_FIRST_ID,
                    size,
                    b.after,
                    scenario.stock.skus,
                )
                .await?;
                let errors_before = pool.schedule_errors();
                let handoff_s =
                    backlog::hand_off(&pool, backlog::BACKLOG_FIRST_ID, size, expire).await;
                Some(HeldBacklog {
                    record: BacklogRecord {
                        pending: size,
                        insert_s,
                        handoff_s,
                        handoff_errors: pool.schedule_errors() - errors_before,
                        held: backlog::holdings(&backends, &pool, &bench.store).await,
                        held_before: Some(held_before),
                        ..BacklogRecord::default()
                    },
                    size,
                })
            }
            None => None,
        };
        // The storm's orders go in once the instances run, due `lead` from
        // now, so they reach the strategy as live orders do: through
        // `schedule` only. Written before the start, every wheel instance
        // would reload all of them and each order would fire once per
        // instance, a cost no live storm has. The load starts `at` before
        // the instant.
        let storm = match &scenario.storm {
            Some(s) => {
                let orders = s.orders.first().copied().unwrap_or(0);
                let held_before = backlog::holdings(&backends, &pool, &bench.store).await;
                let (expire_at_us, insert_s) = backlog::insert(
                    &bench.store,
                    STORM_FIRST_ID,
                    orders,
                    s.lead(orders),
                    scenario.stock.skus,
                )
                .await?;
                let errors_before = pool.schedule_errors();
                let handoff_s =
                    backlog::hand_off(&pool, STORM_FIRST_ID, orders, expire_at_us).await;
                Some(storm::Prepared {
                    orders,
                    expire_at_us,
                    insert_s,
                    handoff_s,
                    handoff_errors: pool.schedule_errors() - errors_before,
                    held: backlog::holdings(&backends, &pool, &bench.store).await,
                    held_before,
                })
            }
            None => None,
        };
        Ok(SetUp {
            crash_points: control.crash_points(),
            deployment,
            bench,
            capabilities,
            pool,
            specs,
            links,
            session,
            placement,
            backends,
            backlog,
            storm,
            rows_before,
        })
    }

    /// After the run was checked: every instance started afresh, then each
    /// service restarted, each timed until the strategy cancels again with
    /// its backlog in place (see [`backlog::recover`]). `store` reads the
    /// namespace on fresh connections.
    pub(super) async fn recover_backlog(
        &mut self,
        scenario: &Scenario,
        store: &OrderStore,
    ) -> Result<()> {
        let (Some(held), Some(b)) = (&mut self.backlog, &scenario.backlog) else {
            return Ok(());
        };
        held.record.recovery = backlog::recover(backlog::RecoveryInput {
            specs: self.specs.clone(),
            backlog: b,
            pending: held.size,
            store,
            backends: &self.backends,
            before: &held.record.held,
            probe_wait: (!self.capabilities.arbitrary_delay)
                .then(|| self.deployment.options().rabbit.ttls.iter().min().copied())
                .flatten(),
        })
        .await?;
        Ok(())
    }
}
