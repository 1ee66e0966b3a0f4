//! A backend connection's session as the relay knows it — its settings,
//! default database, LAST_INSERT_ID(), whose FOUND_ROWS() it holds, left
//! diagnostics, prepared statements — read and changed only through these
//! methods. The frontend says what a statement did (`note_*`), and asks
//! what brings the connection to a client's session (`replay_for`, the diff
//! of settings: what the client has that the connection lacks, and
//! `= DEFAULT` for what another client left), then reports it done
//! (`replayed`). Pure: the I/O stays with the caller.

use std::sync::Arc;

use crate::backend::dial::{BackendAccount, Shape};
use crate::backend::pool::{undo_setting, BackendConn};
use crate::protocol::sql::{upsert, Setting};
use crate::protocol::stmt::BackendStmts;
use crate::protocol::track::TrackView;

/// What brings a connection to a client's settings.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Replay {
    /// Another client left a setting only a reset undoes (the character
    /// set variables come from the login's collation): reset first, then
    /// ask again.
    pub reset_first: bool,
    /// The assignments of one `SET` (the client's settings the connection
    /// lacks, its LAST_INSERT_ID(), `= DEFAULT` for the others); empty
    /// when the connection has the client's session already.
    pub set: Vec<String>,
}

impl BackendConn {
    /// The backend (index in the configuration) it is connected to.
    pub fn backend(&self) -> usize {
        self.backend
    }

    /// The server's thread id for this connection (for KILL).
    pub fn thread_id(&self) -> u32 {
        self.thread_id
    }

    /// Its default database.
    pub fn db(&self) -> Option<&str> {
        self.db.as_deref()
    }

    /// Capabilities in effect on it.
    pub fn caps(&self) -> u32 {
        self.caps
    }

    /// What it was opened as.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Per-user mode: the client account it is logged in as.
    pub fn account(&self) -> Option<&Arc<BackendAccount>> {
        self.account.as_ref()
    }

    /// Session tracking is on: OKs report changed variables and state.
    pub fn tracking(&self) -> bool {
        self.tracking
    }

    /// What a tracking client's own session would report.
    pub fn client_tracking(&self) -> Option<&Arc<TrackView>> {
        self.client_tracking.as_ref()
    }

    /// The last statement on it left warnings or an error.
    pub fn diagnostics_dirty(&self) -> bool {
        self.diagnostics_dirty
    }

    /// Whether the server's FOUND_ROWS() on it is client `id`'s.
    pub fn holds_found_rows_of(&self, id: u32) -> bool {
        self.found_rows_of == Some(id)
    }

    /// It carries settings a client made (its own or another's).
    pub fn has_settings(&self) -> bool {
        !self.settings.is_empty()
    }

    /// Its prepared statements.
    pub fn stmts(&mut self) -> &mut BackendStmts {
        &mut self.stmts
    }

    /// What brings it to a client's `settings` and `last_insert_id`.
    pub fn replay_for(&self, settings: &[Setting], last_insert_id: u64) -> Replay {
        diff(
            &self.settings,
            self.last_insert_id,
            self.shape.caps,
            settings,
            last_insert_id,
        )
    }

    /// Whether it must be reset before it takes a client's `settings`
    /// (as `replay_for` would say, without building the SET).
    pub fn needs_reset_for(&self, settings: &[Setting]) -> bool {
        reset_needed(&self.settings, settings)
    }

    /// The replay's `SET` ran: it has the client's session now.
    pub fn replayed(&mut self, settings: &[Setting], last_insert_id: u64) {
        self.settings = settings.to_vec();
        self.last_insert_id = Some(last_insert_id);
    }

    /// A statement on it set `s` (replacing its earlier value).
    pub fn note_setting(&mut self, s: &Setting) {
        upsert(&mut self.settings, s);
    }

    /// What a statement on it changed: settings, the default database,
    /// LAST_INSERT_ID().
    pub fn note_changes(
        &mut self,
        settings: &[Setting],
        db: Option<Option<String>>,
        insert_id: Option<u64>,
    ) {
        for s in settings {
            self.note_setting(s);
        }
        if let Some(db) = db {
            self.db = db;
        }
        if let Some(id) = insert_id {
            self.last_insert_id = Some(id);
        }
    }

    /// MariaDB restores what a `SET STATEMENT ... FOR` set after the
    /// statement, and its tracker reports the restored values (and a
    /// state change) only with the next reply that reports anything —
    /// a COMMIT's `last_gtid`, whoever's statement it is. The variables
    /// still to be reported so, so that the report is known for what it
    /// is: not a change of the session (`ClientState::observe`).
    pub fn restores(&self) -> &[String] {
        &self.restores
    }

    /// A `SET STATEMENT` of `vars` ran on it (the client's, or the
    /// relay's own causal wait or question).
    pub fn note_restores<S: AsRef<str>>(&mut self, vars: &[S]) {
        for v in vars {
            let v = v.as_ref();
            if !self.restores.iter().any(|r| r.eq_ignore_ascii_case(v)) {
                self.restores.push(v.to_ascii_lowercase());
            }
        }
    }

    /// The server reported variables: every pending restore went with
    /// them (its tracker sends all it marked at once).
    pub fn restores_reported(&mut self) {
        self.restores.clear();
    }

    /// A reply on it showed its variable tracker lost count
    /// (`tracker.rs`; mended by `mend_tracking`). Only a connection with
    /// tracking on has one.
    pub fn note_tracking_lost(&mut self) {
        self.tracking_lost = self.tracking;
    }

    /// A reply showed its variable tracker lost count, not mended yet.
    pub fn tracking_lost(&self) -> bool {
        self.tracking_lost
    }

    /// Its `@@last_gtid` as the relay last learned it.
    pub fn last_gtid(&self) -> Option<&str> {
        self.last_gtid.as_deref()
    }

    /// Its `@@last_gtid` is now `gtid` (reported, or asked). (Its buffer
    /// kept: every logged write's reply comes here.)
    pub fn note_last_gtid(&mut self, gtid: &str) {
        let g = self.last_gtid.get_or_insert_with(String::new);
        g.clear();
        g.push_str(gtid);
    }

    /// Its default database is now `db`.
    pub fn note_db(&mut self, db: Option<String>) {
        self.db = db;
    }

    /// Its LAST_INSERT_ID() is now `id`.
    pub fn note_last_insert_id(&mut self, id: u64) {
        self.last_insert_id = Some(id);
    }

    /// Its LAST_INSERT_ID() is not known (a statement whose id only the
    /// server knows, a replay): set again for the next client.
    pub fn forget_last_insert_id(&mut self) {
        self.last_insert_id = None;
    }

    /// Whose FOUND_ROWS() it holds now: client `id`'s, or nobody's known.
    pub fn note_found_rows_of(&mut self, id: Option<u32>) {
        self.found_rows_of = id;
    }

    /// A statement left warnings or an error (`dirty`), or cleared them
    /// (one that opens a table does).
    pub fn note_diagnostics(&mut self, dirty: bool, uses_tables: bool) {
        self.diagnostics_dirty = dirty || (self.diagnostics_dirty && !uses_tables);
    }

    /// Its diagnostics were emptied.
    pub fn diagnostics_cleared(&mut self) {
        self.diagnostics_dirty = false;
    }
}

/// Whether a connection that has settings `have` must be reset before it
/// can take a client's `want`: another client left a setting only a reset
/// undoes.
fn reset_needed(have: &[Setting], want: &[Setting]) -> bool {
    have.iter()
        .any(|s| s.undone_by_reset() && !want.contains(s))
}

/// What brings a connection that has settings `have` and LAST_INSERT_ID()
/// `have_id` (`None`: not known) (logged in with capabilities `caps`) to a
/// client's `want` and `want_id`.
pub fn diff(
    have: &[Setting],
    have_id: Option<u64>,
    caps: u32,
    want: &[Setting],
    want_id: u64,
) -> Replay {
    let reset_first = reset_needed(have, want);
    // The client's settings in its own order (a later one may undo an
    // earlier one on the server: a collation after its character set).
    let mut set: Vec<String> = want
        .iter()
        .filter(|s| !have.contains(s))
        .map(|s| s.text.clone())
        .collect();
    // LAST_INSERT_ID() is per connection: the client's goes with it.
    if have_id != Some(want_id) {
        set.push(format!("@@session.last_insert_id = {want_id}"));
    }
    for s in have {
        if !want.iter().any(|x| x.name == s.name) {
            set.push(undo_setting(&s.name, caps));
        }
    }
    Replay { reset_first, set }
}

#[cfg(test)]
mod tests;
