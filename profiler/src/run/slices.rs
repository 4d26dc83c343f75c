//! The warm engine, `profiler run`'s default: plan → warm servers → slices → per-slice figures
//! → inference → report.
//!
//! - **Warm servers.** Every variant's server is started once per scenario, and the kernel
//!   programs are loaded and attached once, tracing all of them at the same time.
//! - **Slices.** The load generator moves from server to server in short slices. A slice is a
//!   warm-up (dropped), then the measured window of a fixed number of requests. Before and after
//!   the window the server is let settle (its threads' run time still for 200 µs) and the
//!   kernel's maps and the server's schedstat are read: the window's figures are the deltas.
//!   Every request of a window completes inside it (a closed loop of requests: the last ones
//!   drain before the window ends), so calls per request count whole requests, at any
//!   concurrency.
//! - **Blocks.** Each block visits every server once, in a random order; with baselines each
//!   server's profiled and baseline slices are adjacent, in a random order. A comparison's pair is
//!   its two slices of one block: whatever the machine's drift, which of the two came first is a
//!   fair coin, so the sign of a pair's difference is exchangeable under no difference, and the
//!   sign test's level holds (`inference`; the simulation test below drifts).
//! - **Baseline slices** keep the programs attached but stop counting that server
//!   ([`Session::pause`]): the profiler's cost they measure is its cost above the attached floor
//!   (the programs run and find the server untracked), which `profiler bench overhead`
//!   measures.
//! - **Stopping.** After each block that is one of the design's looks, the scenario stops once
//!   every comparison is decided, or when its share of `--max-time` is spent.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use super::{
    RunOptions, ScenarioSpec,
    model::{CpuTime, RunKind, RunResult, ScenarioResult, SliceFigures, Subject},
    server::{self, Server},
};
use crate::{
    bpf::{Session, SessionConfig, Target},
    loadgen::{self, LoadReport, LoadSpec, Stop},
    stats::Snapshot,
};

/// A window lasts at least this long.
pub const MIN_WINDOW: Duration = Duration::from_millis(50);
/// And at least this many times the measured cost of a switch, so that switching (settling,
/// reading the maps, starting the load) takes at most a tenth of a slice.
pub const WINDOW_PER_SWITCH: f64 = 10.0;
/// Requests of each server's first warm-up, when `--warmup` gives no count.
pub const CALIBRATION_REQUESTS: u64 = 500;
/// The server is settled when its threads' run time has not moved for this long.
const SETTLED_FOR: Duration = Duration::from_micros(200);
/// And settling gives up after this long (a server that never rests: a spinner).
const SETTLE_AT_MOST: Duration = Duration::from_millis(5);
/// After this many blocks the window is checked against the switches' measured cost.
pub const RECALIBRATE_AFTER: u32 = 4;
/// A server that fails is started again at most this many times per scenario.
pub const MAX_RESTARTS: u32 = 3;

/// How a scenario was sliced, and where its time went.
#[derive(Clone, Debug, PartialEq)]
pub struct SliceDesign {
    /// Each window: a request count (calibrated, or `--requests`), or `--duration`.
    pub window: Stop,
    /// Requests of the warm-up after each switch.
    pub warmup: u64,
    /// How the window's length was chosen, in a sentence.
    pub how: String,
    /// Blocks made.
    pub blocks: u32,
    /// The seed of the blocks' random order.
    pub seed: u64,
    /// Where the time went.
    pub budget: Budget,
    /// Calls of the other servers counted inside a window (a timer of a user's server): in
    /// the syscall tables of the window's server, so they are said.
    pub other_calls: u64,
    /// Calls counted for a server in its baseline slices (0 unless pausing failed).
    pub baseline_calls: u64,
    /// A line per server that failed and was restarted.
    pub restarted: Vec<String>,
}

/// Where a scenario's time went.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Budget {
    /// The whole scenario, servers started to stopped.
    pub total: Duration,
    /// In measured windows.
    pub windows: Duration,
    /// In the warm-ups after each switch.
    pub warmups: Duration,
    /// Starting the servers, loading the programs, calibrating.
    pub startup: Duration,
    /// Stopping the servers (the programs detach in the background meanwhile).
    pub teardown: Duration,
}

impl Warm {
    /// Where it listens.
    #[must_use]
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr
    }

    /// Its processes.
    #[must_use]
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// Stops it.
    pub fn stop(self) {
        let _ = self.server.stop(false);
    }
}

impl Budget {
    /// The rest: settling, reading the maps, starting the load generator, stopping.
    #[must_use]
    pub fn switching(&self) -> Duration {
        self.total
            .saturating_sub(self.windows + self.warmups + self.startup + self.teardown)
    }

    /// "61.2 s: requests 86.0%, warm-up 4.1%, switching 6.9%, start-up and teardown 3.0%".
    #[must_use]
    pub fn line(&self) -> String {
        let total = self.total.as_secs_f64().max(1e-9);
        let share = |d: Duration| 100.0 * d.as_secs_f64() / total;
        format!(
            "{:.1} s: requests {:.1}%, warm-up {:.1}%, switching {:.1}%, start-up {:.1}% and teardown {:.1}%",
            self.total.as_secs_f64(),
            share(self.windows),
            share(self.warmups),
            share(self.switching()),
            share(self.startup),
            share(self.teardown)
        )
    }

    /// The share of the time in measured windows, 0–1.
    #[must_use]
    pub fn requests_share(&self) -> f64 {
        self.windows.as_secs_f64() / self.total.as_secs_f64().max(1e-9)
    }
}

/// splitmix64: the blocks' random order (and the simulations'), from a seed the report prints.
#[derive(Clone, Debug)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// A seed from the clock.
    #[must_use]
    pub fn from_clock() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self(nanos ^ u64::from(std::process::id()).rotate_left(32))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A fair coin.
    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * n as f64) as usize
    }
}

/// One block's order: every variant once in a random order (Fisher-Yates), each with its
/// profiled slice, and with `baseline` its baseline slice right next to it, which one first
/// a fair coin.
pub fn block_order(variants: usize, baseline: bool, rng: &mut SplitMix) -> Vec<(usize, RunKind)> {
    let mut order: Vec<usize> = (0..variants).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i + 1);
        order.swap(i, j);
    }
    let mut out = Vec::with_capacity(variants * 2);
    for v in order {
        if !baseline {
            out.push((v, RunKind::Profiled));
        } else if rng.coin() {
            out.extend([(v, RunKind::Profiled), (v, RunKind::Baseline)]);
        } else {
            out.extend([(v, RunKind::Baseline), (v, RunKind::Profiled)]);
        }
    }
    out
}

/// Whether `spec` runs on the warm engine: pairs until decided (no `--runs`), more than one
/// thing to compare, and nothing that needs a fresh server or a session per run (`--strace`,
/// `--drop-caches`, `--slow`, `--explain-cost`).
#[must_use]
pub fn applies(options: &RunOptions, spec: &ScenarioSpec, servers: usize) -> bool {
    spec.sequential
        && !spec.strace
        && !spec.drop_caches
        && options.slow.is_none()
        && !options.explain_cost
        && (servers >= 2 || spec.baseline)
}

/// A server of the scenario, started once.
pub struct Warm {
    server: Server,
    /// Its processes (the server, its workers).
    pids: Vec<u32>,
    /// Idle connections held open (`--idle-conns`).
    _idle: Option<Vec<std::net::TcpStream>>,
}

/// One slice's measurements.
struct Measured {
    load: LoadReport,
    delta: Snapshot,
    cpu: CpuTime,
    warmup: Duration,
    /// Warm-up, settling, reading and the window: the slice's whole time.
    total: Duration,
}

/// Measures the scenario `spec` on the warm engine into `result` (its variants' slices and
/// one run per kind summing them; `result.slices` says how). Returns why it stopped early
/// (Ctrl-C), if it did.
#[expect(
    clippy::too_many_arguments,
    reason = "measure_warm's, less the servers, plus the detaching sessions' handles"
)]
pub(super) fn run_scenario(
    options: &RunOptions,
    spec: &ScenarioSpec,
    variants: &[Subject],
    result: &mut ScenarioResult,
    deadline: Option<Instant>,
    cancel: &Arc<AtomicBool>,
    note: &dyn Fn(&str),
    detaching: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<Option<String>> {
    let started = Instant::now();
    // The profiler's own thread reads the maps between slices: on the client CPUs, as the
    // load generator, never on a server CPU.
    let _pinned = super::collector_cpus(&options.client_cpus);
    let mut warm = start_servers(options, spec, variants, result);
    let why = measure_warm(
        options, spec, variants, &mut warm, result, deadline, cancel, note, started, detaching,
    )?;
    let ended = Instant::now();
    for w in warm.into_iter().flatten() {
        let _ = w.server.stop(false);
    }
    if let Some(d) = &mut result.slices {
        d.budget.teardown += ended.elapsed();
        d.budget.total = started.elapsed();
    }
    Ok(why)
}

/// Starts every variant's server once (a failure is the variant's, in `result`), with the
/// idle connections `--idle-conns` asks for.
pub fn start_servers(
    options: &RunOptions,
    spec: &ScenarioSpec,
    variants: &[Subject],
    result: &mut ScenarioResult,
) -> Vec<Option<Warm>> {
    let mut warm: Vec<Option<Warm>> = Vec::new();
    for (i, variant) in variants.iter().enumerate() {
        if result.variants[i].failure.is_some() {
            warm.push(None);
            continue;
        }
        let started = Server::start(
            &super::server_spec(options, spec, variant, None),
            |_| Ok(()),
        )
        .and_then(|server| {
            let idle = super::idle_connections(options, server.addr)?;
            Ok(Warm {
                pids: super::traced(variant, server.pid()),
                server,
                _idle: idle,
            })
        });
        match started {
            Ok(w) => warm.push(Some(w)),
            Err(e) => {
                result.variants[i].failure = Some(format!("{e:#}"));
                warm.push(None);
            }
        }
    }
    warm
}

/// The warm servers `warm` (as [`start_servers`] left them) measured in blocks of slices
/// until decided, `deadline` or the design's most pairs: one session for all of them,
/// calibration, the blocks, the totals. A server that dies is left out (`None`) with its
/// failure. The servers are left running.
#[expect(
    clippy::too_many_lines,
    clippy::too_many_arguments,
    reason = "the pipeline in order: session, calibration, blocks, totals"
)]
pub fn measure_warm(
    options: &RunOptions,
    spec: &ScenarioSpec,
    variants: &[Subject],
    warm: &mut [Option<Warm>],
    result: &mut ScenarioResult,
    deadline: Option<Instant>,
    cancel: &Arc<AtomicBool>,
    note: &dyn Fn(&str),
    started: Instant,
    detaching: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<Option<String>> {
    let all_pids: Vec<u32> = warm.iter().flatten().flat_map(|w| w.pids.clone()).collect();
    if all_pids.is_empty() {
        return Ok(None);
    }
    let request = super::trace_request(options);
    let compat = variants
        .iter()
        .any(|v| !crate::process::is_elf64(&super::server_spec(options, spec, v, None).program()));
    let mut session = Session::start(&SessionConfig {
        // The compat programs run for every syscall of the machine: only for a server that is
        // not a 64-bit ELF program (a 32-bit one, or a script).
        compat,
        ..request.session_config(Target::Processes(all_pids.clone()))
    })?;
    let front = session.syscall_front().describe();
    let template = {
        let mut l = LoadSpec::new(all_addr(warm), options.workload);
        l.concurrency = spec.concurrency;
        l.payload = options.payload;
        l.rate = options.rate;
        l.client_cpus.clone_from(&options.client_cpus);
        l.timeout = options.timeout;
        l.cancel = Some(Arc::clone(cancel));
        l
    };

    // Calibration: each server's first warm-up, measured as a slice: its QPS, and what a
    // switch costs besides the requests.
    let calibration = match options.warmup {
        Some(Stop::Requests(n)) if n > 0 => n,
        _ => CALIBRATION_REQUESTS,
    };
    let mut slowest_qps = f64::INFINITY;
    let mut switch_costs = Vec::new();
    for (i, w) in warm.iter_mut().enumerate() {
        let Some(ws) = w else { continue };
        let warmup = (calibration / 10).max(2 * spec.concurrency as u64);
        match measure(&session, ws, &template, Stop::Requests(calibration), warmup) {
            Ok(m) => {
                if m.load.interrupted {
                    return Ok(Some("interrupted (Ctrl-C)".to_owned()));
                }
                if m.load.requests == 0 {
                    result.variants[i].failure = Some(format!(
                        "every request of the calibration failed ({})",
                        m.load.errors
                    ));
                    *w = None;
                    continue;
                }
                slowest_qps = slowest_qps.min(m.load.qps());
                switch_costs.push(m.total.saturating_sub(m.load.elapsed + m.warmup));
            }
            Err(e) => {
                result.variants[i].failure = Some(format!("{e:#}"));
                *w = None;
            }
        }
    }
    if !slowest_qps.is_finite() {
        return Ok(None);
    }
    let switch = {
        switch_costs.sort();
        switch_costs[switch_costs.len() / 2]
    };
    let target = MIN_WINDOW.max(switch.mul_f64(WINDOW_PER_SWITCH));
    let (mut window, mut how) = if let Some(stop) = options.slice {
        (stop, "as --requests/--duration gave it".to_owned())
    } else {
        let n = (slowest_qps * target.as_secs_f64()).ceil().max(1.0) as u64;
        (
            Stop::Requests(n.max(4 * spec.concurrency as u64)),
            format!(
                "calibrated: about {} at the slowest server's {:.0} QPS, the longer of {} and {WINDOW_PER_SWITCH:.0}× the {} a switch was measured to cost",
                crate::report::units::duration_ns(target.as_nanos() as f64),
                slowest_qps,
                crate::report::units::duration_ns(MIN_WINDOW.as_nanos() as f64),
                crate::report::units::duration_ns(switch.as_nanos() as f64),
            ),
        )
    };
    let window_requests = match window {
        Stop::Requests(n) => n,
        Stop::Duration(d) => (slowest_qps * d.as_secs_f64()).ceil() as u64,
    };
    let mut warmup = (window_requests / 20).max(2 * spec.concurrency as u64);
    let startup = started.elapsed();
    let blocks_began = Instant::now();
    let mut grown: Option<String> = None;

    let noise = crate::noise::Probe::start(&options.server_cpus_of(spec));
    let max_pairs = result.judge.design.looks.last().copied().unwrap_or(1);
    let mut rng = SplitMix::from_clock();
    let seed = rng.0;
    let mut budget = Budget {
        startup,
        ..Budget::default()
    };
    let mut other_calls = 0;
    let mut baseline_calls = 0;
    let mut restarts = vec![0_u32; variants.len()];
    let mut restarted: Vec<String> = Vec::new();
    let mut totals: Vec<Vec<RunResult>> = variants.iter().map(|_| Vec::new()).collect();
    let mut blocks = 0_u32;
    let mut stopped_early = None;
    result.stopped = format!("{max_pairs} pairs, the most --max-pairs allows");
    'blocks: while (blocks as usize) < max_pairs {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            result.stopped = format!("the time budget was spent at {blocks} pairs");
            break;
        }
        blocks += 1;
        for (i, kind) in block_order(variants.len(), spec.baseline, &mut rng) {
            if cancel.load(Ordering::Relaxed) {
                stopped_early = Some("interrupted (Ctrl-C)".to_owned());
                break 'blocks;
            }
            let Some(w) = &mut warm[i] else { continue };
            match kind {
                RunKind::Baseline => session.pause(&w.pids)?,
                _ => session.resume(&w.pids)?,
            }
            let measured = measure(&session, w, &template, window, warmup);
            let died = w
                .server
                .exit_status()?
                .map(|how| format!("the server {how}{}", w.server.stderr_tail()));
            let m = match (measured, died) {
                (_, Some(how)) => {
                    // Restarted (a few times at most), its slice of this block left out: the
                    // block's pairs with it are not made, the others' are.
                    let old = warm[i].take();
                    let again = (restarts[i] < MAX_RESTARTS
                        && !matches!(variants[i], Subject::Running(_)))
                    .then(|| restart(options, spec, &variants[i], &mut session, old));
                    match again {
                        Some(Ok(w)) => {
                            restarts[i] += 1;
                            restarted.push(format!(
                                "{}: {how} in block {blocks}, and was restarted (that block's slice left out)",
                                variants[i]
                            ));
                            warm[i] = Some(w);
                        }
                        Some(Err(e)) => {
                            result.variants[i].failure = Some(format!(
                                "{how} in block {blocks}; restarting it failed: {e:#}"
                            ));
                        }
                        None => {
                            result.variants[i].failure = Some(format!("{how} in block {blocks}"));
                        }
                    }
                    continue;
                }
                (Err(e), None) => {
                    result.variants[i].failure = Some(format!("{e:#}"));
                    warm[i] = None;
                    continue;
                }
                (Ok(m), None) => m,
            };
            if m.load.interrupted {
                stopped_early = Some("interrupted (Ctrl-C)".to_owned());
                break 'blocks;
            }
            budget.windows += m.load.elapsed;
            budget.warmups += m.warmup;
            let own = |pid: u32| w.pids.contains(&pid);
            other_calls += m
                .delta
                .processes
                .iter()
                .filter(|p| !own(p.pid))
                .map(crate::stats::RowSummary::total_calls)
                .sum::<u64>();
            if kind == RunKind::Baseline {
                baseline_calls += m
                    .delta
                    .processes
                    .iter()
                    .filter(|p| own(p.pid))
                    .map(crate::stats::RowSummary::total_calls)
                    .sum::<u64>();
            }
            let figures = figures(&m, blocks, kind, &w.pids);
            absorb(&mut totals[i], kind, &m, &front);
            result.variants[i].slices.push(figures);
        }
        // The calibration's switch is two servers' worth of one switch each: after a few blocks,
        // and again at each look, the switches' real cost (settling, the reads, adding the
        // slice to the totals, the looks, the load generator's start) is known, and a window
        // that is less than WINDOW_PER_SWITCH of them grows (never shrinks) from the next block
        // on; a block's slices keep one window between them.
        if options.slice.is_none()
            && (blocks == RECALIBRATE_AFTER || result.judge.design.is_look(blocks as usize))
            && let Stop::Requests(n) = window
        {
            let slices_made: usize = result.variants.iter().map(|v| v.slices.len()).sum();
            let spent = blocks_began
                .elapsed()
                .saturating_sub(budget.windows + budget.warmups);
            let per_switch = spent / u32::try_from(slices_made.max(1)).unwrap_or(u32::MAX);
            let wanted =
                (slowest_qps * per_switch.mul_f64(WINDOW_PER_SWITCH).as_secs_f64()).ceil() as u64;
            if wanted > n + n / 5 {
                window = Stop::Requests(wanted);
                warmup = (wanted / 20).max(2 * spec.concurrency as u64);
                grown = Some(format!(
                    "; after {blocks} blocks a switch was measured to cost {} and the window grew to {wanted} requests, {WINDOW_PER_SWITCH:.0}× that",
                    crate::report::units::duration_ns(per_switch.as_nanos() as f64),
                ));
            }
        }
        if result.judge.design.is_look(blocks as usize) {
            let decided = result.decided();
            let line = look_line(result, blocks);
            note(&line);
            if decided {
                result.stopped = format!("every comparison decided at {blocks} pairs");
                break;
            }
        }
    }
    let mut pids: Vec<u32> = Vec::new();
    for w in warm.iter().flatten() {
        pids.extend(&w.pids);
    }
    let noise = noise.finish(&pids);
    // Detaching takes a second with fentry (each trampoline waits for the kernel's RCU
    // grace periods), doing almost nothing on a CPU: it goes on in the background while the
    // servers stop and the next scenario starts; the caller joins it.
    detaching.push(std::thread::spawn(move || drop(session)));
    for (v, mut runs) in result.variants.iter_mut().zip(totals) {
        for r in &mut runs {
            r.noise = Some(noise.clone());
        }
        v.runs = runs;
    }
    budget.total = started.elapsed();
    if let Some(grown) = grown {
        how.push_str(&grown);
    }
    result.slices = Some(SliceDesign {
        window,
        warmup,
        how,
        blocks,
        seed,
        budget,
        other_calls,
        baseline_calls,
        restarted,
    });
    Ok(stopped_early)
}

/// A failed server stopped (reaped) and started again, its processes tracked by `session`.
fn restart(
    options: &RunOptions,
    spec: &ScenarioSpec,
    variant: &Subject,
    session: &mut Session,
    old: Option<Warm>,
) -> Result<Warm> {
    if let Some(old) = old {
        let _ = old.server.stop(false);
    }
    let server = Server::start(
        &super::server_spec(options, spec, variant, None),
        |_| Ok(()),
    )?;
    let idle = super::idle_connections(options, server.addr)?;
    let pids = super::traced(variant, server.pid());
    for &pid in &pids {
        session.track_if_running(pid)?;
    }
    Ok(Warm {
        pids,
        server,
        _idle: idle,
    })
}

/// The address of the first warm server (the load spec's template; each slice sets its own).
fn all_addr(warm: &[Option<Warm>]) -> std::net::SocketAddr {
    warm.iter()
        .flatten()
        .map(|w| w.server.addr)
        .next()
        .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
}

/// One slice against `w`: a warm-up of `warmup` requests, the server settled, the maps and its
/// schedstat read, the window, settled, read again.
fn measure(
    session: &Session,
    w: &Warm,
    template: &LoadSpec,
    window: Stop,
    warmup: u64,
) -> Result<Measured> {
    let begun = Instant::now();
    let trace = log::log_enabled!(log::Level::Debug);
    let mut marks: Vec<(&'static str, Instant)> = vec![("start", begun)];
    let mut load = template.clone();
    load.addr = w.server.addr;
    let mut warm = load.clone();
    warm.stop = Stop::Requests(warmup);
    warm.rate = None;
    let warm_report = loadgen::run_lean(&warm).context("a slice's warm-up")?;
    marks.push(("warmup", Instant::now()));
    let (before, cpu_before) = settled_read(session, &w.pids, &mut marks)?;
    load.stop = window;
    let report = loadgen::run_lean(&load).context("a slice")?;
    marks.push(("window", Instant::now()));
    let (after, cpu_after) = settled_read(session, &w.pids, &mut marks)?;
    if trace {
        let steps: Vec<String> = marks
            .windows(2)
            .map(|m| format!("{} {:?}", m[1].0, m[1].1 - m[0].1))
            .collect();
        log::debug!(
            "slice: {} (load elapsed {:?})",
            steps.join(", "),
            report.elapsed
        );
    }
    Ok(Measured {
        delta: after.since(&before),
        cpu: cpu_after.since(&cpu_before),
        load: report,
        warmup: warm_report.elapsed,
        total: begun.elapsed(),
    })
}

/// The server settled, then the kernel's maps and its schedstat read (timed into `marks`).
fn settled_read(
    session: &Session,
    pids: &[u32],
    marks: &mut Vec<(&'static str, Instant)>,
) -> Result<(Snapshot, CpuTime)> {
    settle(pids);
    marks.push(("settle", Instant::now()));
    let snapshot = session.snapshot()?;
    marks.push(("snapshot", Instant::now()));
    Ok((snapshot, server::cpu_time(pids)))
}

/// Waits until the server's threads have not run for [`SETTLED_FOR`] (its last answer's close
/// done), [`SETTLE_AT_MOST`] at most.
fn settle(pids: &[u32]) {
    let until = Instant::now() + SETTLE_AT_MOST;
    let mut last = server::cpu_time(pids).on_cpu_ns;
    let mut still_since = Instant::now();
    while Instant::now() < until {
        std::thread::sleep(Duration::from_micros(50));
        let now = server::cpu_time(pids).on_cpu_ns;
        if now != last {
            last = now;
            still_since = Instant::now();
        } else if still_since.elapsed() >= SETTLED_FOR {
            return;
        }
    }
}

/// The figures a pair compares, from one slice.
fn figures(m: &Measured, block: u32, kind: RunKind, pids: &[u32]) -> SliceFigures {
    let finished = m.load.requests + m.load.errors.total();
    let mut calls: Vec<(String, f64)> = Vec::new();
    if kind == RunKind::Profiled {
        for (slot, syscall) in m.delta.syscalls.iter().enumerate() {
            let n: u64 = m
                .delta
                .processes
                .iter()
                .filter(|p| pids.contains(&p.pid))
                .filter_map(|p| p.syscalls.get(slot))
                .map(|s| s.calls)
                .sum();
            if let Some(c) = crate::stats::calls_per_request(n, finished) {
                calls.push((syscall.name.clone(), c));
            }
        }
    }
    SliceFigures {
        block,
        kind,
        requests: m.load.requests,
        qps: m.load.qps(),
        p50_ns: m.load.latency.value_at_quantile(0.5) as f64,
        p99_ns: m.load.latency.value_at_quantile(0.99) as f64,
        cpu_ns_per_request: (m.cpu.on_cpu_ns > 0)
            .then(|| crate::stats::per_request(m.cpu.on_cpu_ns as f64, finished))
            .flatten(),
        calls_per_request: calls,
    }
}

/// Adds a slice to its kind's total run.
fn absorb(runs: &mut Vec<RunResult>, kind: RunKind, m: &Measured, front: &str) {
    let Some(run) = runs.iter_mut().find(|r| r.kind == kind) else {
        runs.push(RunResult {
            run: 1,
            kind,
            load: m.load.clone(),
            syscalls: if kind == RunKind::Profiled {
                m.delta.clone()
            } else {
                Snapshot::default()
            },
            strace: Vec::new(),
            server_cpu: Some(m.cpu),
            server_died: None,
            warmup_requests: 0,
            slow: None,
            programs: Vec::new(),
            front: (kind == RunKind::Profiled).then(|| front.to_owned()),
            noise: None,
        });
        return;
    };
    run.load.add(&m.load);
    if kind == RunKind::Profiled {
        run.syscalls.merge(&m.delta);
    }
    if let Some(cpu) = &mut run.server_cpu {
        cpu.add(&m.cpu);
    }
}

/// A progress line at a look: each comparison's QPS change so far.
fn look_line(result: &ScenarioResult, blocks: u32) -> String {
    let mut parts: Vec<String> = result
        .variant_changes()
        .iter()
        .map(|(v, r, c)| {
            format!(
                "{} against {}: {} {}",
                v.variant,
                r.variant,
                c.qps.cell("pairs"),
                c.verdict.words("faster", "slower")
            )
        })
        .collect();
    parts.extend(
        result
            .kind_changes(RunKind::Profiled, RunKind::Baseline)
            .iter()
            .map(|(v, c)| {
                format!(
                    "profiler's cost, {}: {} {}",
                    v.variant,
                    c.qps.cell("pairs"),
                    c.verdict.words("faster", "slower")
                )
            }),
    );
    format!("{}: block {blocks}: {}", result.title, parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How the machine drifts under a simulated experiment, per slice (in log QPS).
    #[derive(Clone, Copy, Debug)]
    enum Drift {
        /// AR(1): each slice keeps 95% of the last one's deviation, σ 2% a step (a slow wander
        /// of about ±6%).
        Ar1,
        /// Steps: with chance 5% a slice, the level jumps by N(0, 10%) and stays (a neighbour
        /// starts or stops).
        Steps,
        /// A periodic neighbour: a square wave of ±8% with a period of 7 slices (it beats
        /// against the blocks' length), plus a sine of ±5% over 40.
        Periodic,
    }

    impl Drift {
        const ALL: [Self; 3] = [Self::Ar1, Self::Steps, Self::Periodic];

        fn next(self, t: usize, level: &mut f64, rng: &mut SplitMix) -> f64 {
            let normal = |rng: &mut SplitMix| {
                let (u, v) = (rng.uniform(), rng.uniform());
                (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
            };
            match self {
                Self::Ar1 => {
                    *level = 0.95 * *level + 0.02 * normal(rng);
                    *level
                }
                Self::Steps => {
                    if rng.uniform() < 0.05 {
                        *level += 0.10 * normal(rng);
                    }
                    *level
                }
                Self::Periodic => {
                    let square = if (t / 4).is_multiple_of(2) {
                        0.08
                    } else {
                        -0.08
                    };
                    square + 0.05 * (std::f64::consts::TAU * t as f64 / 40.0).sin()
                }
            }
        }
    }

    /// The engine's inference under drift: simulated slices in the engine's block order (two
    /// variants with baselines), paired by block and judged by the scenario's own code
    /// (`ScenarioResult::variant_changes`, `kind_changes`) with the sequential design, stopped
    /// by the most eager rule (the first look at which everything is decided). Whatever the
    /// drift (AR(1), steps, a periodic neighbour), each comparison's interval covers the true
    /// change at least 94% of the time, for a true change of 0 and of +3% (variants) and −5%
    /// (the profiler's cost).
    #[test]
    fn intervals_cover_under_drift_whatever_the_stopping_rule() {
        use crate::{
            inference::Design,
            run::model::{Judge, Subject, Variant, VariantResult},
        };
        const EXPERIMENTS: usize = 1500;
        const MAX_PAIRS: usize = 128;
        let design = Design::sequential_doubling(MAX_PAIRS);
        assert!(design.sequential && design.level() >= 0.95, "{design:?}");
        let mut rng = SplitMix(17);
        let mut table = String::new();
        for drift in Drift::ALL {
            for effect in [0.0_f64, 0.03] {
                let cost = -0.05_f64;
                let (mut covered_variant, mut covered_cost) = (0, 0);
                for _ in 0..EXPERIMENTS {
                    let mut result = ScenarioResult {
                        title: "simulated".to_owned(),
                        concurrency: 1,
                        variants: [Variant::Lt, Variant::Et]
                            .into_iter()
                            .map(|v| VariantResult {
                                variant: Subject::Builtin(v),
                                runs: Vec::new(),
                                slices: Vec::new(),
                                failure: None,
                            })
                            .collect(),
                        mp_workers: None,
                        server_cpus: Vec::new(),
                        shared_cpus: Vec::new(),
                        judge: Judge {
                            design: design.clone(),
                            margin_pct: 2.0,
                        },
                        stopped: String::new(),
                        slices: None,
                    };
                    let mut level = 0.0;
                    let mut t = 0;
                    for block in 1..=MAX_PAIRS as u32 {
                        for (i, kind) in block_order(2, true, &mut rng) {
                            t += 1;
                            let log_qps = 9.0
                                + drift.next(t, &mut level, &mut rng)
                                + 0.01 * (rng.uniform() - 0.5)
                                + if i == 1 { (1.0 + effect).ln() } else { 0.0 }
                                + if kind == RunKind::Profiled {
                                    (1.0 + cost).ln()
                                } else {
                                    0.0
                                };
                            let qps = log_qps.exp();
                            result.variants[i].slices.push(SliceFigures {
                                block,
                                kind,
                                requests: 500,
                                qps,
                                p50_ns: 1e9 / qps,
                                p99_ns: 2e9 / qps,
                                cpu_ns_per_request: Some(0.5e9 / qps),
                                calls_per_request: Vec::new(),
                            });
                        }
                        if design.is_look(block as usize) && result.decided() {
                            break;
                        }
                    }
                    let changes = result.variant_changes();
                    let i = changes[0].2.qps.interval.expect("a look was made");
                    if i.low <= 100.0 * effect && 100.0 * effect <= i.high {
                        covered_variant += 1;
                    }
                    let overhead = result.kind_changes(RunKind::Profiled, RunKind::Baseline);
                    let i = overhead[1].1.qps.interval.expect("a look was made");
                    if i.low <= 100.0 * cost && 100.0 * cost <= i.high {
                        covered_cost += 1;
                    }
                }
                let of = |n: i32| f64::from(n) / EXPERIMENTS as f64;
                table.push_str(&format!(
                    "{drift:?} effect {effect}: variants {:.4}, cost {:.4}\n",
                    of(covered_variant),
                    of(covered_cost)
                ));
                assert!(
                    of(covered_variant) >= 0.94 && of(covered_cost) >= 0.94,
                    "{drift:?}, effect {effect}: coverage {} (variants), {} (cost)",
                    of(covered_variant),
                    of(covered_cost)
                );
            }
        }
        println!(
            "drift, true change: coverage at the design's level {:.4}\n{table}",
            design.level()
        );
    }

    /// Every block has every variant once, and with baselines each variant's two slices next
    /// to each other; over many blocks each order within a pair comes up about half the time.
    #[test]
    fn blocks_visit_every_variant_once_in_a_random_order() {
        let mut rng = SplitMix(3);
        let mut profiled_first = 0;
        let mut first_is_zero = 0;
        const BLOCKS: usize = 4000;
        for _ in 0..BLOCKS {
            let order = block_order(4, true, &mut rng);
            assert_eq!(order.len(), 8);
            for pair in order.chunks(2) {
                assert_eq!(pair[0].0, pair[1].0, "{order:?}");
                assert_ne!(pair[0].1, pair[1].1);
                if pair[0].1 == RunKind::Profiled {
                    profiled_first += 1;
                }
            }
            let mut seen: Vec<usize> = order.iter().map(|x| x.0).collect();
            seen.dedup();
            seen.sort_unstable();
            assert_eq!(seen, vec![0, 1, 2, 3]);
            if order[0].0 == 0 {
                first_is_zero += 1;
            }
        }
        let half = (4 * BLOCKS / 2) as f64;
        assert!((f64::from(profiled_first) - half).abs() < 4.0 * (half / 2.0).sqrt());
        let quarter = BLOCKS as f64 / 4.0;
        assert!((f64::from(first_is_zero) - quarter).abs() < 5.0 * quarter.sqrt());
        assert_eq!(block_order(2, false, &mut rng).len(), 2);
    }
}
