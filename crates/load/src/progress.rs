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
            Mode::Auto if std::io::IsTerminal::is_terminal(&std::io::stderr()) => Mode::Bar,
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

    /// What has committed, as a fraction in the same unit (compressed:
    /// the position read in the file, scaled by how much of what was read
    /// has committed).
    pub fn committed_fraction(&self) -> Option<f64> {
        match (self.total, self.file) {
            (Some(t), _) if t > 0 => Some((self.applied as f64 / t as f64).min(1.0)),
            (_, Some((pos, Some(size)))) if size > 0 && self.read > 0 => {
                Some((pos as f64 / size as f64 * (self.applied as f64 / self.read as f64)).min(1.0))
            }
            _ => None,
        }
    }

    /// Everything has been read and sent, and some of it has not
    /// committed yet: the load waits for the server.
    pub fn phase(&self) -> Phase {
        let all_sent = self.fraction().is_some_and(|f| f >= 1.0) && self.sent >= self.read;
        if all_sent && self.applied < self.sent {
            Phase::Committing
        } else {
            Phase::Loading
        }
    }
}

/// Where the load is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Loading,
    /// All sent; the batches in flight commit.
    Committing,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Loading => "loading",
            Phase::Committing => "committing",
        }
    }
}

/// How far back the rate behind the ETA looks: the recent pace, not the
/// whole run's average (a slow start, a table of wide rows, a pause for a
/// lock would otherwise skew it for the rest of the load).
pub const RECENT: f64 = 10.0;

/// The last [`RECENT`] seconds of readings: (seconds, done, committed).
#[derive(Debug, Default)]
pub struct Recent(std::collections::VecDeque<(f64, f64, f64)>);

impl Recent {
    pub fn push(&mut self, r: &Reading) {
        let (Some(done), Some(committed)) = (r.fraction(), r.committed_fraction()) else {
            return;
        };
        self.0.push_back((r.seconds, done, committed));
        while self.0.len() > 2 && self.0.front().is_some_and(|f| r.seconds - f.0 > RECENT) {
            self.0.pop_front();
        }
    }

    /// Seconds left: until everything is sent at the recent pace of
    /// sending, and until it has committed at the recent pace of commits
    /// (the later of the two that is known; while committing, only the
    /// second; while loading, commits count once a hundredth of the input
    /// committed within the window). `None` while neither moved: never
    /// "0s" for a load that is standing still.
    pub fn eta(&self, phase: Phase) -> Option<f64> {
        let (first, last) = (self.0.front()?, self.0.back()?);
        let span = last.0 - first.0;
        if span <= 0.0 {
            return None;
        }
        let left = |now: f64, then: f64, least: f64| {
            let rate = (now - then) / span;
            (rate > 0.0 && now - then >= least).then(|| (1.0 - now).max(0.0) / rate)
        };
        let sending = left(last.1, first.1, 0.0);
        // Commits come a batch at a time: while loading, their pace counts
        // once a hundredth of the input committed within the window (one
        // small batch's commit in the first second is no pace).
        let least = if phase == Phase::Loading { 0.01 } else { 0.0 };
        let committing = left(last.2, first.2, least);
        match phase {
            Phase::Committing => committing,
            Phase::Loading => match (sending, committing) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        }
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

    fn line(&self, mode: Mode, recent: &mut Recent) -> String {
        let r = self.reading();
        recent.push(&r);
        let phase = r.phase();
        let el = r.seconds;
        let retries = self.shared.retries.load(Ordering::Relaxed);
        let errors = self.shared.quarantined.load(Ordering::Relaxed);
        let rows = r.rows;
        let rate = rows as f64 / el;
        let bps = r.sent.max(r.applied) as f64 / el;
        let left = recent.eta(phase);
        let ahead = r.read.saturating_sub(r.applied) as f64;
        if mode == Mode::Json {
            return serde_json::json!({
                "event": "progress",
                "phase": phase.name(),
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
        let committed = match phase {
            Phase::Committing => format!(
                " · committing: {} of it committed",
                human_bytes(r.applied as f64)
            ),
            Phase::Loading => committed,
        };
        format!(
            "{} sent{of}{committed} · {rows} rows · {:.0} rows/s · {}/s{}{}{}{}",
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
    let mut recent = Recent::default();
    recent.push(&src.reading()); // the start: the first tick has a pace
    let tick = if mode == Mode::Json {
        Duration::from_secs(1)
    } else {
        Duration::from_millis(250)
    };
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(tick) => {
                let line = src.line(mode, &mut recent);
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
            (reading(250, None, Some(1000)), Some(0.25), Some(0.25)),
            // compressed: 4000 uncompressed applied, 100 of 400 on disk read
            (
                reading(4000, Some((100, Some(400))), None),
                Some(0.25),
                Some(0.125),
            ),
            // compressed, size unknown (stdin)
            (reading(4000, Some((100, None)), None), None, None),
            // nothing applied yet
            (reading(0, None, Some(1000)), Some(0.0), Some(0.0)),
        ];
        for (r, fraction, committed) in rows {
            assert_eq!(r.fraction(), fraction, "{r:?}");
            assert_eq!(r.committed_fraction(), committed, "{r:?}");
        }
    }

    /// The ETA runs on the recent pace of sending and of commits, and
    /// a load that stands still has none (before: the whole run's average
    /// — "ETA 0m00s" at 55% with nothing moving — and 100% for seconds
    /// while the last batches committed, with no word of it).
    #[test]
    fn the_eta_follows_the_recent_pace_and_the_commits() {
        let at = |seconds: f64, sent: u64, applied: u64, read: u64| Reading {
            seconds,
            applied,
            sent,
            read,
            file: None,
            total: Some(1000),
            rows: 0,
        };
        // (readings, phase of the last, eta)
        #[rustfmt::skip]
        let rows: Vec<(Vec<Reading>, Phase, Option<f64>)> = vec![
            // steady: 10%/s sent and committed, 50% done: 5 s
            (vec![at(1.0, 100, 100, 200), at(5.0, 500, 500, 600)], Phase::Loading, Some(5.0)),
            // sent runs ahead; commits at 5%/s: commits decide (40% left / 5%)
            (vec![at(1.0, 100, 50, 200), at(5.0, 500, 250, 600)], Phase::Loading, Some(15.0)),
            // one big batch in flight: nothing committed yet, sending decides
            (vec![at(1.0, 100, 0, 200), at(3.0, 300, 0, 400)], Phase::Loading, Some(7.0)),
            // standing still (a lock wait): no ETA, not 0s
            (vec![at(1.0, 550, 550, 600), at(6.0, 550, 550, 600)], Phase::Loading, None),
            // a slow start does not weigh on a fast middle: 30 s ago at 1%
            (vec![at(0.0, 0, 0, 10), at(30.0, 10, 10, 20), at(38.0, 50, 50, 60), at(40.0, 500, 500, 510)], Phase::Loading, Some(1000.0 * 0.5 / 490.0 * 10.0)),
            // all sent, 600 of 1000 committed, 100 a second: committing, 4 s
            (vec![at(1.0, 1000, 400, 1000), at(3.0, 1000, 600, 1000)], Phase::Committing, Some(4.0)),
            // all sent, nothing committing lately: committing, no ETA
            (vec![at(1.0, 1000, 600, 1000), at(3.0, 1000, 600, 1000)], Phase::Committing, None),
            // done
            (vec![at(1.0, 900, 900, 1000), at(2.0, 1000, 1000, 1000)], Phase::Loading, Some(0.0)),
            // a first small commit is no pace: sending decides (9 s)
            (vec![at(0.0, 0, 0, 0), at(1.0, 100, 1, 200)], Phase::Loading, Some(9.0)),
            // one reading: no pace yet
            (vec![at(1.0, 100, 100, 200)], Phase::Loading, None),
        ];
        for (readings, phase, eta) in rows {
            let mut recent = Recent::default();
            for r in &readings {
                recent.push(r);
            }
            let last = readings.last().expect("a reading");
            assert_eq!(last.phase(), phase, "{readings:?}");
            let got = recent.eta(last.phase());
            match (got, eta) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-6, "{readings:?}: {g} not {w}"),
                _ => assert_eq!(got, eta, "{readings:?}"),
            }
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
        assert_eq!(r.committed_fraction(), Some(0.0));
        // A retried batch steps `sent` back below what committed: never
        // below the committed bytes.
        let r = Reading {
            sent: 100,
            ..reading(400, None, Some(1000))
        };
        assert_eq!(r.fraction(), Some(0.4));
    }
}
