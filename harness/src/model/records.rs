//! What happened during a strategy's run: the generator's health, the
//! faults as they happened, each worker process's report and the events of
//! workers that died.

use super::summary::LatenessStats;
use crate::scenario::FaultKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use strategies::{StoreStats, StrategyCounters};

/// What one worker process reported: at its clean stop, or, if it died,
/// in its last flush (at most a second before its death; `complete` false).
/// `measured` and `counters_measured` count only what happened after the
/// warm-up ended.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerReport {
    pub instance: u32,
    pub pid: u32,
    pub total: StoreStats,
    pub measured: StoreStats,
    /// Strategy counters since the process started.
    pub counters: StrategyCounters,
    /// Strategy counters after the warm-up (the cost window).
    #[serde(default)]
    pub counters_measured: StrategyCounters,
    pub schedule_errors: u64,
    /// User + system CPU time of the process over the measured window, ms
    /// (from /proc/self/stat, 10 ms resolution).
    pub cpu_ms: u64,
    /// Peak resident set size (VmHWM), KiB.
    pub peak_rss_kib: u64,
    pub run_error: Option<String>,
    /// The counters are the process's final ones (it stopped cleanly);
    /// false: they are its last flush before it died or was killed.
    #[serde(default = "yes")]
    pub complete: bool,
    /// How the process ended: `stopped`, `killed by the harness ...`,
    /// `died: signal: 9 (SIGKILL)`.
    #[serde(default)]
    pub end: Option<String>,
}

fn yes() -> bool {
    true
}

/// Something that happened to a worker process that the harness did not
/// plan: a death from outside, and what the pool did about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerEvent {
    /// ms after the first order.
    pub at_ms: u64,
    pub instance: u32,
    pub pid: u32,
    pub kind: WorkerEventKind,
    /// Exit status, or what the restart did.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkerEventKind {
    /// The process died without being asked (`kill -9`, OOM killer, panic).
    Died,
    /// `restart-dead-instances` started a fresh process.
    Restarted,
    RestartFailed,
}

impl WorkerEvent {
    /// One line for the reports.
    pub fn describe(&self) -> String {
        let at = format!("{:.1} s", self.at_ms as f64 / 1000.0);
        match self.kind {
            WorkerEventKind::Died => format!(
                "instance {} (pid {}) **died** at {at} ({}); its measurements up to its last flush are kept",
                self.instance, self.pid, self.detail
            ),
            WorkerEventKind::Restarted => format!(
                "instance {} restarted as pid {} at {at} ({})",
                self.instance, self.pid, self.detail
            ),
            WorkerEventKind::RestartFailed => format!(
                "instance {} could not be restarted at {at}: {}",
                self.instance, self.detail
            ),
        }
    }
}

/// What the driver did, and how well it kept to the schedule.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GeneratorHealth {
    pub orders_planned: u64,
    pub created: u64,
    /// Refused for lack of stock (not an anomaly; reported).
    pub refused: u64,
    pub create_errors: u64,
    /// Created while every canceller instance was down (a fault), so never
    /// scheduled; only a strategy that finds orders by itself cancels them.
    #[serde(default)]
    pub unscheduled: u64,
    pub callbacks_delivered: u64,
    pub payment_outcomes: BTreeMap<String, u64>,
    pub payment_errors: u64,
    /// Intended time of each event until its transaction committed, us.
    pub lag_us_p50: u64,
    pub lag_us_p99: u64,
    pub lag_us_max: u64,
    /// The same lag as a distribution, with its sample count.
    #[serde(default)]
    pub lag_us: LatenessStats,
    /// The lag histogram itself, written beside the summary as
    /// `generator_lag.hgrm` (not part of the JSON).
    #[serde(skip)]
    pub lag_histogram: Option<hdrhistogram::Histogram<u64>>,
    /// Connections in the harness's own pool for orders and callbacks.
    #[serde(default)]
    pub pool_connections: u32,
    /// Set when the harness fell behind (p99 lag above the warning threshold).
    pub warning: Option<String>,
    /// First error seen, if any, to make failures diagnosable.
    pub first_error: Option<String>,
}

/// One fault as it happened. Times are ms after the first order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRecord {
    pub kind: FaultKind,
    pub instance: u32,
    pub planned_at_ms: u64,
    /// When the process was dead (`None` if it was already down).
    pub killed_at_ms: Option<u64>,
    pub killed_pid: Option<u32>,
    /// When the fresh process was ready, if the scenario restarts it.
    pub restarted_at_ms: Option<u64>,
    pub restarted_pid: Option<u32>,
    /// `run-command`: the command, and how it ended.
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub exit_status: Option<String>,
    #[serde(default)]
    pub finished_at_ms: Option<u64>,
    /// What went wrong injecting it, if anything.
    pub error: Option<String>,
}

/// One line per fault for the reports.
pub fn describe_fault(record: &FaultRecord) -> String {
    let secs = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
    if record.kind == FaultKind::RunCommand {
        let mut text = format!(
            "ran `{}` at {}",
            record.command.join(" "),
            secs(record.planned_at_ms)
        );
        if let (Some(end), Some(status)) = (record.finished_at_ms, &record.exit_status) {
            text += &format!(", {status} at {}", secs(end));
        }
        if let Some(e) = &record.error {
            text += &format!("; error: {e}");
        }
        return text;
    }
    let mut text = match (record.killed_at_ms, record.killed_pid) {
        (Some(at), Some(pid)) => format!(
            "instance {} (pid {pid}) killed with SIGKILL at {} (planned {})",
            record.instance,
            secs(at),
            secs(record.planned_at_ms)
        ),
        _ => format!(
            "instance {} was already down at {}",
            record.instance,
            secs(record.planned_at_ms)
        ),
    };
    match (record.restarted_at_ms, record.restarted_pid) {
        (Some(at), Some(pid)) => {
            text += &format!(", restarted as pid {pid}, ready at {}", secs(at))
        }
        _ => text += ", not restarted",
    }
    if let Some(e) = &record.error {
        text += &format!("; error: {e}");
    }
    text
}

/// A run's `[backlog]`: how the pile of far-future orders got in, what
/// holding it cost each backend, and how long each restart with it in
/// place took to cancel again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BacklogRecord {
    pub pending: u64,
    /// Seconds of the multi-row INSERTs into the database.
    pub insert_s: f64,
    /// Seconds from the first backlog `schedule` sent to the instances
    /// until every one had returned (the strategy's own scheduling path).
    pub handoff_s: f64,
    /// Backlog schedules that failed (from the workers' schedule errors).
    pub handoff_errors: u64,
    /// What the backends held once the hand-off ended.
    pub held: Holdings,
    /// Instance 0, then each service the strategy uses, restarted in turn
    /// once the measured run was checked.
    pub recovery: Vec<Recovery>,
}

/// What the backends held at one moment; `None` where the strategy does
/// not use the backend or it could not be read (then `notes` says why).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Holdings {
    /// Redis `used_memory` (server-wide).
    pub redis_used_memory: Option<u64>,
    /// Members of the strategy's ZSETs (delay and processing).
    pub redis_members: Option<u64>,
    /// The broker's Erlang memory total (node-wide).
    pub broker_memory: Option<u64>,
    /// Messages in the strategy's queues.
    pub queued_messages: Option<u64>,
    /// Messages in the delayed-message store (every exchange of the node).
    pub delayed_stored: Option<u64>,
    /// Resident memory of each instance process, KiB.
    pub worker_rss_kib: Vec<u64>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One restart with the backlog in place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// `instance 0`, `redis`, `rabbitmq`.
    pub what: String,
    /// How it was restarted (the command, or kill and start).
    pub how: String,
    /// Seconds the restart itself took (the command, or until the fresh
    /// process said it was ready).
    pub restart_s: f64,
    /// Seconds from the restart's start until the strategy held its
    /// backlog again (a wheel: every instance reloaded it) and a fresh,
    /// already-due order had been cancelled; `None`: not within the limit.
    pub cancelling_again_s: Option<f64>,
    /// Fresh orders created to probe, and how many of them were cancelled.
    pub probes: u64,
    pub probes_cancelled: u64,
    /// What the backends held after the restart, to compare with before.
    pub held_after: Holdings,
    /// What went wrong, in words (a failed command, a lost backlog, ...).
    #[serde(default)]
    pub notes: Vec<String>,
}
