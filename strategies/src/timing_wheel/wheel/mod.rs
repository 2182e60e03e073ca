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
//! Placement is by *common prefix*, as in tokio: a timer with deadline `d`
//! inserted when the wheel is at tick `now` goes on the level of the highest
//! bit in which `now` and `d` differ (`level = msb(now ^ d) / slot_bits`), in
//! slot `(d >> (level * slot_bits)) & (S - 1)`. Hence every timer on level `k`
//! shares all bits above level `k` with `now`, and its level-`k` slot index is
//! strictly greater than `now`'s. When time reaches the start of that slot the
//! slot is *cascaded*: each timer is due (deadline == slot start, fired) or is
//! re-placed on a strictly lower level. Each timer therefore moves at most
//! `levels - 1` times, so insert, cancel and advance are O(1) amortised.
//!
//! Timers on lower levels always expire before timers on higher levels, so the
//! next slot to process is the first occupied slot (found with the level's
//! 64-bit occupancy bitmap, `trailing_zeros`) on the lowest non-empty level.
//! Advancing across a huge gap only visits occupied slots, never empty ticks.
//!
//! # Firing a whole slot at once
//!
//! When [`TimingWheel::advance`] reaches a higher-level slot that ends at or
//! before the tick it advances to, every timer in it is due in this call, so
//! cascading it down level by level would only relink each timer again.
//! Instead the slot's list is walked once, its timers are ordered by deadline
//! with a counting sort over the slot's ticks (a comparison sort when the
//! slot is wide and sparsely filled) and fired in that order. Slots that are
//! only partly due, and [`TimingWheel::poll`] (whose caller may insert
//! between timers), cascade as above.
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
//! Timers live in a slab (`Vec` + free list) and are threaded on intrusive
//! doubly-linked lists (`u32` links), one per slot plus the overflow list and a
//! *pending* list (due timers not yet handed out). A slab entry for a `u64`
//! payload is 32 bytes: payload, deadline, two links, a generation and the
//! list id. Keys are `(index, generation)` pairs, so a key that outlived its
//! timer (fired or cancelled) never touches a newer timer that reuses the slab
//! entry (generations wrap after 2^32 reuses of the same entry).
//!
//! Each list is stored as 4 *lanes* (sub-lists chosen by slab index mod 4,
//! each with its own head), and cascades and firing walk the lanes
//! round-robin. A linked-list walk is a chain of dependent cache misses; with
//! lanes four misses are in flight at once, which roughly halves the cost of
//! expiring a timer once the slab outgrows the CPU caches. When a level-0
//! slot (exactly one tick) comes due, its lanes are spliced onto the pending
//! list in O(1); an entry is known to be pending iff `deadline <= now`.
//!
//! # Time never goes backwards
//!
//! [`TimingWheel::advance`] / [`TimingWheel::poll`] with a tick smaller than
//! [`TimingWheel::now`] is a **no-op** (nothing fires, `now` is unchanged); it
//! does not panic, so a driver reading a slightly skewed clock is harmless.

mod config;
#[cfg(test)]
mod tests;

pub use config::{ticks_ceil, ConfigError, WheelConfig};

use std::fmt;

/// Link value meaning "no entry".
const NIL: u32 = u32::MAX;

/// Each list is split into `LANES` independent chains ("lanes", by slab
/// index modulo `LANES`). Walks visit the lanes round-robin, so up to
/// `LANES` cache misses are in flight at once instead of one pointer chase.
const LANES: usize = 4;

/// Index into `heads` of the lane of `list` that slab entry `index` uses.
#[inline]
fn head_of(list: u16, index: u32) -> usize {
    list as usize * LANES + index as usize % LANES
}

/// Largest slot width (in bits of ticks) fired whole by
/// [`TimingWheel::advance`]: the offset of a deadline within the slot must
/// fit the upper half of a `u64` sort key whose lower half is the slab index.
const SORT_MAX_WIDTH_BITS: u32 = 32;

/// A slot of `width` ticks holding `n` timers is ordered by a counting sort
/// (O(width + n)) when `width <= COUNTING_SORT_PER_TIMER * max(n,
/// COUNTING_SORT_MIN)`, otherwise by a comparison sort (O(n log n)).
const COUNTING_SORT_PER_TIMER: usize = 4;
const COUNTING_SORT_MIN: usize = 64;

/// Buffers for [`TimingWheel::fire_slot_sorted`], reused across the slots
/// of one [`TimingWheel::advance`].
#[derive(Default)]
struct SortScratch {
    /// `offset_in_slot << 32 | slab_index` per timer of the slot.
    keys: Vec<u64>,
    /// Slab indices in deadline order.
    order: Vec<u32>,
    /// Counting-sort buckets (one per tick of the slot, plus one).
    counts: Vec<u32>,
}

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
            let (_, _, _, deadline) = self.wheel.links(index);
            let target = self.wheel.list_for(deadline);
            self.wheel.push_front(target, index);
        }
    }
}

/// Handle to a scheduled timer, returned by [`TimingWheel::insert`].
///
/// Generational: once the timer has fired or been cancelled, the key is stale
/// and [`TimingWheel::cancel`] with it returns `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerKey {
    index: u32,
    gen: u32,
}

/// One slab entry. Kept as a flat enum so that, for a `u64` payload, the
/// whole entry (tag included) is 32 bytes.
enum Slot<T> {
    Occupied {
        value: T,
        deadline: u64,
        prev: u32,
        next: u32,
        gen: u32,
        /// List id: `level * S + slot`, or OVERFLOW, or PENDING.
        list: u16,
    },
    Vacant {
        next_free: u32,
        gen: u32,
    },
}

/// What the next expiration event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiry {
    /// Level `level`, slot `slot` starts at tick `deadline`.
    Slot {
        level: u32,
        slot: u32,
        deadline: u64,
    },
    /// The epoch that holds the smallest overflow deadline starts at `deadline`.
    Overflow { deadline: u64 },
}

impl Expiry {
    fn deadline(self) -> u64 {
        match self {
            Expiry::Slot { deadline, .. } | Expiry::Overflow { deadline } => deadline,
        }
    }
}

/// A hierarchical timing wheel holding payloads of type `T`.
///
/// See the [module docs](self) for the design.
pub struct TimingWheel<T> {
    config: WheelConfig,
    slot_bits: u32,
    slot_mask: u64,
    span: u64,
    /// `level_of_bit[i]` = level of a timer whose highest bit differing from
    /// `now` is bit `i` (`i < slot_bits * levels`).
    level_of_bit: [u8; 64],
    /// Current tick ("now").
    elapsed: u64,
    entries: Vec<Slot<T>>,
    free_head: u32,
    len: usize,
    /// Heads of all lists, `LANES` per list (`list * LANES + lane`):
    /// `levels * S` slot lists, then OVERFLOW, PENDING.
    heads: Vec<u32>,
    /// Pending lane to pop from next (round-robin).
    pending_cursor: usize,
    /// Per level: bit `s` set iff slot `s` of that level is non-empty.
    occupied: Vec<u64>,
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

    /// Like [`TimingWheel::new`], with room for `capacity` timers before the
    /// slab reallocates.
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
        let mut level_of_bit = [0u8; 64];
        for (bit, level) in level_of_bit.iter_mut().enumerate() {
            *level = (bit as u32 / config.slot_bits) as u8;
        }
        Ok(TimingWheel {
            config,
            slot_bits: config.slot_bits,
            slot_mask: config.slots_per_level() - 1,
            span: config.span_ticks(),
            level_of_bit,
            elapsed: now_tick,
            entries: Vec::with_capacity(capacity),
            free_head: NIL,
            len: 0,
            heads: vec![NIL; (wheel_lists + 2) * LANES],
            pending_cursor: 0,
            occupied: vec![0; config.levels as usize],
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

    /// Number of timers the slab can hold without reallocating.
    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Schedules `value` to fire at `deadline_tick`.
    ///
    /// Returns `Err(value)` if `deadline_tick <= now()`: the deadline has
    /// already elapsed and the caller should fire it at once. Any later
    /// deadline is accepted, however far in the future.
    ///
    /// # Panics
    /// If `u32::MAX - 1` timers are already pending.
    pub fn insert(&mut self, deadline_tick: u64, value: T) -> Result<TimerKey, T> {
        if deadline_tick <= self.elapsed {
            return Err(value);
        }
        let list = self.list_for(deadline_tick);
        let index = if self.free_head != NIL {
            self.free_head
        } else {
            self.entries.len() as u32
        };
        let head = self.heads[head_of(list, index)];
        let gen = self.alloc(index, deadline_tick, value, list, head);
        self.link_as_head(list, index, head, deadline_tick);
        Ok(TimerKey { index, gen })
    }

    /// Cancels the timer, returning its payload, or `None` if the key is
    /// stale (the timer already fired or was cancelled). O(1).
    pub fn cancel(&mut self, key: TimerKey) -> Option<T> {
        if !self.is_live(key) {
            return None;
        }
        self.unlink(key.index);
        Some(self.free(key.index).1)
    }

    /// The deadline of a pending timer, or `None` if the key is stale.
    pub fn deadline(&self, key: TimerKey) -> Option<u64> {
        match self.entries.get(key.index as usize) {
            Some(Slot::Occupied { gen, deadline, .. }) if *gen == key.gen => Some(*deadline),
            _ => None,
        }
    }

    /// True if the key refers to a pending timer.
    pub fn contains(&self, key: TimerKey) -> bool {
        self.is_live(key)
    }

    /// The earliest tick at which a timer may fire, or `None` if the wheel is
    /// empty. A driver can sleep until then.
    ///
    /// Exact when the earliest timer sits on level 0; otherwise it is a lower
    /// bound (the start of a higher-level slot, or a lower bound on the
    /// overflow list's minimum), so advancing to it may fire nothing and only
    /// cascade; ask again afterwards. It is never later than the true earliest
    /// deadline, and it is `> now()` unless a [`poll`](Self::poll) left due
    /// timers pending (then it is `now()`).
    pub fn next_deadline(&self) -> Option<u64> {
        if !self.list_is_empty(self.pending_list) {
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
                    let width_bits = level * self.slot_bits;
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

    fn is_live(&self, key: TimerKey) -> bool {
        matches!(self.entries.get(key.index as usize),
                 Some(Slot::Occupied { gen, .. }) if *gen == key.gen)
    }

    /// The list a timer with `deadline` belongs on at the current tick.
    #[inline]
    fn list_for(&self, deadline: u64) -> u16 {
        if deadline <= self.elapsed {
            return self.pending_list;
        }
        let xor = self.elapsed ^ deadline;
        if xor >= self.span {
            return self.overflow_list;
        }
        let significant = 63 - (xor | self.slot_mask).leading_zeros();
        let level = u32::from(self.level_of_bit[significant as usize]);
        let slot = (deadline >> (level * self.slot_bits)) & self.slot_mask;
        ((level << self.slot_bits) as u64 + slot) as u16
    }

    /// Fills slab entry `index` (the free-list head, or the next new entry)
    /// with a timer that will head its lane of `list` (whose current head is
    /// `head`); returns its generation.
    #[inline]
    fn alloc(&mut self, index: u32, deadline: u64, value: T, list: u16, head: u32) -> u32 {
        let entry = |gen| Slot::Occupied {
            value,
            deadline,
            prev: NIL,
            next: head,
            gen,
            list,
        };
        self.len += 1;
        if self.free_head != NIL {
            debug_assert_eq!(index, self.free_head);
            let slot = &mut self.entries[index as usize];
            let Slot::Vacant { next_free, gen } = *slot else {
                unreachable!("free list points at an occupied entry")
            };
            self.free_head = next_free;
            *slot = entry(gen);
            gen
        } else {
            debug_assert_eq!(index as usize, self.entries.len());
            assert!(
                self.entries.len() < NIL as usize,
                "TimingWheel: too many timers (max {})",
                NIL - 1
            );
            self.entries.push(entry(0));
            0
        }
    }

    /// Frees an entry that is no longer on any list; returns `(deadline, value)`.
    #[inline]
    fn free(&mut self, index: u32) -> (u64, T) {
        let slot = &mut self.entries[index as usize];
        let gen = match slot {
            Slot::Occupied { gen, .. } => gen.wrapping_add(1),
            Slot::Vacant { .. } => unreachable!("freeing a vacant entry"),
        };
        let old = std::mem::replace(
            slot,
            Slot::Vacant {
                next_free: self.free_head,
                gen,
            },
        );
        self.free_head = index;
        self.len -= 1;
        match old {
            Slot::Occupied {
                value, deadline, ..
            } => (deadline, value),
            Slot::Vacant { .. } => unreachable!(),
        }
    }

    /// `(prev, next, recorded list, deadline)` of an occupied entry.
    #[inline]
    fn links(&self, index: u32) -> (u32, u32, u16, u64) {
        match &self.entries[index as usize] {
            Slot::Occupied {
                prev,
                next,
                list,
                deadline,
                ..
            } => (*prev, *next, *list, *deadline),
            Slot::Vacant { .. } => unreachable!("vacant entry on a list"),
        }
    }

    #[inline]
    fn set_prev(&mut self, index: u32, p: u32) {
        match &mut self.entries[index as usize] {
            Slot::Occupied { prev, .. } => *prev = p,
            Slot::Vacant { .. } => unreachable!("vacant entry on a list"),
        }
    }

    #[inline]
    fn set_next(&mut self, index: u32, n: u32) {
        match &mut self.entries[index as usize] {
            Slot::Occupied { next, .. } => *next = n,
            Slot::Vacant { .. } => unreachable!("vacant entry on a list"),
        }
    }

    /// The list an entry is on. Entries spliced wholesale from a level-0
    /// slot onto the pending list keep their old list id, so anything that
    /// is due (`deadline <= now`) is on the pending list by definition;
    /// wheel and overflow entries are never due.
    #[inline]
    fn list_of(&self, recorded: u16, deadline: u64) -> u16 {
        if deadline <= self.elapsed {
            self.pending_list
        } else {
            recorded
        }
    }

    /// Second half of linking `index` at the head of `list`, once the entry
    /// itself says `prev = NIL, next = head, list = list`.
    #[inline]
    fn link_as_head(&mut self, list: u16, index: u32, head: u32, deadline: u64) {
        if head != NIL {
            self.set_prev(head, index);
        }
        self.heads[head_of(list, index)] = index;
        if list < self.overflow_list {
            let level = list >> self.slot_bits;
            let slot = u64::from(list) & self.slot_mask;
            self.occupied[level as usize] |= 1u64 << slot;
            debug_assert_eq!(
                self.list_for(deadline),
                list,
                "entry placed in the wrong slot"
            );
        } else if list == self.overflow_list && deadline < self.overflow_min {
            self.overflow_min = deadline;
        }
    }

    /// Puts an occupied entry that is on no list at the head of `list`.
    #[inline]
    fn push_front(&mut self, list: u16, index: u32) {
        let head = self.heads[head_of(list, index)];
        let deadline = match &mut self.entries[index as usize] {
            Slot::Occupied {
                prev,
                next,
                list: l,
                deadline,
                ..
            } => {
                *prev = NIL;
                *next = head;
                *l = list;
                *deadline
            }
            Slot::Vacant { .. } => unreachable!("linking a vacant entry"),
        };
        self.link_as_head(list, index, head, deadline);
    }

    /// Removes an occupied entry from its list (its own links are left stale).
    #[inline]
    fn unlink(&mut self, index: u32) {
        let (prev, next, recorded, deadline) = self.links(index);
        if prev != NIL {
            self.set_next(prev, next);
        } else {
            let list = self.list_of(recorded, deadline);
            let h = head_of(list, index);
            debug_assert_eq!(self.heads[h], index, "list head mismatch");
            self.heads[h] = next;
            if next == NIL && self.list_is_empty(list) {
                if list < self.overflow_list {
                    let level = list >> self.slot_bits;
                    let slot = u64::from(list) & self.slot_mask;
                    self.occupied[level as usize] &= !(1u64 << slot);
                } else if list == self.overflow_list {
                    self.overflow_min = u64::MAX;
                }
            }
        }
        if next != NIL {
            self.set_prev(next, prev);
        }
    }

    /// True if every lane of `list` is empty.
    #[inline]
    fn list_is_empty(&self, list: u16) -> bool {
        let base = list as usize * LANES;
        self.heads[base..base + LANES].iter().all(|&h| h == NIL)
    }

    /// Pops a due timer, taking the pending lanes round-robin so that the
    /// next entry of each lane is being fetched while the others are popped.
    #[inline]
    fn pop_pending(&mut self) -> Option<(u64, T)> {
        let base = self.pending_list as usize * LANES;
        for _ in 0..LANES {
            let lane = self.pending_cursor;
            self.pending_cursor = (lane + 1) % LANES;
            let head = self.heads[base + lane];
            if head == NIL {
                continue;
            }
            let (_, next, _, deadline) = self.links(head);
            debug_assert!(deadline <= self.elapsed, "pending timer not due");
            self.heads[base + lane] = next;
            if next != NIL {
                self.set_prev(next, NIL);
            }
            return Some(self.free(head));
        }
        None
    }

    /// The next expiration event after `elapsed`, if any.
    #[inline]
    fn next_expiration(&self) -> Option<Expiry> {
        for (level, &occ) in self.occupied.iter().enumerate() {
            if occ == 0 {
                continue;
            }
            let level = level as u32;
            let shift = level * self.slot_bits;
            let now_slot = (self.elapsed >> shift) & self.slot_mask;
            debug_assert_eq!(
                occ & (2u64 << now_slot).wrapping_sub(1),
                0,
                "occupied slot at or before the current slot on level {level}"
            );
            let slot = occ.trailing_zeros();
            let level_start = self.elapsed & !((1u64 << (shift + self.slot_bits)) - 1);
            let deadline = level_start + (u64::from(slot) << shift);
            debug_assert!(deadline > self.elapsed);
            return Some(Expiry::Slot {
                level,
                slot,
                deadline,
            });
        }
        if !self.list_is_empty(self.overflow_list) {
            debug_assert!((self.overflow_min ^ self.elapsed) >= self.span);
            return Some(Expiry::Overflow {
                deadline: self.overflow_min & !(self.span - 1),
            });
        }
        None
    }

    /// Processes one expiration event: moves `elapsed` to its tick and
    /// re-places its timers (cascading them down, or onto the pending list if
    /// due). Runs no user code, so it never leaves the wheel half-updated.
    fn process(&mut self, exp: Expiry) {
        debug_assert!(exp.deadline() > self.elapsed, "time went backwards");
        debug_assert!(self.list_is_empty(self.pending_list));
        self.elapsed = exp.deadline();
        let (list, level) = match exp {
            Expiry::Slot { level, slot, .. } => {
                self.occupied[level as usize] &= !(1u64 << slot);
                (((level << self.slot_bits) + slot) as u16, level)
            }
            Expiry::Overflow { .. } => {
                self.overflow_min = u64::MAX;
                (self.overflow_list, u32::MAX)
            }
        };
        let cursors = self.detach(list);
        if level == 0 {
            // A level-0 slot is exactly one tick: everything in it is due.
            // Splice the whole list onto the (empty) pending list in O(1);
            // `list_of` knows due entries are pending.
            let pending = self.pending_list as usize * LANES;
            self.heads[pending..pending + LANES].copy_from_slice(&cursors);
            return;
        }
        // Re-place every timer (strictly lower level, the pending list, or
        // back on the overflow list). A timer stays in its lane (lane = slab
        // index % LANES).
        self.walk_detached(cursors, |wheel, index, deadline| {
            debug_assert!(
                level == u32::MAX
                    || (deadline >= wheel.elapsed
                        && deadline - wheel.elapsed < 1u64 << (level * wheel.slot_bits)),
                "timer outside its slot's range"
            );
            let target = wheel.list_for(deadline);
            debug_assert!(
                level == u32::MAX
                    || target == wheel.pending_list
                    || u32::from(target >> wheel.slot_bits) < level,
                "cascade must move a timer down"
            );
            wheel.push_front(target, index);
        });
    }

    /// Empties every lane of `list` and returns their old heads: the
    /// chains stay linked, detached from the wheel, for [`Self::walk_detached`].
    fn detach(&mut self, list: u16) -> [u32; LANES] {
        let base = list as usize * LANES;
        let mut cursors = [NIL; LANES];
        cursors.copy_from_slice(&self.heads[base..base + LANES]);
        self.heads[base..base + LANES].fill(NIL);
        cursors
    }

    /// Walks detached lane chains round-robin, so up to `LANES` cache
    /// misses are in flight, calling `visit(wheel, slab index, deadline)`
    /// on every entry. Each entry's successor is read before `visit`, which
    /// may therefore relink it.
    fn walk_detached(
        &mut self,
        mut cursors: [u32; LANES],
        mut visit: impl FnMut(&mut Self, u32, u64),
    ) {
        let mut lane = 0;
        let mut idle = 0;
        while idle < LANES {
            let index = cursors[lane];
            if index == NIL {
                idle += 1;
                lane = (lane + 1) % LANES;
                continue;
            }
            idle = 0;
            let (_, next, _, deadline) = self.links(index);
            cursors[lane] = next;
            lane = (lane + 1) % LANES;
            visit(self, index, deadline);
        }
    }

    /// Fires every timer of slot `slot` on level `level` (> 0), which starts
    /// at tick `start` and lies wholly at or before the tick being advanced
    /// to, in deadline order, without cascading it level by level.
    ///
    /// The caller guarantees that this slot is the next expiration event, so
    /// the lower levels are empty and every other timer is due later than
    /// any timer in the slot. One walk over the slot's lanes collects
    /// `(offset in slot, slab index)` keys, a counting sort (or, for a sparse
    /// wide slot, a comparison sort) orders them, and the timers are freed
    /// and fired in that order while their entries are still in the caches.
    /// Cascading instead would relink every timer once per level below
    /// `level` and walk it again from the pending list, each a cache miss on
    /// a large slab.
    fn fire_slot_sorted(
        &mut self,
        level: u32,
        slot: u32,
        start: u64,
        scratch: &mut SortScratch,
        fire: &mut impl FnMut(u64, T),
    ) {
        debug_assert!(level > 0 && level * self.slot_bits <= SORT_MAX_WIDTH_BITS);
        debug_assert!(start > self.elapsed, "time went backwards");
        debug_assert!(self.list_is_empty(self.pending_list));
        debug_assert!(self.occupied[..level as usize].iter().all(|&o| o == 0));
        self.occupied[level as usize] &= !(1u64 << slot);
        let list = ((level << self.slot_bits) + slot) as u16;
        let cursors = self.detach(list);
        let width = 1u64 << (level * self.slot_bits);

        // Collect `offset << 32 | index` for every timer of the slot.
        let keys = &mut scratch.keys;
        keys.clear();
        self.walk_detached(cursors, |_, index, deadline| {
            debug_assert!(
                deadline >= start && deadline - start < width,
                "timer outside its slot's range"
            );
            keys.push(((deadline - start) << 32) | u64::from(index));
        });

        // Order by offset; timers with equal deadlines may fire in any order.
        let order = &mut scratch.order;
        order.clear();
        if width as usize <= COUNTING_SORT_PER_TIMER * keys.len().max(COUNTING_SORT_MIN) {
            let counts = &mut scratch.counts;
            counts.clear();
            counts.resize(width as usize + 1, 0);
            for &key in keys.iter() {
                counts[(key >> 32) as usize + 1] += 1;
            }
            for i in 1..counts.len() {
                counts[i] += counts[i - 1];
            }
            order.resize(keys.len(), NIL);
            for &key in keys.iter() {
                let at = &mut counts[(key >> 32) as usize];
                order[*at as usize] = key as u32;
                *at += 1;
            }
        } else {
            keys.sort_unstable();
            order.extend(keys.iter().map(|&key| key as u32));
        }

        let mut guard = RefileOnUnwind {
            wheel: self,
            order: order.as_slice(),
            fired: 0,
        };
        while let Some(&index) = guard.order.get(guard.fired) {
            guard.fired += 1;
            let (deadline, value) = guard.wheel.free(index);
            // As in `poll`: while a timer fires, now() is its deadline.
            guard.wheel.elapsed = deadline;
            fire(deadline, value);
        }
    }

    /// Checks every structural invariant (O(n)); panics with a description on
    /// the first violation. For tests and debugging.
    #[doc(hidden)]
    pub fn assert_invariants(&self) {
        let mut seen = 0usize;
        for (lane_id, &head) in self.heads.iter().enumerate() {
            let list = (lane_id / LANES) as u16;
            let lane = lane_id % LANES;
            let mut prev = NIL;
            let mut index = head;
            while index != NIL {
                let (p, n, l, deadline) = self.links(index);
                assert_eq!(p, prev, "bad prev link at entry {index}");
                assert_eq!(
                    index as usize % LANES,
                    lane,
                    "entry {index} in the wrong lane"
                );
                assert_eq!(
                    self.list_of(l, deadline),
                    list,
                    "entry {index} on the wrong list"
                );
                if list == self.pending_list {
                    assert!(deadline <= self.elapsed, "pending entry not due");
                } else if list == self.overflow_list {
                    assert!(deadline > self.elapsed);
                    assert!(deadline ^ self.elapsed >= self.span, "overflow entry fits");
                    assert!(deadline >= self.overflow_min, "overflow_min too large");
                } else {
                    assert!(deadline > self.elapsed, "wheel entry already due");
                    assert_eq!(self.list_for(deadline), list, "entry in the wrong slot");
                }
                seen += 1;
                assert!(seen <= self.len, "list cycle or len too small");
                prev = index;
                index = n;
            }
            if list < self.overflow_list {
                let level = list >> self.slot_bits;
                let slot = u64::from(list) & self.slot_mask;
                let bit = (self.occupied[level as usize] >> slot) & 1 == 1;
                assert_eq!(
                    bit,
                    !self.list_is_empty(list),
                    "occupancy bit mismatch at list {list}"
                );
            }
        }
        assert_eq!(seen, self.len, "len does not match linked entries");
        let occupied = self
            .entries
            .iter()
            .filter(|e| matches!(e, Slot::Occupied { .. }))
            .count();
        assert_eq!(occupied, self.len, "len does not match occupied entries");
        let mut free = 0usize;
        let mut index = self.free_head;
        while index != NIL {
            match self.entries[index as usize] {
                Slot::Vacant { next_free, .. } => index = next_free,
                Slot::Occupied { .. } => panic!("occupied entry on the free list"),
            }
            free += 1;
            assert!(free <= self.entries.len(), "free list cycle");
        }
        assert_eq!(free + self.len, self.entries.len(), "leaked slab entries");
    }
}
