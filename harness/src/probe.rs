//! `delaybench list`: every strategy, the services it needs, and whether
//! those answer now, so a user knows what `--strategies` can run before
//! starting a run.

use crate::service_args::ServiceArgs;
use anyhow::Result;
use std::fmt::Write;
use std::time::Duration;
use strategies::registry::{self, STRATEGIES};
use strategies::{DbServer, Service};

/// How long one probe may take before the service counts as down, for
/// `list` and `doctor` alike (they would otherwise disagree on a slow one).
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// One service's answer (its version, the broker's facts), or why it
/// cannot be used.
async fn within<T>(
    what: impl std::future::Future<Output = Result<T>>,
) -> std::result::Result<T, String> {
    match tokio::time::timeout(PROBE_TIMEOUT, what).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err(format!("no answer within {}s", PROBE_TIMEOUT.as_secs())),
    }
}

/// The listing `delaybench list` prints.
pub async fn list(services: &ServiceArgs) -> Result<String> {
    let (amqp, redis) = services.urls_or_defaults();
    let (amqp, redis) = (amqp.as_str(), redis.as_str());
    let server = DbServer::parse(services.database(crate::service_args::SQLITE)?)?;
    let (database, broker, redis_probe) = tokio::join!(
        within(async { Ok(server.server_version().await?) }),
        within(async { Ok(strategies::rabbit::broker_facts(amqp).await?) }),
        within(crate::redis_stats::version(redis)),
    );
    let rabbit = broker.as_ref().map_err(Clone::clone).map(|facts| {
        if facts.delayed_exchange {
            facts.version.clone()
        } else {
            format!(
                "{}, without the x-delayed-message exchange type (rabbit-delayed needs it: \
                 `bash rabbitmq-plugin/install.sh`)",
                facts.version
            )
        }
    });
    let mut out = String::new();
    writeln!(out, "Services:")?;
    let services = [
        ("database", server.display_url(), &database),
        ("rabbitmq", strategies::redact::url(amqp), &rabbit),
        ("redis", strategies::redact::url(redis), &redis_probe),
    ];
    for (name, url, probe) in &services {
        match probe {
            Ok(version) => writeln!(out, "  {name:<9} up    {url}: {version}")?,
            Err(why) => {
                writeln!(out, "  {name:<9} DOWN  {url}: {why}")?;
                // A refused TLS connection the probe's own client made
                // (the strategies' errors carry their hint already).
                if let Some(hint) =
                    strategies::tls::refusal_hint(url, why).filter(|_| !why.contains("hint:"))
                {
                    writeln!(out, "  hint: {hint}")?;
                }
            }
        }
    }
    // rabbit-ttl needs only the broker; only rabbit-delayed needs the
    // delayed exchange type.
    let broker_up = broker.is_ok();
    let delayed_up = broker.as_ref().is_ok_and(|f| f.delayed_exchange);
    writeln!(
        out,
        "\nStrategies (run with --strategies NAME[,NAME...] or all):"
    )?;
    let width = STRATEGIES.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for s in STRATEGIES {
        let mut missing = Vec::new();
        if database.is_err() {
            missing.push("database");
        }
        for service in s.requires {
            let (up, name) = match service {
                Service::RabbitMq if s.name.starts_with("rabbit-delayed") && broker_up => {
                    (delayed_up, "x-delayed-message")
                }
                Service::RabbitMq => (broker_up, service.name()),
                Service::Redis => (redis_probe.is_ok(), service.name()),
            };
            if !up {
                missing.push(name);
            }
        }
        let needs: Vec<&str> = std::iter::once("database")
            .chain(s.requires.iter().map(|r| r.name()))
            .collect();
        let status = if missing.is_empty() {
            "can run now".to_string()
        } else {
            format!("cannot run: {} down", missing.join(", "))
        };
        let role = match s.role {
            registry::Role::Strategy => "",
            registry::Role::Teaching => " (teaching variant)",
            registry::Role::Baseline => " (baseline)",
        };
        writeln!(
            out,
            "  {:<width$}  needs {:<26} {status}{role}\n  {:<width$}  {}",
            s.name,
            needs.join(", "),
            "",
            s.summary
        )?;
    }
    writeln!(
        out,
        "\n`delaybench doctor` checks each service in detail and says what fixes it.\n\
         Variants: NAME+outbox (rabbit-ttl, rabbit-delayed, redis-zset), NAME+fallback \
         (any but db-scan and db-timer), NAME+outbox+fallback."
    )?;
    Ok(out)
}
