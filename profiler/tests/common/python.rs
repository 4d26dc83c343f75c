//! The suite's one Python: a venv under target/ with the PyPI packages the tests read the
//! profiler's output with (the real consumers: `hdrhistogram`, `opentelemetry-proto`),
//! created and filled on first use.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// What the venv holds: PyPI package, and a module that must import once it is installed.
const PACKAGES: [(&str, &str); 2] = [
    ("hdrhistogram", "hdrh.histogram"),
    (
        "opentelemetry-proto",
        "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2",
    ),
];

/// The venv's python3, with every package of [`PACKAGES`] importable. Tests that run at once
/// share it: a lock file orders its creation.
pub fn python() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-venv");
    let python = venv.join("bin/python3");
    let imports = PACKAGES
        .iter()
        .map(|(_, module)| format!("import {module}"))
        .collect::<Vec<_>>()
        .join("; ");
    let ok = |p: &Path| {
        Command::new(p)
            .args(["-c", &imports])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ok(&python) {
        return python;
    }
    // Two test binaries may bootstrap at once: flock(1) serialises them.
    let lock = venv.with_extension("lock");
    let base = super::require_tool("python3", "python3 python3-venv");
    let packages: Vec<&str> = PACKAGES.iter().map(|(p, _)| *p).collect();
    let script = format!(
        "[ -x {py} ] || {base} -m venv {venv} && {venv}/bin/pip install --quiet {packages}",
        py = python.display(),
        base = base.display(),
        venv = venv.display(),
        packages = packages.join(" ")
    );
    let created = Command::new("flock")
        .arg(&lock)
        .args(["sh", "-c", &script])
        .output()
        .expect("flock (util-linux)");
    assert!(
        created.status.success(),
        "creating the tests' venv failed (apt-get install -y python3-venv; PyPI reachable?): {}",
        String::from_utf8_lossy(&created.stderr)
    );
    assert!(
        ok(&python),
        "the venv's packages ({}) installed but do not import",
        packages.join(", ")
    );
    python
}
