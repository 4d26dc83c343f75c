//! Writing an export so that a reader never sees half a file: write a temporary file in the same
//! directory, flush it to disk, then rename it over the destination (rename is atomic within one
//! file system).

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
    let Some(name) = path.file_name() else {
        bail!(
            "'{}' is not a file name: give a path such as results/out.json",
            path.display()
        );
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
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
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".tmp.{}", std::process::id()));
    let temp = dir.join(temp_name);
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
    fn dash_is_stdout() {
        assert_eq!(Destination::parse(Path::new("-")), Destination::Stdout);
        assert_eq!(
            Destination::parse(Path::new("a.json")),
            Destination::File("a.json".into())
        );
    }
}
