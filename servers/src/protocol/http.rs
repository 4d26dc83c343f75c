//! A minimal HTTP/1.1 responder: every well-formed request gets the same `200 OK`.
//!
//! Request line and headers are read up to CRLFCRLF (at most [`MAX_HEADER_BYTES`]); a
//! `Content-Length` body is skipped; pipelined requests are answered in order. Keep-alive is
//! the default for HTTP/1.1; HTTP/1.0 keeps the connection only with `Connection: keep-alive`.
//! Malformed requests get `400` and oversized headers `431`, both followed by a close.
//! `Transfer-Encoding` bodies are not supported and count as malformed.

use crate::conn::Conn;

/// Largest accepted request head (request line + headers + CRLFCRLF).
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// The body of every `200 OK`.
pub const BODY: &[u8] = b"Hello, world!\n";

const OK_HEAD_KEEP_ALIVE_11: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\n";
const OK_HEAD_KEEP_ALIVE_10: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nConnection: keep-alive\r\n\r\n";
const OK_HEAD_CLOSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nConnection: close\r\n\r\n";
const BAD_REQUEST: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\nBad Request\n";
const HEADERS_TOO_LARGE: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\nContent-Length: 32\r\nConnection: close\r\n\r\nRequest Header Fields Too Large\n";

/// A parsed request head: only what the response depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead {
    /// Bytes of the head including the final CRLFCRLF.
    pub len: usize,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// HTTP/1.0 (needs an explicit `Connection: keep-alive` in the reply).
    pub http10: bool,
    /// `HEAD` request: reply without body.
    pub head_only: bool,
    /// Declared body length to skip.
    pub content_length: u64,
}

/// Result of trying to parse one request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A complete, valid head.
    Complete(RequestHead),
    /// More bytes are needed.
    Incomplete,
    /// Not valid HTTP/1.x: answer 400.
    Malformed,
    /// Head larger than [`MAX_HEADER_BYTES`]: answer 431.
    TooLarge,
}

/// Answers every complete request in `conn.input` while pending output stays under
/// `output_limit`; leaves partial or held-back requests in `conn.input`.
pub fn process(conn: &mut Conn, output_limit: usize) {
    let mut pos = 0;
    while !conn.close_after_flush && conn.pending_output() < output_limit {
        if conn.body_remaining > 0 {
            let skip = conn.body_remaining.min((conn.input.len() - pos) as u64);
            pos += skip as usize;
            conn.body_remaining -= skip;
            if conn.body_remaining > 0 {
                break;
            }
        }
        // RFC 9112 §2.2: ignore empty lines before a request line.
        while conn.input[pos..].starts_with(b"\r\n") {
            pos += 2;
        }
        if pos == conn.input.len() {
            break;
        }
        match parse_head(&conn.input[pos..]) {
            Parsed::Incomplete => break,
            Parsed::Malformed => reject(conn, BAD_REQUEST),
            Parsed::TooLarge => reject(conn, HEADERS_TOO_LARGE),
            Parsed::Complete(head) => {
                pos += head.len;
                conn.body_remaining = head.content_length;
                let status_and_headers = match (head.keep_alive, head.http10) {
                    (false, _) => OK_HEAD_CLOSE,
                    (true, false) => OK_HEAD_KEEP_ALIVE_11,
                    (true, true) => OK_HEAD_KEEP_ALIVE_10,
                };
                conn.output.extend_from_slice(status_and_headers);
                if !head.head_only {
                    conn.output.extend_from_slice(BODY);
                }
                if !head.keep_alive {
                    conn.close_after_flush = true;
                }
            }
        }
    }
    if conn.close_after_flush {
        conn.input = Vec::new();
    } else {
        conn.input.drain(..pos);
    }
}

/// Queues an error response and marks the connection to close after it.
fn reject(conn: &mut Conn, response: &[u8]) {
    conn.output.extend_from_slice(response);
    conn.close_after_flush = true;
}

/// RFC 9110 token characters (method and header names).
fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses the request head at the start of `buf`.
pub fn parse_head(buf: &[u8]) -> Parsed {
    let window = &buf[..buf.len().min(MAX_HEADER_BYTES)];
    let Some(end) = window.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() >= MAX_HEADER_BYTES {
            Parsed::TooLarge
        } else {
            Parsed::Incomplete
        };
    };
    // Every line of the head, each ending in CRLF (the final empty line excluded).
    let mut rest = &buf[..end + 2];
    let mut next_line = || -> Option<Result<&[u8], ()>> {
        if rest.is_empty() {
            return None;
        }
        let Some(lf) = rest.iter().position(|&b| b == b'\n') else {
            return Some(Err(()));
        };
        let line = &rest[..lf];
        rest = &rest[lf + 1..];
        // A bare LF or CR inside the head is malformed.
        match line.strip_suffix(b"\r") {
            Some(line) if !line.contains(&b'\r') => Some(Ok(line)),
            _ => Some(Err(())),
        }
    };

    let Some(Ok(request_line)) = next_line() else {
        return Parsed::Malformed;
    };
    let mut parts = request_line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Parsed::Malformed;
    };
    if !is_token(method) || target.is_empty() || !target.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return Parsed::Malformed;
    }
    let http10 = match version {
        b"HTTP/1.1" => false,
        b"HTTP/1.0" => true,
        _ => return Parsed::Malformed,
    };

    let (mut close, mut keep_alive_token) = (false, false);
    let mut content_length: Option<u64> = None;
    while let Some(line) = next_line() {
        let Ok(line) = line else {
            return Parsed::Malformed;
        };
        // No colon also covers obsolete line folding (a continuation line).
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Parsed::Malformed;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if !is_token(name) || value.contains(&0) {
            return Parsed::Malformed;
        }
        if name.eq_ignore_ascii_case(b"connection") {
            for option in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                close |= option.eq_ignore_ascii_case(b"close");
                keep_alive_token |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case(b"content-length") {
            let parsed = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok());
            match (parsed, content_length) {
                (None, _) => return Parsed::Malformed,
                (Some(new), Some(old)) if new != old => return Parsed::Malformed,
                (Some(new), _) => content_length = Some(new),
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return Parsed::Malformed;
        }
    }
    let keep_alive = !close && (!http10 || keep_alive_token);
    Parsed::Complete(RequestHead {
        len: end + 4,
        keep_alive,
        http10,
        head_only: method == b"HEAD",
        content_length: content_length.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(buf: &[u8]) -> RequestHead {
        match parse_head(buf) {
            Parsed::Complete(head) => head,
            other => panic!(
                "expected a complete head for {:?}, got {other:?}",
                String::from_utf8_lossy(buf)
            ),
        }
    }

    #[test]
    fn keep_alive_rules() {
        assert!(head(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").keep_alive);
        assert!(!head(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(!head(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(head(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
    }

    #[test]
    fn malformed_and_oversized() {
        assert_eq!(parse_head(b"garbage\r\n\r\n"), Parsed::Malformed);
        assert_eq!(parse_head(b"GET / HTTP/2.0\r\n\r\n"), Parsed::Malformed);
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"),
            Parsed::Malformed
        );
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Parsed::Malformed
        );
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nHost: x\r\n"),
            Parsed::Incomplete
        );
        assert_eq!(parse_head(&vec![b'a'; MAX_HEADER_BYTES]), Parsed::TooLarge);
    }

    #[test]
    fn pipelined_requests_and_bodies() {
        let mut conn = Conn::new(-1);
        conn.input
            .extend_from_slice(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n");
        process(&mut conn, usize::MAX);
        let expected = [OK_HEAD_KEEP_ALIVE_11, BODY, OK_HEAD_KEEP_ALIVE_11, BODY].concat();
        assert_eq!(conn.output, expected);
        assert_eq!(conn.input, b"GET / HTTP/1.1\r\n");
    }
}
