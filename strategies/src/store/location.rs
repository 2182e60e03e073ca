//! Where a run's data lives: a database server and a namespace on it.
//!
//! Each strategy's run gets its own namespace, kept after the run so outside
//! checkers can read it: a PostgreSQL schema, a MariaDB/MySQL database, or a
//! SQLite file under the run's results folder.

use crate::error::{DbContext, Error, Result};
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, AssertSqlSafe, Connection, Executor, Row};
use std::fmt;
use std::path::Path;
use std::time::Duration;

/// The three supported database kinds, chosen by URL scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DbKind {
    Postgres,
    Mysql,
    Sqlite,
}

impl DbKind {
    /// The name used in `summary.json` (`postgres`, `mysql`, `sqlite`).
    pub fn as_str(self) -> &'static str {
        match self {
            DbKind::Postgres => "postgres",
            DbKind::Mysql => "mysql",
            DbKind::Sqlite => "sqlite",
        }
    }

    pub(crate) fn service_name(self) -> &'static str {
        match self {
            DbKind::Postgres => "PostgreSQL",
            DbKind::Mysql => "MariaDB/MySQL",
            DbKind::Sqlite => "SQLite",
        }
    }

    /// How to get a server of this kind running, for error messages.
    pub(crate) fn start_hint(self) -> &'static str {
        match self {
            DbKind::Postgres => {
                "start PostgreSQL: `docker compose up -d --wait postgres`, or on a Debian host \
                 `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`; \
                 if it is running, check the user, password and database in the URL"
            }
            DbKind::Mysql => {
                "start MariaDB: `docker compose up -d --wait mariadb`, or on a Debian host \
                 `scripts/services.sh mariadb` (it runs mariadbd as the mysql user); \
                 if it is running, check the user, password and database in the URL"
            }
            DbKind::Sqlite => "check that the results folder exists and is writable",
        }
    }
}

/// A database server given by URL (`postgres://`, `mysql://`, `sqlite://`),
/// in which namespaces are created. For SQLite there is no server: every
/// namespace is a file under the run's folder, and the URL only selects the kind.
#[derive(Clone, PartialEq, Eq)]
pub struct DbServer {
    kind: DbKind,
    url: String,
}

impl fmt::Debug for DbServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbServer")
            .field("kind", &self.kind)
            .field("url", &crate::redact::url(&self.url))
            .finish()
    }
}

impl DbServer {
    /// Parses a database URL; the error names the accepted schemes.
    pub fn parse(url: &str) -> Result<Self> {
        let kind = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            DbKind::Postgres
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            DbKind::Mysql
        } else if url.starts_with("sqlite:") {
            DbKind::Sqlite
        } else {
            return Err(Error::Config(format!(
                "database URL `{}` has an unknown scheme; accepted: postgres://user@host/db, \
                 mysql://user@host/db, sqlite:// (embedded, one file per strategy in the run folder)",
                crate::redact::url(url)
            )));
        };
        let url = url.replacen("mariadb://", "mysql://", 1);
        if kind != DbKind::Sqlite {
            url::Url::parse(&url).map_err(|e| {
                Error::Config(format!(
                    "database URL `{}` is malformed: {e}",
                    crate::redact::url(&url)
                ))
            })?;
        }
        Ok(DbServer { kind, url })
    }

    pub fn kind(&self) -> DbKind {
        self.kind
    }

    /// The URL with any password removed, safe to print and store.
    pub fn display_url(&self) -> String {
        crate::redact::url(&self.url)
    }

    /// Creates (or reuses) the namespace `name` and returns where it is.
    /// `sqlite_dir` is the folder that holds the SQLite file; other kinds ignore it.
    pub async fn create_namespace(&self, name: &str, sqlite_dir: &Path) -> Result<DbLocation> {
        check_identifier(name)?;
        match self.kind {
            DbKind::Sqlite => {
                std::fs::create_dir_all(sqlite_dir).map_err(|e| {
                    Error::Config(format!("cannot create {}: {e}", sqlite_dir.display()))
                })?;
                let dir = sqlite_dir.canonicalize().map_err(|e| {
                    Error::Config(format!("cannot resolve {}: {e}", sqlite_dir.display()))
                })?;
                let file = dir.join(format!("{name}.sqlite"));
                let _ = std::fs::remove_file(&file);
                Ok(DbLocation {
                    kind: DbKind::Sqlite,
                    url: format!("sqlite://{}?mode=rwc", file.display()),
                    namespace: file.display().to_string(),
                })
            }
            DbKind::Postgres | DbKind::Mysql => {
                let mut admin = admin_connect(self).await?;
                let ddl = match self.kind {
                    DbKind::Postgres => format!("CREATE SCHEMA IF NOT EXISTS \"{name}\""),
                    _ => format!("CREATE DATABASE IF NOT EXISTS `{name}`"),
                };
                admin_execute(&mut admin, &ddl).await?;
                let _ = sqlx::Connection::close(admin).await;
                Ok(DbLocation {
                    kind: self.kind,
                    url: self.url.clone(),
                    namespace: name.to_string(),
                })
            }
        }
    }

    /// Drops a namespace created by [`DbServer::create_namespace`] (tests use
    /// this to clean up; runs keep theirs).
    pub async fn drop_namespace(&self, location: &DbLocation) -> Result<()> {
        match self.kind {
            DbKind::Sqlite => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", location.namespace));
                }
                Ok(())
            }
            DbKind::Postgres | DbKind::Mysql => {
                check_identifier(&location.namespace)?;
                let mut admin = admin_connect(self).await?;
                let ddl = match self.kind {
                    DbKind::Postgres => {
                        format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", location.namespace)
                    }
                    _ => format!("DROP DATABASE IF EXISTS `{}`", location.namespace),
                };
                admin_execute(&mut admin, &ddl).await?;
                let _ = sqlx::Connection::close(admin).await;
                Ok(())
            }
        }
    }

    /// Connects once and returns the server's version string, or an
    /// [`Error::Unreachable`] naming the URL and how to start the server.
    pub async fn server_version(&self) -> Result<String> {
        let mut admin = if self.kind == DbKind::Sqlite {
            let memory = DbServer {
                kind: DbKind::Sqlite,
                url: "sqlite::memory:".into(),
            };
            admin_connect(&memory).await?
        } else {
            admin_connect(self).await?
        };
        let version = admin_version(&mut admin, self.kind).await;
        let _ = sqlx::Connection::close(admin).await;
        version
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

/// One namespace on one server: what a strategy's store connects to.
///
/// Serialisable so a worker process can be told where to connect; its
/// `Debug` hides the password.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbLocation {
    pub kind: DbKind,
    /// The server URL (for SQLite, the file URL). May contain a password.
    pub url: String,
    /// Schema (PostgreSQL), database (MariaDB/MySQL) or file path (SQLite).
    pub namespace: String,
}

impl fmt::Debug for DbLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DbLocation")
            .field("kind", &self.kind)
            .field("url", &self.display_url())
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl DbLocation {
    /// The URL with any password removed, safe to print and store.
    pub fn display_url(&self) -> String {
        crate::redact::url(&self.url)
    }

    /// A short `[a-z0-9_]` name unique to this namespace, for naming the
    /// broker queues and Redis keys of the same strategy run.
    pub fn resource_prefix(&self) -> String {
        let raw = match self.kind {
            DbKind::Sqlite => Path::new(&self.namespace)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            _ => self.namespace.clone(),
        };
        let clean = identifier(&raw);
        if clean.is_empty() {
            "default".into()
        } else {
            clean
        }
    }

    /// The URL a pool connects to: for MariaDB/MySQL the namespace is the
    /// database in the path; PostgreSQL selects its schema with `search_path`.
    /// TLS as the URL asks for it, and only then ([`crate::tls::database_url`]).
    pub(crate) fn connect_url(&self) -> Result<String> {
        match self.kind {
            DbKind::Mysql => {
                let mut url = url::Url::parse(&self.url)
                    .map_err(|e| Error::Config(format!("malformed database URL: {e}")))?;
                url.set_path(&format!("/{}", self.namespace));
                Ok(crate::tls::database_url(url.as_str()))
            }
            _ => Ok(crate::tls::database_url(&self.url)),
        }
    }
}

/// `raw` as a lowercase `[a-z0-9_]` identifier: every other character
/// becomes `_`. Namespaces, queue names and key prefixes are built with it.
pub fn identifier(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Namespaces are interpolated into DDL, so only `[a-z0-9_]` is accepted.
fn check_identifier(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "namespace `{name}` must be 1-63 characters of [a-z0-9_]"
        )))
    }
}

/// How long to wait for a connection before reporting the server unreachable.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Maps a connection failure to an error naming the URL and how to start the server.
pub(super) fn unreachable(kind: DbKind, display_url: &str, e: &sqlx::Error) -> Error {
    Error::unreachable(
        kind.service_name(),
        display_url.to_string(),
        e.to_string(),
        kind.start_hint().to_string(),
    )
}

/// One connection on the server URL itself, for DDL on namespaces. A plain
/// connection, not a pool, so a refused connection fails at once instead of
/// being retried until a timeout.
pub(super) async fn admin_connect(server: &DbServer) -> Result<AnyConnection> {
    sqlx::any::install_default_drivers();
    let connect = AnyConnection::connect(&crate::tls::database_url(server.url()));
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(unreachable(server.kind(), &server.display_url(), &e)),
        Err(_) => Err(unreachable(
            server.kind(),
            &server.display_url(),
            &sqlx::Error::PoolTimedOut,
        )),
    }
}

/// `ddl` names a namespace that `identifier` checked.
pub(super) async fn admin_execute(conn: &mut AnyConnection, ddl: &str) -> Result<()> {
    conn.execute(AssertSqlSafe(ddl))
        .await
        .ctx("creating or dropping a namespace")?;
    Ok(())
}

pub(super) async fn admin_version<'c, E: sqlx::Executor<'c, Database = sqlx::Any>>(
    executor: E,
    kind: DbKind,
) -> Result<String> {
    let sql = match kind {
        DbKind::Sqlite => "SELECT sqlite_version()",
        _ => "SELECT version()",
    };
    let row = sqlx::query(sql)
        .fetch_one(executor)
        .await
        .ctx("reading the server version")?;
    row.try_get::<String, _>(0)
        .ctx("reading the server version")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        let server = DbServer::parse("postgres://u:hunter2@h/db").unwrap();
        assert!(!format!("{server:?}").contains("hunter2"));
    }

    #[test]
    fn rejects_unknown_scheme_and_bad_namespace() {
        let err = DbServer::parse("oracle://x").unwrap_err().to_string();
        assert!(err.contains("postgres://"), "{err}");
        assert!(check_identifier("Robert'); DROP").is_err());
        assert!(check_identifier("run_1").is_ok());
    }

    #[test]
    fn resource_prefix_is_safe_for_keys_and_queue_names() {
        let sqlite = DbLocation {
            kind: DbKind::Sqlite,
            url: "sqlite:///tmp/x/run_1.sqlite?mode=rwc".into(),
            namespace: "/tmp/x/run_1.sqlite".into(),
        };
        assert_eq!(sqlite.resource_prefix(), "run_1");
        let pg = DbLocation {
            kind: DbKind::Postgres,
            url: "postgres://root@h/test".into(),
            namespace: "we{ird}:ns".into(),
        };
        // No braces: they would break a Redis Cluster hash tag.
        assert_eq!(pg.resource_prefix(), "we_ird__ns");
    }

    #[test]
    fn mysql_namespace_is_the_database() {
        let loc = DbLocation {
            kind: DbKind::Mysql,
            url: "mysql://root@127.0.0.1:3306/test".into(),
            namespace: "ns_1".into(),
        };
        assert_eq!(
            loc.connect_url().unwrap(),
            "mysql://root@127.0.0.1:3306/ns_1?ssl-mode=DISABLED"
        );
    }
}
