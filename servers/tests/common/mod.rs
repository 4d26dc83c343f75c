//! Helpers shared by the integration tests: start the real `servers` binary, talk echo and
//! HTTP to it, run wrk/ab.
#![allow(dead_code)] // Each test binary uses a different subset.

use std::{
    io::{self, BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    os::fd::AsRawFd,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex, mpsc},
    thread,
    time::{Duration, Instant},
};

/// Every `--mode`, from the crate's one list of variants.
pub const MODES: [&str; servers::Variant::ALL.len()] = {
    let mut names = [""; servers::Variant::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = servers::Variant::ALL[i].name();
        i += 1;
    }
    names
};

/// The body of every 200 the HTTP protocol sends.
pub const BODY: &[u8] = b"Hello, world!\n";

/// A running server process.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
    stderr_thread: Option<thread::JoinHandle<()>>,
    stdout_thread: Option<thread::JoinHandle<Vec<String>>>,
}

impl Server {
    /// Starts `servers ARGS --port 0` and waits (at most 10 s) for its `listening on` line.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_servers"))
            .args(args)
            .args(["--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning the servers binary");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let stdout_thread = thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next();
            let _ = tx.send(first);
            // Any further stdout line is a bug: the readiness line must be the only one.
            lines.map_while(Result::ok).collect::<Vec<String>>()
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let stderr_thread = {
            let sink = Arc::clone(&stderr);
            let pipe = child.stderr.take().unwrap();
            thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut sink = sink.lock().unwrap();
                    sink.push_str(&line);
                    sink.push('\n');
                }
            })
        };
        let line = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Some(Ok(line))) => line,
            other => {
                let _ = child.kill();
                let _ = child.wait();
                thread::sleep(Duration::from_millis(100));
                panic!(
                    "server {args:?} did not announce readiness ({other:?}); stderr: {}",
                    stderr.lock().unwrap()
                );
            }
        };
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected readiness line {line:?}"));
        Server {
            child,
            addr,
            stderr,
            stderr_thread: Some(stderr_thread),
            stdout_thread: Some(stdout_thread),
        }
    }

    /// The server's pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The `worker I: pid P` lines of an MP server, waiting (at most 5 s) until `count` arrived
    /// (the parent prints them before the readiness line, but stderr is read by another thread).
    pub fn wait_worker_pids(&self, count: usize) -> Vec<(usize, i32)> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let pids = worker_pids(&self.stderr());
            if pids.len() >= count || Instant::now() > deadline {
                return pids;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Asserts the server is still running.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "server exited unexpectedly with {status}; stderr: {}",
                self.stderr()
            );
        }
    }

    /// Sends `signal`, waits for exit (at most `limit`), returns status, time taken and stderr.
    pub fn stop_with(mut self, signal: i32, limit: Duration) -> (ExitStatus, Duration, String) {
        let start = Instant::now();
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.pid(), signal) };
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                panic!(
                    "server did not exit within {limit:?} after signal {signal}; stderr: {}",
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(5));
        };
        let took = start.elapsed();
        if let Some(handle) = self.stderr_thread.take() {
            let _ = handle.join();
        }
        if let Some(handle) = self.stdout_thread.take() {
            let extra = handle.join().unwrap();
            assert!(
                extra.is_empty(),
                "the server printed more than the readiness line on stdout: {extra:?}"
            );
        }
        (status, took, self.stderr())
    }

    /// SIGTERM, and asserts a clean exit 0 within 1 s; returns stderr.
    pub fn stop(self) -> String {
        let (status, took, stderr) = self.stop_with(libc::SIGTERM, Duration::from_secs(3));
        assert_eq!(
            status.code(),
            Some(0),
            "exit status after SIGTERM; stderr: {stderr}"
        );
        assert!(
            took < Duration::from_secs(1),
            "took {took:?} to exit after SIGTERM"
        );
        stderr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SIGTERM first so MP workers are taken down by their parent.
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(self.pid(), libc::SIGTERM) };
            let start = Instant::now();
            while matches!(self.child.try_wait(), Ok(None))
                && start.elapsed() < Duration::from_secs(2)
            {
                thread::sleep(Duration::from_millis(10));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Connects with a 5 s I/O timeout so a server bug fails the test instead of hanging it.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// A deterministic payload of `len` bytes, different for each `seed`.
pub fn payload(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + seed * 17) % 251) as u8)
        .collect()
}

/// Sends `data` and asserts exactly the same bytes come back.
pub fn echo_roundtrip(stream: &mut TcpStream, data: &[u8]) {
    stream.write_all(data).expect("writing the echo payload");
    let mut back = vec![0; data.len()];
    stream.read_exact(&mut back).expect("reading the echo back");
    assert!(
        back == data,
        "echo mismatch for a {}-byte payload",
        data.len()
    );
}

/// Asserts the peer closes the connection next (EOF or reset, no more data).
pub fn assert_closed_by_server(stream: &mut TcpStream) {
    let mut buf = [0; 64];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!(
            "expected the server to close, got {n} more bytes: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("expected the server to close, got {e}"),
    }
}

/// A parsed HTTP response.
#[derive(Debug)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A header value by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Asserts this is the fixed 200 with its 14-byte body (or no body for HEAD).
    pub fn assert_ok(&self, head: bool) {
        assert_eq!(self.status, 200, "status of {self:?}");
        assert_eq!(self.version, "HTTP/1.1");
        assert_eq!(self.header("Content-Length"), Some("14"));
        assert_eq!(self.body, if head { &b""[..] } else { BODY });
    }
}

/// Reads one response: status line, headers up to the blank line, then Content-Length bytes.
pub fn read_response(reader: &mut impl BufRead, head_request: bool) -> Response {
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .expect("reading the status line");
    let status_line = line
        .strip_suffix("\r\n")
        .unwrap_or_else(|| panic!("status line without CRLF: {line:?}"));
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap().to_string();
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    assert!(version.starts_with("HTTP/1."), "bad status line {line:?}");
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).expect("reading a header line");
        let header = line
            .strip_suffix("\r\n")
            .unwrap_or_else(|| panic!("header without CRLF: {line:?}"));
        if header.is_empty() {
            break;
        }
        let (name, value) = header
            .split_once(':')
            .unwrap_or_else(|| panic!("bad header {header:?}"));
        headers.push((name.to_string(), value.trim().to_string()));
    }
    let mut response = Response {
        version,
        status,
        headers,
        body: Vec::new(),
    };
    let length: usize = response
        .header("Content-Length")
        .unwrap_or_else(|| panic!("response without Content-Length: {response:?}"))
        .parse()
        .expect("numeric Content-Length");
    if !head_request {
        response.body = vec![0; length];
        reader
            .read_exact(&mut response.body)
            .expect("reading the body");
    }
    response
}

/// A GET request for `/`.
pub fn get(extra_headers: &str) -> String {
    format!("GET / HTTP/1.1\r\nHost: localhost\r\n{extra_headers}\r\n")
}

/// Sets SO_LINGER 0 so dropping the stream sends RST instead of FIN.
pub fn reset_on_close(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: linger is a valid struct of the given size.
    let ret = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(ret, 0, "setsockopt(SO_LINGER)");
}

/// Raises this process's RLIMIT_NOFILE soft limit to at least `needed` (up to the hard limit;
/// tests holding thousands of sockets need it).
pub fn raise_nofile(needed: u64) {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut current) };
    let wanted = libc::rlimit {
        rlim_cur: current.rlim_max,
        rlim_max: current.rlim_max,
    };
    // SAFETY: valid rlimit pointer.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const wanted) };
    assert!(
        current.rlim_max >= needed,
        "this test needs {needed} descriptors but the hard RLIMIT_NOFILE is {}; raise it (`ulimit -Hn {needed}` as root)",
        current.rlim_max
    );
}

/// Runs an external load tool, failing with install instructions if it is missing.
pub fn run_tool(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {program} ({e}); install it with `apt-get install wrk apache2-utils`"
            )
        });
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{program} {args:?} failed with {}: {stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The number after `label` on the line that starts with it (e.g. `Failed requests:`).
pub fn field(output: &str, label: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|line| line.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Per-worker `accepted N connections` counts from an MP server's stderr, by worker index.
pub fn worker_accepts(stderr: &str) -> Vec<(usize, u64)> {
    stderr
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("worker ")?;
            let (index, rest) = rest.split_once(" (pid ")?;
            let (_, rest) = rest.split_once("): accepted ")?;
            Some((
                index.parse().ok()?,
                rest.split_whitespace().next()?.parse().ok()?,
            ))
        })
        .collect()
}

/// Worker pids an MP server reported on stderr (`worker I: pid P`), by worker index.
pub fn worker_pids(stderr: &str) -> Vec<(usize, i32)> {
    stderr
        .lines()
        .filter_map(|line| {
            let (index, pid) = line.strip_prefix("worker ")?.split_once(": pid ")?;
            Some((index.parse().ok()?, pid.trim().parse().ok()?))
        })
        .collect()
}

/// Number of connections the server(s) still had open at shutdown, summed over workers.
pub fn open_at_shutdown(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|line| {
            line.split_once("; closed ")?
                .1
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}
