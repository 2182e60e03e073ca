//! Repetitions folded into one summary, and every figure a summary shows
//! by name (what the spread, reports and comparisons read).

use super::result::{Status, Summary};
use super::spread::{Repeats, Spread};
use crate::model::lateness::{
    bucket, pool, stats, timeout_class, LatenessBucket, LatenessStats, Pct, TimeoutLateness,
};
use std::collections::BTreeMap;

/// Every figure of a strategy's run that reports and comparisons show, by
/// name; `None` where the run did not measure it or too few samples carry it.
pub fn figures(s: &Summary) -> Vec<(&'static str, Option<f64>)> {
    let l = &s.lateness_us;
    let us = |v: Option<u64>| v.map(|v| v as f64);
    let c = &s.cost;
    let attempts =
        (c.store.cancelled > 0).then(|| c.store.cancel_attempts as f64 / c.store.cancelled as f64);
    vec![
        ("created", Some(s.orders.created as f64)),
        ("paid", Some(s.orders.paid as f64)),
        ("cancelled", Some(s.orders.cancelled as f64)),
        ("pending", Some(s.orders.pending as f64)),
        ("paid_late", Some(s.orders.paid_after_deadline as f64)),
        ("n", Some(l.count as f64)),
        ("p50", us(l.shown(Pct::P50))),
        ("p90", us(l.shown(Pct::P90))),
        ("p99", us(l.shown(Pct::P99))),
        ("p999", us(l.shown(Pct::P999))),
        ("max", us(l.shown(Pct::Max))),
        (
            "commit_p99",
            us(s.committed_lateness_us
                .as_ref()
                .and_then(|c| c.shown(Pct::P99))),
        ),
        ("anomalies", Some(s.anomalies.total() as f64)),
        ("stmts_per_cancel", c.statements_per_cancel),
        ("attempts_per_cancel", attempts),
        ("server_rows_per_cancel", c.server_rows_read_per_cancel),
        (
            "canceller_rows_per_cancel",
            c.canceller_server_rows_read_per_cancel,
        ),
        ("broker_msgs_per_cancel", c.broker_messages_per_cancel),
        ("redis_cmds_per_cancel", c.redis_commands_per_cancel),
        ("cpu_us_per_cancel", c.cpu_us_per_cancel),
        ("cpu_all_us_per_cancel", s.cpu_all_us_per_cancel()),
        (
            "measurement_us_per_cancel",
            c.measurement.as_ref().and_then(|m| m.us_per_cancel),
        ),
        (
            "measurement_share_of_cpu",
            c.measurement.as_ref().and_then(|m| m.share_of_cpu),
        ),
        ("peak_rss_mib", Some(c.peak_rss_kib as f64 / 1024.0)),
        ("lag_p99", Some(s.generator.lag_us_p99 as f64)),
        (
            "schedule_p99",
            us(s.schedule_path_us.as_ref().and_then(|p| p.shown(Pct::P99))),
        ),
        // The deadline storm's drain, where the run had one.
        (
            "storm_cancels_per_s",
            s.storm.as_ref().and_then(|st| st.cancels_per_s),
        ),
        ("storm_drain_s", s.storm.as_ref().and_then(|st| st.drain_s)),
        (
            "storm_us_per_cancel",
            s.storm.as_ref().and_then(|st| st.us_per_cancel()),
        ),
    ]
}

/// Folds the repetitions of one strategy (in run order) into one summary:
/// the median repetition (by p99 lateness) with every figure's spread, the
/// median lateness and the worst anomalies. `None` while none ran.
pub fn aggregate(reps: &[Summary], folders: &[String]) -> Option<Summary> {
    let ran: Vec<(&Summary, &String)> = reps
        .iter()
        .zip(folders)
        .filter(|(s, _)| s.status == Status::Ok)
        .collect();
    if ran.is_empty() {
        return None;
    }
    let mut by_p99: Vec<&(&Summary, &String)> = ran.iter().collect();
    by_p99.sort_by_key(|(s, _)| s.lateness_us.p99);
    let mut agg = by_p99[by_p99.len() / 2].0.clone();
    let mut figures: BTreeMap<String, Spread> = BTreeMap::new();
    let per_rep: Vec<Vec<(&str, Option<f64>)>> =
        ran.iter().map(|(s, _)| self::figures(s)).collect();
    for (i, (name, _)) in per_rep[0].iter().enumerate() {
        let values: Option<Vec<f64>> = per_rep.iter().map(|f| f[i].1).collect();
        if let Some(values) = values {
            figures.insert(name.to_string(), Spread::of(values));
        }
    }
    let mut warnings = Vec::new();
    // Percentiles come from every repetition's samples pooled, so three
    // repetitions of 400 cancels give one p99 of 1 200 samples; the
    // repetitions' own spread stays in `figures`.
    let pooled = |pick: fn(&Summary) -> Option<&LatenessStats>| -> Option<LatenessStats> {
        let parts: Vec<&LatenessStats> = ran.iter().filter_map(|(s, _)| pick(s)).collect();
        if parts.is_empty() {
            return None;
        }
        let with_samples = parts.iter().filter(|p| p.count > 0).map(|p| &p.histogram);
        pool(with_samples).map(|h| stats(&h))
    };
    match pooled(|s| Some(&s.lateness_us)) {
        Some(all) => agg.lateness_us = all,
        None => {
            // Runs made before histograms were kept: medians, said so.
            let median_of = |pick: fn(&LatenessStats) -> u64| {
                Spread::of(
                    ran.iter()
                        .map(|(s, _)| pick(&s.lateness_us) as f64)
                        .collect(),
                )
                .median as u64
            };
            agg.lateness_us = LatenessStats {
                count: median_of(|l| l.count),
                p50: median_of(|l| l.p50),
                p90: median_of(|l| l.p90),
                p99: median_of(|l| l.p99),
                p999: median_of(|l| l.p999),
                max: median_of(|l| l.max),
                mean: Spread::of(ran.iter().map(|(s, _)| s.lateness_us.mean).collect()).median,
                histogram: None,
            };
            warnings.push(
                "lateness percentiles are the repetitions' medians: this run kept no \
                 histograms to pool"
                    .to_string(),
            );
        }
    }
    agg.committed_lateness_us = pooled(|s| s.committed_lateness_us.as_ref());
    agg.commit_gap_us = pooled(|s| s.commit_gap_us.as_ref());
    agg.censored_lateness_us = pooled(|s| s.censored_lateness_us.as_ref());
    agg.schedule_path_us = pooled(|s| s.schedule_path_us.as_ref());
    let mut by_timeout: BTreeMap<u64, Vec<&Option<String>>> = BTreeMap::new();
    let mut by_second: BTreeMap<u64, Vec<&Option<String>>> = BTreeMap::new();
    for (s, _) in &ran {
        for t in &s.lateness_by_timeout {
            by_timeout
                .entry(t.timeout_ms)
                .or_default()
                .push(&t.histogram);
        }
        for b in &s.lateness_over_time {
            by_second.entry(b.second).or_default().push(&b.histogram);
        }
    }
    let timeouts: Option<Vec<TimeoutLateness>> = by_timeout
        .into_iter()
        .map(|(ms, parts)| pool(parts).map(|h| timeout_class(ms, &h)))
        .collect();
    let seconds: Option<Vec<LatenessBucket>> = by_second
        .into_iter()
        .map(|(second, parts)| pool(parts).map(|h| bucket(second, &h)))
        .collect();
    // Where a part kept no histogram the median repetition's stand.
    if let Some(t) = timeouts {
        agg.lateness_by_timeout = t;
    }
    if let Some(b) = seconds {
        agg.lateness_over_time = b;
    }
    let mut worst = agg.anomalies.clone();
    let mut broken = 0;
    for (s, _) in &ran {
        worst = worst.worst(&s.anomalies);
        broken += u32::from(s.anomalies.total() > 0);
    }
    agg.anomalies = worst;
    if broken > 0 {
        warnings.push(format!(
            "anomalies in {broken} of {} repetitions (the worst count of each kind is shown)",
            ran.len()
        ));
    }
    for (k, (s, _)) in ran.iter().enumerate() {
        for w in &s.warnings {
            warnings.push(format!("repeat {}: {w}", k + 1));
        }
    }
    let not_measured: Vec<String> = reps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.status != Status::Ok)
        .map(|(k, s)| {
            format!(
                "repeat {}: {}: {}",
                k + 1,
                s.status.as_str(),
                s.reason.as_deref().unwrap_or("no reason recorded")
            )
        })
        .collect();
    warnings.extend(not_measured.iter().cloned());
    agg.warnings = warnings;
    agg.repeats = Some(Repeats {
        count: ran.len() as u32,
        folders: ran.iter().map(|(_, f)| f.to_string()).collect(),
        figures,
        not_measured,
        derived: Vec::new(),
    });
    Some(agg)
}
