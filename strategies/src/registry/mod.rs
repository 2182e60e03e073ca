//! Every strategy by name: what it is, what it needs, and how to build and
//! deploy it. The one place to look a strategy up.
//!
//! - [`STRATEGIES`]: the table, one line per strategy (its module owns its
//!   [`StrategyInfo`], config and constructor);
//! - [`Variant`]: a strategy plus its remedies, parsed once where a name
//!   enters (the command line, a summary) and carried typed from there;
//! - [`Deployment`]: a variant with the scenario's options, which answers
//!   what the order service, the workers and the report need of it;
//! - [`StrategyOptions`]: `[strategies]`, every strategy's options.

mod deployment;
mod options;
mod table;
mod variant;

pub use crate::remedy::{Remedy, FALLBACK, OUTBOX};
pub use crate::strategy_info::{Role, StrategyInfo};
pub use deployment::Deployment;
pub use options::StrategyOptions;
pub use table::{Entry, STRATEGIES};
pub use variant::Variant;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_says_what_choosing_it_means() {
        for s in STRATEGIES.iter().filter(|s| s.role == Role::Strategy) {
            assert!(!s.good.is_empty() && !s.bad.is_empty(), "{}", s.name);
        }
    }

    #[test]
    fn payments_reach_only_strategies_that_drop_timers_as_their_experts_run_them() {
        let hears = |name: &str, options: &StrategyOptions| {
            Deployment::new(Variant::parse(name).unwrap(), options).hears_payments()
        };
        let on = StrategyOptions::default();
        let off = StrategyOptions {
            drop_paid_timers: false,
            ..StrategyOptions::default()
        };
        for name in ["timing-wheel", "redis-zset", "redis-zset+fallback"] {
            assert!(hears(name, &on), "{name}");
            assert!(!hears(name, &off), "{name} with drop-paid-timers = false");
        }
        // Teaching variants show their damage on paid orders' firings; an
        // outbox relays schedules a direct call could overtake; brokers and
        // the database paths hold no timer to drop.
        for name in [
            "timing-wheel-unconditional",
            "redis-zset-nonatomic",
            "redis-zset+outbox",
            "rabbit-ttl",
            "rabbit-delayed",
            "db-scan",
            "db-timer",
        ] {
            assert!(!hears(name, &on), "{name}");
        }
    }

    #[test]
    fn only_the_strategies_that_read_the_orders_table_take_no_schedules() {
        // Their orders table is their schedule; every other strategy (the
        // ceiling's list, the wheel, a broker, Redis) needs each order
        // handed to it.
        for s in STRATEGIES {
            let deployed = Deployment::new(Variant::plain(s), &StrategyOptions::default());
            assert_eq!(
                deployed.takes_schedules(),
                !s.reads_the_orders_table,
                "{}",
                s.name
            );
        }
        // A remedy does not change it: the fallback scan takes none itself.
        for name in ["timing-wheel+fallback", "redis-zset+outbox+fallback"] {
            let v = Variant::parse(name).unwrap();
            assert!(Deployment::new(v, &StrategyOptions::default()).takes_schedules());
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = STRATEGIES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), STRATEGIES.len());
    }
}
