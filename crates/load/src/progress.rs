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
    /// The input's size on disk.
    pub total: Option<u64>,
    /// The input is compressed: its size and position on disk are not in
    /// the unit progress counts (the stream's uncompressed bytes).
    pub compressed: bool,
    pub started: Instant,
}

/// One reading of the counters, each of which only goes up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub seconds: f64,
    /// Uncompressed bytes of the stream whose work committed.
    pub applied: u64,
    /// ...and whose work has been sent to the server (committed, or in a
    /// batch still running): what done is counted in. It may step back
    /// when a batch is retried.
    pub sent: u64,
    /// Uncompressed bytes of the stream read so far.
    pub read: u64,
    /// The file's size and the position read in it, when compressed.
    pub file: Option<(u64, Option<u64>)>,
    /// The stream's size, when it is the file's (not compressed).
    pub total: Option<u64>,
    pub rows: u64,
}

impl Reading {
    /// Done as a fraction: of the stream when its size is known, else of
    /// the compressed file by the position read in it.
    pub fn fraction(&self) -> Option<f64> {
        match (self.total, self.file) {
            (Some(t), _) if t > 0 => Some((self.sent.max(self.applied) as f64 / t as f64).min(1.0)),
            (_, Some((pos, Some(size)))) if size > 0 => Some((pos as f64 / size as f64).min(1.0)),
            _ => None,
        }
    }

    /// Seconds left at the rate so far, when a fraction is known.
    pub fn eta(&self) -> Option<f64> {
        let f = self.fraction().filter(|f| *f > 0.0)?;
        Some(self.seconds * (1.0 - f) / f)
    }
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
    fn reading(&self) -> Reading {
        let raw = self.raw_read.load(Ordering::Relaxed);
        Reading {
            seconds: self.started.elapsed().as_secs_f64().max(1e-3),
            applied: self.shared.applied.load(Ordering::Relaxed),
            sent: self.shared.applied.load(Ordering::Relaxed)
                + self.shared.sending.load(Ordering::Relaxed),
            read: self.shared.read.load(Ordering::Relaxed),
            file: self.compressed.then_some((raw, self.total)),
            total: self.total.filter(|_| !self.compressed),
            rows: self.shared.rows.load(Ordering::Relaxed),
        }
    }

    fn line(&self, mode: Mode) -> String {
        let r = self.reading();
        let el = r.seconds;
        let retries = self.shared.retries.load(Ordering::Relaxed);
        let errors = self.shared.quarantined.load(Ordering::Relaxed);
        let rows = r.rows;
        let rate = rows as f64 / el;
        let bps = r.sent.max(r.applied) as f64 / el;
        let left = r.eta();
        let ahead = r.read.saturating_sub(r.applied) as f64;
        if mode == Mode::Json {
            return serde_json::json!({
                "event": "progress",
                "seconds": (el * 1000.0).round() / 1000.0,
                "bytes_applied": r.applied,
                "bytes_sent": r.sent,
                "bytes_read": r.read,
                "bytes_total": r.total,
                "compressed_bytes_read": r.file.map(|f| f.0),
                "compressed_bytes_total": r.file.and_then(|f| f.1),
                "rows": rows,
                "rows_per_sec": rate.round(),
                "mb_per_sec": (bps / 1e6 * 100.0).round() / 100.0,
                "eta_seconds": left.map(|l| l.round()),
                "retries": retries,
                "errors": errors,
            })
            .to_string();
        }
        let of = match (r.total, r.file) {
            (Some(t), _) if t > 0 => format!(
                " / {} ({:.0}%)",
                human_bytes(t as f64),
                100.0 * r.fraction().unwrap_or(0.0)
            ),
            (_, Some((pos, size))) => format!(
                " (file: {}{} compressed read{})",
                human_bytes(pos as f64),
                size.map(|s| format!(" / {}", human_bytes(s as f64)))
                    .unwrap_or_default(),
                r.fraction()
                    .map(|f| format!(", {:.0}%", 100.0 * f))
                    .unwrap_or_default()
            ),
            _ => String::new(),
        };
        let committed = if r.sent > r.applied {
            format!(" ({} committed)", human_bytes(r.applied as f64))
        } else {
            String::new()
        };
        format!(
            "{} sent{committed}{of} · {rows} rows · {:.0} rows/s · {}/s{}{}{}{}",
            human_bytes(r.sent.max(r.applied) as f64),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(applied: u64, file: Option<(u64, Option<u64>)>, total: Option<u64>) -> Reading {
        Reading {
            seconds: 10.0,
            applied,
            sent: applied,
            read: applied * 2,
            file,
            total,
            rows: 0,
        }
    }

    /// Done is counted in one unit: the stream's bytes against the
    /// stream's size, or — compressed — the position in the file against
    /// the file's size, never one against the other.
    #[test]
    fn the_fraction_done_keeps_to_one_unit() {
        let rows = [
            // plain file of 1000 bytes, 250 applied
            (reading(250, None, Some(1000)), Some(0.25), Some(30.0)),
            // compressed: 4000 uncompressed applied, 100 of 400 on disk read
            (
                reading(4000, Some((100, Some(400))), None),
                Some(0.25),
                Some(30.0),
            ),
            // compressed, size unknown (stdin)
            (reading(4000, Some((100, None)), None), None, None),
            // nothing applied yet
            (reading(0, None, Some(1000)), Some(0.0), None),
        ];
        for (r, fraction, eta) in rows {
            assert_eq!(r.fraction(), fraction, "{r:?}");
            assert_eq!(r.eta(), eta, "{r:?}");
        }
    }

    /// A table in one big batch: done moves with what is sent, before
    /// anything commits (before: 0% until the batch committed, and an ETA
    /// of hours for a load that took seconds).
    #[test]
    fn done_counts_what_is_sent_not_only_what_committed() {
        let r = Reading {
            sent: 500,
            ..reading(0, None, Some(1000))
        };
        assert_eq!(r.fraction(), Some(0.5));
        assert_eq!(r.eta(), Some(10.0));
        // A retried batch steps `sent` back below what committed: never
        // below the committed bytes.
        let r = Reading {
            sent: 100,
            ..reading(400, None, Some(1000))
        };
        assert_eq!(r.fraction(), Some(0.4));
    }
}
