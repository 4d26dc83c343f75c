//! `cargo xtask image`: an OCI image of the profiler, without a registry: the Debian package's
//! files (`dpkg -x`) and the shared libraries its binaries load (`ldd`), imported with
//! `podman import` as `localhost/syscall-profiler:VERSION` and saved as an OCI archive in
//! target/image/. Its check runs `serve --all --by-cgroup` from the image in a container with
//! the host's pid namespace and the capabilities deploy/kubernetes/daemonset.yaml gives it,
//! scrapes it, and finds another container's calls under that container's name.

use std::{
    io::{Read as _, Write as _},
    net::TcpStream,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::root;

/// The image's name in podman's local store.
pub const NAME: &str = "localhost/syscall-profiler";

/// podman as this machine kind runs it (runc, cgroupfs: crun refuses the hybrid layout).
fn podman() -> Command {
    let mut command = Command::new("podman");
    command.args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"]);
    command
}

fn run(command: &mut Command, what: &str) -> Result<String> {
    let out = command
        .output()
        .with_context(|| format!("{what}: could not start"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Builds the image from `deb`; returns its tag (`NAME:VERSION`).
pub fn build(deb: &Path) -> Result<String> {
    let dir = root().join("target/image");
    let rootfs = dir.join("root");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&rootfs)?;
    run(
        Command::new("dpkg").arg("-x").arg(deb).arg(&rootfs),
        "dpkg -x",
    )?;
    for binary in ["usr/bin/profiler", "usr/lib/syscall-profiler/servers"] {
        for library in libraries(&rootfs.join(binary))? {
            let target = rootfs.join(library.strip_prefix("/").unwrap_or(&library));
            if target.exists() {
                continue;
            }
            std::fs::create_dir_all(target.parent().expect("a library has a directory"))?;
            // The file itself, under the name the loader asks for (symlinks resolved).
            std::fs::copy(std::fs::canonicalize(&library)?, &target)
                .with_context(|| format!("copying {}", library.display()))?;
        }
    }
    for sub in ["etc", "proc", "sys", "dev", "host", "tmp"] {
        std::fs::create_dir_all(rootfs.join(sub))?;
    }
    // /tmp as everywhere (the flight recorder's recordings go there by default).
    std::fs::set_permissions(
        rootfs.join("tmp"),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )?;
    std::fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    )?;
    std::fs::write(rootfs.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n")?;
    let tar = dir.join("rootfs.tar");
    run(
        Command::new("tar")
            .arg("-C")
            .arg(&rootfs)
            .args(["--owner=0", "--group=0", "-cf"])
            .arg(&tar)
            .arg("."),
        "tar of the image's files",
    )?;
    let version = String::from_utf8_lossy(
        &Command::new(rootfs.join("usr/bin/profiler"))
            .arg("--version")
            .output()
            .context("running the packaged profiler")?
            .stdout,
    )
    .split_whitespace()
    .nth(1)
    .context("profiler --version printed no version")?
    .to_owned();
    let tag = format!("{NAME}:{version}");
    run(
        podman()
            .arg("import")
            .args(["--change", r#"ENTRYPOINT ["/usr/bin/profiler"]"#])
            .args([
                "--change",
                r#"CMD ["serve", "--all", "--by-cgroup", "--listen", "0.0.0.0:9464"]"#,
            ])
            .args(["--change", "EXPOSE 9464"])
            .arg(&tar)
            .arg(&tag),
        "podman import",
    )?;
    let archive = dir.join(format!("syscall-profiler-{version}.oci.tar"));
    run(
        podman()
            .args(["save", "--format", "oci-archive", "-o"])
            .arg(&archive)
            .arg(&tag),
        "podman save",
    )?;
    let _ = std::fs::remove_file(&tar);
    eprintln!(
        "image: {tag} in podman's store, and {} ({} MB)",
        archive.display(),
        std::fs::metadata(&archive)?.len() >> 20
    );
    Ok(tag)
}

/// The shared libraries `binary` loads, the loader included, by `ldd`.
fn libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let out = run(Command::new("ldd").arg(binary), "ldd")?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let path = l
                .split("=>")
                .last()?
                .split_whitespace()
                .next()
                .filter(|p| p.starts_with('/'))?;
            Some(PathBuf::from(path))
        })
        .collect())
}

/// A container removed (with its state) when dropped.
struct Running(String);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = podman().args(["rm", "-f", "-t", "0", &self.0]).output();
    }
}

/// `podman run -d` with the ulimits this sandbox allows.
fn start(name: &str, args: &[&str]) -> Result<Running> {
    let _ = podman().args(["rm", "-f", "-t", "0", name]).output();
    run(
        podman()
            .args(["run", "-d", "--name", name])
            .args([
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "nproc=1024:1024",
            ])
            .args(args),
        &format!("podman run {name}"),
    )?;
    Ok(Running(name.to_owned()))
}

/// The image's `--version`, then its `serve --all --by-cgroup` in a container (host pid
/// namespace, the DaemonSet's capabilities and mounts), scraped until another container's
/// calls appear under that container's name.
pub fn check(tag: &str) -> Result<()> {
    let version = run(
        podman()
            .args(["run", "--rm"])
            .args([
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "nproc=1024:1024",
            ])
            .args([tag, "--version"]),
        "the image",
    )?;
    if !version.starts_with("profiler ") {
        bail!("the image's profiler --version printed {version:?}");
    }
    let pid = std::process::id();
    // Another container making calls: busybox, from a directory (no image needed).
    let busybox = root().join("target/image/busybox");
    std::fs::create_dir_all(busybox.join("bin"))?;
    std::fs::copy("/bin/busybox", busybox.join("bin/busybox"))
        .context("/bin/busybox (apt-get install busybox-static)")?;
    let target = format!("sp-image-target-{pid}");
    let _target = start(
        &target,
        &[
            "--network",
            "none",
            "--rootfs",
            busybox.to_str().context("a UTF-8 path")?,
            "/bin/busybox",
            "sh",
            "-c",
            "while :; do : < /dev/null; /bin/busybox usleep 10000; done",
        ],
    )?;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?.port()
    };
    let serve = format!("sp-image-serve-{pid}");
    let listen = format!("127.0.0.1:{port}");
    let _serve = start(
        &serve,
        &[
            "--pid",
            "host",
            "--network",
            "host",
            "--cap-drop",
            "ALL",
            "--cap-add",
            "BPF,PERFMON,DAC_READ_SEARCH,SYS_ADMIN",
            "-v",
            "/sys/kernel/tracing:/sys/kernel/tracing",
            "-v",
            "/sys/fs/cgroup:/sys/fs/cgroup:ro",
            "-v",
            "/var/lib/containers:/host/var/lib/containers:ro",
            "-v",
            "/run/runc:/host/run/runc:ro",
            "-e",
            "PROFILER_HOST_ROOT=/host",
            tag,
            "serve",
            "--all",
            "--by-cgroup",
            "--syscalls",
            "close,openat",
            "--listen",
            &listen,
        ],
    )?;
    let wanted = format!("container_name=\"{target}\"");
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let page = scrape(port).unwrap_or_default();
        let found = page.lines().find(|l| {
            l.starts_with("syscall_profiler_cgroup_syscall_calls_total{")
                && l.contains(&wanted)
                && l.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v > 0.0)
        });
        if let Some(line) = found {
            eprintln!("image: serve in a container names another container's calls: {line}");
            return Ok(());
        }
        if Instant::now() > deadline {
            let logs = podman()
                .args(["logs", &serve])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .unwrap_or_default();
            bail!(
                "serve in a container: no series of container {target} within a minute (its log: {})",
                logs.trim()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// GET /metrics on 127.0.0.1:`port`; its body.
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())
}
