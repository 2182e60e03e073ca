//! One strategy's session: everything from a fresh namespace to its
//! `summary.json`. `run` measures each selected strategy through it, and
//! `sweep` each step; the sweep's generator step drives its load through
//! the same [`Bench`] and [`Load`] without a strategy.
//!
//! The session, in order:
//! 1. the scenario's `before-each-strategy` command, if any;
//! 2. [`setup`]: the schema, the strategy set up (the teardown armed
//!    first), its instances running (a wheel's reload done), then a backlog
//!    and a storm written and handed to them through `schedule`;
//! 3. [`window`]: the plan driven from its first order, faults at their
//!    times, the drain, the instances stopped;
//! 4. [`assemble`]: the checker, then the backlog's recovery, then the
//!    summary with its [`cost`];
//! 5. the teardown, whatever happened, recorded beside the result.
//!
//! Once the namespace exists, whatever goes wrong is reported with it, so
//! its data can be inspected; a service the strategy needs being down is a
//! skip that says how to start it, not a failure.

mod assemble;
mod bench;
mod cost;
mod links;
mod load;
mod placement;
mod setup;
mod window;

pub use bench::Bench;
pub use load::Load;

use crate::model::records::HostRecord;
use crate::model::summary::{self, DatabaseInfo, Status, Summary};
use crate::scenario::Scenario;
use crate::workload::Plan;
use anyhow::{Context, Result};
use setup::SetUp;
use std::path::Path;
use strategies::leftovers::TeardownGuard;
use strategies::registry::{Deployment, Variant};
use strategies::{Canceller, DbLocation, DbServer};
use tokio::time::Instant;

/// Measures `variant` once on a fresh `namespace` of `server`, writing its
/// histograms to `dir`: the summary says ok, failed or skipped, and why.
pub async fn measure(
    variant: Variant,
    scenario: &Scenario,
    plan: &Plan,
    server: &DbServer,
    namespace: &str,
    dir: &Path,
) -> Result<Summary> {
    let name = variant.name();
    let database = DatabaseInfo::server(server);
    // The scenario's command before each strategy (say, one that makes a
    // cluster whole again); when it fails the strategy does not run, and
    // its row says why.
    let hook = match &scenario.before_each_strategy {
        Some(hook) => {
            eprintln!(
                "delaybench: {name}: running before-each-strategy `{}`",
                hook.label()
            );
            let record = crate::hook::run(hook, dir).await;
            eprintln!("delaybench: {name}: {}", record.describe());
            if let Some(error) = record.error.clone() {
                let mut summary = Summary::not_run(variant, Status::Failed, error, database);
                summary.before_strategy = Some(record);
                return Ok(summary);
            }
            Some(record)
        }
        None => None,
    };
    let mut summary = match on_namespace(variant, scenario, plan, server, namespace, dir).await {
        Ok(summary) => summary,
        Err(e) => not_measured(variant, &e, database),
    };
    summary.before_strategy = hook;
    Ok(summary)
}

/// The session on a namespace of its own. Once the namespace exists,
/// whatever goes wrong is reported with it, so the data can be inspected.
async fn on_namespace(
    variant: Variant,
    scenario: &Scenario,
    plan: &Plan,
    server: &DbServer,
    namespace: &str,
    dir: &Path,
) -> Result<Summary> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let location = server.create_namespace(namespace, dir).await?;
    let deployment = Deployment::new(variant, &scenario.strategy_options());
    match torn_down(deployment, scenario, plan, &location, dir).await {
        Ok(summary) => Ok(summary),
        Err(e) => Ok(not_measured(
            variant,
            &e,
            DatabaseInfo::namespace(&location),
        )),
    }
}

/// Measures with the teardown on every exit path: the guard is armed
/// before `setup` (which may fail halfway) and finished after the
/// measurement, whatever it returned; a panic or a dropped future tears
/// down from the guard's `Drop`. A failed teardown is logged and recorded
/// in the summary, never in place of the measurement's own error.
async fn torn_down(
    deployment: Deployment,
    scenario: &Scenario,
    plan: &Plan,
    location: &DbLocation,
    dir: &Path,
) -> Result<Summary> {
    let guard = TeardownGuard::new(&deployment, location);
    // The instance that ran `setup` tears down, so a server-wide setting it
    // changed is restored; when none was built, a fresh one does.
    let mut set_up = None;
    let measured = measured(deployment, scenario, plan, location, dir, &mut set_up).await;
    let teardown_error = guard
        .finish(set_up.as_deref())
        .await
        .err()
        .map(|e| format!("{e:#}"));
    let mut summary = measured?;
    summary.teardown_error = teardown_error;
    summary.warnings = summary::warnings(&summary);
    Ok(summary)
}

/// The measurement proper; `set_up` receives the instance that runs
/// `setup`, for [`torn_down`] to tear down with.
async fn measured(
    deployment: Deployment,
    scenario: &Scenario,
    plan: &Plan,
    location: &DbLocation,
    dir: &Path,
    set_up: &mut Option<Box<dyn Canceller>>,
) -> Result<Summary> {
    let started = Instant::now();
    let mut setup = SetUp::build(deployment, scenario, location, set_up).await?;
    let observed = window::observe(&setup, scenario, plan, location).await?;
    let hosts = setup
        .placement
        .finish(scenario.instances, scenario.hosts.sharded_generator())
        .await;
    // The hosts' clocks apart by up to their bounds: a payment must see a
    // cancel earlier than that to call it early. An unknown bound (a
    // reading failed) leaves only the stamps' check, and the row warns.
    let tolerance = match &hosts {
        Some(hosts) => HostRecord::clock_tolerance_us(hosts).unwrap_or(i64::MAX as u64 / 2),
        None => 0,
    };
    let checked = assemble::check(&observed.store, scenario, tolerance).await?;
    // After the checker, so the probes it creates never touch the run's
    // figures; before the teardown, so the restarts find the queues and
    // keys in place.
    setup.recover_backlog(scenario, &observed.store).await?;
    // Not before: the recovery's instances connect through the same
    // proxies (a `[network]` link, or a fault's) as the run's did.
    setup.links.shutdown();
    observed.store.close().await;
    let place = assemble::Place {
        scenario,
        plan,
        location,
        dir,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    let mut summary = assemble::summary(setup, observed, checked, place)?;
    summary.hosts = hosts;
    Ok(summary)
}

/// A strategy that could not measure. A service it needs being down is a
/// skip that says how to start it, not a failure of the strategy.
fn not_measured(variant: Variant, e: &anyhow::Error, database: DatabaseInfo) -> Summary {
    let status = if is_unreachable(e) {
        Status::Skipped
    } else {
        Status::Failed
    };
    Summary::not_run(variant, status, format!("{e:#}"), database)
}

fn is_unreachable(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<strategies::Error>(),
            Some(strategies::Error::Unreachable { .. })
        )
    })
}
