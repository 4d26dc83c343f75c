//! `profiler top`'s full-screen view (ratatui on crossterm): the heading, the table of the last
//! interval, the selected row's latency histogram and the sparkline of its p99 over the last
//! minute, and the keys. The terminal is restored on `q`, Ctrl-C (a key in raw mode), SIGTERM
//! and SIGHUP (the stop flag ends the loop), an error (the guard's drop) and a panic (ratatui's
//! hook).

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use ratatui::{
    Frame as Screen,
    crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers},
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::Line,
    widgets::{Block, Borders, Paragraph, Row as TableRow, Sparkline, Table, TableState},
};

use super::{
    Ended, Source, TopOptions,
    model::{self, Column, Frame, History, Names, Row, ViewSpec},
};
use crate::{report::units::duration_ns, stats::Snapshot};

/// Restores the terminal when dropped (an error returned from the loop included).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// What the keys change.
#[derive(Default)]
struct View {
    spec: ViewSpec,
    /// Show everything since the start instead of the last interval.
    cumulative: bool,
    paused: bool,
    /// Typing a filter (`/`): the text so far.
    editing: Option<String>,
    selected: TableState,
}

/// The data of the last refresh.
#[derive(Default)]
struct Data {
    delta: Snapshot,
    total: Snapshot,
    seconds: f64,
}

/// Runs the view until a key, a signal or the traced processes end it.
pub fn run(source: &mut Source, options: &TopOptions, stop: &AtomicBool) -> Result<Ended> {
    let mut terminal = ratatui::try_init().context(
        "starting the full-screen view (a terminal is needed; --batch prints plain tables)",
    )?;
    let _restore = Restore;
    let target = source.describe(&options.trace);
    let front = source.front();
    let mut view = View {
        spec: options.view.clone(),
        ..View::default()
    };
    view.selected.select(Some(0));
    let mut names = Names::default();
    let mut history = History::default();
    let mut data = Data::default();
    let mut next = Instant::now() + options.interval;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(Ended::Quit);
        }
        if Instant::now() >= next {
            next = Instant::now() + options.interval;
            if let Some(ended) = source.exited()? {
                return Ok(ended);
            }
            let (delta, total, seconds) = source.refresh()?;
            let shown = model::frame(&delta, seconds, &view.spec, &mut names);
            history.push(&shown);
            if !view.paused {
                data = Data {
                    delta,
                    total,
                    seconds,
                };
            }
            if options.iterations.is_some_and(|n| source.refreshes >= n) {
                return Ok(Ended::Iterations);
            }
        }
        let frame = if view.cumulative {
            model::frame(&data.total, source.uptime(), &view.spec, &mut names)
        } else {
            model::frame(&data.delta, data.seconds, &view.spec, &mut names)
        };
        let rows = frame.rows.len();
        match view.selected.selected() {
            _ if rows == 0 => view.selected.select(None),
            None => view.selected.select(Some(0)),
            Some(i) if i < rows => {}
            Some(_) => view.selected.select(Some(rows - 1)),
        }
        terminal
            .draw(|screen| draw(screen, &frame, &view, &history, &target, &front, options))
            .context("drawing the view")?;
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        if event::poll(wait).context("reading the terminal")? {
            match event::read().context("reading the terminal")? {
                Event::Key(key)
                    if key.kind != KeyEventKind::Release
                        && handle_key(&mut view, key.code, key.modifiers, rows) =>
                {
                    return Ok(Ended::Quit);
                }
                // Drawn at the new size on the next pass.
                _ => {}
            }
        }
    }
}

/// Applies a key; true to quit.
fn handle_key(view: &mut View, code: KeyCode, modifiers: KeyModifiers, rows: usize) -> bool {
    if modifiers.contains(KeyModifiers::CONTROL) && code == KeyCode::Char('c') {
        return true;
    }
    if let Some(text) = &mut view.editing {
        match code {
            KeyCode::Enter => {
                view.spec.filter = std::mem::take(text);
                view.editing = None;
            }
            KeyCode::Esc => view.editing = None,
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            _ => {}
        }
        return false;
    }
    let select = |view: &mut View, by: isize| {
        let i = view.selected.selected().unwrap_or(0) as isize + by;
        let last = rows.saturating_sub(1) as isize;
        view.selected.select(Some(i.clamp(0, last.max(0)) as usize));
    };
    match code {
        KeyCode::Char('q') | KeyCode::Esc => return true,
        KeyCode::Char('s') => view.spec.sort = view.spec.sort.next(),
        KeyCode::Char(c @ '1'..='7') => {
            view.spec.sort = Column::ALL[(c as u8 - b'1') as usize];
        }
        KeyCode::Char('r') => view.spec.reverse = !view.spec.reverse,
        KeyCode::Char('/') => view.editing = Some(view.spec.filter.clone()),
        KeyCode::Char('g') => view.spec.group = view.spec.group.next(),
        KeyCode::Char('c') => view.cumulative = !view.cumulative,
        KeyCode::Char(' ' | 'p') => view.paused = !view.paused,
        KeyCode::Down | KeyCode::Char('j') => select(view, 1),
        KeyCode::Up | KeyCode::Char('k') => select(view, -1),
        KeyCode::PageDown => select(view, 10),
        KeyCode::PageUp => select(view, -10),
        _ => {}
    }
    false
}

fn draw(
    screen: &mut Screen,
    frame: &Frame,
    view: &View,
    history: &History,
    target: &str,
    front: &str,
    options: &TopOptions,
) {
    let area = screen.area();
    // The detail pane when there is room for it (24 lines: 8 of them).
    let detail = if area.height >= 20 { 8 } else { 0 };
    let [head, table, pane, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(4),
        Constraint::Length(detail),
        Constraint::Length(1),
    ])
    .areas(area);
    let mut state = Vec::new();
    if view.paused {
        state.push("PAUSED");
    }
    state.push(if view.cumulative {
        "since start"
    } else {
        "last"
    });
    let t = &frame.totals;
    let cells = model::cells(t, frame.seconds);
    let left_out = frame.left_out.map_or_else(
        || "left out: not measured".to_owned(),
        |s| format!("left out {:.1}%", 100.0 * s),
    );
    let heading = vec![
        Line::from(format!(
            "top every {}: {target} ({front})",
            humantime::format_duration(options.interval)
        )),
        Line::from(format!(
            "[{} {:.2}s] {} calls/s, {} err/s, time {}, {left_out}{}",
            state.join(", "),
            frame.seconds,
            cells[2],
            cells[3],
            duration_ns(t.total_ns as f64),
            if frame.dropped > 0 {
                format!("; {} calls dropped", frame.dropped)
            } else {
                String::new()
            }
        )),
    ];
    screen.render_widget(Paragraph::new(heading), head);
    draw_table(screen, table, frame, view);
    if detail > 0 {
        let selected = view.selected.selected().and_then(|i| frame.rows.get(i));
        draw_detail(screen, pane, selected, history);
    }
    let footer = match &view.editing {
        Some(text) => format!("filter (Enter to apply, Esc to cancel): {text}_"),
        None => format!(
            "q quit  s,1-7 sort:{}{}  r reverse  / filter{}  g group  c cumulative  ␣ pause",
            view.spec.sort.heading(),
            if view.spec.reverse { "↑" } else { "" },
            if view.spec.filter.is_empty() {
                String::new()
            } else {
                format!(" [{}]", view.spec.filter)
            }
        ),
    };
    screen.render_widget(
        Paragraph::new(footer).style(Style::default().add_modifier(Modifier::REVERSED)),
        foot,
    );
}

fn draw_table(screen: &mut Screen, area: Rect, frame: &Frame, view: &View) {
    // The exact count (batch's second column) gives way to the rates on a small screen.
    let columns = [0, 2, 3, 4, 5, 6, 7];
    let header = TableRow::new(
        columns
            .iter()
            .map(|&i| model::HEADINGS[i])
            .collect::<Vec<_>>(),
    )
    .style(Style::default().add_modifier(Modifier::BOLD));
    let rows: Vec<TableRow> = frame
        .rows
        .iter()
        .map(|r| {
            let cells = model::cells(r, frame.seconds);
            TableRow::new(
                columns
                    .iter()
                    .map(|&i| cells[i].clone())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let widths = [
        Constraint::Min(16),
        Constraint::Length(9),
        Constraint::Length(14),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
    ];
    let title = match (view.spec.group, frame.cgroups) {
        (model::Group::Syscall, _) => " per syscall ",
        (model::Group::Process, false) => " per process and syscall ",
        (model::Group::Process, true) => " per cgroup and syscall ",
    };
    if let Some(why) = frame.no_rows {
        screen.render_widget(
            Paragraph::new(why)
                .wrap(ratatui::widgets::Wrap { trim: true })
                .block(Block::default().borders(Borders::TOP).title(title)),
            area,
        );
        return;
    }
    let table = Table::new(rows, widths)
        .header(header)
        .block(Block::default().borders(Borders::TOP).title(title))
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    let mut state = view.selected;
    screen.render_stateful_widget(table, area, &mut state);
}

fn draw_detail(screen: &mut Screen, area: Rect, row: Option<&Row>, history: &History) {
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
    let Some(row) = row else {
        screen.render_widget(
            Paragraph::new("no row selected").block(Block::default().borders(Borders::TOP)),
            area,
        );
        return;
    };
    let lines = histogram_lines(
        row,
        left.height.saturating_sub(1) as usize,
        left.width as usize,
    );
    screen.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::TOP)
                .title(format!(" {} latency ", row.name())),
        ),
        left,
    );
    let series = history.of(&row.key());
    let peak = series.iter().copied().max().unwrap_or(0);
    let title = if row.p99_ns.is_some() {
        format!(" p99, last minute (peak {}) ", duration_ns(peak as f64))
    } else {
        " p99: per syscall only (g) ".to_owned()
    };
    screen.render_widget(
        Sparkline::default()
            .block(Block::default().borders(Borders::TOP).title(title))
            .data(&series),
        right,
    );
}

/// The row's latency histogram in powers of two, as many bins as fit, the busiest kept.
fn histogram_lines(row: &Row, height: usize, width: usize) -> Vec<Line<'static>> {
    let Some(h) = &row.histogram else {
        return vec![Line::from("per syscall only: g groups by syscall")];
    };
    let mut bins: Vec<(u64, u64)> = Vec::new(); // (low power of two, count)
    for b in h.buckets() {
        let low = if b.low == 0 { 0 } else { 1u64 << b.low.ilog2() };
        match bins.last_mut() {
            Some((l, n)) if *l == low => *n += b.count,
            _ => bins.push((low, b.count)),
        }
    }
    if bins.is_empty() {
        return vec![Line::from("no calls in this window")];
    }
    while bins.len() > height.max(1) {
        // Drop the emptier end.
        if bins[0].1 <= bins[bins.len() - 1].1 {
            bins.remove(0);
        } else {
            bins.pop();
        }
    }
    let most = bins.iter().map(|b| b.1).max().unwrap_or(1).max(1);
    let bar_width = width.saturating_sub(24).max(4);
    bins.iter()
        .map(|&(low, n)| {
            let bar = (n as f64 / most as f64 * bar_width as f64).ceil() as usize;
            Line::from(format!(
                "{:>8} {:<w$} {n}",
                duration_ns(low as f64),
                "█".repeat(bar.min(bar_width)),
                w = bar_width
            ))
        })
        .collect()
}
