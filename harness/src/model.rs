//! The run's data model: what the runner writes to `summary.json` and the
//! reports read back. Types here carry data only; nothing in them runs a
//! workload, so a report rendered from the JSON alone needs nothing else.

use serde::{Deserialize, Serialize};
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
