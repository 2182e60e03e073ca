//! What a run or a test could leave on the broker and in Redis, found and
//! removed by name, and the guards that remove it on every exit path.
//!
//! Naming: a strategy run's database namespace (`dlb_<run id>_<strategy>`
//! in a harness run, `t_<strategy>_<pid>_<nanos>_<n>` in a test) gives its
//! [`resource_prefix`](crate::store::DbLocation::resource_prefix) `<p>`,
//! and every broker object and Redis key of the run is named after it:
//!
//! - queues and exchanges `dlb.<p>.<role>` ([`broker_prefix`]);
//! - Redis keys `dlb:{<p>:<shard>}:<role>` and `dlb:{<p>}:<role>`
//!   ([`redis_patterns`]).
//!
//! AMQP cannot list queues, so [`list_broker`] asks the RabbitMQ management
//! HTTP API when it answers, else `rabbitmqctl` when the broker is on this
//! host; deletion goes over AMQP ([`delete_broker`]).
//!
//! The rooms: `objects` (the names), `broker` (listing and deleting queues
//! and exchanges), `management` (the management API's HTTP client), `keys`
//! (Redis keys), `plugin` (which build of the delayed-message plugin the
//! broker runs, for run.json) and `teardown` (the guards that remove it all on every
//! exit path).

mod broker;
mod holdings;
mod keys;
mod management;
mod objects;
mod placement;
mod plugin;
mod teardown;

pub use broker::{delete_broker, delete_broker_prefix, list_broker};
pub use holdings::{broker_holdings, BrokerHoldings};
pub use keys::{delete_redis_keys, delete_redis_prefix, redis_keys};
pub use objects::{broker_prefix, redis_patterns, BrokerKind, BrokerObject};
pub use placement::queue_nodes;
pub use plugin::{delayed_plugin_build, PluginBuild};
pub use teardown::{block_on_fresh_thread, TeardownGuard, TestNamespace};
