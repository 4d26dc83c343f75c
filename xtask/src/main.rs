//! `cargo xtask setup | build-ebpf | run | test | package | test-kernels`: how syscall-profiler
//! is built, run, tested and packaged.

mod guest;
mod image;
mod kernels;
mod package;

use std::{
    env,
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
};

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};

/// The bpf-linker release that works with the preinstalled nightly; `cargo xtask setup` builds it
/// against the nightly's libLLVM (the recipe: ../shared/toolchain/README.md, outside the repo).
const BPF_LINKER_VERSION: &str = "0.13.0";
const NIGHTLY: &str = "nightly";
/// Debian packages the test suite drives: load generators, peers and real consumers of exports.
const TEST_PACKAGES: &[(&str, &str)] = &[
    ("wrk", "wrk"),
    ("ab", "apache2-utils"),
    ("nginx", "nginx-light"),
    ("bpftrace", "bpftrace"),
    ("strace", "strace"),
    ("promtool", "prometheus"),
    ("chromium", "chromium"),
    // Real containers (profiler/tests/containers.rs): podman with runc, as this machine kind
    // needs (crun refuses a hybrid cgroup layout).
    ("podman", "podman"),
    ("runc", "runc"),
    // The containers' rootfs (and virtme-ng's guest init): a static busybox at /bin/busybox.
    ("busybox", "busybox-static"),
    // `go tool pprof` reads --export-pprof's profiles (profiler/tests/export.rs).
    ("go", "golang-go"),
    // A real terminal for `profiler top` (profiler/tests/top.rs).
    ("tmux", "tmux"),
];

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, run and test syscall-profiler")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what building the kernel programs needs (idempotent; says what it did).
    Setup {
        /// Also install the Debian packages the test suite uses.
        #[arg(long)]
        test_deps: bool,
    },
    /// Build the kernel programs alone and print where the object is.
    BuildEbpf,
    /// Build everything (release) and run `profiler ARGS` as root; no ARGS runs the default
    /// experiment (`profiler run`).
    Run {
        /// Arguments for `profiler`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The whole suite: formatting, lints, unit tests, the BPF tests against the running kernel,
    /// then the kernel matrix (6.1, 6.12, 6.1-rt and a locked-down 6.12, booted in qemu).
    Test {
        /// Skip the kernel matrix (the host kernel only: a quicker run while developing).
        #[arg(long)]
        no_kernels: bool,
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Build an OCI image of the profiler (from the package's binary and its libraries, no
    /// registry) into podman's store and target/image/, and check it serves from a container.
    Image,
    /// The Debian package (cargo-deb): binary, man pages, completions, systemd unit; checked
    /// with lintian and an install with dpkg into a directory of its own.
    Package,
    /// The kernel matrix alone: boots each kernel in qemu (virtme-ng) and runs the real-kernel
    /// tests, `profiler attach` and `profiler run` inside it.
    TestKernels {
        /// Only these kernels of the matrix (6.1, 6.12, 6.1-rt, 6.12-lockdown); all by default.
        #[arg(long = "kernel", value_delimiter = ',')]
        kernels: Vec<String>,
    },
    /// Inside a guest of the kernel matrix: the steps it runs there.
    #[command(hide = true)]
    GuestSuite {
        #[arg(long)]
        label: String,
        #[arg(long)]
        kernel_tests: PathBuf,
        #[arg(long)]
        c2c_tests: PathBuf,
        #[arg(long)]
        fault_tests: PathBuf,
        #[arg(long)]
        hosts_tests: PathBuf,
        #[arg(long)]
        differential_tests: PathBuf,
        #[arg(long)]
        profiler: PathBuf,
    },
    /// The guest suite's workload: failing close(-1) calls in this process and its children.
    #[command(hide = true)]
    Closer {
        #[arg(long)]
        closes: u64,
        #[arg(long)]
        children: u64,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            let chain: Vec<String> = error.chain().map(ToString::to_string).collect();
            eprintln!("Error: {}", chain.join(": "));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Task::Setup { test_deps } => {
            setup()?;
            if test_deps {
                install_test_packages()?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Task::BuildEbpf => {
            setup()?;
            build_ebpf()?;
            Ok(ExitCode::SUCCESS)
        }
        Task::Run { args } => {
            setup()?;
            cargo(&["build", "--release", "-p", "profiler", "-p", "servers"])?;
            let profiler = root().join("target/release/profiler");
            let args = if args.is_empty() {
                vec!["run".to_owned()]
            } else {
                args
            };
            run_as_root(&profiler, &args)
        }
        Task::Test { no_kernels, args } => {
            require_root("the test suite loads eBPF programs into the kernel")?;
            private_tracefs()?;
            setup()?;
            install_test_packages()?;
            fmt_check()?;
            cargo(&["clippy", "--all-targets", "--", "-D", "warnings"])?;
            let mut test = vec!["test".to_owned(), "--no-fail-fast".to_owned()];
            test.extend(args);
            let podman = podman_runs();
            if let Err(why) = &podman {
                // Counted as skipped, and said so: never as passed.
                eprintln!(
                    "skipped: the container tests (podman cannot run a container here: {why})"
                );
                if !test.iter().any(|a| a == "--") {
                    test.push("--".to_owned());
                }
                test.extend(["--skip".to_owned(), "container".to_owned()]);
            }
            let refs: Vec<&str> = test.iter().map(String::as_str).collect();
            // The matrix runs even when the host suite failed: both results are worth seeing.
            let host = cargo(&refs);
            // The package, as a user installs it: built, linted, installed into a directory.
            // And the image built from it, serving from a container, where podman runs.
            let host = host.and_then(|()| {
                let deb = package::build()?;
                package::check(&deb)?;
                if podman.is_ok() {
                    image::check(&image::build(&deb)?)?;
                }
                Ok(())
            });
            let matrix = if no_kernels {
                Ok(())
            } else {
                kernels::GuestBinaries::build()
                    .and_then(|binaries| kernels::run_matrix(&[], &binaries))
            };
            host.and(matrix)?;
            Ok(ExitCode::SUCCESS)
        }
        Task::Image => {
            require_root("podman imports the image into root's store")?;
            setup()?;
            apt_install(
                &TEST_PACKAGES
                    .iter()
                    .filter(|(program, package)| {
                        ["podman", "runc"].contains(package) && !on_path(program)
                    })
                    .map(|(_, package)| *package)
                    .collect::<Vec<_>>(),
            )?;
            let deb = package::build()?;
            package::check(&deb)?;
            let tag = image::build(&deb)?;
            private_tracefs()?;
            image::check(&tag)?;
            println!("{tag}");
            Ok(ExitCode::SUCCESS)
        }
        Task::Package => {
            setup()?;
            let deb = package::build()?;
            package::check(&deb)?;
            println!("{}", deb.display());
            Ok(ExitCode::SUCCESS)
        }
        Task::TestKernels { kernels: selected } => {
            require_root("the kernel matrix loads eBPF programs into each guest kernel")?;
            private_tracefs()?;
            setup()?;
            let binaries = kernels::GuestBinaries::build()?;
            kernels::run_matrix(&selected, &binaries)?;
            Ok(ExitCode::SUCCESS)
        }
        Task::GuestSuite {
            label,
            kernel_tests,
            c2c_tests,
            fault_tests,
            hosts_tests,
            differential_tests,
            profiler,
        } => {
            // A locked-down guest is where the profiler's own handling of tracefs is tested.
            if !label.ends_with("-lockdown") {
                private_tracefs()?;
            }
            guest::Suite {
                label,
                kernel_tests,
                c2c_tests,
                fault_tests,
                hosts_tests,
                differential_tests,
                profiler,
            }
            .run()?;
            Ok(ExitCode::SUCCESS)
        }
        Task::Closer { closes, children } => {
            guest::closer(closes, children)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The tests load programs in their own process and need tracefs; where it is not mounted,
/// the suite runs in a mount namespace of its own (every mount private, so nothing propagates
/// back) with tracefs mounted there: the machine's mount table is left as it was. Called while
/// xtask has one thread, so every process it starts inherits the namespace.
fn private_tracefs() -> Result<()> {
    const TRACEFS: &str = "/sys/kernel/tracing";
    if Path::new(TRACEFS).join("events").exists() {
        return Ok(());
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL in a constant");
    let (root, target, fstype) = (c("/"), c(TRACEFS), c("tracefs"));
    // SAFETY: unshare and mount get valid NUL-terminated strings or null pointers.
    let failed = unsafe {
        libc::unshare(libc::CLONE_NEWNS) != 0
            || libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            || libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            ) != 0
    };
    if failed {
        bail!(
            "mounting tracefs in a private mount namespace failed ({})",
            std::io::Error::last_os_error()
        );
    }
    eprintln!("setup: tracefs mounted at {TRACEFS} in the suite's own mount namespace");
    Ok(())
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc_geteuid() == 0 }
}

/// SIGKILL to every process of the group `pgid`.
fn kill_group(pgid: u32) {
    const SIGKILL: i32 = 9;
    // SAFETY: kill has no memory preconditions; a group that is gone gives ESRCH.
    unsafe {
        libc_kill(-(pgid as i32), SIGKILL);
    }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}

fn require_root(why: &str) -> Result<()> {
    if !is_root() {
        bail!("{why}, which needs root: run `sudo -E cargo xtask ...` (or as root)");
    }
    Ok(())
}

/// Runs `cargo ARGS` in the workspace root and fails if it fails.
fn cargo(args: &[&str]) -> Result<()> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    // Without what `cargo run` set for this xtask binary (CARGO_MANIFEST_DIR, CARGO_PKG_*...):
    // build scripts that watch such a variable (ring's watches CARGO_MANIFEST_DIR) saw it
    // change between `cargo xtask ...` and a plain `cargo build`, and ring, rustls and the
    // profiler were rebuilt at each switch (1.5 minutes).
    for (name, _) in env::vars_os() {
        let name_str = name.to_string_lossy();
        if name_str.starts_with("CARGO_PKG_")
            || matches!(
                name_str.as_ref(),
                "CARGO_MANIFEST_DIR"
                    | "CARGO_MANIFEST_PATH"
                    | "CARGO_CRATE_NAME"
                    | "CARGO_BIN_NAME"
                    | "CARGO_PRIMARY_PACKAGE"
                    | "CARGO_RUSTC_CURRENT_DIR"
            )
        {
            command.env_remove(&name);
        }
    }
    let status = command
        .args(args)
        .current_dir(root())
        .status()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// `cargo fmt --check` with the nightly's rustfmt: rustfmt.toml groups imports (std, external,
/// crate), which stable rustfmt does not do. `cargo +nightly fmt --all` formats the same way.
fn fmt_check() -> Result<()> {
    let status = Command::new("rustup")
        .args(["run", NIGHTLY, "cargo", "fmt", "--all", "--check"])
        .current_dir(root())
        .status()
        .context("running cargo fmt (nightly)")?;
    if !status.success() {
        bail!(
            "`cargo +{NIGHTLY} fmt --all --check` failed ({status}): run `cargo +{NIGHTLY} fmt --all`"
        );
    }
    Ok(())
}

/// Runs `cargo ARGS` in the workspace root and returns its standard output.
fn cargo_output(args: &[&str]) -> Result<String> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args(args)
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("`cargo {}` failed ({})", args.join(" "), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Installs only what is missing: the nightly's rust-src, and bpf-linker built against the
/// nightly's own libLLVM.
fn setup() -> Result<()> {
    let version = output("rustup", &["run", NIGHTLY, "rustc", "-vV"]).with_context(|| {
        format!("the `{NIGHTLY}` Rust toolchain is missing: install it with `rustup toolchain install {NIGHTLY}` (the eBPF crate needs it)")
    })?;
    let sysroot = PathBuf::from(
        output("rustup", &["run", NIGHTLY, "rustc", "--print", "sysroot"])
            .context("nightly sysroot")?
            .trim(),
    );
    let added_src = ensure_rust_src(&sysroot)?;
    if output("rustup", &["run", NIGHTLY, "rustfmt", "--version"]).is_none() {
        eprintln!("setup: adding rustfmt to the {NIGHTLY} toolchain (rustfmt.toml groups imports)");
        let added = Command::new("rustup")
            .args(["component", "add", "rustfmt", "--toolchain", NIGHTLY])
            .status()
            .is_ok_and(|s| s.success());
        if !added {
            bail!(
                "could not add rustfmt to the {NIGHTLY} toolchain: run `rustup component add rustfmt --toolchain {NIGHTLY}`"
            );
        }
    }
    let built_linker = ensure_bpf_linker(&version, &sysroot)?;
    if !added_src && !built_linker {
        eprintln!(
            "setup: nothing to do (nightly with rust-src, bpf-linker {BPF_LINKER_VERSION} present)"
        );
    }
    Ok(())
}

/// Returns whether it installed anything.
fn ensure_rust_src(sysroot: &Path) -> Result<bool> {
    let library = sysroot.join("lib/rustlib/src/rust/library/core");
    if library.is_dir() {
        return Ok(false);
    }
    eprintln!("setup: adding rust-src to the {NIGHTLY} toolchain");
    let added = Command::new("rustup")
        .args(["component", "add", "rust-src", "--toolchain", NIGHTLY])
        .status()
        .is_ok_and(|s| s.success());
    if added && library.is_dir() {
        return Ok(true);
    }
    // The measured fallback: the same component as a tarball in the team's shared folder.
    let tarball = root().join("../shared/toolchain/rust-src-nightly.tar.xz");
    if !tarball.is_file() {
        bail!(
            "rust-src could not be added to {NIGHTLY} and {} is missing",
            tarball.display()
        );
    }
    eprintln!(
        "setup: rustup could not add rust-src; unpacking {}",
        tarball.display()
    );
    let dest = sysroot.join("lib/rustlib");
    let status = Command::new("tar")
        .arg("-xJf")
        .arg(&tarball)
        .arg("-C")
        .arg(&dest)
        .status()
        .context("running tar")?;
    if !status.success() || !library.is_dir() {
        bail!(
            "unpacking {} into {} failed",
            tarball.display(),
            dest.display()
        );
    }
    Ok(true)
}

/// Returns whether it installed anything.
fn ensure_bpf_linker(rustc_version: &str, sysroot: &Path) -> Result<bool> {
    let installed = output("rustup", &["run", NIGHTLY, "bpf-linker", "--version"]);
    if installed
        .as_deref()
        .is_some_and(|v| v.contains(BPF_LINKER_VERSION))
    {
        return Ok(false);
    }
    // "LLVM version: 22.1.4" → 22; the library is the nightly's own libLLVM.so.22.1-rust-...
    let llvm_major = rustc_version
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version:"))
        .and_then(|v| v.trim().split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .context("`rustc +nightly -vV` does not say its LLVM version")?;
    let lib_dir = sysroot.join("lib");
    let library = fs::read_dir(&lib_dir)
        .with_context(|| format!("reading {}", lib_dir.display()))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with(&format!("libLLVM.so.{llvm_major}."))
                || n.starts_with(&format!("libLLVM-{llvm_major}"))
        })
        .min_by_key(|n| usize::from(!n.starts_with("libLLVM.so.")))
        .with_context(|| format!("no libLLVM for LLVM {llvm_major} in {}", lib_dir.display()))?;
    let prefix = cargo_home().join("bpf-linker-llvm");
    fs::create_dir_all(prefix.join("lib"))?;
    let link = prefix.join("lib/libLLVM.so");
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(lib_dir.join(&library), &link)
        .with_context(|| format!("linking {}", link.display()))?;
    eprintln!(
        "setup: building bpf-linker {BPF_LINKER_VERSION} against the {NIGHTLY} toolchain's {library} (about a minute)"
    );
    // rpath: bpf-linker then finds the nightly's libLLVM without rustup's LD_LIBRARY_PATH.
    let rustflags = format!("-C link-arg=-Wl,-rpath,{}", lib_dir.display());
    let status = Command::new("cargo")
        .args(["install", &format!("bpf-linker@{BPF_LINKER_VERSION}")])
        .args([
            "--no-default-features",
            "--features",
            &format!("llvm-{llvm_major}"),
        ])
        .env("LLVM_PREFIX", &prefix)
        .env("RUSTFLAGS", rustflags)
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .context("running cargo install bpf-linker")?;
    if !status.success() {
        bail!(
            "`cargo install bpf-linker@{BPF_LINKER_VERSION}` failed ({status}); bpf-linker offers llvm-21..23 and the nightly has LLVM {llvm_major}"
        );
    }
    if output("rustup", &["run", NIGHTLY, "bpf-linker", "--version"]).is_none() {
        bail!(
            "bpf-linker was installed but does not run; check `rustup run {NIGHTLY} bpf-linker --version`"
        );
    }
    Ok(true)
}

fn cargo_home() -> PathBuf {
    env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"))
}

fn on_path(program: &str) -> bool {
    which(program).is_some() || Path::new("/usr/sbin").join(program).is_file()
}

/// `program`'s path in a folder of PATH.
fn which(program: &str) -> Option<PathBuf> {
    env::split_paths(&env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Waits for `child` at most `timeout`. A child still running then is killed, after
/// `before_kill` (which can record what it was doing), and `None` is returned.
fn wait_or_kill(
    child: &mut std::process::Child,
    timeout: std::time::Duration,
    before_kill: impl FnOnce(),
) -> Result<Option<std::process::ExitStatus>> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if std::time::Instant::now() > deadline {
            before_kill();
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn install_test_packages() -> Result<()> {
    let missing: Vec<&str> = TEST_PACKAGES
        .iter()
        .filter(|(program, _)| !on_path(program))
        .map(|(_, package)| *package)
        .collect();
    apt_install(&missing)
}

/// `apt-get install` of `packages` (after an update), if there are any.
fn apt_install(packages: &[&str]) -> Result<()> {
    apt_install_from(None, packages)
}

/// `apt-get install` of `packages`, from the suite `release` (e.g. bookworm-backports) if given.
fn apt_install_from(release: Option<&str>, packages: &[&str]) -> Result<()> {
    if packages.is_empty() {
        return Ok(());
    }
    require_root(&format!("installing {}", packages.join(" ")))?;
    let from: Vec<&str> = release.map(|r| vec!["-t", r]).unwrap_or_default();
    eprintln!(
        "setup: apt-get install {}{}",
        from.iter().fold(String::new(), |all, a| all + a + " "),
        packages.join(" ")
    );
    let update = Command::new("apt-get")
        .args(["update", "-q"])
        .status()
        .context("running apt-get")?;
    if !update.success() {
        bail!("apt-get update failed ({update})");
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&from)
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("running apt-get install")?;
    if !status.success() {
        bail!("apt-get install {} failed ({status})", packages.join(" "));
    }
    Ok(())
}

fn build_ebpf() -> Result<()> {
    // The same build as profiler/build.rs, visible on its own.
    cargo(&["build", "-p", "profiler"])?;
    let out = root().join("target/debug/build");
    let dir = fs::read_dir(&out)?
        .flatten()
        .map(|e| e.path().join("out"))
        .filter(|p| p.join("profiler-ebpf.o").is_file())
        .max_by_key(|p| {
            fs::metadata(p.join("profiler-ebpf.o"))
                .and_then(|m| m.modified())
                .ok()
        })
        .context("profiler-ebpf.o not found after the build")?;
    for object in [
        "profiler-ebpf.o",
        "profiler-ebpf-probe.o",
        "profiler-ebpf-bench.o",
    ] {
        println!("{}", dir.join(object).display());
    }
    Ok(())
}

/// Runs `program args` with root privileges: directly as root, else through sudo.
fn run_as_root(program: &Path, args: &[String]) -> Result<ExitCode> {
    let mut command = if is_root() {
        Command::new(program)
    } else if on_path("sudo") {
        eprintln!("profiler needs root to load eBPF programs: running it through sudo");
        let mut c = Command::new("sudo");
        c.arg("--preserve-env=PATH").arg(program);
        c
    } else {
        bail!(
            "profiler needs root to load eBPF programs and sudo is not installed: run `cargo xtask run` as root"
        );
    };
    let status = command
        .args(args.iter().map(OsString::from))
        .status()
        .context("running profiler")?;
    Ok(ExitCode::from(
        u8::try_from(status.code().unwrap_or(1)).unwrap_or(1),
    ))
}

/// Whether podman runs a container here as the tests run theirs (runc, the cgroupfs manager,
/// ulimits this sandbox allows): a busybox rootfs given with `--rootfs`, no image needed.
/// The first line of what went wrong otherwise.
fn podman_runs() -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("xtask-podman-probe-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let made = fs::create_dir_all(dir.join("bin"))
        .and_then(|()| fs::copy("/bin/busybox", dir.join("bin/busybox")).map(drop));
    if let Err(e) = made {
        return Err(format!("no rootfs of /bin/busybox: {e}"));
    }
    let out = Command::new("podman")
        .args([
            "--runtime",
            "runc",
            "--cgroup-manager",
            "cgroupfs",
            "run",
            "--rm",
        ])
        .args([
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
        ])
        .args(["--network", "none", "--rootfs"])
        .arg(&dir)
        .args(["/bin/busybox", "true"])
        .output();
    let _ = fs::remove_dir_all(&dir);
    match out {
        Err(e) => Err(format!("podman: {e}")),
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("podman run failed")
            .to_owned()),
    }
}
