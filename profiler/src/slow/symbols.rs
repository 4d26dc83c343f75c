//! Names for the addresses of a `--slow` stack: kernel ones from kallsyms, user ones from the
//! ELF symbols and DWARF of the file each address lies in (blazesym).
//!
//! A user address means something only in its process's address space, which is gone once the
//! process exits, often right after its slow call. So the collector's reader reads a process's
//! mappings (`/proc/PID/maps`, a [`ProcessMaps`]) as soon as it hears of it (an announcement
//! while one of its calls waits, or its first record) and again after an exec; an address is
//! turned into (file, offset in the file) from them, and the file is symbolized by path, which
//! works after the exit too.

use std::path::{Path, PathBuf};

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
    path: PathBuf,
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
        let mappings = parse_maps(&text);
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

    /// Each mapped file once, in address order: its whole range in the process (first
    /// mapping's start to last mapping's end) and its first mapping's start and file offset.
    pub(super) fn files(&self) -> Vec<super::unwind::FileRange<'_>> {
        let mut files: Vec<super::unwind::FileRange<'_>> = Vec::new();
        let mut sorted: Vec<&Mapping> = self.mappings.iter().collect();
        sorted.sort_by_key(|m| m.start);
        for m in sorted {
            match files.iter_mut().find(|f| f.0 == m.path.as_path()) {
                Some(f) => {
                    f.1.start = f.1.start.min(m.start);
                    f.1.end = f.1.end.max(m.end);
                }
                None => files.push((&m.path, m.start..m.end, m.start, m.offset)),
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

/// The file-backed mappings of a `/proc/PID/maps` text ("start-end perms offset dev inode path").
fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let _perms = fields.next()?;
            let offset = fields.next()?;
            let _dev = fields.next()?;
            let inode = fields.next()?;
            let path = fields.collect::<Vec<_>>().join(" ");
            if inode == "0" || !path.starts_with('/') {
                return None;
            }
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                path: PathBuf::from(path.trim_end_matches(" (deleted)")),
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
            Ok(symbols) => symbols
                .iter()
                .zip(addresses)
                .map(|(s, &a)| frame_of(s, a, None))
                .collect(),
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
                // DWARF first (inlined and stripped functions); a file whose debug link leads
                // nowhere readable (Debian's libc) fails as a whole, so then its ELF symbols.
                let mut elf = Elf::new(&mapping.path);
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

#[cfg(test)]
mod tests {
    use super::*;

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
