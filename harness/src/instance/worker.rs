//! The worker side: `delaybench worker`, one canceller instance in its own
//! process, reading commands on stdin and flushing on stdout.

use super::protocol::{
    lock, AnswerLine, Flush, RoleAnswer, WorkerSpec, FLUSH_EVERY, SCHEDULES_IN_FLIGHT,
};
use crate::model::WorkerReport;
use anyhow::{bail, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strategies::registry::Deployment;
use strategies::{now_us, outbox, Micros, OrderId, OrderStore, StoreStats, StrategyCounters};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The counters a worker's measured window starts from.
#[derive(Debug, Clone, Default)]
struct Baseline {
    store: StoreStats,
    counters: StrategyCounters,
    cpu_ms: u64,
    flush_us: u64,
}

/// What a worker measures besides its canceller's counters.
#[derive(Debug, Default)]
struct WorkerState {
    schedule_errors: AtomicU64,
    schedules_retried: AtomicU64,
    schedules_dropped: AtomicU64,
    relay: Arc<outbox::RelayCounters>,
    schedules: Mutex<Vec<(OrderId, u64)>>,
    /// Whether `schedules` is kept (`measure.schedule-times`).
    schedule_times: bool,
    baseline: Mutex<Option<Baseline>>,
    /// CPU spent building and encoding flushes, µs, since the start.
    flush_us: AtomicU64,
    /// The peak RSS last read, and how many flushes ago.
    peak_rss: Mutex<(u64, u32)>,
}

/// Flushes between two readings of the peak RSS (a `/proc` read, the
/// costliest part of a flush): a process that dies reports a peak up to
/// this many seconds old; a clean stop reads it fresh.
const PEAK_RSS_EVERY: u32 = 10;

impl WorkerState {
    /// The peak RSS, read afresh every [`PEAK_RSS_EVERY`] flushes and on
    /// the `last` one.
    fn peak_rss(&self, last: bool) -> u64 {
        let mut cached = lock(&self.peak_rss);
        if last || cached.1 == 0 || cached.0 == 0 {
            *cached = (peak_rss_kib(), PEAK_RSS_EVERY);
        }
        cached.1 -= 1;
        cached.0
    }

    /// Adds this thread's CPU since `started` ([`thread_cpu_us`]) to the
    /// flushes' own cost.
    fn count_flush(&self, started: u64) {
        self.flush_us
            .fetch_add(thread_cpu_us().saturating_sub(started), Ordering::Relaxed);
    }

    fn scheduled(&self, id: OrderId, committed_at_us: Micros) {
        if self.schedule_times {
            lock(&self.schedules).push((id, (now_us() - committed_at_us).max(0) as u64));
        }
    }
}

/// How long a stopping worker waits for its strategy and relay to return.
const STOP_WITHIN: Duration = Duration::from_secs(15);

/// Pause before the first retry of a failed schedule; it doubles up to 1 s.
const RETRY_FIRST_PAUSE: Duration = Duration::from_millis(100);

/// Retries a schedule that just failed, holding one `slot` of the bounded
/// retry buffer, until it succeeds, `give_up_after` has passed since this
/// first failure (one last try at that moment), or the worker stops. Each
/// schedule is counted once: made, or dropped.
async fn retry_schedule(
    canceller: Arc<dyn strategies::Canceller>,
    state: Arc<WorkerState>,
    slot: tokio::sync::OwnedSemaphorePermit,
    give_up_after: Duration,
    stopping: CancellationToken,
    (id, at, committed): (OrderId, Micros, Micros),
) {
    state.schedules_retried.fetch_add(1, Ordering::Relaxed);
    let give_up = Instant::now() + give_up_after;
    let mut pause = RETRY_FIRST_PAUSE;
    loop {
        let left = give_up.saturating_duration_since(Instant::now());
        if left.is_zero() {
            state.schedules_dropped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                order = id,
                "schedule dropped after {give_up_after:?} of retries"
            );
            break;
        }
        tokio::select! {
            _ = stopping.cancelled() => {
                state.schedules_dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(order = id, "schedule dropped: the worker stopped while retrying it");
                break;
            }
            _ = tokio::time::sleep(pause.min(left)) => {}
        }
        pause = (pause * 2).min(Duration::from_secs(1));
        match canceller.schedule(id, at).await {
            Ok(()) => {
                state.scheduled(id, committed);
                break;
            }
            Err(_) => {
                state.schedule_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    drop(slot);
}

/// The `delaybench worker` entry point: runs one instance until stdin closes.
pub async fn worker_main() -> Result<()> {
    let spec: WorkerSpec = crate::child::spec("delaybench worker")?;
    // On an agent's host, the clock moved onto the harness's.
    crate::child::set_clock(spec.clock_correction_us);
    let store = OrderStore::connect_as(&spec.location, 4, Some(&spec.session)).await?;
    if spec.measure.commit_times {
        store.log_cancel_commits();
    }
    // The canceller's own server-side reads, apart from the workload's
    // (PostgreSQL; a no-op elsewhere, and the report says so), sampled so
    // that every strategy pays the same reading per second.
    store.set_server_reads(spec.measure.server_reads());
    let options = spec.instance_options();
    let deployment = Deployment::new(spec.strategy, &options);
    let canceller: Arc<dyn strategies::Canceller> = deployment.instance(store.clone())?.into();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (canceller, shutdown) = (canceller.clone(), shutdown.clone());
        async move { canceller.run(shutdown).await }
    });
    let state = Arc::new(WorkerState {
        schedule_times: spec.measure.schedule_times,
        ..WorkerState::default()
    });
    // +outbox: the creating transactions wrote the schedule requests; this
    // instance's relay hands them to the strategy.
    let relay = deployment.relays_outbox().then(|| {
        let state = Arc::clone(&state);
        tokio::spawn(outbox::relay(
            store.clone(),
            Arc::clone(&canceller),
            Arc::clone(&state.relay),
            shutdown.clone(),
            move |id, created| state.scheduled(id, created),
        ))
    });
    // A wheel reloads PENDING orders as `run` starts: ready only after
    // that, so a backlog written next reaches it through `schedule` alone.
    while !canceller.started() && !run.is_finished() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut out = tokio::io::stdout();
    out.write_all(format!("{}\n", crate::child::READY_LINE).as_bytes())
        .await?;
    out.flush().await?;

    let retry_slots = Arc::new(Semaphore::new(spec.retry.buffer as usize));
    let retry_stop = CancellationToken::new();
    let in_flight = Arc::new(Semaphore::new(SCHEDULES_IN_FLIGHT));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut flush_timer = tokio::time::interval(FLUSH_EVERY);
    flush_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            line = lines.next_line() => {
                let Some(line) = line? else { break };
                let mut parts = line.split_ascii_whitespace();
                match (parts.next(), parts.next(), parts.next(), parts.next()) {
                    (Some("s"), Some(id), Some(at), Some(committed)) => {
                        let id = id.parse::<OrderId>()?;
                        let at = at.parse::<Micros>()?;
                        let committed = committed.parse::<Micros>()?;
                        let permit = Arc::clone(&in_flight).acquire_owned().await?;
                        let (canceller, state) = (Arc::clone(&canceller), Arc::clone(&state));
                        let (slots, give_up) = (Arc::clone(&retry_slots), spec.retry.give_up_after);
                        let stopping = retry_stop.clone();
                        tokio::spawn(async move {
                            let result = canceller.schedule(id, at).await;
                            if let Err(e) = &result {
                                state.schedule_errors.fetch_add(1, Ordering::Relaxed);
                                tracing::debug!(order = id, error = %e, "schedule failed");
                            }
                            // A retry takes its buffer slot before the
                            // in-flight slot frees, so a stopping worker
                            // always sees it; it then waits in the buffer,
                            // not ahead of new orders.
                            let slot = result
                                .is_err()
                                .then(|| slots.try_acquire_owned().ok())
                                .flatten();
                            drop(permit);
                            match (result, slot) {
                                (Ok(()), _) => state.scheduled(id, committed),
                                (Err(_), Some(slot)) if !give_up.is_zero() => {
                                    retry_schedule(canceller, state, slot, give_up, stopping, (id, at, committed)).await;
                                }
                                (Err(_), _) => {
                                    state.schedules_dropped.fetch_add(1, Ordering::Relaxed);
                                    tracing::debug!(order = id, "schedule dropped: no retry (buffer full or retries off)");
                                }
                            }
                        });
                    }
                    (Some("f"), Some(id), None, None) => {
                        // Paid: the strategy drops the order's timer. In
                        // flight like a schedule, so a slow backend holds
                        // back the stdin reader rather than piling up.
                        let id = id.parse::<OrderId>()?;
                        let permit = Arc::clone(&in_flight).acquire_owned().await?;
                        let canceller = Arc::clone(&canceller);
                        tokio::spawn(async move {
                            if let Err(e) = canceller.paid(id).await {
                                tracing::debug!(order = id, error = %e, "dropping a paid order's timer failed");
                            }
                            drop(permit);
                        });
                    }
                    (Some("c"), Some(point), None, None) => {
                        strategies::crash::arm(point.parse()?);
                    }
                    (Some("p"), Some(point), None, None) => {
                        strategies::crash::arm_stall(point.parse()?);
                    }
                    (Some("d"), None, None, None) => strategies::crash::disarm_all(),
                    (Some("r"), Some(asked), None, None) => {
                        // Who it is now, straight from the strategy.
                        let answer = AnswerLine {
                            answer: RoleAnswer {
                                asked: asked.parse()?,
                                role: canceller.role(),
                            },
                        };
                        write_line(&mut out, &format!("{}\n", serde_json::to_string(&answer)?)).await?;
                    }
                    (Some("b"), None, None, None) => {
                        // Every schedule sent before this has returned once
                        // all permits are free again.
                        drop(in_flight.acquire_many(SCHEDULES_IN_FLIGHT as u32).await?);
                        let started = thread_cpu_us();
                        let mut flush = flush_of(&spec, &*canceller, &store, &state, None, false);
                        flush.barrier = true;
                        let line = encode_line(&flush)?;
                        state.count_flush(started);
                        write_line(&mut out, &line).await?;
                    }
                    (Some("m"), None, None, None) => {
                        *lock(&state.baseline) = Some(Baseline {
                            store: canceller.store_stats(),
                            counters: canceller.counters(),
                            cpu_ms: cpu_ms(),
                            flush_us: state.flush_us.load(Ordering::Relaxed),
                        });
                    }
                    _ => bail!("worker: unexpected command {line:?}"),
                }
            }
            _ = flush_timer.tick() => {
                let started = thread_cpu_us();
                let flush = flush_of(&spec, &*canceller, &store, &state, None, false);
                let line = encode_line(&flush)?;
                state.count_flush(started);
                write_line(&mut out, &line).await?;
            }
        }
    }
    // Let the schedules in flight finish before stopping (bounded: one
    // stuck call must not keep the worker from reporting); those still
    // waiting in the retry buffer give up, each counting itself dropped.
    let mut stuck = Vec::new();
    let in_flight_done = tokio::time::timeout(
        STOP_WITHIN,
        in_flight.acquire_many(SCHEDULES_IN_FLIGHT as u32),
    )
    .await;
    if in_flight_done.is_err() {
        let n = SCHEDULES_IN_FLIGHT - in_flight.available_permits();
        state
            .schedules_dropped
            .fetch_add(n as u64, Ordering::Relaxed);
        stuck.push(format!(
            "{n} schedule calls did not return within {STOP_WITHIN:?} (counted dropped)"
        ));
    }
    retry_stop.cancel();
    let buffer = spec.retry.buffer;
    if tokio::time::timeout(STOP_WITHIN, retry_slots.acquire_many(buffer))
        .await
        .is_err()
    {
        let n = buffer as usize - retry_slots.available_permits();
        state
            .schedules_dropped
            .fetch_add(n as u64, Ordering::Relaxed);
        stuck.push(format!(
            "{n} retried schedule calls did not return within {STOP_WITHIN:?} (counted dropped)"
        ));
    }
    shutdown.cancel();
    // Bounded, so one stuck call cannot keep the worker from reporting:
    // what did not stop in time is named in `run_error`.
    if let Some(relay) = relay {
        if tokio::time::timeout(STOP_WITHIN, relay).await.is_err() {
            stuck.push(format!(
                "the outbox relay did not stop within {STOP_WITHIN:?}"
            ));
        }
    }
    let run_error = match tokio::time::timeout(STOP_WITHIN, run).await {
        Ok(Ok(Ok(()))) => None,
        Ok(Ok(Err(e))) => Some(e.to_string()),
        Ok(Err(e)) => Some(format!("run task panicked: {e}")),
        Err(_) => Some(format!("the strategy did not stop within {STOP_WITHIN:?}")),
    };
    let run_error = match (run_error, stuck.is_empty()) {
        (e, true) => e,
        (Some(e), false) => Some(format!("{e}; {}", stuck.join("; "))),
        (None, false) => Some(stuck.join("; ")),
    };
    let flush = flush_of(&spec, &*canceller, &store, &state, run_error, true);
    write_line(&mut out, &encode_line(&flush)?).await
}

/// A flush as the line the harness reads.
fn encode_line(flush: &Flush) -> Result<String> {
    Ok(format!("{}\n", serde_json::to_string(flush)?))
}

async fn write_line(out: &mut tokio::io::Stdout, line: &str) -> Result<()> {
    out.write_all(line.as_bytes()).await?;
    out.flush().await?;
    Ok(())
}

/// CPU time of the calling thread, µs: what building a flush costs, apart
/// from whatever else the machine runs meanwhile (wall time off Unix).
fn thread_cpu_us() -> u64 {
    #[cfg(unix)]
    {
        use nix::time::{clock_gettime, ClockId};
        clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map(|t| t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1000)
            .unwrap_or(0)
    }
    #[cfg(not(unix))]
    {
        now_us() as u64
    }
}

/// The worker's counters now, and what it measured since the last flush.
fn flush_of(
    spec: &WorkerSpec,
    canceller: &dyn strategies::Canceller,
    store: &OrderStore,
    state: &WorkerState,
    run_error: Option<String>,
    last: bool,
) -> Flush {
    let total = canceller.store_stats();
    let counters = canceller.counters();
    let cpu_total = cpu_ms();
    let baseline = lock(&state.baseline).clone();
    let flush_total = state.flush_us.load(Ordering::Relaxed);
    let flush_measured = baseline
        .as_ref()
        .map_or(0, |b| flush_total.saturating_sub(b.flush_us));
    let (measured, counters_measured, cpu_measured) = match &baseline {
        Some(b) => (
            total.since(&b.store),
            counters
                .iter()
                .map(|(k, v)| {
                    let before = b.counters.get(k).copied().unwrap_or(0);
                    (k.clone(), v.saturating_sub(before))
                })
                .collect(),
            cpu_total.saturating_sub(b.cpu_ms),
        ),
        None => Default::default(),
    };
    Flush {
        report: WorkerReport {
            instance: spec.instance,
            pid: std::process::id(),
            total,
            measured,
            counters,
            counters_measured,
            schedule_errors: state.schedule_errors.load(Ordering::Relaxed),
            schedules_retried: state.schedules_retried.load(Ordering::Relaxed),
            schedules_dropped: state.schedules_dropped.load(Ordering::Relaxed),
            schedules_lost_with_process: 0, // the harness's count, for dead processes
            outbox_relayed: state.relay.relayed.load(Ordering::Relaxed),
            outbox_failed: state.relay.failed.load(Ordering::Relaxed),
            cpu_ms: cpu_measured,
            peak_rss_kib: state.peak_rss(last),
            run_error,
            complete: last,
            end: None,
            role: canceller.role(),
            flush_us: flush_measured,
        },
        cancel_commits: store.take_cancel_commits(),
        absorbed: store.take_absorbed_attempts(),
        schedules: std::mem::take(&mut *lock(&state.schedules)),
        last,
        barrier: false,
    }
}

/// User + system CPU of this process in ms, from `getrusage(RUSAGE_SELF)`
/// (µs resolution, truncated to whole ms). 0 where there is no getrusage.
fn cpu_ms() -> u64 {
    #[cfg(unix)]
    {
        use nix::sys::resource::{getrusage, UsageWho};
        use nix::sys::time::TimeValLike;
        getrusage(UsageWho::RUSAGE_SELF)
            .map(|u| {
                let us = u.user_time().num_microseconds() + u.system_time().num_microseconds();
                u64::try_from(us).unwrap_or(0) / 1000
            })
            .unwrap_or(0)
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// Peak RSS of this process in KiB. On Linux its own high-water mark
/// (VmHWM in `/proc/self/status`, which `sysinfo` does not give):
/// getrusage's `ru_maxrss` is not, as Linux folds into it the RSS of the
/// address space the process replaced at exec (for a worker, the harness
/// that spawned it). Elsewhere on Unix `ru_maxrss` (bytes on macOS). 0
/// where neither exists.
fn peak_rss_kib() -> u64 {
    #[cfg(target_os = "linux")]
    {
        crate::resources::own_status_kib("VmHWM").unwrap_or(0)
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        use nix::sys::resource::{getrusage, UsageWho};
        let max_rss = getrusage(UsageWho::RUSAGE_SELF)
            .map(|u| u64::try_from(u.max_rss()).unwrap_or(0))
            .unwrap_or(0);
        if cfg!(any(target_os = "macos", target_os = "ios")) {
            max_rss / 1024
        } else {
            max_rss
        }
    }
    #[cfg(not(unix))]
    {
        0
    }
}

#[cfg(all(test, unix))]
mod rusage_tests {
    #[test]
    fn cpu_time_comes_from_getrusage_and_peak_rss_is_this_processs_own() {
        // Spinning adds CPU time. The check does not depend on how busy the
        // machine is: the spin runs until getrusage has seen 50 ms (a fixed
        // wall-clock spin got 20 ms of CPU on a loaded machine), and the cap
        // only stops a broken counter from hanging the test.
        let before = super::cpu_ms();
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let mut x = 0u64;
        while super::cpu_ms() - before < 50 {
            assert!(
                std::time::Instant::now() < give_up,
                "getrusage saw {} ms of CPU in 120 s of spinning",
                super::cpu_ms() - before
            );
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
        let rss = super::peak_rss_kib();
        assert!(rss > 1024, "{rss} KiB");
        // Linux's own high-water mark, read again, is about the same (a
        // figure that counted the pre-exec image, as ru_maxrss does, would
        // be far above it). Not exactly: the test threads of this process
        // allocate between the reads, and VmHWM can even fall, as Linux
        // records the mark lazily (pages an allocator gives back with
        // madvise lower the figure it shows).
        if let Some(hwm) = crate::resources::own_status_kib("VmHWM") {
            assert!(
                rss.abs_diff(hwm) <= hwm / 10 + 1024,
                "{rss} KiB vs VmHWM {hwm} KiB"
            );
        }
    }
}
