//! `[measure]`: the probes and recorders on a strategy's path.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// `[measure]`: the probes and recorders on a strategy's path. Each costs
/// something where it runs; the report states that cost per cancel
/// (`cost.measurement`), and `unmeasured-twin` measures it against a run
/// without them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Measure {
    /// The rows the database server read inside the canceller's own
    /// transactions (PostgreSQL): "sampled" (default: at most
    /// `server-reads-per-second` transactions read per instance and second,
    /// the rest estimated from them), "every-transaction" (exact, two extra
    /// round trips per transaction: it taxes a per-order strategy per
    /// order and a batch strategy per batch) or "off".
    pub server_reads: ServerReadsMode,
    /// With `server-reads = "sampled"`: readings per second per instance
    /// (default 1: at 50 orders/s a reading of each of db-scan's few
    /// transactions cost it 9 % of its CPU per cancel; one a second keeps
    /// every strategy under 5 % and still gives tens of readings a run).
    pub server_reads_per_second: u32,
    /// Workers note when each cancel's COMMIT returned (lateness at
    /// commit, which sweeps judge steps by, and the duplicates absorbed
    /// after a pause), default true.
    pub commit_times: bool,
    /// Workers note each order's schedule path (its commit to `schedule()`
    /// returning), default true.
    pub schedule_times: bool,
    /// `delaybench run`: also run each strategy, interleaved, with every
    /// probe and recorder above off (folder `<strategy>.unmeasured`), so
    /// the report shows what the measurement costs (default false).
    pub unmeasured_twin: bool,
}

/// `measure.server-reads`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerReadsMode {
    #[default]
    Sampled,
    EveryTransaction,
    Off,
}

impl Default for Measure {
    fn default() -> Self {
        Measure {
            server_reads: ServerReadsMode::Sampled,
            server_reads_per_second: 1,
            commit_times: true,
            schedule_times: true,
            unmeasured_twin: false,
        }
    }
}

impl Measure {
    /// Every probe and recorder off: the twin's settings.
    pub fn nothing() -> Measure {
        Measure {
            server_reads: ServerReadsMode::Off,
            commit_times: false,
            schedule_times: false,
            unmeasured_twin: false,
            ..Measure::default()
        }
    }

    /// What the store's probe is set to.
    pub fn server_reads(&self) -> strategies::store::ServerReads {
        use strategies::store::ServerReads;
        match self.server_reads {
            ServerReadsMode::Sampled => ServerReads::Sampled {
                per_second: self.server_reads_per_second,
            },
            ServerReadsMode::EveryTransaction => ServerReads::Every,
            ServerReadsMode::Off => ServerReads::Off,
        }
    }

    /// Whether anything is measured on the path at all.
    pub fn is_nothing(&self) -> bool {
        self.server_reads == ServerReadsMode::Off && !self.commit_times && !self.schedule_times
    }

    pub(super) fn validate(&self) -> Result<()> {
        if !(1..=1000).contains(&self.server_reads_per_second) {
            bail!(
                "field `measure.server-reads-per-second` = {} is out of range; accepted values: 1 to 1000",
                self.server_reads_per_second
            );
        }
        Ok(())
    }
}
