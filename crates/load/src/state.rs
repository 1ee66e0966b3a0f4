//! The run-wide state: counters and the failure slot every part shares
//! ([`Shared`]), and what a worker needs to run a job ([`Ctx`]).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sqlfleet_conn::Target;
use sqlfleet_dump::Statement;

use crate::error::StatementFailure;
use crate::session::Prelude;

/// State shared by the scheduler, the workers and the progress display.
pub struct Shared {
    /// Byte offset of the earliest failing statement (u64::MAX: none).
    /// Work before it in the dump still runs; work after it does not, so
    /// a failed load has applied exactly the dump's prefix up to the first
    /// failure, whatever order the workers hit their errors in.
    pub stop_at: AtomicU64,
    pub failure: Mutex<Option<StatementFailure>>,
    pub rows: AtomicU64,
    /// Input bytes (decompressed) whose work has committed, and read so
    /// far: progress counts what is applied, not what is read ahead.
    pub applied: AtomicU64,
    pub read: Arc<AtomicU64>,
    pub statements: AtomicU64,
    pub batches: AtomicU64,
    pub retries: AtomicU64,
    pub quarantined: AtomicU64,
    /// Statements loaded through LOAD DATA, and batches that fell back.
    pub fast_statements: AtomicU64,
    pub fast_fallbacks: AtomicU64,
    /// Server warnings reported (every statement's and chunk's count).
    pub warnings: AtomicU64,
    /// What the server said it did with CSV/TSV rows (read, skipped,
    /// deleted), over the committed chunks.
    pub server: Mutex<crate::counts::ServerCounts>,
    /// The first warnings' texts, as shown while loading.
    pub warning_texts: Mutex<Vec<String>>,
    pub quarantine: Option<Mutex<std::fs::File>>,
    pub quarantined_items: Mutex<Vec<Quarantined>>,
    pub resuming: bool,
    /// One Ctrl-C or SIGTERM: no work starts any more, and work in flight
    /// stops at its next statement (or piece of LOAD DATA) and rolls back
    /// (nothing of it journaled: `--resume` runs it again).
    pub interrupted: std::sync::atomic::AtomicBool,
    /// Input bytes of work sent to the server and not yet committed or
    /// rolled back (progress counts what is sent, so a table in one big
    /// batch moves the bar as it goes, not only when it commits).
    pub sending: AtomicU64,
}

/// Input bytes a batch has sent, counted in `Shared::sending` until the
/// batch ends (dropped: committed or rolled back either way).
pub struct InFlight {
    shared: Arc<Shared>,
    sent: Arc<AtomicU64>,
}

impl InFlight {
    pub fn new(shared: &Arc<Shared>) -> InFlight {
        InFlight {
            shared: shared.clone(),
            sent: Arc::default(),
        }
    }

    pub fn add(&self, bytes: u64) {
        self.sent.fetch_add(bytes, Ordering::Relaxed);
        self.shared.sending.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A counter for what is sent from elsewhere (LOAD DATA's pieces).
    pub fn adder(&self) -> impl Fn(u64) + Send + Sync + 'static {
        let (sent, shared) = (self.sent.clone(), self.shared.clone());
        move |bytes| {
            sent.fetch_add(bytes, Ordering::Relaxed);
            shared.sending.fetch_add(bytes, Ordering::Relaxed);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let n = self.sent.swap(0, Ordering::Relaxed);
        self.shared.sending.fetch_sub(n, Ordering::Relaxed);
    }
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            stop_at: AtomicU64::new(u64::MAX),
            failure: Mutex::default(),
            rows: AtomicU64::default(),
            applied: AtomicU64::default(),
            read: Arc::default(),
            statements: AtomicU64::default(),
            batches: AtomicU64::default(),
            retries: AtomicU64::default(),
            quarantined: AtomicU64::default(),
            fast_statements: AtomicU64::default(),
            fast_fallbacks: AtomicU64::default(),
            warnings: AtomicU64::default(),
            server: Mutex::default(),
            warning_texts: Mutex::default(),
            quarantine: None,
            quarantined_items: Mutex::default(),
            resuming: false,
            interrupted: std::sync::atomic::AtomicBool::new(false),
            sending: AtomicU64::default(),
        }
    }
}

/// Warning texts shown (and kept for --json) per load; the rest are
/// counted, and the summary says how many were not shown.
pub const WARNINGS_SHOWN: usize = 20;

impl Shared {
    /// Keeps a warning's text while fewer than [`WARNINGS_SHOWN`] were;
    /// true when it was kept (the caller then shows it).
    pub fn keep_warning(&self, text: &str) -> bool {
        let mut kept = self.warning_texts.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= WARNINGS_SHOWN {
            return false;
        }
        kept.push(text.to_string());
        true
    }

    /// As many warning texts are kept as are shown.
    pub fn warnings_full(&self) -> bool {
        self.warning_texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
            >= WARNINGS_SHOWN
    }

    /// Adds what the server said of committed work to the run's counts.
    pub fn add_counts(&self, c: crate::counts::ServerCounts) {
        self.server.lock().unwrap_or_else(|e| e.into_inner()).add(c);
    }

    /// Records a failure; the earliest in the dump is the one reported.
    pub fn fail(&self, f: StatementFailure) {
        let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_none_or(|old| f.offset < old.offset) {
            self.stop_at.fetch_min(f.offset, Ordering::SeqCst);
            *slot = Some(f);
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop_at.load(Ordering::Relaxed) != u64::MAX
    }

    /// One Ctrl-C or SIGTERM came (`interrupted`).
    pub fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// True if work starting at `offset` comes after the first failure.
    pub fn past_failure(&self, offset: u64) -> bool {
        offset > self.stop_at.load(Ordering::Relaxed)
    }

    /// True if work starting at `offset` must stop now, even in flight:
    /// an interrupt came, or a statement before it in the file failed
    /// (the stock client would never have run it), so it rolls back
    /// instead of committing.
    pub fn stops(&self, offset: u64) -> bool {
        self.is_interrupted() || self.past_failure(offset)
    }

    /// Keeps a statement the server refused for the quarantine file,
    /// with where it was, why it failed and the session statements
    /// (prelude length) it ran after.
    pub fn quarantine(&self, stmt: &Statement, f: &StatementFailure, prelude_len: usize) {
        self.quarantined.fetch_add(1, Ordering::Relaxed);
        if self.quarantine.is_none() {
            return;
        }
        let header = format!(
            "-- sqlfleet quarantine: {}{}: {}{}\n",
            f.place(),
            f.table
                .as_ref()
                .map(|t| format!(", table {t}"))
                .unwrap_or_default(),
            f.code.map(|c| format!("ERROR {c}: ")).unwrap_or_default(),
            f.message.replace('\n', " ")
        );
        self.quarantined_items
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Quarantined {
                offset: stmt.offset,
                header,
                text: stmt.text.clone(),
                prelude_len,
            });
    }

    /// Writes this run's quarantined statements in file order, each after
    /// the session statements (`SET`, `USE`) that came before it, so the
    /// file replays on its own: `mariadb [options] < FILE`.
    pub fn write_quarantine(&self, prelude: &Prelude, run: &str, database: Option<&str>) {
        let Some(file) = &self.quarantine else { return };
        let mut items = std::mem::take(
            &mut *self
                .quarantined_items
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        if items.is_empty() {
            return;
        }
        items.sort_by_key(|q| q.offset);
        let mut out: Vec<u8> = format!(
            "-- sqlfleet load quarantine: {run}\n-- {} statement(s) the server refused, in file order, each after the session statements before it.\n-- Fix them, then replay this file with: mariadb [connection options] < FILE\n",
            items.len()
        )
        .into_bytes();
        if let Some(db) = database {
            write_statement(
                &mut out,
                format!("USE {}", sqlfleet_conn::quote::ident(db)).as_bytes(),
            );
        }
        let mut applied = 0;
        for q in &items {
            if q.prelude_len > applied {
                for p in prelude.range(applied, q.prelude_len) {
                    write_statement(&mut out, &p);
                }
                applied = q.prelude_len;
            }
            out.extend_from_slice(q.header.as_bytes());
            write_statement(&mut out, &q.text);
        }
        out.push(b'\n');
        let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = file.write_all(&out);
        let _ = file.flush();
    }
}

/// A refused statement kept for the quarantine file.
pub struct Quarantined {
    offset: u64,
    header: String,
    text: Vec<u8>,
    prelude_len: usize,
}

/// One statement with its delimiter (DELIMITER-wrapped when it has `;`).
fn write_statement(out: &mut Vec<u8>, text: &[u8]) {
    if text.contains(&b';') {
        out.extend_from_slice(b"DELIMITER $$\n");
        out.extend_from_slice(text);
        out.extend_from_slice(b"$$\nDELIMITER ;\n");
    } else {
        out.extend_from_slice(text);
        out.extend_from_slice(b";\n");
    }
}

pub struct Ctx {
    pub target: Target,
    /// Whether the workers' sessions write the binary log.
    pub binlog: crate::session::Binlog,
    /// Use LOAD DATA LOCAL for INSERT batches it reproduces exactly.
    pub fast_path: std::sync::atomic::AtomicBool,
    pub prelude: Prelude,
    pub shared: Arc<Shared>,
    pub load_id: String,
    pub continue_on_error: bool,
    /// The target is a Galera node: its table statements are checked.
    pub galera: Option<crate::galera::Cluster>,
    /// The server's max_allowed_packet: a statement longer than it is
    /// refused before it is sent (the server would end the connection).
    pub max_packet: Option<u64>,
}
