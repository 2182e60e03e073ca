//! `kind = "pause-instance"`: stop a canceller instance's process for a
//! while (SIGSTOP, then SIGCONT), and count the duplicate attempts that
//! follow.

use super::context::FaultContext;
use super::kind::{check_lasts, human, Kind};
use super::list::FaultKind;
use super::record::FaultRecord;
use anyhow::Result;
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
    /// Which canceller instance, 0-based (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<u32>,
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

    fn instance(&self) -> Option<u32> {
        Some(self.instance.unwrap_or(0))
    }

    fn lasts(&self) -> Duration {
        self.lasts
    }

    fn check(&self, field: &dyn Fn(&str) -> String) -> Result<()> {
        check_lasts(self.lasts, field)
    }

    fn label(&self, at: &str) -> String {
        format!(
            "pause instance {} for {}{} from {at}",
            self.instance.unwrap_or(0),
            human(self.lasts),
            self.point
                .map(|p| format!(" at {}", p.as_str()))
                .unwrap_or_default()
        )
    }

    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        let index = self.instance.unwrap_or(0) as usize;
        let Some(pid) = cx.pool.pid_of(index) else {
            record.detail = Some(format!("instance {index} was down"));
            return;
        };
        // A strategy whose path lacks the point is paused wherever it
        // is, as a pause without a point would be (and the record says so).
        let undeclared_point = self.point.and_then(|point| cx.undeclared(point));
        match self.point.filter(|_| undeclared_point.is_none()) {
            Some(point) => {
                // It stops itself when its path gets there.
                if cx.pool.arm_stall(index, point) != Some(pid) {
                    record.detail = Some(format!("instance {index} was down"));
                    return;
                }
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
                    return;
                }
            }
            None => {
                if let Err(e) = signal::to_process(pid, Sig::Stop) {
                    record.error = Some(e);
                    return;
                }
            }
        }
        let start = cx.since_t0();
        tokio::time::sleep(self.lasts).await;
        // Whatever happens, the process must not stay stopped.
        let resumed = signal::to_process(pid, Sig::Cont);
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
