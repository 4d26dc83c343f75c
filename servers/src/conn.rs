//! One client connection: its buffers and the I/O steps every variant shares.

use std::{io, os::fd::RawFd};

use crate::sys;

/// Per-connection state. Buffers start empty, so an idle connection costs a few dozen bytes.
#[derive(Debug)]
pub struct Conn {
    /// The client socket.
    pub fd: RawFd,
    /// Received bytes not yet consumed by the protocol (HTTP keeps partial requests here).
    pub input: Vec<u8>,
    /// Bytes to send; `output[output_sent..]` is still pending.
    pub output: Vec<u8>,
    /// How much of `output` has been written.
    pub output_sent: usize,
    /// The epoll events currently registered for this socket.
    pub registered: u32,
    /// The client closed its sending side (`read` returned 0).
    pub peer_closed: bool,
    /// Close as soon as the pending output is written (HTTP `Connection: close`, errors,
    /// echo `--server-closes`).
    pub close_after_flush: bool,
    /// HTTP request body bytes still to skip.
    pub body_remaining: u64,
}

/// What one `read` produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// This many bytes were read.
    Data(usize),
    /// The client closed its side.
    Eof,
    /// Nothing to read now (EAGAIN).
    WouldBlock,
    /// The connection is broken (ECONNRESET and friends); close it.
    Failed,
}

/// What [`Conn::flush`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushOutcome {
    /// Everything pending was written.
    Drained,
    /// The socket buffer is full (EAGAIN); wait for writability.
    WouldBlock,
    /// The client is gone (EPIPE, ECONNRESET); close it.
    Failed,
}

impl Conn {
    /// A fresh connection with nothing buffered.
    pub fn new(fd: RawFd) -> Self {
        Self {
            fd,
            input: Vec::new(),
            output: Vec::new(),
            output_sent: 0,
            registered: 0,
            peer_closed: false,
            close_after_flush: false,
            body_remaining: 0,
        }
    }

    /// Bytes queued but not yet written.
    pub fn pending_output(&self) -> usize {
        self.output.len() - self.output_sent
    }

    /// Whether reading more is allowed: the client may still send, we mean to keep the
    /// connection, the pending output is under `output_limit` and the unconsumed input under
    /// `output_limit` plus `input_allowance` (the protocol's largest unit, one HTTP request
    /// head): the backpressure that bounds memory for a client that sends, or pipelines,
    /// faster than it reads.
    pub fn wants_input(&self, output_limit: usize, input_allowance: usize) -> bool {
        !self.peer_closed
            && !self.close_after_flush
            && self.pending_output() < output_limit
            && self.input.len() < output_limit + input_allowance
    }

    /// Whether the connection has nothing left to do and should be closed.
    pub fn finished(&self) -> bool {
        self.pending_output() == 0 && (self.peer_closed || self.close_after_flush)
    }

    /// One `read(2)` into `scratch`, retrying on EINTR.
    pub fn read_once(&self, scratch: &mut [u8]) -> ReadOutcome {
        loop {
            match sys::read(self.fd, scratch) {
                Ok(0) => return ReadOutcome::Eof,
                Ok(n) => return ReadOutcome::Data(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::WouldBlock,
                Err(_) => return ReadOutcome::Failed,
            }
        }
    }

    /// Writes pending output until it is all sent or the socket would block (all variants
    /// write this way; partial writes just advance `output_sent`).
    pub fn flush(&mut self) -> FlushOutcome {
        while self.pending_output() > 0 {
            match sys::write(self.fd, &self.output[self.output_sent..]) {
                Ok(n) => self.output_sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return FlushOutcome::WouldBlock,
                Err(_) => return FlushOutcome::Failed,
            }
        }
        self.output.clear();
        self.output_sent = 0;
        // A burst may have grown the buffer; don't let an idle connection keep it.
        if self.output.capacity() > 64 * 1024 {
            self.output = Vec::new();
        }
        FlushOutcome::Drained
    }
}
