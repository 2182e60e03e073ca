//! A strategy's `summary.json` put together: the checker's verdict and the
//! timings it reads from the database, turned into lateness (at the row's
//! stamp and at commit), the schedule path, censored lateness, the overdue
//! trend, missed cancels put down to faults, and the cost.

use super::cost::cost;
use super::setup::SetUp;
use super::window::Observed;
use crate::faults;
use crate::model::lateness::{self, LatenessStats};
use crate::model::summary::{self, DatabaseInfo, Status, Summary};
use crate::scenario::Scenario;
use crate::storm::STORM_FIRST_ID;
use crate::workload::Plan;
use anyhow::{Context, Result};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use strategies::checker::{self, Anomaly, CancelTiming, Verdict};
use strategies::registry::Deployment;
use strategies::{now_us, DbLocation, Micros, OrderId, OrderStore};

/// What the checker read, right after the window.
#[derive(Debug)]
pub(super) struct Checked {
    verdict: Verdict,
    /// Cancelled orders, paid-after-deadline ones and those still PENDING.
    timings: Vec<CancelTiming>,
    paid_late: Vec<CancelTiming>,
    pending: Vec<CancelTiming>,
    checked_at_us: Micros,
}

/// Runs every invariant and reads every order's timing, on `store`.
/// `clock_tolerance_us`: how far apart the run's hosts' corrected clocks
/// may be (0 on one host), which a payment's view of an early cancel must
/// beat.
pub(super) async fn check(
    store: &OrderStore,
    scenario: &Scenario,
    clock_tolerance_us: u64,
) -> Result<Checked> {
    let drain_us = scenario.drain.as_micros() as i64;
    let checked_at_us = now_us();
    Ok(Checked {
        verdict: checker::check_within(store, drain_us, checked_at_us, clock_tolerance_us as i64)
            .await?,
        timings: checker::cancel_timings(store).await?,
        paid_late: checker::paid_after_deadline_timings(store).await?,
        pending: checker::pending_timings(store).await?,
        checked_at_us,
    })
}

/// Where the run happened, for its summary.
pub(super) struct Place<'a> {
    pub(super) scenario: &'a Scenario,
    pub(super) plan: &'a Plan,
    pub(super) location: &'a DbLocation,
    /// The strategy's folder, which receives the histograms.
    pub(super) dir: &'a Path,
    /// Since the strategy's session began.
    pub(super) elapsed_s: f64,
}

/// The summary, with the histograms written beside it.
pub(super) fn summary(
    setup: SetUp,
    observed: Observed,
    checked: Checked,
    place: Place<'_>,
) -> Result<Summary> {
    let Place {
        scenario,
        plan,
        location,
        dir,
        elapsed_s,
    } = place;
    let (t0_us, record, faults) = (observed.t0_us, observed.record, observed.faults);
    let (timings, paid_late, pending) = (checked.timings, checked.paid_late, checked.pending);
    let checked_at_us = checked.checked_at_us;
    let timeouts_us: Vec<i64> = scenario
        .timeouts
        .iter()
        .map(|t| t.after.as_micros() as i64)
        .collect();
    let measured_from_us = t0_us + plan.measured_from_us;
    let lateness = lateness::lateness(&timings, measured_from_us, t0_us, &timeouts_us);
    let histogram = &lateness.histogram;
    std::fs::write(dir.join("lateness.hgrm"), lateness::hgrm(histogram))
        .with_context(|| format!("writing {}", dir.join("lateness.hgrm").display()))?;
    if let Some(lag) = &observed.generator.lag_histogram {
        let path = dir.join("generator_lag.hgrm");
        std::fs::write(&path, lateness::hgrm(lag))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let committed = committed_lateness(&timings, &record.cancel_commits, measured_from_us);
    let measured_ids: HashSet<OrderId> = plan.measured_order_ids().collect();
    let schedule_path = (!record.schedules.is_empty()).then(|| {
        lateness::stats_of(
            record
                .schedules
                .iter()
                .filter(|(id, _)| measured_ids.contains(id))
                .map(|(_, us)| *us),
        )
    });
    let schedule_path_absent = schedule_path_absent(&setup.deployment, scenario);
    let censored = lateness::stats_of(
        paid_late
            .iter()
            .filter(|t| t.created_at_us >= measured_from_us)
            .map(|t| (t.at_us - t.expire_at_us) as u64),
    );

    // The measured orders fall due from the warm-up's end plus the shortest
    // timeout until the last arrival plus the shortest timeout. A deadline
    // storm's orders are left out: its drain is measured on its own
    // (storm.rs), and counting it here would fail every step whose drain
    // outlasts a quarter of the window for a backlog the load never made.
    let shortest_us = timeouts_us.iter().copied().min().unwrap_or(0);
    let arrivals_end_us = t0_us + (scenario.warmup + scenario.duration).as_micros() as i64;
    let overdue = lateness::overdue_trend(
        timings
            .iter()
            .chain(&paid_late)
            .chain(&pending)
            .filter(|t| t.id < STORM_FIRST_ID)
            .map(|t| (t.expire_at_us, t.at_us)),
        measured_from_us + shortest_us,
        arrivals_end_us + shortest_us,
        t0_us,
    );

    // The checker's missed cancels (PENDING past deadline + drain), each
    // put down to the fault in effect while it lived.
    let missed_by_fault = if faults.is_empty() {
        Vec::new()
    } else {
        let drain_us = scenario.drain.as_micros() as i64;
        let ms = |us: i64| ((us - t0_us).max(0) / 1000) as u64;
        let missed: Vec<(u64, u64)> = pending
            .iter()
            .filter(|t| t.expire_at_us + drain_us <= checked_at_us)
            .map(|t| (ms(t.created_at_us), ms(t.expire_at_us)))
            .collect();
        faults::missed_by_fault(&missed, &faults, ms(checked_at_us))
    };
    let cost = cost(
        &record.reports,
        &setup.capabilities.requires,
        observed.redis_commands,
        observed.server_rows_read,
        location.kind,
        setup.links.database_round_trip(),
    );
    let mut summary = Summary {
        strategy: setup.deployment.variant(),
        status: Status::Ok,
        reason: None,
        database: DatabaseInfo::namespace(location),
        orders: checked.verdict.orders,
        lateness_us: lateness::stats(histogram),
        // Attempts on orders that never existed: a row the database cannot see.
        anomalies: checked.verdict.anomalies.with(
            Anomaly::PhantomSchedules,
            record.reports.iter().map(|r| r.total.missing).sum(),
        ),
        anomaly_examples: checked.verdict.anomaly_examples,
        cancelled_by: checked.verdict.cancelled_by,
        payments: checked.verdict.payments,
        releases: checked.verdict.releases,
        lateness_over_time: lateness.over_time,
        lateness_by_timeout: lateness.by_timeout,
        committed_lateness_us: committed.as_ref().map(|c| c.0.clone()),
        commit_gap_us: committed.map(|c| c.1),
        censored_lateness_us: Some(censored),
        schedule_path_us: schedule_path,
        schedule_path_absent,
        overdue,
        cpu: observed.cpu,
        network: setup.links.records(),
        hosts: None, // read after the instances stopped (`Placement::finish`)
        backlog: setup.backlog.map(|held| held.record),
        storm: setup
            .storm
            .zip(observed.storm_drain)
            .map(|(prepared, drain)| {
                crate::storm::analyse(
                    prepared,
                    scenario.storm.as_ref().map(|s| s.at).unwrap_or_default(),
                    drain,
                    &timings,
                    t0_us,
                    measured_from_us,
                    arrivals_end_us + timeouts_us.iter().copied().max().unwrap_or(0),
                )
            }),
        missed_by_fault,
        outbox: observed.outbox,
        cost,
        generator: observed.generator,
        worker_events: record.events,
        warnings: Vec::new(),
        faults,
        teardown_error: None,
        before_strategy: None,
        capabilities: Some(setup.capabilities),
        instances: scenario.instances,
        timeouts: scenario.timeouts_label(),
        drain_ms: scenario.drain.as_millis() as u64,
        elapsed_s,
        repeats: None,
        measure: Some(scenario.measure.clone()),
    };
    summary.warnings = summary::warnings(&summary);
    Ok(summary)
}

/// Why the summary has no schedule path, where that is known before the
/// run: a strategy whose schedule does nothing is handed no call (see
/// `Pool::schedule`), so it has no path to measure; otherwise the path is
/// measured unless `measure.schedule-times` is off.
fn schedule_path_absent(deployment: &Deployment, scenario: &Scenario) -> Option<String> {
    if !deployment.takes_schedules() {
        Some(format!(
            "not applicable: {}'s schedule does nothing (the orders table is its schedule), \
             so the order service calls none and no order waits on one",
            deployment.variant().info.name
        ))
    } else if !scenario.measure.schedule_times {
        Some("not measured: `measure.schedule-times` is off".into())
    } else {
        None
    }
}

/// Lateness at COMMIT (measured orders whose commit time a worker sent) and,
/// per order, how much later the commit returned than the row's stamp.
fn committed_lateness(
    timings: &[CancelTiming],
    commits: &[(OrderId, i64)],
    measured_from_us: i64,
) -> Option<(LatenessStats, LatenessStats)> {
    if commits.is_empty() {
        return None;
    }
    let commit_of: HashMap<OrderId, i64> = commits.iter().copied().collect();
    let (mut late, mut gap) = (Vec::new(), Vec::new());
    for t in timings
        .iter()
        .filter(|t| t.created_at_us >= measured_from_us)
    {
        if let Some(&at) = commit_of.get(&t.id) {
            late.push((at - t.expire_at_us).max(0) as u64);
            gap.push((at - t.at_us).max(0) as u64);
        }
    }
    Some((lateness::stats_of(late), lateness::stats_of(gap)))
}
