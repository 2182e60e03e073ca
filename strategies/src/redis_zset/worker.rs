//! The worker side of `redis-zset`: a loop per shard, each claiming (the
//! atomic claim, or the teaching variant's read-then-remove), cancelling
//! and acking, burying malformed members, reclaiming, and sleeping.

use super::conn::{shard_of, MAX_BACKOFF, MIN_BACKOFF};
use super::{ClaimMode, RedisZset, Shard, NOT_DUE_RETRY};
use crate::canceller::Canceller;
use crate::crash::{self, CrashPoint};
use crate::domain::{now_us, CancelOutcome, Micros, OrderId};
use crate::error::Result;
use crate::wake::Heed;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

impl RedisZset {
    /// Claims, cancels and acks `shard`'s due members; returns how many
    /// were claimed and the shard's next deadline.
    async fn claim_shard(&self, shard: &Shard) -> Result<(usize, Option<Micros>)> {
        match self.mode {
            ClaimMode::Atomic => self.claim_and_cancel(shard).await,
            ClaimMode::Nonatomic => self.read_and_cancel(shard).await,
        }
    }

    /// The claim script on one shard: due members move to processing.
    async fn claim(&self, shard: &Shard) -> Result<(Vec<String>, Option<Micros>)> {
        let now = now_us();
        let visible_until = now + self.config.visibility_timeout.as_micros() as i64;
        let mut claim = self.scripts.claim.prepare_invoke();
        claim
            .key(&shard.delay)
            .key(&shard.processing)
            .arg(now)
            .arg(self.config.claim_batch)
            .arg(visible_until);
        let (members, next): (Vec<String>, Option<String>) = self
            .redis
            .invoke(&claim, "claiming due orders in Redis")
            .await?;
        Self::count(&self.counters.claims, 1);
        Self::count(&self.counters.claimed, members.len());
        let next = next
            .and_then(|s| s.parse::<f64>().ok())
            .map(|s| s as Micros);
        Ok((members, next))
    }

    /// Claims the due members of `order_id`'s shard exactly as a worker
    /// does, and stops there: no cancel, no ack. Tests use it to play a
    /// worker killed between claim and ack; returns the claimed members.
    pub async fn claim_without_ack(&self, order_id: OrderId) -> Result<Vec<String>> {
        let shard = &self.shards[shard_of(order_id, self.shards.len() as u32)];
        Ok(self.claim(shard).await?.0)
    }

    /// The atomic claim, the cancel and the ack for one shard; returns how
    /// many members were claimed and the shard's next deadline.
    async fn claim_and_cancel(&self, shard: &Shard) -> Result<(usize, Option<Micros>)> {
        let (members, next) = self.claim(shard).await?;
        if members.is_empty() {
            return Ok((0, next));
        }
        // Moved to processing by the claim script, not cancelled yet.
        crash::reached(CrashPoint::AfterClaim);
        let ids = self
            .bury_malformed(&shard.processing, shard, &members)
            .await?;
        let outcomes = match self.store.cancel_batch_if_due(&ids, self.name()).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                // Give the claims back for a retry soon; should that fail
                // too, the reclaimer returns them after the visibility timeout.
                let retry_at = now_us() + MIN_BACKOFF.as_micros() as i64;
                let _ = self
                    .move_members(&shard.processing, &shard.delay, retry_at, &ids)
                    .await;
                return Err(e);
            }
        };
        // Cancels committed; the members are still in processing.
        crash::reached(CrashPoint::AfterCommitBeforeAck);
        let (not_due, done) = split_not_due(&outcomes);
        if !not_due.is_empty() {
            let retry_at = now_us() + NOT_DUE_RETRY.as_micros() as i64;
            let n = self
                .move_members(&shard.processing, &shard.delay, retry_at, &not_due)
                .await?;
            Self::count(&self.counters.requeued, n);
            self.note_due(shard.index, retry_at);
        }
        if !done.is_empty() {
            self.redis
                .query::<()>(
                    redis::cmd("ZREM").arg(&shard.processing).arg(&done),
                    "acking claims in Redis",
                )
                .await?;
            Self::count(&self.counters.acks, done.len());
        }
        Ok((members.len(), next))
    }

    /// The teaching variant: read due members, cancel, then remove them.
    /// Between the read and the ZREM other instances read the same ids.
    async fn read_and_cancel(&self, shard: &Shard) -> Result<(usize, Option<Micros>)> {
        let members: Vec<String> = self
            .redis
            .query(
                redis::cmd("ZRANGEBYSCORE")
                    .arg(&shard.delay)
                    .arg("-inf")
                    .arg(now_us())
                    .arg("LIMIT")
                    .arg(0)
                    .arg(self.config.claim_batch),
                "reading due orders from Redis",
            )
            .await?;
        Self::count(&self.counters.claims, 1);
        Self::count(&self.counters.claimed, members.len());
        if !members.is_empty() {
            let ids = self.bury_malformed(&shard.delay, shard, &members).await?;
            // On a database error the members simply stay in the delay set.
            let outcomes = self.store.cancel_batch_if_due(&ids, self.name()).await?;
            // Cancels committed; the members are still in the delay set.
            crash::reached(CrashPoint::AfterCommitBeforeAck);
            let (not_due, done) = split_not_due(&outcomes);
            if !not_due.is_empty() {
                let retry_at = now_us() + NOT_DUE_RETRY.as_micros() as i64;
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(&shard.delay).arg("XX");
                for id in &not_due {
                    zadd.arg(retry_at).arg(id);
                }
                self.redis
                    .query::<()>(&zadd, "re-delaying orders in Redis")
                    .await?;
                Self::count(&self.counters.requeued, not_due.len());
                self.note_due(shard.index, retry_at);
            }
            if !done.is_empty() {
                self.redis
                    .query::<()>(
                        redis::cmd("ZREM").arg(&shard.delay).arg(&done),
                        "removing cancelled orders from Redis",
                    )
                    .await?;
                Self::count(&self.counters.acks, done.len());
            }
        }
        let first: Vec<String> = self
            .redis
            .query(
                redis::cmd("ZRANGE")
                    .arg(&shard.delay)
                    .arg(0)
                    .arg(0)
                    .arg("WITHSCORES"),
                "reading the next deadline from Redis",
            )
            .await?;
        let next = first.get(1).and_then(|s| s.parse::<f64>().ok());
        Ok((members.len(), next.map(|s| s as Micros)))
    }

    /// Moves members that are not order ids from `from` to the dead set
    /// (counted, never retried) and returns the ids of the others.
    async fn bury_malformed(
        &self,
        from: &str,
        shard: &Shard,
        members: &[String],
    ) -> Result<Vec<OrderId>> {
        let mut ids = Vec::with_capacity(members.len());
        let mut malformed = Vec::new();
        for member in members {
            match member.parse::<OrderId>() {
                Ok(id) => ids.push(id),
                Err(_) => malformed.push(member.clone()),
            }
        }
        if !malformed.is_empty() {
            tracing::warn!(members = ?malformed, dead = %shard.dead, "malformed members moved to the dead set");
            self.move_members(from, &shard.dead, now_us(), &malformed)
                .await?;
            Self::count(&self.counters.malformed, malformed.len());
        }
        Ok(ids)
    }

    /// Runs the conditional move script; returns how many members moved.
    async fn move_members<M: redis::ToRedisArgs>(
        &self,
        from: &str,
        to: &str,
        score: Micros,
        members: &[M],
    ) -> Result<usize> {
        let mut invocation = self.scripts.move_members.prepare_invoke();
        invocation.key(from).key(to).arg(score).arg(members);
        self.redis
            .invoke(&invocation, "moving members between Redis sets")
            .await
    }

    /// Gives every claim on `shard` whose visibility deadline passed back
    /// to its delay set.
    async fn reclaim_shard(&self, shard: &Shard) -> Result<()> {
        loop {
            let mut invocation = self.scripts.reclaim.prepare_invoke();
            invocation
                .key(&shard.delay)
                .key(&shard.processing)
                .arg(now_us())
                .arg(self.config.claim_batch);
            let moved: usize = self
                .redis
                .invoke(&invocation, "reclaiming expired claims in Redis")
                .await?;
            Self::count(&self.counters.reclaimed, moved);
            if moved > 0 {
                self.note_due(shard.index, now_us());
            }
            if moved < self.config.claim_batch as usize {
                break;
            }
        }
        Ok(())
    }

    fn failed(&self, what: &str, e: &crate::Error) {
        self.counters.errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(strategy = self.name(), error = %e, "{what} failed; retrying");
    }

    /// The worker: one loop per shard, so a shard whose master is down
    /// (on a cluster, every call to it waits out the client's timeouts)
    /// holds up only itself. Never returns early.
    pub(super) async fn work(&self, shutdown: &CancellationToken) {
        futures_util::future::join_all(
            self.shards
                .iter()
                .map(|shard| self.work_shard(shard, shutdown)),
        )
        .await;
    }

    /// One shard's loop: reclaim when due, claim when due, sleep until the
    /// shard's next deadline (or an earlier one heard, or `max-sleep` since
    /// the last unconditional claim, which bounds what a lost wake message
    /// costs).
    async fn work_shard(&self, shard: &Shard, shutdown: &CancellationToken) {
        let mut backoff = MIN_BACKOFF;
        let mut next_reclaim = Instant::now();
        let mut next_full = Instant::now();
        // The earliest deadline this loop knows of in the delay set
        // (`i64::MAX`: none; `i64::MIN`: unknown, look). Only a shard due by
        // this is claimed between full claims, so a wake costs one script call.
        let mut next_due = i64::MIN;
        while !shutdown.is_cancelled() {
            if self.mode == ClaimMode::Atomic && Instant::now() >= next_reclaim {
                if let Err(e) = self.reclaim_shard(shard).await {
                    self.failed("reclaiming", &e);
                }
                next_reclaim = Instant::now() + self.config.reclaim_interval;
            }
            let full = Instant::now() >= next_full;
            if full {
                next_full = Instant::now() + self.config.max_sleep;
            }
            // What was heard (a reclaim's return included) is in the delay
            // set a claim now reads; what comes later stays heard for the
            // sleep below.
            next_due = next_due.min(shard.waker.take());
            if full || next_due <= now_us() {
                match self.claim_shard(shard).await {
                    Ok((members, next)) => {
                        backoff = MIN_BACKOFF;
                        next_due = next.unwrap_or(i64::MAX);
                        if members >= self.config.claim_batch as usize {
                            continue;
                        }
                    }
                    Err(e) => {
                        // A failing shard waits `backoff`; the pause
                        // doubles while it keeps failing.
                        next_due = now_us() + backoff.as_micros() as i64;
                        self.failed("a claim", &e);
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
            let mut sleep = next_full.saturating_duration_since(Instant::now());
            if next_due != i64::MAX {
                sleep = sleep.min(Duration::from_micros(
                    next_due.saturating_sub(now_us()).max(0) as u64,
                ));
            }
            if self.mode == ClaimMode::Atomic {
                sleep = sleep.min(next_reclaim.saturating_duration_since(Instant::now()));
            }
            if sleep.is_zero() {
                continue;
            }
            let until = now_us() + sleep.as_micros() as i64;
            let slept = shard
                .waker
                .sleep_until(until, Heed::Deadlines, shutdown)
                .await;
            if slept.woken() {
                self.counters.wakeups.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Parses a wake message, `<shard> <deadline_us>`.
pub(super) fn parse_wake(payload: &str) -> Option<(usize, Micros)> {
    let (shard, deadline) = payload.split_once(' ')?;
    Some((shard.parse().ok()?, deadline.parse().ok()?))
}

/// Splits outcomes into ids the database found not due yet and ids whose
/// order is final (cancelled now or before, paid, missing): those are acked.
fn split_not_due(outcomes: &[(OrderId, CancelOutcome)]) -> (Vec<OrderId>, Vec<OrderId>) {
    let mut not_due = Vec::new();
    let mut done = Vec::new();
    for &(id, outcome) in outcomes {
        if outcome == CancelOutcome::NotDue {
            not_due.push(id);
        } else {
            done.push(id);
        }
    }
    (not_due, done)
}

#[cfg(test)]
mod tests {
    #[test]
    fn wake_messages_parse() {
        assert_eq!(
            super::parse_wake("3 1764446261000000"),
            Some((3, 1_764_446_261_000_000))
        );
        assert_eq!(super::parse_wake("1764446261000000"), None);
        assert_eq!(super::parse_wake("x 1"), None);
    }
}
