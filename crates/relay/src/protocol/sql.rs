//! What a statement does to session state, read from its text: which
//! session variables it sets (and whether that can be replayed on another
//! connection), a change of default database, and anything that ties the
//! client to its backend connection (a pin).
//!
//! A small lexer skips strings, quoted names and comments so that `@` in a
//! string is not a user variable; executable comments (`/*! ... */`) are
//! read as code, as the server reads them.

use std::ops::Range;

use sqlfleet_dump::lex::{lex, Lexed, Tok};

mod account_targets;
mod calls;
mod found_rows;
pub mod insert_id;
mod kill;
mod literal;
mod server_state;
mod substitute;
mod writes;

use account_targets::add_account_statement;
pub use account_targets::AccountTargets;
pub use calls::builtin;
use calls::{calls_stored_function, EFFECT_BUILTINS};
pub use found_rows::Count;
use kill::{kill_target, unread_kill};
pub use kill::{may_set_what_a_reset_keeps, may_touch_the_account, KillTarget, Unread};
pub use server_state::server_schema;
pub use sqlfleet_dump::digest::digest;
pub use substitute::{
    creates_table, evaluated_now, reads_as_before, substitute_call, substitute_var,
};
pub use writes::{written_tables, TableRef};

/// A token and the bytes it stands on.
pub type Token = (Tok, Range<usize>);

/// Why a client cannot share its backend connection for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pin {
    /// `session` pooling mode: pinned for the whole session.
    Session,
    TemporaryTable,
    UserVariable,
    LockTables,
    GetLock,
    TextPrepare,
    FoundRows,
    LastInsertId,
    SetExpression,
    /// Transaction characteristics pending on the server (SET TRANSACTION,
    /// or a read-only transaction's, which SET autocommit = 1 leaves
    /// behind): until COMMIT or ROLLBACK.
    SetTransaction,
    SetOption,
    Cursor,
    LongData,
    Handler,
    Xa,
    /// A query rule with `multiplex = false` matched.
    Rule,
    /// The server reported a session change the relay cannot replay
    /// (a user variable, temporary table or prepared statement made where
    /// the text does not show it: in a procedure, function or trigger).
    ServerState,
    /// The client changed the session tracking the relay relies on.
    Tracking,
    /// BACKUP STAGE / BACKUP LOCK hold server locks for this session.
    Backup,
    /// CALL: a procedure may take locks the server does not report.
    Call,
    /// The previous statement left warnings, an error or a row count that
    /// the next one may ask about (SHOW WARNINGS, ROW_COUNT()).
    Diagnostics,
    /// An error under autocommit=0 may have opened a transaction.
    MaybeInTransaction,
    /// CONNECTION_ID() was asked: the id stays true (and KILL-able).
    ConnectionId,
    /// NEXTVAL / NEXT VALUE FOR / SETVAL: the session's LASTVAL (PREVIOUS
    /// VALUE FOR) lives on the connection, and nothing can set it again
    /// elsewhere.
    Sequence,
    /// SAVEPOINT under autocommit=0 before the transaction touched a
    /// table: the server keeps the savepoint but reports no transaction.
    Savepoint,
    /// A variable the server uses once and forgets (`insert_id`,
    /// `rand_seed1/2`, as mysqlbinlog writes them): replayed on another
    /// connection it would be used again, and undone it has no default.
    OneShotVariable,
    /// A stored function was called: like a procedure it may take a user
    /// lock or advance a sequence (LASTVAL), which the server does not
    /// report.
    StoredFunction,
    /// A write to a table whose column default advances a sequence or
    /// whose trigger may take a user lock or advance one (or a view):
    /// nothing reports either.
    WriteEffects,
    /// COM_REGISTER_SLAVE / COM_BINLOG_DUMP: a replica's session (the
    /// server ends the connection after the dump).
    Replication,
    /// The session's role may have changed (`SET ROLE` anywhere in a
    /// text, or dynamic SQL the relay cannot read): the server's
    /// COM_RESET_CONNECTION keeps the role, so the connection is never
    /// reset for another client — closed when this one leaves, as its own
    /// disconnect would end the server session.
    Role,
    /// The session may keep traces of its statements on the connection
    /// (`profiling` or `optimizer_trace` named in a text): the profile
    /// history, which COM_RESET_CONNECTION keeps, and the optimizer trace,
    /// which stays after tracing is off; SHOW PROFILES and
    /// information_schema.OPTIMIZER_TRACE listed one client's statements
    /// to the next. Never shared; closed at the end, as `Role`.
    Traces,
    /// FLUSH STATUS zeroed the connection's session status counters, or
    /// the client read them (SHOW [SESSION | LOCAL] STATUS,
    /// information_schema.SESSION_STATUS): its later reads count from
    /// there, on this connection, as a direct session's do (a first read
    /// without FLUSH STATUS also counts what the connection ran before
    /// the client had it).
    SessionStatus,
    /// The session's sql_mode was not known (the server's global not read
    /// yet) and its text reads otherwise under NO_BACKSLASH_ESCAPES,
    /// ANSI_QUOTES or a multi-byte client character set: what it does
    /// cannot be told, so the client keeps its connection, on the primary.
    Dialect,
    /// The default database's name is not ASCII and the client's
    /// character set is not UTF-8: only the client's own bytes name it
    /// (`frontend/session/schema.rs`).
    Schema,
}

/// Session variables the server uses for the next statement (or, for
/// `gtid_seq_no`, the next transaction written to the binlog) and then
/// clears without reporting it: replayed, a GTID would be used twice.
pub const ONE_SHOT_VARIABLES: [&str; 4] = ["insert_id", "rand_seed1", "rand_seed2", "gtid_seq_no"];

/// Variables whose reported value is no setting to replay, because their
/// DEFAULT is the connection's own: `timestamp` follows the clock (its
/// value replayed elsewhere would stop the client's NOW() there; MariaDB
/// 10.11 even reports the value from before `SET timestamp = DEFAULT`, and
/// the client's NOW() went back to the value it had set), and
/// `pseudo_thread_id` is the connection's thread id (reported as 0 after
/// `SET pseudo_thread_id = DEFAULT`). The statement's text says what was
/// set; stored code that sets one is pinned by its call.
pub const OWN_DEFAULT_VARIABLES: [&str; 2] = ["timestamp", "pseudo_thread_id"];

/// Variables MariaDB gives a session scope whose value belongs to a
/// replication connection (the one `default_master_connection` names):
/// a session's SET changes it for the whole server, and every session
/// reads it back. Not a setting of the client's to carry to another
/// connection or undo for the next client (that undo changed it for the
/// whole server): a global change.
pub const REPLICATION_CONNECTION_VARIABLES: [&str; 2] =
    ["max_relay_log_size", "sql_slave_skip_counter"];

impl Pin {
    pub const ALL: [Pin; 34] = [
        Pin::Session,
        Pin::TemporaryTable,
        Pin::UserVariable,
        Pin::LockTables,
        Pin::GetLock,
        Pin::TextPrepare,
        Pin::FoundRows,
        Pin::LastInsertId,
        Pin::SetExpression,
        Pin::SetTransaction,
        Pin::SetOption,
        Pin::Cursor,
        Pin::LongData,
        Pin::Handler,
        Pin::Xa,
        Pin::Rule,
        Pin::ServerState,
        Pin::Tracking,
        Pin::Backup,
        Pin::Call,
        Pin::Diagnostics,
        Pin::MaybeInTransaction,
        Pin::ConnectionId,
        Pin::Sequence,
        Pin::Savepoint,
        Pin::OneShotVariable,
        Pin::StoredFunction,
        Pin::WriteEffects,
        Pin::Replication,
        Pin::Role,
        Pin::Traces,
        Pin::SessionStatus,
        Pin::Dialect,
        Pin::Schema,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pin::Session => "session_mode",
            Pin::TemporaryTable => "temporary_table",
            Pin::UserVariable => "user_variable",
            Pin::LockTables => "lock_tables",
            Pin::GetLock => "get_lock",
            Pin::TextPrepare => "text_prepare",
            Pin::FoundRows => "found_rows",
            Pin::LastInsertId => "last_insert_id",
            Pin::SetExpression => "set_expression",
            Pin::SetTransaction => "set_transaction",
            Pin::SetOption => "set_option",
            Pin::Cursor => "cursor",
            Pin::LongData => "long_data",
            Pin::Handler => "handler",
            Pin::Xa => "xa",
            Pin::Rule => "rule",
            Pin::ServerState => "server_state",
            Pin::Tracking => "session_tracking",
            Pin::Backup => "backup_lock",
            Pin::Call => "call",
            Pin::Diagnostics => "diagnostics",
            Pin::MaybeInTransaction => "maybe_in_transaction",
            Pin::ConnectionId => "connection_id",
            Pin::Sequence => "sequence",
            Pin::Savepoint => "savepoint",
            Pin::OneShotVariable => "one_shot_variable",
            Pin::StoredFunction => "stored_function",
            Pin::WriteEffects => "trigger_or_sequence_default",
            Pin::Replication => "replication",
            Pin::Role => "role",
            Pin::Traces => "statement_traces",
            Pin::SessionStatus => "session_status",
            Pin::Dialect => "unknown_dialect",
            Pin::Schema => "database_name_charset",
        }
    }
}

/// Session variables the server's tracker reports as an empty value when
/// they are NULL, and that refuse `''` (checked on MariaDB 10.11: each
/// takes NULL and answers `''` with an unknown engine, character set or
/// "can't be set to the value of ''"). Replayed as `''`, a client's
/// `SET SESSION enforce_storage_engine = NULL` would fail the client's
/// next statement on another connection.
const NULL_WHEN_EMPTY: &[&str] = &[
    "character_set_results",
    "default_tmp_storage_engine",
    "enforce_storage_engine",
    "innodb_ft_user_stopword_table",
    "innodb_tmpdir",
];

/// Session variables whose reported `DEFAULT` is the keyword, not a
/// value (it refuses the string `'DEFAULT'` with 1231): after `SET
/// system_versioning_asof = DEFAULT` the client's next statement on
/// another connection failed with the replay's 1231 (found by the
/// every-variable oracle's DEFAULT round trip). (`alter_algorithm`'s
/// `'DEFAULT'` is a value of its own: the keyword would give the global.)
const KEYWORD_WHEN_DEFAULT: &[&str] = &["system_versioning_asof"];

/// One tracked session setting, replayable with `SET <text>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Setting {
    /// The variable (lower case) or a pseudo name: `names`, `charset`,
    /// `transaction isolation`, `transaction access`.
    pub name: String,
    /// What follows SET to restore it, e.g. `@@session.sql_mode = 'ANSI'`.
    pub text: String,
}

/// Puts `s` last in `list` (a replay assigns in the list's order),
/// replacing the earlier value of the same setting and what `s` undoes on
/// the server: NAMES and CHARACTER SET assign every character set variable
/// and the connection's collation, a new character_set_connection brings
/// its own default collation.
pub fn upsert(list: &mut Vec<Setting>, s: &Setting) {
    list.retain(|x| x.name != s.name && !s.supersedes(&x.name));
    list.push(s.clone());
}

impl Setting {
    /// Whether assigning this setting also assigns variable `other`.
    fn supersedes(&self, other: &str) -> bool {
        match self.name.as_str() {
            "names" | "charset" => matches!(
                other,
                "names"
                    | "charset"
                    | "character_set_client"
                    | "character_set_connection"
                    | "character_set_results"
                    | "collation_connection"
            ),
            "character_set_connection" => other == "collation_connection",
            _ => false,
        }
    }

    /// `SET NAMES cs COLLATE c` names a collation no tracker reports
    /// (MariaDB 10.11 tracks the character set variables, not
    /// collation_connection): that collation as a setting of its own, to
    /// follow the client (a replayed `character_set_connection` would
    /// leave the character set's default collation).
    pub fn names_collation(&self) -> Option<Setting> {
        if self.name != "names" {
            return None;
        }
        let mut words = self.text.split_ascii_whitespace();
        words.find(|w| w.eq_ignore_ascii_case("COLLATE"))?;
        let c = words
            .next()?
            .trim_matches(|ch| ch == '\'' || ch == '"' || ch == '`');
        if c.is_empty()
            || c.eq_ignore_ascii_case("DEFAULT")
            || !c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return None;
        }
        Some(Setting {
            name: "collation_connection".into(),
            text: format!("@@session.collation_connection = '{c}'"),
        })
    }

    /// A variable as the server reported it changed, replayed by value.
    pub fn from_server(name: &str, value: &str) -> Setting {
        let numeric = !value.is_empty()
            && value
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'-' || b == b'.')
            && value.bytes().any(|b| b.is_ascii_digit());
        let lit = if numeric {
            value.to_string()
        } else if value.is_empty() && NULL_WHEN_EMPTY.contains(&name) {
            "NULL".to_string()
        } else if value == "DEFAULT" && KEYWORD_WHEN_DEFAULT.contains(&name) {
            "DEFAULT".to_string()
        } else {
            format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
        };
        Setting {
            name: name.to_string(),
            text: format!("@@session.{name} = {lit}"),
        }
    }

    /// It cannot be put back to a new session's value with `= DEFAULT`
    /// (a connection carrying it is reset instead): pseudo settings, and
    /// the character set variables, which a new session takes from the
    /// collation its login asked for, not from the globals (a latin1 login
    /// on a utf8mb4 server starts with latin1).
    pub fn undone_by_reset(&self) -> bool {
        matches!(
            self.name.as_str(),
            "names"
                | "charset"
                | "transaction isolation"
                | "transaction access"
                | "character_set_client"
                | "character_set_connection"
                | "character_set_results"
                | "collation_connection"
        )
    }
}

/// Whether replaying `settings` on a fresh connection leaves autocommit on
/// (`fresh`: whether such a connection starts with it on).
pub fn replayed_autocommit(settings: &[Setting], fresh: bool) -> bool {
    let Some(s) = settings.iter().rev().find(|s| s.name == "autocommit") else {
        return fresh;
    };
    let v = s.text.rsplit('=').next().unwrap_or("").trim();
    let v = v
        .trim_matches(|c| c == '\'' || c == '"')
        .to_ascii_uppercase();
    !matches!(v.as_str(), "0" | "OFF" | "FALSE")
}

/// What a COM_QUERY does to the session, as far as its text says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    pub settings: Vec<Setting>,
    pub use_db: Option<String>,
    /// Pins taken by this statement (kept until released).
    pub pins: Vec<Pin>,
    /// Pins this statement releases.
    pub unpins: Vec<Pin>,
    /// Keeps the backend for the next statement only.
    pub pin_next: Option<Pin>,
    /// Only plain reads (SELECT without locking clauses, INTO or functions
    /// with side effects): a replica may answer.
    pub read: bool,
    /// A read of the server itself, not of replicated data (a global
    /// system variable, one of the server's own schemas, a user lock's
    /// state: `sql/server_state.rs`): the primary's to answer. (Only
    /// reads are looked at: anything else goes there anyway.)
    pub reads_server: bool,
    /// Every statement is a SET of session variables or a USE: a session
    /// change the server reports is explained by the text.
    pub settings_only: bool,
    /// Reads the previous statement's diagnostics (SHOW WARNINGS/ERRORS,
    /// GET DIAGNOSTICS, @@warning_count, ROW_COUNT(), FOUND_ROWS()).
    pub reads_diagnostics: bool,
    /// Reads the session's last insert id (LAST_INSERT_ID() without an
    /// argument, @@identity, @@last_insert_id).
    pub reads_insert_id: bool,
    /// Calls LAST_INSERT_ID(expr), which sets it.
    pub sets_insert_id: bool,
    /// A text of one INSERT or REPLACE, read for how it leaves
    /// LAST_INSERT_ID() (`insert_id.rs`).
    pub insert: Option<insert_id::InsertShape>,
    /// Reads `@@last_gtid`: the GTID of the session's last write, which
    /// on a pooled connection is whoever wrote there last
    /// (`ClientState::own_counts` writes the client's own in).
    pub reads_last_gtid: bool,
    /// The last statement is a SELECT, or a SHOW or DESCRIBE the server
    /// answers as one (which set FOUND_ROWS(): `sql/found_rows.rs`).
    pub selects: bool,
    /// The last statement leaves FOUND_ROWS() at a count only the server
    /// knows, which may be the one before it (`sql/found_rows.rs`:
    /// a grouping without GROUP BY, INTO, EXPLAIN of a statement, a SHOW
    /// form not measured).
    pub found_rows_server: bool,
    /// ... for the one reason that after a count of 1 leaves 1 either way
    /// (`Count::Server { one_row }`).
    pub found_rows_one_row: bool,
    /// The text sets FOUND_ROWS() to a count only the server knows: an
    /// INSERT, REPLACE or CREATE ... SELECT (the rows its SELECT found,
    /// and 0 for some), or a SELECT before the last of several statements.
    pub found_rows_unknown: bool,
    /// The first statement alone does: what counts when the server ran
    /// the text as one statement (a routine's `BEGIN ... END` body holds
    /// `;` and is not run by its CREATE).
    pub found_rows_unknown_first: bool,
    /// How many `;`-separated statements the text holds.
    pub statements: usize,
    /// The last statement has LIMIT with an offset (FOUND_ROWS() then
    /// counts the skipped rows too: only the server knows it).
    pub limit_offset: bool,
    /// Sets a global variable: connections the pool reset before it hold
    /// the old value as their session default.
    pub sets_global: bool,
    /// The last statement reads or writes a table, which (on MariaDB and
    /// MySQL) clears the warnings and errors left by earlier statements.
    pub uses_tables: bool,
    /// `KILL [QUERY|CONNECTION] <id>` or `... USER <account>`: (query
    /// only, whom).
    pub kill: Option<(bool, KillTarget)>,
    /// Whether the text may run a KILL whose target only the server reads
    /// (an expression or query id, a KILL among other statements or in a
    /// compound one, in dynamic SQL, or dynamic SQL from a text that is
    /// not one plain string): `kill` is then None (see `sql/kill.rs`).
    pub kill_unread: Unread,
    /// The text is one `PREPARE <name> FROM @v` or `EXECUTE IMMEDIATE @v`:
    /// the variable (as written), whose value is the text the server runs.
    pub dynamic_var: Option<String>,
    /// Creates, changes or drops accounts or their passwords and rights
    /// (what per-user mode looked up on the server is then looked up
    /// again).
    pub changes_accounts: bool,
    /// Changes an account's or role's privileges or password for sure
    /// (GRANT, REVOKE, CREATE/ALTER/DROP/RENAME USER or ROLE, SET
    /// PASSWORD, SET DEFAULT ROLE): sessions logged in before read old ones.
    pub changes_privileges: bool,
    /// `DROP USER a, b@h`: the account names (their server connections
    /// idle in a per-user pool are closed).
    pub drops_users: Vec<String>,
    /// Whom the text's account statements act on (see
    /// `sql/account_targets.rs`); None when it has none.
    pub account_targets: Option<AccountTargets>,
    /// `DROP DATABASE <name>` / `DROP SCHEMA <name>`.
    pub drops_db: Option<String>,
    /// Temporary tables made and dropped, in order (names as written,
    /// lower-cased): when none the session made is left, the pin goes.
    pub temp_ops: Vec<TempOp>,
    /// GET_LOCK / RELEASE_LOCK / RELEASE_ALL_LOCKS, in order.
    pub lock_ops: Vec<LockOp>,
    /// Calls a function that is not a built-in (a stored function may
    /// change the session out of sight).
    pub calls_stored: bool,
    /// Session variables set to a computed value (`sql_mode =
    /// CONCAT(@@sql_mode, ...)`): pinned by [`Pin::SetExpression`], which a
    /// tracking server's report of each one's resulting value releases.
    pub computed: Vec<String>,
    /// Variables a `SET STATEMENT ... FOR` sets for its statement only
    /// (lower-cased): the server reports them changed, but afterwards the
    /// session has its own values again. The statement after FOR is read
    /// as the statement.
    pub statement_vars: Vec<String>,
    /// COMMIT or ROLLBACK (not to a savepoint): ends the transaction, and
    /// a pending `SET TRANSACTION` with it.
    pub ends_transaction: bool,
    /// Tables the statements write (INSERT, REPLACE, UPDATE, DELETE, LOAD
    /// DATA): a column default or trigger may do what no tracker reports.
    pub writes: Vec<TableRef>,
    /// CREATE, ALTER, DROP or RENAME: what the relay learnt of tables
    /// (their triggers and defaults) is looked up again.
    pub changes_schema: bool,
}

impl Effects {
    /// Whether the text may change the session where no tracker reports
    /// it: a user lock, a sequence's LASTVAL, a routine that may do either,
    /// the connection's id, LOCK TABLES or a text PREPARE. Run for a
    /// client in a trigger or a view, it ties the client to its
    /// connection (`backend/write_effects.rs`, `backend/view_calls.rs`).
    pub fn acts_unseen(&self) -> bool {
        !self.lock_ops.is_empty()
            || self.pins.iter().any(|p| {
                matches!(
                    p,
                    Pin::GetLock
                        | Pin::Sequence
                        | Pin::StoredFunction
                        | Pin::Call
                        | Pin::ConnectionId
                        | Pin::LockTables
                        | Pin::TextPrepare
                )
            })
    }

    /// Whether the text accounts for a session-state change the server
    /// reports: only SETs and USE, or one statement that makes or drops
    /// temporary tables and nothing else the relay cannot see.
    pub fn explains_state(&self) -> bool {
        // A stored function in a SET (`SET time_zone = f()`) may change
        // anything besides the variable set.
        (self.settings_only && !self.calls_stored)
            // SET STATEMENT ... FOR a statement whose own changes the text
            // shows (no stored code): the report is of the variables.
            || (self.statements == 1
                && !self.statement_vars.is_empty()
                && !self.calls_stored
                && !self.pins.contains(&Pin::Call))
            || (self.statements == 1
                && !self.calls_stored
                && !self.temp_ops.is_empty()
                && self.pins.iter().all(|p| *p == Pin::TemporaryTable))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TempOp {
    Create(String),
    /// `DROP [TEMPORARY] TABLE` (a plain DROP TABLE drops a temporary
    /// table of that name first).
    Drop(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOp {
    /// The lock's name as written, when it is a literal.
    Get(Option<String>),
    Release(Option<String>),
    ReleaseAll,
}

fn word(t: Option<&(Tok, Range<usize>)>) -> Option<&str> {
    match t {
        Some((Tok::Word(w), _)) => Some(w.as_str()),
        _ => None,
    }
}

/// What a statement's text is to the relay — its tokens, its effects and
/// its digest — kept by the result cache beside the entries of that text
/// (`Cache::analysis`), so a hit does not read the text again. A pure
/// function of the bytes: the same text reads the same in every session.
#[derive(Debug)]
pub struct Analysis {
    pub toks: Vec<(Tok, Range<usize>)>,
    pub fx: Effects,
    pub digest: String,
}

impl Analysis {
    /// Its heap and inline bytes (for the cache's bound), counted high.
    pub fn bytes(&self) -> usize {
        use std::mem::size_of;
        let toks: usize = self
            .toks
            .iter()
            .map(|(t, _)| match t {
                Tok::Word(w) | Tok::Quoted(w) if w.is_heap_allocated() => w.capacity(),
                Tok::SysVar(scope, name) => {
                    name.capacity() + scope.as_ref().map_or(0, String::capacity)
                }
                _ => 0,
            })
            .sum();
        let fx = &self.fx;
        let fx_heap = fx.settings.capacity() * size_of::<Setting>()
            + fx.settings
                .iter()
                .map(|s| s.name.capacity() + s.text.capacity())
                .sum::<usize>()
            + fx.use_db.as_ref().map_or(0, String::capacity)
            + (fx.pins.capacity() + fx.unpins.capacity()) * size_of::<Pin>()
            + fx.drops_users.iter().map(String::capacity).sum::<usize>()
            + fx.drops_users.capacity() * size_of::<String>()
            + fx.drops_db.as_ref().map_or(0, String::capacity)
            + fx.temp_ops.capacity() * size_of::<TempOp>()
            + fx.statement_vars
                .iter()
                .map(String::capacity)
                .sum::<usize>()
            + fx.statement_vars.capacity() * size_of::<String>();
        size_of::<Analysis>()
            + self.toks.capacity() * size_of::<(Tok, Range<usize>)>()
            + toks
            + fx_heap
            + self.digest.capacity()
    }
}

/// A COM_QUERY's text, lexed once for both its effects and its digest.
pub struct Query<'a> {
    sql: &'a [u8],
    lexed: Lexed,
}

impl<'a> Query<'a> {
    pub fn new(sql: &'a [u8]) -> Query<'a> {
        Query {
            sql,
            lexed: lex(sql),
        }
    }

    /// `sql` as a session of dialect `d` wrote it (its sql_mode's
    /// NO_BACKSLASH_ESCAPES and ANSI_QUOTES, its client character set).
    pub fn new_in(sql: &'a [u8], d: sqlfleet_dump::lex::Dialect) -> Query<'a> {
        Query {
            sql,
            lexed: sqlfleet_dump::lex::lex_in(sql, d),
        }
    }

    /// `sql` from a session whose dialect is not known (`None`): read as
    /// the default dialect when every dialect reads its tokens alike;
    /// otherwise (a backslash, a double quote or a multi-byte character
    /// that one of them reads otherwise) taken for a write that names no
    /// table it reads, so it goes to the primary and nothing is cached.
    pub fn new_unsure(sql: &'a [u8]) -> (Query<'a>, bool) {
        use sqlfleet_dump::lex::{lex_in, Dialect, Multibyte};
        let q = Query::new(sql);
        // Only a backslash, a double quote, and a backquote after a byte
        // from 0x80 (the second byte of a multi-byte character) are read
        // otherwise in some dialect.
        let backquote_trail = sql.windows(2).any(|w| w[0] >= 0x80 && w[1] == b'`');
        if !backquote_trail && !sql.iter().any(|&b| b == b'\\' || b == b'"') {
            return (q, false);
        }
        let same = [
            Multibyte::AsciiSafe,
            Multibyte::Sjis,
            Multibyte::Big5,
            Multibyte::Gbk,
        ]
        .into_iter()
        .flat_map(|charset| {
            [(false, false), (true, false), (false, true), (true, true)].map(|(n, a)| Dialect {
                no_backslash_escapes: n,
                ansi_quotes: a,
                charset,
            })
        })
        .all(|d| lex_in(sql, d).toks == q.lexed.toks);
        (q, !same)
    }

    /// The statement's tokens.
    pub fn tokens(&self) -> &[(Tok, Range<usize>)] {
        &self.lexed.toks
    }

    /// The statement's tokens, kept (a prepared statement's).
    pub fn into_tokens(self) -> Vec<(Tok, Range<usize>)> {
        self.lexed.toks
    }

    pub fn effects(&self) -> Effects {
        effects(self.sql, &self.lexed)
    }

    pub fn digest(&self) -> String {
        sqlfleet_dump::digest::of(self.sql, &self.lexed)
    }

    /// Every table the text writes, wherever the writing statement stands
    /// (a trigger's or routine's body: `BEGIN INSERT INTO t ...; END`).
    pub fn written_tables(&self) -> Vec<TableRef> {
        written_tables(self.sql, &self.lexed.toks)
    }
}

/// Whether the text calls the built-in `name` (upper case).
pub fn calls_builtin(toks: &[Token], name: &str) -> bool {
    toks.windows(2)
        .any(|w| w[0].0.is_word(name) && w[1].0.is_punct(b'('))
}

/// Reads one or more `;`-separated statements.
pub fn analyze(sql: &[u8]) -> Effects {
    Query::new(sql).effects()
}

fn effects(sql: &[u8], lexed: &Lexed) -> Effects {
    let mut fx = Effects::default();
    let mut reads = 0;
    let mut others = 0;
    let stmts: Vec<_> = lexed
        .toks
        .split(|(t, _)| t.is_punct(b';'))
        .filter(|s| !s.is_empty())
        .map(|s| after_set_statement(s, &mut fx.statement_vars))
        .collect();
    for stmt in &stmts {
        statement(sql, stmt, &mut fx);
        if is_read(stmt) {
            reads += 1;
            fx.reads_server |= server_state::reads_server(stmt);
        } else {
            others += 1;
        }
    }
    fx.read = reads > 0 && others == 0;
    fx.statements = stmts.len();
    if let [one] = stmts.as_slice() {
        fx.insert = insert_id::shape(sql, one);
    }
    let mut found = kill::Found::new(fx.account_targets.take());
    (fx.kill_unread, fx.dynamic_var) = unread_kill(sql, &stmts, &mut found);
    fx.account_targets = found.accounts;
    if found.sets_role {
        fx.pins.push(Pin::Role);
    }
    // (`SET STATEMENT optimizer_trace = ... FOR ...` traces its
    // statement.)
    if found.traces || kill::traces_named(&fx.statement_vars) {
        fx.pins.push(Pin::Traces);
    }
    if fx.kill_unread != Unread::No {
        fx.kill = None;
    }
    fx.limit_offset = stmts.last().is_some_and(|t| {
        t.iter().enumerate().any(|(i, (k, _))| match k {
            Tok::Word(w) if w == "OFFSET" => true,
            Tok::Word(w) if w == "LIMIT" => t.get(i + 2).is_some_and(|(k, _)| k.is_punct(b',')),
            _ => false,
        })
    });
    fx.uses_tables = stmts.last().is_some_and(|t| uses_tables(t));
    let count = stmts.last().map_or(Count::Kept, |t| found_rows::count(t));
    fx.selects = count == Count::Rows
        || stmts.last().is_some_and(|t| {
            matches!(
                word(t.iter().find(|(k, _)| !k.is_punct(b'('))),
                Some("SELECT") | Some("WITH") | Some("TABLE")
            )
        });
    fx.found_rows_server = matches!(count, Count::Server { .. });
    fx.found_rows_one_row = count == Count::Server { one_row: true };
    let unknown: Vec<bool> = stmts
        .iter()
        .enumerate()
        .map(|(n, t)| {
            let first = word(t.iter().find(|(k, _)| !k.is_punct(b'(')));
            // CREATE [OR REPLACE] [TEMPORARY] TABLE ... SELECT runs its
            // SELECT; a view's, routine's, trigger's or event's body does not.
            let creates_table = first == Some("CREATE")
                && t.iter()
                    .skip(1)
                    .filter_map(|x| word(Some(x)))
                    .find(|w| !matches!(*w, "OR" | "REPLACE" | "TEMPORARY"))
                    == Some("TABLE");
            let feeds = (matches!(first, Some("INSERT") | Some("REPLACE")) || creates_table)
                && t.iter()
                    .any(|(k, _)| matches!(k, Tok::Word(w) if w == "SELECT"));
            let earlier_select = n + 1 < stmts.len()
                && matches!(
                    first,
                    Some("SELECT") | Some("WITH") | Some("VALUES") | Some("TABLE")
                );
            feeds || runs_statements(t) || (earlier_select && !fx.selects)
        })
        .collect();
    fx.found_rows_unknown = unknown.iter().any(|u| *u);
    fx.found_rows_unknown_first = unknown.first().copied().unwrap_or(false);
    fx.settings_only = !stmts.is_empty()
        && stmts
            .iter()
            .all(|s| matches!(word(s.first()), Some("SET") | Some("USE")));
    fx.pins.sort();
    fx.pins.dedup();
    fx
}

/// The statement runs statements the text does not show, any of which may
/// set FOUND_ROWS(): CALL, EXECUTE of a prepared statement, and a compound
/// statement run as it is sent (`BEGIN NOT ATOMIC`, `IF`, `CASE`, `LOOP`,
/// `WHILE`, `REPEAT`, `FOR`, or one of them behind a label).
fn runs_statements(t: &[(Tok, Range<usize>)]) -> bool {
    let at = |i: usize| word(t.get(i));
    let start = if t.get(1).is_some_and(|(k, _)| k.is_punct(b':')) {
        2
    } else {
        0
    };
    match at(start) {
        Some("CALL") | Some("EXECUTE") => start == 0,
        Some("BEGIN") => at(start + 1) == Some("NOT") || start == 2,
        Some("IF") | Some("CASE") | Some("LOOP") | Some("WHILE") | Some("REPEAT") | Some("FOR") => {
            true
        }
        _ => false,
    }
}

/// `SET STATEMENT a = 1, b = 2 FOR <statement>`: the statement after FOR
/// (the names set for it go to `vars`); any other statement as it is.
fn after_set_statement<'t>(
    t: &'t [(Tok, Range<usize>)],
    vars: &mut Vec<String>,
) -> &'t [(Tok, Range<usize>)] {
    if word(t.first()) != Some("SET") || word(t.get(1)) != Some("STATEMENT") {
        return t;
    }
    let mut depth = 0i32;
    let mut names = Vec::new();
    let mut name_next = true;
    for (i, (k, _)) in t.iter().enumerate().skip(2) {
        match k {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            Tok::Punct(b',') if depth == 0 => name_next = true,
            Tok::Word(w) if depth == 0 && w == "FOR" && !name_next => {
                vars.extend(names);
                return &t[i + 1..];
            }
            Tok::Word(w) if name_next => {
                names.push(w.as_str().to_ascii_lowercase());
                name_next = false;
            }
            Tok::Quoted(w) if name_next => {
                names.push(w.as_str().to_ascii_lowercase());
                name_next = false;
            }
            _ => name_next = false,
        }
    }
    t
}

/// A SELECT that changes nothing and locks nothing.
fn is_read(t: &[(Tok, Range<usize>)]) -> bool {
    let first = t.iter().find(|(k, _)| !k.is_punct(b'('));
    if !matches!(word(first), Some("SELECT") | Some("WITH")) {
        return false;
    }
    for (i, (k, _)) in t.iter().enumerate() {
        let next = word(t.get(i + 1));
        match k {
            Tok::UserVar => return false,
            Tok::Word(w) => {
                let call = t.get(i + 1).is_some_and(|(k, _)| k.is_punct(b'('));
                match w.as_str() {
                    "INTO" | "SQL_CALC_FOUND_ROWS" => return false,
                    "FOR" if next == Some("UPDATE") => return false,
                    "LOCK" if next == Some("IN") => return false,
                    "NEXT" | "PREVIOUS" if next == Some("VALUE") => return false,
                    w if call && EFFECT_BUILTINS.contains(&w) => return false,
                    _ => {}
                }
            }
            _ => {}
        }
        // A stored function (unqualified or db.f) may write.
        if calls_stored_function(t, i) {
            return false;
        }
    }
    true
}

/// What one statement does to the session, the accounts and the tables,
/// read from its tokens: who it is for (accounts, privileges), what it
/// writes, the calls in it, and what its first words make it.
fn statement(sql: &[u8], t: &[(Tok, Range<usize>)], fx: &mut Effects) {
    let w0 = word(t.first()).unwrap_or("");
    let w1 = word(t.get(1)).unwrap_or("");
    let w2 = word(t.get(2)).unwrap_or("");
    let w3 = word(t.get(3)).unwrap_or("");
    accounts(fx, [w0, w1, w2, w3]);
    add_account_statement(sql, t, &mut fx.account_targets);
    if matches!(w0, "INSERT" | "REPLACE" | "UPDATE" | "DELETE" | "LOAD") {
        fx.writes.extend(written_tables(sql, t));
    }
    fx.changes_schema |= matches!(w0, "CREATE" | "ALTER" | "DROP" | "RENAME");
    calls(sql, t, w0, fx);
    by_first_words(sql, t, [w0, w1, w2], fx);
}

/// Whether the statement changes accounts (the relay's per-user logins)
/// or privileges (pooled connections logged in before it).
fn accounts(fx: &mut Effects, [w0, w1, w2, w3]: [&str; 4]) {
    fx.changes_accounts |= matches!(
        (w0, w1, w2),
        ("CREATE" | "ALTER" | "DROP" | "RENAME", "USER", _)
            | ("CREATE", "OR", "REPLACE")
            | ("SET", "PASSWORD", _)
            | ("GRANT" | "REVOKE", _, _)
            | ("FLUSH", "PRIVILEGES", _)
    );
    fx.changes_privileges |= matches!(
        (w0, w1, w2, w3),
        ("GRANT" | "REVOKE", _, _, _)
            | (
                "CREATE" | "ALTER" | "DROP" | "RENAME",
                "USER" | "ROLE",
                _,
                _
            )
            | ("CREATE", "OR", "REPLACE", "USER" | "ROLE")
            | ("SET", "PASSWORD", _, _)
            | ("SET", "DEFAULT", "ROLE", _)
    );
}

/// The session state the statement's calls and variables touch: user
/// variables, stored functions, sequences, named locks, CONNECTION_ID(),
/// the diagnostics and LAST_INSERT_ID() it reads.
fn calls(sql: &[u8], t: &[(Tok, Range<usize>)], w0: &str, fx: &mut Effects) {
    // Anything that reads or writes a user variable keeps state on the
    // backend connection (SET @x is the common case).
    if t.iter().any(|(k, _)| matches!(k, Tok::UserVar)) {
        fx.pins.push(Pin::UserVariable);
    }
    // information_schema.SESSION_STATUS: the session's counters, wherever
    // the statement reads them.
    if t.iter().any(|(k, _)| match k {
        Tok::Word(w) => w == "SESSION_STATUS",
        Tok::Quoted(q) => q.eq_ignore_ascii_case("SESSION_STATUS"),
        _ => false,
    }) {
        fx.pins.push(Pin::SessionStatus);
    }
    // Where function calls can be: in DDL only its SELECT part (a table
    // name or a column type followed by `(` is no call; DEFAULT, CHECK and
    // generated columns take no stored functions); DROP has none.
    let calls_from = match w0 {
        "CREATE" | "ALTER" => t
            .iter()
            .position(|(k, _)| k.is_word("SELECT"))
            .unwrap_or(t.len()),
        "DROP" => t.len(),
        _ => 0,
    };
    for (i, (k, _)) in t.iter().enumerate() {
        if i >= calls_from && calls_stored_function(t, i) {
            fx.calls_stored = true;
            fx.pins.push(Pin::StoredFunction);
        }
        let Tok::Word(w) = k else { continue };
        let call = t.get(i + 1).is_some_and(|(k, _)| k.is_punct(b'('));
        match w.as_str() {
            "NEXTVAL" | "SETVAL" if call => fx.pins.push(Pin::Sequence),
            "NEXT" if word(t.get(i + 1)) == Some("VALUE") => fx.pins.push(Pin::Sequence),
            "GET_LOCK" if call => {
                fx.pins.push(Pin::GetLock);
                fx.lock_ops.push(LockOp::Get(literal_arg(sql, t, i, b',')));
            }
            "RELEASE_LOCK" if call => {
                fx.lock_ops
                    .push(LockOp::Release(literal_arg(sql, t, i, b')')));
            }
            "RELEASE_ALL_LOCKS" if call => fx.lock_ops.push(LockOp::ReleaseAll),
            "CONNECTION_ID" if call => fx.pins.push(Pin::ConnectionId),
            "SQL_CALC_FOUND_ROWS" => fx.pin_next = Some(Pin::FoundRows),
            "ROW_COUNT" | "FOUND_ROWS" if call => fx.reads_diagnostics = true,
            "LAST_INSERT_ID" if call && t.get(i + 2).is_some_and(|(k, _)| k.is_punct(b')')) => {
                fx.reads_insert_id = true
            }
            "LAST_INSERT_ID" if call => fx.sets_insert_id = true,
            "WARNINGS" | "ERRORS" if i > 0 && word(t.first()) == Some("SHOW") => {
                fx.reads_diagnostics = true
            }
            "DIAGNOSTICS" if word(t.first()) == Some("GET") => fx.reads_diagnostics = true,
            _ => {}
        }
    }
    if t.iter()
        .any(|(k, _)| matches!(k, Tok::SysVar(_, n) if n == "warning_count" || n == "error_count"))
    {
        fx.reads_diagnostics = true;
    }
    if t.iter()
        .any(|(k, _)| matches!(k, Tok::SysVar(_, n) if n == "last_gtid"))
    {
        fx.reads_last_gtid = true;
    }
}

/// What the statement's first words make it: SET, a transaction's end,
/// USE, temporary tables, table locks, prepared text, XA, FLUSH, BACKUP,
/// CALL, KILL, dropped users and databases.
fn by_first_words(
    sql: &[u8],
    t: &[(Tok, Range<usize>)],
    [w0, w1, w2]: [&str; 3],
    fx: &mut Effects,
) {
    match w0 {
        "SET" => set(sql, &t[1..], fx),
        "COMMIT" => fx.ends_transaction = true,
        "SAVEPOINT" => fx.pins.push(Pin::Savepoint),
        "ROLLBACK" if !t.iter().any(|(k, _)| k.is_word("TO")) => fx.ends_transaction = true,
        "USE" => {
            fx.use_db = match t.get(1) {
                Some((Tok::Word(_), r)) => {
                    Some(String::from_utf8_lossy(&sql[r.clone()]).into_owned())
                }
                Some((Tok::Quoted(q), _)) => Some(q.to_string()),
                _ => None,
            }
        }
        "CREATE"
            if w1 == "TEMPORARY"
                || (w1 == "OR" && w2 == "REPLACE" && word(t.get(3)) == Some("TEMPORARY")) =>
        {
            fx.pins.push(Pin::TemporaryTable);
            // CREATE [OR REPLACE] TEMPORARY TABLE [IF NOT EXISTS] name
            let mut i = if w1 == "OR" { 5 } else { 3 };
            if word(t.get(i)) == Some("IF") {
                i += 3;
            }
            let names = table_names(sql, t.get(i..).unwrap_or_default());
            let name = names.into_iter().next().unwrap_or_default();
            fx.temp_ops.push(TempOp::Create(name));
        }
        "DROP"
            if w1 == "TABLE"
                || w1 == "TABLES"
                || (w1 == "TEMPORARY" && (w2 == "TABLE" || w2 == "TABLES")) =>
        {
            let mut i = if w1 == "TEMPORARY" { 3 } else { 2 };
            if word(t.get(i)) == Some("IF") {
                i += 2;
            }
            for n in table_names(sql, t.get(i..).unwrap_or_default()) {
                fx.temp_ops.push(TempOp::Drop(n));
            }
        }
        "LOCK" if w1 == "TABLE" || w1 == "TABLES" => fx.pins.push(Pin::LockTables),
        "UNLOCK" if w1 == "TABLE" || w1 == "TABLES" => fx.unpins.push(Pin::LockTables),
        "PREPARE" | "EXECUTE" | "DEALLOCATE" => fx.pins.push(Pin::TextPrepare),
        "HANDLER" => fx.pins.push(Pin::Handler),
        "XA" => match w1 {
            "COMMIT" | "ROLLBACK" => fx.unpins.push(Pin::Xa),
            _ => fx.pins.push(Pin::Xa),
        },
        // FLUSH [LOCAL | NO_WRITE_TO_BINLOG] TABLES ... WITH READ LOCK
        // (or FOR EXPORT): the lock is the session's.
        "FLUSH"
            if matches!(
                (w1, w2),
                ("TABLES" | "TABLE", _) | ("LOCAL" | "NO_WRITE_TO_BINLOG", "TABLES" | "TABLE")
            ) && t
                .iter()
                .any(|(k, _)| k.is_word("LOCK") || k.is_word("EXPORT")) =>
        {
            fx.pins.push(Pin::LockTables)
        }
        // FLUSH [LOCAL | NO_WRITE_TO_BINLOG] STATUS (among other options).
        "FLUSH" if t.iter().skip(1).any(|(k, _)| k.is_word("STATUS")) => {
            fx.pins.push(Pin::SessionStatus)
        }
        // SHOW [SESSION | LOCAL] STATUS: the session's counters (SHOW
        // GLOBAL STATUS is the server's).
        "SHOW" if w1 == "STATUS" || (matches!(w1, "SESSION" | "LOCAL") && w2 == "STATUS") => {
            fx.pins.push(Pin::SessionStatus)
        }
        "BACKUP" => match (w1, w2) {
            ("STAGE", "END") | ("UNLOCK", _) => fx.unpins.push(Pin::Backup),
            _ => fx.pins.push(Pin::Backup),
        },
        "CALL" => fx.pins.push(Pin::Call),
        "KILL" => fx.kill = kill_target(sql, &t[1..]),
        "DROP" if w1 == "USER" => {
            let from = if w2 == "IF" { t.get(4) } else { t.get(2) };
            if let (Some((_, a)), Some((_, b))) = (from, t.last()) {
                fx.drops_users = sql
                    .get(a.start..b.end)
                    .map(|text| {
                        text.split(|c| *c == b',')
                            .filter_map(account_name)
                            .map(|(u, _)| u)
                            .collect()
                    })
                    .unwrap_or_default();
            }
        }
        "DROP" if w1 == "DATABASE" || w1 == "SCHEMA" => {
            let name = if w2 == "IF" { t.get(4) } else { t.get(2) };
            fx.drops_db = match name {
                Some((Tok::Word(_), r)) => {
                    Some(String::from_utf8_lossy(&sql[r.clone()]).into_owned())
                }
                Some((Tok::Quoted(q), _)) => Some(q.to_string()),
                _ => None,
            }
        }
        _ => {}
    }
}

/// The literal first argument of the call at `t[i]` (`NAME('x' <end>`),
/// as written; `None` when it is an expression.
fn literal_arg(sql: &[u8], t: &[(Tok, Range<usize>)], i: usize, end: u8) -> Option<String> {
    match (t.get(i + 2), t.get(i + 3)) {
        (Some((Tok::Literal, r)), Some((Tok::Punct(c), _))) if *c == end => {
            Some(String::from_utf8_lossy(&sql[r.clone()]).into_owned())
        }
        _ => None,
    }
}

/// Comma-separated table names (`t`, `db.t`, quoted parts), as written and
/// lower-cased; stops at the first token that is not part of one.
fn table_names(sql: &[u8], t: &[(Tok, Range<usize>)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for (k, r) in t {
        // A name part only at the start of a name or after its dot.
        let part_due = cur.is_empty() || cur.ends_with('.');
        match k {
            Tok::Word(_) if part_due => {
                cur.push_str(&String::from_utf8_lossy(&sql[r.clone()]).to_lowercase())
            }
            Tok::Quoted(q) if part_due => cur.push_str(&q.to_lowercase()),
            Tok::Punct(b'.') if !part_due => cur.push('.'),
            Tok::Punct(b',') if !part_due => out.push(std::mem::take(&mut cur)),
            _ => break,
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether a statement names a table (conservatively: DML, or a FROM
/// followed by a name other than DUAL or by a derived table).
fn uses_tables(t: &[(Tok, Range<usize>)]) -> bool {
    if matches!(
        word(t.first()),
        Some("INSERT") | Some("UPDATE") | Some("DELETE") | Some("REPLACE")
    ) {
        return true;
    }
    t.windows(2).any(|w| {
        word(Some(&w[0])) == Some("FROM")
            && match &w[1].0 {
                Tok::Word(n) => n != "DUAL",
                Tok::Quoted(_) => true,
                Tok::Punct(b'(') => true,
                _ => false,
            }
    })
}

/// Whether a rule's regex matches a statement's text: read as UTF-8
/// where it is (no copy), with invalid bytes as U+FFFD otherwise.
pub fn regex_matches(x: &regex::Regex, sql: &[u8]) -> bool {
    match std::str::from_utf8(sql) {
        Ok(text) => x.is_match(text),
        Err(_) => x.is_match(&String::from_utf8_lossy(sql)),
    }
}

/// Whether the statement's first word is `w` (upper-case ASCII), after
/// blanks: a cheap test before lexing.
pub fn starts_with_word(sql: &[u8], w: &str) -> bool {
    let start = sql
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(sql.len());
    let rest = &sql[start..];
    rest.len() >= w.len()
        && rest[..w.len()].eq_ignore_ascii_case(w.as_bytes())
        && rest
            .get(w.len())
            .is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
}

/// `name`, `name@host`, `'name'@'host'` (any of the three quotes) as
/// written after `USER`: the name and host unquoted.
pub fn account_name(text: &[u8]) -> Option<(String, Option<String>)> {
    let text = std::str::from_utf8(text)
        .ok()?
        .trim()
        .trim_end_matches(';')
        .trim();
    let mut parts = Vec::new();
    let mut chars = text.chars().peekable();
    let mut cur = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' | '`' => loop {
                match chars.next() {
                    Some(q) if q == c && chars.peek() == Some(&c) => {
                        chars.next();
                        cur.push(c);
                    }
                    Some(q) if q == c => break,
                    Some(q) => cur.push(q),
                    None => return None,
                }
            },
            '@' if parts.is_empty() => parts.push(std::mem::take(&mut cur)),
            c if c.is_whitespace() => return None,
            c => cur.push(c),
        }
    }
    parts.push(cur);
    let mut it = parts.into_iter();
    let user = it.next()?;
    Some((user, it.next()))
}

/// `SET` assignments (after the SET keyword).
fn set(sql: &[u8], t: &[(Tok, Range<usize>)], fx: &mut Effects) {
    let mut scope_global = false;
    let mut i = 0;
    match word(t.first()) {
        Some("GLOBAL") => scope_global = true,
        Some("SESSION") | Some("LOCAL") => i = 1,
        Some("STATEMENT") => return, // SET STATEMENT ... FOR: one statement only
        Some("PASSWORD") | Some("ROLE") | Some("DEFAULT") => {
            fx.pins.push(Pin::SetExpression);
            return;
        }
        _ => {}
    }
    if scope_global {
        fx.sets_global = true;
        return; // affects the server, not the session
    }
    if word(t.get(i)) == Some("TRANSACTION") {
        let text = String::from_utf8_lossy(&sql[t[i].1.start..t.last().map_or(0, |x| x.1.end)])
            .into_owned();
        if i == 0 {
            // Without SESSION: the next transaction only.
            fx.pins.push(Pin::SetTransaction);
        } else {
            let what = if text.to_ascii_uppercase().contains("ISOLATION") {
                "transaction isolation"
            } else {
                "transaction access"
            };
            fx.settings.push(Setting {
                name: what.into(),
                text: format!("SESSION {text}"),
            });
        }
        return;
    }
    // Split the assignments at top-level commas.
    let mut parts: Vec<&[(Tok, Range<usize>)]> = Vec::new();
    let mut depth = 0i32;
    let mut from = i;
    for (j, (k, _)) in t.iter().enumerate().skip(i) {
        match k {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            Tok::Punct(b',') if depth == 0 => {
                parts.push(&t[from..j]);
                from = j + 1;
            }
            _ => {}
        }
    }
    parts.push(&t[from..]);
    for a in parts {
        assignment(sql, a, fx);
    }
}

fn assignment(sql: &[u8], a: &[(Tok, Range<usize>)], fx: &mut Effects) {
    let Some((first, _)) = a.first() else { return };
    let text_of = |from: usize| -> String {
        match (a.get(from), a.last()) {
            (Some(s), Some(e)) => String::from_utf8_lossy(&sql[s.1.start..e.1.end]).into_owned(),
            _ => String::new(),
        }
    };
    let (name, mut k) = match first {
        Tok::Word(w) if w == "NAMES" => {
            fx.settings.push(Setting {
                name: "names".into(),
                text: text_of(0),
            });
            return;
        }
        Tok::Word(w) if w == "CHARSET" || (w == "CHARACTER" && word(a.get(1)) == Some("SET")) => {
            fx.settings.push(Setting {
                name: "charset".into(),
                text: text_of(0),
            });
            return;
        }
        Tok::Word(w) if matches!(w.as_str(), "SESSION" | "LOCAL") => match a.get(1) {
            Some((Tok::Word(v), _)) => (v.as_str().to_ascii_lowercase(), 2),
            _ => return fx.pins.push(Pin::SetExpression),
        },
        Tok::Word(w) if w == "GLOBAL" => {
            fx.sets_global = true;
            return;
        }
        Tok::Word(w) => (w.as_str().to_ascii_lowercase(), 1),
        Tok::Quoted(q) => (q.as_str().to_ascii_lowercase(), 1),
        Tok::SysVar(scope, v) => match scope.as_deref() {
            None | Some("session") | Some("local") => (v.clone(), 1),
            Some(_) => {
                fx.sets_global = true; // @@global.x
                return;
            }
        },
        Tok::UserVar => return, // already pinned
        _ => return fx.pins.push(Pin::SetExpression),
    };
    if ONE_SHOT_VARIABLES.contains(&name.as_str()) {
        return fx.pins.push(Pin::OneShotVariable);
    }
    if REPLICATION_CONNECTION_VARIABLES.contains(&name.as_str()) {
        fx.sets_global = true;
        return;
    }
    // `=` or `:=`
    match a.get(k) {
        Some((Tok::Punct(b'='), _)) => k += 1,
        Some((Tok::Punct(b':'), _)) if a.get(k + 1).is_some_and(|x| x.0.is_punct(b'=')) => k += 2,
        _ => return fx.pins.push(Pin::SetExpression),
    }
    let value = &a[k..];
    // Replayable: one literal or word, optionally signed. Anything else
    // (a function, another variable, a subquery) is evaluated where it runs.
    let simple = matches!(
        value,
        [(Tok::Literal | Tok::Word(_) | Tok::Quoted(_), _)]
            | [(Tok::Punct(b'-' | b'+'), _), (Tok::Literal, _)]
    );
    if !simple {
        fx.computed.push(name);
        return fx.pins.push(Pin::SetExpression);
    }
    let value = String::from_utf8_lossy(&sql[value[0].1.start..value[value.len() - 1].1.end]);
    fx.settings.push(Setting {
        text: format!("@@session.{name} = {value}"),
        name,
    });
}

#[cfg(test)]
mod tests;
