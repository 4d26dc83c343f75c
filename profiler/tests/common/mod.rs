//! What the integration tests of `profiler` share: one kernel test at a time, scratch
//! directories, the `profiler` binary.
#![allow(dead_code)] // each test binary uses its own part of this

pub mod otlp;
pub mod podman;
pub mod python;

use std::{
    path::PathBuf,
    process::Command,
    sync::{Mutex, MutexGuard},
    time::{Duration, Instant},
};

/// Tests that load BPF programs or time things run one at a time within a test binary: timing
/// tests must not share two CPUs with a busy sibling (cargo runs the binaries one after another).
static KERNEL: Mutex<()> = Mutex::new(());

/// Holds the one-at-a-time lock for the caller's test (a panicking test does not poison it).
pub fn serial() -> MutexGuard<'static, ()> {
    KERNEL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fresh empty directory named `{binary}-{name}-{pid}` under cargo's per-test scratch dir, or
/// under the temporary directory where that is read-only (the kernel matrix's guests see the
/// host's tree read-only).
pub fn scratch(binary: &str, name: &str) -> PathBuf {
    let leaf = format!("{binary}-{name}-{}", std::process::id());
    for base in [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        std::env::temp_dir().join("profiler-tests"),
    ] {
        let dir = base.join(&leaf);
        let _ = std::fs::remove_dir_all(&dir);
        if std::fs::create_dir_all(&dir).is_ok() {
            return dir;
        }
    }
    panic!("no writable scratch directory for {leaf}");
}

/// Waits until process `pid` catches `signal` (its handler is installed), at most `limit`.
pub fn wait_until_catching(pid: u32, signal: i32, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let caught = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("SigCgt:"))
                    .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            })
            .is_some_and(|mask| mask & (1 << (signal - 1)) != 0);
        if caught {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} installed no handler for signal {signal} within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The JSON file at `path`, which must have been written.
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("{} not written: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The `profiler` binary this test build made.
pub fn profiler() -> Command {
    Command::new(env!("CARGO_BIN_EXE_profiler"))
}

/// Waits for `child` to exit, killing it and failing the test after `limit`.
pub fn wait_for(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    wait_or_kill(child, limit).unwrap_or_else(|| panic!("{what} did not exit within {limit:?}"))
}

/// Waits for `child` to exit; after `limit`, kills and reaps it and gives `None`, for a caller
/// that says more than [`wait_for`] (what the child printed).
pub fn wait_or_kill(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `tests/helpers/close32.c` built into `dir` as a 32-bit static program without libc (`cc -m32
/// -nostdlib`, which needs no 32-bit libraries installed): 1000 close(-1) calls and one
/// socketcall accept.
pub fn close32(dir: &std::path::Path) -> PathBuf {
    let binary = dir.join("close32");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/close32.c");
    let status = Command::new("cc")
        .args([
            "-m32",
            "-O1",
            "-nostdlib",
            "-static",
            "-ffreestanding",
            "-fno-pic",
        ])
        .args(["-DCLOSES=1000", "-o"])
        .arg(&binary)
        .arg(source)
        .status()
        .expect("running cc for the 32-bit helper");
    assert!(status.success(), "cc -m32 failed to build {source}");
    binary
}

/// tests/helpers/workloads.c built into `dir` with cc and `flags`.
pub fn build_workloads(dir: &std::path::Path, flags: &[&str]) -> PathBuf {
    let workloads = dir.join("workloads");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/workloads.c");
    let status = Command::new("cc")
        .args(["-O1", "-pthread"])
        .args(flags)
        .arg("-o")
        .arg(&workloads)
        .arg(source)
        .status()
        .expect("running cc");
    assert!(status.success(), "cc failed to build {source}");
    workloads
}

/// Waits for the profiler's "Tracing"/"listening" line on stderr, opens the gate, waits for the
/// workload (`wait_workload`), and for the profiler to end (attach ends when its processes have,
/// or when `wait_workload` signals it). The line is waited for at most `limit`.
pub fn open_gate_once_tracing(
    mut profiler: std::process::Child,
    gate: &std::path::Path,
    limit: Duration,
    wait_workload: impl FnOnce(),
) -> std::process::Output {
    let mut stderr = profiler.stderr.take().unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + limit;
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("Tracing") && Instant::now() < deadline {
        if std::io::Read::read(&mut stderr, &mut byte).unwrap_or(0) == 0 {
            break;
        }
        seen.push(byte[0]);
    }
    std::fs::write(gate, "").unwrap();
    wait_workload();
    let mut out = profiler.wait_with_output().unwrap();
    seen.extend(out.stderr);
    let _ = std::io::Read::read_to_end(&mut stderr, &mut seen);
    out.stderr = seen;
    out
}

/// The path of `tool`, or a panic naming the Debian package that has it.
pub fn require_tool(tool: &str, package: &str) -> PathBuf {
    let path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(tool))
        .find(|p| p.is_file());
    path.unwrap_or_else(|| panic!("`{tool}` is not installed: apt-get install -y {package}"))
}

/// `go tool pprof ARGS PROFILE` (Debian's golang-go): what it printed.
pub fn go_pprof(args: &[&str], profile: &std::path::Path) -> String {
    let go = require_tool("go", "golang-go");
    let home = scratch("go", "home");
    let out = std::process::Command::new(go)
        .args(["tool", "pprof"])
        .args(args)
        .arg(profile)
        // go wants a writable cache and home, and never a network fetch.
        .env("HOME", &home)
        .env("GOCACHE", home.join("cache"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
