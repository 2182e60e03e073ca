//! The reference set: what it runs ([`MATRIX`], [`CLUSTERS`]), the SLA its
//! decision record is judged against ([`SLA`]), and the manifest
//! (`reference.json`) of what ran where.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The manifest's file name in the reference folder.
pub const MANIFEST: &str = "reference.json";

/// The strategies every comparison runs.
const MAIN: &str = "db-scan,db-timer,timing-wheel,rabbit-ttl,rabbit-delayed,redis-zset";

/// [`MAIN`] and the remedies, where the decision record needs each
/// option's own figures: without them a `+fallback` or `+outbox` option is
/// "not measured" there, never borrowed from its base.
const WITH_REMEDIES: &str = "db-scan,db-timer,timing-wheel,timing-wheel+fallback,rabbit-ttl,\
                             rabbit-ttl+fallback,rabbit-ttl+outbox,rabbit-ttl+outbox+fallback,\
                             rabbit-delayed,rabbit-delayed+fallback,rabbit-delayed+outbox,\
                             rabbit-delayed+outbox+fallback,redis-zset,redis-zset+fallback,\
                             redis-zset+outbox,redis-zset+outbox+fallback";

/// [`MAIN`] and the `+fallback` remedies: the sweeps, where every option
/// costs minutes.
const WITH_FALLBACKS: &str = "db-scan,db-timer,timing-wheel,timing-wheel+fallback,rabbit-ttl,\
                              rabbit-ttl+fallback,rabbit-delayed,rabbit-delayed+fallback,\
                              redis-zset,redis-zset+fallback";

/// One run of the reference set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Its name in the manifest and the READMEs.
    pub name: &'static str,
    /// What it shows, in a few words.
    pub what: &'static str,
    /// `delaybench` arguments, without the service URLs and `--out`.
    pub args: &'static [&'static str],
}

/// The reference matrix, in the order it runs.
pub const MATRIX: &[Entry] = &[
    Entry {
        name: "quick",
        what: "the bundled quick scenario: lateness of every strategy at a light load",
        args: &["run", "--repeat", "3", "--strategies", MAIN],
    },
    Entry {
        name: "same-zone",
        what: "the quick scenario with a 0.5 ms round trip to every service (the harness's proxy)",
        args: &["run", "--repeat", "3", "--network", "same-zone", "--strategies", MAIN],
    },
    Entry {
        name: "cross-zone",
        what: "the quick scenario with a 2 ms round trip to every service (the harness's proxy)",
        args: &["run", "--repeat", "3", "--network", "cross-zone", "--strategies", MAIN],
    },
    Entry {
        name: "busy",
        what: "200 orders/s: lateness and database cost per cancel, remedies included",
        args: &["run", "--scenario", "busy", "--repeat", "3", "--strategies", WITH_REMEDIES],
    },
    Entry {
        name: "probe-cost",
        what: "600 orders/s, each strategy also run with every probe off: what the measurement costs",
        args: &["run", "--scenario", "probe-cost", "--repeat", "3", "--strategies", MAIN],
    },
    Entry {
        name: "mixed-timeouts",
        what: "1 s and 3 s timeouts interleaved: head-of-line blocking",
        args: &[
            "run",
            "--scenario",
            "mixed-timeouts",
            "--repeat",
            "3",
            "--strategies",
            "db-scan,db-timer,timing-wheel,rabbit-ttl,rabbit-delayed,redis-zset,rabbit-ttl-single-queue",
        ],
    },
    Entry {
        name: "chaos",
        what: "ten faults at the same times for every strategy, remedy and teaching variant, the pauses aimed at the leader and at a claim holder",
        args: &[
            "run",
            "--scenario",
            "chaos",
            "--allow-anomalies",
            "--strategies",
            "db-scan,db-timer,timing-wheel,timing-wheel+fallback,rabbit-ttl,rabbit-ttl+fallback,\
             rabbit-ttl+outbox,rabbit-ttl+outbox+fallback,rabbit-delayed,rabbit-delayed+fallback,\
             rabbit-delayed+outbox,rabbit-delayed+outbox+fallback,redis-zset,redis-zset+fallback,\
             redis-zset+outbox,redis-zset+outbox+fallback,db-scan-noindex,timing-wheel-unconditional,\
             timing-wheel-release-first,rabbit-ttl-single-queue,redis-keyspace-expiry,\
             redis-zset-nonatomic,redis-zset-publish-first",
        ],
    },
    Entry {
        name: "sweep",
        what: "rising offered rates until a step no longer holds: each strategy's maximum",
        // Three repetitions a step: the least that may separate two
        // maxima (two ranges of two fail to overlap by chance 1 in 3).
        args: &["sweep", "--repeat", "3", "--strategies", WITH_FALLBACKS],
    },
    Entry {
        name: "backlog",
        what: "holding a million far-future pending orders, and recovering with it",
        args: &[
            "sweep",
            "--scenario",
            "backlog-1m",
            "--strategies",
            "db-scan,db-scan-noindex,db-timer,timing-wheel,timing-wheel+fallback,rabbit-ttl,\
             rabbit-ttl+fallback,rabbit-delayed,rabbit-delayed+fallback,redis-zset,\
             redis-zset+fallback",
        ],
    },
    Entry {
        name: "storm",
        what: "100k orders due in one instant beside the regular load: each cancel path's drain",
        // Three trials: one storm's drain is no distribution.
        args: &["run", "--scenario", "storm", "--repeat", "3", "--strategies", MAIN],
    },
];

/// The cluster presets, run with `--clusters` after [`CLUSTERS_UP`].
pub const CLUSTERS: &[Entry] = &[
    Entry {
        name: "redis-cluster",
        what: "a Redis Cluster master killed mid-run",
        args: &[
            "run",
            "--scenario",
            "redis-cluster",
            "--allow-anomalies",
            "--strategies",
            "redis-zset,redis-zset+fallback",
        ],
    },
    Entry {
        name: "rabbitmq-cluster",
        what: "a RabbitMQ cluster node stopped mid-run, quorum queues",
        args: &[
            "run",
            "--scenario",
            "rabbitmq-cluster",
            "--allow-anomalies",
            "--strategies",
            "rabbit-ttl,rabbit-ttl+fallback,rabbit-delayed,rabbit-delayed+fallback",
        ],
    },
    Entry {
        name: "rabbitmq-cluster-classic",
        what: "the same node stop, classic queues",
        args: &[
            "run",
            "--scenario",
            "rabbitmq-cluster-classic",
            "--allow-anomalies",
            "--strategies",
            "rabbit-ttl,rabbit-ttl+fallback",
        ],
    },
];

/// Starts the local clusters the [`CLUSTERS`] entries need (run from the
/// repository root, as the presets' own commands are).
pub(super) const CLUSTERS_UP: &str = "scripts/services.sh redis-cluster rabbitmq-cluster";

/// The objective the reference's decision-record draft is written against.
pub const SLA: &str = crate::adr::EXAMPLE_SLA;

/// `reference.json`: the set's commit and build, and each entry's folder.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub commit: String,
    pub build_profile: String,
    /// The database the set ran against (password removed).
    pub database_url: String,
    pub started_at: String,
    /// When the last entry finished and the READMEs were written.
    pub finished_at: Option<String>,
    pub entries: Vec<ManifestEntry>,
    /// The folders of the finished set this one replaces, removed once it
    /// is complete (never anything a manifest did not name).
    #[serde(default)]
    pub replaces: Vec<String>,
}

/// One entry as it ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub name: String,
    pub what: String,
    /// The `delaybench` arguments it ran with (service URLs redacted).
    pub command: Vec<String>,
    /// Its run folder, relative to the reference folder.
    pub folder: Option<String>,
    /// Folders an attempt that did not finish left (removed before the
    /// entry runs again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partial: Vec<String>,
    pub status: EntryStatus,
    /// Why it failed, when it did.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryStatus {
    Pending,
    Running,
    Done,
    Failed,
}

impl Manifest {
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (made by `delaybench reference`)",
                path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    pub(super) fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(MANIFEST);
        std::fs::write(&path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    /// The set in a few words: `3772c7a (started ...): 7 of 13 entries done`.
    pub(super) fn progress(&self) -> String {
        format!(
            "{} (started {}): {} of {} entries done",
            short(&self.commit),
            self.started_at,
            self.entries
                .iter()
                .filter(|e| e.status == EntryStatus::Done)
                .count(),
            self.entries.len()
        )
    }

    /// How a run at `commit`, built `profile`, against database `db`,
    /// of entries `wanted`, is not this set (`None`: it is the same set,
    /// which it resumes while unfinished).
    pub(super) fn differs(
        &self,
        commit: &str,
        profile: &str,
        db: &str,
        wanted: &[&str],
    ) -> Option<String> {
        let names: Vec<&str> = self.entries.iter().map(|e| e.name.as_str()).collect();
        if self.commit != commit {
            Some(format!(
                "is at commit {} (code changed since)",
                short(commit)
            ))
        } else if self.build_profile != profile {
            Some(format!(
                "is a {profile} build, the set's is {}",
                self.build_profile
            ))
        } else if self.database_url != db {
            Some(format!("uses {db}, the set used {}", self.database_url))
        } else if names != wanted {
            Some(format!(
                "asks for the entries {} where the set has {} (--clusters adds the cluster \
                 entries)",
                wanted.join(", "),
                names.join(", ")
            ))
        } else {
            None
        }
    }

    /// The done entries' folders, in matrix order, that `delaybench adr` reads, and the
    /// names of the entries it leaves out ([`crate::adr::reads`]: the
    /// storm's).
    pub fn adr_folders(&self, dir: &Path) -> (Vec<PathBuf>, Vec<&str>) {
        let mut read = Vec::new();
        let mut left_out = Vec::new();
        for e in self
            .entries
            .iter()
            .filter(|e| e.status == EntryStatus::Done)
        {
            let Some(folder) = e.folder.as_ref().map(|f| dir.join(f)) else {
                continue;
            };
            if crate::adr::reads(&folder) {
                read.push(folder);
            } else {
                left_out.push(e.name.as_str());
            }
        }
        (read, left_out)
    }
}

/// A commit's first seven characters.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(7)]
}
