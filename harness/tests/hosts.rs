//! `[hosts]` end to end: canceller instances on two other hosts, each a
//! network namespace this test makes (a veth pair to this host, its own
//! loopback, its own process tree) with a `delaybench agent` in it. The
//! services listen on this host's loopback only, so the namespaces reach
//! them through `delaybench forward` on this host's end of the first veth,
//! and every part of the run (the order service and the checker here too)
//! uses those addresses. Each agent runs one canceller instance and one
//! generator shard. One agent pretends its host's clock is 250 ms ahead:
//! the harness must find that offset and correct it, or that instance
//! would cancel its orders 250 ms early (which the checker's payments
//! clock shows: 8 and 13 early cancels with the correction off) and its
//! shard would write deadlines 250 ms late.
//!
//! Needs root (namespaces, veth); `scripts/test-long.sh` runs it as root.
#![cfg(feature = "long-tests")]

mod common;

use common::{pg, run_dir_of, stderr};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "hosts-test-token";
/// The clock skew agent b pretends to, µs.
const SKEW_US: i64 = 250_000;

/// Runs `ip` with `args`, panicking with its error.
fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Two namespaces, `10.<k>.1.2` and `10.<k>.2.2`, each with a veth to this
/// host (`10.<k>.n.1`) and a default route through it; removed, with every
/// process this test started, on drop.
struct Hosts {
    namespaces: Vec<String>,
    subnet: u32,
    children: Vec<Child>,
}

impl Hosts {
    fn new() -> Hosts {
        // A subnet of the 10.x space per test process, so two runs of the
        // suite side by side do not collide.
        let subnet = 100 + std::process::id() % 100;
        let mut hosts = Hosts {
            namespaces: Vec::new(),
            subnet,
            children: Vec::new(),
        };
        for n in 1..=2 {
            let ns = format!("dlb-{}-{n}", std::process::id());
            let (host_if, ns_if) = (
                format!("dlbh{}{n}", std::process::id() % 100_000),
                format!("dlbn{}{n}", std::process::id() % 100_000),
            );
            ip(&["netns", "add", &ns]);
            hosts.namespaces.push(ns.clone());
            ip(&[
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if, "netns", &ns,
            ]);
            ip(&[
                "addr",
                "add",
                &format!("10.{subnet}.{n}.1/24"),
                "dev",
                &host_if,
            ]);
            ip(&["link", "set", &host_if, "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("10.{subnet}.{n}.2/24"),
                "dev",
                &ns_if,
            ]);
            ip(&["-n", &ns, "link", "set", &ns_if, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&[
                "-n",
                &ns,
                "route",
                "add",
                "default",
                "via",
                &format!("10.{subnet}.{n}.1"),
            ]);
        }
        hosts
    }

    /// This host's address every part of the run reaches the services at.
    fn gateway(&self) -> String {
        format!("10.{}.1.1", self.subnet)
    }

    /// Starts `delaybench args…` (inside namespace `ns`, if given) and
    /// waits for the first stderr line, which it returns.
    fn start(&mut self, ns: Option<usize>, args: &[&str]) -> String {
        let exe = env!("CARGO_BIN_EXE_delaybench");
        let mut command = match ns {
            Some(n) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &self.namespaces[n], exe]);
                c
            }
            None => Command::new(exe),
        };
        let mut child = command
            .args(args)
            .env("DELAYBENCH_AGENT_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start delaybench");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().expect("a first line").expect("readable");
        // Keep draining, so a chatty process never blocks on its pipe.
        std::thread::spawn(move || lines.for_each(drop));
        self.children.push(child);
        first
    }

    /// A forwarder on the gateway to `to`; returns its address.
    fn forward(&mut self, to: &str) -> String {
        let listen = format!("{}:0", self.gateway());
        let line = self.start(None, &["forward", "--listen", &listen, "--to", to]);
        // `delaybench forward: 10.k.1.1:PORT -> to`
        line.split_whitespace()
            .nth(2)
            .unwrap_or_else(|| panic!("forward said {line:?}"))
            .to_string()
    }

    /// An agent in namespace `n`, listening on its address; returns it.
    fn agent(&mut self, n: usize, skew_us: i64) -> String {
        let listen = format!("10.{}.{}.2:7710", self.subnet, n + 1);
        let skew = skew_us.to_string();
        let line = self.start(
            Some(n),
            &["agent", "--listen", &listen, "--clock-skew-us", &skew],
        );
        assert!(line.contains("listening on"), "agent said {line:?}");
        listen
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Deleting a namespace removes its veth pair.
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "delete", ns]).output();
        }
    }
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delaybench"))
        .args(args)
        .env("CI", "true")
        .env("DELAYBENCH_AGENT_TOKEN", TOKEN)
        .output()
        .expect("run delaybench")
}

#[test]
fn instances_on_two_namespace_hosts_stay_correct_with_their_clocks_corrected() {
    assert!(
        nix_is_root(),
        "this test makes network namespaces and needs root (scripts/test-long.sh runs it as root)"
    );
    let mut hosts = Hosts::new();
    let pg_url = url::Url::parse(&pg()).unwrap();
    let db = hosts.forward(&format!(
        "{}:{}",
        pg_url.host_str().unwrap(),
        pg_url.port().unwrap_or(5432)
    ));
    let redis = hosts.forward("127.0.0.1:6379");
    let agent_a = hosts.agent(0, 0);
    let agent_b = hosts.agent(1, SKEW_US);

    let scratch = common::Scratch::new();
    let scenario = scratch.path().join("hosts.toml");
    let quick = run(&["scenario", "show", "quick"]);
    assert!(quick.status.success(), "{}", stderr(&quick));
    let text = String::from_utf8(quick.stdout)
        .unwrap()
        .replace("duration = \"15s\"", "duration = \"5s\"");
    assert!(text.contains("duration = \"5s\""), "quick changed: {text}");
    std::fs::write(
        &scenario,
        format!(
            "{text}\n[[faults]]\nkind = \"kill-instance\"\ninstance = 1\nat = \"3s\"\n\
             restart-after = \"500ms\"\n\n\
             [hosts]\nagents = [\"{agent_a}\", \"{agent_b}\"]\ngenerator = \"agents\"\n"
        ),
    )
    .unwrap();
    let out = scratch.path().join("results");
    let mut db_url = pg_url.clone();
    let (host, port) = db.rsplit_once(':').unwrap();
    db_url.set_host(Some(host)).unwrap();
    db_url.set_port(Some(port.parse().unwrap())).unwrap();
    let started = Instant::now();
    let o = run(&[
        "run",
        "--scenario",
        scenario.to_str().unwrap(),
        "--strategies",
        "db-timer,timing-wheel,redis-zset",
        "--db",
        db_url.as_str(),
        "--redis",
        &format!("redis://{redis}"),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "{}\n{}",
        stderr(&o),
        common::anomalies_under(&out)
    );
    assert!(started.elapsed() < Duration::from_secs(600));
    let dir = run_dir_of(&o);
    for strategy in ["db-timer", "timing-wheel", "redis-zset"] {
        let summary: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(strategy).join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(summary["status"], "ok", "{strategy}: {summary:#}");
        for (anomaly, n) in summary["anomalies"].as_object().unwrap() {
            assert_eq!(n, 0, "{strategy}: {anomaly}");
        }
        // Instance 0 on agent a, instance 1 on agent b, each clock found
        // where it is, within the reading's bound (plus a little for the
        // namespaces' scheduling).
        let hosts = summary["hosts"].as_array().expect("hosts records");
        assert_eq!(hosts.len(), 2, "{hosts:?}");
        for (host, agent, skew, instance) in [
            (&hosts[0], &agent_a, 0, 0),
            (&hosts[1], &agent_b, SKEW_US, 1),
        ] {
            assert_eq!(host["agent"], agent.as_str(), "{host}");
            assert_eq!(host["instances"], serde_json::json!([instance]), "{host}");
            for reading in [&host["clock_at_start"], &host["clock_at_end"]] {
                let offset = reading["offset_us"].as_i64().unwrap();
                let bound = reading["uncertainty_us"].as_i64().unwrap();
                assert!(
                    (offset - skew).abs() <= bound + 500,
                    "{strategy}: agent {agent} read {offset} µs ± {bound}, its skew is {skew}"
                );
            }
        }
        // The one on agent b was killed
        // through its agent and started again there.
        let workers = summary["cost"]["instances"].as_array().unwrap();
        assert_eq!(workers.len(), 3, "{strategy}: {workers:#?}");
        assert!(
            workers
                .iter()
                .any(|w| w["end"] == "killed by the harness (kill-instance fault)"),
            "{strategy}: {workers:#?}"
        );
        // A wheel's instance cancels the orders routed to it, so each host
        // cancelled; the others' instances share one schedule, and which
        // of them cancels is theirs to decide.
        let own_shares = strategy == "timing-wheel";
        for instance in [0, 1].into_iter().filter(|i| own_shares || *i == 0) {
            let cancelled: u64 = workers
                .iter()
                .filter(|w| !own_shares || w["instance"] == instance)
                .map(|w| w["total"]["cancelled"].as_u64().unwrap())
                .sum();
            assert!(
                cancelled > 0,
                "{strategy}: instance {instance}: {workers:#?}"
            );
        }
        // The generator ran as two shards, one per agent: every planned
        // order made, each handed to an instance.
        let generator = &summary["generator"];
        assert_eq!(
            generator["created"], generator["orders_planned"],
            "{generator:#}"
        );
        assert_eq!(generator["unscheduled"], 0, "{generator:#}");
        assert_eq!(generator["create_errors"], 0, "{generator:#}");
        assert_eq!(hosts[0]["generator_shard"], 0, "{hosts:?}");
        assert_eq!(hosts[1]["generator_shard"], 1, "{hosts:?}");
        let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(report.contains("Hosts ([hosts])"), "{report}");
        assert!(
            report.contains(&format!(
                "- host: the agent at {agent_b} ran instance 1 and generator shard 1; its clock \
                 read +2"
            )),
            "{report}"
        );
    }
}

fn nix_is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
