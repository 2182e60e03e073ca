//! `delaybench doctor`: can the selected strategies run here, and if not,
//! what fixes it. One line per check, each failure with its fix, and a
//! non-zero exit when a selected strategy cannot run.
//!
//! The checks, for the services the selected strategies need (all of them
//! by default):
//!
//! | service | checks |
//! |---|---|
//! | database | reachable (over TLS when the URL asks for it), its version; may create and drop a namespace of its own (a run makes one per strategy) |
//! | RabbitMQ | reachable, logged in, its version; the x-delayed-message exchange type (only for rabbit-delayed); listing queues through the management API or `rabbitmqctl` (a warning: only `clean` needs it) |
//! | Redis | reachable, logged in, its version and persistence |
//!
//! A refused certificate and a refused login get the fix that names the
//! URL parameter or the password ([`strategies::Error::unreachable`]);
//! a service that is down gets how to start it.

use crate::run::args::select;
use crate::service_args::ServiceArgs;
use anyhow::Result;
use std::fmt::Write as _;
use std::time::Duration;
use strategies::registry::Variant;
use strategies::{DbServer, Service};

/// How long one check may take before it counts as failed: `list`'s.
const CHECK_TIMEOUT: Duration = crate::probe::PROBE_TIMEOUT;

/// What `delaybench doctor` was asked.
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// The strategies to check for (as `run --strategies`); default: all of them.
    #[arg(short = 'S', long)]
    pub strategies: Option<String>,
    #[command(flatten)]
    pub services: ServiceArgs,
}

/// One check's outcome.
#[derive(Debug)]
enum Outcome {
    Ok(String),
    /// Fails the selected strategies that need it.
    Fail {
        why: String,
        fix: String,
    },
    /// Worth knowing; no strategy fails for it.
    Warn {
        why: String,
        fix: String,
    },
}

#[derive(Debug)]
struct Check {
    /// `database`, `rabbitmq`, `redis`.
    service: &'static str,
    /// What was checked, e.g. `reachable` or `x-delayed-message`.
    what: &'static str,
    outcome: Outcome,
    /// The strategies that cannot run when it fails.
    needed_by: Vec<String>,
}

/// The report and whether every selected strategy can run.
pub struct Diagnosis {
    pub text: String,
    pub blocked: Vec<String>,
}

async fn within<T>(
    what: impl std::future::Future<Output = strategies::Result<T>>,
) -> Result<T, String> {
    within_for(CHECK_TIMEOUT, what).await
}

/// [`within`] with a limit of its own.
async fn within_for<T>(
    limit: Duration,
    what: impl std::future::Future<Output = strategies::Result<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, what).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {}s", limit.as_secs())),
    }
}

/// The queue listing may fall back to `rabbitmqctl`, which takes seconds.
const LISTING_TIMEOUT: Duration = Duration::from_secs(40);

/// A failure's reason and fix: the error's own `hint:` line when it has
/// one, else `default_fix`.
fn failed(error: String, default_fix: &str) -> (String, String) {
    match error.split_once("\n  hint: ") {
        Some((why, hint)) => (why.to_string(), hint.to_string()),
        None => (error, default_fix.to_string()),
    }
}

fn fail(error: String, default_fix: &str) -> Outcome {
    let (why, fix) = failed(error, default_fix);
    Outcome::Fail { why, fix }
}

/// Runs every check the selected strategies need.
pub async fn diagnose(args: &DoctorArgs) -> Result<Diagnosis> {
    let variants = select(args.strategies.as_deref()).map_err(crate::exit::usage)?;
    let needing = |service: Option<Service>| -> Vec<String> {
        variants
            .iter()
            .filter(|v| service.is_none_or(|s| v.info.requires.contains(&s)))
            .map(Variant::to_string)
            .collect()
    };
    let (amqp, redis) = args.services.urls_or_defaults();
    let db_url = args
        .services
        .database(crate::service_args::SQLITE)
        .map_err(crate::exit::usage)?;
    let mut checks = Vec::new();

    // The database: every strategy's orders live there.
    let all = needing(None);
    match DbServer::parse(db_url) {
        Err(e) => checks.push(Check {
            service: "database",
            what: "URL",
            outcome: fail(
                e.to_string(),
                "give --db sqlite://, postgres://... or mysql://...",
            ),
            needed_by: all.clone(),
        }),
        Ok(server) => {
            let reachable = within(server.server_version()).await;
            let up = reachable.is_ok();
            checks.push(Check {
                service: "database",
                what: "reachable",
                outcome: match reachable {
                    Ok(version) => Outcome::Ok(format!(
                        "{}: {version}{}",
                        server.display_url(),
                        over_tls(db_url)
                    )),
                    Err(e) => fail(e, "start the database, or pass --db / DELAYBENCH_DB"),
                },
                needed_by: all.clone(),
            });
            if up {
                checks.push(Check {
                    service: "database",
                    what: "privileges",
                    outcome: namespace_round_trip(&server).await,
                    needed_by: all.clone(),
                });
            }
        }
    }

    // RabbitMQ, for the strategies that need it.
    let rabbit = needing(Some(Service::RabbitMq));
    if !rabbit.is_empty() {
        let display = strategies::redact::url(&amqp);
        let facts = within(strategies::rabbit::broker_facts(&amqp)).await;
        let delayed: Vec<String> = rabbit
            .iter()
            .filter(|v| v.starts_with("rabbit-delayed"))
            .cloned()
            .collect();
        match facts {
            Err(e) => checks.push(Check {
                service: "rabbitmq",
                what: "reachable",
                outcome: fail(e, "start RabbitMQ, or pass --amqp / DELAYBENCH_AMQP"),
                needed_by: rabbit.clone(),
            }),
            Ok(facts) => {
                checks.push(Check {
                    service: "rabbitmq",
                    what: "reachable",
                    outcome: Outcome::Ok(format!(
                        "{display}: {}{}",
                        facts.version,
                        over_tls(&amqp)
                    )),
                    needed_by: rabbit.clone(),
                });
                if !delayed.is_empty() {
                    checks.push(Check {
                        service: "rabbitmq",
                        what: "x-delayed-message",
                        outcome: if facts.delayed_exchange {
                            Outcome::Ok("the exchange type is served".into())
                        } else {
                            Outcome::Fail {
                                why: format!(
                                    "{} has no x-delayed-message exchange type",
                                    facts.version
                                ),
                                fix: "build and enable the project's plugin on the broker's \
                                      host: `bash rabbitmq-plugin/install.sh` (as root), or \
                                      `docker compose up -d --wait rabbitmq`, whose image has it"
                                    .into(),
                            }
                        },
                        needed_by: delayed,
                    });
                }
                checks.push(Check {
                    service: "rabbitmq",
                    what: "queue listing",
                    outcome: match within_for(
                        LISTING_TIMEOUT,
                        strategies::leftovers::list_broker(&amqp),
                    )
                    .await
                    {
                        Ok((_, source)) => {
                            Outcome::Ok(format!("`clean` lists queues with {source}"))
                        }
                        Err(e) => {
                            let (why, fix) = failed(e, "");
                            Outcome::Warn {
                                why: format!(
                                    "`delaybench clean` cannot list the broker's queues: {why}"
                                ),
                                fix,
                            }
                        }
                    },
                    needed_by: Vec::new(),
                });
            }
        }
    }

    // Redis, for the strategies that need it.
    let redis_users = needing(Some(Service::Redis));
    if !redis_users.is_empty() {
        let display = strategies::redact::url(&redis);
        let version = tokio::time::timeout(CHECK_TIMEOUT, crate::redis_stats::version(&redis))
            .await
            .map_err(|_| format!("no answer within {}s", CHECK_TIMEOUT.as_secs()))
            .and_then(|r| r.map_err(|e| format!("{e:#}")));
        checks.push(Check {
            service: "redis",
            what: "reachable",
            outcome: match version {
                Ok(v) => Outcome::Ok(format!("{display}: {v}{}", over_tls(&redis))),
                // The probe's own client: its error gets the strategies'
                // hint (a refused TLS or login, else how to start Redis).
                Err(e) => fail(
                    strategies::Error::unreachable(
                        "Redis",
                        display.clone(),
                        e,
                        strategies::redis_zset::START_HINT.into(),
                    )
                    .to_string(),
                    "",
                ),
            },
            needed_by: redis_users,
        });
    }

    Ok(render(&variants, &checks))
}

/// ` (TLS)` when the URL asks for TLS, which then was used: the clients
/// refuse to fall back to a plain connection.
fn over_tls(url: &str) -> &'static str {
    // sqlx reads the modes whatever their case.
    let url = url.to_ascii_lowercase();
    let asks = url.starts_with("amqps://")
        || url.starts_with("rediss://")
        || url.contains("sslmode=require")
        || url.contains("sslmode=verify")
        || url.contains("ssl-mode=required")
        || url.contains("ssl-mode=verify");
    if asks {
        " (TLS)"
    } else {
        ""
    }
}

/// Creates a namespace of the doctor's own and drops it: what a run does
/// for every strategy.
async fn namespace_round_trip(server: &DbServer) -> Outcome {
    let name = format!(
        "doctor_{}_{}",
        std::process::id(),
        strategies::now_us() % 1_000_000
    );
    let scratch = std::env::temp_dir();
    let created = tokio::time::timeout(CHECK_TIMEOUT, server.create_namespace(&name, &scratch));
    let Ok(created) = created.await else {
        // Not refused: slow. The namespace may be made yet.
        return fail(
            format!(
                "creating namespace {name}: no answer within {}s",
                CHECK_TIMEOUT.as_secs()
            ),
            "the server is slow or a lock holds the statement; when it answers, \
             `delaybench clean` lists the namespace if it was made",
        );
    };
    match created.map_err(|e| e.to_string()) {
        Ok(location) => match within(server.drop_namespace(&location)).await {
            Ok(()) => Outcome::Ok("may create and drop a namespace (schema / database)".into()),
            Err(e) => fail(
                format!("made namespace {name} but could not drop it: {e}"),
                "grant the user DROP on its own schemas/databases; `delaybench clean` lists what is left",
            ),
        },
        Err(e) => fail(
            e,
            "a run creates a schema (PostgreSQL) or a database (MariaDB) per strategy: grant the \
             user CREATE (PostgreSQL: `GRANT CREATE ON DATABASE <db> TO <user>`; MariaDB: \
             `GRANT ALL ON *.* TO <user>`)",
        ),
    }
}

fn render(variants: &[Variant], checks: &[Check]) -> Diagnosis {
    let mut text = String::new();
    let mut blocked: Vec<String> = Vec::new();
    for c in checks {
        let label = format!("{} {}", c.service, c.what);
        match &c.outcome {
            Outcome::Ok(detail) => {
                let _ = writeln!(text, "  ok    {label:<28} {detail}");
            }
            Outcome::Warn { why, fix } => {
                let _ = writeln!(text, "  warn  {label:<28} {why}");
                if !fix.is_empty() {
                    let _ = writeln!(text, "        fix: {fix}");
                }
            }
            Outcome::Fail { why, fix } => {
                let _ = writeln!(text, "  FAIL  {label:<28} {why}");
                let _ = writeln!(text, "        fix: {fix}");
                let _ = writeln!(text, "        blocks: {}", c.needed_by.join(", "));
                for v in &c.needed_by {
                    if !blocked.contains(v) {
                        blocked.push(v.clone());
                    }
                }
            }
        }
    }
    let ready: Vec<String> = variants
        .iter()
        .map(Variant::to_string)
        .filter(|v| !blocked.contains(v))
        .collect();
    let _ = writeln!(
        text,
        "\n{} of {} selected strategies can run{}{}",
        ready.len(),
        variants.len(),
        if ready.is_empty() {
            String::new()
        } else {
            format!(": {}", ready.join(", "))
        },
        if blocked.is_empty() {
            String::new()
        } else {
            format!("; cannot: {}", blocked.join(", "))
        }
    );
    Diagnosis { text, blocked }
}
