use super::*;
use crate::faults::kill_instance::KillInstance;
use crate::faults::{FaultAction, Target};

#[test]
fn every_preset_is_valid_and_survives_being_saved() {
    for preset in crate::presets::PRESETS {
        let (s, origin) = Scenario::load(Some(preset.name), "quick")
            .unwrap_or_else(|e| panic!("{}: {e:#}", preset.name));
        assert_eq!(origin, format!("{} (bundled preset)", preset.name));
        // What a run folder keeps loads back to the same scenario.
        let saved = s.to_toml().unwrap();
        let again = Scenario::parse(&saved, "saved").unwrap();
        assert_eq!(again, s, "{}:\n{saved}", preset.name);
    }
}

#[test]
fn an_unknown_scenario_names_the_presets() {
    let e = Scenario::load(Some("no-such-scenario"), "quick").unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("no-such-scenario")
            && text.contains("chaos")
            && text.contains("scenario list"),
        "{text}"
    );
}

#[test]
fn a_file_wins_over_a_preset_of_the_same_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("quick.toml");
    std::fs::write(&file, QUICK.replace("name = \"quick\"", "name = \"mine\"")).unwrap();
    let (s, origin) = Scenario::load(file.to_str(), "quick").unwrap();
    assert_eq!(
        (s.name.as_str(), origin),
        ("mine", file.display().to_string())
    );
}

#[test]
fn a_run_folders_run_json_is_a_scenario_too() {
    // An older backlog reference had no scenario.toml, and the file
    // it ran (/tmp/backlog-1m.toml) was gone: its run.json (this
    // fixture, trimmed to `run_id` and `scenario`) held it.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/backlog-run.json");
    let (s, origin) = Scenario::load(file.to_str(), "quick").unwrap();
    assert_eq!(s.name, "backlog");
    assert_eq!(
        s.backlog.unwrap().pending,
        vec![0, 10_000, 100_000, 1_000_000]
    );
    assert!(
        origin.ends_with("(the scenario of run 20261130-124547-backlog)"),
        "{origin}"
    );
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("x.json");
    std::fs::write(&other, "{\"run_id\": \"r\"}").unwrap();
    let e = format!("{:#}", Scenario::load(other.to_str(), "quick").unwrap_err());
    assert!(e.contains("has no `scenario`"), "{e}");
}

#[test]
fn rabbit_ttls_default_to_the_timeouts() {
    let s = Scenario::parse(QUICK, "quick").unwrap();
    let ttls = s.strategy_options().rabbit.ttls;
    assert_eq!(ttls, vec![Duration::from_secs(2), Duration::from_secs(4)]);
}

#[test]
fn bundled_quick_scenario_is_valid() {
    let s = Scenario::parse(QUICK, "quick").unwrap();
    assert_eq!(s.name, "quick");
    assert_eq!(s.timeouts.len(), 2);
}

fn error_for(edit: (&str, &str)) -> String {
    let text = QUICK.replace(edit.0, edit.1);
    assert_ne!(text, QUICK, "edit {edit:?} did not apply");
    format!("{:#}", Scenario::parse(&text, "my.toml").unwrap_err())
}

#[test]
fn out_of_range_names_file_field_and_accepted_values() {
    let msg = error_for(("pay-ratio = 0.5", "pay-ratio = 1.5"));
    assert!(
        msg.contains("my.toml") && msg.contains("payments.pay-ratio") && msg.contains("0.0 to 1.0"),
        "{msg}"
    );
    let msg = error_for(("rate = 50.0", "rate = 0.0"));
    assert!(msg.contains("`rate`") && msg.contains("accepted"), "{msg}");
    let msg = error_for(("batch-size = 200", "batch-size = 0"));
    assert!(msg.contains("strategies.db-scan.batch-size"), "{msg}");
}

#[test]
fn faults_parse_and_out_of_range_ones_name_the_field() {
    let with = |fault: &str| format!("{QUICK}\n[[faults]]\n{fault}\n");
    let s = Scenario::parse(
        &with("kind = \"kill-instance\"\nat = \"8s\"\ninstance = 1\nrestart-after = \"3s\""),
        "f.toml",
    )
    .unwrap();
    assert_eq!(
        s.faults,
        vec![Fault {
            at: Duration::from_secs(8),
            action: FaultAction::KillInstance(KillInstance {
                instance: Some(crate::faults::InstanceTarget::Index(1)),
                restart_after: Some(Duration::from_secs(3)),
            }),
        }]
    );
    let s = Scenario::parse(&with("kind = \"kill-instance\"\nat = \"8s\""), "f.toml").unwrap();
    assert_eq!(
        s.faults[0].instance(),
        Some(crate::faults::InstanceTarget::Index(0))
    );
    assert_eq!(
        s.faults[0].action,
        FaultAction::KillInstance(KillInstance {
            instance: None,
            restart_after: None
        })
    );
    let err = |fault: &str| format!("{:#}", Scenario::parse(&with(fault), "f.toml").unwrap_err());
    let msg = err("kind = \"kill-instance\"\nat = \"8s\"\ninstance = 2");
    assert!(
        msg.contains("f.toml") && msg.contains("faults[0].instance") && msg.contains("0 to"),
        "{msg}"
    );
    let msg = err("kind = \"kill-instance\"\nat = \"1h\"");
    assert!(
        msg.contains("faults[0].at") && msg.contains("accepted"),
        "{msg}"
    );
    let msg = err("kind = \"run-command\"\nat = \"1s\"");
    assert!(
        msg.contains("faults[0].command") && msg.contains("sh"),
        "{msg}"
    );
    let msg = err("kind = \"kill-instance\"\nat = \"1s\"\ncommand = [\"true\"]");
    assert!(
        msg.contains("faults[0].command") && msg.contains("\"run-command\" only"),
        "{msg}"
    );
    let s = Scenario::parse(
        &with("kind = \"run-command\"\nat = \"1s\"\ncommand = [\"true\"]"),
        "f.toml",
    )
    .unwrap();
    assert_eq!(s.faults_label().unwrap(), "run `true` at 1s");
    // An instance fault can name a role (issue 41): resolved when it
    // fires; a role it cannot take, or a value that is neither, is named
    // by its field.
    let s = Scenario::parse(
        &with("kind = \"pause-instance\"\nat = \"3s\"\ninstance = \"leader\"\nfor = \"2s\""),
        "f.toml",
    )
    .unwrap();
    assert_eq!(
        s.faults[0].instance(),
        Some(crate::faults::InstanceTarget::Role(
            crate::faults::Role::Leader
        ))
    );
    assert_eq!(s.faults[0].label(), "pause the leader for 2s from 3s");
    let s = Scenario::parse(
        &with(
            "kind = \"crash-at\"\nat = \"3s\"\ninstance = \"claim-holder\"\npoint = \"after-claim\"",
        ),
        "f.toml",
    )
    .unwrap();
    assert_eq!(
        s.faults_label().unwrap(),
        "crash the claim holder at after-claim x1 from 3s"
    );
    for (fault, says) in [
        (
            "kind = \"pause-instance\"\nat = \"1s\"\nfor = \"1s\"\ninstance = \"boss\"",
            "field `faults[0].instance` = \"boss\" is invalid: no role \"boss\"; accepted values: \
             an instance number (0-based) or a role: \"leader\", \"claim-holder\"",
        ),
        (
            "kind = \"kill-instance\"\nat = \"1s\"\ninstance = -1",
            "field `faults[0].instance` = -1 is invalid",
        ),
        (
            "kind = \"kill-instance\"\nat = \"1s\"\ninstance = \"claim-holder\"",
            "field `faults[0].instance` = \"claim-holder\" does not apply to kind = \"kill-instance\"",
        ),
        (
            "kind = \"pause-instance\"\nat = \"1s\"\nfor = \"1s\"\ninstance = \"claim-holder\"",
            "field `faults[0].instance` = \"claim-holder\" needs field `faults[0].point`",
        ),
    ] {
        let msg = err(fault);
        assert!(msg.contains(says), "{msg}");
    }
    // The new kinds: each names what it misses or what it does not take.
    for (fault, field, says) in [
        (
            "kind = \"partition\"\nat = \"1s\"\nfor = \"3s\"",
            "target",
            "rabbitmq",
        ),
        (
            "kind = \"partition\"\nat = \"1s\"\ntarget = \"redis\"",
            "for",
            "3s",
        ),
        (
            "kind = \"latency\"\nat = \"1s\"\ntarget = \"redis\"\nfor = \"1s\"",
            "add",
            "50ms",
        ),
        ("kind = \"pause-instance\"\nat = \"1s\"", "for", "6s"),
        ("kind = \"crash-at\"\nat = \"1s\"", "point", "after-claim"),
        (
            "kind = \"crash-at\"\nat = \"1s\"\npoint = \"after-claim\"\ntimes = 0",
            "times",
            "1 to 100",
        ),
        (
            "kind = \"kill-db-connections\"\nat = \"1s\"\nfor = \"1s\"",
            "for",
            "only",
        ),
        (
            "kind = \"kill-instance\"\nat = \"1s\"\ntarget = \"redis\"",
            "target",
            "only",
        ),
        (
            "kind = \"partition\"\nat = \"1s\"\ntarget = \"redis\"\nfor = \"0s\"",
            "for",
            "1ms to 1h",
        ),
    ] {
        let msg = err(fault);
        assert!(
            msg.contains(&format!("faults[0].{field}")) && msg.contains(says),
            "{fault}: {msg}"
        );
    }
    let msg = err("kind = \"crash-at\"\nat = \"1s\"\npoint = \"after-ack\"");
    assert!(
        msg.contains("after-ack") && msg.contains("after-commit-before-ack"),
        "{msg}"
    );
    let s = Scenario::parse(
        &with(
            "kind = \"latency\"\nat = \"1s\"\ntarget = \"database\"\nadd = \"50ms\"\nfor = \"2s\"",
        ),
        "f.toml",
    )
    .unwrap();
    assert_eq!(
        s.faults_label().unwrap(),
        "+50ms latency to database for 2s at 1s"
    );
    assert_eq!(s.faults[0].lasts(), Duration::from_secs(2));
    let msg = err("kind = \"pull-the-plug\"\nat = \"1s\"");
    assert!(
        msg.contains("pull-the-plug") && msg.contains("kill-instance"),
        "{msg}"
    );
}

#[test]
fn a_field_its_fault_kind_ignores_is_refused_by_name() {
    let err = |fault: &str| {
        let text = format!("{QUICK}\n[[faults]]\nat = \"8s\"\n{fault}\n");
        format!("{:#}", Scenario::parse(&text, "f.toml").unwrap_err())
    };
    for (fault, field) in [
        (
            "kind = \"partition\"\ntarget = \"redis\"\nfor = \"1s\"\ninstance = 1",
            "instance",
        ),
        ("kind = \"kill-db-connections\"\ninstance = 0", "instance"),
        ("kind = \"kill-instance\"\ncommand = [\"true\"]", "command"),
        (
            "kind = \"partition\"\ntarget = \"redis\"\nfor = \"1s\"\nrestart-after = \"1s\"",
            "restart-after",
        ),
        ("kind = \"kill-instance\"\ntarget = \"redis\"", "target"),
        ("kind = \"kill-instance\"\nfor = \"1s\"", "for"),
        (
            "kind = \"partition\"\ntarget = \"redis\"\nfor = \"1s\"\nadd = \"5ms\"",
            "add",
        ),
        ("kind = \"kill-instance\"\npoint = \"after-claim\"", "point"),
        ("kind = \"kill-instance\"\ntimes = 2", "times"),
        (
            "kind = \"run-command\"\ncommand = [\"true\"]\nnode = \"127.0.0.1:7001\"",
            "node",
        ),
        (
            "kind = \"run-command\"\ncommand = [\"true\"]\ntarget = \"rabbitmq\"\nnode = \"h:1\"",
            "node",
        ),
    ] {
        let msg = err(fault);
        assert!(
            msg.contains(&format!("faults[0].{field}`")) && msg.contains("applies to"),
            "{fault}: {msg}"
        );
    }
}

#[test]
fn a_run_command_may_name_the_service_and_node_it_acts_on() {
    let text = format!(
        "{QUICK}\n[[faults]]\nkind = \"run-command\"\nat = \"8s\"\ncommand = [\"true\"]\n\
         target = \"redis\"\nnode = \"127.0.0.1:7001\"\n"
    );
    let s = Scenario::parse(&text, "f.toml").unwrap();
    let FaultAction::RunCommand(command) = &s.faults[0].action else {
        panic!("{:?}", s.faults[0]);
    };
    assert_eq!(command.target, Some(Target::Redis));
    assert_eq!(command.node.as_deref(), Some("127.0.0.1:7001"));
}

#[test]
fn before_each_strategy_parses_and_malformed_ones_name_the_field() {
    let with = |table: &str| format!("{QUICK}\n[before-each-strategy]\n{table}\n");
    let s = Scenario::parse(
        &with("command = [\"scripts/services.sh\", \"rabbitmq-cluster\"]"),
        "h.toml",
    )
    .unwrap();
    let hook = s.before_each_strategy.as_ref().unwrap();
    assert_eq!(hook.command, ["scripts/services.sh", "rabbitmq-cluster"]);
    assert_eq!(hook.timeout, Duration::from_secs(180));
    assert_eq!(hook.label(), "scripts/services.sh rabbitmq-cluster");
    // It survives being saved in the run folder; without it, nothing is written.
    let again = Scenario::parse(&s.to_toml().unwrap(), "saved").unwrap();
    assert_eq!(again, s);
    let quick = Scenario::parse(QUICK, "quick").unwrap();
    assert!(!quick.to_toml().unwrap().contains("before-each-strategy"));
    let s = Scenario::parse(&with("command = [\"true\"]\ntimeout = \"2s\""), "h.toml").unwrap();
    assert_eq!(
        s.before_each_strategy.unwrap().timeout,
        Duration::from_secs(2)
    );
    let err = |table: &str| format!("{:#}", Scenario::parse(&with(table), "h.toml").unwrap_err());
    // A command line as one string (the shell habit) is refused by name.
    let msg = err("command = \"scripts/services.sh rabbitmq-cluster\"");
    assert!(
        msg.contains("h.toml")
            && msg.contains("before-each-strategy.command")
            && msg.contains("array of strings"),
        "{msg}"
    );
    let msg = err("command = [\"sh\", 3]");
    assert!(msg.contains("before-each-strategy.command"), "{msg}");
    for table in ["command = []", "command = [\"\"]"] {
        let msg = err(table);
        assert!(
            msg.contains("before-each-strategy.command") && msg.contains("no program"),
            "{table}: {msg}"
        );
    }
    let msg = err("timeout = \"2s\"");
    assert!(msg.contains("command"), "{msg}");
    let msg = err("command = [\"true\"]\ntimeout = \"0s\"");
    assert!(
        msg.contains("before-each-strategy.timeout") && msg.contains("1ms to 24h"),
        "{msg}"
    );
    let msg = err("command = [\"true\"]\ntimeout = \"soon\"");
    assert!(msg.contains("timeout") && msg.contains("soon"), "{msg}");
    let msg = err("command = [\"true\"]\ntimout = \"2s\"");
    assert!(msg.contains("timout") && msg.contains("timeout"), "{msg}");
}

#[test]
fn malformed_values_name_the_field() {
    let msg = error_for(("duration = \"15s\"", "duration = \"fifteen\""));
    assert!(msg.contains("my.toml") && msg.contains("duration"), "{msg}");
    let msg = error_for(("rate = 50.0", "rte = 50.0"));
    assert!(msg.contains("rte") && msg.contains("rate"), "{msg}");
    let msg = error_for(("[strategies.db-scan]", "[strategies.db-scna]"));
    assert!(msg.contains("db-scna") && msg.contains("db-scan"), "{msg}");
}

#[test]
fn a_storm_parses_and_out_of_range_fields_are_named() {
    let storm = crate::presets::find("storm").unwrap().text;
    let s = Scenario::parse(storm, "storm").unwrap();
    let st = s.storm.clone().unwrap();
    assert_eq!(
        (&st.orders[..], st.at),
        (&[100_000][..], Duration::from_secs(10))
    );
    // rabbit-ttl gets a wait queue as long as the storm's lead.
    let lead = st.lead(100_000);
    assert!(s.strategy_options().rabbit.ttls.contains(&lead));
    assert!(lead > st.at + Duration::from_secs(5));
    let error = |from: &str, to: &str| {
        let text = storm.replace(from, to);
        assert_ne!(text, storm, "edit {from:?} did not apply");
        format!("{:#}", Scenario::parse(&text, "my.toml").unwrap_err())
    };
    for at in ["\"1s\"", "\"52s\""] {
        let e = error("at = \"10s\"", &format!("at = {at}"));
        assert!(
            e.contains("storm.at") && e.contains("after the warm-up"),
            "{e}"
        );
    }
    let e = error("orders = [100000]", "orders = [0]");
    assert!(
        e.contains("storm.orders") && e.contains("1 to 10000000"),
        "{e}"
    );
    let e = error("initial = 10000000", "initial = 1000");
    assert!(e.contains("stock.initial") && e.contains("storm"), "{e}");
}

#[test]
fn hosts_parse_and_what_cannot_go_with_them_is_named() {
    let hosts = |agents: &str, rest: &str| {
        Scenario::parse(
            &format!("{QUICK}\n{rest}\n[hosts]\nagents = {agents}\n"),
            "my.toml",
        )
    };
    let s = hosts(r#"["10.0.0.2:7710", "agent-b:7710"]"#, "").unwrap();
    assert_eq!(s.hosts.agents, ["10.0.0.2:7710", "agent-b:7710"]);
    // Saved and read back, as every run's scenario.toml is.
    let again = Scenario::parse(&s.to_toml().unwrap(), "saved").unwrap();
    assert_eq!(again.hosts, s.hosts);
    for (agents, named) in [
        (r#"["10.0.0.2"]"#, "hosts.agents[0]"),
        (r#"["10.0.0.2:7710", ":7710"]"#, "hosts.agents[1]"),
        (r#"["a:7710", "a:7710"]"#, "listed twice"),
    ] {
        let msg = format!("{:#}", hosts(agents, "").unwrap_err());
        assert!(msg.contains(named), "{agents}: {msg}");
    }
    let a = r#"["10.0.0.2:7710"]"#;
    let msg = format!(
        "{:#}",
        hosts(a, "[network]\npreset = \"same-zone\"\n").unwrap_err()
    );
    assert!(msg.contains("`[network]` and `[hosts]`"), "{msg}");
    for (fault, says) in [
        (
            "kind = \"partition\"\ntarget = \"redis\"\nat = \"3s\"\nfor = \"1s\"",
            "faults[0]",
        ),
        (
            "kind = \"pause-instance\"\nat = \"3s\"\nfor = \"1s\"",
            "SIGSTOP",
        ),
    ] {
        let msg = format!(
            "{:#}",
            hosts(a, &format!("[[faults]]\n{fault}\n")).unwrap_err()
        );
        assert!(msg.contains(says), "{fault}: {msg}");
    }
    // A fault that acts through the pool works on agents too.
    hosts(a, "[[faults]]\nkind = \"kill-instance\"\nat = \"3s\"\n").unwrap();
}

#[test]
fn a_sharded_generator_needs_agents() {
    let text = format!("{QUICK}\n[hosts]\ngenerator = \"agents\"\n");
    let msg = format!("{:#}", Scenario::parse(&text, "my.toml").unwrap_err());
    assert!(msg.contains("hosts.generator"), "{msg}");
    let text = format!("{QUICK}\n[hosts]\nagents = [\"a:1\"]\ngenerator = \"everywhere\"\n");
    let msg = format!("{:#}", Scenario::parse(&text, "my.toml").unwrap_err());
    assert!(msg.contains("generator"), "{msg}");
    let text = format!("{QUICK}\n[hosts]\nagents = [\"a:1\"]\ngenerator = \"agents\"\n");
    assert!(Scenario::parse(&text, "my.toml")
        .unwrap()
        .hosts
        .sharded_generator());
}

// `--set` (scenario/overrides.rs)
fn quick_scenario() -> Scenario {
    Scenario::load(Some("quick"), "quick").unwrap().0
}

fn set(text: &str) -> overrides::Set {
    text.parse().unwrap()
}

#[test]
fn fields_at_any_depth_take_typed_values() {
    let s = quick_scenario()
        .with_sets(&[
            set("rate=30"),
            set("duration=5s"),
            set("payments.pay-ratio=0.8"),
            set("timeouts[0].after=3s"),
            set("seed=7"),
            set("name=2026"),
        ])
        .unwrap();
    assert_eq!(s.rate, 30.0);
    assert_eq!(s.duration, std::time::Duration::from_secs(5));
    assert_eq!(s.payments.pay_ratio, 0.8);
    assert_eq!(s.timeouts[0].after, std::time::Duration::from_secs(3));
    assert_eq!(s.seed, 7);
    assert_eq!(s.name, "2026");
    // What ran is what scenario.toml records, and it loads back.
    let back = Scenario::parse(&s.to_toml().unwrap(), "test").unwrap();
    assert_eq!(back, s);
}

#[test]
fn a_bad_set_names_the_field_and_what_is_accepted() {
    let err = |text: &str| {
        format!(
            "{:#}",
            quick_scenario().with_sets(&[set(text)]).unwrap_err()
        )
    };
    let e = err("payments.pay-ration=0.8");
    assert!(e.contains("--set payments.pay-ration=0.8"), "{e}");
    assert!(e.contains("pay-ration") && e.contains("pay-ratio"), "{e}");
    let e = err("payments.pay-ratio=1.5");
    assert!(
        e.contains("`payments.pay-ratio`") && e.contains("0.0 to 1.0"),
        "{e}"
    );
    let e = err("rate=fast");
    assert!(e.contains("--set rate=fast"), "{e}");
    let e = err("timeouts[9].after=1s");
    assert!(e.contains("`timeouts[9]`") && e.contains("element"), "{e}");
    let e = err("rate.x=1");
    assert!(e.contains("`rate.x`") && e.contains("not a table"), "{e}");
    assert!("rate"
        .parse::<overrides::Set>()
        .unwrap_err()
        .contains("key=value"));
    assert!("=3"
        .parse::<overrides::Set>()
        .unwrap_err()
        .contains("names no field"));
}
