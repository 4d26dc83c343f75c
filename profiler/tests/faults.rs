//! Faults and hostile input, end to end through the `profiler` binary: a closed stdout, children
//! that outlive the command, pids that are not processes. Each test failed before its fix.
//!
//! These load BPF programs (root) and run one at a time.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Mutex, MutexGuard},
    time::{Duration, Instant},
};

static KERNEL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    KERNEL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fresh empty directory under cargo's per-test scratch dir.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn profiler() -> Command {
    Command::new(env!("CARGO_BIN_EXE_profiler"))
}

/// Waits for `child` to exit, failing the test after `limit`.
fn wait_for(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_json(path: &Path) -> serde_json::Value {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("{} not written: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn calls_of(json: &serde_json::Value, syscall: &str) -> u64 {
    json["measurements"][0]["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == syscall)
        .unwrap_or_else(|| panic!("no {syscall} in {json}"))["calls"]
        .as_u64()
        .unwrap()
}

/// `profiler attach --interval 100ms --export-json x -- CMD | head -1` used to panic with
/// "failed printing to stdout: Broken pipe", write no JSON and leave CMD running untraced.
#[test]
fn a_closed_stdout_stops_the_printing_but_not_the_tracing_or_the_exports() {
    let _serial = serial();
    let dir = scratch("closed-stdout");
    let json = dir.join("pipe.json");
    let mut attach = profiler()
        .args(["attach", "--syscalls", "close", "--interval", "100ms"])
        .arg("--export-json")
        .arg(&json)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "for i in $(seq 30); do cat /dev/null; sleep 0.05; done; exit 3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the first line, as `head -1` does, then close the pipe.
    let mut first = String::new();
    BufReader::new(attach.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("--- last"), "first line: {first:?}");
    let status = wait_for(&mut attach, Duration::from_secs(60), "attach");
    let stderr = std::io::read_to_string(attach.stderr.take().unwrap()).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.code(), Some(3), "the command's own status: {stderr}");
    let json = read_json(&json);
    assert_eq!(
        json["metadata"]["settings"]["stopped"],
        "command exited with status 3"
    );
    assert!(
        calls_of(&json, "close") >= 30,
        "every cat closes at least one file, traced to the end: {json}"
    );
}

/// `profiler run` and `profiler bench` print once at the end; a reader that is gone by then
/// must not turn a finished measurement into a panic (exit 101).
#[test]
fn the_reports_of_run_and_bench_survive_a_reader_that_left() {
    let _serial = serial();
    for args in [
        &[
            "bench",
            "overhead",
            "--rounds",
            "1",
            "--iterations",
            "2000",
            "--no-bpftrace",
        ][..],
        &["c2c", "--round-trips", "2000", "--no-syscalls"][..],
    ] {
        let mut child = profiler()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let status = wait_for(&mut child, Duration::from_secs(120), args[0]);
        let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
        assert!(
            status.success() && !stderr.contains("panicked"),
            "{args:?}: {status} {stderr}"
        );
    }
}
