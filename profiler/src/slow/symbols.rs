//! Names for the addresses of a `--slow` stack: kernel ones from kallsyms, user ones from the
//! ELF symbols and DWARF of the file each address lies in (blazesym).
//!
//! A user address means something only in its process's address space, which is gone once the
//! process exits, often right after its slow call. So the collector's reader reads a process's
//! mappings (`/proc/PID/maps`, a [`ProcessMaps`]) as soon as it hears of it (an announcement
//! while one of its calls waits, or its first record) and again after an exec; an address is
//! turned into (file, offset in the file) from them, and the file is symbolized by path, which
//! works after the exit too.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use blazesym::symbolize::{
    Input, Symbolized, Symbolizer,
    source::{Elf, Kernel, Source},
};
use serde::Serialize;

/// One frame of a symbolized stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Frame {
    /// The function ("tcp_close", "slow_path"), or the address in hex when it has no name.
    pub function: String,
    /// The file it lies in (user frames), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
}

impl Frame {
    fn named(function: impl Into<String>, module: Option<&Path>) -> Self {
        Self {
            function: function.into(),
            module: module.map(|m| m.display().to_string()),
        }
    }

    /// The frame that ends a stack cut at the copied bytes' end (`--slow`'s DWARF unwinding).
    #[must_use]
    pub fn cut(bytes: usize) -> Self {
        Self {
            function: format!("[deeper frames not copied: {} KiB of stack]", bytes / 1024),
            module: None,
        }
    }

    /// "slow_path (helper)": the function and its file's name, for the terminal.
    #[must_use]
    pub fn short(&self) -> String {
        match &self.module {
            Some(m) => format!(
                "{} ({})",
                self.function,
                Path::new(m)
                    .file_name()
                    .map_or_else(|| m.clone(), |f| f.to_string_lossy().into_owned())
            ),
            None => self.function.clone(),
        }
    }
}

/// One mapping of a file into a process.
#[derive(Clone, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    /// The path as the process sees it (in its own mount namespace).
    path: PathBuf,
    /// The mapped file's device (`makedev(major, minor)`) and inode, from `/proc/PID/maps`.
    file: (u64, u64),
    /// Where the profiler reads that very file (checked by device and inode). `None`: nowhere,
    /// and its frames are not named from some other file that happens to be at the same path.
    readable: Option<Readable>,
}

/// A mapped file the profiler can read: the process's path itself when it names the same file
/// here; else the file opened through the process's root (`/proc/PID/root/...`: another mount
/// namespace, a container) or its `map_files` entry (overlay filesystems, deleted files) and
/// kept open, read as `/proc/self/fd/N` (the process may have exited by the time its stacks
/// are unwound and named).
#[derive(Clone, Debug)]
pub(super) struct Readable {
    /// The path to read.
    pub(super) path: PathBuf,
    /// The open file behind `path`, when it is one of ours.
    _file: Option<Arc<std::fs::File>>,
}

/// A process's file mappings, as read from `/proc/PID/maps`.
#[derive(Clone, Debug, Default)]
pub struct ProcessMaps {
    mappings: Vec<Mapping>,
}

impl ProcessMaps {
    /// The mappings of `pid` now; `None` once it has exited, or while it exits (its address
    /// space is torn down before its `/proc` entry goes, and reads as empty then).
    #[must_use]
    pub fn read(pid: u32) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
        let mut mappings = parse_maps(&text);
        let mut found: Vec<((u64, u64), Option<Readable>)> = Vec::new();
        for m in &mut mappings {
            m.readable = if let Some((_, readable)) = found.iter().find(|(f, _)| *f == m.file) {
                readable.clone()
            } else {
                let readable = readable_path(pid, m);
                found.push((m.file, readable.clone()));
                readable
            };
        }
        (!mappings.is_empty()).then_some(Self { mappings })
    }

    /// How many of `addresses` lie in a mapped file or in the kernel's half.
    #[must_use]
    pub fn placed(&self, addresses: &[u64]) -> usize {
        addresses
            .iter()
            .filter(|&&a| self.locate(a).is_some() || a >= USER_SPACE_END)
            .count()
    }

    /// Each mapped file that can be read from here once, in address order: its whole range in
    /// the process (first mapping's start to last mapping's end) and its first mapping's start
    /// and file offset.
    pub(super) fn files(&self) -> Vec<super::unwind::FileRange<'_>> {
        let mut files: Vec<super::unwind::FileRange<'_>> = Vec::new();
        let mut sorted: Vec<&Mapping> = self.mappings.iter().collect();
        sorted.sort_by_key(|m| m.start);
        for m in sorted {
            let Some(readable) = &m.readable else {
                continue;
            };
            let readable = readable.path.as_path();
            match files.iter_mut().find(|f| f.file == m.file) {
                Some(f) => {
                    f.range.start = f.range.start.min(m.start);
                    f.range.end = f.range.end.max(m.end);
                }
                None => files.push(super::unwind::FileRange {
                    path: &m.path,
                    readable,
                    file: m.file,
                    range: m.start..m.end,
                    start: m.start,
                    offset: m.offset,
                }),
            }
        }
        files
    }

    fn locate(&self, address: u64) -> Option<&Mapping> {
        self.mappings
            .iter()
            .find(|m| m.start <= address && address < m.end)
    }
}

/// Where the profiler reads the very file `pid`'s mapping `m` maps (same device and inode), or
/// `None`.
fn readable_path(pid: u32, m: &Mapping) -> Option<Readable> {
    use std::os::{fd::AsRawFd as _, unix::fs::MetadataExt as _};
    let here = std::fs::metadata(&m.path).is_ok_and(|meta| (meta.dev(), meta.ino()) == m.file);
    if here {
        return Some(Readable {
            path: m.path.clone(),
            _file: None,
        });
    }
    let keep = |file: std::fs::File| Readable {
        path: PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd())),
        _file: Some(Arc::new(file)),
    };
    // The kernel's own link to the file the mapping maps (root only): exact by construction,
    // whatever device and inode numbers the filesystem shows (overlayfs and 9p, as in the
    // kernel matrix's guests, report others through stat than in the maps).
    let map_file = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
    if let Ok(file) = std::fs::File::open(&map_file) {
        return Some(keep(file));
    }
    // Else the path inside the process's root, if it holds the same file.
    let relative = m.path.strip_prefix("/").unwrap_or(&m.path);
    let file = std::fs::File::open(Path::new(&format!("/proc/{pid}/root")).join(relative)).ok()?;
    let meta = file.metadata().ok()?;
    ((meta.dev(), meta.ino()) == m.file).then(|| keep(file))
}

/// The file-backed mappings of a `/proc/PID/maps` text ("start-end perms offset dev inode path").
fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let _perms = fields.next()?;
            let offset = fields.next()?;
            let (major, minor) = fields.next()?.split_once(':')?;
            let inode = fields.next()?;
            let path = fields.collect::<Vec<_>>().join(" ");
            if inode == "0" || !path.starts_with('/') {
                return None;
            }
            let dev = libc::makedev(
                u32::from_str_radix(major, 16).ok()?,
                u32::from_str_radix(minor, 16).ok()?,
            );
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                path: PathBuf::from(path.trim_end_matches(" (deleted)")),
                file: (dev, inode.parse().ok()?),
                readable: None,
            })
        })
        .collect()
}

/// Where x86_64's user address space ends: a frame at or above it is no code (a frame-pointer
/// walk through a frame without one reads data).
const USER_SPACE_END: u64 = 0x8000_0000_0000;

/// Turns stack addresses into frames; keeps the files it parsed.
pub struct Symbols {
    symbolizer: Symbolizer,
    kernel: Source<'static>,
}

impl Default for Symbols {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbols {
    /// A symbolizer for this machine's kernel (kallsyms) and its processes.
    #[must_use]
    pub fn new() -> Self {
        let kernel = Kernel {
            // kallsyms has every function's address; a vmlinux search only costs time here.
            vmlinux: blazesym::MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        };
        Self {
            symbolizer: Symbolizer::builder().enable_code_info(false).build(),
            kernel: Source::Kernel(kernel),
        }
    }

    /// Parses kallsyms now, so that the first slow call is not the one that waits for it.
    pub fn warm_up(&self) {
        let _ = self.kernel(&[USER_SPACE_END]);
    }

    /// Kernel addresses, innermost first.
    pub fn kernel(&self, addresses: &[u64]) -> Vec<Frame> {
        match self
            .symbolizer
            .symbolize(&self.kernel, Input::AbsAddr(addresses))
        {
            Ok(symbols) => without_own_frames(
                symbols
                    .iter()
                    .zip(addresses)
                    .map(|(s, &a)| frame_of(s, a, None))
                    .collect(),
            ),
            Err(e) => {
                log::debug!("kernel symbolization failed: {e}");
                addresses.iter().map(|&a| unknown(a, None)).collect()
            }
        }
    }

    /// User addresses, innermost first, in a process with mappings `maps` (`None`: it exited
    /// before they could be read).
    pub fn user(&self, maps: Option<&ProcessMaps>, addresses: &[u64]) -> Vec<Frame> {
        let Some(maps) = maps else {
            return addresses
                .iter()
                .map(|&a| Frame::named(format!("0x{a:x}"), Some(Path::new("[exited]"))))
                .collect();
        };
        addresses
            .iter()
            .map(|&address| {
                let Some(mapping) = maps.locate(address) else {
                    return unknown(address, None);
                };
                let offset = address - mapping.start + mapping.offset;
                let Some(readable) = &mapping.readable else {
                    // The file it mapped cannot be read from here: named by its offset, never
                    // from another file at the same path.
                    return Frame::named(
                        format!("+0x{offset:x} [mapped file not readable from here]"),
                        Some(&mapping.path),
                    );
                };
                // DWARF first (inlined and stripped functions); a file whose debug link leads
                // nowhere readable (Debian's libc) fails as a whole, so then its ELF symbols.
                let mut elf = Elf::new(&readable.path);
                let with_dwarf = self
                    .symbolizer
                    .symbolize_single(&Source::Elf(elf.clone()), Input::FileOffset(offset));
                let symbolized = with_dwarf.or_else(|_| {
                    elf.debug_syms = false;
                    self.symbolizer
                        .symbolize_single(&Source::Elf(elf), Input::FileOffset(offset))
                });
                // A function without a name is named by its offset in the file: the same
                // in every process and run (an address is not, under ASLR).
                match symbolized {
                    Ok(Symbolized::Sym(sym)) => {
                        Frame::named(sym.name.to_string(), Some(&mapping.path))
                    }
                    _ => Frame::named(format!("+0x{offset:x}"), Some(&mapping.path)),
                }
            })
            .collect()
    }
}

fn frame_of(symbolized: &Symbolized<'_>, address: u64, module: Option<&Path>) -> Frame {
    match symbolized {
        Symbolized::Sym(sym) => Frame::named(sym.name.to_string(), module),
        Symbolized::Unknown(_) => unknown(address, module),
    }
}

fn unknown(address: u64, module: Option<&Path>) -> Frame {
    Frame::named(format!("0x{address:x}"), module)
}

/// A kernel stack without the profiler's own frames: taken inside its program, it begins
/// (innermost) with the program (`bpf_prog_..._btf_sched_switch`) and the trampoline that ran it
/// (`bpf_trace_run4`, `__bpf_trace_sched_switch`, `__traceiter_sched_switch`), which are the
/// measuring, not the measured. Where the kernel does not list its BPF programs in kallsyms
/// (`bpf_jit_kallsyms` 0: Debian's 6.1), the program's frame reads as whatever symbol lies
/// below it (`__init_scratch_end`): everything down to the trampoline goes then.
fn without_own_frames(mut frames: Vec<Frame>) -> Vec<Frame> {
    let trampoline = |f: &Frame| {
        f.function.starts_with("bpf_trace_run")
            || f.function.starts_with("__bpf_trace_")
            || f.function.starts_with("__traceiter_")
            || f.function.starts_with("bpf_trampoline_")
    };
    let own = |f: &Frame| f.function.starts_with("bpf_prog_") || trampoline(f);
    // The program, unnamed or not, and its trampolines are the first few frames.
    let through_trampoline = frames
        .iter()
        .take(6)
        .rposition(trampoline)
        .map_or(0, |i| i + 1);
    let skip = through_trampoline
        + frames[through_trampoline..]
            .iter()
            .take_while(|f| own(f))
            .count();
    frames.drain(..skip);
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profilers_own_frames_are_stripped_from_the_top_of_kernel_stacks() {
        let stripped = |names: &[&str]| -> Vec<String> {
            without_own_frames(names.iter().map(|n| Frame::named(*n, None)).collect())
                .into_iter()
                .map(|f| f.function)
                .collect()
        };
        let stack = [
            "bpf_prog_6deef7357e7b4530_btf_sched_switch",
            "bpf_trace_run4",
            "__traceiter_sched_switch",
            "__schedule",
            "schedule",
        ];
        assert_eq!(stripped(&stack), ["__schedule", "schedule"]);
        // A program the kernel does not name (6.1 without bpf_jit_kallsyms).
        let stack = [
            "__init_scratch_end",
            "bpf_trace_run4",
            "__schedule",
            "schedule",
        ];
        assert_eq!(stripped(&stack), ["__schedule", "schedule"]);
    }

    #[test]
    fn maps_keep_file_mappings_with_their_offsets() {
        let text = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1234    /tmp/helper
55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:01 1234    /tmp/helper
7f0000000000-7f0000021000 rw-p 00000000 00:00 0       [heap]
7f1000000000-7f1000100000 r-xp 00028000 fe:01 99      /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000000000-7f2000001000 r-xp 00000000 fe:01 77      /tmp/gone (deleted)
";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 4);
        assert_eq!(maps[0].file, (libc::makedev(0xfe, 1), 1234));
        let process = ProcessMaps { mappings: maps };
        let m = process
            .locate(0x55d0_c0a0_1234)
            .expect("in the text mapping");
        assert_eq!(m.path, Path::new("/tmp/helper"));
        assert_eq!(0x55d0_c0a0_1234 - m.start + m.offset, 0x1234);
        assert!(process.locate(0x7f00_0000_0010).is_none(), "no file");
        assert_eq!(
            process.locate(0x7f20_0000_0000).map(|m| m.path.clone()),
            Some(PathBuf::from("/tmp/gone"))
        );
    }

    #[test]
    fn this_process_symbolizes_its_own_function() {
        #[inline(never)]
        fn marker() -> u64 {
            marker as *const () as u64
        }
        let address = marker();
        let maps = ProcessMaps::read(std::process::id()).expect("our own mappings");
        assert_eq!(maps.placed(&[address]), 1);
        let frames = Symbols::new().user(Some(&maps), &[address]);
        assert!(
            frames[0].function.contains("marker"),
            "{:?} for our own function",
            frames[0]
        );
    }

    #[test]
    fn kallsyms_names_a_kernel_function() {
        // Root (the suite's user) sees kallsyms' addresses; others see zeros.
        let text = std::fs::read_to_string("/proc/kallsyms").expect("/proc/kallsyms");
        let address = text
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let address = u64::from_str_radix(f.next()?, 16).ok()?;
                let _kind = f.next()?;
                (f.next()? == "do_sys_poll").then_some(address)
            })
            .expect("do_sys_poll in kallsyms");
        if address == 0 {
            assert_ne!(
                unsafe { libc::geteuid() },
                0,
                "root sees kallsyms' addresses"
            );
            return;
        }
        let frames = Symbols::new().kernel(&[address + 1]);
        assert_eq!(frames[0].function, "do_sys_poll");
    }
}
