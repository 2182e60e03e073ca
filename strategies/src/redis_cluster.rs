//! Redis Cluster addressing, shared by `redis-zset`, the leftovers cleanup
//! and the harness's Redis readers.
//!
//! A cluster is selected by its URL: `redis+cluster://[[user]:password@]host:port`
//! names one seed node (any node of the cluster); the client learns the
//! others from it. A plain `redis://` URL is one standalone server, as before.
//!
//! What is per server on a standalone Redis (SCAN, INFO, CONFIG) is per
//! node on a cluster: [`masters`] lists every master that serves slots, and
//! fails naming the node when one of them is down, so a caller never sums
//! or scans a part of the cluster and calls it the whole.

use crate::error::{Error, Result};
use crate::redact;
use redis::cluster::ClusterClient;
use std::time::Duration;

/// The URL scheme that selects Redis Cluster.
pub const SCHEME: &str = "redis+cluster://";

/// Redis Cluster's hash slots.
pub const SLOTS: u16 = 16384;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How to get the local cluster running, for errors.
pub const START_HINT: &str = "start the local cluster: `scripts/services.sh redis-cluster` \
     (3 masters on 127.0.0.1:7000-7002), or `docker compose --profile cluster up -d --wait`";

/// Whether `url` selects Redis Cluster.
pub fn is_cluster(url: &str) -> bool {
    url.starts_with(SCHEME)
}

/// The seed node of a `redis+cluster://` URL as a plain `redis://` URL
/// (credentials kept). Refuses a database number: a cluster has only 0.
pub fn seed_url(url: &str) -> Result<String> {
    let rest = url.strip_prefix(SCHEME).ok_or_else(|| {
        Error::Config(format!(
            "Redis URL `{}` is not a cluster URL; expected {SCHEME}host:port",
            redact::url(url)
        ))
    })?;
    let plain = format!("redis://{rest}");
    let parsed = url::Url::parse(&plain).map_err(|e| {
        Error::Config(format!(
            "Redis Cluster URL `{}` is invalid: {e}; expected {SCHEME}[[user]:password@]host:port",
            redact::url(url)
        ))
    })?;
    if !matches!(parsed.path(), "" | "/" | "/0") {
        return Err(Error::Config(format!(
            "Redis Cluster URL `{}` names a database; a cluster has only database 0, \
             so drop the `{}`",
            redact::url(url),
            parsed.path()
        )));
    }
    if parsed.host_str().is_none() {
        return Err(Error::Config(format!(
            "Redis Cluster URL `{}` has no seed host; expected {SCHEME}host:port",
            redact::url(url)
        )));
    }
    Ok(plain)
}

/// A cluster client for `url` (`redis+cluster://`), with the same
/// timeouts as the standalone connection. Connects on first use.
pub fn client(url: &str) -> Result<ClusterClient> {
    let seed = seed_url(url)?;
    ClusterClient::builder(vec![seed])
        .connection_timeout(CONNECT_TIMEOUT)
        .response_timeout(Duration::from_secs(5))
        // Few, short retries: a pass claims its shards one after another,
        // so a call to a dead master holds up the shards of the live ones.
        .retries(2)
        .max_retry_wait(200)
        .build()
        .map_err(|e| {
            Error::Config(format!(
                "Redis Cluster URL `{}` is invalid: {e}",
                redact::url(url)
            ))
        })
}

/// One master of the cluster, as `CLUSTER NODES` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Master {
    pub id: String,
    /// `host:port` (the client port).
    pub addr: String,
    /// `redis://[credentials@]host:port`, with the seed's credentials.
    pub url: String,
    /// Slot ranges served, as listed (`0-5460`).
    pub slots: Vec<(u16, u16)>,
}

impl Master {
    /// Whether this master serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(lo, hi)| (lo..=hi).contains(&slot))
    }
}

/// Every master serving slots, from `CLUSTER NODES` on the seed. Fails
/// naming the node if a master serving slots is flagged failing or
/// disconnected: whatever the caller reads per node would miss its part.
pub async fn masters(url: &str) -> Result<Vec<Master>> {
    let seed = seed_url(url)?;
    let mut conn = connect_node(&seed, url).await?;
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await
        .map_err(|e| Error::Broker {
            service: "Redis",
            context: "listing the cluster's nodes (CLUSTER NODES)",
            message: e.to_string(),
        })?;
    let masters = parse_nodes(&text, &seed)?;
    if masters.is_empty() {
        return Err(Error::unreachable(
            "Redis",
            redact::url(url),
            "the cluster has no master serving slots (not created yet?)".into(),
            START_HINT.into(),
        ));
    }
    Ok(masters)
}

/// Parses `CLUSTER NODES`: the masters that serve slots. `seed` gives the
/// scheme and credentials of each master's URL.
pub fn parse_nodes(text: &str, seed: &str) -> Result<Vec<Master>> {
    let mut masters = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            continue;
        }
        let flags: Vec<&str> = fields[2].split(',').collect();
        if !flags.contains(&"master") {
            continue;
        }
        let slots: Vec<(u16, u16)> = fields[8..]
            .iter()
            .filter(|s| !s.starts_with('[')) // slots being migrated
            .filter_map(|s| match s.split_once('-') {
                Some((lo, hi)) => Some((lo.parse().ok()?, hi.parse().ok()?)),
                None => s.parse().ok().map(|n| (n, n)),
            })
            .collect();
        if slots.is_empty() {
            continue;
        }
        // `ip:port@cport[,hostname]`
        let addr = fields[1]
            .split(['@', ','])
            .next()
            .unwrap_or(fields[1])
            .to_string();
        if flags.iter().any(|f| *f == "fail" || *f == "fail?") || fields[7] == "disconnected" {
            return Err(Error::Broker {
                service: "Redis",
                context: "listing the cluster's masters",
                message: format!(
                    "master {addr} (serving slots {}) is down (flags {}, link {}); what is \
                     read per node would miss its part, so nothing is read",
                    fields[8..].join(" "),
                    fields[2],
                    fields[7]
                ),
            });
        }
        let mut url = url::Url::parse(seed).map_err(|e| Error::Config(e.to_string()))?;
        let (host, port) = addr.rsplit_once(':').unwrap_or((&addr, "6379"));
        let _ = url.set_host(Some(host));
        let _ = url.set_port(port.parse().ok());
        masters.push(Master {
            id: fields[0].to_string(),
            addr: addr.clone(),
            url: url.to_string(),
            slots,
        });
    }
    masters.sort_by(|a, b| a.addr.cmp(&b.addr));
    Ok(masters)
}

/// A direct connection to one node (`redis://` URL); errors name `shown`.
pub async fn connect_node(
    node_url: &str,
    shown: &str,
) -> Result<redis::aio::MultiplexedConnection> {
    let unreachable =
        |reason: String| Error::unreachable("Redis", redact::url(shown), reason, START_HINT.into());
    let client = crate::tls::redis_client(node_url).map_err(unreachable)?;
    tokio::time::timeout(
        CONNECT_TIMEOUT * 3,
        client.get_multiplexed_async_connection(),
    )
    .await
    .map_err(|_| {
        unreachable(format!(
            "no connection to {} within 6s",
            redact::url(node_url)
        ))
    })?
    .map_err(|e| unreachable(format!("{}: {e}", redact::url(node_url))))
}

/// The hash slot of `key` (CRC16/XMODEM of its hash tag, or of the whole
/// key without one), as Redis Cluster computes it.
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match bytes.iter().position(|&b| b == b'{') {
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    crc16_xmodem(hashed) % SLOTS
}

fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash tag of shard `k` of `shards` on a cluster: `<prefix>:<k>` if
/// its slot already lies near the middle of the `k`-th of `shards` equal
/// slices of the slot space, else the first `<prefix>:<k>.<salt>` whose
/// slot does. `redis-cli --cluster create` gives each of N masters one
/// contiguous, equal slice, so with at least as many shards as masters the
/// shards land on every master; a hash of the bare tags would leave a
/// master without a shard more often than not (4 shards on 3 masters: in
/// 5 runs of 9). The tag depends only on the prefix, `k` and `shards`, so
/// every process computes the same.
pub fn spread_tag(prefix: &str, k: u32, shards: u32) -> String {
    let shards = shards.max(1);
    let slice = u32::from(SLOTS) / shards;
    let middle = k * u32::from(SLOTS) / shards + slice / 2;
    // Within 1/8 of a slice of the middle: far from a master's boundary.
    let reach = (slice / 8).max(1);
    let near = |tag: &str| u32::from(key_slot(&format!("{{{tag}}}"))).abs_diff(middle) <= reach;
    let plain = format!("{prefix}:{k}");
    if near(&plain) {
        return plain;
    }
    (0u32..)
        .map(|salt| format!("{prefix}:{k}.{salt}"))
        .find(|tag| near(tag))
        .expect("some salt lands within reach: CRC16 covers every slot")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_match_redis() {
        // Values from CLUSTER KEYSLOT on Redis 7.0.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));
        assert_eq!(key_slot("123456789"), 0x31C3 % SLOTS);
    }

    #[test]
    fn spread_tags_fall_in_their_slice() {
        for shards in [1, 2, 3, 4, 7, 16] {
            for k in 0..shards {
                let tag = spread_tag("t_abc", k, shards);
                let slot = u32::from(key_slot(&format!("dlb:{{{tag}}}:delay")));
                let slice = u32::from(SLOTS) / shards;
                assert_eq!(slot / slice, k.min(shards - 1), "{tag} -> {slot}");
            }
        }
        assert_eq!(spread_tag("p", 1, 4), spread_tag("p", 1, 4));
    }

    #[test]
    fn cluster_urls_parse_and_refuse_a_database() {
        assert!(is_cluster("redis+cluster://127.0.0.1:7000"));
        assert!(!is_cluster("redis://127.0.0.1:7000"));
        assert_eq!(
            seed_url("redis+cluster://:pw@127.0.0.1:7000").unwrap(),
            "redis://:pw@127.0.0.1:7000"
        );
        let msg = seed_url("redis+cluster://:hunter2@127.0.0.1:7000/3")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("database 0") && !msg.contains("hunter2"),
            "{msg}"
        );
    }

    #[test]
    fn cluster_nodes_parse_and_a_failing_master_is_refused() {
        let ok = "a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n\
                  b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922\n\
                  c3 127.0.0.1:7002@17002 master - 0 0 3 connected 10923-16383\n\
                  d4 127.0.0.1:7003@17003 slave a1 0 0 1 connected\n";
        let masters = parse_nodes(ok, "redis://:pw@127.0.0.1:7000").unwrap();
        assert_eq!(masters.len(), 3);
        assert_eq!(masters[1].url, "redis://:pw@127.0.0.1:7001");
        assert!(masters[2].serves(16383) && !masters[2].serves(0));
        let down = ok.replace(
            "b2 127.0.0.1:7001@17001 master",
            "b2 127.0.0.1:7001@17001 master,fail",
        );
        let msg = parse_nodes(&down, "redis://127.0.0.1:7000")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("127.0.0.1:7001") && msg.contains("down"),
            "{msg}"
        );
    }
}
