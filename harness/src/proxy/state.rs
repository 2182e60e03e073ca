//! What a proxy's connections share: the fault windows and the current
//! epoch under one lock, and the counters they add to.

use super::link::Link;
use crate::faults::Target;
use hdrhistogram::Histogram;
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

/// How faithfully a proxy kept its holds: every chunk it held (for a
/// steady link or a latency fault) and how much later than its hold time
/// it was written, the relay's own scheduling on a busy machine. A
/// round trip is late by about twice these.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldStats {
    /// Chunks held, both directions.
    pub chunks: u64,
    /// Written after their hold time by, in µs: median, 99th percentile
    /// and the most.
    pub late_p50_us: u64,
    pub late_p99_us: u64,
    pub late_max_us: u64,
}

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) target: Target,
    /// The steady link held for the whole run (`[network]`).
    pub(super) link: Link,
    /// The jitter's draws (splitmix64): statistically fine, and cheap
    /// under many connections.
    pub(super) draws: AtomicU64,
    /// When each direction's wire is free again, under a bandwidth.
    pub(super) wire_free: Mutex<[Option<Instant>; 2]>,
    /// How late held chunks were written, µs.
    pub(super) late: Mutex<Histogram<u64>>,
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
    Up = 0,
    Down = 1,
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

    /// When a chunk read at `now` may be written: its one-way share of the
    /// steady link plus a latency fault's delay while one is on; `None`
    /// when neither holds it.
    pub(super) fn hold_until(&self, now: Instant) -> Option<Instant> {
        let steady = if self.link.rtt.is_zero() && self.link.jitter.is_zero() {
            Duration::ZERO
        } else {
            self.link.one_way(self.draw())
        };
        let fault = match self.state().latency {
            Some((add, end)) if now < end => add,
            _ => Duration::ZERO,
        };
        let hold = steady + fault;
        // Under a bandwidth every chunk queues for the wire, held or not.
        (!hold.is_zero() || self.link.bandwidth_bps.is_some()).then(|| deadline(now, hold))
    }

    /// A uniform draw in `[0, 1)`.
    fn draw(&self) -> f64 {
        let mut z = self
            .draws
            .fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// When a chunk of `bytes` ready at `ready` has gone out in
    /// `direction`, the bytes queued ahead of it on the link sent first;
    /// `ready` itself without a bandwidth.
    pub(super) fn wire(&self, direction: Direction, ready: Instant, bytes: usize) -> Instant {
        let send = self.link.wire_time(bytes);
        if send.is_zero() {
            return ready;
        }
        let mut free = self
            .wire_free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let slot = &mut free[direction as usize];
        let start = slot.map_or(ready, |f| f.max(ready));
        let done = start + send;
        *slot = Some(done);
        done
    }

    /// Notes a held chunk written `late` after its time.
    pub(super) fn held(&self, late: Duration) {
        let mut hist = self.late.lock().unwrap_or_else(PoisonError::into_inner);
        hist.saturating_record(late.as_micros().min(u64::MAX as u128) as u64);
    }

    pub(super) fn hold_stats(&self) -> HoldStats {
        let hist = self.late.lock().unwrap_or_else(PoisonError::into_inner);
        HoldStats {
            chunks: hist.len(),
            late_p50_us: hist.value_at_quantile(0.5),
            late_p99_us: hist.value_at_quantile(0.99),
            late_max_us: hist.max(),
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
