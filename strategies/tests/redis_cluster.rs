//! `redis-zset` on a real local Redis Cluster (3 masters on
//! 127.0.0.1:7000-7002, `scripts/services.sh redis-cluster`; these tests
//! start it when it is down, or fail naming that command): the conformance
//! suite, the shards' spread over the masters, the cleanup's SCAN on every
//! master, and the teaching variant that refuses a cluster.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use strategies::conformance::{self, Check, Fixture};
use strategies::redis_cluster;
use strategies::redis_zset::{ClaimMode, RedisZset};
use strategies::StrategyOptions;
use tokio::sync::OnceCell;

/// `DELAYBENCH_REDIS_CLUSTER_URL` or the local cluster's seed.
fn cluster_url() -> String {
    std::env::var("DELAYBENCH_REDIS_CLUSTER_URL")
        .unwrap_or_else(|_| "redis+cluster://127.0.0.1:7000".into())
}

static CLUSTER: OnceCell<()> = OnceCell::const_new();

/// Makes sure the cluster answers with every master up: starts the local
/// one with `scripts/services.sh redis-cluster` once per test binary, or
/// panics naming the command.
async fn ensure_cluster() {
    CLUSTER
        .get_or_init(|| async {
            if redis_cluster::masters(&cluster_url()).await.is_ok() {
                return;
            }
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/services.sh");
            let status = tokio::process::Command::new("bash")
                .arg(script)
                .arg("redis-cluster")
                .status()
                .await;
            assert!(
                matches!(status, Ok(s) if s.success()),
                "the Redis Cluster at {} is down and `scripts/services.sh redis-cluster` \
                 could not start it ({status:?}); start it with that command, or \
                 `docker compose --profile cluster up -d --wait redis-cluster`",
                cluster_url()
            );
            if let Err(e) = redis_cluster::masters(&cluster_url()).await {
                panic!("the Redis Cluster was started but does not answer: {e}");
            }
        })
        .await;
}

fn cluster_options() -> StrategyOptions {
    let mut options = common::test_options();
    options.redis_zset.url = cluster_url();
    options
}

macro_rules! cluster_conformance {
    ($url:expr; $($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $check() {
            ensure_cluster().await;
            let fixture = Fixture::new(&$url, "redis-zset", cluster_options()).await;
            conformance::run_check(&fixture, Check::named(stringify!($check)))
                .await
                .assert_passed();
            fixture.cleanup().await;
        }
    )*};
}

/// Every conformance check on SQLite and on PostgreSQL: the database does
/// not change what the cluster does, and two keep the runtime modest.
mod conformance_sqlite {
    use super::*;
    with_every_check!(cluster_conformance!(common::sqlite_url()));
}

mod conformance_postgres {
    use super::*;
    with_every_check!(cluster_conformance!(common::postgres_url()));
}

#[test]
fn every_check_is_listed() {
    common::assert_every_check_listed(&with_every_check!(check_names!()));
}

/// The slot of `key` as the cluster computes it, and the master serving it.
async fn slot_and_master(key: &str, masters: &[redis_cluster::Master]) -> (u16, String) {
    let seed = redis_cluster::seed_url(&cluster_url()).unwrap();
    let mut conn = redis_cluster::connect_node(&seed, &cluster_url())
        .await
        .unwrap();
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let master = masters
        .iter()
        .find(|m| m.serves(slot))
        .unwrap_or_else(|| panic!("no master serves slot {slot}"));
    (slot, master.addr.clone())
}

#[tokio::test]
async fn default_shards_land_on_every_master() {
    ensure_cluster().await;
    let masters = redis_cluster::masters(&cluster_url()).await.unwrap();
    assert_eq!(
        masters.len(),
        3,
        "the local cluster has 3 masters: {masters:?}"
    );
    let options = cluster_options();
    assert_eq!(
        options.redis_zset.shards(),
        4,
        "the default shard count on a cluster"
    );
    // Several namespaces: the spread must not depend on the prefix's luck.
    for _ in 0..5 {
        let fixture = Fixture::new(&common::sqlite_url(), "redis-zset", options.clone()).await;
        let zset = RedisZset::new(
            fixture.orders.clone(),
            &options.redis_zset,
            ClaimMode::Atomic,
        )
        .unwrap();
        let mut on = BTreeSet::new();
        for key in zset.delay_keys() {
            let (slot, master) = slot_and_master(key, &masters).await;
            // The client computes the same slot as the server.
            assert_eq!(slot, redis_cluster::key_slot(key), "{key}");
            // Its shard's other keys share the slot (one-slot scripts).
            let processing = key.replace(":delay", ":processing");
            assert_eq!(slot, slot_and_master(&processing, &masters).await.0);
            on.insert(master);
        }
        assert!(on.len() >= 2, "shards on only {on:?}");
        assert_eq!(
            on.len(),
            3,
            "4 shards on 3 masters should cover all: {on:?}"
        );
        fixture.cleanup().await;
    }
}

#[tokio::test]
async fn cleanup_scans_every_master() {
    ensure_cluster().await;
    let url = cluster_url();
    let fixture = Fixture::new(&common::sqlite_url(), "redis-zset", cluster_options()).await;
    let prefix = fixture.resource_prefix();
    let client = redis_cluster::client(&url).unwrap();
    let mut conn = client.get_async_connection().await.unwrap();
    // One key in each master's slice of the slot space.
    let keys: Vec<String> = (0..3)
        .map(|k| {
            let tag = redis_cluster::spread_tag(&prefix, k, 3);
            format!("dlb:{{{tag}}}:delay")
        })
        .collect();
    for key in &keys {
        let _: () = redis::cmd("ZADD")
            .arg(key)
            .arg(1)
            .arg(1)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let masters = redis_cluster::masters(&url).await.unwrap();
    let mut on = BTreeSet::new();
    for key in &keys {
        on.insert(slot_and_master(key, &masters).await.1);
    }
    assert_eq!(on.len(), 3, "the keys are on every master: {on:?}");
    let found = strategies::leftovers::redis_keys(&url, &format!("dlb:{{{prefix}:*"))
        .await
        .unwrap();
    assert_eq!(found, {
        let mut k = keys.clone();
        k.sort();
        k
    });
    let deleted = strategies::leftovers::delete_redis_prefix(&url, &prefix)
        .await
        .unwrap();
    assert_eq!(deleted, 3);
    assert!(
        strategies::leftovers::redis_keys(&url, &format!("dlb:{{{prefix}:*"))
            .await
            .unwrap()
            .is_empty()
    );
    fixture.cleanup().await;
}

#[tokio::test]
async fn keyspace_expiry_refuses_a_cluster_naming_why() {
    let options = cluster_options();
    let fixture = Fixture::new(&common::sqlite_url(), "redis-zset", options.clone()).await;
    let err =
        match common::deploy("redis-keyspace-expiry", &options).instance(fixture.orders.clone()) {
            Ok(_) => panic!("redis-keyspace-expiry accepted a Redis Cluster URL"),
            Err(e) => e.to_string(),
        };
    assert!(
        err.contains("Redis Cluster") && err.contains("redis-keyspace-expiry"),
        "{err}"
    );
    fixture.cleanup().await;
}

#[tokio::test]
async fn a_database_number_in_a_cluster_url_is_refused() {
    let mut options = cluster_options();
    options.redis_zset.url = "redis+cluster://127.0.0.1:7000/2".into();
    let err = options.validate().unwrap_err().to_string();
    assert!(
        err.contains("strategies.redis-zset.url") && err.contains("database 0"),
        "{err}"
    );
}
