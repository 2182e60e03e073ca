//! The scenario field reference: `harness/scenario-reference.toml`, a
//! commented scenario file naming every key with its default and what it
//! does. `delaybench scenario init` writes it as a starting file, and the
//! README links it; a test keeps it complete.

/// The commented starting file, every key in it.
pub const REFERENCE: &str = include_str!("../scenario-reference.toml");

/// What `delaybench scenario init` writes.
pub fn starting_file() -> &'static str {
    REFERENCE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::FaultKind;
    use crate::scenario::Scenario;

    /// The reference with every `# key = value` and `# [table]` line
    /// uncommented: every example it shows but `[hosts]`'s, which cannot
    /// go with `[network]` and the network faults the others show, and is
    /// checked on its own ([`hosts_example`]).
    fn every_example() -> String {
        let (rest, hosts) = split_hosts(&every_example_with_hosts());
        assert!(
            hosts.contains("agents = "),
            "the [hosts] example moved: {hosts}"
        );
        rest
    }

    /// The reference alone with its `[hosts]` example.
    fn hosts_example() -> String {
        let (_, hosts) = split_hosts(&every_example_with_hosts());
        format!("{REFERENCE}\n{hosts}")
    }

    /// `text` without the `[hosts]` table (up to the next `# ----`
    /// section), and that table.
    fn split_hosts(text: &str) -> (String, String) {
        let (mut rest, mut hosts, mut inside) = (Vec::new(), Vec::new(), false);
        for line in text.lines() {
            if line == "[hosts]" {
                inside = true;
            } else if line.starts_with("# ----") {
                inside = false;
            }
            if inside { &mut hosts } else { &mut rest }.push(line);
        }
        (rest.join("\n"), hosts.join("\n"))
    }

    fn every_example_with_hosts() -> String {
        REFERENCE
            .lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(rest)
                    if (rest.starts_with('[') && rest.ends_with(']') && !rest.contains(' '))
                        || rest.split_once(" = ").is_some_and(|(k, _)| {
                            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                        }) =>
                {
                    rest
                }
                _ => line,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn keys(value: &toml::Value, out: &mut std::collections::BTreeSet<String>) {
        match value {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    out.insert(k.clone());
                    keys(v, out);
                }
            }
            toml::Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }

    #[test]
    fn the_reference_is_a_valid_scenario_and_so_are_its_examples() {
        Scenario::parse(REFERENCE, "reference").unwrap();
        let examples = every_example();
        let s =
            Scenario::parse(&examples, "examples").unwrap_or_else(|e| panic!("{e:#}\n{examples}"));
        let mut kinds: Vec<&str> = s.faults.iter().map(|f| f.kind().as_str()).collect();
        let mut every: Vec<&str> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
        kinds.sort_unstable();
        every.sort_unstable();
        assert_eq!(kinds, every, "one example per fault kind");
        assert!(s.backlog.is_some());
    }

    #[test]
    fn the_reference_names_every_key_a_scenario_can_have() {
        let mut all = std::collections::BTreeSet::new();
        let everything = Scenario::parse(&every_example(), "examples").unwrap();
        let presets = crate::presets::PRESETS
            .iter()
            .map(|p| Scenario::parse(p.text, p.name).unwrap());
        let hosts = Scenario::parse(&hosts_example(), "hosts example").unwrap();
        assert_eq!(hosts.hosts.agents.len(), 2);
        for s in [everything, hosts].into_iter().chain(presets) {
            let value: toml::Value = toml::from_str(&s.to_toml().unwrap()).unwrap();
            keys(&value, &mut all);
        }
        let named = |key: &str| {
            REFERENCE.lines().any(|l| {
                let l = l.trim_start_matches("# ");
                l.starts_with(&format!("{key} = "))
                    || l.contains(&format!("[strategies.{key}]"))
                    || l.contains(&format!("[{key}."))
                    || (l.starts_with('[') && l.contains(&format!(".{key}]")))
                    || l.contains(&format!("[{key}]"))
                    || l.contains(&format!("[[{key}]]"))
            })
        };
        let missing: Vec<&String> = all.iter().filter(|k| !named(k)).collect();
        assert!(
            missing.is_empty(),
            "keys missing from scenario-reference.toml: {missing:?}"
        );
        assert!(all.len() > 60, "{all:?}");
    }
}
