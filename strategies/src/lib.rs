//! delaybench strategies: the order domain and store, the [`Canceller`]
//! trait, the delay strategies, the checker and the conformance suite.
//!
//! Where to find things:
//! - the domain rules and the one cancel function: [`store::OrderStore::cancel_if_due`]
//! - each invariant: [`checker::Anomaly`] (the table) and [`checker::queries`]
//! - each strategy: [`registry::STRATEGIES`] and its module ([`db_scan`], ...)
//! - the contract every strategy meets: [`Canceller`] and [`conformance`]

pub mod canceller;
mod causes;
pub mod ceiling;
pub mod checker;
pub mod conformance;
pub mod crash;
pub mod db_scan;
pub mod db_timer;
pub mod domain;
pub mod error;
pub mod leftovers;
pub mod outbox;
pub mod rabbit;
pub mod redact;
pub mod redis_cluster;
pub mod redis_zset;
pub mod registry;
pub mod remedy;
pub mod signal;
pub mod store;
pub mod strategy_info;
pub mod timing_wheel;
pub mod tls;
mod wake;

pub use canceller::{Canceller, Capabilities, InstanceRole, Service, StrategyCounters};
pub use crash::CrashPoint;
pub use domain::{
    now_us, set_clock_correction, system_now_us, CancelOutcome, CreateOutcome, Micros, NewOrder,
    OrderId, OrderStatus, PaymentOutcome, Share,
};
pub use error::{Error, Result};
pub use registry::StrategyOptions;
pub use store::{DbKind, DbLocation, DbServer, OrderStore, StoreStats};
