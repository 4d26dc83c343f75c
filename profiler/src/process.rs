//! Starting a command so that it can be tracked before its first syscall: the child stops itself
//! with SIGSTOP right after fork, the caller tracks its pid, then lets it exec.

use std::{
    ffi::CString,
    fs::File,
    os::{fd::FromRawFd as _, unix::ffi::OsStrExt as _},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::error::SetupError;

/// A child process stopped just before `execve`.
#[derive(Debug)]
pub struct StoppedChild {
    /// Its pid.
    pub pid: u32,
    /// The read end of its stdout, when captured.
    pub stdout: Option<File>,
}

impl StoppedChild {
    /// Forks; the child stops itself with SIGSTOP and, once resumed, execs `command`. With
    /// `capture_stdout` its stdout is a pipe whose read end is [`StoppedChild::stdout`]; with
    /// `stderr` its stderr goes to that file. An `isolated` child gets a process group of its
    /// own (a terminal's Ctrl-C reaches only us, who stop it in order) and SIGTERM should we
    /// die without stopping it.
    pub fn spawn(
        command: &[String],
        capture_stdout: bool,
        stderr: Option<&File>,
        isolated: bool,
    ) -> Result<Self> {
        use std::os::fd::AsRawFd;
        let stderr_fd = stderr.map_or(-1, AsRawFd::as_raw_fd);
        let Some(first) = command.first() else {
            bail!("no command given")
        };
        let program = resolve_program(first)?;
        let program =
            CString::new(program.as_os_str().as_bytes()).context("NUL in the command path")?;
        let args: Vec<CString> = command
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .context("NUL byte in a command argument")?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut pipe = [-1; 2];
        // SAFETY: a valid two-element array.
        if capture_stdout && unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            bail!("pipe failed: {}", std::io::Error::last_os_error());
        }
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: fork in a process that may have threads: the child calls only async-signal-safe
        // functions (dup2, setpgid, prctl, raise, execv, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("fork failed: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                if capture_stdout {
                    libc::dup2(pipe[1], 1);
                }
                if stderr_fd >= 0 {
                    libc::dup2(stderr_fd, 2);
                }
                // Should we die without stopping it (SIGKILL), it goes too: a server gets
                // SIGTERM to exit cleanly, a command SIGKILL. If we died before the prctl, the
                // parent is already someone else.
                if isolated {
                    libc::setpgid(0, 0);
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                } else {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                }
                if libc::getppid() != parent {
                    libc::_exit(127);
                }
                libc::raise(libc::SIGSTOP);
                libc::execv(program.as_ptr(), argv.as_ptr());
                libc::_exit(127);
            }
        }
        let stdout = capture_stdout.then(|| {
            // SAFETY: the write end is the child's now; the read end is ours alone.
            unsafe {
                libc::close(pipe[1]);
                File::from_raw_fd(pipe[0])
            }
        });
        let child = Self {
            pid: pid as u32,
            stdout,
        };
        let mut status = 0;
        // SAFETY: waiting for our own child.
        let rc = unsafe { libc::waitpid(pid, &raw mut status, libc::WUNTRACED) };
        if rc != pid || !libc::WIFSTOPPED(status) {
            bail!("the command's process did not start (wait status {status})");
        }
        Ok(child)
    }

    /// Lets the stopped child run (it then execs the command).
    pub fn resume(&self) -> Result<()> {
        // SAFETY: signalling our own child.
        if unsafe { libc::kill(self.pid as i32, libc::SIGCONT) } != 0 {
            bail!(
                "could not resume the command: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }

    /// How the child ended, if it has: exit code, or 128 + signal number.
    pub fn try_wait(&self) -> Result<Option<i32>> {
        let mut status = 0;
        // SAFETY: waiting for our own child without blocking.
        let rc = unsafe { libc::waitpid(self.pid as i32, &raw mut status, libc::WNOHANG) };
        if rc < 0 {
            bail!(
                "waiting for pid {}: {}",
                self.pid,
                std::io::Error::last_os_error()
            );
        }
        if rc == 0 {
            return Ok(None);
        }
        if libc::WIFEXITED(status) {
            Ok(Some(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Ok(Some(128 + libc::WTERMSIG(status)))
        } else {
            Ok(None)
        }
    }

    /// Sends SIGTERM and waits up to `grace` for the exit, then SIGKILL. Returns how it ended.
    pub fn terminate(&self, grace: Duration) -> Result<i32> {
        if let Some(code) = self.try_wait()? {
            return Ok(code);
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid as i32, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(code) = self.try_wait()? {
                return Ok(code);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.kill();
        Ok(128 + libc::SIGKILL)
    }

    /// Kills and reaps the child.
    pub fn kill(&self) {
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
            libc::kill(self.pid as i32, libc::SIGCONT);
            libc::waitpid(self.pid as i32, std::ptr::null_mut(), 0);
        }
    }
}

/// "exited with status 3" / "was killed by signal 9" for a code from [`StoppedChild::try_wait`].
#[must_use]
pub fn describe_exit(code: i32) -> String {
    if code > 128 {
        format!("was killed by signal {}", code - 128)
    } else {
        format!("exited with status {code}")
    }
}

/// Finds `name` on PATH like a shell does (names with a slash are taken as they are).
pub fn resolve_program(name: &str) -> Result<PathBuf> {
    let is_executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt as _;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        })
    };
    if name.contains('/') {
        let path = PathBuf::from(name);
        if is_executable(&path) {
            return Ok(path);
        }
        bail!("cannot run '{name}': no such executable file");
    }
    let path_var =
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
        .with_context(|| format!("command not found: '{name}' is not on PATH"))
}

/// Makes the child that `command` starts die with SIGKILL when the profiler dies, however it
/// dies (SIGKILL included), so no helper it started (bpftrace, an idle child) outlives it.
pub fn die_with_parent(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and calls only async-signal-safe
    // functions (prctl, getppid).
    unsafe {
        command.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the profiler exited"));
            }
            Ok(())
        })
    }
}

/// A pidfd: a handle on one process that a later process reusing its pid does not share.
#[derive(Debug)]
pub struct PidFd(std::os::fd::OwnedFd);

impl PidFd {
    /// Opens a pidfd for process `pid`; `None` when there is no such process.
    #[must_use]
    pub fn open(pid: u32) -> Option<Self> {
        use std::os::fd::FromRawFd as _;
        let pid = libc::pid_t::try_from(pid).ok()?;
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
        // SAFETY: a descriptor the kernel just gave us, owned by nobody else.
        Some(Self(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }))
    }

    /// Whether the process has exited (a pidfd polls readable once it has).
    #[must_use]
    pub fn exited(&self) -> bool {
        use std::os::fd::AsRawFd as _;
        let mut poll = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        let ready = unsafe { libc::poll(&raw mut poll, 1, 0) };
        ready > 0 && poll.revents & libc::POLLIN != 0
    }
}

/// What `/proc` says about one pid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcInfo {
    /// The process (thread group) the pid belongs to: itself unless it names a thread.
    pub tgid: u32,
    /// The parent process.
    pub ppid: u32,
    /// Its command name.
    pub comm: String,
    /// A kernel thread (`PF_KTHREAD`), which makes no system calls.
    pub kernel_thread: bool,
}

/// Reads `/proc/PID/status` (for the thread group) and `/proc/PID/stat` (for the flags). A thread
/// id works too: `/proc/TID` exists though `ls /proc` does not list it.
#[must_use]
pub fn proc_info(pid: u32) -> Option<ProcInfo> {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let tgid = field("Tgid:")?.parse().ok()?;
    let ppid = field("PPid:")?.parse().ok()?;
    let comm = crate::output::printable(field("Name:").unwrap_or_default());
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces and parentheses): state, ppid, pgrp,
    // session, tty_nr, tpgid, flags.
    let flags: u64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(6)?
        .parse()
        .ok()?;
    Some(ProcInfo {
        tgid,
        ppid,
        comm,
        kernel_thread: flags & PF_KTHREAD != 0,
    })
}

/// The processes running now that descend from `root` (children, grandchildren, ...), found by
/// walking `/proc`, parents before children.
#[must_use]
pub fn descendants(root: u32) -> Vec<u32> {
    let mut children: std::collections::BTreeMap<u32, Vec<u32>> = std::collections::BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(info) = proc_info(pid).filter(|i| !i.kernel_thread) {
                children.entry(info.ppid).or_default().push(pid);
            }
        }
    }
    let mut found = Vec::new();
    let mut queue = std::collections::VecDeque::from([root]);
    while let Some(parent) = queue.pop_front() {
        for &child in children.get(&parent).into_iter().flatten() {
            if child != root && !found.contains(&child) {
                found.push(child);
                queue.push_back(child);
            }
        }
    }
    found
}

/// The processes to trace for the pids a user named, and what was made of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    /// Process ids (tgids), named ones first, then their descendants; no duplicates.
    pub pids: Vec<u32>,
    /// How many of `pids` are descendants that were already running.
    pub descendants: usize,
    /// One line per pid that was taken for something else (a thread id for its process).
    pub notes: Vec<String>,
}

impl Targets {
    /// The processes the user named (thread ids mapped to their process).
    #[must_use]
    pub fn named(&self) -> &[u32] {
        &self.pids[..self.pids.len() - self.descendants]
    }

    /// The running descendants found in `/proc`; any of them may exit before it is tracked.
    #[must_use]
    pub fn descendant_pids(&self) -> &[u32] {
        &self.pids[self.pids.len() - self.descendants..]
    }
}

/// Turns the pids a user named into processes to trace: a thread id becomes its process, a
/// kernel thread or a pid that is not running is a one-line error, and with `with_descendants`
/// the processes they had already forked (an nginx master's workers) are added.
pub fn resolve_targets(named: &[u32], with_descendants: bool) -> Result<Targets, SetupError> {
    let mut targets = Targets::default();
    let me = std::process::id();
    for &pid in named {
        if pid == me {
            return Err(SetupError::SelfTarget(pid));
        }
        let info = proc_info(pid).ok_or(SetupError::NoSuchProcess(pid))?;
        if info.kernel_thread {
            return Err(SetupError::KernelThread {
                pid,
                comm: info.comm,
            });
        }
        if info.tgid != pid {
            targets.notes.push(format!(
                "pid {pid} is a thread of process {} ({}): tracing the whole process",
                info.tgid, info.comm
            ));
        }
        if !targets.pids.contains(&info.tgid) {
            targets.pids.push(info.tgid);
        }
    }
    if with_descendants {
        let limit = profiler_common::FIRST_FORKED_PROCESS as usize;
        let mut left_out = 0;
        for root in targets.pids.clone() {
            for pid in descendants(root) {
                // The profiler itself, started from a traced shell: never its own target.
                if targets.pids.contains(&pid) || pid == me {
                    continue;
                }
                if targets.pids.len() < limit {
                    targets.pids.push(pid);
                    targets.descendants += 1;
                } else {
                    left_out += 1;
                }
            }
        }
        if left_out > 0 {
            targets.notes.push(format!(
                "{left_out} running descendants left out: at most {limit} running processes can be named (what the traced ones fork from now on is still followed)"
            ));
        }
    }
    Ok(targets)
}

/// The inode number of the initial pid namespace (`PROC_PID_INIT_INO`, fixed in the kernel).
const INITIAL_PID_NAMESPACE: u64 = 0xEFFF_FFFC;

/// Whether this process runs in a pid namespace other than the machine's first one (a
/// container without the host's pids, `unshare --pid`): the kernel programs see host pids,
/// which such a namespace numbers differently. `/proc/self/ns/pid` tells even where /proc
/// was remounted for the namespace (whose `NSpid` line shows one pid only).
#[must_use]
pub fn in_child_pid_namespace() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self/ns/pid").is_ok_and(|m| m.ino() != INITIAL_PID_NAMESPACE)
}

/// Whether `path` is a 64-bit ELF program (its header's class byte), whose calls the syscall
/// tracepoints see. False for a 32-bit one, a script, or anything unreadable.
#[must_use]
pub fn is_elf64(path: &std::path::Path) -> bool {
    use std::io::Read as _;
    let mut header = [0u8; 5];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|()| header[..4] == *b"\x7fELF" && header[4] == 2)
}

/// The processes holding a socket that listens where `addr` is served: the `LISTEN` sockets of
/// `/proc/net/tcp` and `tcp6` on its port, bound to its address or to every address (a
/// dual-stack `[::]` one included), found by inode among every process's descriptors. A
/// pre-forked server (an nginx master and its workers) shares one socket among them all.
/// Sockets of other network namespaces are not seen (this process's `/proc/net` is its own).
#[must_use]
pub fn listening_socket_owners(addr: std::net::SocketAddr) -> Vec<u32> {
    let inodes = listening_inodes(addr);
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut owners = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return owners;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|link| {
                link.to_str()
                    .and_then(|l| l.strip_prefix("socket:["))
                    .and_then(|l| l.strip_suffix(']'))
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|inode| inodes.contains(&inode))
            })
        });
        if holds {
            owners.push(pid);
        }
    }
    owners.sort_unstable();
    owners
}

/// The inodes of the `LISTEN` sockets that accept connections to `addr`.
fn listening_inodes(addr: std::net::SocketAddr) -> Vec<u64> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut inodes = Vec::new();
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st ... inode (the tenth field)
            if f.len() < 10 || f[3] != "0A" {
                continue;
            }
            let Some((ip_hex, port_hex)) = f[1].split_once(':') else {
                continue;
            };
            if u16::from_str_radix(port_hex, 16).ok() != Some(addr.port()) {
                continue;
            }
            // The kernel prints each 32-bit word of the address (network order in memory) as a
            // host integer: on x86, 127.0.0.1 reads 0100007F.
            let words: Vec<[u8; 4]> = (0..ip_hex.len() / 8)
                .filter_map(|i| u32::from_str_radix(&ip_hex[i * 8..i * 8 + 8], 16).ok())
                .map(u32::to_ne_bytes)
                .collect();
            let bound = if v6 && words.len() == 4 {
                let mut bytes = [0u8; 16];
                for (i, w) in words.iter().enumerate() {
                    bytes[i * 4..i * 4 + 4].copy_from_slice(w);
                }
                IpAddr::V6(Ipv6Addr::from(bytes))
            } else if words.len() == 1 {
                IpAddr::V4(Ipv4Addr::from(words[0]))
            } else {
                continue;
            };
            let serves = bound.is_unspecified()
                || bound == addr.ip()
                || matches!((bound, addr.ip()), (IpAddr::V6(b), IpAddr::V4(a)) if b.to_ipv4_mapped() == Some(a));
            if serves && let Ok(inode) = f[9].parse::<u64>() {
                inodes.push(inode);
            }
        }
    }
    inodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_info_maps_a_thread_to_its_process_and_knows_kernel_threads() {
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // SAFETY: as above.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let info = proc_info(tid).expect("/proc/TID of a live thread");
        assert_eq!(info.tgid, me);
        assert!(!info.kernel_thread);
        done_tx.send(()).unwrap();
        thread.join().unwrap();
        let kthreadd = proc_info(2).expect("pid 2 is kthreadd");
        assert!(kthreadd.kernel_thread, "{kthreadd:?}");
    }

    #[test]
    fn descendants_are_found_through_a_grandchild() {
        let mut shell = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let found = loop {
            let found = descendants(shell.id());
            if found.len() >= 2 || Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let _ = shell.kill();
        for pid in &found {
            // SAFETY: signalling the sleeps we started.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        let _ = shell.wait();
        assert_eq!(found.len(), 2, "{found:?}");
    }

    #[test]
    fn a_pidfd_sees_the_exit_of_its_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pidfd = PidFd::open(child.id()).unwrap();
        assert!(!pidfd.exited());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(pidfd.exited());
    }
}
