//! `delaybench doctor` on the real services: every check passes where the
//! services are up, and each way a service can be unusable fails with its
//! own fix and exit status 1: a service that is down, a refused login, a
//! refused certificate. (A broker without the delayed-message plugin is
//! checked on a node of its own in `management_tls.rs`, a long test.)

mod common;

use common::{delaybench, mysql, pg, stderr};
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn doctor(args: &[&str]) -> Output {
    let mut all = vec!["doctor"];
    all.extend(args);
    delaybench(&all)
}

/// `o` failed with exit status 1, and its output holds each of `expected`.
fn fails_with(o: &Output, expected: &[&str]) {
    let text = format!("{}{}", stdout(o), stderr(o));
    assert_eq!(o.status.code(), Some(1), "{text}");
    for e in expected {
        assert!(text.contains(e), "no `{e}` in:\n{text}");
    }
}

#[test]
fn every_check_passes_on_the_running_services() {
    for db in [pg(), mysql(), "sqlite://".into()] {
        let o = doctor(&["--db", &db]);
        let text = stdout(&o);
        assert!(o.status.success(), "{text}{}", stderr(&o));
        for expected in [
            "ok    database reachable",
            "ok    database privileges",
            "ok    rabbitmq reachable",
            "ok    rabbitmq x-delayed-message",
            "ok    redis reachable",
            "6 of 6 selected strategies can run",
        ] {
            assert!(text.contains(expected), "no `{expected}` in:\n{text}");
        }
    }
    // Only what the selected strategies need is checked.
    let o = doctor(&["-S", "db-scan"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("rabbitmq"), "{}", stdout(&o));
}

#[test]
fn a_service_that_is_down_is_named_with_how_to_start_it() {
    let o = doctor(&["-S", "redis-zset", "--redis", "redis://127.0.0.1:1"]);
    fails_with(
        &o,
        &[
            "FAIL  redis reachable",
            "fix: start Redis",
            "blocks: redis-zset",
            "0 of 1 selected strategies can run",
        ],
    );
    let o = doctor(&[
        "-S",
        "rabbit-ttl",
        "--amqp",
        "amqp://guest:guest@127.0.0.1:1/%2f",
    ]);
    fails_with(&o, &["FAIL  rabbitmq reachable", "start RabbitMQ"]);
    let o = doctor(&["-S", "db-scan", "--db", "postgres://root@127.0.0.1:1/test"]);
    fails_with(&o, &["FAIL  database reachable", "start PostgreSQL"]);
}

#[test]
fn a_wrong_password_is_told_from_a_service_that_is_down() {
    let o = doctor(&[
        "-S",
        "rabbit-ttl",
        "--amqp",
        "amqp://guest:hunter2@127.0.0.1:5672/%2f",
    ]);
    fails_with(
        &o,
        &[
            "FAIL  rabbitmq reachable",
            "refused the login",
            "blocks: rabbit-ttl",
        ],
    );
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!text.contains("hunter2"), "a password printed:\n{text}");
    assert!(!text.contains("start RabbitMQ"), "{text}");
    let o = doctor(&[
        "-S",
        "db-scan",
        "--db",
        "mysql://root:hunter2@127.0.0.1:3306/test",
    ]);
    fails_with(&o, &["FAIL  database reachable", "refused the login"]);
    assert!(!stdout(&o).contains("hunter2"), "{}", stdout(&o));
}

#[test]
fn a_refused_certificate_names_the_url_parameter_that_fixes_it() {
    // scripts/tls.sh's Redis over TLS, without the CA in the URL.
    let o = doctor(&["-S", "redis-zset", "--redis", "rediss://localhost:6380"]);
    fails_with(
        &o,
        &[
            "FAIL  redis reachable",
            "UnknownIssuer",
            "`cacert=/path/ca.pem`",
        ],
    );
    let o = doctor(&[
        "-S",
        "db-scan",
        "--db",
        "postgres://root@localhost:5432/test?sslmode=verify-full",
    ]);
    fails_with(
        &o,
        &["FAIL  database reachable", "`sslrootcert=/path/ca.pem`"],
    );
    let o = doctor(&[
        "-S",
        "rabbit-ttl",
        "--amqp",
        "amqps://guest:guest@localhost:5671/%2f",
    ]);
    fails_with(
        &o,
        &["FAIL  rabbitmq reachable", "`cacertfile=/path/ca.pem`"],
    );
}
