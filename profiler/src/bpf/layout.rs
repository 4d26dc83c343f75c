//! Where this kernel keeps the fields the programs read: tracepoint record offsets from the
//! `format` files in tracefs, struct member offsets from the kernel's BTF. Nothing here is
//! assumed from the kernel the project was built on: every offset is read off the running one.

use std::{fs, path::Path};

use profiler_common::{FIELD_ABSENT, RECORD_HEADER, RECORD_WINDOW, RecordLayout};

use crate::{
    bpf::{Syscall, environment::TRACEFS},
    error::SetupError,
};

/// The kernel's own type information.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// How a session learns that a process's last thread exited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GroupExit {
    /// `sched_process_exit`'s `group_dead` where the kernel has it (6.16+), else the BTF path.
    #[default]
    Auto,
    /// Always `current->signal->live` through BTF offsets, the path of kernels before 6.16
    /// (so that the host's test suite checks it too).
    TaskSignal,
}

/// Which programs `--off-cpu` attaches to the scheduler's `sched_switch` and `sched_wakeup`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SchedAttach {
    /// The BTF-typed raw tracepoints where the kernel's BTF gives `task_struct.pid` and the
    /// four-argument `sched_switch` (5.18 on), the classic ones otherwise.
    #[default]
    Auto,
    /// The classic `sched:` tracepoints, whose records the kernel formats before the program
    /// runs (the fallback; `profiler bench overhead` measures it against the raw ones).
    Classic,
}

/// The `--off-cpu` front end a session uses, as chosen by [`add_off_cpu`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedFront {
    /// BTF-typed raw tracepoints (`btf_sched_switch`, `btf_sched_wakeup`).
    Btf,
    /// Classic tracepoints (`sched_switch`, `sched_wakeup`), and why the raw ones were not used.
    Classic(&'static str),
}

/// One field of a tracepoint record, as its `format` file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordField {
    /// The field's name (`__syscall_nr`, `comm` for `char comm[16]`).
    pub name: String,
    /// Byte offset in the record.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
}

/// The fields of a tracepoint's record, parsed from the text of its `format` file.
#[must_use]
pub fn parse_format(text: &str) -> Vec<RecordField> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.trim().split(';').map(str::trim);
            let declaration = parts.next()?.strip_prefix("field:")?;
            let number = |key: &str| {
                parts
                    .clone()
                    .find_map(|p| p.strip_prefix(key))
                    .and_then(|v| v.trim().parse::<u32>().ok())
            };
            let offset = number("offset:")?;
            let size = number("size:")?;
            // "unsigned long clone_flags", "char comm[16]", "__data_loc char[] name".
            let last = declaration.split_whitespace().last()?;
            let name = last.split('[').next()?.to_owned();
            Some(RecordField { name, offset, size })
        })
        .collect()
}

/// Reads and parses `events/CATEGORY/NAME/format`.
fn record_fields(category: &str, name: &str) -> Result<Vec<RecordField>, SetupError> {
    let path = Path::new(TRACEFS)
        .join("events")
        .join(category)
        .join(name)
        .join("format");
    let text = fs::read_to_string(&path).map_err(|e| SetupError::RecordLayout {
        tracepoint: format!("{category}:{name}"),
        problem: format!("cannot read {}: {e}", path.display()),
    })?;
    Ok(parse_format(&text))
}

/// The offset of field `name` of `size` bytes, checked to lie where the programs can read it.
fn offset_of(
    fields: &[RecordField],
    tracepoint: &str,
    name: &str,
    size: u32,
) -> Result<Option<u32>, SetupError> {
    let Some(field) = fields.iter().find(|f| f.name == name) else {
        return Ok(None);
    };
    let problem = if field.size != size {
        format!(
            "field {name} is {} bytes, the programs read {size}",
            field.size
        )
    } else if field.offset < RECORD_HEADER || field.offset + size > RECORD_WINDOW {
        format!(
            "field {name} at offset {} is outside the bytes {RECORD_HEADER}..{RECORD_WINDOW} the programs can read",
            field.offset
        )
    } else if !field.offset.is_multiple_of(size) {
        format!("field {name} at offset {} is not aligned", field.offset)
    } else {
        return Ok(Some(field.offset));
    };
    Err(SetupError::RecordLayout {
        tracepoint: tracepoint.to_owned(),
        problem,
    })
}

fn required(
    fields: &[RecordField],
    tracepoint: &str,
    name: &str,
    size: u32,
) -> Result<u32, SetupError> {
    offset_of(fields, tracepoint, name, size)?.ok_or_else(|| SetupError::RecordLayout {
        tracepoint: tracepoint.to_owned(),
        problem: format!("its record has no field {name}"),
    })
}

impl GroupExit {
    /// Finds every offset the programs need for `syscalls` on the running kernel.
    pub fn layout(self, syscalls: &[Syscall]) -> Result<RecordLayout, SetupError> {
        let mut layout = RecordLayout::default();
        // Every sys_exit_* record is `struct syscall_trace_exit`; check each one all the same, as
        // the exit program reads them all with one pair of offsets.
        for (i, syscall) in syscalls.iter().enumerate() {
            let name = format!("sys_exit_{}", syscall.tracepoint);
            let tracepoint = format!("syscalls:{name}");
            let fields = record_fields("syscalls", &name)?;
            let nr = required(&fields, &tracepoint, "__syscall_nr", 4)?;
            let ret = required(&fields, &tracepoint, "ret", 8)?;
            if i > 0 && (nr, ret) != (layout.sys_exit_nr, layout.sys_exit_ret) {
                return Err(SetupError::RecordLayout {
                    tracepoint,
                    problem: format!(
                        "__syscall_nr at {nr} and ret at {ret} differ from sys_exit_{} ({} and {})",
                        syscalls[0].tracepoint, layout.sys_exit_nr, layout.sys_exit_ret
                    ),
                });
            }
            layout.sys_exit_nr = nr;
            layout.sys_exit_ret = ret;
        }

        let fields = record_fields("task", "task_newtask")?;
        layout.newtask_pid = required(&fields, "task:task_newtask", "pid", 4)?;
        layout.newtask_clone_flags = required(&fields, "task:task_newtask", "clone_flags", 8)?;

        let fields = record_fields("sched", "sched_process_exit")?;
        let group_dead = offset_of(&fields, "sched:sched_process_exit", "group_dead", 1)?;
        if let (Self::Auto, Some(offset)) = (self, group_dead) {
            layout.process_exit_group_dead = offset;
        } else {
            layout.process_exit_group_dead = FIELD_ABSENT;
            let btf = fs::read(VMLINUX_BTF).map_err(|e| SetupError::NoBtf(e.to_string()))?;
            let btf = Btf::parse(&btf).map_err(|e| SetupError::NoBtf(e.to_owned()))?;
            let member = |structure: &str, member: &str| {
                btf.member_offset(structure, member)
                    .ok_or_else(|| SetupError::RecordLayout {
                        tracepoint: "BTF".to_owned(),
                        problem: format!("struct {structure} has no member {member}"),
                    })
            };
            layout.task_signal = member("task_struct", "signal")?;
            layout.signal_live = member("signal_struct", "live")?;
        }
        Ok(layout)
    }
}

/// Chooses the `--off-cpu` front end and adds the offsets its programs read: `task_struct.pid`
/// (BTF) for the BTF tracepoints; `prev_state` and `next_pid` of `sched:sched_switch` and `pid`
/// of `sched:sched_wakeup` for the classic ones.
pub fn add_off_cpu(layout: &mut RecordLayout, how: SchedAttach) -> Result<SchedFront, SetupError> {
    let why_not_raw = match how {
        SchedAttach::Classic => "asked for",
        SchedAttach::Auto => match fs::read(VMLINUX_BTF) {
            Err(_) => "the kernel has no BTF",
            Ok(data) => match Btf::parse(&data) {
                Err(_) => "the kernel's BTF did not parse",
                Ok(btf) => {
                    // With the leading `void *__data`: (preempt, prev, next, prev_state).
                    let switch_args = btf.raw_tracepoint_params("sched_switch");
                    let wakeup_args = btf.raw_tracepoint_params("sched_wakeup");
                    match (
                        btf.member_offset("task_struct", "pid"),
                        switch_args,
                        wakeup_args,
                    ) {
                        (Some(pid), Some(5), Some(2)) => {
                            layout.task_pid = pid;
                            return Ok(SchedFront::Btf);
                        }
                        (None, ..) => "BTF has no task_struct.pid",
                        _ => "the raw sched_switch has no prev_state argument (before 5.18)",
                    }
                }
            },
        },
    };
    layout.task_pid = FIELD_ABSENT;
    add_classic_off_cpu(layout)?;
    Ok(SchedFront::Classic(why_not_raw))
}

fn add_classic_off_cpu(layout: &mut RecordLayout) -> Result<(), SetupError> {
    let fields = record_fields("sched", "sched_switch")?;
    layout.switch_prev_state = required(&fields, "sched:sched_switch", "prev_state", 8)?;
    layout.switch_next_pid = required(&fields, "sched:sched_switch", "next_pid", 4)?;
    let fields = record_fields("sched", "sched_wakeup")?;
    layout.wakeup_pid = required(&fields, "sched:sched_wakeup", "pid", 4)?;
    Ok(())
}

/// Just enough of a BTF reader to find a struct member's byte offset (aya-obj parses BTF but
/// keeps member lookups to itself). Format: Documentation/bpf/btf.rst.
struct Btf<'a> {
    strings: &'a [u8],
    /// Indexed by type id (0 is void).
    types: Vec<BtfType>,
}

struct BtfType {
    name: u32,
    kind: u32,
    /// For typedefs and qualifiers: the type referred to.
    referred: u32,
    /// For structs and unions: (name, type id, bit offset).
    members: Vec<(u32, u32, u32)>,
    /// For function prototypes: the number of parameters.
    params: usize,
}

const BTF_MAGIC: u16 = 0xeb9f;
const KIND_PTR: u32 = 2;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_FUNC_PROTO: u32 = 13;

impl<'a> Btf<'a> {
    fn parse(data: &'a [u8]) -> Result<Self, &'static str> {
        let u16_at = |at: usize| {
            data.get(at..at + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
        };
        let u32_at = |at: usize| {
            data.get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        if u16_at(0) != Some(BTF_MAGIC) {
            return Err("not little-endian BTF");
        }
        let header = u32_at(4).ok_or("truncated header")? as usize;
        let field = |i: usize| {
            u32_at(8 + 4 * i)
                .map(|v| v as usize)
                .ok_or("truncated header")
        };
        let (type_off, type_len, str_off, str_len) = (field(0)?, field(1)?, field(2)?, field(3)?);
        let strings = data
            .get(header + str_off..header + str_off + str_len)
            .ok_or("string section out of bounds")?;
        let end = header + type_off + type_len;
        let mut at = header + type_off;
        let mut types = vec![BtfType {
            name: 0,
            kind: 0,
            referred: 0,
            members: Vec::new(),
            params: 0,
        }];
        while at < end {
            let (name, info, size_or_type) = (
                u32_at(at).ok_or("truncated type")?,
                u32_at(at + 4).ok_or("truncated type")?,
                u32_at(at + 8).ok_or("truncated type")?,
            );
            at += 12;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            let vlen = (info & 0xffff) as usize;
            let mut members = Vec::new();
            // The bytes that follow each kind's common part.
            let extra = match kind {
                1 | 14 | 17 => 4, // int, var, decl_tag
                3 => 12,          // array
                KIND_STRUCT | KIND_UNION => {
                    for m in 0..vlen {
                        let base = at + 12 * m;
                        let offset = u32_at(base + 8).ok_or("truncated member")?;
                        let bits = if kind_flag {
                            offset & 0x00ff_ffff
                        } else {
                            offset
                        };
                        members.push((
                            u32_at(base).ok_or("truncated member")?,
                            u32_at(base + 4).ok_or("truncated member")?,
                            bits,
                        ));
                    }
                    12 * vlen
                }
                6 | 13 => 8 * vlen,        // enum, func_proto
                15 | 19 => 12 * vlen,      // datasec, enum64
                2 | 7..=12 | 16 | 18 => 0, // ptr, fwd, typedef, qualifiers, func, float, type_tag
                _ => return Err("unknown BTF kind"),
            };
            at += extra;
            types.push(BtfType {
                name,
                kind,
                referred: size_or_type,
                members,
                params: if kind == KIND_FUNC_PROTO { vlen } else { 0 },
            });
        }
        Ok(Self { strings, types })
    }

    fn name(&self, offset: u32) -> &[u8] {
        let rest = self.strings.get(offset as usize..).unwrap_or_default();
        &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
    }

    /// The byte offset of `member` in `struct name`, looking inside anonymous structs and unions.
    fn member_offset(&self, name: &str, member: &str) -> Option<u32> {
        let id = self.types.iter().position(|t| {
            t.kind == KIND_STRUCT && !t.members.is_empty() && self.name(t.name) == name.as_bytes()
        })?;
        self.find_member(id, member.as_bytes(), 0)
            .map(|bits| bits / 8)
    }

    /// The number of parameters the raw tracepoint `name` passes its probes (the kernel's
    /// `typedef void (*btf_trace_NAME)(void *__data, ...)`), counting `__data`.
    fn raw_tracepoint_params(&self, name: &str) -> Option<usize> {
        let typedef = format!("btf_trace_{name}");
        let ty = self
            .types
            .iter()
            .find(|t| t.kind == KIND_TYPEDEF && self.name(t.name) == typedef.as_bytes())?;
        let ptr = self.types.get(ty.referred as usize)?;
        let proto = self.types.get(ptr.referred as usize)?;
        (ptr.kind == KIND_PTR && proto.kind == KIND_FUNC_PROTO).then_some(proto.params)
    }

    fn find_member(&self, id: usize, member: &[u8], depth: u32) -> Option<u32> {
        let ty = self.types.get(id)?;
        if depth > 8 {
            return None;
        }
        for &(name, type_id, bits) in &ty.members {
            if name == 0 {
                let inner = self.strip(type_id);
                if let Some(found) = self.find_member(inner, member, depth + 1) {
                    return Some(bits + found);
                }
            } else if self.name(name) == member {
                return Some(bits);
            }
        }
        None
    }

    /// Follows typedefs and qualifiers to the struct or union they name.
    fn strip(&self, mut id: u32) -> usize {
        for _ in 0..16 {
            match self.types.get(id as usize) {
                Some(t) if matches!(t.kind, 8..=11 | 18) => id = t.referred,
                _ => break,
            }
        }
        id as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sys_exit_close` as Debian's 6.1.0-57-rt-amd64 describes it: its common header has an
    /// extra byte, so `__syscall_nr` is at 12, not at 8 as on 6.1 and 6.18.
    const RT_SYS_EXIT: &str = "name: sys_exit_close
ID: 730
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
\tfield:unsigned char common_preempt_lazy_count;\toffset:8;\tsize:1;\tsigned:0;

\tfield:int __syscall_nr;\toffset:12;\tsize:4;\tsigned:1;
\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;

print fmt: \"0x%lx\", REC->ret
";

    #[test]
    fn format_fields_are_parsed_with_their_offsets_and_sizes() {
        let fields = parse_format(RT_SYS_EXIT);
        assert_eq!(fields.len(), 7);
        assert_eq!(
            required(&fields, "t", "__syscall_nr", 4).unwrap(),
            12,
            "{fields:?}"
        );
        assert_eq!(required(&fields, "t", "ret", 8).unwrap(), 16);
        let comm = parse_format("\tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:1;");
        assert_eq!(comm[0].name, "comm");
    }

    #[test]
    fn a_field_of_another_size_or_outside_the_window_is_refused() {
        let fields = parse_format(RT_SYS_EXIT);
        let err = required(&fields, "syscalls:sys_exit_close", "ret", 4).unwrap_err();
        assert!(err.to_string().contains("ret is 8 bytes"), "{err}");
        let far = parse_format("\tfield:u64 x;\toffset:72;\tsize:8;\tsigned:0;");
        let err = required(&far, "t", "x", 8).unwrap_err();
        assert!(err.to_string().contains("outside"), "{err}");
        assert_eq!(offset_of(&fields, "t", "group_dead", 1).unwrap(), None);
    }

    /// The running kernel's BTF: `signal` and `live` exist and are aligned, and the reader finds
    /// members nested in anonymous unions and structs (`sk_buff`'s list pointers).
    #[test]
    fn vmlinux_btf_gives_the_task_and_signal_offsets() {
        let data = fs::read(VMLINUX_BTF).expect("this kernel has BTF");
        let btf = Btf::parse(&data).expect("BTF parses");
        let signal = btf.member_offset("task_struct", "signal").unwrap();
        let live = btf.member_offset("signal_struct", "live").unwrap();
        assert!(
            signal > 0 && signal.is_multiple_of(8),
            "task_struct.signal at {signal}"
        );
        assert!(live.is_multiple_of(4), "signal_struct.live at {live}");
        assert_eq!(btf.member_offset("list_head", "next"), Some(0));
        assert_eq!(btf.member_offset("list_head", "prev"), Some(8));
        assert_eq!(btf.member_offset("sk_buff", "prev"), Some(8));
        assert!(btf.member_offset("task_struct", "no_such_member").is_none());
        // The raw tracepoints --off-cpu uses: (__data, preempt, prev, next, prev_state) and
        // (__data, p) on every kernel of the matrix (5.18 on).
        assert_eq!(btf.raw_tracepoint_params("sched_switch"), Some(5));
        assert_eq!(btf.raw_tracepoint_params("sched_wakeup"), Some(2));
        assert!(btf.member_offset("task_struct", "pid").is_some());
        assert!(btf.raw_tracepoint_params("no_such_tracepoint").is_none());
    }
}
