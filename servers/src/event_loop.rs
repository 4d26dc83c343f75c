//! The single-threaded epoll event loop shared by every variant.
//!
//! The variants differ only in the four [`Variant`] methods gathered near the top of this file
//! (which epoll flags, how many accepts per event, how many reads per event, which interest a
//! connection needs); everything else — buffers, writes, protocol, shutdown — is shared.

use std::{io, os::fd::RawFd};

use anyhow::{Context, Result};

use crate::{
    Variant,
    conn::{Conn, FlushOutcome, ReadOutcome},
    protocol::Protocol,
    sys::{self, Epoll, SignalFd},
};

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const ET: u32 = libc::EPOLLET as u32;
const ERR_OR_HUP: u32 = (libc::EPOLLERR | libc::EPOLLHUP) as u32;

/// How many times to call accept (or read) per readiness event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerEvent {
    /// Exactly one call.
    Once,
    /// Keep calling until EAGAIN.
    UntilEagain,
}

// The variants side by side: these four methods are all that differs between LT, LT-PURE and
// ET; MP's workers each run the ET loop.
impl Variant {
    /// Events registered for the listening socket.
    pub fn listener_events(self) -> u32 {
        match self {
            Self::Lt | Self::LtPure => IN,
            Self::Et | Self::Mp => IN | ET,
        }
    }

    /// How many accepts per readiness event of the listening socket.
    pub fn accepts_per_event(self) -> PerEvent {
        match self {
            Self::Lt => PerEvent::UntilEagain,
            Self::LtPure => PerEvent::Once,
            Self::Et | Self::Mp => PerEvent::UntilEagain,
        }
    }

    /// How many reads per readiness event of a client socket.
    pub fn reads_per_event(self) -> PerEvent {
        match self {
            Self::Lt | Self::LtPure => PerEvent::Once,
            Self::Et | Self::Mp => PerEvent::UntilEagain,
        }
    }

    /// Events a client socket should be registered for, given its state.
    pub fn client_events(self, conn: &Conn, config: &LoopConfig) -> u32 {
        let pending = conn.pending_output() > 0;
        match self {
            Self::Lt | Self::LtPure => {
                // Level-triggered: drop EPOLLIN while we refuse to read, or epoll would spin.
                let readable = if config.wants_input(conn) { IN } else { 0 };
                let writable = if pending || config.always_epollout {
                    OUT
                } else {
                    0
                };
                readable | writable
            }
            Self::Et | Self::Mp => ET | if pending { OUT } else { IN },
        }
    }
}

/// Settings of one event loop.
#[derive(Debug, Clone, Copy)]
pub struct LoopConfig {
    /// LT, LT-PURE or ET (an MP worker's loop is ET).
    pub variant: Variant,
    /// LT and LT-PURE: keep EPOLLOUT registered on every client ("EPOLLOUT noise" scenario).
    pub always_epollout: bool,
    /// Echo or HTTP.
    pub protocol: Protocol,
    /// Size of each `read` and the pending-output limit per connection.
    pub buffer_size: usize,
    /// Capacity of the `epoll_wait` event array.
    pub max_events: usize,
}

impl LoopConfig {
    /// Whether `conn` may read more: the output limit, plus the input the protocol may hold
    /// unparsed (one largest HTTP request head).
    pub fn wants_input(&self, conn: &Conn) -> bool {
        conn.wants_input(self.buffer_size, self.protocol.input_allowance())
    }
}

/// Counters reported when the loop ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections open when shutdown began (closed by the server).
    pub open_at_shutdown: u64,
}

/// One epoll loop serving one listening socket until SIGTERM/SIGINT.
#[derive(Debug)]
pub struct EventLoop {
    config: LoopConfig,
    epoll: Epoll,
    listener: RawFd,
    signals: SignalFd,
    /// Connections indexed by file descriptor.
    conns: Vec<Option<Conn>>,
    scratch: Vec<u8>,
    events: Vec<libc::epoll_event>,
    stats: LoopStats,
    warned_fd_limit: bool,
    /// Reserved so that at the descriptor limit a pending connection can still be accepted
    /// and closed; otherwise a level-triggered listener would stay readable and spin.
    spare_fd: RawFd,
}

impl EventLoop {
    /// Registers the (non-blocking, listening) `listener` and `signals` in a new epoll instance.
    pub fn new(config: LoopConfig, listener: RawFd, signals: SignalFd) -> Result<Self> {
        let epoll = Epoll::new().context("epoll_create1 failed")?;
        epoll
            .add(listener, config.variant.listener_events())
            .context("epoll_ctl(ADD) on the listener failed")?;
        // The signalfd wakes epoll_wait for shutdown, so the idle loop needs no timeout.
        epoll
            .add(signals.fd(), IN)
            .context("epoll_ctl(ADD) on the signalfd failed")?;
        Ok(Self {
            config,
            epoll,
            listener,
            signals,
            conns: Vec::new(),
            scratch: vec![0; config.buffer_size],
            events: vec![libc::epoll_event { events: 0, u64: 0 }; config.max_events],
            stats: LoopStats::default(),
            warned_fd_limit: false,
            spare_fd: sys::open_spare_fd(),
        })
    }

    /// Serves until SIGTERM or SIGINT, then closes the listener and every connection.
    pub fn run(mut self) -> Result<LoopStats> {
        loop {
            let ready = match self.epoll.wait(&mut self.events, -1) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("epoll_wait failed"),
            };
            for i in 0..ready {
                let event = self.events[i];
                let (fd, flags) = (event.u64 as RawFd, event.events);
                if fd == self.listener {
                    self.on_listener_ready();
                } else if fd == self.signals.fd() {
                    if self
                        .signals
                        .take()
                        .context("reading the signalfd failed")?
                        .is_some()
                    {
                        return Ok(self.shutdown());
                    }
                } else {
                    self.on_client_ready(fd, flags);
                }
            }
        }
    }

    /// Accepts new connections, once or until EAGAIN depending on the variant.
    fn on_listener_ready(&mut self) {
        let per_event = self.config.variant.accepts_per_event();
        loop {
            match sys::accept(self.listener) {
                Ok(fd) => {
                    self.stats.accepted += 1;
                    self.register(fd);
                    if per_event == PerEvent::Once {
                        return;
                    }
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR | libc::ECONNABORTED)
                        if per_event == PerEvent::UntilEagain => {}
                    Some(libc::EMFILE | libc::ENFILE) => {
                        if !self.warned_fd_limit {
                            eprintln!(
                                "warning: accept failed: {e}; closing new connections until descriptors free up (raise the limit with --nofile)"
                            );
                            self.warned_fd_limit = true;
                        }
                        if !self.shed_connection() {
                            return;
                        }
                    }
                    _ => return, // EAGAIN: the backlog is empty (LT: half of all accepts end here).
                },
            }
        }
    }

    /// At the descriptor limit: frees the spare descriptor, accepts one pending connection and
    /// closes it at once (the client sees the close), then takes the spare back. Returns whether
    /// a connection was shed.
    fn shed_connection(&mut self) -> bool {
        if self.spare_fd < 0 {
            return false;
        }
        sys::close(self.spare_fd);
        let shed = match sys::accept(self.listener) {
            Ok(fd) => {
                sys::close(fd);
                true
            }
            Err(_) => false,
        };
        self.spare_fd = sys::open_spare_fd();
        shed
    }

    /// Makes an accepted socket non-blocking and adds it to epoll.
    fn register(&mut self, fd: RawFd) {
        if sys::set_nonblocking(fd).is_err() {
            sys::close(fd);
            return;
        }
        let mut conn = Conn::new(fd);
        conn.registered = self.config.variant.client_events(&conn, &self.config);
        if self.epoll.add(fd, conn.registered).is_err() {
            sys::close(fd);
            return;
        }
        let index = fd as usize;
        if self.conns.len() <= index {
            self.conns.resize_with(index + 1, || None);
        }
        self.conns[index] = Some(conn);
    }

    /// Handles readiness of a client socket, then re-registers or closes it.
    fn on_client_ready(&mut self, fd: RawFd, flags: u32) {
        let config = self.config;
        let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::as_mut) else {
            return;
        };
        let keep = flags & ERR_OR_HUP == 0
            && (flags & OUT == 0 || flush_and_resume(conn, config))
            && (flags & IN == 0 || on_readable(conn, &mut self.scratch, config))
            && !conn.finished();
        if !keep {
            self.close(fd);
            return;
        }
        let wanted = config.variant.client_events(conn, &config);
        if wanted != conn.registered {
            if self.epoll.modify(fd, wanted).is_err() {
                self.close(fd);
                return;
            }
            conn.registered = wanted;
        }
    }

    /// Closes a client socket (close(2) also removes it from epoll).
    fn close(&mut self, fd: RawFd) {
        if let Some(conn) = self.conns.get_mut(fd as usize).and_then(Option::take) {
            sys::close(conn.fd);
        }
    }

    /// Stops accepting and closes every connection.
    fn shutdown(mut self) -> LoopStats {
        sys::close(self.listener);
        for conn in self.conns.drain(..).flatten() {
            self.stats.open_at_shutdown += 1;
            sys::close(conn.fd);
        }
        self.stats
    }
}

/// Reads (once or until EAGAIN, per the variant), feeds the protocol and writes replies.
/// Returns false when the connection must be closed.
fn on_readable(conn: &mut Conn, scratch: &mut [u8], config: LoopConfig) -> bool {
    let per_event = config.variant.reads_per_event();
    while config.wants_input(conn) {
        match conn.read_once(scratch) {
            ReadOutcome::Data(n) => {
                config
                    .protocol
                    .consume(conn, &scratch[..n], config.buffer_size);
                if !flush_and_resume(conn, config) {
                    return false;
                }
            }
            ReadOutcome::Eof => conn.peer_closed = true,
            ReadOutcome::WouldBlock => break,
            ReadOutcome::Failed => return false,
        }
        if per_event == PerEvent::Once {
            break;
        }
    }
    true
}

/// Writes pending output; once drained, lets the protocol continue held-back work (pipelined
/// requests), until nothing is pending or the socket would block. Returns false when the
/// connection must be closed.
fn flush_and_resume(conn: &mut Conn, config: LoopConfig) -> bool {
    loop {
        match conn.flush() {
            FlushOutcome::Failed => return false,
            FlushOutcome::WouldBlock => return true,
            FlushOutcome::Drained => {
                config.protocol.resume(conn, config.buffer_size);
                if conn.pending_output() == 0 {
                    return true;
                }
            }
        }
    }
}
