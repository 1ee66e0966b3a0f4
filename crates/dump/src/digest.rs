//! A statement's digest: literals replaced by `?`, lists of them by
//! `...`, keywords and identifiers as written, comments dropped. One
//! normalizer for every command that groups statements: the relay's query
//! rules (`match_digest`) and per-digest statistics, and watch's top
//! statements (the same digest on every server of a fleet is one row).

use std::borrow::Cow;
use std::ops::Range;

use crate::lex::{lex, Lexed, Tok};

/// A query's digest: literals replaced by `?`, lists of them by `...`,
/// keywords and identifiers as written, comments dropped, one space
/// between tokens.
pub fn digest(sql: &[u8]) -> String {
    of(sql, &lex(sql))
}

/// One token as the digest shows it, borrowed from the statement where it
/// can be (an allocation per token would be the digest's main cost).
pub fn token<'a>(sql: &'a [u8], k: &Tok, r: &Range<usize>) -> Cow<'a, str> {
    token_in(sql, std::str::from_utf8(sql).ok(), k, r)
}

/// [`token`], given the statement as text when it is valid UTF-8 (checked
/// once per statement: a token is then a slice of it, not a scan of its
/// bytes each).
fn token_in<'a>(sql: &'a [u8], text: Option<&'a str>, k: &Tok, r: &Range<usize>) -> Cow<'a, str> {
    let as_written = || match text.and_then(|t| t.get(r.clone())) {
        Some(t) => Cow::Borrowed(t),
        None => String::from_utf8_lossy(&sql[r.clone()]),
    };
    match k {
        // Keywords and identifiers as written; only literals go.
        Tok::Word(_) | Tok::UserVar | Tok::SysVar(..) => as_written(),
        Tok::Literal => Cow::Borrowed("?"),
        Tok::Quoted(q) => Cow::Owned(format!("`{q}`")),
        Tok::Punct(c) if c.is_ascii() && sql.get(r.clone()) == Some(&[*c][..]) => as_written(),
        Tok::Punct(c) => Cow::Owned((*c as char).to_string()),
    }
}

/// Whether a token (as the digest shows it) is one after which a sign
/// belongs to the next operand rather than being a subtraction: an
/// operator or opening punctuation, or a keyword that a value follows.
fn starts_an_operand(t: &str) -> bool {
    const KEYWORDS: [&str; 22] = [
        "SELECT", "WHERE", "AND", "OR", "NOT", "BY", "LIMIT", "OFFSET", "THEN", "ELSE", "WHEN",
        "VALUES", "VALUE", "SET", "RETURN", "IN", "IS", "LIKE", "BETWEEN", "DEFAULT", "INTERVAL",
        "HAVING",
    ];
    match t.as_bytes() {
        [c] if c.is_ascii_punctuation() => *c != b')' && *c != b'?' && *c != b'`',
        _ => KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(t)),
    }
}

/// The digest of a lexed text.
pub fn of(sql: &[u8], lexed: &Lexed) -> String {
    let mut parts: Vec<Cow<'_, str>> = Vec::with_capacity(lexed.toks.len());
    let text = std::str::from_utf8(sql).ok();
    for (k, r) in &lexed.toks {
        let t = token_in(sql, text, k, r);
        // A sign before a literal where no value precedes it (`= -5`,
        // `SELECT -1`, `IN (-1, 2)`) is the literal's own: `-5` and `5`
        // are one digest, as the server's own digest has them.
        if matches!(k, Tok::Literal) && parts.last().is_some_and(|p| p == "-" || p == "+") {
            let n = parts.len();
            let before = n.checked_sub(2).map(|i| parts[i].as_ref());
            if before.is_none_or(starts_an_operand) {
                parts.pop();
            }
        }
        parts.push(t);
        // `( ? , ? , ... )` becomes `( ... )`.
        let n = parts.len();
        if parts[n - 1] == ")" && n >= 3 && parts[n - 2] == "?" {
            let mut i = n - 2;
            while i >= 2 && parts[i - 1] == "," && parts[i - 2] == "?" {
                i -= 2;
            }
            if i >= 1 && parts[i - 1] == "(" && n - 1 - i >= 3 {
                parts.truncate(i);
                parts.push(Cow::Borrowed("..."));
                parts.push(Cow::Borrowed(")"));
            }
        }
    }
    let mut out = String::with_capacity(sql.len());
    for p in &parts {
        let glue = matches!(p.as_ref(), "," | ")" | "." | ";")
            || out.ends_with('(')
            || out.ends_with('.')
            || out.is_empty();
        if !glue {
            out.push(' ');
        }
        out.push_str(p);
    }
    if out.ends_with(';') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests() {
        assert_eq!(
            digest(b"select *  from t where id = 42 and name='x' -- c\n"),
            "select * from t where id = ? and name = ?"
        );
        assert_eq!(
            digest(b"SELECT a FROM `Shop`.t WHERE id IN (1, 2, 3, 4)"),
            "SELECT a FROM `Shop`.t WHERE id IN (...)"
        );
        assert_eq!(digest(b"SELECT f(1, 2), g(3)"), "SELECT f (...), g (?)");
        assert_eq!(
            digest(b"SELECT -1, a - 1 FROM t WHERE b = -2 AND c IN (-1, +2, 3)"),
            "SELECT ?, a - ? FROM t WHERE b = ? AND c IN (...)"
        );
        assert_eq!(
            digest(b"INSERT INTO t VALUES (1,'a'),(2,'b');"),
            "INSERT INTO t VALUES (...), (...)"
        );
    }

    /// Each token as the digest first wrote it, an owned string; the digest
    /// now borrows tokens from the statement, and must show the same text.
    fn token_owned(sql: &[u8], k: &Tok, r: &Range<usize>) -> String {
        match k {
            Tok::Word(_) | Tok::UserVar | Tok::SysVar(..) => {
                String::from_utf8_lossy(&sql[r.clone()]).into_owned()
            }
            Tok::Literal => "?".into(),
            Tok::Quoted(q) => format!("`{q}`"),
            Tok::Punct(c) => (*c as char).to_string(),
        }
    }

    proptest::proptest! {
        #[test]
        fn the_digest_is_the_same_with_borrowed_tokens(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::Just(&b"SELECT "[..]),
                    proptest::prelude::Just(&b"IN ("[..]),
                    proptest::prelude::Just(&b", "[..]),
                    proptest::prelude::Just(&b")"[..]),
                    proptest::prelude::Just(&b"42"[..]),
                    proptest::prelude::Just(&b"'x'"[..]),
                    proptest::prelude::Just(&b"`Tab`.c"[..]),
                    proptest::prelude::Just(&b"@v := @@session.sql_mode;"[..]),
                    proptest::prelude::Just(&b"\xe9\xff"[..]),
                    proptest::prelude::Just(&b"-- c\n"[..]),
                ],
                0..30,
            ),
            noise in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20),
        ) {
            let mut sql = pieces.concat();
            sql.extend_from_slice(&noise);
            for (k, r) in &lex(&sql).toks {
                proptest::prop_assert_eq!(token(&sql, k, r), token_owned(&sql, k, r));
            }
        }
    }

    /// Words, names, literals and punctuation a statement is made of.
    fn piece() -> impl proptest::strategy::Strategy<Value = (String, bool)> {
        use proptest::prelude::*;
        // (text, is a literal)
        prop_oneof![
            Just(("SELECT".to_string(), false)),
            Just(("FROM t".to_string(), false)),
            Just(("WHERE id =".to_string(), false)),
            Just(("IN (".to_string(), false)),
            Just((",".to_string(), false)),
            Just((")".to_string(), false)),
            Just(("`Shop`.c".to_string(), false)),
            (0..i64::MAX).prop_map(|n| (n.to_string(), true)),
            "[a-z' ]{0,8}".prop_map(|s| (format!("'{}'", s.replace('\'', "''")), true)),
        ]
    }

    proptest::proptest! {
        /// Statements that differ only in their literals have one digest,
        /// and no literal's text is in it.
        #[test]
        fn literals_never_make_two_digests(
            shape in proptest::collection::vec(piece(), 0..20),
            other in proptest::collection::vec(any_literal(), 20),
        ) {
            let a: Vec<String> = shape.iter().map(|(t, _)| t.clone()).collect();
            let b: Vec<String> = shape
                .iter()
                .zip(&other)
                .map(|((t, lit), o)| if *lit { o.clone() } else { t.clone() })
                .collect();
            let (da, db) = (digest(a.join(" ").as_bytes()), digest(b.join(" ").as_bytes()));
            proptest::prop_assert_eq!(&da, &db);
            for (t, lit) in &shape {
                if *lit && t.len() > 3 {
                    proptest::prop_assert!(!da.contains(t.as_str()), "{} in {}", t, da);
                }
            }
        }

        /// Any bytes: a digest, never a panic.
        #[test]
        fn any_bytes_have_a_digest(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = digest(&b);
        }
    }

    fn any_literal() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            (0..i64::MAX).prop_map(|n| n.to_string()),
            "[a-z ]{0,8}".prop_map(|s| format!("'{s}'")),
        ]
    }
}
