//! What one request is, for each workload: the bytes sent, the connection handling, and how the
//! answer is checked.

use std::{
    fmt,
    net::SocketAddr,
    str::FromStr,
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use super::{
    errors::RequestErrorKind,
    http::{self, BodyFraming},
};

/// The request sent by [`Workload::HttpKeepAlive`].
pub const HTTP_REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

/// Payloads above this are written and read concurrently, so that a server echoing while it
/// still reads cannot deadlock against a client that only reads after writing everything.
const CONCURRENT_ECHO_ABOVE: usize = 32 * 1024;
/// Initial size of an HTTP connection's receive buffer.
const HTTP_BUF: usize = 4 * 1024;
/// Largest chunked HTTP body the client buffers (Content-Length bodies are skipped unbuffered).
const MAX_CHUNKED_BODY: usize = 1024 * 1024;

/// The kind of traffic the load generator sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Workload {
    /// Connect, write the payload, read the whole echo, close (client first): one connection per
    /// request, as in the reference experiments.
    #[default]
    ShortEcho,
    /// One connection per concurrent client, payload written and echo read repeatedly.
    KeepAliveEcho,
    /// One connection per concurrent client, `GET /` repeatedly; 2xx responses count as ok.
    HttpKeepAlive,
}

impl Workload {
    /// Every workload, in the order of the CLI's help.
    pub const ALL: [Workload; 3] = [Self::ShortEcho, Self::KeepAliveEcho, Self::HttpKeepAlive];

    /// The CLI name: `short-echo`, `keepalive-echo` or `http`.
    pub fn name(self) -> &'static str {
        match self {
            Self::ShortEcho => "short-echo",
            Self::KeepAliveEcho => "keepalive-echo",
            Self::HttpKeepAlive => "http",
        }
    }

    /// Whether the server is expected to echo the payload back.
    pub fn is_echo(self) -> bool {
        matches!(self, Self::ShortEcho | Self::KeepAliveEcho)
    }
}

impl clap::ValueEnum for Workload {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let help = match self {
            Self::ShortEcho => "connect, echo the payload, close: a connection per request",
            Self::KeepAliveEcho => "one connection per client, the payload echoed repeatedly",
            Self::HttpKeepAlive => "one connection per client, GET / repeatedly (keep-alive)",
        };
        Some(clap::builder::PossibleValue::new(self.name()).help(help))
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A workload name that is none of `short-echo`, `keepalive-echo`, `http`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown workload {0:?} (expected short-echo, keepalive-echo or http)")]
pub struct ParseWorkloadError(pub String);

impl FromStr for Workload {
    type Err = ParseWorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| ParseWorkloadError(s.to_owned()))
    }
}

/// A request that completed correctly.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completed {
    /// When the last byte of the answer arrived.
    pub end: Instant,
    /// How long connect() took, for short connections.
    pub connect: Option<Duration>,
}

/// One simulated client: its connection (if kept alive) and its buffers.
pub(crate) struct Client {
    workload: Workload,
    addr: SocketAddr,
    conn: Option<TcpStream>,
    /// Echo payload; its first 8 bytes carry the request sequence number.
    send: Vec<u8>,
    /// Echo receive buffer, or HTTP receive buffer.
    recv: Vec<u8>,
    /// Bytes in `recv` not yet consumed (HTTP only).
    filled: usize,
    seq: u64,
    id: u64,
}

impl Client {
    /// A client with no connection yet; `id` makes its payloads differ from other clients'.
    pub(crate) fn new(workload: Workload, addr: SocketAddr, payload: usize, id: usize) -> Self {
        let (send, recv) = if workload.is_echo() {
            // A rolling pattern distinct per client; the sequence number is stamped per request.
            let send = (0..payload)
                .map(|i| (i as u64).wrapping_add(id as u64 * 7) as u8)
                .collect();
            (send, vec![0; payload])
        } else {
            (Vec::new(), vec![0; HTTP_BUF])
        };
        Client {
            workload,
            addr,
            conn: None,
            send,
            recv,
            filled: 0,
            seq: 0,
            id: id as u64,
        }
    }

    /// Drops the connection, e.g. after an error or a timeout that cut a request short.
    pub(crate) fn disconnect(&mut self) {
        self.conn = None;
        self.filled = 0;
    }

    /// Sends one request and waits for its complete, verified answer.
    pub(crate) async fn request(&mut self) -> Result<Completed, RequestErrorKind> {
        self.seq += 1;
        match self.workload {
            Workload::ShortEcho => self.short_echo().await,
            Workload::KeepAliveEcho => self.keepalive_echo().await,
            Workload::HttpKeepAlive => self.http().await,
        }
    }

    async fn short_echo(&mut self) -> Result<Completed, RequestErrorKind> {
        let t0 = Instant::now();
        let mut stream = connect(self.addr).await?;
        let connect = t0.elapsed();
        self.stamp();
        echo(&mut stream, &self.send, &mut self.recv).await?;
        let end = Instant::now();
        // Dropping the stream closes it: the client closes first, as in the reference.
        drop(stream);
        Ok(Completed {
            end,
            connect: Some(connect),
        })
    }

    async fn keepalive_echo(&mut self) -> Result<Completed, RequestErrorKind> {
        if self.conn.is_none() {
            self.conn = Some(connect(self.addr).await?);
        }
        self.stamp();
        let stream = self.conn.as_mut().expect("connected above");
        echo(stream, &self.send, &mut self.recv).await?;
        Ok(Completed {
            end: Instant::now(),
            connect: None,
        })
    }

    async fn http(&mut self) -> Result<Completed, RequestErrorKind> {
        if self.conn.is_none() {
            self.conn = Some(connect(self.addr).await?);
            self.filled = 0;
        }
        let stream = self.conn.as_mut().expect("connected above");
        stream
            .write_all(HTTP_REQUEST)
            .await
            .map_err(|e| io_kind(&e, RequestErrorKind::Reset))?;
        let (status, close) = read_response(stream, &mut self.recv, &mut self.filled).await?;
        let end = Instant::now();
        if close {
            self.disconnect();
        }
        if !(200..300).contains(&status) {
            return Err(RequestErrorKind::HttpStatus);
        }
        Ok(Completed { end, connect: None })
    }

    /// Writes this request's sequence number (and client id) into the payload.
    fn stamp(&mut self) {
        let tag = (self.id << 40 | self.seq).to_le_bytes();
        let n = tag.len().min(self.send.len());
        self.send[..n].copy_from_slice(&tag[..n]);
    }
}

async fn connect(addr: SocketAddr) -> Result<TcpStream, RequestErrorKind> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| io_kind(&e, RequestErrorKind::Reset))?;
    // Requests are single small writes: never let Nagle hold one back.
    stream
        .set_nodelay(true)
        .map_err(|e| io_kind(&e, RequestErrorKind::Other))?;
    Ok(stream)
}

fn io_kind(err: &std::io::Error, eof: RequestErrorKind) -> RequestErrorKind {
    RequestErrorKind::from_io(err, eof)
}

/// Writes `send`, reads exactly as many bytes back into `recv`, and compares them.
async fn echo(
    stream: &mut TcpStream,
    send: &[u8],
    recv: &mut [u8],
) -> Result<(), RequestErrorKind> {
    let short = RequestErrorKind::ShortEcho;
    if send.len() <= CONCURRENT_ECHO_ABOVE {
        stream
            .write_all(send)
            .await
            .map_err(|e| io_kind(&e, short))?;
        stream
            .read_exact(recv)
            .await
            .map_err(|e| io_kind(&e, short))?;
    } else {
        let (mut rd, mut wr) = stream.split();
        let (w, r) = tokio::join!(wr.write_all(send), rd.read_exact(recv));
        w.map_err(|e| io_kind(&e, short))?;
        r.map_err(|e| io_kind(&e, short))?;
    }
    if recv != send {
        return Err(RequestErrorKind::WrongEcho);
    }
    Ok(())
}

/// Reads one HTTP response; returns its status and whether the connection must be closed.
/// `buf[..*filled]` holds bytes already received and carries any excess over to the next call.
async fn read_response(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    filled: &mut usize,
) -> Result<(u16, bool), RequestErrorKind> {
    let malformed = |_| RequestErrorKind::Other;
    let head = loop {
        if let Some(head) = http::parse_head(&buf[..*filled]).map_err(malformed)? {
            break head;
        }
        read_more(stream, buf, filled, http::MAX_HEAD).await?;
    };
    match head.body {
        BodyFraming::Length(n) => {
            let total = head.len.checked_add(n).ok_or(RequestErrorKind::Other)?;
            if *filled >= total {
                consume(buf, filled, total);
            } else {
                // The body is not needed: skip it without buffering it.
                let mut skip = total - *filled;
                *filled = 0;
                while skip > 0 {
                    let n = read_some(stream, buf).await?;
                    if n > skip {
                        buf.copy_within(skip..n, 0);
                        *filled = n - skip;
                        skip = 0;
                    } else {
                        skip -= n;
                    }
                }
            }
        }
        BodyFraming::Chunked => loop {
            let body = http::chunked_body_len(&buf[head.len..*filled]).map_err(malformed)?;
            if let Some(body) = body {
                consume(buf, filled, head.len + body);
                break;
            }
            read_more(stream, buf, filled, head.len + MAX_CHUNKED_BODY).await?;
        },
        BodyFraming::UntilClose => loop {
            // Bounded by the request timeout; the connection is dropped afterwards.
            match stream.read(buf).await {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(io_kind(&e, RequestErrorKind::Reset)),
            }
        },
    }
    Ok((head.status, head.close))
}

/// Reads into `buf[*filled..]`, growing `buf` up to `limit`; end of stream is a reset.
async fn read_more(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    filled: &mut usize,
    limit: usize,
) -> Result<(), RequestErrorKind> {
    if *filled == buf.len() {
        if buf.len() >= limit {
            return Err(RequestErrorKind::Other);
        }
        buf.resize((buf.len() * 2).min(limit), 0);
    }
    match stream.read(&mut buf[*filled..]).await {
        Ok(0) => Err(RequestErrorKind::Reset),
        Ok(n) => {
            *filled += n;
            Ok(())
        }
        Err(e) => Err(io_kind(&e, RequestErrorKind::Reset)),
    }
}

/// Reads into the whole of `buf`; end of stream is a reset.
async fn read_some(stream: &mut TcpStream, buf: &mut [u8]) -> Result<usize, RequestErrorKind> {
    match stream.read(buf).await {
        Ok(0) => Err(RequestErrorKind::Reset),
        Ok(n) => Ok(n),
        Err(e) => Err(io_kind(&e, RequestErrorKind::Reset)),
    }
}

fn consume(buf: &mut [u8], filled: &mut usize, n: usize) {
    buf.copy_within(n..*filled, 0);
    *filled -= n;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(w.to_string().parse::<Workload>(), Ok(w));
        }
        assert_eq!("http".parse::<Workload>(), Ok(Workload::HttpKeepAlive));
        let err = "udp".parse::<Workload>().unwrap_err();
        assert!(err.to_string().contains("short-echo"), "{err}");
    }

    #[test]
    fn payload_differs_per_request_and_per_client() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut a = Client::new(Workload::KeepAliveEcho, addr, 64, 0);
        let mut b = Client::new(Workload::KeepAliveEcho, addr, 64, 1);
        a.seq = 1;
        a.stamp();
        let first = a.send.clone();
        a.seq = 2;
        a.stamp();
        assert_ne!(first, a.send);
        b.seq = 2;
        b.stamp();
        assert_ne!(a.send, b.send);
        // Payloads shorter than the tag still vary.
        let mut tiny = Client::new(Workload::ShortEcho, addr, 1, 0);
        tiny.seq = 1;
        tiny.stamp();
        let one = tiny.send.clone();
        tiny.seq = 2;
        tiny.stamp();
        assert_ne!(one, tiny.send);
    }
}
