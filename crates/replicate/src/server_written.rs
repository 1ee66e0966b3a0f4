//! Statements the server writes into the binary log itself, rather than
//! the text its client sent, whose string literals it escapes with
//! backslashes whatever the session's `sql_mode` — while the event
//! carries that mode, `NO_BACKSLASH_ESCAPES` included, so a replica
//! reading the text in it reads other strings (seen on a native replica
//! of MariaDB 10.11.19, silently):
//!
//! - the CREATE TABLE of a CREATE ... SELECT logged as rows (SHOW CREATE
//!   TABLE's text: defaults, comments, ENUM values, CHECKs, generated
//!   columns): told by [`create_select`], and read whole with backslash
//!   escapes (`Context::read_as_server_written`);
//! - the COMMENT of a CREATE PROCEDURE or FUNCTION, which the server
//!   writes again between the parameters and the body (the body is the
//!   client's own text, read in the session's mode): rewritten as that
//!   mode reads it by [`routine_comment`].
//!
//! (A LOAD DATA's clauses are the same case, in `load_query.rs`.) Written
//! by hand: the server's own layout, matched exactly; a text in any other
//! shape is left as it is.

/// A CREATE TABLE as the server writes it for a CREATE ... SELECT logged
/// as rows: SHOW CREATE TABLE's text, inside the transaction that carries
/// its rows (a CREATE TABLE a client sends commits on its own: it is a
/// standalone group; the caller checks the place, which is what tells).
/// Its spelling — upper case, one space, then its name (quoted, or bare
/// with `sql_quote_show_create = 0`) — else not.
pub fn create_select(sql: &[u8]) -> bool {
    let rest = [&b"CREATE TABLE "[..], b"CREATE OR REPLACE TABLE "]
        .iter()
        .find_map(|p| sql.strip_prefix(*p));
    let rest = rest.map(|r| r.strip_prefix(b"IF NOT EXISTS ").unwrap_or(r));
    rest.and_then(|r| r.first()).is_some_and(|b| {
        matches!(b, b'`' | b'"' | b'_' | b'$') || b.is_ascii_alphanumeric() || *b > 0x7F
    })
}

/// The characteristics the server writes on lines of their own before a
/// routine's COMMENT, in its order (each at most once).
const CHARACTERISTICS: [&[u8]; 5] = [
    b"    NO SQL",
    b"    READS SQL DATA",
    b"    MODIFIES SQL DATA",
    b"    DETERMINISTIC",
    b"    SQL SECURITY INVOKER",
];

/// A CREATE PROCEDURE or FUNCTION as the server logs it (`CREATE [OR
/// REPLACE] DEFINER=... PROCEDURE|FUNCTION name(params)[ RETURNS type]\n`,
/// its characteristics a line each, `    COMMENT '...'\n`, the body), its
/// COMMENT written again as a session without backslash escapes reads it:
/// the bytes the server escaped, a quote doubled. `None`: not that text,
/// no COMMENT, or one that reads alike in both modes.
pub fn routine_comment(sql: &[u8]) -> Option<Vec<u8>> {
    let rest = sql.strip_prefix(b"CREATE ")?;
    let rest = rest.strip_prefix(b"OR REPLACE ").unwrap_or(rest);
    if !rest.starts_with(b"DEFINER=") {
        return None;
    }
    let head = b"\n    COMMENT '";
    let mut from = 0;
    while let Some(i) = find(&sql[from..], head).map(|i| i + from) {
        from = i + 1;
        if !routine_head(&sql[..=i]) {
            continue;
        }
        let start = i + head.len() - 1;
        let Some((value, end)) = unescaped(sql, start) else {
            continue;
        };
        if sql.get(end) != Some(&b'\n') {
            continue;
        }
        if !sql[start..end].contains(&b'\\') {
            // Reads alike without backslash escapes ('' for a quote).
            return None;
        }
        if value.contains(&0) {
            // No literal carries a NUL raw; left as logged.
            return None;
        }
        let mut out = sql[..start].to_vec();
        out.push(b'\'');
        for &b in &value {
            if b == b'\'' {
                out.push(b'\'');
            }
            out.push(b);
        }
        out.push(b'\'');
        out.extend_from_slice(&sql[end..]);
        return Some(out);
    }
    None
}

/// Whether `before` (up to the newline in front of `    COMMENT`) ends as
/// the server writes a routine's head: its characteristic lines, in its
/// order, after the line of its name and parameters (`... PROCEDURE
/// name(...)` or `... FUNCTION name(...) RETURNS type`).
fn routine_head(before: &[u8]) -> bool {
    let Some(mut rest) = before.strip_suffix(b"\n") else {
        return false;
    };
    // Peeled from the last: each line "\n    X", in the server's order.
    for c in CHARACTERISTICS.iter().rev() {
        if rest.ends_with(c) && rest[..rest.len() - c.len()].ends_with(b"\n") {
            rest = &rest[..rest.len() - c.len() - 1];
        }
    }
    let start = rest.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let line = &rest[start..];
    let has = |needle: &[u8]| find(line, needle).is_some();
    (has(b" PROCEDURE ") && line.ends_with(b")")) || (has(b" FUNCTION ") && has(b") RETURNS "))
}

/// A literal as the server writes those of its own texts (its
/// `append_unescaped` and the LOAD DATA clauses' writer): single quotes,
/// backslash escapes, a quote doubled or escaped; from its opening quote
/// at `at`: its bytes and the position after its closing quote. An escape
/// the writers do not make is not read (`None`).
pub fn unescaped(sql: &[u8], at: usize) -> Option<(Vec<u8>, usize)> {
    if sql.get(at) != Some(&b'\'') {
        return None;
    }
    let mut i = at + 1;
    let mut v = Vec::new();
    loop {
        let b = *sql.get(i)?;
        match b {
            b'\'' if sql.get(i + 1) == Some(&b'\'') => {
                v.push(b'\'');
                i += 2;
            }
            b'\'' => return Some((v, i + 1)),
            b'\\' => {
                let e = *sql.get(i + 1)?;
                v.push(match e {
                    b'0' => 0,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 8,
                    b'Z' => 26,
                    b'\\' | b'\'' | b'"' => e,
                    _ => return None,
                });
                i += 2;
            }
            _ => {
                v.push(b);
                i += 1;
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The server's spelling of a CREATE ... SELECT's CREATE (10.11.19,
    /// row-based; `"` under ANSI_QUOTES; bare names), and texts that are
    /// not it.
    #[test]
    fn create_selects_are_told_by_their_spelling() {
        for (sql, want) in [
            (
                "CREATE TABLE `y`.`t2` (\n  `s` varchar(10) DEFAULT 'a\\\\b'\n)",
                true,
            ),
            ("CREATE OR REPLACE TABLE `y`.`t8` (\n  `g` int\n)", true),
            (
                "CREATE TABLE IF NOT EXISTS `y`.`t9` (\n  `n` int(1) NOT NULL\n)",
                true,
            ),
            ("CREATE TABLE \"y\".\"t\" (\n  \"n\" int\n)", true),
            (
                "CREATE TABLE y.q1 (\n  s varchar(5) DEFAULT 'a\\b'\n)",
                true,
            ),
            ("CREATE TABLE  y.t3 SELECT 1 AS n", false),
            ("CREATE TEMPORARY TABLE `y`.`t` (a int)", false),
            ("create table `y`.`t` (a int)", false),
            ("CREATE VIEW `v` AS SELECT 1", false),
            ("CREATE TABLE", false),
        ] {
            assert_eq!(create_select(sql.as_bytes()), want, "{sql}");
        }
    }

    /// Routine texts as 10.11.19 logged them under NO_BACKSLASH_ESCAPES,
    /// and what is sent: the COMMENT's escapes undone, the body as it was.
    #[test]
    fn a_routine_comment_is_written_as_the_session_reads_it() {
        let rows: &[(&str, Option<&str>)] = &[
            (
                "CREATE DEFINER=`root`@`localhost` PROCEDURE `y`.`pc`()\n    COMMENT 'c\\\\d''e'\nBEGIN END",
                Some("CREATE DEFINER=`root`@`localhost` PROCEDURE `y`.`pc`()\n    COMMENT 'c\\d''e'\nBEGIN END"),
            ),
            (
                "CREATE DEFINER=`root`@`localhost` FUNCTION `y`.`fe`(x ENUM('p\\q','r')) RETURNS enum('a\\\\b','c') CHARSET latin1 COLLATE latin1_swedish_ci\n    DETERMINISTIC\n    COMMENT 'k\\\\l\\n'\nRETURN 'a\\b'",
                Some("CREATE DEFINER=`root`@`localhost` FUNCTION `y`.`fe`(x ENUM('p\\q','r')) RETURNS enum('a\\\\b','c') CHARSET latin1 COLLATE latin1_swedish_ci\n    DETERMINISTIC\n    COMMENT 'k\\l\n'\nRETURN 'a\\b'"),
            ),
            (
                "CREATE OR REPLACE DEFINER=root@localhost PROCEDURE p(IN a INT)\n    MODIFIES SQL DATA\n    DETERMINISTIC\n    SQL SECURITY INVOKER\n    COMMENT 'x\\\\'\nSELECT 1",
                Some("CREATE OR REPLACE DEFINER=root@localhost PROCEDURE p(IN a INT)\n    MODIFIES SQL DATA\n    DETERMINISTIC\n    SQL SECURITY INVOKER\n    COMMENT 'x\\'\nSELECT 1"),
            ),
            // Nothing to undo: sent as logged.
            (
                "CREATE DEFINER=`root`@`localhost` PROCEDURE `p`()\n    COMMENT 'it''s'\nBEGIN END",
                None,
            ),
            // No COMMENT of the server's: one in the body is the client's.
            (
                "CREATE DEFINER=`root`@`localhost` PROCEDURE `p`()\nALTER TABLE t\n    COMMENT 'a\\\\b'\n",
                None,
            ),
            ("CREATE PROCEDURE p() COMMENT 'a\\\\b' BEGIN END", None),
            (
                "CREATE DEFINER=`root`@`localhost` TRIGGER t BEFORE INSERT ON x FOR EACH ROW SET @a = 'a\\\\b'",
                None,
            ),
        ];
        for (sql, want) in rows {
            let got = routine_comment(sql.as_bytes());
            assert_eq!(
                got.as_deref().map(String::from_utf8_lossy),
                want.map(std::borrow::Cow::from),
                "{sql}"
            );
        }
    }

    proptest! {
        /// Any text: no panic, and what comes back differs only inside
        /// the COMMENT's quotes.
        #[test]
        fn any_text(sql in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = create_select(&sql);
            if let Some(out) = routine_comment(&sql) {
                prop_assert!(out.starts_with(b"CREATE "));
            }
        }

        /// A comment of any bytes but NUL, as the server writes it, comes
        /// back as its bytes in a literal without escapes.
        #[test]
        fn any_comment_reads_back(c in proptest::collection::vec(1u8..=255, 1..40)) {
            let mut lit = b"'".to_vec();
            for &b in &c {
                match b {
                    b'\\' => lit.extend_from_slice(b"\\\\"),
                    b'\n' => lit.extend_from_slice(b"\\n"),
                    b'\r' => lit.extend_from_slice(b"\\r"),
                    26 => lit.extend_from_slice(b"\\Z"),
                    b'\'' => lit.extend_from_slice(b"''"),
                    _ => lit.push(b),
                }
            }
            lit.push(b'\'');
            let mut sql = b"CREATE DEFINER=`r`@`h` PROCEDURE `p`()\n    COMMENT ".to_vec();
            sql.extend_from_slice(&lit);
            sql.extend_from_slice(b"\nBEGIN END");
            let got = routine_comment(&sql);
            let escaped = c.iter().any(|b| matches!(b, b'\\' | b'\n' | b'\r' | 26));
            prop_assert_eq!(got.is_some(), escaped);
            if let Some(out) = got {
                let mut want = b"CREATE DEFINER=`r`@`h` PROCEDURE `p`()\n    COMMENT '".to_vec();
                for &b in &c {
                    if b == b'\'' {
                        want.push(b'\'');
                    }
                    want.push(b);
                }
                want.extend_from_slice(b"'\nBEGIN END");
                prop_assert_eq!(out, want);
            }
        }
    }
}
