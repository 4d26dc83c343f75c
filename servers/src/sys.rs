//! Thin safe wrappers around the libc calls the servers make.
//!
//! Every wrapper issues exactly one syscall (except where noted), so the profiler's syscall
//! tables map one-to-one onto the calls made here. Client sockets use plain `read`/`write`
//! (never `recv`/`send`) and are closed with `close` (never `shutdown`).

use std::{
    io,
    mem::{size_of, zeroed},
    net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6},
    os::fd::RawFd,
    ptr,
};

/// Returns the error of the last libc call unless `ret` is non-negative.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Returns the error of the last libc call unless `ret` is non-negative (size-returning calls).
fn check_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// `read(2)` into `buf`; `Ok(0)` means end of stream.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe a valid, writable slice.
    check_size(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// `write(2)` from `buf`; may write fewer bytes than given.
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe a valid, readable slice.
    check_size(unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) })
}

/// `close(2)`; errors are ignored because the descriptor is gone either way.
pub fn close(fd: RawFd) {
    // SAFETY: closing a descriptor we own; the caller forgets it afterwards.
    unsafe { libc::close(fd) };
}

/// A descriptor on `/dev/null`, held in reserve (see `EventLoop::shed_connection`); -1 if
/// it cannot be opened.
pub fn open_spare_fd() -> RawFd {
    // SAFETY: a NUL-terminated constant path.
    unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }
}

/// `accept(2)` without peer address; the new socket is blocking until [`set_nonblocking`].
///
/// The servers use `accept` + two `fcntl` calls rather than `accept4(SOCK_NONBLOCK)` because
/// that is what the reference C servers do, so syscall tables compare row for row.
pub fn accept(listener: RawFd) -> io::Result<RawFd> {
    // SAFETY: null address pointers are allowed and mean "don't report the peer".
    check(unsafe { libc::accept(listener, ptr::null_mut(), ptr::null_mut()) })
}

/// Sets `O_NONBLOCK` with `fcntl(F_GETFL)` then `fcntl(F_SETFL)`, as the reference does.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fcntl on a descriptor we own.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    Ok(())
}

/// Sets an integer socket option.
fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value points to a live c_int of the given size.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Converts a Rust socket address to a `sockaddr_storage` and its length.
fn to_sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large enough and suitably aligned for sockaddr_in.
            let sin = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from(*a.ip()).to_be();
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: sockaddr_storage is large enough and suitably aligned for sockaddr_in6.
            let sin6 = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            sin6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Creates a non-blocking TCP socket bound to `addr` (SO_REUSEADDR, optionally SO_REUSEPORT).
///
/// The socket is not listening yet; call [`listen`].
pub fn bind_tcp(addr: SocketAddr, reuse_port: bool) -> io::Result<RawFd> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket creation.
    let fd = check(unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    let setup = || -> io::Result<()> {
        set_int_option(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        if reuse_port {
            set_int_option(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
        }
        let (storage, len) = to_sockaddr(addr);
        // SAFETY: storage holds a valid address of length len.
        check(unsafe { libc::bind(fd, (&raw const storage).cast(), len) })?;
        Ok(())
    };
    setup().inspect_err(|_| close(fd))?;
    Ok(fd)
}

/// `listen(2)` with the given backlog.
pub fn listen(fd: RawFd, backlog: i32) -> io::Result<()> {
    // SAFETY: plain listen on a socket we own.
    check(unsafe { libc::listen(fd, backlog) })?;
    Ok(())
}

/// The address a socket is bound to (resolves port 0 to the chosen port).
pub fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: sockaddr_storage is plain old data.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: storage and len describe a writable buffer of that size.
    check(unsafe { libc::getsockname(fd, (&raw mut storage).cast(), &raw mut len) })?;
    match libc::c_int::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in.
            let sin = unsafe { &*(&raw const storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Ok(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the kernel wrote a sockaddr_in6.
            let sin6 = unsafe { &*(&raw const storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Ok(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                0,
                sin6.sin6_scope_id,
            )))
        }
        family => Err(io::Error::other(format!(
            "unexpected address family {family}"
        ))),
    }
}

/// An epoll instance (closed on drop).
#[derive(Debug)]
pub struct Epoll {
    fd: RawFd,
}

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain epoll creation.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Self { fd })
    }

    /// One `epoll_ctl` call; the event's data is the watched descriptor itself.
    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events,
            u64: fd as u64,
        };
        // SAFETY: event is a valid epoll_event for the duration of the call.
        check(unsafe { libc::epoll_ctl(self.fd, op, fd, &raw mut event) })?;
        Ok(())
    }

    /// `epoll_ctl(EPOLL_CTL_ADD)`.
    pub fn add(&self, fd: RawFd, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events)
    }

    /// `epoll_ctl(EPOLL_CTL_MOD)`.
    pub fn modify(&self, fd: RawFd, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events)
    }

    /// `epoll_wait`; returns how many entries of `events` were filled. `-1` blocks indefinitely.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        let max = i32::try_from(events.len()).unwrap_or(i32::MAX);
        // SAFETY: events is a writable array of at least `max` entries.
        let n = check(unsafe { libc::epoll_wait(self.fd, events.as_mut_ptr(), max, timeout_ms) })?;
        Ok(n as usize)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        close(self.fd);
    }
}

/// A signal set built from signal numbers.
fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain old data; sigemptyset initialises it.
    let mut set: libc::sigset_t = unsafe { zeroed() };
    // SAFETY: set is a valid sigset_t.
    unsafe { libc::sigemptyset(&raw mut set) };
    for &signal in signals {
        // SAFETY: set is a valid sigset_t.
        unsafe { libc::sigaddset(&raw mut set, signal) };
    }
    set
}

/// Blocks `signals` for this thread (and children forked from it).
pub fn block_signals(signals: &[libc::c_int]) -> io::Result<()> {
    let set = sigset(signals);
    // SAFETY: set is a valid sigset_t.
    let ret = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, ptr::null_mut()) };
    if ret != 0 {
        return Err(io::Error::from_raw_os_error(ret));
    }
    Ok(())
}

/// A non-blocking signalfd: blocked signals become readable events instead of interruptions.
#[derive(Debug)]
pub struct SignalFd {
    fd: RawFd,
}

impl SignalFd {
    /// Blocks `signals` and creates a non-blocking signalfd receiving them.
    pub fn new(signals: &[libc::c_int]) -> io::Result<Self> {
        block_signals(signals)?;
        let set = sigset(signals);
        // SAFETY: set is a valid sigset_t.
        let fd = check(unsafe {
            libc::signalfd(-1, &raw const set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC)
        })?;
        Ok(Self { fd })
    }

    /// The descriptor, for registering in epoll or poll.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Reads one pending signal; `Ok(None)` when none is pending.
    pub fn take(&self) -> io::Result<Option<libc::c_int>> {
        // SAFETY: signalfd_siginfo is plain old data.
        let mut info: libc::signalfd_siginfo = unsafe { zeroed() };
        let size = size_of::<libc::signalfd_siginfo>();
        loop {
            // SAFETY: info is a writable buffer of `size` bytes.
            let n = unsafe { libc::read(self.fd, (&raw mut info).cast(), size) };
            if n == size as isize {
                return Ok(Some(info.ssi_signo as libc::c_int));
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(None),
                _ => return Err(err),
            }
        }
    }

    /// Waits up to `timeout_ms` (-1: forever) for a signal, with `poll(2)`.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<Option<libc::c_int>> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is a valid pollfd array of length 1.
        let ret = unsafe { libc::poll(&raw mut pfd, 1, timeout_ms) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(err)
            };
        }
        self.take()
    }
}

impl Drop for SignalFd {
    fn drop(&mut self) {
        close(self.fd);
    }
}

/// Ignores SIGPIPE so a write to a vanished client returns EPIPE instead of killing us
/// (`write(2)` has no MSG_NOSIGNAL).
pub fn ignore_sigpipe() -> io::Result<()> {
    // SAFETY: installing SIG_IGN is always sound.
    if unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling process (and future children) to `cpus`, like `taskset -c`.
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; CPU_ZERO/CPU_SET initialise it.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    for &cpu in cpus {
        // SAFETY: CPU_SET bounds-checks cpu against the set size.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: set is a valid cpu_set_t of the given size.
    check(unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set) })?;
    Ok(())
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain old data.
    let mut set: libc::cpu_set_t = unsafe { zeroed() };
    // SAFETY: set is a writable cpu_set_t of the given size.
    check(unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut set) })?;
    // SAFETY: CPU_ISSET bounds-checks cpu against the set size.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Raises RLIMIT_NOFILE to `limit` (soft and, if needed, hard).
pub fn raise_nofile(limit: u64) -> io::Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: current is a writable rlimit.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut current) })?;
    let wanted = libc::rlimit {
        rlim_cur: limit,
        rlim_max: current.rlim_max.max(limit),
    };
    // SAFETY: wanted is a valid rlimit.
    check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const wanted) }).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "{e}; the hard limit is {} and raising it needs CAP_SYS_RESOURCE",
                current.rlim_max
            ),
        )
    })?;
    Ok(())
}

/// `pipe2(O_CLOEXEC)`: returns (read end, write end).
pub fn pipe() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a writable array of two ints.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

/// Which side of a [`fork`] we are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forked {
    /// In the parent; the child's pid.
    Parent(libc::pid_t),
    /// In the child.
    Child,
}

/// `fork(2)`. Only sound to call while the process is single-threaded, which the servers are.
pub fn fork() -> io::Result<Forked> {
    // SAFETY: the servers never start threads, so the child inherits a consistent state.
    let pid = check(unsafe { libc::fork() })?;
    Ok(if pid == 0 {
        Forked::Child
    } else {
        Forked::Parent(pid)
    })
}

/// Sends `signal` to `pid`; errors (e.g. already reaped) are ignored.
pub fn kill(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, signal) };
}

/// How a child process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Code(code) => write!(f, "exited with code {code}"),
            Self::Signal(signal) => write!(f, "was killed by signal {signal}"),
        }
    }
}

/// Reaps one exited child without blocking; `Ok(None)` when no child has exited.
pub fn try_reap() -> io::Result<Option<(libc::pid_t, ExitStatus)>> {
    let mut status = 0;
    // SAFETY: status is a writable int.
    let pid = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
    if pid < 0 {
        let err = io::Error::last_os_error();
        return if err.raw_os_error() == Some(libc::ECHILD) {
            Ok(None)
        } else {
            Err(err)
        };
    }
    if pid == 0 {
        return Ok(None);
    }
    let exit = if libc::WIFSIGNALED(status) {
        ExitStatus::Signal(libc::WTERMSIG(status))
    } else {
        ExitStatus::Code(libc::WEXITSTATUS(status))
    };
    Ok(Some((pid, exit)))
}

/// Terminates the calling process immediately, without running destructors or atexit hooks
/// (what a forked child must do so it never unwinds into the parent's code).
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}
