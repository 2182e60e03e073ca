//! The project's keys on Redis (a server or a Redis Cluster's masters):
//! listed with SCAN, never KEYS, and deleted one DEL each.

use super::objects::redis_patterns;
use crate::error::{Error, Result};
use crate::redact;
use std::time::Duration;

/// Every key on the Redis of `redis_url` matching `pattern` (SCAN, never
/// KEYS). On a cluster (`redis+cluster://`), SCAN on every master; a master
/// that is down fails the listing rather than leaving its keys out.
pub async fn redis_keys(redis_url: &str, pattern: &str) -> Result<Vec<String>> {
    if crate::redis_cluster::is_cluster(redis_url) {
        let mut keys = Vec::new();
        for master in crate::redis_cluster::masters(redis_url).await? {
            let mut conn = crate::redis_cluster::connect_node(&master.url, redis_url).await?;
            keys.extend(scan(&mut conn, pattern).await?);
        }
        keys.sort();
        keys.dedup();
        return Ok(keys);
    }
    let mut conn = redis_connect(redis_url).await?;
    let mut keys = scan(&mut conn, pattern).await?;
    keys.sort();
    keys.dedup();
    Ok(keys)
}

/// Every key on one node matching `pattern`.
async fn scan(conn: &mut redis::aio::MultiplexedConnection, pattern: &str) -> Result<Vec<String>> {
    let mut keys = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .map_err(|e| redis_error("scanning keys", e))?;
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok(keys)
}

/// Deletes `keys`, one DEL each (valid on Redis Cluster); returns how many existed.
pub async fn delete_redis_keys(redis_url: &str, keys: &[String]) -> Result<usize> {
    if keys.is_empty() {
        return Ok(0);
    }
    let mut deleted = 0;
    if crate::redis_cluster::is_cluster(redis_url) {
        // Each DEL goes to the master of its key's slot.
        let client = crate::redis_cluster::client(redis_url)?;
        let mut conn = tokio::time::timeout(Duration::from_secs(6), client.get_async_connection())
            .await
            .map_err(|_| cluster_unreachable(redis_url, "no connection within 6s".into()))?
            .map_err(|e| cluster_unreachable(redis_url, e.to_string()))?;
        for key in keys {
            let n: usize = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .map_err(|e| redis_error("deleting keys", e))?;
            deleted += n;
        }
        return Ok(deleted);
    }
    let mut conn = redis_connect(redis_url).await?;
    for key in keys {
        let n: usize = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(|e| redis_error("deleting keys", e))?;
        deleted += n;
    }
    Ok(deleted)
}

fn cluster_unreachable(redis_url: &str, reason: String) -> Error {
    Error::unreachable(
        "Redis",
        redact::url(redis_url),
        reason,
        crate::redis_cluster::START_HINT.into(),
    )
}

/// Deletes every Redis key of the run with resource prefix `prefix`.
pub async fn delete_redis_prefix(redis_url: &str, prefix: &str) -> Result<usize> {
    let mut deleted = 0;
    for pattern in redis_patterns(prefix) {
        let keys = redis_keys(redis_url, &pattern).await?;
        deleted += delete_redis_keys(redis_url, &keys).await?;
    }
    Ok(deleted)
}

async fn redis_connect(redis_url: &str) -> Result<redis::aio::MultiplexedConnection> {
    let unreachable = |reason: String| {
        Error::unreachable(
            "Redis",
            redact::url(redis_url),
            reason,
            "start Redis: `docker compose up -d --wait redis`, or \
               `redis-server --daemonize yes --port 6379 --save \"\" --appendonly no`; \
               or pass --redis / DELAYBENCH_REDIS"
                .into(),
        )
    };
    let client = crate::tls::redis_client(redis_url).map_err(unreachable)?;
    tokio::time::timeout(
        Duration::from_secs(5),
        client.get_multiplexed_async_connection(),
    )
    .await
    .map_err(|_| unreachable("no connection within 5s".into()))?
    .map_err(|e| unreachable(e.to_string()))
}

fn redis_error(context: &'static str, e: redis::RedisError) -> Error {
    Error::Broker {
        service: "Redis",
        context,
        message: e.to_string(),
    }
}
