//! Where the services are: `--db`, `--amqp` and `--redis`, declared once
//! for every command that reaches a service (run, sweep, list, clean,
//! reference). Each flag can also come from its environment variable;
//! values are hidden from `--help` because a URL can hold a password.

use anyhow::{bail, Result};
use strategies::StrategyOptions;

/// The embedded default: no server at all.
pub const SQLITE: &str = "sqlite://";

/// `--db`, `--amqp`, `--redis`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServiceArgs {
    /// Order database: sqlite:// (embedded), postgres://user@host/db or mysql://user@host/db.
    /// Default: sqlite:// for run, sweep and list, postgres://root@127.0.0.1/test for
    /// reference; clean looks in every one given (repeat the flag).
    #[arg(long, env = "DELAYBENCH_DB", hide_env_values = true)]
    pub db: Vec<String>,
    /// RabbitMQ URL for the rabbit strategies (default: the scenario's
    /// `[strategies.rabbit] url`, amqp://guest:guest@127.0.0.1:5672/%2f).
    #[arg(long, env = "DELAYBENCH_AMQP", hide_env_values = true)]
    pub amqp: Option<String>,
    /// Redis URL for the redis strategies (default: the scenario's
    /// `[strategies.redis-zset] url`, redis://127.0.0.1:6379).
    #[arg(long, env = "DELAYBENCH_REDIS", hide_env_values = true)]
    pub redis: Option<String>,
}

impl ServiceArgs {
    /// The one order database of a command that runs on one: the `--db`
    /// given, else `default`.
    pub fn database<'a>(&'a self, default: &'a str) -> Result<&'a str> {
        match self.db.as_slice() {
            [] => Ok(default),
            [one] => Ok(one),
            several => bail!(
                "--db is given {} times; this command runs on one database (only `clean` \
                 looks in several)",
                several.len()
            ),
        }
    }

    /// Every `--db` given (for `clean`, which looks in each).
    pub fn databases(&self) -> &[String] {
        &self.db
    }

    /// `options` with the broker and Redis URLs of the flags put in.
    pub fn apply(&self, options: &mut StrategyOptions) {
        if let Some(url) = &self.amqp {
            options.rabbit.url = url.clone();
        }
        if let Some(url) = &self.redis {
            options.redis_zset.url = url.clone();
        }
    }

    /// The broker and Redis URLs of the flags, else the factory defaults
    /// (for commands without a scenario).
    pub fn urls_or_defaults(&self) -> (String, String) {
        let mut options = StrategyOptions::default();
        self.apply(&mut options);
        (options.rabbit.url, options.redis_zset.url)
    }

    /// The same choices as flags, for a child `delaybench` process; `db` is
    /// the database it runs on.
    pub fn child_flags(&self, db: &str) -> Vec<String> {
        let mut flags = vec!["--db".to_string(), db.to_string()];
        if let Some(url) = &self.amqp {
            flags.extend(["--amqp".to_string(), url.clone()]);
        }
        if let Some(url) = &self.redis {
            flags.extend(["--redis".to_string(), url.clone()]);
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_on_one_database_refuses_several() {
        let mut args = ServiceArgs::default();
        assert_eq!(args.database(SQLITE).unwrap(), SQLITE);
        args.db = vec!["postgres://a/b".into()];
        assert_eq!(args.database(SQLITE).unwrap(), "postgres://a/b");
        args.db.push("mysql://c/d".into());
        let msg = args.database(SQLITE).unwrap_err().to_string();
        assert!(msg.contains("--db is given 2 times"), "{msg}");
    }

    #[test]
    fn the_flags_win_over_the_defaults() {
        let args = ServiceArgs {
            redis: Some("redis://10.0.0.1:6379".into()),
            ..ServiceArgs::default()
        };
        let (amqp, redis) = args.urls_or_defaults();
        assert_eq!(amqp, StrategyOptions::default().rabbit.url);
        assert_eq!(redis, "redis://10.0.0.1:6379");
        assert_eq!(
            args.child_flags("sqlite://"),
            ["--db", "sqlite://", "--redis", "redis://10.0.0.1:6379"]
        );
    }
}
