//! The units of work between a source and its stream's worker: a job (one
//! transaction for one stream), the worker's answer, and why applying
//! failed.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::position;
use crate::txn::Txn;

/// One transaction for one stream.
pub struct Job {
    pub source: Arc<str>,
    /// The source's reading session; jobs of an older one are dropped
    /// after that session failed.
    pub generation: u64,
    pub idx: u64,
    pub stream: String,
    pub txn: Arc<Txn>,
    /// The source's current format description event (raw).
    pub format: Arc<Vec<u8>>,
    pub reply: mpsc::UnboundedSender<Done>,
    /// This job's share of its source's in-flight byte budget, given back
    /// when the worker is done with it.
    pub budget: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Its outcome was sent: a job is answered once (a worker that panics
    /// answers the jobs of its chunk it had not answered yet).
    pub replied: std::sync::atomic::AtomicBool,
}

#[derive(Debug)]
pub struct Done {
    pub generation: u64,
    pub idx: u64,
    pub stream: String,
    pub gtid: crate::gtid::Gtid,
    /// The source's commit time of the transaction.
    pub timestamp: u32,
    pub outcome: Outcome,
}

#[derive(Debug, Clone)]
pub enum Outcome {
    Applied,
    /// Not applied: its stream had stopped, or its session had failed.
    Dropped,
    /// The target refused it (SQL error): its stream stops.
    Failed {
        error: String,
        statement: String,
    },
    /// The connection failed, or the stream's recorded position already
    /// covers the work (another commit landed after the positions were
    /// read): the source must restart from the target's positions (the
    /// commit may or may not have happened).
    Lost {
        error: String,
    },
}

/// Why applying failed.
#[derive(Debug, Clone)]
pub enum ApplyError {
    Sql {
        code: u16,
        error: String,
        statement: String,
    },
    Lost(String),
}

impl ApplyError {
    /// The error's text (the server's, or why the connection is gone).
    pub fn text(&self) -> String {
        match self {
            ApplyError::Lost(s) => s.clone(),
            ApplyError::Sql { error, .. } => error.clone(),
        }
    }

    pub fn from_driver(e: mysql_async::Error, statement: &str) -> ApplyError {
        match e {
            // Another commit recorded this work first: not a failure of
            // the stream, and not to be applied again — the source reads
            // again from the target's positions, which skip it.
            mysql_async::Error::Server(s) if position::is_covered(s.code, &s.message) => {
                ApplyError::Lost(format!(
                    "not applied again: another commit (an earlier run's, or one whose reply was lost) recorded this work after the positions were read; {}",
                    s.message
                ))
            }
            mysql_async::Error::Server(s) => ApplyError::Sql {
                code: s.code,
                error: format!("ERROR {} ({}): {}", s.code, s.state, s.message),
                statement: statement.chars().take(300).collect(),
            },
            other => ApplyError::Lost(other.to_string()),
        }
    }
}

/// Collation id → (character set, collation) names on the target.
pub type Collations = HashMap<u32, (String, String)>;

/// What a refusal or a stopped stream says when `doing` (reading,
/// applying) panicked: the panic's words, and that it is a bug.
pub fn panicked(doing: &str, p: &(dyn std::any::Any + Send)) -> String {
    let what = sqlfleet_conn::text::panic_message(p);
    format!(
        "{doing} stopped at an internal error ({}): {what}; what was applied stays, and a new run reads on from there",
        sqlfleet_conn::text::A_BUG
    )
}
