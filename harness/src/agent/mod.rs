//! Canceller instances on other hosts: `delaybench agent` runs on each of
//! them, and the harness starts workers there as it starts them here.
//!
//! One TCP connection per request. It opens with `delaybench-agent/1
//! <token>` (the shared secret of [`TOKEN_ENV`], never on a command line);
//! the agent answers `ok` or `error <why>`. Then one request line:
//! - `clock`: each `t` line is answered with the agent's wall clock, µs
//!   (the probe `read_clock` takes its offset from);
//! - `worker <spec JSON>` (or `generate <spec JSON>`, a generator shard,
//!   `crate::shard`): the agent starts `delaybench worker` (`generate`)
//!   with that spec, answers `pid <n>`, and from then on relays lines: the harness's
//!   to the worker's stdin, the worker's stdout back; `!kill` SIGKILLs the
//!   worker (a `kill-instance` fault), EOF stops it as EOF on a local
//!   worker's stdin does, and once it has exited the agent sends `!exit
//!   <status>` and closes. The pool sees the same line protocol as from a
//!   local worker (`crate::instance`), so deaths, restarts and lost
//!   flushes are handled by the same code.
//!
//! The connection is plain TCP: the spec carries the database URL, and so
//! its password. Run agents on a private network or through an SSH tunnel;
//! the README says so.
//!
//! Clocks: lateness subtracts a deadline the generator wrote from a stamp a
//! worker wrote, so a worker on a host whose clock is off by 3 ms would
//! read 3 ms late (or cancel 3 ms early, and be flagged). The harness reads
//! each agent's offset before it starts workers there (the minimum-round-
//! trip sample of [`CLOCK_SAMPLES`], NTP's method) and starts them with
//! their clock corrected by it (`strategies::set_clock_correction`), so
//! every stamp is on the harness's clock; it reads the offset again when
//! the workers stop, and the report gives both with the bound on their
//! error (half the round trip).

mod client;
mod forward;
mod server;

pub use client::{read_clock, spawn, Remote};
pub use forward::forward_main;
pub use server::agent_main;

/// The environment variable holding the agents' shared secret, on both
/// sides.
pub const TOKEN_ENV: &str = "DELAYBENCH_AGENT_TOKEN";
/// The first word of a connection.
const HELLO: &str = "delaybench-agent/1";
/// For tests: an agent started with `--clock-skew` tells its workers their
/// host's clock is off by this much (µs), as a real host's could be.
pub const CLOCK_SKEW_ENV: &str = "DELAYBENCH_CLOCK_SKEW_US";
/// Probes per clock reading; the one with the shortest round trip counts.
pub const CLOCK_SAMPLES: u32 = 32;

/// The shared secret, from [`TOKEN_ENV`].
fn token() -> anyhow::Result<String> {
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
