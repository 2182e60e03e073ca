//! Crash points: places in a strategy's own path where a scenario fault
//! (`kind = "crash-at"`) makes the canceller process abort, the way a real
//! crash lands: no destructors, no flush, no ack, no rollback of what the
//! database already committed.
//!
//! A worker process runs one strategy instance, so the armed points are
//! process-global: a few atomics, read with one relaxed load on the hot
//! path. Each strategy declares the points its path has
//! ([`Canceller::crash_points`](crate::Canceller::crash_points)) and calls
//! [`reached`] at each of them; the harness refuses to arm a point the
//! strategy does not declare.
//!
//! Tests observe instead of dying: with [`CrashAction::Count`], reaching an
//! armed point counts a hit ([`hits`]) and disarms it, as one crash would,
//! and the strategy carries on.

use crate::error::Error;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// A place in a strategy's path where an injected crash lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashPoint {
    /// The strategy took an order's work item out of shared reach (a row
    /// locked by the scan, a ZSET member moved to the processing set by the
    /// Lua claim, a delivery received and not yet acked, an entry popped off
    /// the wheel) and has not cancelled it yet.
    AfterClaim,
    /// The order's cancel transaction committed and the strategy has not
    /// yet told its queue so (no ack sent, processing member not removed).
    AfterCommitBeforeAck,
}

impl CrashPoint {
    /// Every crash point, in path order.
    pub const ALL: [CrashPoint; 2] = [CrashPoint::AfterClaim, CrashPoint::AfterCommitBeforeAck];

    /// The scenario name, e.g. `after-claim`.
    pub fn as_str(self) -> &'static str {
        match self {
            CrashPoint::AfterClaim => "after-claim",
            CrashPoint::AfterCommitBeforeAck => "after-commit-before-ack",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CrashPoint {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        CrashPoint::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = CrashPoint::ALL.iter().map(|p| p.as_str()).collect();
                Error::Config(format!(
                    "unknown crash point `{s}`; known crash points: {}",
                    known.join(", ")
                ))
            })
    }
}

/// What reaching an armed point does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashAction {
    /// `std::process::abort`: the default, for worker processes.
    Abort,
    /// Count a hit and disarm the point; the strategy carries on. For tests,
    /// whose process must not abort.
    Count,
}

static ARMED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
static STALL: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
static HITS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// 0: [`CrashAction::Abort`], 1: [`CrashAction::Count`].
static ACTION: AtomicU8 = AtomicU8::new(0);

/// Arms `point` in this process: the next time a strategy reaches it, the
/// process aborts (`std::process::abort`: no destructors, no flush, no ack,
/// like a real crash), or counts a hit under [`CrashAction::Count`].
/// Process-global (a worker process runs one strategy instance).
pub fn arm(point: CrashPoint) {
    ARMED[point.index()].store(true, Ordering::SeqCst);
}

/// Arms `point` to *stall* this process instead of killing it: the next
/// time a strategy reaches it, the process sends itself SIGSTOP and stays
/// stopped, holding whatever it claimed, until someone sends SIGCONT (the
/// harness's `pause-instance` fault with a `point`): a GC pause or a
/// stalled VM that lands at the worst moment, so leases and visibility
/// timeouts expire while the work is still held. Counted as a hit under
/// [`CrashAction::Count`], like a crash.
pub fn arm_stall(point: CrashPoint) {
    STALL[point.index()].store(true, Ordering::SeqCst);
}

/// Disarms every point.
pub fn disarm_all() {
    for armed in ARMED.iter().chain(&STALL) {
        armed.store(false, Ordering::SeqCst);
    }
}

/// Whether `point` is armed.
pub fn is_armed(point: CrashPoint) -> bool {
    ARMED[point.index()].load(Ordering::SeqCst)
}

/// Sets what reaching an armed point does (process-global).
pub fn set_action(action: CrashAction) {
    let code = match action {
        CrashAction::Abort => 0,
        CrashAction::Count => 1,
    };
    ACTION.store(code, Ordering::SeqCst);
}

/// How many times an armed `point` was reached under [`CrashAction::Count`].
pub fn hits(point: CrashPoint) -> u64 {
    HITS[point.index()].load(Ordering::SeqCst)
}

/// Disarms every point and sets every hit count back to zero (tests).
pub fn reset() {
    disarm_all();
    for hits in &HITS {
        hits.store(0, Ordering::SeqCst);
    }
}

/// Called by strategies at each point. Aborts if armed; otherwise a relaxed
/// atomic load (no cost on the hot path worth measuring).
#[inline]
pub fn reached(point: CrashPoint) {
    if ARMED[point.index()].load(Ordering::Relaxed) {
        crash(point);
    }
    if STALL[point.index()].load(Ordering::Relaxed) {
        stall(point);
    }
}

#[cold]
#[inline(never)]
fn stall(point: CrashPoint) {
    if !take(&STALL, point) {
        return;
    }
    eprintln!("delaybench: injected stall at {point} (SIGSTOP until SIGCONT)");
    // The whole process stops here, this thread included, until the
    // harness continues it: which is the point.
    if let Err(e) = crate::signal::to_process(std::process::id(), crate::signal::Sig::Stop) {
        eprintln!("delaybench: could not stall at {point}: {e}");
    }
}

/// Disarms `point` in `armed` for the one caller that gets there first;
/// true when that caller should act (under [`CrashAction::Count`] the hit
/// is counted instead, and it should not).
fn take(armed: &[AtomicBool; 2], point: CrashPoint) -> bool {
    // Only one caller takes an armed point (several tasks may reach it at once).
    if armed[point.index()]
        .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return false;
    }
    if ACTION.load(Ordering::SeqCst) == 1 {
        HITS[point.index()].fetch_add(1, Ordering::SeqCst);
        return false;
    }
    true
}

#[cold]
#[inline(never)]
fn crash(point: CrashPoint) {
    if !take(&ARMED, point) {
        return;
    }
    // stderr is unbuffered: one line so the log tells an injected crash
    // from a real one; then die without unwinding or flushing anything.
    eprintln!("delaybench: injected crash at {point}");
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for point in CrashPoint::ALL {
            assert_eq!(point.as_str().parse::<CrashPoint>().unwrap(), point);
            let json = serde_json::to_string(&point).unwrap();
            assert_eq!(json, format!("\"{}\"", point.as_str()));
            assert_eq!(serde_json::from_str::<CrashPoint>(&json).unwrap(), point);
        }
        let err = "after-ack".parse::<CrashPoint>().unwrap_err().to_string();
        assert!(
            err.contains("after-claim") && err.contains("after-commit-before-ack"),
            "{err}"
        );
    }

    /// The only lib test touching the statics (strategies' unit tests do
    /// not run their paths), so it cannot race another test.
    #[test]
    fn count_hits_once_then_disarms() {
        set_action(CrashAction::Count);
        reset();
        reached(CrashPoint::AfterClaim);
        assert_eq!(hits(CrashPoint::AfterClaim), 0, "not armed: no hit");
        arm(CrashPoint::AfterClaim);
        assert!(is_armed(CrashPoint::AfterClaim));
        reached(CrashPoint::AfterClaim);
        reached(CrashPoint::AfterClaim);
        assert_eq!(hits(CrashPoint::AfterClaim), 1, "one crash, then disarmed");
        assert!(!is_armed(CrashPoint::AfterClaim));
        assert_eq!(hits(CrashPoint::AfterCommitBeforeAck), 0);
        arm(CrashPoint::AfterCommitBeforeAck);
        disarm_all();
        reached(CrashPoint::AfterCommitBeforeAck);
        assert_eq!(hits(CrashPoint::AfterCommitBeforeAck), 0);
        reset();
        set_action(CrashAction::Abort);
    }
}
