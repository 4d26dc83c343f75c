//! The servers measured by syscall-profiler: epoll echo/HTTP servers in the LT, ET, LT-PURE and
//! MP designs of the reference experiments, written directly on libc's epoll.
//!
//! Syscalls a client connection costs (the profiler counts these): `accept` (LT and ET loop it
//! until EAGAIN, LT-PURE calls it once per event), `fcntl` ×2 (F_GETFL, F_SETFL O_NONBLOCK),
//! `epoll_ctl` ADD (plus MOD when interest changes), `read`, `write`, `close`, and
//! `epoll_wait` with timeout -1 (shutdown arrives through a signalfd in the same epoll set).

pub mod conn;
pub mod event_loop;
pub mod mp;
pub mod protocol;
pub mod sys;
pub mod variant;

use std::{
    fmt,
    io::Write,
    net::{IpAddr, SocketAddr},
};

use anyhow::{Context, Result};
pub use variant::Variant;

use crate::{
    event_loop::{EventLoop, LoopConfig},
    protocol::Protocol,
    sys::SignalFd,
};

/// Everything the command line configures.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Server design (`--mode`).
    pub variant: Variant,
    /// Echo or HTTP.
    pub protocol: Protocol,
    /// LT/LT-PURE only: keep EPOLLOUT registered on every client.
    pub lt_epollout: bool,
    /// Address to listen on.
    pub bind: IpAddr,
    /// Port to listen on; 0 picks a free one.
    pub port: u16,
    /// CPUs to pin to (like `taskset -c`); `None` leaves affinity alone.
    pub cpus: Option<Vec<usize>>,
    /// listen(2) backlog.
    pub backlog: i32,
    /// epoll_wait event array size.
    pub max_events: usize,
    /// Read size and per-connection pending-output limit, in bytes.
    pub buffer_size: usize,
    /// RLIMIT_NOFILE to set; `None` leaves it alone.
    pub nofile: Option<u64>,
    /// MP only: number of worker processes; `None` means one per allowed CPU.
    pub workers: Option<usize>,
}

/// A mistake on the command line: reported as one `Error:` line with exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

impl ServerConfig {
    /// Settings for each event loop.
    pub fn loop_config(&self) -> LoopConfig {
        LoopConfig {
            variant: self.variant,
            always_epollout: self.lt_epollout && self.variant.is_level_triggered(),
            protocol: self.protocol,
            buffer_size: self.buffer_size,
            max_events: self.max_events,
        }
    }

    /// The address to bind.
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind, self.port)
    }
}

/// Applies process-wide settings (SIGPIPE, RLIMIT_NOFILE, CPU affinity) and runs the server
/// until SIGTERM/SIGINT. Returns the process exit code.
pub fn run(config: &ServerConfig) -> Result<i32> {
    sys::ignore_sigpipe().context("ignoring SIGPIPE failed")?;
    if let Some(limit) = config.nofile {
        sys::raise_nofile(limit).with_context(|| {
            format!("--nofile {limit}: setrlimit(RLIMIT_NOFILE) failed; use a smaller value or run as root")
        })?;
    }
    if let Some(cpus) = &config.cpus {
        sys::set_affinity(cpus).with_context(|| {
            let online = std::thread::available_parallelism().map_or(0, usize::from);
            let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
            format!(
                "--cpus {}: sched_setaffinity failed; this machine has {online} CPUs (0-based)",
                list.join(",")
            )
        })?;
    }
    match config.variant {
        Variant::Mp => mp::run(config),
        Variant::Lt | Variant::LtPure | Variant::Et => run_single(config),
    }
}

/// Binds and listens on `addr`, with a message saying what to do on failure.
pub fn listen(addr: SocketAddr, backlog: i32, reuse_port: bool) -> Result<std::os::fd::RawFd> {
    let fd = sys::bind_tcp(addr, reuse_port)
        .with_context(|| format!("cannot bind {addr}; pick another --port or --bind address"))?;
    if let Err(e) = sys::listen(fd, backlog) {
        sys::close(fd);
        return Err(e).with_context(|| format!("listen on {addr} failed"));
    }
    Ok(fd)
}

/// Prints the one readiness line runners wait for.
pub fn announce(addr: SocketAddr) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {addr}")
        .and_then(|()| stdout.flush())
        .context("writing to stdout failed")
}

/// Writes one line to stderr with a single `write(2)`, so lines from several workers sharing
/// the same stderr never interleave (`eprintln!` may split a line into several writes).
pub fn log_line(line: &str) {
    let line = format!("{line}\n");
    let _ = sys::write(libc::STDERR_FILENO, line.as_bytes());
}

/// LT, LT-PURE and ET: one process, one loop.
fn run_single(config: &ServerConfig) -> Result<i32> {
    let signals =
        SignalFd::new(&[libc::SIGTERM, libc::SIGINT]).context("creating the signalfd failed")?;
    let listener = listen(config.socket_addr(), config.backlog, false)?;
    let event_loop = EventLoop::new(config.loop_config(), listener, signals)?;
    announce(sys::local_addr(listener).context("getsockname failed")?)?;
    let stats = event_loop.run()?;
    log_line(&format!(
        "accepted {} connections; closed {} open ones at shutdown",
        stats.accepted, stats.open_at_shutdown
    ));
    Ok(0)
}

/// Parses a CPU list such as `0`, `0-3` or `0,2,4-5` (the `taskset -c` syntax).
pub fn parse_cpu_list(list: &str) -> Result<Vec<usize>, UsageError> {
    let bad = || {
        UsageError(format!(
            "--cpus '{list}' is not a CPU list; write it like 0 or 0-3 or 0,2,4-5"
        ))
    };
    let max = libc::CPU_SETSIZE as usize;
    let mut cpus = Vec::new();
    for item in list.split(',') {
        let (first, last) = if let Some((a, b)) = item.trim().split_once('-') {
            (
                a.trim().parse::<usize>().map_err(|_| bad())?,
                b.trim().parse::<usize>().map_err(|_| bad())?,
            )
        } else {
            let cpu = item.trim().parse::<usize>().map_err(|_| bad())?;
            (cpu, cpu)
        };
        if first > last || last >= max {
            return Err(bad());
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("0-2,5,1").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("99999").is_err());
    }
}
