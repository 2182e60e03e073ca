//! What the fault kinds share when they act: the context of one
//! strategy's run ([`FaultContext`]) and the steps several kinds take
//! (restarting an instance, acting on a proxied link, checking a crash
//! point, quoting a command's stderr).

use super::record::FaultRecord;
use super::target::Target;
use crate::instance::Pool;
use crate::proxy::{FaultProxy, ProxyStats};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use strategies::{CrashPoint, OrderStore, Service};
use tokio::time::Instant;

/// What faults act on, for one strategy's run.
#[derive(Debug, Clone)]
pub struct FaultContext {
    pub pool: Arc<Pool>,
    /// The proxy in front of each backend the strategy's instances use.
    pub proxies: BTreeMap<Target, FaultProxy>,
    /// The harness's own connection to the database (not proxied), which
    /// terminates the instances' sessions.
    pub db: OrderStore,
    /// The label of the instances' database sessions.
    pub session: String,
    /// The crash points the strategy's path has.
    pub crash_points: &'static [CrashPoint],
    /// The first order.
    pub t0: Instant,
    /// A `crash-at` whose point is not reached by then is reported so.
    pub give_up_at: Instant,
    /// The services the strategy uses besides the database.
    pub requires: Vec<Service>,
    /// Its Redis, where it uses one: `(url, resource prefix, shards)`, to
    /// tell whether a fault on a cluster node touched its shards.
    pub redis: Option<(String, String, u32)>,
    /// The strategy's RabbitMQ URL and its queues' prefix (`dlb.<prefix>.`),
    /// when it uses the broker: where a fault aimed at the node hosting its
    /// queues looks.
    pub rabbit: Option<(String, String)>,
}

impl FaultContext {
    /// ms since the first order.
    pub fn since_t0(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    /// Starts a fresh process for instance `index` and records it.
    pub async fn restart(&self, index: usize, record: &mut FaultRecord) {
        match self.pool.restart(index).await {
            Ok(pid) => {
                record.restarted_pid = Some(pid);
                record.restarted_at_ms = Some(self.since_t0());
            }
            Err(e) => record.error = Some(format!("restart: {e:#}")),
        }
    }

    /// Why `point` cannot be used, when the strategy's path does not have it.
    pub fn undeclared(&self, point: CrashPoint) -> Option<String> {
        if self.crash_points.contains(&point) {
            return None;
        }
        let names: Vec<&str> = self.crash_points.iter().map(|p| p.as_str()).collect();
        Some(format!(
            "this strategy's path has no {point} point (it declares: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ))
    }

    /// Acts on the link to `target` with `act` (a partition, added
    /// latency) for `lasts`, records the window, and returns what its
    /// proxy counted meanwhile; `None` (recorded as not applicable) when
    /// the strategy's instances do not use that link.
    pub async fn on_link(
        &self,
        target: Target,
        lasts: Duration,
        record: &mut FaultRecord,
        act: impl FnOnce(&FaultProxy),
    ) -> Option<LinkEffect> {
        let Some(proxy) = self.proxies.get(&target) else {
            record.not_applicable(format!(
                "this strategy's instances do not use {}",
                target.as_str()
            ));
            return None;
        };
        let before = proxy.stats();
        let start = self.since_t0();
        act(proxy);
        tokio::time::sleep(lasts).await;
        record.window_ms = Some((start, self.since_t0()));
        let after = proxy.stats();
        // How the instances came back: the connections they opened
        // once the link healed.
        tokio::time::sleep(RECONNECT_WINDOW).await;
        let reconnected = proxy.stats().connections - after.connections;
        Some(LinkEffect {
            before,
            after,
            reconnected,
        })
    }
}

/// After a partition heals, how long the instances' new connections are
/// counted as their reconnects.
pub const RECONNECT_WINDOW: Duration = Duration::from_secs(3);

/// A link's proxy counters over a fault: when it began, when it ended,
/// and the connections opened in the [`RECONNECT_WINDOW`] after.
#[derive(Debug)]
pub struct LinkEffect {
    pub before: ProxyStats,
    pub after: ProxyStats,
    pub reconnected: u64,
}

/// The last three lines a command printed, on one line.
pub fn tail(stderr: &[u8]) -> String {
    // It ends up in run.json and the report, which never hold a password.
    let said = strategies::redact::text(&String::from_utf8_lossy(stderr));
    let tail: Vec<&str> = said.lines().rev().take(3).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
}
