//! Each server mode next to nginx, HTTP keep-alive, same run.
//!
//! `cargo bench -p servers --bench vs_nginx [-- --rounds N --duration SECS]`
//!
//! Every target (nginx, lt, lt-pure, et, mp) is pinned to CPU 0 and driven by
//! `taskset -c 1 wrk -t1 -c50 -dSECS`; targets alternate within each round so drift in the
//! machine affects all of them alike. Prints a Markdown table of Requests/sec and each mode's
//! ratio to nginx. Needs nginx, wrk and taskset (`apt-get install nginx wrk util-linux`).

use std::{
    env, fs,
    io::{BufRead, BufReader},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

/// The fixed body both nginx and the servers return.
const BODY: &str = "Hello, world!\\n";

/// What is benchmarked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Nginx,
    Mode(&'static str),
}

impl Target {
    fn name(self) -> String {
        match self {
            Self::Nginx => "nginx".into(),
            Self::Mode(mode) => mode.into(),
        }
    }
}

/// A running target; stopped (SIGTERM, then SIGKILL) on drop.
struct Running {
    child: Child,
    port: u16,
}

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) && start.elapsed() < Duration::from_secs(3)
        {
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_until_accepting(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("target exited during startup: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "nothing accepting on port {port} after 10 s"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Writes the nginx config into `dir`: one worker, access log off, a fixed 200.
fn nginx_config(dir: &Path, port: u16) -> PathBuf {
    let d = dir.display();
    let config = format!(
        "worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    # The servers never close a keep-alive connection; let nginx keep its open too.
    keepalive_requests 100000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 \"{BODY}\"; }}
    }}
}}
"
    );
    let path = dir.join("nginx.conf");
    fs::write(&path, config).unwrap();
    path
}

fn start(target: Target, dir: &Path) -> Running {
    match target {
        Target::Nginx => {
            let port = free_port();
            let conf = nginx_config(dir, port);
            let mut child = Command::new("taskset")
                .args([
                    "-c",
                    "0",
                    "nginx",
                    "-e",
                    &format!("{}/error.log", dir.display()),
                    "-c",
                ])
                .arg(&conf)
                .args(["-g", "daemon off;"])
                .stdout(Stdio::null())
                .spawn()
                .expect("running nginx under taskset: apt-get install nginx util-linux");
            wait_until_accepting(port, &mut child);
            Running { child, port }
        }
        Target::Mode(mode) => {
            let mut child = Command::new(env!("CARGO_BIN_EXE_servers"))
                .args([
                    "--mode",
                    mode,
                    "--protocol",
                    "http",
                    "--cpus",
                    "0",
                    "--port",
                    "0",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("running the servers binary");
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            let port = line
                .trim()
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("unexpected readiness line {line:?}"));
            Running { child, port }
        }
    }
}

/// Runs wrk on CPU 1 and returns Requests/sec, refusing runs with errors.
fn wrk(port: u16, seconds: u32) -> f64 {
    let url = format!("http://127.0.0.1:{port}/");
    let output = Command::new("taskset")
        .args([
            "-c",
            "1",
            "wrk",
            "-t1",
            "-c50",
            &format!("-d{seconds}s"),
            &url,
        ])
        .output()
        .expect("running wrk under taskset: apt-get install wrk util-linux");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "wrk failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !text.contains("Socket errors") && !text.contains("Non-2xx"),
        "wrk saw errors:\n{text}"
    );
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in wrk output:\n{text}"))
}

fn arg_value(args: &[String], name: &str, default: u32) -> u32 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} expects a number, got {v}"))
        })
}

fn main() {
    let args: Vec<String> = env::args().collect();
    let rounds = arg_value(&args, "--rounds", 3);
    let seconds = arg_value(&args, "--duration", 5);
    let targets = [
        Target::Nginx,
        Target::Mode("lt"),
        Target::Mode("lt-pure"),
        Target::Mode("et"),
        Target::Mode("mp"),
    ];
    let dir = env::temp_dir().join(format!("vs-nginx-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();

    let mut results: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
    for round in 1..=rounds {
        for (i, &target) in targets.iter().enumerate() {
            let running = start(target, &dir);
            let _ = wrk(running.port, 1); // Warm-up: fill caches, grow socket buffers.
            let rps = wrk(running.port, seconds);
            drop(running);
            eprintln!("round {round}: {:<8} {rps:>10.0} req/s", target.name());
            results[i].push(rps);
        }
    }
    let _ = fs::remove_dir_all(&dir);

    // Ratios are taken within each round (targets ran back to back), then the median across
    // rounds, so a busy neighbour during one round skews that round's absolute numbers only.
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            f64::midpoint(v[n / 2 - 1], v[n / 2])
        }
    };
    let headers: Vec<String> = (1..=rounds).map(|r| format!("round {r} req/s")).collect();
    println!(
        "| target | {} | median req/s | ratio to nginx (median of rounds) | ratio range |",
        headers.join(" | ")
    );
    println!("|---|{}---:|---:|---:|", "---:|".repeat(rounds as usize));
    for (target, runs) in targets.iter().zip(&results) {
        let cells: Vec<String> = runs.iter().map(|r| format!("{r:.0}")).collect();
        let ratios: Vec<f64> = runs.iter().zip(&results[0]).map(|(r, n)| r / n).collect();
        let (low, high) = ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
        println!(
            "| {} | {} | {:.0} | {:.2} | {low:.2}–{high:.2} |",
            target.name(),
            cells.join(" | "),
            median(runs.clone()),
            median(ratios.clone())
        );
    }
}
