//! The harness side: the pool of worker processes, their stdin commands
//! and the flushes they send back, deaths and restarts.

use super::protocol::{lock, AnswerLine, Flush, RoleAnswer, WorkerSpec, READY_TIMEOUT};
use crate::agent;
use crate::child;
use crate::model::{WorkerEvent, WorkerEventKind, WorkerReport};
use anyhow::{anyhow, bail, Context, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use strategies::domain::slot_of;
use strategies::registry::Deployment;
use strategies::{Micros, OrderId, StrategyCounters};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

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
    /// How a worker on an agent exited (its agent's `!exit` line).
    exit: Option<String>,
    /// Its latest answer to a role question (`r`).
    answer: Option<RoleAnswer>,
}

/// What one instance said when the harness asked its role
/// ([`Pool::ask_roles`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// It has no live process.
    Down,
    /// It did not answer in time (stopped by another fault, or stuck).
    Silent,
    /// Its role, as its strategy said it then.
    Role(strategies::InstanceRole),
}

type SharedLog = Arc<Mutex<ProcessLog>>;

/// Where a worker process runs.
#[derive(Debug)]
enum Process {
    /// A child of the harness.
    Local(Child),
    /// Started by the `delaybench agent` at this address.
    Remote(String),
}

/// What a worker says, line by line: its stdout, or an agent's connection.
type Output = Lines<Box<dyn AsyncBufRead + Unpin + Send>>;
/// What the harness tells it: its stdin, or an agent's connection.
type Input = Box<dyn AsyncWrite + Unpin + Send>;

/// A running worker process.
#[derive(Debug)]
struct Instance {
    process: Process,
    pid: u32,
    commands: mpsc::UnboundedSender<String>,
    writer: JoinHandle<()>,
    reader: JoinHandle<()>,
    /// Cleared when its stdout closes: it is dead or stopping.
    alive: Arc<AtomicBool>,
    log: SharedLog,
}

impl Instance {
    /// Starts a worker, here or on its agent, and waits until it reports
    /// ready. When its output closes without a last flush, `(index, pid)`
    /// goes to `deaths`.
    async fn spawn(
        spec: &WorkerSpec,
        index: usize,
        deaths: mpsc::UnboundedSender<(usize, u32)>,
    ) -> Result<Instance> {
        let (process, pid, mut stdin, mut stdout): (Process, u32, Input, Output) = match &spec.agent
        {
            None => {
                let mut child = child::command("worker", &serde_json::to_string(spec)?, 0)?
                    .spawn()
                    .context("starting a worker process")?;
                let pid = child.id().unwrap_or(0);
                let stdin = Box::new(child.stdin.take().expect("piped stdin"));
                let stdout: Box<dyn AsyncBufRead + Unpin + Send> =
                    Box::new(BufReader::new(child.stdout.take().expect("piped stdout")));
                (Process::Local(child), pid, stdin, stdout.lines())
            }
            Some(agent) => {
                let remote = agent::spawn(agent, "worker", &serde_json::to_string(spec)?)
                    .await
                    .with_context(|| {
                        format!("starting worker {} of {}", spec.instance, spec.strategy)
                    })?;
                let stdout: Box<dyn AsyncBufRead + Unpin + Send> =
                    Box::new(remote.output.into_inner());
                (
                    Process::Remote(agent.clone()),
                    remote.pid,
                    Box::new(remote.input),
                    stdout.lines(),
                )
            }
        };
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
            Some(line) if line == child::READY_LINE => {}
            other => {
                let status = match process {
                    Process::Local(mut child) => format!("{:?}", child.wait().await.ok()),
                    Process::Remote(agent) => format!(
                        "{:?} (on the agent at {agent}, whose log has its error)",
                        stdout.next_line().await.ok().flatten()
                    ),
                };
                bail!(
                    "worker {} of {} failed to start (said {other:?}, exit {status}); its error is above",
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
            process,
            pid,
            commands,
            writer,
            reader,
            alive,
            log,
        })
    }

    /// The agent it runs on, `None` here.
    fn agent(&self) -> Option<&str> {
        match &self.process {
            Process::Local(_) => None,
            Process::Remote(agent) => Some(agent),
        }
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

    /// Tells the worker the order was paid (answered by nobody); false if
    /// the worker is gone.
    fn paid(&self, order_id: OrderId) -> bool {
        self.alive.load(Ordering::SeqCst) && self.commands.send(format!("f {order_id}\n")).is_ok()
    }

    /// Asks for a barrier flush; returns the barrier count to wait past.
    fn barrier(&self) -> u64 {
        let seen = lock(&self.log).barriers;
        let _ = self.commands.send("b\n".to_string());
        seen
    }

    /// Asks the worker its role now (`r <asked>`); false if it is gone.
    fn ask_role(&self, asked: u64) -> bool {
        self.alive.load(Ordering::SeqCst) && self.commands.send(format!("r {asked}\n")).is_ok()
    }

    /// Tells the worker the warm-up is over: counters restart from here.
    fn start_measuring(&self) {
        let _ = self.commands.send("m\n".to_string());
    }

    /// SIGKILLs the worker and waits for it to die: nothing it held only in
    /// memory survives; what it flushed before is kept.
    async fn kill(mut self, why: &str) -> Result<()> {
        match &mut self.process {
            Process::Local(child) => {
                drop(self.commands);
                child.kill().await.context("killing a worker")?;
                self.writer.abort();
                let _ = self.reader.await;
            }
            Process::Remote(agent) => {
                // The agent kills it and closes the connection once it is
                // gone (its `!exit` line arrives first).
                let _ = self.commands.send("!kill\n".to_string());
                drop(self.commands);
                if tokio::time::timeout(REMOTE_EXIT_WITHIN, &mut self.writer)
                    .await
                    .is_err()
                {
                    self.writer.abort();
                }
                if tokio::time::timeout(REMOTE_EXIT_WITHIN, &mut self.reader)
                    .await
                    .is_err()
                {
                    self.reader.abort();
                    tracing::warn!(agent = %agent, pid = self.pid, "the agent did not confirm a kill");
                }
            }
        }
        lock(&self.log).report.end = Some(why.to_string());
        Ok(())
    }

    /// Waits for a process whose output closed and notes how it ended.
    async fn reap(mut self) -> String {
        self.writer.abort();
        let _ = self.reader.await;
        let status = match &mut self.process {
            Process::Local(child) => {
                match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                    Ok(Ok(status)) => status.to_string(),
                    Ok(Err(e)) => format!("unknown exit ({e})"),
                    Err(_) => {
                        let _ = child.kill().await;
                        "closed its output, killed after 5 s".to_string()
                    }
                }
            }
            Process::Remote(agent) => remote_exit(&self.log, agent),
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
            match &mut self.process {
                Process::Local(child) => {
                    let _ = child.kill().await;
                }
                // Closing the connection ends the agent's relay, which
                // kills the worker (`kill_on_drop`).
                Process::Remote(_) => self.reader.abort(),
            }
            lock(&self.log).report.end = Some("did not stop within 60 s; killed".into());
            return Ok(());
        }
        let status = match &mut self.process {
            Process::Local(child) => child
                .wait()
                .await
                .context("waiting for a worker")?
                .to_string(),
            Process::Remote(agent) => remote_exit(&self.log, agent),
        };
        let mut log = lock(&self.log);
        log.report.end = Some(if log.stopped_cleanly {
            "stopped".to_string()
        } else {
            format!("died while stopping: {status}")
        });
        Ok(())
    }
}

/// How long the harness waits for an agent to confirm a worker it was told
/// to kill has exited.
const REMOTE_EXIT_WITHIN: Duration = Duration::from_secs(10);

/// How a worker on an agent ended, as the agent's `!exit` line said.
fn remote_exit(log: &SharedLog, agent: &str) -> String {
    match &lock(log).exit {
        Some(status) => format!("{status} (on the agent at {agent})"),
        None => format!("the connection to the agent at {agent} closed without its exit status"),
    }
}

/// Reads a worker's flushes into `log` until its output closes; calls
/// `died` if that happens before the last flush.
async fn read_flushes(
    mut output: Output,
    log: SharedLog,
    alive: Arc<AtomicBool>,
    died: impl FnOnce(),
) {
    while let Ok(Some(line)) = output.next_line().await {
        if let Some(status) = line.strip_prefix("!exit ") {
            // An agent's last word on its worker.
            lock(&log).exit = Some(status.to_string());
            continue;
        }
        if line.starts_with(r#"{"answer""#) {
            match serde_json::from_str::<AnswerLine>(&line) {
                Ok(line) => lock(&log).answer = Some(line.answer),
                Err(e) => {
                    tracing::warn!(error = %e, "ignoring a malformed answer from a worker: {line}")
                }
            }
            continue;
        }
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
    /// Payments are passed on ([`Pool::paid`]).
    hears_payments: bool,
    /// The number of the last role question ([`Pool::ask_roles`]).
    asked: AtomicU64,
    /// Schedules are passed on ([`Pool::schedule`]).
    takes_schedules: bool,
}

impl Pool {
    /// Starts one worker per spec, in order, and watches them.
    pub async fn spawn(
        specs: Vec<WorkerSpec>,
        restart_dead_after: Option<Duration>,
    ) -> Result<Arc<Pool>> {
        let (deaths, mut died) = mpsc::unbounded_channel();
        let deployment = specs
            .first()
            .map(|spec| Deployment::new(spec.strategy, &spec.options));
        let pool = Arc::new(Pool {
            hears_payments: deployment.as_ref().is_some_and(Deployment::hears_payments),
            // No instances (the generator alone): each order is offered to
            // none, and counts as unscheduled.
            takes_schedules: deployment.as_ref().is_none_or(Deployment::takes_schedules),
            slots: specs.iter().map(|_| Mutex::new(None)).collect(),
            specs,
            measuring: false.into(),
            stopping: false.into(),
            logs: Mutex::default(),
            events: Mutex::default(),
            deaths,
            t0: OnceLock::new(),
            restart_dead_after,
            asked: AtomicU64::new(0),
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
    ///
    /// Where the strategy's schedule does nothing
    /// ([`Deployment::takes_schedules`]), nothing is sent and the order is
    /// handed over at once: the orders table it just committed to is the
    /// schedule, so no order waits on an instance's stdin for a call that
    /// does nothing (a paused or dead instance included), and no schedule
    /// path is measured that the strategy never had.
    pub fn schedule(
        &self,
        order_id: OrderId,
        expire_at_us: Micros,
        committed_at_us: Micros,
    ) -> bool {
        if !self.takes_schedules {
            return true;
        }
        self.send_to_order_instance(order_id, |instance| {
            instance.schedule(order_id, expire_at_us, committed_at_us)
        })
    }

    /// Offers a command to the order's instance, `id % n`, then to the
    /// next ones in turn until `send` takes it; false when none did.
    fn send_to_order_instance(&self, order_id: OrderId, send: impl Fn(&Instance) -> bool) -> bool {
        let n = self.slots.len();
        let own = slot_of(order_id, n as u32) as usize;
        (0..n).any(|k| match &*self.slot((own + k) % n) {
            Some(instance) => send(instance),
            None => false,
        })
    }

    /// Tells the order's instance (the one [`Pool::schedule`] picks now)
    /// that it was paid, where the strategy drops paid orders' timers
    /// ([`Deployment::hears_payments`]); nothing otherwise, so a strategy
    /// that would ignore it pays nothing for it.
    pub fn paid(&self, order_id: OrderId) {
        if self.hears_payments {
            self.send_to_order_instance(order_id, |instance| instance.paid(order_id));
        }
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
            .is_some_and(|spec| spec.strategy.info.schedules_before_commit)
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

    /// The pids of the live instances on this host (those on agents are
    /// other hosts' processes).
    pub fn pids(&self) -> Vec<u32> {
        (0..self.slots.len())
            .filter_map(|index| {
                self.slot(index)
                    .as_ref()
                    .filter(|i| i.agent().is_none())
                    .map(|i| i.pid)
            })
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

    /// Each instance's role as it answers now, asked on the worker protocol
    /// (`r`) and answered from its strategy's own state: what a fault aimed
    /// at a role is resolved by when it fires. An instance that does not
    /// answer within `within` (stopped by another fault, stuck) is
    /// [`Said::Silent`]; one without a live process [`Said::Down`].
    pub async fn ask_roles(&self, within: Duration) -> Vec<Said> {
        let asked = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        let logs: Vec<Option<SharedLog>> = (0..self.slots.len())
            .map(|index| {
                self.slot(index)
                    .as_ref()
                    .filter(|instance| instance.ask_role(asked))
                    .map(|instance| Arc::clone(&instance.log))
            })
            .collect();
        let answer = |log: &SharedLog| {
            lock(log)
                .answer
                // An answer to a later question (another fault's) is as fresh.
                .filter(|a| a.asked >= asked)
                .map(|a| Said::Role(a.role))
        };
        let give_up = Instant::now() + within;
        loop {
            let said: Vec<Said> = logs
                .iter()
                .map(|log| match log {
                    None => Said::Down,
                    Some(log) => answer(log).unwrap_or(Said::Silent),
                })
                .collect();
            if !said.contains(&Said::Silent) || Instant::now() >= give_up {
                return said;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// The warm-up is over: every live instance, and any started later,
    /// counts from here.
    /// Only the first call counts (generator shards each say it).
    pub fn start_measuring(&self) {
        if self.measuring.swap(true, Ordering::SeqCst) {
            return;
        }
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
