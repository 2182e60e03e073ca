//! Who used the machine's CPUs over a window: the whole machine from
//! `/proc/stat`, and each service by process name from `/proc/<pid>/stat`,
//! so a sweep step that fails can say which resource ran out (the
//! database, the broker, Redis, the harness and its workers, or none).
//!
//! Linux only; elsewhere every reading is `None` and reports say "unknown".
//! A process that exits inside the window loses its last ticks (PostgreSQL
//! backends of closed connections); the machine-wide figure loses nothing.

pub use crate::model::sweep::CpuUse;
use std::collections::BTreeMap;
use std::time::Instant;

/// Clock ticks per second of `/proc` CPU times (`USER_HZ`, 100 on Linux).
const TICKS_PER_S: f64 = 100.0;

/// Process names and the service each stands for.
const SERVICES: &[(&str, &str)] = &[
    ("postgres", "postgresql"),
    ("mariadbd", "mariadb"),
    ("mysqld", "mariadb"),
    ("redis-server", "redis"),
    ("beam.smp", "rabbitmq"),
    ("delaybench", "delaybench (harness + workers)"),
];

/// CPU counters at one moment.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    at: Instant,
    busy_ticks: u64,
    total_ticks: u64,
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
        before.zip(snapshot()).map(|(a, b)| a.until(&b))
    })
}

/// Reads the counters now; `None` where `/proc` is not there.
pub fn snapshot() -> Option<CpuSnapshot> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let total_ticks: u64 = cpu.iter().take(8).sum();
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    let mut by_service: BTreeMap<&'static str, BTreeMap<u32, u64>> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((name, ticks)) = process_ticks(&text) else {
            continue;
        };
        if let Some((_, service)) = SERVICES.iter().find(|(n, _)| *n == name) {
            by_service.entry(service).or_default().insert(pid, ticks);
        }
    }
    Some(CpuSnapshot {
        at: Instant::now(),
        busy_ticks: total_ticks.saturating_sub(idle),
        total_ticks,
        by_service,
    })
}

/// `(comm, utime + stime)` of one `/proc/<pid>/stat` line. The name is in
/// parentheses and may itself hold spaces and parentheses.
fn process_ticks(stat: &str) -> Option<(&str, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = &stat[open + 1..close];
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

impl CpuSnapshot {
    /// CPU used from `self` until `later`. A process new in `later` counts
    /// whole; one gone from it is left out.
    pub fn until(&self, later: &CpuSnapshot) -> CpuUse {
        let wall_s = later.at.duration_since(self.at).as_secs_f64().max(1e-3);
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        let total = later.total_ticks.saturating_sub(self.total_ticks).max(1);
        let busy = later.busy_ticks.saturating_sub(self.busy_ticks);
        let by_service = later
            .by_service
            .iter()
            .map(|(service, pids)| {
                let before = self.by_service.get(service);
                let ticks: u64 = pids
                    .iter()
                    .map(|(pid, t)| {
                        t.saturating_sub(before.and_then(|b| b.get(pid)).copied().unwrap_or(0))
                    })
                    .sum();
                (service.to_string(), ticks as f64 / TICKS_PER_S / wall_s)
            })
            .collect();
        CpuUse {
            wall_s,
            cores,
            machine_busy: busy as f64 / total as f64,
            by_service,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_names_with_spaces_and_parentheses_parse() {
        let line = "4242 (beam.smp) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 30 0";
        assert_eq!(process_ticks(line), Some(("beam.smp", 300)));
        let odd = "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0";
        assert_eq!(process_ticks(odd), Some(("a (b) c", 7)));
        assert_eq!(process_ticks("garbage"), None);
    }

    #[test]
    fn a_busy_loop_shows_in_the_machine_and_in_this_process() {
        let Some(before) = snapshot() else {
            return; // not Linux: nothing to read, and reports say unknown
        };
        let spin_until = Instant::now() + std::time::Duration::from_millis(300);
        let mut x = 0u64;
        while Instant::now() < spin_until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let used = before.until(&snapshot().unwrap());
        assert!(used.machine_busy > 0.0, "{used:?}");
        assert!(used.cores >= 1);
        assert!(used.describe().contains("busy of"), "{}", used.describe());
    }
}
