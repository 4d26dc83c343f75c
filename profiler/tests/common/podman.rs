//! Real containers for the tests: podman with runc and its cgroupfs manager (crun, podman's
//! default, refuses the hybrid cgroup layout), from a rootfs of busybox-static imported with
//! `podman import` (no registry), with ulimits this sandbox's hard limits allow.
//! `cargo xtask test` installs podman and runc, and skips these tests, saying why, where podman
//! cannot run a container.

use std::{
    path::Path,
    process::{Command, Output},
    sync::OnceLock,
    time::{Duration, Instant},
};

/// The test image: /bin/busybox and its sh, and empty /w, /proc, /sys, /dev, /tmp.
pub const IMAGE: &str = "localhost/syscall-profiler-test:busybox";

/// `podman` with the runtime and cgroup manager this machine kind needs.
pub fn podman() -> Command {
    let mut command = Command::new("podman");
    command.args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"]);
    command
}

fn checked(command: &mut Command, what: &str) -> Output {
    let out = command.output().unwrap_or_else(|e| {
        panic!("{what}: podman did not start ({e}): apt-get install podman runc")
    });
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    out
}

/// [`IMAGE`], imported once (a later test run finds it in podman's store).
pub fn image() -> &'static str {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        if podman()
            .args(["image", "exists", IMAGE])
            .status()
            .is_ok_and(|s| s.success())
        {
            return;
        }
        let dir = super::scratch("podman", "rootfs");
        let root = dir.join("root");
        for sub in ["bin", "w", "proc", "sys", "dev", "tmp", "etc"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::copy("/bin/busybox", root.join("bin/busybox"))
            .expect("/bin/busybox (apt-get install busybox-static)");
        std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
        let tar = dir.join("rootfs.tar");
        checked(
            Command::new("tar")
                .arg("-C")
                .arg(&root)
                .arg("-cf")
                .arg(&tar)
                .arg("."),
            "tar of the rootfs",
        );
        checked(podman().arg("import").arg(&tar).arg(IMAGE), "podman import");
    });
    IMAGE
}

/// A container started detached; removed (with its state) when dropped.
pub struct Container {
    pub name: String,
    pub id: String,
}

impl Container {
    /// `podman run -d --name NAME [extra] -v DIR:/w:ro IMAGE COMMAND...`, running when this
    /// returns.
    pub fn start(name: &str, extra: &[&str], dir: &Path, command: &[&str]) -> Self {
        let _ = podman().args(["rm", "-f", name]).output();
        let out = checked(
            podman()
                .args(["run", "-d", "--name", name])
                .args([
                    "--ulimit",
                    "nofile=1024:1024",
                    "--ulimit",
                    "nproc=1024:1024",
                ])
                .args(["--network", "none"])
                .args(extra)
                .arg("-v")
                .arg(format!("{}:/w:ro", dir.display()))
                .arg(image())
                .args(command),
            &format!("podman run {name}"),
        );
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(id.len(), 64, "podman run printed no container id: {id}");
        Self {
            name: name.to_owned(),
            id,
        }
    }

    /// Waits (at most `limit`) for the container to exit; its exit code.
    pub fn wait(&self, limit: Duration) -> i64 {
        let deadline = Instant::now() + limit;
        loop {
            let out = checked(
                podman().args([
                    "inspect",
                    "-f",
                    "{{.State.Running}} {{.State.ExitCode}}",
                    &self.name,
                ]),
                "podman inspect",
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let mut fields = text.split_whitespace();
            if fields.next() == Some("false") {
                return fields.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "container {} still running after {limit:?}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman().args(["rm", "-f", "-t", "0", &self.name]).output();
    }
}
