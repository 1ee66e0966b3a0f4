//! The database names a replicated statement writes through its text:
//! `db.table` qualifiers and `CREATE|DROP|ALTER DATABASE name`, found by a
//! small tokenizer that skips strings and comments, and rewritten for
//! renames token by token. Rows events carry their database in the table
//! map; only statements (DDL, statement-based DML) need this.
//!
//! Hand-written because it must not be fooled by quotes, backticks and
//! comments, and only needs identifiers. Property-tested (no panic, a
//! rewrite touches only the named tokens).

/// One identifier token: byte range in the text and its unquoted name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ident {
    start: usize,
    end: usize,
    name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(Ident),
    Dot,
    Other,
}

fn tokens(sql: &[u8]) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = sql.len();
    while i < n {
        let c = sql[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'#' => {
                while i < n && sql[i] != b'\n' {
                    i += 1;
                }
            }
            b'-' if sql.get(i + 1) == Some(&b'-')
                && sql.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                while i < n && sql[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if sql.get(i + 1) == Some(&b'*') => {
                // Executable comments (/*! ... */, /*M! ... */) hold SQL: read
                // their content as statement text.
                if matches!(sql.get(i + 2), Some(b'!')) {
                    i += 3;
                    while i < n && sql[i].is_ascii_digit() {
                        i += 1;
                    }
                } else if sql.get(i + 2) == Some(&b'M') && sql.get(i + 3) == Some(&b'!') {
                    i += 4;
                    while i < n && sql[i].is_ascii_digit() {
                        i += 1;
                    }
                } else {
                    i += 2;
                    while i + 1 < n && !(sql[i] == b'*' && sql[i + 1] == b'/') {
                        i += 1;
                    }
                    i = (i + 2).min(n);
                }
            }
            b'*' if sql.get(i + 1) == Some(&b'/') => i += 2,
            b'\'' | b'"' => {
                let q = c;
                i += 1;
                while i < n {
                    if sql[i] == b'\\' {
                        i += 2;
                    } else if sql[i] == q {
                        if sql.get(i + 1) == Some(&q) {
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                out.push(Tok::Other);
            }
            b'`' => {
                let start = i;
                let mut name = Vec::new();
                i += 1;
                while i < n {
                    if sql[i] == b'`' {
                        if sql.get(i + 1) == Some(&b'`') {
                            name.push(b'`');
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    } else {
                        name.push(sql[i]);
                        i += 1;
                    }
                }
                out.push(Tok::Ident(Ident {
                    start,
                    end: i.min(n),
                    name: String::from_utf8_lossy(&name).into_owned(),
                }));
            }
            b'.' => {
                out.push(Tok::Dot);
                i += 1;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 => {
                let start = i;
                while i < n
                    && (sql[i].is_ascii_alphanumeric()
                        || matches!(sql[i], b'_' | b'$')
                        || sql[i] >= 0x80)
                {
                    i += 1;
                }
                out.push(Tok::Ident(Ident {
                    start,
                    end: i,
                    name: String::from_utf8_lossy(&sql[start..i]).into_owned(),
                }));
            }
            _ => {
                out.push(Tok::Other);
                i += 1;
            }
        }
    }
    out
}

fn kw(t: Option<&Tok>, word: &str) -> bool {
    matches!(t, Some(Tok::Ident(id)) if id.name.eq_ignore_ascii_case(word) && id.end - id.start == word.len())
}

/// Database references in a statement: `x` of `x.y`, and the name of
/// `CREATE|DROP|ALTER DATABASE|SCHEMA [IF [NOT] EXISTS] x`.
fn db_refs(sql: &[u8]) -> Vec<Ident> {
    let t = tokens(sql);
    let mut refs = Vec::new();
    for (k, tok) in t.iter().enumerate() {
        if let Tok::Ident(id) = tok {
            if matches!(t.get(k + 1), Some(Tok::Dot))
                && matches!(t.get(k + 2), Some(Tok::Ident(_)))
                && !matches!(k.checked_sub(1).and_then(|p| t.get(p)), Some(Tok::Dot))
            {
                refs.push(id.clone());
            }
        }
    }
    if (kw(t.first(), "create") || kw(t.first(), "drop") || kw(t.first(), "alter"))
        && (kw(t.get(1), "database") || kw(t.get(1), "schema"))
    {
        let mut k = 2;
        if kw(t.get(k), "if") {
            k += 1;
            if kw(t.get(k), "not") {
                k += 1;
            }
            if kw(t.get(k), "exists") {
                k += 1;
            }
        }
        if let Some(Tok::Ident(id)) = t.get(k) {
            refs.push(id.clone());
        }
    }
    refs
}

/// True for `CREATE|DROP|ALTER DATABASE|SCHEMA ...` (run without a
/// default database: the one it names may not exist yet, or any more).
pub fn is_database_statement(sql: &[u8]) -> bool {
    let t = tokens(sql);
    (kw(t.first(), "create") || kw(t.first(), "drop") || kw(t.first(), "alter"))
        && (kw(t.get(1), "database") || kw(t.get(1), "schema"))
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
        out.extend_from_slice(&sql[at..r.start]);
        out.push(b'`');
        out.extend_from_slice(to.replace('`', "``").as_bytes());
        out.push(b'`');
        at = r.end;
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
