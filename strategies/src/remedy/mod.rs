//! What a strategy can be run with besides itself: the remedies the seeds
//! prescribe (`+outbox`, `+fallback`) and what each means for a decision
//! record, the fallback scan's wrapper, and the publish-first teaching
//! wrapper (the mistake the outbox fixes). [`crate::registry::Deployment`]
//! decides which apply to a run.

mod fallback;
mod publish_first;

pub use fallback::WithFallback;
pub use publish_first::PublishFirst;

/// A remedy a [`crate::registry::Variant`] adds, and what it means beyond
/// the numbers, for decision records: only what it adds to its strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remedy {
    /// `+outbox`, `+fallback`.
    pub suffix: &'static str,
    /// One line, after the strategy's own.
    pub summary: &'static str,
    /// Each a "Good, because ..." clause.
    pub good: &'static [&'static str],
    /// Each a "Bad, because ..." clause.
    pub bad: &'static [&'static str],
}

/// `+outbox`: the creating transaction writes the schedule request to the
/// outbox table and each instance relays it ([`crate::outbox`]), instead
/// of the order service calling `schedule` after its commit.
pub const OUTBOX: Remedy = Remedy {
    suffix: "+outbox",
    summary: "an outbox table that the creating transaction writes the schedule request to, and a relay in each instance that sends it on",
    good: &[
        "no schedule is lost between the order's commit and the broker or Redis: the request commits with the order and is relayed until it goes through, across outages and crashes",
    ],
    bad: &[
        "an outbox table and a relay in every instance: more database statements per order",
        "while the broker or Redis is away the schedules wait in the outbox, so their orders are late by the outage",
        "it does not bring back what the broker or Redis lost after accepting it (a node or a restart without persistence): that needs `+fallback`",
    ],
};

/// `+fallback`: a slow db-scan beside the strategy in every instance
/// (`[strategies.fallback-scan]` sets its pace).
pub const FALLBACK: Remedy = Remedy {
    suffix: "+fallback",
    summary: "a slow db-scan beside it in every instance",
    good: &[
        "whatever the strategy loses (a process death, a lost message, a node or a cache emptied) is still cancelled, by the slow scan",
    ],
    bad: &[
        "orders it lost are late by up to the fallback's interval plus its grace",
        "the database is scanned every fallback interval, also when nothing was lost",
    ],
};
