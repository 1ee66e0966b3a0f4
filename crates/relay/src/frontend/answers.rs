//! Replies the relay gives without a server round trip: the server's own
//! reply to a connect-time read of server variables (`SELECT
//! @@version_comment LIMIT 1` from the mariadb client, `SELECT
//! @@max_allowed_packet` and the like from drivers) or to a SET of session
//! variables (`SET NAMES utf8mb4`, `SET autocommit=1`, ...), recorded once
//! byte for byte as a client of the same shape received it, and replayed
//! to later clients of that shape in the same state.
//!
//! Exact by construction: an entry is the very bytes the server sent (after
//! the relay's own rewriting for the client's capabilities), kept only when
//! the reply had nothing session-specific in it (a read: one result set of
//! one row, no warnings, status = autocommit only, no tracker data; a SET:
//! an OK of no rows and no warnings, autocommit on, no transaction, nothing
//! pinned), and replayed only to a client in the state it was recorded in
//! (transaction mode, no backend connection held, the same session
//! settings, autocommit on, no transaction). A SET's entry also keeps what
//! it left of the session (its settings as the server reported them,
//! ROW_COUNT()): the same statement in the same state leaves the same, and
//! the next statement's connection is brought to those settings as after
//! any SET the server ran. The variables are a fixed list whose value a new pooled
//! connection would give any client (no per-connection counters, ids,
//! clocks or tracking settings). An entry lives [`TTL`] and is dropped at
//! once when a client sets a global through the relay (the pool's epoch);
//! a global changed on the server by other means is seen within [`TTL`],
//! as a pooled connection sees it only once it is reset.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlfleet_dump::lex::{lex, Tok};

use crate::backend::pool::Shape;
use crate::protocol::sql::Setting;

/// How long a recorded reply is replayed.
pub const TTL: Duration = Duration::from_secs(1);

/// Replies larger than this are not kept (a variable read is tiny).
const MAX_REPLY: usize = 4096;

/// At most this many distinct statements are kept.
const MAX_ENTRIES: usize = 256;

/// Server variables whose value on a fresh pooled connection is what a
/// direct connection of the same shape would read: static server facts and
/// session values that start from the globals (or from the client's
/// collation, which is part of the key). Per-connection values
/// (`timestamp`, `last_insert_id`, `pseudo_thread_id`, `warning_count`,
/// ...), the relay's own (`session_track_*`) and routing facts
/// (`read_only`, `server_id`) are not here.
const VARIABLES: &[&str] = &[
    "auto_increment_increment",
    "auto_increment_offset",
    "character_set_client",
    "character_set_connection",
    "character_set_database",
    "character_set_results",
    "character_set_server",
    "character_set_system",
    "collation_connection",
    "collation_database",
    "collation_server",
    "default_storage_engine",
    "div_precision_increment",
    "init_connect",
    "interactive_timeout",
    "license",
    "lower_case_table_names",
    "max_allowed_packet",
    "net_buffer_length",
    "net_write_timeout",
    "performance_schema",
    "query_cache_size",
    "query_cache_type",
    "sql_mode",
    "system_time_zone",
    "time_zone",
    "transaction_isolation",
    "transaction_read_only",
    "tx_isolation",
    "tx_read_only",
    "version",
    "version_comment",
    "version_compile_machine",
    "version_compile_os",
    "version_malloc_library",
    "version_ssl_library",
    "wait_timeout",
];

/// Is `sql` (a COM_QUERY's text) a read of listed server variables only:
/// `SELECT @@[session.|global.|local.]name [[AS] alias], ... [LIMIT 1]`,
/// without comments, other expressions or a second statement?
pub fn is_variable_read(sql: &[u8]) -> bool {
    // Cheap refusals first: this runs on every statement a client without
    // a held connection sends.
    if sql.len() > 1024
        || !crate::protocol::sql::starts_with_word(sql, "SELECT")
        || !sql.windows(2).any(|w| w == b"@@")
        || sql.windows(2).any(|w| w == b"/*" || w == b"--")
        || sql.iter().any(|&c| c == b'#' || c == b';' || c == 0)
    {
        return false;
    }
    let toks = lex(sql).toks;
    let mut it = toks.iter().map(|(t, r)| (t, &sql[r.clone()])).peekable();
    if !matches!(it.next(), Some((Tok::Word(w), _)) if w == "SELECT") {
        return false;
    }
    loop {
        match it.next() {
            Some((Tok::SysVar(scope, name), _))
                if scope
                    .as_deref()
                    .is_none_or(|s| matches!(s, "session" | "global" | "local"))
                    && VARIABLES.contains(&name.as_str()) => {}
            _ => return false,
        }
        // An optional alias.
        if matches!(it.peek(), Some((Tok::Word(w), _)) if w == "AS") {
            it.next();
            if !matches!(it.next(), Some((Tok::Word(_) | Tok::Quoted(_), _))) {
                return false;
            }
        } else if matches!(it.peek(), Some((Tok::Word(w), _)) if w != "LIMIT")
            || matches!(it.peek(), Some((Tok::Quoted(_), _)))
        {
            it.next();
        }
        match it.next() {
            None => return true,
            Some((Tok::Punct(b','), _)) => continue,
            Some((Tok::Word(w), _)) if w == "LIMIT" => {
                return matches!(it.next(), Some((Tok::Literal, b"1"))) && it.next().is_none();
            }
            _ => return false,
        }
    }
}

/// What a recorded reply was recorded for: the backend that gave it, the
/// client's session shape, default database (`@@character_set_database`
/// follows it), backend account (per-user mode) and session settings (the
/// backend connection is brought to them before a statement runs), and
/// the statement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub backend: usize,
    pub shape: Shape,
    pub db: Option<String>,
    pub account: Option<String>,
    pub settings: Vec<Setting>,
    pub sql: Vec<u8>,
}

/// What a recorded statement left of the client's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    pub settings: Vec<Setting>,
    /// ROW_COUNT() after it.
    pub row_count: i64,
    /// FOUND_ROWS() after it (a SELECT; others leave it as it was).
    pub found_rows: Option<u64>,
}

struct Entry {
    reply: Arc<[u8]>,
    left: Arc<Left>,
    at: Instant,
    epoch: u64,
}

/// Is this statement (its effects as the relay reads them) one SET of
/// session variables whose reply and result can be recorded: to values
/// the text gives, no global, no `SET TRANSACTION` (next transaction only),
/// nothing pinned?
pub fn is_session_set(fx: &crate::protocol::sql::Effects) -> bool {
    fx.settings_only
        && fx.statements == 1
        && !fx.settings.is_empty()
        && fx.use_db.is_none()
        && fx.pins.is_empty()
        && fx.pin_next.is_none()
        && fx.computed.is_empty()
        && !fx.sets_global
        && fx.kill.is_none()
        && fx
            .settings
            .iter()
            .all(|s| !s.name.starts_with("transaction") && !s.name.starts_with("session_track"))
}

/// The recorded replies, shared by all sessions.
#[derive(Default)]
pub struct Answers {
    entries: Mutex<HashMap<Key, Entry>>,
}

impl Answers {
    /// The reply recorded for `key` at pool epoch `epoch`, and what it
    /// left of the session, if still fresh.
    pub fn get(&self, key: &Key, epoch: u64) -> Option<(Arc<[u8]>, Arc<Left>)> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let e = entries.get(key)?;
        (e.epoch == epoch && e.at.elapsed() < TTL).then(|| (e.reply.clone(), e.left.clone()))
    }

    /// Keeps `reply` (the whole reply as the client received it, packet
    /// headers included) for `key`, with what it left of the session.
    pub fn put(&self, key: Key, reply: Vec<u8>, left: Left, epoch: u64) {
        if reply.len() > MAX_REPLY {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, e| e.at.elapsed() < TTL);
            if entries.len() >= MAX_ENTRIES {
                return;
            }
        }
        entries.insert(
            key,
            Entry {
                reply: reply.into(),
                left: Arc::new(left),
                at: Instant::now(),
                epoch,
            },
        );
    }

    /// Forgets every recorded reply (a reload may renumber backends).
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_of_listed_variables_are_recognised() {
        for sql in [
            "select @@version_comment limit 1",
            "SELECT @@max_allowed_packet",
            "SELECT @@session.auto_increment_increment AS auto_increment_increment, @@character_set_client AS character_set_client, @@tx_isolation tx",
            "SELECT  @@global.max_allowed_packet ,@@wait_timeout",
            "select @@version_comment `c`",
        ] {
            assert!(is_variable_read(sql.as_bytes()), "{sql}");
        }
    }

    #[test]
    fn anything_else_is_not() {
        for sql in [
            "SELECT 1",
            "SELECT @@timestamp",
            "SELECT @@last_insert_id",
            "SELECT @@pseudo_thread_id",
            "SELECT @@read_only",
            "SELECT @@session_track_schema",
            "SELECT @@version, NOW()",
            "SELECT @@version FROM t",
            "SELECT @@version LIMIT 2",
            "SELECT @@version LIMIT 1, 1",
            "SELECT @@version; DROP TABLE t",
            "SELECT @@version /* x */",
            "SELECT @@version -- x",
            "SELECT @@version # x",
            "SELECT @@version INTO @v",
            "SELECT @@version INTO OUTFILE '/tmp/x'",
            "SELECT @@version, @v",
            "SELECT @@version + 1",
            "SELECT @@foo.version",
            "SET @@version = 1",
            "SELECT",
            "",
        ] {
            assert!(!is_variable_read(sql.as_bytes()), "{sql}");
        }
    }

    #[test]
    fn entries_follow_the_epoch_and_go_with_clear() {
        let a = Answers::default();
        let key = Key {
            backend: 0,
            shape: Shape::default(),
            db: None,
            account: None,
            settings: Vec::new(),
            sql: b"SELECT @@version".to_vec(),
        };
        let left = Left {
            settings: Vec::new(),
            row_count: -1,
            found_rows: Some(1),
        };
        a.put(key.clone(), b"reply".to_vec(), left.clone(), 1);
        let (reply, got) = a.get(&key, 1).expect("fresh");
        assert_eq!((&*reply, &*got), (&b"reply"[..], &left));
        assert_eq!(a.get(&key, 2), None, "a global set since: stale");
        a.clear();
        assert_eq!(a.get(&key, 1), None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(sql in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = is_variable_read(&sql);
        }
    }
}
