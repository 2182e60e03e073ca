//! What a strategy's run cost, per cancel: database statements and rows,
//! the server's rows read (the canceller's own, estimated from the probe's
//! readings), broker messages, Redis commands, CPU, memory, and what the
//! measurement itself took.

use crate::model::summary::{Cost, MeasurementCost};
use crate::model::WorkerReport;
use crate::redis_stats;
use anyhow::Result;
use strategies::{DbKind, Service, StoreStats};

/// Cost over the measured window (after the warm-up), divided by the cancels
/// the instances made in that same window. A dead process contributes its
/// last flush, numerator and denominator alike.
pub(super) fn cost(
    reports: &[WorkerReport],
    requires: &[Service],
    redis: Result<redis_stats::Delta>,
    server_rows_read: Option<u64>,
    kind: DbKind,
    database_rtt: std::time::Duration,
) -> Cost {
    let mut store = StoreStats::default();
    let mut strategy_counters = std::collections::BTreeMap::new();
    for r in reports {
        store.add(&r.measured);
        for (k, v) in &r.counters_measured {
            *strategy_counters.entry(k.clone()).or_insert(0) += v;
        }
    }
    let per_cancel = |n: u64| (store.cancelled > 0).then(|| n as f64 / store.cancelled as f64);
    let cpu_ms = reports.iter().map(|r| r.cpu_ms).sum();
    // Workers measure their own server reads where the database can tell,
    // and where the probe ran. The instances' sums are added first and
    // divided here, once: a ratio of sums, not a sum of ratios.
    let probed = kind == DbKind::Postgres && store.server_reads_probes > 0;
    let estimate = probed.then(|| store.server_rows_read_estimate()).flatten();
    let canceller_rows = estimate.map(|e| e.total.round() as u64);
    let ci95 = estimate
        .zip(per_cancel(1))
        .map(|(e, one)| 1.96 * e.variance.sqrt() * one);
    let probe_us = store.server_reads_probe_us;
    // Under `[network]` each reading waits a round trip that is no CPU of
    // the worker's: taken out, or a 0.5 ms link read as a probe costing a
    // fifth of a cancel's CPU.
    let link_us = (store.server_reads_probes * 2 * database_rtt.as_micros() as u64).min(probe_us);
    let flush_us: u64 = reports.iter().map(|r| r.flush_us).sum();
    let us_per_cancel = per_cancel(probe_us - link_us + flush_us);
    let cpu_us_per_cancel = per_cancel(cpu_ms * 1000);
    let measurement = MeasurementCost {
        transactions: store.transactions,
        server_reads_probes: store.server_reads_probes,
        probe_us,
        link_us,
        flush_us,
        us_per_cancel,
        share_of_cpu: us_per_cancel
            .zip(cpu_us_per_cancel)
            .filter(|(_, cpu)| *cpu > 0.0)
            .map(|(m, cpu)| m / cpu),
    };
    let broker_messages = requires.contains(&Service::RabbitMq).then(|| {
        ["published", "consumed"]
            .iter()
            .map(|k| strategy_counters.get(*k).copied().unwrap_or(0))
            .sum()
    });
    let (redis_commands, redis_note) = match redis {
        Ok(redis_stats::Delta::NotUsed) => (None, None),
        Ok(redis_stats::Delta::Calls(n)) => (Some(n), None),
        Ok(redis_stats::Delta::Restarted) => (
            None,
            Some("unknown: Redis restarted during the measured window (its run_id changed), so INFO commandstats started again from zero".to_string()),
        ),
        Err(e) => (None, Some(format!("unknown: {e:#}"))),
    };
    Cost {
        statements_per_cancel: per_cancel(store.statements),
        rows_read_per_cancel: per_cancel(store.rows_read),
        absorbed_attempts: store.cancel_attempts - store.cancelled,
        cpu_ms,
        cpu_us_per_cancel,
        peak_rss_kib: reports.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0),
        store,
        strategy_counters,
        redis_commands,
        redis_commands_per_cancel: redis_commands.and_then(per_cancel),
        redis_note,
        broker_messages,
        broker_messages_per_cancel: broker_messages.and_then(per_cancel),
        server_rows_read,
        server_rows_read_per_cancel: server_rows_read.and_then(per_cancel),
        canceller_server_rows_read: canceller_rows,
        canceller_server_rows_read_per_cancel: canceller_rows.and_then(per_cancel),
        canceller_server_rows_read_ci95_per_cancel: ci95,
        measurement: Some(measurement),
        instances: reports.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::cost;
    use crate::model::WorkerReport;
    use std::time::Duration;
    use strategies::{DbKind, StoreStats};

    /// A `[network]` round trip is waiting, not the probe's CPU: two a
    /// probed transaction come off, never more than was measured.
    #[test]
    fn the_links_round_trips_are_not_the_probes_cpu() {
        let report = WorkerReport {
            measured: StoreStats {
                cancelled: 100,
                cancel_attempts: 100,
                server_reads_probes: 10,
                server_reads_probe_us: 12_000,
                ..StoreStats::default()
            },
            cpu_ms: 100,
            ..WorkerReport::default()
        };
        let run = |rtt| {
            let c = cost(
                std::slice::from_ref(&report),
                &[],
                Ok(crate::redis_stats::Delta::NotUsed),
                None,
                DbKind::Postgres,
                rtt,
            );
            c.measurement.expect("measured")
        };
        let loopback = run(Duration::ZERO);
        assert_eq!((loopback.link_us, loopback.us_per_cancel), (0, Some(120.0)));
        let linked = run(Duration::from_micros(500));
        assert_eq!(linked.link_us, 10_000);
        assert_eq!(linked.us_per_cancel, Some(20.0));
        assert_eq!(linked.share_of_cpu, Some(0.02));
        // A round trip longer than what was measured takes off all of it.
        assert_eq!(run(Duration::from_millis(5)).link_us, 12_000);
    }
}
