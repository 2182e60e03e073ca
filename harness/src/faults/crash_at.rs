//! `kind = "crash-at"`: make a canceller instance abort at a point of its
//! own path, over fresh processes.

use super::context::FaultContext;
use super::kind::{check_restart_after, human, Kind};
use super::record::{FaultReach, FaultRecord};
use super::role::{or_first, InstanceTarget, Role};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use strategies::CrashPoint;
use tokio::time::Instant;

/// Arm `point` in the instance: it aborts the next time its path gets
/// there, `times` times over fresh processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CrashAt {
    /// Which canceller instance, 0-based (default 0), or a role:
    /// `"leader"`, the instance that leads when the fault fires;
    /// `"claim-holder"`, the first instance to reach `point` (every live
    /// instance is armed, the others disarmed once one crashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceTarget>,
    /// Start a fresh process this long after each crash (default 1s).
    #[serde(
        default,
        with = "humantime_serde",
        skip_serializing_if = "Option::is_none"
    )]
    pub restart_after: Option<Duration>,
    /// Where in its path the instance aborts.
    pub point: CrashPoint,
    /// How many crashes, one per fresh process (default 1).
    #[serde(default = "once")]
    pub times: u32,
}

fn once() -> u32 {
    1
}

impl Kind for CrashAt {
    const NEEDS: &'static [(&'static str, &'static str)] = &[(
        "point",
        "\"after-claim\" (or \"after-commit-before-ack\")",
    )];

    fn instance(&self) -> Option<InstanceTarget> {
        Some(or_first(self.instance))
    }

    fn check(&self, field: &dyn Fn(&str) -> String) -> Result<()> {
        check_restart_after(self.restart_after, field)?;
        if !(1..=100).contains(&self.times) {
            bail!(
                "{} = {} is out of range; accepted values: 1 to 100",
                field("times"),
                self.times
            );
        }
        Ok(())
    }

    fn label(&self, at: &str) -> String {
        format!(
            "crash {} at {} x{} from {at}",
            or_first(self.instance).words(),
            self.point.as_str(),
            self.times
        )
    }

    /// Arms the crash point, waits for the process to die of it, restarts
    /// it, and again, `times` times.
    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        let point = self.point;
        if let Some(why) = cx.undeclared(point) {
            record.not_applicable(why);
            return;
        }
        let restart_after = self.restart_after.unwrap_or(Duration::from_secs(1));
        // The instances armed each time: the one in `record` (the
        // scenario's, or the leader found as the fault fired), or every
        // live one when it is aimed at the claim holder.
        let candidates: Vec<usize> = match or_first(self.instance) {
            InstanceTarget::Role(Role::ClaimHolder) => (0..cx.pool.len()).collect(),
            _ => vec![record.instance as usize],
        };
        let mut crashes = Vec::new();
        let start = cx.since_t0();
        for _ in 0..self.times {
            let armed: Vec<(usize, u32)> = candidates
                .iter()
                .filter_map(|&i| cx.pool.arm_crash(i, point).map(|pid| (i, pid)))
                .collect();
            if armed.is_empty() {
                record.error = Some(match &candidates[..] {
                    [index] => format!("instance {index} was down when its crash was due"),
                    _ => "every instance was down when the crash was due".to_string(),
                });
                break;
            }
            // A process dies the next time its path gets there.
            let died = |cx: &FaultContext| {
                armed
                    .iter()
                    .copied()
                    .find(|(i, pid)| cx.pool.pid_of(*i) != Some(*pid))
            };
            while died(cx).is_none() && Instant::now() < cx.give_up_at {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let first = died(cx);
            for (i, _) in armed.iter().filter(|a| Some(**a) != first) {
                cx.pool.disarm(*i);
            }
            let Some((index, pid)) = first else {
                record.error = Some(format!(
                    "the point was not reached before the arrivals ended ({} of {} crashes)",
                    crashes.len(),
                    self.times
                ));
                if crashes.is_empty() && candidates.len() > 1 {
                    record.reach = FaultReach::MissedTarget(format!(
                        "no instance reached {point} before the arrivals ended: none was \
                         caught holding a claim"
                    ));
                }
                break;
            };
            if crashes.is_empty() {
                record.instance = index as u32;
            }
            crashes.push(format!("pid {pid} at {:.1} s", cx.since_t0() as f64 / 1000.0));
            record.killed_pid.get_or_insert(pid);
            record.killed_at_ms.get_or_insert(cx.since_t0());
            if cx.pool.restarts_dead() {
                // `restart-dead-instances` restarts it: wait for that process
                // rather than race it with a second one.
                let restarted = Instant::now() + restart_after + Duration::from_secs(60);
                while cx.pool.pid_of(index).is_none() && Instant::now() < restarted {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                continue;
            }
            tokio::time::sleep(restart_after).await;
            // Once the pool has noted the death.
            let noted = Instant::now() + Duration::from_secs(10);
            while cx.pool.is_running(index)
                && cx.pool.pid_of(index).is_none()
                && Instant::now() < noted
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if !cx.pool.is_running(index) {
                cx.restart(index, record).await;
            }
        }
        // A crash that never happened did not act: no window, so no loss is
        // put down to it.
        if !crashes.is_empty() {
            record.window_ms = Some((start, cx.since_t0()));
        }
        record.detail = Some(format!(
            "aborted {} of {} times at {point} ({}), each restarted {}",
            crashes.len(),
            self.times,
            crashes.join(", "),
            if cx.pool.restarts_dead() {
                "by `restart-dead-instances`".to_string()
            } else {
                format!("{} later", human(restart_after))
            }
        ));
    }
}
