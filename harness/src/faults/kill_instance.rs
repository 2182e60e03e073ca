//! `kind = "kill-instance"`: SIGKILL a canceller instance's process.

use super::context::FaultContext;
use super::kind::{check_restart_after, human, Kind};
use super::record::{secs, FaultRecord, Span};
use super::role::{or_first, InstanceTarget, Role};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// SIGKILL the instance's process: whatever it held only in memory is
/// gone, and it acks nothing more. New orders go to the live instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KillInstance {
    /// Which canceller instance, 0-based (default 0), or `"leader"`: the
    /// instance that leads when the fault fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceTarget>,
    /// Start a fresh process for the instance this long after it died;
    /// omitted, it stays down for the rest of the run.
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub restart_after: Option<Duration>,
}

impl Kind for KillInstance {
    const NEEDS: &'static [(&'static str, &'static str)] = &[];

    fn instance(&self) -> Option<InstanceTarget> {
        Some(or_first(self.instance))
    }

    fn check(&self, field: &dyn Fn(&str) -> String) -> Result<()> {
        if self.instance == Some(InstanceTarget::Role(Role::ClaimHolder)) {
            bail!(
                "{} = \"claim-holder\" does not apply to kind = \"kill-instance\": the claim \
                 holder is the instance that reaches a point of its path, and a kill has none; \
                 use kind = \"crash-at\" with point = \"after-claim\"",
                field("instance")
            );
        }
        check_restart_after(self.restart_after, field)
    }

    fn label(&self, at: &str) -> String {
        format!(
            "kill {} at {at}, {}",
            or_first(self.instance).words(),
            match self.restart_after {
                Some(r) => format!("restart {} later", human(r)),
                None => "no restart".to_string(),
            }
        )
    }

    /// Kills the instance in `record` (the scenario's, or the leader found
    /// as the fault fired).
    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        let index = record.instance as usize;
        match cx.pool.kill(index).await {
            Ok(pid) => {
                record.killed_pid = pid;
                record.killed_at_ms = pid.map(|_| cx.since_t0());
            }
            Err(e) => {
                record.error = Some(format!("{e:#}"));
                return;
            }
        }
        if let Some(after) = self.restart_after {
            tokio::time::sleep(after).await;
            cx.restart(index, record).await;
        }
    }

    /// From the kill until the fresh process was ready, or to the end
    /// without a restart.
    fn span(record: &FaultRecord) -> Option<Span> {
        record.killed_at_ms.map(|from| Span {
            from,
            to: record.restarted_at_ms,
        })
    }

    /// A kill of an instance already down did not act.
    fn took_effect(record: &FaultRecord) -> bool {
        record.killed_pid.is_some()
    }

    fn describe(record: &FaultRecord) -> String {
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
}
