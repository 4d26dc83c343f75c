//! The HTML report's flame graph of the `--slow` calls: the folded stacks of
//! [`super::folded`] drawn as an SVG, root at the bottom, each frame as wide as the time of the
//! calls under it, the last level split by what the thread was doing (on the CPU, blocked,
//! runnable). Self-contained (no script: each frame's name and time is its tooltip), so the
//! report still reads offline.

use std::{collections::BTreeMap, fmt::Write as _};

use super::folded;
use crate::{
    report::{table::escape_html as esc, units::duration},
    slow::SlowReport,
};

const WIDTH: f64 = 1000.0;
const ROW: f64 = 17.0;
/// Frames narrower than this are left out (their time is in their parent's width).
const MIN_WIDTH: f64 = 0.5;

/// One frame of the merged tree: its children by name, and the time (µs) of the stacks
/// through it.
#[derive(Default)]
struct Node {
    value: u64,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn add(&mut self, frames: &[&str], value: u64) {
        self.value += value;
        if let Some((first, rest)) = frames.split_first() {
            self.children
                .entry((*first).to_owned())
                .or_default()
                .add(rest, value);
        }
    }

    fn depth(&self) -> usize {
        1 + self.children.values().map(Node::depth).max().unwrap_or(0)
    }
}

/// The flame graph of `slow`'s calls (under `variant`'s name in `run`), or `None` without any.
#[must_use]
pub fn svg(variant: Option<&str>, slow: &SlowReport) -> Option<String> {
    let mut root = Node::default();
    for group in &slow.groups {
        for (stack, value) in folded::lines(variant, group) {
            let frames: Vec<&str> = stack.split(';').collect();
            root.add(&frames, value);
        }
    }
    if root.value == 0 {
        return None;
    }
    let depth = root.depth() - 1;
    let height = (depth as f64 + 1.0) * ROW + 24.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg class=\"flame\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height:.0}\" role=\"img\" aria-label=\"flame graph of the slow calls\">"
    );
    let scale = WIDTH / root.value as f64;
    let mut x = 0.0;
    for (name, child) in &root.children {
        draw(&mut out, name, child, x, 0, depth, scale, root.value);
        x += child.value as f64 * scale;
    }
    let _ = writeln!(
        out,
        "<text x=\"0\" y=\"{:.0}\">{} of slow calls in all; a frame's width is the time of the calls through it</text>",
        height - 6.0,
        duration(root.value * 1000)
    );
    out.push_str("</svg>\n");
    Some(out)
}

#[expect(
    clippy::too_many_arguments,
    reason = "a recursive layout step: its position and the whole graph's scale"
)]
fn draw(
    out: &mut String,
    name: &str,
    node: &Node,
    x: f64,
    level: usize,
    depth: usize,
    scale: f64,
    total: u64,
) {
    let width = node.value as f64 * scale;
    if width < MIN_WIDTH {
        return;
    }
    // Root at the bottom: level 0 is the lowest row.
    let y = (depth - 1 - level) as f64 * ROW;
    let tip = format!(
        "{name}: {} ({:.1}%)",
        duration(node.value * 1000),
        node.value as f64 * 100.0 / total as f64
    );
    let _ = writeln!(
        out,
        "<g><title>{}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"{:.0}\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.5\"/>",
        esc(&tip),
        ROW - 1.0,
        colour(name),
    );
    // Roughly 6.5 px per character at 11 px: as much of the name as fits.
    let fits = ((width - 6.0) / 6.5).floor().max(0.0) as usize;
    if fits >= 3 {
        let shown: String = if name.chars().count() > fits {
            name.chars()
                .take(fits.saturating_sub(2))
                .chain("..".chars())
                .collect()
        } else {
            name.to_owned()
        };
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            x + 3.0,
            y + ROW - 5.0,
            esc(&shown)
        );
    }
    out.push_str("</g>\n");
    let mut child_x = x;
    for (child_name, child) in &node.children {
        draw(
            out,
            child_name,
            child,
            child_x,
            level + 1,
            depth,
            scale,
            total,
        );
        child_x += child.value as f64 * scale;
    }
}

/// Warm colours for code (user frames, which name their file, deeper than kernel frames), and
/// one colour per thread state.
fn colour(name: &str) -> &'static str {
    match name {
        "[on-CPU]" => "#2ca02c",
        "[blocked]" => "#6baed6",
        "[runnable]" => "#d62728",
        "-" => "#bbbbbb",
        n if n.ends_with(')') => "#f2a65a",
        _ => "#f6d365",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slow::{SlowGroup, SlowSample, symbols::Frame};

    #[test]
    fn frames_are_as_wide_as_their_time_and_states_are_the_top_row() {
        let group = |user: &str, total_ns: u64| SlowGroup {
            syscall: "read".into(),
            count: 1,
            total_ns,
            blocked_ns: total_ns / 2,
            runnable_ns: 0,
            slowest: SlowSample {
                pid: 1,
                tid: 1,
                comm: "srv".into(),
                duration_ns: total_ns,
                on_cpu_ns: 0,
                blocked_ns: 0,
                runnable_ns: 0,
                ret: 0,
                runnable_by: Vec::new(),
                runnable_attributed_ns: 0,
            },
            kernel_stack: vec![Frame {
                function: "pipe_read".into(),
                module: None,
            }],
            kernel_note: None,
            user_stack: vec![Frame {
                function: user.into(),
                module: Some("/bin/srv".into()),
            }],
            user_note: None,
        };
        let report = SlowReport {
            threshold_ns: 1,
            recorded: 2,
            lost: 0,
            top: 10,
            groups: vec![group("a", 30_000_000), group("b", 10_000_000)],
            ..SlowReport::default()
        };
        let svg = svg(None, &report).unwrap();
        // srv (root) spans the whole width; a (30 ms of 40) three quarters of it.
        assert!(svg.contains("<title>srv: 40.0ms (100.0%)</title>"), "{svg}");
        assert!(
            svg.contains("<title>a (srv): 30.0ms (75.0%)</title>"),
            "{svg}"
        );
        assert!(svg.contains("width=\"750.0\""), "{svg}");
        assert!(svg.contains("[blocked]: 15.0ms"), "{svg}");
    }
}
