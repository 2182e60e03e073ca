//! What happened during a strategy's run: the generator's health, each
//! worker process's report, the events of workers that died, the hook
//! before it, the backlog and the outbox. The faults as they happened are
//! recorded beside their kinds (`faults/record.rs`).

use super::cpu::CpuUse;
use super::lateness::LatenessStats;
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

/// `command` with every URL's password in its words replaced by `***`.
pub fn redact_command(command: &[String]) -> Vec<String> {
    command
        .iter()
        .map(|a| strategies::redact::text(a))
        .collect()
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
    /// What they held just before the backlog went in (the instances
    /// already running); absent in runs from before it was read, whose
    /// backlog went in before the instances started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_before: Option<Holdings>,
    /// Instance 0, then each service the strategy uses, restarted in turn
    /// once the measured run was checked.
    pub recovery: Vec<Recovery>,
}

/// A `[storm]`: N orders due in one instant during the load, and what
/// draining them took (see `storm::analyse`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StormRecord {
    pub orders: u64,
    /// The instant, ms after the load's first order (the scenario's `at`,
    /// or earlier when the preparation overran its lead).
    pub due_ms: u64,
    /// The scenario's `at`, ms: where the instant was meant to fall.
    pub planned_ms: u64,
    /// Seconds of the multi-row INSERTs into the database.
    pub insert_s: f64,
    /// Seconds from the first storm `schedule` until every one returned.
    pub handoff_s: f64,
    pub handoff_errors: u64,
    /// What the backends held before the storm (once the hand-off ended).
    pub held: Holdings,
    /// What they held just before the storm's orders went in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_before: Option<Holdings>,
    /// Storm orders cancelled, and those still PENDING when the watch
    /// gave up (0 when it drained).
    pub cancelled: u64,
    pub pending_left: u64,
    /// Seconds from the instant to the last storm order's cancel; `None`
    /// when not all were cancelled.
    pub drain_s: Option<f64>,
    /// Storm orders cancelled per second of the drain.
    pub cancels_per_s: Option<f64>,
    /// The storm orders' lateness (each cancel after the instant).
    pub lateness_us: LatenessStats,
    /// CPU over the regular load before the instant, and over the drain.
    pub cpu_before: Option<CpuUse>,
    pub cpu_during: Option<CpuUse>,
    /// Core-seconds the drain used beyond the regular load's rate before
    /// it, every service and the workers summed.
    pub storm_core_s: Option<f64>,
    /// The regular measured orders' lateness by deadline: before the
    /// instant, during the drain, after it.
    pub regular_before_us: LatenessStats,
    pub regular_during_us: LatenessStats,
    pub regular_after_us: LatenessStats,
    /// Seconds after the instant from which every second of regular
    /// deadlines had its p99 back within twice the p99 before plus 5 ms;
    /// `None` when it never was within the run.
    pub recovery_s: Option<f64>,
}

impl StormRecord {
    /// Whether writing and handing off the storm took longer than its lead,
    /// so its instant fell earlier than planned, during the hand-off: its
    /// drain then includes part of the hand-off.
    pub fn overran_lead(&self) -> bool {
        self.due_ms + 500 < self.planned_ms
    }

    /// The storm's own CPU per cancel, µs (`storm_core_s` over the cancels).
    pub fn us_per_cancel(&self) -> Option<f64> {
        (self.cancelled > 0).then_some(self.storm_core_s? * 1e6 / self.cancelled as f64)
    }

    /// The storm's own CPU per cancel by service, µs, largest first
    /// (services that used under 1 µs per cancel left out): where
    /// `us_per_cancel` goes.
    pub fn us_per_cancel_by_service(&self) -> Vec<(String, f64)> {
        let (Some(before), Some(during)) = (&self.cpu_before, &self.cpu_during) else {
            return Vec::new();
        };
        if self.cancelled == 0 {
            return Vec::new();
        }
        let mut split: Vec<(String, f64)> = during
            .beyond(before)
            .into_iter()
            .map(|(service, core_s)| (service, core_s * 1e6 / self.cancelled as f64))
            .filter(|(_, us)| *us >= 1.0)
            .collect();
        split.sort_by(|a, b| b.1.total_cmp(&a.1));
        split
    }

    /// Storm cancels per core-second of the storm's own CPU.
    pub fn cancels_per_core_s(&self) -> Option<f64> {
        let core_s = self.storm_core_s.filter(|c| *c > 0.0)?;
        Some(self.cancelled as f64 / core_s)
    }

    /// Bytes per storm order held before the instant.
    pub fn bytes_per_order(&self) -> Option<BytesPerOrder> {
        let before = self.held_before.as_ref().filter(|_| self.orders > 0)?;
        Some(self.held.bytes_per_order(before, self.orders))
    }
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
    /// The namespace's tables and their indexes in the database, bytes
    /// (see `backlog::database_bytes` for what each kind counts). Absent in
    /// runs from before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_bytes: Option<u64>,
    #[serde(default)]
    pub notes: Vec<String>,
}

impl Holdings {
    /// What holding each of `orders` cost every backend: the growth from
    /// `before` to `self` over `orders`, in bytes (see [`BytesPerOrder`]).
    pub fn bytes_per_order(&self, before: &Holdings, orders: u64) -> BytesPerOrder {
        let per = |now: Option<u64>, then: Option<u64>| match (now, then) {
            (Some(a), Some(b)) if orders > 0 => Some((a as f64 - b as f64) / orders as f64),
            _ => None,
        };
        // Comparable only when the same instances were read both times.
        let workers = |h: &Holdings| {
            (!h.worker_rss_kib.is_empty() && h.worker_rss_kib.len() == before.worker_rss_kib.len())
                .then(|| h.worker_rss_kib.iter().sum::<u64>() * 1024)
        };
        BytesPerOrder {
            workers: per(workers(self), workers(before)),
            redis: per(self.redis_used_memory, before.redis_used_memory),
            broker: per(self.broker_memory, before.broker_memory),
            database: per(self.database_bytes, before.database_bytes),
        }
    }
}

/// Bytes per pending order, by where they are held: what a reading grew by
/// from just before the orders went in to just after every instance had
/// them, over their number. `None` where the strategy does not use the
/// backend or a reading is missing. Redis and the broker are read
/// server-wide, the workers' resident memory as the allocator keeps it: a
/// negative or tiny figure is what else moved meanwhile.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BytesPerOrder {
    /// Every instance's resident memory, summed: each order is scheduled
    /// on one instance, so this is what one order costs the instance that
    /// holds it.
    pub workers: Option<f64>,
    /// Redis `used_memory`.
    pub redis: Option<f64>,
    /// The broker's memory, the delayed-message store included.
    pub broker: Option<f64>,
    /// The namespace's tables and indexes (see `backlog::database_bytes`).
    pub database: Option<f64>,
}

impl BytesPerOrder {
    /// `(where, bytes)` for each backend that was read, in a fixed order.
    pub fn parts(&self) -> Vec<(&'static str, f64)> {
        [
            ("database", self.database),
            ("workers", self.workers),
            ("Redis", self.redis),
            ("broker", self.broker),
        ]
        .into_iter()
        .filter_map(|(what, v)| v.map(|v| (what, v)))
        .collect()
    }
}

impl BacklogRecord {
    /// Bytes per pending order of the backlog, when it had any and its
    /// holdings were read before it went in.
    pub fn bytes_per_order(&self) -> Option<BytesPerOrder> {
        let before = self.held_before.as_ref().filter(|_| self.pending > 0)?;
        Some(self.held.bytes_per_order(before, self.pending))
    }
}

/// One restart with the backlog in place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// `instances`, `redis`, `rabbitmq`; an unplanned restart of a
    /// service is `redis-sigkill`, `rabbitmq-sigkill`, so each restart of
    /// a step has its own name.
    pub what: String,
    /// Planned (stopped as its operator would: Redis saved first, the
    /// broker's `stop_app`) or unplanned (SIGKILL, nothing saved). Runs
    /// from before it was recorded restarted as planned.
    #[serde(default)]
    pub kind: RestartKind,
    /// How it was restarted (the command, or kill and start).
    pub how: String,
    /// Seconds the restart itself took (the command, or until the fresh
    /// process said it was ready).
    pub restart_s: f64,
    /// Seconds from the restart's start until the strategy held its
    /// backlog again (a wheel: every instance reloaded it) and a fresh,
    /// already-due order had been cancelled, or, when longer, the latest
    /// an order in flight through the restart was cancelled past its
    /// deadline; `None`: not within the limit, or an order in flight was
    /// never cancelled (its schedule was lost).
    pub cancelling_again_s: Option<f64>,
    /// Fresh orders created to probe, and how many of them were cancelled.
    pub probes: u64,
    pub probes_cancelled: u64,
    /// Orders scheduled just before a service's restart, due shortly
    /// after it: what the strategy held through the restart, standing in
    /// for the backlog (due an hour later); absent for the instances'
    /// restart and in runs from before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlight>,
    /// What the backends held after the restart, to compare with before.
    pub held_after: Holdings,
    /// What went wrong, in words (a failed command, a lost backlog, ...).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// How a service went down before its recovery was timed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartKind {
    /// Stopped and started as an operator would, its data saved first.
    #[default]
    Planned,
    /// SIGKILLed, nothing saved, then started again with its configuration.
    Unplanned,
}

impl RestartKind {
    pub fn label(self) -> &'static str {
        match self {
            RestartKind::Planned => "planned",
            RestartKind::Unplanned => "unplanned (SIGKILL, nothing saved)",
        }
    }
}

/// The orders in flight through a service's restart: scheduled (and
/// returned) just before it, due shortly after.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InFlight {
    pub orders: u64,
    /// Each one's deadline, this long after it was created, ms.
    pub due_after_ms: u64,
    /// Cancelled by the end of the watch (the recovery limit).
    pub cancelled: u64,
    /// Of those, cancelled by the fallback scan: the strategy lost them.
    pub by_fallback: u64,
    /// The latest cancel's lateness (cancelled_at - expire_at), ms.
    pub max_late_ms: Option<f64>,
    /// Seconds they were watched for from the restart's start.
    pub watched_s: f64,
}

impl InFlight {
    /// Orders in flight never cancelled: their schedule was lost.
    pub fn lost(&self) -> u64 {
        self.orders.saturating_sub(self.cancelled)
    }
}

impl Recovery {
    /// How it was restarted, in words: the instances' restart as it was
    /// made, a service's as planned or unplanned (its command is in `how`).
    pub fn restart_text(&self) -> String {
        if self.what == "instances" {
            self.how.clone()
        } else {
            self.kind.label().to_string()
        }
    }

    /// Probe orders never cancelled: fresh ones, and those in flight.
    pub fn lost_probes(&self) -> u64 {
        self.probes.saturating_sub(self.probes_cancelled)
            + self.in_flight.as_ref().map_or(0, InFlight::lost)
    }

    /// Cancelling again within the limit, with no probe order lost: a
    /// restart that lost one is no recovery, however fast.
    pub fn recovered(&self) -> bool {
        self.cancelling_again_s.is_some() && self.lost_probes() == 0
    }

    /// What was lost or rescued, in words: `None` when every order in
    /// flight was cancelled by the strategy itself (or none was in flight).
    pub fn loss_text(&self) -> Option<String> {
        let f = self.in_flight.as_ref()?;
        let late = f
            .max_late_ms
            .map(|ms| format!(", the latest {:.1} s late", ms / 1000.0))
            .unwrap_or_default();
        match (f.lost(), f.by_fallback) {
            (0, 0) => None,
            (0, by) => Some(format!(
                "{by} of {} orders in flight cancelled only by the fallback scan{late}",
                f.orders
            )),
            (lost, by) => Some(format!(
                "{lost} of {} orders in flight never cancelled within {:.0} s{}",
                f.orders,
                f.watched_s,
                if by > 0 {
                    format!(" ({by} by the fallback scan{late})")
                } else {
                    String::new()
                }
            )),
        }
    }
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
    /// Rows left when the run stopped; `None` if the count failed. Not all
    /// of them are schedules never made: see the next two.
    pub left_at_end: Option<u64>,
    /// Of those, rows held back from the relays: under a relay's lease
    /// (claimed, and maybe scheduled, by a relay that crashed or failed to
    /// delete them: a killed connection; another relay takes them when the
    /// lease ends), or handed back for a retry after a failed schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_leased: Option<u64>,
    /// Of those, rows whose order was still pending: the ones a lost
    /// schedule would leave uncancelled (the checker counts any such order
    /// past its deadline as missed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_of_pending_orders: Option<u64>,
}

impl OutboxRecord {
    pub fn of(
        samples: Vec<(u64, u64)>,
        left: Option<strategies::store::OutboxLeft>,
    ) -> OutboxRecord {
        let (max_at_ms, max_rows) = samples
            .iter()
            .copied()
            .max_by_key(|(at, rows)| (*rows, std::cmp::Reverse(*at)))
            .unwrap_or_default();
        OutboxRecord {
            samples,
            max_rows,
            max_at_ms,
            left_at_end: left.map(|l| l.rows),
            left_leased: left.map(|l| l.leased),
            left_of_pending_orders: left.map(|l| l.of_pending_orders),
        }
    }
}

/// One steady link a `[network]` run held (`summary.json` `network`): what
/// was asked for, and how faithfully the proxy held it under the run's
/// load. A chunk written `late` after its hold time makes the round trip
/// that much longer than asked (up to twice, one per direction).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkRecord {
    /// `order service` (its database link) or `instances` (the canceller
    /// instances' link).
    pub side: String,
    pub target: crate::faults::Target,
    pub link: crate::proxy::Link,
    /// Chunks held over the whole run (both directions).
    pub chunks: u64,
    /// How much later than its hold time a chunk was written, µs.
    pub late_p50_us: u64,
    pub late_p99_us: u64,
    pub late_max_us: u64,
    /// Bytes relayed, both directions.
    pub bytes: u64,
}

/// Lateness of a proxy's holds below which no link is called slow, µs.
const NOISE_US: u64 = 50;

impl LinkRecord {
    /// When the proxy held so late that the link read slower than asked
    /// for: a median over a quarter of the one-way hold, or a 99th
    /// percentile over the whole round trip. The figures then carry the
    /// proxy's own delay, and the report says so beside them.
    pub fn warning(&self) -> Option<String> {
        let one_way_us = self.link.rtt.as_micros() as u64 / 2;
        // Under 50 µs (the kernel's default timer slack, and about a
        // loopback round trip here) lateness is noise whatever the hold:
        // a 1 µs link held 40 µs late is still a loopback.
        let slow = (self.late_p50_us * 4 > one_way_us && self.late_p50_us > NOISE_US)
            || (self.late_p99_us > self.link.rtt.as_micros() as u64 && self.late_p99_us > NOISE_US);
        (slow && self.chunks > 0).then(|| {
            format!(
                "network proxy late on the {} link to {}: p50 +{} µs, p99 +{} µs past a {} µs \
                 one-way hold (its round trips longer than the {} asked)",
                self.side,
                self.target,
                self.late_p50_us,
                self.late_p99_us,
                one_way_us,
                self.link.label()
            )
        })
    }

    /// `the order service's link to database: rtt 0.5 ms ± 0.05 ms; 41 200
    /// chunks held, written late by p50 61 µs, p99 390 µs, max 2.1 ms`.
    pub fn describe(&self) -> String {
        let whose = match self.side.as_str() {
            "order service" => "the order service's",
            _ => "the instances'",
        };
        format!(
            "{whose} link to {}: {}; {} chunks held ({} bytes), written after their hold by p50 \
             {} µs, p99 {} µs, max {} µs (each round trip runs late by up to twice these)",
            self.target,
            self.link.label(),
            self.chunks,
            self.bytes,
            self.late_p50_us,
            self.late_p99_us,
            self.late_max_us
        )
    }
}

#[cfg(test)]
mod link_tests {
    use super::LinkRecord;
    use crate::faults::Target;
    use crate::proxy::Link;
    use std::time::Duration;

    fn held(rtt_us: u64, p50: u64, p99: u64) -> LinkRecord {
        let link = Link {
            rtt: Duration::from_micros(rtt_us),
            ..Link::LOOPBACK
        };
        LinkRecord {
            side: "instances".into(),
            target: Target::Database,
            link,
            chunks: 1_000,
            late_p50_us: p50,
            late_p99_us: p99,
            late_max_us: p99,
            bytes: 0,
        }
    }

    /// A link is called slow when the proxy's lateness is a real share of
    /// the hold and above the noise; never for lateness a loopback has too.
    #[test]
    fn a_link_is_slow_only_when_the_lateness_matters() {
        assert_eq!(held(500, 35, 200).warning(), None);
        let w = held(500, 80, 300)
            .warning()
            .expect("p50 over a quarter of 250 µs");
        assert!(w.contains("p50 +80 µs") && w.contains("rtt 0.5 ms"), "{w}");
        assert!(
            held(500, 30, 700).warning().is_some(),
            "p99 over the round trip"
        );
        assert_eq!(held(1, 1, 46).warning(), None, "a 1 µs link is a loopback");
        assert!(held(1, 60, 60).warning().is_some());
    }
}

/// How far an agent's clock was from the harness's, as one reading found
/// it (`crate::agent::read_clock`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockReading {
    /// The agent's clock minus the harness's, µs, from the probe with the
    /// shortest round trip: its answer taken as made halfway through.
    pub offset_us: i64,
    /// The bound on that offset's error: half that round trip (the answer
    /// was made somewhere within it), µs.
    pub uncertainty_us: u64,
    /// Probes taken.
    pub samples: u32,
}

/// One `[hosts]` agent of a run (`summary.json` `hosts`): the instances it
/// ran and its clock, read before they started (the correction every
/// stamp they wrote carries) and again when they had stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    pub agent: String,
    pub instances: Vec<u32>,
    /// The generator shard it ran (`[hosts] generator = "agents"`): the
    /// orders whose id mod the agents is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_shard: Option<u32>,
    pub clock_at_start: ClockReading,
    /// `None` when the second reading failed (`clock_error` says why).
    pub clock_at_end: Option<ClockReading>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_error: Option<String>,
}

/// A clock error bound beyond which a row's lateness is flagged, µs.
const CLOCK_WARNING_US: u64 = 1_000;

impl HostRecord {
    /// The most the stamps its processes wrote can be off the harness's
    /// clock after the correction, µs: at the start the first reading's
    /// bound; by the end the second's bound plus how far the offset moved
    /// from the one corrected by (unknown: `None`).
    pub fn stamp_error_us(&self) -> Option<u64> {
        let (start, end) = (self.clock_at_start, self.clock_at_end?);
        let moved = end.offset_us.abs_diff(start.offset_us);
        Some(start.uncertainty_us.max(end.uncertainty_us + moved))
    }

    /// How far apart two of `hosts`' corrected clocks, or one and the
    /// harness's, may be, µs: the two largest stamp errors added (a
    /// lateness subtracts a deadline one wrote from a stamp another wrote).
    /// `None` when one is unknown.
    pub fn clock_tolerance_us(hosts: &[HostRecord]) -> Option<u64> {
        let mut errors = hosts
            .iter()
            .map(HostRecord::stamp_error_us)
            .collect::<Option<Vec<u64>>>()?;
        errors.sort_unstable_by(|a, b| b.cmp(a));
        Some(errors.iter().take(2).sum())
    }

    /// When its instances' stamps may be off by more than a millisecond,
    /// or by an unknown amount.
    pub fn warning(&self) -> Option<String> {
        match self.stamp_error_us() {
            Some(error) if error <= CLOCK_WARNING_US => None,
            Some(error) => Some(format!(
                "instances on the agent at {} stamped with a clock known only within ±{} ms \
                 of this host's (its offset's bound plus how far it moved during the run): \
                 their lateness carries that error",
                self.agent,
                ms(error as i64)
            )),
            None => Some(format!(
                "the agent at {}'s clock was not read again after the run ({}): how far it \
                 moved, and so its instances' lateness error, is unknown",
                self.agent,
                self.clock_error.as_deref().unwrap_or("no reading")
            )),
        }
    }

    /// `the agent at 10.0.0.2:7710 ran instances 0, 2; its clock read
    /// +3.021 ms from this host's (± 0.041 ms) …`.
    pub fn describe(&self) -> String {
        let start = &self.clock_at_start;
        let instances = self
            .instances
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let end = match (&self.clock_at_end, &self.clock_error) {
            (Some(end), _) => format!(
                "; after the run {} ms ± {} ms (moved {} ms)",
                signed_ms(end.offset_us),
                ms(end.uncertainty_us as i64),
                ms(end.offset_us.abs_diff(start.offset_us) as i64)
            ),
            (None, Some(e)) => format!("; not read after the run: {e}"),
            (None, None) => String::new(),
        };
        let shard = match self.generator_shard {
            Some(k) => format!(" and generator shard {k}"),
            None => String::new(),
        };
        format!(
            "the agent at {} ran instance{} {instances}{shard}; its clock read {} ms from this \
             host's (± {} ms: half the shortest round trip of {} probes) as they started, and \
             every stamp they wrote was moved by minus that{end}",
            self.agent,
            if self.instances.len() == 1 { "" } else { "s" },
            signed_ms(start.offset_us),
            ms(start.uncertainty_us as i64),
            start.samples,
        )
    }
}

/// µs as ms with three decimals.
fn ms(us: i64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// µs as ms with three decimals and its sign.
fn signed_ms(us: i64) -> String {
    format!("{:+.3}", us as f64 / 1000.0)
}

#[cfg(test)]
mod host_tests {
    use super::{ClockReading, HostRecord};

    fn host(start: (i64, u64), end: Option<(i64, u64)>) -> HostRecord {
        let reading = |(offset_us, uncertainty_us)| ClockReading {
            offset_us,
            uncertainty_us,
            samples: 32,
        };
        HostRecord {
            agent: "a:1".into(),
            instances: vec![0],
            generator_shard: None,
            clock_at_start: reading(start),
            clock_at_end: end.map(reading),
            clock_error: None,
        }
    }

    #[test]
    fn a_hosts_stamp_error_is_the_worse_of_its_start_and_its_end() {
        // Corrected by the start's offset: off by its bound then, and by
        // the end's bound plus the drift later.
        assert_eq!(
            host((1000, 40), Some((1000, 10))).stamp_error_us(),
            Some(40)
        );
        assert_eq!(
            host((1000, 40), Some((1300, 10))).stamp_error_us(),
            Some(310)
        );
        assert_eq!(host((1000, 40), None).stamp_error_us(), None);
        assert!(host((0, 40), Some((2000, 10))).warning().is_some());
        assert!(host((0, 40), Some((20, 10))).warning().is_none());
        // Two hosts' clocks are apart by up to both errors.
        let hosts = [
            host((0, 40), Some((0, 10))),
            host((0, 5), Some((100, 5))),
            host((0, 7), Some((0, 7))),
        ];
        assert_eq!(HostRecord::clock_tolerance_us(&hosts), Some(145));
        assert_eq!(HostRecord::clock_tolerance_us(&[host((0, 1), None)]), None);
    }
}
