//! Writing an export so that a reader never sees half a file: write a temporary file in the same
//! directory, flush it to disk, then rename it over the destination (rename is atomic within one
//! file system). What is at the path is kept for what it is: a symlink is followed (its target
//! is replaced, the link stays), and a FIFO, a device or a socket (`/dev/stdout`, `/dev/null`) is
//! written in place, never replaced by a regular file.

use std::{
    fs,
    io::{self, Write as _},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

/// Where one export goes: a file, or standard output for `-`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Standard output.
    Stdout,
    /// A file, replaced atomically.
    File(PathBuf),
}

impl Destination {
    /// `-` is standard output; anything else a path.
    #[must_use]
    pub fn parse(path: &Path) -> Self {
        if path.as_os_str() == "-" {
            Self::Stdout
        } else {
            Self::File(path.to_owned())
        }
    }

    /// Writes `bytes` to the destination: atomically for a file, in one write for stdout.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        match self {
            Self::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .context("writing an export to stdout")
            }
            Self::File(path) => write_atomic(path, bytes),
        }
    }
}

/// Replaces `path` with `bytes` atomically: a temporary name in the same directory, fsync, rename.
/// The temporary file is removed if any step fails.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(special) = special_file(path) {
        return special.and_then(|mut file| {
            file.write_all(bytes)
                .and_then(|()| file.flush())
                .with_context(|| format!("writing '{}'", path.display()))
        });
    }
    let path = &resolve_symlinks(path)?;
    let Some(name) = path.file_name() else {
        bail!(
            "'{}' is not a file name: give a path such as results/out.json",
            path.display()
        );
    };
    let dir = directory_of(path);
    if !dir.is_dir() {
        bail!(
            "cannot write '{}': directory '{}' does not exist; create it first",
            path.display(),
            dir.display()
        );
    }
    if path.is_dir() {
        bail!(
            "cannot write '{}': it is a directory; give a file name",
            path.display()
        );
    }
    let _ = name;
    let temp = dir.join(temp_name());
    let result = (|| -> io::Result<()> {
        let mut file = fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&temp);
        return Err(e).with_context(|| format!("writing '{}'", path.display()));
    }
    Ok(())
}

/// A temporary file name of fixed length, whatever the target's (a 250-byte target name would
/// otherwise give a temporary name past the 255-byte limit, found only after a run).
fn temp_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(".profiler-export.{}.{n}.tmp", std::process::id())
}

/// The longest file name most Linux file systems take (NAME_MAX).
const NAME_MAX: usize = 255;

/// The directory `path` is in: its parent, or `.` for a bare file name.
#[must_use]
pub fn directory_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// For a FIFO, a character or block device or a socket at `path` (links followed): the file
/// opened for writing in place. `None` for anything else (a regular file, or nothing yet).
fn special_file(path: &Path) -> Option<Result<fs::File>> {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = fs::metadata(path).ok()?.file_type();
    let special =
        kind.is_fifo() || kind.is_char_device() || kind.is_block_device() || kind.is_socket();
    special.then(|| {
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("opening '{}' for writing", path.display()))
    })
}

/// `path` with its symlinks followed, so the rename replaces the link's target, not the link;
/// a dangling link resolves to where it points (created there).
fn resolve_symlinks(path: &Path) -> Result<PathBuf> {
    let mut path = path.to_owned();
    for _ in 0..40 {
        let Ok(meta) = fs::symlink_metadata(&path) else {
            return Ok(path);
        };
        if !meta.file_type().is_symlink() {
            return Ok(path);
        }
        let target = fs::read_link(&path)
            .with_context(|| format!("reading the symlink '{}'", path.display()))?;
        path = match path.parent() {
            Some(parent) if target.is_relative() => parent.join(target),
            _ => target,
        };
    }
    bail!("'{}': too many levels of symbolic links", path.display())
}

/// Checks, before anything is measured, that `path` can be written the way [`write_atomic`]
/// will: in place for a FIFO or device; else by creating a file in its directory (the
/// temporary) and replacing what is there (not a directory, not immutable).
pub fn check_writable(path: &Path) -> Result<()> {
    {
        // A FIFO with no reader yet would block an open for writing: its type is enough.
        use std::os::unix::fs::FileTypeExt as _;
        if fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo()) {
            return Ok(());
        }
    }
    if let Some(special) = special_file(path) {
        return special.map(drop);
    }
    let path = &resolve_symlinks(path)?;
    let dir = directory_of(path);
    if !dir.is_dir() {
        bail!(
            "directory '{}' does not exist; create it first",
            dir.display()
        );
    }
    if path.is_dir() {
        bail!("it is a directory; give a file name");
    }
    if path
        .file_name()
        .is_some_and(|n| n.as_encoded_bytes().len() > NAME_MAX)
    {
        bail!("its file name is longer than {NAME_MAX} bytes");
    }
    let probe = dir.join(temp_name());
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| anyhow::anyhow!("cannot create files in '{}': {e}", dir.display()))?;
    let _ = fs::remove_file(&probe);
    if path.exists() {
        // An immutable or append-only file cannot be replaced, nor opened for writing.
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot be replaced: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = std::env::temp_dir().join(format!("profiler-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.txt");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("out.txt")],
            "only the file itself remains"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_directory_is_a_one_line_error() {
        let err = write_atomic(Path::new("/nonexistent-dir-xyz/out.json"), b"x")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("does not exist") && !err.contains('\n'),
            "{err}"
        );
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_symlink() {
        let dir = std::env::temp_dir().join(format!("profiler-symlink-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let target = dir.join("target.json");
        let link = dir.join("link.json");
        fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink("target.json", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&target).unwrap(), b"new");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_is_written_in_place_and_its_reader_gets_everything() {
        use std::os::unix::fs::FileTypeExt as _;
        let dir = std::env::temp_dir().join(format!("profiler-fifo-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        check_writable(&fifo).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unwritable_places_are_found_before_anything_is_measured() {
        let dir = std::env::temp_dir().join(format!("profiler-check-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        check_writable(&dir.join("new.json")).unwrap();
        let err = check_writable(&dir).unwrap_err().to_string();
        assert!(err.contains("directory"), "{err}");
        // /proc takes no new files, not even from root.
        let err = check_writable(Path::new("/proc/profiler-out.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot create files in '/proc'"), "{err}");
        let leftovers = fs::read_dir(&dir).unwrap().count();
        assert_eq!(leftovers, 0, "the check leaves nothing behind");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dash_is_stdout() {
        assert_eq!(Destination::parse(Path::new("-")), Destination::Stdout);
        assert_eq!(
            Destination::parse(Path::new("a.json")),
            Destination::File("a.json".into())
        );
    }
}
