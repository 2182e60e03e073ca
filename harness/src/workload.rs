//! The workload plan: every order and payment callback with its intended
//! time, generated from the scenario's seed alone, so every strategy of a
//! run (and every rerun with the same seed) sees the same orders.

use crate::scenario::Scenario;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use strategies::OrderId;

/// One thing the driver does at `at_us` after t0.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    /// Intended time, microseconds after t0.
    pub at_us: i64,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Action {
    /// Create order `id`; its deadline is its creation time plus `timeout_us`.
    Create {
        id: OrderId,
        sku: i64,
        qty: i32,
        timeout_us: i64,
        /// The checkout fails after the order is written: its transaction
        /// rolls back (`checkout-abort-ratio`), and nothing may act on it.
        abort: bool,
    },
    /// Deliver payment callback `callback_id` for order `id`.
    Pay { id: OrderId, callback_id: String },
}

/// The whole plan, sorted by intended time.
#[derive(Debug, Clone)]
pub struct Plan {
    pub events: Vec<Event>,
    pub orders: usize,
    pub callbacks: usize,
    /// Orders created before this (after t0, in us) are warm-up.
    pub measured_from_us: i64,
    /// The latest intended deadline (after t0, in us).
    pub last_deadline_us: i64,
}

impl Plan {
    /// The orders created after the warm-up: the ones every figure counts.
    pub fn measured_order_ids(&self) -> impl Iterator<Item = OrderId> + '_ {
        self.events.iter().filter_map(|e| match e.action {
            Action::Create {
                id, abort: false, ..
            } if e.at_us >= self.measured_from_us => Some(id),
            _ => None,
        })
    }
}

/// Builds the plan for `scenario`. Draws happen in a fixed order per
/// order, so the plan depends on the seed and the scenario only.
pub fn plan(scenario: &Scenario) -> Plan {
    let mut rng = Draws(ChaCha8Rng::seed_from_u64(scenario.seed));
    // A stream of its own, drawn only when aborts are on, so scenarios
    // without them keep the plans (and reference runs) they always had.
    let mut aborts = Draws(ChaCha8Rng::seed_from_u64(scenario.seed ^ 0xab0a7));
    let arrival_us = (scenario.warmup + scenario.duration).as_micros() as f64;
    let count = (arrival_us / 1e6 * scenario.rate).floor() as u64;
    let total_weight: u32 = scenario.timeouts.iter().map(|t| t.weight).sum();
    let p = &scenario.payments;
    let us = |d: std::time::Duration| d.as_micros() as i64;
    let mut events = Vec::new();
    let mut callbacks = 0;
    let mut last_deadline_us = 0;
    for i in 0..count {
        let id = i as OrderId + 1;
        let created = (i as f64 * 1e6 / scenario.rate) as i64;
        let mut pick = rng.u32_below(total_weight);
        let timeout = scenario
            .timeouts
            .iter()
            .find(|t| {
                let hit = pick < t.weight;
                pick = pick.saturating_sub(t.weight);
                hit
            })
            .expect("weights sum to total");
        let timeout_us = us(timeout.after);
        let sku = rng.i64_inclusive(1, i64::from(scenario.stock.skus));
        let qty = rng.u32_inclusive(1, scenario.stock.max_qty) as i32;
        let deadline = created + timeout_us;
        last_deadline_us = last_deadline_us.max(deadline);
        let abort =
            scenario.checkout_abort_ratio > 0.0 && aborts.bool(scenario.checkout_abort_ratio);
        events.push(Event {
            at_us: created,
            action: Action::Create {
                id,
                sku,
                qty,
                timeout_us,
                abort,
            },
        });

        // Draw every payment variable for every order, paying or not, so
        // one order's choices never shift the next order's draws.
        let pays = rng.bool(p.pay_ratio);
        let kind = rng.f64();
        let spread = rng.f64();
        let near = rng.f64_inclusive(-1.0, 1.0);
        let late = rng.f64_inclusive(0.5, 1.0);
        let duplicated = rng.bool(p.duplicate_ratio);
        if !pays || abort {
            continue;
        }
        let paid_at = if kind < p.near_deadline_share {
            deadline + (near * us(p.near_deadline_epsilon) as f64) as i64
        } else if kind < p.near_deadline_share + p.late_share {
            deadline + (late * us(p.late_by) as f64) as i64
        } else {
            // Spread over the timeout, clear of the deadline race.
            created + (timeout_us as f64 * (0.05 + 0.85 * spread)) as i64
        };
        let arrives = paid_at.max(created + 1) + us(p.callback_delay);
        let callback_id = format!("cb-{id}");
        callbacks += 1;
        events.push(Event {
            at_us: arrives,
            action: Action::Pay {
                id,
                callback_id: callback_id.clone(),
            },
        });
        if duplicated {
            events.push(Event {
                at_us: arrives + us(p.duplicate_after),
                action: Action::Pay { id, callback_id },
            });
        }
    }
    events.sort_by_key(|e| e.at_us);
    Plan {
        events,
        orders: count as usize,
        callbacks,
        measured_from_us: us(scenario.warmup),
        last_deadline_us,
    }
}

/// The draws the plan was first made with, rand 0.8's `gen_range`,
/// `gen_bool` and `gen::<f64>()`, redone bit for bit on the generator's raw
/// `next_u32`/`next_u64`: later rand versions map those words to values
/// differently, and the published reference runs rest on these plans.
struct Draws(ChaCha8Rng);

impl Draws {
    /// `gen_range(0..n)` on `u32`.
    fn u32_below(&mut self, n: u32) -> u32 {
        assert!(n > 0, "empty range 0..0");
        self.u32_inclusive(0, n - 1)
    }

    /// `gen_range(low..=high)` on `u32`: widening multiply, rejecting the
    /// low words above the "zone" (rand 0.8's `UniformInt`).
    fn u32_inclusive(&mut self, low: u32, high: u32) -> u32 {
        assert!(low <= high, "empty range {low}..={high}");
        let range = high.wrapping_sub(low).wrapping_add(1);
        if range == 0 {
            return self.0.next_u32();
        }
        let zone = (range << range.leading_zeros()).wrapping_sub(1);
        loop {
            let m = u64::from(self.0.next_u32()) * u64::from(range);
            let (hi, lo) = ((m >> 32) as u32, m as u32);
            if lo <= zone {
                return low.wrapping_add(hi);
            }
        }
    }

    /// `gen_range(low..=high)` on `i64` (64-bit draws).
    fn i64_inclusive(&mut self, low: i64, high: i64) -> i64 {
        assert!(low <= high, "empty range {low}..={high}");
        let range = high.wrapping_sub(low).wrapping_add(1) as u64;
        if range == 0 {
            return self.0.next_u64() as i64;
        }
        let zone = (range << range.leading_zeros()).wrapping_sub(1);
        loop {
            let m = u128::from(self.0.next_u64()) * u128::from(range);
            let (hi, lo) = ((m >> 64) as u64, m as u64);
            if lo <= zone {
                return low.wrapping_add(hi as i64);
            }
        }
    }

    /// `gen_bool(p)` (rand 0.8's `Bernoulli`): `p == 1` draws nothing.
    fn bool(&mut self, p: f64) -> bool {
        if !(0.0..1.0).contains(&p) {
            assert!(p == 1.0, "probability {p} not in [0, 1]");
            return true;
        }
        // 2^64
        const SCALE: f64 = 2.0 * (1u64 << 63) as f64;
        self.0.next_u64() < (p * SCALE) as u64
    }

    /// `gen::<f64>()`: 53 random bits in [0, 1).
    fn f64(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// `gen_range(low..=high)` on `f64` (rand 0.8's `UniformFloat`): 52
    /// random bits as a float in [1, 2), scaled so `high` is reachable.
    fn f64_inclusive(&mut self, low: f64, high: f64) -> f64 {
        assert!(
            low <= high && (high - low).is_finite(),
            "bad range {low}..={high}"
        );
        let one_to_two = |bits: u64| f64::from_bits(bits | (1023u64 << 52));
        let max_rand = one_to_two(u64::MAX >> 12) - 1.0;
        let mut scale = (high - low) / max_rand;
        while scale * max_rand + low > high {
            scale = f64::from_bits(scale.to_bits() - 1);
        }
        let value0_1 = one_to_two(self.0.next_u64() >> 12) - 1.0;
        value0_1 * scale + low
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Scenario, QUICK};

    #[test]
    fn same_seed_same_plan_and_sorted() {
        let s = Scenario::parse(QUICK, "quick").unwrap();
        let (a, b) = (plan(&s), plan(&s));
        assert_eq!(a.events, b.events);
        assert_eq!(a.orders, 850);
        assert!(a.events.windows(2).all(|w| w[0].at_us <= w[1].at_us));
        let mut other = s.clone();
        other.seed += 1;
        assert_ne!(plan(&other).events, a.events);
    }

    #[test]
    fn payments_follow_the_ratios() {
        let mut s = Scenario::parse(QUICK, "quick").unwrap();
        s.rate = 2000.0;
        let p = plan(&s);
        let payers = p.callbacks as f64 / p.orders as f64;
        assert!((payers - 0.5).abs() < 0.03, "pay ratio {payers}");
        let pays = p
            .events
            .iter()
            .filter(|e| matches!(e.action, Action::Pay { .. }))
            .count();
        let dup = (pays - p.callbacks) as f64 / p.callbacks as f64;
        assert!((dup - 0.1).abs() < 0.02, "duplicate ratio {dup}");
    }

    /// FNV-1a over every event of the plan: a fingerprint that moves if
    /// any order, deadline, payment or abort does.
    fn fingerprint(plan: &Plan) -> u64 {
        let mut h: u64 = 0xcbf29ce484222325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x100000001b3);
            }
        };
        for e in &plan.events {
            eat(&e.at_us.to_le_bytes());
            match &e.action {
                Action::Create {
                    id,
                    sku,
                    qty,
                    timeout_us,
                    abort,
                } => {
                    eat(b"C");
                    eat(&id.to_le_bytes());
                    eat(&sku.to_le_bytes());
                    eat(&qty.to_le_bytes());
                    eat(&timeout_us.to_le_bytes());
                    eat(&[u8::from(*abort)]);
                }
                Action::Pay { id, callback_id } => {
                    eat(b"P");
                    eat(&id.to_le_bytes());
                    eat(callback_id.as_bytes());
                }
            }
        }
        h
    }

    /// Published reference runs rest on these plans: the same seed must
    /// give the very same orders, payments and aborts whatever the random
    /// number crates' versions. The fingerprints were taken from the
    /// generator as it was on rand 0.8 / rand_chacha 0.3 (its `gen_range`
    /// and `gen_bool`), before [`Draws`] redid those draws by hand.
    #[test]
    fn seed_42_gives_the_plans_the_reference_runs_were_made_with() {
        let mixed = Scenario::parse(
            include_str!("../scenarios/mixed-timeouts.toml"),
            "mixed-timeouts",
        )
        .unwrap();
        let mut quick = Scenario::parse(QUICK, "quick").unwrap();
        quick.seed = 42;
        // Aborts on (their own stream), every order pays (a draw-free
        // certain `pay` draw), none duplicated (a zero-probability draw).
        let mut edges = quick.clone();
        edges.checkout_abort_ratio = 0.2;
        edges.payments.pay_ratio = 1.0;
        edges.payments.duplicate_ratio = 0.0;
        edges.stock.skus = 1_000_000;
        edges.stock.max_qty = 7;
        let mut mixed42 = mixed.clone();
        mixed42.seed = 42;
        let got = [
            fingerprint(&plan(&quick)),
            fingerprint(&plan(&edges)),
            fingerprint(&plan(&mixed42)),
            fingerprint(&plan(&mixed)),
        ];
        let want = [
            0x71c1324d49d21966,
            0xb91d7f197467a863,
            0xaafced0ebb66c5ff,
            0xe974fc0ce344e09f,
        ];
        assert_eq!(got, want, "{got:#x?}");
    }
}
