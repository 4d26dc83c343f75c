//! What the integration tests of `profiler` share: one kernel test at a time, scratch
//! directories, the `profiler` binary.
#![allow(dead_code)] // each test binary uses its own part of this

use std::{
    path::{Path, PathBuf},
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

/// A fresh empty directory under cargo's per-test scratch dir, named `{binary}-{name}-{pid}`.
pub fn scratch(binary: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{binary}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
