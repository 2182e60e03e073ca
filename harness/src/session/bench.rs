//! The harness's own side of a namespace: the order service's connection
//! pool on a fresh schema, sized for the offered rate. A strategy's
//! session and the sweep's generator step both drive their load through it.

use crate::faults::Target;
use crate::scenario::Scenario;
use anyhow::Result;
use std::time::Duration;
use strategies::{DbKind, DbLocation, OrderStore};

/// The order service's store and how many connections it holds.
#[derive(Debug, Clone)]
pub struct Bench {
    /// Creates orders and applies payment callbacks.
    pub store: OrderStore,
    /// Connections in `store`'s pool (reported with the generator's health).
    pub connections: u32,
}

impl Bench {
    /// Connects to `location` and installs the schema with the scenario's stock.
    pub async fn open(location: &DbLocation, scenario: &Scenario) -> Result<Bench> {
        let rtt = scenario.network.link(Target::Database).rtt;
        let connections = connections_for(scenario.rate, rtt, location.kind);
        let store = OrderStore::connect(location, connections).await?;
        store
            .install_schema(scenario.stock.skus, scenario.stock.initial)
            .await?;
        Ok(Bench { store, connections })
    }
}

/// Connections in the harness's own pool for orders and payment callbacks,
/// sized for the offered rate so the workload is not held up waiting for
/// one (the generator's lag, measured to commit, shows it if it still is):
/// each order holds one for about 20 ms at most on loopback, plus its round
/// trips (a checkout is about eight statements) across a `[network]` link.
/// SQLite serialises writers, so more connections there only add waiting.
fn connections_for(rate: f64, rtt: Duration, kind: DbKind) -> u32 {
    match kind {
        DbKind::Sqlite => 16,
        _ => ((rate * (0.02 + 8.0 * rtt.as_secs_f64())).ceil() as u32).clamp(16, 64),
    }
}
