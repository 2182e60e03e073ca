//! The timing wheel and its teaching variants, as the registry lists them.

use crate::strategy_info::{Role, StrategyInfo};

pub const TIMING_WHEEL: StrategyInfo = StrategyInfo {
    name: "timing-wheel",
    summary: "in-process hierarchical timing wheel, reloads PENDING orders on start",
    good: &[
        "it needs nothing but the database, and timers in process are cheap per order",
        "a starting instance reloads PENDING orders from the database, so orders created while it was down are still cancelled",
    ],
    bad: &[
        "the schedule lives in the process: a dead instance's orders wait until an instance starts again, so it needs `+fallback` for a guarantee",
        "each instance owns the orders it was given and holds them in memory: memory grows with the pending orders",
        "deadlines are rounded up to the tick, so lateness includes up to one tick",
    ],
    drops_paid_timers: true,
    reloads_pending_on_start: true,
    ..StrategyInfo::BASE
};

pub const TIMING_WHEEL_UNCONDITIONAL: StrategyInfo = StrategyInfo {
    name: "timing-wheel-unconditional",
    summary: "TEACHING: the wheel cancelling with an unconditional UPDATE (paid orders \
              cancelled, stock released on every firing)",
    role: Role::Teaching,
    reloads_pending_on_start: true,
    ..StrategyInfo::BASE
};

pub const TIMING_WHEEL_RELEASE_FIRST: StrategyInfo = StrategyInfo {
    name: "timing-wheel-release-first",
    summary: "TEACHING: the wheel releasing stock before the conditional UPDATE (a paid \
              order's stock released anyway)",
    role: Role::Teaching,
    reloads_pending_on_start: true,
    ..StrategyInfo::BASE
};
