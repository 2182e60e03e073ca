//! The signals delaybench sends: a pause (`STOP`, then `CONT`) and a kill,
//! to a process or to a process group, with kill(2) and killpg(2). The
//! harness pauses and kills workers and hook commands; a worker stops
//! itself at an injected stall ([`crate::crash`]).

/// A signal delaybench sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    Stop,
    Cont,
    Kill,
}

#[cfg(unix)]
impl Sig {
    fn nix(self) -> nix::sys::signal::Signal {
        use nix::sys::signal::Signal;
        match self {
            Sig::Stop => Signal::SIGSTOP,
            Sig::Cont => Signal::SIGCONT,
            Sig::Kill => Signal::SIGKILL,
        }
    }
}

/// Sends `sig` to the process `pid`; the error names both.
pub fn to_process(pid: u32, sig: Sig) -> Result<(), String> {
    send(pid, sig, false)
}

/// Sends `sig` to every process of the group `pgid`, for a command started
/// as the leader of its own group.
pub fn to_group(pgid: u32, sig: Sig) -> Result<(), String> {
    send(pgid, sig, true)
}

fn send(id: u32, sig: Sig, group: bool) -> Result<(), String> {
    let what = if group { "process group" } else { "process" };
    #[cfg(unix)]
    {
        use nix::sys::signal::{kill, killpg};
        let target = nix::unistd::Pid::from_raw(id as i32);
        let sent = if group {
            killpg(target, sig.nix())
        } else {
            kill(target, sig.nix())
        };
        sent.map_err(|e| format!("could not send {} to {what} {id}: {e}", sig.nix()))
    }
    #[cfg(not(unix))]
    {
        Err(format!(
            "cannot send {sig:?} to {what} {id}: signals are Unix-only"
        ))
    }
}
