//! Failed requests, counted by kind, and the errors of an invalid [`LoadSpec`](super::LoadSpec).

use std::{fmt, io};

/// Why one request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestErrorKind {
    /// connect() was refused (nothing listening, or the accept backlog overflowed).
    Refused,
    /// The connection was reset or aborted, or the server closed it before a full HTTP response.
    Reset,
    /// The request did not complete within [`LoadSpec::timeout`](super::LoadSpec::timeout).
    Timeout,
    /// The server closed the connection before echoing the whole payload.
    ShortEcho,
    /// The echoed bytes differ from the bytes sent.
    WrongEcho,
    /// The HTTP status was not 2xx.
    HttpStatus,
    /// EMFILE / ENFILE: the load generator ran out of file descriptors.
    TooManyFiles,
    /// EADDRNOTAVAIL: no free local port for a new connection.
    NoLocalPort,
    /// Anything else: a malformed HTTP response, an unusual errno, ...
    Other,
}

impl RequestErrorKind {
    /// Classifies an I/O error; `eof` is the kind an unexpected end of stream stands for.
    pub(crate) fn from_io(err: &io::Error, eof: Self) -> Self {
        match err.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE) => return Self::TooManyFiles,
            Some(libc::EADDRNOTAVAIL) => return Self::NoLocalPort,
            _ => {}
        }
        match err.kind() {
            io::ErrorKind::ConnectionRefused => Self::Refused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::NotConnected => Self::Reset,
            io::ErrorKind::TimedOut => Self::Timeout,
            io::ErrorKind::UnexpectedEof => eof,
            _ => Self::Other,
        }
    }
}

/// Number of failed requests of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorCounts {
    /// connect() refused.
    pub refused: u64,
    /// Connection reset, aborted or closed mid-response.
    pub reset: u64,
    /// Request not completed within the per-request timeout.
    pub timeout: u64,
    /// Echo shorter than the payload (server closed early).
    pub short_echo: u64,
    /// Echo differs from the payload.
    pub wrong_echo: u64,
    /// HTTP status other than 2xx.
    pub http_status: u64,
    /// EMFILE / ENFILE in the load generator.
    #[serde(default)]
    pub too_many_files: u64,
    /// EADDRNOTAVAIL: local ports exhausted.
    #[serde(default)]
    pub no_local_port: u64,
    /// Any other failure.
    pub other: u64,
}

impl ErrorCounts {
    /// All failed requests, whatever their kind.
    pub fn total(&self) -> u64 {
        self.refused
            + self.reset
            + self.timeout
            + self.short_echo
            + self.wrong_echo
            + self.http_status
            + self.too_many_files
            + self.no_local_port
            + self.other
    }

    /// Counts one failed request of `kind`.
    pub fn add(&mut self, kind: RequestErrorKind) {
        *self.slot(kind) += 1;
    }

    /// Adds every count of `other` to this one.
    pub fn merge(&mut self, other: &ErrorCounts) {
        for (kind, n) in other.by_kind() {
            *self.slot(kind) += n;
        }
    }

    /// Each kind with its count, in a fixed order (the order of the fields).
    pub fn by_kind(&self) -> [(RequestErrorKind, u64); 9] {
        use RequestErrorKind as K;
        [
            (K::Refused, self.refused),
            (K::Reset, self.reset),
            (K::Timeout, self.timeout),
            (K::ShortEcho, self.short_echo),
            (K::WrongEcho, self.wrong_echo),
            (K::HttpStatus, self.http_status),
            (K::TooManyFiles, self.too_many_files),
            (K::NoLocalPort, self.no_local_port),
            (K::Other, self.other),
        ]
    }

    fn slot(&mut self, kind: RequestErrorKind) -> &mut u64 {
        use RequestErrorKind as K;
        match kind {
            K::Refused => &mut self.refused,
            K::Reset => &mut self.reset,
            K::Timeout => &mut self.timeout,
            K::ShortEcho => &mut self.short_echo,
            K::WrongEcho => &mut self.wrong_echo,
            K::HttpStatus => &mut self.http_status,
            K::TooManyFiles => &mut self.too_many_files,
            K::NoLocalPort => &mut self.no_local_port,
            K::Other => &mut self.other,
        }
    }
}

impl fmt::Display for RequestErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Refused => "refused",
            Self::Reset => "reset",
            Self::Timeout => "timeout",
            Self::ShortEcho => "short echo",
            Self::WrongEcho => "wrong echo",
            Self::HttpStatus => "http status",
            Self::TooManyFiles => "EMFILE",
            Self::NoLocalPort => "EADDRNOTAVAIL",
            Self::Other => "other",
        })
    }
}

impl RequestErrorKind {
    /// What a failure of this kind means and what to do about it, for the report.
    #[must_use]
    pub fn hint(self) -> &'static str {
        match self {
            Self::Refused => {
                "connect() refused: the server is not listening or its accept backlog overflowed"
            }
            Self::Reset => "connections reset or closed mid-answer by the server",
            Self::Timeout => "requests slower than --timeout: raise --timeout or lower the load",
            Self::ShortEcho | Self::WrongEcho => {
                "the server's echo was incomplete or wrong: a server bug, or a server that does not echo (an HTTP server needs --workload http)"
            }
            Self::HttpStatus => "HTTP answers other than 2xx",
            Self::TooManyFiles => {
                "the load generator ran out of file descriptors (EMFILE): raise `ulimit -n` or lower --concurrency"
            }
            Self::NoLocalPort => {
                "no free local port (EADDRNOTAVAIL): sockets in TIME_WAIT; lower the rate, use --workload keepalive-echo, or widen net.ipv4.ip_local_port_range"
            }
            Self::Other => "other failures (malformed answers, unusual errors): rerun with -v",
        }
    }
}

/// `refused 3, timeout 1`: the non-zero kinds, or `none`.
impl fmt::Display for ErrorCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (kind, n) in self.by_kind() {
            if n == 0 {
                continue;
            }
            if !first {
                f.write_str(", ")?;
            }
            write!(f, "{kind} {n}")?;
            first = false;
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// Why a [`LoadSpec`](super::LoadSpec) cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// `concurrency` is 0.
    #[error("concurrency must be at least 1")]
    ZeroConcurrency,
    /// An echo workload with an empty payload has nothing to verify.
    #[error("payload must be at least 1 byte for echo workloads")]
    ZeroPayload,
    /// `rate` is not a positive, finite number.
    #[error("rate must be a positive number of requests per second, got {0}")]
    BadRate(f64),
    /// `timeout` is zero.
    #[error("per-request timeout must be greater than zero")]
    ZeroTimeout,
    /// A client CPU number beyond what `sched_setaffinity` can express.
    #[error("client CPU {0} is out of range (at most {max})", max = libc::CPU_SETSIZE - 1)]
    CpuOutOfRange(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_lists_nonzero_kinds_in_field_order() {
        let mut e = ErrorCounts::default();
        assert_eq!(e.to_string(), "none");
        e.timeout = 1;
        e.refused = 3;
        assert_eq!(e.to_string(), "refused 3, timeout 1");
        assert_eq!(e.total(), 4);
    }

    #[test]
    fn add_and_merge_count_every_kind() {
        let mut a = ErrorCounts::default();
        for (kind, _) in ErrorCounts::default().by_kind() {
            a.add(kind);
        }
        assert_eq!(a.total(), 9);
        let mut b = a;
        b.merge(&a);
        assert_eq!(b.total(), 18);
        assert_eq!(b.wrong_echo, 2);
    }

    #[test]
    fn io_errors_map_to_kinds() {
        let k =
            |kind| RequestErrorKind::from_io(&io::Error::from(kind), RequestErrorKind::ShortEcho);
        assert_eq!(
            k(io::ErrorKind::ConnectionRefused),
            RequestErrorKind::Refused
        );
        assert_eq!(k(io::ErrorKind::ConnectionReset), RequestErrorKind::Reset);
        assert_eq!(k(io::ErrorKind::BrokenPipe), RequestErrorKind::Reset);
        assert_eq!(k(io::ErrorKind::UnexpectedEof), RequestErrorKind::ShortEcho);
        assert_eq!(k(io::ErrorKind::AddrNotAvailable), RequestErrorKind::Other);
    }
}
