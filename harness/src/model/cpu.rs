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

/// At or above this share of all cores busy, the machine itself was the limit.
pub const SATURATED: f64 = 0.9;

impl CpuUse {
    /// "machine 97% busy of 2 cores: postgresql 0.92, delaybench ... 0.61, ..."
    pub fn describe(&self) -> String {
        let mut services: Vec<(&String, &f64)> = self.by_service.iter().collect();
        services.sort_by(|a, b| b.1.total_cmp(a.1));
        let services: Vec<String> = services
            .iter()
            .filter(|(_, c)| **c >= 0.01)
            .map(|(s, c)| format!("{s} {c:.2}"))
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

    /// The service that used the most CPU, and how much.
    pub fn busiest(&self) -> Option<(&str, f64)> {
        self.by_service
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(s, c)| (s.as_str(), *c))
    }
}
