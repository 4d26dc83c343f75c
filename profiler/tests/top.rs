//! `profiler top` as a person uses it: in a real terminal (tmux: `send-keys`, `capture-pane`),
//! started from a shell, sorted, filtered, grouped, resized and quit with `q`, Ctrl-C and
//! SIGTERM, with the terminal's settings (`stty -a`) the same after as before. Loads BPF
//! programs: root.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

mod common;

use common::serial;

/// A tmux server of its own (`-L`), killed when dropped.
struct Tmux {
    socket: String,
    dir: PathBuf,
}

impl Tmux {
    /// A session running a shell, `width`×`height`.
    fn start(name: &str, width: u16, height: u16) -> Self {
        let tmux = common::require_tool("tmux", "tmux");
        let dir = common::scratch("top", name);
        let socket = format!("profiler-top-{name}-{}", std::process::id());
        let status = Command::new(&tmux)
            .args([
                "-L",
                &socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "t",
            ])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .args([
                "env",
                "-i",
                "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                "TERM=xterm-256color",
                "sh",
            ])
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        Self { socket, dir }
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    /// Types `keys` (tmux key names: "Enter", "C-c", or literal text with `literal`).
    fn keys(&self, keys: &[&str], literal: bool) {
        let mut c = self.tmux();
        c.args(["send-keys", "-t", "t"]);
        if literal {
            c.arg("-l");
        }
        assert!(c.args(keys).status().unwrap().success());
    }

    /// A shell command line, typed and entered.
    fn line(&self, line: &str) {
        self.keys(&[line], true);
        self.keys(&["Enter"], false);
    }

    fn screen(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen satisfies `ok` (10 s at most); the screen then.
    fn until(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: the screen was\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `stty -a` of the pane's terminal, written by the shell into `file`: its modes.
    fn stty(&self, file: &str) -> String {
        let path = self.dir.join(file);
        let _ = std::fs::remove_file(&path);
        self.line(&format!("stty -a > {}", path.display()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !path.exists()
            || std::fs::read_to_string(&path)
                .unwrap_or_default()
                .is_empty()
        {
            assert!(Instant::now() < deadline, "stty wrote nothing");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(100));
        // The modes, not the first line's size (the test resizes the window).
        let text = std::fs::read_to_string(&path).unwrap();
        text.lines().skip(1).collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

/// A process that closes a bad fd and reads /dev/null in a loop, until killed.
struct Busy(Child);

impl Busy {
    fn start() -> Self {
        Self(
            Command::new("sh")
                .args(["-c", "while :; do cat /dev/null; sleep 0.005; done"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `profiler top` command line for the pane.
fn top_line(profiler: &Path, pid: u32, log: &Path) -> String {
    format!(
        "{} top --pid {pid} --interval 300ms 2>{}; echo top-exited-$?",
        profiler.display(),
        log.display()
    )
}

#[test]
fn top_in_a_real_terminal_sorts_filters_groups_resizes_and_restores_the_terminal() {
    let _serial = serial();
    let profiler = PathBuf::from(env!("CARGO_BIN_EXE_profiler"));
    let busy = Busy::start();
    let t = Tmux::start("keys", 80, 24);
    let before = t.stty("before");
    let log = t.dir.join("top.log");
    t.line(&top_line(&profiler, busy.0.id(), &log));
    let s = t.until("the live rows", |s| {
        s.contains("per syscall") && s.contains("close") && s.contains("calls/s")
    });
    // 80×24: the heading, the table, the detail pane, the keys, each on its line.
    assert!(
        s.lines().count() <= 24 && s.lines().all(|l| l.chars().count() <= 80),
        "{s}"
    );
    assert!(s.contains("q quit") && s.contains("sort:share"), "{s}");

    // Sort by calls/s (key 2): close (two per loop: cat's and sh's) leads.
    t.keys(&["2"], true);
    let s = t.until("sorted by calls/s", |s| s.contains("sort:calls/s"));
    let first = s
        .lines()
        .skip_while(|l| !l.starts_with("name"))
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(first.starts_with("close"), "first row {first:?}:\n{s}");

    // Filter to read: only read's row.
    t.keys(&["/"], true);
    t.keys(&["read"], true);
    t.keys(&["Enter"], false);
    let s = t.until("filtered to read", |s| {
        s.contains("[read]") && !s.lines().any(|l| l.starts_with("close "))
    });
    assert!(s.lines().any(|l| l.starts_with("read ")), "{s}");

    // Group by process: rows named by pid.
    t.keys(&["g"], true);
    t.until("per process", |s| s.contains("per process and syscall"));
    t.keys(&["g"], true);

    // Resized: drawn at the new width.
    assert!(
        t.tmux()
            .args(["resize-window", "-t", "t", "-x", "120", "-y", "30"])
            .status()
            .unwrap()
            .success()
    );
    t.until("redrawn at 120 columns", |s| {
        s.lines()
            .any(|l| l.contains("per syscall") && l.trim_end().chars().count() > 100)
    });

    // q: the shell's prompt back, the terminal as it was.
    t.keys(&["q"], true);
    t.until("top exited on q", |s| s.contains("top-exited-0"));
    assert_eq!(t.stty("after-q"), before, "the terminal after q");

    // Ctrl-C (a key in raw mode).
    t.line("clear");
    t.line(&top_line(&profiler, busy.0.id(), &log));
    t.until("running again", |s| s.contains("per syscall"));
    t.keys(&["C-c"], false);
    t.until("top exited on Ctrl-C", |s| s.contains("top-exited-0"));
    assert_eq!(t.stty("after-ctrl-c"), before, "the terminal after Ctrl-C");

    // SIGTERM from elsewhere.
    t.line("clear");
    t.line(&top_line(&profiler, busy.0.id(), &log));
    t.until("running a third time", |s| s.contains("per syscall"));
    let status = Command::new("pkill")
        .args([
            "-TERM",
            "-f",
            &format!("{} top --pid {}", profiler.display(), busy.0.id()),
        ])
        .status()
        .unwrap();
    assert!(status.success(), "pkill found no top");
    t.until("top exited on SIGTERM", |s| s.contains("top-exited-0"));
    assert_eq!(
        t.stty("after-sigterm"),
        before,
        "the terminal after SIGTERM"
    );
}

/// `top --batch -n 3`: three plain tables, each interval's calls exact, then it stops; a bad
/// interval is one line.
#[test]
fn top_batch_prints_a_table_per_interval_and_refuses_a_bad_interval() {
    let _serial = serial();
    let busy = Busy::start();
    let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args(["top", "--batch", "-n", "3", "--interval", "200ms", "--pid"])
        .arg(busy.0.id().to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("--- top: interval ").count(), 3, "{text}");
    assert!(text.lines().any(|l| l.starts_with("close ")), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args(["top", "--batch", "--interval", "10ms", "--pid"])
        .arg(busy.0.id().to_string())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--interval 10ms: give 100ms or more"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
