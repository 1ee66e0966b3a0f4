//! The terminal screen (ratatui over crossterm): one row per server, worst
//! first, coloured by state, a qps sparkline; keys to sort, filter, open a
//! server's detail and switch to a compact view. It only reads the shared
//! fleet view, so a slow server never blocks drawing. The terminal is
//! restored on exit and on panic.

use std::io::Stdout;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Direction, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};
use ratatui::{Frame, Terminal};

use crate::monitor::{Fleet, Server, State};
use crate::ui::{cells, shown, stale_age, summary, worst_first, COLUMNS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    Worst,
    Name,
    Qps,
    Running,
}

impl Sort {
    fn next(self) -> Sort {
        match self {
            Sort::Worst => Sort::Name,
            Sort::Name => Sort::Qps,
            Sort::Qps => Sort::Running,
            Sort::Running => Sort::Worst,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Sort::Worst => "worst first",
            Sort::Name => "name",
            Sort::Qps => "qps",
            Sort::Running => "threads running",
        }
    }
}

struct App {
    sort: Sort,
    filter: String,
    editing: bool,
    compact: bool,
    detail: bool,
    /// The pane shows the fleet's top statements instead of a server.
    statements: bool,
    table: TableState,
}

fn color(s: State) -> Color {
    match s {
        State::Ok => Color::Green,
        State::Degraded => Color::Yellow,
        State::Denied => Color::Cyan,
        State::Stalled => Color::Magenta,
        State::Down => Color::Red,
        State::Unknown => Color::Gray,
    }
}

/// Eight-level bars of the last values.
pub fn sparkline(values: impl Iterator<Item = f64> + Clone, width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let v: Vec<f64> = values.collect();
    let v = &v[v.len().saturating_sub(width)..];
    let max = v.iter().cloned().fold(0.0f64, f64::max);
    v.iter()
        .map(|x| {
            if max <= 0.0 {
                BARS[0]
            } else {
                BARS[((x / max) * 7.0).round().clamp(0.0, 7.0) as usize]
            }
        })
        .collect()
}

fn visible<'a>(f: &'a Fleet, app: &App) -> Vec<&'a Server> {
    let needle = app.filter.to_lowercase();
    let mut v: Vec<&Server> = f
        .servers
        .iter()
        .filter(|s| {
            needle.is_empty()
                || s.server.to_lowercase().contains(&needle)
                || s.state.name().contains(&needle)
                || s.tags
                    .iter()
                    .any(|(k, v)| format!("{k}={v}").contains(&needle))
        })
        .collect();
    let counter = |s: &Server, n: &str| s.sample.as_ref().map(|x| x.counter(n)).unwrap_or(0);
    match app.sort {
        Sort::Worst => worst_first(&mut v),
        Sort::Name => v.sort_by(|a, b| a.server.cmp(&b.server)),
        Sort::Qps => v.sort_by(|a, b| {
            let q = |s: &Server| s.rates.map(|r| r.qps).unwrap_or(0.0);
            q(b).total_cmp(&q(a))
        }),
        Sort::Running => v.sort_by_key(|s| std::cmp::Reverse(counter(s, "Threads_running"))),
    }
    v
}

fn draw(frame: &mut Frame, f: &Fleet, app: &mut App) {
    let servers = visible(f, app);
    let area = frame.area();
    let chunks = Layout::default()
        .direction(Direction::Vertical)
        .constraints(if app.detail || app.statements {
            vec![
                Constraint::Length(1),
                Constraint::Percentage(50),
                Constraint::Min(5),
            ]
        } else {
            vec![
                Constraint::Length(1),
                Constraint::Min(3),
                Constraint::Length(0),
            ]
        })
        .split(area);
    let head = format!(
        " sqlfleet watch — {} — sort: {} {}— q quit, s sort, / filter, Enter detail (Esc closes), t top statements, c compact",
        summary(f),
        app.sort.name(),
        if app.filter.is_empty() && !app.editing {
            String::new()
        } else {
            format!(
                "— filter: {}{} ",
                app.filter,
                if app.editing { "_" } else { "" }
            )
        }
    );
    frame.render_widget(
        Paragraph::new(head).style(Style::default().add_modifier(Modifier::BOLD)),
        chunks[0],
    );
    let all: Vec<crate::ui::Cells> = servers.iter().map(|s| cells(s)).collect();
    let cols: Vec<usize> = if app.compact {
        ["SERVER", "STATE", "QPS"]
            .iter()
            .filter_map(|n| COLUMNS.iter().position(|c| c == n))
            .collect()
    } else {
        shown(&all)
    };
    let mut header: Vec<&str> = cols.iter().map(|i| COLUMNS[*i]).collect();
    // SERVER as wide as its longest name; WHY takes the rest.
    let longest = all.iter().map(|c| c[0].chars().count()).max().unwrap_or(0);
    let mut widths: Vec<Constraint> = cols
        .iter()
        .map(|i| match COLUMNS[*i] {
            "SERVER" => Constraint::Length(longest.max(6) as u16),
            c => width(c),
        })
        .collect();
    // The qps trend goes right after QPS (when there is a QPS column).
    let trend = (!app.compact)
        .then(|| cols.iter().position(|i| COLUMNS[*i] == "QPS"))
        .flatten()
        .map(|p| p + 1);
    if let Some(p) = trend {
        header.insert(p, "QPS TREND");
        widths.insert(p, Constraint::Length(16));
    }
    let rows: Vec<Row> = servers
        .iter()
        .zip(&all)
        .map(|(s, c)| {
            let mut v: Vec<Cell> = cols.iter().map(|i| Cell::from(c[*i].clone())).collect();
            if let Some(p) = trend {
                v.insert(p, Cell::from(sparkline(s.qps_history.iter().cloned(), 16)));
            }
            Row::new(v).style(Style::default().fg(color(s.state)))
        })
        .collect();
    let t = Table::new(rows, widths)
        .header(Row::new(header).style(Style::default().add_modifier(Modifier::REVERSED)))
        .row_highlight_style(Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED))
        .block(Block::default().borders(Borders::NONE));
    if app.table.selected().is_none_or(|i| i >= servers.len()) {
        app.table.select((!servers.is_empty()).then_some(0));
    }
    frame.render_stateful_widget(t, chunks[1], &mut app.table);
    if app.statements {
        let windows = servers.iter().map(|s| &s.statements);
        frame.render_widget(
            Paragraph::new(statement_lines(
                crate::statements::top_of(windows, 20, crate::statements::SortBy::Time),
                true,
            ))
            .block(
                Block::default()
                    .borders(Borders::TOP)
                    .title(" top statements across the servers shown, last minute, by time "),
            ),
            chunks[2],
        );
    } else if app.detail {
        let text = app
            .table
            .selected()
            .and_then(|i| servers.get(i))
            .map(|s| detail(s))
            .unwrap_or_default();
        frame.render_widget(
            Paragraph::new(text)
                .wrap(Wrap { trim: false })
                .block(Block::default().borders(Borders::TOP).title(" detail ")),
            chunks[2],
        );
    }
}

/// Top statements as lines: share, time, calls/s, average, (servers,)
/// the digest.
pub fn statement_lines(top: Vec<crate::statements::Top>, fleet: bool) -> Vec<Line<'static>> {
    let mut l = vec![Line::from(format!(
        "{:>5} {:>9} {:>9} {:>9} {}{}",
        "SHARE",
        "TIME s",
        "CALLS/s",
        "AVG ms",
        if fleet { "SERVERS " } else { "" },
        "STATEMENT"
    ))];
    for t in top {
        l.push(Line::from(format!(
            "{:>4.0}% {:>9.2} {:>9.1} {:>9} {}{}",
            t.share * 100.0,
            t.seconds,
            t.calls_per_s,
            t.avg_ms.map(|a| format!("{a:.2}")).unwrap_or_default(),
            if fleet {
                format!("{:>7} ", t.servers)
            } else {
                String::new()
            },
            t.digest
        )));
    }
    printable_lines(l)
}

/// Lines whose text came from the servers, printable (the `ui` module doc).
fn printable_lines(lines: Vec<Line<'static>>) -> Vec<Line<'static>> {
    lines
        .into_iter()
        .map(|mut l| {
            for s in &mut l.spans {
                s.content = super::shown_text(&s.content).into();
            }
            l
        })
        .collect()
}

/// How wide a column is drawn; WHY takes what is left.
fn width(column: &str) -> Constraint {
    match column {
        "WHY" => Constraint::Min(24),
        "VERSION" => Constraint::Length(14),
        "REPL" => Constraint::Length(11),
        "CONN" | "NODE" => Constraint::Length(10),
        "STATE" | "ROLE" => Constraint::Length(9),
        "UPTIME" | "QPS" | "SLOW/s" | "BP HIT" => Constraint::Length(7),
        "LAG" => Constraint::Length(6),
        "CPU" | "MEM" => Constraint::Length(5),
        _ => Constraint::Length(4),
    }
}

/// A server's detail: state, incidents, replication channels, the top of
/// its processlist.
pub fn detail(s: &Server) -> Vec<Line<'static>> {
    let mut l = vec![Line::from(format!(
        "{}  {}  {}",
        s.server,
        s.state.name(),
        s.reason
    ))];
    l.push(Line::from(format!(
        "qps trend {}   cpu trend {}",
        sparkline(s.qps_history.iter().cloned(), 40),
        sparkline(s.cpu_history.iter().cloned(), 40)
    )));
    if !s.tags.is_empty() {
        let tags: Vec<String> = s.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        l.push(Line::from(format!("tags: {}", tags.join(" "))));
    }
    let f = crate::figures::Figures::of(s);
    if f.qps.is_some() {
        let num = |v: Option<f64>, p: usize| v.map(|x| format!("{x:.p$}")).unwrap_or("-".into());
        l.push(Line::from(format!(
            "qps {}  slow queries/s {}  buffer pool hit {}%  InnoDB rows/s {}",
            num(f.qps, 0),
            num(f.slow, 2),
            num(f.bp_hit, 2),
            num(f.rows, 0)
        )));
    }
    // Figures from before the server stopped answering say how old they are.
    let stale = stale_age(s)
        .map(|a| format!(" (as of {a}s ago, before it stopped answering)"))
        .unwrap_or_default();
    if let Some(h) = &s.host {
        l.push(Line::from(format!(
            "host: cpu {} mem {} load {:.2} disk {}",
            h.cpu_percent
                .map(|c| format!("{c:.0}%"))
                .unwrap_or("-".into()),
            h.mem_used_percent()
                .map(|c| format!("{c:.0}%"))
                .unwrap_or("-".into()),
            h.load1,
            h.disk_percent
                .map(|c| format!("{c:.0}%"))
                .unwrap_or("-".into()),
        )));
    } else if let Some(e) = &s.host_error {
        l.push(Line::from(format!("host metrics: {e}")));
    }
    for i in &s.incidents {
        l.push(Line::from(format!("incident {}: {}", i.rule, i.detail)));
    }
    for i in s.resolved.iter().rev() {
        let when = |t: f64| crate::when::iso_utc(t);
        l.push(Line::from(format!(
            "resolved {}: {} ({} to {})",
            i.rule,
            i.detail,
            when(i.opened_at),
            i.resolved_at.map(when).unwrap_or_default()
        )));
    }
    if let Some(x) = &s.sample {
        for c in &x.channels {
            l.push(Line::from(format!(
                "channel '{}' from {}: IO {} SQL {} lag {} gtid {}{}{stale}",
                c.name,
                c.source,
                c.io_running,
                c.sql_running,
                c.lag.map(|v| format!("{v}s")).unwrap_or("NULL".into()),
                if c.gtid.is_empty() { "-" } else { &c.gtid },
                if c.last_error.is_empty() {
                    String::new()
                } else {
                    format!(" {}", c.last_error)
                }
            )));
        }
        if !x.running.is_empty() && !stale.is_empty() {
            l.push(Line::from(format!("processlist{stale}:")));
        }
        for r in &x.running {
            l.push(Line::from(format!(
                "{:>8} {:<12} {:<12} {:>5}s {}",
                r.id, r.user, r.db, r.seconds, r.info
            )));
        }
    }
    if let Some(m) = s.statements.method {
        l.push(Line::from(format!(
            "top statements ({}, last {:.0} s):",
            m.name(),
            s.statements.seconds()
        )));
        l.extend(statement_lines(
            s.statements.top(5, crate::statements::SortBy::Time),
            false,
        ));
    }
    printable_lines(l)
}

type Term = Terminal<CrosstermBackend<Stdout>>;

fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = crossterm::execute!(
        std::io::stdout(),
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

/// Runs the screen until the user quits. Blocking: call from a blocking
/// thread; the monitor keeps running on the runtime.
pub fn run(fleet: Arc<Mutex<Fleet>>) -> std::io::Result<()> {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        default_hook(info);
    }));
    terminal::enable_raw_mode()?;
    crossterm::execute!(std::io::stdout(), EnterAlternateScreen)?;
    let mut term: Term = Terminal::new(CrosstermBackend::new(std::io::stdout()))?;
    let mut app = App {
        sort: Sort::Worst,
        filter: String::new(),
        editing: false,
        compact: false,
        detail: false,
        statements: false,
        table: TableState::default(),
    };
    let r = (|| -> std::io::Result<()> {
        loop {
            let snapshot = crate::monitor::read(&fleet).clone();
            term.draw(|f| draw(f, &snapshot, &mut app))?;
            if !event::poll(Duration::from_millis(250))? {
                continue;
            }
            let TermEvent::Key(k) = event::read()? else {
                continue; // resizes redraw on the next pass
            };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            if app.editing {
                match k.code {
                    KeyCode::Enter => app.editing = false,
                    KeyCode::Esc => {
                        app.editing = false;
                        app.filter.clear();
                    }
                    KeyCode::Backspace => {
                        app.filter.pop();
                    }
                    KeyCode::Char(c) => app.filter.push(c),
                    _ => {}
                }
                continue;
            }
            let n = visible(&snapshot, &app).len();
            match k.code {
                // Esc closes what is open (the detail pane), then quits.
                KeyCode::Esc if app.detail || app.statements => {
                    app.detail = false;
                    app.statements = false;
                }
                KeyCode::Char('t') => {
                    app.statements = !app.statements;
                    app.detail = false;
                }
                KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => return Ok(()),
                KeyCode::Char('s') => app.sort = app.sort.next(),
                KeyCode::Char('/') => app.editing = true,
                KeyCode::Char('c') => app.compact = !app.compact,
                KeyCode::Enter => {
                    app.detail = !app.detail;
                    app.statements = false;
                }
                KeyCode::Down | KeyCode::Char('j') if n > 0 => app
                    .table
                    .select(Some(app.table.selected().map_or(0, |i| (i + 1).min(n - 1)))),
                KeyCode::Up | KeyCode::Char('k') => app.table.select(Some(
                    app.table.selected().map_or(0, |i| i.saturating_sub(1)),
                )),
                _ => {}
            }
        }
    })();
    restore();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_scales_to_the_largest_value() {
        assert_eq!(sparkline([0.0, 50.0, 100.0].into_iter(), 16), "▁▅█");
        assert_eq!(sparkline([0.0, 0.0].into_iter(), 16), "▁▁");
        assert_eq!(sparkline((0..40).map(f64::from), 16).chars().count(), 16);
    }

    #[test]
    fn figures_of_a_server_that_stopped_answering_say_their_age() {
        let mut s = Server::new(&sqlfleet_fanout::hosts::Host::tcp("db1", 3306));
        let mut x = crate::sample::Sample::default();
        x.channels.push(crate::sample::Channel {
            name: "eu".into(),
            io_running: "Yes".into(),
            sql_running: "Yes".into(),
            lag: Some(3),
            ..Default::default()
        });
        s.sample = Some(x);
        // (state, sampled at, checked at, the age shown)
        let rows = [
            (State::Ok, 100.0, 100.0, None),
            (State::Stalled, 100.0, 130.0, Some("as of 30s ago")),
            (State::Down, 100.0, 101.0, Some("as of 1s ago")),
        ];
        for (state, sampled, checked, want) in rows {
            s.state = state;
            s.sampled_at = Some(sampled);
            s.checked_at = Some(checked);
            let text: Vec<String> = detail(&s).iter().map(|l| l.to_string()).collect();
            let channel = text
                .iter()
                .find(|l| l.starts_with("channel 'eu'"))
                .unwrap_or_else(|| panic!("{text:?}"));
            match want {
                Some(w) => assert!(channel.contains(w), "{state:?}: {channel}"),
                None => assert!(!channel.contains("ago"), "{state:?}: {channel}"),
            }
            assert!(
                channel.contains("gtid -"),
                "an empty GTID is a dash: {channel}"
            );
        }
    }

    /// Text any account can put on a server (a statement's text, a user,
    /// a database name, a replication error quoting a statement) and a
    /// version string: drawn on the screen, in the table, the detail and
    /// the statements pane, and printed by `--once` and `--ui none`, as
    /// `\x1b`, never as the escape sequence itself.
    #[test]
    fn what_the_servers_say_is_shown_never_obeyed() {
        const EVIL: &str = "\x1b]0;owned\x07\x1b[2J\r";
        let mut s = Server::new(&sqlfleet_fanout::hosts::Host::tcp("db1", 3306));
        let mut x = crate::sample::Sample {
            version: format!("10.11{EVIL}"),
            ..Default::default()
        };
        x.running.push(crate::sample::Running {
            id: 7,
            user: format!("u{EVIL}"),
            db: format!("d{EVIL}"),
            seconds: 3,
            command: "Query".into(),
            info: format!("SELECT '{EVIL}'"),
        });
        x.channels.push(crate::sample::Channel {
            name: "eu".into(),
            last_error: format!("Error '{EVIL}' on query"),
            ..Default::default()
        });
        s.sample = Some(x);
        s.state = State::Degraded;
        s.reason = format!("replication stopped: Error '{EVIL}'");
        let fleet = Fleet {
            servers: vec![s],
            judged: None,
        };
        for (detail, statements) in [(false, false), (true, false), (false, true)] {
            let mut app = App {
                sort: Sort::Worst,
                filter: String::new(),
                editing: false,
                compact: false,
                detail,
                statements,
                table: TableState::default(),
            };
            let mut t = Terminal::new(ratatui::backend::TestBackend::new(200, 30)).expect("term");
            t.draw(|f| draw(f, &fleet, &mut app)).expect("draw");
            let cells = &t.backend().buffer().content;
            let bad: Vec<&str> = cells
                .iter()
                .map(|c| c.symbol())
                .filter(|sym| sym.chars().any(char::is_control))
                .collect();
            assert!(bad.is_empty(), "detail {detail}: {bad:?}");
            let screen: String = cells.iter().map(|c| c.symbol()).collect();
            assert!(
                screen.contains("\\x1b]0;owned"),
                "detail {detail}: {screen}"
            );
        }
        let table = crate::ui::table(&fleet);
        assert!(
            !table.chars().any(|c| c.is_control() && c != '\n'),
            "{table:?}"
        );
        assert!(table.contains("\\x1b"), "{table}");
        let event = crate::ui::event_line(&crate::monitor::Event::State {
            server: format!("db1{EVIL}"),
            from: State::Ok,
            to: State::Degraded,
            reason: format!("Error '{EVIL}'"),
            at: 0.0,
        });
        assert!(!event.chars().any(char::is_control), "{event:?}");
    }

    #[test]
    fn columns_without_data_are_hidden() {
        let mut row: crate::ui::Cells = Default::default();
        row[0] = "db1:3306".into();
        row[3] = "ok".into();
        row[8] = "12".into();
        let shown: Vec<&str> = crate::ui::shown(&[row])
            .iter()
            .map(|i| COLUMNS[*i])
            .collect();
        assert_eq!(shown, ["SERVER", "STATE", "QPS", "WHY"]);
    }

    #[test]
    fn detail_lists_open_and_recently_resolved_incidents() {
        let mut s = Server::new(&sqlfleet_fanout::hosts::Host::tcp("db1", 3306));
        s.resolved.push_back(crate::rules::IncidentEvent {
            phase: crate::rules::Phase::Resolved,
            server: "db1:3306".into(),
            rule: "unreachable",
            detail: "down: refused".into(),
            opened_at: 1_800_000_000.0,
            resolved_at: Some(1_800_000_060.0),
        });
        let text: Vec<String> = detail(&s).iter().map(|l| l.to_string()).collect();
        let line = text
            .iter()
            .find(|l| l.starts_with("resolved unreachable"))
            .unwrap_or_else(|| panic!("{text:?}"));
        assert!(line.contains("down: refused"), "{line}");
        assert!(line.contains(" to "), "{line}");
    }
}
