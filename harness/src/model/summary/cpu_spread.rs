//! CPU per cancel over a strategy's repetitions, with the one scope every
//! table uses (see [`Summary::cpu_us_per_cancel_by_service`]).

use super::result::Summary;
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
    /// `None` unless every repetition of `reps` has the CPU of its
    /// services and workers.
    pub fn of(reps: &[Summary], in_scope: impl Fn(&str) -> bool) -> Option<CpuSpread> {
        let by: Vec<BTreeMap<String, f64>> = reps
            .iter()
            .filter_map(Summary::cpu_us_per_cancel_by_service)
            .map(|b| b.into_iter().filter(|(k, _)| in_scope(k)).collect())
            .collect();
        if by.is_empty() || by.len() != reps.len() {
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
