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
                if isolated {
                    libc::setpgid(0, 0);
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
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
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
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
        let rc = unsafe { libc::waitpid(self.pid as i32, &mut status, libc::WNOHANG) };
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
