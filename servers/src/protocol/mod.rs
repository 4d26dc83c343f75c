//! What the servers say: echo the bytes back, or answer HTTP/1.1 with a fixed 200.

pub mod echo;
pub mod http;

use crate::conn::Conn;

/// The application protocol spoken on client connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Write back exactly the bytes read.
    Echo {
        /// Close right after echoing the first chunk instead of waiting for the client's EOF.
        server_closes: bool,
    },
    /// HTTP/1.1 with a fixed `200 OK`, keep-alive and pipelining.
    Http,
}

impl Protocol {
    /// Input a connection may hold unparsed beyond the output limit: one largest request head
    /// for HTTP; echo keeps no input.
    #[must_use]
    pub const fn input_allowance(self) -> usize {
        match self {
            Self::Echo { .. } => 0,
            Self::Http => http::MAX_HEADER_BYTES,
        }
    }

    /// Feeds freshly read bytes to the protocol, which queues its replies in `conn.output`.
    pub fn consume(self, conn: &mut Conn, data: &[u8], output_limit: usize) {
        match self {
            Self::Echo { server_closes } => echo::consume(conn, data, server_closes),
            Self::Http => {
                conn.input.extend_from_slice(data);
                http::process(conn, output_limit);
            }
        }
    }

    /// Continues work held back by backpressure (pipelined HTTP requests) once output drained.
    pub fn resume(self, conn: &mut Conn, output_limit: usize) {
        match self {
            Self::Echo { .. } => {}
            Self::Http => http::process(conn, output_limit),
        }
    }
}
