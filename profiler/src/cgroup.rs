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
}
