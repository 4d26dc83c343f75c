//! A slow call's user stack unwound from the binaries' DWARF call frame information, as
//! `perf --call-graph dwarf` and samply do: the kernel sends the user registers at the syscall
//! and the top [`USER_STACK_BYTES`] of the stack (`SlowCallStack`); framehop walks it with each
//! mapped file's `.eh_frame` (through `.eh_frame_hdr`) or `.debug_frame`. Frame pointers are not
//! needed, so the direct caller of a libc wrapper (which keeps none) appears, and binaries built
//! without them (most Rust and C binaries as distributions ship them) are unwound too.
//!
//! A file's unwind sections are read once and shared by every process that maps it; a
//! process's unwinder is built from its mappings as the collector read them.

use std::{collections::HashMap, ops::Range, path::Path, sync::Arc};

use framehop::{
    ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder,
    x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64},
};
use object::{Object as _, ObjectSection as _, ObjectSegment as _};
pub use profiler_common::USER_STACK_BYTES;

use super::symbols::ProcessMaps;

/// The most frames a stack is unwound to (a recursion would otherwise fill a report).
const MAX_FRAMES: usize = 128;

/// What DWARF unwinding found for one call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unwound {
    /// Addresses to symbolize, innermost first: the instruction pointer, then each return
    /// address less one (so that it lies in the call instruction's function).
    pub addresses: Vec<u64>,
    /// The walk stopped at the end of the copied stack, not at the stack's root: deeper
    /// frames are missing.
    pub truncated: bool,
}

/// One file's unwind sections, shared by the processes that map it.
struct FileUnwindInfo {
    /// (file offset, virtual address) of each loadable segment: where the file lies in a
    /// process follows from one mapping.
    segments: Vec<(u64, u64, u64)>,
    sections: ExplicitModuleSectionInfo<Arc<[u8]>>,
}

impl FileUnwindInfo {
    fn read(path: &Path) -> Option<Self> {
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            let bytes: Arc<[u8]> = Arc::from(s.uncompressed_data().ok()?.as_ref());
            Some((s.address()..s.address() + s.size(), bytes))
        };
        let (text_svma, text) = section(".text").unzip();
        let (eh_frame_svma, eh_frame) = section(".eh_frame").unzip();
        let (eh_frame_hdr_svma, eh_frame_hdr) = section(".eh_frame_hdr").unzip();
        let (_, debug_frame) = section(".debug_frame").unzip();
        if eh_frame.is_none() && debug_frame.is_none() {
            return None;
        }
        let got_svma = file
            .section_by_name(".got")
            .map(|s| s.address()..s.address() + s.size());
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, s.address(), size)
            })
            .collect();
        Some(Self {
            segments,
            sections: ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma,
                text,
                got_svma,
                eh_frame_svma,
                eh_frame,
                eh_frame_hdr_svma,
                eh_frame_hdr,
                debug_frame,
                ..Default::default()
            },
        })
    }

    /// The load bias (the address of virtual address 0) of the file mapped at `start` from
    /// file offset `offset`: from the segment holding that offset.
    fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        let (seg_offset, seg_vaddr, _) = self.segments.iter().copied().find(|&(o, _, size)| {
            // A mapping starts at the page holding the segment's first byte.
            let page_start = o & !0xfff;
            offset >= page_start && offset < o + size.max(1)
        })?;
        // The mapping's first byte is file offset `offset`, at `start`; the segment's byte at
        // `seg_offset` is at virtual address `seg_vaddr`.
        Some(
            start
                .wrapping_add(seg_offset)
                .wrapping_sub(offset)
                .wrapping_sub(seg_vaddr),
        )
    }
}

/// A process's unwinder, built from the mappings it was read with.
struct ProcessUnwinder {
    maps: Arc<ProcessMaps>,
    unwinder: UnwinderX86_64<Arc<[u8]>>,
}

/// DWARF unwinding for the collector: files' unwind sections, each process's unwinder, one
/// cache of unwind rules.
#[derive(Default)]
pub struct Unwinders {
    /// By (device, inode): the same file under two paths (two mount namespaces) is read once,
    /// and two files under one path are two files.
    files: HashMap<(u64, u64), Option<Arc<FileUnwindInfo>>>,
    processes: HashMap<u32, ProcessUnwinder>,
    cache: CacheX86_64,
}

impl Unwinders {
    /// Unwinds the stack of `pid` (mapped as `maps`) from the registers `ip`, `sp`, `bp`, with
    /// `stack` the bytes from `sp` up. Empty when no frame could be found past the first.
    pub fn unwind(
        &mut self,
        pid: u32,
        maps: &Arc<ProcessMaps>,
        (ip, sp, bp): (u64, u64, u64),
        stack: &[u8],
    ) -> Unwound {
        if stack.is_empty() || ip == 0 {
            return Unwound::default();
        }
        let fresh = self
            .processes
            .get(&pid)
            .is_some_and(|p| Arc::ptr_eq(&p.maps, maps));
        if !fresh {
            let unwinder = self.unwinder_for(maps);
            self.processes.insert(
                pid,
                ProcessUnwinder {
                    maps: Arc::clone(maps),
                    unwinder,
                },
            );
        }
        let unwinder = &self.processes[&pid].unwinder;
        let end = sp + stack.len() as u64;
        let mut past_end = false;
        let mut read_stack = |address: u64| {
            if address < sp || address + 8 > end {
                past_end |= address >= end;
                return Err(());
            }
            let at = (address - sp) as usize;
            let bytes: [u8; 8] = stack[at..at + 8].try_into().map_err(|_| ())?;
            Ok(u64::from_le_bytes(bytes))
        };
        let mut addresses = Vec::new();
        let mut ended_well = false;
        {
            let regs = UnwindRegsX86_64::new(ip, sp, bp);
            let mut frames = unwinder.iter_frames(ip, regs, &mut self.cache, &mut read_stack);
            while addresses.len() < MAX_FRAMES {
                match frames.next() {
                    Ok(Some(frame)) => addresses.push(lookup(frame)),
                    Ok(None) => {
                        ended_well = true;
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
        if addresses.len() < 2 {
            return Unwound::default();
        }
        Unwound {
            addresses,
            truncated: !ended_well && past_end,
        }
    }

    fn unwinder_for(&mut self, maps: &ProcessMaps) -> UnwinderX86_64<Arc<[u8]>> {
        let mut unwinder = UnwinderX86_64::new();
        for f in maps.files() {
            let info = self
                .files
                .entry(f.file)
                .or_insert_with(|| FileUnwindInfo::read(f.readable).map(Arc::new))
                .clone();
            let Some(info) = info else { continue };
            let Some(bias) = info.bias(f.start, f.offset) else {
                continue;
            };
            unwinder.add_module(Module::new(
                f.path.display().to_string(),
                f.range,
                bias,
                info.sections.clone(),
            ));
        }
        unwinder
    }
}

fn lookup(frame: FrameAddress) -> u64 {
    frame.address_for_lookup()
}

/// One mapped file of a process: its whole mapped range, with the first mapping's start and
/// offset.
pub(super) struct FileRange<'a> {
    /// As the process names it.
    pub(super) path: &'a Path,
    /// Where this process reads the same file.
    pub(super) readable: &'a Path,
    /// (device, inode).
    pub(super) file: (u64, u64),
    pub(super) range: Range<u64>,
    pub(super) start: u64,
    pub(super) offset: u64,
}
