//! What `profiler top` shows, from two snapshots of the session's counters: the rows of one
//! interval (or of everything since the start), sorted, filtered and grouped as the view asks.
//! Pure: the terminal view and the batch tables both draw from a [`Frame`].

use std::{collections::HashMap, fmt::Write as _};

use crate::{
    report::units::duration_ns,
    stats::{LatencyHistogram, Snapshot},
};

/// What a row is of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Group {
    /// One row per syscall (with its latency quantiles).
    #[default]
    Syscall,
    /// One row per process (or cgroup, with `--cgroup`/`--by-cgroup`) and syscall.
    Process,
}

impl Group {
    /// The other one (the `g` key).
    #[must_use]
    pub fn next(self) -> Self {
        match self {
            Self::Syscall => Self::Process,
            Self::Process => Self::Syscall,
        }
    }
}

/// A column to sort by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Column {
    /// The row's name (process, then syscall).
    Name,
    Calls,
    Errors,
    /// Share of the traced syscall time (the default).
    #[default]
    Share,
    Mean,
    P50,
    P99,
}

impl Column {
    /// Every column, in the table's order (the `1`..`7` keys).
    pub const ALL: [Self; 7] = [
        Self::Name,
        Self::Calls,
        Self::Errors,
        Self::Share,
        Self::Mean,
        Self::P50,
        Self::P99,
    ];

    /// The next column to the right (the `s` key), wrapping.
    #[must_use]
    pub fn next(self) -> Self {
        let i = Self::ALL.iter().position(|c| *c == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }

    /// Its heading.
    #[must_use]
    pub const fn heading(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Calls => "calls/s",
            Self::Errors => "errors/s",
            Self::Share => "share",
            Self::Mean => "mean",
            Self::P50 => "p50",
            Self::P99 => "p99",
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    /// "1234 nginx" (or a cgroup's path, a container's name) when grouped by process.
    pub process: Option<String>,
    /// The syscall; "all" on the totals row.
    pub syscall: String,
    /// Calls in the window, exact.
    pub calls: u64,
    /// Failed calls in the window.
    pub errors: u64,
    /// The most frequent errno of those, with its count (per-syscall rows only).
    pub errno: Option<(&'static str, u64)>,
    /// Their total latency, ns.
    pub total_ns: u64,
    /// Share of the window's traced syscall time, 0–1.
    pub share: f64,
    /// p50 and p99 latency, ns: per-syscall rows only (the kernel keeps one histogram per
    /// syscall, not per process).
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    /// The latency histogram of the window (per-syscall rows).
    pub histogram: Option<LatencyHistogram>,
}

impl Row {
    /// Mean latency, ns.
    #[must_use]
    pub fn mean_ns(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.calls as f64
        }
    }

    /// The row's name: "PROCESS SYSCALL" or "SYSCALL".
    #[must_use]
    pub fn name(&self) -> String {
        match &self.process {
            Some(p) => format!("{p} {}", self.syscall),
            None => self.syscall.clone(),
        }
    }

    /// The key the p99 history is kept under.
    #[must_use]
    pub fn key(&self) -> String {
        self.name()
    }

    fn sort_key(&self, column: Column) -> f64 {
        match column {
            Column::Name => 0.0,
            Column::Calls => self.calls as f64,
            Column::Errors => self.errors as f64,
            Column::Share => self.share,
            Column::Mean => self.mean_ns(),
            Column::P50 => self.p50_ns.map_or(-1.0, |v| v as f64),
            Column::P99 => self.p99_ns.map_or(-1.0, |v| v as f64),
        }
    }
}

/// One refresh: the rows of a window and their totals.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    /// How long the window was, s.
    pub seconds: f64,
    /// The rows, sorted and filtered.
    pub rows: Vec<Row>,
    /// Every row of the window summed (before the filter).
    pub totals: Row,
    /// The share of the traced processes' syscall time in syscalls the table leaves out,
    /// where every call was counted.
    pub left_out: Option<f64>,
    /// Calls the programs could not record in the window (nonzero: said under the table).
    pub dropped: u64,
    /// Rows that are cgroups', not processes'.
    pub cgroups: bool,
    /// Why there are no rows though calls were made (per process under `--all`).
    pub no_rows: Option<&'static str>,
}

/// Why grouping by process shows nothing under `--all`.
pub const NO_PROCESS_ROWS: &str = "no per-process rows: the kernel keeps per-process counters for tracked processes (--pid, --cgroup, -- CMD; up to 1,024, then one overflow row) and per cgroup with --all --by-cgroup, not under --all alone; g groups by syscall";

/// How the rows are chosen and ordered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewSpec {
    pub group: Group,
    pub sort: Column,
    /// Ascending instead of the default descending (names: ascending by default).
    pub reverse: bool,
    /// Rows whose name holds this text (case-insensitive); empty: all.
    pub filter: String,
}

/// Process names, read from /proc once per pid.
#[derive(Default)]
pub struct Names(HashMap<u32, String>);

impl Names {
    /// "PID COMM" ("PID" alone once it has exited unread).
    pub fn of(&mut self, pid: u32) -> String {
        self.0
            .entry(pid)
            .or_insert_with(|| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| c.trim().to_owned())
                    .unwrap_or_default();
                if comm.is_empty() {
                    pid.to_string()
                } else {
                    format!("{pid} {comm}")
                }
            })
            .clone()
    }
}

/// The frame of `window` (a snapshot's difference, or the cumulative snapshot), `seconds`
/// long, as `spec` asks.
#[must_use]
pub fn frame(window: &Snapshot, seconds: f64, spec: &ViewSpec, names: &mut Names) -> Frame {
    let total_ns: u64 = window.syscalls.iter().map(|s| s.total_ns).sum();
    let share = |ns: u64| {
        if total_ns == 0 {
            0.0
        } else {
            ns as f64 / total_ns as f64
        }
    };
    let mut rows: Vec<Row> = match spec.group {
        Group::Syscall => window
            .syscalls
            .iter()
            .filter(|s| s.calls > 0)
            .map(|s| Row {
                process: None,
                syscall: s.name.clone(),
                calls: s.calls,
                errors: s.errors.total(),
                errno: s.errors.top().map(|(class, n)| (class.name(), n)),
                total_ns: s.total_ns,
                share: share(s.total_ns),
                p50_ns: Some(s.quantile_ns(0.5)),
                p99_ns: Some(s.quantile_ns(0.99)),
                histogram: Some(s.latency.clone()),
            })
            .collect(),
        Group::Process => {
            let mut rows = Vec::new();
            for p in &window.processes {
                let process = match (&p.cgroup, &p.container, p.pid) {
                    (_, Some(c), _) => c.display(),
                    (Some(cgroup), None, _) => cgroup.clone(),
                    (None, None, 0) => "other".to_owned(),
                    (None, None, pid) => names.of(pid),
                };
                for (s, name) in p.syscalls.iter().zip(&window.syscalls) {
                    if s.calls == 0 {
                        continue;
                    }
                    rows.push(Row {
                        process: Some(process.clone()),
                        syscall: name.name.clone(),
                        calls: s.calls,
                        errors: s.errors,
                        errno: None,
                        total_ns: s.total_ns,
                        share: share(s.total_ns),
                        p50_ns: None,
                        p99_ns: None,
                        histogram: None,
                    });
                }
            }
            rows
        }
    };
    let totals = Row {
        process: None,
        syscall: "all".to_owned(),
        calls: window.syscalls.iter().map(|s| s.calls).sum(),
        errors: window.syscalls.iter().map(|s| s.errors.total()).sum(),
        errno: None,
        total_ns,
        share: if total_ns == 0 { 0.0 } else { 1.0 },
        p50_ns: None,
        p99_ns: None,
        histogram: None,
    };
    let filter = spec.filter.to_lowercase();
    rows.retain(|r| filter.is_empty() || r.name().to_lowercase().contains(&filter));
    rows.sort_by(|a, b| {
        let order = if spec.sort == Column::Name {
            a.name().cmp(&b.name())
        } else {
            b.sort_key(spec.sort)
                .total_cmp(&a.sort_key(spec.sort))
                .then_with(|| a.name().cmp(&b.name()))
        };
        if spec.reverse { order.reverse() } else { order }
    });
    Frame {
        seconds,
        rows,
        totals,
        left_out: window.left_out().map(|l| l.share),
        dropped: window.dropped.lost(),
        cgroups: window.processes.iter().any(|p| p.cgroup.is_some()),
        no_rows: (spec.group == Group::Process
            && window.processes.is_empty()
            && window.syscalls.iter().any(|s| s.calls > 0))
        .then_some(NO_PROCESS_ROWS),
    }
}

/// Per row, its p99 at each of the last refreshes (the sparkline of the selected row).
#[derive(Default)]
pub struct History {
    p99: HashMap<String, std::collections::VecDeque<u64>>,
}

impl History {
    /// Refreshes kept: a minute at the default 1 s.
    pub const KEPT: usize = 60;

    /// Adds the frame's p99s (0 for a row that made no call this time).
    pub fn push(&mut self, frame: &Frame) {
        for series in self.p99.values_mut() {
            series.push_back(0);
        }
        for row in &frame.rows {
            let Some(p99) = row.p99_ns else { continue };
            let series = self.p99.entry(row.key()).or_default();
            if let Some(last) = series.back_mut() {
                *last = p99;
            } else {
                series.push_back(p99);
            }
        }
        for series in self.p99.values_mut() {
            while series.len() > Self::KEPT {
                series.pop_front();
            }
        }
    }

    /// The p99 series of `key`, oldest first.
    #[must_use]
    pub fn of(&self, key: &str) -> Vec<u64> {
        self.p99
            .get(key)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// The cells of a row as both views print them: name, calls (exact), calls/s, errors/s with
/// the main errno, share, mean, p50, p99.
#[must_use]
pub fn cells(row: &Row, seconds: f64) -> [String; 8] {
    let per_s = |n: u64| {
        if seconds > 0.0 {
            format!("{:.1}", n as f64 / seconds)
        } else {
            "-".to_owned()
        }
    };
    let errors = match row.errno {
        Some((name, _)) if row.errors > 0 => format!("{} {name}", per_s(row.errors)),
        _ => per_s(row.errors),
    };
    let quantile = |q: Option<u64>| q.map_or_else(|| "-".to_owned(), |v| duration_ns(v as f64));
    [
        row.name(),
        row.calls.to_string(),
        per_s(row.calls),
        errors,
        format!("{:.1}%", 100.0 * row.share),
        if row.calls == 0 {
            "-".to_owned()
        } else {
            duration_ns(row.mean_ns())
        },
        quantile(row.p50_ns),
        quantile(row.p99_ns),
    ]
}

/// The headings of [`cells`].
pub const HEADINGS: [&str; 8] = [
    "name", "calls", "calls/s", "errors/s", "share", "mean", "p50", "p99",
];

/// The lines under a frame's table: the window, what the table leaves out, drops, the
/// quantiles' scope.
#[must_use]
pub fn notes(frame: &Frame, spec: &ViewSpec) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(share) = frame.left_out.filter(|_| frame.totals.calls > 0) {
        notes.push(format!(
            "left out: {:.1}% of the traced processes' syscall time is in syscalls not in the table",
            100.0 * share
        ));
    }
    if frame.dropped > 0 {
        notes.push(format!(
            "dropped: {} calls could not be recorded in this window (not in the rows)",
            frame.dropped
        ));
    }
    if let Some(why) = frame.no_rows {
        notes.push(why.to_owned());
    } else if spec.group == Group::Process {
        notes.push(
            "p50/p99: per syscall only (the kernel keeps one latency histogram per syscall); g groups by syscall"
                .to_owned(),
        );
    }
    notes
}

/// A frame as a plain table (batch mode), with `title` above it.
#[must_use]
pub fn batch_table(frame: &Frame, spec: &ViewSpec, title: &str) -> String {
    let mut table = crate::report::table::Table::new(HEADINGS);
    for row in &frame.rows {
        table.row(cells(row, frame.seconds).to_vec());
    }
    table.row(cells(&frame.totals, frame.seconds).to_vec());
    let mut out = format!("{title}\n{}", table.render());
    for note in notes(frame, spec) {
        let _ = writeln!(out, "{note}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{RowSummary, RowSyscall, SyscallSummary};

    fn snapshot() -> Snapshot {
        let mut s = Snapshot::default();
        for (name, calls, total_ns) in [("read", 10, 1000), ("close", 4, 3000), ("write", 0, 0)] {
            let mut summary = SyscallSummary {
                name: name.into(),
                calls,
                total_ns,
                min_ns: total_ns / calls.max(1),
                max_ns: total_ns / calls.max(1),
                ..Default::default()
            };
            summary.latency.record_n(total_ns / calls.max(1), calls);
            s.syscalls.push(summary);
        }
        s.processes.push(RowSummary {
            pid: 7,
            syscalls: vec![
                RowSyscall {
                    calls: 10,
                    errors: 0,
                    total_ns: 1000,
                },
                RowSyscall {
                    calls: 4,
                    errors: 1,
                    total_ns: 3000,
                },
                RowSyscall::default(),
            ],
            ..Default::default()
        });
        s
    }

    #[test]
    fn rows_sort_filter_and_group_as_asked() {
        let mut names = Names::default();
        let spec = ViewSpec::default();
        let f = frame(&snapshot(), 2.0, &spec, &mut names);
        // By share, descending: close (75%) before read; write made no call.
        let order: Vec<String> = f.rows.iter().map(Row::name).collect();
        assert_eq!(order, ["close", "read"]);
        assert_eq!(f.totals.calls, 14);
        assert_eq!(cells(&f.rows[1], f.seconds)[2], "5.0");
        let by_calls = ViewSpec {
            sort: Column::Calls,
            ..ViewSpec::default()
        };
        let f = frame(&snapshot(), 2.0, &by_calls, &mut names);
        assert_eq!(f.rows[0].syscall, "read");
        let filtered = ViewSpec {
            filter: "CLO".into(),
            ..ViewSpec::default()
        };
        let f = frame(&snapshot(), 2.0, &filtered, &mut names);
        assert_eq!(f.rows.len(), 1);
        assert_eq!(
            f.totals.calls, 14,
            "totals are of every row, not the filtered"
        );
        let by_process = ViewSpec {
            group: Group::Process,
            ..ViewSpec::default()
        };
        let f = frame(&snapshot(), 2.0, &by_process, &mut names);
        assert_eq!(f.rows.len(), 2);
        assert!(f.rows.iter().all(|r| r.p99_ns.is_none()));
        assert!(f.rows[0].process.as_deref().unwrap().starts_with('7'));
        assert!(
            notes(&f, &by_process)
                .iter()
                .any(|n| n.contains("per syscall only"))
        );
    }

    #[test]
    fn the_p99_history_keeps_a_minute_with_zeros_for_quiet_refreshes() {
        let mut names = Names::default();
        let mut h = History::default();
        let f = frame(&snapshot(), 1.0, &ViewSpec::default(), &mut names);
        h.push(&f);
        h.push(&Frame::default());
        let series = h.of("read");
        assert_eq!(series.len(), 2);
        assert!(series[0] > 0 && series[1] == 0);
        for _ in 0..100 {
            h.push(&f);
        }
        assert_eq!(h.of("read").len(), History::KEPT);
    }
}
