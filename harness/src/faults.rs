//! Faults injected into a strategy's run at the scenario's times, the same
//! for every strategy, and the record of what actually happened.

use crate::instance::Pool;
use crate::model::FaultRecord;
use crate::scenario::{Fault, FaultKind};
use std::sync::Arc;
use tokio::time::Instant;

/// Runs every fault at its time after `t0`, each on its own task so a slow
/// restart never delays the next fault, and returns the records in
/// scenario order once all are done.
pub async fn inject(faults: Vec<Fault>, pool: Arc<Pool>, t0: Instant) -> Vec<FaultRecord> {
    let tasks: Vec<_> = faults
        .into_iter()
        .map(|fault| tokio::spawn(inject_one(fault, Arc::clone(&pool), t0)))
        .collect();
    let mut records = Vec::new();
    for task in tasks {
        match task.await {
            Ok(record) => records.push(record),
            Err(e) => tracing::error!(error = %e, "a fault task panicked"),
        }
    }
    records
}

async fn inject_one(fault: Fault, pool: Arc<Pool>, t0: Instant) -> FaultRecord {
    let since_t0 = || t0.elapsed().as_millis() as u64;
    let mut record = FaultRecord {
        kind: fault.kind,
        instance: fault.instance,
        planned_at_ms: fault.at.as_millis() as u64,
        killed_at_ms: None,
        killed_pid: None,
        restarted_at_ms: None,
        restarted_pid: None,
        command: fault.command.clone(),
        exit_status: None,
        finished_at_ms: None,
        error: None,
    };
    tokio::time::sleep_until(t0 + fault.at).await;
    match fault.kind {
        FaultKind::KillInstance => {
            let index = fault.instance as usize;
            match pool.kill(index).await {
                Ok(pid) => {
                    record.killed_pid = pid;
                    record.killed_at_ms = pid.map(|_| since_t0());
                }
                Err(e) => {
                    record.error = Some(format!("{e:#}"));
                    return record;
                }
            }
            if let Some(after) = fault.restart_after {
                tokio::time::sleep(after).await;
                match pool.restart(index).await {
                    Ok(pid) => {
                        record.restarted_pid = Some(pid);
                        record.restarted_at_ms = Some(since_t0());
                    }
                    Err(e) => record.error = Some(format!("restart: {e:#}")),
                }
            }
        }
        FaultKind::RunCommand => {
            let output = tokio::process::Command::new(&fault.command[0])
                .args(&fault.command[1..])
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output()
                .await;
            record.finished_at_ms = Some(since_t0());
            match output {
                Ok(out) => {
                    record.exit_status = Some(out.status.to_string());
                    if !out.status.success() {
                        let said = String::from_utf8_lossy(&out.stderr);
                        let tail: Vec<&str> = said.lines().rev().take(3).collect();
                        record.error = Some(format!(
                            "the command failed: {}",
                            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
                        ));
                    }
                }
                Err(e) => record.error = Some(format!("could not run `{}`: {e}", fault.command[0])),
            }
        }
    }
    record
}
