//! Syscall names as the user types them, resolved against this kernel's tracepoints.

use std::{fmt, path::Path, str::FromStr};

use crate::{
    bpf::environment::{self, TRACEFS},
    error::SetupError,
};

/// The set timed when `--syscalls` is not given: what an epoll server spends its time in.
pub const DEFAULT_SYSCALLS: &[&str] = &[
    "accept",
    "accept4",
    "close",
    "epoll_wait",
    "epoll_pwait",
    "read",
];

/// One syscall to time: its name (the tracepoint suffix) and number on this architecture.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Syscall {
    /// Name, e.g. `close`.
    pub name: String,
    /// Number on this architecture, as the tracepoints' `__syscall_nr` reports it.
    pub nr: u32,
}

impl Syscall {
    /// Whether the call returns a count of ready events (histogrammed per call).
    #[must_use]
    pub fn returns_events(&self) -> bool {
        matches!(
            self.name.as_str(),
            "epoll_wait" | "epoll_pwait" | "epoll_pwait2"
        )
    }

    /// Resolves a name against the syscall table and this kernel's `sys_enter_*` tracepoints,
    /// mounting tracefs first when it is not mounted (root).
    pub fn resolve(name: &str) -> Result<Self, SetupError> {
        environment::ensure_tracefs()?;
        let name = name.trim();
        let sysno = syscalls::Sysno::from_str(name).ok();
        let has_tracepoint = tracepoint_dir().join(format!("sys_enter_{name}")).is_dir();
        match sysno {
            Some(sysno) if has_tracepoint => Ok(Self {
                name: name.to_owned(),
                nr: u32::try_from(sysno.id()).unwrap_or(u32::MAX),
            }),
            _ => Err(SetupError::UnknownSyscall {
                name: name.to_owned(),
                examples: suggestions(name),
            }),
        }
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
            if !out.contains(&syscall) {
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
