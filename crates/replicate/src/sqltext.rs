//! The database names a replicated statement writes through its text:
//! `db.table` qualifiers and `CREATE|DROP|ALTER DATABASE name`, found with
//! the shared SQL lexer (`sqlfleet_dump::lex`: strings, backquotes and
//! comments handled), and rewritten for renames token by token. Rows
//! events carry their database in the table map; only statements (DDL,
//! statement-based DML) need this. Property-tested (no panic, a rewrite
//! touches only the named tokens).

use std::ops::Range;

use sqlfleet_dump::lex::{lex, Tok};

/// One identifier: its byte range in the text and its unquoted name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ident {
    at: Range<usize>,
    name: String,
}

/// The identifier a token is, in the text's own case.
fn ident(sql: &[u8], t: &(Tok, Range<usize>)) -> Option<Ident> {
    let name = match &t.0 {
        Tok::Word(_) => String::from_utf8_lossy(&sql[t.1.clone()]).into_owned(),
        Tok::Quoted(n) => n.to_string(),
        _ => return None,
    };
    Some(Ident {
        at: t.1.clone(),
        name,
    })
}

fn kw(t: Option<&(Tok, Range<usize>)>, word: &str) -> bool {
    matches!(t, Some((Tok::Word(w), _)) if w == word)
}

fn dot(t: Option<&(Tok, Range<usize>)>) -> bool {
    matches!(t, Some((Tok::Punct(b'.'), _)))
}

/// Database references in a statement: `x` of `x.y`, and the name of
/// `CREATE|DROP|ALTER DATABASE|SCHEMA [IF [NOT] EXISTS] x`.
fn db_refs(sql: &[u8]) -> Vec<Ident> {
    let t = lex(sql).toks;
    let mut refs = Vec::new();
    for k in 0..t.len() {
        if let Some(id) = ident(sql, &t[k]) {
            if dot(t.get(k + 1))
                && t.get(k + 2).is_some_and(|n| ident(sql, n).is_some())
                && !dot(k.checked_sub(1).and_then(|p| t.get(p)))
            {
                refs.push(id);
            }
        }
    }
    if is_database(&t) {
        let mut k = 2;
        if kw(t.get(k), "IF") {
            k += 1;
            if kw(t.get(k), "NOT") {
                k += 1;
            }
            if kw(t.get(k), "EXISTS") {
                k += 1;
            }
        }
        if let Some(id) = t.get(k).and_then(|x| ident(sql, x)) {
            refs.push(id);
        }
    }
    refs
}

fn is_database(t: &[(Tok, Range<usize>)]) -> bool {
    (kw(t.first(), "CREATE") || kw(t.first(), "DROP") || kw(t.first(), "ALTER"))
        && (kw(t.get(1), "DATABASE") || kw(t.get(1), "SCHEMA"))
}

/// True for `CREATE|DROP|ALTER DATABASE|SCHEMA ...` (run without a
/// default database: the one it names may not exist yet, or any more).
pub fn is_database_statement(sql: &[u8]) -> bool {
    is_database(&lex(sql).toks)
}

/// The distinct database names a statement names in its text.
pub fn databases(sql: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = db_refs(sql).into_iter().map(|i| i.name).collect();
    v.sort();
    v.dedup();
    v
}

/// The statement with every database reference `from` replaced by `to`
/// (backquoted).
pub fn rename(sql: &[u8], from: &str, to: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(sql.len() + 16);
    let mut at = 0;
    for r in db_refs(sql).into_iter().filter(|r| r.name == from) {
        out.extend_from_slice(&sql[at..r.at.start]);
        out.push(b'`');
        out.extend_from_slice(to.replace('`', "``").as_bytes());
        out.push(b'`');
        at = r.at.end;
    }
    out.extend_from_slice(&sql[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn qualified_names_and_database_statements() {
        assert_eq!(
            databases(b"ALTER TABLE app.t ADD c INT, ALGORITHM=INPLACE"),
            vec!["app"]
        );
        assert_eq!(
            databases(b"insert into `a b`.t select * from other.u where x = 'app.t'"),
            vec!["a b", "other"]
        );
        assert_eq!(databases(b"CREATE DATABASE IF NOT EXISTS app"), vec!["app"]);
        assert_eq!(databases(b"drop schema `app`"), vec!["app"]);
        assert!(is_database_statement(b"/* x */ CREATE DATABASE app"));
        assert!(!is_database_statement(b"CREATE TABLE app.t (a int)"));
        assert!(databases(b"create table t (id int) /* app.t */ -- app.x\n").is_empty());
        assert_eq!(databases(b"select app.t.c from app.t"), vec!["app"]);
        assert!(databases(b"select 1.5, t.c from t").contains(&"t".to_string()));
    }

    #[test]
    fn renames_touch_only_database_tokens() {
        assert_eq!(
            rename(b"CREATE DATABASE app", "app", "app_eu"),
            b"CREATE DATABASE `app_eu`".to_vec()
        );
        assert_eq!(
            rename(
                b"create table app.t like app2.t /* app.t */ -- 'app'",
                "app",
                "x"
            ),
            b"create table `x`.t like app2.t /* app.t */ -- 'app'".to_vec()
        );
        assert_eq!(
            rename(b"rename table `app`.a to `app`.b", "app", "z"),
            b"rename table `z`.a to `z`.b".to_vec()
        );
    }

    proptest! {
        #[test]
        fn any_text_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = databases(&b);
            let r = rename(&b, "a", "b");
            if !databases(&b).iter().any(|d| d == "a") {
                prop_assert_eq!(r, b);
            }
        }
    }
}
