//! `cargo xtask package`: the Debian package (cargo-deb), with the binary stripped and its
//! debug info split, a man page per subcommand (section 8, as bcc's tools), bash/zsh/fish
//! completions and a systemd unit for `profiler serve`; then lintian, and an install with
//! dpkg into a directory of its own (the machine's package database is left as it was) that
//! runs `profiler --version` and `man -l` on a page.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

use crate::{apt_install, cargo, root, which};

/// Builds the package; returns its path.
pub fn build() -> Result<PathBuf> {
    if which("cargo-deb").is_none() {
        eprintln!("setup: cargo install cargo-deb --locked (about a minute, once)");
        let status = Command::new("cargo")
            .args(["install", "cargo-deb", "--locked"])
            .status()
            .context("running cargo install cargo-deb")?;
        if !status.success() {
            bail!("cargo install cargo-deb failed ({status})");
        }
    }
    // The same build as `cargo xtask run` (profiler and servers): switching between them
    // rebuilds nothing.
    cargo(&["build", "--release", "-p", "profiler", "-p", "servers"])?;
    let assets = root().join("target/package-assets");
    let _ = std::fs::remove_dir_all(&assets);
    let status = Command::new(root().join("target/release/profiler"))
        .arg("generate-assets")
        .arg(&assets)
        .status()
        .context("running profiler generate-assets")?;
    if !status.success() {
        bail!("profiler generate-assets failed ({status})");
    }
    // The servers `profiler run` drives, stripped (cargo-deb strips the package's own binary).
    let servers = assets.join("servers");
    let status = Command::new("strip")
        .args(["--strip-unneeded", "-o"])
        .arg(&servers)
        .arg(root().join("target/release/servers"))
        .status()
        .context("running strip")?;
    if !status.success() {
        bail!("strip of the servers binary failed ({status})");
    }
    // Man pages are installed compressed (gzip -9n: reproducible).
    for page in std::fs::read_dir(assets.join("man8"))? {
        let page = page?.path();
        let status = Command::new("gzip").arg("-9nf").arg(&page).status()?;
        if !status.success() {
            bail!("gzip {} failed", page.display());
        }
    }
    let out = Command::new("cargo")
        .current_dir(root())
        .args(["deb", "-p", "profiler", "--no-build"])
        .output()
        .context("running cargo deb")?;
    if !out.status.success() {
        bail!(
            "cargo deb failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // cargo deb prints the package's path last.
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .map(|l| PathBuf::from(l.trim()))
        .filter(|p| p.is_file())
        .context("cargo deb printed no package path")?;
    Ok(path)
}

/// lintian on `deb` (no errors allowed) and an install with dpkg into a directory of its own:
/// the binary runs, a man page renders.
pub fn check(deb: &Path) -> Result<()> {
    if which("lintian").is_none() {
        apt_install(&["lintian"])?;
    }
    let out = Command::new("lintian")
        .args(["--no-tag-display-limit"])
        .arg(deb)
        .output()
        .context("running lintian")?;
    let report = String::from_utf8_lossy(&out.stdout);
    let errors: Vec<&str> = report.lines().filter(|l| l.starts_with("E:")).collect();
    if !errors.is_empty() {
        bail!(
            "lintian found errors in {}:\n{}",
            deb.display(),
            errors.join("\n")
        );
    }
    eprintln!(
        "package: lintian: no errors ({} warnings)",
        report.lines().filter(|l| l.starts_with("W:")).count()
    );
    let dir = tempfile_dir("dpkg-root")?;
    let admin = dir.join("var/lib/dpkg");
    for sub in ["updates", "info"] {
        std::fs::create_dir_all(admin.join(sub))?;
    }
    std::fs::write(admin.join("status"), "")?;
    let status = Command::new("dpkg")
        .arg(format!("--root={}", dir.display()))
        .args([
            "--force-depends",
            "--force-script-chrootless",
            "--log=/dev/null",
            "-i",
        ])
        .arg(deb)
        .status()
        .context("running dpkg -i")?;
    if !status.success() {
        bail!(
            "dpkg -i {} into {} failed ({status})",
            deb.display(),
            dir.display()
        );
    }
    let version = Command::new(dir.join("usr/bin/profiler"))
        .arg("--version")
        .output()
        .context("running the installed profiler")?;
    let version = String::from_utf8_lossy(&version.stdout);
    if !version.starts_with("profiler ") {
        bail!("the installed profiler --version printed {version:?}");
    }
    // The headline command, from the package alone: its servers are found beside it.
    let run = Command::new(dir.join("usr/bin/profiler"))
        .args([
            "run",
            "--variants",
            "lt",
            "--concurrency",
            "1",
            "--runs",
            "1",
            "--requests",
            "100",
        ])
        .output()
        .context("running the installed profiler run")?;
    if !run.status.success() {
        bail!(
            "the installed `profiler run` failed: {}",
            String::from_utf8_lossy(&run.stderr).trim()
        );
    }
    let page = dir.join("usr/share/man/man8/profiler-serve.8.gz");
    let man = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "80")
        .output()
        .context("running man -l")?;
    let text = String::from_utf8_lossy(&man.stdout);
    if !man.status.success() || !text.contains("--web-config") {
        bail!("man -l {} did not render the serve page", page.display());
    }
    // man justifies the lines: "profiler   serve   [-p|--pid] ..." as often as not.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if !words.contains("profiler serve [") {
        bail!("the serve page's SYNOPSIS does not read `profiler serve`: {text}");
    }
    let bash = std::fs::read_to_string(dir.join("usr/share/bash-completion/completions/profiler"))?;
    if bash.contains("generate-assets") {
        bail!("the bash completions offer the hidden generate-assets");
    }
    for file in [
        "usr/share/bash-completion/completions/profiler",
        "usr/share/zsh/vendor-completions/_profiler",
        "usr/share/fish/vendor_completions.d/profiler.fish",
        "usr/lib/systemd/system/syscall-profiler.service",
    ] {
        if !dir.join(file).is_file() {
            bail!("the package does not install {file}");
        }
    }
    eprintln!(
        "package: installed into {}: {} runs, `profiler run` completes with its servers, its man pages render",
        dir.display(),
        version.trim()
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir(name: &str) -> Result<PathBuf> {
    let dir = root().join("target").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
