//! The kernel matrix: boots each kernel users run (Debian 12's 6.1, the 6.12 LTS, 6.1 PREEMPT_RT,
//! and 6.12 locked down for confidentiality: `MATRIX`) in qemu over this machine's root
//! filesystem with virtme-ng, and runs the guest suite (`xtask guest-suite`, see guest.rs) inside
//! it. The running kernel is tested by the host suite.

use std::{
    fs,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{apt_install, cargo_output, on_path, root, wait_or_kill, which};

/// One kernel flavour of the matrix.
pub struct KernelSpec {
    /// How the matrix names it.
    pub label: &'static str,
    /// The Debian meta-package that installs its newest build.
    package: &'static str,
    /// Whether `uname -r` of an installed image is this flavour.
    matches: fn(&str) -> bool,
    /// Extra kernel command line (a host configuration, such as lockdown); empty for none.
    append: &'static str,
}

/// Debian 12's kernels: its default 6.1, the 6.12 LTS, and 6.1 with PREEMPT_RT; and 6.12 once
/// more, locked down.
pub const MATRIX: &[KernelSpec] = &[
    KernelSpec {
        label: "6.1",
        package: "linux-image-amd64",
        matches: |v| v.starts_with("6.1.") && v.ends_with("-amd64") && !v.ends_with("-rt-amd64"),
        append: "",
    },
    KernelSpec {
        label: "6.12",
        package: "linux-image-6.12-amd64",
        matches: |v| v.starts_with("6.12.") && v.ends_with("-amd64") && !v.ends_with("-rt-amd64"),
        append: "",
    },
    KernelSpec {
        label: "6.1-rt",
        package: "linux-image-rt-amd64",
        matches: |v| v.starts_with("6.1.") && v.ends_with("-rt-amd64"),
        append: "",
    },
    // A host configuration rather than a kernel: the 6.12 kernel locked down for
    // confidentiality, where tracefs and reads of kernel memory are refused. Its guest runs one
    // step (`guest::Suite::lockdown`): what works there, or one clear line.
    KernelSpec {
        label: "6.12-lockdown",
        package: "linux-image-6.12-amd64",
        matches: |v| v.starts_with("6.12.") && v.ends_with("-amd64") && !v.ends_with("-rt-amd64"),
        append: "lockdown=confidentiality",
    },
];

/// A guest may take this long, boot included, before it counts as hung. Under TCG a matrix run
/// took 435 s (6.1), 466 s (6.12) and 807 s (6.1-rt) on one day (2026-12-06), and 557 s, 631 s
/// and over 900 s on a slower one: this kind's speed varies 2-4x. The worst case, every guest
/// hung, plus the host suite (15 min), stays within CI's 90 minutes.
const GUEST_TIMEOUT: Duration = Duration::from_mins(20);

/// How many guests run at once (`PROFILER_GUESTS_AT_ONCE` sets another). One: two TCG guests
/// at once on this kind's 2 CPUs each ran 2-2.5x slower than alone (6.12's host-configuration
/// tests 217 s against 97 s, its differential suite 193 s against about 60; 2026-12-06), which
/// gains almost nothing and makes hung-guest timeouts hard to set.
fn guests_at_once() -> usize {
    std::env::var("PROFILER_GUESTS_AT_ONCE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(1)
}

/// A guest's run time relative to the others (seconds on an idle machine, 2026-12-06), to start
/// the longest first.
fn expected_secs(label: &str) -> u64 {
    match label {
        "6.1-rt" => 807,
        "6.12" => 466,
        "6.1" => 435,
        _ => 15,
    }
}

/// The matrix run's outcome for one kernel.
struct Outcome {
    label: &'static str,
    release: String,
    passed: bool,
    took: Duration,
}

/// Runs the guest suite in every kernel of `selected` (labels; empty = all). The paths are the
/// binaries the guest runs, built on the host.
pub fn run_matrix(selected: &[String], binaries: &GuestBinaries) -> Result<()> {
    let specs: Vec<&KernelSpec> = MATRIX
        .iter()
        .filter(|k| selected.is_empty() || selected.iter().any(|s| s == k.label))
        .collect();
    if specs.is_empty() {
        let labels: Vec<&str> = MATRIX.iter().map(|k| k.label).collect();
        bail!(
            "no kernel of the matrix is named {}: choose from {}",
            selected.join(","),
            labels.join(", ")
        );
    }
    ensure_vm_tools()?;
    let images: Vec<(&KernelSpec, PathBuf, String)> = specs
        .into_iter()
        .map(|spec| ensure_kernel(spec).map(|(image, release)| (spec, image, release)))
        .collect::<Result<_>>()?;
    let kvm = kvm_boots(&images[0].1);
    let vng = vng_path()?;
    let logs = root().join("target/kernel-matrix");
    fs::create_dir_all(&logs)?;
    // The guests run `guests_at_once()` at a time, the longest first (the order of `MATRIX` is
    // not that: 6.1-rt takes the longest, then 6.12). Their lines come interleaved, each
    // prefixed with its kernel; each guest's own log is in `logs`.
    let mut queue: Vec<&(&KernelSpec, PathBuf, String)> = images.iter().collect();
    queue.sort_by_key(|(spec, ..)| std::cmp::Reverse(expected_secs(spec.label)));
    let queue = std::sync::Mutex::new(queue.into_iter());
    let outcomes = std::sync::Mutex::new(Vec::new());
    let errors = std::sync::Mutex::new(Vec::new());
    thread::scope(|scope| {
        for _ in 0..guests_at_once().min(images.len()) {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().expect("queue").next();
                    let Some((spec, image, release)) = next else {
                        return;
                    };
                    eprintln!(
                        "\n== kernel matrix: {} ({release}), {} ==",
                        spec.label,
                        if kvm { "KVM" } else { "TCG" }
                    );
                    let started = Instant::now();
                    let log = logs.join(format!("{}.log", spec.label));
                    match boot_and_run(&vng, image, kvm, binaries, spec, &log) {
                        Ok(passed) => outcomes.lock().expect("outcomes").push(Outcome {
                            label: spec.label,
                            release: release.clone(),
                            passed,
                            took: started.elapsed(),
                        }),
                        Err(e) => errors
                            .lock()
                            .expect("errors")
                            .push(format!("{}: {e:#}", spec.label)),
                    }
                }
            });
        }
    });
    let errors = errors.into_inner().expect("errors");
    if !errors.is_empty() {
        bail!("the kernel matrix could not run: {}", errors.join("; "));
    }
    let mut outcomes = outcomes.into_inner().expect("outcomes");
    outcomes.sort_by_key(|o| MATRIX.iter().position(|k| k.label == o.label));
    eprintln!("\nkernel matrix ({}):", if kvm { "KVM" } else { "TCG" });
    eprintln!(
        "  {:<8} {:<28} {:<6} {:>6}",
        "kernel", "release", "result", "time"
    );
    for o in &outcomes {
        eprintln!(
            "  {:<8} {:<28} {:<6} {:>5}s",
            o.label,
            o.release,
            if o.passed { "pass" } else { "FAIL" },
            o.took.as_secs()
        );
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| o.label)
        .collect();
    if !failed.is_empty() {
        bail!(
            "the guest suite failed on {} (logs in {})",
            failed.join(", "),
            logs.display()
        );
    }
    Ok(())
}

/// What the guest runs, all built on the host and seen by the guest through its root filesystem.
pub struct GuestBinaries {
    /// This xtask binary (runs `guest-suite` and its `closer` workload).
    pub xtask: PathBuf,
    /// profiler/tests/kernel.rs.
    pub kernel_tests: PathBuf,
    /// profiler/tests/c2c.rs (its kernel-timer test).
    pub c2c_tests: PathBuf,
    /// profiler/tests/faults.rs.
    pub fault_tests: PathBuf,
    /// profiler/tests/hosts.rs (32-bit processes, pid namespaces, capabilities, mounts).
    pub hosts_tests: PathBuf,
    /// profiler/tests/differential.rs (every counting path against strace).
    pub differential_tests: PathBuf,
    /// The release profiler (the servers binary sits next to it).
    pub profiler: PathBuf,
}

impl GuestBinaries {
    /// Builds the release binaries and the real-kernel test binaries.
    pub fn build() -> Result<Self> {
        crate::cargo(&["build", "--release", "-p", "profiler", "-p", "servers"])?;
        let json = cargo_output(&[
            "test",
            "-p",
            "profiler",
            "--no-run",
            "--message-format=json",
        ])?;
        let test_binary = |name: &str| -> Result<PathBuf> {
            json.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|m| m["reason"] == "compiler-artifact")
                .filter(|m| m["target"]["name"] == name && m["target"]["kind"][0] == "test")
                .find_map(|m| m["executable"].as_str().map(PathBuf::from))
                .with_context(|| format!("cargo built no test binary {name}"))
        };
        Ok(Self {
            xtask: std::env::current_exe().context("the xtask binary")?,
            kernel_tests: test_binary("kernel")?,
            c2c_tests: test_binary("c2c")?,
            fault_tests: test_binary("faults")?,
            hosts_tests: test_binary("hosts")?,
            differential_tests: test_binary("differential")?,
            profiler: root().join("target/release/profiler"),
        })
    }
}

/// The oldest qemu the matrix has run clean under TCG. Debian 12's own qemu, 7.2, freezes a guest
/// now and then: after the kernel patches a static key back to a NOP (a tracepoint's last program
/// detached), a vCPU keeps executing the stale int3 from its translated code, and the kprobe int3
/// handler, seeing the NOP in memory, re-executes it forever (read off a frozen 6.1 guest with
/// qemu's gdbstub: both vCPUs looping on int3 at do_exit+0x346, memory holding `0f 1f 44 00 00`).
const QEMU_TESTED: (u32, u32) = (10, 0);

/// qemu (new enough, see `QEMU_TESTED`), busybox (virtme-ng's guest init needs it) and virtme-ng
/// itself, installed when missing.
fn ensure_vm_tools() -> Result<()> {
    ensure_qemu()?;
    if !Path::new("/bin/busybox").is_file() && !on_path("busybox") {
        apt_install(&["busybox-static"])?;
    }
    if vng_path().is_err() {
        eprintln!("setup: pip install virtme-ng");
        let pip = |extra: &[&str]| {
            Command::new("python3")
                .args(["-m", "pip", "install", "-q", "virtme-ng"])
                .args(extra)
                .status()
                .is_ok_and(|s| s.success())
        };
        // A Debian python refuses installs outside a venv (PEP 668) unless told otherwise.
        if !pip(&[]) && !pip(&["--break-system-packages"]) {
            bail!("`python3 -m pip install virtme-ng` failed: install virtme-ng (PyPI) by hand");
        }
        vng_path()?;
    }
    Ok(())
}

/// A qemu-system-x86_64 of at least `QEMU_TESTED`: on Debian 12 from bookworm-backports (its
/// source added when missing); elsewhere an older qemu is used with a warning.
fn ensure_qemu() -> Result<()> {
    let version = qemu_version();
    if version.is_some_and(|v| v >= QEMU_TESTED) {
        return Ok(());
    }
    let bookworm = fs::read_to_string("/etc/os-release")
        .is_ok_and(|s| s.lines().any(|l| l == "VERSION_CODENAME=bookworm"));
    if bookworm {
        let list = Path::new("/etc/apt/sources.list.d/bookworm-backports.list");
        if !backports_configured() {
            crate::require_root("adding bookworm-backports")?;
            eprintln!(
                "setup: adding bookworm-backports to apt's sources ({}) for qemu {}.{}",
                list.display(),
                QEMU_TESTED.0,
                QEMU_TESTED.1
            );
            fs::write(
                list,
                "deb http://deb.debian.org/debian bookworm-backports main\n",
            )
            .with_context(|| format!("writing {}", list.display()))?;
        }
        crate::apt_install_from(Some("bookworm-backports"), &["qemu-system-x86"])?;
    } else if version.is_none() {
        apt_install(&["qemu-system-x86"])?;
    }
    match qemu_version() {
        Some(v) if v >= QEMU_TESTED => {}
        Some((major, minor)) => eprintln!(
            "kernel matrix: warning: qemu {major}.{minor} is older than {}.{}, the oldest run clean here (7.2 freezes guests under TCG now and then)",
            QEMU_TESTED.0, QEMU_TESTED.1
        ),
        None => {
            bail!("qemu-system-x86_64 is not installed: install qemu (package qemu-system-x86)")
        }
    }
    Ok(())
}

/// Whether apt already has a bookworm-backports source, in any list file.
fn backports_configured() -> bool {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        files.extend(dir.flatten().map(|e| e.path()));
    }
    files.iter().any(|f| {
        fs::read_to_string(f).is_ok_and(|s| {
            s.lines()
                .any(|l| !l.trim_start().starts_with('#') && l.contains("bookworm-backports"))
        })
    })
}

/// `qemu-system-x86_64 --version` as (major, minor).
fn qemu_version() -> Option<(u32, u32)> {
    let out = Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .ok()?;
    parse_qemu_version(&String::from_utf8_lossy(&out.stdout))
}

/// "QEMU emulator version 7.2.22 (Debian ...)" → (7, 2).
fn parse_qemu_version(text: &str) -> Option<(u32, u32)> {
    let version = text.split("version ").nth(1)?.split_whitespace().next()?;
    let mut parts = version.split('.').map(|n| n.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??))
}

/// `vng` on PATH, or in the scripts folder of the python3 that pip installed it for.
fn vng_path() -> Result<PathBuf> {
    if let Some(path) = which("vng") {
        return Ok(path);
    }
    let scripts = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('scripts'))",
        ])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_default();
    let candidate = scripts.join("vng");
    if candidate.is_file() {
        return Ok(candidate);
    }
    bail!("vng (virtme-ng) is not installed")
}

/// The newest installed image of `spec`, installing its meta-package when there is none.
fn ensure_kernel(spec: &KernelSpec) -> Result<(PathBuf, String)> {
    if let Some(found) = installed_image(spec) {
        return Ok(found);
    }
    eprintln!(
        "setup: installing the {} kernel ({})",
        spec.label, spec.package
    );
    apt_install(&[spec.package])?;
    installed_image(spec).with_context(|| {
        format!(
            "{} installed no /boot/vmlinuz-* image of the {} kernel",
            spec.package, spec.label
        )
    })
}

fn installed_image(spec: &KernelSpec) -> Option<(PathBuf, String)> {
    let mut releases: Vec<String> = fs::read_dir("/boot")
        .ok()?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("vmlinuz-")
                .map(str::to_owned)
        })
        .filter(|r| (spec.matches)(r) && Path::new("/lib/modules").join(r).is_dir())
        .collect();
    releases.sort_by_key(|r| version_key(r));
    let release = releases.pop()?;
    Some((PathBuf::from(format!("/boot/vmlinuz-{release}")), release))
}

/// "6.1.0-57-amd64" → [6, 1, 0, 57]: the numbers in order, for sorting by version.
fn version_key(release: &str) -> Vec<u64> {
    release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Whether a KVM guest really boots here: /dev/kvm can exist while nested guests do not (seen:
/// "failed to set MSR 0x10a" with `-cpu host`). A kernel that gets as far as looking for its
/// root filesystem has booted; 20 s is ample under KVM.
fn kvm_boots(image: &Path) -> bool {
    if !Path::new("/dev/kvm").exists() {
        eprintln!("kernel matrix: no /dev/kvm: guests run under TCG (emulation, 10-30x slower)");
        return false;
    }
    let child = Command::new("qemu-system-x86_64")
        .args([
            "-machine",
            "accel=kvm",
            "-cpu",
            "host",
            "-m",
            "512M",
            "-smp",
            "1",
        ])
        .args([
            "-display",
            "none",
            "-nodefaults",
            "-no-reboot",
            "-serial",
            "stdio",
        ])
        .arg("-kernel")
        .arg(image)
        .args(["-append", "console=ttyS0 panic=-1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(child) = child else {
        eprintln!("kernel matrix: qemu did not start: guests run under TCG");
        return false;
    };
    let output = wait_output(child, Duration::from_secs(20));
    let booted = output.contains("VFS:") || output.contains("Kernel panic");
    if booted {
        eprintln!("kernel matrix: KVM boots a guest here: guests run under KVM");
    } else {
        let why = output
            .lines()
            .find(|l| l.contains("qemu") || l.contains("KVM") || l.contains("kvm"))
            .unwrap_or("no boot within 20 s");
        eprintln!(
            "kernel matrix: /dev/kvm exists but a KVM guest does not boot ({}): guests run under TCG (emulation, 10-30x slower)",
            why.trim()
        );
    }
    booted
}

/// Waits for `child` at most `timeout`, killing it then; returns its stdout and stderr.
fn wait_output(mut child: std::process::Child, timeout: Duration) -> String {
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let reader = thread::spawn(move || {
        use std::io::Read as _;
        let mut text = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_string(&mut text);
        }
        if let Some(err) = stderr.as_mut() {
            let _ = err.read_to_string(&mut text);
        }
        text
    });
    let _ = wait_or_kill(&mut child, timeout, || {});
    reader.join().unwrap_or_default()
}

/// Boots `image` and runs the guest suite in it; its output goes to the terminal and to `log`.
fn boot_and_run(
    vng: &Path,
    image: &Path,
    kvm: bool,
    binaries: &GuestBinaries,
    spec: &KernelSpec,
    log: &Path,
) -> Result<bool> {
    let label = spec.label;
    let mut command = Command::new(vng);
    if !kvm {
        command.arg("--disable-kvm");
    }
    if !spec.append.is_empty() {
        command.args(["--append", spec.append]);
    }
    command
        .args([
            "--cpus", "2", "--memory", "2G", "--user", "root", "--cwd", "/tmp",
        ])
        .arg("--run")
        .arg(image)
        .arg("--")
        .arg(&binaries.xtask)
        .arg("guest-suite")
        .arg("--label")
        .arg(label)
        .arg("--kernel-tests")
        .arg(&binaries.kernel_tests)
        .arg("--c2c-tests")
        .arg(&binaries.c2c_tests)
        .arg("--fault-tests")
        .arg(&binaries.fault_tests)
        .arg("--hosts-tests")
        .arg(&binaries.hosts_tests)
        .arg("--differential-tests")
        .arg(&binaries.differential_tests)
        .arg("--profiler")
        .arg(&binaries.profiler)
        .current_dir(root());
    // The guest's output reaches both the terminal and the log, line by line as it comes.
    let log_file = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let tee = |source: Box<dyn std::io::Read + Send>, mut file: fs::File| {
        let prefix = format!("  [{label}] ");
        thread::spawn(move || {
            use std::io::{BufRead as _, Write as _};
            for line in std::io::BufReader::new(source)
                .lines()
                .map_while(Result::ok)
            {
                eprintln!("{prefix}{line}");
                let _ = writeln!(file, "{line}");
            }
        })
    };
    // vng in a process group of its own, so that a hung guest's qemu is killed with it: killing
    // vng alone left qemu running (and holding the log pipes) until the guest finished.
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {}", vng.display()))?;
    let group = child.id();
    let out = tee(
        Box::new(child.stdout.take().expect("piped")),
        log_file.try_clone()?,
    );
    let err = tee(Box::new(child.stderr.take().expect("piped")), log_file);
    let status = wait_or_kill(&mut child, GUEST_TIMEOUT, || crate::kill_group(group))?;
    let _ = out.join();
    let _ = err.join();
    match status {
        Some(status) if status.success() => Ok(true),
        Some(status) => {
            eprintln!("kernel matrix: {label}: the guest suite failed ({status})");
            Ok(false)
        }
        None => {
            eprintln!(
                "kernel matrix: {label}: no result within {} min: killed",
                GUEST_TIMEOUT.as_secs() / 60
            );
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_versions_are_read_off_its_banner() {
        let debian = "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright";
        assert_eq!(parse_qemu_version(debian), Some((7, 2)));
        let backports = "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)";
        assert_eq!(parse_qemu_version(backports), Some((10, 0)));
        assert!(parse_qemu_version(backports).unwrap() >= QEMU_TESTED);
        assert!(parse_qemu_version(debian).unwrap() < QEMU_TESTED);
        assert_eq!(parse_qemu_version("qemu: command not found"), None);
    }

    #[test]
    fn releases_sort_by_their_numbers_and_flavours_do_not_mix() {
        let mut releases = ["6.1.0-9-amd64", "6.1.0-57-amd64", "6.1.0-50-amd64"];
        releases.sort_by_key(|r| version_key(r));
        assert_eq!(releases.last(), Some(&"6.1.0-57-amd64"));
        let flavour = |r: &str| {
            MATRIX
                .iter()
                .filter(|k| (k.matches)(r))
                .map(|k| k.label)
                .collect::<Vec<_>>()
        };
        assert_eq!(flavour("6.1.0-57-amd64"), ["6.1"]);
        assert_eq!(flavour("6.1.0-57-rt-amd64"), ["6.1-rt"]);
        // The lockdown entry boots the same kernel with another command line.
        assert_eq!(flavour("6.12.118+deb12-amd64"), ["6.12", "6.12-lockdown"]);
        assert!(flavour("6.12.118+deb12-rt-amd64").is_empty());
        assert!(flavour("6.18.44-fc-v1147").is_empty());
    }
}
