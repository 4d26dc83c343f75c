//! MP: N forked worker processes, each with its own SO_REUSEPORT listening socket and its own
//! edge-triggered event loop. The parent only supervises.
//!
//! Workers are created with plain `fork()` (no exec), so a tracer following forks of the parent
//! sees every worker. The parent waits until every worker listens before announcing readiness,
//! forwards SIGTERM/SIGINT, reaps workers, and reports any worker that dies (then stops the
//! others and exits 1, so a benchmark never silently runs on fewer workers).

use std::{
    os::fd::RawFd,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::{
    ServerConfig,
    event_loop::EventLoop,
    log_line,
    sys::{self, ExitStatus, Forked, SignalFd},
};

/// How long workers get to exit after SIGTERM before they are killed.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(800);

/// A forked worker the parent still waits for.
#[derive(Debug, Clone, Copy)]
struct Worker {
    index: usize,
    pid: libc::pid_t,
}

/// Runs the MP server: forks the workers, announces readiness, supervises. Returns the exit code.
pub fn run(config: &ServerConfig) -> Result<i32> {
    let count = match config.workers {
        Some(n) => n,
        None => sys::allowed_cpus()
            .context("sched_getaffinity failed")?
            .len()
            .max(1),
    };
    // Blocked before forking so no signal is lost between fork and the workers' own signalfd.
    let signals = SignalFd::new(&[libc::SIGTERM, libc::SIGINT, libc::SIGCHLD])
        .context("creating the signalfd failed")?;

    // Resolve port 0 once so every worker joins the same SO_REUSEPORT group. This socket never
    // listens, so it receives no connections; it only holds the port until the workers listen.
    let probe = sys::bind_tcp(config.socket_addr(), true).with_context(|| {
        format!(
            "cannot bind {}; pick another --port or --bind address",
            config.socket_addr()
        )
    })?;
    let addr = sys::local_addr(probe).context("getsockname failed")?;
    let (ready_read, ready_write) = sys::pipe().context("pipe failed")?;

    let mut workers = Vec::with_capacity(count);
    for index in 0..count {
        match sys::fork() {
            Ok(Forked::Child) => {
                sys::close(signals.fd());
                sys::close(probe);
                sys::close(ready_read);
                let mut worker_config = config.clone();
                worker_config.port = addr.port();
                let code = match run_worker(index, &worker_config, ready_write) {
                    Ok(()) => 0,
                    Err(e) => {
                        log_line(&format!("Error: worker {index}: {e:#}"));
                        1
                    }
                };
                sys::exit_now(code);
            }
            Ok(Forked::Parent(pid)) => {
                log_line(&format!("worker {index}: pid {pid}"));
                workers.push(Worker { index, pid });
            }
            Err(e) => {
                stop_all(&workers, &signals);
                return Err(e).context("fork failed");
            }
        }
    }
    sys::close(ready_write);

    // Each worker writes one byte once it listens; EOF early means one died first.
    let ready = wait_ready(ready_read, count);
    sys::close(ready_read);
    sys::close(probe);
    if ready < count {
        stop_all(&workers, &signals);
        bail!("only {ready} of {count} workers started listening (see the worker errors above)");
    }
    crate::announce(addr)?;
    supervise(workers, &signals)
}

/// The body of one worker process.
fn run_worker(index: usize, config: &ServerConfig, ready_write: RawFd) -> Result<()> {
    let signals =
        SignalFd::new(&[libc::SIGTERM, libc::SIGINT]).context("creating the signalfd failed")?;
    let listener = crate::listen(config.socket_addr(), config.backlog, true)?;
    let event_loop = EventLoop::new(config.loop_config(), listener, signals)?;
    sys::write(ready_write, b"r").context("reporting readiness to the parent failed")?;
    sys::close(ready_write);
    let stats = event_loop.run()?;
    log_line(&format!(
        "worker {index} (pid {}): accepted {} connections; closed {} open ones at shutdown",
        std::process::id(),
        stats.accepted,
        stats.open_at_shutdown
    ));
    Ok(())
}

/// Reads readiness bytes until `count` arrived or every writer is gone; returns how many arrived.
fn wait_ready(ready_read: RawFd, count: usize) -> usize {
    let mut ready = 0;
    let mut buf = [0u8; 64];
    while ready < count {
        match sys::read(ready_read, &mut buf) {
            Ok(0) => break,
            Ok(n) => ready += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    ready
}

/// Waits for signals and worker exits until every worker is gone. Returns the exit code.
fn supervise(mut live: Vec<Worker>, signals: &SignalFd) -> Result<i32> {
    let mut deadline: Option<Instant> = None;
    let mut killed = false;
    let mut failed = false;
    while !live.is_empty() {
        let mut timeout_ms = -1;
        if let (Some(at), false) = (deadline, killed) {
            let left = at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                for worker in &live {
                    log_line(&format!(
                        "Error: worker {} (pid {}) ignored SIGTERM; killing it",
                        worker.index, worker.pid
                    ));
                    sys::kill(worker.pid, libc::SIGKILL);
                }
                killed = true;
                failed = true;
            } else {
                timeout_ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
            }
        }
        let signal = signals
            .wait(timeout_ms)
            .context("waiting for signals failed")?;
        if matches!(signal, Some(libc::SIGTERM | libc::SIGINT)) && deadline.is_none() {
            deadline = Some(begin_shutdown(&live));
        }
        while let Some((pid, status)) = sys::try_reap().context("waitpid failed")? {
            let Some(pos) = live.iter().position(|w| w.pid == pid) else {
                continue;
            };
            let worker = live.swap_remove(pos);
            if deadline.is_none() || status != ExitStatus::Code(0) {
                log_line(&format!(
                    "Error: worker {} (pid {pid}) died: it {status}",
                    worker.index
                ));
                failed = true;
            }
            if deadline.is_none() {
                deadline = Some(begin_shutdown(&live));
            }
        }
    }
    Ok(i32::from(failed))
}

/// Forwards SIGTERM to every live worker; returns when they must be gone.
fn begin_shutdown(live: &[Worker]) -> Instant {
    for worker in live {
        sys::kill(worker.pid, libc::SIGTERM);
    }
    Instant::now() + SHUTDOWN_GRACE
}

/// Best-effort stop of already forked workers after a startup failure.
fn stop_all(workers: &[Worker], signals: &SignalFd) {
    for worker in workers {
        sys::kill(worker.pid, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut reaped = 0;
    while reaped < workers.len() && Instant::now() < deadline {
        match sys::try_reap() {
            Ok(Some(_)) => reaped += 1,
            Ok(None) => {
                let _ = signals.wait(100);
            }
            Err(_) => break,
        }
    }
}
