//! Every service over TLS, on the local set-up `scripts/tls.sh setup` makes
//! (scripts/test-prepare.sh runs it): on each service's TLS URL a
//! conformance check of a strategy that uses it passes, the connection is
//! TLS (the server says so, or the port speaks nothing else), and a URL
//! without the CA is refused with a hint naming the parameter that fixes
//! it. `eval "$(scripts/tls.sh env)"` runs the whole conformance suite
//! over TLS instead.

#[macro_use]
mod common;

use common::test_options;
use sqlx::Connection;
use strategies::conformance::{self, Check, Fixture};
use strategies::DbServer;

/// The four TLS URLs, from the script that sets the services up (one
/// source for both): PostgreSQL, MariaDB, Redis, RabbitMQ.
fn tls_urls() -> [String; 4] {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/tls.sh");
    let out = std::process::Command::new("bash")
        .args([script, "urls"])
        .output()
        .expect("bash runs scripts/tls.sh");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let urls: Vec<String> = text.lines().map(str::to_string).collect();
    let urls: [String; 4] = urls.try_into().expect("four URLs");
    let ca = strategies::tls::files_of(&urls[0]).unwrap().ca.unwrap();
    assert!(
        ca.exists(),
        "{} is missing: set TLS up with `scripts/tls.sh setup` (as root; \
         scripts/test-prepare.sh does)",
        ca.display()
    );
    urls
}

/// `url` without the parameter `param=…` (the CA or a client file).
fn without(url: &str, param: &str) -> String {
    let (base, query) = url.split_once('?').unwrap();
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| !kv.starts_with(&format!("{param}=")))
        .collect();
    if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

/// Two conformance checks of `strategy` on `db_url`, each on a fixture of
/// its own (as the conformance suite runs them).
async fn conforms(db_url: &str, strategy: &str, options: strategies::StrategyOptions) {
    for check in [
        "fires_after_deadline_never_before",
        "paid_order_never_cancelled",
    ] {
        let fixture = Fixture::new(db_url, strategy, options.clone()).await;
        conformance::run_check(&fixture, Check::named(check))
            .await
            .assert_passed();
        fixture.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls() {
    let [pg, ..] = tls_urls();
    let mut conn = sqlx::PgConnection::connect(&pg).await.unwrap();
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(ssl, "the connection is not TLS");
    conforms(&pg, "db-scan", test_options()).await;
    conforms(&pg, "db-timer", test_options()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_over_tls() {
    let [_, my, ..] = tls_urls();
    let mut conn = sqlx::MySqlConnection::connect(&my).await.unwrap();
    let (_, cipher): (String, String) = sqlx::query_as("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(!cipher.is_empty(), "the connection is not TLS");
    conforms(&my, "db-scan", test_options()).await;
}

/// The TLS Redis speaks nothing but TLS and wants a client certificate,
/// so a check that passes went through both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_over_tls_with_a_client_certificate() {
    let [pg, _, redis, _] = tls_urls();
    let mut options = test_options();
    options.redis_zset.url = redis;
    conforms(&pg, "redis-zset", options).await;
}

/// The TLS listener on 5671 speaks nothing but TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rabbitmq_over_tls() {
    let [pg, _, _, amqp] = tls_urls();
    let mut options = test_options();
    options.rabbit.url = amqp.clone();
    conforms(&pg, "rabbit-ttl", options.clone()).await;
    conforms(&pg, "rabbit-delayed", options).await;
    // The broker's version (run.json's) is read over TLS too.
    let facts = strategies::rabbit::broker_facts(&amqp)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(facts.version.starts_with("RabbitMQ "), "{}", facts.version);
    assert!(facts.delayed_exchange);
}

/// Asserts that `error` is a refusal whose hint names `fix` (for a CA:
/// that the server's certificate is not signed by one this client trusts,
/// and the URL parameter that names one), and that it shows the URL
/// without its password.
fn assert_refused(error: strategies::Error, fix: &str) {
    let text = error.to_string();
    assert!(
        matches!(error, strategies::Error::Unreachable { .. }),
        "{text}"
    );
    assert!(text.contains(fix), "the hint does not name `{fix}`: {text}");
    assert!(!text.contains("guest:guest"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_certificate_names_the_parameter_that_fixes_it() {
    let [pg, my, redis, amqp] = tls_urls();
    for (url, ca) in [(&pg, "sslrootcert"), (&my, "ssl-ca")] {
        let error = DbServer::parse(&without(url, ca))
            .unwrap()
            .server_version()
            .await
            .unwrap_err();
        assert_refused(
            error,
            &format!("trusts: name the CA's PEM file in the URL with `{ca}=/path/ca.pem`"),
        );
    }
    let error = strategies::leftovers::redis_keys(&without(&redis, "cacert"), "dlb:none:*")
        .await
        .unwrap_err();
    assert_refused(error, "`cacert=/path/ca.pem`");
    let error =
        strategies::leftovers::redis_keys(&without(&without(&redis, "cert"), "key"), "dlb:none:*")
            .await
            .unwrap_err();
    assert_refused(
        error,
        "asks for a client certificate: name it and its key with `cert=` and `key=`",
    );
    let error = strategies::rabbit::broker_facts(&without(&amqp, "cacertfile"))
        .await
        .unwrap_err();
    assert_refused(error, "`cacertfile=/path/ca.pem`");
}
