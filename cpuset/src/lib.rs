//! CPU sets: the kernel's list format (`0-3,8`), the CPUs this process may use, and pinning a
//! thread. `run` (server and client CPUs), `c2c` (the CPU pair) and the load generator (its
//! client threads) all use these.

use anyhow::{Context, Result, bail};

/// Parses a kernel CPU list such as `0-3,8,10-11` into sorted, deduplicated CPU numbers.
///
/// Returns an error naming the bad part rather than panicking on malformed input.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match part.split_once('-') {
            Some((lo, hi)) => {
                let lo: usize = lo
                    .trim()
                    .parse()
                    .with_context(|| format!("bad CPU range `{part}`"))?;
                let hi: usize = hi
                    .trim()
                    .parse()
                    .with_context(|| format!("bad CPU range `{part}`"))?;
                if hi < lo || hi - lo > 1 << 16 {
                    bail!("bad CPU range `{part}`");
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(
                part.parse()
                    .with_context(|| format!("bad CPU number `{part}`"))?,
            ),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Formats sorted CPU numbers back into the kernel's compact list form (`0-3,8`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// `0`, `0,2`, `0-3`, `0-1,4` → CPU numbers, each one of `allowed`.
pub fn parse_allowed_cpu_list(list: &str, allowed: &[usize]) -> Result<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.parse::<usize>(), part.parse::<usize>()),
        };
        let (Ok(lo), Ok(hi)) = (lo, hi) else {
            bail!("'{list}' is not a CPU list: use numbers and ranges such as 0, 0-1 or 0,2");
        };
        if lo > hi {
            bail!("'{part}' is an empty range: write the lower CPU first");
        }
        for cpu in lo..=hi {
            if !allowed.contains(&cpu) {
                let names: Vec<String> = allowed.iter().map(usize::to_string).collect();
                bail!(
                    "CPU {cpu} is not online or not allowed: this process may use CPUs {}",
                    names.join(",")
                );
            }
            if !cpus.contains(&cpu) {
                cpus.push(cpu);
            }
        }
    }
    if cpus.is_empty() {
        bail!("'{list}' names no CPU");
    }
    Ok(cpus)
}

/// CPUs the calling thread may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> Result<Vec<usize>> {
    affinity::current().map(|set| affinity::cpus_in(&set))
}

/// Thread pinning with `sched_setaffinity`.
pub mod affinity {
    use std::{io, mem};

    use anyhow::{Result, bail};

    use super::format_cpu_list;

    /// Largest CPU number a `cpu_set_t` can name.
    pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

    /// The calling thread's affinity mask.
    pub fn current() -> Result<libc::cpu_set_t> {
        // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
        // SAFETY: the pointer and size describe `set`, which outlives the call.
        let rc =
            unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &raw mut set) };
        if rc != 0 {
            bail!("sched_getaffinity: {}", io::Error::last_os_error());
        }
        Ok(set)
    }

    /// The CPU numbers in `set`.
    pub fn cpus_in(set: &libc::cpu_set_t) -> Vec<usize> {
        // SAFETY: CPU_ISSET only reads `set`, and every index is below CPU_SETSIZE.
        (0..MAX_CPUS)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
            .collect()
    }

    /// Sets the calling thread's affinity mask.
    pub fn set(set: &libc::cpu_set_t) -> Result<()> {
        // SAFETY: the pointer and size describe `set`, which outlives the call.
        let rc = unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), set) };
        if rc != 0 {
            bail!("sched_setaffinity: {}", io::Error::last_os_error());
        }
        Ok(())
    }

    /// Pins the calling thread to `cpu` alone.
    pub fn pin_current(cpu: usize) -> Result<()> {
        pin_current_to(&[cpu])
    }

    /// Pins the calling thread to `cpus` (threads it starts afterwards inherit them).
    pub fn pin_current_to(cpus: &[usize]) -> Result<()> {
        // SAFETY: as in `current`.
        let mut only: libc::cpu_set_t = unsafe { mem::zeroed() };
        for &cpu in cpus {
            if cpu >= MAX_CPUS {
                bail!(
                    "CPU {cpu} is beyond the largest CPU number {}",
                    MAX_CPUS - 1
                );
            }
            // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
            unsafe { libc::CPU_SET(cpu, &mut only) };
        }
        set(&only).map_err(|e| e.context(format!("pinning to CPUs {}", format_cpu_list(cpus))))
    }

    /// Restores the affinity mask a thread had when this guard was made.
    pub struct RestoreOnDrop(pub libc::cpu_set_t);

    impl Drop for RestoreOnDrop {
        fn drop(&mut self) {
            if let Err(e) = set(&self.0) {
                log::warn!("could not restore the thread's CPU affinity: {e:#}");
            }
        }
    }
}
