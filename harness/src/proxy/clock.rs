//! Sleeping until a chunk's hold time with sub-millisecond precision.
//!
//! tokio's timer wheel ticks once a millisecond and rounds every sleep up
//! to the next tick, so a 250 µs hold (half a same-zone round trip) would
//! come out anywhere between 1 and 2 ms: the "0.5 ms" profile would add 2 to
//! 4 ms a round trip. A `timerfd` (an hrtimer the kernel wakes epoll for)
//! is precise to the kernel's timer slack (50 µs by default), and waits on
//! the runtime like any socket, with no thread of its own. Where no
//! `timerfd` can be made, the tokio timer is used and the overshoot the
//! proxy records shows the difference.

use std::io;
use tokio::time::Instant;

/// Asks the kernel to wake this thread's timers within a microsecond
/// rather than its default 50 µs slack: a proxy's hold is armed by the
/// runtime thread that runs it, and a same-zone hold is 250 µs, so the
/// default slack alone was a fifth of it. Called on every runtime thread
/// as it starts. It makes wake-ups of the harness's own timers precise
/// too; it changes nothing the services or the workers do.
pub fn precise_timers() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_timerslack(1_000) {
        tracing::debug!(error = %e, "cannot lower the timer slack; holds may run up to 50 µs late");
    }
}

/// One writer's clock: made once per direction of a connection, on its
/// first hold.
#[derive(Debug)]
pub(super) struct HoldClock {
    #[cfg(target_os = "linux")]
    timer: Option<tokio::io::unix::AsyncFd<linux::Timer>>,
}

impl HoldClock {
    pub(super) fn new() -> HoldClock {
        HoldClock {
            #[cfg(target_os = "linux")]
            timer: match linux::Timer::new().and_then(linux::register) {
                Ok(timer) => Some(timer),
                Err(e) => {
                    tracing::warn!(error = %e, "fault proxy: no timerfd; holds are rounded up to tokio's 1 ms tick");
                    None
                }
            },
        }
    }

    /// Returns at `at` or a little after; at once when `at` has passed.
    pub(super) async fn sleep_until(&mut self, at: Instant) {
        let now = Instant::now();
        if at <= now {
            return;
        }
        #[cfg(target_os = "linux")]
        if let Some(timer) = &self.timer {
            match wait(timer, at).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "fault proxy: timerfd failed; falling back to tokio's timer");
                    self.timer = None;
                }
            }
        }
        tokio::time::sleep_until(at).await;
    }
}

#[cfg(target_os = "linux")]
async fn wait(timer: &tokio::io::unix::AsyncFd<linux::Timer>, at: Instant) -> io::Result<()> {
    // Until `at` by our own clock: an expiry left over from a wait that was
    // dropped half-way (its connection cut) must not end this one early.
    loop {
        let now = Instant::now();
        if at <= now {
            return Ok(());
        }
        timer.get_ref().arm(at - now)?;
        loop {
            let mut ready = timer.readable().await?;
            match ready.try_io(|fd| fd.get_ref().expired()) {
                Ok(result) => break result?,
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, RawFd};
    use std::time::Duration;

    /// A non-blocking monotonic timerfd, as `AsyncFd` wants it.
    #[derive(Debug)]
    pub(super) struct Timer(TimerFd);

    impl Timer {
        pub(super) fn new() -> io::Result<Timer> {
            TimerFd::new(
                ClockId::CLOCK_MONOTONIC,
                TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
            )
            .map(Timer)
            .map_err(io::Error::from)
        }

        /// Fires once, `after` from now (a zero would disarm it, so at
        /// least a nanosecond).
        pub(super) fn arm(&self, after: Duration) -> io::Result<()> {
            let after = after.max(Duration::from_nanos(1));
            self.0
                .set(
                    Expiration::OneShot(TimeSpec::from_duration(after)),
                    TimerSetTimeFlags::empty(),
                )
                .map_err(io::Error::from)
        }

        /// Consumes the expiry; `WouldBlock` while it has not fired.
        pub(super) fn expired(&self) -> io::Result<()> {
            self.0.wait().map_err(io::Error::from)
        }
    }

    /// On the runtime. tokio 1.54 deprecated the safe `AsyncFd::new` for
    /// types whose fd someone else could close while it is registered
    /// (tokio#8587), and its replacement is `unsafe`, which this crate
    /// forbids. Here the `AsyncFd` owns the `Timer`, which owns its fd
    /// (`OwnedFd` inside `TimerFd`) and never hands it out, so the fd
    /// lives exactly as long as the registration.
    #[allow(deprecated)]
    pub(super) fn register(timer: Timer) -> io::Result<tokio::io::unix::AsyncFd<Timer>> {
        tokio::io::unix::AsyncFd::new(timer)
    }

    impl AsRawFd for Timer {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HoldClock;
    use std::time::Duration;
    use tokio::time::Instant;

    /// A lower bound only (the machine may always be slower): the clock
    /// never wakes early, and a time already past returns at once.
    #[tokio::test]
    async fn never_wakes_before_the_hold() {
        let mut clock = HoldClock::new();
        #[cfg(target_os = "linux")]
        assert!(clock.timer.is_some(), "no timerfd on Linux");
        for micros in [1, 50, 250, 1_000, 3_000] {
            let at = Instant::now() + Duration::from_micros(micros);
            clock.sleep_until(at).await;
            assert!(Instant::now() >= at, "woke before a {micros} µs hold");
        }
        clock
            .sleep_until(Instant::now() - Duration::from_millis(1))
            .await;
    }
}
