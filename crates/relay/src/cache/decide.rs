//! Which statements' results may be cached, as a pure decision over what
//! the statement reader found and what the session is in. A result is
//! cached only when giving it again to another client of the same key
//! (account, database, session settings, capabilities, text) is what the
//! server would have answered: one plain SELECT, outside any transaction
//! with autocommit on, nothing held on the connection, and no part whose
//! value depends on the moment, the session or the connection (clocks,
//! random values, user and system variables, the account, ids, counts of
//! the previous statement, sequences, locks, waits, files, the server's
//! own status tables). A wrong "no" costs a server round trip, a wrong
//! "yes" a wrong answer: every doubt is a no.

use std::ops::Range;

use sqlfleet_dump::lex::Tok;

use crate::backend::write_scope::folded;
use crate::cache::Scope;
use crate::protocol::sql::{Effects, TableRef};

/// The session's side of the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// Autocommit on, no transaction, nothing pinned (`ClientState::is_plain`).
    pub plain: bool,
    /// The client holds a backend connection (its diagnostics or session
    /// live there).
    pub holds_conn: bool,
    /// Only the statement's head was read (`protocol/io/stream.rs`).
    pub streamed: bool,
}

/// [`VOLATILE`] as a set: every word of a statement that may be cached
/// is looked up (a hash and one comparison, where a binary search of the
/// list made a handful of comparisons per word).
static VOLATILE_SET: std::sync::LazyLock<
    std::collections::HashSet<&'static str, foldhash::fast::RandomState>,
> = std::sync::LazyLock::new(|| VOLATILE.iter().copied().collect());

/// Functions and keywords whose value is not the table data's: a
/// statement naming one is never cached.
const VOLATILE: &[&str] = &[
    "BENCHMARK",
    "BINLOG_GTID_POS",
    "CONNECTION_ID",
    "CURDATE",
    "CURRENT_DATE",
    "CURRENT_ROLE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "CURTIME",
    "ENCRYPT",
    "FOUND_ROWS",
    "GET_LOCK",
    "INFORMATION_SCHEMA",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "LASTVAL",
    "LAST_INSERT_ID",
    "LOAD_FILE",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "MASTER_GTID_WAIT",
    "MASTER_POS_WAIT",
    "NEXT",
    "NEXTVAL",
    "NOW",
    "PERFORMANCE_SCHEMA",
    "PREVIOUS",
    "RAND",
    "RANDOM_BYTES",
    "RELEASE_ALL_LOCKS",
    "RELEASE_LOCK",
    "ROW_COUNT",
    "SESSION_USER",
    "SETVAL",
    "SLEEP",
    "SQL_CALC_FOUND_ROWS",
    "SQL_NO_CACHE",
    "SYSDATE",
    "SYSTEM_USER",
    "SYS_GUID",
    "UNIX_TIMESTAMP",
    "USER",
    "UTC_DATE",
    "UTC_TIME",
    "UTC_TIMESTAMP",
    "UUID",
    "UUID_SHORT",
    "WSREP_LAST_SEEN_GTID",
    "WSREP_LAST_WRITTEN_GTID",
    "WSREP_SYNC_WAIT_UPTO_GTID",
];

/// Whether a statement naming `word` (upper case) is never cached: a
/// function or keyword of [`VOLATILE`]. A test holds the list to the
/// server's own (`information_schema.SQL_FUNCTIONS`).
pub fn volatile(word: &str) -> bool {
    VOLATILE_SET.contains(word)
}

/// Whether a statement the client sends makes the cache stale (before it
/// is sent and after its reply; `cache.rs`): everything that is not a
/// plain read, except what changes no data anyone can see — a SET of
/// session variables or a BEGIN outside a transaction (inside one, each
/// commits it), and a ROLLBACK (the writes it undoes were never seen).
/// The exceptions hold for one statement read whole (`whole`: not only
/// the head of a streamed one): a text of several may write after its
/// first. A SET that calls a stored function may write: it counts.
pub fn invalidates(fx: &Effects, text: &[u8], in_trans: bool, whole: bool) -> bool {
    use crate::protocol::sql::starts_with_word as word;
    if fx.read {
        return false;
    }
    if !whole || fx.statements != 1 {
        return true;
    }
    let begin = word(text, "BEGIN") || word(text, "START");
    if !in_trans && ((fx.settings_only && !fx.calls_stored) || begin) {
        return false;
    }
    let rollback = word(text, "ROLLBACK")
        && !String::from_utf8_lossy(text)
            .split_ascii_whitespace()
            .take(3)
            .any(|w| w.eq_ignore_ascii_case("TO"));
    !rollback
}

/// Whether the relay reads `text`'s names as the server does, whatever
/// the session's sql_mode and character set: no double quote (an
/// identifier under ANSI_QUOTES), no backslash (an escape, or not, under
/// NO_BACKSLASH_ESCAPES; a multi-byte character's second byte in sjis,
/// gbk, big5), no executable comment (`/*!`, `/*M!`: text the server runs
/// and the reader skips). Otherwise a scope is "everything".
fn names_read_alike(text: &[u8]) -> bool {
    !text.iter().any(|b| matches!(b, b'"' | b'\\'))
        && !text.windows(3).any(|w| w == b"/*!")
        && !text.windows(4).any(|w| w == b"/*M!")
}

/// What a cached SELECT reads: every identifier it names (a table it
/// reads is named, or read through a view, which the caller checks), so
/// a write to any of them makes it stale; everything when a name is not
/// ASCII or the text may read otherwise than the relay reads it.
pub fn read_scope(text: &[u8], toks: &[(Tok, Range<usize>)]) -> Scope {
    if !names_read_alike(text) {
        return Scope::Whole;
    }
    let mut names = std::collections::BTreeSet::new();
    for (t, _) in toks {
        if let Tok::Word(w) | Tok::Quoted(w) = t {
            match folded(w) {
                Some(n) => names.insert(n),
                None => return Scope::Whole,
            };
        }
    }
    Scope::Tables(std::sync::Arc::new(names))
}

/// The tables a write names, when an invalidation may be limited to what
/// it changes (`backend/write_scope.rs` then asks the catalog about
/// them): one INSERT, REPLACE, UPDATE or DELETE read whole, that calls no
/// routine and reads alike — in a transaction too, whose COMMIT then makes
/// stale the tables of every write in it (`Session::cache_stale`).
/// `None`: everything is stale.
pub fn write_tables<'a>(fx: &'a Effects, text: &[u8], whole: bool) -> Option<&'a [TableRef]> {
    use crate::protocol::sql::starts_with_word as word;
    let dml = ["INSERT", "REPLACE", "UPDATE", "DELETE"]
        .iter()
        .any(|w| word(text, w));
    let plain = whole && dml && fx.statements == 1 && !fx.calls_stored;
    (plain && !fx.writes.is_empty() && names_read_alike(text)).then_some(&fx.writes[..])
}

/// Whether a text may be a cacheable SELECT, by its first word after
/// blanks and opening parentheses: a cheap test before the cache is asked
/// for a text's kept analysis (a wrong `false` only costs a lexing).
pub fn may_select(sql: &[u8]) -> bool {
    use crate::protocol::sql::starts_with_word as word;
    let at = sql
        .iter()
        .position(|c| !c.is_ascii_whitespace() && *c != b'(')
        .unwrap_or(sql.len());
    word(&sql[at..], "SELECT") || word(&sql[at..], "WITH")
}

/// Whether the statement's result may be cached; `Err` says why not.
pub fn cacheable(
    fx: &Effects,
    toks: &[(Tok, Range<usize>)],
    s: Session,
) -> Result<(), &'static str> {
    if !s.plain {
        return Err("the session is in a transaction, has autocommit off or is pinned");
    }
    if s.holds_conn {
        return Err("the client holds a backend connection");
    }
    if s.streamed {
        return Err("the statement was too big to read whole");
    }
    let first = toks.iter().find_map(|(t, _)| match t {
        Tok::Word(w) => Some(w.as_str()),
        Tok::Punct(b'(') => None,
        _ => Some(""),
    });
    if !matches!(first, Some("SELECT" | "WITH")) {
        return Err("not a SELECT");
    }
    if fx.statements != 1 {
        return Err("more than one statement");
    }
    if !fx.read {
        return Err("not a plain read (a locking read, INTO, or a function with side effects)");
    }
    if fx.calls_stored {
        return Err("calls a stored function");
    }
    if fx.reads_diagnostics || fx.reads_insert_id || fx.reads_last_gtid {
        return Err("reads the previous statement's counts or the session's insert id");
    }
    if fx.limit_offset || fx.found_rows_unknown {
        return Err("its FOUND_ROWS() only the server knows");
    }
    // (A one-row grouping's count, its row or the one before it, is
    // learned at the miss and kept with the entry: `Hit::keeps`.)
    if fx.found_rows_server && !fx.found_rows_one_row {
        return Err("its FOUND_ROWS() is the server's alone");
    }
    if !fx.pins.is_empty()
        || fx.pin_next.is_some()
        || !fx.settings.is_empty()
        || fx.use_db.is_some()
    {
        return Err("changes or reads the session");
    }
    for (t, _) in toks {
        match t {
            Tok::UserVar | Tok::SysVar(..) => return Err("reads a user or system variable"),
            Tok::Word(w) if VOLATILE_SET.contains(w.as_str()) => {
                return Err("names a function or table whose value is not the data's")
            }
            Tok::Quoted(q)
                if q.eq_ignore_ascii_case("information_schema")
                    || q.eq_ignore_ascii_case("performance_schema") =>
            {
                return Err("names a function or table whose value is not the data's")
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::sql::Query;

    const PLAIN: Session = Session {
        plain: true,
        holds_conn: false,
        streamed: false,
    };

    /// A `false` only costs a lexing (a comment-led SELECT is read again);
    /// a `true`, a lookup of the kept analysis.
    #[test]
    fn which_texts_may_be_a_cacheable_select() {
        for (sql, want) in [
            ("SELECT 1", true),
            ("select k FROM t", true),
            ("  \n\tSELECT 1", true),
            ("((SELECT 1) UNION (SELECT 2))", true),
            ("WITH a AS (SELECT 1) SELECT * FROM a", true),
            ("SELECTX", false),
            ("SELECT", true),
            ("", false),
            ("INSERT INTO t SELECT 1", false),
            ("/* hint */ SELECT 1", false),
            ("SHOW TABLES", false),
        ] {
            assert_eq!(may_select(sql.as_bytes()), want, "{sql:?}");
        }
    }

    #[test]
    fn what_makes_the_cache_stale() {
        // (text, in a transaction, stale)
        let rows: &[(&str, bool, bool)] = &[
            ("BEGIN; UPDATE t SET a = 1; COMMIT", false, true),
            ("ROLLBACK; DELETE FROM t", true, true),
            ("SET @a = 1; DELETE FROM t", false, true),
            ("SELECT * FROM t", false, false),
            ("SELECT * FROM t", true, false),
            ("INSERT INTO t VALUES (1)", false, true),
            ("UPDATE t SET a = 1", true, true),
            ("COMMIT", true, true),
            ("COMMIT", false, true),
            ("ROLLBACK", true, false),
            ("ROLLBACK TO SAVEPOINT s", true, true),
            ("ROLLBACK WORK TO s", true, true),
            ("BEGIN", false, false),
            ("START TRANSACTION", false, false),
            ("BEGIN", true, true),
            ("SET NAMES utf8mb4", false, false),
            ("SET autocommit = 1", false, false),
            ("SET autocommit = 1", true, true),
            ("SET @a = f()", false, true),
            ("CREATE TABLE x (a INT)", false, true),
            ("CALL p()", false, true),
            ("SELECT * FROM t FOR UPDATE", false, true),
            ("DO RELEASE_LOCK('a')", false, true),
        ];
        for (sql, in_trans, want) in rows {
            let q = Query::new(sql.as_bytes());
            assert_eq!(
                invalidates(&q.effects(), sql.as_bytes(), *in_trans, true),
                *want,
                "{sql} (in a transaction: {in_trans})"
            );
        }
        // Only the head of a streamed statement was read: whatever it
        // starts with, it may write.
        for sql in ["SET @a = 'x'", "BEGIN", "ROLLBACK"] {
            let q = Query::new(sql.as_bytes());
            assert!(
                invalidates(&q.effects(), sql.as_bytes(), false, false),
                "{sql}"
            );
        }
    }

    /// What a cached SELECT reads, as names: `None` for everything.
    fn reads(sql: &str) -> Option<Vec<String>> {
        let q = Query::new(sql.as_bytes());
        match read_scope(sql.as_bytes(), q.tokens()) {
            Scope::Whole => None,
            Scope::Tables(t) => Some(t.iter().cloned().collect()),
        }
    }

    #[test]
    fn a_cached_read_reads_every_name_it_has_or_everything() {
        let has = |sql: &str, names: &[&str]| {
            let got = reads(sql).unwrap_or_else(|| panic!("{sql}: everything"));
            for n in names {
                assert!(got.iter().any(|g| g == n), "{sql}: {n} not in {got:?}");
            }
        };
        has("SELECT * FROM orders", &["orders"]);
        has(
            "SELECT * FROM Shop.Orders o JOIN `Users` u ON o.u = u.id",
            &["shop", "orders", "users"],
        );
        has(
            "SELECT (SELECT COUNT(*) FROM items) FROM t WHERE x IN (SELECT y FROM z)",
            &["items", "t", "z"],
        );
        has(
            "WITH c AS (SELECT * FROM base) SELECT * FROM c",
            &["base", "c"],
        );
        // What the relay may read otherwise than the server, and names
        // whose case has no one folding: everything.
        for sql in [
            "SELECT \"x\" FROM t",
            "SELECT 'a\\' FROM t",
            "SELECT /*!50000 a */ FROM t",
            "SELECT /*M!100000 a */ FROM t",
            "SELECT * FROM `Straße`",
            "SELECT * FROM `tåble`",
        ] {
            assert_eq!(reads(sql), None, "{sql}");
        }
    }

    #[test]
    fn a_write_names_its_tables_only_as_one_plain_statement() {
        // (text, read whole, tables)
        let rows: &[(&str, bool, Option<&[&str]>)] = &[
            ("INSERT INTO orders VALUES (1)", true, Some(&["orders"])),
            (
                "insert into shop.orders values (1)",
                true,
                Some(&["orders"]),
            ),
            ("REPLACE INTO t VALUES (1)", true, Some(&["t"])),
            (
                "UPDATE a JOIN b ON a.i = b.i SET a.v = 1",
                true,
                Some(&["a", "b"]),
            ),
            ("DELETE FROM t WHERE i = 1", true, Some(&["t"])),
            ("INSERT INTO t SELECT * FROM u", true, Some(&["t"])),
            // Only the head was read.
            ("INSERT INTO t VALUES (1)", false, None),
            ("INSERT INTO t VALUES (1); DELETE FROM u", true, None),
            ("INSERT INTO t VALUES (f())", true, None),
            ("CALL p()", true, None),
            ("TRUNCATE t", true, None),
            ("LOAD DATA INFILE 'f' INTO TABLE t", true, None),
            ("CREATE TABLE t (i INT)", true, None),
            ("INSERT INTO \"t\" VALUES (1)", true, None),
            ("UPDATE t SET v = 'a\\' ", true, None),
            ("INSERT /*!50000 INTO t */ VALUES (1)", true, None),
        ];
        for (sql, whole, want) in rows {
            let q = Query::new(sql.as_bytes());
            let fx = q.effects();
            let got = write_tables(&fx, sql.as_bytes(), *whole).map(|t| {
                t.iter()
                    .map(|r| r.name.to_ascii_lowercase())
                    .collect::<Vec<_>>()
            });
            let want = want.map(|w| w.iter().map(|n| n.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{sql} whole={whole}");
        }
    }

    #[test]
    fn the_volatile_list_is_sorted_unique_and_its_set_holds_each() {
        let mut sorted = VOLATILE.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, VOLATILE);
        assert_eq!(VOLATILE_SET.len(), VOLATILE.len());
        for w in VOLATILE {
            assert!(VOLATILE_SET.contains(w), "{w}");
        }
        assert!(!VOLATILE_SET.contains("SELECT"));
    }

    /// One row per reason, and the statements that pass.
    #[test]
    fn what_may_be_cached() {
        let held = Session {
            holds_conn: true,
            ..PLAIN
        };
        let in_txn = Session {
            plain: false,
            ..PLAIN
        };
        let streamed = Session {
            streamed: true,
            ..PLAIN
        };

        let rows: &[(&str, Session, bool)] = &[
            ("SELECT id, name FROM products WHERE id = 7", PLAIN, true),
            (
                "select count(*) from shop.orders o join shop.items i on i.o = o.id",
                PLAIN,
                true,
            ),
            ("WITH x AS (SELECT 1 AS a) SELECT a FROM x", PLAIN, true),
            ("(SELECT 1) UNION (SELECT 2)", PLAIN, true),
            ("SELECT DATABASE(), VERSION()", PLAIN, true),
            ("SELECT id FROM t", held, false),
            ("SELECT id FROM t", in_txn, false),
            ("SELECT id FROM t", streamed, false),
            ("SELECT COUNT(*) FROM t WHERE id = 7", PLAIN, true),
            ("SELECT k, COUNT(*) FROM t GROUP BY k", PLAIN, true),
            ("SELECT COUNT(*) FROM t HAVING COUNT(*) > 1", PLAIN, false),
            ("SELECT id FROM t FOR UPDATE", PLAIN, false),
            ("SELECT id FROM t LOCK IN SHARE MODE", PLAIN, false),
            ("SELECT id INTO @x FROM t", PLAIN, false),
            ("SELECT 1; SELECT 2", PLAIN, false),
            ("INSERT INTO t VALUES (1)", PLAIN, false),
            ("SHOW TABLES", PLAIN, false),
            ("DO 1", PLAIN, false),
            ("SELECT NOW()", PLAIN, false),
            ("SELECT * FROM t WHERE d > CURRENT_TIMESTAMP", PLAIN, false),
            ("SELECT RAND()", PLAIN, false),
            ("SELECT UUID()", PLAIN, false),
            ("SELECT CURRENT_USER()", PLAIN, false),
            ("SELECT USER()", PLAIN, false),
            ("SELECT CONNECTION_ID()", PLAIN, false),
            ("SELECT LAST_INSERT_ID()", PLAIN, false),
            ("SELECT FOUND_ROWS()", PLAIN, false),
            ("SELECT ROW_COUNT()", PLAIN, false),
            ("SELECT NEXT VALUE FOR s", PLAIN, false),
            ("SELECT NEXTVAL(s)", PLAIN, false),
            ("SELECT @a", PLAIN, false),
            ("SELECT @@sql_mode", PLAIN, false),
            ("SELECT SLEEP(1)", PLAIN, false),
            ("SELECT GET_LOCK('a', 0)", PLAIN, false),
            ("SELECT SQL_NO_CACHE * FROM t", PLAIN, false),
            ("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 3", PLAIN, false),
            ("SELECT * FROM t LIMIT 10, 5", PLAIN, false),
            ("SELECT * FROM information_schema.processlist", PLAIN, false),
            ("SELECT * FROM `performance_schema`.threads", PLAIN, false),
            ("SELECT f(1)", PLAIN, false),
            ("SELECT LOAD_FILE('/etc/hosts')", PLAIN, false),
            ("SELECT UNIX_TIMESTAMP()", PLAIN, false),
            ("SELECT WSREP_SYNC_WAIT_UPTO_GTID('1-1-9')", PLAIN, false),
            ("SELECT NAME_CONST('a', 1) FROM t", PLAIN, true),
        ];
        for (sql, s, want) in rows {
            let q = Query::new(sql.as_bytes());
            let got = cacheable(&q.effects(), q.tokens(), *s);
            assert_eq!(got.is_ok(), *want, "{sql}: {got:?}");
        }
    }
}
