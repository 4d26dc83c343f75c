//! `--export-folded`: the `--slow` calls as folded stacks, the input every flame-graph tool
//! reads (Brendan Gregg's `flamegraph.pl`, inferno, speedscope, bcc's `offcputime -f`):
//!
//! ```text
//! [variant;]comm;user frames, outermost first;-;kernel frames, outermost first;[state] VALUE
//! ```
//!
//! One line per stack group (see `SlowGroup`) and state: the time its calls spent on the CPU,
//! blocked, and runnable (waiting for a CPU), as the last frame `[on-CPU]`, `[blocked]`,
//! `[runnable]`, so the graph's widths add up to the calls' latency and split by what the
//! thread was doing. **Values are microseconds** of that time (rounded; a state with less than
//! half a microsecond is left out). The `-` frame separates user from kernel frames, as
//! `offcputime -f` does. `run` puts the variant first, so one graph compares the variants; the
//! per-variant totals over every run are written, not each run again.

use std::fmt::Write as _;

use anyhow::Result;

use super::{ExportData, Exporter};
use crate::slow::{SlowGroup, symbols::Frame};

/// The folded-stacks format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Folded;

impl Exporter for Folded {
    fn name(&self) -> &'static str {
        "folded stacks"
    }

    fn render(&self, data: &ExportData) -> Result<Vec<u8>> {
        Ok(render(data).into_bytes())
    }
}

/// The folded lines of every measurement's slow calls (aggregates over runs where there are).
#[must_use]
pub fn render(data: &ExportData) -> String {
    let mut out = String::new();
    for m in data.summaries() {
        let Some(slow) = &m.slow else { continue };
        for group in &slow.groups {
            for (stack, value) in lines(m.variant.as_deref(), group) {
                let _ = writeln!(out, "{stack} {value}");
            }
        }
    }
    out
}

/// A group's lines: (stack, microseconds) for each state with time in it.
#[must_use]
pub fn lines(variant: Option<&str>, group: &SlowGroup) -> Vec<(String, u64)> {
    let mut frames: Vec<String> = Vec::new();
    if let Some(v) = variant {
        frames.push(clean(v));
    }
    frames.push(clean(&group.slowest.comm));
    frames.extend(group.user_stack.iter().rev().map(frame_name));
    frames.push("-".to_owned());
    frames.extend(group.kernel_stack.iter().rev().map(frame_name));
    let stack = frames.join(";");
    let on_cpu = group
        .total_ns
        .saturating_sub(group.blocked_ns + group.runnable_ns);
    [
        ("on-CPU", on_cpu),
        ("blocked", group.blocked_ns),
        ("runnable", group.runnable_ns),
    ]
    .into_iter()
    .map(|(state, ns)| (format!("{stack};[{state}]"), (ns + 500) / 1000))
    .filter(|(_, us)| *us > 0)
    .collect()
}

/// A frame as one folded field: its function, with the file's name for user frames.
fn frame_name(frame: &Frame) -> String {
    clean(&frame.short())
}

/// `;` separates frames and a line ends in ` VALUE`: neither may appear inside a frame's name
/// in a way that changes its meaning, so `;` becomes `:` and line breaks become spaces.
fn clean(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slow::SlowSample;

    fn frame(function: &str, module: Option<&str>) -> Frame {
        Frame {
            function: function.into(),
            module: module.map(Into::into),
        }
    }

    #[test]
    fn a_group_folds_outermost_first_with_one_line_per_state() {
        let group = SlowGroup {
            syscall: "read".into(),
            count: 2,
            total_ns: 30_000_000,
            blocked_ns: 25_000_000,
            runnable_ns: 4_000_000,
            slowest: SlowSample {
                pid: 1,
                tid: 1,
                comm: "slow_path".into(),
                duration_ns: 20_000_000,
                on_cpu_ns: 0,
                blocked_ns: 0,
                runnable_ns: 0,
                ret: 1,
                runnable_by: Vec::new(),
                runnable_attributed_ns: 0,
            },
            kernel_stack: vec![frame("__schedule", None), frame("pipe_read", None)],
            kernel_note: None,
            user_stack: vec![
                frame("read", Some("/lib/libc.so.6")),
                frame("<[u8; 4]>::f", Some("/bin/x")),
            ],
            user_note: None,
        };
        let lines = lines(Some("lt"), &group);
        let prefix = "lt;slow_path;<[u8: 4]>::f (x);read (libc.so.6);-;pipe_read;__schedule";
        assert_eq!(
            lines,
            vec![
                (format!("{prefix};[on-CPU]"), 1000),
                (format!("{prefix};[blocked]"), 25_000),
                (format!("{prefix};[runnable]"), 4000),
            ]
        );
    }
}
