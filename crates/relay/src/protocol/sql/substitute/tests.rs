//! The substitutions as rows, and a generated check that a rewrite reads
//! the text in the session's dialect.

use super::*;
use crate::protocol::sql::analyze;
use sqlfleet_dump::lex::{lex, lex_in, Dialect};

const ASCII: Multibyte = Multibyte::AsciiSafe;

#[test]
fn a_call_becomes_its_value_and_keeps_its_column_name() {
    let s = |q: &str, v| {
        substitute_call(q.as_bytes(), &lex(q.as_bytes()).toks, ASCII, "ROW_COUNT", v)
            .map(|b| String::from_utf8(b).expect("utf8"))
    };
    assert_eq!(
        s("SELECT ROW_COUNT()", 3).as_deref(),
        Some("SELECT COALESCE(3, ROW_COUNT()) AS `ROW_COUNT()`")
    );
    assert_eq!(
        s("select row_count()", 3).as_deref(),
        Some("select COALESCE(3, row_count()) AS `row_count()`")
    );
    assert_eq!(
        s("SELECT ROW_COUNT() AS rc", 3).as_deref(),
        Some("SELECT COALESCE(3, ROW_COUNT()) AS rc")
    );
    assert_eq!(
        s("SELECT a, ROW_COUNT() FROM t WHERE ROW_COUNT() > 1", 2).as_deref(),
        Some("SELECT a, COALESCE(2, ROW_COUNT()) AS `ROW_COUNT()` FROM t WHERE COALESCE(2, ROW_COUNT()) > 1")
    );
    // Inside an expression: the item keeps its own text as its name.
    assert_eq!(
        s("SELECT hex(concat(row_count()))", -1).as_deref(),
        Some("SELECT hex(concat(COALESCE(-1, row_count()))) AS `hex(concat(row_count()))`")
    );
    assert_eq!(
        s("select DISTINCT row_count() + 1, 2 from t", 5).as_deref(),
        Some("select DISTINCT COALESCE(5, row_count()) + 1 AS `row_count() + 1`, 2 from t")
    );
    assert_eq!(
        s("SELECT row_count() rc, (SELECT row_count() x) y", 5).as_deref(),
        Some("SELECT COALESCE(5, row_count()) rc, (SELECT COALESCE(5, row_count()) x) y")
    );
    assert_eq!(
        s("SELECT IF(row_count() > 0, 'a`b', 'c')", 1).as_deref(),
        Some("SELECT IF(COALESCE(1, row_count()) > 0, 'a`b', 'c') AS `IF(row_count() > 0, 'a``b', 'c')`")
    );
    assert_eq!(s("SELECT 'ROW_COUNT()'", 2), None);
    assert_eq!(s("SELECT 1", 2), None);
}

/// `@@last_gtid` is the GTID of the session's last write: on a pooled
/// connection, whoever wrote there last. A read of it becomes the
/// client's own value and keeps its column name; a global or a
/// differently named variable is left alone.
#[test]
fn a_last_gtid_read_becomes_the_clients_own() {
    let s = |q: &str| {
        substitute_var(
            q.as_bytes(),
            &lex(q.as_bytes()).toks,
            ASCII,
            "last_gtid",
            "0-1-7",
        )
        .map(|b| String::from_utf8(b).expect("utf8"))
    };
    for (q, want) in [
        (
            "SELECT @@last_gtid",
            Some("SELECT COALESCE('0-1-7', @@last_gtid) AS `@@last_gtid`"),
        ),
        (
            "select @@session.last_gtid AS g",
            Some("select COALESCE('0-1-7', @@session.last_gtid) AS g"),
        ),
        (
            "SELECT MASTER_GTID_WAIT(@@LOCAL.last_gtid, 1)",
            Some("SELECT MASTER_GTID_WAIT(COALESCE('0-1-7', @@LOCAL.last_gtid), 1) AS `MASTER_GTID_WAIT(@@LOCAL.last_gtid, 1)`"),
        ),
        (
            "SELECT@@last_gtid",
            Some("SELECT COALESCE('0-1-7', @@last_gtid) AS `@@last_gtid`"),
        ),
        (
            "SELECT 1 FROM t WHERE x=@@last_gtid",
            Some("SELECT 1 FROM t WHERE x=COALESCE('0-1-7', @@last_gtid)"),
        ),
        ("SELECT @@gtid_current_pos", None),
        ("SELECT 1", None),
    ] {
        assert_eq!(s(q).as_deref(), want, "{q}");
    }
    assert!(analyze(b"SELECT @@last_gtid").reads_last_gtid);
    assert!(!analyze(b"SELECT @@gtid_slave_pos").reads_last_gtid);
}

/// A select item's text becomes its column name in backquotes: a real
/// backquote is doubled, the second byte of an sjis character (0x60 may
/// be one) is not (doubled, it would end the name there).
#[test]
fn an_alias_doubles_only_a_real_backquote() {
    let q = b"SELECT CONCAT('\x83\x60', ROW_COUNT(), '`')";
    let sjis = Dialect {
        charset: Multibyte::Sjis,
        ..Dialect::default()
    };
    let out = substitute_call(q, &lex_in(q, sjis).toks, Multibyte::Sjis, "ROW_COUNT", 3)
        .expect("rewritten");
    let want: &[u8] = b"SELECT CONCAT('\x83\x60', COALESCE(3, ROW_COUNT()), '`') AS `CONCAT('\x83\x60', ROW_COUNT(), '``')`";
    assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(want));
    // In sjis the rewrite lexes as the name it meant: one quoted token.
    let names = lex_in(&out, sjis)
        .toks
        .iter()
        .filter(|(t, _)| matches!(t, Tok::Quoted(_)))
        .count();
    assert_eq!(names, 1);
}

/// A lead byte alone at the end of a select item (a space after it)
/// would take the alias's closing backquote as its second byte in gbk:
/// the item keeps the server's name instead, and the rest of the text
/// reads as it did.
#[test]
fn an_alias_is_left_out_where_a_lead_byte_would_take_its_backquote() {
    let q = b"SELECT @@last_gtid + \x81 , 'a`b' FROM t";
    let gbk = Dialect {
        charset: Multibyte::Gbk,
        ..Dialect::default()
    };
    let out = substitute_var(
        q,
        &lex_in(q, gbk).toks,
        Multibyte::Gbk,
        "last_gtid",
        "0-1-7",
    )
    .expect("rewritten");
    let want: &[u8] = b"SELECT COALESCE('0-1-7', @@last_gtid) + \x81 , 'a`b' FROM t";
    assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(want));
    assert_eq!(literals(&out, gbk).len(), literals(q, gbk).len() + 1);
    // An item ending in `-`: ` AS` after it would start a `-- ` comment.
    let q = b"SELECT @@last_gtid --, 2 FROM t";
    let d = Dialect::default();
    let out = substitute_var(
        q,
        &lex_in(q, d).toks,
        Multibyte::AsciiSafe,
        "last_gtid",
        "0-1-7",
    )
    .expect("rewritten");
    assert_eq!(
        String::from_utf8_lossy(&out),
        "SELECT COALESCE('0-1-7', @@last_gtid) --, 2 FROM t"
    );
}

/// The values written in (never in the texts drawn below).
const VALUE: i64 = 987_654;
const GTID: &str = "9-9-9";

/// The bytes of every string or number literal of `sql` in dialect `d`.
fn literals(sql: &[u8], d: Dialect) -> Vec<Vec<u8>> {
    lex_in(sql, d)
        .toks
        .iter()
        .filter(|(t, _)| matches!(t, Tok::Literal))
        .map(|(_, r)| sql[r.clone()].to_vec())
        .collect()
}

fn targets(sql: &[u8], d: Dialect) -> usize {
    let t = lex_in(sql, d).toks;
    (0..t.len())
        .filter(|&i| match &t[i].0 {
            Tok::Word(w) => {
                w == "ROW_COUNT"
                    && t.get(i + 1).is_some_and(|x| x.0.is_punct(b'('))
                    && t.get(i + 2).is_some_and(|x| x.0.is_punct(b')'))
            }
            Tok::SysVar(s, n) => {
                n == "last_gtid" && s.as_deref().is_none_or(|s| s == "session" || s == "local")
            }
            _ => false,
        })
        .count()
}

/// Every dialect the server's lexer has for a client: sql_mode's
/// NO_BACKSLASH_ESCAPES and ANSI_QUOTES, and each client character set
/// class.
fn dialects() -> Vec<Dialect> {
    let mut out = Vec::new();
    for charset in [
        Multibyte::AsciiSafe,
        Multibyte::Sjis,
        Multibyte::Big5,
        Multibyte::Gbk,
        Multibyte::Gb18030,
    ] {
        for (no_backslash_escapes, ansi_quotes) in
            [(false, false), (true, false), (false, true), (true, true)]
        {
            out.push(Dialect {
                no_backslash_escapes,
                ansi_quotes,
                charset,
            });
        }
    }
    out
}

proptest::proptest! {
    /// Statements assembled from strings that end differently by dialect
    /// (a backslash before the quote, a double quote, an sjis character
    /// whose second byte is a backslash or a backquote), comments and the
    /// reads written in: in each dialect, the rewrite read in that dialect
    /// keeps every literal of the text byte for byte, and adds one value
    /// for each read the text has in it — none inside a string, none
    /// missed after one.
    #[test]
    fn a_rewrite_reads_the_text_in_the_sessions_dialect(pieces in proptest::collection::vec(
        proptest::sample::select(vec![
            &b"ROW_COUNT()"[..], b"@@last_gtid", b"@@session.last_gtid", b"'ROW_COUNT()'",
            b"'a\\'", b"'b'", b"\"c\\\"", b"\"@@last_gtid\"", b"'\x83\x5c'", b"'\x83\x60'",
            b"`\x83\x60`", b",", b"CONCAT(", b")", b"+ 1", b"/* ROW_COUNT() */",
            b"-- ROW_COUNT()\n", b"# @@last_gtid\n", b"`n`", b"AS x", b"1", b"'it''s'", b"\\",
            b"'", b"\"", b"`",
        ]),
        1..12,
    )) {
        let mut sql = b"SELECT ".to_vec();
        for p in &pieces {
            sql.extend_from_slice(p);
            sql.push(b' ');
        }
        for d in dialects() {
            let toks = lex_in(&sql, d).toks;
            // (A string, name or comment left open swallows the space the
            // text ends with: the server refuses such a text whatever is
            // written into it.)
            if toks.last().is_some_and(|(_, r)| r.end == sql.len()) {
                continue;
            }
            let Some(out) = substitute_call(&sql, &toks, d.charset, "ROW_COUNT", VALUE)
                .map(|v| {
                    let t = lex_in(&v, d).toks;
                    substitute_var(&v, &t, d.charset, "last_gtid", GTID).unwrap_or(v)
                })
                .or_else(|| substitute_var(&sql, &toks, d.charset, "last_gtid", GTID))
            else {
                proptest::prop_assert_eq!(targets(&sql, d), 0);
                continue;
            };
            let value = VALUE.to_string().into_bytes();
            let gtid = format!("'{GTID}'").into_bytes();
            let got = literals(&out, d);
            let added = got.iter().filter(|l| **l == value || **l == gtid).count();
            let kept: Vec<_> = got.into_iter().filter(|l| *l != value && *l != gtid).collect();
            proptest::prop_assert_eq!(&kept, &literals(&sql, d), "{:?} in {:?}", String::from_utf8_lossy(&out), d);
            proptest::prop_assert_eq!(added, targets(&sql, d), "{:?} in {:?}", String::from_utf8_lossy(&out), d);
        }
    }
}

/// What runs its reads now (a client's own values may be written in) and
/// what the server keeps as a definition (never written into).
#[test]
fn only_a_statement_that_runs_its_reads_now_is_written_into() {
    for (sql, now) in [
        ("SELECT ROW_COUNT()", true),
        ("(SELECT ROW_COUNT())", true),
        ("WITH c AS (SELECT 1) SELECT ROW_COUNT()", true),
        ("INSERT INTO t VALUES (ROW_COUNT())", true),
        ("UPDATE t SET a = ROW_COUNT()", true),
        ("SET @a = ROW_COUNT()", true),
        ("DO ROW_COUNT()", true),
        ("CALL p(ROW_COUNT())", true),
        (
            "SET STATEMENT max_statement_time = 1 FOR SELECT ROW_COUNT()",
            true,
        ),
        ("CREATE PROCEDURE p() SELECT ROW_COUNT()", false),
        (
            "CREATE DEFINER = CURRENT_USER FUNCTION f() RETURNS INT RETURN ROW_COUNT()",
            false,
        ),
        ("CREATE OR REPLACE VIEW v AS SELECT ROW_COUNT()", false),
        (
            "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = ROW_COUNT()",
            false,
        ),
        (
            "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT ROW_COUNT()",
            false,
        ),
        ("ALTER EVENT e DO SELECT @@last_gtid", false),
        (
            "CREATE TABLE t (a INT DEFAULT (ROW_COUNT())) SELECT ROW_COUNT() AS b",
            false,
        ),
        (
            "SET STATEMENT max_statement_time = 1 FOR CREATE VIEW v AS SELECT ROW_COUNT()",
            false,
        ),
        ("SHOW WARNINGS", false),
    ] {
        let t = lex(sql.as_bytes()).toks;
        assert_eq!(evaluated_now(&t), now, "{sql}");
    }
}

/// CREATE TABLE's SELECT runs as the statement does; every other CREATE
/// keeps a definition.
#[test]
fn a_table_creation_is_told_from_other_definitions() {
    for (sql, table) in [
        ("CREATE TABLE t SELECT ROW_COUNT() AS r", true),
        ("create or replace table t as select found_rows()", true),
        ("CREATE TEMPORARY TABLE t SELECT 1", true),
        ("CREATE OR REPLACE TEMPORARY TABLE t SELECT 1", true),
        (
            "SET STATEMENT max_statement_time = 1 FOR CREATE TABLE t SELECT ROW_COUNT()",
            true,
        ),
        ("CREATE VIEW v AS SELECT ROW_COUNT()", false),
        ("CREATE OR REPLACE VIEW v AS SELECT ROW_COUNT()", false),
        (
            "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET @r = ROW_COUNT()",
            false,
        ),
        ("CREATE OR TABLE t SELECT 1", false),
        ("CREATE TEMPORARY SEQUENCE s", false),
        ("SELECT ROW_COUNT()", false),
        ("ALTER TABLE t ADD c INT", false),
        ("", false),
    ] {
        let t = lex(sql.as_bytes()).toks;
        assert_eq!(creates_table(&t), table, "{sql}");
    }
}

/// The last check before a rewrite is sent: its literals are the text's,
/// the value aside; a literal changed, lost or run into a comment fails.
#[test]
fn a_rewrite_is_sent_only_when_it_reads_as_the_text_did() {
    let d = Dialect::default();
    let check = |old: &[u8], new: &[u8]| {
        reads_as_before(
            (old, &lex_in(old, d).toks),
            (new, &lex_in(new, d).toks),
            b"'0-1-7'",
        )
    };
    let old = b"SELECT 'a', @@last_gtid, 'b'";
    assert!(check(
        old,
        b"SELECT 'a', COALESCE('0-1-7', @@last_gtid), 'b'"
    ));
    assert!(!check(
        old,
        b"SELECT 'a', COALESCE('0-1-7', @@last_gtid) -- , 'b'"
    ));
    assert!(!check(
        old,
        b"SELECT 'a, COALESCE('0-1-7', @@last_gtid), 'b'"
    ));
    assert!(!check(
        old,
        b"SELECT 'a', COALESCE('0-1-7', @@last_gtid), 'c'"
    ));
    // A negative count: `-` and a literal to the lexer.
    let old = b"SELECT ROW_COUNT(), 'x'";
    let new = b"SELECT COALESCE(-1, ROW_COUNT()) AS `ROW_COUNT()`, 'x'";
    assert!(reads_as_before(
        (old, &lex_in(old, d).toks),
        (new, &lex_in(new, d).toks),
        b"-1"
    ));
}
