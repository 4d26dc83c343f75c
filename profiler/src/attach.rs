//! `profiler attach`: time the syscalls of running processes, or of a command it starts, and print
//! the table when the duration ends, the command exits, or on Ctrl-C.

use std::{
    ffi::CString,
    io::Write as _,
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    bpf::{Session, SessionConfig, Syscall, Target},
    report::{histogram::log2_histogram, table},
    stats::Snapshot,
};

/// What `profiler attach` was asked to do.
#[derive(Clone, Debug)]
pub struct AttachOptions {
    /// Running processes to trace.
    pub pids: Vec<u32>,
    /// Trace every process.
    pub all: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Print a table of the last interval this often.
    pub interval: Option<Duration>,
    /// Syscalls to time.
    pub syscalls: Vec<Syscall>,
    /// Add ASCII histograms.
    pub histograms: bool,
    /// A command to start and trace from its first syscall.
    pub command: Vec<String>,
}

/// Why tracing stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The duration elapsed.
    Duration,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// The started command exited with this status code (128 + signal when killed).
    CommandExited(i32),
    /// Every traced process exited.
    TargetsExited,
}

/// Runs `profiler attach` and prints its report to stdout. Returns the exit code to use: the
/// command's own when one was started (like `strace -c`), else 0.
pub fn run(options: &AttachOptions) -> Result<i32> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("installing the Ctrl-C handler")?;
    }

    let child = if options.command.is_empty() { None } else { Some(StoppedChild::spawn(&options.command)?) };
    let target = if options.all { Target::All } else { Target::Processes(options.pids.clone()) };
    let config = SessionConfig { syscalls: options.syscalls.clone(), target, noop: false };
    let mut session = match Session::start(&config) {
        Ok(s) => s,
        Err(e) => {
            if let Some(child) = child {
                child.kill();
            }
            return Err(e.into());
        }
    };
    if let Some(child) = &child {
        session.track(child.pid)?;
        child.resume()?;
    }
    let what = match (&child, options.all) {
        (Some(_), _) => format!("'{}'", options.command.join(" ")),
        (None, true) => "all processes".to_owned(),
        (None, false) => format!("pid {}", options.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")),
    };
    let names: Vec<&str> = options.syscalls.iter().map(|s| s.name.as_str()).collect();
    eprintln!("Tracing {} of {what}. Ctrl-C to stop.", names.join(", "));

    let started = Instant::now();
    let mut last_interval = (Instant::now(), Snapshot::default());
    let reason = loop {
        std::thread::sleep(Duration::from_millis(20));
        session.flush_logs();
        if interrupted.load(Ordering::Relaxed) {
            break StopReason::Interrupted;
        }
        if let Some(child) = &child
            && let Some(code) = child.try_wait()?
        {
            break StopReason::CommandExited(code);
        }
        if options.duration.is_some_and(|d| started.elapsed() >= d) {
            break StopReason::Duration;
        }
        if child.is_none() && !options.all && !any_alive(&session.tracked_pids()?) {
            break StopReason::TargetsExited;
        }
        if let Some(every) = options.interval
            && last_interval.0.elapsed() >= every
        {
            let now = session.snapshot()?;
            let delta = now.since(&last_interval.1);
            println!("--- last {:.2}s ---", last_interval.0.elapsed().as_secs_f64());
            print!("{}", table::syscall_table(&delta));
            let _ = std::io::stdout().flush();
            last_interval = (Instant::now(), now);
        }
    };
    let snapshot = session.snapshot()?;
    session.flush_logs();
    drop(session);
    let elapsed = started.elapsed();

    let ended = match reason {
        StopReason::Duration => "duration reached".to_owned(),
        StopReason::Interrupted => "interrupted".to_owned(),
        StopReason::CommandExited(code) => format!("command exited with status {code}"),
        StopReason::TargetsExited => "every traced process exited".to_owned(),
    };
    println!("Traced for {:.2}s ({ended}).", elapsed.as_secs_f64());
    print!("{}", table::syscall_table(&snapshot));
    if snapshot.processes.len() > 1 {
        println!();
        println!("Per process:");
        print!("{}", table::process_table(&snapshot));
    }
    if options.histograms {
        for s in snapshot.syscalls.iter().filter(|s| s.calls > 0) {
            println!();
            print!("{}", log2_histogram(&format!("{} latency", s.name), &s.latency, true));
            if let Some(events) = s.events.as_ref().filter(|e| e.total() > 0) {
                println!();
                print!("{}", log2_histogram(&format!("{} events per call", s.name), events, false));
            }
        }
    }
    // A command we started that is still running when tracing stops goes with us.
    if let Some(child) = child
        && !matches!(reason, StopReason::CommandExited(_))
    {
        child.kill();
    }
    Ok(match reason {
        StopReason::CommandExited(code) => code,
        _ => 0,
    })
}

fn any_alive(pids: &[u32]) -> bool {
    pids.iter().any(|pid| {
        // A zombie still has /proc/PID; its state letter is Z.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
            .is_some_and(|zombie| !zombie)
    })
}

/// A child process stopped just before `execve`, so it can be tracked before its first syscall.
#[derive(Debug)]
pub struct StoppedChild {
    /// Its pid.
    pub pid: u32,
}

impl StoppedChild {
    /// Forks; the child stops itself with SIGSTOP and, once resumed, execs `command`.
    pub fn spawn(command: &[String]) -> Result<Self> {
        let program = resolve_program(&command[0])?;
        let program = CString::new(program.as_os_str().as_bytes()).context("NUL in the command path")?;
        let args: Vec<CString> = command
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .context("NUL byte in a command argument")?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        // SAFETY: fork in a process that may have threads: the child calls only async-signal-safe
        // functions (raise, execv, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            bail!("fork failed: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                libc::raise(libc::SIGSTOP);
                libc::execv(program.as_ptr(), argv.as_ptr());
                libc::_exit(127);
            }
        }
        let child = Self { pid: pid as u32 };
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
            bail!("could not resume the command: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The exit code if the child has exited (128 + signal number if killed by a signal).
    pub fn try_wait(&self) -> Result<Option<i32>> {
        let mut status = 0;
        // SAFETY: waiting for our own child without blocking.
        let rc = unsafe { libc::waitpid(self.pid as i32, &mut status, libc::WNOHANG) };
        if rc < 0 {
            bail!("waiting for the command: {}", std::io::Error::last_os_error());
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

    /// Kills and reaps the child.
    pub fn kill(self) {
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
            libc::kill(self.pid as i32, libc::SIGCONT);
            libc::waitpid(self.pid as i32, std::ptr::null_mut(), 0);
        }
    }
}

/// Finds `name` on PATH like a shell does (names with a slash are taken as they are).
fn resolve_program(name: &str) -> Result<PathBuf> {
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
    let path_var = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
        .with_context(|| format!("command not found: '{name}' is not on PATH"))
}
