//! The scenario's `[before-each-strategy]` command: run before each
//! strategy's run, as a `run-command` fault runs its command (no shell,
//! stdin closed), with its output kept in the strategy's folder and a
//! timeout. Whatever happens is returned as a [`HookRecord`]; its `error`
//! says why the strategy must not run.

use crate::faults::tail;
use crate::model::HookRecord;
use crate::scenario::BeforeEachStrategy;
use std::path::Path;
use std::process::Stdio;
use strategies::signal::{self, Sig};
use tokio::time::Instant;

/// Where the command's output goes, in the strategy's folder.
pub const STDOUT_LOG: &str = "before-each-strategy.stdout.log";
pub const STDERR_LOG: &str = "before-each-strategy.stderr.log";

/// Runs `hook` from delaybench's current folder, its stdout and stderr
/// written to files in `dir` (files rather than pipes, so a daemon the
/// command starts and leaves running cannot hold the run up).
pub async fn run(hook: &BeforeEachStrategy, dir: &Path) -> HookRecord {
    let started = Instant::now();
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let mut record = HookRecord {
        command: crate::model::records::redact_command(&hook.command),
        cwd,
        started_at: chrono::Local::now().to_rfc3339(),
        duration_ms: 0,
        exit_status: None,
        error: None,
        stdout_log: STDOUT_LOG.to_string(),
        stderr_log: STDERR_LOG.to_string(),
    };
    let label = hook.label();
    let result = run_logged(hook, dir).await;
    record.duration_ms = started.elapsed().as_millis() as u64;
    for log in [STDOUT_LOG, STDERR_LOG] {
        redact_log(&dir.join(log));
    }
    let stderr_tail = || tail(&std::fs::read(dir.join(STDERR_LOG)).unwrap_or_default());
    match result {
        Ok(Some(status)) => {
            record.exit_status = Some(status.to_string());
            if !status.success() {
                record.error = Some(format!(
                    "before-each-strategy command `{label}` failed ({status}): {}",
                    or_nothing(stderr_tail())
                ));
            }
        }
        Ok(None) => {
            record.error = Some(format!(
                "before-each-strategy command `{label}` was still running after its timeout of \
                 {} and was killed with its process group (field \
                 `before-each-strategy.timeout`); its stderr ended: {}",
                humantime::format_duration(hook.timeout),
                or_nothing(stderr_tail())
            ));
        }
        Err(e) => {
            record.error = Some(format!(
                "could not run the before-each-strategy command `{label}` from {}: {e:#} (a \
                 relative program path is looked up from the folder delaybench runs in)",
                record.cwd
            ));
        }
    }
    record
}

/// The command's exit status, or `None` if it was killed at its timeout.
async fn run_logged(
    hook: &BeforeEachStrategy,
    dir: &Path,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let log = |name: &str| {
        let path = dir.join(name);
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))
    };
    let mut child = tokio::process::Command::new(&hook.command[0])
        .args(&hook.command[1..])
        .stdin(Stdio::null())
        .stdout(log(STDOUT_LOG)?)
        .stderr(log(STDERR_LOG)?)
        // A process group of its own, so a timeout can end what it started.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    // Interrupted (the run's future dropped, e.g. on Ctrl-C, which the
    // command's own group no longer receives): end the group too.
    let mut group = GroupGuard(child.id());
    let waited = tokio::time::timeout(hook.timeout, child.wait()).await;
    group.0 = None;
    match waited {
        Ok(status) => Ok(Some(status?)),
        Err(_) => {
            // The whole group: a script's children would otherwise keep
            // running into the strategy's measurement. A daemon that left
            // the group (setsid, as `redis-server --daemonize` and
            // `rabbitmq-server -detached` do) is not touched.
            if let Some(pid) = child.id() {
                if let Err(e) = signal::to_group(pid, Sig::Kill) {
                    tracing::warn!("before-each-strategy: {e}");
                }
            }
            let _ = child.kill().await;
            Ok(None)
        }
    }
}

/// Kills the process group it names when dropped while still armed.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = signal::to_group(pgid, Sig::Kill);
        }
    }
}

/// Rewrites a log the command wrote with every URL's password replaced by
/// `***` (a cluster script prints its connection URLs): the results folder
/// never holds a password. A log that cannot be read is left as it is.
fn redact_log(path: &Path) {
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    let text = String::from_utf8_lossy(&bytes);
    let clean = strategies::redact::text(&text);
    if clean != text {
        if let Err(e) = std::fs::write(path, clean) {
            tracing::warn!("could not redact {}: {e}", path.display());
        }
    }
}

fn or_nothing(tail: String) -> String {
    if tail.trim().is_empty() {
        "(nothing on stderr)".to_string()
    } else {
        tail
    }
}
