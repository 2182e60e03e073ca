//! `delaybench generate`: one generator shard, started by an agent.

use super::protocol::{End, ShardSpec};
use crate::driver::{self, Instances};
use crate::workload::{Action, Event, Plan};
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strategies::registry::Deployment;
use strategies::{now_us, Micros, OrderId, OrderStore};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The driver's [`Instances`] in a shard: each line goes back to the
/// harness, which holds the instances.
struct Lines {
    out: mpsc::UnboundedSender<String>,
    publish_first: bool,
    measuring: AtomicBool,
}

impl Instances for Lines {
    fn start_measuring(&self) {
        if !self.measuring.swap(true, Ordering::SeqCst) {
            let _ = self.out.send("m\n".into());
        }
    }
    fn publishes_before_commit(&self) -> bool {
        self.publish_first
    }
    fn schedule(&self, id: OrderId, expire_at_us: Micros, committed_at_us: Micros) -> bool {
        // Whether an instance took it is the harness's to count.
        self.out
            .send(format!("s {id} {expire_at_us} {committed_at_us}\n"))
            .is_ok()
    }
    fn paid(&self, id: OrderId) {
        let _ = self.out.send(format!("f {id}\n"));
    }
}

/// Runs one shard: connects, says ready, reads its events and `go`, drives
/// them, and sends its [`End`].
pub async fn generate_main() -> Result<()> {
    let spec: ShardSpec = crate::child::spec("delaybench generate")?;
    crate::child::set_clock(spec.clock_correction_us);
    let deployment = Deployment::new(spec.strategy, &spec.options);
    let store = deployment
        .order_service_store(OrderStore::connect(&spec.location, spec.connections).await?);
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("{}\n", crate::child::READY_LINE).as_bytes())
        .await?;
    stdout.flush().await?;

    let mut events: Vec<Event> = Vec::new();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let t0_us: Micros = loop {
        let Some(line) = lines.next_line().await? else {
            bail!("the harness hung up before `go`");
        };
        match line.strip_prefix("go ") {
            Some(t0) => break t0.trim().parse().context("reading `go`")?,
            None => events.push(serde_json::from_str(&line).context("reading an event")?),
        }
    };
    // The harness hanging up (it failed, or stopped the run) stops the
    // shard: nothing keeps loading the database for a run that is over.
    tokio::spawn(async move {
        while let Ok(Some(_)) = lines.next_line().await {}
        std::process::exit(3);
    });
    let plan = Plan {
        orders: events
            .iter()
            .filter(|e| matches!(e.action, Action::Create { .. }))
            .count(),
        callbacks: events
            .iter()
            .filter(|e| matches!(e.action, Action::Pay { .. }))
            .count(),
        events,
        measured_from_us: spec.measured_from_us,
        last_deadline_us: 0,
    };
    // t0 on this process's monotonic clock: the harness's wall-clock t0,
    // read on this (corrected) clock.
    let ahead = t0_us - now_us();
    let now = Instant::now();
    let t0 = if ahead >= 0 {
        now + Duration::from_micros(ahead as u64)
    } else {
        now.checked_sub(Duration::from_micros(ahead.unsigned_abs()))
            .unwrap_or(now)
    };
    let (out, mut rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::BufWriter::new(tokio::io::stdout());
        while let Some(line) = rx.recv().await {
            stdout.write_all(line.as_bytes()).await?;
            // Batched: what is queued goes in one write.
            while let Ok(line) = rx.try_recv() {
                stdout.write_all(line.as_bytes()).await?;
            }
            stdout.flush().await?;
        }
        Ok::<_, std::io::Error>(stdout)
    });
    let instances = Arc::new(Lines {
        out: out.clone(),
        publish_first: spec.strategy.info.schedules_before_commit,
        measuring: AtomicBool::new(false),
    });
    let mut health = driver::drive(
        &plan,
        &store,
        &instances,
        t0,
        &ProgressBar::hidden(),
        spec.connections,
    )
    .await;
    let lags = health
        .lag_histogram
        .take()
        .map(|h| {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        })
        .unwrap_or_default();
    let end = End { health, lags };
    let _ = out.send(format!("{}\n", serde_json::to_string(&end)?));
    drop((out, instances));
    let mut stdout = writer.await.context("writing to the harness")??;
    stdout.flush().await?;
    store.close().await;
    Ok(())
}
