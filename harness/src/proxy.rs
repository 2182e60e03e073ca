//! A TCP fault proxy on loopback, put between each canceller worker and one
//! backend (RabbitMQ, Redis or the database), so a scenario can cut or slow
//! that link mid-run the same way for every strategy — without root, without
//! `tc netem` or iptables, and without touching the backend, which other
//! workers and the harness's own checker keep using directly.
//!
//! Each accepted connection gets its own upstream connection, resolved per
//! connection so a backend restarted on a new address is found again. Bytes
//! are copied by our own read/write loops rather than `copy_bidirectional`,
//! because a chunk must be held back for the latency window, and because a
//! partition has to cut every open connection at once: every connection task
//! selects on the cancellation token of the "epoch" it was admitted in, and a
//! partition cancels that token and starts a new epoch.
//!
//! A cut closes both sockets with an RST (`SO_LINGER` 0), not a FIN: the
//! worker sees `connection reset` at its next read or write, and the backend
//! drops the session (rolling back an open transaction, releasing a
//! RabbitMQ channel's unacked messages) at once, as after a real broken link
//! that both ends have noticed. What a silent black hole would test (clients
//! hanging until their own timeouts) is what [`FaultProxy::add_latency`] with
//! a long delay approximates.

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore, SemaphorePermit};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use url::{Host, Url};

/// Bytes asked of the kernel per read: one forwarded chunk at most.
const CHUNK: usize = 16 * 1024;
/// Bytes read but not yet written, per direction of one connection. The only
/// throughput cap besides the added latency, there to keep TCP backpressure
/// when the receiving side stops reading; at 80 ms it still passes 200 MB/s,
/// far above any backend link here, and it is counted in bytes rather than
/// chunks so many small pipelined commands are not capped either.
const MAX_IN_FLIGHT: usize = 16 * 1024 * 1024;
/// An upstream that neither accepts nor refuses (a dropped SYN) would
/// otherwise hold the worker's connection for the OS's two minutes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Stands for "never ends" when `Instant + Duration` would overflow.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Which backend a proxy stands in front of: names the proxy in logs, stats
/// and the fault records, so a scenario can say which link to cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Rabbitmq,
    Redis,
    Database,
}

impl Target {
    /// The scenario's and the report's spelling, the same as serde's.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Rabbitmq => "rabbitmq",
            Target::Redis => "redis",
            Target::Database => "database",
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a proxy did, to put the faults' effect in the report beside the
/// strategy's anomalies (a partition that cut no connection proves nothing).
/// Counters only grow; take two snapshots for a delta.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyStats {
    /// Connections accepted and forwarded: their upstream connection was
    /// made outside any partition. Failed upstream connects are not counted.
    pub connections: u64,
    /// Open connections cut by partitions (counted when the partition starts).
    pub dropped: u64,
    /// Connections accepted during a partition and closed at once, including
    /// one whose upstream connect was still under way when a partition began.
    pub refused: u64,
    /// Bytes handed on from the workers to the backend (a chunk lost when its
    /// connection is cut mid-write still counts).
    pub bytes_up: u64,
    /// Bytes handed on from the backend to the workers.
    pub bytes_down: u64,
}

/// A running proxy: one listener on `127.0.0.1:<ephemeral>` forwarding to
/// one upstream `host:port`. Cheap to clone (an `Arc` inside); the listener
/// and every connection stop at [`FaultProxy::shutdown`] or when the last
/// clone is dropped, so a run that fails halfway leaves no proxy behind.
#[derive(Debug, Clone)]
pub struct FaultProxy {
    shared: Arc<Shared>,
    /// Cancels `shared.stop` when the last clone goes; the tasks hold only
    /// `shared`, so they never keep the proxy alive themselves.
    _stop_on_drop: Arc<DropGuard>,
}

#[derive(Debug)]
struct Shared {
    target: Target,
    upstream: String,
    local_addr: SocketAddr,
    /// Parent of every epoch token: cancelling it cuts everything at once.
    stop: CancellationToken,
    state: Mutex<State>,
    connections: AtomicU64,
    dropped: AtomicU64,
    refused: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

/// The fault windows and the current epoch, under one lock so admitting a
/// connection and starting a partition never interleave: a connection is
/// either counted in the epoch the partition cuts, or refused.
#[derive(Debug)]
struct State {
    /// Accepted connections are refused until then.
    partition_until: Option<Instant>,
    /// (added delay, window end): chunks read before the end are held.
    latency: Option<(Duration, Instant)>,
    /// Cancelled by the next partition; every admitted connection holds it.
    epoch: CancellationToken,
    epoch_id: u64,
    /// Connections of this epoch still open: what the next partition drops.
    epoch_open: u64,
}

/// Which way a chunk goes, to pick its byte counter.
#[derive(Debug, Clone, Copy)]
enum Direction {
    Up,
    Down,
}

impl FaultProxy {
    /// Listens on 127.0.0.1:0 and forwards every accepted connection to
    /// `upstream` (`host:port`, resolved per connection). Loopback only: the
    /// workers run on this machine and nothing else should reach a backend
    /// through an unauthenticated relay. Needs a tokio runtime (it spawns the
    /// accept loop).
    pub async fn start(target: Target, upstream: String) -> Result<FaultProxy> {
        // Catch a URL passed by mistake now rather than at every connection.
        match upstream.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
            _ => bail!("{target} proxy: upstream {upstream:?} is not host:port"),
        }
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .with_context(|| format!("{target} proxy: cannot listen on 127.0.0.1"))?;
        let local_addr = listener
            .local_addr()
            .with_context(|| format!("{target} proxy: no local address"))?;
        let stop = CancellationToken::new();
        let shared = Arc::new(Shared {
            target,
            upstream,
            local_addr,
            state: Mutex::new(State {
                partition_until: None,
                latency: None,
                epoch: stop.child_token(),
                epoch_id: 0,
                epoch_open: 0,
            }),
            stop: stop.clone(),
            connections: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
        });
        tracing::debug!(backend = target.as_str(), %local_addr, upstream = %shared.upstream, "fault proxy listening");
        tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(FaultProxy {
            shared,
            _stop_on_drop: Arc::new(stop.drop_guard()),
        })
    }

    /// Where workers must connect instead of the backend; see [`route_through`].
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// Drops every open connection now, both sides with an RST (`SO_LINGER`
    /// 0, so neither end waits on a FIN handshake or on data still queued),
    /// and refuses new ones — accepted and reset at once, so a worker sees a
    /// failed connection quickly rather than hanging — until `for` has
    /// passed. Returns when the partition starts, not when it ends: the
    /// connection tasks reset their sockets as soon as they next run.
    /// Overlapping calls extend the window to the latest end; each call cuts
    /// whatever was opened since the previous one (none, within a window).
    pub fn partition(&self, r#for: Duration) {
        let now = Instant::now();
        let end = deadline(now, r#for);
        let cut = {
            let mut state = self.shared.state();
            state.partition_until = Some(state.partition_until.map_or(end, |u| u.max(end)));
            let cut = std::mem::take(&mut state.epoch_open);
            self.shared.dropped.fetch_add(cut, Relaxed);
            state.epoch.cancel();
            state.epoch = self.shared.stop.child_token();
            state.epoch_id += 1;
            cut
        };
        tracing::info!(backend = self.shared.target.as_str(), cut, r#for = ?r#for, "fault proxy: partition");
    }

    /// Delays every chunk forwarded in either direction by `add`, each held
    /// `add` from when it was read, in order (a chunk never overtakes the one
    /// before it, so a chunk read after the window still waits behind held
    /// ones), throughput capped only by [`MAX_IN_FLIGHT`], until `for` has
    /// passed. Applies to open and new connections alike. A request/response
    /// round trip therefore takes at least `2 * add` more. A later call
    /// replaces the earlier window (delay and end), so `add_latency(ZERO,
    /// ZERO)` ends one early.
    pub fn add_latency(&self, add: Duration, r#for: Duration) {
        let now = Instant::now();
        self.shared.state().latency = Some((add, deadline(now, r#for)));
        tracing::info!(backend = self.shared.target.as_str(), add = ?add, r#for = ?r#for, "fault proxy: latency");
    }

    /// Stops listening and drops every connection (RST, as a partition), for
    /// the end of a run; stats stay readable. Dropping the last clone does
    /// the same.
    pub fn shutdown(&self) {
        self.shared.stop.cancel();
    }

    /// The counters so far.
    pub fn stats(&self) -> ProxyStats {
        let s = &self.shared;
        ProxyStats {
            connections: s.connections.load(Relaxed),
            dropped: s.dropped.load(Relaxed),
            refused: s.refused.load(Relaxed),
            bytes_up: s.bytes_up.load(Relaxed),
            bytes_down: s.bytes_down.load(Relaxed),
        }
    }
}

impl Shared {
    /// The state is only ever assigned field by field, so a panic while it
    /// was held cannot have left it half-changed: recover from poisoning
    /// rather than take the whole proxy down.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The epoch a connection accepted now belongs to, or `None` during a
    /// partition.
    fn admit(&self) -> Option<(CancellationToken, u64)> {
        let state = self.state();
        if state
            .partition_until
            .is_some_and(|end| Instant::now() < end)
        {
            return None;
        }
        Some((state.epoch.clone(), state.epoch_id))
    }

    /// Counts a connection whose upstream is now connected as open in its
    /// epoch; false when a partition began meanwhile (it must be refused).
    fn register(&self, epoch_id: u64) -> bool {
        let mut state = self.state();
        if state.epoch_id != epoch_id || self.stop.is_cancelled() {
            return false;
        }
        state.epoch_open += 1;
        self.connections.fetch_add(1, Relaxed);
        true
    }

    /// A connection ended; if a partition already cut (and counted) its
    /// epoch there is nothing left to take off.
    fn unregister(&self, epoch_id: u64) {
        let mut state = self.state();
        if state.epoch_id == epoch_id {
            state.epoch_open = state.epoch_open.saturating_sub(1);
        }
    }

    /// When a chunk read at `now` may be written: `None` outside a latency
    /// window.
    fn hold_until(&self, now: Instant) -> Option<Instant> {
        match self.state().latency {
            Some((add, end)) if now < end && !add.is_zero() => Some(deadline(now, add)),
            _ => None,
        }
    }

    fn bytes(&self, direction: Direction) -> &AtomicU64 {
        match direction {
            Direction::Up => &self.bytes_up,
            Direction::Down => &self.bytes_down,
        }
    }
}

/// `now + d`, saturating to a far future instead of panicking on overflow
/// (a scenario may well say "for ever" with a huge duration).
fn deadline(now: Instant, d: Duration) -> Instant {
    now.checked_add(d).unwrap_or_else(|| now + FAR_FUTURE)
}

/// Closes with an RST once dropped. If the option cannot be set the drop
/// still closes, with a FIN: the worker then sees end-of-stream instead of a
/// reset, which is a broken link all the same.
fn reset(stream: &TcpStream) {
    if let Err(e) = stream.set_zero_linger() {
        tracing::debug!(error = %e, "fault proxy: cannot set SO_LINGER 0; closing with FIN");
    }
}

/// The one accept loop: admits or refuses each connection under the state
/// lock, and spawns a task per admitted one so a slow upstream connect never
/// holds up the next worker.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let backend = shared.target.as_str();
    loop {
        let accepted = tokio::select! {
            biased;
            () = shared.stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (client, peer) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                // Out of file descriptors and the like: back off rather than
                // spin on a listener that fails at once every time.
                tracing::warn!(backend, error = %e, "fault proxy: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match shared.admit() {
            Some((epoch, epoch_id)) => {
                tokio::spawn(serve(Arc::clone(&shared), client, peer, epoch, epoch_id));
            }
            None => {
                shared.refused.fetch_add(1, Relaxed);
                tracing::debug!(backend, %peer, "fault proxy: refused during partition");
                reset(&client);
            }
        }
    }
    // Dropping the listener here is what stops listening.
    tracing::debug!(backend, "fault proxy stopped");
}

/// One connection: connect upstream, then pump both directions until both
/// ends have closed, either side fails, or the epoch is cut.
async fn serve(
    shared: Arc<Shared>,
    mut client: TcpStream,
    peer: SocketAddr,
    epoch: CancellationToken,
    epoch_id: u64,
) {
    let backend = shared.target.as_str();
    let connect = tokio::time::timeout(
        CONNECT_TIMEOUT,
        TcpStream::connect(shared.upstream.as_str()),
    );
    let mut upstream = tokio::select! {
        biased;
        () = epoch.cancelled() => {
            // A partition began while connecting: the worker must see the
            // same refusal as if it had connected a moment later.
            if !shared.stop.is_cancelled() {
                shared.refused.fetch_add(1, Relaxed);
            }
            reset(&client);
            return;
        }
        connected = connect => match connected {
            Ok(Ok(upstream)) => upstream,
            Ok(Err(e)) => {
                tracing::debug!(backend, %peer, upstream = %shared.upstream, error = %e, "fault proxy: upstream connect failed; closing the client");
                return;
            }
            Err(_) => {
                tracing::debug!(backend, %peer, upstream = %shared.upstream, "fault proxy: upstream connect timed out; closing the client");
                return;
            }
        },
    };
    if !shared.register(epoch_id) {
        if !shared.stop.is_cancelled() {
            shared.refused.fetch_add(1, Relaxed);
        }
        reset(&client);
        reset(&upstream);
        return;
    }
    // Backend protocols are request/response with small writes: Nagle on
    // the relay would add its own delay on top of the one under test.
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let cut = {
        let (client_read, client_write) = client.split();
        let (upstream_read, upstream_write) = upstream.split();
        let both = async {
            tokio::try_join!(
                pump(&shared, client_read, upstream_write, Direction::Up),
                pump(&shared, upstream_read, client_write, Direction::Down),
            )
        };
        tokio::select! {
            biased;
            () = epoch.cancelled() => true,
            done = both => {
                if let Err(e) = done {
                    tracing::debug!(backend, %peer, error = %e, "fault proxy: connection ended with an error");
                }
                false
            }
        }
    };
    if cut {
        reset(&client);
        reset(&upstream);
    }
    shared.unregister(epoch_id);
}

/// One direction of one connection: a reader that timestamps each chunk and
/// a writer that writes it no earlier than its hold time, joined by a queue,
/// so reading goes on while earlier chunks are held (latency without a
/// throughput cap) and order is kept. End-of-stream is passed on as a
/// half-close once everything before it is written.
async fn pump<R, W>(shared: &Shared, mut from: R, mut to: W, direction: Direction) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let budget = Semaphore::new(MAX_IN_FLIGHT);
    let budget = &budget;
    // Unbounded in chunks, bounded in bytes by `budget`: the permit travels
    // with its chunk and is released once the chunk is written.
    let (tx, mut rx) = mpsc::unbounded_channel::<(Option<Instant>, Vec<u8>, SemaphorePermit<'_>)>();
    let read = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                return Ok::<(), io::Error>(()); // dropping `tx` tells the writer
            }
            let hold = shared.hold_until(Instant::now());
            // CHUNK <= MAX_IN_FLIGHT, so this always fits; the semaphore is
            // never closed, so it cannot fail either.
            let permit = budget
                .acquire_many(n as u32)
                .await
                .map_err(io::Error::other)?;
            if tx.send((hold, buf[..n].to_vec(), permit)).is_err() {
                // The writer failed; try_join reports its error.
                return Ok(());
            }
        }
    };
    let write = async move {
        while let Some((hold, chunk, permit)) = rx.recv().await {
            if let Some(at) = hold {
                tokio::time::sleep_until(at).await;
            }
            shared
                .bytes(direction)
                .fetch_add(chunk.len() as u64, Relaxed);
            to.write_all(&chunk).await?;
            drop(permit);
        }
        // A failed half-close means the peer is gone; the other direction
        // will find out by itself, and may still have data to deliver.
        if let Err(e) = to.shutdown().await {
            tracing::debug!(error = %e, "fault proxy: half-close failed");
        }
        Ok::<(), io::Error>(())
    };
    tokio::try_join!(read, write).map(|_| ())
}

/// Default port of each scheme the proxy can stand in front of; `None` for
/// the rest (sqlite has no link to cut).
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "postgres" | "postgresql" => Some(5432),
        "mysql" | "mariadb" => Some(3306),
        "redis" | "rediss" => Some(6379),
        "amqp" => Some(5672),
        "amqps" => Some(5671),
        _ => None,
    }
}

/// Query parameters by which a driver would connect somewhere other than
/// the URL's host and port (libpq's and sqlx's `host`/`hostaddr`/`port`,
/// MySQL's `socket`), silently bypassing the proxy.
const BYPASS_PARAMS: [&str; 4] = ["host", "hostaddr", "port", "socket"];

/// The parsed URL and its upstream `host:port`, or an error naming the URL
/// (password hidden) and what is wrong with it.
fn parse_backend_url(url: &str) -> Result<(Url, String)> {
    let shown = strategies::redact::url(url);
    let parsed = Url::parse(url).map_err(|e| anyhow!("{shown} is not a valid URL: {e}"))?;
    let Some(port) = default_port(parsed.scheme()) else {
        bail!(
            "{shown}: scheme {:?} cannot go through the fault proxy \
             (postgres, postgresql, mysql, mariadb, redis, rediss, amqp, amqps can)",
            parsed.scheme()
        );
    };
    if let Some((key, _)) = parsed
        .query_pairs()
        .find(|(k, _)| BYPASS_PARAMS.contains(&k.as_ref()))
    {
        bail!("{shown}: its query parameter {key:?} would make the driver bypass the fault proxy");
    }
    let host = match parsed.host() {
        Some(Host::Domain(d)) if !d.is_empty() => d.to_string(),
        Some(Host::Ipv4(ip)) => ip.to_string(),
        Some(Host::Ipv6(ip)) => format!("[{ip}]"),
        _ => bail!("{shown} has no host for the fault proxy to forward to (a Unix socket cannot be proxied)"),
    };
    let port = parsed.port().unwrap_or(port);
    Ok((parsed, format!("{host}:{port}")))
}

/// The same URL with its host and port replaced by the proxy's
/// (`127.0.0.1:port`); user, password, path and query kept, so the worker
/// connects exactly as before, only through the proxy. For postgres(ql),
/// mysql, mariadb, redis(s) and amqp(s). With `rediss`/`amqps` the TLS
/// handshake passes through untouched but the client then checks the
/// certificate against 127.0.0.1, so those work only with verification off
/// or a certificate for 127.0.0.1. Errors name the URL, password hidden.
pub fn route_through(url: &str, proxy: SocketAddr) -> Result<String> {
    let (mut parsed, _) = parse_backend_url(url)?;
    let host = match proxy.ip() {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    };
    parsed.set_host(Some(&host)).map_err(|e| {
        anyhow!(
            "{}: cannot set its host to {host}: {e}",
            strategies::redact::url(url)
        )
    })?;
    parsed.set_port(Some(proxy.port())).map_err(|()| {
        anyhow!(
            "{}: cannot set its port to {}",
            strategies::redact::url(url),
            proxy.port()
        )
    })?;
    Ok(parsed.into())
}

/// The `host:port` a proxy for this URL must forward to, the scheme's
/// default port filled in (postgres 5432, mysql/mariadb 3306, redis 6379,
/// amqp 5672, amqps 5671): what [`FaultProxy::start`] takes. Errors name
/// the URL, password hidden.
pub fn upstream_of(url: &str) -> Result<String> {
    parse_backend_url(url).map(|(_, upstream)| upstream)
}

#[cfg(test)]
mod tests {
    //! Against the real services on 127.0.0.1 (`scripts/services.sh` starts
    //! them): a proxy is only worth what real clients make of its faults.

    use super::*;
    use sqlx::Connection;

    const REDIS: &str = "redis://127.0.0.1:6379/";
    const POSTGRES: &str = "postgres://root@127.0.0.1:5432/test";
    const RABBITMQ: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

    /// Fails with how to start the service rather than with a bare
    /// "connection refused" deep inside a client.
    async fn require(service: &str, url: &str) {
        let addr = upstream_of(url).expect("test URL");
        if let Err(e) = TcpStream::connect(&addr).await {
            panic!(
                "{service} is not reachable on {addr} ({e}): start it with \
                 `bash scripts/services.sh {service}` (or `docker compose up -d --wait {service}`)"
            );
        }
    }

    async fn redis_proxy() -> Result<(FaultProxy, redis::Client)> {
        require("redis", REDIS).await;
        let proxy = FaultProxy::start(Target::Redis, upstream_of(REDIS)?).await?;
        let client = redis::Client::open(route_through(REDIS, proxy.local_addr())?)?;
        Ok((proxy, client))
    }

    async fn ping(con: &mut redis::aio::MultiplexedConnection) -> Result<String> {
        Ok(redis::cmd("PING").query_async(con).await?)
    }

    /// Connect and PING on a fresh connection, as a worker starting up would.
    async fn fresh_ping(client: &redis::Client) -> Result<String> {
        let mut con = client.get_multiplexed_async_connection().await?;
        ping(&mut con).await
    }

    #[tokio::test]
    async fn redis_ping_through_proxy() -> Result<()> {
        let (proxy, client) = redis_proxy().await?;
        assert_eq!(fresh_ping(&client).await?, "PONG");
        let stats = proxy.stats();
        assert_eq!(stats.connections, 1, "{stats:?}");
        assert_eq!((stats.dropped, stats.refused), (0, 0), "{stats:?}");
        // "*1\r\n$4\r\nPING\r\n" up, "+PONG\r\n" down, plus whatever the
        // client sends while connecting.
        assert!(stats.bytes_up >= 14, "{stats:?}");
        assert!(stats.bytes_down >= 7, "{stats:?}");
        proxy.shutdown();
        Ok(())
    }

    #[tokio::test]
    async fn partition_cuts_open_and_refuses_new_connections() -> Result<()> {
        let (proxy, client) = redis_proxy().await?;
        let mut open = client.get_multiplexed_async_connection().await?;
        assert_eq!(ping(&mut open).await?, "PONG");

        let window = Duration::from_millis(1500);
        proxy.partition(window);
        // Taken after the partition started, so `cut_at + window` is past its end.
        let cut_at = Instant::now();
        assert!(
            ping(&mut open).await.is_err(),
            "an open connection survived the partition"
        );
        assert!(
            fresh_ping(&client).await.is_err(),
            "a new connection worked during the partition"
        );
        let stats = proxy.stats();
        assert_eq!(stats.dropped, 1, "{stats:?}");
        assert!(stats.refused >= 1, "{stats:?}");

        tokio::time::sleep_until(cut_at + window).await;
        assert_eq!(fresh_ping(&client).await?, "PONG");
        assert_eq!(proxy.stats().connections, 2, "{:?}", proxy.stats());
        proxy.shutdown();
        Ok(())
    }

    /// What the module promises on the wire: a reset, not a clean close,
    /// both for the open connection and for one accepted during the window.
    #[tokio::test]
    async fn partition_resets_on_the_wire() -> Result<()> {
        let (proxy, _) = redis_proxy().await?;
        let mut open = TcpStream::connect(proxy.local_addr()).await?;
        open.write_all(b"PING\r\n").await?;
        let mut reply = [0u8; 7];
        open.read_exact(&mut reply).await?;
        assert_eq!(&reply, b"+PONG\r\n");

        proxy.partition(Duration::from_secs(1));
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), open.read(&mut buf)).await?;
        assert_eq!(
            read.map_err(|e| e.kind()),
            Err(io::ErrorKind::ConnectionReset)
        );
        let mut refused = TcpStream::connect(proxy.local_addr()).await?;
        let read = tokio::time::timeout(Duration::from_secs(5), refused.read(&mut buf)).await?;
        assert_eq!(
            read.map_err(|e| e.kind()),
            Err(io::ErrorKind::ConnectionReset)
        );
        let stats = proxy.stats();
        assert_eq!((stats.dropped, stats.refused), (1, 1), "{stats:?}");
        proxy.shutdown();
        Ok(())
    }

    #[tokio::test]
    async fn overlapping_partitions_extend_to_the_latest_end() -> Result<()> {
        let (proxy, client) = redis_proxy().await?;
        proxy.partition(Duration::from_millis(1200));
        // A shorter one later must not end the first early.
        proxy.partition(Duration::from_millis(10));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            fresh_ping(&client).await.is_err(),
            "the shorter partition ended the longer one"
        );
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(fresh_ping(&client).await?, "PONG");
        proxy.shutdown();
        Ok(())
    }

    #[tokio::test]
    async fn latency_delays_each_direction() -> Result<()> {
        let (proxy, client) = redis_proxy().await?;
        // Opened before the window: latency applies to open connections too.
        let mut open = client.get_multiplexed_async_connection().await?;
        assert_eq!(ping(&mut open).await?, "PONG");

        let add = Duration::from_millis(80);
        proxy.add_latency(add, Duration::from_secs(1));
        // The request and the reply are each held `add`: lower bounds only,
        // the wall clock may always take longer.
        let t = Instant::now();
        assert_eq!(ping(&mut open).await?, "PONG");
        let took = t.elapsed();
        assert!(took >= 2 * add, "PING took {took:?} under {add:?} each way");

        let t = Instant::now();
        assert_eq!(fresh_ping(&client).await?, "PONG");
        let took = t.elapsed();
        assert!(
            took >= 2 * add,
            "a new connection's PING took {took:?} under {add:?} each way"
        );

        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            ping(&mut open).await?,
            "PONG",
            "the link must work after the window"
        );
        proxy.shutdown();
        Ok(())
    }

    #[tokio::test]
    async fn shutdown_stops_listening_and_drops_connections() -> Result<()> {
        let (proxy, client) = redis_proxy().await?;
        let mut open = client.get_multiplexed_async_connection().await?;
        assert_eq!(ping(&mut open).await?, "PONG");
        proxy.shutdown();
        assert!(
            ping(&mut open).await.is_err(),
            "a connection survived shutdown"
        );
        // Give the accept loop a moment to drop its listener.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            TcpStream::connect(proxy.local_addr()).await.is_err(),
            "still listening"
        );
        Ok(())
    }

    #[tokio::test]
    async fn upstream_down_closes_the_client() -> Result<()> {
        // A port that was just free: nothing listens there.
        let port = TcpListener::bind("127.0.0.1:0").await?.local_addr()?.port();
        let proxy = FaultProxy::start(Target::Redis, format!("127.0.0.1:{port}")).await?;
        let mut s = TcpStream::connect(proxy.local_addr()).await?;
        let mut buf = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await?;
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert_eq!(proxy.stats().connections, 0);
        Ok(())
    }

    #[tokio::test]
    async fn postgres_select_through_proxy_and_cut() -> Result<()> {
        require("postgres", POSTGRES).await;
        let proxy = FaultProxy::start(Target::Database, upstream_of(POSTGRES)?).await?;
        let mut conn =
            sqlx::PgConnection::connect(&route_through(POSTGRES, proxy.local_addr())?).await?;
        let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(&mut conn).await?;
        assert_eq!(one, 1);
        assert_eq!(proxy.stats().connections, 1);

        proxy.partition(Duration::from_millis(500));
        let after: Result<i32, _> = sqlx::query_scalar("SELECT 1").fetch_one(&mut conn).await;
        assert!(
            after.is_err(),
            "the database connection survived the partition"
        );
        assert_eq!(proxy.stats().dropped, 1);
        proxy.shutdown();
        Ok(())
    }

    #[tokio::test]
    async fn amqp_header_exchange_through_proxy() -> Result<()> {
        require("rabbitmq", RABBITMQ).await;
        let proxy = FaultProxy::start(Target::Rabbitmq, upstream_of(RABBITMQ)?).await?;
        let mut s = TcpStream::connect(proxy.local_addr()).await?;
        s.write_all(b"AMQP\x00\x00\x09\x01").await?;
        let mut frame_type = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut frame_type)).await??;
        assert_eq!(
            frame_type[0], 1,
            "expected a method frame (Connection.Start)"
        );
        let stats = proxy.stats();
        assert_eq!((stats.connections, stats.bytes_up), (1, 8), "{stats:?}");
        assert!(stats.bytes_down >= 1, "{stats:?}");
        proxy.shutdown();
        Ok(())
    }

    #[test]
    fn route_through_and_upstream_of_each_scheme() -> Result<()> {
        let proxy: SocketAddr = "127.0.0.1:40001".parse()?;
        let cases = [
            (
                "postgres://root@127.0.0.1:5432/test",
                "127.0.0.1:5432",
                "postgres://root@127.0.0.1:40001/test",
            ),
            (
                "postgresql://app:s3cret@db.internal/orders?sslmode=disable",
                "db.internal:5432",
                "postgresql://app:s3cret@127.0.0.1:40001/orders?sslmode=disable",
            ),
            (
                "mysql://root:pw@localhost/test",
                "localhost:3306",
                "mysql://root:pw@127.0.0.1:40001/test",
            ),
            (
                "mariadb://root@db:3307/test",
                "db:3307",
                "mariadb://root@127.0.0.1:40001/test",
            ),
            (
                "redis://:s3cret@cache/0",
                "cache:6379",
                "redis://:s3cret@127.0.0.1:40001/0",
            ),
            (
                "redis://127.0.0.1:6380",
                "127.0.0.1:6380",
                "redis://127.0.0.1:40001",
            ),
            (
                "rediss://user:pw@cache:6390/1",
                "cache:6390",
                "rediss://user:pw@127.0.0.1:40001/1",
            ),
            (
                "amqp://guest:guest@127.0.0.1:5672/%2f",
                "127.0.0.1:5672",
                "amqp://guest:guest@127.0.0.1:40001/%2f",
            ),
            (
                "amqp://guest:guest@mq",
                "mq:5672",
                "amqp://guest:guest@127.0.0.1:40001",
            ),
            (
                "amqps://guest:guest@mq/vhost?heartbeat=5",
                "mq:5671",
                "amqps://guest:guest@127.0.0.1:40001/vhost?heartbeat=5",
            ),
            ("amqp://[::1]/", "[::1]:5672", "amqp://127.0.0.1:40001/"),
        ];
        for (url, upstream, routed) in cases {
            assert_eq!(upstream_of(url)?, upstream, "{url}");
            assert_eq!(route_through(url, proxy)?, routed, "{url}");
        }
        let v6: SocketAddr = "[::1]:40002".parse()?;
        assert_eq!(route_through("redis://h:1/", v6)?, "redis://[::1]:40002/");
        Ok(())
    }

    #[test]
    fn errors_name_the_url_with_its_password_hidden() {
        let proxy: SocketAddr = "127.0.0.1:40001".parse().expect("addr");
        let cases = [
            ("sqlite://u:hunter2@x/db", "sqlite://u:***@x/db", "scheme"),
            (
                "postgres://root:hunter2@db/x?host=/run/postgresql",
                "postgres://root:***@db/x?host=/run/postgresql",
                "bypass",
            ),
            (
                "mysql://root:hunter2@db:99999/x",
                "mysql://root:***@db:99999/x",
                "not a valid URL",
            ),
            ("postgres:///test", "postgres:///test", "no host"),
            ("not a url", "not a url", "not a valid URL"),
        ];
        for (url, shown, why) in cases {
            for e in [upstream_of(url).err(), route_through(url, proxy).err()] {
                let message = format!("{:#}", e.unwrap_or_else(|| panic!("{url} was accepted")));
                assert!(
                    message.contains(shown),
                    "{message:?} does not name {shown:?}"
                );
                assert!(message.contains(why), "{message:?} does not say {why:?}");
                assert!(
                    !message.contains("hunter2"),
                    "{message:?} shows the password"
                );
            }
        }
    }

    #[test]
    fn target_names() -> Result<()> {
        for (target, name) in [
            (Target::Rabbitmq, "rabbitmq"),
            (Target::Redis, "redis"),
            (Target::Database, "database"),
        ] {
            assert_eq!(target.as_str(), name);
            assert_eq!(serde_json::to_string(&target)?, format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<Target>(&format!("\"{name}\""))?,
                target
            );
        }
        Ok(())
    }
}
