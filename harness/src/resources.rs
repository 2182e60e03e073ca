//! Who used the machine's CPUs over a window: the whole machine, and each
//! service by process name, so a sweep step that fails can say which
//! resource ran out (the database, the broker, Redis, the harness and its
//! workers, or none). Read through `sysinfo`, so wherever it supports the
//! system (Linux, macOS, Windows, the BSDs); elsewhere every reading is
//! `None` and reports say "unknown".
//!
//! A process that exits inside the window loses its last CPU time
//! (PostgreSQL backends of closed connections); the machine-wide figure
//! loses nothing.
//!
//! One figure is read from /proc directly ([`own_status_kib`]): a
//! process's peak RSS, which `sysinfo` does not give.

pub use crate::model::cpu::CpuUse;
use crate::model::cpu::HARNESS_SERVICE;
use std::collections::BTreeMap;
use std::time::Instant;
use sysinfo::{CpuRefreshKind, ProcessRefreshKind, ProcessesToUpdate, System};

/// Process names and the service each stands for.
const SERVICES: &[(&str, &str)] = &[
    ("postgres", "postgresql"),
    ("mariadbd", "mariadb"),
    ("mysqld", "mariadb"),
    ("redis-server", "redis"),
    ("beam.smp", "rabbitmq"),
    (crate::child::PROCESS_NAME, HARNESS_SERVICE),
];

/// CPU counters at one moment: the machine's (kept in `system`, whose next
/// CPU refresh measures from here) and each service process's CPU time.
#[derive(Debug)]
pub struct CpuSnapshot {
    at: Instant,
    system: System,
    /// Per service, per pid: accumulated user + system CPU, ms.
    by_service: BTreeMap<&'static str, BTreeMap<u32, u64>>,
}

/// CPU used from `from` to `to`, read in a task that sleeps until each.
pub fn measure_window(
    from: tokio::time::Instant,
    to: tokio::time::Instant,
) -> tokio::task::JoinHandle<Option<CpuUse>> {
    tokio::spawn(async move {
        tokio::time::sleep_until(from).await;
        let before = snapshot();
        tokio::time::sleep_until(to).await;
        before.map(CpuSnapshot::until_now)
    })
}

/// Reads the counters now; `None` where `sysinfo` does not support the
/// system.
pub fn snapshot() -> Option<CpuSnapshot> {
    if !sysinfo::IS_SUPPORTED_SYSTEM {
        return None;
    }
    let mut system = System::new();
    system.refresh_cpu_specifics(CpuRefreshKind::nothing().with_cpu_usage());
    let by_service = service_times(&mut system);
    Some(CpuSnapshot {
        at: Instant::now(),
        system,
        by_service,
    })
}

/// Each service process's accumulated CPU time in ms, by pid.
fn service_times(system: &mut System) -> BTreeMap<&'static str, BTreeMap<u32, u64>> {
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        // Processes only: a thread listed as a process of its own would count twice.
        ProcessRefreshKind::nothing().with_cpu().without_tasks(),
    );
    let mut by_service: BTreeMap<&'static str, BTreeMap<u32, u64>> = BTreeMap::new();
    for (pid, process) in system.processes() {
        let name = process.name().to_string_lossy();
        if let Some((_, service)) = SERVICES.iter().find(|(n, _)| *n == name) {
            by_service
                .entry(service)
                .or_default()
                .insert(pid.as_u32(), process.accumulated_cpu_time());
        }
    }
    by_service
}

impl CpuSnapshot {
    /// CPU used from `self` until now. A process new since `self` counts
    /// whole; one gone since is left out.
    pub fn until_now(mut self) -> CpuUse {
        self.system
            .refresh_cpu_specifics(CpuRefreshKind::nothing().with_cpu_usage());
        let machine_busy = f64::from(self.system.global_cpu_usage()) / 100.0;
        let later = service_times(&mut self.system);
        let wall_s = self.at.elapsed().as_secs_f64().max(1e-3);
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        let by_service = later
            .iter()
            .map(|(service, pids)| {
                let before = self.by_service.get(service);
                let ms: u64 = pids
                    .iter()
                    .map(|(pid, t)| {
                        t.saturating_sub(before.and_then(|b| b.get(pid)).copied().unwrap_or(0))
                    })
                    .sum();
                (service.to_string(), ms as f64 / 1000.0 / wall_s)
            })
            .collect();
        CpuUse {
            wall_s,
            cores,
            machine_busy: machine_busy.clamp(0.0, 1.0),
            by_service,
        }
    }
}

/// A memory figure of this process from `/proc/self/status`, in KiB
/// (`VmHWM`, the peak RSS; `VmRSS`), on Linux; `None` elsewhere. Read
/// directly: `sysinfo` gives a process's current RSS but not its
/// high-water mark, and a worker reads the mark at every flush, where
/// refreshing a `sysinfo` process would read more files than this one.
pub(crate) fn own_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?;
    value.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_loop_shows_in_the_machine_and_in_this_process() {
        let Some(before) = snapshot() else {
            return; // not supported by sysinfo: reports say unknown
        };
        let spin_until = Instant::now() + std::time::Duration::from_millis(300);
        let mut x = 0u64;
        while Instant::now() < spin_until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let used = before.until_now();
        assert!(used.machine_busy > 0.0, "{used:?}");
        assert!(used.cores >= 1);
        assert!(used.describe().contains("busy of"), "{}", used.describe());
    }
}
