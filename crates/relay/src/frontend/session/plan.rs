//! What the relay does with a client's text statement once its route and
//! pins are taken, decided before any of it runs: a pure value from the
//! statement's effects, the client's session and the facts of the moment
//! (a connection held, the statement streamed, the journal and the cache
//! on). `Session::query` carries it out in this order: the streamed rest
//! read whole when the relay must see all of it, a recorded answer, the
//! result cache, the server (the reply digested for the journal). Table
//! test in plan/tests.rs, a row per rule.

use crate::config::Mode;
use crate::frontend::answers;
use crate::protocol::sql::{Effects, Token};
use sqlfleet_dump::lex::Dialect;

use super::journal;
use super::state::ClientState;

/// What the session knows at the moment, beside the statement and its
/// state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts {
    /// The client holds a backend connection (a recorded answer would
    /// skip what that connection's session has).
    pub held: bool,
    /// Only the statement's head was read; its rest waits on the socket.
    pub streamed: bool,
    /// Transactions are journaled for replay.
    pub journal: bool,
    /// The result cache has rules.
    pub caching: bool,
}

/// The decisions for one text statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatementPlan {
    /// A session SET or a connect-time variable read the server's
    /// recorded reply may answer (`answers.rs`): only on a plain session
    /// in transaction mode, with no connection held.
    pub local: bool,
    /// A streamed statement is read whole first: the relay's answer, or
    /// its own ROW_COUNT() / FOUND_ROWS() written in (`own_counts`), needs
    /// all of its text.
    pub read_whole: bool,
    /// A cache rule may answer it (the key is looked up).
    pub cache: bool,
    /// The reply is digested for the journal: a transaction is or may be
    /// open (an autocommit statement's reply is never replayed).
    pub digest: bool,
}

/// The plan for `text` (without its command byte), whose tokens (of
/// what was read of it) are `toks`, as written in `dialect`.
pub(crate) fn plan(
    (text, toks, dialect): (&[u8], &[Token], Dialect),
    fx: &Effects,
    st: &ClientState,
    f: Facts,
) -> StatementPlan {
    let local = st.mode() == Mode::Transaction
        && !f.held
        && st.is_plain()
        && (answers::is_session_set(fx) || answers::is_variable_read(text));
    // (The rewrite itself is made once, on the whole text, by the caller.)
    let rewrites = || {
        matches!(
            st.own_counts(text, toks, dialect, fx),
            Some(std::borrow::Cow::Owned(_)) | None
        )
    };
    StatementPlan {
        local,
        read_whole: f.streamed && (local || rewrites()),
        cache: f.caching && !local,
        digest: f.journal
            && (st.in_trans() || !st.autocommit() || journal::kind(text) == journal::Stmt::Begin),
    }
}

#[cfg(test)]
mod tests;
