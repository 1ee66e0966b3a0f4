//! What a source shows: its state and each stream's, shared with the
//! progress printer, status, the summary and metrics.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::gtid::GtidPos;

/// A stream's state as shown by progress, status and the summary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamView {
    pub position: String,
    pub applied: u64,
    pub last_source_time: u32,
    pub error: Option<String>,
    pub error_gtid: Option<String>,
    pub statement: Option<String>,
}

/// A source's state, shared with the progress printer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceView {
    pub name: String,
    pub state: String,
    pub read: String,
    pub floor: String,
    pub source_pos: String,
    pub applied: u64,
    pub skipped: u64,
    pub reconnects: u64,
    pub last_error: Option<String>,
    /// Seconds since the source committed the oldest transaction not yet
    /// applied (as Seconds_Behind_Master means it): 0 when caught up.
    pub lag_seconds: Option<u64>,
    /// XA transactions the source prepared and has not ended yet: held
    /// until their XA COMMIT or ROLLBACK is read (the floor stays before
    /// the oldest, so `behind` counts what follows it).
    pub xa_held: usize,
    /// What a reading session opened again found to say while the run
    /// went on (a restart of the target that emptied MEMORY tables); the
    /// summary's warnings take them at the end.
    pub warnings: Vec<String>,
    pub streams: BTreeMap<String, StreamView>,
}

impl SourceView {
    /// Transactions of the source not yet known applied everywhere.
    pub fn behind(&self) -> u64 {
        match (
            GtidPos::parse(&self.floor),
            GtidPos::parse(&self.source_pos),
        ) {
            (Ok(f), Ok(s)) => f.behind(&s),
            _ => 0,
        }
    }
}

pub type Shared = Arc<Mutex<SourceView>>;

pub(super) fn set<F: FnOnce(&mut SourceView)>(v: &Shared, f: F) {
    if let Ok(mut g) = v.lock() {
        f(&mut g);
    }
}
