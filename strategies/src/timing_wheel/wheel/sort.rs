//! Ordering the timers of a slot fired whole by deadline.
//!
//! When [`TimingWheel::advance`](super::TimingWheel::advance) reaches a
//! higher-level slot that ends at or before the tick it advances to, every
//! timer in it is due in this call, so cascading it down level by level
//! would only relink each timer again. Instead the slot's list is walked
//! once, its timers are ordered by deadline with a counting sort over the
//! slot's ticks (a comparison sort when the slot is wide and sparsely
//! filled) and fired in that order.

use super::list::KeyList;
use super::slab::{Slab, NIL};

/// Largest slot width (in bits of ticks) fired whole by
/// [`TimingWheel::advance`](super::TimingWheel::advance): the offset of a
/// deadline within the slot must fit the upper half of a `u64` sort key
/// whose lower half is the slab index.
pub(super) const SORT_MAX_WIDTH_BITS: u32 = 32;

/// A slot of `width` ticks holding `n` timers is ordered by a counting sort
/// (O(width + n)) when `width <= COUNTING_SORT_PER_TIMER * max(n,
/// COUNTING_SORT_MIN)`, otherwise by a comparison sort (O(n log n)).
const COUNTING_SORT_PER_TIMER: usize = 4;
const COUNTING_SORT_MIN: usize = 64;

/// Buffers for `TimingWheel::fire_slot_sorted`, reused across the slots
/// of one [`TimingWheel::advance`](super::TimingWheel::advance).
#[derive(Default)]
pub(super) struct SortScratch {
    /// `offset_in_slot << 32 | slab_index` per live timer of the slot.
    keys: Vec<u64>,
    /// Slab indices in deadline order.
    order: Vec<u32>,
    /// Counting-sort buckets (one per tick of the slot, plus one).
    counts: Vec<u32>,
}

impl SortScratch {
    /// The slab indices of the live timers among `keys`, the keys of a slot
    /// that starts at tick `start` and is `width` ticks wide, in deadline
    /// order (timers with equal deadlines in any order). One pass over the
    /// keys looks the timers up (independent loads, so many misses
    /// overlap).
    pub(super) fn order_slot<T>(
        &mut self,
        keys: &KeyList,
        slab: &Slab<T>,
        start: u64,
        width: u64,
    ) -> &[u32] {
        // Collect `offset << 32 | index` for every live timer of the slot.
        let sort_keys = &mut self.keys;
        sort_keys.clear();
        for key in keys.iter() {
            if let Some(deadline) = slab.deadline_of(key) {
                debug_assert!(
                    deadline >= start && deadline - start < width,
                    "timer outside its slot's range"
                );
                sort_keys.push(((deadline - start) << 32) | u64::from(key.index));
            }
        }

        // Order by offset; timers with equal deadlines may fire in any order.
        let order = &mut self.order;
        order.clear();
        if width as usize <= COUNTING_SORT_PER_TIMER * sort_keys.len().max(COUNTING_SORT_MIN) {
            let counts = &mut self.counts;
            counts.clear();
            counts.resize(width as usize + 1, 0);
            for &key in sort_keys.iter() {
                counts[(key >> 32) as usize + 1] += 1;
            }
            for i in 1..counts.len() {
                counts[i] += counts[i - 1];
            }
            order.resize(sort_keys.len(), NIL);
            for &key in sort_keys.iter() {
                let at = &mut counts[(key >> 32) as usize];
                order[*at as usize] = key as u32;
                *at += 1;
            }
        } else {
            sort_keys.sort_unstable();
            order.extend(sort_keys.iter().map(|&key| key as u32));
        }
        order
    }
}
