//! Is the load generator the bottleneck? HTTP keep-alive against nginx, alternating wrk and
//! `profiler::loadgen` with the same connections (50), threads (1, pinned to CPU 1) and duration,
//! in the same run; prints each round's QPS and the median ratio ours / wrk (target ≥ 1.0).
//!
//! `cargo bench -p profiler --bench loadgen_vs_wrk`; environment: `ROUNDS` (default 3),
//! `SECS` per measurement (default 5), `SERVER_CPU` (0), `CLIENT_CPU` (1), `CONNS` (50),
//! `NICE` (default -19: nginx, wrk and our client threads all run at this nice value, so that
//! other work on the machine, e.g. a build, disturbs the comparison less; 0 to turn off).
//! Needs nginx, wrk and taskset; prints why and exits 0 when one is missing.

use std::{
    fs,
    io::Write as _,
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use profiler::loadgen::{self, LoadSpec, Stop, Workload};

/// nginx on its own CPU; stopped and its temp dir removed on drop.
struct Nginx {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl Nginx {
    fn start(cpu: usize, nice: i32) -> anyhow::Result<Nginx> {
        let dir = std::env::temp_dir().join(format!("loadgen-bench-nginx-{}", std::process::id()));
        fs::create_dir_all(dir.join("logs"))
            .with_context(|| format!("creating {}", dir.display()))?;
        // Ask the kernel for a free port; nginx binds it right after (a small race, fine here).
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let d = dir.display();
        let conf = format!(
            "worker_processes 1;\n\
             pid {d}/nginx.pid;\n\
             error_log {d}/logs/error.log warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n\
               access_log off;\n\
               client_body_temp_path {d}/body;\n\
               proxy_temp_path {d}/proxy;\n\
               fastcgi_temp_path {d}/fastcgi;\n\
               uwsgi_temp_path {d}/uwsgi;\n\
               scgi_temp_path {d}/scgi;\n\
               keepalive_requests 100000000;\n\
               server {{\n\
                 listen 127.0.0.1:{port};\n\
                 location / {{ return 200 \"hello\"; }}\n\
               }}\n\
             }}\n"
        );
        let conf_path = dir.join("nginx.conf");
        fs::File::create(&conf_path)?.write_all(conf.as_bytes())?;
        let child = Command::new("nice")
            .args([
                "-n",
                &nice.to_string(),
                "taskset",
                "-c",
                &cpu.to_string(),
                "nginx",
                "-p",
            ])
            .arg(&dir)
            .arg("-c")
            .arg(&conf_path)
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .spawn()
            .context("starting nginx under taskset")?;
        let mut nginx = Nginx {
            child,
            dir,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        nginx.wait_listening()?;
        Ok(nginx)
    }

    fn wait_listening(&mut self) -> anyhow::Result<()> {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Some(status) = self.child.try_wait()? {
                let log = fs::read_to_string(self.dir.join("logs/error.log")).unwrap_or_default();
                bail!("nginx exited with {status}: {log}");
            }
            if TcpStream::connect(self.addr).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("nginx did not listen on {} within 5 s", self.addr)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM lets the master stop its worker; SIGKILL would leave the worker behind.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn env_or(name: &str, default: u64) -> anyhow::Result<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .with_context(|| format!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

fn available(tool: &str) -> bool {
    [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/local/bin",
        "/usr/local/sbin",
    ]
    .iter()
    .any(|d| Path::new(d).join(tool).exists())
}

/// Result of one measurement: requests per second and client CPU time (user + system) per request.
struct Measured {
    qps: f64,
    cpu_us_per_req: f64,
}

/// User + system CPU time of `who` (`RUSAGE_SELF` or `RUSAGE_CHILDREN`) so far.
fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: getrusage only writes the struct we pass, which is valid when zeroed.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &raw mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn wrk_run(
    cpu: usize,
    conns: u64,
    secs: u64,
    addr: SocketAddr,
    nice: i32,
) -> anyhow::Result<Measured> {
    let cpu0 = cpu_time(libc::RUSAGE_CHILDREN);
    let out = Command::new("nice")
        .args([
            "-n",
            &nice.to_string(),
            "taskset",
            "-c",
            &cpu.to_string(),
            "wrk",
            "-t1",
        ])
        .arg(format!("-c{conns}"))
        .arg(format!("-d{secs}s"))
        .arg(format!("http://{addr}/"))
        .output()
        .context("running wrk")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "wrk failed ({}): {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        eprintln!("wrk reported errors:\n{text}");
    }
    let cpu = cpu_time(libc::RUSAGE_CHILDREN).saturating_sub(cpu0);
    let qps: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no Requests/sec in wrk's output:\n{text}"))?;
    let requests = qps * secs as f64;
    Ok(Measured {
        qps,
        cpu_us_per_req: cpu.as_secs_f64() * 1e6 / requests,
    })
}

fn ours_run(cpu: usize, conns: u64, secs: u64, addr: SocketAddr) -> anyhow::Result<Measured> {
    let mut spec = LoadSpec::new(addr, Workload::HttpKeepAlive);
    spec.concurrency = usize::try_from(conns)?;
    spec.stop = Stop::Duration(Duration::from_secs(secs));
    spec.client_cpus = vec![cpu];
    let cpu0 = cpu_time(libc::RUSAGE_SELF);
    let report = loadgen::run(&spec)?;
    let cpu = cpu_time(libc::RUSAGE_SELF).saturating_sub(cpu0);
    if report.errors.total() > 0 {
        eprintln!("loadgen errors: {}", report.errors);
    }
    let cpu_us_per_req = cpu.as_secs_f64() * 1e6 / report.requests.max(1) as f64;
    Ok(Measured {
        qps: report.qps(),
        cpu_us_per_req,
    })
}

fn print_row(label: &str, v: &[f64; 5]) {
    println!(
        "{label:>5}  {:>10.0}  {:>10.0}  {:>8.3}  {:>13.2}  {:>14.2}",
        v[0], v[1], v[2], v[3], v[4]
    );
}

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing useful: run only
    // when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        println!("loadgen_vs_wrk: run with `cargo bench` to measure");
        return Ok(());
    }
    for tool in ["nginx", "wrk", "taskset"] {
        if !available(tool) {
            println!("loadgen_vs_wrk: skipped, {tool} is not installed");
            return Ok(());
        }
    }
    let rounds = env_or("ROUNDS", 3)?.max(1);
    let secs = env_or("SECS", 5)?.max(1);
    let server_cpu = usize::try_from(env_or("SERVER_CPU", 0)?)?;
    let client_cpu = usize::try_from(env_or("CLIENT_CPU", 1)?)?;
    let conns = env_or("CONNS", 50)?.max(1);
    let nice = match std::env::var("NICE") {
        Ok(v) => v
            .parse()
            .with_context(|| format!("NICE={v:?} is not a number"))?,
        Err(_) => -19,
    };
    // Our client threads are created by this thread and inherit its nice value.
    // SAFETY: setpriority only changes this thread's scheduling priority.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) } != 0 {
        bail!("cannot set nice {nice} (not root? run with NICE=0)");
    }

    let nginx = Nginx::start(server_cpu, nice)?;
    println!(
        "HTTP keep-alive vs nginx (1 worker, CPU {server_cpu}) at {}: {conns} connections, \
         1 client thread on CPU {client_cpu}, {secs} s each, {rounds} rounds, nice {nice}",
        nginx.addr
    );
    println!(
        "{:>5}  {:>10}  {:>10}  {:>8}  {:>13}  {:>14}",
        "round", "wrk QPS", "ours QPS", "ours/wrk", "wrk CPU µs/req", "ours CPU µs/req"
    );
    let mut cols: [Vec<f64>; 5] = Default::default();
    for round in 1..=rounds {
        // Alternate which goes first, so that a drift in the machine's load favours neither.
        let (wrk, ours) = if round % 2 == 1 {
            let wrk = wrk_run(client_cpu, conns, secs, nginx.addr, nice)?;
            (wrk, ours_run(client_cpu, conns, secs, nginx.addr)?)
        } else {
            let ours = ours_run(client_cpu, conns, secs, nginx.addr)?;
            (wrk_run(client_cpu, conns, secs, nginx.addr, nice)?, ours)
        };
        let row = [
            wrk.qps,
            ours.qps,
            ours.qps / wrk.qps,
            wrk.cpu_us_per_req,
            ours.cpu_us_per_req,
        ];
        print_row(&round.to_string(), &row);
        for (col, v) in cols.iter_mut().zip(row) {
            col.push(v);
        }
    }
    let med = cols.map(|c| profiler::samples::median(&c));
    print_row("med", &med);
    let ratio = med[2];
    println!(
        "{}",
        if ratio >= 1.0 {
            "target met: ours >= wrk"
        } else {
            "target missed: ours < wrk"
        }
    );
    drop(nginx);
    Ok(())
}
