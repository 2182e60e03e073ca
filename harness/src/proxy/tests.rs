//! Against the real services on 127.0.0.1 (`scripts/services.sh` starts
//! them): a proxy is only worth what real clients make of its faults.

use super::{route_through, upstream_of, FaultProxy, Link};
use crate::faults::Target;
use anyhow::Result;
use sqlx::Connection;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

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
    let proxy = FaultProxy::start(Target::Redis, upstream_of(REDIS)?, Link::LOOPBACK).await?;
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

/// A steady link holds every round trip at least its `rtt` for as long as
/// the proxy runs, on open and new connections, and records each held
/// chunk. Lower bounds only: the wall clock may always take longer, and how
/// much longer is what the hold statistics report.
#[tokio::test]
async fn steady_link_holds_every_round_trip() -> Result<()> {
    require("redis", REDIS).await;
    let link = Link {
        rtt: Duration::from_millis(3),
        jitter: Duration::from_millis(1),
        bandwidth_bps: None,
    };
    let proxy = FaultProxy::start(Target::Redis, upstream_of(REDIS)?, link).await?;
    let client = redis::Client::open(route_through(REDIS, proxy.local_addr())?)?;
    let mut open = client.get_multiplexed_async_connection().await?;
    let floor = link.rtt - link.jitter;
    for _ in 0..20 {
        let t = Instant::now();
        assert_eq!(ping(&mut open).await?, "PONG");
        assert!(
            t.elapsed() >= floor,
            "PING took {:?} on {}",
            t.elapsed(),
            link.label()
        );
    }
    let held = proxy.hold_stats();
    assert!(held.chunks >= 40, "20 PINGs, each held both ways: {held:?}");
    assert!(held.late_p50_us <= held.late_p99_us && held.late_p99_us <= held.late_max_us);
    // A latency fault adds to the steady link rather than replacing it.
    let add = Duration::from_millis(20);
    proxy.add_latency(add, Duration::from_secs(5));
    let t = Instant::now();
    assert_eq!(ping(&mut open).await?, "PONG");
    assert!(t.elapsed() >= 2 * add + floor, "{:?}", t.elapsed());
    proxy.shutdown();
    Ok(())
}

/// A bandwidth makes a payload wait its size over the rate: a 200 kB value
/// at 8 Mbit/s is 200 ms on the wire each way (SET up, GET down).
#[tokio::test]
async fn bandwidth_paces_bytes() -> Result<()> {
    require("redis", REDIS).await;
    let link = Link {
        bandwidth_bps: Some(8_000_000),
        ..Link::LOOPBACK
    };
    let proxy = FaultProxy::start(Target::Redis, upstream_of(REDIS)?, link).await?;
    let client = redis::Client::open(route_through(REDIS, proxy.local_addr())?)?;
    let mut con = client.get_multiplexed_async_connection().await?;
    let value = vec![b'x'; 200_000];
    let key = format!("delaybench:proxy-test:{}", proxy.local_addr().port());
    let t = Instant::now();
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(&value)
        .query_async(&mut con)
        .await?;
    let up = t.elapsed();
    let t = Instant::now();
    let back: Vec<u8> = redis::cmd("GET").arg(&key).query_async(&mut con).await?;
    let down = t.elapsed();
    let () = redis::cmd("DEL").arg(&key).query_async(&mut con).await?;
    assert_eq!(back.len(), value.len());
    let wire = link.wire_time(value.len());
    assert!(
        up >= wire && down >= wire,
        "SET {up:?}, GET {down:?}, wire {wire:?}"
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
    let proxy =
        FaultProxy::start(Target::Redis, format!("127.0.0.1:{port}"), Link::LOOPBACK).await?;
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
    let proxy = FaultProxy::start(Target::Database, upstream_of(POSTGRES)?, Link::LOOPBACK).await?;
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
    let proxy = FaultProxy::start(Target::Rabbitmq, upstream_of(RABBITMQ)?, Link::LOOPBACK).await?;
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
