//! CPU per cancel over a strategy's repetitions, with the one scope every
//! table uses (see `Summary::cpu_us_per_cancel_by_service`).

use super::spread::Spread;
use std::collections::BTreeMap;

/// CPU per cancel over repetitions, with one scope (see
/// [`Summary::cpu_us_per_cancel_by_service`]): the spread of each
/// repetition's sum over the services `in_scope` keeps, and each such
/// service's median, largest first.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSpread {
    pub sum: Spread,
    pub repetitions: u32,
    pub by_service: Vec<(String, f64)>,
}

impl CpuSpread {
    /// From each repetition's CPU per cancel by service (`by`, see
    /// [`Summary::cpu_us_per_cancel_by_service`]; `None` where one lacked
    /// it), the services `in_scope` keeps: `None` unless every repetition
    /// has it.
    ///
    /// [`Summary::cpu_us_per_cancel_by_service`]: super::Summary::cpu_us_per_cancel_by_service
    pub fn of(
        by: Vec<Option<BTreeMap<String, f64>>>,
        in_scope: impl Fn(&str) -> bool,
    ) -> Option<CpuSpread> {
        let reps = by.len();
        let by: Vec<BTreeMap<String, f64>> = by
            .into_iter()
            .flatten()
            .map(|b| b.into_iter().filter(|(k, _)| in_scope(k)).collect())
            .collect();
        if by.is_empty() || by.len() != reps {
            return None;
        }
        let sums: Vec<f64> = by.iter().map(|b| b.values().sum()).collect();
        let mut by_service: Vec<(String, f64)> = by[0]
            .keys()
            .map(|k| {
                let v: Vec<f64> = by.iter().filter_map(|b| b.get(k).copied()).collect();
                (k.clone(), Spread::of(v).median)
            })
            .collect();
        by_service.sort_by(|a, b| b.1.total_cmp(&a.1));
        Some(CpuSpread {
            sum: Spread::of(sums),
            repetitions: by.len() as u32,
            by_service,
        })
    }

    /// "postgresql 1604 · workers 515", services under 1 µs left out.
    pub fn breakdown(&self, separator: &str) -> String {
        self.by_service
            .iter()
            .filter(|(_, v)| *v >= 1.0)
            .map(|(k, v)| format!("{k} {v:.0}"))
            .collect::<Vec<_>>()
            .join(separator)
    }
}
