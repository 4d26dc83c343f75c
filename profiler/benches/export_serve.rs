//! How fast the exports and `profiler serve` are (issue targets: every export of a comprehensive
//! run in < 1 s; a scrape of `serve` in < 50 ms with the default syscalls and 64 tracked processes).
//!
//! `cargo bench -p profiler --bench export_serve`; environment: `SCRAPES` (default 500). The serve
//! part loads BPF programs and needs root; without root it says so and only the export part runs.
//!
//! Export: synthetic comprehensive `run` data (4 variants × 3 concurrencies × 5 runs + aggregates,
//! 8 syscalls, 64 processes), each format rendered and written atomically to a temp dir, best of
//! 5. Serve: 64 forked processes doing close(dup(0)) every millisecond, tracked by the real
//! `profiler serve` binary; each scrape is one HTTP GET over loopback, timed from connect to the
//! last byte.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::TcpStream,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use profiler::export::{
    ExportArgs, Exporter, csv::Csv, hdr, html::Html, json::Json, markdown::Markdown,
    prometheus::Prometheus, write_exports,
};
use synthetic::{Shape, run_data};

#[path = "../tests/fixtures/synthetic.rs"]
mod synthetic;

mod busy;

fn main() {
    export_speed();
    serve_speed();
}

fn best_of<F: FnMut()>(n: usize, mut f: F) -> Duration {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn export_speed() {
    let t = Instant::now();
    let data = run_data(&Shape::comprehensive());
    println!(
        "synthetic comprehensive run: {} measurements, {} syscalls each, 64 processes (built in {:.0} ms)",
        data.measurements.len(),
        data.measurements[0].syscalls.syscalls.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let dir = std::env::temp_dir().join(format!("export-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let formats: [(&str, &dyn Exporter); 5] = [
        ("json", &Json),
        ("csv", &Csv),
        ("prom", &Prometheus),
        ("md", &Markdown),
        ("html", &Html),
    ];
    for (ext, exporter) in formats {
        let mut size = 0;
        let time = best_of(5, || {
            let bytes = exporter.render(&data).unwrap();
            size = bytes.len();
            profiler::export::atomic::write_atomic(&dir.join(format!("out.{ext}")), &bytes)
                .unwrap();
        });
        println!(
            "  {:<12} {:>8.1} ms  {:>9} bytes",
            exporter.name(),
            time.as_secs_f64() * 1e3,
            size
        );
    }
    let time = best_of(5, || hdr::write_dir(&dir.join("hdr"), &data).unwrap());
    let files = std::fs::read_dir(dir.join("hdr")).unwrap().count();
    println!(
        "  {:<12} {:>8.1} ms  {:>9} files",
        "HdrHistogram",
        time.as_secs_f64() * 1e3,
        files
    );
    let args = ExportArgs {
        export_json: Some(dir.join("all.json")),
        export_csv: Some(dir.join("all.csv")),
        export_hdr: Some(dir.join("all-hdr")),
        export_prom: Some(dir.join("all.prom")),
        export_markdown: Some(dir.join("all.md")),
        report: Some(dir.join("all.html")),
        export_folded: None,
        export_pprof: Some(dir.join("all.pb.gz")),
    };
    let time = best_of(5, || write_exports(&args, &data).unwrap());
    println!(
        "every format (write_exports): {:.1} ms (target < 1000 ms)",
        time.as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn scrape(port: u16) -> (Duration, usize) {
    let t = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    (t.elapsed(), body.len())
}

fn serve_speed() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("serve scrape: skipped, loading BPF programs needs root (run the bench as root)");
        return;
    }
    let scrapes: usize = std::env::var("SCRAPES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let children = busy::Children::spawn(64, Duration::from_millis(1));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_profiler"));
    cmd.args(["serve", "--listen", "127.0.0.1:0"]);
    for pid in &children.0 {
        cmd.args(["--pid", &pid.to_string()]);
    }
    let mut serve = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(serve.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("serve did not say where it listens: {line}"));
    std::thread::sleep(Duration::from_millis(500));
    let (_, size) = scrape(port);
    let mut times: Vec<Duration> = (0..scrapes).map(|_| scrape(port).0).collect();
    times.sort();
    let q = |q: f64| {
        times[((q * times.len() as f64) as usize).min(times.len() - 1)].as_secs_f64() * 1e3
    };
    println!(
        "serve scrape, default syscalls, 64 tracked processes busy: {scrapes} scrapes of {size} bytes: \
         p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (target < 50 ms)",
        q(0.5),
        q(0.99),
        times.last().unwrap().as_secs_f64() * 1e3
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    drop(children);
    let _ = serve.wait();
}
