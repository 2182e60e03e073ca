//! One sleeper woken early when a nearer deadline turns up: the
//! [`DeadlineWaker`] that db-timer, each redis-zset shard loop, the ceiling
//! and the timing wheel's driver sleep on.
//!
//! Two sides meet here. The *sleeper* is the one loop that looks at a
//! schedule (the orders table, a Redis shard, an in-process list or wheel)
//! and sleeps until its next deadline. A *waker* is whoever learns of a
//! deadline meanwhile: `schedule`, a LISTEN notification, a Redis wake
//! message, the sleeper's own work (a retry it puts back). The contract:
//! - A waker first puts the deadline where the sleeper's next look finds it
//!   (the list, the database, Redis), then calls
//!   [`wake_for`](DeadlineWaker::wake_for) with the time the sleeper must
//!   look by, or [`look_now`](DeadlineWaker::look_now) when it cannot say
//!   (notifications were lost, a payload was unreadable).
//! - The sleeper, each round: [`take`](DeadlineWaker::take)s what was heard
//!   (its look covers that, so it may drop it), looks at the schedule and
//!   works, then [`sleep_until`](DeadlineWaker::sleep_until)s its next
//!   deadline. The sleep ends at that time, or earlier at a heard deadline
//!   before it (the sleep is shortened to it, not ended at once), at a
//!   look-now request, or at shutdown.
//!
//! Why no wake is lost. `wake_for` writes the deadline into `heard`, then
//! reads `wake_before` (when the sleeper means to wake) and notifies if the
//! deadline comes first. `sleep_until` writes `wake_before`, then reads
//! `heard` and shortens itself to anything earlier. All four accesses are
//! `SeqCst`, so in their one total order one side's write precedes the
//! other side's read: either the sleeper finds the deadline before it waits,
//! or the waker finds the sleeper's end and calls [`Notify::notify_one`],
//! which wakes the waiting sleeper or, when it has not begun to wait yet,
//! stores a permit that its wait consumes at once.
//!
//! While the sleeper works, `wake_before` holds [`WORKING`], before which no
//! deadline lies: a deadline heard then notifies nobody and waits in
//! `heard` for the next sleep's re-read. So a schedule arriving during work
//! is kept, and costs no extra round: a permit per message (what redis-zset
//! once did, marking "working" as after every deadline) made the next sleep
//! return at once for each. The re-read is what makes this safe: without it
//! (redis-zset before 521c0e9 read its known deadlines, then published its
//! sleep) a message in between found the loop working, notified nobody,
//! and its order waited a whole `max-sleep`.
//!
//! A permit can still outlive its wake: a waker that read the end of a
//! sleep that was just ending by time notifies a sleeper about to work.
//! The next sleep then wakes once for nothing, re-reads `heard`, finds
//! nothing earlier and sleeps on.

use crate::domain::{now_us, Micros};
use std::sync::atomic::{AtomicI64, Ordering::SeqCst};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// In `heard`: nothing since the last [`DeadlineWaker::take`] (after every
/// deadline).
const NOTHING_HEARD: Micros = Micros::MAX;
/// In `heard`: look now (before every deadline, so it reads as due).
const LOOK_NOW: Micros = Micros::MIN;
/// In `wake_before` while the sleeper works: no deadline comes before it,
/// so no waker notifies; the next sleep re-reads `heard` instead.
const WORKING: Micros = Micros::MIN;

/// Where a sleeper and its wakers meet (see the module docs for who calls
/// what, and why no wake is lost).
#[derive(Debug)]
pub(crate) struct DeadlineWaker {
    /// The earliest deadline heard since the sleeper last took it
    /// ([`NOTHING_HEARD`], [`LOOK_NOW`]).
    heard: AtomicI64,
    /// A heard deadline before this wakes the sleeper: the end of its
    /// sleep, `LOOK_NOW + 1` when only look-now requests count, [`WORKING`]
    /// while it is not asleep.
    wake_before: AtomicI64,
    notify: Notify,
}

/// Which wakes end a sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Heed {
    /// A heard deadline before the sleep's end shortens it, and a look-now
    /// request ends it.
    Deadlines,
    /// Only a look-now request ends it (db-timer's standby, which does not
    /// cancel at deadlines); deadlines heard stay for the next take.
    LookNowOnly,
}

/// How a sleep went.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slept {
    /// Times a heard deadline moved the sleep's end earlier.
    pub(crate) shortened: u64,
    /// A look-now request ended it.
    pub(crate) asked_to_look: bool,
}

impl Slept {
    /// Whether a wake cut the sleep short (a heard deadline or a look-now).
    pub(crate) fn woken(&self) -> bool {
        self.shortened > 0 || self.asked_to_look
    }
}

impl Default for DeadlineWaker {
    fn default() -> Self {
        DeadlineWaker {
            heard: AtomicI64::new(NOTHING_HEARD),
            wake_before: AtomicI64::new(WORKING),
            notify: Notify::new(),
        }
    }
}

impl DeadlineWaker {
    /// Waker side: the sleeper must look by `at` (a deadline already put
    /// where its look finds it). Wakes it if it sleeps past `at`; otherwise
    /// the next sleep's re-read shortens that sleep.
    pub(crate) fn wake_for(&self, at: Micros) {
        self.note(at);
        if self.sleeps_past(at) {
            self.notify.notify_one();
        }
    }

    /// Waker side: the sleeper must look now, whatever it knows (what was
    /// heard may be incomplete). Ends a sleep of either [`Heed`].
    pub(crate) fn look_now(&self) {
        self.wake_for(LOOK_NOW);
    }

    /// Sleeper side, before it looks at the schedule: takes what was heard
    /// since the last take, as the earliest deadline (`Micros::MIN` for a
    /// look-now request, which reads as due; `Micros::MAX` for nothing).
    /// What a waker put in the schedule before its `wake_for` is then
    /// either taken here or seen by the look, or stays heard for the next
    /// sleep.
    pub(crate) fn take(&self) -> Micros {
        self.heard.swap(NOTHING_HEARD, SeqCst)
    }

    /// Sleeper side: sleeps until `until` (wall-clock microseconds), or
    /// until a deadline heard before it (now or while asleep) when `heed`
    /// is [`Heed::Deadlines`]; returns early at a look-now request or when
    /// `shutdown` is cancelled. Heard deadlines stay heard: the next
    /// [`take`](Self::take) returns them.
    pub(crate) async fn sleep_until(
        &self,
        until: Micros,
        heed: Heed,
        shutdown: &CancellationToken,
    ) -> Slept {
        let mut until = until;
        let mut slept = Slept::default();
        // Working again however the sleep ends, dropped mid-way included.
        let _working_on_return = WorkingOnDrop(self);
        loop {
            let wake_before = match heed {
                Heed::Deadlines => until,
                Heed::LookNowOnly => LOOK_NOW + 1,
            };
            // Publish, then re-read: the order the module docs rely on.
            self.publish(wake_before);
            let heard = self.heard();
            if heard == LOOK_NOW {
                slept.asked_to_look = true;
                break;
            }
            if heard < wake_before {
                slept.shortened += 1;
                until = heard;
                // Publish the nearer end, so only a deadline before it wakes.
                continue;
            }
            let left = until.saturating_sub(now_us());
            if left <= 0 {
                break;
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_micros(left as u64)) => break,
                // A wake, or a stale permit: re-read either way.
                _ = self.notify.notified() => {}
            }
        }
        slept
    }

    /// The waker's first step: keep the earliest deadline heard.
    fn note(&self, at: Micros) {
        self.heard.fetch_min(at, SeqCst);
    }

    /// The waker's second step: whether the sleeper sleeps past `at`.
    fn sleeps_past(&self, at: Micros) -> bool {
        at < self.wake_before.load(SeqCst)
    }

    /// The sleeper's first step: when a heard deadline must wake it.
    fn publish(&self, wake_before: Micros) {
        self.wake_before.store(wake_before, SeqCst);
    }

    /// The sleeper's second step: the earliest deadline heard.
    fn heard(&self) -> Micros {
        self.heard.load(SeqCst)
    }
}

/// Publishes [`WORKING`] when dropped: a sleep that returns, or whose
/// future is dropped, leaves no end of sleep behind for wakers to notify.
struct WorkingOnDrop<'a>(&'a DeadlineWaker);

impl Drop for WorkingOnDrop<'_> {
    fn drop(&mut self) {
        self.0.publish(WORKING);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Far enough that a sleep until it never ends during a test.
    const HOUR_US: Micros = 3_600_000_000;

    /// Polls once: whether the future finished, without waiting for it.
    fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// A sleep begun (polled once, and still asleep), to poll on.
    fn asleep<'a>(
        waker: &'a DeadlineWaker,
        until: Micros,
        heed: Heed,
        shutdown: &'a CancellationToken,
    ) -> std::pin::Pin<Box<impl Future<Output = Slept> + 'a>> {
        let mut sleep = Box::pin(waker.sleep_until(until, heed, shutdown));
        assert!(poll_once(sleep.as_mut()).is_pending(), "asleep");
        sleep
    }

    /// Whether a permit is stored (a wake that would end the next sleep's
    /// wait at once); consumes it.
    fn permit_stored(waker: &DeadlineWaker) -> bool {
        poll_once(pin!(waker.notify.notified())).is_ready()
    }

    /// The sleeper's two steps and the waker's two, in every order each
    /// side keeps its own: in each, the sleeper sees the deadline before it
    /// waits or the waker sees the sleeper asleep and notifies. With the
    /// sleeper's steps the other way round (read what was heard, then
    /// publish: redis-zset before 521c0e9) one interleaving loses the
    /// wake, which shows this check can fail.
    #[test]
    fn every_interleaving_of_a_wake_and_a_sleep_is_seen_by_one_side() {
        #[derive(Clone, Copy, PartialEq)]
        enum Step {
            Publish,
            ReadHeard,
            Note,
            SleepsPast,
        }
        use Step::*;
        // Whether the wake is lost when the steps run in `order`.
        let lost = |order: [Step; 4]| {
            let (waker, until, deadline) = (DeadlineWaker::default(), 2_000, 1_000);
            let (mut seen, mut notified) = (false, false);
            for step in order {
                match step {
                    Publish => waker.publish(until),
                    ReadHeard => seen = waker.heard() < until,
                    Note => waker.note(deadline),
                    SleepsPast => notified = waker.sleeps_past(deadline),
                }
            }
            !seen && !notified
        };
        // The interleavings of two two-step sequences, each in its order.
        let interleavings = |sleeper: [Step; 2]| {
            let waker = [Note, SleepsPast];
            let mut all = Vec::new();
            for sleeper_slots in [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]] {
                let (mut s, mut w) = (sleeper.iter(), waker.iter());
                let order: [Step; 4] = std::array::from_fn(|i| {
                    *if sleeper_slots.contains(&i) {
                        s.next()
                    } else {
                        w.next()
                    }
                    .expect("two steps each")
                });
                all.push(order);
            }
            all
        };
        for order in interleavings([Publish, ReadHeard]) {
            assert!(!lost(order), "publish then read lost a wake");
        }
        assert!(
            interleavings([ReadHeard, Publish])
                .into_iter()
                .any(|order| order == [ReadHeard, Note, SleepsPast, Publish] && lost(order)),
            "read then publish must lose the wake that comes between"
        );
    }

    /// The race that was once lost: the sleeper looked, a deadline came
    /// while it worked (nobody notified), then it went to sleep. The sleep
    /// is shortened to that deadline; one already due ends it at once.
    #[tokio::test]
    async fn a_deadline_heard_while_working_shortens_the_next_sleep() {
        let (waker, shutdown) = (DeadlineWaker::default(), CancellationToken::new());
        waker.take();
        let soon = now_us() + HOUR_US;
        waker.wake_for(soon);
        assert!(!permit_stored(&waker), "a worker is not notified");
        let sleep = asleep(&waker, soon + HOUR_US, Heed::Deadlines, &shutdown);
        assert_eq!(waker.wake_before.load(SeqCst), soon, "sleeps until it");
        drop(sleep);
        assert_eq!(
            waker.wake_before.load(SeqCst),
            WORKING,
            "dropped: not asleep"
        );

        waker.take();
        waker.wake_for(now_us() - 1);
        let slept = waker
            .sleep_until(now_us() + HOUR_US, Heed::Deadlines, &shutdown)
            .await;
        assert_eq!(
            slept,
            Slept {
                shortened: 1,
                asked_to_look: false
            }
        );
        assert_eq!(waker.wake_before.load(SeqCst), WORKING);
    }

    /// A nearer deadline wakes a sleeper that already waits; a later one
    /// does not, and leaves no permit behind.
    #[tokio::test]
    async fn only_a_nearer_deadline_wakes_a_sleeper() {
        let (waker, shutdown) = (DeadlineWaker::default(), CancellationToken::new());
        let until = now_us() + HOUR_US;
        let mut sleep = asleep(&waker, until, Heed::Deadlines, &shutdown);
        waker.wake_for(until + 1);
        assert!(poll_once(sleep.as_mut()).is_pending());
        assert!(!permit_stored(&waker));
        waker.wake_for(now_us() - 1);
        let Poll::Ready(slept) = poll_once(sleep.as_mut()) else {
            panic!("a due deadline must end the sleep");
        };
        assert_eq!(slept.shortened, 1);
        assert!(slept.woken());
        assert!(waker.take() < until, "the heard deadline stays heard");
    }

    /// While the sleeper works, a burst of schedules stores no permit (no
    /// extra round each), and the nearest of them is what the sleep keeps.
    #[tokio::test]
    async fn a_burst_during_work_costs_no_extra_round() {
        let (waker, shutdown) = (DeadlineWaker::default(), CancellationToken::new());
        waker.take();
        let base = now_us() + HOUR_US;
        for k in (0..100).rev() {
            waker.wake_for(base + k);
        }
        assert!(!permit_stored(&waker));
        let _sleep = asleep(&waker, base + HOUR_US, Heed::Deadlines, &shutdown);
        assert_eq!(waker.wake_before.load(SeqCst), base);
    }

    /// A permit left by a wake that came as a sleep ended (the waker read
    /// its end just before) wakes the next sleep once for nothing: it
    /// re-reads, finds nothing earlier, and sleeps on.
    #[tokio::test]
    async fn a_stale_permit_does_not_end_the_next_sleep() {
        let (waker, shutdown) = (DeadlineWaker::default(), CancellationToken::new());
        let until = now_us() + HOUR_US;
        waker.notify.notify_one();
        let mut sleep = asleep(&waker, until, Heed::Deadlines, &shutdown);
        assert!(!permit_stored(&waker), "the permit was consumed");
        assert_eq!(waker.wake_before.load(SeqCst), until);
        shutdown.cancel();
        assert_eq!(poll_once(sleep.as_mut()), Poll::Ready(Slept::default()));
    }

    /// A look-now request ends a sleep of either kind, asleep or not yet;
    /// a deadline does not end a look-now-only sleep.
    #[tokio::test]
    async fn look_now_ends_any_sleep_and_deadlines_not_a_standbys() {
        let (waker, shutdown) = (DeadlineWaker::default(), CancellationToken::new());
        let until = now_us() + HOUR_US;
        let mut standby = asleep(&waker, until, Heed::LookNowOnly, &shutdown);
        waker.wake_for(now_us() - 1);
        assert!(poll_once(standby.as_mut()).is_pending());
        waker.look_now();
        let Poll::Ready(slept) = poll_once(standby.as_mut()) else {
            panic!("look-now must end the sleep");
        };
        assert!(slept.asked_to_look);
        assert_eq!(waker.take(), LOOK_NOW);

        waker.look_now();
        assert!(!permit_stored(&waker), "a worker is not notified");
        let slept = waker.sleep_until(until, Heed::Deadlines, &shutdown).await;
        assert!(slept.asked_to_look && slept.shortened == 0);
    }
}
