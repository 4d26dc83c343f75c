//! The serial client without a runtime, for the warm engine's slices: one thread (the
//! caller's), blocking sockets, one request at a time, the same request as the runtime's
//! clients (connect, write the payload, read it back, compare, close; or on one kept
//! connection). Nothing between two requests but the next one: the smallest client, whose
//! own jitter is the least a comparison can carry.

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    sync::atomic::Ordering,
    time::Instant,
};

use super::{
    LoadReport, LoadSpec, RequestErrorKind, Stop,
    measure::RuntimeStats,
    workload::{Completed, Workload},
};

/// Payloads up to this size are written whole before the echo is read (as the runtime's
/// clients do); larger ones would need both at once.
const WHOLE_WRITE_UP_TO: usize = 32 * 1024;

/// Whether `spec` can run on the blocking client: one closed-loop client, an echo workload, a
/// request count, a payload that fits a socket's buffers.
pub(crate) fn applies(spec: &LoadSpec) -> bool {
    spec.concurrency == 1
        && spec.rate.is_none()
        && spec.payload <= WHOLE_WRITE_UP_TO
        && matches!(spec.workload, Workload::ShortEcho | Workload::KeepAliveEcho)
        && matches!(spec.stop, Stop::Requests(_))
}

/// Runs `spec` (for which [`applies`] holds) on the calling thread.
pub(crate) fn run(spec: &LoadSpec) -> LoadReport {
    let Stop::Requests(n) = spec.stop else {
        unreachable!("applies() admits request counts only")
    };
    let short = spec.workload == Workload::ShortEcho;
    let mut stats = RuntimeStats::new(false, short);
    let send: Vec<u8> = (0..spec.payload).map(|i| i as u8).collect();
    let mut recv = vec![0u8; spec.payload];
    let mut kept: Option<TcpStream> = None;
    let mut interrupted = false;
    let start = Instant::now();
    for _ in 0..n {
        if spec
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            interrupted = true;
            break;
        }
        let sent = Instant::now();
        let outcome = (|| -> Result<Completed, RequestErrorKind> {
            let io = |e: std::io::Error| RequestErrorKind::from_io(&e, RequestErrorKind::ShortEcho);
            let mut connect = None;
            let mut fresh = None;
            if short || kept.is_none() {
                let s = TcpStream::connect_timeout(&spec.addr, spec.timeout)
                    .map_err(|e| RequestErrorKind::from_io(&e, RequestErrorKind::Reset))?;
                connect = short.then(|| sent.elapsed());
                s.set_nodelay(true).map_err(io)?;
                s.set_read_timeout(Some(spec.timeout)).map_err(io)?;
                s.set_write_timeout(Some(spec.timeout)).map_err(io)?;
                if short {
                    fresh = Some(s);
                } else {
                    kept = Some(s);
                }
            }
            let Some(stream) = fresh.as_mut().or(kept.as_mut()) else {
                return Err(RequestErrorKind::Other);
            };
            stream.write_all(&send).map_err(io)?;
            stream.read_exact(&mut recv).map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock => RequestErrorKind::Timeout,
                _ => io(e),
            })?;
            if recv != send {
                return Err(RequestErrorKind::WrongEcho);
            }
            Ok(Completed {
                end: Instant::now(),
                connect,
            })
        })();
        match outcome {
            Ok(done) => stats.record(sent, None, &done),
            Err(kind) => {
                kept = None;
                stats.errors.add(kind);
            }
        }
        if let Some(p) = &spec.progress {
            p.fetch_add(1, Ordering::Relaxed);
        }
    }
    let elapsed = start.elapsed();
    LoadReport {
        requests: stats.requests,
        elapsed,
        latency: stats.latency,
        corrected_latency: None,
        send_lateness: None,
        connect_latency: stats.connect,
        errors: stats.errors,
        interrupted,
    }
}
