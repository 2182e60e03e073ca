//! `db-timer`: the database alone, cancelling at the deadline instead of
//! at the next poll. An instance that wakes for deadlines (the leader on
//! PostgreSQL, every instance elsewhere; see below) claims and cancels
//! what is due as db-scan does ([`crate::db_scan::cancel_until_short`]:
//! `FOR UPDATE SKIP LOCKED` batches, each cancel the one conditional
//! UPDATE), reads the earliest PENDING order off the same `(status,
//! expire_at_us)` index in the same transaction, and sleeps until its
//! deadline, capped by a maximum sleep.
//!
//! What wakes it earlier: on PostgreSQL the order's creating transaction
//! sends `NOTIFY` with the deadline ([`OrderStore::with_deadline_notify`]),
//! delivered only when it commits, and each instance `LISTEN`s on a
//! connection of its own. A deadline before the instance's planned wake
//! cuts the sleep short. A notification can be lost (the listening
//! connection drops); the instance then re-reads the database at once,
//! polls with the shorter `poll-max-sleep` until it listens again, and
//! re-reads once more after re-listening, so a lost notification costs at
//! most a poll interval, never an order. MariaDB and SQLite have no
//! notifications: there it polls adaptively (sleep until the earliest
//! deadline, at most `poll-max-sleep`), so an order due before the
//! instance's next wake is up to `poll-max-sleep` late.
//!
//! On PostgreSQL one instance leads and the others stand by. The lead is a
//! session advisory lock taken on the listening connection
//! ([`OrderStore::try_take_timer_lead`]), so it ends with that session: a
//! lost connection, a killed backend or a dead process frees it.
//! - The leader does the above: it sleeps until each deadline, and the
//!   order its last round read as "next" it cancels directly at that
//!   deadline (the one conditional UPDATE, no claim), so each order is read
//!   once before its cancel, as db-scan's claim reads it once.
//! - A standby listens, tries to take the lead every `poll-max-sleep`, and
//!   meanwhile claims, every `poll-max-sleep`, only orders more than
//!   `poll-max-sleep` overdue (none while the leader keeps up; the claim
//!   then reads no live row). When the leader dies, a standby leads within
//!   `poll-max-sleep`, and what fell due meanwhile is at most about twice
//!   that late.
//!
//! Why not every instance waking for every deadline: that is what db-timer
//! first did. With two instances both woke, the second found the order
//! locked or cancelled and read the next deadline again: 6.7 database rows
//! read and 11.4 statements per cancel at the busy rate, against db-scan's
//! 3.8 and 4.1, for no gain in lateness. Work is not split by SKIP LOCKED
//! here the way db-scan's batches are, because a push-level timer handles
//! one order per wake. With the lead: 4.1 rows and 7.9 statements per
//! cancel (busy reference run, `results/reference/README.md`).
//!
//! What the lead costs: a leader that is alive but stalled (a paused
//! process, a hung round) keeps its session and so its lead. Nobody then
//! cancels at the deadline; the standbys' overdue claim bounds the
//! lateness at about twice `poll-max-sleep` until it recovers. A leader
//! that dies frees the lead with its session.
//!
//! Without a listener (MariaDB, SQLite, or a PostgreSQL listener that is
//! reconnecting) there is no lead: every instance polls as described
//! above, and a claim skips what another instance has locked.
//!
//! `schedule` does nothing: the orders table is the schedule, and the wake
//! comes from the database, not from the order service's call.

mod config;
mod info;

pub use config::DbTimerConfig;
pub use info::DB_TIMER;

use crate::canceller::{counters, Canceller, Capabilities, InstanceRole, StrategyCounters};
use crate::crash::CrashPoint;
use crate::db_scan::{cancel_until_short, claiming_capabilities, Claim};
use crate::domain::{Micros, OrderId};
use crate::error::Result;
use crate::store::{DbKind, OrderStore, StoreStats};
use crate::wake::{DeadlineWaker, Heed};
use async_trait::async_trait;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Written to `orders.cancelled_by`.
const BY: &str = "db-timer";
/// Pause before opening a new listener after the last one failed.
const LISTEN_RETRY: Duration = Duration::from_millis(200);
/// Longest a stopping leader waits to give its lead back.
const LEAD_RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

counters! {
    /// What an instance did, for the report.
    struct TimerCounters {
        // Claim-and-peek rounds (each one wake of the instance while it leads or polls).
        wakes,
        // Direct cancel attempts: rounds that began by cancelling, without a
        // claim, the order the last round read as next (counted as the round
        // starts; the store's outcome counters say how each attempt ended).
        direct_cancels,
        // Times the instance took the lead (PostgreSQL).
        leads,
        // Standby rounds: claims of orders overdue by more than poll-max-sleep.
        standby_rounds,
        // Claim transactions (a round has several when batches come back full).
        batches,
        // Sleeps shortened because a notified deadline came before the planned wake.
        woken_by_notify,
        // Notifications received.
        notifications,
        // Times the listener started listening (the first, then each re-listen).
        listens,
        // Times the listening connection was lost or failed.
        listener_losses,
        // Rounds that failed (the database was away); retried after `poll-max-sleep`.
        errors,
    }
}

/// What the sleeper and its listener share.
#[derive(Debug)]
struct Listening {
    /// Notified deadlines wake the sleeper through it; a look-now asks it
    /// to read the database again (the lead was taken, or notifications
    /// may have been lost).
    waker: DeadlineWaker,
    /// The listener listens now (else every instance polls).
    listening: AtomicBool,
    /// This instance holds the lead (on its listening session); shared
    /// with [`DbTimer::role`].
    leading: Arc<AtomicBool>,
}

/// The db-timer strategy.
#[derive(Debug)]
pub struct DbTimer {
    store: OrderStore,
    max_sleep: Duration,
    poll_max_sleep: Duration,
    batch_size: u32,
    counters: Arc<TimerCounters>,
    /// Whether this instance leads now (see [`Listening::leading`]).
    leading: Arc<AtomicBool>,
}

impl DbTimer {
    pub fn new(store: OrderStore, config: &DbTimerConfig) -> Self {
        DbTimer {
            store,
            max_sleep: config.max_sleep,
            poll_max_sleep: config.poll_max_sleep,
            batch_size: config.batch_size,
            counters: Arc::default(),
            leading: Arc::default(),
        }
    }

    /// The PostgreSQL `application_name` of every db-timer listener on
    /// `store`'s namespace (for `pg_terminate_backend` in tests and faults).
    pub fn listener_name(store: &OrderStore) -> String {
        let mut prefix = store.location().resource_prefix();
        prefix.truncate(48);
        format!("{prefix}_timer_listen")
    }

    /// One round: cancel `due_first` (known to be due), then everything
    /// else due, then read the earliest PENDING order not yet due, as
    /// `(deadline, id)` (`None` when nothing is pending).
    async fn cancel_due(
        &self,
        due_first: Option<OrderId>,
        shutdown: &CancellationToken,
    ) -> Result<Option<(Micros, OrderId)>> {
        let drained = cancel_until_short(
            &self.store,
            Claim::DueThenPeek { due_first },
            self.batch_size,
            BY,
            shutdown,
            &self.counters.batches,
        )
        .await?;
        Ok(drained.next_pending)
    }

    /// One standby round: claim only what is more than `poll-max-sleep`
    /// overdue, which the leader, while it keeps up, has cancelled long ago.
    async fn cancel_overdue(&self, shutdown: &CancellationToken) -> Result<()> {
        cancel_until_short(
            &self.store,
            Claim::Due {
                grace_us: micros(self.poll_max_sleep),
            },
            self.batch_size,
            BY,
            shutdown,
            &self.counters.batches,
        )
        .await?;
        Ok(())
    }
}

fn micros(d: Duration) -> Micros {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Keeps a `LISTEN` connection open until `shutdown`, passing each
/// notified deadline to the sleeper; while not leading, tries to take the lead
/// on that connection every `lead_retry`. On loss, tells the sleeper to
/// re-read and poll, and listens again.
async fn listen(
    store: OrderStore,
    name: String,
    lead_retry: Duration,
    shared: Arc<Listening>,
    counters: Arc<TimerCounters>,
    shutdown: CancellationToken,
) {
    let count = |c: &std::sync::atomic::AtomicU64| c.fetch_add(1, Ordering::Relaxed);
    while !shutdown.is_cancelled() {
        match store.deadline_listener(&name).await {
            Ok(mut listener) => {
                count(&counters.listens);
                shared.listening.store(true, Ordering::SeqCst);
                // Whatever was notified while nobody listened is lost:
                // read the database again now that nothing more can be.
                shared.waker.look_now();
                let mut next_try = tokio::time::Instant::now();
                loop {
                    let leading = shared.leading.load(Ordering::SeqCst);
                    let received = tokio::select! {
                        _ = shutdown.cancelled() => {
                            if leading {
                                // Hand over now rather than when the
                                // session is reaped; bounded, as the
                                // database may be out of reach, and the
                                // session's end frees the lock anyway.
                                let _ = tokio::time::timeout(
                                    LEAD_RELEASE_TIMEOUT,
                                    store.release_timer_lead(&mut listener),
                                )
                                .await;
                            }
                            shared.leading.store(false, Ordering::SeqCst);
                            return;
                        }
                        _ = tokio::time::sleep_until(next_try), if !leading => {
                            next_try = tokio::time::Instant::now() + lead_retry;
                            match store.try_take_timer_lead(&mut listener).await {
                                Ok(true) => {
                                    count(&counters.leads);
                                    shared.leading.store(true, Ordering::SeqCst);
                                    // Lead from the database's state, now.
                                    shared.waker.look_now();
                                }
                                Ok(false) => {}
                                Err(e) => {
                                    tracing::warn!(strategy = BY, error = %e, "cannot try the timer lead; listening again");
                                    break;
                                }
                            }
                            continue;
                        }
                        received = listener.try_recv() => received,
                    };
                    match received {
                        Ok(Some(notification)) => {
                            count(&counters.notifications);
                            match notification.payload().parse() {
                                Ok(deadline) => shared.waker.wake_for(deadline),
                                // Unreadable: re-read rather than guess.
                                Err(_) => shared.waker.look_now(),
                            }
                        }
                        Ok(None) | Err(_) => {
                            if let Err(e) = received {
                                tracing::warn!(strategy = BY, error = %e, "deadline listener failed; polling until it listens again");
                            }
                            break;
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(strategy = BY, error = %e, "cannot listen for deadlines; polling meanwhile");
            }
        }
        count(&counters.listener_losses);
        // The lead lived on the lost session (or is given up with it: a
        // connection that cannot run a query is dropped below).
        shared.leading.store(false, Ordering::SeqCst);
        shared.listening.store(false, Ordering::SeqCst);
        shared.waker.look_now();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(LISTEN_RETRY) => {}
        }
    }
}

#[async_trait]
impl Canceller for DbTimer {
    fn name(&self) -> &str {
        BY
    }

    fn capabilities(&self) -> Capabilities {
        let notes = vec![if self.store.location().kind == DbKind::Postgres {
            format!(
                "the leading instance (an advisory lock on its LISTEN session) sleeps until \
                 the earliest PENDING deadline, read off the index with each round, and \
                 cancels that order at its deadline; a new order with an earlier deadline \
                 wakes it by LISTEN/NOTIFY, sent in the order's creating transaction (one \
                 NOTIFY per order). The other instances stand by, claiming only orders more \
                 than poll-max-sleep ({:?}) overdue, and one leads within poll-max-sleep \
                 when the leader's session ends. A lost notification costs at most \
                 poll-max-sleep; max-sleep ({:?}) caps every sleep",
                self.poll_max_sleep, self.max_sleep
            )
        } else {
            format!(
                "no LISTEN/NOTIFY on this database: sleeps until the earliest PENDING deadline, \
                 at most poll-max-sleep ({:?}), so an order due before the next wake is up to \
                 that late",
                self.poll_max_sleep
            )
        }];
        claiming_capabilities(&self.store, notes)
    }

    /// Nothing: it reads the schema's `(status, expire_at_us)` index.
    async fn setup(&self) -> Result<()> {
        Ok(())
    }

    /// Nothing to do: the orders table is the schedule, and the wake comes
    /// from the database (the creating transaction's NOTIFY, or the poll).
    async fn schedule(&self, _order_id: OrderId, _expire_at_us: Micros) -> Result<()> {
        Ok(())
    }

    async fn run(&self, shutdown: CancellationToken) -> Result<()> {
        let shared = Arc::new(Listening {
            waker: DeadlineWaker::default(),
            listening: AtomicBool::new(false),
            leading: Arc::clone(&self.leading),
        });
        // The listener holds the lead: it must never outlive this call,
        // even when the call's future is dropped rather than shut down.
        let listen_token = shutdown.child_token();
        let _stop_listening = listen_token.clone().drop_guard();
        let listener = (self.store.location().kind == DbKind::Postgres).then(|| {
            tokio::spawn(listen(
                self.store.clone(),
                Self::listener_name(&self.store),
                self.poll_max_sleep,
                Arc::clone(&shared),
                Arc::clone(&self.counters),
                listen_token.clone(),
            ))
        });
        let c = &self.counters;
        let count =
            |counter: &std::sync::atomic::AtomicU64| counter.fetch_add(1, Ordering::Relaxed);
        // The earliest PENDING order the last round read, `(deadline, id)`.
        let mut next: Option<(Micros, OrderId)> = None;
        while !shutdown.is_cancelled() {
            // Deadlines notified from here on stay heard for the sleep
            // below; those committed before are in the database the round
            // reads.
            shared.waker.take();
            let listening = shared.listening.load(Ordering::SeqCst);
            let standby = listening && !shared.leading.load(Ordering::SeqCst);
            let round = if standby {
                count(&c.standby_rounds);
                next = None;
                self.cancel_overdue(&shutdown)
                    .await
                    .map(|()| crate::now_us().saturating_add(micros(self.poll_max_sleep)))
            } else {
                let cap = if listening {
                    self.max_sleep
                } else {
                    self.poll_max_sleep
                };
                count(&c.wakes);
                // Only the leader cancels what it read as next without a
                // claim: polling instances would all try the same order.
                let due_first = next
                    .take()
                    .filter(|&(deadline, _)| listening && deadline <= crate::now_us())
                    .map(|(_, id)| id);
                if due_first.is_some() {
                    count(&c.direct_cancels);
                }
                // Due orders the claim skipped are another instance's, in
                // its open transaction; if it dies they are due again and
                // the next wake (at most `cap` away) claims them.
                self.cancel_due(due_first, &shutdown).await.map(|found| {
                    next = found;
                    found
                        .map_or(i64::MAX, |(deadline, _)| deadline)
                        .min(crate::now_us().saturating_add(micros(cap)))
                })
            };
            let target = round.unwrap_or_else(|e| {
                // A transient failure must not stop cancelling: count it,
                // report it, and try again after a poll interval.
                count(&c.errors);
                next = None;
                tracing::warn!(strategy = BY, error = %e, "round failed; retrying");
                crate::now_us() + micros(self.poll_max_sleep)
            });
            // A look-now (the lead was taken, the listener lost) wakes
            // everyone; a new order's deadline only an instance that
            // sleeps until deadlines.
            let heed = if standby {
                Heed::LookNowOnly
            } else {
                Heed::Deadlines
            };
            let slept = shared.waker.sleep_until(target, heed, &shutdown).await;
            c.woken_by_notify
                .fetch_add(slept.shortened, Ordering::Relaxed);
        }
        if let Some(listener) = listener {
            let _ = listener.await;
        }
        Ok(())
    }

    async fn teardown(&self) -> Result<()> {
        Ok(())
    }

    fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    fn counters(&self) -> StrategyCounters {
        self.counters.snapshot()
    }

    /// Leader or standby on PostgreSQL, where one instance holds the lead;
    /// elsewhere every instance polls alike.
    fn role(&self) -> InstanceRole {
        match self.store.location().kind {
            DbKind::Postgres if self.leading.load(Ordering::SeqCst) => InstanceRole::Leader,
            DbKind::Postgres => InstanceRole::Standby,
            _ => InstanceRole::Peer,
        }
    }

    /// None, for db-scan's reason: the claim and the cancel are one
    /// transaction in one store call, with no place in this strategy's path
    /// between them, and after the commit nothing is left to acknowledge.
    fn crash_points(&self) -> &'static [CrashPoint] {
        &[]
    }
}
