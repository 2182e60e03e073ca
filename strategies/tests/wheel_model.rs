//! Property test: the timing wheel against a `BinaryHeap` model over random
//! sequences of insert / cancel / advance / poll-with-reinsert operations.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use proptest::prelude::*;
use strategies::timing_wheel::wheel::{TimerKey, TimingWheel, WheelConfig};

/// Id offset of timers re-armed during a poll sweep.
const REARMED: u64 = 1 << 62;

#[derive(Clone, Debug)]
enum Op {
    /// Insert at `now + delay` (delay 0 must be handed back as `Err`).
    Insert { delay: u64 },
    /// Cancel the `pick`-th key ever issued (may be stale).
    Cancel { pick: usize },
    /// `advance(now + delta)`.
    Advance { delta: u64 },
    /// Sweep with `poll(now + delta)`, re-inserting some fired timers at
    /// `deadline + gap` during the sweep.
    PollReinsert { delta: u64, gap: u64 },
}

fn op_strategy(span: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..40).prop_map(|delay| Op::Insert { delay }),
        2 => (0u64..4 * span).prop_map(|delay| Op::Insert { delay }),
        1 => (0u64..64 * span).prop_map(|delay| Op::Insert { delay }),
        2 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        3 => (0u64..4).prop_map(|delta| Op::Advance { delta }),
        1 => (0u64..2 * span).prop_map(|delta| Op::Advance { delta }),
        1 => (0u64..8 * span).prop_map(|delta| Op::Advance { delta }),
        1 => ((0u64..span), (1u64..20)).prop_map(|(delta, gap)| Op::PollReinsert { delta, gap }),
    ]
}

/// Reference model: a min-heap with lazy cancellation.
#[derive(Default)]
struct Model {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    live: HashSet<u64>,
}

impl Model {
    fn insert(&mut self, deadline: u64, id: u64) {
        self.heap.push(Reverse((deadline, id)));
        self.live.insert(id);
    }
    fn cancel(&mut self, id: u64) -> bool {
        self.live.remove(&id)
    }
    /// Pops the smallest live timer with `deadline <= now`.
    fn pop_due(&mut self, now: u64) -> Option<(u64, u64)> {
        while let Some(&Reverse((d, id))) = self.heap.peek() {
            if d > now {
                return None;
            }
            self.heap.pop();
            if self.live.remove(&id) {
                return Some((d, id));
            }
        }
        None
    }
    fn min_live(&self) -> Option<u64> {
        self.heap
            .iter()
            .filter(|Reverse((_, id))| self.live.contains(id))
            .map(|Reverse((d, _))| *d)
            .min()
    }
}

fn check_sweep(fired: &[(u64, u64)], prev_now: u64, now: u64) -> Result<(), TestCaseError> {
    for w in fired.windows(2) {
        prop_assert!(w[0].0 <= w[1].0, "fire order not non-decreasing: {fired:?}");
    }
    for &(d, id) in fired {
        prop_assert!(d <= now, "timer {id} fired early: deadline {d} > now {now}");
        // It was not due at the previous advance, so it fired at the first
        // advance where now >= deadline.
        prop_assert!(
            d > prev_now,
            "timer {id} fired late: deadline {d} <= previous now {prev_now}"
        );
    }
    Ok(())
}

fn run(cfg: WheelConfig, start: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut wheel: TimingWheel<u64> = TimingWheel::new(cfg, start);
    let mut model = Model::default();
    let mut keys: Vec<(TimerKey, u64)> = Vec::new();
    let mut next_id = 0u64;
    let mut now = start;

    for op in ops {
        match op {
            Op::Insert { delay } => {
                let id = next_id;
                next_id += 1;
                let deadline = now.saturating_add(delay);
                match wheel.insert(deadline, id) {
                    Ok(key) => {
                        prop_assert!(deadline > now);
                        prop_assert!(wheel.contains(key));
                        prop_assert_eq!(wheel.deadline(key), Some(deadline));
                        model.insert(deadline, id);
                        keys.push((key, id));
                    }
                    Err(v) => {
                        prop_assert_eq!(v, id);
                        prop_assert!(deadline <= now, "insert refused a future deadline");
                    }
                }
            }
            Op::Cancel { pick } => {
                if keys.is_empty() {
                    continue;
                }
                let (key, id) = keys[pick % keys.len()];
                let expect = model.cancel(id);
                let got = wheel.cancel(key);
                prop_assert_eq!(got, expect.then_some(id), "cancel of {} wrong", id);
                prop_assert!(!wheel.contains(key));
            }
            Op::Advance { delta } => {
                let target = now.saturating_add(delta);
                let mut fired = Vec::new();
                wheel.advance(target, |d, id| fired.push((d, id)));
                check_sweep(&fired, now, target)?;
                let mut expected = Vec::new();
                while let Some(x) = model.pop_due(target) {
                    expected.push(x);
                }
                fired.sort_unstable();
                prop_assert_eq!(&fired, &expected, "fired set differs at now={}", target);
                now = target;
            }
            Op::PollReinsert { delta, gap } => {
                let target = now.saturating_add(delta);
                // Every original timer whose id is divisible by 3 is re-armed
                // at `deadline + gap` from inside the sweep, under the id
                // `id + REARMED` (re-armed timers are not re-armed again), so
                // the outcome does not depend on the order of ties.
                let mut fired = Vec::new();
                while let Some((d, id)) = wheel.poll(target) {
                    prop_assert_eq!(wheel.now(), d);
                    fired.push((d, id));
                    prop_assert_eq!(wheel.insert(d, 0), Err(0), "due deadline accepted");
                    if id < REARMED && id % 3 == 0 && d.checked_add(gap).is_some() {
                        let key = wheel
                            .insert(d + gap, id + REARMED)
                            .expect("future deadline");
                        keys.push((key, id + REARMED));
                    }
                }
                check_sweep(&fired, now, target)?;
                let mut expected = Vec::new();
                while let Some((d, id)) = model.pop_due(target) {
                    expected.push((d, id));
                    if id < REARMED && id % 3 == 0 && d.checked_add(gap).is_some() {
                        model.insert(d + gap, id + REARMED);
                    }
                }
                fired.sort_unstable();
                prop_assert_eq!(&fired, &expected, "poll sweep differs at now={}", target);
                now = target;
            }
        }
        prop_assert_eq!(wheel.len(), model.live.len());
        prop_assert_eq!(wheel.now(), now);
        if let Some(min) = model.min_live() {
            let nd = wheel
                .next_deadline()
                .expect("non-empty wheel has a next deadline");
            prop_assert!(
                nd <= min,
                "next_deadline {} later than earliest {}",
                nd,
                min
            );
            prop_assert!(nd > now, "next_deadline {} not in the future", nd);
        } else {
            prop_assert_eq!(wheel.next_deadline(), None);
        }
    }
    wheel.assert_invariants();

    // Finally drain everything: the wheel must fire exactly the live set.
    let mut fired = Vec::new();
    wheel.advance(u64::MAX, |d, id| fired.push((d, id)));
    check_sweep(&fired, now, u64::MAX)?;
    let mut expected = Vec::new();
    while let Some(x) = model.pop_due(u64::MAX) {
        expected.push(x);
    }
    fired.sort_unstable();
    prop_assert_eq!(fired, expected);
    prop_assert!(wheel.is_empty());
    wheel.assert_invariants();
    Ok(())
}

fn configs() -> impl Strategy<Value = (WheelConfig, u64)> {
    prop_oneof![
        Just((WheelConfig::new(2, 3), 64u64)),
        Just((WheelConfig::new(1, 4), 16u64)),
        Just((WheelConfig::new(3, 2), 64u64)),
        Just((WheelConfig::default(), 1u64 << 12)),
    ]
}

proptest! {
    // 512 cases by default; PROPTEST_CASES=N for a longer soak.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
    ))]

    #[test]
    fn wheel_matches_heap_model(
        (cfg, span, start, ops) in configs().prop_flat_map(|(cfg, span)| (
            Just(cfg),
            Just(span),
            prop_oneof![Just(0u64), 0u64..1_000_000, Just(u64::MAX - 8 * span)],
            proptest::collection::vec(op_strategy(span), 1..200),
        ))
    ) {
        let _ = span;
        run(cfg, start, ops)?;
    }
}

/// With `advance` called on every tick, every timer fires exactly on its
/// deadline tick (so at most one tick after it in any tick-driven driver).
#[test]
fn tick_by_tick_fires_exactly_on_deadline() {
    let cfg = WheelConfig::new(2, 3);
    let mut wheel = TimingWheel::new(cfg, 0);
    let mut x = 7u64;
    for id in 0..2_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        wheel.insert(1 + (x >> 40) % 1_000, id).unwrap();
    }
    let mut count = 0;
    for t in 1..=1_000u64 {
        wheel.advance(t, |d, _| {
            assert_eq!(d, t);
            count += 1;
        });
    }
    assert_eq!(count, 2_000);
}
