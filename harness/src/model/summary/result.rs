//! One strategy's result as `summary.json` holds it: whether it ran, where
//! its data lives, and every figure the run measured.

use super::cost::Cost;
use super::cpu_spread::CpuSpread;
use super::spread::Repeats;
use crate::faults::{FaultLoss, FaultRecord};
use crate::model::cpu::CpuUse;
use crate::model::lateness::{LatenessBucket, LatenessStats, OverdueTrend, TimeoutLateness};
use crate::model::records::{GeneratorHealth, WorkerEvent};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use strategies::checker::{Anomalies, AnomalyExamples, OrderCounts};
use strategies::registry::Variant;
use strategies::Capabilities;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Skipped,
    Failed,
}

impl Status {
    /// The word written to `summary.json` and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Skipped => "skipped",
            Status::Failed => "failed",
        }
    }
}

/// Where the strategy's data lives (kept after the run).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DatabaseInfo {
    /// `postgres`, `mysql` or `sqlite`.
    pub kind: String,
    /// Password removed.
    pub url: String,
    /// Schema, database or file; `null` if none was created.
    pub namespace: Option<String>,
}

impl DatabaseInfo {
    /// `server`, before a namespace was made on it.
    pub fn server(server: &strategies::DbServer) -> DatabaseInfo {
        DatabaseInfo {
            kind: server.kind().as_str().to_string(),
            url: server.display_url(),
            namespace: None,
        }
    }

    /// The namespace at `location`.
    pub fn namespace(location: &strategies::DbLocation) -> DatabaseInfo {
        DatabaseInfo {
            kind: location.kind.as_str().to_string(),
            url: location.display_url(),
            namespace: Some(location.namespace.clone()),
        }
    }
}

/// The folder of a strategy's unmeasured twin in its run folder
/// (`measure.unmeasured-twin`).
pub fn twin_folder(strategy: &str) -> String {
    format!("{strategy}.unmeasured")
}

/// One strategy's result. Keys required by outside checkers: `strategy`,
/// `status`, `reason`, `database`, `orders`, `lateness_us`, `anomalies`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// The strategy and its remedies, written as its name
    /// (`redis-zset+outbox+fallback`).
    pub strategy: Variant,
    pub status: Status,
    pub reason: Option<String>,
    pub database: DatabaseInfo,
    pub orders: OrderCounts,
    pub lateness_us: LatenessStats,
    pub anomalies: Anomalies,
    pub anomaly_examples: AnomalyExamples,
    pub cancelled_by: BTreeMap<String, u64>,
    pub payments: BTreeMap<String, u64>,
    pub releases: u64,
    pub lateness_over_time: Vec<LatenessBucket>,
    pub lateness_by_timeout: Vec<TimeoutLateness>,
    /// Lateness at the moment each cancel's COMMIT returned, from the
    /// workers' own clocks (`None` in runs made before it was measured).
    #[serde(default)]
    pub committed_lateness_us: Option<LatenessStats>,
    /// Per order, COMMIT returned minus the row's `cancelled_at_us`: what
    /// the row-based figure leaves out.
    #[serde(default)]
    pub commit_gap_us: Option<LatenessStats>,
    /// Orders paid after their deadline while still PENDING (measured
    /// window): `paid_at_us - expire_at_us`, a lower bound on how late the
    /// canceller was for orders that are missing from `lateness_us`.
    #[serde(default)]
    pub censored_lateness_us: Option<LatenessStats>,
    /// Order committed -> `schedule()` returned in the worker, per order
    /// (measured window).
    #[serde(default)]
    pub schedule_path_us: Option<LatenessStats>,
    /// Why `schedule_path_us` is absent, in words: the strategy's schedule
    /// does nothing, so the harness calls none and there is no path
    /// (`not applicable: ...`), or `measure.schedule-times` was off (`not
    /// measured: ...`). `None` where the path was measured, and in runs
    /// made before the reason was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_path_absent: Option<String>,
    /// Overdue and still PENDING over the window the measured orders fall
    /// due in (`None` in runs made before it was measured).
    #[serde(default)]
    pub overdue: Option<OverdueTrend>,
    /// CPU over the arrival window (warm-up end to last arrival), machine
    /// and per service (`None` where it cannot be read, or in older runs).
    #[serde(default)]
    pub cpu: Option<CpuUse>,
    /// The steady links `[network]` held, and how faithfully (`None`
    /// over loopback, and in runs made before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<crate::model::records::LinkRecord>>,
    /// The `[hosts]` agents its instances ran on, with their clocks
    /// (`None`: every instance on this host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<crate::model::records::HostRecord>>,
    /// The `[backlog]` the strategy held while it ran, and its restarts.
    #[serde(default)]
    pub backlog: Option<crate::model::records::BacklogRecord>,
    /// The `[storm]` and its drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storm: Option<crate::model::records::StormRecord>,
    /// With faults: the missed cancels, by the fault in effect during each
    /// lost order's life (a last row for losses no fault explains).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_by_fault: Vec<FaultLoss>,
    /// `+outbox`: the outbox's length over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox: Option<crate::model::records::OutboxRecord>,
    pub cost: Cost,
    pub generator: GeneratorHealth,
    /// Worker processes that died without being asked, and restarts.
    #[serde(default)]
    pub worker_events: Vec<WorkerEvent>,
    /// Everything that makes a figure of this row less than it reads, in
    /// plain words; reports print them in the row.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The scenario's faults as they happened.
    #[serde(default)]
    pub faults: Vec<FaultRecord>,
    /// Why the strategy's teardown failed, if it did (its queues or keys may
    /// be left behind; the measurements stand).
    #[serde(default)]
    pub teardown_error: Option<String>,
    /// The scenario's `[before-each-strategy]` command as it ran before
    /// this strategy (`None` when the scenario has none, or the strategy
    /// was skipped before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_strategy: Option<crate::model::records::HookRecord>,
    pub capabilities: Option<Capabilities>,
    pub instances: u32,
    /// The configured timeouts, next to every latency.
    pub timeouts: String,
    pub drain_ms: u64,
    /// Wall-clock seconds this strategy's run took.
    pub elapsed_s: f64,
    /// With `--repeat N`: every figure's median, min and max over the
    /// repetitions (`None` for a single run).
    #[serde(default)]
    pub repeats: Option<Repeats>,
    /// The probes and recorders that ran on the strategy's path (`None`
    /// in runs made before `[measure]` existed, which read the server's
    /// row counts in every canceller transaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<crate::scenario::Measure>,
}

impl Summary {
    /// CPU per cancel with one scope, every service plus the workers, by
    /// service: `workers` is the strategy's own processes over the
    /// measured window per cancel made in it (`cost.cpu_us_per_cancel`);
    /// each service (PostgreSQL, RabbitMQ, Redis, ...) is its cores over
    /// the arrival window (`cpu`) per cancel of an order created in that
    /// window (`lateness_us.count`), the same length of steady load. The
    /// harness (load generator and checker) is left out: it does the same
    /// work for every strategy. `None` where either part is missing.
    pub fn cpu_us_per_cancel_by_service(&self) -> Option<BTreeMap<String, f64>> {
        let workers = self.cost.cpu_us_per_cancel?;
        let cpu = self.cpu.as_ref().filter(|c| !c.by_service.is_empty())?;
        if self.lateness_us.count == 0 {
            return None;
        }
        let per_cancel = cpu.wall_s * 1e6 / self.lateness_us.count as f64;
        let mut by: BTreeMap<String, f64> = cpu
            .by_service
            .iter()
            .filter(|(name, _)| name.as_str() != crate::model::cpu::HARNESS_SERVICE)
            .map(|(name, cores)| (name.clone(), cores * per_cancel))
            .collect();
        by.insert("workers".into(), workers);
        Some(by)
    }

    /// Each repetition's summary, read from the strategy's folder `dir`
    /// (its `repeats.folders`); the summary itself where it has none. A
    /// repetition that cannot be read is left out (the caller compares the
    /// count).
    pub fn repetitions(&self, dir: &Path) -> Vec<Summary> {
        match &self.repeats {
            Some(r) => r
                .folders
                .iter()
                .filter_map(|f| Summary::read(&dir.join(f)).ok())
                .collect(),
            None => vec![self.clone()],
        }
    }

    /// CPU per cancel with the one scope over repetitions `reps`, the
    /// services `in_scope` keeps (see [`CpuSpread::of`]).
    pub fn cpu_spread(reps: &[Summary], in_scope: impl Fn(&str) -> bool) -> Option<CpuSpread> {
        CpuSpread::of(
            reps.iter()
                .map(Summary::cpu_us_per_cancel_by_service)
                .collect(),
            in_scope,
        )
    }

    /// The sum of [`Summary::cpu_us_per_cancel_by_service`].
    pub fn cpu_all_us_per_cancel(&self) -> Option<f64> {
        self.cpu_us_per_cancel_by_service()
            .map(|by| by.values().sum())
    }

    /// A row for a strategy that did not run, with the reason.
    pub fn not_run(
        strategy: Variant,
        status: Status,
        reason: String,
        database: DatabaseInfo,
    ) -> Summary {
        Summary {
            strategy,
            status,
            reason: Some(reason),
            database,
            orders: OrderCounts::default(),
            lateness_us: LatenessStats::default(),
            anomalies: Anomalies::default(),
            anomaly_examples: AnomalyExamples::default(),
            cancelled_by: BTreeMap::new(),
            payments: BTreeMap::new(),
            releases: 0,
            lateness_over_time: Vec::new(),
            lateness_by_timeout: Vec::new(),
            committed_lateness_us: None,
            commit_gap_us: None,
            censored_lateness_us: None,
            schedule_path_us: None,
            schedule_path_absent: None,
            overdue: None,
            cpu: None,
            network: None,
            hosts: None,
            backlog: None,
            storm: None,
            missed_by_fault: Vec::new(),
            outbox: None,
            cost: Cost::default(),
            generator: GeneratorHealth::default(),
            worker_events: Vec::new(),
            warnings: Vec::new(),
            faults: Vec::new(),
            teardown_error: None,
            before_strategy: None,
            capabilities: None,
            instances: 0,
            timeouts: String::new(),
            drain_ms: 0,
            elapsed_s: 0.0,
            repeats: None,
            measure: None,
        }
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("summary.json");
        std::fs::write(&path, crate::model::schema::versioned_json(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    pub fn read(dir: &Path) -> Result<Summary> {
        let path = dir.join("summary.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut summary: Summary =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        summary.derive_cpu_all(dir);
        Ok(summary)
    }

    /// Runs made before `cpu_all_us_per_cancel` existed hold its parts in
    /// each repetition's summary: its spread is computed from them once
    /// read, and named in `repeats.derived` (it is in no JSON file, so
    /// nothing links it as a key).
    fn derive_cpu_all(&mut self, dir: &Path) {
        const KEY: &str = "cpu_all_us_per_cancel";
        if self
            .repeats
            .as_ref()
            .is_none_or(|r| r.figures.contains_key(KEY))
        {
            return;
        }
        let reps = self.repetitions(dir);
        if let Some(cpu) = Summary::cpu_spread(&reps, |_| true) {
            let r = self.repeats.as_mut().expect("checked above");
            r.figures.insert(KEY.into(), cpu.sum);
            r.derived.push(KEY.into());
        }
    }
}
