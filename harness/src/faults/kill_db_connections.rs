//! `kind = "kill-db-connections"`: terminate the strategy's database
//! sessions on the server.

use super::context::FaultContext;
use super::kind::Kind;
use super::record::FaultRecord;
use serde::{Deserialize, Serialize};

/// Terminate the strategy's database sessions (every instance's), as an
/// operator or a failover does; the pools reconnect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillDbConnections {}

impl Kind for KillDbConnections {
    const NEEDS: &'static [(&'static str, &'static str)] = &[];

    fn label(&self, at: &str) -> String {
        format!("kill database sessions at {at}")
    }

    async fn inject(&self, cx: &FaultContext, record: &mut FaultRecord) {
        let at = cx.since_t0();
        record.window_ms = Some((at, at));
        match cx.db.kill_sessions(&cx.session).await {
            Ok(n) => record.detail = Some(format!("{n} database sessions terminated")),
            Err(strategies::Error::Config(why)) => record.not_applicable(why),
            Err(e) => record.error = Some(e.to_string()),
        }
    }
}
