//! Redis commands served, from `INFO commandstats` deltas: the server-side
//! count of what a strategy cost Redis (scripts count their inner commands
//! too). Server-wide, so other clients of the same Redis inflate it; the
//! harness's own INFO calls are subtracted. A Redis restart resets the
//! counts, so a snapshot carries the server's `run_id` and a delta across a
//! restart is reported as unknown, never as a small number.

use anyhow::{Context, Result};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, InfoDict};
use std::time::Duration;

/// Total `calls=` over every command in `INFO commandstats` of the Redis at
/// `url` (`redis://[[user]:password@]host[:port][/db]`). [`snapshot`] takes
/// the same count on the connection it already has, so only tests call this.
#[cfg_attr(not(test), allow(dead_code))]
pub async fn total_calls(url: &str) -> Result<u64> {
    let mut total = 0;
    for node in nodes(url).await?.urls {
        let (mut conn, _) = connect(&node).await?;
        total += sum_calls(&info(&mut conn, "commandstats").await?);
    }
    Ok(total)
}

/// The servers whose counts make up `url`'s: the one server, or every
/// master of a cluster (`redis+cluster://`), with the commands listing
/// them cost (AUTH/HELLO and CLUSTER NODES on the seed).
struct Nodes {
    urls: Vec<String>,
    listing_calls: u64,
}

async fn nodes(url: &str) -> Result<Nodes> {
    if !strategies::redis_cluster::is_cluster(url) {
        return Ok(Nodes {
            urls: vec![url.to_string()],
            listing_calls: 0,
        });
    }
    let seed = strategies::redis_cluster::seed_url(url)?;
    let (mut conn, setup) = connect(&seed).await?;
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await
        .context("Redis CLUSTER NODES")?;
    // Fails naming a master that is down: a sum without it would read low.
    let masters = strategies::redis_cluster::parse_nodes(&text, &seed)?;
    anyhow::ensure!(
        !masters.is_empty(),
        "the Redis Cluster has no master serving slots"
    );
    Ok(Nodes {
        urls: masters.into_iter().map(|m| m.url).collect(),
        listing_calls: setup + 1,
    })
}

/// The server's identity and its command count at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Changes whenever the server restarts (on a cluster: every master's,
    /// so a restart of any master or a change of masters changes it).
    pub run_id: String,
    pub calls: u64,
    /// The snapshot's own commands before its INFO commandstats: INFO
    /// server, plus AUTH with a password (per node on a cluster, plus
    /// listing the masters).
    own_calls: u64,
    /// Servers read: each counts the snapshot's INFO commandstats after
    /// replying, so a later snapshot sees one more call per server.
    servers: u64,
}

/// Commands served between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta {
    /// The strategy does not use Redis.
    NotUsed,
    Calls(u64),
    /// The server restarted in between: the count is unknown.
    Restarted,
}

/// `INFO server`'s run_id, then `INFO commandstats`.
/// On a cluster, the same on every master, summed.
pub async fn snapshot(url: &str) -> Result<Snapshot> {
    let nodes = nodes(url).await?;
    let mut snapshot = Snapshot {
        run_id: String::new(),
        calls: 0,
        own_calls: nodes.listing_calls,
        servers: 0,
    };
    for node in &nodes.urls {
        let (mut conn, setup) = connect(node).await?;
        let server = info(&mut conn, "server").await?;
        let run_id: String = server.get("run_id").context("INFO server has no run_id")?;
        if !snapshot.run_id.is_empty() {
            snapshot.run_id.push(',');
        }
        snapshot.run_id += &run_id;
        snapshot.calls += sum_calls(&info(&mut conn, "commandstats").await?);
        // The connection AUTHs (or says HELLO) once, before both INFO calls.
        snapshot.own_calls += 1 + setup;
        snapshot.servers += 1;
    }
    Ok(snapshot)
}

impl Snapshot {
    /// Commands since `before`, less the snapshots' own: `before`'s INFO
    /// commandstats (counted after it replied) and this one's INFO server.
    pub fn since(&self, before: &Snapshot) -> Delta {
        if self.run_id != before.run_id {
            return Delta::Restarted;
        }
        Delta::Calls(
            self.calls
                .saturating_sub(before.calls + before.servers + self.own_calls),
        )
    }
}

/// `Redis <version> (append-only file on|off)`, for `run.json`; on a
/// cluster `Redis Cluster of N masters: <each master's>`.
pub async fn version(url: &str) -> Result<String> {
    if strategies::redis_cluster::is_cluster(url) {
        let nodes = nodes(url).await?;
        let mut versions = Vec::new();
        for node in &nodes.urls {
            versions.push(server_version(node).await?);
        }
        versions.dedup();
        return Ok(format!(
            "Redis Cluster of {} masters: {}",
            nodes.urls.len(),
            versions.join("; ")
        ));
    }
    server_version(url).await
}

async fn server_version(url: &str) -> Result<String> {
    let (mut conn, _) = connect(url).await?;
    let server = info(&mut conn, "server").await?;
    let persistence = info(&mut conn, "persistence").await?;
    Ok(format!(
        "Redis {} (append-only file {})",
        server
            .get::<String>("redis_version")
            .unwrap_or_else(|| "?".into()),
        if persistence.get::<String>("aof_enabled").as_deref() == Some("1") {
            "on"
        } else {
            "off"
        }
    ))
}

/// A connection to the Redis at `url` that sends nothing but AUTH (or
/// HELLO with `?protocol=resp3`) before the caller's own commands: no
/// `CLIENT SETINFO` and no `SELECT` (INFO is server-wide), so the commands
/// the harness itself adds to `INFO commandstats` are known exactly. With
/// it, how many commands connecting sent (0 or 1).
async fn connect(url: &str) -> Result<(MultiplexedConnection, u64)> {
    // Through the TLS module, so a rediss:// URL's files are in `info`.
    let info = strategies::tls::redis_client(url)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("malformed Redis URL {}", strategies::redact::url(url)))?
        .get_connection_info()
        .clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_skip_set_lib_name()
        .set_db(0);
    let setup = u64::from(settings.password().is_some() || settings.protocol().supports_resp3());
    let client = redis::Client::open(info.set_redis_settings(settings))
        .with_context(|| format!("malformed Redis URL {url}"))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(None);
    let conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .context("connecting to Redis for INFO")?;
    Ok((conn, setup))
}

/// `INFO <section>`, parsed.
async fn info(conn: &mut MultiplexedConnection, section: &str) -> Result<InfoDict> {
    redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .with_context(|| format!("Redis INFO {section}"))
}

/// Sums `calls=N` of every `cmdstat_*` field (`calls=10,usec=5,...`).
fn sum_calls(info: &InfoDict) -> u64 {
    info.keys()
        .filter(|k| k.starts_with("cmdstat_"))
        .filter_map(|k| info.get::<String>(k))
        .filter_map(|v| {
            v.split(',')
                .find_map(|f| f.strip_prefix("calls="))?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_every_command() {
        let info = "# Commandstats\r\ncmdstat_zadd:calls=10,usec=5,usec_per_call=0.5\r\n\
                    cmdstat_evalsha:calls=3,usec=9\r\n";
        assert_eq!(super::sum_calls(&redis::InfoDict::new(info)), 13);
    }

    #[test]
    fn a_restart_makes_the_delta_unknown() {
        let at = |run_id: &str, calls| super::Snapshot {
            run_id: run_id.into(),
            calls,
            own_calls: 1,
            servers: 1,
        };
        assert_eq!(at("a", 110).since(&at("a", 100)), super::Delta::Calls(8));
        assert_eq!(at("b", 500).since(&at("a", 100)), super::Delta::Restarted);
    }

    #[tokio::test]
    async fn a_snapshot_pair_counts_nothing_of_its_own() {
        let url = std::env::var("DELAYBENCH_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let before = super::snapshot(&url).await.unwrap();
        let after = super::snapshot(&url).await.unwrap();
        // Other clients may run commands meanwhile; the snapshots' own never count.
        match after.since(&before) {
            super::Delta::Calls(n) => assert!(n < 5, "{n} commands between two snapshots"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn reads_the_real_servers_version() {
        let url = std::env::var("DELAYBENCH_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let v = super::version(&url).await.unwrap();
        assert!(v.starts_with("Redis ") && !v.contains('?'), "{v}");
    }

    #[tokio::test]
    async fn an_acl_user_and_password_in_the_url_authenticate() {
        let url = std::env::var("DELAYBENCH_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let admin = redis::Client::open(url.as_str()).unwrap();
        let mut admin = admin.get_multiplexed_async_connection().await.unwrap();
        let user = format!("dlb_stats_{}", std::process::id());
        // May run INFO and nothing else.
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", &user, "reset", "on", ">s3cret", "-@all", "+info"])
            .query_async(&mut admin)
            .await
            .unwrap();
        let mut with_user = url::Url::parse(&url).unwrap();
        with_user.set_username(&user).unwrap();
        with_user.set_password(Some("s3cret")).unwrap();
        let mut wrong = with_user.clone();
        wrong.set_password(Some("wrong")).unwrap();
        let results = (
            super::snapshot(with_user.as_str()).await,
            super::snapshot(with_user.as_str()).await,
            super::version(with_user.as_str()).await,
            super::total_calls(wrong.as_str()).await,
        );
        let _: () = redis::cmd("ACL")
            .arg(&["DELUSER", &user])
            .query_async(&mut admin)
            .await
            .unwrap();
        let (before, after, version, wrong) = results;
        let (before, after) = (before.unwrap(), after.unwrap());
        assert_eq!(before.own_calls, 2, "INFO server and AUTH");
        match after.since(&before) {
            super::Delta::Calls(n) => assert!(n < 5, "{n} commands between two snapshots"),
            other => panic!("{other:?}"),
        }
        assert!(version.unwrap().starts_with("Redis "));
        assert!(wrong.is_err(), "a wrong password must fail");
    }

    #[tokio::test]
    async fn reads_the_real_server() {
        let url = std::env::var("DELAYBENCH_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let before = super::total_calls(&url)
            .await
            .unwrap_or_else(|e| panic!("Redis at {url}: {e:#}"));
        let after = super::total_calls(&url).await.unwrap();
        assert!(
            after > before,
            "the INFO call itself is counted: {before} -> {after}"
        );
    }
}
