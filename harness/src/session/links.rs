//! The links between the application side and the services: which
//! connections go through a proxy, and what each proxy holds.
//!
//! Two reasons put a proxy in front of a service. A network fault
//! (`partition`, `latency`) acts on the canceller instances' link to it;
//! `[network]` holds a steady round trip on every link the application
//! makes, the order service's to the database included. The order service
//! gets a proxy of its own, so a fault still cuts only the instances, as it
//! always did; the checker and the harness's probes always connect
//! directly (they are the instrument, not the application).

use crate::faults::{Fault, Target};
use crate::model::records::LinkRecord;
use crate::proxy::{route_through, upstream_of, FaultProxy, Link};
use crate::scenario::Scenario;
use std::collections::{BTreeMap, BTreeSet};
use strategies::{DbKind, DbLocation, Service, StrategyOptions};

/// The proxies a strategy's run goes through, and where its parts connect.
#[derive(Debug)]
pub(super) struct Links {
    /// In front of each service the instances use and a network fault
    /// targets or `[network]` slows.
    pub(super) instances: BTreeMap<Target, FaultProxy>,
    /// In front of the database for the order service, under `[network]`.
    pub(super) order_service: Option<FaultProxy>,
    /// Where the instances connect.
    pub(super) instance_location: DbLocation,
    pub(super) instance_options: StrategyOptions,
    /// Where the order service connects.
    pub(super) order_service_location: DbLocation,
}

impl Links {
    /// Starts the proxies `scenario` asks for in front of the services the
    /// strategy `requires` (and the database, unless SQLite). Without
    /// network faults or `[network]` everything connects directly.
    pub(super) async fn route(
        scenario: &Scenario,
        requires: &[Service],
        location: &DbLocation,
        options: &StrategyOptions,
    ) -> anyhow::Result<Links> {
        let (mut instance_location, mut instance_options) = (location.clone(), options.clone());
        let mut instances = BTreeMap::new();
        let network = &scenario.network;
        let mut targets: BTreeSet<Target> =
            scenario.faults.iter().filter_map(Fault::link).collect();
        targets.extend(
            crate::scenario::NETWORK_TARGETS
                .into_iter()
                .filter(|t| !network.link(*t).is_loopback()),
        );
        for target in targets {
            let url = match target {
                Target::Database if location.kind != DbKind::Sqlite => &mut instance_location.url,
                Target::Redis if requires.contains(&Service::Redis) => {
                    // The cluster client connects to every master at the
                    // addresses the cluster announces, past a proxy in
                    // front of the seed: the fault would cut almost nothing.
                    anyhow::ensure!(
                        !strategies::redis_cluster::is_cluster(&instance_options.redis_zset.url),
                        "a `partition` or `latency` fault on target = \"redis\", or a \
                         `[network]` link to it, cannot act on a Redis Cluster ({}): its clients \
                         reach every master directly. Use a run-command fault on a node instead \
                         (scenarios/redis-cluster.toml)",
                        strategies::redact::url(&instance_options.redis_zset.url)
                    );
                    &mut instance_options.redis_zset.url
                }
                Target::Rabbitmq if requires.contains(&Service::RabbitMq) => {
                    anyhow::ensure!(
                        !instance_options.rabbit.url.contains(','),
                        "a network fault on target = \"rabbitmq\", or a `[network]` link to it, \
                         cannot act on a RabbitMQ cluster's list of nodes ({}): one proxy \
                         stands in front of one node",
                        strategies::redact::url(&instance_options.rabbit.url)
                    );
                    &mut instance_options.rabbit.url
                }
                _ => continue, // recorded as not applicable when the fault comes
            };
            instances.insert(
                target,
                proxy_in_front(target, url, network.link(target)).await?,
            );
        }
        let mut order_service_location = location.clone();
        let database = network.link(Target::Database);
        let order_service = if location.kind != DbKind::Sqlite && !database.is_loopback() {
            Some(proxy_in_front(Target::Database, &mut order_service_location.url, database).await?)
        } else {
            None
        };
        Ok(Links {
            instances,
            order_service,
            instance_location,
            instance_options,
            order_service_location,
        })
    }

    /// Every proxy, for the end of the run.
    pub(super) fn shutdown(&self) {
        for proxy in self.instances.values().chain(&self.order_service) {
            proxy.shutdown();
        }
    }

    /// A round trip to the database as the instances' steady link held it:
    /// the link's round trip plus twice the proxy's median lateness (one
    /// hold each way); zero over loopback. What a probe reading waited
    /// that was no CPU of the worker's.
    pub(super) fn database_round_trip(&self) -> std::time::Duration {
        match self.instances.get(&Target::Database) {
            Some(proxy) if !proxy.link().is_loopback() => {
                let late = proxy.hold_stats().late_p50_us;
                proxy.link().rtt + std::time::Duration::from_micros(2 * late)
            }
            _ => std::time::Duration::ZERO,
        }
    }

    /// What each steady link held and how faithfully: `None` when
    /// `[network]` added nothing.
    pub(super) fn records(&self) -> Option<Vec<LinkRecord>> {
        let record = |side: &str, proxy: &FaultProxy| {
            let held = proxy.hold_stats();
            let stats = proxy.stats();
            LinkRecord {
                side: side.to_string(),
                target: proxy.target(),
                link: proxy.link(),
                chunks: held.chunks,
                late_p50_us: held.late_p50_us,
                late_p99_us: held.late_p99_us,
                late_max_us: held.late_max_us,
                bytes: stats.bytes_up + stats.bytes_down,
            }
        };
        let records: Vec<LinkRecord> = self
            .order_service
            .iter()
            .map(|p| record("order service", p))
            .chain(
                self.instances
                    .values()
                    .filter(|p| !p.link().is_loopback())
                    .map(|p| record("instances", p)),
            )
            .collect();
        (!records.is_empty()).then_some(records)
    }
}

/// A proxy holding `link` in front of the service `url` names, and `url`
/// pointed at it.
async fn proxy_in_front(
    target: Target,
    url: &mut String,
    link: Link,
) -> anyhow::Result<FaultProxy> {
    let proxy = FaultProxy::start(target, upstream_of(url)?, link).await?;
    *url = route_through(url, proxy.local_addr())?;
    Ok(proxy)
}
