//! A pure hierarchical timing wheel over `u64` ticks.
//!
//! Modelled on tokio-util's timer wheel: `levels` levels of `1 << slot_bits`
//! slots each. A slot on level `k` covers `S^k` ticks (`S` = slots per level),
//! so a level covers `S^(k+1)` ticks and the whole wheel covers
//! [`WheelConfig::span_ticks`] = `S^levels` ticks.
//!
//! The wheel has **no clock**: it never reads time. The caller owns the clock,
//! converts absolute deadlines into ticks (round *up*, see [`ticks_ceil`], so
//! nothing fires early) and calls [`TimingWheel::advance`] (or
//! [`TimingWheel::poll`]) with the current tick. [`TimingWheel::next_deadline`]
//! tells a driver how long it may sleep.
//!
//! # Placement
//!
//! A timer goes on the level of the highest bit in which `now` and its
//! deadline differ, and is cascaded down as time reaches its slot (see
//! `level.rs`); the next slot to process is the first occupied one on
//! the lowest non-empty level, so advancing visits occupied slots only.
//!
//! # Firing a whole slot at once
//!
//! When [`TimingWheel::advance`] reaches a higher-level slot that lies
//! wholly at or before the tick it advances to, the slot's timers are
//! ordered by deadline in one pass (see `sort.rs`) and fired without
//! cascading. Slots that are only partly due, and [`TimingWheel::poll`]
//! (whose caller may insert between timers), cascade as above.
//!
//! # Beyond the span: the overflow list
//!
//! A deadline that does not share `now`'s bits above `slot_bits * levels`
//! (i.e. it lies in a later `span_ticks`-aligned *epoch*; always the case when
//! `d - now >= span_ticks`) is kept in an unsorted overflow list, with a lower
//! bound on its smallest deadline. When the levels are empty and time reaches
//! the start of that deadline's epoch, the overflow list is scanned once and
//! the timers of the new epoch move into the levels. With the default config
//! (`2^36` ticks, ~795 days at 1 ms) that happens essentially never. Timers are
//! never dropped and never fire early, whatever their deadline.
//!
//! # Storage
//!
//! Timers live in a slab named by generational keys (`slab.rs`). Each
//! slot, the overflow list and the *pending* list (due timers not yet
//! handed out) is a list of keys in segments from a shared pool
//! (`list.rs`). When a level-0 slot (exactly one tick) comes due, its list
//! is swapped onto the pending list in O(1).
//!
//! # Cancel leaves a tombstone
//!
//! [`TimingWheel::cancel`] frees the slab entry at once (one cache miss) and
//! leaves the key on its slot's list, touching nothing else. A walk
//! recognises such a *tombstone* by its generation no longer matching the
//! entry's and skips it; a tombstone keeps its 8 bytes until its slot is
//! walked, at the latest at the cancelled deadline. The wheel keeps no count
//! of live timers per slot (updating one made cancel twice as slow: its
//! address depends on the entry just missed), so a slot holding only
//! cancelled timers still counts as occupied: [`TimingWheel::next_deadline`]
//! may point at it while other timers are live, and advancing there fires
//! nothing and drops the tombstones.
//!
//! # Time never goes backwards
//!
//! [`TimingWheel::advance`] / [`TimingWheel::poll`] with a tick smaller than
//! [`TimingWheel::now`] is a **no-op** (nothing fires, `now` is unchanged); it
//! does not panic, so a driver reading a slightly skewed clock is harmless.

mod config;
mod level;
mod list;
mod slab;
mod sort;
#[cfg(test)]
mod tests;

pub use config::{ticks_ceil, ConfigError, WheelConfig};
pub use slab::TimerKey;

use level::{Expiry, Levels};
use list::{KeyList, SegmentPool};
use slab::Slab;
use sort::{SortScratch, SORT_MAX_WIDTH_BITS};

use std::fmt;

/// While a slot fired whole is being handed to the caller, its unfired
/// timers are on no list. If `fire` panics, this puts them back (on the
/// pending list if due at `now()`, the deadline that was firing, else on a
/// lower level), so the wheel stays consistent and loses only the timer
/// whose `fire` panicked, as [`TimingWheel::advance`] documents.
struct RefileOnUnwind<'a, T> {
    wheel: &'a mut TimingWheel<T>,
    order: &'a [u32],
    /// How many of `order` have been freed and handed to `fire`.
    fired: usize,
}

impl<T> Drop for RefileOnUnwind<'_, T> {
    fn drop(&mut self) {
        for &index in &self.order[self.fired..] {
            let (key, deadline) = self.wheel.slab.key_at(index);
            let target = self.wheel.list_for(deadline);
            self.wheel.push_key(target, key, deadline);
        }
    }
}

/// A hierarchical timing wheel holding payloads of type `T`.
///
/// See the [module docs](self) for the design.
pub struct TimingWheel<T> {
    config: WheelConfig,
    /// Where deadlines go and which slots hold keys.
    levels: Levels,
    /// Current tick ("now").
    elapsed: u64,
    slab: Slab<T>,
    /// Live (scheduled, not yet fired or cancelled) timers.
    len: usize,
    /// The keys on each list: `levels * S` slot lists, then OVERFLOW,
    /// PENDING. Each live timer's key is on exactly one list, the one
    /// [`Self::list_for`] names for its deadline; cancelled timers' keys
    /// (tombstones) may remain beside them.
    lists: Vec<KeyList>,
    /// Empty segments for the lists.
    pool: SegmentPool,
    /// Lower bound on the smallest overflow deadline (`u64::MAX` if none).
    overflow_min: u64,
    overflow_list: u16,
    pending_list: u16,
}

impl<T> fmt::Debug for TimingWheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimingWheel")
            .field("config", &self.config)
            .field("now", &self.elapsed)
            .field("len", &self.len)
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

impl<T> TimingWheel<T> {
    /// Creates an empty wheel whose current tick is `now_tick`.
    ///
    /// # Panics
    /// If `config` is invalid (see [`WheelConfig::validate`]); use
    /// [`TimingWheel::try_new`] to get the error instead.
    pub fn new(config: WheelConfig, now_tick: u64) -> Self {
        match Self::try_new(config, now_tick) {
            Ok(w) => w,
            Err(e) => panic!("invalid WheelConfig {config:?}: {e}"),
        }
    }

    /// Like [`TimingWheel::new`], returning an error for an invalid config.
    pub fn try_new(config: WheelConfig, now_tick: u64) -> Result<Self, ConfigError> {
        Self::try_with_capacity(config, now_tick, 0)
    }

    /// Like [`TimingWheel::new`], with slab room for `capacity` timers
    /// allocated up front.
    pub fn with_capacity(config: WheelConfig, now_tick: u64, capacity: usize) -> Self {
        match Self::try_with_capacity(config, now_tick, capacity) {
            Ok(w) => w,
            Err(e) => panic!("invalid WheelConfig {config:?}: {e}"),
        }
    }

    fn try_with_capacity(
        config: WheelConfig,
        now_tick: u64,
        capacity: usize,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let slots = config.slots_per_level() as usize;
        let wheel_lists = config.levels as usize * slots;
        // At most 63 * 2 or 10 * 64 slot lists: always fits a u16.
        debug_assert!(wheel_lists + 2 <= u16::MAX as usize);
        Ok(TimingWheel {
            config,
            levels: Levels::new(config),
            elapsed: now_tick,
            slab: Slab::with_capacity(capacity),
            len: 0,
            lists: (0..wheel_lists + 2).map(|_| KeyList::default()).collect(),
            pool: SegmentPool::default(),
            overflow_min: u64::MAX,
            overflow_list: wheel_lists as u16,
            pending_list: wheel_lists as u16 + 1,
        })
    }

    /// The wheel's shape.
    pub fn config(&self) -> WheelConfig {
        self.config
    }

    /// The current tick: the `now_tick` of the last [`advance`](Self::advance)
    /// (or construction). Timers with `deadline <= now()` are due.
    pub fn now(&self) -> u64 {
        self.elapsed
    }

    /// Number of pending (not yet fired or cancelled) timers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no timer is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of timers the slab holds without allocating another chunk.
    pub fn capacity(&self) -> usize {
        self.slab.capacity()
    }

    /// Schedules `value` to fire at `deadline_tick`.
    ///
    /// Returns `Err(value)` if `deadline_tick <= now()`: the deadline has
    /// already elapsed and the caller should fire it at once. Any later
    /// deadline is accepted, however far in the future.
    ///
    /// # Panics
    /// If `u32::MAX - 1` slab entries are already in use.
    pub fn insert(&mut self, deadline_tick: u64, value: T) -> Result<TimerKey, T> {
        if deadline_tick <= self.elapsed {
            return Err(value);
        }
        let list = self.list_for(deadline_tick);
        let key = self.slab.alloc(deadline_tick, value);
        self.len += 1;
        self.push_key(list, key, deadline_tick);
        Ok(key)
    }

    /// Cancels the timer, returning its payload, or `None` if the key is
    /// stale (the timer already fired or was cancelled). O(1), one slab
    /// lookup: the entry is freed and the key left on its list as a
    /// tombstone (see the module docs).
    pub fn cancel(&mut self, key: TimerKey) -> Option<T> {
        self.slab.deadline_of(key)?;
        self.len -= 1;
        Some(self.slab.free(key.index).1)
    }

    /// The deadline of a pending timer, or `None` if the key is stale.
    pub fn deadline(&self, key: TimerKey) -> Option<u64> {
        self.slab.deadline_of(key)
    }

    /// True if the key refers to a pending timer.
    pub fn contains(&self, key: TimerKey) -> bool {
        self.slab.deadline_of(key).is_some()
    }

    /// The earliest tick at which a timer may fire, or `None` if the wheel is
    /// empty. A driver can sleep until then.
    ///
    /// Exact when the earliest timer sits on level 0; otherwise it is a lower
    /// bound (the start of a higher-level slot, or a lower bound on the
    /// overflow list's minimum), so advancing to it may fire nothing and only
    /// cascade; ask again afterwards. It is never later than the true earliest
    /// deadline, and it is `> now()` unless a [`poll`](Self::poll) left due
    /// timers pending (then it is `now()`). It is `None` when no timer is
    /// pending; otherwise a slot that holds only cancelled timers still
    /// counts, so after cancels it may be earlier than every live deadline
    /// (advancing to it fires nothing and drops those tombstones).
    pub fn next_deadline(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        if !self.lists[self.pending_list as usize].is_empty() {
            return Some(self.elapsed);
        }
        match self.next_expiration()? {
            Expiry::Slot { deadline, .. } => Some(deadline),
            // The overflow minimum is a lower bound of every overflow deadline
            // and at least the epoch start the event fires at.
            Expiry::Overflow { .. } => Some(self.overflow_min),
        }
    }

    /// Advances the wheel to `now_tick`, calling `fire(deadline, value)` for
    /// every timer with `deadline <= now_tick`, in non-decreasing deadline
    /// order (timers with equal deadlines fire in unspecified order).
    ///
    /// Cost is proportional to the number of timers fired or cascaded plus
    /// the number of occupied slots passed, independent of the number of
    /// ticks skipped. `now_tick < now()` is a no-op. `fire` cannot touch the
    /// wheel; to re-insert while expiring use [`poll`](Self::poll), or
    /// collect and insert after `advance` returns (a timer inserted then
    /// with `deadline <= now()` is handed back as `Err`).
    ///
    /// `fire` only runs while the wheel is consistent: if it panics, the
    /// timer being fired is lost (its payload is dropped), the others stay.
    pub fn advance(&mut self, now_tick: u64, mut fire: impl FnMut(u64, T)) {
        if now_tick < self.elapsed {
            return;
        }
        // Reused by every slot fired whole during this call; dropped at the
        // end, so the wheel keeps no sort buffers between calls.
        let mut scratch = SortScratch::default();
        loop {
            while let Some((deadline, value)) = self.pop_pending() {
                fire(deadline, value);
            }
            match self.next_expiration() {
                Some(Expiry::Slot {
                    level,
                    slot,
                    deadline,
                }) if deadline <= now_tick => {
                    let width_bits = level * self.levels.slot_bits();
                    // `deadline` is a slot start, a multiple of the slot's
                    // width, so its last tick cannot overflow.
                    let last_tick = deadline | ((1u64 << width_bits) - 1);
                    if level > 0 && width_bits <= SORT_MAX_WIDTH_BITS && last_tick <= now_tick {
                        self.fire_slot_sorted(level, slot, deadline, &mut scratch, &mut fire);
                    } else {
                        self.process(Expiry::Slot {
                            level,
                            slot,
                            deadline,
                        });
                    }
                }
                Some(exp) if exp.deadline() <= now_tick => self.process(exp),
                _ => {
                    self.elapsed = now_tick;
                    return;
                }
            }
        }
    }

    /// Returns the next timer due at `now_tick` (and its deadline), advancing
    /// the wheel as needed, or `None` once nothing more is due, at which point
    /// `now()` becomes `now_tick`.
    ///
    /// Calling `poll(now_tick)` until it returns `None` fires the same timers
    /// in the same order as [`advance`](Self::advance). Between calls the
    /// caller may insert or cancel timers: while due timers are being
    /// returned `now()` is the deadline being fired, so a re-inserted timer
    /// with a deadline in `(now(), now_tick]` is returned by a later call of
    /// this same sweep, in order, and one with `deadline <= now()` is handed
    /// back as `Err` by `insert`. `now_tick < now()` returns `None`.
    pub fn poll(&mut self, now_tick: u64) -> Option<(u64, T)> {
        if now_tick < self.elapsed {
            return None;
        }
        loop {
            if let Some(fired) = self.pop_pending() {
                return Some(fired);
            }
            match self.next_expiration() {
                Some(exp) if exp.deadline() <= now_tick => self.process(exp),
                _ => {
                    self.elapsed = now_tick;
                    return None;
                }
            }
        }
    }

    // ----- internals -------------------------------------------------------

    /// The list a timer with `deadline` belongs on at the current tick.
    #[inline]
    fn list_for(&self, deadline: u64) -> u16 {
        if deadline <= self.elapsed {
            return self.pending_list;
        }
        self.levels
            .slot_list_for(self.elapsed, deadline)
            .unwrap_or(self.overflow_list)
    }

    /// Puts the key of live timer `key` (due at `deadline`) on `list`.
    #[inline]
    fn push_key(&mut self, list: u16, key: TimerKey, deadline: u64) {
        self.lists[list as usize].push(key, &mut self.pool);
        if list < self.overflow_list {
            self.levels.mark_occupied(list);
            debug_assert_eq!(
                self.list_for(deadline),
                list,
                "timer placed in the wrong slot"
            );
        } else if list == self.overflow_list && deadline < self.overflow_min {
            self.overflow_min = deadline;
        }
    }

    /// Bookkeeping for a list that no longer holds a live timer.
    #[inline]
    fn mark_empty(&mut self, list: u16) {
        if list < self.overflow_list {
            self.levels.mark_empty(list);
        } else if list == self.overflow_list {
            self.overflow_min = u64::MAX;
        }
    }

    /// Takes every key off `list` (live timers' and tombstones). Give the
    /// list's segments back with [`KeyList::clear`] once walked.
    fn take_list(&mut self, list: u16) -> KeyList {
        let keys = std::mem::take(&mut self.lists[list as usize]);
        self.mark_empty(list);
        keys
    }

    /// Pops a due timer off the pending list, skipping tombstones.
    #[inline]
    fn pop_pending(&mut self) -> Option<(u64, T)> {
        let pending = self.pending_list as usize;
        while let Some(key) = self.lists[pending].pop(&mut self.pool) {
            let Some(deadline) = self.slab.deadline_of(key) else {
                continue;
            };
            debug_assert!(deadline <= self.elapsed, "pending timer not due");
            self.len -= 1;
            return Some(self.slab.free(key.index));
        }
        None
    }

    /// The next expiration event after `elapsed`, if any.
    #[inline]
    fn next_expiration(&self) -> Option<Expiry> {
        if let Some(slot) = self.levels.next_slot(self.elapsed) {
            return Some(slot);
        }
        if !self.lists[self.overflow_list as usize].is_empty() {
            let span = self.levels.span();
            debug_assert!((self.overflow_min ^ self.elapsed) >= span);
            return Some(Expiry::Overflow {
                deadline: self.overflow_min & !(span - 1),
            });
        }
        None
    }

    /// Processes one expiration event: moves `elapsed` to its tick and
    /// re-places its timers (cascading them down, or onto the pending list if
    /// due), dropping tombstones. Runs no user code, so it never leaves the
    /// wheel half-updated.
    fn process(&mut self, exp: Expiry) {
        debug_assert!(exp.deadline() > self.elapsed, "time went backwards");
        debug_assert!(self.lists[self.pending_list as usize].is_empty());
        self.elapsed = exp.deadline();
        let (list, level) = match exp {
            Expiry::Slot { level, slot, .. } => (self.levels.slot_list(level, slot), level),
            Expiry::Overflow { .. } => (self.overflow_list, u32::MAX),
        };
        if level == 0 {
            // A level-0 slot is exactly one tick: everything in it is due.
            // Swap its keys onto the (empty) pending list in O(1).
            let pending = self.pending_list as usize;
            self.lists[pending].clear(&mut self.pool);
            self.lists.swap(list as usize, pending);
            self.mark_empty(list);
            return;
        }
        // Re-place every live timer (strictly lower level, the pending
        // list, or back on the overflow list).
        let mut keys = self.take_list(list);
        for key in keys.iter() {
            let Some(deadline) = self.slab.deadline_of(key) else {
                continue;
            };
            debug_assert!(
                level == u32::MAX
                    || (deadline >= self.elapsed
                        && deadline - self.elapsed < 1u64 << (level * self.levels.slot_bits())),
                "timer outside its slot's range"
            );
            let target = self.list_for(deadline);
            debug_assert!(
                level == u32::MAX
                    || target == self.pending_list
                    || self.levels.level_of(target) < level,
                "cascade must move a timer down"
            );
            self.push_key(target, key, deadline);
        }
        keys.clear(&mut self.pool);
    }

    /// Fires every timer of slot `slot` on level `level` (> 0), which starts
    /// at tick `start` and lies wholly at or before the tick being advanced
    /// to, in deadline order (see `sort.rs`), without cascading it level by
    /// level: cascading would move every timer once per level below `level`
    /// and look it up again each time.
    ///
    /// The caller guarantees that this slot is the next expiration event, so
    /// the lower levels are empty and every other timer is due later than
    /// any timer in the slot.
    fn fire_slot_sorted(
        &mut self,
        level: u32,
        slot: u32,
        start: u64,
        scratch: &mut SortScratch,
        fire: &mut impl FnMut(u64, T),
    ) {
        debug_assert!(level > 0 && level * self.levels.slot_bits() <= SORT_MAX_WIDTH_BITS);
        debug_assert!(start > self.elapsed, "time went backwards");
        debug_assert!(self.lists[self.pending_list as usize].is_empty());
        debug_assert!(self.levels.empty_below(level));
        let list = self.levels.slot_list(level, slot);
        let mut keys = self.take_list(list);
        let width = 1u64 << (level * self.levels.slot_bits());
        // The slot's live timers in deadline order.
        let order = scratch.order_slot(&keys, &self.slab, start, width);
        keys.clear(&mut self.pool);

        let mut guard = RefileOnUnwind {
            wheel: self,
            order,
            fired: 0,
        };
        while let Some(&index) = guard.order.get(guard.fired) {
            guard.fired += 1;
            guard.wheel.len -= 1;
            let (deadline, value) = guard.wheel.slab.free(index);
            // As in `poll`: while a timer fires, now() is its deadline.
            guard.wheel.elapsed = deadline;
            fire(deadline, value);
        }
    }

    /// Checks every structural invariant (O(n)); panics with a description on
    /// the first violation. For tests and debugging.
    #[doc(hidden)]
    pub fn assert_invariants(&self) {
        let mut listed = vec![false; self.slab.created];
        let mut total = 0usize;
        for (list, keys) in self.lists.iter().enumerate() {
            let list = list as u16;
            let mut live = 0u32;
            for key in keys.iter() {
                let Some(deadline) = self.slab.deadline_of(key) else {
                    continue; // a tombstone
                };
                assert!(
                    !std::mem::replace(&mut listed[key.index as usize], true),
                    "timer {} listed twice",
                    key.index
                );
                live += 1;
                if list == self.pending_list {
                    assert!(deadline <= self.elapsed, "pending timer not due");
                } else if list == self.overflow_list {
                    assert!(deadline > self.elapsed);
                    assert!(
                        deadline ^ self.elapsed >= self.levels.span(),
                        "overflow timer fits"
                    );
                    assert!(deadline >= self.overflow_min, "overflow_min too large");
                } else {
                    assert!(deadline > self.elapsed, "wheel timer already due");
                    assert_eq!(self.list_for(deadline), list, "timer in the wrong slot");
                }
            }
            total += live as usize;
        }
        assert_eq!(total, self.len, "len does not match listed timers");
        self.levels
            .assert_occupancy(&self.lists[..self.overflow_list as usize]);
        self.slab.assert_invariants(&listed, self.len);
    }
}
