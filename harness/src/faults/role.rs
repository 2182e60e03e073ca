//! Which instance an instance fault (`kill-instance`, `pause-instance`,
//! `crash-at`) acts on: a number, or a role the harness resolves at the
//! moment the fault fires, from what the strategy's instances say of
//! themselves (issue 41: faults that reach their target).
//!
//! - `instance = 1`: that instance, whatever it does.
//! - `instance = "leader"`: the instance that leads when the fault fires
//!   (db-timer's lead on PostgreSQL). The harness asks every live instance
//!   its role then (`r` on the worker protocol, answered from the
//!   strategy's own state, `Canceller::role`); a strategy whose instances
//!   are peers has no leader, and the fault is `not-applicable` to it; one
//!   that elects a leader but has none at that moment (every instance a
//!   standby, or the leader did not answer) records `missed-target` with
//!   what each instance said, and the fault does nothing.
//! - `instance = "claim-holder"`: the first instance to reach `point`
//!   (`after-claim`) once the fault fires: it holds claimed work, by its
//!   own path. Every live instance is armed and the others disarmed once
//!   one got there. A strategy whose path has no such point has no
//!   instance that can be caught holding a claim: `not-applicable`.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A role an instance fault can aim at instead of an instance number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The instance holding the strategy's lead when the fault fires.
    Leader,
    /// The first instance to reach the fault's `point` once it fires.
    ClaimHolder,
    /// Not an instance: the Redis Cluster master serving the strategy's
    /// shard whose deadline comes first (`run-command`'s `node`).
    NextDeadline,
    /// Not an instance: the RabbitMQ node hosting most of the strategy's
    /// queues (`run-command`'s `node`).
    QueueHost,
}

impl Role {
    /// Every role, in the order messages list them.
    pub const ALL: &[Role] = &[Role::Leader, Role::ClaimHolder];
    // NextDeadline is a node's role, not an instance's: not in ALL, which
    // lists what `instance` accepts.

    /// The scenario's spelling, the same as serde's.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::ClaimHolder => "claim-holder",
            Role::NextDeadline => "next-deadline",
            Role::QueueHost => "queue-host",
        }
    }

    /// How labels name the instance, e.g. `the leader`.
    pub fn words(self) -> &'static str {
        match self {
            Role::Leader => "the leader",
            Role::ClaimHolder => "the claim holder",
            Role::NextDeadline => "the Redis node of the next deadline",
            Role::QueueHost => "the broker node hosting the queues",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An instance fault's `instance`: a 0-based number, or a [`Role`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceTarget {
    Index(u32),
    Role(Role),
}

impl InstanceTarget {
    /// The instance number, when the scenario gave one.
    pub fn index(self) -> Option<u32> {
        match self {
            InstanceTarget::Index(i) => Some(i),
            InstanceTarget::Role(_) => None,
        }
    }

    /// The role, when the scenario named one.
    pub fn role(self) -> Option<Role> {
        match self {
            InstanceTarget::Index(_) => None,
            InstanceTarget::Role(r) => Some(r),
        }
    }

    /// How labels name it: `instance 1`, `the leader`.
    pub fn words(self) -> String {
        match self {
            InstanceTarget::Index(i) => format!("instance {i}"),
            InstanceTarget::Role(r) => r.words().to_string(),
        }
    }
}

/// The target of an `instance` field left out: instance 0.
pub fn or_first(target: Option<InstanceTarget>) -> InstanceTarget {
    target.unwrap_or(InstanceTarget::Index(0))
}

impl Serialize for InstanceTarget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            InstanceTarget::Index(i) => s.serialize_u32(*i),
            InstanceTarget::Role(r) => s.serialize_str(r.as_str()),
        }
    }
}

/// What `instance` accepts, for messages.
fn accepted() -> String {
    let roles: Vec<String> = Role::ALL
        .iter()
        .map(|r| format!("\"{}\"", r.as_str()))
        .collect();
    format!(
        "accepted values: an instance number (0-based) or a role: {}",
        roles.join(", ")
    )
}

impl<'de> Deserialize<'de> for InstanceTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Target;
        impl Visitor<'_> for Target {
            type Value = InstanceTarget;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an instance number (0-based) or a role")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<InstanceTarget, E> {
                u32::try_from(v)
                    .map(InstanceTarget::Index)
                    .map_err(|_| E::custom(format!("{v} is out of range; {}", accepted())))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<InstanceTarget, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom(format!("{v} is out of range; {}", accepted()))),
                }
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<InstanceTarget, E> {
                Role::ALL
                    .iter()
                    .find(|r| r.as_str() == v)
                    .map(|r| InstanceTarget::Role(*r))
                    .ok_or_else(|| E::custom(format!("no role \"{v}\"; {}", accepted())))
            }
        }
        d.deserialize_any(Target)
    }
}

/// Records of faults aimed at roles, as a db-timer run could leave them:
/// a pause of the leader that hit, one that found no leader (missed its
/// target, did nothing), and a claim-holder pause its path cannot take
/// (n/a). For the tests of what reads them (report, decision record).
#[cfg(test)]
impl super::FaultRecord {
    pub fn role_examples() -> Vec<super::FaultRecord> {
        use super::{FaultKind, FaultReach, FaultRecord};
        use std::time::Duration;
        let pause = |at: u64, role: Role| {
            let mut r = FaultRecord::planned(
                FaultKind::PauseInstance,
                0,
                Duration::from_secs(at),
                format!("pause {} for 6s from {at}s", role.words()),
            );
            r.aimed_at = Some(role);
            r
        };
        let mut hit = pause(37, Role::Leader);
        hit.instance = 1;
        hit.window_ms = Some((37_000, 43_000));
        hit.detail = Some("pid 42 stopped with SIGSTOP, resumed with SIGCONT".into());
        let mut missed = pause(48, Role::Leader);
        missed.reach = FaultReach::MissedTarget(
            "no instance held the lead when the fault fired (instance 0 said \"standby\", \
             instance 1 did not answer)"
                .into(),
        );
        let mut not_applicable = pause(59, Role::ClaimHolder);
        not_applicable.not_applicable("no instance can be caught holding a claim".into());
        vec![hit, missed, not_applicable]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_nobody_held_reads_as_missed_and_names_no_instance() {
        let records = super::super::FaultRecord::role_examples();
        let said: Vec<String> = records.iter().map(|r| r.describe()).collect();
        assert!(
            said[0].ends_with("aimed at the leader: instance 1"),
            "{}",
            said[0]
        );
        assert!(records[0].took_effect());
        // It did nothing: no instance named, never "acted".
        assert!(!records[1].took_effect());
        assert!(
            said[1].starts_with("pause the leader for 6s from 48s; **missed its target**: no instance held the lead"),
            "{}",
            said[1]
        );
        assert!(!said[1].contains("instance 0 was"), "{}", said[1]);
        assert!(!records[2].took_effect());
        assert!(said[2].contains("not applicable"), "{}", said[2]);
        // Saved and read back, the role stays.
        let back: super::super::FaultRecord =
            serde_json::from_value(serde_json::to_value(&records[1]).unwrap()).unwrap();
        assert_eq!(back, records[1]);
        assert_eq!(
            serde_json::to_value(&records[0]).unwrap()["aimed_at"],
            "leader"
        );
    }

    #[test]
    fn an_instance_is_a_number_or_a_role() {
        let read = |v: serde_json::Value| serde_json::from_value::<InstanceTarget>(v);
        assert_eq!(read(1.into()).unwrap(), InstanceTarget::Index(1));
        assert_eq!(
            read("leader".into()).unwrap(),
            InstanceTarget::Role(Role::Leader)
        );
        assert_eq!(
            read("claim-holder".into()).unwrap(),
            InstanceTarget::Role(Role::ClaimHolder)
        );
        for (bad, says) in [
            (serde_json::json!("boss"), "no role \"boss\""),
            (serde_json::json!(-1), "-1 is out of range"),
            (
                serde_json::json!(1.5),
                "an instance number (0-based) or a role",
            ),
        ] {
            let e = read(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        for t in [InstanceTarget::Index(3), InstanceTarget::Role(Role::Leader)] {
            assert_eq!(read(serde_json::to_value(t).unwrap()).unwrap(), t);
        }
    }
}
