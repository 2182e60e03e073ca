//! Where a strategy's instances run: on this host, or spread over the
//! `[hosts]` agents, each agent's clock read before they start (the
//! correction their stamps carry) and again once they have stopped.

use crate::agent;
use crate::model::records::{ClockReading, HostRecord};
use crate::scenario::Scenario;
use anyhow::{bail, Context, Result};
use strategies::{DbKind, DbLocation};

/// The agents of a run, with their clocks as read before the instances
/// started.
#[derive(Debug, Default)]
pub(super) struct Placement {
    agents: Vec<(String, ClockReading)>,
}

impl Placement {
    /// Reads each agent's clock; none without `[hosts]`.
    pub(super) async fn read(scenario: &Scenario, location: &DbLocation) -> Result<Placement> {
        if scenario.hosts.is_local() {
            return Ok(Placement::default());
        }
        if location.kind == DbKind::Sqlite {
            bail!(
                "SQLite is a file on this host, which instances on the `[hosts]` agents cannot \
                 open; use PostgreSQL or MariaDB"
            );
        }
        let mut agents = Vec::new();
        for agent in &scenario.hosts.agents {
            let clock = agent::read_clock(agent)
                .await
                .with_context(|| format!("reading the clock of the agent at {agent}"))?;
            agents.push((agent.clone(), clock));
        }
        Ok(Placement { agents })
    }

    /// The agent instance `index` runs on and the correction its clock
    /// takes; `(None, 0)` on this host.
    pub(super) fn of(&self, index: u32) -> (Option<String>, i64) {
        if self.agents.is_empty() {
            return (None, 0);
        }
        let (agent, clock) = &self.agents[index as usize % self.agents.len()];
        (Some(agent.clone()), -clock.offset_us)
    }

    /// Every agent with the correction its clock takes.
    pub(super) fn agents(&self) -> Vec<(String, i64)> {
        self.agents
            .iter()
            .map(|(agent, clock)| (agent.clone(), -clock.offset_us))
            .collect()
    }

    /// Each agent's record, its clock read again now (after the instances
    /// stopped); `None` without `[hosts]`.
    pub(super) async fn finish(&self, instances: u32, sharded: bool) -> Option<Vec<HostRecord>> {
        if self.agents.is_empty() {
            return None;
        }
        let n = self.agents.len() as u32;
        let mut records = Vec::new();
        for (k, (agent, start)) in self.agents.iter().enumerate() {
            let end = agent::read_clock(agent).await;
            records.push(HostRecord {
                agent: agent.clone(),
                instances: (0..instances).filter(|i| i % n == k as u32).collect(),
                generator_shard: sharded.then_some(k as u32),
                clock_at_start: *start,
                clock_error: end.as_ref().err().map(|e| format!("{e:#}")),
                clock_at_end: end.ok(),
            });
        }
        Some(records)
    }
}
