//! `kind = "crash-at"`: make a canceller instance abort at a point of its
//! own path, over fresh processes.

use super::context::FaultContext;
use super::kind::{check_restart_after, human, Kind};
use super::record::FaultRecord;
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
    /// Which canceller instance, 0-based (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<u32>,
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

    fn instance(&self) -> Option<u32> {
        Some(self.instance.unwrap_or(0))
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
            "crash instance {} at {} x{} from {at}",
            self.instance.unwrap_or(0),
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
        let index = self.instance.unwrap_or(0) as usize;
        let restart_after = self.restart_after.unwrap_or(Duration::from_secs(1));
        let mut crashes = Vec::new();
        let start = cx.since_t0();
        for _ in 0..self.times {
            let Some(pid) = cx.pool.arm_crash(index, point) else {
                record.error = Some(format!("instance {index} was down when its crash was due"));
                break;
            };
            // The process dies the next time its path gets there.
            while cx.pool.pid_of(index) == Some(pid) && Instant::now() < cx.give_up_at {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if cx.pool.pid_of(index) == Some(pid) {
                cx.pool.disarm(index);
                record.error = Some(format!(
                    "the point was not reached before the arrivals ended ({} of {} crashes)",
                    crashes.len(),
                    self.times
                ));
                break;
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
