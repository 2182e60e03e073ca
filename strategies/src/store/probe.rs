//! Reading how many rows the database server read inside a store's own
//! transactions, without taxing them.
//!
//! PostgreSQL keeps, per backend, the row counts of the transactions it has
//! not yet published (`pg_stat_get_xact_tuples_returned`/`_fetched`); a
//! transaction's own reads are the difference between a reading after
//! BEGIN and one before COMMIT. Two things keep that probe cheap:
//!
//! - **It names its relations.** The view `pg_stat_xact_user_tables` joins
//!   every relation of the database and evaluates the counters for each
//!   before filtering on the schema: 0.26 ms per reading on a database of
//!   333 tables, growing with every run's namespace left behind. The probe
//!   instead calls the counter functions on the namespace's own tables and
//!   indexes, whose oids it reads once, so it costs the same whatever else
//!   the database holds (about 30 µs per reading over loopback).
//! - **It samples.** A per-order strategy commits once per order and a batch
//!   strategy once per batch; reading every transaction taxed the first
//!   kind per order and the second per batch, which decided their ranking
//!   (issue 20: rabbit-ttl's p99 2.5 s with the readings, 15.9 ms without).
//!   The [`Sampler`] reads at most `per_second` transactions a second per
//!   store, whatever the transaction rate, so every strategy pays the same
//!   measurement cost per window; a strategy with fewer transactions than
//!   that has every one read, exactly.
//!
//! The sampled transactions stand for the others through a ratio (Hájek)
//! estimate ([`ReadingSums::estimate`]): the rows per transaction of the
//! readings, each weighted by the `k` transactions of its block, times the
//! transactions that could have been read. Scaling a mean by an exact
//! count makes it exact when every transaction reads the same rows,
//! whatever blocks were cut short or left unfinished; the sum of `k` times
//! the rows (Horvitz–Thompson) moved by a whole `k` with each of them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the sampler sets its block size, from the transactions of the
/// last [`WINDOWS_PER_SECOND`] windows. Short, so a process that just
/// started (or restarted mid-run) reads every transaction only this long.
const RATE_WINDOW: Duration = Duration::from_millis(250);
const WINDOWS_PER_SECOND: usize = 4;

/// How a store reads the server's row counts of its own transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerReads {
    /// Not read (the default, and the only choice off PostgreSQL).
    Off,
    /// Every transaction: exact, two extra round trips each. For tests and
    /// for showing what the probe costs.
    Every,
    /// At most this many transactions a second (at least 1).
    Sampled { per_second: u32 },
}

/// What the probe does with one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Draw {
    /// The probe is off.
    Off,
    /// Counted among those that could have been read, not read.
    Unread,
    /// Read; the reading stands for `weight` transactions.
    Read { weight: u64 },
}

/// Decides which transactions a store reads: one at random out of each
/// block of `k` consecutive transactions, `k` set from the transaction
/// rate over the last second (counted in [`RATE_WINDOW`]s, so a burst
/// moves it only by its share) so that about `per_second` are read each
/// second. When the rate falls, the current block ends at once (its
/// unread positions simply go unused: every transaction it held still had
/// a chance of 1 in `k`), so that the slower transactions are read soon
/// rather than after a block sized for the burst (at 20 a second, a block
/// of 150 left from 600 a second would last 7 s). A block cut short gives
/// its reading or none; the ratio estimate turns that into a reading more
/// or less for the mean, not `k` transactions more or less for the total.
/// Pure over the times it is given, so the tests can drive it.
#[derive(Debug)]
pub(crate) struct Sampler {
    per_second: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The current rate window's start, and its transactions so far.
    window_from: Instant,
    in_window: u64,
    /// Transactions of the last windows, the newest last, up to a second.
    recent: std::collections::VecDeque<u64>,
    /// Block size chosen from the previous window's rate.
    next_k: u64,
    /// The current block: its size, the position read, and where we are.
    k: u64,
    chosen: u64,
    at: u64,
    rng: u64,
}

impl Sampler {
    pub(crate) fn new(per_second: u32, now: Instant) -> Sampler {
        // A different sequence for each store and process; any will do.
        let seed = (std::process::id() as u64) << 32 ^ crate::now_us() as u64;
        Sampler::seeded(per_second, now, seed)
    }

    /// A sampler whose random positions follow `seed` (the tests' own, so
    /// that they are repeatable).
    fn seeded(per_second: u32, now: Instant, seed: u64) -> Sampler {
        Sampler {
            per_second: u64::from(per_second.max(1)),
            state: Mutex::new(State {
                window_from: now,
                in_window: 0,
                recent: std::collections::VecDeque::with_capacity(WINDOWS_PER_SECOND),
                next_k: 1,
                k: 1,
                chosen: 0,
                at: 0,
                rng: seed | 1,
            }),
        }
    }

    /// Whether the transaction beginning at `now` is read, and if so how
    /// many transactions its reading stands for.
    pub(crate) fn decide(&self, now: Instant) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if now.saturating_duration_since(s.window_from) >= RATE_WINDOW {
            let finished = s.in_window;
            if s.recent.len() == WINDOWS_PER_SECOND {
                s.recent.pop_front();
            }
            s.recent.push_back(finished);
            // Transactions per second over the windows seen, up to a second.
            let windows = s.recent.len() as u64;
            let per_second = s.recent.iter().sum::<u64>() * WINDOWS_PER_SECOND as u64 / windows;
            s.next_k = per_second.div_ceil(self.per_second).max(1);
            if s.next_k < s.k {
                s.at = s.k;
            }
            s.in_window = 0;
            s.window_from = now;
        }
        s.in_window += 1;
        if s.at == s.k {
            // A new block, of the size the latest rate asks for, or that
            // this window's pace so far asks for if larger: a burst after
            // a quiet spell (the first deadlines after a worker starts,
            // when the last second's rate is 0) would otherwise be read
            // whole for a window (150 readings at 600 orders/s where the
            // budget is a few). The pace only sizes the next block, never
            // ends the current one early: a pace that grows with each
            // transaction of a burst would cut nearly every block, each
            // giving its reading or none. Each block's size follows
            // from the transactions before it, never from their rows, so
            // every transaction's chance is 1 in its block's `k`; the window
            // reads about `b (1 + ln(n / b))` of its `n`, with `b` its share
            // of the budget (at least 1).
            let budget = self.per_second.max(WINDOWS_PER_SECOND as u64);
            let pace_k = s.in_window * WINDOWS_PER_SECOND as u64 / budget;
            s.k = s.next_k.max(pace_k).max(1);
            s.at = 0;
            s.chosen = splitmix(&mut s.rng) % s.k;
        }
        let read = s.at == s.chosen;
        s.at += 1;
        read.then_some(s.k)
    }
}

/// What a store sums of its readings to estimate the rows its
/// transactions read. Each field is a [`StoreStats`](super::StoreStats)
/// counter, so sums add across instances and subtract over a window; the
/// estimate divides only at the end ([`ReadingSums::estimate`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReadingSums {
    /// Transactions that could have been read (the population, `N`).
    pub(crate) eligible: u64,
    /// Readings (`n`).
    pub(crate) readings: u64,
    /// `Σ k`: the transactions the readings stand for (`N̂`).
    pub(crate) weight: u64,
    /// `Σ k·rows`.
    pub(crate) weighted_rows: u64,
    /// `Σ k(k - 1)`, `Σ k(k - 1)·rows` and `Σ k(k - 1)·rows²`: the
    /// variance's sum of squared residuals, expanded so that it can be
    /// summed before the ratio is known.
    pub(crate) spread_weight: u64,
    pub(crate) spread_rows: u64,
    pub(crate) spread_squares: u64,
}

/// A ratio estimate of the rows read, and its variance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowsEstimate {
    pub total: f64,
    pub variance: f64,
}

impl ReadingSums {
    /// One reading of `rows`, standing for `k` transactions (itself
    /// included). Saturating: a sum that overflows stays at its ceiling.
    pub(crate) fn reading(k: u64, rows: u64) -> ReadingSums {
        let spread = k.saturating_mul(k.saturating_sub(1));
        ReadingSums {
            eligible: 1,
            readings: 1,
            weight: k,
            weighted_rows: k.saturating_mul(rows),
            spread_weight: spread,
            spread_rows: spread.saturating_mul(rows),
            spread_squares: spread.saturating_mul(rows).saturating_mul(rows),
        }
    }

    /// One transaction that could have been read and was not.
    pub(crate) const UNREAD: ReadingSums = ReadingSums {
        eligible: 1,
        readings: 0,
        weight: 0,
        weighted_rows: 0,
        spread_weight: 0,
        spread_rows: 0,
        spread_squares: 0,
    };

    #[cfg(test)]
    fn add(&mut self, other: &ReadingSums) {
        self.eligible += other.eligible;
        self.readings += other.readings;
        self.weight += other.weight;
        self.weighted_rows += other.weighted_rows;
        self.spread_weight += other.spread_weight;
        self.spread_rows += other.spread_rows;
        self.spread_squares += other.spread_squares;
    }

    /// The rows the eligible transactions read: `N · R̂`, with the ratio
    /// `R̂ = Σ k·rows / Σ k`; `None` without a reading.
    ///
    /// The variance is the linearised (Taylor) variance of that ratio
    /// estimate over the readings, each reading's residual `e = rows - R̂`
    /// weighted as Poisson sampling at probability `1/k` weights it,
    /// `(1 - π)/π² = k(k - 1)`:
    ///
    /// `V̂ = (N / N̂)² · n/(n - 1) · Σ k(k - 1)(rows - R̂)²`
    ///
    /// Why this form rather than successive differences of the readings
    /// (the Horvitz–Thompson estimate's): residuals are 0 when every
    /// transaction reads the same rows, and so is the variance, as the
    /// estimate is then exact; a reading of a block of 1 (read whole)
    /// adds nothing; and a reading far from the run's mean counts in full,
    /// so drift and a rate that changes with the rows (a burst of cheap
    /// cancels in a run of dear ones, whose blocks are then cut short) are
    /// counted rather than differenced away between neighbours, which
    /// made successive differences too narrow in such runs. It shrinks
    /// with the number of readings, not with the blocks' sizes. `(N/N̂)²`
    /// rescales the residuals' total to the eligible count, and
    /// `n/(n - 1)` makes up for residuals taken from a ratio fitted to the
    /// same readings.
    pub(crate) fn estimate(&self) -> Option<RowsEstimate> {
        if self.weight == 0 {
            return None;
        }
        let (eligible, weight) = (self.eligible as f64, self.weight as f64);
        let ratio = self.weighted_rows as f64 / weight;
        // Σ k(k-1)(rows - R̂)², from the three sums: exactly 0 in floating
        // point when every reading has the same rows (integers below 2⁵³).
        let squares = self.spread_squares as f64 - 2.0 * ratio * self.spread_rows as f64
            + ratio * ratio * self.spread_weight as f64;
        let n = self.readings as f64;
        let small_sample = if self.readings > 1 {
            n / (n - 1.0)
        } else {
            1.0
        };
        let scale = eligible / weight;
        Some(RowsEstimate {
            total: eligible * ratio,
            variance: (scale * scale * small_sample * squares).max(0.0),
        })
    }
}

/// SplitMix64: small, fast, and good enough to pick a position in a block.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The probe's statement for the namespace's relations: per table, the
/// rows its sequential scans returned and the rows fetched from it, plus
/// the rows fetched through each index: what `pg_stat_xact_user_tables`
/// sums as `seq_tup_read + idx_tup_fetch`, for these relations only.
/// `relations` are `(oid, is_index)`; oids are integers, safe to inline.
pub(crate) fn reading_sql(relations: &[(u32, bool)]) -> String {
    let terms: Vec<String> = relations
        .iter()
        .map(|&(oid, is_index)| {
            if is_index {
                format!("pg_stat_get_xact_tuples_fetched({oid})")
            } else {
                format!(
                    "pg_stat_get_xact_tuples_returned({oid}) + pg_stat_get_xact_tuples_fetched({oid})"
                )
            }
        })
        .collect();
    let sum = if terms.is_empty() {
        "0".to_string()
    } else {
        terms.join(" + ")
    };
    format!("SELECT CAST({sum} AS BIGINT)")
}

/// The namespace's tables and indexes, as `(oid, is_index, is_orders)`
/// rows. A list without the `orders` table is not kept: the schema is not
/// there yet (or `current_schema()` is not the namespace).
pub(crate) const RELATIONS_SQL: &str = "SELECT CAST(c.oid AS BIGINT), \
     CASE WHEN c.relkind = 'i' THEN 1 ELSE 0 END, \
     CASE WHEN c.relname = 'orders' AND c.relkind = 'r' THEN 1 ELSE 0 END \
     FROM pg_class c WHERE c.relnamespace = to_regnamespace(current_schema()) \
     AND c.relkind IN ('r', 'i') ORDER BY c.oid";

#[cfg(test)]
mod tests {
    use super::*;

    /// Probes over `seconds` of transactions at `per_second` evenly spaced.
    fn probes(sampler: &Sampler, start: Instant, rate: f64, seconds: f64) -> (u64, u64) {
        let (mut probes, mut weight) = (0, 0);
        let n = (rate * seconds) as u64;
        for i in 0..n {
            let now = start + Duration::from_secs_f64(i as f64 / rate);
            if let Some(k) = sampler.decide(now) {
                probes += 1;
                weight += k;
            }
        }
        (probes, weight)
    }

    #[test]
    fn per_order_and_batch_strategies_pay_the_same_probes_per_window() {
        let start = Instant::now();
        // 600 transactions a second (one per order) against 8 (a scan's
        // batches): both read about 4 a second over 20 s.
        let per_order = Sampler::seeded(4, start, 1);
        let batch = Sampler::seeded(4, start, 2);
        let (a, wa) = probes(&per_order, start, 600.0, 20.0);
        let (b, wb) = probes(&batch, start, 8.0, 20.0);
        // No rate is known in the first 250 ms: the blocks grow with that
        // window's pace, so it reads a few of its 150 transactions (about
        // 1 + ln 150, 6), not all of them.
        assert!((75..=100).contains(&a), "per-order probes {a}");
        assert!((75..=90).contains(&b), "batch probes {b}");
        assert!(a.abs_diff(b) <= 15, "per-order {a}, batch {b}");
        // What the readings stand for adds up to the transactions made.
        assert!(wa.abs_diff(12_000) <= 150, "per-order weight {wa}");
        assert!(wb.abs_diff(160) <= 8, "batch weight {wb}");
    }

    #[test]
    fn bursts_do_not_raise_the_probes_much_above_the_budget() {
        // 150 transactions within 50 ms, every 250 ms (600/s on average),
        // the windows out of step with the bursts.
        let start = Instant::now();
        let sampler = Sampler::seeded(4, start, 3);
        let (mut probes, mut weight) = (0u64, 0u64);
        for burst in 0..80u64 {
            for i in 0..150u64 {
                let at = Duration::from_micros(burst * 250_000 + 100_000 + i * 333);
                if let Some(k) = sampler.decide(start + at) {
                    probes += 1;
                    weight += k;
                }
            }
        }
        // The first second reads more while the rate is learnt.
        assert!(probes <= 80 + 40 + 20, "{probes} probes in 20 s");
        assert!(weight.abs_diff(12_000) <= 600, "weight {weight}");
    }

    #[test]
    fn a_burst_after_a_quiet_start_is_not_read_whole() {
        // A worker's store starts 2 s before its first deadline, then
        // cancels 300 a second: about one reading a second after the first
        // busy window, and that window reads a few of its 75, not all.
        let start = Instant::now();
        let sampler = Sampler::seeded(1, start, 4);
        let (mut probes, mut weight) = (0u64, 0u64);
        for i in 0..3000u64 {
            let at = start + Duration::from_secs(2) + Duration::from_micros(i * 3333);
            if let Some(k) = sampler.decide(at) {
                probes += 1;
                weight += k;
            }
        }
        assert!(probes <= 10 + 8, "{probes} probes in 10 s at 1 a second");
        assert!(weight.abs_diff(3000) <= 900, "weight {weight}");
    }

    /// Runs transactions `(when, rows)` through `sampler` as a store does:
    /// the rows they read, and the sums the store keeps of its readings.
    fn sample(
        sampler: &Sampler,
        transactions: impl IntoIterator<Item = (Instant, u64)>,
    ) -> (u64, ReadingSums) {
        let (mut exact, mut sums) = (0, ReadingSums::default());
        for (at, rows) in transactions {
            exact += rows;
            match sampler.decide(at) {
                Some(k) => sums.add(&ReadingSums::reading(k, rows)),
                None => sums.add(&ReadingSums::UNREAD),
            }
        }
        (exact, sums)
    }

    #[test]
    fn the_interval_covers_the_truth_after_a_quiet_start() {
        // What the growing blocks must not do: narrow the reported
        // interval below the estimate's real spread. Over 1 000 runs of a
        // burst after a quiet start (random rows of 1 to 9), the 95 %
        // interval from the ratio's variance holds the true total in most
        // of them (about 910).
        let start = Instant::now();
        let mut covered = 0;
        let runs = 1000u64;
        for run in 0..runs {
            let sampler = Sampler::seeded(4, start, 1000 + run);
            let mut rows_rng = run | 1;
            let transactions = (0..900u64).map(|i| {
                let at = start + Duration::from_secs(2) + Duration::from_micros(i * 3333);
                (at, splitmix(&mut rows_rng) % 9 + 1)
            });
            let (exact, sums) = sample(&sampler, transactions);
            let estimate = sums.estimate().unwrap();
            let half = 1.96 * estimate.variance.sqrt();
            if (estimate.total - exact as f64).abs() <= half {
                covered += 1;
            }
        }
        assert!(
            covered >= runs * 85 / 100,
            "{covered} of {runs} intervals hold the total"
        );
    }

    #[test]
    fn fewer_transactions_than_the_budget_are_all_read() {
        let start = Instant::now();
        let sampler = Sampler::new(10, start);
        let (n, weight) = probes(&sampler, start, 3.0, 30.0);
        assert_eq!((n, weight), (90, 90));
    }

    #[test]
    fn the_estimate_is_unbiased_when_transactions_differ() {
        // Transactions alternate between 1 and 9 rows: a sampler that read
        // the first of each block (or any fixed position) would be biased.
        let start = Instant::now();
        // Each 2 s round has 7 blocks of 250 and about 8 readings of 1 or
        // 9 rows: over 2 000 rounds the error's deviation is about 0.5 %.
        let (mut estimate, mut exact) = (0.0, 0u64);
        for round in 0..2000u64 {
            let t0 = start + Duration::from_secs(round);
            let sampler = Sampler::seeded(4, t0, round);
            let transactions = (0..2000u64).map(|i| {
                (
                    t0 + Duration::from_millis(i),
                    if i % 2 == 0 { 1 } else { 9 },
                )
            });
            let (rows, sums) = sample(&sampler, transactions);
            exact += rows;
            estimate += sums.estimate().unwrap().total;
        }
        let error = (estimate - exact as f64).abs() / exact as f64;
        assert!(error < 0.02, "estimate {estimate} against {exact}");
    }

    #[test]
    fn constant_rows_are_estimated_exactly_whatever_the_blocks() {
        // 2 rows each, at a rate that rises and falls (blocks cut short
        // when it falls) and stops mid-block: the readings stand for more
        // or fewer transactions than were made, but not for other rows.
        let start = Instant::now();
        let mut stood_for_other_counts = 0;
        for seed in 0..200u64 {
            let sampler = Sampler::seeded(4, start, seed);
            let mut gaps = seed | 1;
            let mut at = start;
            let transactions: Vec<(Instant, u64)> = (0..3000u64)
                .map(|i| {
                    let fast = (i / 500) % 2 == 0;
                    let gap_us = if fast { 500 } else { 20_000 } + splitmix(&mut gaps) % 1000;
                    at += Duration::from_micros(gap_us);
                    (at, 2)
                })
                .collect();
            let (exact, sums) = sample(&sampler, transactions);
            if sums.weight != sums.eligible {
                stood_for_other_counts += 1;
            }
            let estimate = sums.estimate().unwrap();
            assert_eq!(estimate.total, exact as f64, "seed {seed}");
            assert_eq!(estimate.variance, 0.0, "seed {seed}");
        }
        // Where a sum of k times the rows would have been off.
        assert!(
            stood_for_other_counts > 150,
            "{stood_for_other_counts} of 200 runs whose readings stood for a count other than the made"
        );
    }

    /// `sums` with `n` more transactions that were not read.
    fn and_unread(mut sums: ReadingSums, n: u64) -> ReadingSums {
        for _ in 0..n {
            sums.add(&ReadingSums::UNREAD);
        }
        sums
    }

    #[test]
    fn the_variance_weighs_each_residual_by_k_times_k_minus_one() {
        // Readings of 1 row standing for 2 and of 4 rows standing for 4,
        // out of 6 eligible: R̂ = (2 + 16) / 6 = 3, total 18; residuals
        // -2 and 1, weighted 2·1 and 4·3: 8 + 12 = 20, times n/(n-1) = 2.
        let mut read = ReadingSums::reading(2, 1);
        read.add(&ReadingSums::reading(4, 4));
        let estimate = |sums| ReadingSums::estimate(&sums).map(|e| (e.total, e.variance));
        assert_eq!(estimate(and_unread(read, 4)), Some((18.0, 40.0)));
        // Twice the eligible transactions: twice the total, four times
        // the variance.
        assert_eq!(estimate(and_unread(read, 10)), Some((36.0, 160.0)));
        assert_eq!(estimate(and_unread(ReadingSums::default(), 3)), None);
    }

    #[test]
    fn transactions_read_one_by_one_add_no_variance() {
        let mut sums = ReadingSums::default();
        for rows in [1, 9, 4, 0, 30] {
            sums.add(&ReadingSums::reading(1, rows));
        }
        let estimate = sums.estimate().unwrap();
        assert_eq!((estimate.total, estimate.variance), (44.0, 0.0));
    }

    #[test]
    fn the_reading_names_each_relation_once() {
        assert_eq!(reading_sql(&[]), "SELECT CAST(0 AS BIGINT)");
        assert_eq!(
            reading_sql(&[(10, false), (11, true)]),
            "SELECT CAST(pg_stat_get_xact_tuples_returned(10) + \
             pg_stat_get_xact_tuples_fetched(10) + pg_stat_get_xact_tuples_fetched(11) AS BIGINT)"
        );
    }
}
