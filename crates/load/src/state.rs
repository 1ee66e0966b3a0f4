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
    pub statements: AtomicU64,
    pub batches: AtomicU64,
    pub retries: AtomicU64,
    pub quarantined: AtomicU64,
    /// Statements loaded through LOAD DATA, and batches that fell back.
    pub fast_statements: AtomicU64,
    pub fast_fallbacks: AtomicU64,
    /// Server warnings reported (CSV/TSV chunks).
    pub warnings: AtomicU64,
    pub quarantine: Option<Mutex<std::fs::File>>,
    pub resuming: bool,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            stop_at: AtomicU64::new(u64::MAX),
            failure: Mutex::default(),
            rows: AtomicU64::default(),
            statements: AtomicU64::default(),
            batches: AtomicU64::default(),
            retries: AtomicU64::default(),
            quarantined: AtomicU64::default(),
            fast_statements: AtomicU64::default(),
            fast_fallbacks: AtomicU64::default(),
            warnings: AtomicU64::default(),
            quarantine: None,
            resuming: false,
        }
    }
}

impl Shared {
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

    /// True if work starting at `offset` comes after the first failure.
    pub fn past_failure(&self, offset: u64) -> bool {
        offset > self.stop_at.load(Ordering::Relaxed)
    }

    /// Writes a statement the server refused to the quarantine file, with
    /// a comment header saying where it was and why it failed.
    pub fn quarantine(&self, stmt: &Statement, f: &StatementFailure) {
        self.quarantined.fetch_add(1, Ordering::Relaxed);
        let Some(file) = &self.quarantine else { return };
        let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
        let header = format!(
            "-- sqlfleet quarantine: byte offset {}, line {}{}: {}{}\n",
            f.offset,
            f.line,
            f.table
                .as_ref()
                .map(|t| format!(", table {t}"))
                .unwrap_or_default(),
            f.code.map(|c| format!("ERROR {c}: ")).unwrap_or_default(),
            f.message.replace('\n', " ")
        );
        let has_semicolon = stmt.text.contains(&b';');
        let _ = file.write_all(header.as_bytes());
        if has_semicolon {
            let _ = file.write_all(b"DELIMITER $$\n");
        }
        let _ = file.write_all(&stmt.text);
        let _ = file.write_all(if has_semicolon {
            b"$$\nDELIMITER ;\n\n"
        } else {
            b";\n\n"
        });
        let _ = file.flush();
    }
}

pub struct Ctx {
    pub target: Target,
    /// Use LOAD DATA LOCAL for INSERT batches it reproduces exactly.
    pub fast_path: std::sync::atomic::AtomicBool,
    pub prelude: Prelude,
    pub shared: Arc<Shared>,
    pub load_id: String,
    pub continue_on_error: bool,
}
