//! What one refresh of `profiler top` costs the profiler's CPU with thousands of processes
//! (issue target: under 50 ms with 5,000 processes under `--all`).
//!
//! `cargo bench -p profiler --bench top_refresh` (root: it loads BPF programs); environment:
//! `PROCESSES` (default 5000), `REFRESHES` (default 10).
//!
//! PROCESSES forked children each make a close(dup(0)) call every 100 ms. Under --all the kernel
//! keeps no per-process counters (rows per syscall); with --pid PARENT its running children are
//! named (at most 128 running processes can be, which the profiler says): a row per process and
//! syscall.
//! The release `profiler` binary runs each for 2 and for 2 + REFRESHES intervals of 500 ms; the
//! difference of its CPU time (user + system, from wait4's rusage) over REFRESHES is one
//! refresh's cost, start-up and detach cancelled out. `attach --all --interval 500ms` (one
//! snapshot and a per-syscall table per interval, and attach's polling every 20 ms) is measured
//! the same way in the same run: the peer path that reads the same counters.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

mod busy;

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("top_refresh: needs root (loads BPF programs); skipped");
        return;
    }
    let processes: usize = env("PROCESSES", 5000);
    let refreshes: u64 = env("REFRESHES", 10);
    let profiler =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/profiler");
    assert!(
        profiler.is_file(),
        "build it first: cargo build --release -p profiler ({})",
        profiler.display()
    );
    let children = busy::Children::spawn(processes, Duration::from_millis(100));
    std::thread::sleep(Duration::from_secs(1));
    let cpu = |args: &[&str], n: u64| -> Duration {
        let mut command = Command::new(&profiler);
        command.args(args);
        let n = n.to_string();
        if args[0] == "top" {
            command.args(["-n", &n]);
        } else {
            // attach stops on --duration: n intervals and a little.
            command.args([
                "--duration",
                &format!("{}ms", n.parse::<u64>().unwrap() * 500 + 250),
            ]);
        }
        rusage_of(command.stdout(Stdio::null()).stderr(Stdio::null()))
    };
    let me = std::process::id().to_string();
    let all = ["top", "--all", "--batch", "--interval", "500ms"];
    let tracked = [
        "top",
        "--pid",
        &me,
        "--batch",
        "--group",
        "process",
        "--interval",
        "500ms",
    ];
    let attach = ["attach", "--all", "--interval", "500ms"];
    let per = |args: &[&str]| {
        let short = cpu(args, 2);
        let long = cpu(args, 2 + refreshes);
        long.saturating_sub(short) / u32::try_from(refreshes).unwrap_or(1)
    };
    let peer = per(&attach);
    println!(
        "top_refresh: {processes} processes, {refreshes} refreshes (ms of the profiler's CPU per refresh; target < 50 ms)"
    );
    for (what, args) in [
        ("top --all (rows per syscall)", &all[..]),
        (
            "top --pid PARENT --group process (a row per process: 128 processes named, the most that can be)",
            &tracked[..],
        ),
    ] {
        let cost = per(args);
        println!(
            "  {what}: {:.1} ms, {:.2}x the peer",
            cost.as_secs_f64() * 1e3,
            cost.as_secs_f64() / peer.as_secs_f64().max(1e-9)
        );
    }
    println!(
        "  peer, attach --all --interval (a snapshot and a table per interval, polling every 20 ms): {:.1} ms",
        peer.as_secs_f64() * 1e3
    );
    drop(children);
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `command` to its end; its CPU time (user + system).
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its rusage"
)]
fn rusage_of(command: &mut Command) -> Duration {
    let child = command.spawn().expect("starting the profiler");
    let mut status = 0;
    // SAFETY: rusage is plain data; the pid is our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    // SAFETY: as above.
    unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
