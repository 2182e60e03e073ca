//! The preset scenarios, bundled into the binary so that `--scenario busy`
//! works from any folder. The files live in `harness/scenarios/` (the
//! repository's `scenarios/` links there), so `include_str!` stays inside
//! this crate.

/// One bundled scenario file.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// The name `--scenario` accepts, the file stem.
    pub name: &'static str,
    /// The file, comments included.
    pub text: &'static str,
}

macro_rules! presets {
    ($($name:literal),* $(,)?) => {
        &[$(Preset {
            name: $name,
            text: include_str!(concat!("../scenarios/", $name, ".toml")),
        }),*]
    };
}

/// Every preset, in the order `delaybench scenario list` shows them.
pub const PRESETS: &[Preset] = presets!(
    "quick",
    "busy",
    "probe-cost",
    "mixed-timeouts",
    "instance-crash",
    "service-restarts",
    "service-restarts-compose",
    "chaos",
    "chaos-short",
    "sweep",
    "backlog",
    "backlog-1m",
    "backlog-10m",
    "storm",
    "storm-sweep",
    "redis-cluster",
    "rabbitmq-cluster",
    "rabbitmq-cluster-classic",
);

/// The preset `run` uses when no `--scenario` is given.
pub const RUN_DEFAULT: &str = "quick";
/// The preset `sweep` uses when no `--scenario` is given.
pub const SWEEP_DEFAULT: &str = "sweep";

/// The preset called `name`; `chaos.toml` and `scenarios/chaos.toml` name
/// it too, so commands written for the repository root work anywhere.
pub fn find(name: &str) -> Option<&'static Preset> {
    let path = std::path::Path::new(name);
    let stem = path.file_stem()?.to_str()?;
    let parent = path.parent().and_then(|p| p.to_str()).unwrap_or("");
    let named_like_a_preset = match path.extension() {
        None => parent.is_empty(),
        Some(ext) => ext == "toml" && (parent.is_empty() || parent.ends_with("scenarios")),
    };
    if !named_like_a_preset {
        return None;
    }
    PRESETS.iter().find(|p| p.name == stem)
}

/// The names, comma-separated, for error messages.
pub fn names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_in_the_scenarios_folder_is_bundled() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                path.file_stem().unwrap().to_str().unwrap().to_string()
            })
            .collect();
        files.sort();
        let mut bundled: Vec<String> = PRESETS.iter().map(|p| p.name.to_string()).collect();
        bundled.sort();
        assert_eq!(files, bundled);
    }

    #[test]
    fn presets_are_found_by_name_file_name_and_repository_path() {
        for arg in [
            "chaos",
            "chaos.toml",
            "scenarios/chaos.toml",
            "../x/scenarios/chaos.toml",
        ] {
            assert_eq!(find(arg).map(|p| p.name), Some("chaos"), "{arg}");
        }
        for arg in ["nope", "chaos.yaml", "elsewhere/chaos.toml", ""] {
            assert!(find(arg).is_none(), "{arg}");
        }
    }
}
