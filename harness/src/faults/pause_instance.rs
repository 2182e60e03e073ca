//! `kind = "pause-instance"`: stop a canceller instance's process for a
//! while (SIGSTOP, then SIGCONT), and count the duplicate attempts that
//! follow.

use super::context::FaultContext;
use super::kind::{check_lasts, human, Kind};
use super::list::FaultKind;
use super::record::{FaultReach, FaultRecord};
use super::role::{or_first, InstanceTarget, Role};
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use strategies::signal::{self, Sig};
use strategies::CrashPoint;
use tokio::time::Instant;

/// SIGSTOP the instance for `for`, then SIGCONT: a GC pause or a stalled
/// VM. Its leases and visibility timeouts expire while it still holds the
/// work, so others take the work again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PauseInstance {
    /// Which canceller instance, 0-based (default 0), or a role:
    /// `"leader"`, the instance that leads when the fault fires;
    /// `"claim-holder"` (with `point`), the first instance to reach the
    /// point once it fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceTarget>,
    /// How long it lasts.
    #[serde(rename = "for", with = "humantime_serde")]
    pub lasts: Duration,
    /// Where in its path it stops itself (optional), so the pause lands
    /// while it holds claimed work; omitted, it is stopped wherever it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<CrashPoint>,
}

impl Kind for PauseInstance {
    const NEEDS: &'static [(&'static str, &'static str)] = &[("for", "\"6s\"")];

    fn instance(&self) -> Option<InstanceTarget> {
        Some(or_first(self.instance))
    }

    fn lasts(&self) -> Duration {
        self.lasts
    }

    fn check(&self, field: &dyn Fn(&str) -> String) -> Result<()> {
        if self.instance == Some(InstanceTarget::Role(Role::ClaimHolder)) && self.point.is_none() {
            bail!(
                "{} = \"claim-holder\" needs {}: the claim holder is the first instance to \
                 reach it, e.g. point = \"after-claim\"",
                field("instance"),
                field("point")
            );
        }
        check_lasts(self.lasts, field)
    }

    fn label(&self, at: &str) -> String {
        format!(
            "pause {} for {}{} from {at}",
            or_first(self.instance).words(),
            human(self.lasts),
            self.point
                .map(|p| format!(" at {}", p.as_str()))
                .unwrap_or_default()
        )
    }

    /// Stops the instance in `record` (the scenario's, or the leader found
    /// as the fault fired), or the claim holder, the first instance to
    /// reach `point`; then continues it after `for`.
    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        // A strategy whose path lacks the point is paused wherever it
        // is, as a pause without a point would be (and the record says so).
        let undeclared_point = self.point.and_then(|point| cx.undeclared(point));
        let point = self.point.filter(|_| undeclared_point.is_none());
        let (pid, others) = match (or_first(self.instance), point) {
            (InstanceTarget::Role(Role::ClaimHolder), None) => {
                // No instance of it can be caught holding a claim.
                record.not_applicable(format!(
                    "no instance can be caught holding a claim: {}",
                    undeclared_point.unwrap_or_default()
                ));
                return;
            }
            (InstanceTarget::Role(Role::ClaimHolder), Some(point)) => {
                match stop_first_at(cx, point, record).await {
                    Some(stopped) => stopped,
                    None => return,
                }
            }
            (_, Some(point)) => match stop_at(cx, record.instance as usize, point, record).await {
                Some(pid) => (pid, Vec::new()),
                None => return,
            },
            (_, None) => {
                let index = record.instance as usize;
                let Some(pid) = cx.pool.pid_of(index) else {
                    record.detail = Some(format!("instance {index} was down"));
                    return;
                };
                if let Err(e) = signal::to_process(pid, Sig::Stop) {
                    record.error = Some(e);
                    return;
                }
                (pid, Vec::new())
            }
        };
        let start = cx.since_t0();
        tokio::time::sleep(self.lasts).await;
        // Whatever happens, the process must not stay stopped.
        let resumed = signal::to_process(pid, Sig::Cont);
        // An instance armed with it that got to the point as well, in the
        // same instant, is not left stopped either.
        for other in others.iter().filter(|other| is_stopped(**other)) {
            let _ = signal::to_process(*other, Sig::Cont);
        }
        record.window_ms = Some((start, cx.since_t0()));
        record.error = resumed.err();
        // The duplicate attempts it caused are counted once the run is
        // over, from every attempt's record (`count_duplicates`).
        record.detail = Some(format!(
            "pid {pid} stopped with SIGSTOP{}, resumed with SIGCONT{}",
            match self.point {
                Some(p) if undeclared_point.is_none() => format!(" at {p}"),
                _ => String::new(),
            },
            undeclared_point
                .map(|why| format!("; paused wherever it was, {why}"))
                .unwrap_or_default()
        ));
    }
}

/// Arms `point` in instance `index` and waits until it stopped itself
/// there; its pid, or `None` (recorded) when it was down or never got there.
async fn stop_at(
    cx: &FaultContext,
    index: usize,
    point: CrashPoint,
    record: &mut FaultRecord,
) -> Option<u32> {
    // It stops itself when its path gets there.
    let Some(pid) = cx.pool.arm_stall(index, point) else {
        record.detail = Some(format!("instance {index} was down"));
        return None;
    };
    while !is_stopped(pid) && Instant::now() < cx.give_up_at {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    if !is_stopped(pid) {
        // Disarmed, and continued in case it stopped just now.
        cx.pool.disarm(index);
        let _ = signal::to_process(pid, Sig::Cont);
        record.error = Some(format!(
            "the point {point} was not reached before the arrivals ended"
        ));
        return None;
    }
    Some(pid)
}

/// The claim holder: arms `point` in every live instance, and the first to
/// stop itself there holds a claim by its own path. The others are
/// disarmed; `record.instance` names the one stopped. Returns its pid and
/// the other armed pids (to continue any that stopped in the same instant),
/// or `None` (recorded) when none got there.
async fn stop_first_at(
    cx: &FaultContext,
    point: CrashPoint,
    record: &mut FaultRecord,
) -> Option<(u32, Vec<u32>)> {
    let armed: Vec<(usize, u32)> = (0..cx.pool.len())
        .filter_map(|index| cx.pool.arm_stall(index, point).map(|pid| (index, pid)))
        .collect();
    if armed.is_empty() {
        record.reach = FaultReach::MissedTarget(
            "every instance was down when the fault fired: none could hold a claim".into(),
        );
        return None;
    }
    let first = loop {
        if let Some(first) = armed.iter().find(|(_, pid)| is_stopped(*pid)) {
            break Some(*first);
        }
        if Instant::now() >= cx.give_up_at {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    for (index, pid) in &armed {
        if Some((*index, *pid)) != first {
            cx.pool.disarm(*index);
        }
    }
    let others: Vec<u32> = armed
        .iter()
        .filter(|armed| Some(**armed) != first)
        .map(|(_, pid)| *pid)
        .collect();
    let Some((index, pid)) = first else {
        for pid in &others {
            let _ = signal::to_process(*pid, Sig::Cont);
        }
        record.reach = FaultReach::MissedTarget(format!(
            "no instance reached {point} before the arrivals ended: none was caught holding a claim"
        ));
        return None;
    };
    // One that got there in the same instant, before its disarm arrived,
    // is continued: only the first is paused.
    tokio::time::sleep(Duration::from_millis(50)).await;
    for other in others.iter().filter(|other| is_stopped(**other)) {
        let _ = signal::to_process(*other, Sig::Cont);
    }
    record.instance = index as u32;
    Some((pid, others))
}

/// Whether process `pid` is stopped (SIGSTOP: state `T`).
fn is_stopped(pid: u32) -> bool {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System};
    // The state is read with every refresh, however little it asks for.
    let pid = Pid::from_u32(pid);
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing(),
    );
    system
        .process(pid)
        .is_some_and(|p| p.status() == ProcessStatus::Stop)
}

/// How long after a pause its duplicate attempts are still counted: the
/// resumed process finishes what it held within this.
const DUPLICATES_SETTLE: Duration = Duration::from_secs(2);

/// Fills in each pause's `duplicates_absorbed`: decided attempts (`cancels`
/// and `absorbed`, `(order, when)`) on an order that an earlier attempt
/// had already decided, made from the pause until [`DUPLICATES_SETTLE`]
/// after it. The conditional UPDATE absorbs every one; the checker's
/// duplicate-release count shows they had no effect.
pub fn count_duplicates(
    records: &mut [FaultRecord],
    cancels: &[(strategies::OrderId, strategies::Micros)],
    absorbed: &[(strategies::OrderId, strategies::Micros)],
    t0_us: strategies::Micros,
) {
    let mut attempts: Vec<(strategies::OrderId, strategies::Micros)> =
        cancels.iter().chain(absorbed).copied().collect();
    attempts.sort_unstable();
    // Every attempt after an order's first, as ms after t0.
    let repeats: Vec<u64> = attempts
        .windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .map(|w| ((w[1].1 - t0_us).max(0) / 1000) as u64)
        .collect();
    let settle = DUPLICATES_SETTLE.as_millis() as u64;
    for record in records
        .iter_mut()
        .filter(|r| r.kind == FaultKind::PauseInstance)
    {
        let Some((from, to)) = record.window_ms else {
            continue;
        };
        let n = repeats
            .iter()
            .filter(|at| (from..=to + settle).contains(*at))
            .count() as u64;
        record.duplicates_absorbed = Some(n);
        if let Some(detail) = &mut record.detail {
            *detail += &format!(
                "; {n} repeated attempts on an already decided order from the pause until {} s \
                 after it, all absorbed (every instance; repeats of any cause in that window count)",
                DUPLICATES_SETTLE.as_secs()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_counts_only_inside_a_pause_and_its_settling() {
        let mut records = vec![FaultRecord::planned(
            FaultKind::PauseInstance,
            1,
            Duration::from_secs(10),
            "pause instance 1 for 3s from 10s".into(),
        )];
        records[0].window_ms = Some((10_000, 13_000));
        records[0].detail = Some("paused".into());
        let t0 = 1_000_000_000;
        let at = |ms: i64| t0 + ms * 1000;
        // Order 1: cancelled at 12 s, repeated at 13.1 s (counted). Order 2:
        // one attempt. Order 3: repeated at 20 s (outside). Order 4: two
        // absorbed attempts at 11 s and 14 s (the second counted).
        let cancels = [(1, at(12_000)), (2, at(12_500)), (3, at(5_000))];
        let absorbed = [
            (1, at(13_100)),
            (3, at(20_000)),
            (4, at(11_000)),
            (4, at(14_000)),
        ];
        count_duplicates(&mut records, &cancels, &absorbed, t0);
        assert_eq!(records[0].duplicates_absorbed, Some(2));
        assert!(records[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("2 repeated attempts"));
    }
}
