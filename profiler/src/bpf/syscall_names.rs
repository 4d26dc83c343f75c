//! Syscall names as the user types them, resolved against this kernel's tracepoints.

use std::{fmt, path::Path, str::FromStr};

use crate::{
    bpf::environment::{self, TRACEFS},
    error::SetupError,
};

/// The set timed when `--syscalls` is not given: what an epoll server spends its time in,
/// accepting, waiting, reading, writing (a fifth of an HTTP server's traced time is `write`)
/// and closing. Each syscall here costs every process of the machine that calls it the
/// tracepoint's own cost (docs/BENCHMARKS.md, "the tax"), traced or not.
pub const DEFAULT_SYSCALLS: &[&str] = &[
    "accept",
    "accept4",
    "close",
    "epoll_wait",
    "epoll_pwait",
    "read",
    "write",
    "writev",
    "sendto",
    "sendmsg",
];

/// `first` then `then`, as one array of `N` names.
///
/// # Panics
///
/// Unless `N` is their total length: in a `const`, that is a compile error.
#[must_use]
pub const fn concat<const N: usize>(
    first: &[&'static str],
    then: &[&'static str],
) -> [&'static str; N] {
    assert!(first.len() + then.len() == N, "N is the total length");
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < first.len() {
            first[i]
        } else {
            then[i - first.len()]
        };
        i += 1;
    }
    out
}

/// One syscall to time: its name, its tracepoints' name and its number on this architecture.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Syscall {
    /// Name as the user gave it, e.g. `close` or `fstat`.
    pub name: String,
    /// The suffix of its `sys_enter_*`/`sys_exit_*` tracepoints: the kernel's SYSCALL_DEFINE
    /// name, which differs from the syscall table's for a few (`fstat` is `newfstat`).
    pub tracepoint: String,
    /// Number on this architecture, as the tracepoints' `__syscall_nr` reports it.
    pub nr: u32,
    /// Number of the syscall of the same name in the 32-bit (ia32) table, which 32-bit
    /// processes call; `None` where it has none (`accept`, reached through socketcall there).
    pub ia32_nr: Option<u32>,
}

/// Syscalls that never return to the caller: there is no exit to time them at.
const NEVER_RETURN: &[&str] = &["exit", "exit_group", "rt_sigreturn", "sigreturn"];

impl Syscall {
    /// What the call's return value counts, where the kernel histograms it per call (events,
    /// bytes): [`ReturnUnit::of`](crate::stats::ReturnUnit::of).
    #[must_use]
    pub fn return_unit(&self) -> Option<crate::stats::ReturnUnit> {
        crate::stats::ReturnUnit::of(&self.name)
    }

    /// Whether the syscall returns twice, once in a new child (whose return is not a call).
    #[must_use]
    pub fn forks(&self) -> bool {
        matches!(
            syscalls::Sysno::new(self.nr as usize),
            Some(
                syscalls::Sysno::clone
                    | syscalls::Sysno::clone3
                    | syscalls::Sysno::fork
                    | syscalls::Sysno::vfork
            )
        )
    }

    /// Resolves a name against the syscall table and this kernel's `sys_enter_*` tracepoints,
    /// mounting tracefs first when it is not mounted (root). Either spelling is accepted where
    /// the table's name and the tracepoint's differ (`fstat` or `newfstat`, `sendfile` or
    /// `sendfile64`, `umount2` or `umount`); the tracepoint must exist on this kernel.
    pub fn resolve(name: &str) -> Result<Self, SetupError> {
        environment::prepare()?;
        let name = name.trim();
        if NEVER_RETURN.contains(&name) {
            return Err(SetupError::NeverReturns(name.to_owned()));
        }
        let has_tracepoint = |t: &str| tracepoint_dir().join(format!("sys_enter_{t}")).is_dir();
        let in_table = |n: &str| syscalls::Sysno::from_str(n).ok();
        let resolved = spellings(name).into_iter().find_map(|(table, tracepoint)| {
            let sysno = in_table(&table)?;
            let ia32_nr = syscalls::x86::Sysno::from_str(&table)
                .ok()
                .and_then(|s| u32::try_from(s.id()).ok());
            has_tracepoint(&tracepoint).then(|| Self {
                name: name.to_owned(),
                tracepoint,
                nr: u32::try_from(sysno.id()).unwrap_or(u32::MAX),
                ia32_nr,
            })
        });
        resolved.ok_or_else(|| SetupError::UnknownSyscall {
            name: name.to_owned(),
            examples: suggestions(name),
        })
    }

    /// [`Syscall::resolve_list`], where `all` asks for every call of the traced processes to be
    /// counted and listed ([`CountEvery::Always`]): with `all` alone, the default set is timed.
    pub fn resolve_choice<S: AsRef<str>>(
        names: &[S],
    ) -> Result<(Vec<Self>, super::CountEvery), SetupError> {
        let names: Vec<&str> = names
            .iter()
            .flat_map(|n| n.as_ref().split(','))
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        if !names.contains(&"all") {
            return Ok((Self::resolve_list(&names)?, super::CountEvery::Auto));
        }
        let rest: Vec<&str> = names.into_iter().filter(|n| *n != "all").collect();
        let timed = if rest.is_empty() {
            Self::resolve_list(DEFAULT_SYSCALLS)?
        } else {
            Self::resolve_list(&rest)?
        };
        Ok((timed, super::CountEvery::Always))
    }

    /// Resolves a comma-separated list, keeping the order and dropping repeats.
    pub fn resolve_list<S: AsRef<str>>(names: &[S]) -> Result<Vec<Self>, SetupError> {
        let mut out: Vec<Self> = Vec::new();
        for name in names
            .iter()
            .flat_map(|n| n.as_ref().split(','))
            .filter(|n| !n.trim().is_empty())
        {
            let syscall = Self::resolve(name)?;
            // Two spellings of one syscall (fstat, newfstat) are one syscall.
            if !out.iter().any(|s| s.nr == syscall.nr) {
                out.push(syscall);
            }
        }
        if out.is_empty() {
            return Err(SetupError::NoSyscalls);
        }
        if out.len() > profiler_common::MAX_SYSCALL_SLOTS {
            return Err(SetupError::TooManySyscalls(out.len()));
        }
        Ok(out)
    }
}

impl fmt::Display for Syscall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// The (table name, tracepoint name) pairs `name` may stand for, the plain reading first. The
/// kernel names a few syscalls differently from the table (x86_64, checked against 6.18's
/// tracefs: newfstat, newlstat, newstat, newuname for fstat, lstat, stat, uname; sendfile64 for
/// sendfile; umount for umount2); both spellings resolve to the same syscall.
fn spellings(name: &str) -> Vec<(String, String)> {
    let mut out = vec![(name.to_owned(), name.to_owned())];
    // A table name whose tracepoint is spelled differently.
    out.push((name.to_owned(), format!("new{name}")));
    out.push((name.to_owned(), format!("{name}64")));
    if let Some(base) = name.strip_suffix('2') {
        out.push((name.to_owned(), base.to_owned()));
    }
    // A tracepoint name whose table entry is spelled differently.
    if let Some(base) = name.strip_prefix("new") {
        out.push((base.to_owned(), name.to_owned()));
    }
    if let Some(base) = name.strip_suffix("64") {
        out.push((base.to_owned(), name.to_owned()));
    }
    out.push((format!("{name}2"), name.to_owned()));
    out
}

fn tracepoint_dir() -> std::path::PathBuf {
    Path::new(TRACEFS).join("events/syscalls")
}

/// Every syscall name with a tracepoint here, sorted.
#[must_use]
pub fn available() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(tracepoint_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("sys_enter_")
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

/// Up to eight valid names that look like `name`: the closest by edit distance (typos) first,
/// then names that contain it or that it contains; the default set when nothing is close.
fn suggestions(name: &str) -> String {
    let all = available();
    let typo_bound = (name.len() / 3).max(2);
    let mut close: Vec<(usize, &String)> = all
        .iter()
        .filter(|n| n.as_str() != name)
        .filter_map(|n| {
            let distance = strsim::damerau_levenshtein(name, n);
            if distance <= typo_bound {
                Some((distance, n))
            } else if n.contains(name) || (!n.is_empty() && name.contains(n.as_str())) {
                Some((typo_bound + 1, n))
            } else {
                None
            }
        })
        .collect();
    close.sort();
    let mut names: Vec<&str> = close.iter().map(|(_, n)| n.as_str()).collect();
    if names.is_empty() {
        names = all
            .iter()
            .map(String::as_str)
            .filter(|n| DEFAULT_SYSCALLS.contains(n))
            .collect();
    }
    names.truncate(8);
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::spellings;

    #[test]
    fn both_spellings_of_a_renamed_syscall_pair_the_table_with_the_tracepoint() {
        let pairs = |n: &str| spellings(n);
        let has =
            |n: &str, table: &str, tp: &str| pairs(n).iter().any(|(a, b)| a == table && b == tp);
        assert_eq!(pairs("close")[0], ("close".into(), "close".into()));
        assert!(has("fstat", "fstat", "newfstat"));
        assert!(has("newfstat", "fstat", "newfstat"));
        assert!(has("sendfile", "sendfile", "sendfile64"));
        assert!(has("sendfile64", "sendfile", "sendfile64"));
        assert!(has("umount2", "umount2", "umount"));
        assert!(has("umount", "umount2", "umount"));
    }
}
