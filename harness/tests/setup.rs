//! `scripts/setup.sh`, the set-up the README's test command runs first:
//! on a scratch PostgreSQL cluster made here the way Debian makes one
//! (peer on the socket, a password over TCP, no `root` role, no `test`
//! database) it lets the tests' `postgres://root@127.0.0.1/test` in, and a
//! second run changes nothing; on a machine without the services (a PATH
//! without their programs) `--dry-run` lists the packages and the commands
//! instead. Needs root (runuser, initdb as postgres).

use std::path::PathBuf;
use std::process::{Command, Output};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/setup.sh");
const PORT: &str = "5499";

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// PostgreSQL's own programs (initdb, pg_ctl) of the newest installed major.
fn pg_bin() -> PathBuf {
    let mut majors: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL installed under /usr/lib/postgresql (scripts/setup.sh installs it)")
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    majors.sort();
    majors
        .pop()
        .expect("an initdb under /usr/lib/postgresql/*/bin")
}

fn as_postgres(args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .args(args)
        .output()
        .expect("runuser (the test needs root)")
}

/// A cluster in a folder of its own on 127.0.0.1:5499, stopped on drop.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn start() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let chown = Command::new("chown")
            .args(["postgres", dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(chown.success(), "chown postgres (needs root)");
        let data = dir.path().join("data");
        let bin = pg_bin();
        let o = as_postgres(&[
            bin.join("initdb").to_str().unwrap(),
            "-D",
            data.to_str().unwrap(),
            "-U",
            "postgres",
            "--auth-local=peer",
            "--auth-host=scram-sha-256",
        ]);
        assert!(o.status.success(), "initdb: {}", text(&o));
        let options = format!(
            "-p {PORT} -k {} -c listen_addresses=127.0.0.1",
            dir.path().display()
        );
        let o = as_postgres(&[
            bin.join("pg_ctl").to_str().unwrap(),
            "-D",
            data.to_str().unwrap(),
            "-o",
            &options,
            "-l",
            dir.path().join("log").to_str().unwrap(),
            "-w",
            "start",
        ]);
        assert!(o.status.success(), "pg_ctl start: {}", text(&o));
        Scratch { dir }
    }

    fn setup(&self) -> Output {
        Command::new("bash")
            .args([SCRIPT, "postgres"])
            .env("DELAYBENCH_SETUP_PG_PORT", PORT)
            .env(
                "DELAYBENCH_SETUP_PG_ADMIN",
                format!(
                    "runuser -u postgres -- psql -h {} -p {PORT}",
                    self.dir.path().display()
                ),
            )
            .output()
            .unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = as_postgres(&[
            pg_bin().join("pg_ctl").to_str().unwrap(),
            "-D",
            data.to_str().unwrap(),
            "-m",
            "immediate",
            "stop",
        ]);
    }
}

fn root_logs_in() -> bool {
    Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            PORT,
            "-U",
            "root",
            "-d",
            "test",
            "-Atc",
            "SELECT 1",
        ])
        .env_remove("PGPASSWORD")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_fresh_postgres_cluster_is_set_up_for_the_tests() {
    let scratch = Scratch::start();
    assert!(
        !root_logs_in(),
        "the scratch cluster let root in before the set-up"
    );
    let o = scratch.setup();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("CREATE ROLE root"), "{out}");
    assert!(
        root_logs_in(),
        "root cannot log in after the set-up:\n{out}"
    );
    // A second run finds it done and changes nothing.
    let again = scratch.setup();
    let out = text(&again);
    assert!(again.status.success(), "{out}");
    assert!(!out.contains("running:"), "{out}");
    assert!(out.contains("role root logs in to database test"), "{out}");
}

#[test]
fn without_the_services_a_dry_run_lists_the_packages_and_commands() {
    // A PATH holding only what the script itself runs: no psql, mariadb,
    // redis-server, erlc, openssl or chromium.
    let bin = tempfile::tempdir().unwrap();
    for tool in ["bash", "env", "id", "cat", "printf", "grep", "sed", "rm"] {
        let found = Command::new("bash")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        std::os::unix::fs::symlink(&path, bin.path().join(tool)).unwrap();
    }
    let o = Command::new(bin.path().join("bash"))
        .args([SCRIPT, "--dry-run"])
        .env("PATH", bin.path())
        .output()
        .unwrap();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for expected in [
        "would run: env DEBIAN_FRONTEND=noninteractive apt-get install",
        "postgresql",
        "redis-server",
        "erlang-dev",
        "chromium",
        "CREATE ROLE root SUPERUSER LOGIN",
        "CREATE DATABASE IF NOT EXISTS test",
        "run as root to do this",
    ] {
        assert!(out.contains(expected), "no `{expected}` in:\n{out}");
    }
    assert!(!out.contains("running:"), "a dry run ran something:\n{out}");
}
