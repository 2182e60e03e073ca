//! CPU used over a window: the machine's and each service's.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// CPU used over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    pub wall_s: f64,
    /// Logical CPUs of the machine.
    pub cores: u32,
    /// Share of all cores busy (0 to 1), every process included.
    pub machine_busy: f64,
    /// Cores' worth of CPU each service used (1.0 = one core all the time).
    pub by_service: BTreeMap<String, f64>,
}

/// The service name under which [`CpuUse::by_service`] counts delaybench's
/// own processes, the harness and its worker processes.
pub const HARNESS_SERVICE: &str = "delaybench (harness + workers)";

/// At or above this share of all cores busy, the machine itself was the limit.
pub const SATURATED: f64 = 0.9;

/// At or above this many cores busy outside the services and the harness,
/// something else on the host took a share a run cannot be judged beside.
/// In the rate sweep 20261205-022130-sweep such CPU was 0.04-0.07 cores at
/// every step near the top but one, whose two repeats had 0.26 and 0.57.
pub const DISTURBED_CORES: f64 = 0.2;

/// Below this the other processes' share is not printed (it is always a
/// few hundredths: the kernel, the shell, a terminal).
const OTHER_SHOWN_FROM: f64 = 0.1;

impl CpuUse {
    /// "machine 97% busy of 2 cores: postgresql 0.92, delaybench ... 0.61, ..."
    pub fn describe(&self) -> String {
        let mut services: Vec<(&String, &f64)> = self.by_service.iter().collect();
        services.sort_by(|a, b| b.1.total_cmp(a.1));
        let services: Vec<String> = services
            .iter()
            .filter(|(_, c)| **c >= 0.01)
            .map(|(s, c)| format!("{s} {c:.2}"))
            .chain(
                Some(self.unattributed_cores())
                    .filter(|c| *c >= OTHER_SHOWN_FROM)
                    .map(|c| format!("other processes or the host {c:.2}")),
            )
            .collect();
        format!(
            "machine {:.0}% busy of {} cores; cores used: {}",
            self.machine_busy * 100.0,
            self.cores,
            if services.is_empty() {
                "none measured".to_string()
            } else {
                services.join(", ")
            }
        )
    }

    /// Cores busy that no service and not the harness used: other
    /// processes, the kernel's own threads, or a shared host's steal.
    /// Meaningful only where every service is measured (`by_service` names
    /// each one the harness knows, used or not).
    pub fn unattributed_cores(&self) -> f64 {
        if self.by_service.is_empty() {
            return 0.0; // nothing measured: nothing can be told apart
        }
        let busy = self.machine_busy * f64::from(self.cores);
        (busy - self.by_service.values().sum::<f64>()).max(0.0)
    }

    /// Core-seconds each service used over this span beyond what it used
    /// at `base`'s rate (never below 0 per service: a service quieter than
    /// at its base gives back nothing). A storm's drain against the regular
    /// load before it.
    pub fn beyond(&self, base: &CpuUse) -> BTreeMap<String, f64> {
        self.by_service
            .iter()
            .map(|(service, cores)| {
                let before = base.by_service.get(service).copied().unwrap_or(0.0);
                (service.clone(), (cores - before).max(0.0) * self.wall_s)
            })
            .collect()
    }

    /// The service that used the most CPU, and how much.
    pub fn busiest(&self) -> Option<(&str, f64)> {
        self.by_service
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(s, c)| (s.as_str(), *c))
    }
}
