//! The [`SyscallTimer`] backed by the kernel programs: this process's `write` calls.
//!
//! Only writes are timed: in a ping-pong each thread spends almost all of its time blocked in
//! `read`, so read time measures waiting, not kernel work. A write is the sending side's whole
//! kernel cost (copy, wake the peer).

use anyhow::Result;

use super::{SyscallTime, SyscallTimer};
use crate::{
    bpf::{Session, SessionConfig, Syscall, Target},
    stats::Snapshot,
};

/// Times this process's `write` calls between `begin` and `end`.
pub struct KernelSyscallTimer {
    session: Session,
    before: Snapshot,
}

impl KernelSyscallTimer {
    /// Loads the kernel programs tracking this process.
    pub fn new() -> Result<Self> {
        let session = Session::start(&SessionConfig {
            syscalls: Syscall::resolve_list(&["write"])?,
            target: Target::Processes(vec![std::process::id()]),
            noop: false,
        })?;
        Ok(Self { session, before: Snapshot::default() })
    }
}

impl SyscallTimer for KernelSyscallTimer {
    fn begin(&mut self) -> Result<()> {
        self.before = self.session.snapshot()?;
        Ok(())
    }

    fn end(&mut self) -> Result<SyscallTime> {
        let delta = self.session.snapshot()?.since(&self.before);
        let write = delta.syscall("write");
        Ok(SyscallTime {
            calls: write.map_or(0, |w| w.calls),
            total_ns: write.map_or(0, |w| w.total_ns),
        })
    }
}
