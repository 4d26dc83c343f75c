//! The [`SyscallTimer`] backed by the kernel programs: this process's sending calls, `write`
//! (pipe, eventfd) and `sendto` (what Rust's `UnixStream::write` makes).
//!
//! Only sends are timed: in a ping-pong each thread spends almost all of its time blocked in
//! `read`/`recvfrom`, so their time measures waiting, not kernel work. A send is the sending
//! side's whole kernel cost (copy, wake the peer).

use anyhow::Result;
use c2c::{SyscallTime, SyscallTimer};

use crate::{
    bpf::{Session, SessionConfig, Syscall, Target},
    stats::Snapshot,
};

/// Times this process's `write` and `sendto` calls between `begin` and `end`.
pub struct KernelSyscallTimer {
    session: Session,
    before: Snapshot,
}

impl KernelSyscallTimer {
    /// Loads the kernel programs tracking this process, on `syscall_attach`'s front end
    /// (`--attach`; `None`: the default).
    pub fn new(syscall_attach: Option<crate::bpf::SyscallAttach>) -> Result<Self> {
        // This 64-bit process only: no compat programs.
        let session = Session::start(&SessionConfig {
            compat: false,
            syscall_attach,
            ..SessionConfig::new(
                Syscall::resolve_list(&["write", "sendto"])?,
                Target::Processes(vec![std::process::id()]),
            )
        })?;
        Ok(Self {
            session,
            before: Snapshot::default(),
        })
    }
}

impl SyscallTimer for KernelSyscallTimer {
    fn begin(&mut self) -> Result<()> {
        self.before = self.session.snapshot()?;
        Ok(())
    }

    fn end(&mut self) -> Result<SyscallTime> {
        let delta = self.session.snapshot()?.since(&self.before);
        Ok(SyscallTime {
            calls: delta.syscalls.iter().map(|s| s.calls).sum(),
            total_ns: delta.syscalls.iter().map(|s| s.total_ns).sum(),
        })
    }
}
