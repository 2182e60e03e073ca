//! A scenario's `[[faults]]`: [`Fault`], a time and a [`FaultAction`] of one
//! kind, read from and written to the scenario's TOML (and `run.json`);
//! and every question that goes through the kinds, answered by the kind
//! at hand: its checks, label and injection for a fault, and for a
//! record whether it took effect, when it was in effect and how it reads.
//! The dispatch is generated from the list of kinds (`list.rs`).

use super::context::FaultContext;
use super::fields::{FieldError, Fields};
use super::kind::Kind;
use super::list::{every_fault_kind, FaultKind};
use super::record::{FaultReach, FaultRecord, Span};
use super::role::{InstanceTarget, Role};
use super::target::Target;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::time::Duration;

/// `[[faults]]`: something that goes wrong during the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// When, counted from the first order (warm-up included).
    pub at: Duration,
    /// What goes wrong, with the fields its kind takes.
    pub action: FaultAction,
}

/// A `[[faults]]` table as written: its kind and time, then the fields
/// its kind takes.
#[derive(Serialize)]
struct Table<'a, K> {
    kind: &'static str,
    #[serde(with = "humantime_serde")]
    at: Duration,
    #[serde(flatten)]
    fields: &'a K,
}

macro_rules! fault_action {
    ($($module:ident::$kind:ident $name:literal,)*) => {
        /// What a fault does: one kind's configuration.
        #[derive(Debug, Clone, PartialEq)]
        pub enum FaultAction {
            $($kind(super::$module::$kind),)*
        }

        impl FaultAction {
            pub fn kind(&self) -> FaultKind {
                match self {
                    $(FaultAction::$kind(_) => FaultKind::$kind,)*
                }
            }

            fn read(kind: FaultKind, fields: Fields) -> Result<FaultAction, FieldError> {
                match kind {
                    $(FaultKind::$kind => {
                        super::$module::$kind::deserialize(fields).map(FaultAction::$kind)
                    })*
                }
            }

            fn write<S: Serializer>(&self, at: Duration, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    $(FaultAction::$kind(k) => Table { kind: $name, at, fields: k }.serialize(s),)*
                }
            }

            fn instance(&self) -> Option<InstanceTarget> {
                match self {
                    $(FaultAction::$kind(k) => k.instance(),)*
                }
            }

            fn lasts(&self) -> Duration {
                match self {
                    $(FaultAction::$kind(k) => k.lasts(),)*
                }
            }

            fn link(&self) -> Option<Target> {
                match self {
                    $(FaultAction::$kind(k) => k.link(),)*
                }
            }

            fn check(&self, field: &dyn Fn(&str) -> String) -> anyhow::Result<()> {
                match self {
                    $(FaultAction::$kind(k) => k.check(field),)*
                }
            }

            fn label(&self, at: &str) -> String {
                match self {
                    $(FaultAction::$kind(k) => k.label(at),)*
                }
            }

            fn redact(&mut self) {
                match self {
                    $(FaultAction::$kind(k) => k.redact(),)*
                }
            }

            fn plan(&self, record: &mut FaultRecord) {
                match self {
                    $(FaultAction::$kind(k) => k.plan(record),)*
                }
            }

            async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
                match self {
                    $(FaultAction::$kind(k) => k.inject(cx, record).await,)*
                }
            }
        }

        /// The fields `kind` needs, each with an example.
        fn needs(kind: FaultKind) -> &'static [(&'static str, &'static str)] {
            match kind {
                $(FaultKind::$kind => <super::$module::$kind as Kind>::NEEDS,)*
            }
        }

        impl FaultRecord {
            fn kind_took_effect(&self) -> bool {
                match self.kind {
                    $(FaultKind::$kind => <super::$module::$kind as Kind>::took_effect(self),)*
                }
            }

            /// When the fault was in effect, by its kind's rule (a window,
            /// a kill until the restart, a command while it ran or over its
            /// `for`); `None` if it never was. Missed cancels are put down
            /// to the faults in effect during the orders' lives.
            pub fn span(&self) -> Option<Span> {
                match self.kind {
                    $(FaultKind::$kind => <super::$module::$kind as Kind>::span(self),)*
                }
            }

            /// What the lateness-over-time figure shades for the fault:
            /// its span, but for a command only while it ran.
            pub fn band(&self) -> Option<Span> {
                match self.kind {
                    $(FaultKind::$kind => <super::$module::$kind as Kind>::band(self),)*
                }
            }

            fn describe_action(&self) -> String {
                match self.kind {
                    $(FaultKind::$kind => <super::$module::$kind as Kind>::describe(self),)*
                }
            }
        }
    };
}
every_fault_kind!(fault_action);

impl Fault {
    pub fn kind(&self) -> FaultKind {
        self.action.kind()
    }

    /// The instance it hits, a number (0 when the scenario does not say) or
    /// a role resolved when it fires, or `None` for the kinds that hit
    /// every instance.
    pub fn instance(&self) -> Option<InstanceTarget> {
        self.action.instance()
    }

    /// How long the fault itself lasts (0 for the instantaneous ones).
    pub fn lasts(&self) -> Duration {
        self.action.lasts()
    }

    /// The link it needs the harness's proxy in front of.
    pub fn link(&self) -> Option<Target> {
        self.action.link()
    }

    /// Checks the values of `[[faults]]` table `index` that reading it
    /// could not (ranges, fields that go together); messages name the field.
    pub fn check(&self, index: usize) -> anyhow::Result<()> {
        self.action
            .check(&|name: &str| format!("field `faults[{index}].{name}`"))
    }

    /// The fault in a few words, e.g. `partition redis for 4s at 10s`.
    pub fn label(&self) -> String {
        self.action
            .label(&humantime::format_duration(self.at).to_string())
    }

    /// Removes passwords from its settings (what `run.json` keeps).
    pub fn redact(&mut self) {
        self.action.redact();
    }

    /// Its record, before it is injected.
    pub fn planned(&self) -> FaultRecord {
        let target = self.instance();
        let mut record = FaultRecord::planned(
            self.kind(),
            target.and_then(InstanceTarget::index).unwrap_or(0),
            self.at,
            self.label(),
        );
        record.aimed_at = target.and_then(InstanceTarget::role);
        self.action.plan(&mut record);
        record
    }

    /// Does it, now, recording what happened in `record`.
    pub async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        self.action.inject(cx, record).await;
    }

    /// Reads `[[faults]]` table `index`; a message names what is wrong by
    /// its field (`faults[2].for`).
    fn read(index: usize, mut table: Map<String, Value>) -> Result<Fault, String> {
        let field = |name: &str| format!("field `faults[{index}].{name}`");
        let kinds = FaultKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let kind = match table.remove("kind") {
            Some(Value::String(name)) => FaultKind::named(&name).ok_or_else(|| {
                format!(
                    "{} = \"{name}\" is invalid; accepted values: {kinds}",
                    field("kind")
                )
            })?,
            Some(other) => {
                return Err(format!(
                    "{} = {other} is invalid; accepted values: {kinds}",
                    field("kind")
                ))
            }
            None => {
                return Err(format!(
                    "{} is missing; accepted values: {kinds}",
                    field("kind")
                ))
            }
        };
        let at = table
            .remove("at")
            .ok_or_else(|| format!("{} is missing; e.g. at = \"8s\"", field("at")))?;
        let shown = at.to_string();
        let at = humantime_serde::deserialize(at)
            .map_err(|e| format!("{} = {shown} is invalid: {e}", field("at")))?;
        loop {
            let fields = Fields {
                index,
                map: table.clone(),
            };
            match FaultAction::read(kind, fields) {
                Ok(action) => return Ok(Fault { at, action }),
                Err(FieldError::Unknown(name, _))
                    if table.get(&name).is_some_and(|v| written_unset(&name, v)) =>
                {
                    table.remove(&name);
                }
                Err(FieldError::Unknown(name, takes)) => {
                    return Err(not_taken(kind, &name, takes, &field))
                }
                Err(FieldError::Missing(name)) => {
                    let example = needs(kind)
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, e)| format!(", e.g. {name} = {e}"))
                        .unwrap_or_default();
                    return Err(format!(
                        "{} is missing; kind = \"{}\" needs it{example}",
                        field(name),
                        kind.as_str()
                    ));
                }
                Err(FieldError::Other(message)) => return Err(message),
            }
        }
    }
}

/// Whether `value` is what scenarios saved before each kind had its own
/// fields wrote for a field their kind did not take: every fault carried
/// every field, `null` in `run.json`, `command = []` and `times = 1`.
/// Older run folders load as they are.
fn written_unset(field: &str, value: &Value) -> bool {
    value.is_null()
        || (field == "command" && value.as_array().is_some_and(Vec::is_empty))
        || (field == "times" && *value == 1)
}

/// The message for field `name`, which `kind` does not take: the kinds
/// that take it, or what `kind` takes (`takes`) when none does.
fn not_taken(
    kind: FaultKind,
    name: &str,
    takes: &[&str],
    field: &dyn Fn(&str) -> String,
) -> String {
    let takers: Vec<String> = FaultKind::ALL
        .iter()
        .filter(|k| {
            let probe = Fields {
                index: 0,
                map: Map::from_iter([(name.to_string(), Value::Null)]),
            };
            !matches!(FaultAction::read(**k, probe), Err(FieldError::Unknown(..)))
        })
        .map(|k| format!("\"{}\"", k.as_str()))
        .collect();
    match takers.split_last() {
        None => format!(
            "{} is unknown; kind = \"{}\" takes kind, at{}",
            field(name),
            kind.as_str(),
            takes.iter().map(|t| format!(", {t}")).collect::<String>()
        ),
        Some((last, [])) => format!("{} applies to kind = {last} only", field(name)),
        Some((last, others)) => format!(
            "{} applies to kind = {} and {last} only",
            field(name),
            others.join(", ")
        ),
    }
}

impl Serialize for Fault {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.action.write(self.at, s)
    }
}

/// Reads a scenario's `[[faults]]` (for serde's `deserialize_with`).
pub fn read_faults<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Fault>, D::Error> {
    Vec::<Map<String, Value>>::deserialize(d)?
        .into_iter()
        .enumerate()
        .map(|(index, table)| Fault::read(index, table).map_err(de::Error::custom))
        .collect()
}

impl FaultRecord {
    /// Whether the fault acted on this strategy's run: not one that does
    /// not apply to it, nor one its kind says did not act (a kill of an
    /// instance already down, a crash or pause whose point was never
    /// reached, a command that failed).
    pub fn took_effect(&self) -> bool {
        !matches!(self.reach(), FaultReach::NotApplicable(_)) && self.kind_took_effect()
    }

    /// One line for the reports: what it did, and why it missed where it
    /// did not hit.
    pub fn describe(&self) -> String {
        let reach = self.reach();
        let text = match self.aimed_at {
            // Aimed at a role nobody held: it did nothing, and names no
            // instance (its record's `instance` was never resolved).
            Some(_) if reach != FaultReach::Hit && !self.kind_took_effect() => {
                self.describe_window()
            }
            // A node's role: its detail names the node it acted on.
            Some(Role::NextDeadline | Role::QueueHost) => self.describe_action(),
            Some(role) => format!(
                "{}; aimed at {}: instance {}",
                self.describe_action(),
                role.words(),
                self.instance
            ),
            None => self.describe_action(),
        };
        match (&reach, reach.why()) {
            // The detail already says "not applicable: why" where it is kept.
            (FaultReach::NotApplicable(_), Some(why)) if !text.contains("not applicable") => {
                format!("{text}; not applicable: {why}")
            }
            (FaultReach::MissedTarget(_), Some(why)) => {
                format!("{text}; **missed its target**: {why}")
            }
            _ => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::crash_at::CrashAt;
    use crate::faults::partition::Partition;

    fn read(tables: Value) -> Result<Vec<Fault>, String> {
        read_faults(tables).map_err(|e| e.to_string())
    }

    #[test]
    fn faults_saved_with_every_kinds_fields_still_load() {
        // As run.json and scenario.toml kept them before each kind had its
        // own fields (results/reference/*-chaos/run.json).
        let faults = read(serde_json::json!([
            {"kind": "partition", "at": "3s", "restart-after": null, "command": [],
             "target": "rabbitmq", "for": "4s", "add": null, "point": null, "times": 1},
            {"kind": "crash-at", "at": "1m 2s", "instance": 1, "restart-after": null,
             "command": [], "target": null, "for": null, "add": null,
             "point": "after-commit-before-ack", "times": 1},
        ]))
        .unwrap();
        assert_eq!(
            faults[0].action,
            FaultAction::Partition(Partition {
                target: Target::Rabbitmq,
                lasts: Duration::from_secs(4),
            })
        );
        assert_eq!(
            faults[1].action,
            FaultAction::CrashAt(CrashAt {
                instance: Some(crate::faults::InstanceTarget::Index(1)),
                restart_after: None,
                point: strategies::CrashPoint::AfterCommitBeforeAck,
                times: 1,
            })
        );
        // What they held besides is refused as before.
        let e = read(serde_json::json!([
            {"kind": "partition", "at": "3s", "target": "redis", "for": "4s", "times": 2}
        ]))
        .unwrap_err();
        assert!(
            e.contains("field `faults[0].times` applies to kind = \"crash-at\" only"),
            "{e}"
        );
    }

    #[test]
    fn a_fault_is_saved_with_its_kinds_fields_only() {
        let faults = read(serde_json::json!([
            {"kind": "partition", "at": "3s", "target": "redis", "for": "4s"}
        ]))
        .unwrap();
        let saved = serde_json::to_value(&faults).unwrap();
        assert_eq!(
            saved,
            serde_json::json!([{"kind": "partition", "at": "3s", "target": "redis", "for": "4s"}])
        );
        assert_eq!(read(saved).unwrap(), faults);
    }

    #[test]
    fn what_does_not_read_is_named_by_its_field() {
        let e = |table: Value| read(Value::Array(vec![table])).unwrap_err();
        let msg = e(
            serde_json::json!({"kind": "partition", "at": "3s", "target": "redis",
                                       "for": "4s", "tiems": 2}),
        );
        assert!(
            msg.contains("field `faults[0].tiems` is unknown")
                && msg.contains("takes kind, at, target, for"),
            "{msg}"
        );
        let msg = e(
            serde_json::json!({"kind": "latency", "at": "3s", "target": "redis",
                                       "for": "soon", "add": "5ms"}),
        );
        assert!(
            msg.contains("field `faults[0].for` = \"soon\" is invalid"),
            "{msg}"
        );
        let msg = e(serde_json::json!({"kind": "partition", "target": "redis", "for": "4s"}));
        assert!(msg.contains("field `faults[0].at` is missing"), "{msg}");
        let msg = e(serde_json::json!({"at": "3s"}));
        assert!(
            msg.contains("field `faults[0].kind` is missing") && msg.contains("crash-at"),
            "{msg}"
        );
    }
}
