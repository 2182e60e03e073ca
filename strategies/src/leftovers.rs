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

use crate::canceller::{Canceller, Service};
use crate::error::{Error, Result};
use crate::redact;
use crate::registry::{Deployment, StrategyOptions, Variant};
use crate::store::{DbLocation, DbServer, OrderStore};
use std::future::Future;
use std::time::Duration;

/// The name prefix of every queue and exchange of the run with resource
/// prefix `prefix` (`dlb.<prefix>.`).
pub fn broker_prefix(prefix: &str) -> String {
    format!("dlb.{prefix}.")
}

/// The SCAN patterns of every Redis key of the run with resource prefix
/// `prefix`: sharded keys `dlb:{<prefix>:<k>}:...` and unsharded ones
/// `dlb:{<prefix>}:...` (the closing brace or colon keeps `t_1` from
/// matching `t_10`).
pub fn redis_patterns(prefix: &str) -> [String; 2] {
    [format!("dlb:{{{prefix}:*"), format!("dlb:{{{prefix}}}*")]
}

/// A queue or an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BrokerKind {
    Queue,
    Exchange,
}

impl BrokerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BrokerKind::Queue => "queue",
            BrokerKind::Exchange => "exchange",
        }
    }
}

/// One `dlb.*` queue or exchange on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerObject {
    pub kind: BrokerKind,
    pub name: String,
    /// Ready messages in a queue, when the listing said.
    pub messages: Option<u64>,
}

/// The project's (`dlb.*`) queues and exchanges on the broker of
/// `amqp_url`'s virtual host, and which source listed them (the
/// management API's URL or `rabbitmqctl`).
pub async fn list_broker(amqp_url: &str) -> Result<(Vec<BrokerObject>, String)> {
    // The management API and rabbitmqctl found from a URL's host would
    // answer for whichever broker owns port 15672 / the default node there,
    // not necessarily the listed cluster's.
    if crate::rabbit::nodes::split(amqp_url).len() > 1 {
        return Err(Error::Unreachable {
            service: "RabbitMQ (listing queues)",
            url: redact::url(amqp_url),
            reason: "listing the leftovers of a cluster given as several URLs is not supported"
                .into(),
            hint: "list them on one node, e.g. `scripts/rabbitmq-cluster.sh ctl 1 list_queues \
                   name messages` for the local cluster"
                .into(),
        });
    }
    let uri: amq_protocol::uri::AMQPUri = amqp_url
        .parse()
        .map_err(|e: String| Error::Config(format!("AMQP URL `{}`: {e}", redact::url(amqp_url))))?;
    let host = uri.authority.host.clone();
    let reachable = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect((host.as_str(), uri.authority.port)),
    )
    .await;
    if let Err(reason) = reachable
        .map_err(|_| "no connection within 5s".to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
    {
        return Err(Error::Unreachable {
            service: "RabbitMQ",
            url: redact::url(amqp_url),
            reason,
            hint: "start RabbitMQ: `docker compose up -d --wait rabbitmq`, or on a Debian host \
                   `rabbitmq-server -detached`; or pass --amqp / DELAYBENCH_AMQP"
                .into(),
        });
    }
    let api = format!("http://{host}:15672/api");
    let http_error = match list_over_http(&uri).await {
        Ok(objects) => return Ok((objects, format!("management API {api}"))),
        Err(e) => e,
    };
    let local = matches!(host.as_str(), "127.0.0.1" | "localhost" | "::1");
    if local {
        match list_with_rabbitmqctl(&uri.vhost).await {
            Ok(objects) => return Ok((objects, "rabbitmqctl".into())),
            Err(e) => {
                return Err(unlisted(
                    amqp_url,
                    format!("management API {api}: {http_error}; rabbitmqctl: {e}"),
                ))
            }
        }
    }
    Err(unlisted(
        amqp_url,
        format!("management API {api}: {http_error}; rabbitmqctl only works on the broker's host"),
    ))
}

fn unlisted(amqp_url: &str, reason: String) -> Error {
    Error::Unreachable {
        service: "RabbitMQ (listing queues)",
        url: redact::url(amqp_url),
        reason,
        hint: "start RabbitMQ (`docker compose up -d --wait rabbitmq`, or on a Debian host \
               `rabbitmq-server -detached`) and enable its management API \
               (`rabbitmq-plugins enable rabbitmq_management`), or run on the broker's host"
            .into(),
    }
}

/// GET `/api/queues/<vhost>` and `/api/exchanges/<vhost>` with the AMQP
/// URL's credentials, over plain HTTP/1.0.
async fn list_over_http(
    uri: &amq_protocol::uri::AMQPUri,
) -> std::result::Result<Vec<BrokerObject>, String> {
    let vhost = url::form_urlencoded::byte_serialize(uri.vhost.as_bytes())
        .collect::<String>()
        .replace('/', "%2F");
    let auth = base64(&format!(
        "{}:{}",
        uri.authority.userinfo.username, uri.authority.userinfo.password
    ));
    let mut objects = Vec::new();
    for (kind, path) in [
        (
            BrokerKind::Queue,
            format!("/api/queues/{vhost}?columns=name,messages"),
        ),
        (
            BrokerKind::Exchange,
            format!("/api/exchanges/{vhost}?columns=name"),
        ),
    ] {
        let body = http_get(&uri.authority.host, 15672, &path, &auth).await?;
        let items: Vec<serde_json::Value> =
            serde_json::from_str(&body).map_err(|e| format!("unexpected answer to {path}: {e}"))?;
        objects.extend(items.iter().filter_map(|item| {
            let name = item["name"].as_str()?;
            name.starts_with("dlb.").then(|| BrokerObject {
                kind,
                name: name.to_string(),
                messages: item["messages"].as_u64(),
            })
        }));
    }
    Ok(objects)
}

async fn http_get(
    host: &str,
    port: u16,
    path: &str,
    auth: &str,
) -> std::result::Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await?;
        let request = format!(
            "GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nAuthorization: Basic {auth}\r\n\
             Accept: application/json\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| "no answer within 5s".to_string())?
        .map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| "malformed HTTP answer".to_string())?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(format!("{path}: {status}"));
    }
    Ok(body.to_string())
}

/// The Basic authorization value of `text` (`user:password`).
fn base64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

async fn list_with_rabbitmqctl(vhost: &str) -> std::result::Result<Vec<BrokerObject>, String> {
    let run = |args: Vec<&str>| {
        let vhost = vhost.to_string();
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        async move {
            let output = tokio::time::timeout(
                Duration::from_secs(30),
                tokio::process::Command::new("rabbitmqctl")
                    .args(["-q", "--no-table-headers", "-p", &vhost])
                    .args(&args)
                    .output(),
            )
            .await
            .map_err(|_| "no answer within 30s".to_string())?
            .map_err(|e| format!("cannot run it: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "{}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        }
    };
    let mut objects = Vec::new();
    for line in run(vec!["list_queues", "name", "messages"]).await?.lines() {
        let mut fields = line.split('\t');
        let name = fields.next().unwrap_or_default().trim();
        if name.starts_with("dlb.") {
            objects.push(BrokerObject {
                kind: BrokerKind::Queue,
                name: name.to_string(),
                messages: fields.next().and_then(|m| m.trim().parse().ok()),
            });
        }
    }
    for line in run(vec!["list_exchanges", "name"]).await?.lines() {
        let name = line.trim();
        if name.starts_with("dlb.") {
            objects.push(BrokerObject {
                kind: BrokerKind::Exchange,
                name: name.to_string(),
                messages: None,
            });
        }
    }
    Ok(objects)
}

/// Deletes `objects` over AMQP (a queue with its messages); returns how
/// many went. One failure does not stop the others: the first is returned
/// after all were tried.
pub async fn delete_broker(amqp_url: &str, objects: &[BrokerObject]) -> Result<usize> {
    if objects.is_empty() {
        return Ok(0);
    }
    let urls = crate::rabbit::nodes::split(amqp_url);
    let (conn, _) = crate::rabbit::nodes::connect_first(&urls, 0)
        .await
        .map_err(|reason| Error::Unreachable {
            service: "RabbitMQ",
            url: redact::url(amqp_url),
            reason,
            hint: "start RabbitMQ: `docker compose up -d --wait rabbitmq`, or on a Debian host \
                   `rabbitmq-server -detached`"
                .into(),
        })?;
    let broker_error = |e: lapin::Error| Error::Broker {
        service: "RabbitMQ",
        context: "deleting leftover queues and exchanges",
        message: e.to_string(),
    };
    let (mut deleted, mut first_error) = (0, None);
    for object in objects {
        // A failed delete closes its channel: one channel per object.
        let outcome = match conn.create_channel().await {
            Ok(ch) => {
                let done = match object.kind {
                    BrokerKind::Queue => ch
                        .queue_delete(object.name.as_str().into(), Default::default())
                        .await
                        .map(drop),
                    BrokerKind::Exchange => {
                        ch.exchange_delete(object.name.as_str().into(), Default::default())
                            .await
                    }
                };
                let _ = ch.close(200, "deleted".into()).await;
                done
            }
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => deleted += 1,
            Err(e) => {
                first_error.get_or_insert(broker_error(e));
            }
        }
    }
    let _ = conn.close(200, "leftovers deleted".into()).await;
    match first_error {
        Some(e) => Err(e),
        None => Ok(deleted),
    }
}

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
    Error::Unreachable {
        service: "Redis",
        url: redact::url(redis_url),
        reason,
        hint: crate::redis_cluster::START_HINT.into(),
    }
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

/// Deletes every queue and exchange of the run with resource prefix
/// `prefix` that the broker lists (see [`list_broker`]).
pub async fn delete_broker_prefix(amqp_url: &str, prefix: &str) -> Result<usize> {
    let (objects, _) = list_broker(amqp_url).await?;
    let start = broker_prefix(prefix);
    let mine: Vec<BrokerObject> = objects
        .into_iter()
        .filter(|o| o.name.starts_with(&start))
        .collect();
    delete_broker(amqp_url, &mine).await
}

async fn redis_connect(redis_url: &str) -> Result<redis::aio::MultiplexedConnection> {
    let unreachable = |reason: String| Error::Unreachable {
        service: "Redis",
        url: redact::url(redis_url),
        reason,
        hint: "start Redis: `docker compose up -d --wait redis`, or \
               `redis-server --daemonize yes --port 6379 --save \"\" --appendonly no`; \
               or pass --redis / DELAYBENCH_REDIS"
            .into(),
    };
    let client = redis::Client::open(redis_url).map_err(|e| unreachable(e.to_string()))?;
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

/// Runs the future `make` builds to completion on a fresh runtime in a
/// fresh thread, waiting at most `limit`: for cleanups started from `Drop`
/// (a panic, a cancelled future), where the caller's runtime may be gone,
/// shutting down or blocked on this very thread.
pub fn block_on_fresh_thread<F>(make: impl FnOnce() -> F + Send + 'static, limit: Duration)
where
    F: Future<Output = ()>,
{
    let (done, wait) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("delaybench-cleanup".into())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(make()),
                Err(e) => tracing::warn!(error = %e, "no runtime for the cleanup"),
            }
            let _ = done.send(());
        });
    match spawned {
        Ok(_) => {
            if wait.recv_timeout(limit).is_err() {
                tracing::warn!(?limit, "cleanup did not finish in time; left running");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot start the cleanup thread"),
    }
}

/// How long a cleanup from `Drop` may take before the caller goes on.
const DROP_CLEANUP_LIMIT: Duration = Duration::from_secs(60);

/// Builds a fresh instance of `strategy` on `location` and tears it down.
async fn teardown_fresh(
    strategy: &str,
    options: &StrategyOptions,
    location: &DbLocation,
) -> Result<()> {
    let store = OrderStore::connect(location, 1).await?;
    let instance = Deployment::new(Variant::parse(strategy)?, options).instance(store.clone())?;
    let result = instance.teardown().await;
    store.close().await;
    result
}

/// Runs `step` until it succeeds, at most [`CLEANUP_ATTEMPTS`] times,
/// [`CLEANUP_BACKOFF`] apart (a broker or Redis restarting under another
/// test or a fault); returns the last error.
async fn with_retries<T, F, Fut>(mut step: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut attempt = 1;
    loop {
        match step().await {
            Err(_) if attempt < CLEANUP_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(CLEANUP_BACKOFF).await;
            }
            done => return done,
        }
    }
}

const CLEANUP_ATTEMPTS: u32 = 5;
const CLEANUP_BACKOFF: Duration = Duration::from_secs(2);

/// Arms a strategy's [`Canceller::teardown`] for one run: call
/// [`TeardownGuard::finish`] on every normal path (it returns the teardown's
/// error, if any, for the caller to record beside its own outcome); if the
/// guard is dropped unfinished (a `?` that returned early, a panic, a
/// timeout that dropped the future), it tears down a fresh instance of the
/// strategy on a fresh runtime, logging any failure.
#[derive(Debug)]
pub struct TeardownGuard {
    armed: Option<(String, StrategyOptions, DbLocation)>,
}

impl TeardownGuard {
    /// Arms the teardown of `strategy` (a registry name) on `location`;
    /// arm it before `setup`, which may fail halfway.
    pub fn new(strategy: &str, options: &StrategyOptions, location: &DbLocation) -> TeardownGuard {
        TeardownGuard {
            armed: Some((strategy.to_string(), options.clone(), location.clone())),
        }
    }

    /// Tears down through `instance` (the one that ran `setup`, so a
    /// setting it changed is restored), or through a fresh one when `None`.
    /// The error is logged and returned, for the caller to record beside
    /// its own outcome, never instead of it.
    pub async fn finish(mut self, instance: Option<&dyn Canceller>) -> Result<()> {
        let Some((strategy, options, location)) = self.armed.take() else {
            return Ok(());
        };
        let result = match instance {
            Some(instance) => instance.teardown().await,
            None => teardown_fresh(&strategy, &options, &location).await,
        };
        if let Err(e) = &result {
            tracing::warn!(strategy, error = %e, "teardown failed");
        }
        result
    }
}

impl Drop for TeardownGuard {
    fn drop(&mut self) {
        let Some((strategy, options, location)) = self.armed.take() else {
            return;
        };
        tracing::warn!(
            strategy,
            "the run stopped before its teardown; tearing down now"
        );
        block_on_fresh_thread(
            move || async move {
                let teardown = with_retries(|| teardown_fresh(&strategy, &options, &location));
                if let Err(e) = teardown.await {
                    tracing::warn!(strategy, error = %e, "teardown after a failed run failed");
                }
            },
            DROP_CLEANUP_LIMIT,
        );
    }
}

/// Everything a test made in one namespace, removed when the test ends,
/// passed or failed: the strategy's queues, exchanges and Redis keys (by
/// the namespace's prefix), then the namespace itself (schema, database or
/// SQLite file). Call [`TestNamespace::clean`] at the end of a test; if it
/// is dropped instead (the test panicked), `Drop` does the same on a fresh
/// runtime, with the broker listed so queues made with other options go too.
#[derive(Debug)]
pub struct TestNamespace {
    armed: Option<Scope>,
}

#[derive(Debug, Clone)]
struct Scope {
    server: DbServer,
    location: DbLocation,
    strategy: String,
    options: StrategyOptions,
}

impl Scope {
    /// Tests have no log subscriber: what could not be removed is printed.
    async fn clean(self, thorough: bool) {
        let requires = Variant::parse(&self.strategy)
            .map(|v| v.info.requires.to_vec())
            .unwrap_or_default();
        let prefix = self.location.resource_prefix();
        let (strategy, options, location) = (&self.strategy, &self.options, &self.location);
        if requires.contains(&Service::RabbitMq) {
            if let Err(e) = with_retries(|| teardown_fresh(strategy, options, location)).await {
                eprintln!("test cleanup: teardown of {prefix} failed: {e}");
            }
            if thorough {
                let deleted =
                    with_retries(|| delete_broker_prefix(&options.rabbit.url, &prefix)).await;
                if let Err(e) = deleted {
                    eprintln!("test cleanup: broker objects of {prefix} left: {e}");
                }
            }
        }
        // Keys only: a server-wide setting is the strategy's teardown's to
        // restore (the keyspace-expiry variant's tests do).
        if requires.contains(&Service::Redis) {
            let deleted =
                with_retries(|| delete_redis_prefix(&options.redis_zset.url, &prefix)).await;
            if let Err(e) = deleted {
                eprintln!("test cleanup: Redis keys of {prefix} left: {e}");
            }
        }
        if let Err(e) = with_retries(|| self.server.drop_namespace(location)).await {
            eprintln!("test cleanup: namespace {prefix} left: {e}");
        }
    }
}

impl TestNamespace {
    /// Arms the cleanup of `location` (created on `server`) for a test of
    /// `strategy` with `options` (whose broker and Redis URLs are used).
    pub fn new(
        server: &DbServer,
        location: &DbLocation,
        strategy: &str,
        options: &StrategyOptions,
    ) -> TestNamespace {
        TestNamespace {
            armed: Some(Scope {
                server: server.clone(),
                location: location.clone(),
                strategy: strategy.to_string(),
                options: options.clone(),
            }),
        }
    }

    /// Removes everything now.
    pub async fn clean(mut self) {
        if let Some(scope) = self.armed.take() {
            scope.clean(false).await;
        }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if let Some(scope) = self.armed.take() {
            block_on_fresh_thread(move || scope.clean(true), DROP_CLEANUP_LIMIT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_scope_one_run() {
        assert_eq!(broker_prefix("t_1"), "dlb.t_1.");
        assert_eq!(redis_patterns("t_1"), ["dlb:{t_1:*", "dlb:{t_1}*"]);
    }

    #[test]
    fn base64_pads() {
        assert_eq!(base64("guest:guest"), "Z3Vlc3Q6Z3Vlc3Q=");
        assert_eq!(base64("a"), "YQ==");
        assert_eq!(base64("abc"), "YWJj");
    }
}
