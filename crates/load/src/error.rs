//! Load errors: each says where (file, byte offset, line, table) and what.

use std::path::PathBuf;

use sqlfleet_dump::printable::printable;
use sqlfleet_dump::SplitError;

/// A statement the server refused, with its place in the dump.
#[derive(Debug, Clone)]
pub struct StatementFailure {
    /// The sourced file it came from (`source FILE`), when not the main one.
    pub origin: Option<String>,
    pub offset: u64,
    pub line: u64,
    pub table: Option<String>,
    pub code: Option<u16>,
    pub message: String,
    pub preview: String,
    /// The load stopped before its journal was written: nothing of it is
    /// on the target, and the way on is the same command, not a resume.
    pub nothing_written: bool,
}

impl StatementFailure {
    /// Where the statement was: its file (a sourced file or a directory's
    /// file) and line there, or the byte offset and line of the input.
    pub fn place(&self) -> String {
        match &self.origin {
            // Line 0: a statement of the load's own, in no file.
            Some(o) if self.line == 0 => format!("in {o}"),
            Some(o) => format!("in {o}, line {}", self.line),
            None => format!("byte offset {}, line {}", self.offset, self.line),
        }
    }

    /// What to do next, for the message: a resume where one can go on; a
    /// load without a database (1046) names the database to give, since a
    /// resume is bound to the database its load used (here: none).
    pub fn way_on(&self) -> &'static str {
        match self.code {
            Some(1046) => {
                "the dump names no database and none was given: load it again with -D DB --restart (a resume keeps to the database the load used, and it had none)"
            }
            _ if self.nothing_written => {
                "nothing was written to the target: fix the cause and run the same command again"
            }
            // A second load of a dump without DROP TABLE statements (a
            // mydumper directory, --skip-add-drop-table): a resume would
            // meet the same table, and its rows after it, again.
            Some(1050) => {
                "the table is there already (loaded before? the dump drops no table before creating it): load again with --restart --overwrite-tables (each table dropped just before its CREATE, as myloader's -o), or into an empty database"
            }
            _ => {
                "everything before it that committed is journaled: fix the cause and rerun with --resume"
            }
        }
    }
}

impl std::fmt::Display for StatementFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.place())?;
        if let Some(t) = &self.table {
            write!(f, ", table {t}")?;
        }
        // The server's message may quote the statement: both are input,
        // shown with their control characters escaped.
        let message = printable(&self.message);
        match self.code {
            Some(c) => write!(f, ": ERROR {c}: {message}")?,
            None => write!(f, ": {message}")?,
        }
        write!(f, "; statement: {}", printable(&self.preview))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Connect(Box<sqlfleet_conn::ConnectError>),
    #[error("{path}: {source}")]
    Input {
        path: PathBuf,
        #[source]
        source: SplitError,
    },
    #[error("{path}: the dump is empty: no SQL statements in it")]
    Empty { path: PathBuf },
    #[error("{path}: no rows in it (the file is empty, or holds only its header)")]
    EmptyFlat { path: PathBuf },
    #[error("{path}: {failure}; {}", failure.way_on())]
    Statement {
        path: PathBuf,
        failure: Box<StatementFailure>,
    },
    #[error("{path}: {source}")]
    Flat {
        path: PathBuf,
        #[source]
        source: sqlfleet_flat::FlatError,
    },
    #[error("{}, table {}: {}{}; committed chunks are journaled: fix the cause and rerun with --resume",
        printable(&failure.preview),
        failure.table.as_deref().unwrap_or("?"),
        failure.code.map(|c| format!("ERROR {c}: ")).unwrap_or_default(),
        printable(&failure.message))]
    Chunk { failure: Box<StatementFailure> },
    #[error("journal ({endpoint}): {what}")]
    Journal { endpoint: String, what: String },
    #[error("an earlier load of this dump (load id {load_id}) stopped before the end: rerun with --resume to continue it, or --restart to load it again from the start")]
    Unfinished { load_id: String },
    #[error("{what}")]
    Setup { what: String },
    #[error("a load of this input (load id {load_id}) is running: connection {connection} from {host} on {endpoint} holds its lock; wait for it to end (or kill it) before loading or resuming")]
    Running {
        load_id: String,
        connection: u64,
        host: String,
        endpoint: String,
    },
    #[error("{path}: {what}; nothing was loaded by this run")]
    Changed { path: PathBuf, what: String },
    #[error("{path}: refused: {what}; nothing was loaded")]
    Refused { path: PathBuf, what: String },
    #[error("{path}: interrupted: {}", interrupted_advice(*statements, unit, *rows))]
    Interrupted {
        path: PathBuf,
        unit: &'static str,
        statements: u64,
        rows: u64,
    },
}

/// What an interrupted load did and what to run next. Before its first
/// statement a load has written nothing, not even its journal (an earlier
/// finished load of the same input keeps its own: `--resume` would find
/// that one), so the same command is what runs next.
fn interrupted_advice(statements: u64, unit: &str, rows: u64) -> String {
    if statements == 0 {
        return "before anything was committed: nothing of this run is on the target; run the same command again".into();
    }
    format!("{statements} {unit} ({rows} rows) committed and journaled; rerun with --resume to go on from there, or --restart to load again from the start")
}

impl From<sqlfleet_conn::ConnectError> for LoadError {
    fn from(e: sqlfleet_conn::ConnectError) -> Self {
        LoadError::Connect(Box::new(e))
    }
}

impl LoadError {
    /// Exit code: 1 for setup errors (nothing could start), 3 when the load
    /// itself failed.
    pub fn exit_code(&self) -> i32 {
        match self {
            LoadError::Open { .. }
            | LoadError::Connect(_)
            | LoadError::Journal { .. }
            | LoadError::Unfinished { .. }
            | LoadError::Setup { .. }
            | LoadError::Running { .. }
            | LoadError::Changed { .. }
            | LoadError::Refused { .. } => 1,
            LoadError::Input { .. }
            | LoadError::Flat { .. }
            | LoadError::Chunk { .. }
            | LoadError::Empty { .. }
            | LoadError::EmptyFlat { .. }
            | LoadError::Statement { .. } => 3,
            // As a shell reports SIGINT.
            LoadError::Interrupted { .. } => 130,
        }
    }
}

/// `(code, message)` of a driver error.
pub fn describe(e: &mysql_async::Error) -> (Option<u16>, String) {
    match e {
        mysql_async::Error::Server(s) => (Some(s.code), s.message.clone()),
        other => (None, other.to_string()),
    }
}

impl StatementFailure {
    /// A failure at `stmt` that is not a server error (fill in `message`).
    pub fn of_text(stmt: &sqlfleet_dump::Statement, table: Option<&str>) -> StatementFailure {
        StatementFailure {
            origin: stmt.origin.as_deref().map(str::to_owned),
            offset: stmt.offset,
            line: stmt.line,
            table: table.map(str::to_owned),
            code: None,
            message: String::new(),
            preview: stmt.preview(120),
            nothing_written: false,
        }
    }

    /// The failure of `stmt` (in `table`) with the driver's error.
    pub fn of(
        stmt: &sqlfleet_dump::Statement,
        table: Option<&str>,
        e: &mysql_async::Error,
    ) -> StatementFailure {
        let (code, message) = describe(e);
        StatementFailure {
            origin: stmt.origin.as_deref().map(str::to_owned),
            offset: stmt.offset,
            line: stmt.line,
            table: table.map(str::to_owned),
            code,
            message,
            preview: stmt.preview(120),
            nothing_written: false,
        }
    }

    /// `e` came from the loader's own journal record for `stmt`, not from
    /// the statement: the message says so.
    pub fn of_journal(
        stmt: &sqlfleet_dump::Statement,
        table: Option<&str>,
        e: &mysql_async::Error,
    ) -> StatementFailure {
        let f = StatementFailure::of(stmt, table, e);
        StatementFailure {
            message: format!("recording in the journal: {}", f.message),
            ..f
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The way on that a failure names is one that can succeed.
    #[test]
    fn the_way_on_fits_what_was_written() {
        let f = |code, nothing_written| StatementFailure {
            origin: None,
            offset: 0,
            line: 1,
            table: None,
            code,
            message: String::new(),
            preview: String::new(),
            nothing_written,
        };
        for (failure, want) in [
            (f(Some(1064), false), "rerun with --resume"),
            (f(Some(1064), true), "run the same command again"),
            (f(None, true), "nothing was written"),
            (f(Some(1046), false), "-D DB --restart"),
            (f(Some(1046), true), "-D DB --restart"),
            (f(Some(1050), false), "--restart --overwrite-tables"),
        ] {
            assert!(
                failure.way_on().contains(want),
                "{failure:?}: {}",
                failure.way_on()
            );
        }
    }

    /// Interrupted before its first statement, a load has no journal of
    /// its own to resume (`--resume` would find an earlier finished load
    /// of the same input and call it loaded): the same command again.
    #[test]
    fn an_interrupt_says_what_runs_next() {
        let at = |statements| {
            LoadError::Interrupted {
                path: PathBuf::from("d.sql"),
                unit: "statements",
                statements,
                rows: 0,
            }
            .to_string()
        };
        assert!(at(0).contains("run the same command again"), "{}", at(0));
        assert!(!at(0).contains("--resume"), "{}", at(0));
        assert!(
            at(3).contains("3 statements (0 rows) committed and journaled; rerun with --resume")
        );
    }
}
