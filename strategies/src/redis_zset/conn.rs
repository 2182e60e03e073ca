//! The Redis side shared by `redis-zset` and its teaching variants: one
//! auto-reconnecting connection for commands, a subscriber that reconnects
//! and resubscribes, the app-side command counter, the run's key prefix,
//! and the mapping of redis errors to the library's [`Error`] (no redis
//! type leaves this module's users).

use crate::domain::OrderId;
use crate::error::{Error, Result};
use crate::redact;
use crate::redis_cluster;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    AsyncConnectionConfig, Client, Cmd, FromRedisValue, Msg, ProtocolVersion, PushKind,
    ScriptInvocation,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

/// How to get a Redis running, for [`Error::Unreachable`].
pub const START_HINT: &str = "start Redis: `docker compose up -d --wait redis`, or \
     `redis-server --daemonize yes --port 6379 --save \"\" --appendonly no`";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Generous: a 2-core machine under test load can stall a reply.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Retry pauses after a failed Redis or database call double up to this.
pub(crate) const MIN_BACKOFF: Duration = Duration::from_millis(50);
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// What a subscriber reports.
#[derive(Debug)]
pub(crate) enum Event<'a> {
    /// (Re)subscribed: messages published while unsubscribed are lost, so
    /// whoever relies on them should look again.
    Subscribed,
    /// A message's payload.
    Message(&'a str),
}

/// How the Redis server persists its data, as `CONFIG GET` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// `appendonly yes`: the schedule survives a restart (up to the fsync policy).
    AppendOnly,
    /// RDB snapshots only: a restart loses what was scheduled since the last one.
    Snapshots,
    /// `appendonly no` and `save ""`: a restart loses the whole schedule.
    None,
}

/// One Redis server, or one Redis Cluster (`redis+cluster://` URL): a
/// lazily connected command connection and counters.
pub(crate) struct Redis {
    backend: Backend,
    display_url: String,
    commands: AtomicU64,
}

enum Backend {
    Standalone {
        client: Client,
        manager: OnceCell<ConnectionManager>,
    },
    /// Commands go to the master of their key's slot; a script to the
    /// master of its first key's slot (all its keys share one slot).
    Cluster {
        url: String,
        // Boxed: the client's settings are twice the standalone variant.
        client: Box<ClusterClient>,
        conn: OnceCell<ClusterConnection>,
    },
}

/// The command connection of either backend.
enum Conn {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("url", &self.display_url)
            .finish_non_exhaustive()
    }
}

impl Redis {
    /// Parses `url`; connects on first use.
    pub fn new(url: &str) -> Result<Redis> {
        let display_url = redact::url(url);
        let backend = if redis_cluster::is_cluster(url) {
            Backend::Cluster {
                url: url.to_string(),
                client: Box::new(redis_cluster::client(url)?),
                conn: OnceCell::new(),
            }
        } else {
            Backend::Standalone {
                client: crate::tls::redis_client(url).map_err(|e| {
                    Error::Config(format!("Redis URL `{display_url}` is invalid: {e}"))
                })?,
                manager: OnceCell::new(),
            }
        };
        Ok(Redis {
            backend,
            display_url,
            commands: AtomicU64::new(0),
        })
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Cluster { .. })
    }

    /// Commands and script calls sent so far (app-side; a script call is one).
    pub fn commands(&self) -> u64 {
        self.commands.load(Ordering::Relaxed)
    }

    /// The logical database number (for `__keyevent@<db>__` channels; a
    /// cluster has only 0).
    pub fn db(&self) -> i64 {
        match &self.backend {
            Backend::Standalone { client, .. } => {
                client.get_connection_info().redis_settings().db()
            }
            Backend::Cluster { .. } => 0,
        }
    }

    fn unreachable(&self, reason: String) -> Error {
        Error::unreachable(
            "Redis",
            self.display_url.clone(),
            reason,
            if self.is_cluster() {
                redis_cluster::START_HINT
            } else {
                START_HINT
            }
            .to_string(),
        )
    }

    /// The command connection; it reconnects by itself after Redis (or a
    /// cluster node) restarts (the command that saw the drop fails, the
    /// next ones wait for it).
    async fn conn(&self) -> Result<Conn> {
        let (client, manager) = match &self.backend {
            Backend::Standalone { client, manager } => (client, manager),
            Backend::Cluster { client, conn, .. } => {
                let conn = conn
                    .get_or_try_init(|| async {
                        match tokio::time::timeout(
                            CONNECT_TIMEOUT * 3,
                            client.get_async_connection(),
                        )
                        .await
                        {
                            Ok(Ok(conn)) => Ok(conn),
                            Ok(Err(e)) => Err(self.unreachable(e.to_string())),
                            Err(_) => Err(self.unreachable(format!(
                                "no answer within {:?}",
                                CONNECT_TIMEOUT * 3
                            ))),
                        }
                    })
                    .await?;
                return Ok(Conn::Cluster(conn.clone()));
            }
        };
        let manager = manager
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT))
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_millis(500));
                let connect = ConnectionManager::new_with_config(client.clone(), config);
                match tokio::time::timeout(CONNECT_TIMEOUT * 3, connect).await {
                    Ok(Ok(manager)) => Ok(manager),
                    Ok(Err(e)) => Err(self.unreachable(e.to_string())),
                    Err(_) => {
                        Err(self.unreachable(format!("no answer within {CONNECT_TIMEOUT:?}")))
                    }
                }
            })
            .await?;
        Ok(Conn::Standalone(manager.clone()))
    }

    /// Sends one command.
    pub async fn query<T: FromRedisValue>(&self, cmd: &Cmd, context: &'static str) -> Result<T> {
        let conn = self.conn().await?;
        self.commands.fetch_add(1, Ordering::Relaxed);
        match conn {
            Conn::Standalone(mut c) => cmd.query_async(&mut c).await,
            Conn::Cluster(mut c) => cmd.query_async(&mut c).await,
        }
        .map_err(|e| broker(context, &e))
    }

    /// Calls a script (EVALSHA; loaded again when Redis forgot it).
    pub async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
        context: &'static str,
    ) -> Result<T> {
        let conn = self.conn().await?;
        self.commands.fetch_add(1, Ordering::Relaxed);
        match conn {
            Conn::Standalone(mut c) => invocation.invoke_async(&mut c).await,
            Conn::Cluster(mut c) => invocation.invoke_async(&mut c).await,
        }
        .map_err(|e| broker(context, &e))
    }

    /// Checks that Redis answers; an unreachable server gives
    /// [`Error::Unreachable`] with the redacted URL and how to start one.
    pub async fn ping(&self) -> Result<()> {
        let pong: String = self
            .query(&redis::cmd("PING"), "pinging Redis")
            .await
            .map_err(|e| match e {
                Error::Broker { message, .. } => self.unreachable(message),
                other => other,
            })?;
        if pong != "PONG" {
            return Err(self.unreachable(format!("PING answered `{pong}`")));
        }
        Ok(())
    }

    /// One `CONFIG GET` value (`None` if the server hides it).
    pub async fn config_get(&self, name: &str) -> Result<Option<String>> {
        let mut values: HashMap<String, String> = self
            .query(
                redis::cmd("CONFIG").arg("GET").arg(name),
                "reading Redis configuration",
            )
            .await?;
        Ok(values.remove(name))
    }

    pub async fn config_set(&self, name: &str, value: &str) -> Result<()> {
        self.query::<()>(
            redis::cmd("CONFIG").arg("SET").arg(name).arg(value),
            "changing Redis configuration",
        )
        .await
    }

    /// How the server persists, from `appendonly` and `save`; on a
    /// cluster, the weakest of every master's (what a restart of that
    /// master loses).
    pub async fn persistence(&self) -> Result<Persistence> {
        let Backend::Cluster { url, .. } = &self.backend else {
            let aof = self.config_get("appendonly").await?;
            let save = self.config_get("save").await?;
            return Ok(persistence_of(aof.as_deref(), save.as_deref()));
        };
        let mut weakest = Persistence::AppendOnly;
        for master in redis_cluster::masters(url).await? {
            let mut conn = redis_cluster::connect_node(&master.url, url).await?;
            let mut values: HashMap<String, String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("appendonly")
                .arg("save")
                .query_async(&mut conn)
                .await
                .map_err(|e| broker("reading Redis configuration", &e))?;
            let here = persistence_of(
                values.remove("appendonly").as_deref(),
                values.remove("save").as_deref(),
            );
            weakest = match (weakest, here) {
                (_, Persistence::None) | (Persistence::None, _) => Persistence::None,
                (_, Persistence::Snapshots) | (Persistence::Snapshots, _) => Persistence::Snapshots,
                _ => Persistence::AppendOnly,
            };
        }
        Ok(weakest)
    }

    /// Subscribes to `channel` on its own RESP3 connection and reports to
    /// `on_event` until `shutdown`. A lost connection is counted in
    /// `errors`, then re-established with backoff; never returns early.
    pub async fn listen(
        &self,
        channel: &str,
        shutdown: &CancellationToken,
        errors: &AtomicU64,
        mut on_event: impl FnMut(Event<'_>),
    ) {
        let mut backoff = MIN_BACKOFF;
        // Which node to try (cluster): the next one after each failure.
        let mut attempt = 0usize;
        while !shutdown.is_cancelled() {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            match self.subscribe(channel, tx, attempt).await {
                Ok(conn) => {
                    backoff = MIN_BACKOFF;
                    on_event(Event::Subscribed);
                    loop {
                        let push = tokio::select! {
                            _ = shutdown.cancelled() => return,
                            push = rx.recv() => push,
                        };
                        match push {
                            None => break,
                            Some(p) if p.kind == PushKind::Disconnection => break,
                            Some(p) => {
                                if let Some(msg) = Msg::from_push_info(p) {
                                    if let Ok(payload) =
                                        std::str::from_utf8(msg.get_payload_bytes())
                                    {
                                        on_event(Event::Message(payload));
                                    }
                                }
                            }
                        }
                    }
                    drop(conn);
                    attempt += 1;
                    errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(channel, "Redis subscriber disconnected; resubscribing");
                }
                Err(e) => {
                    attempt += 1;
                    errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(channel, error = %e, "subscribing failed; retrying");
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Subscribes on the standalone server, or on one node of the cluster:
    /// a cluster delivers a PUBLISH (even from a script) to subscribers on
    /// every node, so any node serves. Attempt `n` takes the seed, then
    /// each master in turn, so a dead node is passed over on the next try.
    async fn subscribe(
        &self,
        channel: &str,
        tx: tokio::sync::mpsc::UnboundedSender<redis::PushInfo>,
        attempt: usize,
    ) -> Result<MultiplexedConnection> {
        let info = match &self.backend {
            Backend::Standalone { client, .. } => client.get_connection_info().clone(),
            Backend::Cluster { url, .. } => {
                let mut nodes = vec![redis_cluster::seed_url(url)?];
                // Only the seed while a master is down (it is not listed then).
                if let Ok(masters) = redis_cluster::masters(url).await {
                    nodes.extend(masters.into_iter().map(|m| m.url));
                }
                redis::IntoConnectionInfo::into_connection_info(
                    nodes[attempt % nodes.len()].as_str(),
                )
                .map_err(|e| broker("subscribing", &e))?
            }
        };
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = Client::open(info.set_redis_settings(settings))
            .map_err(|e| broker("subscribing", &e))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_push_sender(tx);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| self.unreachable(e.to_string()))?;
        self.commands.fetch_add(1, Ordering::Relaxed);
        conn.subscribe(channel)
            .await
            .map_err(|e| broker("subscribing", &e))?;
        Ok(conn)
    }
}

fn persistence_of(appendonly: Option<&str>, save: Option<&str>) -> Persistence {
    if appendonly == Some("yes") {
        Persistence::AppendOnly
    } else if save.is_some_and(|s| !s.trim().is_empty()) {
        Persistence::Snapshots
    } else {
        Persistence::None
    }
}

/// A redis error in words.
fn broker(context: &'static str, e: &redis::RedisError) -> Error {
    Error::Broker {
        service: "Redis",
        context,
        message: e.to_string(),
    }
}

/// A stable shard for an order (splitmix64 finaliser, the same in every
/// process and every build, unlike Rust's randomised default hasher).
pub(crate) fn shard_of(order_id: OrderId, shards: u32) -> usize {
    let mut z = (order_id as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z % u64::from(shards.max(1))) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_stable_and_spread() {
        assert_eq!(shard_of(42, 4), shard_of(42, 4));
        let mut seen = [0u32; 4];
        for id in 0..1000 {
            seen[shard_of(id, 4)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
        assert_eq!(shard_of(-7, 1), 0);
    }
}
