//! The machine's own noise during a run: how much of the server's CPUs' time went to tasks that
//! are neither the server nor the profiler (its load generator included), and steal time.
//!
//! Every task's on-CPU time is read from `/proc/PID/task/TID/schedstat` (the scheduler's own
//! count, in ns) before and after the measured window. A task pinned inside the server's CPUs
//! counts whole; one that may run elsewhere too counts in proportion of its allowed CPUs that
//! are the server's (an estimate: the kernel keeps no per-CPU time per task). Tasks that exited
//! within the window are not seen. Steal comes from `/proc/stat`, in 10 ms ticks: one tick is
//! not counted (it would flag a 0.1 s run on its own).

use std::{collections::HashMap, fs, time::Instant};

use serde::Serialize;

/// A run whose server CPUs lost more than this share of their time to other tasks and steal
/// is "disturbed".
pub const DISTURBED_SHARE: f64 = 0.10;

/// What else ran on the server's CPUs during one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Noise {
    /// Others' and steal's share of the capacity (as [`Noise::share`] computes it).
    pub share: f64,
    /// Above [`DISTURBED_SHARE`].
    pub disturbed: bool,
    /// The CPUs watched: the server's, or every CPU when it is not pinned.
    pub cpus: Vec<usize>,
    /// The window × the CPUs watched, ns: the time there was.
    pub capacity_ns: u64,
    /// Time other tasks ran on them, ns (estimated for tasks not pinned to them).
    pub others_ns: u64,
    /// Steal time on them, ns (the hypervisor ran someone else).
    pub steal_ns: u64,
    /// The other tasks that took the most, largest first: (command, pid, ns).
    pub top: Vec<(String, u32, u64)>,
}

impl Noise {
    /// Others' and steal's share of the capacity.
    #[must_use]
    pub fn share(&self) -> f64 {
        if self.capacity_ns == 0 {
            0.0
        } else {
            (self.others_ns + self.steal_ns) as f64 / self.capacity_ns as f64
        }
    }

    /// Above [`DISTURBED_SHARE`].
    #[must_use]
    pub fn disturbed(&self) -> bool {
        self.share() > DISTURBED_SHARE
    }

    /// "'spin' (pid 4123) took 48% of CPU 0; steal 0%".
    #[must_use]
    pub fn describe(&self) -> String {
        let cpus = crate::cpus::format_cpu_list(&self.cpus);
        let of = |ns: u64| 100.0 * ns as f64 / self.capacity_ns.max(1) as f64;
        let mut parts: Vec<String> = self
            .top
            .iter()
            .take(2)
            .filter(|(.., ns)| of(*ns) >= 1.0)
            .map(|(comm, pid, ns)| format!("'{comm}' (pid {pid}) took {:.0}%", of(*ns)))
            .collect();
        if parts.is_empty() {
            parts.push("no other task".to_owned());
        }
        format!(
            "{} of CPU {cpus} (others {:.1}%, steal {:.1}%)",
            parts.join(", "),
            of(self.others_ns),
            of(self.steal_ns)
        )
    }
}

/// A reading at the start of a window.
pub struct Probe {
    cpus: Vec<usize>,
    started: Instant,
    tasks: HashMap<u32, u64>,
    steal: u64,
}

impl Probe {
    /// Reads every task's on-CPU time and the steal of `cpus` (empty: every CPU).
    #[must_use]
    pub fn start(cpus: &[usize]) -> Self {
        let cpus = if cpus.is_empty() {
            crate::cpus::allowed_cpus().unwrap_or_default()
        } else {
            cpus.to_vec()
        };
        let steal = steal_ns(&cpus);
        Self {
            tasks: tasks().into_iter().map(|t| (t.tid, t.on_cpu_ns)).collect(),
            steal,
            cpus,
            started: Instant::now(),
        }
    }

    /// The noise since [`Probe::start`], leaving out `server` (its pids) and this process.
    #[must_use]
    pub fn finish(self, server: &[u32]) -> Noise {
        let window = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let me = std::process::id();
        let mut by_process: HashMap<u32, (String, f64)> = HashMap::new();
        for t in tasks() {
            if t.pid == me || server.contains(&t.pid) {
                continue;
            }
            let before = self.tasks.get(&t.tid).copied().unwrap_or(0);
            let delta = t.on_cpu_ns.saturating_sub(before);
            if delta == 0 || t.allowed.is_empty() {
                continue;
            }
            let inside = t.allowed.iter().filter(|c| self.cpus.contains(c)).count();
            let share = inside as f64 / t.allowed.len() as f64;
            let entry = by_process
                .entry(t.pid)
                .or_insert_with(|| (t.comm.clone(), 0.0));
            entry.1 += delta as f64 * share;
        }
        let mut top: Vec<(String, u32, u64)> = by_process
            .into_iter()
            .map(|(pid, (comm, ns))| (comm, pid, ns as u64))
            .filter(|(.., ns)| *ns > 0)
            .collect();
        top.sort_by_key(|(_, pid, ns)| (std::cmp::Reverse(*ns), *pid));
        let others_ns = top.iter().map(|(.., ns)| ns).sum();
        top.truncate(3);
        let mut noise = Noise {
            share: 0.0,
            disturbed: false,
            capacity_ns: window.saturating_mul(self.cpus.len() as u64),
            others_ns,
            // /proc/stat counts steal in ticks (10 ms): one tick in a short window would read
            // as 10% and more, so a single tick is not counted.
            steal_ns: steal_ns(&self.cpus)
                .saturating_sub(self.steal)
                .saturating_sub(tick_ns()),
            top,
            cpus: self.cpus,
        };
        noise.share = noise.share();
        noise.disturbed = noise.disturbed();
        noise
    }
}

struct Task {
    pid: u32,
    tid: u32,
    comm: String,
    on_cpu_ns: u64,
    allowed: Vec<usize>,
}

/// Every task of the machine with its on-CPU time and allowed CPUs.
fn tasks() -> Vec<Task> {
    let mut out = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(threads) = fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in threads.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let dir = t.path();
            let Some(on_cpu_ns) = fs::read_to_string(dir.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
            else {
                continue;
            };
            let status = fs::read_to_string(dir.join("status")).unwrap_or_default();
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
            };
            let allowed = field("Cpus_allowed_list:")
                .and_then(|l| crate::cpus::parse_cpu_list(l).ok())
                .unwrap_or_default();
            out.push(Task {
                pid,
                tid,
                comm: field("Name:").unwrap_or("?").to_owned(),
                on_cpu_ns,
                allowed,
            });
        }
    }
    out
}

/// One clock tick of /proc/stat, ns.
fn tick_ns() -> u64 {
    // SAFETY: sysconf has no memory preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    1_000_000_000 / hz
}

/// Steal time of `cpus` from /proc/stat, ns.
fn steal_ns(cpus: &[usize]) -> u64 {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: usize = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            if !cpus.contains(&cpu) {
                return None;
            }
            // user nice system idle iowait irq softirq steal
            f.nth(7)?.parse::<u64>().ok()
        })
        .sum::<u64>()
        * tick_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread of another process pinned to one CPU and spinning is named with about its share;
    /// this process's own work is not counted.
    #[test]
    fn a_spinner_on_the_watched_cpu_is_named() {
        let cpu = crate::cpus::allowed_cpus().unwrap()[0];
        let probe = Probe::start(&[cpu]);
        let mut spinner = std::process::Command::new("taskset")
            .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let until = Instant::now() + std::time::Duration::from_millis(300);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let noise = probe.finish(&[]);
        spinner.kill().unwrap();
        spinner.wait().unwrap();
        let (comm, pid, _) = &noise.top[0];
        assert_eq!((comm.as_str(), *pid), ("sh", spinner.id()), "{noise:?}");
        assert!(noise.share() > 0.2 && noise.disturbed(), "{noise:?}");
        assert!(
            noise.describe().starts_with("'sh' (pid "),
            "{}",
            noise.describe()
        );
    }
}
