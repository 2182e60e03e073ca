//! Unit tests of the wheel: exhaustive level/slot arithmetic on small
//! geometries, exact firing, cancel, far-future deadlines and big jumps.

use super::slab::{Entry, CHUNK};
use super::*;

fn small() -> WheelConfig {
    WheelConfig::new(2, 3) // 4 slots, 3 levels, span 64
}

/// Reference definition: the lowest level `k` whose slot-range-aligned
/// window above it is shared by `now` and `deadline`.
fn level_brute(cfg: WheelConfig, now: u64, deadline: u64) -> Option<u32> {
    (0..cfg.levels).find(|&k| {
        let above = (k + 1) * cfg.slot_bits;
        now >> above == deadline >> above
    })
}

#[test]
fn slab_entry_is_24_bytes_for_u64_payload() {
    assert_eq!(std::mem::size_of::<Entry<u64>>(), 24);
}

#[test]
fn config_validation() {
    assert_eq!(WheelConfig::default(), WheelConfig::new(6, 6));
    assert_eq!(WheelConfig::default().span_ticks(), 1 << 36);
    assert!(WheelConfig::default().span_ticks() > 24 * 3600 * 1000);
    assert_eq!(small().span_ticks(), 64);
    assert_eq!(
        WheelConfig::new(6, 0).validate(),
        Err(ConfigError::ZeroLevels)
    );
    assert_eq!(
        WheelConfig::new(0, 3).validate(),
        Err(ConfigError::SlotBitsOutOfRange(0))
    );
    assert_eq!(
        WheelConfig::new(7, 3).validate(),
        Err(ConfigError::SlotBitsOutOfRange(7))
    );
    assert!(matches!(
        WheelConfig::new(6, 11).validate(),
        Err(ConfigError::SpanOverflow { .. })
    ));
    assert!(matches!(
        WheelConfig::new(1, u32::MAX).validate(),
        Err(ConfigError::SpanOverflow { .. })
    ));
    assert!(WheelConfig::new(1, 63).validate().is_ok());
    assert!(WheelConfig::new(6, 10).validate().is_ok());
    assert!(TimingWheel::<()>::try_new(WheelConfig::new(6, 0), 0).is_err());
}

#[test]
#[should_panic(expected = "at least one level")]
fn zero_levels_panics() {
    let _ = TimingWheel::<()>::new(WheelConfig::new(6, 0), 0);
}

#[test]
#[should_panic(expected = "overflows")]
fn span_overflow_panics() {
    let _ = WheelConfig::new(6, 11).span_ticks();
}

#[test]
fn ticks_ceil_rounds_up() {
    assert_eq!(ticks_ceil(0, 1000), 0);
    assert_eq!(ticks_ceil(1, 1000), 1);
    assert_eq!(ticks_ceil(999, 1000), 1);
    assert_eq!(ticks_ceil(1000, 1000), 1);
    assert_eq!(ticks_ceil(1001, 1000), 2);
    assert_eq!(ticks_ceil(u64::MAX, 1), u64::MAX);
    assert_eq!(ticks_ceil(u64::MAX, 2), 1 << 63);
}

/// Exhaustive level/slot arithmetic for small configs: every `now` in
/// `0..N` and `deadline` in `now+1..N`, `N` = three spans.
#[test]
fn level_and_slot_exhaustive() {
    for cfg in [
        WheelConfig::new(2, 3),
        WheelConfig::new(1, 4),
        WheelConfig::new(3, 2),
        WheelConfig::new(2, 1),
    ] {
        let span = cfg.span_ticks();
        let n = 3 * span;
        let s = cfg.slots_per_level();
        for now in 0..n {
            for deadline in now + 1..n {
                let level = cfg.level_for(now, deadline);
                assert_eq!(
                    level,
                    level_brute(cfg, now, deadline),
                    "{cfg:?} {now} {deadline}"
                );
                let same_epoch = now / span == deadline / span;
                assert_eq!(level.is_some(), same_epoch);
                if deadline - now >= span {
                    assert_eq!(level, None);
                }
                let Some(level) = level else { continue };
                let range = s.pow(level); // ticks per slot
                let slot = cfg.slot_for(deadline, level) as u64;
                assert!(slot < s);
                assert_eq!(slot, (deadline / range) % s);
                // The slot is strictly ahead of now's slot on that level...
                assert!(
                    slot > cfg.slot_for(now, level) as u64,
                    "{cfg:?} {now} {deadline}"
                );
                // ...its start is after now and at most the deadline...
                let start = deadline - deadline % range;
                assert!(start > now && start <= deadline);
                // ...and the deadline is inside it.
                assert!(deadline < start + range);
                // Level 0 slots hold exactly one tick.
                if level == 0 {
                    assert_eq!(start, deadline);
                }
                // The wheel's fast path agrees with the config's.
                let w = TimingWheel::<()>::new(cfg, now);
                assert_eq!(
                    w.list_for(deadline) as u64,
                    u64::from(level) * s + slot,
                    "{cfg:?} {now} {deadline}"
                );
            }
        }
    }
}

#[test]
fn list_for_default_config_edges() {
    let cfg = WheelConfig::default();
    let w = TimingWheel::<()>::new(cfg, 0);
    assert_eq!(w.list_for(0), w.pending_list);
    assert_eq!(w.list_for(1), 1);
    assert_eq!(w.list_for(63), 63);
    assert_eq!(w.list_for(64), 64 + 1);
    assert_eq!(w.list_for((1 << 36) - 1), 5 * 64 + 63);
    assert_eq!(w.list_for(1 << 36), w.overflow_list);
    assert_eq!(w.list_for(u64::MAX), w.overflow_list);
}

fn drain(w: &mut TimingWheel<u64>, now: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    w.advance(now, |d, v| out.push((d, v)));
    w.assert_invariants();
    out
}

#[test]
fn fires_on_exact_deadline_never_early() {
    for cfg in [small(), WheelConfig::default()] {
        for deadline in 1..300u64 {
            let mut w = TimingWheel::new(cfg, 0);
            w.insert(deadline, deadline).unwrap();
            for t in 1..deadline {
                w.advance(t, |_, _| panic!("fired early at {t}"));
                assert!(w.next_deadline().unwrap() <= deadline);
                assert!(w.next_deadline().unwrap() > t);
            }
            assert_eq!(drain(&mut w, deadline), vec![(deadline, deadline)]);
            assert!(w.is_empty());
            assert_eq!(w.next_deadline(), None);
        }
    }
}

#[test]
fn next_deadline_exact_on_level0_and_lower_bound_above() {
    let mut w = TimingWheel::new(WheelConfig::default(), 0);
    assert_eq!(w.next_deadline(), None);
    w.insert(5000, 1).unwrap();
    let nd = w.next_deadline().unwrap();
    assert!(nd <= 5000 && nd > 0);
    w.insert(7, 2).unwrap();
    assert_eq!(w.next_deadline(), Some(7));
    // Follow next_deadline like a driver: reaches 5000 without overshoot.
    let mut fired = Vec::new();
    while let Some(t) = w.next_deadline() {
        w.advance(t, |d, v| fired.push((d, v, t)));
    }
    assert_eq!(fired, vec![(7, 2, 7), (5000, 1, 5000)]);
}

#[test]
fn insert_past_deadline_returns_err() {
    let mut w = TimingWheel::new(small(), 100);
    assert_eq!(w.insert(100, 'a'), Err('a'));
    assert_eq!(w.insert(3, 'b'), Err('b'));
    assert_eq!(w.insert(0, 'c'), Err('c'));
    assert!(w.insert(101, 'd').is_ok());
    assert_eq!(w.len(), 1);
}

#[test]
fn cancel_and_stale_keys() {
    let mut w = TimingWheel::new(small(), 0);
    let a = w.insert(10, 1u64).unwrap();
    let b = w.insert(10, 2).unwrap();
    let c = w.insert(1000, 3).unwrap(); // overflow list
    assert_eq!(w.deadline(a), Some(10));
    assert_eq!(w.cancel(a), Some(1));
    assert_eq!(w.cancel(a), None, "double cancel");
    assert!(!w.contains(a));
    // The freed entry is reused; the stale key must not touch the new timer.
    let d = w.insert(20, 4).unwrap();
    assert_ne!(a, d);
    assert_eq!(w.cancel(a), None);
    assert_eq!(w.cancel(c), Some(3));
    w.assert_invariants();
    assert_eq!(drain(&mut w, 10), vec![(10, 2)]);
    assert_eq!(w.cancel(b), None, "stale after fire");
    assert_eq!(drain(&mut w, 2000), vec![(20, 4)]);
    assert_eq!(w.cancel(d), None);
    assert!(w.is_empty());
}

#[test]
fn far_future_beyond_span() {
    let cfg = small(); // span 64
    let mut w = TimingWheel::new(cfg, 5);
    let deadlines = [
        6u64,
        63,
        64,
        69,
        70,
        127,
        128,
        500,
        64 * 64 + 3,
        1 << 40,
        u64::MAX,
    ];
    for (i, &d) in deadlines.iter().enumerate() {
        w.insert(d, i as u64).unwrap();
    }
    w.assert_invariants();
    let mut fired = Vec::new();
    // Step in uneven jumps, never early.
    let mut now = 5;
    while !w.is_empty() {
        let next = w.next_deadline().unwrap();
        assert!(next > now);
        now = next;
        w.advance(now, |d, v| {
            assert!(d <= now);
            fired.push((d, v));
        });
        w.assert_invariants();
        // Everything fired is exactly due now (we never skipped past).
        assert!(fired.iter().all(|&(d, _)| d <= now));
    }
    let got: Vec<u64> = fired.iter().map(|&(d, _)| d).collect();
    assert_eq!(got, deadlines.to_vec());
}

#[test]
fn far_future_default_config_big_jump() {
    let mut w = TimingWheel::new(WheelConfig::default(), 1_000);
    let span = w.config().span_ticks();
    w.insert(1_000 + span * 3 + 17, 1u64).unwrap();
    w.insert(1_000 + span - 1, 2).unwrap();
    assert!(drain(&mut w, 1_000 + span - 2).is_empty());
    assert_eq!(drain(&mut w, 1_000 + span - 1), vec![(1_000 + span - 1, 2)]);
    assert!(drain(&mut w, 1_000 + span * 3 + 16).is_empty());
    assert_eq!(drain(&mut w, u64::MAX), vec![(1_000 + span * 3 + 17, 1)]);
    assert_eq!(w.now(), u64::MAX);
}

#[test]
fn big_jump_fires_all_in_order() {
    let mut w = TimingWheel::new(WheelConfig::default(), 0);
    // One hour at 1 ms ticks, scattered deadlines.
    let mut x = 12345u64;
    let mut expect = Vec::new();
    for i in 0..10_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let d = 1 + (x >> 33) % 3_600_000;
        w.insert(d, i).unwrap();
        expect.push(d);
    }
    expect.sort_unstable();
    let fired = drain(&mut w, 3_600_000);
    let got: Vec<u64> = fired.iter().map(|&(d, _)| d).collect();
    assert_eq!(got, expect);
    assert!(w.is_empty());
    assert_eq!(w.now(), 3_600_000);
}

#[test]
fn huge_jump_on_empty_wheel_is_cheap() {
    let mut w = TimingWheel::<u64>::new(WheelConfig::default(), 0);
    w.advance(u64::MAX / 2, |_, _| unreachable!());
    assert_eq!(w.now(), u64::MAX / 2);
    w.insert(u64::MAX, 1).unwrap();
    w.insert(u64::MAX / 2 + 1, 2).unwrap();
    assert_eq!(
        drain(&mut w, u64::MAX),
        vec![(u64::MAX / 2 + 1, 2), (u64::MAX, 1)]
    );
}

#[test]
fn advancing_backwards_is_a_noop() {
    let mut w = TimingWheel::new(small(), 50);
    w.insert(55, 1u64).unwrap();
    assert!(drain(&mut w, 10).is_empty());
    assert_eq!(w.now(), 50);
    assert_eq!(w.poll(49), None);
    assert_eq!(w.now(), 50);
    assert_eq!(drain(&mut w, 55), vec![(55, 1)]);
}

#[test]
fn reinsert_after_advance() {
    let mut w = TimingWheel::new(small(), 0);
    w.insert(10, 10u64).unwrap();
    let fired = drain(&mut w, 10);
    assert_eq!(fired, vec![(10, 10)]);
    // Re-arm relative to the fired deadline.
    assert_eq!(w.insert(10, 0), Err(0));
    w.insert(10 + 30, 40).unwrap();
    assert!(drain(&mut w, 39).is_empty());
    assert_eq!(drain(&mut w, 40), vec![(40, 40)]);
}

#[test]
fn reinsert_during_poll_sweep() {
    let mut w = TimingWheel::new(small(), 0);
    for d in [3u64, 5, 20] {
        w.insert(d, d).unwrap();
    }
    let mut fired = Vec::new();
    while let Some((d, v)) = w.poll(30) {
        assert_eq!(w.now(), d, "now() is the deadline being fired");
        fired.push(d);
        if v == 3 {
            // Periodic re-arm inside the sweep: fires later in it, in order.
            w.insert(d + 4, 99).unwrap();
            assert_eq!(w.insert(d, 0), Err(0));
        }
        if v == 99 {
            w.insert(d + 100, 100).unwrap(); // beyond the sweep
        }
        w.assert_invariants();
    }
    assert_eq!(fired, vec![3, 5, 7, 20]);
    assert_eq!(w.now(), 30);
    assert_eq!(w.len(), 1);
    assert_eq!(drain(&mut w, 107), vec![(107, 100)]);
}

#[test]
fn cancel_pending_during_poll_sweep() {
    let mut w = TimingWheel::new(WheelConfig::default(), 0);
    let a = w.insert(64, 1u64).unwrap();
    let b = w.insert(64, 2).unwrap();
    let first = w.poll(100).unwrap();
    // The other one is due and pending; cancel it.
    let other = if first.1 == 1 { b } else { a };
    assert_eq!(w.next_deadline(), Some(64));
    assert!(w.cancel(other).is_some());
    w.assert_invariants();
    assert_eq!(w.poll(100), None);
    assert!(w.is_empty());
}

#[test]
fn many_timers_same_tick_and_slot_reuse() {
    let mut w = TimingWheel::new(small(), 0);
    let keys: Vec<_> = (0..100u64).map(|i| w.insert(40, i).unwrap()).collect();
    for k in keys.iter().step_by(2) {
        assert!(w.cancel(*k).is_some());
    }
    let mut fired = drain(&mut w, 40);
    fired.sort_unstable();
    assert_eq!(
        fired,
        (1..100).step_by(2).map(|i| (40, i)).collect::<Vec<_>>()
    );
    // Slab entries are recycled.
    let cap = w.slab.created;
    for i in 0..100u64 {
        w.insert(41 + i, i).unwrap();
    }
    assert_eq!(w.slab.created, cap);
    w.assert_invariants();
}

#[test]
fn payload_is_dropped_with_wheel() {
    use std::rc::Rc;
    let rc = Rc::new(());
    {
        let mut w = TimingWheel::new(small(), 0);
        for d in 1..50 {
            w.insert(d * 7, Rc::clone(&rc)).unwrap();
        }
        w.advance(100, |_, v| drop(v));
        assert_eq!(Rc::strong_count(&rc), 1 + w.len());
    }
    assert_eq!(Rc::strong_count(&rc), 1);
}

/// Scattered deadlines in `1..=max`, the same for every call.
fn scattered(n: u64, max: u64) -> Vec<u64> {
    let mut x = 987_654_321u64;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            1 + (x >> 33) % max
        })
        .collect()
}

#[test]
fn dense_big_jump_fires_whole_slots_like_poll() {
    // ~12 timers per tick: level-1 and level-2 slots are fired whole by
    // `advance` (counting sort); `poll` cascades them. Same timers, same
    // deadlines, non-decreasing order.
    let deadlines = scattered(50_000, 60_000);
    let mut by_advance = TimingWheel::new(WheelConfig::default(), 0);
    let mut by_poll = TimingWheel::new(WheelConfig::default(), 0);
    for (i, &d) in deadlines.iter().enumerate() {
        by_advance.insert(d, i as u64).unwrap();
        by_poll.insert(d, i as u64).unwrap();
    }
    // Stop inside a level-2 slot, so its last part is cascaded, not fired whole.
    let first = drain(&mut by_advance, 50_000);
    let mut polled = Vec::new();
    while let Some(fired) = by_poll.poll(50_000) {
        polled.push(fired);
    }
    by_poll.assert_invariants();
    assert!(first.windows(2).all(|w| w[0].0 <= w[1].0), "out of order");
    for &(d, i) in &first {
        assert_eq!(d, deadlines[i as usize]);
    }
    let mut sorted_first = first.clone();
    sorted_first.sort_unstable();
    polled.sort_unstable();
    assert_eq!(sorted_first, polled);
    assert_eq!(by_advance.now(), 50_000);
    assert_eq!(by_advance.len(), by_poll.len());
    let rest = drain(&mut by_advance, 60_000);
    assert!(rest.windows(2).all(|w| w[0].0 <= w[1].0), "out of order");
    assert!(rest.iter().all(|&(d, _)| d > 50_000));
    assert_eq!(first.len() + rest.len(), deadlines.len());
    assert!(by_advance.is_empty());
}

#[test]
fn panic_in_fire_of_a_whole_slot_loses_only_that_timer() {
    use std::collections::HashSet;
    // All in level-2 slot 1 (ticks 4096..8191), fired whole by one advance.
    let deadlines: Vec<u64> = scattered(500, 4096).iter().map(|d| 4095 + d).collect();
    let mut w = TimingWheel::new(WheelConfig::default(), 0);
    let keys: Vec<TimerKey> = deadlines
        .iter()
        .enumerate()
        .map(|(i, &d)| w.insert(d, i as u64).unwrap())
        .collect();
    let mut fired = Vec::new();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.advance(10_000, |d, i| {
            if fired.len() == 10 {
                panic!("fire failed");
            }
            fired.push((d, i));
        })
    }));
    assert!(outcome.is_err());
    w.assert_invariants();
    assert_eq!(w.len(), deadlines.len() - 11);
    let fired_ids: HashSet<u64> = fired.iter().map(|&(_, i)| i).collect();
    let lost: Vec<usize> = (0..keys.len())
        .filter(|&i| !w.contains(keys[i]) && !fired_ids.contains(&(i as u64)))
        .collect();
    assert_eq!(lost.len(), 1, "exactly the panicking timer is gone");
    let rest = drain(&mut w, 10_000);
    let all: Vec<u64> = fired.iter().chain(&rest).map(|&(d, _)| d).collect();
    assert!(all.windows(2).all(|p| p[0] <= p[1]), "out of order");
    assert_eq!(all.len(), deadlines.len() - 1);
    assert!(w.is_empty());
}

#[test]
fn cancelled_timers_key_left_on_its_slot_never_fires_the_entrys_next_timer() {
    // Both timers land in the same level-1 slot (ticks 64..127); the second
    // reuses the cancelled one's slab entry, so the slot holds the old key
    // (a tombstone) and the new one for the same index.
    let mut w = TimingWheel::new(WheelConfig::default(), 0);
    let old = w.insert(100, 1u64).unwrap();
    let keep = w.insert(90, 2).unwrap();
    assert_eq!(w.cancel(old), Some(1));
    let new = w.insert(110, 3).unwrap();
    assert_eq!(new.index, old.index, "slab entry reused");
    assert_ne!(new.gen, old.gen);
    w.assert_invariants();
    assert_eq!(w.cancel(old), None, "stale key stays stale");
    assert_eq!(drain(&mut w, 200), vec![(90, 2), (110, 3)]);
    assert!(!w.contains(keep) && !w.contains(new));
    assert!(w.is_empty());
}

#[test]
fn a_slot_of_only_cancelled_timers_is_a_harmless_wake_up() {
    let mut w = TimingWheel::new(WheelConfig::default(), 0);
    let early: Vec<TimerKey> = (0..50).map(|i| w.insert(5, i).unwrap()).collect();
    let far = w.insert(70, 99).unwrap();
    assert_eq!(w.next_deadline(), Some(5));
    for k in early {
        w.cancel(k).unwrap();
    }
    w.assert_invariants();
    // The tombstones still count as a lower bound; advancing there fires
    // nothing and drops them.
    assert_eq!(w.next_deadline(), Some(5));
    assert!(drain(&mut w, 5).is_empty());
    assert!(w.lists.iter().all(KeyList::is_empty) || w.lists[w.list_for(70) as usize].len() == 1);
    assert_eq!(w.next_deadline(), Some(64));
    assert_eq!(w.cancel(far), Some(99));
    // No live timer: nothing to wake for, whatever tombstones remain.
    assert_eq!(w.next_deadline(), None);
    w.assert_invariants();
    assert!(drain(&mut w, 100).is_empty());
    assert!(
        w.lists.iter().all(KeyList::is_empty),
        "walked lists are emptied"
    );
    w.assert_invariants();
}

#[test]
fn tombstones_among_live_timers_are_dropped_when_their_slot_is_walked() {
    // A level-2 slot (4096..8191) with 600 timers (three segments), every other one
    // cancelled and its entry reused by a timer in another slot; poll
    // cascades the slot (dropping tombstones), advance fires it whole.
    for by_poll in [false, true] {
        let mut w = TimingWheel::new(WheelConfig::default(), 0);
        let keys: Vec<TimerKey> = (0..600u64)
            .map(|i| w.insert(4096 + 6 * i, i).unwrap())
            .collect();
        for k in keys.iter().step_by(2) {
            w.cancel(*k).unwrap();
            w.insert(20_000, 1_000).unwrap();
        }
        w.assert_invariants();
        let list = w.list_for(4096) as usize;
        assert_eq!(
            w.lists[list].len(),
            600,
            "tombstones kept beside live timers"
        );
        let fired: Vec<(u64, u64)> = if by_poll {
            std::iter::from_fn(|| w.poll(10_000)).collect()
        } else {
            drain(&mut w, 10_000)
        };
        w.assert_invariants();
        let expected: Vec<(u64, u64)> = (0..600u64)
            .filter(|i| i % 2 == 1)
            .map(|i| (4096 + 6 * i, i))
            .collect();
        assert_eq!(fired, expected);
        assert_eq!(w.len(), 300);
        assert!(w.lists[list].is_empty());
        assert_eq!(drain(&mut w, 20_000).len(), 300);
    }
}

#[test]
fn slab_grows_by_chunks_without_moving_timers() {
    let mut w = TimingWheel::new(WheelConfig::default(), 0);
    assert_eq!(w.capacity(), 0);
    let n = 3 * CHUNK + 5;
    let keys: Vec<TimerKey> = (0..n as u64)
        .map(|i| w.insert(1 + i % 5000, i).unwrap())
        .collect();
    assert_eq!(w.capacity(), 4 * CHUNK);
    assert!(w.slab.chunks.iter().all(|c| c.capacity() == CHUNK));
    w.assert_invariants();
    assert_eq!(w.deadline(keys[n - 1]), Some(1 + (n as u64 - 1) % 5000));
    assert_eq!(
        TimingWheel::<u64>::with_capacity(WheelConfig::default(), 0, CHUNK + 1).capacity(),
        2 * CHUNK
    );
    let fired = drain(&mut w, 5000);
    assert_eq!(fired.len(), n);
    assert!(fired.windows(2).all(|p| p[0].0 <= p[1].0));
}
