//! The kernel programs loaded into the real kernel (needs root, as in CI): one behaviour per test.
//!
//! Workloads run in forked children that stop themselves before their first timed syscall, so a
//! test knows exactly which calls they make: nothing from a runtime or the test harness.

use std::{
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use profiler::{
    bpf::{GroupExit, Programs, SchedAttach, SchedFront, Session, SessionConfig, Syscall, Target},
    stats::Snapshot,
};
use profiler_common::ErrnoClass;

mod common;

use common::serial;

/// A forked child, stopped (SIGSTOP) before it runs `work`.
#[derive(Clone, Copy)]
struct Child {
    pid: i32,
}

impl Child {
    /// Forks; the child stops itself, then runs `work` (libc calls only) and exits 0.
    fn stopped(work: impl FnOnce()) -> Self {
        // SAFETY: the child runs only raw libc calls and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                libc::raise(libc::SIGSTOP);
                work();
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: our own child.
        let rc = unsafe { libc::waitpid(pid, &raw mut status, libc::WUNTRACED) };
        assert!(rc == pid && libc::WIFSTOPPED(status), "child did not stop");
        Self { pid }
    }

    fn pid(self) -> u32 {
        self.pid as u32
    }

    fn resume(self) {
        // SAFETY: our own child.
        assert_eq!(unsafe { libc::kill(self.pid, libc::SIGCONT) }, 0);
    }

    /// Waits until the child stops itself again (it called `raise(SIGSTOP)`).
    fn wait_stopped(&self) {
        let mut status = 0;
        // SAFETY: our own child.
        let rc = unsafe { libc::waitpid(self.pid, &raw mut status, libc::WUNTRACED) };
        assert!(
            rc == self.pid && libc::WIFSTOPPED(status),
            "child did not stop again"
        );
    }

    /// Waits for the exit and asserts it was clean.
    fn join(self) {
        let mut status = 0;
        // SAFETY: our own child.
        unsafe { libc::waitpid(self.pid, &raw mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child failed: {status}"
        );
    }
}

fn session(syscalls: &[&str], target: Target) -> Session {
    session_with(syscalls, target, GroupExit::Auto)
}

fn session_with(syscalls: &[&str], target: Target, group_exit: GroupExit) -> Session {
    let syscalls = Syscall::resolve_list(syscalls).expect("syscall names resolve");
    Session::start(&SessionConfig {
        group_exit,
        ..SessionConfig::new(syscalls, target)
    })
    .unwrap_or_else(|e| panic!("loading the kernel programs failed (are we root?): {e}"))
}

/// Starts a thread of the calling (forked, single-threaded) process running `entry(arg)` on a
/// fresh stack, with raw clone(2) semantics: the thread must leave with `SYS_exit`.
///
/// # Safety
/// `entry` may only make raw libc calls; `arg` must stay valid while it runs.
unsafe fn spawn_thread(
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) {
    const STACK: usize = 256 * 1024;
    // SAFETY: an anonymous private mapping; the thread owns it until the process exits.
    unsafe {
        let stack = libc::mmap(
            std::ptr::null_mut(),
            STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        );
        assert_ne!(stack, libc::MAP_FAILED);
        let flags = libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM;
        let tid = libc::clone(entry, stack.cast::<u8>().add(STACK).cast(), flags, arg);
        if tid < 0 {
            libc::_exit(3);
        }
    }
}

/// Set by a thread of a forked child when it is done (the child's own copy of the flag).
static THREAD_DONE: AtomicU32 = AtomicU32::new(0);

/// Waits, yielding (an untraced call), until a thread has set [`THREAD_DONE`].
fn wait_thread_done() {
    while THREAD_DONE.load(Ordering::Acquire) == 0 {
        // SAFETY: no preconditions.
        unsafe { libc::sched_yield() };
    }
}

/// A process's first thread exits (alone) before its second thread makes its calls: the
/// process stays tracked until that last thread exits, then stops being tracked, so a new
/// process that reuses the pid is not traced. Both ways of seeing the last exit are checked on
/// every kernel: `group_dead` from the record (6.16+) and `signal->live` through BTF.
#[test]
fn a_process_is_tracked_until_its_last_thread_exits_on_both_exit_paths() {
    let _serial = serial();
    const N: u64 = 5_000;
    extern "C" fn second_thread(_: *mut libc::c_void) -> libc::c_int {
        // SAFETY: raw libc calls only.
        unsafe {
            // Let the first thread exit first.
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 50_000_000,
            };
            libc::nanosleep(&raw const pause, std::ptr::null_mut());
            close_dups(N);
            libc::syscall(libc::SYS_exit_group, 0);
        }
        0
    }
    for group_exit in [GroupExit::Auto, GroupExit::TaskSignal] {
        let mut session = session_with(&["close"], Target::Processes(vec![]), group_exit);
        let child = Child::stopped(|| {
            // SAFETY: raw libc calls; the thread leaves with exit_group.
            unsafe {
                spawn_thread(second_thread, std::ptr::null_mut());
                libc::syscall(libc::SYS_exit, 0);
            }
        });
        session.track(child.pid()).unwrap();
        child.resume();
        child.join();
        let snap = snapshot(&session);
        assert_eq!(
            snap.syscall("close").unwrap().calls,
            N,
            "{group_exit:?}: the closes of the thread that outlived the first were counted"
        );
        assert!(
            !session.is_tracking(child.pid()).unwrap(),
            "{group_exit:?}: the process is no longer tracked after its last thread exited"
        );
    }
}

/// Two threads of one process pinned to one CPU, 500000 `close(-1)` each: every call is
/// counted, every error is EBADF. The per-CPU counters are updated without atomics; that is
/// right because tracepoint programs run with preemption disabled, on PREEMPT_RT too (see
/// profiler-ebpf), and this is the test that would catch two tasks interleaving on one CPU.
#[test]
fn two_threads_on_one_cpu_count_every_close_exactly() {
    let _serial = serial();
    const PER_THREAD: u64 = 500_000;
    extern "C" fn second_thread(_: *mut libc::c_void) -> libc::c_int {
        // SAFETY: raw libc calls only.
        unsafe {
            for _ in 0..PER_THREAD {
                libc::close(-1);
            }
            THREAD_DONE.store(1, Ordering::Release);
            libc::syscall(libc::SYS_exit, 0);
        }
        0
    }
    let mut session = session(&["close"], Target::Processes(vec![]));
    let child = Child::stopped(|| {
        // SAFETY: raw libc calls only.
        unsafe {
            let mut cpus: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut cpus);
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const cpus);
            spawn_thread(second_thread, std::ptr::null_mut());
            for _ in 0..PER_THREAD {
                libc::close(-1);
            }
        }
        wait_thread_done();
    });
    session.track(child.pid()).unwrap();
    child.resume();
    child.join();
    let snap = snapshot(&session);
    let close = snap.syscall("close").unwrap();
    assert_eq!(close.calls, 2 * PER_THREAD, "close calls");
    assert_eq!(close.errors.get(ErrnoClass::BadFd), 2 * PER_THREAD, "EBADF");
    assert_eq!(close.errors.total(), 2 * PER_THREAD, "no other errno");
    assert_eq!(close.latency.total(), 2 * PER_THREAD, "histogram");
    assert_eq!(snap.dropped.lost(), 0, "dropped: {:?}", snap.dropped);
}

fn snapshot(session: &Session) -> Snapshot {
    session.snapshot().expect("reading the maps")
}

/// dup()+close() `n` times: exactly `n` close calls.
fn close_dups(n: u64) {
    for _ in 0..n {
        // SAFETY: dup of stdin's descriptor (or a failing dup, whose -1 close also counts).
        unsafe { libc::close(libc::dup(0)) };
    }
}

#[test]
fn counts_every_close_exactly_with_nothing_dropped() {
    let _serial = serial();
    const N: u64 = 100_000;
    let mut session = session(&["close"], Target::Processes(vec![]));
    let child = Child::stopped(|| close_dups(N));
    session.track(child.pid()).unwrap();
    child.resume();
    child.join();
    let snap = snapshot(&session);
    let close = snap.syscall("close").unwrap();
    assert_eq!(close.calls, N, "close calls");
    assert_eq!(close.dropped, 0, "exits without entry");
    assert_eq!(snap.dropped.lost(), 0, "dropped events: {:?}", snap.dropped);
    assert_eq!(close.latency.total(), N, "histogram holds every call");
    assert!(close.min_ns > 0 && close.min_ns <= close.max_ns);
    assert!(close.total_ns >= close.min_ns * N && close.total_ns <= close.max_ns * N);
}

#[test]
fn untracked_process_adds_nothing() {
    let _serial = serial();
    const N: u64 = 20_000;
    let mut session = session(&["close"], Target::Processes(vec![]));
    let tracked = Child::stopped(|| close_dups(N));
    let other = Child::stopped(|| close_dups(3 * N));
    session.track(tracked.pid()).unwrap();
    other.resume();
    tracked.resume();
    tracked.join();
    other.join();
    let snap = snapshot(&session);
    assert_eq!(snap.syscall("close").unwrap().calls, N);
    assert!(
        snap.process(other.pid()).is_none(),
        "untracked pid appears: {:?}",
        snap.processes
    );
}

#[test]
fn forked_children_are_followed_and_counted_under_their_own_pid() {
    let _serial = serial();
    const PARENT_CLOSES: u64 = 300;
    const CHILD_CLOSES: u64 = 700;
    let mut pipe = [0; 2];
    // SAFETY: a valid array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    let mut session = session(&["close"], Target::Processes(vec![]));
    let parent = Child::stopped(move || {
        // SAFETY: libc calls only; the grandchild reports nothing but exits.
        unsafe {
            let grandchild = libc::fork();
            if grandchild == 0 {
                close_dups(CHILD_CLOSES);
                libc::_exit(0);
            }
            libc::write(pipe[1], (&raw const grandchild).cast(), 4);
            libc::waitpid(grandchild, std::ptr::null_mut(), 0);
            close_dups(PARENT_CLOSES);
        }
    });
    session.track(parent.pid()).unwrap();
    parent.resume();
    let mut grandchild: i32 = 0;
    // SAFETY: reading 4 bytes into an i32.
    assert_eq!(
        unsafe { libc::read(pipe[0], (&raw mut grandchild).cast(), 4) },
        4
    );
    parent.join();
    let snap = snapshot(&session);
    let count = |pid: u32| snap.process(pid).map_or(0, |p| p.syscalls[0].calls);
    assert_eq!(count(parent.pid()), PARENT_CLOSES);
    assert_eq!(
        count(grandchild as u32),
        CHILD_CLOSES,
        "processes: {:?}",
        snap.processes
    );
    assert_eq!(
        snap.syscall("close").unwrap().calls,
        PARENT_CLOSES + CHILD_CLOSES
    );
    assert!(
        session
            .tracked_pids()
            .unwrap()
            .contains(&(grandchild as u32))
    );
}

#[test]
fn pipe_read_waiting_20ms_measures_20ms() {
    let _serial = serial();
    const READS: usize = 25;
    let mut pipe = [0; 2];
    // SAFETY: a valid array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    let mut session = session(&["read"], Target::Processes(vec![]));
    let reader = Child::stopped(move || {
        let mut byte = 0u8;
        for _ in 0..READS {
            // SAFETY: a blocking one-byte read into a local.
            unsafe { libc::read(pipe[0], (&raw mut byte).cast(), 1) };
        }
    });
    session.track(reader.pid()).unwrap();
    reader.resume();
    let mut intervals = Vec::with_capacity(READS);
    let mut last = std::time::Instant::now();
    for _ in 0..READS {
        std::thread::sleep(Duration::from_millis(50));
        // SAFETY: writing one byte from a local.
        unsafe { libc::write(pipe[1], b"x".as_ptr().cast(), 1) };
        let now = std::time::Instant::now();
        intervals.push(now - last);
        last = now;
    }
    reader.join();
    let snap = snapshot(&session);
    let read = snap.syscall("read").unwrap();
    assert_eq!(read.calls, READS as u64);
    // A read waits from just after the previous write to the next one: at most the writer's
    // interval (20 ms plus how late its sleep ran, which is more under emulation), at least
    // 20 ms less the reader's wake-up. 1 ms on either side covers the bucket (at most 1/32 of
    // 20 ms wide).
    intervals.sort();
    let interval = u64::try_from(intervals[READS / 2].as_nanos()).unwrap();
    let p50 = read.latency.value_at_quantile(0.5);
    assert!(
        (19_000_000..=interval + 1_000_000).contains(&p50),
        "p50 {p50} ns is not between 19 ms and the writer's median interval {interval} ns + 1 ms"
    );
}

/// Bytes per call: the read/write family's return values, histogrammed per successful call:
/// 10 writes of 1000 bytes to /dev/null, 5 reads of 4096 from /dev/zero, 3 reads at the end of
/// a pipe (0 bytes, short) and 2 failed reads (EBADF, in no histogram).
#[test]
fn the_read_write_family_histograms_the_bytes_of_each_call() {
    use profiler::stats::ReturnUnit;
    let _serial = serial();
    let session = {
        let mut s = session(&["read", "write"], Target::Processes(vec![]));
        let child = Child::stopped(|| {
            // SAFETY: plain calls on descriptors this child opens, into its own buffer.
            unsafe {
                let mut buf = [0u8; 4096];
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
                let zero = libc::open(c"/dev/zero".as_ptr(), libc::O_RDONLY);
                for _ in 0..10 {
                    libc::write(null, buf.as_ptr().cast(), 1000);
                }
                for _ in 0..5 {
                    libc::read(zero, buf.as_mut_ptr().cast(), 4096);
                }
                let mut pipe = [0; 2];
                libc::pipe(pipe.as_mut_ptr());
                libc::close(pipe[1]);
                for _ in 0..3 {
                    libc::read(pipe[0], buf.as_mut_ptr().cast(), 16);
                }
                for _ in 0..2 {
                    libc::read(-1, buf.as_mut_ptr().cast(), 16);
                }
            }
        });
        s.track(child.pid()).unwrap();
        child.resume();
        child.join();
        s
    };
    let snap = snapshot(&session);
    let write = snap.syscall("write").unwrap();
    let read = snap.syscall("read").unwrap();
    assert_eq!((write.calls, read.calls), (10, 10));
    let bytes = |s: &profiler::stats::SyscallSummary| {
        let r = s
            .returned
            .clone()
            .expect("the read/write family histograms its bytes");
        assert_eq!(r.unit, ReturnUnit::Bytes);
        r
    };
    // A value is its kernel bucket's midpoint, within 1/64 of it.
    let near = |v: u64, exact: u64| v.abs_diff(exact) <= exact / 64 + 1;
    let w = bytes(write);
    assert_eq!((w.per_call.total(), w.total), (10, 10_000), "{}", w.line());
    assert!(
        near(w.per_call.value_at_quantile(0.0), 1000)
            && near(w.per_call.value_at_quantile(1.0), 1000),
        "{}",
        w.line()
    );
    let r = bytes(read);
    assert_eq!(
        (r.per_call.total(), r.total),
        (8, 5 * 4096),
        "the failed reads are in no histogram: {}",
        r.line()
    );
    assert!((r.zero_share() - 3.0 / 8.0).abs() < 1e-9, "{}", r.line());
    assert!(
        near(r.per_call.value_at_quantile(1.0), 4096),
        "{}",
        r.line()
    );
    // Short: the 3 reads at the pipe's end (0 of 16 bytes); the writes and /dev/zero's reads
    // got all they asked.
    assert_eq!(
        (w.short, r.short),
        (Some(0), Some(3)),
        "{} / {}",
        w.line(),
        r.line()
    );
}

#[test]
fn epoll_wait_timeout_on_empty_set_measures_10ms_and_no_events() {
    let _serial = serial();
    const WAITS: u64 = 20;
    // Wall time per wait as the parent saw it: emulated timers (TCG guests) fire late, and the
    // kernel's figure cannot be longer than the time the waits really took.
    let elapsed_per_wait;
    let session = {
        let mut s = session(&["epoll_wait", "epoll_pwait"], Target::Processes(vec![]));
        let child = Child::stopped(|| {
            // SAFETY: an epoll instance with nothing registered, waited on with a 10 ms timeout.
            unsafe {
                let epfd = libc::epoll_create1(0);
                let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
                for _ in 0..WAITS {
                    libc::epoll_wait(epfd, events.as_mut_ptr(), 8, 10);
                }
            }
        });
        s.track(child.pid()).unwrap();
        let started = std::time::Instant::now();
        child.resume();
        child.join();
        elapsed_per_wait = started.elapsed().as_nanos() as u64 / WAITS;
        s
    };
    let snap = snapshot(&session);
    let calls: Vec<_> = snap.syscalls.iter().filter(|s| s.calls > 0).collect();
    assert_eq!(
        calls.len(),
        1,
        "one of epoll_wait/epoll_pwait carries the calls: {calls:?}"
    );
    let wait = calls[0];
    assert_eq!(wait.calls, WAITS);
    let p50 = wait.latency.value_at_quantile(0.5);
    let upper = 11_500_000.max(elapsed_per_wait + 500_000);
    assert!(
        (10_000_000..=upper).contains(&p50),
        "p50 {p50} ns is not between 10 ms and {upper} ns (the waits took {elapsed_per_wait} ns each)"
    );
    let returned = wait
        .returned
        .as_ref()
        .expect("epoll syscalls histogram their events");
    assert_eq!(returned.unit, profiler::stats::ReturnUnit::Events);
    let events = &returned.per_call;
    assert_eq!(events.total(), WAITS);
    assert_eq!(
        events.value_at_quantile(1.0),
        0,
        "an empty set returns 0 events"
    );
}

#[test]
fn errors_are_classified_by_errno() {
    let _serial = serial();
    const TRIES: u64 = 50;
    let mut session = session(&["accept4", "close"], Target::Processes(vec![]));
    let child = Child::stopped(|| {
        // SAFETY: a non-blocking listening socket with no connection: every accept is EAGAIN.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0);
            let addr = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
                },
                sin_zero: [0; 8],
            };
            libc::bind(
                fd,
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_in>() as u32,
            );
            libc::listen(fd, 16);
            for _ in 0..TRIES {
                libc::accept4(fd, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            }
            libc::close(1000); // EBADF
        }
    });
    session.track(child.pid()).unwrap();
    child.resume();
    child.join();
    let snap = snapshot(&session);
    let accept = snap.syscall("accept4").unwrap();
    assert_eq!(accept.calls, TRIES);
    assert_eq!(accept.errors.get(ErrnoClass::Again), TRIES);
    assert_eq!(accept.errors.top(), Some((ErrnoClass::Again, TRIES)));
    let close = snap.syscall("close").unwrap();
    assert_eq!(close.errors.get(ErrnoClass::BadFd), 1);
}

/// A read interrupted by a signal leaves the kernel as -ERESTARTSYS (512) at `sys_exit`, before
/// signal delivery turns it into the EINTR the program sees here (no SA_RESTART), or into a
/// restart it would never see (SA_RESTART). `sys_exit` cannot tell which: counted as ERESTART,
/// not as an EINTR (it used to be, for restarted calls too).
#[test]
fn a_read_interrupted_by_a_signal_counts_as_a_restart_code() {
    let _serial = serial();
    extern "C" fn on_alarm(_: libc::c_int) {}
    let mut session = session(&["read"], Target::Processes(vec![]));
    let child = Child::stopped(|| {
        // SAFETY: a handler without SA_RESTART, a 20 ms one-shot timer, then a read on an empty
        // pipe whose writer stays open: the read blocks until the signal interrupts it.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_alarm as *const () as usize;
            libc::sigaction(libc::SIGALRM, &raw const action, std::ptr::null_mut());
            let mut fds = [0; 2];
            libc::pipe(fds.as_mut_ptr());
            let timer = libc::itimerval {
                it_interval: libc::timeval {
                    tv_sec: 0,
                    tv_usec: 0,
                },
                it_value: libc::timeval {
                    tv_sec: 0,
                    tv_usec: 20_000,
                },
            };
            libc::setitimer(libc::ITIMER_REAL, &raw const timer, std::ptr::null_mut());
            let mut byte = 0u8;
            let n = libc::read(fds[0], (&raw mut byte).cast(), 1);
            assert!(n < 0 && *libc::__errno_location() == libc::EINTR);
        }
    });
    session.track(child.pid()).unwrap();
    child.resume();
    child.join();
    let read = snapshot(&session)
        .syscall("read")
        .cloned()
        .expect("read traced");
    assert_eq!(read.calls, 1);
    assert_eq!(read.errors.get(ErrnoClass::Restart), 1, "{:?}", read.errors);
    assert_eq!(read.errors.get(ErrnoClass::Intr), 0, "{:?}", read.errors);
    assert_eq!(read.errors.get(ErrnoClass::Other), 0, "{:?}", read.errors);
}

#[test]
fn trace_all_sees_processes_nobody_named() {
    let _serial = serial();
    const N: u64 = 5_000;
    let session = session(&["close"], Target::All);
    let child = Child::stopped(|| close_dups(N));
    child.resume();
    child.join();
    let snap = snapshot(&session);
    assert!(snap.syscall("close").unwrap().calls >= N);
}

#[test]
fn unknown_syscall_name_is_refused_with_valid_names() {
    let _serial = serial();
    let _ = session(&["close"], Target::All); // makes sure tracefs is mounted
    let err = Syscall::resolve("clsoe").unwrap_err().to_string();
    assert!(err.contains("unknown syscall 'clsoe'"), "{err}");
    assert!(
        err.contains("e.g. close"),
        "suggests the valid name first: {err}"
    );
}

#[test]
fn nonexistent_pid_is_refused() {
    let _serial = serial();
    let syscalls = Syscall::resolve_list(&["close"]).unwrap();
    let err = Session::start(&SessionConfig::new(
        syscalls,
        Target::Processes(vec![999_999_999]),
    ))
    .err()
    .expect("a pid that does not exist is an error")
    .to_string();
    assert!(err.contains("no process with pid 999999999"), "{err}");
}

#[test]
fn reset_starts_the_counts_from_nothing() {
    let _serial = serial();
    let mut session = session(&["close"], Target::Processes(vec![]));
    let child = Child::stopped(|| {
        close_dups(1000);
        // SAFETY: stop again so the test can reset between the two batches.
        unsafe { libc::raise(libc::SIGSTOP) };
        close_dups(250);
    });
    session.track(child.pid()).unwrap();
    child.resume();
    child.wait_stopped();
    assert_eq!(snapshot(&session).syscall("close").unwrap().calls, 1000);
    session.reset().unwrap();
    assert_eq!(snapshot(&session).syscall("close").unwrap().calls, 0);
    child.resume();
    child.join();
    let snap = snapshot(&session);
    let close = snap.syscall("close").unwrap();
    assert_eq!(close.calls, 250);
    assert_eq!(close.latency.total(), 250);
    assert_eq!(snap.process(child.pid()).unwrap().syscalls[0].calls, 250);
}

/// The limits `profiler bench overhead` measures the profiler against load and attach on both
/// attach points (per-syscall tracepoints and raw sys_enter/sys_exit), and the minimal timers
/// really time: their total grows with the closes of a workload, the empty pairs' stays 0.
#[test]
fn the_overhead_limits_attach_on_both_attach_points_and_the_timers_time() {
    use profiler::bpf::AttachPoint;
    let _serial = serial();
    let close = Syscall::resolve_list(&["close"]).expect("close resolves");
    let mut all = vec![
        Programs::Empty(AttachPoint::Tracepoint),
        Programs::Empty(AttachPoint::RawTracepoint),
        Programs::MinimalTimer(AttachPoint::Tracepoint),
        Programs::MinimalTimer(AttachPoint::RawTracepoint),
    ];
    // fentry where the kernel accepts it (the matrix's guests; the next test checks which
    // kernels those are).
    if fentry_accepted() {
        all.extend([
            Programs::Empty(AttachPoint::Fentry),
            Programs::MinimalTimer(AttachPoint::Fentry),
        ]);
    }
    for programs in all {
        let child = Child::stopped(|| {
            for _ in 0..1000 {
                // SAFETY: closing an invalid descriptor only fails with EBADF.
                unsafe { libc::close(-1) };
            }
        });
        let session = Session::start(&SessionConfig {
            programs,
            ..SessionConfig::new(close.clone(), Target::Processes(vec![child.pid()]))
        })
        .unwrap_or_else(|e| panic!("{programs:?} did not load and attach: {e}"));
        child.resume();
        child.join();
        let total = session.timer_total_ns().expect("reading the timer total");
        match programs {
            Programs::MinimalTimer(_) => assert!(
                total >= 1000,
                "{programs:?} timed {total} ns over 1000 closes"
            ),
            _ => assert_eq!(total, 0, "{programs:?} has no timer"),
        }
    }
}

/// Whether the kernel loads and attaches fentry/fexit programs (a locked-down one refuses
/// them: this machine's).
fn fentry_accepted() -> bool {
    profiler::bpf::front_refused(profiler::bpf::AttachPoint::Fentry).is_none()
}

/// `auto` uses fentry/fexit wherever the kernel accepts them, and otherwise the tracepoints
/// with the reason; an explicit `fentry` on a kernel that refuses it is one clear line; each
/// front end counts a child's closes exactly, 64-bit calls only (32-bit ones: tests/hosts.rs).
#[test]
fn auto_uses_fentry_where_the_kernel_accepts_it_and_both_count_exactly() {
    use profiler::bpf::{
        AttachPoint::{Fentry, Tracepoint},
        SyscallAttach::{self, Auto, Only},
    };
    let _serial = serial();
    let close = Syscall::resolve_list(&["close"]).expect("close resolves");
    let accepted = fentry_accepted();
    let preemptible = profiler::bpf::front::preemptible_kernel();
    for attach in [Only(Fentry), Auto, Only(Tracepoint)] {
        let child = Child::stopped(|| {
            for _ in 0..1000 {
                // SAFETY: closing an invalid descriptor only fails with EBADF.
                unsafe { libc::close(-1) };
            }
        });
        let started = Session::start(&SessionConfig {
            syscall_attach: Some(attach),
            ..SessionConfig::new(close.clone(), Target::Processes(vec![child.pid()]))
        });
        let session = match (attach, started) {
            (Only(Fentry), Err(e)) if !accepted => {
                let text = e.to_string();
                assert!(
                    text.starts_with("--attach fentry: the kernel")
                        && text.contains("refused")
                        && text.contains("use --attach tracepoint")
                        && !text.contains('\n'),
                    "{text}"
                );
                child.resume();
                child.join();
                continue;
            }
            (_, Err(e)) => {
                child.resume();
                child.join();
                panic!("{attach:?}: {e}");
            }
            (_, Ok(session)) => session,
        };
        let front = session.syscall_front();
        match (attach, front.point, front.why_not(Fentry)) {
            (Only(Tracepoint), Tracepoint, None) | (Only(Fentry), Fentry, None) => {}
            (Auto, Fentry, None) => assert!(
                accepted && preemptible.is_none(),
                "auto chose fentry on a kernel that refuses it or preempts it ({preemptible:?})"
            ),
            (Auto, Tracepoint, Some(why)) => assert!(
                (!accepted && why.contains("refused")) || preemptible.as_deref() == Some(why),
                "auto chose the tracepoints on a kernel that allows fentry: {why}"
            ),
            (attach, _, _) => panic!("{attach:?} gave {front:?}"),
        }
        let _: SyscallAttach = attach;
        child.resume();
        child.join();
        let s = snapshot(&session);
        let close = s.syscall("close").expect("close in the snapshot");
        assert_eq!(
            (close.calls, close.errors.total(), close.dropped),
            (1000, 1000, 0),
            "{:?}",
            session.syscall_front()
        );
    }
}

/// The six syscalls whose tracepoints the kernel names differently from the syscall table
/// (newfstat for fstat, sendfile64 for sendfile, umount for umount2, ...) resolve under either
/// spelling, to the same number, and are timed: a child's fstat calls are all counted.
#[test]
fn syscalls_with_kernel_spellings_resolve_both_ways_and_are_timed() {
    let _serial = serial();
    let _ = session(&["close"], Target::All); // makes sure tracefs is mounted
    for (table, kernel, nr) in [
        ("fstat", "newfstat", libc::SYS_fstat),
        ("stat", "newstat", libc::SYS_stat),
        ("lstat", "newlstat", libc::SYS_lstat),
        ("uname", "newuname", libc::SYS_uname),
        ("sendfile", "sendfile64", libc::SYS_sendfile),
        ("umount2", "umount", libc::SYS_umount2),
    ] {
        for name in [table, kernel] {
            let syscall = Syscall::resolve(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(i64::from(syscall.nr), nr, "{name}");
            assert_eq!(syscall.tracepoint, kernel, "{name}");
        }
    }
    let both = Syscall::resolve_list(&["fstat", "newfstat"]).unwrap();
    assert_eq!(
        both.len(),
        1,
        "two spellings of one syscall are one: {both:?}"
    );

    const N: u64 = 1000;
    let child = Child::stopped(|| {
        // SAFETY: fstat of stdin into a zeroed buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        for _ in 0..N {
            // SAFETY: as above; the raw syscall, so libc cannot pick statx or fstatat instead.
            unsafe { libc::syscall(libc::SYS_fstat, 0, &mut st) };
        }
    });
    let session = session(&["fstat"], Target::Processes(vec![child.pid()]));
    child.resume();
    child.join();
    let snap = snapshot(&session);
    assert_eq!(
        snap.syscall("fstat").map(|s| s.calls),
        Some(N),
        "fstat calls"
    );
}

/// The probe of the context BPF programs really get on sys_exit_* (which older kernels built
/// with their own 8-byte header, whatever the format file says) finds the syscall number and
/// the return value on every kernel, where the format file says or right after 8 bytes.
#[test]
fn the_sys_exit_context_probe_finds_the_number_and_the_return_value() {
    let _serial = serial();
    let syscalls = Syscall::resolve_list(&["close"]).unwrap();
    let format = GroupExit::Auto
        .layout(&syscalls)
        .expect("the record layout");
    let (nr, ret) =
        profiler::bpf::probe_sys_exit_context(&format).expect("the context probe works");
    assert!(
        nr == 8 || nr == format.sys_exit_nr,
        "__syscall_nr at {nr}, format file {}",
        format.sys_exit_nr
    );
    assert_eq!(ret, 16, "ret");
}

fn off_cpu_session(syscalls: &[&str]) -> Session {
    off_cpu_session_on(syscalls, SchedAttach::Auto)
}

/// Both `--off-cpu` front ends: what a session chooses (the BTF tracepoints: every kernel of
/// the matrix has BTF, so anything else is a failure here) and the classic fallback.
const SCHED_FRONTS: [SchedAttach; 2] = [SchedAttach::Auto, SchedAttach::Classic];

fn off_cpu_session_on(syscalls: &[&str], how: SchedAttach) -> Session {
    let session = Session::start(&SessionConfig {
        off_cpu: true,
        sched_attach: how,
        ..SessionConfig::new(
            Syscall::resolve_list(syscalls).expect("syscall names resolve"),
            Target::Processes(vec![]),
        )
    })
    .unwrap_or_else(|e| panic!("loading the kernel programs with --off-cpu ({how:?}) failed: {e}"));
    let front = session.sched_front();
    match how {
        SchedAttach::Auto => assert_eq!(front, Some(SchedFront::Btf), "on a kernel with BTF"),
        SchedAttach::Classic => assert!(matches!(front, Some(SchedFront::Classic(_)))),
    }
    session
}

/// The parts of a call's time: on-CPU, blocked and runnable add up to its latency; the on-CPU
/// histogram has a value per call.
fn split_of(s: &profiler::stats::SyscallSummary) -> (u64, u64, u64) {
    let split = s.off_cpu.as_ref().expect("--off-cpu splits the time");
    assert_eq!(split.on_cpu.total(), s.calls, "one on-CPU value per call");
    let (on, blocked, runnable) = s.time_split().unwrap();
    assert_eq!(on + blocked + runnable, s.total_ns);
    // The on-CPU histogram's midpoints add up to the on-CPU total within 1/32 (each is within
    // 1/64 of its values).
    let sum: f64 = split
        .on_cpu
        .buckets()
        .map(|b| (b.low + b.high) as f64 / 2.0 * b.count as f64)
        .sum();
    assert!(
        (sum - on as f64).abs() <= on as f64 / 32.0 + 64.0 * s.calls as f64,
        "on-CPU histogram sums to {sum}, total {on}"
    );
    (on, blocked, runnable)
}

/// A pipe read that waits 50 ms for its writer spends it blocked, not on a CPU. The wait is long
/// beside a read's own on-CPU time even under TCG (1.1 ms per read was seen in a 6.1 guest,
/// where a 20 ms wait made the blocked share 94.6%).
#[test]
fn off_cpu_a_read_waiting_on_a_pipe_is_blocked() {
    let _serial = serial();
    for how in SCHED_FRONTS {
        a_read_waiting_on_a_pipe_is_blocked(how);
    }
}

fn a_read_waiting_on_a_pipe_is_blocked(how: SchedAttach) {
    const READS: usize = 10;
    let mut pipe = [0; 2];
    // SAFETY: a valid array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    let mut session = off_cpu_session_on(&["read"], how);
    let reader = Child::stopped(move || {
        let mut byte = 0u8;
        for _ in 0..READS {
            // SAFETY: a blocking one-byte read into a local.
            unsafe { libc::read(pipe[0], (&raw mut byte).cast(), 1) };
        }
    });
    session.track(reader.pid()).unwrap();
    reader.resume();
    for _ in 0..READS {
        std::thread::sleep(Duration::from_millis(50));
        // SAFETY: writing one byte from a local.
        unsafe { libc::write(pipe[1], b"x".as_ptr().cast(), 1) };
    }
    reader.join();
    let snap = snapshot(&session);
    let read = snap.syscall("read").unwrap();
    assert_eq!(read.calls, READS as u64);
    let (on, blocked, runnable) = split_of(read);
    assert!(
        blocked as f64 > 0.9 * read.total_ns as f64,
        "{how:?}: blocked {blocked} ns of {} (on-CPU {on}, runnable {runnable})",
        read.total_ns
    );
    // SAFETY: closing our own pipe.
    unsafe {
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
}

/// getrandom of 1 MB at a time is CPU work inside the kernel: on-CPU, hardly ever off it. The
/// worker runs SCHED_FIFO so that the machine's other tasks (a busy CI host, the other vCPU's
/// work in a guest) cannot preempt it: preempted time is runnable, not on-CPU.
#[test]
fn off_cpu_getrandom_is_on_cpu() {
    let _serial = serial();
    let mut session = off_cpu_session(&["getrandom"]);
    // Allocated before the fork: the child makes raw libc calls only.
    let mut buf = vec![0u8; 1 << 20];
    let worker = Child::stopped(move || {
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: a plain syscall on ourselves (root may; the 150 ms loop stays far below the
        // kernel's RT throttling).
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &raw const param) } != 0 {
            // SAFETY: leaving the child.
            unsafe { libc::_exit(4) };
        }
        for _ in 0..50 {
            // SAFETY: filling our own buffer.
            unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
        }
    });
    session.track(worker.pid()).unwrap();
    worker.resume();
    worker.join();
    let snap = snapshot(&session);
    let g = snap.syscall("getrandom").unwrap();
    assert_eq!(g.calls, 50);
    let (on, blocked, runnable) = split_of(g);
    assert!(
        on as f64 > 0.95 * g.total_ns as f64,
        "on-CPU {on} ns of {} (blocked {blocked}, runnable {runnable})",
        g.total_ns
    );
}

/// A CPU-bound spinner pinned to `cpu` and, tracked by `session`, a worker pinned there too
/// making 100 getrandom() calls of 1 MB: the spinner preempts it, so its calls wait runnable.
/// Returns the spinner's pid, once it is killed and reaped.
fn getrandom_beside_a_spinner(session: &mut Session, cpu: usize) -> i32 {
    // SAFETY: the child pins itself and spins until killed, making raw libc calls only.
    let spinner = unsafe { libc::fork() };
    assert!(spinner >= 0, "fork failed");
    if spinner == 0 {
        // SAFETY: see above.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &raw const set);
        }
        loop {
            std::hint::spin_loop();
        }
    }
    let mut buf = vec![0u8; 1 << 20];
    let worker = Child::stopped(move || {
        // SAFETY: pinning ourselves; getrandom into our own buffer.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &raw const set);
            for _ in 0..100 {
                libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0);
            }
        }
    });
    session.track(worker.pid()).unwrap();
    worker.resume();
    worker.join();
    // SAFETY: killing and reaping our own child.
    unsafe {
        libc::kill(spinner, libc::SIGKILL);
        libc::waitpid(spinner, std::ptr::null_mut(), 0);
    }
    spinner
}

/// A CPU-bound competitor on the same CPU preempts the getrandom loop: runnable time shows.
#[test]
fn off_cpu_a_competitor_on_the_same_cpu_shows_runnable_time() {
    let _serial = serial();
    let cpu = profiler::cpus::allowed_cpus().unwrap()[0];
    for how in SCHED_FRONTS {
        let mut session = off_cpu_session_on(&["getrandom"], how);
        getrandom_beside_a_spinner(&mut session, cpu);
        let snap = snapshot(&session);
        let g = snap.syscall("getrandom").unwrap();
        let (on, blocked, runnable) = split_of(g);
        assert!(
            runnable as f64 > 0.1 * g.total_ns as f64,
            "{how:?}: runnable {runnable} ns of {} (on-CPU {on}, blocked {blocked}): the competitor should preempt",
            g.total_ns
        );
    }
}

/// `--slow` says who held the CPU while a slow call waited runnable: the spinner pinned to
/// the worker's CPU, the longest of the tasks the test started, whatever else runs.
#[test]
fn slow_calls_name_the_task_that_held_their_cpu() {
    let _serial = serial();
    let cpu = profiler::cpus::allowed_cpus().unwrap()[0];
    let mut session = Session::start(&SessionConfig {
        off_cpu: true,
        slow: Some(Duration::from_millis(1)),
        ..SessionConfig::new(
            Syscall::resolve_list(&["getrandom"]).unwrap(),
            Target::Processes(vec![]),
        )
    })
    .unwrap_or_else(|e| panic!("loading the kernel programs with --slow failed: {e}"));
    let collector = session
        .start_slow_collector(10, 0)
        .unwrap()
        .expect("a collector with --slow");
    let spinner = getrandom_beside_a_spinner(&mut session, cpu);
    drop(session);
    let report = collector.finish();
    let text = report.to_text();
    let held: Vec<&profiler::slow::SlowSample> = report
        .groups
        .iter()
        .map(|g| &g.slowest)
        .filter(|s| s.runnable_ns > s.duration_ns / 10)
        .collect();
    assert!(!held.is_empty(), "no slow call waited runnable: {text}");
    for sample in held {
        let named: u64 = sample.runnable_by.iter().map(|h| h.ns).sum();
        assert!(
            named <= sample.runnable_ns + sample.runnable_ns / 100 + 1000,
            "holders {named} ns of {} runnable: {text}",
            sample.runnable_ns
        );
        let spinner = sample
            .runnable_by
            .iter()
            .find(|h| h.pid == spinner as u32)
            .unwrap_or_else(|| panic!("the spinner (pid {spinner}) held the CPU: {text}"));
        // Other work on the machine may hold the CPU too (it made this assertion fail under
        // load when it asked for half the runnable time): among the tasks the test started,
        // the spinner holds it the longest.
        let ours = sample
            .runnable_by
            .iter()
            .filter(|h| {
                h.pid == spinner.pid
                    || std::path::Path::new(&format!("/proc/self/task/{}", h.pid)).exists()
            })
            .map(|h| h.ns)
            .max()
            .unwrap_or(0);
        assert!(
            spinner.ns > 0 && spinner.ns >= ours,
            "the spinner held it {} ns of {} runnable, less than another task of the test: {text}",
            spinner.ns,
            sample.runnable_ns
        );
        assert!(
            sample
                .runnable_line()
                .unwrap()
                .contains(&format!("(pid {})", spinner.pid))
        );
    }
}

/// A cgroup v2 made for a test below wherever cgroup2 is mounted (`/sys/fs/cgroup` unified,
/// `/sys/fs/cgroup/unified` hybrid); removed on drop, once its processes have exited. The test
/// never mounts anything: the guest suite sets up its guests' cgroups, the host has its own.
struct TestCgroup {
    path: std::path::PathBuf,
}

impl TestCgroup {
    fn new(name: &str) -> Self {
        let root = profiler::cgroup::cgroup2_root()
            .expect("no cgroup2 hierarchy in /proc/self/mountinfo: these tests need one mounted");
        let path = root.join(format!(
            "syscall-profiler-test-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        Self { path }
    }

    fn add(&self, pid: u32) {
        std::fs::write(self.path.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", self.path.display()));
    }

    fn label(&self) -> String {
        format!("/{}", self.path.file_name().unwrap().to_string_lossy())
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// A new cgroup `name` holding a stopped child that will make `closes` close(-1) calls.
fn closer_in(name: &str, closes: u32) -> (TestCgroup, Child) {
    let cgroup = TestCgroup::new(name);
    let child = Child::stopped(move || {
        for _ in 0..closes {
            // SAFETY: close(-1) fails with EBADF and touches nothing.
            unsafe { libc::close(-1) };
        }
    });
    cgroup.add(child.pid());
    (cgroup, child)
}

/// Two cgroups with a known number of closes each are counted exactly and apart; the test's
/// own process, in neither, adds nothing.
#[test]
fn cgroups_are_traced_by_id_and_counted_apart() {
    let _serial = serial();
    let ((a, in_a), (b, in_b)) = (closer_in("a", 300), closer_in("b", 500));
    let cgroups = [&a, &b]
        .iter()
        .map(|c| profiler::cgroup::Cgroup::resolve(c.path.to_str().unwrap()).unwrap())
        .collect();
    let session = session(&["close"], Target::Cgroups(cgroups));
    in_a.resume();
    in_b.resume();
    in_a.join();
    in_b.join();
    for _ in 0..100 {
        // SAFETY: close(-1) in the test's own process, in neither cgroup.
        unsafe { libc::close(-1) };
    }
    let snap = snapshot(&session);
    let close = snap.syscall("close").unwrap();
    assert_eq!(close.errors.get(ErrnoClass::BadFd), 800, "{close:?}");
    let row = |label: String| {
        snap.processes
            .iter()
            .find(|p| p.cgroup.as_deref() == Some(label.as_str()))
            .unwrap_or_else(|| panic!("no row for {label}: {:?}", snap.processes))
            .syscalls[0]
    };
    assert_eq!((row(a.label()).calls, row(a.label()).errors), (300, 300));
    assert_eq!((row(b.label()).calls, row(b.label()).errors), (500, 500));
    drop(session);
}

/// `--all --by-cgroup`: every call is also counted under its cgroup, found by id: two cgroups
/// made after the start, with 300 and 500 close(-1) calls, have exactly those, apart.
#[test]
fn by_cgroup_counts_every_cgroup_apart_under_all() {
    let _serial = serial();
    let session = Session::start(&SessionConfig {
        by_cgroup: true,
        ..SessionConfig::new(Syscall::resolve_list(&["close"]).unwrap(), Target::All)
    })
    .unwrap_or_else(|e| panic!("loading the kernel programs with --by-cgroup failed: {e}"));
    let ((a, in_a), (b, in_b)) = (closer_in("by-a", 300), closer_in("by-b", 500));
    in_a.resume();
    in_b.resume();
    in_a.join();
    in_b.join();
    let snap = snapshot(&session);
    drop(session);
    let row = |label: String| {
        snap.processes
            .iter()
            .find(|p| p.cgroup.as_deref() == Some(label.as_str()))
            .unwrap_or_else(|| panic!("no row for {label}: {:?}", snap.processes))
            .syscalls[0]
    };
    assert_eq!((row(a.label()).calls, row(a.label()).errors), (300, 300));
    assert_eq!((row(b.label()).calls, row(b.label()).errors), (500, 500));
    // The machine's other calls are in other rows (the totals and the rows are read one after
    // the other while the machine runs, so they are compared with a margin).
    let close = snap.syscall("close").unwrap();
    let rows: u64 = snap.processes.iter().map(|p| p.syscalls[0].calls).sum();
    assert!(
        close.calls >= 800 && rows >= 800,
        "rows {:?}",
        snap.processes
    );
    // Rows are read before the totals: they never add up to more.
    assert!(
        rows <= close.calls,
        "rows {rows} add up to more than the {} calls in all",
        close.calls
    );
    assert!(
        rows.abs_diff(close.calls) * 10 <= close.calls,
        "rows {rows} against {} calls in all",
        close.calls
    );
}

/// The C helper of the `--slow` tests (`tests/helpers/slow_path.c`), compiled with `flags` into
/// a scratch directory.
fn slow_path_helper(name: &str, flags: &[&str]) -> std::path::PathBuf {
    let dir = common::scratch("kernel", name);
    let binary = dir.join("slow_path");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/helpers/slow_path.c");
    let status = std::process::Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&binary)
        .arg(source)
        .status()
        .expect("running cc (gcc) for the --slow helper");
    assert!(status.success(), "cc failed to build {source}");
    binary
}

/// Runs `helper 3 20` under `--slow 10ms` (the path of `attach --slow 10ms -- slow_path 3 20`)
/// and returns the report with the groups whose user stack has a frame of the helper's
/// binary: its own reads (a read of a file can be slow too, and is reported as such: seen in
/// the 6.1-rt guest under emulation, the dynamic loader's 9p read of libc, 11.8 ms, before
/// main, with no frame of the helper's binary).
fn slow_path_report(
    helper: &std::path::Path,
) -> (profiler::slow::SlowReport, Vec<profiler::slow::SlowGroup>) {
    slow_path_report_of(vec![helper.display().to_string(), "3".into(), "20".into()])
}

/// [`slow_path_report`] of a command that ends by exec'ing the helper with `3 20`.
fn slow_path_report_of(
    command: Vec<String>,
) -> (profiler::slow::SlowReport, Vec<profiler::slow::SlowGroup>) {
    let request = profiler::trace::TraceRequest {
        syscalls: Syscall::resolve_list(&["read"]).unwrap(),
        pids: vec![],
        all: false,
        children: true,
        command,
        off_cpu: false,
        cgroups: vec![],
        by_cgroup: false,
        cgroup_top: None,
        slow: Some(Duration::from_millis(10)),
        slow_top: 10,
        every: profiler::bpf::CountEvery::Auto,
        syscall_attach: None,
    };
    let trace = profiler::trace::Trace::start(&request)
        .unwrap_or_else(|e| panic!("starting the trace with --slow failed: {e:#}"));
    let child = trace.child.as_ref().expect("a started command");
    let deadline = std::time::Instant::now() + Duration::from_mins(1);
    let mut status = None;
    while status.is_none() || trace.session.any_tracked_alive().unwrap() {
        assert!(std::time::Instant::now() < deadline, "the helper hung");
        std::thread::sleep(Duration::from_millis(10));
        if status.is_none() {
            status = child.try_wait().unwrap();
        }
    }
    assert_eq!(status, Some(0), "the helper failed");
    let snap = snapshot(&trace.session);
    let profiler::trace::Trace { session, slow, .. } = trace;
    drop(session);
    let report = slow.expect("a collector with --slow").finish();
    let text = report.to_text();
    let read = snap.syscall("read").unwrap();
    assert!(read.calls >= 63, "{} reads timed", read.calls);
    assert_eq!(report.lost, 0, "{text}");
    let from_helper = |g: &&profiler::slow::SlowGroup| {
        g.user_stack.iter().any(|f| {
            f.module
                .as_deref()
                .is_some_and(|m| m.ends_with("/slow_path"))
        })
    };
    let helper: Vec<profiler::slow::SlowGroup> =
        report.groups.iter().filter(from_helper).cloned().collect();
    assert_eq!(helper.iter().map(|g| g.count).sum::<u64>(), 3, "{text}");
    for group in &helper {
        assert!(
            group
                .kernel_stack
                .iter()
                .any(|f| f.function.contains("pipe_read")),
            "the kernel stack shows where it waited: {text}"
        );
        assert!(group.slowest.duration_ns >= 10_000_000, "{text}");
        assert!(
            group.slowest.blocked_ns > group.slowest.duration_ns / 2,
            "{text}"
        );
        assert_eq!(group.slowest.ret, 1, "{text}");
    }
    (report, helper)
}

/// The user stack's functions, innermost first.
fn functions(group: &profiler::slow::SlowGroup) -> Vec<&str> {
    group
        .user_stack
        .iter()
        .map(|f| f.function.as_str())
        .collect()
}

/// `--slow 10ms`: exactly the three reads slow_path() waits 20 ms in are reported, none of
/// fast_path()'s sixty; the user stack names slow_path, the kernel stack the pipe it waited on.
#[test]
fn slow_calls_are_exactly_the_slow_ones_with_their_user_and_kernel_stacks() {
    let _serial = serial();
    let helper = slow_path_helper("slow-helper", &["-O1", "-g", "-fno-omit-frame-pointer"]);
    let (report, groups) = slow_path_report(&helper);
    let text = report.to_text();
    for group in &groups {
        let user = functions(group);
        assert!(user.contains(&"slow_path"), "{text}");
        assert!(!user.contains(&"fast_path"), "{text}");
    }
}

/// A process in another mount namespace (a container) maps a file whose path names another
/// file on the profiler's side: its stack is unwound and named from the file it mapped (found
/// through `/proc/PID/root`, checked by device and inode), never from the file at the same
/// path here (a copy of `true`, which used to be read instead: wrong frames, without a word).
#[test]
fn slow_stacks_of_a_process_in_another_mount_namespace_come_from_its_own_files() {
    let _serial = serial();
    let helper = slow_path_helper("slow-helper-mntns", &["-O2", "-g", "-fomit-frame-pointer"]);
    let dir = common::scratch("kernel", "mntns-root");
    let decoy = dir.join("slow_path");
    std::fs::copy("/bin/true", &decoy).unwrap();
    // In a private mount namespace (the host's mounts untouched), a tmpfs over the directory
    // holds the real helper under the decoy's path.
    let script = format!(
        "mount -t tmpfs none {d} && cp {h} {d}/slow_path && exec {d}/slow_path 3 20",
        d = dir.display(),
        h = helper.display()
    );
    let (report, groups) = slow_path_report_of(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ]
        .map(String::from)
        .to_vec(),
    );
    let text = report.to_text();
    for group in &groups {
        let user = functions(group);
        for function in ["read_one", "slow_path", "main"] {
            assert!(
                user.iter().any(|f| f.starts_with(function)),
                "{function} in the user stack, from the file the process mapped: {text}"
            );
        }
    }
    // The decoy is still what the path names here.
    assert_eq!(
        std::fs::read(&decoy).unwrap(),
        std::fs::read("/bin/true").unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The user stack is unwound from DWARF call frame information, not frame pointers: libc's
/// read() wrapper keeps no frame pointer, yet its direct caller (read_one) follows it, and a
/// binary built with `-O2 -fomit-frame-pointer` is unwound through to slow_path and main.
#[test]
fn slow_user_stacks_are_unwound_without_frame_pointers() {
    let _serial = serial();
    let helper = slow_path_helper("slow-helper-nofp", &["-O2", "-g", "-fomit-frame-pointer"]);
    let (report, groups) = slow_path_report(&helper);
    let text = report.to_text();
    for group in &groups {
        let user = functions(group);
        let read = user
            .iter()
            .position(|f| *f == "read" || f.starts_with("__libc_read") || f.starts_with("__read"))
            .unwrap_or_else(|| panic!("libc's read in the user stack: {text}"));
        assert!(
            user.get(read + 1)
                .is_some_and(|f| f.starts_with("read_one")),
            "read's direct caller, read_one, follows it: {text}"
        );
        for caller in ["slow_path", "main"] {
            assert!(
                user.iter().any(|f| f.starts_with(caller)),
                "{caller} in the user stack: {text}"
            );
        }
        assert!(!user.iter().any(|f| f.starts_with("fast_path")), "{text}");
    }
}

/// Whether this kernel frees a closed file inside close(): from 6.6 on ("fs: use __fput_sync in
/// close(2)"); earlier ones (Debian 12's 6.1) leave the last fput to task work on the way back
/// to user space, after the sys_exit tracepoint.
fn close_frees_synchronously() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    version >= (6, 6)
}

/// A close() that lingers (SO_LINGER) on a TCP connection whose peer reads only 30 ms later
/// waits for its data to go out: where the kernel frees the socket inside close(), the slow
/// call's kernel stack shows the TCP teardown it waited in. Kernels before 6.6 tear the socket
/// down after the syscall has returned (task work), so there the close is fast and not reported:
/// the profiler cannot see that wait as part of close(), and this checks that it does not claim
/// to.
#[test]
fn a_lingering_close_waits_in_tcp_where_close_frees_the_socket() {
    let _serial = serial();
    let mut session = Session::start(&SessionConfig {
        slow: Some(Duration::from_millis(10)),
        ..SessionConfig::new(
            Syscall::resolve_list(&["close"]).unwrap(),
            Target::Processes(vec![]),
        )
    })
    .unwrap_or_else(|e| panic!("loading the kernel programs with --slow failed: {e}"));
    let collector = session
        .start_slow_collector(5, 0)
        .unwrap()
        .expect("a collector with --slow");
    let closer = Child::stopped(lingering_close);
    session.track(closer.pid()).unwrap();
    closer.resume();
    closer.join();
    let snap = snapshot(&session);
    drop(session);
    let report = collector.finish();
    let text = report.to_text();
    let close = snap.syscall("close").unwrap();
    assert_eq!(close.calls, 1, "one close timed");
    if close_frees_synchronously() {
        assert_eq!(report.recorded, 1, "{text}");
        let kernel: Vec<&str> = report.groups[0]
            .kernel_stack
            .iter()
            .map(|f| f.function.as_str())
            .collect();
        assert!(
            kernel
                .iter()
                .any(|f| f.starts_with("tcp_") || f.contains("sock")),
            "a tcp_* or sock frame in {kernel:?} (why it is empty, if it is: {:?}); the report:\n{text}",
            report.groups[0].kernel_note
        );
    } else {
        assert_eq!(report.recorded, 0, "{text}");
        assert!(close.max_ns < 10_000_000, "close took {} ns", close.max_ns);
    }
}

/// The child's work for the lingering close: a loopback connection whose sender fills its send
/// buffer and the receiver's window, lingers, and closes, while a reader process (forked before
/// the sender exists, so it holds no reference to it) accepts and starts reading only after
/// 30 ms.
fn lingering_close() {
    // SAFETY: socket calls on descriptors this function owns, with valid local buffers.
    unsafe {
        let small = 4096i32;
        let set = |fd: i32, option: i32| {
            libc::setsockopt(fd, libc::SOL_SOCKET, option, (&raw const small).cast(), 4);
        };
        let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        set(listener, libc::SO_RCVBUF);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as u16;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = size_of::<libc::sockaddr_in>() as u32;
        libc::bind(listener, (&raw const addr).cast(), len);
        libc::listen(listener, 1);
        let mut bound_len = len;
        libc::getsockname(listener, (&raw mut addr).cast(), &raw mut bound_len);
        let reader = libc::fork();
        if reader == 0 {
            let receiver = libc::accept(listener, std::ptr::null_mut(), std::ptr::null_mut());
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 30_000_000,
            };
            libc::nanosleep(&raw const pause, std::ptr::null_mut());
            #[expect(
                clippy::large_stack_arrays,
                reason = "a forked child of a threaded process must not allocate"
            )]
            let mut sink = [0u8; 65536];
            while libc::read(receiver, sink.as_mut_ptr().cast(), sink.len()) > 0 {}
            libc::_exit(0);
        }
        let sender = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        set(sender, libc::SO_SNDBUF);
        if libc::connect(sender, (&raw const addr).cast(), len) != 0 {
            libc::_exit(3);
        }
        // Fill the sender's buffer and the receiver's window.
        libc::fcntl(sender, libc::F_SETFL, libc::O_NONBLOCK);
        let chunk = [7u8; 4096];
        while libc::write(sender, chunk.as_ptr().cast(), chunk.len()) > 0 {}
        libc::fcntl(sender, libc::F_SETFL, 0);
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 5,
        };
        libc::setsockopt(
            sender,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            size_of::<libc::linger>() as u32,
        );
        libc::close(sender);
        let mut status = 0;
        libc::waitpid(reader, &raw mut status, 0);
    }
}
