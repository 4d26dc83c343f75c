//! `--cgroup PATH`: the cgroups v2 to trace, as the ids the kernel program compares with
//! `bpf_get_current_cgroup_id()`: a cgroup's id is its directory's inode number in cgroup2fs.
//! A named cgroup stands for itself and every cgroup below it when tracing starts.
//!
//! cgroup2 is found where this process's mount table has it (`/proc/self/mountinfo`), whatever
//! the layout: unified (`/sys/fs/cgroup`), systemd's hybrid (`/sys/fs/cgroup/unified`, with the
//! v1 controllers beside it) or elsewhere. Only that tree names ids: v1 hierarchies number
//! their directories' inodes on their own, so the same number names unrelated cgroups there.

use std::{
    fs,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

use crate::error::SetupError;

/// Where the cgroup v2 hierarchy is mounted in this process's mount namespace: the first
/// `cgroup2` mount of `/proc/self/mountinfo` whose root is the hierarchy's root (a bind mount of
/// a sub-cgroup, as in a container, names paths below that sub-cgroup). `None` when there is none.
#[must_use]
pub fn cgroup2_root() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    cgroup2_in_mountinfo(&mountinfo)
}

/// The cgroup2 mount point of a mountinfo text (see [`cgroup2_root`]). A mount that a later
/// one covers (the same mount point, or one above it: a tmpfs mounted over /sys/fs/cgroup hides
/// the cgroup2 that was there) is not visible and not taken.
fn cgroup2_in_mountinfo(mountinfo: &str) -> Option<PathBuf> {
    // (mount point, file system type, root within the file system), in mount order.
    let mounts: Vec<(PathBuf, String, String)> = mountinfo
        .lines()
        .filter_map(|line| {
            // "36 35 0:30 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw": the optional
            // fields end at " - ", after which come the type and the source.
            let (before, after) = line.split_once(" - ")?;
            let fstype = after.split_whitespace().next()?.to_owned();
            let fields: Vec<&str> = before.split_whitespace().collect();
            let root = unescape_mountinfo(fields.get(3)?);
            let point = PathBuf::from(unescape_mountinfo(fields.get(4)?));
            Some((point, fstype, root))
        })
        .collect();
    let visible = |i: usize| {
        let point = &mounts[i].0;
        !mounts[i + 1..]
            .iter()
            .any(|(later, _, _)| point.starts_with(later) && later != Path::new("/"))
    };
    let cgroup2: Vec<usize> = (0..mounts.len())
        .filter(|&i| mounts[i].1 == "cgroup2" && visible(i))
        .collect();
    cgroup2
        .iter()
        .find(|&&i| mounts[i].2 == "/")
        .or_else(|| cgroup2.first())
        .map(|&i| mounts[i].0.clone())
}

/// The magic number of cgroup2's file system (`CGROUP2_SUPER_MAGIC`, statfs(2)).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Whether `path` lies in a cgroup2 file system.
fn is_cgroup2(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path and a zeroed statfs for the kernel to fill.
    unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        libc::statfs(c_path.as_ptr(), &raw mut fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC
    }
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|o| std::str::from_utf8(o).ok())
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        if bytes[i] == b'\\'
            && let Some(code) = octal
        {
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// [`cgroup2_root`], or the error `--cgroup PATH` gets when there is none.
fn require_root(arg: &str) -> Result<PathBuf, SetupError> {
    cgroup2_root().ok_or_else(|| SetupError::NoCgroup {
        path: arg.to_owned(),
        problem: "no cgroup2 (unified) hierarchy is mounted here (none in /proc/self/mountinfo; \
                  cgroup v1 alone cannot be traced by id)"
            .to_owned(),
    })
}

/// A cgroup to trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup {
    /// Its path below the cgroup2 root, as reports and series name it (`/` for the root itself).
    pub label: String,
    /// Its id and those of every cgroup below it.
    pub ids: Vec<u64>,
}

impl Cgroup {
    /// Resolves `arg`: an absolute path below the cgroup2 mount, or a path relative to it.
    pub fn resolve(arg: &str) -> Result<Self, SetupError> {
        let root = require_root(arg)?;
        let problem = |problem: String| SetupError::NoCgroup {
            path: arg.to_owned(),
            problem,
        };
        let path = if Path::new(arg).is_absolute() {
            PathBuf::from(arg)
        } else {
            root.join(arg.trim_start_matches("./"))
        };
        let path = fs::canonicalize(&path).map_err(|e| problem(format!("{e}")))?;
        let Ok(below) = path.strip_prefix(&root) else {
            return Err(problem(format!(
                "{} is not below {}, where cgroup2 is mounted (v1 hierarchies cannot be traced by id)",
                path.display(),
                root.display()
            )));
        };
        if !path.join("cgroup.procs").is_file() || !is_cgroup2(&path) {
            return Err(problem(
                "not a cgroup v2 directory (no cgroup.procs, or not in cgroup2's file system)"
                    .to_owned(),
            ));
        }
        let mut ids = Vec::new();
        collect_ids(&path, &mut ids).map_err(|e| problem(format!("reading it: {e}")))?;
        Ok(Self {
            label: format!("/{}", below.display()),
            ids,
        })
    }
}

/// Every cgroup2 cgroup's path below the cgroup2 root (`/` for the root), by id: how
/// `--by-cgroup` names the ids the kernel counted under. Unreadable parts are left out; no
/// cgroup2 mount gives an empty map (every id is then shown as an id).
#[must_use]
pub fn paths_by_id() -> std::collections::HashMap<u64, String> {
    let mut ids = std::collections::HashMap::new();
    let Some(root) = cgroup2_root() else {
        return ids;
    };
    let Ok(root_meta) = fs::metadata(&root) else {
        return ids;
    };
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        let Ok(meta) = fs::metadata(&dir) else {
            continue;
        };
        // Never cross into another file system mounted below (a v1 hierarchy, say).
        if meta.dev() != root_meta.dev() {
            continue;
        }
        let below = dir.strip_prefix(&root).unwrap_or(Path::new(""));
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

/// This process's own cgroup2 path (the `0::` line of `/proc/self/cgroup`).
#[must_use]
pub fn own_cgroup2_path() -> Option<String> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    own.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup2_is_found_in_every_layout() {
        let unified =
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            cgroup2_in_mountinfo(unified),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        let hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                      32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                      39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_in_mountinfo(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let v1_only = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n";
        assert_eq!(cgroup2_in_mountinfo(v1_only), None);
        // A container's view: a bind of its own sub-cgroup, found when nothing better is there.
        let container = "700 690 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_in_mountinfo(container),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        // vng's cgroup2 at /sys/fs/cgroup, then a hybrid layout mounted over it: the first is
        // hidden by the tmpfs.
        let covered = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n\
                       50 30 0:40 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                       51 50 0:41 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n\
                       52 50 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_in_mountinfo(covered),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let spaced = "41 31 0:38 / /mnt/my\\040cgroup rw - cgroup2 none rw\n";
        assert_eq!(
            cgroup2_in_mountinfo(spaced),
            Some(PathBuf::from("/mnt/my cgroup"))
        );
    }

    #[test]
    fn the_root_and_bad_paths() {
        let root = cgroup2_root().expect("this machine has a cgroup2 mount");
        let resolved = Cgroup::resolve(root.to_str().unwrap()).unwrap();
        assert_eq!(resolved.label, "/");
        assert!(!resolved.ids.is_empty());
        assert!(
            Cgroup::resolve("/").is_err(),
            "/ is not below the cgroup2 mount"
        );
        let err = Cgroup::resolve("no/such/cgroup").unwrap_err().to_string();
        assert!(err.starts_with("--cgroup no/such/cgroup: "), "{err}");
        let err = Cgroup::resolve("/etc").unwrap_err().to_string();
        assert!(
            err.contains(&format!("is not below {}", root.display())),
            "{err}"
        );
    }

    #[test]
    fn every_cgroup_is_named_by_its_id() {
        let root = cgroup2_root().expect("this machine has a cgroup2 mount");
        let paths = paths_by_id();
        let root_id = fs::metadata(&root).unwrap().ino();
        assert_eq!(paths.get(&root_id).map(String::as_str), Some("/"));
        let own = own_cgroup2_path().expect("this process is in a cgroup2 cgroup");
        let id = fs::metadata(format!("{}{own}", root.display()))
            .unwrap()
            .ino();
        assert_eq!(paths.get(&id), Some(&own), "this process's cgroup");
    }

    /// On a hybrid host, the v1 hierarchies' directories (whose inode numbers overlap with
    /// cgroup2's) name nothing.
    #[test]
    fn only_cgroup2_directories_name_ids() {
        let root = cgroup2_root().expect("this machine has a cgroup2 mount");
        let paths = paths_by_id();
        let root_dev = fs::metadata(&root).unwrap().dev();
        for path in paths.values() {
            let full = format!("{}{path}", root.display());
            let meta = fs::metadata(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
            assert_eq!(meta.dev(), root_dev, "{full} is not in the cgroup2 tree");
        }
    }
}
