//! The fault kinds, listed once. Each line names a kind's module (its own
//! file beside this one, which holds its configuration, validation, label,
//! injection and the rules read from its record), its type, and its name in
//! scenarios and records. What goes through every kind is generated from
//! this list: the module declarations (`faults/mod.rs`), the [`FaultKind`]
//! tag below, and the [`FaultAction`](super::FaultAction) configuration
//! with its dispatch (`fault.rs`). A new kind is its file plus one line
//! here.

use serde::{Deserialize, Serialize};

/// Calls `$then!` with every fault kind, one `module::Type "name",` each.
macro_rules! every_fault_kind {
    ($then:ident) => {
        $then! {
            kill_instance::KillInstance "kill-instance",
            run_command::RunCommand "run-command",
            partition::Partition "partition",
            latency::Latency "latency",
            pause_instance::PauseInstance "pause-instance",
            kill_db_connections::KillDbConnections "kill-db-connections",
            crash_at::CrashAt "crash-at",
        }
    };
}
pub(super) use every_fault_kind;

macro_rules! fault_kind_tag {
    ($($module:ident::$kind:ident $name:literal,)*) => {
        /// What a fault does, without its settings: the `kind` of a
        /// `[[faults]]` table and of a fault's record in `summary.json`.
        /// Each kind is documented with its configuration type.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        pub enum FaultKind {
            $(#[serde(rename = $name)] $kind,)*
        }

        impl FaultKind {
            /// Every kind, in the list's order.
            pub const ALL: &[FaultKind] = &[$(FaultKind::$kind,)*];

            /// The scenario's name, e.g. `pause-instance`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(FaultKind::$kind => $name,)*
                }
            }
        }
    };
}
every_fault_kind!(fault_kind_tag);

impl FaultKind {
    /// The kind a scenario names, e.g. `pause-instance`.
    pub fn named(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.iter().copied().find(|k| k.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::FaultKind;

    #[test]
    fn each_kind_is_named_as_serde_names_it() {
        for kind in FaultKind::ALL {
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(FaultKind::named(kind.as_str()), Some(*kind));
        }
        assert_eq!(FaultKind::named("pull-the-plug"), None);
    }
}
