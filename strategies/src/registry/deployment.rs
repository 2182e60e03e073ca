//! One strategy as a run deploys it. The harness asks this, and only this,
//! what a variant means for the parts around the strategy: what the order
//! service does for it, what every worker instance runs, whether the
//! outbox relay runs, and what the report must say.

use super::options::StrategyOptions;
use super::variant::Variant;
use crate::canceller::Canceller;
use crate::db_scan::DbScan;
use crate::error::Result;
use crate::remedy::WithFallback;
use crate::store::OrderStore;

/// A [`Variant`] with the scenario's options: everything needed to run it.
#[derive(Debug, Clone)]
pub struct Deployment {
    variant: Variant,
    options: StrategyOptions,
}

impl Deployment {
    pub fn new(variant: Variant, options: &StrategyOptions) -> Deployment {
        Deployment {
            variant,
            options: options.clone(),
        }
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }

    pub fn options(&self) -> &StrategyOptions {
        &self.options
    }

    /// The order service's store: with `+outbox` its creating transactions
    /// write the schedule request to the outbox; for a strategy that
    /// [`notifies_deadline`](crate::strategy_info::StrategyInfo::notifies_deadline)
    /// they also announce the deadline.
    pub fn order_service_store(&self, store: OrderStore) -> OrderStore {
        let store = if self.variant.outbox {
            store.with_outbox()
        } else {
            store
        };
        if self.variant.info.notifies_deadline {
            store.with_deadline_notify()
        } else {
            store
        }
    }

    /// Whether the order service calls `schedule` before the creating
    /// transaction commits (a teaching variant), rather than after it.
    pub fn schedules_before_commit(&self) -> bool {
        self.variant.info.schedules_before_commit
    }

    /// Whether the order service tells the instances of each payment
    /// ([`Canceller::paid`]): the strategy drops paid orders' timers and
    /// `strategies.drop-paid-timers` is on. Not with `+outbox`: its
    /// schedules travel through the relay, which a direct call could
    /// overtake, leaving the timer in place anyway.
    pub fn hears_payments(&self) -> bool {
        self.variant.info.drops_paid_timers && self.options.drop_paid_timers && !self.variant.outbox
    }

    /// Whether the order service hands each order to an instance's
    /// `schedule`: not where the strategy's
    /// [`schedule_does_nothing`](crate::strategy_info::StrategyInfo::schedule_does_nothing)
    /// (its fallback scan, where it has one, takes no schedules either).
    /// The harness then routes no call to its instances, and has no
    /// schedule path to measure.
    pub fn takes_schedules(&self) -> bool {
        !self.variant.info.schedule_does_nothing
    }

    /// Whether each instance runs the outbox relay beside the strategy.
    pub fn relays_outbox(&self) -> bool {
        self.variant.outbox
    }

    /// Whether each instance runs the fallback scan beside the strategy:
    /// `+fallback`, or `fallback-scan.enabled` for a strategy that does not
    /// read the orders table itself (a scan beside a scan only adds load).
    pub fn runs_fallback(&self) -> bool {
        self.variant.fallback
            || (self.options.fallback_scan.enabled && !self.variant.info.reads_the_orders_table)
    }

    /// One instance as every worker runs it, on a store of its own (so its
    /// counters are its own): the strategy, with the fallback scan beside
    /// it where [`Deployment::runs_fallback`].
    pub fn instance(&self, store: OrderStore) -> Result<Box<dyn Canceller>> {
        let strategy = self.variant.info.build(&self.options, store.clone())?;
        if !self.runs_fallback() {
            return Ok(strategy);
        }
        let fallback = DbScan::fallback(store, &self.options.fallback_scan);
        Ok(Box::new(WithFallback::new(strategy, fallback)))
    }

    /// What the report says of the deployment beyond the strategy's own
    /// capabilities.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.variant.outbox {
            notes.push(
                "runs with a transactional outbox: the order's transaction writes its schedule \
                 request, and each instance's relay publishes it, retrying until it goes through"
                    .into(),
            );
        }
        notes
    }
}
