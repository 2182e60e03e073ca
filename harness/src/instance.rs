//! Canceller instances as separate OS processes, so a kill is real.
//!
//! The harness starts `delaybench worker` once per instance with a
//! [`WorkerSpec`] in the environment. The protocol is line-based:
//! - worker -> harness (stdout): `{"ready":true}` once running, then a
//!   [`Flush`] JSON line at least every [`FLUSH_EVERY`] and one last flush
//!   (`"last": true`) when it stops. A flush carries the worker's counters so
//!   far and what it measured since the previous flush, so a worker that dies
//!   of anything (the OOM killer, an operator's `kill -9`, a panic) loses at
//!   most its last second;
//! - harness -> worker (stdin): `s <order_id> <expire_at_us> <committed_at_us>`
//!   to schedule, `m` to start measuring (end of warm-up), `b` for a
//!   barrier (the worker flushes with `"barrier": true` once every
//!   schedule sent before it has returned), `c <point>` / `p <point>` to
//!   arm a crash or a stall at a crash point, `d` to disarm them; EOF to
//!   stop.
//!
//! A worker that dies without its last flush is an event of the run
//! ([`WorkerEvent`]): the pool keeps its measurements, sends new orders to
//! the live instances and, if the scenario says so, starts a fresh process.
//! Logs go to stderr, which the worker inherits.

use crate::model::{WorkerEvent, WorkerEventKind, WorkerReport};
use crate::scenario::{Measure, ScheduleRetry};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use strategies::{
    now_us, outbox, registry, DbLocation, Micros, OrderId, OrderStore, StoreStats,
    StrategyCounters, StrategyOptions,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const SPEC_ENV: &str = "DELAYBENCH_WORKER_SPEC";
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a worker sends its counters and timings to the harness: the
/// most a worker's death can lose.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Schedules a worker keeps in flight at once (publisher confirms, Redis
/// round trips), so one slow confirm does not hold up the orders behind it.
pub const SCHEDULES_IN_FLIGHT: usize = 64;

/// What a worker process runs. Passed in the environment, not argv, so the
/// database password never shows in `ps`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The strategy as `--strategies` names it, remedies included
    /// (`redis-zset+outbox+fallback`, see [`registry::Variant`]).
    pub strategy: String,
    pub instance: u32,
    /// Where the database is, as this worker reaches it (through the
    /// harness's fault proxy when the scenario has network faults).
    pub location: DbLocation,
    pub options: StrategyOptions,
    /// The label of its database sessions, shared by every instance of the
    /// strategy, so `kill-db-connections` finds them.
    pub session: String,
    pub retry: ScheduleRetry,
    /// The probes and recorders on its path.
    pub measure: Measure,
}

/// One line a worker sends after `ready`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Flush {
    /// Counters since the process started (and since the warm-up ended).
    report: WorkerReport,
    /// `(order id, when its cancel's COMMIT returned)`, since the previous flush.
    cancel_commits: Vec<(OrderId, Micros)>,
    /// `(order id, us from the order's commit to schedule() returning)`,
    /// since the previous flush.
    schedules: Vec<(OrderId, u64)>,
    /// `(order id, when)` of the attempts absorbed since the previous flush.
    #[serde(default)]
    absorbed: Vec<(OrderId, Micros)>,
    /// The worker is stopping cleanly; nothing follows.
    last: bool,
    /// Sent for a `b` command: every schedule before it has returned.
    #[serde(default)]
    barrier: bool,
}

/// Everything one worker process sent, kept by the harness whatever
/// happens to the process.
#[derive(Debug, Default)]
struct ProcessLog {
    report: WorkerReport,
    cancel_commits: Vec<(OrderId, Micros)>,
    schedules: Vec<(OrderId, u64)>,
    absorbed: Vec<(OrderId, Micros)>,
    /// Schedules sent to it (`s` commands written to its stdin).
    sent: u64,
    /// Its last flush arrived: the counters are complete.
    stopped_cleanly: bool,
    /// Barrier flushes received.
    barriers: u64,
}

type SharedLog = Arc<Mutex<ProcessLog>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves the data usable.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A running worker process.
#[derive(Debug)]
struct Instance {
    child: Child,
    pid: u32,
    commands: mpsc::UnboundedSender<String>,
    writer: JoinHandle<()>,
    reader: JoinHandle<()>,
    /// Cleared when its stdout closes: it is dead or stopping.
    alive: Arc<AtomicBool>,
    log: SharedLog,
}

impl Instance {
    /// Starts a worker and waits until it reports ready. When its stdout
    /// closes without a last flush, `(index, pid)` goes to `deaths`.
    async fn spawn(
        spec: &WorkerSpec,
        index: usize,
        deaths: mpsc::UnboundedSender<(usize, u32)>,
    ) -> Result<Instance> {
        let exe = std::env::current_exe().context("locating the delaybench binary")?;
        let mut child = Command::new(exe)
            .arg("worker")
            .env(SPEC_ENV, serde_json::to_string(spec)?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting a worker process")?;
        let pid = child.id().unwrap_or(0);
        let mut stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let ready = tokio::time::timeout(READY_TIMEOUT, stdout.next_line())
            .await
            .map_err(|_| {
                anyhow!(
                    "worker {} did not start within {READY_TIMEOUT:?}",
                    spec.instance
                )
            })?
            .context("reading from a worker")?;
        match ready.as_deref() {
            Some(r#"{"ready":true}"#) => {}
            other => {
                let status = child.wait().await.ok();
                bail!(
                    "worker {} of {} failed to start (said {other:?}, exit {status:?}); its error is above",
                    spec.instance,
                    spec.strategy
                )
            }
        }
        let (commands, mut rx) = mpsc::unbounded_channel::<String>();
        let writer = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() {
                    break; // the worker died; its reader reports it
                }
            }
            let _ = stdin.shutdown().await;
        });
        let log = SharedLog::default();
        lock(&log).report = WorkerReport {
            instance: spec.instance,
            pid,
            ..WorkerReport::default()
        };
        let alive = Arc::new(AtomicBool::new(true));
        let reader = tokio::spawn(read_flushes(
            stdout,
            Arc::clone(&log),
            Arc::clone(&alive),
            move || {
                let _ = deaths.send((index, pid));
            },
        ));
        Ok(Instance {
            child,
            pid,
            commands,
            writer,
            reader,
            alive,
            log,
        })
    }

    /// Asks the worker to schedule an order (in order, answered by nobody);
    /// false if the worker is gone.
    fn schedule(&self, order_id: OrderId, expire_at_us: Micros, committed_at_us: Micros) -> bool {
        let sent = self.alive.load(Ordering::SeqCst)
            && self
                .commands
                .send(format!("s {order_id} {expire_at_us} {committed_at_us}\n"))
                .is_ok();
        if sent {
            lock(&self.log).sent += 1;
        }
        sent
    }

    /// Asks for a barrier flush; returns the barrier count to wait past.
    fn barrier(&self) -> u64 {
        let seen = lock(&self.log).barriers;
        let _ = self.commands.send("b\n".to_string());
        seen
    }

    /// Tells the worker the warm-up is over: counters restart from here.
    fn start_measuring(&self) {
        let _ = self.commands.send("m\n".to_string());
    }

    /// SIGKILLs the worker and waits for it to die: nothing it held only in
    /// memory survives; what it flushed before is kept.
    async fn kill(mut self, why: &str) -> Result<()> {
        drop(self.commands);
        self.child.kill().await.context("killing a worker")?;
        self.writer.abort();
        let _ = self.reader.await;
        lock(&self.log).report.end = Some(why.to_string());
        Ok(())
    }

    /// Waits for a process whose stdout closed and notes how it ended.
    async fn reap(mut self) -> String {
        self.writer.abort();
        let _ = self.reader.await;
        let status = match tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("unknown exit ({e})"),
            Err(_) => {
                let _ = self.child.kill().await;
                "closed its output, killed after 5 s".to_string()
            }
        };
        lock(&self.log).report.end = Some(format!("died: {status}"));
        status
    }

    /// Stops the worker (EOF on stdin) and waits for its last flush.
    async fn stop(mut self) -> Result<()> {
        drop(self.commands);
        let _ = self.writer.await;
        if tokio::time::timeout(Duration::from_secs(60), &mut self.reader)
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
            lock(&self.log).report.end = Some("did not stop within 60 s; killed".into());
            return Ok(());
        }
        let status = self.child.wait().await.context("waiting for a worker")?;
        let mut log = lock(&self.log);
        log.report.end = Some(if log.stopped_cleanly {
            "stopped".to_string()
        } else {
            format!("died while stopping: {status}")
        });
        Ok(())
    }
}

/// Reads a worker's flushes into `log` until its stdout closes; calls
/// `died` if that happens before the last flush.
async fn read_flushes(
    mut stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    log: SharedLog,
    alive: Arc<AtomicBool>,
    died: impl FnOnce(),
) {
    while let Ok(Some(line)) = stdout.next_line().await {
        match serde_json::from_str::<Flush>(&line) {
            Ok(flush) => {
                let mut log = lock(&log);
                let (instance, pid) = (log.report.instance, log.report.pid);
                log.report = WorkerReport {
                    instance,
                    pid,
                    ..flush.report
                };
                log.cancel_commits.extend(flush.cancel_commits);
                log.schedules.extend(flush.schedules);
                log.absorbed.extend(flush.absorbed);
                log.stopped_cleanly |= flush.last;
                log.barriers += u64::from(flush.barrier);
            }
            Err(e) => tracing::warn!(error = %e, "ignoring a malformed line from a worker: {line}"),
        }
    }
    alive.store(false, Ordering::SeqCst);
    if !lock(&log).stopped_cleanly {
        died();
    }
}

/// What a strategy's instances did, collected when the pool stops: every
/// process that ever ran, dead or alive.
#[derive(Debug, Default)]
pub struct PoolRecord {
    /// One per process, in start order; a dead one's counters are those of
    /// its last flush (`complete: false`).
    pub reports: Vec<WorkerReport>,
    /// Deaths the harness did not cause, and restarts of dead instances.
    pub events: Vec<WorkerEvent>,
    /// `(order id, when its cancel's COMMIT returned)`.
    pub cancel_commits: Vec<(OrderId, Micros)>,
    /// `(order id, us from the order's commit to schedule() returning)`.
    pub schedules: Vec<(OrderId, u64)>,
    /// `(order id, when)` of every attempt absorbed as already decided.
    pub absorbed: Vec<(OrderId, Micros)>,
}

/// The canceller instances of one strategy's run. A new order goes to
/// instance `id % n` or, while that one is down, to the next live one (what a
/// load balancer does). Instances can be killed and restarted mid-run, and
/// die by themselves.
#[derive(Debug)]
pub struct Pool {
    specs: Vec<WorkerSpec>,
    slots: Vec<Mutex<Option<Instance>>>,
    measuring: AtomicBool,
    stopping: AtomicBool,
    /// Every process ever started, in order.
    logs: Mutex<Vec<SharedLog>>,
    events: Mutex<Vec<WorkerEvent>>,
    deaths: mpsc::UnboundedSender<(usize, u32)>,
    /// Times in events count from here (the first order).
    t0: OnceLock<Instant>,
    /// Start a fresh process this long after an instance died by itself.
    restart_dead_after: Option<Duration>,
}

impl Pool {
    /// Starts one worker per spec, in order, and watches them.
    pub async fn spawn(
        specs: Vec<WorkerSpec>,
        restart_dead_after: Option<Duration>,
    ) -> Result<Arc<Pool>> {
        let (deaths, mut died) = mpsc::unbounded_channel();
        let pool = Arc::new(Pool {
            slots: specs.iter().map(|_| Mutex::new(None)).collect(),
            specs,
            measuring: false.into(),
            stopping: false.into(),
            logs: Mutex::default(),
            events: Mutex::default(),
            deaths,
            t0: OnceLock::new(),
            restart_dead_after,
        });
        for index in 0..pool.specs.len() {
            let instance = pool.start(index).await?;
            *pool.slot(index) = Some(instance);
        }
        let watched: Weak<Pool> = Arc::downgrade(&pool);
        tokio::spawn(async move {
            while let Some((index, pid)) = died.recv().await {
                let Some(pool) = watched.upgrade() else { break };
                tokio::spawn(async move { pool.handle_death(index, pid).await });
            }
        });
        Ok(pool)
    }

    /// Event times count from `t0`, the first order.
    pub fn set_t0(&self, t0: Instant) {
        let _ = self.t0.set(t0);
    }

    fn since_t0_ms(&self) -> u64 {
        self.t0
            .get()
            .map(|t0| Instant::now().saturating_duration_since(*t0).as_millis() as u64)
            .unwrap_or(0)
    }

    fn slot(&self, index: usize) -> std::sync::MutexGuard<'_, Option<Instance>> {
        lock(&self.slots[index])
    }

    /// Starts a process for instance `index`, counting from the warm-up's
    /// end if that has passed.
    async fn start(&self, index: usize) -> Result<Instance> {
        let instance = Instance::spawn(&self.specs[index], index, self.deaths.clone()).await?;
        if self.measuring.load(Ordering::SeqCst) {
            instance.start_measuring();
        }
        lock(&self.logs).push(Arc::clone(&instance.log));
        Ok(instance)
    }

    /// Schedules on the order's instance or the next live one; false when
    /// every instance is down (the schedule is lost, as it would be).
    /// `committed_at_us`: when the order's transaction committed.
    pub fn schedule(
        &self,
        order_id: OrderId,
        expire_at_us: Micros,
        committed_at_us: Micros,
    ) -> bool {
        let n = self.slots.len();
        (0..n).any(|k| match &*self.slot((order_id as usize + k) % n) {
            Some(instance) => instance.schedule(order_id, expire_at_us, committed_at_us),
            None => false,
        })
    }

    /// Waits until every live instance has returned from every schedule
    /// sent to it so far (an instance that dies meanwhile is not waited for).
    pub async fn barrier(&self) {
        let waits: Vec<(SharedLog, Arc<AtomicBool>, u64)> = (0..self.slots.len())
            .filter_map(|index| {
                self.slot(index).as_ref().map(|instance| {
                    (
                        Arc::clone(&instance.log),
                        Arc::clone(&instance.alive),
                        instance.barrier(),
                    )
                })
            })
            .collect();
        for (log, alive, seen) in waits {
            while alive.load(Ordering::SeqCst) && lock(&log).barriers <= seen {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }

    /// Schedules that failed so far, over every process (as last flushed).
    pub fn schedule_errors(&self) -> u64 {
        lock(&self.logs)
            .iter()
            .map(|log| lock(log).report.schedule_errors)
            .sum()
    }

    /// Arms crash point `point` in instance `index`'s current process;
    /// returns its pid, or `None` when it is down.
    pub fn arm_crash(&self, index: usize, point: strategies::CrashPoint) -> Option<u32> {
        self.send_to(index, format!("c {}\n", point.as_str()))
    }

    /// Arms `point` in instance `index` to stop the process there (SIGSTOP
    /// to itself) until continued; returns its pid, or `None` when down.
    pub fn arm_stall(&self, index: usize, point: strategies::CrashPoint) -> Option<u32> {
        self.send_to(index, format!("p {}\n", point.as_str()))
    }

    /// Disarms every crash and stall point in instance `index` (a fault
    /// that gave up waiting for its point must not fire later, unseen).
    pub fn disarm(&self, index: usize) {
        let _ = self.send_to(index, "d\n".to_string());
    }

    /// Whether the pool restarts dead instances by itself
    /// (`restart-dead-instances`).
    pub fn restarts_dead(&self) -> bool {
        self.restart_dead_after.is_some()
    }

    fn send_to(&self, index: usize, command: String) -> Option<u32> {
        self.slot(index).as_ref().and_then(|instance| {
            (instance.alive.load(Ordering::SeqCst) && instance.commands.send(command).is_ok())
                .then_some(instance.pid)
        })
    }

    /// Whether the order service schedules before its commit (the
    /// `-publish-first` teaching variant).
    pub fn publishes_before_commit(&self) -> bool {
        self.specs
            .first()
            .is_some_and(|spec| registry::publishes_before_commit(&spec.strategy))
    }

    /// Whether instance `index` has a process the pool counts as running
    /// (a dead one stays until the pool has noted its death).
    pub fn is_running(&self, index: usize) -> bool {
        self.slot(index).is_some()
    }

    /// The pid of instance `index`'s live process.
    pub fn pid_of(&self, index: usize) -> Option<u32> {
        self.slot(index)
            .as_ref()
            .filter(|i| i.alive.load(Ordering::SeqCst))
            .map(|i| i.pid)
    }

    /// The pids of the live instances.
    pub fn pids(&self) -> Vec<u32> {
        (0..self.slots.len())
            .filter_map(|index| self.slot(index).as_ref().map(|i| i.pid))
            .collect()
    }

    /// How many instances the pool has (live or not).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// The latest counters of instance `index`'s current process.
    pub fn counters_of(&self, index: usize) -> Option<StrategyCounters> {
        self.slot(index)
            .as_ref()
            .map(|instance| lock(&instance.log).report.counters.clone())
    }

    /// Each instance's role as of its current process's last flush (at most
    /// [`FLUSH_EVERY`] old); `None` for an instance that is down.
    pub fn roles(&self) -> Vec<Option<strategies::InstanceRole>> {
        (0..self.slots.len())
            .map(|index| {
                self.slot(index)
                    .as_ref()
                    .map(|instance| lock(&instance.log).report.role)
            })
            .collect()
    }

    /// The warm-up is over: every live instance, and any started later,
    /// counts from here.
    pub fn start_measuring(&self) {
        self.measuring.store(true, Ordering::SeqCst);
        for index in 0..self.slots.len() {
            if let Some(instance) = &*self.slot(index) {
                instance.start_measuring();
            }
        }
    }

    /// SIGKILLs instance `index` (a scenario fault); returns its pid, or
    /// `None` if it was down.
    pub async fn kill(&self, index: usize) -> Result<Option<u32>> {
        let taken = self.slot(index).take();
        match taken {
            Some(instance) => {
                let pid = instance.pid;
                instance
                    .kill("killed by the harness (kill-instance fault)")
                    .await?;
                Ok(Some(pid))
            }
            None => Ok(None),
        }
    }

    /// Starts a fresh process for instance `index` (which must be down) and
    /// returns its pid once it is ready.
    pub async fn restart(&self, index: usize) -> Result<u32> {
        let instance = self.start(index).await?;
        let pid = instance.pid;
        let previous = self.slot(index).replace(instance);
        if let Some(previous) = previous {
            previous.kill("replaced while running").await?;
            bail!("instance {index} was restarted while still running");
        }
        Ok(pid)
    }

    /// A worker's output closed without its last flush: unless the harness
    /// killed it or is stopping, it died. Record it, keep what it flushed,
    /// and restart it if the scenario asks.
    async fn handle_death(&self, index: usize, pid: u32) {
        let dead = {
            let mut slot = self.slot(index);
            match &*slot {
                Some(instance) if instance.pid == pid => slot.take(),
                _ => None, // killed by a fault, or already replaced
            }
        };
        let Some(dead) = dead else { return };
        let at_ms = self.since_t0_ms();
        let status = dead.reap().await;
        tracing::warn!(instance = index, pid, %status, "a worker died");
        self.record(WorkerEvent {
            at_ms,
            instance: index as u32,
            pid,
            kind: WorkerEventKind::Died,
            detail: status,
        });
        let Some(after) = self.restart_dead_after else {
            return;
        };
        tokio::time::sleep(after).await;
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let (kind, pid, detail) = match self.start(index).await {
            Ok(instance) => {
                let new_pid = instance.pid;
                let duplicate = {
                    let mut slot = self.slot(index);
                    if slot.is_some() {
                        Some(instance) // a fault restarted it meanwhile: keep that one
                    } else {
                        *slot = Some(instance);
                        None
                    }
                };
                if let Some(duplicate) = duplicate {
                    let _ = duplicate.kill("duplicate restart").await;
                    return;
                }
                (
                    WorkerEventKind::Restarted,
                    new_pid,
                    format!("restart-dead-instances: fresh process {after:?} after the death"),
                )
            }
            Err(e) => (
                WorkerEventKind::RestartFailed,
                pid,
                format!("restart-dead-instances: {e:#}"),
            ),
        };
        self.record(WorkerEvent {
            at_ms: self.since_t0_ms(),
            instance: index as u32,
            pid,
            kind,
            detail,
        });
    }

    fn record(&self, event: WorkerEvent) {
        lock(&self.events).push(event);
    }

    /// Stops every live instance and returns what every process that ever
    /// ran reported (the dead ones up to their last flush).
    pub async fn stop(&self) -> Result<PoolRecord> {
        self.stopping.store(true, Ordering::SeqCst);
        for index in 0..self.slots.len() {
            let taken = self.slot(index).take();
            if let Some(instance) = taken {
                instance.stop().await?;
            }
        }
        let mut record = PoolRecord {
            events: lock(&self.events).clone(),
            ..PoolRecord::default()
        };
        record.events.sort_by_key(|e| e.at_ms);
        for log in lock(&self.logs).iter() {
            let mut log = lock(log);
            let mut report = log.report.clone();
            report.complete = log.stopped_cleanly;
            if !log.stopped_cleanly {
                // Sent to a process that died, and neither made nor
                // dropped by its last flush: lost with it (an upper bound:
                // what it made in its last second counts here too).
                let accounted = log.schedules.len() as u64 + report.schedules_dropped;
                report.schedules_lost_with_process = log.sent.saturating_sub(accounted);
            }
            record.reports.push(report);
            record
                .cancel_commits
                .append(&mut std::mem::take(&mut log.cancel_commits));
            record
                .schedules
                .append(&mut std::mem::take(&mut log.schedules));
            record
                .absorbed
                .append(&mut std::mem::take(&mut log.absorbed));
        }
        Ok(record)
    }
}

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
    let spec: WorkerSpec = serde_json::from_str(
        &std::env::var(SPEC_ENV).context("`delaybench worker` is started by `delaybench run`")?,
    )
    .context("malformed worker spec")?;
    let store = OrderStore::connect_as(&spec.location, 4, Some(&spec.session)).await?;
    if spec.measure.commit_times {
        store.log_cancel_commits();
    }
    // The canceller's own server-side reads, apart from the workload's
    // (PostgreSQL; a no-op elsewhere, and the report says so), sampled so
    // that every strategy pays the same reading per second.
    store.set_server_reads(spec.measure.server_reads());
    let variant = registry::Variant::parse(&spec.strategy)?;
    let canceller: Arc<dyn strategies::Canceller> =
        registry::build(&spec.strategy, &spec.options, store.clone())?.into();
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
    let relay = variant.outbox.then(|| {
        let state = Arc::clone(&state);
        tokio::spawn(outbox::relay(
            store.clone(),
            Arc::clone(&canceller),
            Arc::clone(&state.relay),
            shutdown.clone(),
            move |id, created| state.scheduled(id, created),
        ))
    });
    let mut out = tokio::io::stdout();
    out.write_all(b"{\"ready\":true}\n").await?;
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
                    (Some("c"), Some(point), None, None) => {
                        strategies::crash::arm(point.parse()?);
                    }
                    (Some("p"), Some(point), None, None) => {
                        strategies::crash::arm_stall(point.parse()?);
                    }
                    (Some("d"), None, None, None) => strategies::crash::disarm_all(),
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
/// (VmHWM in `/proc/self/status`): getrusage's `ru_maxrss` is not, as
/// Linux folds into it the RSS of the address space the process replaced
/// at exec (for a worker, the harness that spawned it). Elsewhere on Unix
/// `ru_maxrss` (bytes on macOS). 0 where neither exists.
fn peak_rss_kib() -> u64 {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
            })
            .unwrap_or(0)
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
        // Linux's own high-water mark, read after, is never below it (a
        // figure that counted the pre-exec image, as ru_maxrss does, would
        // be). Not "within 10 %": the process may grow between the reads.
        if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
            let hwm: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap();
            assert!(rss <= hwm, "{rss} KiB vs VmHWM {hwm} KiB");
        }
    }
}
