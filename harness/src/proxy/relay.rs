//! The proxy itself: one listener, an accept loop that admits or refuses
//! each connection, and per connection an upstream connection and two
//! pumps that hold chunks for the latency window and stop when a
//! partition cuts their epoch.

use super::clock::HoldClock;
use super::link::Link;
use super::state::{deadline, Direction, HoldStats, ProxyStats, Shared, State};
use crate::faults::Target;
use anyhow::{bail, Context, Result};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore, SemaphorePermit};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

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

impl FaultProxy {
    /// Listens on 127.0.0.1:0 and forwards every accepted connection to
    /// `upstream` (`host:port`, resolved per connection). Loopback only: the
    /// workers run on this machine and nothing else should reach a backend
    /// through an unauthenticated relay. Needs a tokio runtime (it spawns the
    /// accept loop). Holds `link` for as long as it runs: every chunk in
    /// either direction waits its one-way share of the round trip (and its
    /// turn on the wire, under a bandwidth); a latency fault adds on top.
    /// [`Link::LOOPBACK`] adds nothing until a fault asks.
    pub async fn start(target: Target, upstream: String, link: Link) -> Result<FaultProxy> {
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
            link,
            draws: AtomicU64::new(u64::from(local_addr.port())),
            wire_free: Mutex::new([None, None]),
            late: Mutex::new(hdrhistogram::Histogram::new(3).context("a histogram of 3 digits")?),
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

    /// The backend it stands in front of.
    pub fn target(&self) -> Target {
        self.shared.target
    }

    /// The steady link it holds.
    pub fn link(&self) -> Link {
        self.shared.link
    }

    /// How late its held chunks were written, so far.
    pub fn hold_stats(&self) -> HoldStats {
        self.shared.hold_stats()
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
        let mut clock = None;
        while let Some((hold, chunk, permit)) = rx.recv().await {
            if let Some(ready) = hold {
                // Behind the chunks ahead of it on the wire, then on time;
                // what the relay adds past that is recorded.
                let at = shared.wire(direction, ready, chunk.len());
                clock
                    .get_or_insert_with(HoldClock::new)
                    .sleep_until(at)
                    .await;
                shared.held(Instant::now().saturating_duration_since(at));
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
