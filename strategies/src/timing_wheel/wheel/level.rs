//! The levels of the wheel: where a deadline goes, which slots hold keys,
//! and which slot comes due next. The slot lists themselves are the first
//! `levels * S` of the wheel's lists (list `(level << slot_bits) + slot`);
//! the overflow and pending lists follow them and are the wheel's.
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

use super::config::WheelConfig;
use super::list::KeyList;

/// What the next expiration event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expiry {
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
    pub(super) fn deadline(self) -> u64 {
        match self {
            Expiry::Slot { deadline, .. } | Expiry::Overflow { deadline } => deadline,
        }
    }
}

/// The levels' shape and which of their slots hold keys.
pub(super) struct Levels {
    slot_bits: u32,
    slot_mask: u64,
    span: u64,
    /// `level_of_bit[i]` = level of a timer whose highest bit differing from
    /// `now` is bit `i` (`i < slot_bits * levels`).
    level_of_bit: [u8; 64],
    /// Per level: bit `s` set iff slot `s` of that level holds a key (of a
    /// live timer or a tombstone).
    occupied: Vec<u64>,
}

impl Levels {
    /// The levels of a valid `config`, every slot empty.
    pub(super) fn new(config: WheelConfig) -> Self {
        let mut level_of_bit = [0u8; 64];
        for (bit, level) in level_of_bit.iter_mut().enumerate() {
            *level = (bit as u32 / config.slot_bits) as u8;
        }
        Levels {
            slot_bits: config.slot_bits,
            slot_mask: config.slots_per_level() - 1,
            span: config.span_ticks(),
            level_of_bit,
            occupied: vec![0; config.levels as usize],
        }
    }

    /// Bits of a level-0 slot index: a slot on level `k` is
    /// `1 << (k * slot_bits)` ticks wide.
    #[inline]
    pub(super) fn slot_bits(&self) -> u32 {
        self.slot_bits
    }

    /// Ticks the levels cover ([`WheelConfig::span_ticks`]).
    #[inline]
    pub(super) fn span(&self) -> u64 {
        self.span
    }

    /// The slot list of a timer with `deadline` when the wheel is at `now`
    /// (`now < deadline`), or `None` when the deadline lies in a later
    /// epoch (it belongs on the overflow list).
    #[inline]
    pub(super) fn slot_list_for(&self, now: u64, deadline: u64) -> Option<u16> {
        let xor = now ^ deadline;
        if xor >= self.span {
            return None;
        }
        let significant = 63 - (xor | self.slot_mask).leading_zeros();
        let level = u32::from(self.level_of_bit[significant as usize]);
        let slot = (deadline >> (level * self.slot_bits)) & self.slot_mask;
        Some(((level << self.slot_bits) as u64 + slot) as u16)
    }

    /// The list of slot `slot` on level `level`.
    #[inline]
    pub(super) fn slot_list(&self, level: u32, slot: u32) -> u16 {
        ((level << self.slot_bits) + slot) as u16
    }

    /// The level of slot list `list`.
    #[inline]
    pub(super) fn level_of(&self, list: u16) -> u32 {
        u32::from(list >> self.slot_bits)
    }

    /// The level of slot list `list` and its bit in that level's occupancy
    /// bitmap.
    #[inline]
    fn occupancy_bit(&self, list: u16) -> (usize, u64) {
        debug_assert!((list as usize) < self.occupied.len() << self.slot_bits);
        let level = list >> self.slot_bits;
        let slot = u64::from(list) & self.slot_mask;
        (level as usize, 1u64 << slot)
    }

    /// Notes that slot list `list` holds a key.
    #[inline]
    pub(super) fn mark_occupied(&mut self, list: u16) {
        let (level, bit) = self.occupancy_bit(list);
        self.occupied[level] |= bit;
    }

    /// Notes that slot list `list` holds no key.
    #[inline]
    pub(super) fn mark_empty(&mut self, list: u16) {
        let (level, bit) = self.occupancy_bit(list);
        self.occupied[level] &= !bit;
    }

    /// Checks that each of the slot lists `slots` is marked occupied iff it
    /// holds a key (of a live timer or a tombstone); panics on the first
    /// mismatch.
    pub(super) fn assert_occupancy(&self, slots: &[KeyList]) {
        for (list, keys) in slots.iter().enumerate() {
            let list = list as u16;
            let (level, bit) = self.occupancy_bit(list);
            assert_eq!(
                self.occupied[level] & bit != 0,
                !keys.is_empty(),
                "occupancy bit mismatch at list {list}"
            );
        }
    }

    /// Whether every level below `level` is empty.
    pub(super) fn empty_below(&self, level: u32) -> bool {
        self.occupied[..level as usize].iter().all(|&o| o == 0)
    }

    /// The first occupied slot after `now` on the lowest level that has
    /// one, or `None` when every level is empty.
    #[inline]
    pub(super) fn next_slot(&self, now: u64) -> Option<Expiry> {
        for (level, &occ) in self.occupied.iter().enumerate() {
            if occ == 0 {
                continue;
            }
            let level = level as u32;
            let shift = level * self.slot_bits;
            let now_slot = (now >> shift) & self.slot_mask;
            debug_assert_eq!(
                occ & (2u64 << now_slot).wrapping_sub(1),
                0,
                "occupied slot at or before the current slot on level {level}"
            );
            let slot = occ.trailing_zeros();
            let level_start = now & !((1u64 << (shift + self.slot_bits)) - 1);
            let deadline = level_start + (u64::from(slot) << shift);
            debug_assert!(deadline > now);
            return Some(Expiry::Slot {
                level,
                slot,
                deadline,
            });
        }
        None
    }
}
