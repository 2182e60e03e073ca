//! Lateness and the other distributions a run measures (lag, schedule
//! path, the overdue count): their percentiles, when a percentile is worth
//! showing, the histograms behind them and how they pool over repetitions.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use strategies::checker::CancelTiming;

/// Percentiles of a distribution in microseconds (lateness, lag, schedule
/// path). The JSON keeps HdrHistogram's values; reports show a percentile
/// only when it rests on enough samples ([`LatenessStats::shown`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatenessStats {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
    /// The distribution itself (HdrHistogram V2 + deflate, base64), so
    /// repetitions pool their samples ([`pool`]); absent in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

/// A percentile is shown only with at least this many samples beyond it
/// (p99 needs 1 000 samples, p99.9 needs 10 000); below that it is `-`.
pub const SAMPLES_BEYOND_A_PERCENTILE: f64 = 10.0;

/// Which percentile of a [`LatenessStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pct {
    P50,
    P90,
    P99,
    P999,
    Max,
}

impl LatenessStats {
    /// The value, or `None` when there are no samples or too few beyond
    /// the percentile for it to mean anything (it would read as the max).
    pub fn shown(&self, pct: Pct) -> Option<u64> {
        let (q, value) = match pct {
            Pct::P50 => (0.5, self.p50),
            Pct::P90 => (0.9, self.p90),
            Pct::P99 => (0.99, self.p99),
            Pct::P999 => (0.999, self.p999),
            Pct::Max => (0.0, self.max),
        };
        let beyond = self.count as f64 * (1.0 - q);
        (self.count > 0 && (pct == Pct::Max || beyond >= SAMPLES_BEYOND_A_PERCENTILE - 1e-9))
            .then_some(value)
    }
}

/// Lateness of the orders whose deadline fell in one second of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatenessBucket {
    /// Seconds after t0 of the deadline.
    pub second: u64,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// The second's distribution, for pooling repetitions (see
    /// [`LatenessStats::histogram`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

/// Lateness of the orders with one configured timeout (mixed-timeout
/// scenarios show head-of-line blocking here).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeoutLateness {
    pub timeout_ms: u64,
    pub count: u64,
    pub p50_us: u64,
    /// `None` in runs made before it was kept.
    #[serde(default)]
    pub p90_us: Option<u64>,
    pub p99_us: u64,
    pub max_us: u64,
    /// The class's distribution, for pooling repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

impl TimeoutLateness {
    /// Percentile `p` where it was kept and `count` supports it.
    pub fn shown(&self, p: Pct) -> Option<u64> {
        match (p, self.p90_us) {
            (Pct::P90, None) => None,
            _ => self.stats().shown(p),
        }
    }

    /// Its figures as [`LatenessStats`], so one rule decides which
    /// percentiles its `count` supports; read them with [`TimeoutLateness::shown`].
    pub fn stats(&self) -> LatenessStats {
        LatenessStats {
            count: self.count,
            p50: self.p50_us,
            p90: self.p90_us.unwrap_or_default(),
            p99: self.p99_us,
            p999: self.max_us,
            max: self.max_us,
            mean: 0.0,
            histogram: None,
        }
    }
}

/// The histogram's bytes as text for JSON (V2 + deflate, base64).
pub fn encode_histogram(h: &Histogram<u64>) -> Option<String> {
    use base64::Engine as _;
    use hdrhistogram::serialization::Serializer as _;
    let mut bytes = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The histogram [`encode_histogram`] wrote; `None` if the text is not one.
pub fn decode_histogram(text: &str) -> Option<Histogram<u64>> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .ok()
}

/// The samples of every distribution in `parts` pooled into one, or
/// `None` when one of them (with samples) kept no histogram.
pub fn pool<'a>(parts: impl IntoIterator<Item = &'a Option<String>>) -> Option<Histogram<u64>> {
    let mut all = new_histogram();
    for part in parts {
        let h = decode_histogram(part.as_deref()?)?;
        all.add(&h).ok()?;
    }
    Some(all)
}

/// Lateness figures of one strategy run.
#[derive(Debug)]
pub struct Lateness {
    pub histogram: Histogram<u64>,
    pub over_time: Vec<LatenessBucket>,
    pub by_timeout: Vec<TimeoutLateness>,
}

/// A lateness histogram in microseconds, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 24 * 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Lateness of the measured orders (created at or after `measured_from_us`),
/// overall, per second of deadline and per configured timeout (each order
/// goes to the timeout closest to its `expire - created`). Early cancels
/// (negative lateness) are anomalies, counted by the checker, and left out.
pub fn lateness(
    timings: &[CancelTiming],
    measured_from_us: i64,
    t0_us: i64,
    timeouts_us: &[i64],
) -> Lateness {
    let mut all = new_histogram();
    let mut per_second: BTreeMap<u64, Histogram<u64>> = BTreeMap::new();
    let mut per_timeout: BTreeMap<i64, Histogram<u64>> = BTreeMap::new();
    for t in timings
        .iter()
        .filter(|t| t.created_at_us >= measured_from_us)
    {
        let late = t.at_us - t.expire_at_us;
        if late < 0 {
            continue;
        }
        let late = late as u64;
        all.saturating_record(late);
        let second = ((t.expire_at_us - t0_us).max(0) / 1_000_000) as u64;
        per_second
            .entry(second)
            .or_insert_with(new_histogram)
            .saturating_record(late);
        let own = t.expire_at_us - t.created_at_us;
        if let Some(&timeout) = timeouts_us.iter().min_by_key(|&&c| (c - own).abs()) {
            per_timeout
                .entry(timeout)
                .or_insert_with(new_histogram)
                .saturating_record(late);
        }
    }
    Lateness {
        histogram: all,
        over_time: per_second
            .into_iter()
            .map(|(second, h)| bucket(second, &h))
            .collect(),
        by_timeout: per_timeout
            .into_iter()
            .map(|(timeout, h)| timeout_class((timeout / 1000) as u64, &h))
            .collect(),
    }
}

pub(super) fn bucket(second: u64, h: &Histogram<u64>) -> LatenessBucket {
    LatenessBucket {
        second,
        count: h.len(),
        p50_us: h.value_at_quantile(0.5),
        p99_us: h.value_at_quantile(0.99),
        max_us: h.max(),
        histogram: encode_histogram(h),
    }
}

pub(super) fn timeout_class(timeout_ms: u64, h: &Histogram<u64>) -> TimeoutLateness {
    TimeoutLateness {
        timeout_ms,
        count: h.len(),
        p50_us: h.value_at_quantile(0.5),
        p90_us: Some(h.value_at_quantile(0.9)),
        p99_us: h.value_at_quantile(0.99),
        max_us: h.max(),
        histogram: encode_histogram(h),
    }
}

/// Orders past their deadline and still PENDING, counted every
/// [`OVERDUE_EVERY_US`] while the measured orders fall due: a strategy that
/// keeps up holds this level steady (deadline rate x mean lateness); one
/// that falls behind grows it for as long as the load lasts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OverdueTrend {
    /// Sample spacing in milliseconds.
    pub every_ms: u64,
    /// Seconds after the first order of the first sample.
    pub from_s: f64,
    pub counts: Vec<u64>,
    /// Medians of the first and of the last quarter of `counts`.
    pub first_quarter: u64,
    pub last_quarter: u64,
    /// `last_quarter > 1.5 x first_quarter + 10`: the backlog grew over
    /// the window by more than the sawtooth of a batch or scan interval.
    pub growing: bool,
}

/// Spacing of [`OverdueTrend`] samples.
pub const OVERDUE_EVERY_US: i64 = 100_000;

/// The overdue count at every sample time in `[from_us, to_us]`, from each
/// order's `(deadline, resolved)` pair: cancelled or paid after the
/// deadline, or still pending (`Micros::MAX`). Absolute microseconds;
/// `t0_us` only labels the samples. `None` when the window holds fewer
/// than four samples.
pub fn overdue_trend(
    intervals: impl IntoIterator<Item = (i64, i64)>,
    from_us: i64,
    to_us: i64,
    t0_us: i64,
) -> Option<OverdueTrend> {
    let (mut starts, mut ends): (Vec<i64>, Vec<i64>) = intervals
        .into_iter()
        .filter(|(expire, resolved)| resolved > expire)
        .unzip();
    starts.sort_unstable();
    ends.sort_unstable();
    let counts: Vec<u64> = (0..)
        .map(|k| from_us + k * OVERDUE_EVERY_US)
        .take_while(|t| *t <= to_us)
        .map(|t| {
            // Due by t, minus resolved by t (every resolved one was due).
            (starts.partition_point(|s| *s <= t) - ends.partition_point(|e| *e <= t)) as u64
        })
        .collect();
    if counts.len() < 4 {
        return None;
    }
    let quarter = counts.len() / 4;
    let median = |xs: &[u64]| {
        let mut xs = xs.to_vec();
        xs.sort_unstable();
        xs[xs.len() / 2]
    };
    let first_quarter = median(&counts[..quarter]);
    let last_quarter = median(&counts[counts.len() - quarter..]);
    Some(OverdueTrend {
        every_ms: (OVERDUE_EVERY_US / 1000) as u64,
        from_s: (from_us - t0_us) as f64 / 1e6,
        growing: last_quarter as f64 > 1.5 * first_quarter as f64 + 10.0,
        counts,
        first_quarter,
        last_quarter,
    })
}

/// Stats of raw microsecond samples.
pub fn stats_of(samples: impl IntoIterator<Item = u64>) -> LatenessStats {
    let mut h = new_histogram();
    for v in samples {
        h.saturating_record(v);
    }
    stats(&h)
}

pub fn stats(h: &Histogram<u64>) -> LatenessStats {
    if h.is_empty() {
        return LatenessStats::default();
    }
    LatenessStats {
        count: h.len(),
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
        mean: h.mean(),
        histogram: encode_histogram(h),
    }
}

/// HdrHistogram's percentile-distribution text (values in milliseconds),
/// readable by HdrHistogram's plotting tools.
pub fn hgrm(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if !h.is_empty() {
        let mut total = 0;
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            let inv = if q < 1.0 {
                format!("{:>14.2}", 1.0 / (1.0 - q))
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{:>12.3} {:>14.12} {:>10} {inv}",
                v.value_iterated_to() as f64 / 1000.0,
                q,
                total
            );
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / 1000.0,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}
