//! End-to-end tests of [`run`] against tiny servers on 127.0.0.1, one behaviour per test.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::oneshot,
};

use super::*;

/// Upper bound on what a test server does, so that no test loop is unbounded.
const MAX_CONNS: usize = 100_000;
const MAX_ROUNDS: usize = 1_000_000;

/// How a test server answers.
#[derive(Debug, Clone, Copy)]
enum Behavior {
    Echo,
    /// Echo after this delay per read.
    SlowEcho(Duration),
    /// Echo with the first byte changed.
    WrongEcho,
    /// Echo the first half of the first read, then close.
    HalfEchoThenClose,
    /// Read, never answer.
    Silent,
    /// Close with RST right after accepting.
    Reset,
    /// `HTTP/1.1 <status>` with a Content-Length body, written in two parts.
    Http(u16),
    /// `HTTP/1.1 200` with a chunked body.
    HttpChunked,
}

/// A server on its own thread and runtime; stopped and joined on drop.
struct TestServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            t.join().expect("test server thread panicked");
        }
    }
}

fn serve(behavior: Behavior) -> TestServer {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let accept_loop = async {
                for _ in 0..MAX_CONNS {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    tokio::spawn(handle(stream, behavior));
                }
            };
            tokio::select! {
                () = accept_loop => {}
                _ = stop_rx => {}
            }
        });
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("test server did not start");
    TestServer {
        addr,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

async fn handle(mut s: TcpStream, behavior: Behavior) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending = Vec::new();
    // The HTTP answers are two writes: Nagle would hold the second one for a delayed ACK.
    let _ = s.set_nodelay(true);
    if let Behavior::Reset = behavior {
        let _ = s.set_zero_linger();
        return;
    }
    for _ in 0..MAX_ROUNDS {
        let n = match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let ok = match behavior {
            Behavior::Echo => s.write_all(&buf[..n]).await.is_ok(),
            Behavior::SlowEcho(d) => {
                tokio::time::sleep(d).await;
                s.write_all(&buf[..n]).await.is_ok()
            }
            Behavior::WrongEcho => {
                buf[0] ^= 0xff;
                s.write_all(&buf[..n]).await.is_ok()
            }
            Behavior::HalfEchoThenClose => {
                let _ = s.write_all(&buf[..n / 2]).await;
                return;
            }
            Behavior::Silent => true,
            Behavior::Reset => unreachable!("handled above"),
            Behavior::Http(_) | Behavior::HttpChunked => {
                pending.extend_from_slice(&buf[..n]);
                let mut ok = true;
                while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                    pending.drain(..end + 4);
                    ok &= http_answer(&mut s, behavior).await;
                }
                ok
            }
        };
        if !ok {
            return;
        }
    }
}

async fn http_answer(s: &mut TcpStream, behavior: Behavior) -> bool {
    let (head, body): (String, &[u8]) = match behavior {
        Behavior::Http(status) => (
            format!("HTTP/1.1 {status} X\r\nServer: t\r\nContent-Length: 5\r\n\r\n"),
            b"hello",
        ),
        _ => (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".into(),
            b"3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n",
        ),
    };
    // Two writes, so the client sees the head and the body in separate reads now and then.
    s.write_all(head.as_bytes()).await.is_ok() && s.write_all(body).await.is_ok()
}

fn spec(server: &TestServer, workload: Workload, concurrency: usize, stop: Stop) -> LoadSpec {
    let mut spec = LoadSpec::new(server.addr, workload);
    spec.concurrency = concurrency;
    spec.stop = stop;
    spec.timeout = Duration::from_secs(5);
    spec
}

/// Asserts the run finished every one of its `n` requests correctly.
fn assert_all_ok(report: &LoadReport, n: u64) {
    assert_eq!(report.errors.to_string(), "none");
    assert_eq!(report.requests, n);
    assert_eq!(report.latency.len(), n);
    assert!(report.qps() > 0.0);
}

#[test]
fn short_echo_runs_exact_count_and_records_connect_time() {
    let server = serve(Behavior::Echo);
    let mut s = spec(&server, Workload::ShortEcho, 4, Stop::Requests(203));
    let progress = Arc::new(AtomicU64::new(0));
    s.progress = Some(progress.clone());
    let report = run(&s).unwrap();
    assert_all_ok(&report, 203);
    assert_eq!(progress.load(Ordering::Relaxed), 203);
    let connect = report
        .connect_latency
        .as_ref()
        .expect("short connections time connect()");
    assert_eq!(connect.len(), 203);
    // Connect is part of the request's latency.
    assert!(connect.min() <= report.latency.min());
    assert!(report.corrected_latency.is_none());
}

#[test]
fn keepalive_echo_exact_count_across_two_pinned_runtimes() {
    let server = serve(Behavior::Echo);
    let mut s = spec(&server, Workload::KeepAliveEcho, 5, Stop::Requests(1001));
    s.client_cpus = vec![0, 0];
    let report = run(&s).unwrap();
    assert_all_ok(&report, 1001);
    assert!(report.connect_latency.is_none());
}

#[test]
fn keepalive_echo_large_payload_does_not_deadlock() {
    let server = serve(Behavior::Echo);
    let mut s = spec(&server, Workload::KeepAliveEcho, 2, Stop::Requests(6));
    s.payload = 4 * 1024 * 1024;
    assert_all_ok(&run(&s).unwrap(), 6);
}

#[test]
fn http_keepalive_counts_2xx() {
    let server = serve(Behavior::Http(200));
    let report = run(&spec(
        &server,
        Workload::HttpKeepAlive,
        3,
        Stop::Requests(500),
    ))
    .unwrap();
    assert_all_ok(&report, 500);
}

#[test]
fn http_keepalive_reads_chunked_bodies() {
    let server = serve(Behavior::HttpChunked);
    let report = run(&spec(
        &server,
        Workload::HttpKeepAlive,
        2,
        Stop::Requests(100),
    ))
    .unwrap();
    assert_all_ok(&report, 100);
}

#[test]
fn http_non_2xx_is_an_http_status_error() {
    let server = serve(Behavior::Http(503));
    let report = run(&spec(
        &server,
        Workload::HttpKeepAlive,
        2,
        Stop::Requests(40),
    ))
    .unwrap();
    assert_eq!(report.requests, 0);
    assert_eq!(report.errors.http_status, 40);
    assert_eq!(report.errors.to_string(), "http status 40");
}

#[test]
fn refused_connections_are_counted() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // The listener is closed: nothing listens on addr now.
    let mut s = LoadSpec::new(addr, Workload::ShortEcho);
    s.concurrency = 2;
    s.stop = Stop::Requests(7);
    let report = run(&s).unwrap();
    assert_eq!(
        (
            report.requests,
            report.errors.refused,
            report.errors.total()
        ),
        (0, 7, 7)
    );
}

#[test]
fn altered_echo_is_a_wrong_echo() {
    let server = serve(Behavior::WrongEcho);
    let report = run(&spec(
        &server,
        Workload::KeepAliveEcho,
        2,
        Stop::Requests(20),
    ))
    .unwrap();
    assert_eq!((report.requests, report.errors.wrong_echo), (0, 20));
}

#[test]
fn server_closing_mid_echo_is_a_short_echo() {
    let server = serve(Behavior::HalfEchoThenClose);
    let report = run(&spec(&server, Workload::ShortEcho, 2, Stop::Requests(20))).unwrap();
    assert_eq!((report.requests, report.errors.short_echo), (0, 20));
}

#[test]
fn reset_connections_are_counted() {
    let server = serve(Behavior::Reset);
    let report = run(&spec(
        &server,
        Workload::KeepAliveEcho,
        1,
        Stop::Requests(10),
    ))
    .unwrap();
    assert_eq!(report.requests, 0);
    // An RST that lands before the client reads shows as a reset; a FIN as a short echo.
    assert_eq!(
        report.errors.reset + report.errors.short_echo,
        10,
        "{}",
        report.errors
    );
    assert!(report.errors.reset > 0, "{}", report.errors);
}

#[test]
fn silent_server_times_out_each_request() {
    let server = serve(Behavior::Silent);
    let mut s = spec(&server, Workload::KeepAliveEcho, 2, Stop::Requests(4));
    s.timeout = Duration::from_millis(100);
    let t0 = Instant::now();
    let report = run(&s).unwrap();
    assert_eq!(
        (
            report.requests,
            report.errors.timeout,
            report.errors.total()
        ),
        (0, 4, 4)
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

#[test]
fn duration_run_stops_on_time() {
    let server = serve(Behavior::Echo);
    let s = spec(
        &server,
        Workload::KeepAliveEcho,
        3,
        Stop::Duration(Duration::from_millis(300)),
    );
    let report = run(&s).unwrap();
    assert!(report.requests > 0);
    assert_eq!(report.errors.total(), 0, "{}", report.errors);
    let ms = report.elapsed.as_millis();
    assert!((300..800).contains(&ms), "elapsed {ms} ms");
}

#[test]
fn duration_run_abandons_requests_in_flight_at_the_end() {
    let server = serve(Behavior::Silent);
    let s = spec(
        &server,
        Workload::KeepAliveEcho,
        2,
        Stop::Duration(Duration::from_millis(200)),
    );
    let report = run(&s).unwrap();
    // Cut by the end of the run, not by their 5 s timeout: neither ok nor failed.
    assert_eq!((report.requests, report.errors.total()), (0, 0));
    assert!(
        report.elapsed < Duration::from_secs(1),
        "{:?}",
        report.elapsed
    );
}

#[test]
fn open_loop_paces_requests_at_the_rate() {
    let server = serve(Behavior::Echo);
    let mut s = spec(&server, Workload::KeepAliveEcho, 2, Stop::Requests(100));
    s.rate = Some(500.0);
    let report = run(&s).unwrap();
    assert_all_ok(&report, 100);
    // 100 requests at 500/s: the last is due 198 ms after the start.
    let ms = report.elapsed.as_millis();
    assert!((190..1000).contains(&ms), "elapsed {ms} ms");
    assert_eq!(
        report
            .corrected_latency
            .as_ref()
            .map(hdrhistogram::Histogram::len),
        Some(100)
    );
}

#[test]
fn open_loop_corrects_for_coordinated_omission() {
    // The server needs 5 ms per request but 1000/s are asked of one client: each request is
    // sent later than intended, and the corrected latency keeps growing while the raw one does not.
    let server = serve(Behavior::SlowEcho(Duration::from_millis(5)));
    let mut s = spec(&server, Workload::KeepAliveEcho, 1, Stop::Requests(40));
    s.rate = Some(1000.0);
    let report = run(&s).unwrap();
    assert_all_ok(&report, 40);
    let corrected = report.corrected_latency.as_ref().unwrap();
    let raw_p99 = report.latency.value_at_quantile(0.99);
    assert!(raw_p99 < 50_000_000, "raw p99 {raw_p99} ns");
    assert!(
        corrected.max() > 100_000_000,
        "corrected max {} ns",
        corrected.max()
    );
    assert!(corrected.max() > 4 * raw_p99);
}

#[test]
fn zero_requests_is_an_empty_report() {
    let server = serve(Behavior::Echo);
    let report = run(&spec(&server, Workload::ShortEcho, 3, Stop::Requests(0))).unwrap();
    assert_eq!(
        (report.requests, report.errors.total(), report.qps()),
        (0, 0, 0.0)
    );
}

#[test]
fn more_clients_than_requests_still_exact() {
    let server = serve(Behavior::Echo);
    let mut s = spec(&server, Workload::ShortEcho, 8, Stop::Requests(3));
    s.client_cpus = vec![0, 0, 0];
    assert_all_ok(&run(&s).unwrap(), 3);
}

/// A change that makes a valid spec invalid.
type Change = fn(&mut LoadSpec);

#[test]
fn invalid_specs_are_refused_before_running() {
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let base = LoadSpec::new(addr, Workload::ShortEcho);
    let cases: [(Change, SpecError); 5] = [
        (|s| s.concurrency = 0, SpecError::ZeroConcurrency),
        (|s| s.payload = 0, SpecError::ZeroPayload),
        (|s| s.rate = Some(0.0), SpecError::BadRate(0.0)),
        (|s| s.timeout = Duration::ZERO, SpecError::ZeroTimeout),
        (
            |s| s.client_cpus = vec![0, 1 << 20],
            SpecError::CpuOutOfRange(1 << 20),
        ),
    ];
    for (change, expected) in cases {
        let mut s = base.clone();
        change(&mut s);
        assert_eq!(s.validate(), Err(expected.clone()));
        let err = run(&s).unwrap_err();
        assert_eq!(err.downcast_ref::<SpecError>(), Some(&expected));
    }
    // HTTP sends no payload, so an empty one is fine there.
    let mut http = LoadSpec::new(addr, Workload::HttpKeepAlive);
    http.payload = 0;
    assert_eq!(http.validate(), Ok(()));
}

#[test]
fn unpinnable_cpu_is_an_error_not_a_hang() {
    let server = serve(Behavior::Echo);
    let mut s = spec(&server, Workload::ShortEcho, 2, Stop::Requests(10));
    // In range for cpu_set_t, but no machine running these tests has it.
    s.client_cpus = vec![0, 1000];
    let err = run(&s).unwrap_err();
    assert!(
        format!("{err:#}").contains("pinning a client thread to CPU 1000"),
        "{err:#}"
    );
}

#[test]
fn extreme_timeout_and_rate_do_not_panic() {
    let server = serve(Behavior::Echo);
    let mut s = spec(&server, Workload::KeepAliveEcho, 2, Stop::Requests(5));
    s.timeout = Duration::MAX;
    assert_all_ok(&run(&s).unwrap(), 5);
    s.rate = Some(1e-300);
    let err = run(&s).unwrap_err();
    assert_eq!(
        err.downcast_ref::<SpecError>(),
        Some(&SpecError::BadRate(1e-300))
    );
}
