//! What happened during a strategy's run: the generator's health, the
//! faults as they happened, each worker process's report and the events of
//! workers that died.

use super::lateness::LatenessStats;
use crate::scenario::{Fault, FaultKind};
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
    /// `schedule` calls that failed (each retry's failure counts).
    pub schedule_errors: u64,
    /// Failed schedules taken back into the retry buffer.
    #[serde(default)]
    pub schedules_retried: u64,
    /// Schedules given up on (the retry buffer was full, or
    /// `schedule-retry.give-up-after` passed): those orders reach the
    /// strategy never, so only a fallback cancels them.
    #[serde(default)]
    pub schedules_dropped: u64,
    /// A process that died: schedules sent to it that its last flush
    /// neither reported made nor dropped (an upper bound on those lost
    /// with it; the ones it made in its last second count too).
    #[serde(default)]
    pub schedules_lost_with_process: u64,
    /// `+outbox`: schedules the relay made (rows it deleted), and schedule
    /// calls it saw fail (retried after the row's lease).
    #[serde(default)]
    pub outbox_relayed: u64,
    #[serde(default)]
    pub outbox_failed: u64,
    /// User + system CPU time of the process over the measured window, ms
    /// (from getrusage, µs resolution truncated to ms).
    pub cpu_ms: u64,
    /// Peak resident set size (VmHWM on Linux, `ru_maxrss` elsewhere), KiB.
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
    /// Its part among the instances as of this report (db-timer's leader
    /// or standby; `peer` for strategies whose instances work alike).
    #[serde(default)]
    pub role: strategies::InstanceRole,
    /// CPU the process spent building and encoding its flushes to the
    /// harness over the measured window, µs (part of the measurement's
    /// own cost).
    #[serde(default)]
    pub flush_us: u64,
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
    /// Checkouts rolled back after writing the order (`checkout-abort-ratio`).
    #[serde(default)]
    pub rolled_back: u64,
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

/// The scenario's `[before-each-strategy]` command as it ran before one
/// strategy's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRecord {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The folder it ran in (delaybench's own).
    pub cwd: String,
    /// When it started (local time, RFC 3339).
    pub started_at: String,
    /// How long it ran, until it exited, failed to start or was killed.
    pub duration_ms: u64,
    /// How it ended (`exit status: 0`); `None` when it did not start or
    /// was killed at its timeout.
    pub exit_status: Option<String>,
    /// Why the strategy did not run after it, if it failed.
    pub error: Option<String>,
    /// Where its output went, relative to the strategy's folder.
    pub stdout_log: String,
    pub stderr_log: String,
}

impl HookRecord {
    /// The record in a few words, e.g. ``before the strategy: `x` ran in 23.1 s (exit status: 0)``.
    pub fn describe(&self) -> String {
        format!(
            "before the strategy: `{}` ran in {:.1} s ({}){}",
            self.command.join(" "),
            self.duration_ms as f64 / 1000.0,
            self.exit_status.as_deref().unwrap_or("no exit status"),
            self.error
                .as_ref()
                .map(|e| format!(", FAILED: {e}"))
                .unwrap_or_default()
        )
    }
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
    /// The fault as the scenario gave it, in a few words.
    #[serde(default)]
    pub label: String,
    /// When the fault took effect and when it ended (a pause's SIGCONT, a
    /// partition healed); the same instant for an instantaneous one.
    #[serde(default)]
    pub window_ms: Option<(u64, u64)>,
    /// What it did, in words: sessions terminated, connections dropped,
    /// crashes that happened.
    #[serde(default)]
    pub detail: Option<String>,
    /// `pause-instance`: cancel attempts absorbed as already cancelled
    /// from the pause until shortly after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates_absorbed: Option<u64>,
    /// Whether it reached the part of this strategy it was aimed at (read
    /// it with [`FaultRecord::reach`], which also knows older records).
    #[serde(default)]
    pub reach: FaultReach,
}

/// Whether a fault hit what it was aimed at, for one strategy. Reports
/// print `n/a` for a fault that does not apply, never "survived", and name
/// a fault that hit something else than its target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "why", rename_all = "kebab-case")]
pub enum FaultReach {
    /// It acted on what it was aimed at (or was never aimed at a part).
    #[default]
    Hit,
    /// It cannot touch this strategy: a link its instances do not use, a
    /// crash point its path does not have, a service it does not need.
    NotApplicable(String),
    /// It acted, but not on the part that matters: a standby instead of
    /// the leader, a Redis master that held none of the strategy's shards.
    /// Losses while it was in effect are still put down to it.
    MissedTarget(String),
}

impl FaultReach {
    /// The short word tables print: `hit`, `n/a`, `missed target`.
    pub fn word(&self) -> &'static str {
        match self {
            FaultReach::Hit => "hit",
            FaultReach::NotApplicable(_) => "n/a",
            FaultReach::MissedTarget(_) => "missed target",
        }
    }

    /// Why it did not hit, where it did not.
    pub fn why(&self) -> Option<&str> {
        match self {
            FaultReach::Hit => None,
            FaultReach::NotApplicable(why) | FaultReach::MissedTarget(why) => Some(why),
        }
    }
}

impl FaultRecord {
    /// A record of `fault`, not yet injected.
    pub fn planned(fault: &Fault) -> FaultRecord {
        FaultRecord {
            kind: fault.kind,
            instance: fault.instance(),
            planned_at_ms: fault.at.as_millis() as u64,
            killed_at_ms: None,
            killed_pid: None,
            restarted_at_ms: None,
            restarted_pid: None,
            // Reports and summary.json never hold a password.
            command: redact_command(&fault.command),
            exit_status: None,
            finished_at_ms: None,
            error: None,
            label: fault.label(),
            window_ms: None,
            detail: None,
            duplicates_absorbed: None,
            reach: FaultReach::Hit,
        }
    }
}

/// `command` with every URL's password in its words replaced by `***`.
pub fn redact_command(command: &[String]) -> Vec<String> {
    command
        .iter()
        .map(|a| strategies::redact::text(a))
        .collect()
}

impl FaultRecord {
    /// Whether the fault acted on this strategy's run: not one that does
    /// not apply to it, nor a kill of an instance already down, nor a
    /// crash or pause whose point was never reached.
    pub fn took_effect(&self) -> bool {
        !matches!(self.reach(), FaultReach::NotApplicable(_))
            && match self.kind {
                FaultKind::KillInstance => self.killed_pid.is_some(),
                // A command that could not run, or failed, did not act.
                FaultKind::RunCommand => self.error.is_none(),
                _ => self.window_ms.is_some(),
            }
    }

    /// Whether it reached its target. Records written before `reach`
    /// existed said "not applicable: why" in `detail`.
    pub fn reach(&self) -> FaultReach {
        match (&self.reach, self.detail.as_deref()) {
            (FaultReach::Hit, Some(d)) if d.starts_with("not applicable") => {
                FaultReach::NotApplicable(
                    d.trim_start_matches("not applicable")
                        .trim_start_matches(':')
                        .trim()
                        .to_string(),
                )
            }
            (reach, _) => reach.clone(),
        }
    }

    /// Marks it as not touching this strategy, `why` in plain words.
    pub fn not_applicable(&mut self, why: String) {
        self.detail = Some(format!("not applicable: {why}"));
        self.reach = FaultReach::NotApplicable(why);
    }

    /// When the fault was in effect, ms after the first order: its window
    /// where recorded, a kill until the restart (or `run_end_ms`), a
    /// command while it ran, otherwise the planned instant.
    pub fn span_ms(&self, run_end_ms: u64) -> (u64, u64) {
        if let Some(window) = self.window_ms {
            return window;
        }
        match self.kind {
            FaultKind::KillInstance => {
                let from = self.killed_at_ms.unwrap_or(self.planned_at_ms);
                (from, self.restarted_at_ms.unwrap_or(run_end_ms))
            }
            FaultKind::RunCommand => (
                self.planned_at_ms,
                self.finished_at_ms.unwrap_or(self.planned_at_ms),
            ),
            _ => (self.planned_at_ms, self.planned_at_ms),
        }
    }
}

/// Missed cancels put down to one fault, to several at once, or to none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultLoss {
    /// The fault's position in the scenario's `[[faults]]` when exactly one
    /// was in effect during the lost orders' lives.
    pub fault: Option<usize>,
    /// When several were (the row cannot tell which): their positions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub several: Vec<usize>,
    pub label: String,
    pub missed: u64,
}

/// After its deadline, how long an order's cancel is still the strategy's
/// business (a claim in progress, a retry) when attributing a loss.
const LOSS_SLACK_MS: u64 = 1_000;

/// Attributes each missed order (`(created, deadline)`, ms after the first
/// order) to the faults in effect during its life, from creation to its
/// deadline plus a second. One fault: that fault's loss. Several: a row of
/// their own, since the run cannot tell which one lost it (space the faults
/// further apart than an order lives to avoid it). None: a loss the faults
/// do not explain, which a correct strategy should never have.
pub fn missed_by_fault(
    missed: &[(u64, u64)],
    faults: &[FaultRecord],
    run_end_ms: u64,
) -> Vec<FaultLoss> {
    // A fault that never acted explains nothing.
    let spans: Vec<Option<(u64, u64)>> = faults
        .iter()
        .map(|f| f.took_effect().then(|| f.span_ms(run_end_ms)))
        .collect();
    let mut by_cause: BTreeMap<Vec<usize>, u64> = BTreeMap::new();
    for &(created, deadline) in missed {
        let life_end = deadline + LOSS_SLACK_MS;
        let in_effect: Vec<usize> = spans
            .iter()
            .enumerate()
            .filter_map(|(i, span)| span.map(|span| (i, span)))
            .filter(|(_, (from, to))| *from <= life_end && *to >= created)
            .map(|(i, _)| i)
            .collect();
        *by_cause.entry(in_effect).or_default() += 1;
    }
    let mut losses: Vec<FaultLoss> = faults
        .iter()
        .enumerate()
        .map(|(i, f)| FaultLoss {
            fault: Some(i),
            several: Vec::new(),
            label: f.label.clone(),
            missed: by_cause.get(&vec![i]).copied().unwrap_or(0),
        })
        .collect();
    for (cause, missed) in by_cause.into_iter().filter(|(c, _)| c.len() != 1) {
        losses.push(FaultLoss {
            fault: None,
            label: if cause.is_empty() {
                "no fault in effect".into()
            } else {
                format!(
                    "several faults in effect ({})",
                    cause
                        .iter()
                        .map(|i| format!("#{}", i + 1))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            several: cause,
            missed,
        });
    }
    losses
}

/// One line per fault for the reports.
pub fn describe_fault(record: &FaultRecord) -> String {
    let text = describe_action(record);
    let reach = record.reach();
    match (&reach, reach.why()) {
        // The detail already says "not applicable: why" where it is kept.
        (FaultReach::NotApplicable(_), Some(why)) if !text.contains("not applicable") => {
            format!("{text}; not applicable: {why}")
        }
        (FaultReach::MissedTarget(_), Some(why)) => {
            format!("{text}; **missed its target**: {why}")
        }
        _ => text,
    }
}

/// What the fault did, in words (see [`describe_fault`]).
fn describe_action(record: &FaultRecord) -> String {
    let secs = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
    if !matches!(record.kind, FaultKind::RunCommand | FaultKind::KillInstance) {
        let mut text = record.label.clone();
        if let Some((from, to)) = record.window_ms {
            text += &if from == to {
                format!(" (at {})", secs(from))
            } else {
                format!(" ({} to {})", secs(from), secs(to))
            };
        }
        if let Some(detail) = &record.detail {
            text += &format!(": {detail}");
        }
        if let Some(e) = &record.error {
            text += &format!("; error: {e}");
        }
        return text;
    }
    if record.kind == FaultKind::RunCommand {
        let mut text = format!(
            "ran `{}` at {}",
            record.command.join(" "),
            secs(record.planned_at_ms)
        );
        if let (Some(end), Some(status)) = (record.finished_at_ms, &record.exit_status) {
            text += &format!(", {status} at {}", secs(end));
        }
        if let Some((_, until)) = record.window_ms {
            text += &format!("; counted in effect until {}", secs(until));
        }
        if let Some(detail) = &record.detail {
            text += &format!("; {detail}");
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

/// `+outbox`: how long the outbox got, from the harness's count of its
/// rows every 250 ms. A row stays until its schedule went through, so the
/// length is the schedules not yet made: it grows while the broker or
/// Redis is away and drains when it is back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutboxRecord {
    /// `(ms after the first order, rows)`.
    pub samples: Vec<(u64, u64)>,
    pub max_rows: u64,
    /// When it was longest, ms after the first order.
    pub max_at_ms: u64,
    /// Rows left when the run stopped (schedules never made); `None` if the
    /// count failed.
    pub left_at_end: Option<u64>,
}

impl OutboxRecord {
    pub fn of(samples: Vec<(u64, u64)>, left_at_end: Option<u64>) -> OutboxRecord {
        let (max_at_ms, max_rows) = samples
            .iter()
            .copied()
            .max_by_key(|(at, rows)| (*rows, std::cmp::Reverse(*at)))
            .unwrap_or_default();
        OutboxRecord {
            samples,
            max_rows,
            max_at_ms,
            left_at_end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Fault;
    use std::time::Duration;

    #[test]
    fn records_written_before_reach_existed_read_their_detail() {
        let mut f = fault(FaultKind::Partition, 1, 1);
        f.detail = Some("not applicable: this strategy's instances do not use redis".into());
        assert_eq!(
            f.reach(),
            FaultReach::NotApplicable("this strategy's instances do not use redis".into())
        );
        assert!(!f.took_effect());
        let mut g = fault(FaultKind::PauseInstance, 1, 1);
        g.reach = FaultReach::MissedTarget("instance 0 was a standby".into());
        // It acted (on the standby): losses meanwhile are still its own.
        assert!(g.took_effect());
        assert!(describe_fault(&g).contains("**missed its target**: instance 0 was a standby"));
        g.not_applicable("no Redis here".into());
        assert_eq!(g.reach().word(), "n/a");
    }

    fn fault(kind: FaultKind, at_s: u64, lasts_s: u64) -> FaultRecord {
        let mut f = FaultRecord::planned(&Fault {
            kind,
            at: Duration::from_secs(at_s),
            instance: None,
            restart_after: None,
            command: vec![],
            target: None,
            node: None,
            lasts: None,
            add: None,
            point: None,
            times: 1,
        });
        f.window_ms = Some((at_s * 1000, (at_s + lasts_s) * 1000));
        f
    }

    #[test]
    fn a_loss_goes_to_the_fault_in_effect_during_the_orders_life() {
        let faults = [
            fault(FaultKind::Partition, 3, 4),
            fault(FaultKind::PauseInstance, 10, 3),
        ];
        let missed = [
            (4_000, 6_000),   // created during the partition
            (1_500, 3_500),   // due during it
            (9_000, 11_000),  // during the pause
            (20_000, 22_000), // nothing in effect
        ];
        let losses = missed_by_fault(&missed, &faults, 30_000);
        let counts: Vec<(Option<usize>, u64)> =
            losses.iter().map(|l| (l.fault, l.missed)).collect();
        assert_eq!(counts, vec![(Some(0), 2), (Some(1), 1), (None, 1)]);
        assert_eq!(losses[2].label, "no fault in effect");
    }

    #[test]
    fn a_fault_that_did_not_act_explains_no_loss() {
        let mut faults = [
            fault(FaultKind::Partition, 3, 4),
            fault(FaultKind::Partition, 3, 4),
        ];
        faults[0].window_ms = None;
        faults[0].detail = Some("not applicable: no Redis here".into());
        let losses = missed_by_fault(&[(4_000, 6_000)], &faults, 30_000);
        assert_eq!((losses[0].missed, losses[1].missed), (0, 1));
        assert_eq!(losses.len(), 2);
    }

    #[test]
    fn an_order_spanning_two_faults_is_put_down_to_neither() {
        let faults = [
            fault(FaultKind::Partition, 3, 1),
            fault(FaultKind::KillDbConnections, 5, 0),
        ];
        let losses = missed_by_fault(&[(3_500, 5_500), (6_000, 8_000)], &faults, 30_000);
        assert_eq!((losses[0].missed, losses[1].missed), (0, 0));
        let row = |several: &[usize]| {
            losses
                .iter()
                .find(|l| l.fault.is_none() && l.several == several)
                .map(|l| (l.label.clone(), l.missed))
        };
        assert_eq!(
            row(&[0, 1]),
            Some(("several faults in effect (#1, #2)".to_string(), 1))
        );
        assert_eq!(row(&[]), Some(("no fault in effect".to_string(), 1)));
        assert_eq!(losses.len(), 4);
    }
}
