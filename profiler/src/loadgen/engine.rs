//! The threads: one current-thread tokio runtime per client CPU, each running its share of the
//! clients and keeping its own stats, merged once at the end (no channel per result).

use std::{
    cell::RefCell,
    rc::Rc,
    sync::{
        Arc, Barrier,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, anyhow};
use tokio::task::LocalSet;

use super::{
    LoadReport, LoadSpec, SpecError, Stop,
    measure::RuntimeStats,
    workload::{Client, Workload},
};

/// What every client of every runtime shares.
struct Plan {
    workload: Workload,
    addr: std::net::SocketAddr,
    payload: usize,
    timeout: Duration,
    duration: Option<Duration>,
    /// `Stop::Requests(n)`: tickets handed out so far and `n`; one ticket, one request.
    tickets: Option<(AtomicU64, u64)>,
    /// Open loop: each client's interval between intended sends, and the offset between
    /// successive clients' first sends.
    pacing: Option<(Duration, Duration)>,
    progress: Option<Arc<AtomicU64>>,
    cancel: Option<Arc<AtomicBool>>,
}

impl Plan {
    /// Takes the right to send one more request.
    fn claim(&self) -> bool {
        match &self.tickets {
            Some((issued, limit)) => issued.fetch_add(1, Ordering::Relaxed) < *limit,
            None => true,
        }
    }
}

/// What one runtime thread hands back.
struct ThreadResult {
    start: Instant,
    end: Instant,
    stats: RuntimeStats,
}

/// Runs the load described by an already validated `spec`.
pub(crate) fn run(spec: &LoadSpec) -> anyhow::Result<LoadReport> {
    let pacing = match spec.rate {
        Some(rate) => {
            let secs =
                |s: f64| Duration::try_from_secs_f64(s).map_err(|_| SpecError::BadRate(rate));
            Some((secs(spec.concurrency as f64 / rate)?, secs(1.0 / rate)?))
        }
        None => None,
    };
    let plan = Arc::new(Plan {
        workload: spec.workload,
        addr: spec.addr,
        payload: spec.payload,
        timeout: spec.timeout,
        duration: match spec.stop {
            Stop::Duration(d) => Some(d),
            Stop::Requests(_) => None,
        },
        tickets: match spec.stop {
            Stop::Requests(n) => Some((AtomicU64::new(0), n)),
            Stop::Duration(_) => None,
        },
        pacing,
        progress: spec.progress.clone(),
        cancel: spec.cancel.clone(),
    });

    // One runtime per client CPU (one unpinned runtime if none), never more than clients.
    let cpus: Vec<Option<usize>> = if spec.client_cpus.is_empty() {
        vec![None]
    } else {
        spec.client_cpus
            .iter()
            .copied()
            .map(Some)
            .take(spec.concurrency)
            .collect()
    };
    let runtimes = cpus.len();
    log::debug!(
        "load: {} clients on {runtimes} runtime(s), cpus {:?}",
        spec.concurrency,
        spec.client_cpus
    );
    let barrier = Arc::new(Barrier::new(runtimes));
    let abort = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::with_capacity(runtimes);
    for (r, cpu) in cpus.into_iter().enumerate() {
        let clients: Vec<usize> = (r..spec.concurrency).step_by(runtimes).collect();
        let (plan, thread_barrier, thread_abort) = (plan.clone(), barrier.clone(), abort.clone());
        let handle = std::thread::Builder::new()
            .name(format!("loadgen-{r}"))
            .spawn(move || runtime_thread(cpu, &clients, &plan, &thread_barrier, &thread_abort));
        match handle {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The barrier would wait forever for this thread: release the others first.
                abort.store(true, Ordering::SeqCst);
                for _ in handles.len()..runtimes {
                    let barrier = barrier.clone();
                    std::thread::spawn(move || barrier.wait());
                }
                join_all(handles);
                return Err(e).context("spawning a load generator thread");
            }
        }
    }

    let mut results = Vec::with_capacity(runtimes);
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(Some(r))) => results.push(r),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(anyhow!("a load generator thread panicked"));
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }

    let mut merged = RuntimeStats::new(spec.rate.is_some(), spec.workload == Workload::ShortEcho);
    for r in &results {
        merged.merge(&r.stats);
    }
    let start = results.iter().map(|r| r.start).min();
    let end = results.iter().map(|r| r.end).max();
    let elapsed = match (start, end) {
        (Some(s), Some(e)) => e - s,
        _ => Duration::ZERO,
    };
    Ok(LoadReport {
        requests: merged.requests,
        elapsed,
        latency: merged.latency,
        corrected_latency: merged.corrected,
        send_lateness: merged.late,
        connect_latency: merged.connect,
        errors: merged.errors,
        interrupted: plan
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed)),
    })
}

fn join_all<T>(handles: Vec<std::thread::JoinHandle<T>>) {
    for h in handles {
        let _ = h.join();
    }
}

/// Body of one runtime thread: pin, build the runtime, wait for the others, run the clients.
/// `Ok(None)`: another thread failed to start, so this one did not run.
fn runtime_thread(
    cpu: Option<usize>,
    clients: &[usize],
    plan: &Arc<Plan>,
    barrier: &Barrier,
    abort: &AtomicBool,
) -> anyhow::Result<Option<ThreadResult>> {
    let setup = (|| -> anyhow::Result<tokio::runtime::Runtime> {
        if let Some(cpu) = cpu {
            crate::cpus::affinity::pin_current(cpu)
                .with_context(|| format!("pinning a client thread to CPU {cpu}"))?;
        }
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .context("building a client runtime")
    })();
    if setup.is_err() {
        abort.store(true, Ordering::SeqCst);
    }
    // Start together, so that no runtime's clients run alone for a while.
    barrier.wait();
    let rt = setup?;
    if abort.load(Ordering::SeqCst) {
        return Ok(None);
    }

    let start = Instant::now();
    let deadline = plan.duration.map(|d| later(start, d));
    let stats = Rc::new(RefCell::new(RuntimeStats::new(
        plan.pacing.is_some(),
        plan.workload == Workload::ShortEcho,
    )));
    let local = LocalSet::new();
    let panicked = local.block_on(&rt, async {
        let tasks: Vec<_> = clients
            .iter()
            .map(|&id| {
                tokio::task::spawn_local(client_loop(
                    id,
                    start,
                    deadline,
                    plan.clone(),
                    stats.clone(),
                ))
            })
            .collect();
        // Cancellation aborts the clients wherever they wait (a paced sleep, a request).
        if let Some(cancel) = plan.cancel.clone() {
            let clients: Vec<_> = tasks
                .iter()
                .map(tokio::task::JoinHandle::abort_handle)
                .collect();
            tokio::task::spawn_local(async move {
                let mut tick = tokio::time::interval(super::CANCEL_CHECK);
                loop {
                    tick.tick().await;
                    if cancel.load(Ordering::Relaxed) {
                        clients.iter().for_each(tokio::task::AbortHandle::abort);
                        break;
                    }
                }
            });
        }
        let mut panicked = false;
        for t in tasks {
            panicked |= t.await.is_err_and(|e| e.is_panic());
        }
        panicked
    });
    let end = Instant::now();
    drop(local);
    drop(rt);
    if panicked {
        return Err(anyhow!("a load generator client panicked"));
    }
    let stats = Rc::try_unwrap(stats)
        .map_err(|_| anyhow!("client stats still shared"))?
        .into_inner();
    Ok(Some(ThreadResult { start, end, stats }))
}

/// One client: claim a ticket, (in open loop) wait for the intended send time, send, record;
/// until the tickets or the time run out.
async fn client_loop(
    id: usize,
    start: Instant,
    deadline: Option<Instant>,
    plan: Arc<Plan>,
    stats: Rc<RefCell<RuntimeStats>>,
) {
    let mut client = Client::new(plan.workload, plan.addr, plan.payload, id);
    let pacer = Pacer::new();
    // One timer reused for every request: pushing its deadline later is cheap in tokio.
    let timer = tokio::time::sleep_until(later(start, plan.timeout).into());
    tokio::pin!(timer);
    let mut sent: u32 = 0;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) || !plan.claim() {
            break;
        }
        let intended = match plan.pacing {
            Some((interval, offset)) => {
                // None: the schedule runs past what an Instant can hold; nothing left to send.
                let Some(at) = intended_send(start, offset, id, interval, sent) else {
                    break;
                };
                if deadline.is_some_and(|d| at >= d) {
                    break;
                }
                pacer.until(at).await;
                Some(at)
            }
            None => None,
        };
        sent = sent.saturating_add(1);

        let sent_at = Instant::now();
        let own_limit = later(sent_at, plan.timeout);
        let limit = deadline.map_or(own_limit, |d| d.min(own_limit));
        timer.as_mut().reset(limit.into());
        let outcome = tokio::select! {
            biased;
            r = client.request() => Some(r),
            () = &mut timer => None,
        };
        let mut stats = stats.borrow_mut();
        match outcome {
            Some(Ok(done)) => stats.record(sent_at, intended, &done),
            Some(Err(kind)) => {
                client.disconnect();
                stats.errors.add(kind);
            }
            None => {
                client.disconnect();
                // Cut by the end of a timed run, not by its own timeout: neither ok nor failed.
                if deadline.is_some_and(|d| limit == d && Instant::now() >= d) {
                    break;
                }
                stats.errors.add(super::RequestErrorKind::Timeout);
            }
        }
        drop(stats);
        if let Some(p) = &plan.progress {
            p.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The open loop's clock: a timerfd per client, armed for each send. It is an hrtimer, so it
/// fires within microseconds of the send time; tokio's own timer wheel has 1 ms slots and ended
/// a sleep up to 1 ms late, which was in every corrected latency (p50 800 µs against 68 µs
/// uncorrected at 3000 req/s). Spinning out the last milliseconds instead kept a CPU busy and
/// starved a server sharing it.
struct Pacer {
    timer: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl Pacer {
    /// A timerfd in the current runtime; without one (no timerfd, or no runtime I/O) pacing
    /// falls back to tokio's timer.
    fn new() -> Self {
        use std::os::fd::FromRawFd as _;
        // SAFETY: a plain syscall; the descriptor is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        let timer = (fd >= 0)
            .then(|| {
                // SAFETY: a fresh descriptor that nothing else owns.
                let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
                // SAFETY: the OwnedFd keeps the descriptor open, and the same one, for as long
                // as the AsyncFd that owns it.
                unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        owned,
                        tokio::io::Interest::READABLE,
                    )
                }
                .ok()
            })
            .flatten();
        Self { timer }
    }

    /// Waits until `at`.
    async fn until(&self, at: Instant) {
        let wait = at.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return;
        }
        let Some(timer) = &self.timer else {
            tokio::time::sleep_until(at.into()).await;
            return;
        };
        use std::os::fd::AsRawFd as _;
        let fd = timer.get_ref().as_raw_fd();
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(wait.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(wait.subsec_nanos()),
            },
        };
        // SAFETY: our own timerfd and a valid itimerspec; no old value asked for.
        if unsafe { libc::timerfd_settime(fd, 0, &raw const spec, std::ptr::null_mut()) } != 0 {
            tokio::time::sleep_until(at.into()).await;
            return;
        }
        loop {
            let Ok(mut ready) = timer.readable().await else {
                tokio::time::sleep_until(at.into()).await;
                return;
            };
            let mut expirations = 0u64;
            // SAFETY: reading the 8-byte expiration count into a local.
            let n = unsafe { libc::read(fd, (&raw mut expirations).cast(), 8) };
            if n == 8 {
                return;
            }
            ready.clear_ready();
        }
    }
}

/// `t + d`, or about 30 years after `t` if that overflows (a "never" that timers accept).
fn later(t: Instant, d: Duration) -> Instant {
    const NEVER: Duration = Duration::from_hours(262_800);
    t.checked_add(d.min(NEVER)).unwrap_or(t)
}

/// Open loop: when client `id` should send its request number `sent` (from 0).
fn intended_send(
    start: Instant,
    offset: Duration,
    id: usize,
    interval: Duration,
    sent: u32,
) -> Option<Instant> {
    let first = offset.checked_mul(u32::try_from(id).ok()?)?;
    start
        .checked_add(first)?
        .checked_add(interval.checked_mul(sent)?)
}
