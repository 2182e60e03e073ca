//! The wheel's lists of keys: segments of [`SEGMENT`] keys, taken from
//! and given back to a pool shared by every list.
//!
//! Each slot, the overflow list and the *pending* list (due timers not yet
//! handed out) is a list of keys (8 bytes each), kept in segments of 256
//! keys (2 KiB) drawn from a shared pool, so a growing list never copies
//! itself and wastes at most one partly filled segment. Walking a slot reads
//! its keys sequentially and looks each timer up in the slab; those lookups
//! do not depend on each other, so the CPU has many cache misses in flight
//! at once (a linked list, which this wheel used before, allows one per
//! chain).

use super::slab::TimerKey;

/// Keys per segment of a [`KeyList`]: 256 keys, 2 KiB. A list wastes at
/// most one partly filled segment, and walks read 2 KiB runs.
pub(super) const SEGMENT: usize = 256;

/// Empty segments kept for reuse (at most 2 MiB); beyond that a freed
/// segment goes back to the allocator, so a burst does not pin its memory.
pub(super) const POOLED_SEGMENTS: usize = 1024;

/// The keys on one list, in segments of [`SEGMENT`] keys. Growing a list
/// takes another segment (from the pool when one is free) instead of
/// reallocating and copying, and holds at most one segment it does not
/// need. A list never keeps an empty segment.
#[derive(Default)]
pub(super) struct KeyList {
    segments: Vec<Vec<TimerKey>>,
}

/// Empty segments, reused by every list of the wheel.
#[derive(Default)]
pub(super) struct SegmentPool {
    free: Vec<Vec<TimerKey>>,
}

impl SegmentPool {
    #[inline]
    pub(super) fn take(&mut self) -> Vec<TimerKey> {
        self.free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(SEGMENT))
    }

    #[inline]
    pub(super) fn give(&mut self, mut segment: Vec<TimerKey>) {
        if self.free.len() < POOLED_SEGMENTS {
            segment.clear();
            self.free.push(segment);
        }
    }
}

impl KeyList {
    #[inline]
    pub(super) fn push(&mut self, key: TimerKey, pool: &mut SegmentPool) {
        match self.segments.last_mut() {
            Some(last) if last.len() < SEGMENT => last.push(key),
            _ => {
                let mut segment = pool.take();
                segment.push(key);
                self.segments.push(segment);
            }
        }
    }

    /// Removes and returns the last key.
    #[inline]
    pub(super) fn pop(&mut self, pool: &mut SegmentPool) -> Option<TimerKey> {
        let last = self.segments.last_mut()?;
        let key = last.pop();
        if last.is_empty() {
            let segment = self.segments.pop().expect("the last segment");
            pool.give(segment);
        }
        key
    }

    pub(super) fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Number of keys, tombstones included.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.segments.iter().map(Vec::len).sum()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = TimerKey> + '_ {
        self.segments.iter().flatten().copied()
    }

    /// Empties the list, giving its segments to the pool.
    pub(super) fn clear(&mut self, pool: &mut SegmentPool) {
        for segment in self.segments.drain(..) {
            pool.give(segment);
        }
    }
}
