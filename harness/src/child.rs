//! What a `delaybench worker` or `delaybench generate` process is told by
//! whoever started it (the pool here, or an agent on another host): its
//! spec, in the environment rather than argv so a database password never
//! shows in `ps`, and the correction its clock takes.

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;

/// The variable holding the spec, as JSON.
pub const SPEC_ENV: &str = "DELAYBENCH_WORKER_SPEC";
/// For tests: an agent started with `--clock-skew-us` tells its children
/// their host's clock is off by this much (µs), as a real host's could be.
pub const CLOCK_SKEW_ENV: &str = "DELAYBENCH_CLOCK_SKEW_US";

/// The name every delaybench process goes by: in `ps` and `top`, and in
/// the CPU accounting ([`crate::resources`]), which finds the harness and
/// its workers by it. A child started from `/proc/self/exe` ([`own_binary`])
/// is otherwise named `exe` by the kernel, and its CPU was counted as
/// "other processes or the host" (a rate sweep then read every step near
/// its top as disturbed by something else on the host).
pub const PROCESS_NAME: &str = "delaybench";

/// Names this process [`PROCESS_NAME`] (Linux: the main thread's name,
/// which is the process's); call first in `main`, before any thread starts.
pub fn name_this_process() {
    #[cfg(target_os = "linux")]
    {
        // Best effort: a process left named `exe` is only counted as other.
        let _ = nix::sys::prctl::set_name(c"delaybench");
    }
}

/// The first line a child writes once it runs (a worker after its
/// wheel's reload, a shard once connected); anything else is its failure.
pub const READY_LINE: &str = r#"{"ready":true}"#;

/// `delaybench <kind>` (`worker`, `generate`) with `spec` (its JSON) in its
/// environment, its stdin and stdout piped for the line protocol, its
/// stderr this process's, and killed if its handle is dropped. `skew_us`:
/// a test agent's pretended clock skew, 0 otherwise.
pub fn command(kind: &str, spec: &str, skew_us: i64) -> Result<tokio::process::Command> {
    let mut command = tokio::process::Command::new(own_binary()?);
    #[cfg(unix)]
    command.arg0(PROCESS_NAME);
    command
        .arg(kind)
        .env(SPEC_ENV, spec)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    if skew_us != 0 {
        command.env(CLOCK_SKEW_ENV, skew_us.to_string());
    }
    Ok(command)
}

/// The binary this process runs, to start its children from. On Linux
/// `/proc/self/exe`: the very file this process was started from, even
/// after a rebuild replaced the one at its path (the path then reads
/// "... (deleted)" and starting it fails, so a `cargo build` during a long
/// run would lose every strategy still to come, or mix two builds in one
/// run). Elsewhere the path it was started from.
pub fn own_binary() -> Result<std::path::PathBuf> {
    let proc_exe = std::path::Path::new("/proc/self/exe");
    if cfg!(target_os = "linux") && proc_exe.exists() {
        return Ok(proc_exe.to_path_buf());
    }
    std::env::current_exe().context("locating the delaybench binary")
}

/// Reads the spec; `what` names the command for the error
/// (`delaybench worker`).
pub fn spec<T: DeserializeOwned>(what: &str) -> Result<T> {
    let text = std::env::var(SPEC_ENV)
        .with_context(|| format!("`{what}` is started by delaybench itself, not by hand"))?;
    serde_json::from_str(&text).with_context(|| format!("malformed spec for `{what}`"))
}

/// Moves this process's clock by `correction_us` (minus its host's offset
/// from the harness's clock; 0 on the harness's host), plus the skew a
/// test's agent pretends to.
pub fn set_clock(correction_us: i64) {
    let skew_us = std::env::var(CLOCK_SKEW_ENV)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or(0);
    strategies::set_clock_correction(skew_us + correction_us);
}
