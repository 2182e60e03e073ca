//! A strategy as `--strategies` names it: a registry entry plus the
//! remedies the seeds prescribe, parsed once at the edge and carried typed
//! from there (in the worker's spec, in `summary.json`), so one run
//! compares `redis-zset`, `redis-zset+fallback`, `redis-zset+outbox` and
//! `redis-zset+outbox+fallback`.

use super::table::{Entry, STRATEGIES};
use crate::error::{Error, Result};
use crate::remedy::{Remedy, FALLBACK, OUTBOX};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::LazyLock;

/// A registry entry plus its remedies. Written and read as its canonical
/// name (`redis-zset+outbox+fallback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// The strategy; reads as its [`crate::strategy_info::StrategyInfo`].
    pub info: &'static Entry,
    /// `+outbox`: the creating transaction writes the schedule request to
    /// the outbox table and each instance relays it ([`crate::outbox`]),
    /// instead of the order service calling `schedule` after its commit.
    /// Only for strategies whose schedule leaves the database.
    pub outbox: bool,
    /// `+fallback`: a slow db-scan runs beside the strategy in each
    /// instance (`[strategies.fallback-scan]` sets its pace). Not for the
    /// strategies that read the orders table themselves.
    pub fallback: bool,
}

/// The entry named `name` exactly; the error lists the known names.
pub(super) fn entry(name: &str) -> Result<&'static Entry> {
    STRATEGIES
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Error::UnknownStrategy {
            name: name.to_string(),
            known: format!(
                "{}; add +outbox and/or +fallback for the remedies, e.g. redis-zset+outbox+fallback",
                STRATEGIES
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

impl Variant {
    /// The strategy alone, without remedies.
    pub fn plain(info: &'static Entry) -> Variant {
        Variant {
            info,
            outbox: false,
            fallback: false,
        }
    }

    /// Parses `base[+outbox][+fallback]` (suffixes in either order).
    pub fn parse(name: &str) -> Result<Variant> {
        let mut parts = name.split('+').map(str::trim);
        let base = parts.next().unwrap_or_default();
        let mut variant = Variant::plain(entry(base)?);
        for suffix in parts {
            match suffix {
                "outbox" if !variant.outbox => variant.outbox = true,
                "fallback" if !variant.fallback => variant.fallback = true,
                _ => {
                    return Err(Error::Config(format!(
                        "strategy `{name}`: unknown or repeated suffix `+{suffix}`; accepted: \
                         +outbox, +fallback (e.g. {base}+outbox+fallback)"
                    )))
                }
            }
        }
        variant.checked(name)
    }

    /// The same strategy with `+fallback`, where the registry allows it.
    pub fn with_fallback(self) -> Option<Variant> {
        let name = format!("{}{}", self.name(), FALLBACK.suffix);
        Variant {
            fallback: true,
            ..self
        }
        .checked(&name)
        .ok()
    }

    /// `self` if its remedies apply to its strategy; the error names the
    /// variant as it was `given`.
    fn checked(self, given: &str) -> Result<Variant> {
        let (info, base) = (self.info, self.info.name);
        if self.outbox && !info.schedules_outside_the_database() {
            return Err(Error::Config(format!(
                "strategy `{given}`: +outbox applies to strategies that schedule in a broker or \
                 Redis (rabbit-ttl, rabbit-delayed, redis-zset, ...); `{base}` keeps its \
                 schedule in the database or in process"
            )));
        }
        if self.outbox && info.schedules_before_commit {
            return Err(Error::Config(format!(
                "strategy `{given}`: the publish-first teaching variant schedules inside the \
                 creating transaction, which is what +outbox replaces; run redis-zset+outbox"
            )));
        }
        if self.fallback && info.reads_the_orders_table {
            return Err(Error::Config(format!(
                "strategy `{given}`: +fallback adds a db-scan beside the strategy; `{base}` \
                 reads the orders table itself and needs none"
            )));
        }
        Ok(self)
    }

    /// The canonical name: `base`, then `+outbox`, then `+fallback`.
    pub fn name(&self) -> &'static str {
        // Every entry with every combination of remedies, spelled once:
        // a variant is copied everywhere and named in every row.
        static NAMES: LazyLock<Vec<[String; 4]>> = LazyLock::new(|| {
            STRATEGIES
                .iter()
                .map(|s| {
                    let base = s.name;
                    [
                        base.to_string(),
                        format!("{base}{}", FALLBACK.suffix),
                        format!("{base}{}", OUTBOX.suffix),
                        format!("{base}{}{}", OUTBOX.suffix, FALLBACK.suffix),
                    ]
                })
                .collect()
        });
        let entry = STRATEGIES
            .iter()
            .position(|s| s == self.info)
            .expect("a variant's entry is in the table");
        &NAMES[entry][usize::from(self.outbox) * 2 + usize::from(self.fallback)]
    }

    /// Whether a remedy was added.
    pub fn is_remedied(&self) -> bool {
        self.outbox || self.fallback
    }

    /// The remedies added, in name order (`+outbox`, then `+fallback`).
    pub fn remedies(&self) -> Vec<&'static Remedy> {
        let mut remedies = Vec::new();
        if self.outbox {
            remedies.push(&OUTBOX);
        }
        if self.fallback {
            remedies.push(&FALLBACK);
        }
        remedies
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Variant {
    type Err = Error;

    fn from_str(name: &str) -> Result<Variant> {
        Variant::parse(name)
    }
}

impl Serialize for Variant {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Variant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Variant, D::Error> {
        let name = String::deserialize(d)?;
        Variant::parse(&name).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_to_their_canonical_name() {
        let v = Variant::parse("redis-zset+fallback+outbox").unwrap();
        assert_eq!(
            (v.info.name, v.outbox, v.fallback),
            ("redis-zset", true, true)
        );
        assert_eq!(v.name(), "redis-zset+outbox+fallback");
        assert_eq!(Variant::parse("db-scan").unwrap().name(), "db-scan");
        for bad in [
            "db-scan+fallback",
            "db-timer+fallback",
            "db-timer+outbox",
            "timing-wheel+outbox",
            "redis-zset+outbox+outbox",
            "redis-zset+retry",
            "redis-zset-publish-first+outbox",
        ] {
            let msg = Variant::parse(bad).unwrap_err().to_string();
            assert!(msg.contains(bad), "{msg}");
        }
        assert!(Variant::parse("timing-wheel+fallback").unwrap().fallback);
        let suffixes: Vec<&str> = Variant::parse("redis-zset+fallback+outbox")
            .unwrap()
            .remedies()
            .iter()
            .map(|r| r.suffix)
            .collect();
        assert_eq!(suffixes, ["+outbox", "+fallback"]);
    }

    #[test]
    fn a_variant_is_written_and_read_as_its_name() {
        let v = Variant::parse("rabbit-ttl+fallback+outbox").unwrap();
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(json, "\"rabbit-ttl+outbox+fallback\"");
        assert_eq!(serde_json::from_str::<Variant>(&json).unwrap(), v);
        let err = serde_json::from_str::<Variant>("\"db-scna\"").unwrap_err();
        assert!(err.to_string().contains("db-scna"), "{err}");
    }

    #[test]
    fn unknown_strategy_lists_known_ones() {
        let msg = Variant::parse("db-scna").unwrap_err().to_string();
        for s in STRATEGIES {
            assert!(msg.contains(s.name), "{msg}");
        }
    }
}
