//! One fault as it happened to one strategy's run: the record in
//! `summary.json`, and whether the fault reached what it was aimed at.
//! What a record means depends on its kind (whether it took effect, when it
//! was in effect, how it reads): those rules are each kind's own, and
//! `fault.rs`, which knows every kind, answers them for a record.

use super::list::FaultKind;
use super::role::Role;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One fault as it happened. Times are ms after the first order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRecord {
    pub kind: FaultKind,
    /// The instance it acted on: the scenario's number, or the one that
    /// held [`FaultRecord::aimed_at`] when it fired (0 while unresolved).
    pub instance: u32,
    /// The role it was aimed at instead of an instance number (`leader`,
    /// `claim-holder`), resolved when it fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aimed_at: Option<Role>,
    pub planned_at_ms: u64,
    /// When the process was dead (`None` if it was already down).
    pub killed_at_ms: Option<u64>,
    pub killed_pid: Option<u32>,
    /// When the fresh process was ready, if the scenario restarts it.
    pub restarted_at_ms: Option<u64>,
    pub restarted_pid: Option<u32>,
    /// `run-command` with a `node`: the node it acted on (`host:port`),
    /// the scenario's or the one its role named when it fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
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
    /// Losses while it was in effect are still put down to it. Or it was
    /// aimed at a role ([`FaultRecord::aimed_at`]) that no instance held
    /// when it fired, and did nothing.
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

/// When a fault was in effect, ms after the first order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub from: u64,
    /// `None`: until the run ended (an instance killed and not restarted).
    pub to: Option<u64>,
}

impl Span {
    /// The recorded window.
    pub fn of((from, to): (u64, u64)) -> Span {
        Span { from, to: Some(to) }
    }
}

impl FaultRecord {
    /// A record of a fault of `kind` aimed at `instance` (0 for the kinds
    /// that hit every instance), planned at `at`, not yet injected.
    pub fn planned(kind: FaultKind, instance: u32, at: Duration, label: String) -> FaultRecord {
        FaultRecord {
            kind,
            instance,
            aimed_at: None,
            planned_at_ms: at.as_millis() as u64,
            killed_at_ms: None,
            killed_pid: None,
            restarted_at_ms: None,
            restarted_pid: None,
            node: None,
            command: Vec::new(),
            exit_status: None,
            finished_at_ms: None,
            error: None,
            label,
            window_ms: None,
            detail: None,
            duplicates_absorbed: None,
            reach: FaultReach::Hit,
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

    /// The record in words for a fault known by its window: its label,
    /// when it acted, what it did and what went wrong.
    pub fn describe_window(&self) -> String {
        let mut text = self.label.clone();
        if let Some((from, to)) = self.window_ms {
            text += &if from == to {
                format!(" (at {})", secs(from))
            } else {
                format!(" ({} to {})", secs(from), secs(to))
            };
        }
        if let Some(detail) = &self.detail {
            text += &format!(": {detail}");
        }
        if let Some(e) = &self.error {
            text += &format!("; error: {e}");
        }
        text
    }
}

/// `ms` after the first order as the reports print it, e.g. `8.0 s`.
pub fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}
