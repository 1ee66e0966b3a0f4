//! Progress while loading: a status line on a terminal, or JSON lines.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::state::Shared;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Auto,
    Bar,
    Json,
    None,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "auto" => Ok(Mode::Auto),
            "bar" => Ok(Mode::Bar),
            "json" => Ok(Mode::Json),
            "none" => Ok(Mode::None),
            _ => Err(format!("progress '{s}' is not auto, bar, json or none")),
        }
    }
}

impl Mode {
    pub fn resolve(self) -> Mode {
        match self {
            // SAFETY: isatty only inspects the descriptor.
            Mode::Auto if unsafe { libc::isatty(2) } == 1 => Mode::Bar,
            Mode::Auto => Mode::None,
            m => m,
        }
    }
}

/// What the progress display reads.
pub struct Sources {
    pub shared: Arc<Shared>,
    /// Input bytes consumed (compressed, as on disk).
    pub raw_read: Arc<AtomicU64>,
    pub total: Option<u64>,
    pub started: Instant,
}

/// A status line is on the terminal: messages clear it first.
static BAR_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Prints a message on stderr without mixing it into the status line
/// (the line is drawn again at the next tick).
pub fn say(msg: &str) {
    let mut e = std::io::stderr().lock();
    if BAR_ON.load(Ordering::Relaxed) {
        let _ = write!(e, "\r\x1b[2K");
    }
    let _ = writeln!(e, "sqlfleet load: {msg}");
    let _ = e.flush();
}

pub fn human_bytes(b: f64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", U[i])
}

fn eta(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

impl Sources {
    fn line(&self, mode: Mode) -> String {
        let el = self.started.elapsed().as_secs_f64().max(1e-3);
        let raw = self.raw_read.load(Ordering::Relaxed) as f64;
        let read = self.shared.read.load(Ordering::Relaxed) as f64;
        let applied = self.shared.applied.load(Ordering::Relaxed) as f64;
        let rows = self.shared.rows.load(Ordering::Relaxed);
        let retries = self.shared.retries.load(Ordering::Relaxed);
        let errors = self.shared.quarantined.load(Ordering::Relaxed);
        let rate = rows as f64 / el;
        // What is committed, in the input's own (possibly compressed) bytes.
        let done = if read > 0.0 {
            applied * raw / read
        } else {
            0.0
        };
        let bps = done / el;
        let left = self
            .total
            .filter(|_| done > 0.0)
            .map(|t| (t as f64 - done).max(0.0) / bps.max(1.0));
        let ahead = (read - applied).max(0.0);
        if mode == Mode::Json {
            return serde_json::json!({
                "event": "progress",
                "seconds": (el * 1000.0).round() / 1000.0,
                "bytes_applied": done.round() as u64,
                "bytes_read": raw as u64,
                "bytes_total": self.total,
                "rows": rows,
                "rows_per_sec": rate.round(),
                "mb_per_sec": (bps / 1e6 * 100.0).round() / 100.0,
                "eta_seconds": left.map(|l| l.round()),
                "retries": retries,
                "errors": errors,
            })
            .to_string();
        }
        let of = match self.total {
            Some(t) if t > 0 => format!(
                " / {} ({:.0}%)",
                human_bytes(t as f64),
                (100.0 * done / t as f64).min(100.0)
            ),
            _ => String::new(),
        };
        format!(
            "{} loaded{of} · {rows} rows · {:.0} rows/s · {}/s{}{}{}{}",
            human_bytes(done),
            rate,
            human_bytes(bps),
            left.map(|l| format!(" · ETA {}", eta(l)))
                .unwrap_or_default(),
            if ahead >= 1024.0 * 1024.0 {
                format!(" · {} read ahead", human_bytes(ahead))
            } else {
                String::new()
            },
            if retries > 0 {
                format!(" · {retries} retries")
            } else {
                String::new()
            },
            if errors > 0 {
                format!(" · {errors} errors")
            } else {
                String::new()
            },
        )
    }
}

/// Runs until `stop` resolves; clears the status line at the end.
pub async fn run(src: Sources, mode: Mode, mut stop: tokio::sync::oneshot::Receiver<()>) {
    if mode == Mode::None || mode == Mode::Auto {
        return;
    }
    BAR_ON.store(mode == Mode::Bar, Ordering::Relaxed);
    let tick = if mode == Mode::Json {
        Duration::from_secs(1)
    } else {
        Duration::from_millis(250)
    };
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(tick) => {
                let line = src.line(mode);
                if mode == Mode::Json {
                    println!("{line}");
                } else {
                    let mut e = std::io::stderr().lock();
                    let _ = write!(e, "\r\x1b[2K{line}");
                    let _ = e.flush();
                }
            }
        }
    }
    if mode == Mode::Bar {
        BAR_ON.store(false, Ordering::Relaxed);
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[2K");
        let _ = e.flush();
    }
}
