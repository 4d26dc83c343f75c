//! `--export-pprof FILE`: the measurement as pprof's `profile.proto`, gzipped, the format that
//! `go tool pprof`, Grafana Pyroscope and Parca read.
//!
//! - **With `--slow`**, one sample per slow-call group (a syscall and its pair of stacks): its
//!   stack, leaf first, is the kernel stack where the calls waited longest, then a frame
//!   `syscall NAME`, then the user stack that made the call (DWARF-unwound, symbolized), so
//!   `-focus 'syscall read'` or a user function finds them. Values: `calls` (count), `wall`
//!   (the calls' latency), `on_cpu`, `blocked` and `runnable` (nanoseconds; the last three add
//!   up to `wall`). Only the calls at or past the threshold are in it: the profile's comment
//!   says the threshold, and how many calls the ring buffer lost (in no sample).
//! - **Without it**, one sample per syscall of the table, its stack the one frame
//!   `syscall NAME`: `calls` and `wall` always, and with `--off-cpu` the split (where a call
//!   was not split, the split's sample types are left out rather than guessed).
//!
//! Labels: `syscall`; `variant` and `concurrency` for `run` (whose per-variant totals are
//! written, not each run again); and for a slow group, `slowest_pid` and `slowest_comm`: the
//! process of its slowest call (a group can hold calls of several processes of one program).
//! Frames carry their function and, for user frames, the file they lie in (kernel frames:
//! `[kernel]`); there are no addresses or mappings: the names were resolved when recorded.
//!
//! The messages are declared here with `prost`'s derive, field for field as in pprof's
//! `proto/profile.proto`.

use std::{collections::HashMap, io::Write as _};

use anyhow::{Context as _, Result};
use prost::Message;

use super::{ExportData, Exporter};
use crate::slow::{SlowGroup, symbols::Frame};

/// The pprof format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pprof;

impl Exporter for Pprof {
    fn name(&self) -> &'static str {
        "pprof"
    }

    fn render(&self, data: &ExportData) -> Result<Vec<u8>> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&profile(data).encode_to_vec())
            .context("compressing the profile")?;
        gz.finish().context("compressing the profile")
    }
}

/// `perftools.profiles.Profile`.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`: indices into the string table.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`: its locations leaf first, one value per sample type, labels.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: a string (`str`) or a number (`num`).
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// `Location`: one frame here (no mapping, no address: symbolized when recorded).
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `Line`: the function of a location.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
}

/// `Function`: its name and file, indices into the string table.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// Interns strings and frames as the profile's tables.
#[derive(Default)]
struct Tables {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    locations: HashMap<(String, String), u64>,
    profile: Profile,
}

impl Tables {
    fn new() -> Self {
        let mut t = Self::default();
        t.string(""); // index 0 is the empty string, as the format requires
        t
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), i);
        i
    }

    /// The location of a frame named `function` in `file`, made on first use.
    fn location(&mut self, function: &str, file: &str) -> u64 {
        let key = (function.to_owned(), file.to_owned());
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        let (name, filename) = (self.string(function), self.string(file));
        self.profile.function.push(Function {
            id,
            name,
            system_name: name,
            filename,
        });
        self.profile.location.push(Location {
            id,
            line: vec![Line { function_id: id }],
        });
        self.locations.insert(key, id);
        id
    }

    fn user(&mut self, frame: &Frame) -> u64 {
        self.location(
            &frame.function,
            frame.module.as_deref().unwrap_or("[unknown]"),
        )
    }

    fn kernel(&mut self, frame: &Frame) -> u64 {
        self.location(&frame.function, "[kernel]")
    }

    fn label(&mut self, key: &str, value: &str) -> Label {
        Label {
            key: self.string(key),
            str: self.string(value),
            num: 0,
        }
    }

    fn number(&mut self, key: &str, num: i64) -> Label {
        Label {
            key: self.string(key),
            str: 0,
            num,
        }
    }

    fn sample_types(&mut self, types: &[(&str, &str)]) {
        for (kind, unit) in types {
            let value = ValueType {
                r#type: self.string(kind),
                unit: self.string(unit),
            };
            self.profile.sample_type.push(value);
        }
        self.profile.default_sample_type = self.string("wall");
    }
}

const SLOW_TYPES: [(&str, &str); 5] = [
    ("calls", "count"),
    ("wall", "nanoseconds"),
    ("on_cpu", "nanoseconds"),
    ("blocked", "nanoseconds"),
    ("runnable", "nanoseconds"),
];

/// The profile of `data` (see the module's doc).
#[must_use]
pub fn profile(data: &ExportData) -> Profile {
    let mut t = Tables::new();
    let summaries = data.summaries();
    let slow = summaries.iter().any(|m| m.slow.is_some());
    let split = !slow
        && summaries
            .iter()
            .flat_map(|m| &m.syscalls.syscalls)
            .filter(|s| s.calls > 0)
            .all(|s| s.off_cpu.is_some());
    let types: &[(&str, &str)] = if slow || split {
        &SLOW_TYPES
    } else {
        &SLOW_TYPES[..2]
    };
    t.sample_types(types);
    let mut comments = vec![format!(
        "syscall-profiler {}: {}",
        data.metadata.profiler_version, data.metadata.command
    )];
    for m in &summaries {
        let labels = |t: &mut Tables| {
            let mut l = Vec::new();
            if let Some(v) = &m.variant {
                l.push(t.label("variant", v));
            }
            if let Some(c) = m.concurrency {
                l.push(t.number("concurrency", c as i64));
            }
            l
        };
        if slow {
            let Some(report) = &m.slow else { continue };
            comments.push(format!(
                "{}the calls of {} ns or more (--slow): {} recorded, {} lost by the ring buffer and in no sample{}",
                m.variant.as_deref().map(|v| format!("{v}: ")).unwrap_or_default(),
                report.threshold_ns,
                report.recorded,
                report.lost,
                if report.groups_not_kept > 0 {
                    format!(", {} groups not kept", report.groups_not_kept)
                } else {
                    String::new()
                }
            ));
            for group in &report.groups {
                let mut label = labels(&mut t);
                let sample = slow_sample(&mut t, group, &mut label);
                t.profile.sample.push(sample);
            }
        } else {
            for s in m.syscalls.syscalls.iter().filter(|s| s.calls > 0) {
                let mut label = labels(&mut t);
                label.push(t.label("syscall", &s.name));
                let mut value = vec![to_i64(s.calls), to_i64(s.total_ns)];
                if split && let Some((on, blocked, runnable)) = s.time_split() {
                    value.extend([to_i64(on), to_i64(blocked), to_i64(runnable)]);
                }
                let location_id = vec![t.location(&format!("syscall {}", s.name), "[kernel]")];
                t.profile.sample.push(Sample {
                    location_id,
                    value,
                    label,
                });
            }
            if !m.syscalls.not_seen.is_empty() {
                comments.push(format!("not seen: {}", m.syscalls.not_seen.join("; ")));
            }
        }
    }
    add_comments(&mut t, &comments);
    t.profile.time_nanos = to_i64(data.metadata.started_unix_s.saturating_mul(1_000_000_000));
    t.profile.duration_nanos = (data.metadata.duration_s * 1e9) as i64;
    t.profile.string_table = std::mem::take(&mut t.strings);
    t.profile
}

/// A slow group's sample: kernel frames, `syscall NAME`, user frames (leaf first).
fn slow_sample(t: &mut Tables, group: &SlowGroup, label: &mut Vec<Label>) -> Sample {
    let mut location_id: Vec<u64> = group.kernel_stack.iter().map(|f| t.kernel(f)).collect();
    location_id.push(t.location(&format!("syscall {}", group.syscall), "[kernel]"));
    location_id.extend(group.user_stack.iter().map(|f| t.user(f)));
    label.push(t.label("syscall", &group.syscall));
    label.push(t.number("slowest_pid", i64::from(group.slowest.pid)));
    label.push(t.label("slowest_comm", &group.slowest.comm));
    let on_cpu = group
        .total_ns
        .saturating_sub(group.blocked_ns + group.runnable_ns);
    Sample {
        location_id,
        value: vec![
            to_i64(group.count),
            to_i64(group.total_ns),
            to_i64(on_cpu),
            to_i64(group.blocked_ns),
            to_i64(group.runnable_ns),
        ],
        label: std::mem::take(label),
    }
}

fn add_comments(t: &mut Tables, comments: &[String]) {
    for c in comments {
        let i = t.string(c);
        t.profile.comment.push(i);
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Snapshot, SyscallSummary};

    fn decode(bytes: &[u8]) -> Profile {
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut raw).unwrap();
        Profile::decode(raw.as_slice()).unwrap()
    }

    #[test]
    fn a_table_without_slow_calls_is_one_sample_per_syscall_with_calls_and_wall() {
        let mut snapshot = Snapshot::default();
        for (name, calls, total_ns) in [("read", 3, 3000), ("close", 2, 500), ("write", 0, 0)] {
            snapshot.syscalls.push(SyscallSummary {
                name: name.into(),
                calls,
                total_ns,
                ..Default::default()
            });
        }
        let data = ExportData::of_trace(super::super::Metadata::default(), snapshot, false);
        let p = decode(&Pprof.render(&data).unwrap());
        assert_eq!(p.string_table[0], "");
        let s = |i: i64| p.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|v| (s(v.r#type), s(v.unit)))
            .collect();
        assert_eq!(types, [("calls", "count"), ("wall", "nanoseconds")]);
        assert_eq!(s(p.default_sample_type), "wall");
        // write made no call: no sample.
        let values: Vec<&[i64]> = p.sample.iter().map(|x| x.value.as_slice()).collect();
        assert_eq!(values, [&[3, 3000][..], &[2, 500][..]]);
        let leaf = |x: &Sample| {
            let l = &p.location[x.location_id[0] as usize - 1];
            s(p.function[l.line[0].function_id as usize - 1].name).to_owned()
        };
        assert_eq!(leaf(&p.sample[0]), "syscall read");
        assert_eq!(s(p.sample[1].label[0].str), "close");
    }
}
