//! What a proxy's connections share: the fault windows and the current
//! epoch under one lock, and the counters they add to.

use crate::faults::Target;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Stands for "never ends" when `Instant + Duration` would overflow.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// What a proxy did, to put the faults' effect in the report beside the
/// strategy's anomalies (a partition that cut no connection proves nothing).
/// Counters only grow; take two snapshots for a delta.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyStats {
    /// Connections accepted and forwarded: their upstream connection was
    /// made outside any partition. Failed upstream connects are not counted.
    pub connections: u64,
    /// Open connections cut by partitions (counted when the partition starts).
    pub dropped: u64,
    /// Connections accepted during a partition and closed at once, including
    /// one whose upstream connect was still under way when a partition began.
    pub refused: u64,
    /// Bytes handed on from the workers to the backend (a chunk lost when its
    /// connection is cut mid-write still counts).
    pub bytes_up: u64,
    /// Bytes handed on from the backend to the workers.
    pub bytes_down: u64,
}

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) target: Target,
    pub(super) upstream: String,
    pub(super) local_addr: SocketAddr,
    /// Parent of every epoch token: cancelling it cuts everything at once.
    pub(super) stop: CancellationToken,
    pub(super) state: Mutex<State>,
    pub(super) connections: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) bytes_up: AtomicU64,
    pub(super) bytes_down: AtomicU64,
}

/// The fault windows and the current epoch, under one lock so admitting a
/// connection and starting a partition never interleave: a connection is
/// either counted in the epoch the partition cuts, or refused.
#[derive(Debug)]
pub(super) struct State {
    /// Accepted connections are refused until then.
    pub(super) partition_until: Option<Instant>,
    /// (added delay, window end): chunks read before the end are held.
    pub(super) latency: Option<(Duration, Instant)>,
    /// Cancelled by the next partition; every admitted connection holds it.
    pub(super) epoch: CancellationToken,
    pub(super) epoch_id: u64,
    /// Connections of this epoch still open: what the next partition drops.
    pub(super) epoch_open: u64,
}

/// Which way a chunk goes, to pick its byte counter.
#[derive(Debug, Clone, Copy)]
pub(super) enum Direction {
    Up,
    Down,
}

impl Shared {
    /// The state is only ever assigned field by field, so a panic while it
    /// was held cannot have left it half-changed: recover from poisoning
    /// rather than take the whole proxy down.
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The epoch a connection accepted now belongs to, or `None` during a
    /// partition.
    pub(super) fn admit(&self) -> Option<(CancellationToken, u64)> {
        let state = self.state();
        if state
            .partition_until
            .is_some_and(|end| Instant::now() < end)
        {
            return None;
        }
        Some((state.epoch.clone(), state.epoch_id))
    }

    /// Counts a connection whose upstream is now connected as open in its
    /// epoch; false when a partition began meanwhile (it must be refused).
    pub(super) fn register(&self, epoch_id: u64) -> bool {
        let mut state = self.state();
        if state.epoch_id != epoch_id || self.stop.is_cancelled() {
            return false;
        }
        state.epoch_open += 1;
        self.connections.fetch_add(1, Relaxed);
        true
    }

    /// A connection ended; if a partition already cut (and counted) its
    /// epoch there is nothing left to take off.
    pub(super) fn unregister(&self, epoch_id: u64) {
        let mut state = self.state();
        if state.epoch_id == epoch_id {
            state.epoch_open = state.epoch_open.saturating_sub(1);
        }
    }

    /// When a chunk read at `now` may be written: `None` outside a latency
    /// window.
    pub(super) fn hold_until(&self, now: Instant) -> Option<Instant> {
        match self.state().latency {
            Some((add, end)) if now < end && !add.is_zero() => Some(deadline(now, add)),
            _ => None,
        }
    }

    pub(super) fn bytes(&self, direction: Direction) -> &AtomicU64 {
        match direction {
            Direction::Up => &self.bytes_up,
            Direction::Down => &self.bytes_down,
        }
    }
}

/// `now + d`, saturating to a far future instead of panicking on overflow
/// (a scenario may well say "for ever" with a huge duration).
pub(super) fn deadline(now: Instant, d: Duration) -> Instant {
    now.checked_add(d).unwrap_or_else(|| now + FAR_FUTURE)
}
