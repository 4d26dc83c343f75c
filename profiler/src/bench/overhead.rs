//! `profiler bench overhead`: what timing a syscall costs the traced process.
//!
//! A dup()+close() loop runs in this process with only `close` traced, under each configuration
//! in turn, round after round, so the machine's drift hits all of them alike:
//! - nothing attached;
//! - the floor: do-nothing programs on sys_enter_close / sys_exit_close (the tracepoint
//!   mechanism's own cost, which no design can go below);
//! - the profiler's programs, tracking this process;
//! - the equivalent bpftrace one-liner, where bpftrace is installed.
//!
//! The figure of merit is the cost added over "nothing", as a ratio of the floor's added cost.

use std::{
    io::{BufRead as _, BufReader},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    bpf::{GroupExit, Session, SessionConfig, Syscall, Target},
    cli::OverheadArgs,
    report::table::TextTable,
};

/// One way of tracing `close`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    /// No programs.
    Nothing,
    /// Empty programs on the same tracepoints.
    Floor,
    /// The profiler's programs.
    Profiler,
    /// bpftrace's hist() one-liner.
    Bpftrace,
}

impl Config {
    fn label(self) -> &'static str {
        match self {
            Self::Nothing => "nothing attached",
            Self::Floor => "empty programs (floor)",
            Self::Profiler => "syscall-profiler",
            Self::Bpftrace => "bpftrace one-liner",
        }
    }
}

/// Median, min and max of one configuration's ns per iteration.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Which configuration.
    pub config: Config,
    /// ns per dup()+close() iteration, one per round.
    pub samples: Vec<f64>,
    /// ns per program run as the kernel measured it (`kernel.bpf_stats_enabled`), per program
    /// name, one per round.
    pub program_ns: Vec<(String, f64)>,
}

impl Measured {
    /// Median of the samples.
    #[must_use]
    pub fn median(&self) -> f64 {
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        if n == 0 {
            0.0
        } else if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        }
    }
}

/// Runs the benchmark and prints its table.
pub fn run(args: &OverheadArgs) -> Result<()> {
    let results = measure(args)?;
    print!("{}", render(&results, args));
    Ok(())
}

/// Measures every configuration `args.rounds` times.
pub fn measure(args: &OverheadArgs) -> Result<Vec<Measured>> {
    let close = vec![Syscall::resolve("close")?];
    let bpftrace = !args.no_bpftrace && which("bpftrace");
    let mut configs = vec![Config::Nothing, Config::Floor, Config::Profiler];
    if bpftrace {
        configs.push(Config::Bpftrace);
    } else if !args.no_bpftrace {
        eprintln!("bpftrace is not installed: its column is left out (apt-get install bpftrace)");
    }
    pin_to_last_cpu();
    let mut results: Vec<Measured> = configs
        .iter()
        .map(|&config| Measured {
            config,
            samples: Vec::new(),
            program_ns: Vec::new(),
        })
        .collect();
    for round in 0..args.rounds {
        for m in &mut results {
            let (ns, _) = measure_one(m.config, &close, args.iterations)
                .with_context(|| format!("round {}: {}", round + 1, m.config.label()))?;
            m.samples.push(ns);
        }
    }
    // One more round with the kernel timing every program run: where the added cost goes. Its
    // loop times are left out above, as the statistics themselves cost time.
    let stats = BpfStats::enable();
    for m in results
        .iter_mut()
        .filter(|m| matches!(m.config, Config::Floor | Config::Profiler))
    {
        let (_, programs) = measure_one(m.config, &close, args.iterations)
            .with_context(|| format!("profiling round: {}", m.config.label()))?;
        m.program_ns.extend(programs);
    }
    drop(stats);
    Ok(results)
}

/// ns per iteration, and ns per run of each attached program (from the kernel's own stats).
fn measure_one(
    config: Config,
    close: &[Syscall],
    iterations: u64,
) -> Result<(f64, Vec<(String, f64)>)> {
    let me = std::process::id();
    match config {
        Config::Nothing => Ok((dup_close_loop(iterations), Vec::new())),
        Config::Floor | Config::Profiler => {
            let session = Session::start(&SessionConfig {
                syscalls: close.to_vec(),
                target: Target::Processes(vec![me]),
                noop: config == Config::Floor,
                group_exit: GroupExit::Auto,
            })?;
            let ns = dup_close_loop(iterations);
            let programs = session
                .program_run_stats()
                .into_iter()
                .filter(|(_, runs, _)| *runs >= iterations)
                .map(|(name, runs, time)| (name, time.as_nanos() as f64 / runs as f64))
                .collect();
            if config == Config::Profiler {
                // The benchmark checks itself: every close in the loop must have been timed.
                let timed = session.snapshot()?.syscall("close").map_or(0, |s| s.calls);
                if timed < iterations {
                    bail!("only {timed} of {iterations} closes were timed");
                }
            }
            Ok((ns, programs))
        }
        Config::Bpftrace => {
            let mut tracer = BpftraceGuard::start(me)?;
            let ns = dup_close_loop(iterations);
            tracer.stop();
            Ok((ns, Vec::new()))
        }
    }
}

/// ns per iteration of `dup(0 or a pipe end)` + `close`, after a warm-up of a tenth.
fn dup_close_loop(iterations: u64) -> f64 {
    let mut fds = [0; 2];
    // SAFETY: a valid two-element array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return f64::NAN;
    }
    let run = |n: u64| {
        for _ in 0..n {
            // SAFETY: dup of our own descriptor, then close of the copy.
            unsafe {
                let fd = libc::dup(fds[0]);
                libc::close(fd);
            }
        }
    };
    run(iterations / 10);
    let start = Instant::now();
    run(iterations);
    let elapsed = start.elapsed();
    // SAFETY: closing our own descriptors.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    elapsed.as_nanos() as f64 / iterations as f64
}

fn pin_to_last_cpu() {
    // SAFETY: plain libc calls on a zeroed cpu_set_t.
    unsafe {
        let cpus = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus - 1, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// `kernel.bpf_stats_enabled = 1` while alive (the kernel then times every program run), restored
/// on drop.
struct BpfStats {
    previous: Option<String>,
}

impl BpfStats {
    const PATH: &str = "/proc/sys/kernel/bpf_stats_enabled";

    fn enable() -> Self {
        let previous = std::fs::read_to_string(Self::PATH).ok();
        if std::fs::write(Self::PATH, "1").is_err() {
            return Self { previous: None };
        }
        Self { previous }
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        if let Some(previous) = &self.previous {
            let _ = std::fs::write(Self::PATH, previous.trim());
        }
    }
}

/// bpftrace running the one-liner against this process; killed on drop.
struct BpftraceGuard {
    child: Option<Child>,
}

impl BpftraceGuard {
    fn start(pid: u32) -> Result<Self> {
        let script = format!(
            "tracepoint:syscalls:sys_enter_close /pid == {pid}/ {{ @start[tid] = nsecs; }} \
             tracepoint:syscalls:sys_exit_close /@start[tid]/ {{ @ns = hist(nsecs - @start[tid]); delete(@start[tid]); }}"
        );
        let mut child = Command::new("bpftrace")
            .args(["-e", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting bpftrace")?;
        // bpftrace prints "Attaching N probes..." once the probes are in place.
        let stdout = child.stdout.take().context("bpftrace stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                if line.contains("Attaching") {
                    let _ = tx.send(());
                }
                line.clear();
            }
        });
        let mut guard = Self { child: Some(child) };
        if rx.recv_timeout(Duration::from_secs(30)).is_err() {
            guard.stop();
            bail!("bpftrace did not attach within 30 s");
        }
        // "Attaching" is printed just before the attach calls; give them a moment to finish.
        std::thread::sleep(Duration::from_millis(300));
        Ok(guard)
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for BpftraceGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Per round, `(config - nothing) / (floor - nothing)`: the ratio pair by pair within a round,
/// so the machine's drift between rounds cancels out.
#[must_use]
pub fn round_ratios(results: &[Measured], config: Config) -> Vec<f64> {
    let get = |c: Config| {
        results
            .iter()
            .find(|m| m.config == c)
            .map(|m| m.samples.clone())
    };
    let (Some(nothing), Some(floor), Some(this)) =
        (get(Config::Nothing), get(Config::Floor), get(config))
    else {
        return Vec::new();
    };
    nothing
        .iter()
        .zip(&floor)
        .zip(&this)
        .filter(|((n, f), _)| **f > **n)
        .map(|((n, f), t)| (t - n) / (f - n))
        .collect()
}

/// The results table: ns per iteration (median over rounds), added ns, and the ratio of added
/// cost to the floor's: the median of the per-round ratios, with their range.
#[must_use]
pub fn render(results: &[Measured], args: &OverheadArgs) -> String {
    let nothing = results
        .iter()
        .find(|m| m.config == Config::Nothing)
        .map_or(0.0, Measured::median);
    let mut table = TextTable::new([
        "configuration",
        "ns/iter (median)",
        "min … max",
        "added ns",
        "× floor (median)",
        "× floor min … max",
    ]);
    let mut unusable = false;
    for m in results {
        let median = m.median();
        let min = m.samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = m.samples.iter().copied().fold(0.0, f64::max);
        let ratios = round_ratios(results, m.config);
        let (ratio, range) = if m.config == Config::Nothing {
            ("-".to_owned(), "-".to_owned())
        } else if ratios.is_empty() {
            unusable = true;
            ("-".to_owned(), "-".to_owned())
        } else {
            let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sample = Measured {
                config: m.config,
                samples: ratios,
                program_ns: Vec::new(),
            };
            (
                format!("{:.2}", sample.median()),
                format!("{lo:.2} … {hi:.2}"),
            )
        };
        table.row([
            m.config.label().to_owned(),
            format!("{median:.0}"),
            format!("{min:.0} … {max:.0}"),
            if m.config == Config::Nothing {
                "-".to_owned()
            } else {
                format!("{:.0}", median - nothing)
            },
            ratio,
            range,
        ]);
    }
    let mut out = format!(
        "dup()+close() loop, {} iterations, {} rounds, close traced; ratios are (config - nothing) / (floor - nothing) per round\n",
        args.iterations, args.rounds
    );
    out.push_str(&table.render());
    let mut programs = TextTable::new([
        "configuration",
        "program",
        "ns per run (median)",
        "min … max",
    ]);
    for m in results {
        let mut names: Vec<&str> = m.program_ns.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let samples: Vec<f64> = m
                .program_ns
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .collect();
            let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sample = Measured {
                config: m.config,
                samples,
                program_ns: Vec::new(),
            };
            programs.row([
                m.config.label().to_owned(),
                name.to_owned(),
                format!("{:.1}", sample.median()),
                format!("{lo:.1} … {hi:.1}"),
            ]);
        }
    }
    if !programs.is_empty() {
        out.push_str("\nProgram run time as the kernel counts it, in one extra round with kernel.bpf_stats_enabled=1\n(the noop program runs on both tracepoints; each figure includes the statistics' own two clock reads):\n");
        out.push_str(&programs.render());
    }
    if unusable {
        out.push_str(
            "warning: in some rounds the floor added no measurable cost; the machine was too noisy for a ratio\n",
        );
    }
    out
}
