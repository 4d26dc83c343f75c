//! `profiler serve` scraped by a real Prometheus server (Debian package prometheus): syscalls made
//! by a tracked process come back through Prometheus's HTTP query API. Loads BPF programs: root.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

mod common;

use common::serial;

/// Kills (SIGTERM, then SIGKILL after 10 s) and reaps a process when dropped, even on panic.
struct Killed(Child);

impl Killed {
    /// SIGTERM and wait up to 10 s; returns whether it exited successfully.
    fn stop(&mut self) -> bool {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.0.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        false
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.stop();
        }
    }
}

/// A forked child stopped before it makes `closes` close() calls, then exits.
struct Closer {
    pid: i32,
}

impl Closer {
    fn stopped(closes: u64) -> Self {
        // SAFETY: the child runs only raw libc calls and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                libc::raise(libc::SIGSTOP);
                for _ in 0..closes {
                    libc::close(libc::dup(0));
                }
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: our own child.
        let rc = unsafe { libc::waitpid(pid, &raw mut status, libc::WUNTRACED) };
        assert!(rc == pid && libc::WIFSTOPPED(status), "child did not stop");
        Self { pid }
    }

    fn run_to_completion(self) {
        let mut status = 0;
        // SAFETY: our own child.
        unsafe {
            libc::kill(self.pid, libc::SIGCONT);
            libc::waitpid(self.pid, &raw mut status, 0);
        }
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child failed: {status}"
        );
    }
}

fn require(path: &str, package: &str) -> PathBuf {
    let p = PathBuf::from(path);
    assert!(
        p.is_file(),
        "{path} is missing: apt-get install -y {package}"
    );
    p
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.1 GET on loopback: (status code, body); `None` while nothing listens.
fn try_get(port: u16, target: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    // HTTP/1.0: a large answer (a native histogram's buckets) comes whole, not chunked.
    write!(
        stream,
        "GET {target} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

fn http_get(port: u16, target: &str) -> (u16, String) {
    try_get(port, target).unwrap_or_else(|| panic!("GET {target} on port {port} failed"))
}

/// Percent-encodes a PromQL query for a URL.
fn encode(query: &str) -> String {
    query
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_-.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The query's single sample value through Prometheus's HTTP API, if it has one yet.
fn query(port: u16, promql: &str) -> Option<f64> {
    let (status, body) = try_get(port, &format!("/api/v1/query?query={}", encode(promql)))?;
    if status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

fn start_serve(pid: i32) -> (Killed, u16) {
    start_serve_with(&["--pid", &pid.to_string(), "--syscalls", "close,read"])
}

/// `profiler serve ARGS --listen 127.0.0.1:0`, once it says where it listens.
fn start_serve_with(args: &[&str]) -> (Killed, u16) {
    let mut serve = Killed(
        Command::new(env!("CARGO_BIN_EXE_profiler"))
            .arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Its one stderr line says where it listens, once the programs are attached.
    let stderr = serve.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = rx
        .recv_timeout(Duration::from_mins(1))
        .expect("profiler serve printed nothing within 60 s");
    let port = line
        .split("://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no listening address in: {line}"));
    (serve, port)
}

fn start_prometheus(dir: &Path, target_port: u16) -> (Killed, u16) {
    start_prometheus_with(dir, target_port, &[])
}

fn start_prometheus_with(dir: &Path, target_port: u16, flags: &[&str]) -> (Killed, u16) {
    start_prometheus_scraping(dir, &[target_port], flags)
}

fn start_prometheus_scraping(dir: &Path, target_ports: &[u16], flags: &[&str]) -> (Killed, u16) {
    let prometheus = require("/usr/bin/prometheus", "prometheus");
    let port = free_port();
    let config = dir.join("prometheus.yml");
    let targets: Vec<String> = target_ports
        .iter()
        .map(|p| format!("'127.0.0.1:{p}'"))
        .collect();
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: profiler\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )
    .unwrap();
    let child = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(flags)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    (Killed(child), port)
}

#[test]
fn serve_answers_metrics_and_404_elsewhere() {
    let _serial = serial();
    const CLOSES: u64 = 5000;
    let child = Closer::stopped(CLOSES);
    let (mut serve, port) = start_serve(child.pid);
    child.run_to_completion();
    let (status, body) = http_get(port, "/metrics");
    assert_eq!(status, 200);
    assert!(
        body.contains(&format!(
            "syscall_profiler_syscall_calls_total{{syscall=\"close\"}} {CLOSES}\n"
        )),
        "{body}"
    );
    assert!(body.contains(&format!(
        "syscall_profiler_syscall_latency_seconds_count{{syscall=\"close\"}} {CLOSES}\n"
    )));
    assert_eq!(http_get(port, "/").0, 404);
    assert_eq!(http_get(port, "/metricsx").0, 404);
    // Cumulative since start: a second scrape still counts the same calls.
    assert!(http_get(port, "/metrics").1.contains(&format!(
        "syscall_profiler_syscall_calls_total{{syscall=\"close\"}} {CLOSES}\n"
    )));
    assert!(serve.stop(), "serve must exit 0 on SIGTERM");
}

/// `--self-cost`: each program's runs and run time (BPF_ENABLE_STATS), and the syscall
/// programs' time per traced call, which is their time over the calls the table counts.
#[test]
fn serve_reports_its_own_cost_per_traced_call() {
    let _serial = serial();
    const CLOSES: u64 = 5000;
    let child = Closer::stopped(CLOSES);
    let (mut serve, port) = start_serve_with(&[
        "--pid",
        &child.pid.to_string(),
        "--syscalls",
        "close",
        "--self-cost",
    ]);
    child.run_to_completion();
    let (status, body) = http_get(port, "/metrics");
    assert_eq!(status, 200);
    let value = |line: &str| line.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
    let per_program = |family: &str| -> Vec<(String, f64)> {
        body.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(&format!(
                    "syscall_profiler_self_program_{family}{{program=\""
                ))?;
                Some((rest.split('"').next()?.to_owned(), value(l)))
            })
            .collect()
    };
    let runs = per_program("runs_total");
    let seconds = per_program("seconds_total");
    assert!(!runs.is_empty() && runs.len() == seconds.len(), "{body}");
    // An entry and an exit program time each close.
    let timing = |n: &str| n != "process_exit" && n != "task_newtask" && !n.contains("sched_");
    assert!(
        runs.iter()
            .filter(|(n, r)| timing(n) && *r >= CLOSES as f64)
            .count()
            >= 2,
        "{runs:?}"
    );
    let ns: f64 = seconds
        .iter()
        .filter(|(n, _)| timing(n))
        .map(|(_, s)| s * 1e9)
        .sum();
    let gauge = body
        .lines()
        .find(|l| l.starts_with("syscall_profiler_self_ns_per_traced_call "))
        .map_or_else(|| panic!("no ns_per_traced_call: {body}"), value);
    let expected = ns / CLOSES as f64;
    assert!(
        gauge > 0.0 && (gauge - expected).abs() <= 0.1 + expected * 1e-3,
        "{gauge} against {expected}"
    );
    assert!(serve.stop(), "serve must exit 0 on SIGTERM");
}

#[test]
fn prometheus_scrapes_serve_and_reads_back_the_tracked_process_calls() {
    let _serial = serial();
    const CLOSES: u64 = 12_345;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("serve-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let child = Closer::stopped(CLOSES);
    let (mut serve, serve_port) = start_serve(child.pid);
    let (mut prometheus, prom_port) = start_prometheus(&dir, serve_port);
    child.run_to_completion();

    let calls = "syscall_profiler_syscall_calls_total{syscall=\"close\",job=\"profiler\"}";
    let count = "syscall_profiler_syscall_latency_seconds_count{syscall=\"close\"}";
    let p50 = "histogram_quantile(0.5, syscall_profiler_syscall_latency_seconds_bucket{syscall=\"close\"})";
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = None;
    while Instant::now() < deadline {
        last = query(prom_port, calls);
        if last == Some(CLOSES as f64) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    let log_tail: String = log.lines().rev().take(15).collect::<Vec<_>>().join("\n");
    assert_eq!(
        last,
        Some(CLOSES as f64),
        "Prometheus never saw {CLOSES} close calls; its log ends:\n{log_tail}"
    );
    assert_eq!(query(prom_port, count), Some(CLOSES as f64));
    let median = query(prom_port, p50).expect("histogram_quantile has a value");
    assert!(
        median > 0.0 && median < 0.01,
        "median close latency {median} s is not plausible"
    );
    let up = query(prom_port, "up{job=\"profiler\"}");
    assert_eq!(up, Some(1.0), "the scrape target is up");

    assert!(
        prometheus.stop(),
        "prometheus did not stop cleanly; log:\n{log_tail}"
    );
    assert!(serve.stop(), "serve must exit 0 on SIGTERM");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Debian's Prometheus 2.42 with native histograms asks for the protobuf format, and gets every
/// series of the text format plus each syscall's latency as a native histogram: its
/// `histogram_count` is the calls the profiler counted, and its `histogram_quantile` agrees with
/// the profiler's own quantiles (the summary family) within the stated bound (4%).
#[test]
fn prometheus_with_native_histograms_reads_counts_and_quantiles_from_serve() {
    let _serial = serial();
    const CLOSES: u64 = 20_000;
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-native-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let child = Closer::stopped(CLOSES);
    let (mut serve, serve_port) = start_serve(child.pid);
    let (mut prometheus, prom_port) =
        start_prometheus_with(&dir, serve_port, &["--enable-feature=native-histograms"]);
    child.run_to_completion();

    let native = "syscall_profiler_syscall_latency_native_seconds{syscall=\"close\"}";
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut count = None;
    while Instant::now() < deadline {
        count = query(prom_port, &format!("histogram_count({native})"));
        if count == Some(CLOSES as f64) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    let log_tail: String = log.lines().rev().take(15).collect::<Vec<_>>().join("\n");
    assert_eq!(
        count,
        Some(CLOSES as f64),
        "histogram_count of the native histogram; Prometheus's log ends:\n{log_tail}"
    );
    // Every text series came through the protobuf format too.
    assert_eq!(
        query(
            prom_port,
            "syscall_profiler_syscall_calls_total{syscall=\"close\"}"
        ),
        Some(CLOSES as f64)
    );
    assert_eq!(
        query(
            prom_port,
            "syscall_profiler_syscall_latency_seconds_count{syscall=\"close\"}"
        ),
        Some(CLOSES as f64),
        "the classic histogram stays classic beside the native one"
    );
    for q in ["0.5", "0.99"] {
        let own = query(
            prom_port,
            &format!(
                "syscall_profiler_syscall_latency_quantiles_seconds{{syscall=\"close\",quantile=\"{q}\"}}"
            ),
        )
        .unwrap_or_else(|| panic!("the profiler's own p{q}"));
        let from_native = query(prom_port, &format!("histogram_quantile({q}, {native})"))
            .unwrap_or_else(|| panic!("histogram_quantile({q}) over the native histogram"));
        assert!(
            (from_native / own - 1.0).abs() <= 0.04,
            "quantile {q}: native {from_native} s against the profiler's {own} s"
        );
    }
    assert!(prometheus.stop(), "prometheus did not stop cleanly");
    assert!(serve.stop(), "serve must exit 0 on SIGTERM");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The result vector of an instant query (empty on any failure).
fn query_vector(port: u16, promql: &str) -> Vec<serde_json::Value> {
    try_get(port, &format!("/api/v1/query?query={}", encode(promql)))
        .filter(|(status, _)| *status == 200)
        .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
        .and_then(|v| v["data"]["result"].as_array().cloned())
        .unwrap_or_default()
}

/// A sample's value (a float sample; `None` for a native histogram sample).
fn value_of(sample: &serde_json::Value) -> Option<f64> {
    sample["value"][1].as_str()?.parse().ok()
}

/// The shipped Grafana dashboard (`deploy/grafana-dashboard.json`). Grafana cannot be installed
/// here, so every panel's query, with its variables substituted as Grafana would (`$instance`
/// and `$syscall`: all; `$__rate_interval`, `$__range`), runs against a real Prometheus (native
/// histograms on) scraping two serves, one `--pid` with `--off-cpu` and one `--all
/// --by-cgroup`, while a workload makes calls and errors: every query returns data, and the
/// values that can be checked are right.
#[test]
fn every_grafana_panel_query_returns_data_from_prometheus_scraping_serve() {
    let _serial = serial();
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/grafana-dashboard.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(dashboard["__inputs"][0]["name"], "DS_PROMETHEUS");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("serve-grafana-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Calls (cat's reads and closes), errors (opening a file that is not there: ENOENT).
    let workload = Killed(
        Command::new("sh")
            .args([
                "-c",
                "while :; do cat /dev/null; cat /nonexistent 2>/dev/null; sleep 0.02; done",
            ])
            .spawn()
            .unwrap(),
    );
    let pid = workload.0.id().to_string();
    let (_serve_pid, port_pid) = start_serve_with(&[
        "--pid",
        &pid,
        "--off-cpu",
        "--self-cost",
        "--syscalls",
        "close,read,openat",
    ]);
    let (_serve_all, port_all) = start_serve_with(&["--all", "--by-cgroup", "--syscalls", "close"]);
    let (mut prometheus, prom) = start_prometheus_scraping(
        &dir,
        &[port_pid, port_all],
        &["--enable-feature=native-histograms"],
    );
    let substitute = |expr: &str| {
        expr.replace("$instance", ".*")
            .replace("$syscall", ".*")
            .replace("$__rate_interval", "20s")
            .replace("$__range", "1m")
    };
    let mut queries: Vec<(String, String)> = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queries.push((
                panel["title"].as_str().unwrap().to_owned(),
                substitute(target["expr"].as_str().unwrap()),
            ));
        }
    }
    assert!(queries.len() >= 10, "{queries:?}");
    // Until every query has data (rates need two scrapes in their window), at most 90 s.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut empty: Vec<&(String, String)>;
    loop {
        empty = queries
            .iter()
            .filter(|(_, q)| query_vector(prom, q).is_empty())
            .collect();
        if empty.is_empty() || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    let log_tail: String = log.lines().rev().take(10).collect::<Vec<_>>().join("\n");
    assert!(
        empty.is_empty(),
        "panels without data: {empty:#?}; Prometheus's log ends:\n{log_tail}"
    );
    let find = |title: &str| {
        let (_, q) = queries
            .iter()
            .find(|(t, _)| t.starts_with(title))
            .unwrap_or_else(|| panic!("no panel {title}"));
        query_vector(prom, q)
    };
    // The variables' label_values(METRIC, LABEL) queries, as Grafana runs them.
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        let q = variable["query"].as_str().unwrap();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{q}: not label_values(METRIC, LABEL)"));
        let (metric, label) = inner.split_once(',').unwrap();
        let (status, body) = try_get(
            prom,
            &format!(
                "/api/v1/label/{}/values?match[]={}",
                label.trim(),
                encode(metric.trim())
            ),
        )
        .unwrap();
        let values: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(
            status == 200 && !values["data"].as_array().unwrap().is_empty(),
            "variable {q}: {body}"
        );
    }
    let up = find("Target up");
    assert_eq!(value_of(&up[0]), Some(1.0), "{up:?}");
    let calls = find("Calls per second");
    assert!(
        calls
            .iter()
            .any(|s| s["metric"]["syscall"] == "read" && value_of(s).is_some_and(|v| v > 0.0)),
        "{calls:?}"
    );
    let errors = find("Errors per second by errno");
    assert!(
        errors.iter().any(|s| s["metric"]["syscall"] == "openat"
            && s["metric"]["errno"] == "ENOENT"
            && value_of(s).is_some_and(|v| v > 0.0)),
        "ENOENT of openat, every 20 ms: {errors:?}"
    );
    let p99 = find("Latency p50 and p99");
    assert!(
        p99.iter().filter_map(value_of).all(|v| v > 1e-8 && v < 1.0),
        "{p99:?}"
    );
    let states = find("Time in syscalls by CPU state");
    let names: std::collections::BTreeSet<&str> = states
        .iter()
        .filter_map(|s| s["metric"]["state"].as_str())
        .collect();
    assert_eq!(
        names,
        ["blocked", "on_cpu", "runnable"].into_iter().collect(),
        "{states:?}"
    );
    let heat = find("Latency heatmap");
    assert!(
        heat[0]["histogram"].is_array(),
        "a native histogram sample: {heat:?}"
    );
    assert!(prometheus.stop(), "prometheus did not stop cleanly");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `serve --web-config` as a fleet needs it: Debian's Prometheus scrapes it over HTTPS (a CA made
/// here, the server's certificate for 127.0.0.1) with basic auth, and reads the counts back; a
/// wrong password gets 401, plain HTTP gets nothing; and with `--user nobody` it serves as
/// nobody with no capability, root dropped once the programs were attached.
#[test]
fn prometheus_scrapes_serve_over_tls_with_basic_auth_and_serve_runs_without_root() {
    let _serial = serial();
    const CLOSES: u64 = 3_000;
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A CA, and a certificate for 127.0.0.1 signed by it.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    // Distinct names: OpenSSL (curl) takes a certificate whose issuer is its subject for a
    // self-signed one.
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "syscall-profiler test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let server_key = rcgen::KeyPair::generate().unwrap();
    let mut server_params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    server_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "127.0.0.1");
    let server = server_params
        .signed_by(&server_key, &rcgen::Issuer::new(ca_params, ca_key))
        .unwrap();
    std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.crt"), server.pem()).unwrap();
    std::fs::write(dir.join("server.key"), server_key.serialize_pem()).unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    std::fs::write(
        dir.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  alice: '{hash}'\n"
        ),
    )
    .unwrap();
    // The files are read at the start, as root, before root is dropped.
    let child = Closer::stopped(CLOSES);
    let web = dir.join("web.yml");
    let (mut serve, serve_port) = start_serve_with(&[
        "--pid",
        &child.pid.to_string(),
        "--syscalls",
        "close",
        "--web-config",
        web.to_str().unwrap(),
        "--user",
        "nobody",
    ]);
    // Serving as nobody, with no capability.
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.0.id())).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(field("Uid:"), ["65534"; 4], "{status}");
    assert_eq!(field("CapEff:"), ["0000000000000000"], "{status}");
    assert_eq!(field("CapPrm:"), ["0000000000000000"], "{status}");

    let port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: profiler\n    scheme: https\n    basic_auth:\n      username: alice\n      password: s3cret\n    tls_config:\n      ca_file: {}\n    static_configs:\n      - targets: ['127.0.0.1:{serve_port}']\n",
            dir.join("ca.crt").display()
        ),
    )
    .unwrap();
    let mut prometheus = Killed(
        Command::new(require("/usr/bin/prometheus", "prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    child.run_to_completion();
    let calls = "syscall_profiler_syscall_calls_total{syscall=\"close\"}";
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut last = None;
    while Instant::now() < deadline {
        last = query(port, calls);
        if last == Some(CLOSES as f64) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    let log_tail: String = log.lines().rev().take(10).collect::<Vec<_>>().join("\n");
    assert_eq!(
        last,
        Some(CLOSES as f64),
        "over HTTPS with basic auth; Prometheus's log ends:\n{log_tail}"
    );
    // curl, as anyone else would try it.
    let curl = |args: &[&str]| {
        let out = Command::new(require("/usr/bin/curl", "curl"))
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "5",
            ])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let url = format!("https://127.0.0.1:{serve_port}/metrics");
    let ca = dir.join("ca.crt");
    let ca = ca.to_str().unwrap();
    assert_eq!(curl(&["--cacert", ca, "-u", "alice:s3cret", &url]), "200");
    assert_eq!(curl(&["--cacert", ca, "-u", "alice:wrong", &url]), "401");
    assert_eq!(curl(&["--cacert", ca, &url]), "401");
    // Plain HTTP to the TLS port: no HTTP answer at all.
    assert!(
        try_get(serve_port, "/metrics").is_none_or(|(status, _)| status == 0),
        "plain HTTP must get nothing"
    );
    assert!(prometheus.stop(), "prometheus did not stop cleanly");
    assert!(serve.stop(), "serve must exit 0 on SIGTERM, as nobody too");
    let _ = std::fs::remove_dir_all(&dir);
}

/// serve answered one connection at a time with a 2 s timeout per read: one client sending a
/// byte a second blocked every scrape. Now 20 such clients and 5 idle ones cost a scrape nothing.
#[test]
fn a_scrape_is_answered_within_a_second_while_slow_clients_are_connected() {
    let _serial = serial();
    let child = Closer::stopped(100);
    let (mut serve, port) = start_serve(child.pid);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut slow = Vec::new();
    for _ in 0..20 {
        let stop = std::sync::Arc::clone(&stop);
        slow.push(std::thread::spawn(move || {
            let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
                return;
            };
            for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\n" {
                if stop.load(std::sync::atomic::Ordering::Relaxed)
                    || stream.write_all(&[*byte]).is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        }));
    }
    let idle: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..5 {
        let started = Instant::now();
        let (status, body) = http_get(port, "/metrics");
        let took = started.elapsed();
        assert_eq!(status, 200);
        assert!(body.contains("syscall_profiler_target_up 1\n"), "{body}");
        assert!(
            took < Duration::from_secs(1),
            "a scrape took {took:?} with slow clients connected"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(idle);
    for t in slow {
        let _ = t.join();
    }
    child.run_to_completion();
    assert!(serve.stop(), "serve must exit 0 on SIGTERM");
}

/// serve went on serving frozen counters, with no sign, after its target exited.
#[test]
fn the_up_gauge_falls_to_zero_when_every_tracked_process_has_exited() {
    let _serial = serial();
    let child = Closer::stopped(100);
    let (mut serve, port) = start_serve(child.pid);
    let body = http_get(port, "/metrics").1;
    assert!(
        body.contains("syscall_profiler_tracked_processes_alive 1\n"),
        "{body}"
    );
    assert!(body.contains("syscall_profiler_target_up 1\n"), "{body}");
    child.run_to_completion();
    let body = http_get(port, "/metrics").1;
    assert!(
        body.contains("syscall_profiler_tracked_processes_alive 0\n"),
        "{body}"
    );
    assert!(body.contains("syscall_profiler_target_up 0\n"), "{body}");
    assert!(serve.stop(), "serve must exit 0 on SIGTERM");
}

/// Listening beyond loopback without TLS and basic auth is said in one line, at the start.
#[test]
fn serving_beyond_loopback_unsecured_is_warned_about() {
    let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args(["serve", "--pid", "999999999", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.lines().any(|l| l
            .starts_with("warning: serving on 0.0.0.0:0 without TLS or basic auth")
            && l.contains("--web-config")),
        "{stderr}"
    );
}

/// 200 idle clients that send nothing and reconnect as soon as they are dropped took every
/// connection slot: 0 of 20 scrapes succeeded, over plain HTTP and TLS alike. The idlest
/// connection now makes room for a new one: every scrape is answered, with and without
/// `--web-config`.
#[test]
fn scrapes_are_answered_while_idle_clients_reconnect_without_end() {
    let _serial = serial();
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-idle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    std::fs::write(dir.join("server.crt"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), cert.signing_key.serialize_pem()).unwrap();
    std::fs::write(
        dir.join("web.yml"),
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    )
    .unwrap();
    let web = dir.join("web.yml");
    for tls in [false, true] {
        let child = Closer::stopped(100);
        let pid = child.pid.to_string();
        let mut args = vec!["--pid", pid.as_str(), "--syscalls", "close"];
        if tls {
            args.extend(["--web-config", web.to_str().unwrap()]);
        }
        let (mut serve, port) = start_serve_with(&args);
        let scrape = || {
            if tls {
                let out = Command::new(require("/usr/bin/curl", "curl"))
                    .args(["-s", "-k", "-o", "/dev/null", "-w", "%{http_code}"])
                    // A scrape waits in the accept queue behind the reconnecting clients: one
                    // took over 5 s beside a CI build (19 of 20 answered then). It is answered,
                    // not refused, that this checks; how long 20 take is the bound below.
                    .args(["--max-time", "30"])
                    .arg(format!("https://127.0.0.1:{port}/metrics"))
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout) == "200"
            } else {
                try_get(port, "/metrics").is_some_and(|(status, _)| status == 200)
            }
        };
        // What 5 scrapes take here with nobody else connected. Among the idle clients each
        // scrape waits in the kernel's accept queue behind up to 200 reconnecting clients,
        // which serve accepts (and evicts) one by one: 20 scrapes took 14 s on an idle machine
        // and over 20 s beside a build, where before the fix they took 78 s or none was
        // answered. The bound: 45 s plus 40 times the 5 lone scrapes, which grow with the load.
        let alone = Instant::now();
        for _ in 0..5 {
            assert!(scrape(), "tls {tls}: a scrape with no other client failed");
        }
        let bound = Duration::from_secs(45) + alone.elapsed() * 40;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let idle: Vec<_> = (0..200)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        };
                        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                        let mut buf = [0u8; 64];
                        // Held, sending nothing, until the server drops it.
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            match s.read(&mut buf) {
                                Ok(0) => break,
                                Ok(_) => {}
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock
                                            | std::io::ErrorKind::TimedOut
                                    ) => {}
                                Err(_) => break,
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        let mut answered = 0;
        for _ in 0..20 {
            answered += u32::from(scrape());
        }
        let took = started.elapsed();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in idle {
            let _ = t.join();
        }
        child.run_to_completion();
        assert!(serve.stop(), "serve must exit 0 on SIGTERM");
        assert_eq!(answered, 20, "tls {tls}: {answered} of 20 scrapes answered");
        assert!(
            took < bound,
            "tls {tls}: 20 scrapes took {took:?} (bound {bound:?}, from 5 alone)"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flight recorder: a burst of slow reads (each waiting 50 ms on a pipe) crosses
/// `--record-when read:p99>20ms`, and the recording written then holds them, with their stacks
/// (`--slow 20ms`); GET /recording answers the same intervals, with exactly the 5 slow reads,
/// and `profiler diff` reads the two as runs.
#[test]
fn a_flight_recording_after_a_burst_of_slow_calls_holds_them_and_diff_reads_it() {
    let _serial = serial();
    let dir = common::scratch("serve", "recorder");
    let workload = Killed(
        Command::new("sh")
            .args([
                "-c",
                "sleep 2; for i in 1 2 3 4 5; do (sleep 0.05; echo x) | cat > /dev/null; done; exec sleep 600",
            ])
            .spawn()
            .unwrap(),
    );
    let pid = workload.0.id().to_string();
    let (mut serve, port) = start_serve_with(&[
        "--pid",
        &pid,
        "--syscalls",
        "read",
        "--record-every",
        "1s",
        "--record-minutes",
        "1",
        "--record-when",
        "read:p99>20ms",
        "--record-dir",
        dir.to_str().unwrap(),
        "--slow",
        "20ms",
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let written = loop {
        let found = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "json"));
        if let Some(path) = found {
            break path;
        }
        assert!(
            Instant::now() < deadline,
            "no recording written within 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // Written atomically: complete once it exists.
    let recording = common::read_json(&written);
    let slowest = recording["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| {
            m["syscalls"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "read")?["max_ns"]
                .as_u64()
        })
        .max()
        .unwrap_or(0);
    assert!(
        slowest >= 45_000_000,
        "the slow reads are not in it: {slowest} ns"
    );
    // The slow calls, per interval, with where they waited.
    let slow_reads = |recording: &serde_json::Value| -> (u64, Vec<serde_json::Value>) {
        let mut recorded = 0;
        let mut groups = Vec::new();
        for m in recording["measurements"].as_array().unwrap() {
            let slow = &m["slow"];
            recorded += slow["recorded"].as_u64().unwrap_or(0);
            assert_eq!(slow["lost"].as_u64().unwrap_or(0), 0, "{slow}");
            groups.extend(slow["groups"].as_array().cloned().unwrap_or_default());
        }
        (recorded, groups)
    };
    let (recorded, groups) = slow_reads(&recording);
    assert!(recorded >= 1, "no slow call in the recording: {recording}");
    let read = groups
        .iter()
        .find(|g| {
            g["syscall"] == "read" && g["slowest"]["duration_ns"].as_u64() >= Some(45_000_000)
        })
        .unwrap_or_else(|| panic!("no slow read group: {groups:?}"));
    assert!(
        read["slowest"]["blocked_ns"].as_u64() >= Some(20_000_000)
            && !read["kernel_stack"].as_array().unwrap().is_empty(),
        "the slow read was not seen blocked, with a stack: {read}"
    );
    // Every one of the burst's 5 slow reads, and no other call, once their intervals end.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (body, served_recorded) = loop {
        let (status, body) = http_get(port, "/recording");
        assert_eq!(status, 200, "{body}");
        let (n, _) = slow_reads(&serde_json::from_str(&body).unwrap());
        if n >= 5 || Instant::now() > deadline {
            break (body, n);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(served_recorded, 5, "slow calls in GET /recording: {body}");
    let served = dir.join("served.json");
    std::fs::write(&served, body).unwrap();
    let diff = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .arg("diff")
        .arg(&written)
        .arg(&served)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(
        diff.status.success() && text.contains("read"),
        "{text}{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    assert!(serve.stop(), "serve must exit 0 on SIGTERM");
    drop(workload);
}

/// A GET of `target` whose body is bytes (a gzipped profile): (status, body).
fn get_bytes(port: u16, target: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {target} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response with headers");
    let head = String::from_utf8_lossy(&response[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response[end + 4..].to_vec())
}

/// `GET /debug/pprof/syscalls?seconds=N` (Parca's and Pyroscope's scrape convention): the
/// calls made in the window as a pprof profile that `go tool pprof -raw` reads, the closes of
/// a process that ran inside the window counted exactly; a bad `seconds` is a 400 of one line.
#[test]
fn serve_answers_a_pprof_profile_of_a_window_that_go_tool_pprof_reads() {
    let _serial = serial();
    const CLOSES: u64 = 3000;
    let child = Closer::stopped(CLOSES);
    let (mut serve, port) = start_serve(child.pid);
    let (status, body) = http_get(port, "/debug/pprof/syscalls?seconds=0");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("seconds=0: give a whole number"), "{body}");
    let scrape = std::thread::spawn(move || get_bytes(port, "/debug/pprof/syscalls?seconds=2"));
    // The window opens when the request is read: the child's closes come well inside it.
    std::thread::sleep(Duration::from_millis(500));
    child.run_to_completion();
    let (status, profile) = scrape.join().unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&profile));
    let dir = common::scratch("serve", "pprof");
    let file = dir.join("window.pb.gz");
    std::fs::write(&file, &profile).unwrap();
    let raw = common::go_pprof(&["-raw"], &file);
    // "       3000    1234567: 1 " then its labels "syscall:[close]".
    let lines: Vec<&str> = raw.lines().collect();
    let close = lines
        .windows(2)
        .find(|w| w[1].contains("syscall:[close]"))
        .and_then(|w| w[0].split(':').next())
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok());
    assert_eq!(close, Some(CLOSES), "{raw}");
    assert!(serve.stop(), "serve must exit 0 on SIGTERM");
}
