//! Which tables a statement writes, read from its tokens: the target of
//! INSERT and REPLACE, the tables of UPDATE and DELETE (single and
//! multi-table), LOAD DATA's table. Used for the client's statements and
//! for trigger bodies: a write to a table whose column default or trigger
//! does what no session tracker reports (advance a sequence, take a user
//! lock) must hold the connection (`backend/write_effects.rs`).
//!
//! It errs on the side of more names: an alias or a table that is only
//! read may come along (looking it up costs a lookup, finds nothing to
//! fear), but no written table is left out.

use std::ops::Range;

use sqlfleet_dump::lex::Tok;

use super::word;

/// A table as the statement names it: `db.name` or `name` (in the
/// session's database).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableRef {
    pub db: Option<String>,
    pub name: String,
}

/// The name at `i` (`name` or `db.name`, words or backquoted) and the
/// index after it. Words come upper-cased from the lexer: the names as
/// written are taken from the text afterwards ([`with_text`]).
fn name_at(t: &[(Tok, Range<usize>)], i: usize) -> Option<(TableRef, usize)> {
    let ident = |j: usize| match &t.get(j)?.0 {
        Tok::Word(w) | Tok::Quoted(w) => Some(w.to_string()),
        _ => None,
    };
    let first = ident(i)?;
    if is_punct(t, i + 1, b'.') {
        if let Some(name) = ident(i + 2) {
            return Some((
                TableRef {
                    db: Some(first),
                    name,
                },
                i + 3,
            ));
        }
    }
    Some((
        TableRef {
            db: None,
            name: first,
        },
        i + 1,
    ))
}

fn is_punct(t: &[(Tok, Range<usize>)], i: usize, c: u8) -> bool {
    t.get(i).is_some_and(|(k, _)| k.is_punct(c))
}

/// Skips the modifiers in `mods` from `i`.
fn skip(t: &[(Tok, Range<usize>)], mut i: usize, mods: &[&str]) -> usize {
    while word(t.get(i)).is_some_and(|w| mods.contains(&w)) {
        i += 1;
    }
    i
}

/// Table references from `i` until a word in `until` at depth 0 (or the
/// statement's end): the first name, and names after `,`, JOIN, FROM and
/// USING; parenthesised parts (subqueries, ON conditions' calls) skipped.
fn table_list(
    t: &[(Tok, Range<usize>)],
    mut i: usize,
    until: &[&str],
    out: &mut Vec<(TableRef, Range<usize>)>,
) {
    let mut expect_name = true;
    let mut depth = 0i32;
    while let Some((k, _)) = t.get(i) {
        match k {
            Tok::Punct(b';') => return,
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            _ if depth > 0 => {}
            Tok::Word(w) if until.contains(&w.as_str()) => return,
            Tok::Punct(b',') => {
                expect_name = true;
                i += 1;
                continue;
            }
            Tok::Word(w) if matches!(w.as_str(), "JOIN" | "FROM" | "USING" | "STRAIGHT_JOIN") => {
                expect_name = true;
                i += 1;
                continue;
            }
            Tok::Word(_) | Tok::Quoted(_) if expect_name => {
                if let Some((r, next)) = name_at(t, i) {
                    out.push((r, t[i].1.start..t[next - 1].1.end));
                    i = next;
                    expect_name = false;
                    continue;
                }
            }
            _ => {}
        }
        expect_name = false;
        i += 1;
    }
}

/// The tables `t` writes, each with the byte range of its name in the
/// statement text (so that the caller can take the name as written).
pub fn written_tables_at(t: &[(Tok, Range<usize>)]) -> Vec<(TableRef, Range<usize>)> {
    let mut out = Vec::new();
    for (i, (k, _)) in t.iter().enumerate() {
        let Tok::Word(w) = k else { continue };
        let before = i.checked_sub(1).and_then(|j| word(t.get(j)));
        // A built-in function of that name, or part of another clause.
        if is_punct(t, i + 1, b'(') || is_punct(t, i.wrapping_sub(1), b'.') {
            continue;
        }
        match w.as_str() {
            "INSERT" | "REPLACE" if before != Some("OR") => {
                let j = skip(
                    t,
                    i + 1,
                    &["LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO"],
                );
                if let Some((r, next)) = name_at(t, j) {
                    out.push((r, t[j].1.start..t[next - 1].1.end));
                }
            }
            // Not ON DUPLICATE KEY UPDATE, SELECT ... FOR UPDATE, a
            // trigger's BEFORE/AFTER UPDATE or a column's ON UPDATE.
            "UPDATE"
                if !matches!(
                    before,
                    Some("KEY" | "FOR" | "BEFORE" | "AFTER" | "OR" | "ON")
                ) =>
            {
                let j = skip(t, i + 1, &["LOW_PRIORITY", "IGNORE"]);
                table_list(t, j, &["SET"], &mut out);
            }
            "DELETE" if !matches!(before, Some("BEFORE" | "AFTER" | "OR" | "ON")) => {
                let j = skip(t, i + 1, &["LOW_PRIORITY", "QUICK", "IGNORE"]);
                table_list(
                    t,
                    j,
                    &["WHERE", "ORDER", "LIMIT", "RETURNING", "PARTITION"],
                    &mut out,
                );
            }
            // LOAD DATA / LOAD XML ... INTO TABLE name.
            "TABLE"
                if before == Some("INTO")
                    && t[..i]
                        .iter()
                        .rev()
                        .take_while(|(k, _)| !k.is_punct(b';'))
                        .any(|(k, _)| k.is_word("LOAD")) =>
            {
                if let Some((r, next)) = name_at(t, i + 1) {
                    out.push((r, t[i + 1].1.start..t[next - 1].1.end));
                }
            }
            _ => {}
        }
    }
    out
}

/// The tables `t` writes, names as written in `sql` (the lexer
/// upper-cases words; table names are case-sensitive on most servers).
pub fn written_tables(sql: &[u8], t: &[(Tok, Range<usize>)]) -> Vec<TableRef> {
    written_tables_at(t)
        .into_iter()
        .map(|(r, at)| with_text(sql, r, at))
        .collect()
}

/// `r` with its names taken from the statement text at `at` (`db.name`,
/// either part possibly backquoted).
fn with_text(sql: &[u8], r: TableRef, at: Range<usize>) -> TableRef {
    let text = String::from_utf8_lossy(sql.get(at).unwrap_or_default()).into_owned();
    let parts = sqlfleet_conn::quote::split_qualified(&text);
    match (r.db.is_some(), parts.as_slice()) {
        (true, [db, name]) => TableRef {
            db: Some(db.clone()),
            name: name.clone(),
        },
        (false, [name]) => TableRef {
            db: None,
            name: name.clone(),
        },
        _ => r,
    }
}
