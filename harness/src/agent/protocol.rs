//! What both ends of an agent's connection share: the greeting, the
//! secret, the build check and the clock probe's size.

/// The environment variable holding the agents' shared secret, on both
/// sides.
pub const TOKEN_ENV: &str = "DELAYBENCH_AGENT_TOKEN";
/// The first word of a connection.
pub(super) const HELLO: &str = "delaybench-agent/1";
/// Probes per clock reading; the one with the shortest round trip counts.
pub const CLOCK_SAMPLES: u32 = 32;

/// The build on each side of a connection: the spec they exchange is this
/// build's types, so both must be the same.
pub(super) fn build() -> String {
    format!(
        "{}+{}",
        env!("CARGO_PKG_VERSION"),
        option_env!("DELAYBENCH_BUILD_COMMIT").unwrap_or("unknown")
    )
}

/// The shared secret, from [`TOKEN_ENV`].
pub(super) fn token() -> anyhow::Result<String> {
    std::env::var(TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{TOKEN_ENV} is not set: the harness and its agents share a secret through it \
                 (export the same value where each `delaybench agent` and the run start)"
            )
        })
}
