//! Redis commands served, from `INFO commandstats` deltas: the server-side
//! count of what a strategy cost Redis (scripts count their inner commands
//! too). Server-wide, so other clients of the same Redis inflate it; the
//! harness's own INFO calls are subtracted. A Redis restart resets the
//! counts, so a snapshot carries the server's `run_id` and a delta across a
//! restart is reported as unknown, never as a small number.

use anyhow::{bail, Context, Result};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Total `calls=` over every command in `INFO commandstats` of the Redis at
/// `url` (`redis://[:password@]host[:port][/db]`).
pub async fn total_calls(url: &str) -> Result<u64> {
    Ok(sum_calls(&info(url, "commandstats").await?))
}

/// The server's identity and its command count at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Changes whenever the server restarts.
    pub run_id: String,
    pub calls: u64,
    /// The snapshot's own commands (INFO server, plus AUTH with a password).
    own_calls: u64,
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
pub async fn snapshot(url: &str) -> Result<Snapshot> {
    let server = info(url, "server").await?;
    let run_id = server
        .lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|v| v.trim().to_string())
        .context("INFO server has no run_id")?;
    let calls = total_calls(url).await?;
    let auth = u64::from(url::Url::parse(url).is_ok_and(|u| u.password().is_some()));
    Ok(Snapshot {
        run_id,
        calls,
        // Each `info` call may AUTH first.
        own_calls: 1 + 2 * auth,
    })
}

impl Snapshot {
    /// Commands since `before`, less the snapshots' own: `before`'s INFO
    /// commandstats (counted after it replied) and this one's INFO server.
    pub fn since(&self, before: &Snapshot) -> Delta {
        if self.run_id != before.run_id {
            return Delta::Restarted;
        }
        Delta::Calls(self.calls.saturating_sub(before.calls + 1 + self.own_calls))
    }
}

/// `Redis <version> (append-only file on|off)`, for `run.json`.
pub async fn version(url: &str) -> Result<String> {
    let field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| "?".into())
    };
    let server = info(url, "server").await?;
    let persistence = info(url, "persistence").await?;
    Ok(format!(
        "Redis {} (append-only file {})",
        field(&server, "redis_version:"),
        if field(&persistence, "aof_enabled:") == "1" {
            "on"
        } else {
            "off"
        }
    ))
}

/// The text of `INFO <section>`.
async fn info(url: &str, section: &str) -> Result<String> {
    let parsed = url::Url::parse(url).with_context(|| format!("malformed Redis URL {url}"))?;
    let host = parsed.host_str().unwrap_or("127.0.0.1").to_string();
    let port = parsed.port().unwrap_or(6379);
    let stream = tokio::time::timeout(
        Duration::from_secs(5),
        TcpStream::connect((host.as_str(), port)),
    )
    .await
    .context("connecting to Redis for INFO")??;
    let mut stream = BufReader::new(stream);
    if let Some(password) = parsed.password() {
        stream
            .get_mut()
            .write_all(&command(&["AUTH", password]))
            .await?;
        let mut line = String::new();
        stream.read_line(&mut line).await?;
        if !line.starts_with('+') {
            bail!("Redis AUTH failed: {}", line.trim());
        }
    }
    stream
        .get_mut()
        .write_all(&command(&["INFO", section]))
        .await?;
    let mut header = String::new();
    stream.read_line(&mut header).await?;
    let len: usize = header
        .trim()
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("unexpected INFO reply {header:?}"))?;
    let mut body = vec![0; len + 2];
    stream.read_exact(&mut body).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    out.into_bytes()
}

/// Sums `calls=N` of every `cmdstat_*` line.
fn sum_calls(info: &str) -> u64 {
    info.lines()
        .filter(|l| l.starts_with("cmdstat_"))
        .filter_map(|l| {
            l.split_once("calls=")
                .and_then(|(_, rest)| rest.split(',').next()?.parse::<u64>().ok())
        })
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_every_command() {
        let info = "# Commandstats\r\ncmdstat_zadd:calls=10,usec=5,usec_per_call=0.5\r\n\
                    cmdstat_evalsha:calls=3,usec=9\r\n";
        assert_eq!(super::sum_calls(info), 13);
    }

    #[test]
    fn a_restart_makes_the_delta_unknown() {
        let at = |run_id: &str, calls| super::Snapshot {
            run_id: run_id.into(),
            calls,
            own_calls: 1,
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
