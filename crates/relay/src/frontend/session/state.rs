//! The relay's mirror of a client's server session, as a value: its
//! default database and settings, what pins it to its backend connection,
//! its transaction status, the temporary tables and named locks it holds,
//! its statement counts (ROW_COUNT(), FOUND_ROWS(), LAST_INSERT_ID()) and
//! its open cursors.
//!
//! Every rule that decides whether a client may give its connection back
//! lives here, as methods that take facts — a statement's effects (what
//! its text says, `protocol/sql.rs`), a reply's outcome (what the server
//! said, `protocol/reply.rs`) — and return what the connection the
//! statement ran on must learn. Nothing here touches a socket, the pool or
//! the metrics; `session.rs` drives it and applies what it returns. The
//! tests below give each pin and release rule as a row.

use std::collections::{BTreeMap, BTreeSet};

use crate::backend::health::Fresh;
use crate::config::Mode;
use crate::protocol::reply::{
    Outcome, STATUS_AUTOCOMMIT, STATUS_IN_TRANS, STATUS_IN_TRANS_READONLY,
};
use crate::protocol::sql::insert_id::{self, After, InsertId};
use crate::protocol::sql::{self, upsert, Effects, LockOp, Pin, Setting, TempOp};
use crate::protocol::track::Change;

/// What becomes of a client's server connection when the server session
/// it holds for the client ends ([`ClientState::parting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parting {
    /// Reset (COM_RESET_CONNECTION) and pooled for the next client.
    Reuse,
    /// Closed, as the client's own disconnect ends a server session: an
    /// XA branch is on it (started, ended or prepared, and neither
    /// committed nor rolled back through it). The server then rolls an
    /// unprepared branch back and keeps a prepared one for any session's
    /// XA COMMIT or ROLLBACK (XA RECOVER lists it). A reset left the
    /// prepared branch bound to the connection, and the next client's
    /// writes there failed (error 1031). Or the session's role may have
    /// changed (`Pin::Role`): a reset keeps it, and the next client ran
    /// with a role it never set (a new login starts with the account's
    /// default role). Or it may have left traces of its statements
    /// (`Pin::Traces`): a reset keeps the profile history, and the next
    /// client's SHOW PROFILES listed this one's statements.
    Close,
}

/// The client's session as the relay follows it.
#[derive(Debug, Clone)]
pub(crate) struct ClientState {
    /// Transaction mode shares connections between statements; session
    /// mode keeps one per client (`Pin::Session`).
    mode: Mode,
    db: Option<String>,
    /// Bumped at every change of `settings` (what a value read from them,
    /// the session's dialect, is kept against).
    settings_gen: u64,
    /// Settings to replay on another connection, one per variable.
    settings: Vec<Setting>,
    pins: BTreeSet<Pin>,
    /// A pin for the next statement only (LAST_INSERT_ID() and the like).
    pin_next: Option<Pin>,
    /// The previous statement kept the connection for this one.
    kept_for_this: bool,
    /// A transaction was open since the savepoint (which ends with it).
    savepoint_began: bool,
    in_trans: bool,
    autocommit: bool,
    /// `autocommit` is the server's word (a reply's status, or a new
    /// session's start known for sure), not a guess: until it is, a read
    /// may open a transaction and stays on the primary.
    autocommit_sure: bool,
    /// What a new session starts with (at login and after a reset).
    fresh: Fresh,
    /// The current statement's text explains a session change the server
    /// reports (SET, USE, or a command the relay manages itself).
    explained: bool,
    /// The current statement's `SET STATEMENT ... FOR` variables: the
    /// server reports them changed, the session keeps its own.
    statement_vars: Vec<String>,
    /// The variables the current statement's SETs set by name (with
    /// `statement_vars`, what a reply must name: `backend/tracker.rs`).
    set_vars: Vec<String>,
    /// The current statement runs no stored code (a procedure, function
    /// or trigger could change the session where its text does not show).
    plain: bool,
    /// ROW_COUNT() after the client's previous statement.
    last_row_count: i64,
    /// LAST_INSERT_ID() as the client's session has it.
    last_insert_id: u64,
    /// How the current statement leaves LAST_INSERT_ID() where its OK
    /// carries an id (`insert_id.rs`; judged before it runs).
    insert_id_rule: InsertId,
    /// Only the server knows the client's LAST_INSERT_ID(): it is on the
    /// client's connection, asked there (`insert_id_ask`).
    insert_id_unsure: bool,
    /// The connection that held it went first: reads of it are refused
    /// until a statement sets it anew.
    insert_id_lost: bool,
    /// FOUND_ROWS() after the client's last SELECT.
    last_found_rows: u64,
    /// `@@last_gtid` as the client's session has it: the GTID the server
    /// reported for the client's last committed write (None: none
    /// reported since the login or a reset).
    own_gtid: Option<String>,
    /// A statement that may have written ran on a connection that reports
    /// nothing (no session tracking) since: the client's `@@last_gtid` is
    /// not known (None with this false: no write since the login or a
    /// reset, and the server's answer is '').
    gtid_unseen: bool,
    /// Only the server knows the client's count (SQL_CALC_FOUND_ROWS, a
    /// LIMIT with an offset, a grouping that may keep the count before
    /// it): it is on the client's connection, asked there
    /// (`found_rows_ask`) or read there as the client wrote it.
    found_rows_calc: bool,
    /// The client's count is not known (`FoundRowsLost` says why): the
    /// server's may be another client's, and FOUND_ROWS() is refused until
    /// a statement sets it anew.
    found_rows_lost: Option<FoundRowsLost>,
    /// Prepared statements (client ids) with an open cursor.
    cursors: rustc_hash::FxHashSet<u32>,
    /// Prepared statements (client ids) with long data sent.
    long_data: rustc_hash::FxHashSet<u32>,
    /// Temporary tables made and not dropped (lower-cased names as
    /// written); `None` once one was made in a way the text does not name
    /// (the pin then stays).
    temp_tables: Option<BTreeSet<String>>,
    /// Named locks held (GET_LOCK counts, as the server's locks nest);
    /// `None` once a lock was taken under a name that is not a literal.
    locks: Option<BTreeMap<String, u32>>,
}

/// What a statement's observation asks of the backend connection it ran
/// on, and the pins it took (counted by the caller).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ForConn {
    /// Settings the connection now has too.
    pub settings: Vec<Setting>,
    /// The connection's default database is now this.
    pub db: Option<Option<String>>,
    /// The connection's LAST_INSERT_ID() is now this.
    pub insert_id: Option<u64>,
    /// The connection's LAST_INSERT_ID() is only the server's now.
    pub insert_id_unknown: bool,
    /// Pins newly taken.
    pub pinned: Vec<Pin>,
    /// The server reported variables: the connection's pending restores
    /// went with them.
    pub reported_vars: bool,
    /// The reply showed the connection's variable tracker lost count
    /// (`backend/tracker.rs`): it is re-armed before it serves again, and
    /// its `last_gtid` report was not taken.
    pub tracking_lost: bool,
}

/// The largest count [`ClientState::found_rows_restore`] makes on a
/// connection: a recursive WITH of that many rows (about 60 ms on the
/// 2-core machine of `docs/benchmarks.md`; 5 million took 10 s).
pub(crate) const RESTORE_MAX: u64 = 100_000;

/// What gives a connection a client's FOUND_ROWS()
/// ([`ClientState::found_rows_restore`]): a statement and the variables
/// its `SET STATEMENT` sets; `None` for a count too big to make.
pub(crate) type Restore = Option<(String, Vec<&'static str>)>;

/// Why a client's FOUND_ROWS() is not known (read, it is refused with
/// 1235 until a statement sets it anew).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FoundRowsLost {
    /// It could not be carried to the connection of a statement that may
    /// keep it (`found_rows_restore`): more than [`RESTORE_MAX`] rows.
    TooBig,
    /// The statement that makes it there failed.
    NotMade,
    /// Only the server knew it (`found_rows_calc`), and the connection
    /// that held it is no longer the client's (lost, or replaced for a
    /// transaction's replay).
    ConnGone,
}

/// When the relay asks the server what only it knows of the client's
/// session: a count ([`ClientState::found_rows_ask`]) or LAST_INSERT_ID()
/// ([`ClientState::insert_id_ask`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// The relay knows it.
    No,
    /// Before the connection may go to another client: now.
    Now,
    /// It stays where the client's statements run: on a connection
    /// kept for good (the server holds it; asked only before a reset or a
    /// change of user), or in a transaction, whose connection the client
    /// keeps until a statement ends it (asked after that one, unless a
    /// SELECT set a count the relay knows meanwhile: sysbench's
    /// `oltp_read_only` runs a range after its `SUM(k)`).
    Later,
}

/// Whose FOUND_ROWS() the connection holds after a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FoundRowsOnConn {
    /// This client's (its SELECT just ran there).
    Mine,
    /// Nobody's that the relay knows.
    Unknown,
    /// As before.
    Unchanged,
}

/// A setting that is one session variable (not `SET NAMES`, `SET
/// CHARACTER SET` or `SET TRANSACTION`, which the server reports as the
/// variables they change).
fn is_variable(name: &str) -> bool {
    !matches!(name, "names" | "charset") && !name.starts_with("transaction ")
}

impl ClientState {
    // What the session reads of the state (the fields are private: every
    // change is one of the named transitions below or the rules after).

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn db(&self) -> &Option<String> {
        &self.db
    }

    /// The client's default database now (USE, COM_INIT_DB, a change of
    /// user, a database the server reported).
    pub fn use_db(&mut self, db: Option<String>) {
        self.db = db;
    }

    pub fn settings(&self) -> &[Setting] {
        &self.settings
    }

    /// Changes with every change of the settings.
    pub fn settings_gen(&self) -> u64 {
        self.settings_gen
    }

    pub fn pins(&self) -> &BTreeSet<Pin> {
        &self.pins
    }

    pub fn in_trans(&self) -> bool {
        self.in_trans
    }

    pub fn autocommit(&self) -> bool {
        self.autocommit
    }

    /// The GTID the server reported for the client's last write (None:
    /// none since the login or a reset, or a write ran where nothing is
    /// reported since).
    pub fn own_gtid(&self) -> Option<&str> {
        self.own_gtid.as_deref()
    }

    pub fn last_row_count(&self) -> i64 {
        self.last_row_count
    }

    pub fn last_found_rows(&self) -> u64 {
        self.last_found_rows
    }

    pub fn last_insert_id(&self) -> u64 {
        self.last_insert_id
    }

    /// The last SELECT had SQL_CALC_FOUND_ROWS: only the server knows
    /// its count.
    pub fn found_rows_calc(&self) -> bool {
        self.found_rows_calc
    }

    /// The client's FOUND_ROWS() where the relay knows it (not one only
    /// the server holds, nor a lost one).
    pub fn known_found_rows(&self) -> Option<u64> {
        (!self.found_rows_calc && self.found_rows_lost.is_none()).then_some(self.last_found_rows)
    }

    /// Why the client's FOUND_ROWS() is not known, if it is not.
    pub fn found_rows_lost(&self) -> Option<FoundRowsLost> {
        self.found_rows_lost
    }

    /// The client's count is not known any more (`found_rows_lost`).
    pub fn lose_found_rows(&mut self, why: FoundRowsLost) {
        self.found_rows_lost = Some(why);
        self.found_rows_calc = false;
    }

    /// The client's server connection is gone or about to be another's
    /// (lost, released, replaced): a count only it held goes with it.
    pub fn conn_gone(&mut self) {
        if self.found_rows_calc {
            self.lose_found_rows(FoundRowsLost::ConnGone);
        }
        if self.insert_id_unsure {
            self.insert_id_unsure = false;
            self.insert_id_lost = true;
        }
    }

    /// Whether and when the server is asked for the client's count after
    /// a statement (`found_rows_calc`).
    pub fn found_rows_ask(&self) -> Ask {
        self.ask_when(self.found_rows_calc)
    }

    /// Whether and when the server is asked for the client's
    /// LAST_INSERT_ID() after a statement (`insert_id_unsure`).
    pub fn insert_id_ask(&self) -> Ask {
        self.ask_when(self.insert_id_unsure)
    }

    fn ask_when(&self, unknown: bool) -> Ask {
        if !unknown {
            Ask::No
        } else if self.holds_conn_for_good() || (self.mode == Mode::Transaction && self.in_trans) {
            Ask::Later
        } else {
            Ask::Now
        }
    }

    /// How the statement about to run leaves LAST_INSERT_ID() where its
    /// OK carries an id (`insert_id::after_ok`).
    pub fn expect_insert_id(&mut self, rule: InsertId) {
        self.insert_id_rule = rule;
    }

    /// The server's LAST_INSERT_ID() for the client, asked.
    pub fn note_insert_id(&mut self, id: u64) {
        self.last_insert_id = id;
        self.insert_id_unsure = false;
        self.insert_id_lost = false;
    }

    /// The client's LAST_INSERT_ID() went with a connection before it was
    /// asked (`conn_gone`).
    pub fn insert_id_lost(&self) -> bool {
        self.insert_id_lost
    }

    /// Prepared statement `cid` has an open cursor.
    pub fn cursor_open(&self, cid: u32) -> bool {
        self.cursors.contains(&cid)
    }

    /// Prepared statement `cid` has long data sent for its next execute.
    pub fn has_long_data(&self, cid: u32) -> bool {
        self.long_data.contains(&cid)
    }

    // Named transitions the session's I/O makes.

    /// The relay answered a statement itself: the settings, ROW_COUNT()
    /// and (for a SELECT) FOUND_ROWS() it left.
    pub fn answered_locally(
        &mut self,
        settings: &[Setting],
        row_count: i64,
        found_rows: Option<u64>,
    ) {
        self.settings = settings.to_vec();
        self.settings_gen += 1;
        self.last_row_count = row_count;
        if let Some(n) = found_rows {
            // The answer's count is the client's now, wherever the
            // server's was left.
            self.last_found_rows = n;
            self.found_rows_calc = false;
            self.found_rows_lost = None;
        }
    }

    /// The server refused a prepare: ROW_COUNT() is -1 after it.
    pub fn prepare_refused(&mut self) {
        self.last_row_count = -1;
    }

    /// The server's FOUND_ROWS() for the last SELECT, asked at once.
    pub fn note_found_rows(&mut self, n: u64) {
        self.last_found_rows = n;
        self.found_rows_calc = false;
        self.found_rows_lost = None;
    }

    /// An execute with a cursor left it open.
    pub fn open_cursor(&mut self, cid: u32) {
        self.cursors.insert(cid);
    }

    /// Statement `cid`'s cursor is closed (or about to be replaced).
    pub fn close_cursor(&mut self, cid: u32) {
        self.cursors.remove(&cid);
    }

    /// Long data was sent for statement `cid`.
    pub fn note_long_data(&mut self, cid: u32) {
        self.long_data.insert(cid);
    }

    /// Statement `cid` ran, was reset or closed: its long data is spent.
    pub fn forget_long_data(&mut self, cid: u32) {
        self.long_data.remove(&cid);
    }

    /// The relay added `wsrep_sync_wait` to this statement (a causal read
    /// on a Galera node): the server reports it changed, the client did not.
    pub fn sync_wait_added(&mut self) {
        self.statement_vars.push("wsrep_sync_wait".into());
        self.explained = true;
    }

    /// A new session that starts as the backends' new sessions do
    /// (`Health::fresh_sessions`): its autocommit, and whether that is sure.
    pub fn starting_as(mut self, fresh: Fresh) -> ClientState {
        self.fresh = fresh;
        self.autocommit = fresh.autocommit;
        self.autocommit_sure = fresh.sure;
        self
    }

    /// A client just logged in (with `db` as its default database).
    pub fn new(mode: Mode, db: Option<String>) -> ClientState {
        let mut pins = BTreeSet::new();
        if mode == Mode::Session {
            pins.insert(Pin::Session);
        }
        ClientState {
            mode,
            db,
            settings: Vec::new(),
            settings_gen: 0,
            pins,
            pin_next: None,
            kept_for_this: false,
            savepoint_began: false,
            in_trans: false,
            autocommit: true,
            autocommit_sure: true,
            fresh: Fresh {
                autocommit: true,
                sure: true,
            },
            explained: true,
            statement_vars: Vec::new(),
            set_vars: Vec::new(),
            plain: true,
            last_row_count: -1,
            last_insert_id: 0,
            insert_id_rule: InsertId::Unsure,
            insert_id_unsure: false,
            insert_id_lost: false,
            last_found_rows: 0,
            own_gtid: None,
            gtid_unseen: false,
            found_rows_calc: false,
            found_rows_lost: None,
            cursors: Default::default(),
            long_data: Default::default(),
            temp_tables: Some(BTreeSet::new()),
            locks: Some(BTreeMap::new()),
        }
    }

    /// Takes a pin; true when it is new.
    pub fn pin(&mut self, p: Pin) -> bool {
        self.pins.insert(p)
    }

    /// Holds pin `p` while `on` (a rule the session works out); true when
    /// it is new.
    pub fn hold(&mut self, p: Pin, on: bool) -> bool {
        if on {
            self.pins.insert(p)
        } else {
            self.pins.remove(&p);
            false
        }
    }

    fn take(&mut self, p: Pin, out: &mut ForConn) {
        if self.pins.insert(p) {
            out.pinned.push(p);
        }
    }

    /// Records a setting (replacing the variable's earlier one).
    pub fn set(&mut self, s: &Setting) {
        upsert(&mut self.settings, s);
        self.settings_gen += 1;
    }

    /// The OK status flags a reply of the relay's own carries.
    pub fn status(&self) -> u16 {
        let mut status = 0;
        if self.autocommit {
            status |= STATUS_AUTOCOMMIT;
        }
        if self.in_trans {
            status |= STATUS_IN_TRANS;
        }
        status
    }

    /// Nothing ties the client to its connection: in transaction mode it
    /// goes back to the pool.
    pub fn may_release(&self) -> bool {
        self.mode == Mode::Transaction
            && !self.in_trans
            && self.pins.is_empty()
            && self.pin_next.is_none()
    }

    /// The client keeps its connection until a reset or its end: session
    /// mode, or after a CALL or a text PREPARE/EXECUTE (pins no statement
    /// releases).
    pub fn holds_conn_for_good(&self) -> bool {
        [Pin::Session, Pin::Call, Pin::TextPrepare]
            .iter()
            .any(|p| self.pins.contains(p))
    }

    /// What becomes of the client's server connection when its session
    /// ends there: the client leaves, or resets its session or changes
    /// its user (commands that end the server session it had).
    pub fn parting(&self) -> Parting {
        if self.reset_ends_session()
            || self.pins.contains(&Pin::Role)
            || self.pins.contains(&Pin::Traces)
        {
            Parting::Close
        } else {
            Parting::Reuse
        }
    }

    /// Whether the client's own COM_RESET_CONNECTION ends its server
    /// session (the connection closed, another leased for its next
    /// statement): an XA branch on it, as at its end. A role it set and
    /// its profile history stay through the server's reset, as they would
    /// directly.
    pub fn reset_ends_session(&self) -> bool {
        self.pins.contains(&Pin::Xa)
    }

    /// Something of the client's lives on its connection (a transaction,
    /// anything pinned): losing the connection loses the session.
    pub fn lives_on_conn(&self) -> bool {
        self.in_trans || !self.pins.is_empty()
    }

    /// The server rolled back the client's transaction (its connection
    /// was lost): nothing of it is open.
    pub fn rolled_back(&mut self) {
        self.in_trans = false;
        self.savepoint_began = false;
        for p in [Pin::MaybeInTransaction, Pin::Savepoint] {
            self.pins.remove(&p);
        }
    }

    /// A plain read may go to a replica: transaction mode, autocommit on,
    /// no transaction and nothing pinned (the router adds its own
    /// conditions). Under autocommit=0 a read opens a transaction that the
    /// client's next statements (its writes too) run in, on the same
    /// connection: it starts on the writable backend, never a replica
    /// (where a write would pass read_only for an account that may, and
    /// break replication).
    pub fn may_read_elsewhere(&self) -> bool {
        self.mode == Mode::Transaction
            && self.autocommit
            && self.autocommit_sure
            && !self.in_trans
            && self.pins.is_empty()
    }

    /// A recorded reply can stand for the server's: nothing of the
    /// session's outside the settings and database the key holds.
    pub fn is_plain(&self) -> bool {
        self.pins.is_empty()
            && self.pin_next.is_none()
            && !self.in_trans
            && self.autocommit
            && self.autocommit_sure
            && !self.found_rows_calc
    }

    /// A new client command arrives: a one-statement pin ends after the
    /// statement it was kept for.
    pub fn begin_command(&mut self) {
        self.insert_id_rule = InsertId::Unsure;
        self.kept_for_this = self.pin_next.take().is_some();
        self.explained = true;
        self.plain = true;
        self.statement_vars.clear();
        self.set_vars.clear();
    }

    /// A statement with effects `fx` is about to run.
    pub fn begin_statement(&mut self, fx: &Effects) {
        self.explained = fx.explains_state();
        // (Nor a SET in its text: `SET time_zone = ...; SELECT ...` is no
        // setting only, and its report is the client's own change.)
        self.plain = !fx.calls_stored
            && !fx.pins.contains(&Pin::Call)
            && fx.settings.is_empty()
            && fx.computed.is_empty()
            && !fx.pins.contains(&Pin::SetExpression);
        self.statement_vars.clone_from(&fx.statement_vars);
        self.set_vars = fx
            .settings
            .iter()
            .filter(|s| is_variable(&s.name))
            .map(|s| s.name.clone())
            .collect();
    }

    /// The server's `@@last_gtid` after the client's write, asked where
    /// the tracker's report could not be taken (`ForConn::tracking_lost`).
    pub fn note_own_gtid(&mut self, gtid: String) {
        self.own_gtid = Some(gtid);
        self.gtid_unseen = false;
    }

    /// The current statement's `SET STATEMENT ... FOR` variables (their
    /// restore is the connection's to expect: `BackendConn::note_restores`).
    pub fn statement_vars(&self) -> &[String] {
        &self.statement_vars
    }

    /// The pins the statement's text takes before it runs; returns the new ones.
    pub fn take_statement_pins(&mut self, fx: &Effects) -> Vec<Pin> {
        fx.pins
            .iter()
            .copied()
            .filter(|p| self.pins.insert(*p))
            .collect()
    }

    /// Before a statement that does not read the previous one's
    /// diagnostics and uses a table (which clears warnings on any
    /// connection): the hold for the warnings ends. True when the
    /// connection may be released now.
    pub fn drop_diagnostics_hold(&mut self, fx: &Effects) -> bool {
        if fx.reads_diagnostics || !fx.uses_tables {
            return false;
        }
        self.pins.remove(&Pin::Diagnostics) && !self.kept_for_this
    }

    /// Warnings or an error hold the connection for SHOW WARNINGS; a
    /// statement that opens a table clears them. Returns the pin when it
    /// is newly taken.
    pub fn hold_diagnostics(&mut self, o: &Outcome, uses_tables: bool) -> Option<Pin> {
        if o.error.is_some() || o.warnings > 0 {
            return self.pin(Pin::Diagnostics).then_some(Pin::Diagnostics);
        }
        if uses_tables {
            self.pins.remove(&Pin::Diagnostics);
        }
        None
    }

    /// Whether the session can be brought to another connection after its
    /// own is lost (`journal::session_fits`).
    pub fn fits_elsewhere(&self) -> Result<(), super::journal::Why> {
        super::journal::session_fits(self.mode, &self.pins, self.pin_next, self.idle_timeout())
    }

    /// The session set an idle transaction timeout (`idle_transaction_timeout`,
    /// `idle_readonly_transaction_timeout`, `idle_write_transaction_timeout`)
    /// to something other than 0 or DEFAULT.
    pub fn idle_timeout(&self) -> bool {
        self.settings.iter().any(|s| {
            s.name.starts_with("idle_")
                && s.name.ends_with("transaction_timeout")
                && s.text.rsplit_once('=').is_some_and(|(_, v)| {
                    let v = v.trim();
                    v != "0" && !v.eq_ignore_ascii_case("DEFAULT")
                })
        })
    }

    /// What asks the connection for what only it knows of the client's
    /// session (`Ask`): FOUND_ROWS() as `f` (`found`), LAST_INSERT_ID() as
    /// `i` (`insert`). A session that set `optimizer_trace` gets it
    /// untraced: the server keeps the trace of the last traced statement,
    /// which must stay the client's (information_schema.OPTIMIZER_TRACE
    /// would otherwise show the relay's question).
    pub fn question(&self, found: bool, insert: bool) -> String {
        let cols: Vec<&str> = [
            (found, "FOUND_ROWS() AS f"),
            (insert, "LAST_INSERT_ID() AS i"),
        ]
        .into_iter()
        .filter_map(|(on, c)| on.then_some(c))
        .collect();
        let q = format!("SELECT {}", cols.join(", "));
        if self.traces() {
            format!("SET STATEMENT optimizer_trace = 'enabled=off' FOR {q}")
        } else {
            q
        }
    }

    /// The session set `optimizer_trace`: the relay's own statements on
    /// its connection run untraced.
    fn traces(&self) -> bool {
        self.settings.iter().any(|s| s.name == "optimizer_trace")
    }

    /// Before a statement whose FOUND_ROWS() is the server's and may be
    /// the count before it (`Effects::found_rows_server`, INSERT ...
    /// SELECT, routines, SQL_CALC_FOUND_ROWS, LIMIT with an offset): the
    /// statement that gives a connection the client's count, and the
    /// variables its `SET STATEMENT` sets (restored by the server after
    /// it). `None`: nothing to carry — the count is the server's already
    /// (`found_rows_calc`, or a connection kept for good: session mode
    /// reads no text it need not, so its own count is not followed), or 1
    /// either way after a one-row grouping, or the statement does not keep
    /// it — or `Some(None)`: a count too big
    /// to make cheaply (more than [`RESTORE_MAX`] rows).
    ///
    /// No table is read for 64 rows or fewer, so the client's warnings
    /// stay on the connection; an explicit LIMIT, so SQL_SELECT_LIMIT does
    /// not cut the rows; a session that set `optimizer_trace` keeps its
    /// trace (`question`).
    pub fn found_rows_restore(&self, fx: &Effects) -> Option<Restore> {
        // Reasons other than a one-row grouping's (which keeps the count
        // or sets 1).
        let other = fx.found_rows_unknown
            || fx.found_rows_unknown_first
            || fx.limit_offset
            || fx.pin_next == Some(Pin::FoundRows);
        // (A connection kept for good holds the client's count: session
        // mode does not follow it, the server does.)
        if !(fx.found_rows_server || other)
            || self.found_rows_calc
            || self.found_rows_lost.is_some()
            || self.holds_conn_for_good()
        {
            return None;
        }
        let n = self.last_found_rows;
        if fx.found_rows_one_row && !other && n == 1 {
            return None;
        }
        let mut vars: Vec<(&'static str, String)> = Vec::new();
        let body = match n {
            0 => "SELECT 1 FROM DUAL WHERE 0".to_string(),
            1..=64 => format!(
                "SELECT 1{} LIMIT {n}",
                " UNION ALL SELECT 1".repeat(n as usize - 1)
            ),
            n if n <= RESTORE_MAX => {
                vars.push(("max_recursive_iterations", n.to_string()));
                format!(
                    "WITH RECURSIVE sqlfleet_relay (n) AS (SELECT 1 UNION ALL SELECT n + 1 \
                     FROM sqlfleet_relay WHERE n < {n}) SELECT SQL_CALC_FOUND_ROWS 1 \
                     FROM sqlfleet_relay LIMIT 0"
                )
            }
            _ => return Some(None),
        };
        if self.traces() {
            vars.push(("optimizer_trace", "'enabled=off'".into()));
        }
        if vars.is_empty() {
            return Some(Some((body, Vec::new())));
        }
        let set: Vec<String> = vars.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let names = vars.iter().map(|(k, _)| *k).collect();
        Some(Some((
            format!("SET STATEMENT {} FOR {body}", set.join(", ")),
            names,
        )))
    }

    /// The client's statement counts after a reply: ROW_COUNT() always,
    /// FOUND_ROWS() after a SELECT. `conn_has_mine`: whether the
    /// connection's own FOUND_ROWS() was this client's before the
    /// statement (`None` without a connection).
    pub fn counts_after(
        &mut self,
        o: &Outcome,
        fx: &Effects,
        conn_has_mine: Option<bool>,
    ) -> FoundRowsOnConn {
        // (The last statement's: a CALL's own OK after its result sets,
        // the last of a text of several.)
        self.last_row_count = if (o.result_sets > 0 && !o.last_is_ok) || o.error.is_some() {
            -1
        } else {
            o.affected as i64
        };
        // The server says how many statements ran: one reply to a text
        // of several `;` pieces is one statement (a routine's body).
        let unknown = if o.replies > 1 {
            fx.found_rows_unknown
        } else {
            fx.found_rows_unknown_first
        };
        if (unknown || fx.found_rows_server) && o.error.is_none() {
            if self.found_rows_lost.is_some() {
                // (The connection's count may be another client's.)
                return FoundRowsOnConn::Unknown;
            }
            if !unknown
                && fx.found_rows_one_row
                && o.replies <= 1
                && o.result_sets == 1
                && o.rows == 1
                && self.last_found_rows == 1
                && !self.found_rows_calc
            {
                // Its row, or the count before it: 1 either way; the
                // connection's own may be another's.
                return if conn_has_mine == Some(true) {
                    FoundRowsOnConn::Mine
                } else {
                    FoundRowsOnConn::Unknown
                };
            }
            // Asked of the server at once (`found_rows_calc`), on the
            // connection that held the client's count before it
            // (`found_rows_restore`).
            self.found_rows_calc = true;
            FoundRowsOnConn::Unknown
        } else if fx.selects && o.result_sets > 0 && o.error.is_none() {
            // (The last statement's: its result set is the last.)
            self.last_found_rows = o.last_rows;
            self.found_rows_lost = None;
            self.found_rows_calc = fx.pin_next == Some(Pin::FoundRows) || fx.limit_offset;
            FoundRowsOnConn::Mine
        } else if o.error.is_some() && (fx.selects || fx.statements > 1) {
            // A SELECT that failed leaves the server's count as far as it
            // got (0 when a function failed while it ran, the earlier one
            // when it failed before: a missing table, a syntax error), and
            // only the server knows which. Where the server held the
            // client's own count before, it is asked; elsewhere the count
            // stays the client's (exact for failures before running).
            match conn_has_mine {
                Some(mine) => {
                    self.found_rows_calc = mine;
                    FoundRowsOnConn::Unknown
                }
                None => FoundRowsOnConn::Unchanged,
            }
        } else {
            FoundRowsOnConn::Unchanged
        }
    }

    /// Takes in what the server said about the session after a command:
    /// transaction and autocommit status, and the tracker's changes
    /// (variables are recorded for replay, a new default database is
    /// followed, any other change pins unless the command's text explains
    /// it). `restores`: the variables whose `SET STATEMENT` restore the
    /// connection has not reported yet (`BackendConn::restores`); a
    /// statement that runs no stored code cannot change them itself, so
    /// their report (and the state change it flags) is that restore: the
    /// session's value again, no setting and no pin. A reply that shows
    /// the tracker lost count of what the text set (`backend/tracker.rs`)
    /// says so in `tracking_lost`.
    pub fn observe(&mut self, o: &Outcome, restores: &[String]) -> ForConn {
        let mut out = ForConn {
            tracking_lost: crate::backend::tracker::lost(
                self.set_vars.iter().chain(&self.statement_vars),
                &o.changes,
            ),
            ..ForConn::default()
        };
        let mut restored = false;
        let plain = self.plain
            && !self.pins.contains(&Pin::StoredFunction)
            && !self.pins.contains(&Pin::WriteEffects);
        let known = (!self.insert_id_unsure && !self.insert_id_lost).then_some(self.last_insert_id);
        match insert_id::after_reply(self.insert_id_rule, o, known) {
            After::Is(n) => {
                self.last_insert_id = n;
                self.insert_id_unsure = false;
                self.insert_id_lost = false;
                out.insert_id = Some(n);
            }
            After::Stays => {}
            After::Unknown => {
                self.insert_id_unsure = true;
                out.insert_id_unknown = true;
            }
        }
        match o.status {
            Some(st) => {
                // A read-only transaction's characteristic may outlive it
                // (see `after_text`).
                if st & STATUS_IN_TRANS_READONLY != 0 {
                    self.take(Pin::SetTransaction, &mut out);
                }
                self.in_trans = st & STATUS_IN_TRANS != 0;
                self.autocommit = st & STATUS_AUTOCOMMIT != 0;
                self.autocommit_sure = true;
                self.pins.remove(&Pin::MaybeInTransaction);
            }
            // An error packet has no status: under autocommit=0 the
            // statement may have opened a transaction all the same.
            None if !self.autocommit => self.take(Pin::MaybeInTransaction, &mut out),
            None => {}
        }
        let mut state = false;
        for ch in &o.changes {
            match ch {
                // An earlier SET STATEMENT's restore, reported late (whatever the
                // variable: its value is the session's again).
                Change::SysVar(name, _)
                    if plain
                        && !self.explained
                        && restores.iter().any(|v| v.eq_ignore_ascii_case(name)) =>
                {
                    restored = true
                }
                Change::SysVar(name, _) if name.starts_with("session_track") => {
                    self.take(Pin::Tracking, &mut out)
                }
                // Read-only: the result of the statement, not a setting;
                // the client's own from now on.
                // (Not from a tracker that lost count: it may be stale, or
                // another variable's report; the server is asked.)
                Change::SysVar(name, v) if name == "last_gtid" => {
                    if !out.tracking_lost {
                        self.own_gtid = Some(v.clone());
                    }
                }
                // The replication connection's, for every session: the
                // text said it was a global change.
                Change::SysVar(name, _)
                    if sql::REPLICATION_CONNECTION_VARIABLES.contains(&name.as_str()) => {}
                // The clock and the thread id: what the text set is
                // recorded (`after_text`). Named where the text set
                // nothing, it is a tracker that lost count
                // (`tracking_lost`: MariaDB 11.4 names `timestamp` in
                // last_gtid's place), or stored code, which its call pins.
                Change::SysVar(name, _) if sql::OWN_DEFAULT_VARIABLES.contains(&name.as_str()) => {}
                // Used once by the server: never replayed (the text pinned
                // the client; a procedure's SET does so here).
                Change::SysVar(name, _) if sql::ONE_SHOT_VARIABLES.contains(&name.as_str()) => {
                    self.take(Pin::OneShotVariable, &mut out)
                }
                // Set for one statement only (SET STATEMENT ... FOR).
                Change::SysVar(name, _)
                    if self
                        .statement_vars
                        .iter()
                        .any(|v| v.eq_ignore_ascii_case(name)) => {}
                Change::SysVar(name, value) => {
                    // A new character_set_connection drops a collation
                    // chosen earlier (`upsert`); one named by the same
                    // statement comes back from its text (`after_text`).
                    let s = Setting::from_server(name, value);
                    upsert(&mut self.settings, &s);
                    self.settings_gen += 1;
                    out.settings.push(s);
                }
                Change::Schema(db) => {
                    let db = (!db.is_empty()).then(|| db.clone());
                    self.db.clone_from(&db);
                    out.db = Some(db);
                }
                Change::State => state = true,
                Change::Other(_) => {}
            }
        }
        out.reported_vars = !o.changes.is_empty();
        if state && !self.explained && !restored {
            self.take(Pin::ServerState, &mut out);
        }
        // Autocommit as the server has it must be what a replay gives (on a
        // new session, which starts as the servers' do).
        if o.status.is_some()
            && self.autocommit != sql::replayed_autocommit(&self.settings, self.fresh.autocommit)
        {
            self.take(Pin::ServerState, &mut out);
        }
        out
    }

    /// What the statement's text says it did, where the server's tracker
    /// is silent (`tracked`: the connection reports settings itself):
    /// settings, a dropped default database, pins released, one-statement
    /// pins.
    pub fn after_text(&mut self, fx: &Effects, o: &Outcome, tracked: bool) -> ForConn {
        let mut out = ForConn::default();
        let ok = o.error.is_none();
        if ok && fx.drops_db.is_some() && fx.drops_db == self.db {
            self.db = None;
            out.db = Some(None);
        }
        if !tracked && !fx.read {
            self.own_gtid = None;
            self.gtid_unseen = true;
        }
        if ok && !tracked {
            for s in &fx.settings {
                upsert(&mut self.settings, s);
                self.settings_gen += 1;
                out.settings.push(s.clone());
            }
            if let Some(db) = fx.use_db.clone() {
                self.db = Some(db.clone());
                out.db = Some(Some(db));
            }
        } else if ok {
            // A tracking server is silent about some SETs that change a
            // variable (MariaDB 10.11 reports `SET max_sp_recursion_depth
            // = 7` but not `SET @@max_sp_recursion_depth = 20`): a variable
            // the text set by value and the server did not report is
            // recorded from the text, or it would not follow the client to
            // another connection.
            let collations: Vec<Setting> = fx
                .settings
                .iter()
                .filter_map(Setting::names_collation)
                .collect();
            for s in fx
                .settings
                .iter()
                .filter(|s| is_variable(&s.name))
                .chain(collations.iter())
            {
                let reported = !sql::OWN_DEFAULT_VARIABLES.contains(&s.name.as_str())
                    && o.changes.iter().any(
                        |ch| matches!(ch, Change::SysVar(n, _) if n.eq_ignore_ascii_case(&s.name)),
                    );
                if !reported {
                    upsert(&mut self.settings, s);
                    self.settings_gen += 1;
                    out.settings.push(s.clone());
                }
            }
        }
        for p in &fx.unpins {
            self.pins.remove(p);
        }
        if ok {
            self.follow_temp_tables_and_locks(fx);
        } else if fx.statements > 1 {
            // Some of the statements before the failing one ran: what they
            // made or took is not known any more.
            if !fx.temp_ops.is_empty() {
                self.temp_tables = None;
            }
            if !fx.lock_ops.is_empty() {
                self.locks = None;
            }
        }
        // Transaction characteristics (a SET TRANSACTION's, or a read-only
        // transaction's) stay on the server until COMMIT or ROLLBACK: a
        // statement that touches no table (SELECT 1, SET, DO, a refused
        // one) leaves a SET TRANSACTION pending, and a read-only
        // transaction ended by SET autocommit = 1 leaves the session read
        // only, the server's status saying neither. Until then the
        // connection stays the client's.
        if ok && fx.ends_transaction && !self.in_trans {
            self.pins.remove(&Pin::SetTransaction);
        }
        // A savepoint ends with its transaction, which autocommit=0 keeps
        // open before any table is touched, the server reporting none
        // (autocommit on and no transaction: it ended at once).
        if self.pins.contains(&Pin::Savepoint) {
            if self.in_trans {
                self.savepoint_began = true;
            } else if self.savepoint_began || self.autocommit || (ok && fx.ends_transaction) {
                self.pins.remove(&Pin::Savepoint);
                self.savepoint_began = false;
            }
        }
        // (LAST_INSERT_ID() needs no pin: the id travels with the replay.)
        if let Some(p) = fx.pin_next {
            if self.mode == Mode::Transaction {
                out.pinned.push(p);
            }
            self.pin_next = Some(p);
        }
        out
    }

    /// Releases the temporary-table and named-lock pins when the client has
    /// dropped every temporary table it made and released every lock it
    /// took — as far as the statements' own text says; anything made out
    /// of sight (a procedure, a computed lock name) keeps the pin.
    fn follow_temp_tables_and_locks(&mut self, fx: &Effects) {
        for op in &fx.temp_ops {
            match (op, self.temp_tables.as_mut()) {
                (TempOp::Create(n), Some(set)) if !n.is_empty() => {
                    set.insert(n.clone());
                }
                (TempOp::Create(_), _) => self.temp_tables = None,
                (TempOp::Drop(n), Some(set)) => {
                    set.remove(n);
                }
                (TempOp::Drop(_), None) => {}
            }
        }
        if !fx.temp_ops.is_empty() && self.temp_tables.as_ref().is_some_and(|s| s.is_empty()) {
            self.pins.remove(&Pin::TemporaryTable);
        }
        for op in &fx.lock_ops {
            match (op, self.locks.as_mut()) {
                (LockOp::Get(Some(n)), Some(m)) => *m.entry(n.clone()).or_default() += 1,
                (LockOp::Get(None), _) => self.locks = None,
                (LockOp::Release(Some(n)), Some(m)) => {
                    if let Some(c) = m.get_mut(n) {
                        *c -= 1;
                        if *c == 0 {
                            m.remove(n);
                        }
                    }
                }
                (LockOp::ReleaseAll, _) => self.locks = Some(BTreeMap::new()),
                _ => {}
            }
        }
        if !fx.lock_ops.is_empty() && self.locks.as_ref().is_some_and(|m| m.is_empty()) {
            self.pins.remove(&Pin::GetLock);
        }
    }

    /// A SET of session variables to computed values pins the client
    /// until the server has said what each one became: a tracking
    /// backend's report is recorded for replay like any other setting, so
    /// the pin goes when every such variable was reported (and the
    /// statement took no other pin of that kind, e.g. SET ROLE).
    pub fn release_computed_settings(&mut self, fx: &Effects, o: &Outcome, tracked: bool) {
        let by_assignment = fx.pins.iter().filter(|p| **p == Pin::SetExpression).count();
        if !tracked
            || o.error.is_some()
            || fx.computed.is_empty()
            || by_assignment != fx.computed.len()
        {
            return;
        }
        let reported = fx.computed.iter().all(|name| {
            o.changes
                .iter()
                .any(|ch| matches!(ch, Change::SysVar(n, _) if n == name))
        });
        if reported {
            self.pins.remove(&Pin::SetExpression);
        }
    }

    /// Prepared-statement pins follow the open cursors and long data;
    /// returns the pins newly taken.
    pub fn update_stmt_pins(&mut self) -> Vec<Pin> {
        let mut taken = Vec::new();
        for (p, on) in [
            (Pin::Cursor, !self.cursors.is_empty()),
            (Pin::LongData, !self.long_data.is_empty()),
        ] {
            if !on {
                self.pins.remove(&p);
            } else if self.pins.insert(p) {
                taken.push(p);
            }
        }
        taken
    }

    /// A statement that asks ROW_COUNT(), FOUND_ROWS() or `@@last_gtid`
    /// gets the client's own values written in: the relay knows them from
    /// the replies, while the connection may have run other clients'
    /// statements (or the relay's own) since. FOUND_ROWS() after
    /// SQL_CALC_FOUND_ROWS is the server's (the connection is kept for
    /// it); `@@last_gtid` the one the server reported for the client's
    /// last write, '' before any, the server's when a write ran where
    /// nothing is reported; a text of several statements is sent as it is,
    /// and so is a definition the server keeps (`sql::evaluated_now`: a
    /// routine's body would keep the literal for every later call) — but
    /// for a CREATE TABLE's counts (`sql::creates_table`).
    /// `toks` are the whole text's tokens as the session wrote it, in
    /// `dialect` (under NO_BACKSLASH_ESCAPES `'a\'` ends a string, and a
    /// call after it is one); a text rewritten is lexed again for the
    /// next rewrite (rare: a statement reading two of them).
    /// `None`: a rewrite would not read as the text did (`sql::reads_as_before`),
    /// to be refused.
    pub fn own_counts<'q>(
        &self,
        text: &'q [u8],
        toks: &[sql::Token],
        dialect: sqlfleet_dump::lex::Dialect,
        fx: &Effects,
    ) -> Option<std::borrow::Cow<'q, [u8]>> {
        use std::borrow::Cow;
        if !(fx.reads_diagnostics || fx.reads_last_gtid) || fx.statements != 1 {
            return Some(Cow::Borrowed(text));
        }
        // A CREATE TABLE's SELECT runs now too, but a DEFAULT there may
        // keep `@@last_gtid` (`sql::creates_table`): the counts only.
        let (now, counts_only) = if sql::evaluated_now(toks) {
            (true, false)
        } else {
            (sql::creates_table(toks), true)
        };
        if !now {
            return Some(Cow::Borrowed(text));
        }
        // (No write since the login or a reset: '', as the server's own
        // answer to a new session.)
        let gtid = match (&self.own_gtid, self.gtid_unseen) {
            (Some(g), _) => Some(g.as_str()),
            (None, false) => Some(""),
            (None, true) => None,
        }
        .filter(|_| fx.reads_last_gtid && !counts_only);
        let found = (fx.reads_diagnostics && !self.found_rows_calc)
            .then(|| i64::try_from(self.last_found_rows).unwrap_or(i64::MAX));
        let row_count = fx.reads_diagnostics.then_some(self.last_row_count);
        let mut out = Cow::Borrowed(text);
        let mut relexed: Option<Vec<sql::Token>> = None;
        let cs = dialect.charset;
        type Rewrite<'f> = &'f dyn Fn(&[u8], &[sql::Token]) -> Option<Vec<u8>>;
        let gtid_literal = gtid.map(sqlfleet_conn::quote::literal).unwrap_or_default();
        let number = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        let (rows_literal, found_literal) = (number(row_count), number(found));
        let steps: [(Rewrite<'_>, &[u8]); 3] = [
            (
                &|q, t| gtid.and_then(|g| sql::substitute_var(q, t, cs, "last_gtid", g)),
                gtid_literal.as_bytes(),
            ),
            (
                &|q, t| row_count.and_then(|v| sql::substitute_call(q, t, cs, "ROW_COUNT", v)),
                rows_literal.as_bytes(),
            ),
            (
                &|q, t| found.and_then(|v| sql::substitute_call(q, t, cs, "FOUND_ROWS", v)),
                found_literal.as_bytes(),
            ),
        ];
        for (step, value) in steps {
            let t = relexed.as_deref().unwrap_or(toks);
            if let Some(v) = step(&out, t) {
                let new = sqlfleet_dump::lex::lex_in(&v, dialect).toks;
                if !sql::reads_as_before((&out, t), (&v, &new), value) {
                    return None;
                }
                relexed = Some(new);
                out = Cow::Owned(v);
            }
        }
        Some(out)
    }

    /// COM_RESET_CONNECTION: the session is a new one ([`Self::clear`]).
    /// A reset that ran on the connection the client holds for its status
    /// counters (FLUSH STATUS) zeroed them there as well: the client's
    /// counters live on that connection still, and it keeps it. The
    /// server's reset keeps the session's role and profile history: a
    /// client that may have either (`Pin::Role`, `Pin::Traces`) keeps its
    /// connection too.
    pub fn reset(&mut self, ran_on_held: bool) {
        let kept: Vec<Pin> = [Pin::SessionStatus, Pin::Role, Pin::Traces]
            .into_iter()
            .filter(|p| ran_on_held && self.pins.contains(p))
            .collect();
        self.clear();
        self.pins.extend(kept);
    }

    /// COM_RESET_CONNECTION or COM_CHANGE_USER: the session is a new one
    /// (prepared statements are the caller's to drop).
    pub fn clear(&mut self) {
        self.settings.clear();
        self.settings_gen += 1;
        self.cursors.clear();
        self.long_data.clear();
        self.pins.retain(|p| *p == Pin::Session);
        self.pin_next = None;
        self.savepoint_began = false;
        self.in_trans = false;
        self.autocommit = self.fresh.autocommit;
        self.autocommit_sure = self.fresh.sure;
        // As the server's reset (THD::change_user, for both commands):
        // ROW_COUNT() is 0 (the command's OK) and LAST_INSERT_ID() 0;
        // FOUND_ROWS() keeps the previous SELECT's count.
        self.last_row_count = 0;
        self.last_insert_id = 0;
        self.insert_id_unsure = false;
        self.insert_id_lost = false;
        self.own_gtid = None;
        self.gtid_unseen = false;
        // A reset drops temporary tables and releases named locks.
        self.temp_tables = Some(Default::default());
        self.locks = Some(Default::default());
    }
}

#[cfg(test)]
mod tests;
