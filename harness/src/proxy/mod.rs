//! A TCP fault proxy on loopback, put between each canceller worker and one
//! backend (RabbitMQ, Redis or the database), so a scenario can cut or slow
//! that link mid-run the same way for every strategy — without root, without
//! `tc netem` or iptables, and without touching the backend, which other
//! workers and the harness's own checker keep using directly.
//!
//! Each accepted connection gets its own upstream connection, resolved per
//! connection so a backend restarted on a new address is found again. Bytes
//! are copied by our own read/write loops rather than `copy_bidirectional`,
//! because a chunk must be held back for the latency window, and because a
//! partition has to cut every open connection at once: every connection task
//! selects on the cancellation token of the "epoch" it was admitted in, and a
//! partition cancels that token and starts a new epoch.
//!
//! A cut closes both sockets with an RST (`SO_LINGER` 0), not a FIN: the
//! worker sees `connection reset` at its next read or write, and the backend
//! drops the session (rolling back an open transaction, releasing a
//! RabbitMQ channel's unacked messages) at once, as after a real broken link
//! that both ends have noticed. What a silent black hole would test (clients
//! hanging until their own timeouts) is what [`FaultProxy::add_latency`] with
//! a long delay approximates.
//!
//! The same proxy also holds a steady [`Link`] for a whole run
//! (`[network]`): a round trip, jitter and bandwidth between the
//! application side and the service, the latency fault adding on top.
//!
//! [`relay`] is the proxy itself (listening, admitting, forwarding, cutting),
//! [`state`] what its connections share (the fault windows, the epoch, the
//! counters), [`link`] the steady link, [`clock`] the sub-millisecond
//! sleep its holds need, [`url`] how a backend URL is sent through it.

mod clock;
mod link;
mod relay;
mod state;
mod url;

pub use clock::precise_timers;
pub use link::{parse_bandwidth, Link};
pub use relay::FaultProxy;
pub use state::ProxyStats;
pub use url::{route_through, upstream_of};

#[cfg(test)]
mod tests;
