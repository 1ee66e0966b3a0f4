//! The end-of-load report: a paragraph for people, JSON for machines.

use std::path::PathBuf;

use serde::Serialize;

use crate::progress;

/// The end-of-load report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// What `statements` counts: "statements" (dumps) or "chunks" (CSV/TSV).
    pub unit: &'static str,
    pub source: String,
    pub load_id: String,
    pub complete: bool,
    pub already_done: bool,
    pub bytes: u64,
    pub statements: u64,
    pub batches: u64,
    pub rows: u64,
    pub tables: usize,
    pub seconds: f64,
    pub rows_per_sec: f64,
    pub mb_per_sec: f64,
    pub retries: u64,
    pub errors: u64,
    pub skipped_on_resume: u64,
    /// INSERT statements sent as LOAD DATA LOCAL rows (the fast path).
    pub fast_path_statements: u64,
    /// Batches that ran as plain INSERTs.
    pub insert_batches: u64,
    pub threads: usize,
    /// How the statements ran: "parallel", "ordered" (file order, one
    /// connection, journaled) or "one connection" (as written, from the
    /// first statement that needs one connection's state).
    pub mode: &'static str,
    /// Notes of the load's own (and, for CSV/TSV, the first server
    /// warnings' texts, as shown while loading).
    pub warnings: Vec<String>,
    /// Warnings the server raised, all of them (`warnings` shows the first).
    pub warning_count: u64,
    /// How many of `warnings` are the server's (the last ones).
    #[serde(skip)]
    pub server_warnings_shown: usize,
    /// What the server said it did with the rows (its replies' `Records:
    /// ... Duplicates/Skipped/Deleted ... Warnings:`, or the OK packet's
    /// affected rows and warning count), over the committed work.
    pub server: crate::counts::ServerCounts,
    pub quarantine: Option<PathBuf>,
    /// A mydumper directory's `metadata`: where the dumped server's
    /// binary log stood (a replica of the loaded copy starts there).
    pub source_position: Option<SourcePosition>,
    /// The load was kept out of the server's binary log (`--skip-binlog`):
    /// its replicas and point-in-time recovery do not have it.
    pub binlog_skipped: bool,
}

/// Where the dumped server's binary log stood when the dump was taken.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SourcePosition {
    pub log: Option<String>,
    pub pos: Option<u64>,
    pub gtid: Option<String>,
}

impl From<sqlfleet_dump::mydumper::Position> for SourcePosition {
    fn from(p: sqlfleet_dump::mydumper::Position) -> Self {
        SourcePosition {
            log: p.log,
            pos: p.pos,
            gtid: p.gtid,
        }
    }
}

impl Summary {
    /// How many of the server's warnings `warnings` holds.
    fn server_warnings_shown(&self) -> usize {
        if self.unit == "chunks" {
            self.warnings.len()
        } else {
            self.server_warnings_shown
        }
    }

    /// The one-paragraph summary for people.
    pub fn paragraph(&self) -> String {
        if self.already_done {
            return format!(
                "{}: this dump (load id {}) was already loaded completely; nothing to do.",
                self.source, self.load_id
            );
        }
        let mut s = format!(
            "{} {}: {}, {} into {}, {} in {:.1}s ({:.0} rows/s, {}/s) on {}",
            if self.complete {
                "loaded"
            } else {
                "stopped loading"
            },
            self.source,
            sqlfleet_conn::text::count(
                self.statements,
                self.unit.strip_suffix('s').unwrap_or(self.unit)
            ),
            sqlfleet_conn::text::count(self.rows, "row"),
            sqlfleet_conn::text::count(self.tables as u64, "table"),
            progress::human_bytes(self.bytes as f64),
            self.seconds,
            self.rows_per_sec,
            progress::human_bytes(self.mb_per_sec * 1e6),
            match self.mode {
                "ordered" => "one connection, in file order".to_string(),
                "one connection" => format!(
                    "{}, in file order on one from the statement that needed it",
                    sqlfleet_conn::text::count(self.threads as u64, "connection")
                ),
                "in file order" => format!(
                    "{}, one chunk at a time in file order",
                    sqlfleet_conn::text::count(self.threads as u64, "connection")
                ),
                _ => sqlfleet_conn::text::count(self.threads as u64, "connection"),
            },
        );
        if self.skipped_on_resume > 0 {
            s.push_str(&format!(
                "; {} already-loaded {} skipped (resume)",
                self.skipped_on_resume, self.unit
            ));
        }
        if self.fast_path_statements > 0 {
            s.push_str(&format!(
                "; {} INSERTs sent as LOAD DATA rows",
                self.fast_path_statements
            ));
        }
        if self.server.skipped > 0 {
            s.push_str(&format!(
                "; the server skipped {} of the {} rows it read (duplicate keys)",
                self.server.skipped, self.server.records
            ));
        }
        if self.server.deleted > 0 {
            s.push_str(&format!("; {} existing rows replaced", self.server.deleted));
        }
        if self.warning_count > 0 {
            let shown = self.server_warnings_shown();
            s.push_str(&format!(
                "; {} from the server",
                sqlfleet_conn::text::count(self.warning_count, "warning")
            ));
            if shown > 0 && (shown as u64) < self.warning_count {
                s.push_str(&format!(
                    " (the first {shown} shown, {} more not shown; --strict stops at the first)",
                    self.warning_count - shown as u64
                ));
            }
        }
        s.push_str(&format!("; {} retries", self.retries));
        if self.errors > 0 {
            s.push_str(&format!(
                "; {} statements failed and were quarantined{}",
                self.errors,
                self.quarantine
                    .as_ref()
                    .map(|q| format!(" in {}", q.display()))
                    .unwrap_or_default()
            ));
        } else if self.warning_count == 0 && self.server.skipped == 0 {
            s.push_str("; no errors");
        } else {
            s.push_str("; no statement failed");
        }
        s.push('.');
        if let Some(p) = &self.source_position {
            let at = match (&p.log, p.pos) {
                (Some(l), Some(n)) => format!(" at {l}:{n}"),
                _ => String::new(),
            };
            s.push_str(&format!(
                "\nThe dump was taken with the source's binary log{at}"
            ));
            match &p.gtid {
                Some(g) => s.push_str(&format!(
                    ", GTID position {g}: a replica of this copy starts there (SET GLOBAL gtid_slave_pos = '{g}', then CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos)."
                )),
                None => s.push_str(": a replica of this copy starts there (CHANGE MASTER TO MASTER_LOG_FILE, MASTER_LOG_POS)."),
            }
        }
        if self.binlog_skipped {
            s.push_str("\nNot written into the server's binary log (--skip-binlog): its replicas and a point-in-time recovery do not have these rows.");
        }
        s
    }
}
