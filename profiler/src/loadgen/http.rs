//! Just enough HTTP/1.1 response parsing for a keep-alive client: status line, headers, and a
//! body framed by Content-Length, chunked encoding or the end of the connection.

/// Largest response head (status line and headers) accepted, in bytes.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// How the body of a response ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    /// Exactly this many bytes follow the head.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// No framing: the body runs until the server closes the connection.
    UntilClose,
}

/// A parsed response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResponseHead {
    /// Status code, e.g. 200.
    pub status: u16,
    /// Bytes of the head, including the blank line that ends it.
    pub len: usize,
    /// How the body is framed.
    pub body: BodyFraming,
    /// The server will close the connection after this response.
    pub close: bool,
}

/// A response the client cannot make sense of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub &'static str);

/// Parses the response head at the start of `buf`; `Ok(None)` until the blank line has arrived.
///
/// One pass over the lines; only the three headers that frame the body are looked at.
pub(crate) fn parse_head(buf: &[u8]) -> Result<Option<ResponseHead>, Malformed> {
    let incomplete = || {
        if buf.len() >= MAX_HEAD {
            Err(Malformed("response head too large"))
        } else {
            Ok(None)
        }
    };
    let Some(eol) = buf.iter().position(|&b| b == b'\n') else {
        return incomplete();
    };
    let status_line = trim_cr(&buf[..eol]);
    let mut pos = eol + 1;
    // "HTTP/1.1 200 OK": the version, then exactly three digits.
    let version = status_line.get(..8).ok_or(Malformed("short status line"))?;
    if !version.starts_with(b"HTTP/1.") {
        return Err(Malformed("not an HTTP/1.x status line"));
    }
    let code = status_line.get(9..12).ok_or(Malformed("no status code"))?;
    if status_line[8] != b' ' || !code.iter().all(u8::is_ascii_digit) {
        return Err(Malformed("bad status code"));
    }
    let status = code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));

    let mut content_length = None;
    let mut chunked = false;
    let mut close = version == b"HTTP/1.0";
    loop {
        let Some(eol) = buf[pos..].iter().position(|&b| b == b'\n') else {
            return incomplete();
        };
        let line = trim_cr(&buf[pos..pos + eol]);
        pos += eol + 1;
        if line.is_empty() {
            break;
        }
        // Content-Length, Transfer-Encoding, Connection: skip every other header cheaply.
        if !matches!(line[0] | 0x20, b'c' | b't') {
            continue;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(Malformed("header without a colon"));
        };
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = parse_decimal(value).ok_or(Malformed("bad Content-Length"))?;
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = contains_token(value, b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            if contains_token(value, b"close") {
                close = true;
            } else if contains_token(value, b"keep-alive") {
                close = false;
            }
        }
    }
    let len = pos;
    // RFC 9112 §6.3: 1xx, 204 and 304 have no body; chunked wins over Content-Length.
    let body = if (100..200).contains(&status) || status == 204 || status == 304 {
        BodyFraming::Length(0)
    } else if chunked {
        BodyFraming::Chunked
    } else if let Some(n) = content_length {
        BodyFraming::Length(n)
    } else {
        close = true;
        BodyFraming::UntilClose
    };
    Ok(Some(ResponseHead {
        status,
        len,
        body,
        close,
    }))
}

/// Length of the complete chunked body at the start of `buf` (through the final CRLF after any
/// trailers); `Ok(None)` if it has not all arrived yet.
pub(crate) fn chunked_body_len(buf: &[u8]) -> Result<Option<usize>, Malformed> {
    let mut pos = 0;
    loop {
        let Some(eol) = find(&buf[pos..], b"\r\n") else {
            return Ok(None);
        };
        let size_field = &buf[pos..pos + eol];
        // Chunk extensions (";name=value") are allowed and ignored.
        let digits = size_field.split(|&b| b == b';').next().unwrap_or_default();
        let size = parse_hex(trim(digits)).ok_or(Malformed("bad chunk size"))?;
        pos += eol + 2;
        if size == 0 {
            // Trailer fields, then an empty line.
            loop {
                let Some(eol) = find(&buf[pos..], b"\r\n") else {
                    return Ok(None);
                };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some(pos));
                }
            }
        }
        let end = pos.checked_add(size).and_then(|e| e.checked_add(2));
        let end = end.ok_or(Malformed("chunk too large"))?;
        if buf.len() < end {
            return Ok(None);
        }
        if &buf[end - 2..end] != b"\r\n" {
            return Err(Malformed("chunk not followed by CRLF"));
        }
        pos = end;
    }
}

/// Position of `needle` (which starts with `\r`) in `haystack`: jumps from `\r` to `\r`, which
/// is several times faster than comparing a window at every byte (this runs once per response).
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    debug_assert_eq!(needle.first(), Some(&b'\r'));
    let mut from = 0;
    while let Some(i) = haystack[from..].iter().position(|&b| b == b'\r') {
        let at = from + i;
        if haystack[at..].starts_with(needle) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| trim(t).eq_ignore_ascii_case(token))
}

fn parse_decimal(s: &[u8]) -> Option<usize> {
    if s.is_empty() || s.len() > 18 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0usize, |n, d| n * 10 + usize::from(d - b'0')))
}

fn parse_hex(s: &[u8]) -> Option<usize> {
    if s.is_empty() || s.len() > 15 {
        return None;
    }
    s.iter().try_fold(0usize, |n, &d| {
        Some(n * 16 + (d as char).to_digit(16)? as usize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NGINX: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 02 Dec 2025 \
        18:00:00 GMT\r\nContent-Type: application/octet-stream\r\nContent-Length: 5\r\n\
        Connection: keep-alive\r\n\r\nhello";

    #[test]
    fn parses_nginx_response_with_content_length() {
        let head = parse_head(NGINX).unwrap().unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.body, BodyFraming::Length(5));
        assert!(!head.close);
        assert_eq!(&NGINX[head.len..], b"hello");
    }

    #[test]
    fn incomplete_head_needs_more() {
        for cut in [0, 5, 20, NGINX.len() - 8] {
            assert_eq!(parse_head(&NGINX[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn connection_close_and_http10_close() {
        let h = parse_head(b"HTTP/1.1 503 Busy\r\nconnection: Close\r\ncontent-length: 0\r\n\r\n");
        let h = h.unwrap().unwrap();
        assert_eq!(
            (h.status, h.close, h.body),
            (503, true, BodyFraming::Length(0))
        );
        let h = parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi")
            .unwrap()
            .unwrap();
        assert!(h.close);
        let h =
            parse_head(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n");
        assert!(!h.unwrap().unwrap().close);
    }

    #[test]
    fn no_length_means_until_close_except_bodyless_statuses() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.body, h.close), (BodyFraming::UntilClose, true));
        let h = parse_head(b"HTTP/1.1 204 No Content\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((h.body, h.close), (BodyFraming::Length(0), false));
    }

    #[test]
    fn bare_lf_lines_and_unrelated_headers_are_tolerated() {
        let h = parse_head(b"HTTP/1.1 200 OK\nX-Odd header\ncontent-length: 1\n\nx").unwrap();
        assert_eq!(
            h.map(|h| (h.body, h.len)),
            Some((BodyFraming::Length(1), 48))
        );
    }

    #[test]
    fn rejects_malformed_heads() {
        for bad in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length 5\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1\r\n\r\n",
        ] {
            assert!(parse_head(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(parse_head(&vec![b'a'; MAX_HEAD]).is_err());
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(h.unwrap().unwrap().body, BodyFraming::Chunked);
        let body = b"5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: y\r\n\r\nNEXT";
        assert_eq!(chunked_body_len(body), Ok(Some(body.len() - 4)));
        for cut in [0, 3, 12, 20, body.len() - 6] {
            assert_eq!(chunked_body_len(&body[..cut]), Ok(None), "cut at {cut}");
        }
        assert!(chunked_body_len(b"zz\r\n").is_err());
        assert!(chunked_body_len(b"2\r\nabc\r\n").is_err());
    }
}
