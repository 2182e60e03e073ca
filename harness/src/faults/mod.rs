//! Faults injected into a strategy's run at the scenario's times, the same
//! for every strategy, and the record of what actually happened.
//!
//! Each kind lands where it would in production: a process killed, paused
//! or crashed at a point of its own path; a link cut or slowed by the TCP
//! proxy the instances reach their backends through; database sessions
//! terminated on the server; a command (a service restart) run as is. A
//! fault that does not apply to a strategy (a Redis partition for db-scan,
//! a crash point its path does not have) is recorded as such, never
//! silently skipped.
//!
//! Each kind is a file of its own (`kill_instance.rs`, `partition.rs`, ...)
//! holding its `[[faults]]` fields, checks, label, injection and the rules
//! its record is read by (the [`kind`] trait); [`list`] names every kind
//! once, and what goes through all of them is generated from it: the
//! modules below, the [`FaultKind`] tag, and [`Fault`]'s dispatch in
//! [`fault`]. What the kinds share: [`context`] (what they act on, and
//! steps several take), [`record`] (a fault as it happened), [`loss`]
//! (missed cancels put down to faults), [`inject`] (each fault at its time,
//! an instance fault's role resolved then), [`role`] (the instance a
//! fault acts on: a number or a role such as the leader) and [`target`]
//! (the link a network fault acts on).

mod context;
mod fault;
mod fields;
mod inject;
mod kind;
mod list;
mod loss;
mod record;
mod role;
mod target;

macro_rules! kind_modules {
    ($($module:ident::$kind:ident $name:literal,)*) => {
        $(pub mod $module;)*
    };
}
list::every_fault_kind!(kind_modules);

pub use context::{tail, FaultContext};
pub use fault::{read_faults, Fault};
// Code outside reads a fault's kind through `Fault`; tests name it.
#[cfg(test)]
pub use fault::FaultAction;
pub use inject::inject;
pub use list::FaultKind;
pub use loss::{missed_by_fault, FaultLoss};
pub use pause_instance::count_duplicates;
pub use record::{FaultReach, FaultRecord};
pub use role::{InstanceTarget, Role};
pub use target::Target;
