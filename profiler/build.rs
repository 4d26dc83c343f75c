//! Builds the kernel programs (`profiler-ebpf`) for `bpfel-unknown-none` with the nightly
//! toolchain and bpf-linker, and leaves its objects in `OUT_DIR` for `include_bytes_aligned!`:
//! `profiler-ebpf.o` (the profiler), `profiler-ebpf-probe.o` (the loader's context probe) and
//! `profiler-ebpf-bench.o` (`profiler bench overhead`), one per `[[bin]]` of profiler-ebpf.
//!
//! This is aya-build's recipe with one change: `-C target-cpu=v3`, so the fork handler can use
//! BPF's atomic fetch-add (and the hot path gets 32-bit ALU and jump instructions).

use std::{
    env,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
};

const TOOLCHAIN: &str = "nightly";
const TARGET: &str = "bpfel-unknown-none";
/// Each `[[bin]]` of profiler-ebpf and the object it becomes.
const OBJECTS: [(&str, &str); 3] = [
    ("profiler", "profiler-ebpf.o"),
    ("probe", "profiler-ebpf-probe.o"),
    ("bench", "profiler-ebpf-bench.o"),
];
const SETUP_HINT: &str = "run `cargo xtask setup` once, then build again";

fn main() -> ExitCode {
    match build() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            // One line the user can act on; cargo prints it as `error: ...`.
            println!("cargo::error={message}");
            ExitCode::FAILURE
        }
    }
}

fn build() -> Result<(), String> {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest_dir.parent().ok_or("no workspace root")?;
    for dir in ["profiler-ebpf", "profiler-common"] {
        println!("cargo::rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo::rerun-if-env-changed=PROFILER_EBPF_OBJECTS");
    let out_dir = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);

    // Already built objects (e.g. for cross builds): a directory with the three files, named as
    // in OUT_DIR; otherwise build them here.
    if let Some(prebuilt) = env::var_os("PROFILER_EBPF_OBJECTS") {
        for (_, object) in OBJECTS {
            let from = Path::new(&prebuilt).join(object);
            std::fs::copy(&from, out_dir.join(object))
                .map_err(|e| format!("PROFILER_EBPF_OBJECTS: {}: {e}", from.display()))?;
        }
        return Ok(());
    }

    check_toolchain()?;

    let arch = env::var("CARGO_CFG_TARGET_ARCH").map_err(|e| e.to_string())?;
    let rustflags = [
        format!("--cfg=bpf_target_arch=\"{arch}\""),
        "-Cdebuginfo=2".to_owned(),
        "-Clink-arg=--btf".to_owned(),
        "-Ctarget-cpu=v3".to_owned(),
    ]
    .join("\x1f");
    let target_dir = out_dir.join("ebpf-target");
    let output = Command::new("rustup")
        .args([
            "run",
            TOOLCHAIN,
            "cargo",
            "build",
            "--package",
            "profiler-ebpf",
            "--bins",
        ])
        .args([
            "--release",
            "--target",
            TARGET,
            "-Z",
            "build-std=core",
            "--target-dir",
        ])
        .arg(&target_dir)
        .current_dir(root)
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .env_remove("RUSTC")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run rustup to build the eBPF programs ({e}): {SETUP_HINT}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        for line in stderr.lines() {
            println!("cargo::warning={line}");
        }
        let first_error = stderr
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or("see the warnings above");
        return Err(format!("building profiler-ebpf failed: {first_error}"));
    }
    for (bin, object) in OBJECTS {
        let built = target_dir.join(TARGET).join("release").join(bin);
        let object = out_dir.join(object);
        std::fs::copy(&built, &object).map_err(|e| {
            format!(
                "cannot copy {} to {}: {e}",
                built.display(),
                object.display()
            )
        })?;
    }
    Ok(())
}

/// Fails with one line naming `cargo xtask setup` when a piece of the eBPF toolchain is missing.
fn check_toolchain() -> Result<(), String> {
    let sysroot = Command::new("rustup")
        .args(["run", TOOLCHAIN, "rustc", "--print", "sysroot"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .ok_or_else(|| format!("the {TOOLCHAIN} Rust toolchain is missing: {SETUP_HINT}"))?;
    if !sysroot.join("lib/rustlib/src/rust/library/core").is_dir() {
        return Err(format!(
            "rust-src is missing from the {TOOLCHAIN} toolchain: {SETUP_HINT}"
        ));
    }
    let linker_ok = Command::new("rustup")
        .args(["run", TOOLCHAIN, "bpf-linker", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !linker_ok {
        return Err(format!(
            "bpf-linker is missing or cannot load LLVM: {SETUP_HINT}"
        ));
    }
    Ok(())
}
