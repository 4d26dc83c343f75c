//! `profiler serve`: keeps the kernel programs attached and serves their counters, cumulative since
//! start, as Prometheus metrics on `GET /metrics` (the format of `--export-prom`). Every host runs
//! one; an existing Prometheus scrapes them all.
//!
//! Each connection gets a thread of its own, at most [`MAX_CONNECTIONS`] at once (the idlest
//! is closed to make room for a new one), and
//! [`REQUEST_DEADLINE`] for its whole request: a slow or idle client (slowloris) holds only its
//! own thread, never another's scrape. Rendering takes a lock around the maps, under a
//! millisecond.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    os::fd::AsRawFd as _,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use crate::{
    bpf::Session,
    export::{ExportData, Metadata, prometheus, prometheus_proto},
    trace::{self, Trace, TraceRequest},
    web::{Conn, WebConfig},
};

/// What `profiler serve` was asked to do.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// What to trace (children are always followed; no command).
    pub trace: TraceRequest,
    /// Address to listen on.
    pub listen: SocketAddr,
    /// `--otlp-endpoint`: also push there, at this interval.
    pub otlp: Option<(String, Duration)>,
    /// `--web-config FILE`: TLS and basic auth (exporter-toolkit format).
    pub web_config: Option<std::path::PathBuf>,
    /// `--user NAME`: drop root to this user once the programs are attached.
    pub user: Option<String>,
    /// `--self-cost`: the kernel's program statistics on, and the `syscall_profiler_self_*`
    /// series.
    pub self_cost: bool,
    /// The flight recorder, unless `--record-minutes 0`.
    pub recorder: Option<RecorderOptions>,
}

/// The flight recorder's settings (`--record-*`).
#[derive(Clone, Debug)]
pub struct RecorderOptions {
    /// How much it keeps.
    pub window: Duration,
    /// Its interval.
    pub every: Duration,
    /// `--record-when`.
    pub triggers: Vec<crate::recorder::Trigger>,
    /// Where SIGUSR2 and the triggers write recordings.
    pub dir: std::path::PathBuf,
}

/// The Prometheus content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Longest a client may take to send its whole request (and read the answer) before it is
/// dropped: a deadline for the request, not a timeout per read.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

/// Connections served at once; when full, the idlest one (no request yet) is closed for a new
/// one, and a 503 goes out only when every one is being answered.
pub const MAX_CONNECTIONS: usize = 64;

/// An attached session and what a scrape needs to describe it.
pub struct MetricsSource {
    session: Session,
    metadata: Metadata,
    started: Instant,
    /// `--all`: no tracked set, so no liveness gauges.
    all: bool,
    /// `--self-cost`: keeps the kernel's program statistics on.
    self_cost: Option<crate::bpf::BpfStats>,
    /// The flight recorder.
    recorder: Option<crate::recorder::Recorder>,
    /// Whether the recorder's memory has been stated.
    recorder_stated: bool,
}

impl MetricsSource {
    /// Wraps a started session; `metadata` describes it (command `serve`).
    #[must_use]
    pub fn new(session: Session, metadata: Metadata, all: bool) -> Self {
        Self {
            session,
            metadata,
            started: Instant::now(),
            all,
            self_cost: None,
            recorder: None,
            recorder_stated: false,
        }
    }

    /// Keeps a flight recording too.
    #[must_use]
    pub fn with_recorder(mut self, recorder: crate::recorder::Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// The flight recorder's turn, when an interval is due: the counters taken, a trigger
    /// checked (and a recording written if it fired). Errors go to stderr: the recorder never
    /// stops the serving.
    pub fn tick_recorder(&mut self) {
        let Some(recorder) = &mut self.recorder else {
            return;
        };
        if !recorder.due() {
            return;
        }
        let snapshot = match self.session.snapshot() {
            Ok(s) => s,
            Err(e) => {
                crate::errln!("flight recorder: reading the counters failed: {e:#}");
                return;
            }
        };
        let fired = recorder.push(snapshot);
        if !self.recorder_stated
            && let Some(bytes) = recorder.full_bytes()
        {
            self.recorder_stated = true;
            crate::errln!(
                "flight recorder: {} intervals kept, about {} KB when full",
                recorder.capacity(),
                bytes.div_ceil(1024)
            );
        }
        if let Some(why) = fired {
            let _ = self.write_recording(&why);
        }
    }

    /// The flight recording as JSON (`GET /recording`).
    pub fn recording_json(&self) -> Result<Vec<u8>> {
        match &self.recorder {
            Some(r) => r.recording_json(self.recording_metadata()),
            None => anyhow::bail!("the flight recorder is off (--record-minutes 0)"),
        }
    }

    /// Writes the flight recording into `--record-dir` (SIGUSR2, a trigger); errors are said
    /// on stderr too.
    pub fn write_recording(&self, why: &str) -> Result<std::path::PathBuf> {
        let Some(r) = &self.recorder else {
            anyhow::bail!("the flight recorder is off (--record-minutes 0)");
        };
        r.write(self.recording_metadata(), why).inspect_err(|e| {
            crate::errln!("flight recorder: no recording written ({why}): {e:#}");
        })
    }

    fn recording_metadata(&self) -> Metadata {
        let mut metadata = self.metadata.clone();
        metadata.duration_s = self.started.elapsed().as_secs_f64();
        metadata
    }

    /// Serves the profiler's own cost too, from the statistics `stats` keeps on.
    #[must_use]
    pub fn with_self_cost(mut self, stats: crate::bpf::BpfStats) -> Self {
        self.self_cost = Some(stats);
        self
    }

    /// `--self-cost`'s series: per program, its runs and run time; the syscall programs' time
    /// per traced call (calls of the traced processes, from the table's totals: what tracing
    /// costs per call it records, early exits for other processes' calls included), and with
    /// `--off-cpu` the sched programs' time per context switch.
    fn self_cost_series(&self, snapshot: &crate::stats::Snapshot) -> String {
        use std::fmt::Write as _;
        let programs = self.session.program_run_stats();
        let mut out = String::new();
        let families = [
            (
                "runs_total",
                "Runs of each of the profiler's kernel programs (bpf(2) BPF_ENABLE_STATS).",
            ),
            (
                "seconds_total",
                "Run time of each of the profiler's kernel programs, as the kernel counts it (BPF_ENABLE_STATS; each run includes the statistics' two clock reads).",
            ),
        ];
        for (i, (name, help)) in families.iter().enumerate() {
            let _ = writeln!(
                out,
                "# HELP syscall_profiler_self_program_{name} {help}\n# TYPE syscall_profiler_self_program_{name} counter"
            );
            for (program, runs, time) in &programs {
                let value = if i == 0 {
                    runs.to_string()
                } else {
                    crate::export::prometheus::format_float(time.as_secs_f64())
                };
                let _ = writeln!(
                    out,
                    "syscall_profiler_self_program_{name}{{program=\"{program}\"}} {value}"
                );
            }
        }
        let role = |name: &str| profiler_common::names::role_of(name);
        let is_sched = |name: &str| role(name) == Some(profiler_common::names::Role::Sched);
        let per_call_ns: u128 = programs
            .iter()
            .filter(|(n, ..)| role(n).is_some_and(profiler_common::names::Role::times_syscalls))
            .map(|(_, _, t)| t.as_nanos())
            .sum();
        let calls: u64 = snapshot.syscalls.iter().map(|s| s.calls).sum();
        if calls > 0 {
            let _ = writeln!(
                out,
                "# HELP syscall_profiler_self_ns_per_traced_call Run time of the profiler's syscall programs per call of the traced processes (their runs for other processes' calls included).\n\
                 # TYPE syscall_profiler_self_ns_per_traced_call gauge\n\
                 syscall_profiler_self_ns_per_traced_call {:.1}",
                per_call_ns as f64 / calls as f64
            );
        }
        let switches = programs
            .iter()
            .filter(|(n, ..)| {
                *n == profiler_common::names::program::SCHED_SWITCH
                    || *n == profiler_common::names::program::BTF_SCHED_SWITCH
            })
            .map(|(_, runs, _)| *runs)
            .sum::<u64>();
        if switches > 0 {
            let sched_ns: u128 = programs
                .iter()
                .filter(|(n, ..)| is_sched(n))
                .map(|(_, _, t)| t.as_nanos())
                .sum();
            let _ = writeln!(
                out,
                "# HELP syscall_profiler_self_ns_per_context_switch Run time of the profiler's scheduler programs (--off-cpu) per context switch of the machine.\n\
                 # TYPE syscall_profiler_self_ns_per_context_switch gauge\n\
                 syscall_profiler_self_ns_per_context_switch {:.1}",
                sched_ns as f64 / switches as f64
            );
        }
        out
    }

    /// Reads the counters and renders them in the Prometheus text format, with two gauges of
    /// the target: how many tracked processes are alive, and `up`-style whether any is.
    pub fn render(&mut self) -> Result<String> {
        Ok(self.render_as(false)?.0)
    }

    /// The text format, or with `protobuf` the delimited protobuf format with native
    /// histograms (the same series, and the native latency family): (text, protobuf bytes).
    pub fn render_as(&mut self, protobuf: bool) -> Result<(String, Vec<u8>)> {
        let (data, text) = self.read(true)?;
        if protobuf {
            let natives = prometheus::native_series(&data);
            let bytes =
                prometheus_proto::encode(&text, prometheus::NATIVE_LATENCY_FAMILY, &natives);
            return Ok((String::new(), bytes));
        }
        Ok((text, Vec::new()))
    }

    /// The counters now (and, with `text`, their Prometheus text with the target gauges).
    pub fn read(&mut self, text: bool) -> Result<(ExportData, String)> {
        self.session.flush_logs();
        let snapshot = self.session.snapshot()?;
        let alive = if self.all {
            None
        } else {
            let mut alive = 0;
            for pid in self.session.tracked_pids()? {
                alive += usize::from(self.session.is_tracking(pid)?);
            }
            Some(alive)
        };
        let mut metadata = self.metadata.clone();
        metadata.duration_s = self.started.elapsed().as_secs_f64();
        let self_cost = if text && self.self_cost.is_some() {
            self.self_cost_series(&snapshot)
        } else {
            String::new()
        };
        let data = ExportData::of_trace(metadata, snapshot, false);
        if !text {
            return Ok((data, String::new()));
        }
        let mut text = prometheus::render(&data);
        text.push_str(&self_cost);
        if let Some(alive) = alive {
            use std::fmt::Write as _;
            let _ = write!(
                text,
                "# HELP syscall_profiler_tracked_processes_alive Tracked processes that have not exited.\n\
                 # TYPE syscall_profiler_tracked_processes_alive gauge\n\
                 syscall_profiler_tracked_processes_alive {alive}\n\
                 # HELP syscall_profiler_target_up 1 while any tracked process is alive, 0 once all have exited (the counters are then frozen).\n\
                 # TYPE syscall_profiler_target_up gauge\n\
                 syscall_profiler_target_up {}\n",
                u8::from(alive > 0)
            );
        }
        Ok((data, text))
    }
}

/// Runs `profiler serve` until SIGINT or SIGTERM.
pub fn run(options: &ServeOptions) -> Result<()> {
    let stop = trace::stop_on_signals()?;
    // Bind first: a taken port fails before the kernel programs are loaded.
    let listener = TcpListener::bind(options.listen).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::AddrInUse => "the port is taken",
            std::io::ErrorKind::PermissionDenied => {
                "ports below 1024 need root or CAP_NET_BIND_SERVICE"
            }
            std::io::ErrorKind::AddrNotAvailable => "no interface here has that address",
            _ => "the address cannot be bound",
        };
        anyhow::anyhow!(
            "cannot listen on {} ({e}): {why}; pick another with --listen ADDR:PORT",
            options.listen
        )
    })?;
    let web = match &options.web_config {
        Some(path) => Some(WebConfig::load(path)?),
        None => None,
    };
    let secured = web.as_ref().is_some_and(|w| w.has_tls() && w.has_auth());
    if !options.listen.ip().is_loopback() && !secured {
        crate::errln!(
            "warning: serving on {} without {}: whoever reaches it reads the traced processes' names and cgroup paths; give --web-config FILE (TLS and basic auth, as Prometheus exporters take them)",
            options.listen,
            match &web {
                Some(w) if w.has_tls() => "basic auth",
                Some(_) => "TLS",
                None => "TLS or basic auth",
            }
        );
    }
    let trace = Trace::start(&options.trace)?;
    // Before root is dropped: turning the statistics on needs CAP_SYS_ADMIN.
    let self_cost = if options.self_cost {
        Some(crate::bpf::BpfStats::enable()?)
    } else {
        None
    };
    // Root is needed to load and attach; the maps are read through open descriptors.
    if let Some(user) = &options.user {
        crate::web::drop_root(user)?;
    }
    // As the user it will write them as. GET /recording works without it: a warning, never
    // a refusal to serve (an agent's root file system is often read-only).
    if let Some(r) = &options.recorder
        && let Err(e) = crate::recorder::Recorder::check_dir(&r.dir)
    {
        crate::errln!("warning: {e:#}: SIGUSR2 and --record-when will write no recording");
    }
    let mut metadata = Metadata::collect("serve");
    options.trace.describe_in(&mut metadata);
    metadata
        .settings
        .insert("attach".into(), trace.session.syscall_front().describe());
    let what = trace.describe(&options.trace);
    let slow = trace.slow;
    let mut source = MetricsSource::new(trace.session, metadata, options.trace.open_ended());
    if let Some(stats) = self_cost {
        source = source.with_self_cost(stats);
    }
    let mut recorder_line = None;
    if let Some(r) = &options.recorder {
        let mut recorder =
            crate::recorder::Recorder::new(r.window, r.every, r.triggers.clone(), r.dir.clone());
        if let Some(collector) = slow {
            recorder = recorder.with_slow(collector, options.trace.slow_top as usize);
        }
        recorder_line = Some(format!(
            "flight recorder: the last {:?} in {} intervals of {:?} (GET /recording, or SIGUSR2 into {})",
            r.window,
            recorder.capacity(),
            r.every,
            r.dir.display()
        ));
        source = source.with_recorder(recorder);
    }
    let address = listener
        .local_addr()
        .context("reading the listening address")?;
    let otlp = match &options.otlp {
        Some((url, every)) => Some((crate::export::otlp::Pusher::new(url, &what)?, *every)),
        None => None,
    };
    let scheme = if web.as_ref().is_some_and(WebConfig::has_tls) {
        "https"
    } else {
        "http"
    };
    crate::errln!("Serving metrics of {what} on {scheme}://{address}/metrics (Ctrl-C to stop)");
    if let Some(line) = recorder_line {
        crate::errln!("{line}");
    }
    serve_and_push(&listener, &mut source, &stop, otlp.as_ref(), web.as_ref())
}

/// [`serve`], and with `otlp` a thread pushing the counters at its interval (and once more at
/// the end).
pub fn serve_and_push(
    listener: &TcpListener,
    source: &mut MetricsSource,
    stop: &AtomicBool,
    otlp: Option<&(crate::export::otlp::Pusher, Duration)>,
    web: Option<&WebConfig>,
) -> Result<()> {
    let Some((pusher, every)) = otlp else {
        return serve_shared(listener, &Mutex::new(source), stop, web);
    };
    let source = Mutex::new(source);
    let push = || {
        let data = source
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .read(false)
            .map(|(data, _)| data);
        // A collector that is down costs a line per push, never the scrapes.
        if let Err(e) = data.and_then(|d| pusher.push(&d)) {
            crate::errln!("warning: OTLP: {e:#}");
        }
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut last = Instant::now();
            push();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if last.elapsed() >= *every {
                    last = Instant::now();
                    push();
                }
            }
            push();
        });
        serve_shared(listener, &source, stop, web)
    })
}

/// Answers requests on `listener` until `stop` is set, each connection on its own thread.
pub fn serve(listener: &TcpListener, source: &mut MetricsSource, stop: &AtomicBool) -> Result<()> {
    serve_shared(listener, &Mutex::new(source), stop, None)
}

/// [`serve`] with the source behind a lock others share, and with `web`'s TLS and basic auth.
fn serve_shared(
    listener: &TcpListener,
    source: &Mutex<&mut MetricsSource>,
    stop: &AtomicBool,
    web: Option<&WebConfig>,
) -> Result<()> {
    listener
        .set_nonblocking(true)
        .context("making the listener non-blocking")?;
    let slots = Slots::default();
    // SIGUSR2: write the flight recording.
    let usr2 = std::sync::Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR2, std::sync::Arc::clone(&usr2))
        .context("installing the SIGUSR2 handler")?;
    std::thread::scope(|scope| -> Result<()> {
        while !stop.load(Ordering::Relaxed) {
            if usr2.swap(false, Ordering::Relaxed) {
                let _ = source
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .write_recording("SIGUSR2");
            }
            // `--by-cgroup`: the new cgroups' names, while they exist; the flight recorder's
            // interval (never waiting for a scrape in progress).
            if let Ok(mut source) = source.try_lock() {
                source.session.remember_cgroup_names();
                source.tick_recorder();
            }
            if !readable(listener, 200)? {
                continue;
            }
            match listener.accept() {
                Ok((mut stream, _)) => {
                    // Full: the connection that has waited longest without sending anything
                    // makes room (idle clients that reconnect at once took every slot, and
                    // every scrape got a 503); a 503 only when every client has spoken.
                    // An evicted connection's slot is free at once (its thread ends by itself):
                    // waiting for it put every new connection, a scrape among them, behind a
                    // queue of idle ones. Only this thread opens slots, so the count cannot grow
                    // past the check.
                    if slots.live() >= MAX_CONNECTIONS && !slots.evict_idlest() {
                        let _ = stream.set_nonblocking(true);
                        let _ = stream.write_all(
                            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        continue;
                    }
                    let slot = slots.open(&stream);
                    let slots = &slots;
                    let spawned = std::thread::Builder::new()
                        .name("serve-conn".into())
                        .spawn_scoped(scope, move || {
                            // A client that misbehaves loses its connection, never the server.
                            if let Err(e) = answer(stream, source, web, || slots.spoke(slot)) {
                                log::info!("request failed: {e:#}");
                            }
                            slots.close(slot);
                        });
                    if let Err(e) = spawned {
                        slots.close(slot);
                        log::warn!("no thread for a connection: {e}");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => log::warn!("accept failed: {e}"),
            }
        }
        Ok(())
    })
}

/// The open connections (those not evicted count toward [`MAX_CONNECTIONS`]): when each came,
/// whether its request has arrived, and a handle to shut it down with (its thread's read then
/// ends at once).
#[derive(Default)]
struct Slots {
    open: Mutex<Vec<Slot>>,
    next: AtomicUsize,
}

struct Slot {
    id: usize,
    since: Instant,
    /// The client has sent something (a TLS hello, a request line): not idle.
    spoke: bool,
    /// Shut down to make room: winding down, no longer counted.
    evicted: bool,
    stream: Option<TcpStream>,
}

impl Slots {
    fn open(&self, stream: &TcpStream) -> usize {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.push(Slot {
            id,
            since: Instant::now(),
            spoke: false,
            evicted: false,
            stream: stream.try_clone().ok(),
        });
        id
    }

    /// Connections open now and not evicted (an evicted one is only winding down).
    fn live(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|s| !s.evicted)
            .count()
    }

    /// The client has sent its first bytes: it is no longer idle, and is never evicted.
    fn spoke(&self, id: usize) {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = open.iter_mut().find(|s| s.id == id) {
            s.spoke = true;
        }
    }

    fn close(&self, id: usize) {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.retain(|s| s.id != id);
    }

    /// Shuts down the connection that has waited longest for its request; false when every
    /// connection is being answered. A connection whose client has sent bytes that its thread
    /// has not read yet (a busy machine runs the thread late) has spoken: it is not idle (a
    /// scrape was once evicted so, between its request's arrival and its thread's first poll).
    fn evict_idlest(&self) -> bool {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut candidates: Vec<&mut Slot> = open
            .iter_mut()
            .filter(|s| !s.spoke && !s.evicted && s.stream.is_some())
            .collect();
        candidates.sort_by_key(|s| s.since);
        let mut idlest = None;
        for slot in candidates {
            if slot.stream.as_ref().is_some_and(bytes_waiting) {
                slot.spoke = true;
            } else {
                idlest = Some(slot);
                break;
            }
        }
        let Some(idlest) = idlest else {
            return false;
        };
        idlest.evicted = true;
        if let Some(stream) = idlest.stream.take() {
            // An abortive close (SO_LINGER 0: RST when its thread drops it): no TIME_WAIT here,
            // where a client that reconnects at once from a reused port would meet it and wait
            // out SYN retransmissions.
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            // SAFETY: a valid socket and a linger value of the size passed.
            unsafe {
                libc::setsockopt(
                    stream.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&raw const linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
            }
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        true
    }
}

/// Whether the client has sent bytes that nobody has read yet.
fn bytes_waiting(stream: &TcpStream) -> bool {
    let mut pending: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into `pending`, of a valid socket.
    let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::FIONREAD, &raw mut pending) };
    rc == 0 && pending > 0
}

/// Waits up to `timeout_ms` for a connection; false on timeout or a signal.
fn readable(listener: &TcpListener, timeout_ms: i32) -> Result<bool> {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let rc = unsafe { libc::poll(&raw mut fd, 1, timeout_ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e).context("poll")
        };
    }
    Ok(rc > 0)
}

/// What a request asked for.
struct Request {
    method: String,
    path: String,
    /// What follows `?` in the target (empty without one).
    query: String,
    /// The `Accept` header (empty without one).
    accept: String,
    /// The `Authorization` header.
    authorization: Option<String>,
}

/// The request's first line and the headers that matter, once its headers have arrived.
fn read_request(conn: &mut Conn, deadline: Instant) -> Result<Request> {
    conn.tcp().set_nonblocking(false)?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        anyhow::ensure!(
            !left.is_zero(),
            "the request took longer than {REQUEST_DEADLINE:?}"
        );
        conn.tcp().set_read_timeout(Some(left))?;
        let n = conn.read(&mut chunk).context("reading the request")?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        anyhow::ensure!(buf.len() <= 16 * 1024, "request headers longer than 16 KiB");
    }
    let text = String::from_utf8_lossy(&buf);
    let mut parts = text.lines().next().unwrap_or_default().split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (path, query) = (path.to_owned(), query.to_owned());
    let header = |wanted: &str| {
        text.lines().skip(1).find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case(wanted)
                .then(|| value.trim().to_owned())
        })
    };
    Ok(Request {
        method,
        path,
        query,
        accept: header("accept").unwrap_or_default(),
        authorization: header("authorization"),
    })
}

/// Where `serve` answers with a pprof profile over a window (Parca's and Pyroscope's scrape
/// convention): `?seconds=N`, 30 without it.
pub const PPROF_PATH: &str = "/debug/pprof/syscalls";
/// The longest window a scrape may ask for.
const PPROF_MAX_SECONDS: u64 = 600;

/// The window `query` asks for, or one line of what was wrong.
fn pprof_seconds(query: &str) -> Result<u64, String> {
    let Some(value) = query.split('&').find_map(|kv| kv.strip_prefix("seconds=")) else {
        return Ok(30);
    };
    match value.parse::<u64>() {
        Ok(n) if (1..=PPROF_MAX_SECONDS).contains(&n) => Ok(n),
        _ => Err(format!(
            "seconds={value}: give a whole number of seconds from 1 to {PPROF_MAX_SECONDS}, e.g. {PPROF_PATH}?seconds=30"
        )),
    }
}

/// The calls made over the next `seconds` as a gzipped pprof profile: the counters read now
/// and at the end (the lock held only to read), their difference one sample per syscall.
fn pprof_window(source: &Mutex<&mut MetricsSource>, seconds: u64) -> Result<Vec<u8>> {
    let read = || {
        source
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .read(false)
    };
    let (before, _) = read()?;
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let (after, _) = read()?;
    let mut metadata = after.metadata.clone();
    metadata.duration_s = started.elapsed().as_secs_f64();
    metadata.started_unix_s = metadata
        .started_unix_s
        .saturating_add((after.metadata.duration_s - metadata.duration_s).max(0.0) as u64);
    let delta = after.measurements[0]
        .syscalls
        .since(&before.measurements[0].syscalls);
    let data = ExportData::of_trace(metadata, delta, false);
    crate::export::Exporter::render(&crate::export::pprof::Pprof, &data)
}

fn answer(
    stream: TcpStream,
    source: &Mutex<&mut MetricsSource>,
    web: Option<&WebConfig>,
    spoke: impl FnOnce(),
) -> Result<()> {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    // Idle until the client sends its first bytes (a TLS hello takes round trips before the
    // request: counted from the first byte, a handshake in progress is never taken for idle).
    let first = i32::try_from(REQUEST_DEADLINE.as_millis()).unwrap_or(i32::MAX);
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&raw mut fd, 1, first) };
    anyhow::ensure!(ready > 0, "nothing sent within {REQUEST_DEADLINE:?}");
    spoke();
    let mut conn = match web {
        Some(w) => w.wrap(stream)?,
        None => Conn::Plain(stream),
    };
    let Request {
        method,
        path,
        query,
        accept,
        authorization,
    } = read_request(&mut conn, deadline)?;
    let protobuf = prometheus_proto::accepts(&accept);
    if let Some(w) = web
        && !w.authorized(authorization.as_deref())
    {
        let response = "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"syscall-profiler\"\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\nunauthorized\n";
        conn.write_all(response.as_bytes())
            .context("writing the response")?;
        conn.flush()?;
        return Ok(());
    }
    let rendered = || {
        source
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .render_as(protobuf)
    };
    let (status, content_type, body): (&str, &str, Vec<u8>) = match (method.as_str(), path.as_str())
    {
        ("GET" | "HEAD", "/metrics") => match rendered() {
            Ok((_, bytes)) if protobuf => ("200 OK", prometheus_proto::CONTENT_TYPE, bytes),
            Ok((text, _)) => ("200 OK", CONTENT_TYPE, text.into_bytes()),
            Err(e) => (
                "500 Internal Server Error",
                "text/plain",
                format!("reading the counters failed: {e:#}\n").into_bytes(),
            ),
        },
        ("GET" | "HEAD", "/recording") => match source
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .recording_json()
        {
            Ok(json) => ("200 OK", "application/json", json),
            Err(e) => (
                "503 Service Unavailable",
                "text/plain",
                format!("no recording: {e:#}\n").into_bytes(),
            ),
        },
        ("GET" | "HEAD", PPROF_PATH) => match pprof_seconds(&query) {
            Err(why) => ("400 Bad Request", "text/plain", format!("{why}\n").into_bytes()),
            Ok(seconds) => match pprof_window(source, seconds) {
                Ok(bytes) => ("200 OK", "application/octet-stream", bytes),
                Err(e) => (
                    "500 Internal Server Error",
                    "text/plain",
                    format!("reading the counters failed: {e:#}\n").into_bytes(),
                ),
            },
        },
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain",
            b"not found: metrics are at /metrics, the flight recording at /recording, a pprof profile at /debug/pprof/syscalls?seconds=N\n".to_vec(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            b"only GET /metrics is served\n".to_vec(),
        ),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        response.extend_from_slice(&body);
    }
    conn.tcp().set_write_timeout(Some(
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(100)),
    ))?;
    conn.write_all(&response).context("writing the response")?;
    conn.flush()?;
    if let Conn::Tls(tls) = &mut conn {
        tls.conn.send_close_notify();
        let _ = tls.flush();
    }
    Ok(())
}
