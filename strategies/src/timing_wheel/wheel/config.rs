//! Wheel geometry: ticks, slots and levels, and the rounding that keeps
//! timers from firing early. Pure arithmetic, exhaustively tested in `tests.rs`.

use std::error::Error;
use std::fmt;

/// Converts a duration in microseconds to whole ticks, rounding **up**.
///
/// Callers convert absolute microsecond deadlines to ticks with this (and the
/// current time with a floor division), so that a timer never fires before
/// its deadline: `ticks_ceil(deadline_us, tick_us)` is the first tick whose
/// start is at or after the deadline.
///
/// # Panics
/// If `tick_us` is zero.
pub fn ticks_ceil(duration_us: u64, tick_us: u64) -> u64 {
    assert!(tick_us > 0, "ticks_ceil: tick_us must be non-zero");
    duration_us.div_ceil(tick_us)
}

/// Shape of a [`TimingWheel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WheelConfig {
    /// Slots per level = `1 << slot_bits`. Must be in `1..=6` (the occupancy
    /// bitmap of a level is one `u64`). Default 6 (64 slots).
    pub slot_bits: u32,
    /// Number of levels. Must be at least 1, and `slot_bits * levels` must be
    /// at most 63 so that [`WheelConfig::span_ticks`] fits in a `u64`.
    /// Default 6.
    pub levels: u32,
}

impl Default for WheelConfig {
    /// 6 levels of 64 slots: a span of `64^6 = 2^36` ticks, about 795 days at
    /// 1 ms ticks (and about 19 hours at 1 µs ticks).
    fn default() -> Self {
        WheelConfig {
            slot_bits: 6,
            levels: 6,
        }
    }
}

/// Why a [`WheelConfig`] is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `levels` was 0.
    ZeroLevels,
    /// `slot_bits` was 0 or above [`WheelConfig::MAX_SLOT_BITS`].
    SlotBitsOutOfRange(u32),
    /// `slot_bits * levels` exceeds 63: the span would not fit in a `u64`.
    SpanOverflow {
        /// The configured `slot_bits`.
        slot_bits: u32,
        /// The configured `levels`.
        levels: u32,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::ZeroLevels => write!(f, "timing wheel needs at least one level"),
            ConfigError::SlotBitsOutOfRange(b) => write!(
                f,
                "timing wheel slot_bits must be in 1..={}, got {b}",
                WheelConfig::MAX_SLOT_BITS
            ),
            ConfigError::SpanOverflow { slot_bits, levels } => write!(
                f,
                "timing wheel span 2^(slot_bits * levels) = 2^({slot_bits} * {levels}) \
                 overflows: slot_bits * levels must be at most 63"
            ),
        }
    }
}

impl Error for ConfigError {}

impl WheelConfig {
    /// Largest supported `slot_bits` (64 slots; one `u64` occupancy bitmap).
    pub const MAX_SLOT_BITS: u32 = 6;

    /// A config with the given shape (not validated until used).
    pub const fn new(slot_bits: u32, levels: u32) -> Self {
        WheelConfig { slot_bits, levels }
    }

    /// Checks the config: `slot_bits` in `1..=6`, `levels >= 1`,
    /// `slot_bits * levels <= 63`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.slot_bits == 0 || self.slot_bits > Self::MAX_SLOT_BITS {
            return Err(ConfigError::SlotBitsOutOfRange(self.slot_bits));
        }
        if self.levels == 0 {
            return Err(ConfigError::ZeroLevels);
        }
        match self.slot_bits.checked_mul(self.levels) {
            Some(bits) if bits <= 63 => Ok(()),
            _ => Err(ConfigError::SpanOverflow {
                slot_bits: self.slot_bits,
                levels: self.levels,
            }),
        }
    }

    /// Slots per level, `1 << slot_bits`.
    pub fn slots_per_level(&self) -> u64 {
        1u64 << self.slot_bits
    }

    /// The number of ticks the levels cover, `(1 << slot_bits)^levels`: the
    /// largest delay the wheel can hold in its levels (`2^36` ticks by
    /// default, about 795 days at 1 ms ticks). Precisely, the levels hold the
    /// deadlines in the current `span_ticks`-aligned window; later deadlines
    /// (any delay `>= span_ticks`, and shorter ones that cross a window
    /// boundary) wait in an overflow list and still fire exactly on time.
    ///
    /// # Panics
    /// If the config is invalid (see [`WheelConfig::validate`]).
    pub fn span_ticks(&self) -> u64 {
        if let Err(e) = self.validate() {
            panic!("invalid WheelConfig {self:?}: {e}");
        }
        1u64 << (self.slot_bits * self.levels)
    }

    /// The level a timer with `deadline` goes on when the wheel is at `now`
    /// (`now < deadline`), or `None` if it belongs in the overflow list
    /// (`now` and `deadline` lie in different `span_ticks`-aligned windows).
    ///
    /// # Panics
    /// If the config is invalid.
    pub fn level_for(&self, now: u64, deadline: u64) -> Option<u32> {
        debug_assert!(now < deadline, "level_for: deadline must be after now");
        let xor = now ^ deadline;
        if xor >= self.span_ticks() {
            return None;
        }
        // OR in the slot mask so that differences inside a level-0 slot map
        // to level 0.
        let masked = xor | (self.slots_per_level() - 1);
        let significant = 63 - masked.leading_zeros();
        Some(significant / self.slot_bits)
    }

    /// The slot of `deadline` on `level`: `(deadline >> (level * slot_bits)) & (S - 1)`.
    pub fn slot_for(&self, deadline: u64, level: u32) -> usize {
        ((deadline >> (level * self.slot_bits)) & (self.slots_per_level() - 1)) as usize
    }
}
