//! What a server looks like on a screen: the columns, their text, the
//! worst-first order. Used by the plain table (`--once`) and the TUI.
//!
//! Text from the servers — a statement's text in the processlist or a
//! digest, a replication error, a version string, names — reaches a
//! terminal only through [`shown_text`]: its control characters written as
//! `\xNN`, never obeyed (any account that runs a query could otherwise
//! retitle, clear or recolour the terminal of whoever watches; the TUI
//! library passes them through).

pub mod tui;

use crate::figures::Figures;
use crate::monitor::{Event, Fleet, Server, State};

pub const COLUMNS: [&str; 16] = [
    "SERVER", "ROLE", "NODE", "STATE", "VERSION", "UPTIME", "CONN", "RUN", "QPS", "SLOW/s",
    "BP HIT", "REPL", "LAG", "CPU", "MEM", "WHY",
];

/// A server's row, one cell per [`COLUMNS`] entry.
pub type Cells = [String; 16];

/// Columns shown even when no server has a value in them.
const ALWAYS: [&str; 3] = ["SERVER", "STATE", "WHY"];

/// The columns worth showing for these rows: those some row has a value
/// in (no CPU/MEM without host metrics, no ROLE without tags or
/// replication), so the room goes to WHY.
pub fn shown(rows: &[Cells]) -> Vec<usize> {
    (0..COLUMNS.len())
        .filter(|&i| ALWAYS.contains(&COLUMNS[i]) || rows.iter().any(|r| !r[i].is_empty()))
        .collect()
}

/// The server's role: its `role=` tag, else "replica" when it replicates.
pub fn role(s: &Server) -> String {
    if let Some(r) = s.tags.get("role") {
        return r.clone();
    }
    match &s.sample {
        Some(x) if !x.channels.is_empty() => "replica".into(),
        _ => String::new(),
    }
}

/// "42s" for figures older than their server's last check (a stalled or
/// down server keeps what it last answered), `None` when they are current.
pub fn stale_age(s: &Server) -> Option<u64> {
    let (Some(at), Some(checked)) = (s.sampled_at, s.checked_at) else {
        return None;
    };
    (checked - at >= 0.5).then(|| (checked - at).round() as u64)
}

fn uptime(secs: u64) -> String {
    match secs {
        s if s >= 86_400 => format!("{}d{}h", s / 86_400, s % 86_400 / 3600),
        s if s >= 3600 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// The replication summary: "-" none, "ok" all running, else the trouble.
pub fn replication(s: &Server) -> String {
    let Some(x) = &s.sample else {
        return String::new();
    };
    if x.channels.is_empty() {
        return "-".into();
    }
    let bad = x.channels.iter().filter(|c| !c.running()).count();
    if bad == 0 {
        "ok".into()
    } else {
        format!("{bad}/{} stopped", x.channels.len())
    }
}

/// Outside text as a terminal may show it (see the module doc).
pub fn shown_text(s: &str) -> String {
    sqlfleet_dump::printable::printable(s).into_owned()
}

/// The cells of one server's row, in [`COLUMNS`] order, printable.
pub fn cells(s: &Server) -> Cells {
    raw_cells(s).map(|c| shown_text(&c))
}

fn raw_cells(s: &Server) -> Cells {
    let f = Figures::of(s);
    // Figures are only given while the server answers.
    let sample = s.sample.as_ref().filter(|_| f.running.is_some());
    let whole = |v: Option<f64>, unit: &str| v.map(|x| format!("{x:.0}{unit}")).unwrap_or_default();
    [
        s.server.clone(),
        role(s),
        s.tags.get("node").cloned().unwrap_or_default(),
        s.state.name().to_string(),
        sample.map(|x| x.version.clone()).unwrap_or_default(),
        sample
            .map(|x| uptime(x.counter("Uptime")))
            .unwrap_or_default(),
        sample
            .map(|x| format!("{}/{}", x.counter("Threads_connected"), x.max_connections))
            .unwrap_or_default(),
        whole(f.running, ""),
        whole(f.qps, ""),
        f.slow.map(|x| format!("{x:.1}")).unwrap_or_default(),
        f.bp_hit.map(|x| format!("{x:.1}%")).unwrap_or_default(),
        if sample.is_some() {
            replication(s)
        } else {
            String::new()
        },
        whole(f.lag, "s"),
        whole(f.cpu, "%"),
        whole(f.mem, "%"),
        s.reason.clone(),
    ]
}

/// Worst state first, then by name.
pub fn worst_first(servers: &mut [&Server]) {
    servers.sort_by(|a, b| b.state.cmp(&a.state).then_with(|| a.server.cmp(&b.server)));
}

/// A plain aligned table, worst first, with a one-line summary.
pub fn table(f: &Fleet) -> String {
    let mut servers: Vec<&Server> = f.servers.iter().collect();
    worst_first(&mut servers);
    let rows: Vec<Cells> = servers.iter().map(|s| cells(s)).collect();
    let cols = shown(&rows);
    let mut width = COLUMNS.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &Cells| {
        let mut l = String::new();
        for (n, &i) in cols.iter().enumerate() {
            if n + 1 == cols.len() {
                l.push_str(&cells[i]);
            } else {
                l.push_str(&format!("{:<w$}  ", cells[i], w = width[i]));
            }
        }
        l.trim_end().to_string() + "\n"
    };
    let mut out = line(&COLUMNS.map(String::from));
    for r in &rows {
        out.push_str(&line(r));
    }
    out.push_str(&summary(f));
    out.push('\n');
    if let Some(j) = f.judged {
        out.push_str(&format!("judged {j}\n"));
    }
    out
}

/// "3 servers: 2 ok, 1 down".
pub fn summary(f: &Fleet) -> String {
    let parts: Vec<String> = [
        State::Ok,
        State::Degraded,
        State::Denied,
        State::Stalled,
        State::Down,
        State::Unknown,
    ]
    .iter()
    .filter_map(|s| {
        let n = f.count(*s);
        (n > 0).then(|| format!("{n} {}", s.name()))
    })
    .collect();
    format!(
        "{}: {}",
        sqlfleet_conn::text::count(f.servers.len() as u64, "server"),
        parts.join(", ")
    )
}

/// One event as a log line (the `--ui none` text output), printable.
pub fn event_line(e: &Event) -> String {
    shown_text(&raw_event_line(e))
}

fn raw_event_line(e: &Event) -> String {
    match e {
        Event::State {
            server,
            from,
            to,
            reason,
            ..
        } => format!(
            "state {server}: {} -> {}{}",
            from.name(),
            to.name(),
            if reason.is_empty() {
                String::new()
            } else {
                format!(" ({reason})")
            }
        ),
        Event::Incident(i) => format!(
            "incident {} {} {}: {}",
            match i.phase {
                crate::rules::Phase::Opened => "opened",
                crate::rules::Phase::Resolved => "resolved",
            },
            i.server,
            i.rule,
            i.detail
        ),
        Event::Notification {
            subject,
            deliveries,
            ..
        } => format!(
            "notification \"{subject}\": {}",
            crate::notify::outcome(deliveries)
        ),
    }
}
