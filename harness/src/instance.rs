//! Canceller instances as separate OS processes, so a kill is real.
//!
//! The harness starts `delaybench worker` once per instance with a
//! [`WorkerSpec`] in the environment. The protocol is line-based:
//! - worker -> harness (stdout): `{"ready":true}` once running, then one
//!   [`WorkerReport`] JSON line when it stops;
//! - harness -> worker (stdin): `s <order_id> <expire_at_us>` to schedule,
//!   `m` to start measuring (end of warm-up); EOF to stop.
//!
//! Logs go to stderr, which the worker inherits.

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::process::Stdio;
use std::time::Duration;
use strategies::{
    registry, DbLocation, Micros, OrderId, OrderStore, StoreStats, StrategyCounters,
    StrategyOptions,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const SPEC_ENV: &str = "DELAYBENCH_WORKER_SPEC";
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What a worker process runs. Passed in the environment, not argv, so the
/// database password never shows in `ps`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    pub strategy: String,
    pub instance: u32,
    pub location: DbLocation,
    pub options: StrategyOptions,
}

/// What a worker reports when it stops. `measured` counts only what
/// happened after the `m` line (the end of warm-up).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WorkerReport {
    pub instance: u32,
    pub pid: u32,
    pub total: StoreStats,
    pub measured: StoreStats,
    pub counters: StrategyCounters,
    pub schedule_errors: u64,
    /// User + system CPU time of the process over the measured window, ms
    /// (from /proc/self/stat, 10 ms resolution).
    pub cpu_ms: u64,
    /// Peak resident set size (VmHWM), KiB.
    pub peak_rss_kib: u64,
    pub run_error: Option<String>,
}

/// A running worker process.
#[derive(Debug)]
pub struct Instance {
    child: Child,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    commands: mpsc::UnboundedSender<String>,
    writer: tokio::task::JoinHandle<()>,
}

impl Instance {
    /// Starts a worker and waits until it reports ready.
    pub async fn spawn(spec: &WorkerSpec) -> Result<Instance> {
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
                    break; // the worker died; its report will say so
                }
            }
            let _ = stdin.shutdown().await;
        });
        Ok(Instance {
            child,
            stdout,
            commands,
            writer,
        })
    }

    /// Asks the worker to schedule an order (fire and forget, in order).
    pub fn schedule(&self, order_id: OrderId, expire_at_us: Micros) {
        let _ = self.commands.send(format!("s {order_id} {expire_at_us}\n"));
    }

    /// Tells the worker the warm-up is over: counters restart from here.
    pub fn start_measuring(&self) {
        let _ = self.commands.send("m\n".to_string());
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    /// SIGKILLs the worker and waits for it to die: nothing it held only in
    /// memory survives, and it writes no report.
    pub async fn kill(mut self) -> Result<()> {
        drop(self.commands);
        self.child.kill().await.context("killing a worker")?;
        self.writer.abort();
        Ok(())
    }

    /// Stops the worker (EOF on stdin) and returns its report.
    pub async fn stop(mut self) -> Result<WorkerReport> {
        drop(self.commands);
        let _ = self.writer.await;
        let line = tokio::time::timeout(Duration::from_secs(60), self.stdout.next_line())
            .await
            .map_err(|_| anyhow!("a worker did not stop within 60s"))?
            .context("reading a worker's report")?;
        let status = self.child.wait().await.context("waiting for a worker")?;
        let line = line.ok_or_else(|| anyhow!("a worker exited ({status}) without a report"))?;
        serde_json::from_str(&line).with_context(|| format!("malformed worker report: {line}"))
    }
}

/// The canceller instances of one strategy's run. A new order goes to
/// instance `id % n` or, while that one is down, to the next live one (what a
/// load balancer does). Instances can be killed and restarted mid-run.
#[derive(Debug)]
pub struct Pool {
    specs: Vec<WorkerSpec>,
    slots: Vec<std::sync::Mutex<Option<Instance>>>,
    measuring: std::sync::atomic::AtomicBool,
}

impl Pool {
    /// Starts one worker per spec, in order.
    pub async fn spawn(specs: Vec<WorkerSpec>) -> Result<Pool> {
        let mut slots = Vec::new();
        for spec in &specs {
            slots.push(std::sync::Mutex::new(Some(Instance::spawn(spec).await?)));
        }
        Ok(Pool {
            specs,
            slots,
            measuring: false.into(),
        })
    }

    fn slot(&self, index: usize) -> std::sync::MutexGuard<'_, Option<Instance>> {
        // A panic while holding the lock leaves the slot usable.
        self.slots[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Schedules on the order's instance or the next live one; false when
    /// every instance is down (the schedule is lost, as it would be).
    pub fn schedule(&self, order_id: OrderId, expire_at_us: Micros) -> bool {
        let n = self.slots.len();
        (0..n).any(|k| match &*self.slot((order_id as usize + k) % n) {
            Some(instance) => {
                instance.schedule(order_id, expire_at_us);
                true
            }
            None => false,
        })
    }

    /// The warm-up is over: every live instance, and any started later,
    /// counts from here.
    pub fn start_measuring(&self) {
        self.measuring
            .store(true, std::sync::atomic::Ordering::SeqCst);
        for index in 0..self.slots.len() {
            if let Some(instance) = &*self.slot(index) {
                instance.start_measuring();
            }
        }
    }

    /// SIGKILLs instance `index`; returns its pid, or `None` if it was down.
    pub async fn kill(&self, index: usize) -> Result<Option<u32>> {
        let taken = self.slot(index).take();
        match taken {
            Some(instance) => {
                let pid = instance.pid();
                instance.kill().await?;
                Ok(Some(pid))
            }
            None => Ok(None),
        }
    }

    /// Starts a fresh process for instance `index` (which must be down) and
    /// returns its pid once it is ready.
    pub async fn restart(&self, index: usize) -> Result<u32> {
        let instance = Instance::spawn(&self.specs[index]).await?;
        if self.measuring.load(std::sync::atomic::Ordering::SeqCst) {
            instance.start_measuring();
        }
        let pid = instance.pid();
        let previous = self.slot(index).replace(instance);
        if let Some(previous) = previous {
            previous.kill().await?;
            bail!("instance {index} was restarted while still running");
        }
        Ok(pid)
    }

    /// Stops every live instance and returns their reports (a killed
    /// instance's counters died with it).
    pub async fn stop(&self) -> Result<Vec<WorkerReport>> {
        let mut reports = Vec::new();
        for index in 0..self.slots.len() {
            let taken = self.slot(index).take();
            if let Some(instance) = taken {
                reports.push(instance.stop().await?);
            }
        }
        Ok(reports)
    }
}

/// The `delaybench worker` entry point: runs one instance until stdin closes.
pub async fn worker_main() -> Result<()> {
    let spec: WorkerSpec = serde_json::from_str(
        &std::env::var(SPEC_ENV).context("`delaybench worker` is started by `delaybench run`")?,
    )
    .context("malformed worker spec")?;
    let store = OrderStore::connect(&spec.location, 4).await?;
    let canceller: std::sync::Arc<dyn strategies::Canceller> =
        registry::build(&spec.strategy, &spec.options, store)?.into();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (canceller, shutdown) = (canceller.clone(), shutdown.clone());
        async move { canceller.run(shutdown).await }
    });
    let mut out = tokio::io::stdout();
    out.write_all(b"{\"ready\":true}\n").await?;
    out.flush().await?;

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut schedule_errors = 0;
    let mut baseline = (StoreStats::default(), 0);
    while let Some(line) = lines.next_line().await? {
        let mut parts = line.split_ascii_whitespace();
        match (parts.next(), parts.next(), parts.next()) {
            (Some("s"), Some(id), Some(at)) => {
                let (id, at) = (id.parse::<OrderId>()?, at.parse::<Micros>()?);
                if let Err(e) = canceller.schedule(id, at).await {
                    schedule_errors += 1;
                    tracing::warn!(order = id, error = %e, "schedule failed");
                }
            }
            (Some("m"), None, None) => baseline = (canceller.store_stats(), cpu_ms()),
            _ => bail!("worker: unexpected command {line:?}"),
        }
    }
    shutdown.cancel();
    let run_error = match run.await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(e) => Some(format!("run task panicked: {e}")),
    };
    let total = canceller.store_stats();
    let report = WorkerReport {
        instance: spec.instance,
        pid: std::process::id(),
        total,
        measured: total.since(&baseline.0),
        counters: canceller.counters(),
        schedule_errors,
        cpu_ms: cpu_ms().saturating_sub(baseline.1),
        peak_rss_kib: peak_rss_kib(),
        run_error,
    };
    out.write_all(format!("{}\n", serde_json::to_string(&report)?).as_bytes())
        .await?;
    out.flush().await?;
    Ok(())
}

/// User + system CPU of this process in ms, from `/proc/self/stat`
/// (fields 14 and 15, in clock ticks of 10 ms on Linux). 0 elsewhere.
fn cpu_ms() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // The command name may contain spaces; fields start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After ')' the first field is field 3 (state): utime is 14, stime 15.
    (ticks(11) + ticks(12)) * 10
}

/// Peak RSS in KiB from `/proc/self/status` (VmHWM). 0 elsewhere.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}
