//! CPU topology from sysfs: which CPUs are online and allowed, and what two CPUs share
//! (a physical core, a cache level, a NUMA node).

use std::{
    fmt, fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
pub use cpuset::{allowed_cpus, format_cpu_list, parse_cpu_list};
use serde::Serialize;

/// Where the kernel exposes CPU and NUMA topology.
pub const SYSFS_ROOT: &str = "/sys/devices/system";

/// One cache that a CPU uses, from `cpuN/cache/indexM/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CacheInfo {
    /// Cache level (1, 2, 3…).
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    /// CPUs sharing this cache, from `shared_cpu_list`.
    pub shared_cpus: Vec<usize>,
}

impl fmt::Display for CacheInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind.as_str() {
            "Data" => "d",
            "Instruction" => "i",
            _ => "",
        };
        write!(
            f,
            "L{}{kind} (CPUs {})",
            self.level,
            format_cpu_list(&self.shared_cpus)
        )
    }
}

/// What sysfs says about one CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuInfo {
    /// The CPU number.
    pub cpu: usize,
    /// CPUs on the same physical core (SMT siblings, including this one).
    pub core_siblings: Vec<usize>,
    /// Physical package (socket) id, when the kernel exposes it.
    pub package: Option<i64>,
    /// NUMA node holding this CPU, when `/sys/devices/system/node` exists.
    pub numa_node: Option<usize>,
    /// The caches this CPU uses, lowest level first.
    pub caches: Vec<CacheInfo>,
}

/// The two CPUs of a measurement and what they share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuPair {
    /// The CPU that starts each round trip and times it.
    pub initiator: CpuInfo,
    /// The CPU that answers.
    pub responder: CpuInfo,
    /// Both CPUs are SMT siblings on one physical core.
    pub same_core: bool,
    /// Both CPUs are in the same physical package.
    pub same_package: Option<bool>,
    /// The lowest-level data or unified cache both CPUs share, if any.
    pub shared_cache: Option<CacheInfo>,
    /// Both CPUs are on the same NUMA node (None when NUMA topology is not exposed).
    pub same_numa_node: Option<bool>,
}

impl fmt::Display for CpuPair {
    #[expect(
        clippy::many_single_char_names,
        reason = "a and b are the pair's two CPUs, f the formatter"
    )]
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (&self.initiator, &self.responder);
        write!(f, "CPU {} -> CPU {}: ", a.cpu, b.cpu)?;
        if self.same_core {
            write!(f, "same physical core (SMT siblings)")?;
        } else {
            write!(f, "different physical cores")?;
        }
        match self.same_package {
            Some(true) => write!(f, ", same package")?,
            Some(false) => write!(f, ", different packages")?,
            None => {}
        }
        match &self.shared_cache {
            Some(cache) => write!(f, ", shared cache {cache}")?,
            None => write!(f, ", no shared cache")?,
        }
        match (self.same_numa_node, a.numa_node, b.numa_node) {
            (Some(true), Some(n), _) => write!(f, ", same NUMA node {n}"),
            (Some(false), Some(x), Some(y)) => write!(f, ", different NUMA nodes ({x}, {y})"),
            _ => write!(f, ", NUMA topology not exposed"),
        }
    }
}

/// Reads CPU topology under a sysfs root (normally [`SYSFS_ROOT`]; tests pass a fake tree).
#[derive(Debug, Clone)]
pub struct Topology {
    root: PathBuf,
}

impl Default for Topology {
    fn default() -> Self {
        Self::new(SYSFS_ROOT)
    }
}

impl Topology {
    /// Topology read from `root`, the directory holding `cpu/` and `node/`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn cpu_dir(&self, cpu: usize) -> PathBuf {
        self.root.join("cpu").join(format!("cpu{cpu}"))
    }

    /// CPUs the kernel lists as online.
    pub fn online_cpus(&self) -> Result<Vec<usize>> {
        let path = self.root.join("cpu/online");
        parse_cpu_list(&read_trimmed(&path)?).with_context(|| format!("parsing {}", path.display()))
    }

    /// Everything sysfs says about one CPU.
    pub fn cpu(&self, cpu: usize) -> Result<CpuInfo> {
        let dir = self.cpu_dir(cpu);
        if !dir.is_dir() {
            bail!("CPU {cpu} does not exist ({} is missing)", dir.display());
        }
        let topo = dir.join("topology");
        // core_cpus_list is the current name; thread_siblings_list the older one.
        let core_siblings = ["core_cpus_list", "thread_siblings_list"]
            .iter()
            .find_map(|name| read_trimmed(&topo.join(name)).ok())
            .map(|text| parse_cpu_list(&text))
            .transpose()?
            .unwrap_or_else(|| vec![cpu]);
        let package = read_trimmed(&topo.join("physical_package_id"))
            .ok()
            .and_then(|s| s.parse().ok());
        Ok(CpuInfo {
            cpu,
            core_siblings,
            package,
            numa_node: self.numa_node_of(cpu),
            caches: self.caches(cpu),
        })
    }

    fn caches(&self, cpu: usize) -> Vec<CacheInfo> {
        let Ok(entries) = fs::read_dir(self.cpu_dir(cpu).join("cache")) else {
            return Vec::new();
        };
        let mut caches: Vec<CacheInfo> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
            .filter_map(|e| {
                let dir = e.path();
                Some(CacheInfo {
                    level: read_trimmed(&dir.join("level")).ok()?.parse().ok()?,
                    kind: read_trimmed(&dir.join("type")).ok()?,
                    shared_cpus: parse_cpu_list(&read_trimmed(&dir.join("shared_cpu_list")).ok()?)
                        .ok()?,
                })
            })
            .collect();
        caches.sort_by(|a, b| (a.level, &a.kind).cmp(&(b.level, &b.kind)));
        caches
    }

    fn numa_node_of(&self, cpu: usize) -> Option<usize> {
        let entries = fs::read_dir(self.root.join("node")).ok()?;
        entries.filter_map(Result::ok).find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let node: usize = name.strip_prefix("node")?.parse().ok()?;
            let cpus = parse_cpu_list(&read_trimmed(&e.path().join("cpulist")).ok()?).ok()?;
            cpus.contains(&cpu).then_some(node)
        })
    }

    /// Describes what `initiator` and `responder` share.
    pub fn pair(&self, initiator: usize, responder: usize) -> Result<CpuPair> {
        let a = self.cpu(initiator)?;
        let b = self.cpu(responder)?;
        let same_core = a.core_siblings.contains(&b.cpu);
        let same_package = match (a.package, b.package) {
            (Some(x), Some(y)) => Some(x == y),
            _ => None,
        };
        let shared_cache = a
            .caches
            .iter()
            .filter(|c| c.kind != "Instruction" && c.shared_cpus.contains(&b.cpu))
            .min_by_key(|c| c.level)
            .cloned();
        let same_numa_node = match (a.numa_node, b.numa_node) {
            (Some(x), Some(y)) => Some(x == y),
            _ => None,
        };
        Ok(CpuPair {
            initiator: a,
            responder: b,
            same_core,
            same_package,
            shared_cache,
            same_numa_node,
        })
    }

    /// Picks two CPUs among `allowed` that are online, preferring two different physical cores.
    pub fn pick_pair(&self, allowed: &[usize]) -> Result<(usize, usize)> {
        let online = self.online_cpus()?;
        let usable: Vec<usize> = online
            .iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect();
        if usable.len() < 2 {
            bail!(
                "core-to-core latency needs two CPUs this process may run on; online: {}, allowed: {}",
                format_cpu_list(&online),
                format_cpu_list(allowed)
            );
        }
        let first = usable[0];
        let siblings = self
            .cpu(first)
            .map_or_else(|_| vec![first], |info| info.core_siblings);
        let second = usable
            .iter()
            .copied()
            .find(|c| *c != first && !siblings.contains(c))
            .unwrap_or(usable[1]);
        Ok((first, second))
    }
}

fn read_trimmed(path: &Path) -> Result<String> {
    Ok(fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip_and_reject_garbage() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert!(parse_cpu_list("0-x").is_err());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    /// Compares the parsed pair with this machine's sysfs, read independently here.
    #[test]
    fn topology_of_this_machine_is_the_real_pair() {
        let topo = Topology::default();
        let online = topo.online_cpus().expect("online CPUs");
        let allowed = allowed_cpus().expect("affinity");
        if online.iter().filter(|c| allowed.contains(c)).count() < 2 {
            eprintln!("skipping: fewer than two usable CPUs");
            return;
        }
        let (a, b) = topo.pick_pair(&allowed).expect("pair");
        assert_ne!(a, b);
        let pair = topo.pair(a, b).expect("pair topology");
        let siblings = fs::read_to_string(format!(
            "/sys/devices/system/cpu/cpu{a}/topology/thread_siblings_list"
        ))
        .expect("thread_siblings_list");
        let siblings = parse_cpu_list(&siblings).unwrap();
        assert_eq!(pair.same_core, siblings.contains(&b));
        // Walk index* directly and find the lowest shared data/unified level.
        let mut expect_level = None;
        for entry in fs::read_dir(format!("/sys/devices/system/cpu/cpu{a}/cache")).unwrap() {
            let dir = entry.unwrap().path();
            if !dir
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("index")
            {
                continue;
            }
            let kind = fs::read_to_string(dir.join("type")).unwrap();
            let shared =
                parse_cpu_list(&fs::read_to_string(dir.join("shared_cpu_list")).unwrap()).unwrap();
            let level: u32 = fs::read_to_string(dir.join("level"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            if kind.trim() != "Instruction" && shared.contains(&b) {
                expect_level = Some(expect_level.map_or(level, |l: u32| l.min(level)));
            }
        }
        assert_eq!(pair.shared_cache.as_ref().map(|c| c.level), expect_level);
        if Path::new("/sys/devices/system/node/node0").exists() {
            assert!(pair.same_numa_node.is_some());
        }
        eprintln!("{pair}");
    }

    #[test]
    fn fake_sysfs_with_smt_and_two_nodes() {
        let root = std::env::temp_dir().join(format!("c2c-topo-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let w = |p: &str, s: &str| {
            let path = root.join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, s).unwrap();
        };
        w("cpu/online", "0-3\n");
        for (cpu, sib, pkg) in [(0, "0,2", 0), (1, "1,3", 1), (2, "0,2", 0), (3, "1,3", 1)] {
            w(&format!("cpu/cpu{cpu}/topology/core_cpus_list"), sib);
            w(
                &format!("cpu/cpu{cpu}/topology/physical_package_id"),
                &pkg.to_string(),
            );
            w(&format!("cpu/cpu{cpu}/cache/index0/level"), "1");
            w(&format!("cpu/cpu{cpu}/cache/index0/type"), "Data");
            w(&format!("cpu/cpu{cpu}/cache/index0/shared_cpu_list"), sib);
            w(&format!("cpu/cpu{cpu}/cache/index3/level"), "3");
            w(&format!("cpu/cpu{cpu}/cache/index3/type"), "Unified");
            w(
                &format!("cpu/cpu{cpu}/cache/index3/shared_cpu_list"),
                if pkg == 0 { "0,2" } else { "1,3" },
            );
        }
        w("node/node0/cpulist", "0,2");
        w("node/node1/cpulist", "1,3");
        let topo = Topology::new(&root);
        assert_eq!(topo.pick_pair(&[0, 1, 2, 3]).unwrap(), (0, 1));
        assert_eq!(topo.pick_pair(&[0, 2]).unwrap(), (0, 2));
        assert!(topo.pick_pair(&[0]).is_err());
        let smt = topo.pair(0, 2).unwrap();
        assert!(smt.same_core);
        assert_eq!(smt.shared_cache.as_ref().map(|c| c.level), Some(1));
        assert_eq!(smt.same_numa_node, Some(true));
        let far = topo.pair(0, 1).unwrap();
        assert!(!far.same_core);
        assert_eq!(far.shared_cache, None);
        assert_eq!(far.same_numa_node, Some(false));
        assert_eq!(far.same_package, Some(false));
        assert!(topo.pair(0, 9).is_err());
        let _ = fs::remove_dir_all(&root);
    }
}
