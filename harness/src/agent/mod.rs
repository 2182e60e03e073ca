//! Canceller instances on other hosts: `delaybench agent` runs on each of
//! them, and the harness starts workers there as it starts them here.
//!
//! One TCP connection per request. It opens with `delaybench-agent/1
//! <token>` (the shared secret of [`TOKEN_ENV`](protocol::TOKEN_ENV), never on a command line);
//! the agent answers `ok <build>` (its version and commit, which must be
//! the harness's) or `error <why>`. Then one request line:
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
//! trip sample of [`CLOCK_SAMPLES`](protocol::CLOCK_SAMPLES), NTP's method) and starts them with
//! their clock corrected by it (`strategies::set_clock_correction`), so
//! every stamp is on the harness's clock; it reads the offset again when
//! the workers stop, and the report gives both with the bound on their
//! error (half the round trip).

mod client;
mod forward;
mod protocol;
mod server;

pub use client::{read_clock, spawn, Remote};
pub use forward::forward_main;
pub use server::agent_main;
