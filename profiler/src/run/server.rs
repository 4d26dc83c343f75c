//! The server under test: started stopped (so tracing begins at its first syscall), waited for
//! until it prints `listening on ADDR:PORT`, measured from /proc, stopped.

use std::{
    fs::File,
    io::{BufRead as _, BufReader},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    sync::mpsc,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

use super::model::{CpuTime, Subject, Variant};
use crate::process::{StoppedChild, describe_exit};

/// How long a server may take to print its `listening on` line.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How to start one server.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    /// The `servers` binary (or a wrapper taking the same arguments), for built-in variants.
    pub binary: PathBuf,
    /// Which server: a built-in variant, or the user's command.
    pub variant: Subject,
    /// `echo` or `http`.
    pub protocol: &'static str,
    /// CPUs to pin it to (empty: unpinned).
    pub cpus: Vec<usize>,
    /// Workers for `mp` (None: the server's default, one per CPU it may use).
    pub workers: Option<usize>,
    /// Pass `--lt-epollout` to the level-triggered variants (lt, lt-pure), the ones the server
    /// takes it for ([`Variant::is_level_triggered`]).
    pub lt_epollout: bool,
    /// RLIMIT_NOFILE to ask for (idle-connection scenarios).
    pub nofile: Option<u64>,
    /// Run it under `strace -f -c -o FILE` instead (with these syscalls).
    pub strace: Option<(PathBuf, Vec<String>)>,
}

impl ServerSpec {
    /// The command line; a user's command gets `port` in place of `{port}` and runs under
    /// `sh -c` (which execs a simple command, so the server is the process started).
    #[must_use]
    pub fn command(&self, port: u16) -> Vec<String> {
        let mut cmd = Vec::new();
        if let Some((output, syscalls)) = &self.strace {
            cmd.extend(["strace".to_owned(), "-f".into(), "-c".into(), "-o".into()]);
            cmd.push(output.display().to_string());
            if !syscalls.is_empty() {
                cmd.push("-e".to_owned());
                cmd.push(format!("trace={}", syscalls.join(",")));
            }
        }
        let variant = match &self.variant {
            Subject::Builtin(v) => *v,
            Subject::Command(c) => {
                cmd.extend(["sh".to_owned(), "-c".to_owned()]);
                cmd.push(c.command.replace("{port}", &port.to_string()));
                return cmd;
            }
            // Not started by us.
            Subject::Running(_) => return Vec::new(),
        };
        cmd.push(self.binary.display().to_string());
        cmd.extend(["--mode".to_owned(), variant.name().to_owned()]);
        cmd.extend([
            "--protocol".to_owned(),
            self.protocol.to_owned(),
            "--port".into(),
            "0".into(),
        ]);
        if !self.cpus.is_empty() {
            let list: Vec<String> = self.cpus.iter().map(usize::to_string).collect();
            cmd.extend(["--cpus".to_owned(), list.join(",")]);
        }
        if variant == Variant::Mp
            && let Some(w) = self.workers
        {
            cmd.extend(["--workers".to_owned(), w.to_string()]);
        }
        if self.lt_epollout && variant.is_level_triggered() {
            cmd.push("--lt-epollout".to_owned());
        }
        if let Some(n) = self.nofile {
            cmd.extend(["--nofile".to_owned(), n.to_string()]);
        }
        cmd
    }

    /// The program that serves: the `servers` binary, or the first word of the user's command
    /// as `PATH` finds it (for telling a 64-bit ELF program from anything else).
    #[must_use]
    pub fn program(&self) -> PathBuf {
        match &self.variant {
            Subject::Builtin(_) => self.binary.clone(),
            Subject::Command(c) => c
                .command
                .split_whitespace()
                .next()
                .and_then(|w| crate::process::resolve_program(w).ok())
                .unwrap_or_default(),
            Subject::Running(r) => PathBuf::from(format!("/proc/{}/exe", r.pids[0])),
        }
    }
}

/// A running server: one we started, or one that was running already (`--target --pid`).
pub struct Server {
    /// What we started (`None`: a server we attached to, which we neither stop nor own).
    child: Option<StoppedChild>,
    /// Its pid.
    pid: u32,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Kept so the thread draining the server's stdout goes on (a full pipe would block it).
    _lines: mpsc::Receiver<String>,
    ended: Option<i32>,
    log: File,
    /// This process's children before the server started: any other child at the stop is
    /// something the server left behind (an orphan reparented to us, the subreaper).
    children_before: Vec<u32>,
}

impl Server {
    /// Starts the server stopped; `before_exec` runs with its pid (e.g. to track it) before it
    /// is let go; then waits for its `listening on` line.
    pub fn start(spec: &ServerSpec, before_exec: impl FnOnce(u32) -> Result<()>) -> Result<Self> {
        // A user's server listens where it is told: on a port free now.
        let port = match &spec.variant {
            Subject::Builtin(_) => 0,
            Subject::Command(_) => free_port()?,
            Subject::Running(r) => return Self::attach(r, before_exec),
        };
        let command = spec.command(port);
        let log = tempfile::tempfile().context("creating a file for the server's stderr")?;
        // What the server leaves behind when it goes (a `CMD &`, a daemon that called setsid)
        // is reparented to this process rather than to init, and killed at its stop.
        become_subreaper();
        let children_before = children_of(std::process::id());
        let mut child =
            StoppedChild::spawn(&command, true, Some(&log), true).with_context(|| {
                format!(
                    "starting the {} server ({})",
                    spec.variant,
                    command.join(" ")
                )
            })?;
        let pinned = match (&spec.variant, spec.cpus.is_empty()) {
            // The servers binary pins itself (--cpus); a user's server is pinned from outside,
            // before it execs, so every thread and child it makes inherits the set.
            (Subject::Command(_), false) => pin(child.pid, &spec.cpus),
            _ => Ok(()),
        };
        if let Err(e) = pinned.and_then(|()| before_exec(child.pid)) {
            child.kill();
            kill_left_behind(&[], &children_before);
            return Err(e);
        }
        child.resume()?;
        let stdout = child.stdout.take().context("server stdout")?;
        let lines = forward_lines(stdout);
        let ready = match &spec.variant {
            Subject::Builtin(_) => wait_listening(&lines, &child),
            Subject::Command(_) | Subject::Running(_) => {
                let addr = SocketAddr::from(([127, 0, 0, 1], port));
                wait_connectable(addr, &child).map(|()| addr)
            }
        };
        let addr = match ready {
            Ok(addr) => addr,
            Err(e) => {
                let tree = with_descendants(child.pid);
                child.kill();
                kill_left_behind(&tree, &children_before);
                let tail = last_line(&log);
                return Err(e.context(format!("the {} server did not start{tail}", spec.variant)));
            }
        };
        Ok(Self {
            pid: child.pid,
            child: Some(child),
            addr,
            _lines: lines,
            ended: None,
            log,
            children_before,
        })
    }

    /// A server that runs already: `before_exec` (tracking) runs with its pid, and it must
    /// accept a connection on its address.
    fn attach(
        r: &super::model::RunningServer,
        before_exec: impl FnOnce(u32) -> Result<()>,
    ) -> Result<Self> {
        let pid = r.pids[0];
        if !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("--pid {pid}: no such process (it exited?)");
        }
        before_exec(pid)?;
        TcpStream::connect_timeout(&r.addr, Duration::from_secs(5))
            .with_context(|| format!("--target {}: nothing accepts connections there", r.addr))?;
        Ok(Self {
            child: None,
            pid,
            addr: r.addr,
            _lines: mpsc::channel().1,
            ended: None,
            log: tempfile::tempfile().context("creating an empty server log")?,
            children_before: Vec::new(),
        })
    }

    /// The last line the server wrote to stderr, as ": LINE" (empty when none).
    #[must_use]
    pub fn stderr_tail(&self) -> String {
        last_line(&self.log)
    }

    /// The pid we started (strace's, under `--strace`), or the one we attached to.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Set once the server has exited: how.
    pub fn exit_status(&mut self) -> Result<Option<String>> {
        let Some(child) = &self.child else {
            return Ok((!Path::new(&format!("/proc/{}", self.pid)).exists())
                .then(|| format!("process {} exited", self.pid)));
        };
        if self.ended.is_none() {
            self.ended = child.try_wait()?;
        }
        Ok(self.ended.map(describe_exit))
    }

    /// SIGTERM (to the server itself; under strace, to strace's child so strace writes its
    /// summary), then waits; SIGKILL after 5 s. Returns how it ended.
    pub fn stop(mut self, under_strace: bool) -> Result<String> {
        let Some(child) = &self.child else {
            return Ok("left running (not started by the profiler)".to_owned());
        };
        if self.ended.is_none() {
            self.ended = child.try_wait()?;
        }
        if let Some(code) = self.ended {
            self.kill_leftovers(&[]);
            return Ok(describe_exit(code));
        }
        // Its whole tree now, while the parent links hold (a child that called setsid is in
        // another process group but still its descendant).
        let tree = with_descendants(self.pid);
        let grace = if under_strace {
            for pid in children_of(self.pid) {
                // SAFETY: signalling the traced server.
                unsafe { libc::kill(pid as i32, libc::SIGTERM) };
            }
            Duration::from_secs(10)
        } else {
            Duration::from_secs(5)
        };
        let code = self
            .child
            .as_mut()
            .map_or(Ok(0), |child| child.terminate(grace))?;
        self.ended = Some(code);
        self.kill_leftovers(&tree);
        Ok(describe_exit(code))
    }

    /// The server runs in a process group of its own: whatever it started and left behind
    /// (a wrapper script's children, a forking server's workers) goes with it.
    /// SIGKILL to the server's process group, to `tree` (its descendants as they were), and to
    /// every child this process gained since the server started (orphans it left behind).
    fn kill_leftovers(&self, tree: &[u32]) {
        if self.child.is_some() {
            // SAFETY: signalling the process group we created for the server (setpgid in the
            // child).
            unsafe { libc::kill(-(self.pid as i32), libc::SIGKILL) };
            kill_left_behind(tree, &self.children_before);
        }
    }
}

/// A run that fails between start and stop still stops its server.
impl Drop for Server {
    fn drop(&mut self) {
        if self.ended.is_none()
            && let Some(child) = &mut self.child
        {
            let tree = with_descendants(self.pid);
            let _ = child.terminate(Duration::from_secs(1));
            self.kill_leftovers(&tree);
        }
    }
}

fn last_line(log: &File) -> String {
    use std::io::{Read as _, Seek as _};
    let mut text = String::new();
    let Ok(mut file) = log.try_clone() else {
        return String::new();
    };
    if file.rewind().is_err() || file.read_to_string(&mut text).is_err() {
        return String::new();
    }
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", l.trim()))
        .unwrap_or_default()
}

fn forward_lines(stdout: File) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_listening(lines: &mpsc::Receiver<String>, child: &StoppedChild) -> Result<SocketAddr> {
    let deadline = std::time::Instant::now() + READY_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            bail!("no `listening on` line within {}s", READY_TIMEOUT.as_secs());
        }
        match lines.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(line) => {
                if let Some(addr) = line.trim().strip_prefix("listening on ") {
                    return addr
                        .parse()
                        .with_context(|| format!("bad address in '{line}'"));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(code) = child.try_wait()? {
                    bail!("it {} before listening", describe_exit(code));
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let code = child
                    .try_wait()?
                    .map_or_else(|| "closed its stdout".to_owned(), describe_exit);
                bail!("it {code} before listening");
            }
        }
    }
}

/// A TCP port free on loopback now (the kernel's pick; another process could take it before the
/// server binds it, which then fails to start, loudly).
fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .context("finding a free port for the server")?;
    Ok(listener.local_addr()?.port())
}

/// Pins the stopped child `pid` to `cpus`.
fn pin(pid: u32, cpus: &[usize]) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        // SAFETY: see above.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: a valid set for a process of ours.
    if unsafe { libc::sched_setaffinity(pid as i32, std::mem::size_of_val(&set), &raw const set) }
        != 0
    {
        bail!(
            "pinning the server to CPUs {}: {}",
            cpuset::format_cpu_list(cpus),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Waits until `addr` accepts a connection (a user's server prints nothing we could wait for).
fn wait_connectable(addr: SocketAddr, child: &StoppedChild) -> Result<()> {
    let deadline = std::time::Instant::now() + READY_TIMEOUT;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Some(code) = child.try_wait()? {
            bail!("it {} before listening on {addr}", describe_exit(code));
        }
        if std::time::Instant::now() >= deadline {
            bail!(
                "nothing accepted connections on {addr} within {}s: does the command listen on {{port}}?",
                READY_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `pid` and every process below it.
#[must_use]
pub fn with_descendants(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() && all.len() < 65_536 {
        let children = children_of(all[i]);
        all.extend(
            children
                .into_iter()
                .filter(|c| !all.contains(c))
                .collect::<Vec<_>>(),
        );
        i += 1;
    }
    all
}

/// Direct children of `pid` (all its threads').
#[must_use]
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = task.path().join("children");
        if let Ok(list) = std::fs::read_to_string(path) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// CPU time of the processes, summed: exact on-CPU time of all their threads from schedstat, and
/// the tick-sampled user/system split from /proc/PID/stat. Gone processes count 0.
#[must_use]
pub fn cpu_time(pids: &[u32]) -> CpuTime {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut total = CpuTime::default();
    for pid in pids {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may contain spaces) end with ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // rest starts at field 3 (state); utime is field 14, stime 15.
        let get = |i: usize| {
            fields
                .get(i - 3)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        total.user_ns += get(14) * 1_000_000_000 / ticks;
        total.system_ns += get(15) * 1_000_000_000 / ticks;
        for task in std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let on_cpu = std::fs::read_to_string(task.path().join("schedstat"))
                .ok()
                .and_then(|s| {
                    s.split_whitespace()
                        .next()
                        .and_then(|f| f.parse::<u64>().ok())
                })
                .unwrap_or(0);
            total.on_cpu_ns += on_cpu;
        }
    }
    total
}

/// Makes this process the subreaper of what it starts (PR_SET_CHILD_SUBREAPER): a process whose
/// parent exits is reparented here instead of to init, so a server's leftovers stay findable.
fn become_subreaper() {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// SIGKILL to every pid of `tree` still alive, and to each child of this process not in
/// `children_before` with its descendants; then reaps the children (so none stays a zombie).
fn kill_left_behind(tree: &[u32], children_before: &[u32]) {
    let me = std::process::id();
    let mut victims: Vec<u32> = tree.iter().copied().filter(|&p| p != me).collect();
    let new_children: Vec<u32> = children_of(me)
        .into_iter()
        .filter(|c| !children_before.contains(c))
        .collect();
    for &c in &new_children {
        for p in with_descendants(c) {
            if !victims.contains(&p) {
                victims.push(p);
            }
        }
    }
    for &p in &victims {
        // SAFETY: signalling processes the server started (found by parent links just now).
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    // Our own children among them (reparented orphans): reaped, waiting up to a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    let mut left: Vec<u32> = children_of(me)
        .into_iter()
        .filter(|c| victims.contains(c))
        .collect();
    while !left.is_empty() && std::time::Instant::now() < deadline {
        // SAFETY: reaping our own children by pid, without blocking.
        left.retain(
            |&c| unsafe { libc::waitpid(c as i32, std::ptr::null_mut(), libc::WNOHANG) } == 0,
        );
        if !left.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// `sync; echo 3 > /proc/sys/vm/drop_caches`: a cold page cache and dentry cache.
pub fn drop_caches() -> Result<()> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .context("writing /proc/sys/vm/drop_caches (needs root)")
}

/// Opens `count` idle connections to `addr` and keeps them open while the value lives.
pub fn open_idle_connections(addr: SocketAddr, count: usize) -> Result<Vec<TcpStream>> {
    raise_nofile_limit(count as u64 + 1024);
    let mut conns = Vec::with_capacity(count);
    for i in 0..count {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .with_context(|| format!("opening idle connection {} of {count}", i + 1))?;
        conns.push(stream);
    }
    Ok(conns)
}

/// Raises this process's soft RLIMIT_NOFILE towards `wanted` (up to the hard limit).
pub fn raise_nofile_limit(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit pointers.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 && limit.rlim_cur < wanted {
            limit.rlim_cur = wanted.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit);
        }
    }
}

/// The `servers` binary next to this executable, if there is one.
#[must_use]
pub fn default_server_binary() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let dir = me.parent()?;
    // Tests run from target/debug/deps; the binaries are one level up. The package installs
    // it under /usr/lib/syscall-profiler, beside /usr/bin.
    [
        dir.join("servers"),
        dir.parent().map(|p| p.join("servers")).unwrap_or_default(),
        dir.join("../lib/syscall-profiler/servers"),
    ]
    .into_iter()
    .find(|p| Path::new(p).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--lt-epollout` reaches both level-triggered variants, as the server defines them (it
    /// was passed to lt only), and no other.
    #[test]
    fn lt_epollout_goes_to_every_level_triggered_variant() {
        for variant in Variant::ALL {
            let spec = ServerSpec {
                binary: PathBuf::from("servers"),
                variant: variant.into(),
                protocol: "echo",
                cpus: vec![],
                workers: None,
                lt_epollout: true,
                nofile: None,
                strace: None,
            };
            assert_eq!(
                spec.command(0).iter().any(|a| a == "--lt-epollout"),
                variant.is_level_triggered(),
                "{variant}"
            );
        }
    }
}
