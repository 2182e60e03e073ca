use super::*;
use crate::model::lateness::*;
use crate::model::lateness::{overdue_trend, OverdueTrend};
use strategies::checker::{Anomaly, CancelTiming};

fn timing(created: i64, expire: i64, cancelled: i64) -> CancelTiming {
    CancelTiming {
        id: 0,
        created_at_us: created,
        expire_at_us: expire,
        at_us: cancelled,
    }
}

/// One order due every 10 ms over 4 s, each resolved `late(k)` after
/// its deadline.
fn overdue_of(late: impl Fn(i64) -> i64) -> OverdueTrend {
    let intervals = (0..400).map(|k| {
        let due = k * 10_000;
        (due, due + late(k))
    });
    overdue_trend(intervals, 0, 4_000_000, 0).unwrap()
}

#[test]
fn overdue_holds_steady_when_kept_up_and_grows_when_not() {
    // 50 ms late each: 5 overdue at any time, with an exact boundary.
    let steady = overdue_of(|_| 50_000);
    assert_eq!(steady.counts.len(), 41);
    assert!(steady.counts[1..40].iter().all(|c| *c == 5), "{steady:?}");
    assert!(!steady.growing);
    // A canceller at half the deadline rate: lateness grows with k.
    let behind = overdue_of(|k| k * 10_000);
    assert!(behind.growing, "{behind:?}");
    assert!(behind.last_quarter > 3 * behind.first_quarter.max(1));
    // Never resolved: every due order stays overdue.
    let forgotten = overdue_of(|_| i64::MAX / 2);
    assert_eq!(*forgotten.counts.last().unwrap(), 400);
    assert!(forgotten.growing);
    // Resolved early (an anomaly, not overdue) and too short a window.
    let early = overdue_trend([(100, 50)], 0, 1_000_000, 0).unwrap();
    assert!(early.counts.iter().all(|c| *c == 0));
    assert!(overdue_trend([(0, 1)], 0, 250_000, 0).is_none());
}

#[test]
fn lateness_skips_warmup_and_early_cancels() {
    let timings = vec![
        timing(0, 1_000_000, 1_500_000),         // warm-up: excluded
        timing(2_000_000, 3_000_000, 3_010_000), // 10 ms late
        timing(2_000_000, 3_000_000, 3_030_000), // 30 ms late
        timing(2_000_000, 3_000_000, 2_990_000), // early: the checker's business
    ];
    let l = lateness(&timings, 1_000_000, 0, &[1_000_000, 5_000_000]);
    let (h, buckets) = (&l.histogram, &l.over_time);
    let s = stats(h);
    assert_eq!(s.count, 2);
    // HdrHistogram reports the highest value equivalent at 3 significant digits.
    assert!((30_000..=30_030).contains(&s.max), "{s:?}");
    assert_eq!(buckets.len(), 1);
    assert_eq!(buckets[0].second, 3);
    assert_eq!(l.by_timeout.len(), 1);
    assert_eq!(
        (l.by_timeout[0].timeout_ms, l.by_timeout[0].count),
        (1000, 2)
    );
    assert_eq!(s.shown(Pct::Max), Some(s.max));
    assert_eq!(s.shown(Pct::P50), None, "2 samples carry no median");
    let text = hgrm(h);
    assert!(
        text.contains("Total count") && text.contains("Percentile"),
        "{text}"
    );
}

#[test]
fn percentiles_need_ten_samples_beyond_them() {
    let s = |count| LatenessStats {
        count,
        p50: 1,
        p90: 2,
        p99: 3,
        p999: 4,
        max: 5,
        mean: 1.0,
        histogram: None,
    };
    assert_eq!(s(999).shown(Pct::P99), None);
    assert_eq!(s(1000).shown(Pct::P99), Some(3));
    assert_eq!(s(9_999).shown(Pct::P999), None);
    assert_eq!(s(10_000).shown(Pct::P999), Some(4));
    assert_eq!(s(100).shown(Pct::P90), Some(2));
    assert_eq!(s(20).shown(Pct::P50), Some(1));
    assert_eq!(s(0).shown(Pct::Max), None);
}

#[test]
fn repetitions_fold_to_medians_worst_anomalies_and_failures_said() {
    let rep = |p99: u64, missed: u64| {
        let mut s = Summary::not_run(
            "db-scan".parse().unwrap(),
            Status::Ok,
            String::new(),
            DatabaseInfo::default(),
        );
        s.reason = None;
        s.lateness_us = LatenessStats {
            count: 2_000,
            p50: p99 / 2,
            p90: p99,
            p99,
            p999: p99,
            max: p99,
            mean: 1.0,
            histogram: None,
        };
        s.anomalies.set(Anomaly::MissedCancels, missed);
        s
    };
    let failed = Summary::not_run(
        "db-scan".parse().unwrap(),
        Status::Failed,
        "broker gone".into(),
        DatabaseInfo::default(),
    );
    let reps = [rep(300, 0), rep(100, 2), failed, rep(200, 0)];
    let folders: Vec<String> = (1..=4).map(|k| format!("repeat-{k}")).collect();
    let agg = aggregate(&reps, &folders).unwrap();
    let r = agg.repeats.as_ref().unwrap();
    assert_eq!(r.count, 3);
    assert_eq!(r.folders, ["repeat-1", "repeat-2", "repeat-4"]);
    let p99 = r.figures["p99"];
    assert_eq!((p99.min, p99.median, p99.max), (100.0, 200.0, 300.0));
    // Without histograms (older runs) the medians stand, and say so.
    assert_eq!(agg.lateness_us.p99, 200);
    assert!(agg
        .warnings
        .iter()
        .any(|w| w.contains("no histograms to pool")));
    // The worst repetition's anomalies, never the median's clean ones.
    assert_eq!(agg.anomalies.get(Anomaly::MissedCancels), 2);
    assert!(agg
        .warnings
        .iter()
        .any(|w| w.contains("anomalies in 1 of 3")));
    assert_eq!(r.not_measured, ["repeat 3: failed: broker gone"]);
    assert!(agg.warnings.iter().any(|w| w.contains("broker gone")));
}

/// Three repetitions of 400 cancels each: none supports a p99 alone,
/// together they do (1 200 samples), and the pooled p99 is the 99th
/// percentile of all of them, not a median of three.
#[test]
fn repetitions_pool_their_samples_for_the_percentiles() {
    let rep = |offset_ms: u64| {
        let mut s = Summary::not_run(
            "redis-zset".parse().unwrap(),
            Status::Ok,
            String::new(),
            Default::default(),
        );
        s.reason = None;
        let mut h = new_histogram();
        for i in 0..400u64 {
            h.record((offset_ms + i % 100) * 1000).unwrap();
        }
        s.lateness_us = stats(&h);
        s.lateness_by_timeout = vec![timeout_class(2000, &h)];
        s.lateness_over_time = vec![bucket(3, &h)];
        s
    };
    let reps = [rep(0), rep(50), rep(900)];
    assert!(reps.iter().all(|r| r.lateness_us.shown(Pct::P99).is_none()));
    let folders: Vec<String> = (1..=3).map(|k| format!("repeat-{k}")).collect();
    let agg = aggregate(&reps, &folders).unwrap();
    let l = &agg.lateness_us;
    assert_eq!(l.count, 1200);
    let p99 = l.shown(Pct::P99).expect("1 200 pooled samples carry a p99");
    // The top 1 % of all samples lies in the slow repetition (900..999 ms).
    assert!((985_000..=1_000_000).contains(&p99), "pooled p99 {p99}");
    let p50 = l.shown(Pct::P50).unwrap();
    assert!((99_000..=101_000).contains(&p50), "pooled p50 {p50}");
    // Spreads stay per repetition; a p99 no repetition supports has none.
    let r = agg.repeats.as_ref().unwrap();
    assert!(!r.figures.contains_key("p99"));
    assert_eq!(r.figures["n"].max, 400.0);
    assert_eq!(agg.lateness_by_timeout[0].count, 1200);
    assert_eq!(agg.lateness_over_time[0].count, 1200);
    assert!(!agg.warnings.iter().any(|w| w.contains("no histograms")));
    // The pooled distribution survives the JSON.
    let back = decode_histogram(l.histogram.as_deref().unwrap()).unwrap();
    assert_eq!(back.len(), 1200);
}
