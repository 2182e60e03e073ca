//! `delaybench clean`: lists what earlier runs and tests left on the
//! services, and removes it with `--yes`.
//!
//! A run keeps its database namespace on purpose (the checker and outside
//! checkers read it); its queues, exchanges and Redis keys are removed by
//! the strategy's teardown, but a killed run, or a test from before the
//! cleanup guards, leaves them. What is ours, by name (see
//! `strategies::leftovers`):
//!
//! - PostgreSQL schemas and MariaDB databases `dlb_<YYYYMMDD>_<HHMMSS>_...`
//!   (a run's; its age is in the name) and `t_<tag>_<pid>_<n>_<n>` (a
//!   test's); SQLite files of those names under `--out`, aged by mtime;
//! - every queue and exchange named `dlb.*` and every Redis key `dlb:*`,
//!   aged by the namespace in their name where it is a run's.

use crate::service_args::ServiceArgs;
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;
use strategies::leftovers::{self, BrokerKind, BrokerObject};
use strategies::{DbKind, DbLocation, DbServer};

/// What `delaybench clean` was asked to do.
#[derive(Debug, Clone, clap::Args)]
pub struct CleanArgs {
    /// Only what is at least this old (e.g. 1d, 12h); objects whose age cannot be known
    /// (a test's) are then left alone.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub older_than: Option<Duration>,
    /// Remove what is listed (without it, only list).
    #[arg(long)]
    pub yes: bool,
    /// The services to look in: the schemas (PostgreSQL) or databases (MariaDB) of each
    /// `--db` given (SQLite files are looked for under --out), the broker and Redis.
    #[command(flatten)]
    pub services: ServiceArgs,
    /// The results folder whose SQLite files to look at.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Only namespaces starting with one of these (tests use it to touch only their own).
    #[arg(long, hide = true)]
    pub prefix: Vec<String>,
}

/// One leftover, and how to remove it.
#[derive(Debug)]
struct Leftover {
    /// `schema`, `database`, `file`, `queue`, `exchange`, `key`.
    kind: &'static str,
    name: String,
    age: Option<Duration>,
    detail: Option<String>,
    remove: Remove,
}

#[derive(Debug)]
enum Remove {
    Namespace(DbServer, DbLocation),
    Broker(BrokerObject),
    RedisKey(String),
}

/// What one service holds, or why it could not be asked.
#[derive(Debug)]
struct Place {
    title: String,
    found: std::result::Result<Vec<Leftover>, String>,
    /// Not looked at because the user gave nothing to look in (no `--db`),
    /// not because the service failed.
    by_choice: bool,
}

/// Lists (and with `--yes` removes) the leftovers; returns the text to print.
pub async fn clean(args: &CleanArgs) -> Result<String> {
    let (amqp, redis) = args.services.urls_or_defaults();
    let mut places = Vec::new();
    let servers: Vec<&String> = args
        .services
        .databases()
        .iter()
        .filter(|u| !u.starts_with("sqlite:"))
        .collect();
    if servers.is_empty() {
        places.push(Place {
            title: "PostgreSQL / MariaDB".into(),
            found: Err("no --db postgres://... or mysql://... given (or DELAYBENCH_DB)".into()),
            by_choice: true,
        });
    }
    for url in servers {
        places.push(database(url).await?);
    }
    places.push(sqlite_files(&args.out));
    places.push(broker(&amqp).await);
    places.push(redis_keys(&redis).await);

    let wanted = |l: &Leftover| {
        let namespace = namespace_of(l);
        (args.prefix.is_empty()
            || args
                .prefix
                .iter()
                .any(|p| namespace.starts_with(p.as_str())))
            && args
                .older_than
                .is_none_or(|min| l.age.is_some_and(|age| age >= min))
    };
    let mut text = String::new();
    let mut total = 0;
    let mut failures = Vec::new();
    // Services that could not be asked: "nothing to remove" must not be
    // said of them, and `--yes` did not do what it was asked there.
    let mut not_looked_at = Vec::new();
    for place in places {
        match place.found {
            Err(e) => {
                let _ = writeln!(text, "{}: not looked at: {e}", place.title);
                if !place.by_choice {
                    not_looked_at.push(place.title);
                }
            }
            Ok(found) => {
                let found: Vec<Leftover> = found.into_iter().filter(wanted).collect();
                let _ = writeln!(text, "{}: {} left", place.title, found.len());
                for l in &found {
                    let _ = writeln!(text, "  {}", describe(l));
                }
                total += found.len();
                if args.yes {
                    let (removed, errors) = remove(&found, &amqp, &redis).await;
                    if !found.is_empty() {
                        let _ = writeln!(text, "  removed {removed} of {}", found.len());
                    }
                    failures.extend(errors);
                }
            }
        }
    }
    let unasked = not_looked_at.join(", ");
    if total == 0 && not_looked_at.is_empty() {
        text.push_str("nothing to remove\n");
    } else if total == 0 {
        let _ = writeln!(
            text,
            "nothing to remove where it looked; not looked at: {unasked}"
        );
    } else if !args.yes {
        let _ = writeln!(text, "{total} left; run again with --yes to remove these");
    }
    if args.yes && !not_looked_at.is_empty() {
        failures.push(format!(
            "could not look at {unasked}: start it (`bash scripts/services.sh` starts the \
             local services) or pass its URL (--amqp, --redis, --db), and run again"
        ));
    }
    if failures.is_empty() {
        Ok(text)
    } else {
        print!("{text}");
        anyhow::bail!("some could not be removed: {}", failures.join("; "))
    }
}

fn describe(l: &Leftover) -> String {
    let age = match l.age {
        Some(age) => format!(
            "age {}",
            humantime::format_duration(Duration::from_secs(age.as_secs() / 60 * 60))
                .to_string()
                .replace("0s", "<1m")
        ),
        None => "age unknown".into(),
    };
    match &l.detail {
        Some(d) => format!("{} {} ({d}, {age})", l.kind, l.name),
        None => format!("{} {} ({age})", l.kind, l.name),
    }
}

async fn remove(found: &[Leftover], amqp: &str, redis: &str) -> (usize, Vec<String>) {
    let (mut removed, mut errors) = (0, Vec::new());
    let objects: Vec<BrokerObject> = found
        .iter()
        .filter_map(|l| match &l.remove {
            Remove::Broker(o) => Some(o.clone()),
            _ => None,
        })
        .collect();
    match leftovers::delete_broker(amqp, &objects).await {
        Ok(n) => removed += n,
        Err(e) => errors.push(e.to_string()),
    }
    let keys: Vec<String> = found
        .iter()
        .filter_map(|l| match &l.remove {
            Remove::RedisKey(k) => Some(k.clone()),
            _ => None,
        })
        .collect();
    match leftovers::delete_redis_keys(redis, &keys).await {
        Ok(_) => removed += keys.len(),
        Err(e) => errors.push(e.to_string()),
    }
    for l in found {
        if let Remove::Namespace(server, location) = &l.remove {
            match server.drop_namespace(location).await {
                Ok(()) => removed += 1,
                Err(e) => errors.push(format!("{} {}: {e}", l.kind, l.name)),
            }
        }
    }
    (removed, errors)
}

/// The namespace (or resource prefix) a leftover belongs to.
fn namespace_of(l: &Leftover) -> String {
    match &l.remove {
        Remove::Namespace(_, location) => location.resource_prefix(),
        Remove::Broker(o) => o
            .name
            .strip_prefix("dlb.")
            .and_then(|rest| rest.split('.').next())
            .unwrap_or_default()
            .to_string(),
        Remove::RedisKey(k) => k
            .strip_prefix("dlb:{")
            .and_then(|rest| rest.split([':', '}']).next())
            .unwrap_or_default()
            .to_string(),
    }
}

/// Whether `name` is a namespace delaybench makes: a run's
/// `dlb_<YYYYMMDD>_<HHMMSS>_...` or a test's `t_<tag>_<n>_<n>_<n>`.
fn is_ours(name: &str) -> bool {
    if run_started(name).is_some() {
        return true;
    }
    let Some(rest) = name.strip_prefix("t_") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('_').collect();
    parts.len() >= 4
        && parts[parts.len() - 3..]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// When the run of namespace `name` (`dlb_<YYYYMMDD>_<HHMMSS>_...`, local
/// time, as run ids are) started.
fn run_started(name: &str) -> Option<std::time::SystemTime> {
    let stamp = name.strip_prefix("dlb_")?.get(..15)?;
    let naive = chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%d_%H%M%S").ok()?;
    let local = naive.and_local_timezone(chrono::Local).earliest()?;
    Some(std::time::SystemTime::from(local))
}

fn age_of_namespace(name: &str) -> Option<Duration> {
    run_started(name)?.elapsed().ok()
}

async fn database(url: &str) -> Result<Place> {
    let server = DbServer::parse(url)?;
    let kind = server.kind();
    let title = format!(
        "{} {}",
        match kind {
            DbKind::Postgres => "PostgreSQL",
            DbKind::Mysql => "MariaDB/MySQL",
            DbKind::Sqlite => "SQLite",
        },
        server.display_url()
    );
    if kind == DbKind::Sqlite {
        return Ok(Place {
            title,
            found: Ok(Vec::new()),
            by_choice: false,
        });
    }
    let found = match server.server_version().await {
        Err(e) => Err(e.to_string()),
        Ok(_) => namespaces(url, kind)
            .await
            .map(|names| {
                names
                    .into_iter()
                    .filter(|n| is_ours(n))
                    .map(|name| Leftover {
                        kind: if kind == DbKind::Postgres {
                            "schema"
                        } else {
                            "database"
                        },
                        age: age_of_namespace(&name),
                        detail: None,
                        remove: Remove::Namespace(
                            server.clone(),
                            DbLocation {
                                kind,
                                url: url.replacen("mariadb://", "mysql://", 1),
                                namespace: name.clone(),
                            },
                        ),
                        name,
                    })
                    .collect()
            })
            .map_err(|e| format!("{e:#}")),
    };
    Ok(Place {
        title,
        found,
        by_choice: false,
    })
}

async fn namespaces(url: &str, kind: DbKind) -> Result<Vec<String>> {
    use sqlx::Connection;
    let url = strategies::tls::database_url(&url.replacen("mariadb://", "mysql://", 1));
    Ok(match kind {
        DbKind::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&url).await?;
            let names = sqlx::query_scalar("SELECT nspname::text FROM pg_namespace")
                .fetch_all(&mut conn)
                .await
                .context("listing schemas")?;
            let _ = conn.close().await;
            names
        }
        _ => {
            let mut conn = sqlx::MySqlConnection::connect(&url).await?;
            let names = sqlx::query_scalar(
                "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata",
            )
            .fetch_all(&mut conn)
            .await
            .context("listing databases")?;
            let _ = conn.close().await;
            names
        }
    })
}

/// SQLite namespaces: `<name>.sqlite` files under `out`, any depth.
fn sqlite_files(out: &Path) -> Place {
    let title = format!("SQLite files under {}", out.display());
    if !out.exists() {
        return Place {
            title,
            found: Ok(Vec::new()),
            by_choice: false,
        };
    }
    let mut found = Vec::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(path);
                continue;
            }
            let ours = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".sqlite"))
                .is_some_and(is_ours);
            if !ours {
                continue;
            }
            let age = meta.modified().ok().and_then(|m| m.elapsed().ok());
            let server = DbServer::parse("sqlite://").expect("sqlite URL");
            found.push(Leftover {
                kind: "file",
                name: path.display().to_string(),
                age,
                detail: Some(format!("{} kB", meta.len() / 1024)),
                remove: Remove::Namespace(
                    server,
                    DbLocation {
                        kind: DbKind::Sqlite,
                        url: format!("sqlite://{}", path.display()),
                        namespace: path.display().to_string(),
                    },
                ),
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Place {
        title,
        found: Ok(found),
        by_choice: false,
    }
}

async fn broker(amqp: &str) -> Place {
    let display = strategies::redact::url(amqp);
    match leftovers::list_broker(amqp).await {
        Ok((mut objects, source)) => {
            objects.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
            Place {
                title: format!("RabbitMQ {display} (listed with {source})"),
                found: Ok(objects
                    .into_iter()
                    .map(|o| {
                        let ns = o
                            .name
                            .strip_prefix("dlb.")
                            .and_then(|r| r.split('.').next())
                            .unwrap_or_default()
                            .to_string();
                        Leftover {
                            kind: o.kind.as_str(),
                            name: o.name.clone(),
                            age: age_of_namespace(&ns),
                            detail: match (o.kind, o.messages) {
                                (BrokerKind::Queue, Some(n)) => Some(format!("{n} messages")),
                                _ => None,
                            },
                            remove: Remove::Broker(o),
                        }
                    })
                    .collect()),
                by_choice: false,
            }
        }
        Err(e) => Place {
            title: format!("RabbitMQ {display}"),
            found: Err(e.to_string()),
            by_choice: false,
        },
    }
}

async fn redis_keys(redis: &str) -> Place {
    let title = format!("Redis {}", strategies::redact::url(redis));
    match leftovers::redis_keys(redis, "dlb:*").await {
        Ok(keys) => Place {
            title,
            found: Ok(keys
                .into_iter()
                .map(|key| {
                    let ns = key
                        .strip_prefix("dlb:{")
                        .and_then(|rest| rest.split([':', '}']).next())
                        .unwrap_or_default()
                        .to_string();
                    Leftover {
                        kind: "key",
                        name: key.clone(),
                        age: age_of_namespace(&ns),
                        detail: None,
                        remove: Remove::RedisKey(key),
                    }
                })
                .collect()),
            by_choice: false,
        },
        Err(e) => Place {
            title,
            found: Err(e.to_string()),
            by_choice: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_run_and_test_namespaces_only() {
        assert!(is_ours("dlb_20261201_041929_tiny_db_scan"));
        assert!(is_ours("t_rabbit_ttl_1234_567890_3"));
        assert!(!is_ours("t_users"));
        assert!(!is_ours("public"));
        assert!(!is_ours("dlb_notarun"));
    }

    #[test]
    fn a_runs_age_is_in_its_name() {
        let name = format!(
            "dlb_{}_quick_db_scan",
            (chrono::Local::now() - chrono::Duration::hours(2)).format("%Y%m%d_%H%M%S")
        );
        let age = age_of_namespace(&name).unwrap();
        assert!(age >= Duration::from_secs(7199) && age < Duration::from_secs(7300));
        assert_eq!(age_of_namespace("t_x_1_2_3"), None);
    }
}
