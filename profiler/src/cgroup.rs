//! `--cgroup PATH`: the cgroups v2 to trace, as the ids the kernel program compares with
//! `bpf_get_current_cgroup_id()`: a cgroup's id is its directory's inode number in cgroup2fs.
//! A named cgroup stands for itself and every cgroup below it when tracing starts.

use std::{
    fs,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use crate::error::SetupError;

/// Where the cgroup v2 hierarchy is mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A cgroup to trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup {
    /// Its path below the root, as reports and series name it (`/` for the root itself).
    pub label: String,
    /// Its id and those of every cgroup below it.
    pub ids: Vec<u64>,
}

impl Cgroup {
    /// Resolves `arg`: a path below [`CGROUP_ROOT`], relative or absolute.
    pub fn resolve(arg: &str) -> Result<Self, SetupError> {
        let root = Path::new(CGROUP_ROOT);
        let problem = |problem: String| SetupError::NoCgroup {
            path: arg.to_owned(),
            problem,
        };
        if !root.join("cgroup.controllers").is_file() {
            return Err(problem(format!(
                "{CGROUP_ROOT} is not a cgroup v2 (unified) hierarchy"
            )));
        }
        let path = if Path::new(arg).is_absolute() {
            PathBuf::from(arg)
        } else {
            root.join(arg.trim_start_matches("./"))
        };
        let path = fs::canonicalize(&path).map_err(|e| problem(format!("{e}")))?;
        let Ok(below) = path.strip_prefix(root) else {
            return Err(problem(format!(
                "{} is not below {CGROUP_ROOT}",
                path.display()
            )));
        };
        if !path.join("cgroup.procs").is_file() {
            return Err(problem("not a cgroup (no cgroup.procs)".to_owned()));
        }
        let mut ids = Vec::new();
        collect_ids(&path, &mut ids).map_err(|e| problem(format!("reading it: {e}")))?;
        Ok(Self {
            label: format!("/{}", below.display()),
            ids,
        })
    }
}

/// Every cgroup's path below [`CGROUP_ROOT`] (`/` for the root), by id: how `--by-cgroup` names
/// the ids the kernel counted under. Unreadable parts are left out.
#[must_use]
pub fn paths_by_id() -> std::collections::HashMap<u64, String> {
    let root = Path::new(CGROUP_ROOT);
    let mut ids = std::collections::HashMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(meta) = fs::metadata(&dir) else {
            continue;
        };
        let below = dir.strip_prefix(root).unwrap_or(Path::new(""));
        ids.insert(meta.ino(), format!("/{}", below.display()));
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir())
                && entry.path().join("cgroup.procs").is_file()
            {
                pending.push(entry.path());
            }
        }
    }
    ids
}

/// The ids of `dir` and of every cgroup below it.
fn collect_ids(dir: &Path, ids: &mut Vec<u64>) -> std::io::Result<()> {
    ids.push(fs::metadata(dir)?.ino());
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() && entry.path().join("cgroup.procs").is_file() {
            collect_ids(&entry.path(), ids)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_and_bad_paths() {
        let root = Cgroup::resolve("/sys/fs/cgroup").unwrap();
        assert_eq!(root.label, "/");
        assert!(!root.ids.is_empty());
        let err = Cgroup::resolve("no/such/cgroup").unwrap_err().to_string();
        assert!(err.starts_with("--cgroup no/such/cgroup: "), "{err}");
        let err = Cgroup::resolve("/etc").unwrap_err().to_string();
        assert!(err.contains("is not below /sys/fs/cgroup"), "{err}");
    }

    #[test]
    fn every_cgroup_is_named_by_its_id() {
        let paths = paths_by_id();
        let root = fs::metadata(CGROUP_ROOT).unwrap().ino();
        assert_eq!(paths.get(&root).map(String::as_str), Some("/"));
        let own = fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own.trim().rsplit("::").next().unwrap().to_owned();
        let id = fs::metadata(format!("{CGROUP_ROOT}{own}")).unwrap().ino();
        assert_eq!(paths.get(&id), Some(&own), "this process's cgroup");
    }
}
