//! Which rows a cached SELECT reads, when its text says so for sure: one
//! table, no subquery, no join, no full-text MATCH (its relevance weighs
//! the whole table), and a WHERE whose top level is a chain of
//! ANDs with a link `col = N`, `col IN (N, ...)`, `col BETWEEN N AND M`
//! or `col` `<`, `<=`, `>`, `>=` N, N and M integer literals. Its result
//! then depends on those rows only: the rows whose `col` holds one of the
//! values, or a value in the range (the comparisons of one column in the
//! chain, intersected). A change of the table that says which values of
//! `col` the rows it touched held, before and after (`cache/row_change.rs`
//! reads that from the binary log), makes it stale only when one of them
//! is among its values or in its range (`cache/marks.rs`). Anything else
//! — `None` — and the entry is stale at any change of its tables, as
//! before. A link of values is the key before a range: it names fewer
//! rows.
//!
//! Why the top level must be ANDs only: OR, XOR, `||` and `:=` bind looser
//! than AND (`a AND id = 7 OR b` reads rows where `b` holds), and CASE
//! holds an AND of its own; so any of them at the top level, or a `|` or
//! `:` there, and the text is not keyed. BETWEEN holds an AND of its own
//! too: the chain is read link by link, a BETWEEN link taking its AND, and
//! a BETWEEN anywhere else (`k BETWEEN 1 AND id = 7`) makes the text not
//! keyed. A link must stand between WHERE or AND and AND or the clause's
//! end, so that no operator binds to its column or its literals (`id = 7 +
//! 1`, `x = id = 7`, `NOT id = 7`, `id < 7 IS TRUE`). A literal is digits
//! only (no decimal point, exponent, hex or quote), with at most one minus
//! sign before it. A bare word that is a value, not a column (TRUE, NULL,
//! DEFAULT...), is not a column. `<=>`, `<>` and `!=` are not links.
//!
//! Comparing the column with an integer is exact only when the column is
//! an integer; that is the change's side to say: it gives values for
//! integer columns only, so a key on any other column (a DATE, where
//! 240101 and 20240101 are the same day) is stale at every change.

use std::collections::BTreeSet;
use std::ops::Range;

use sqlfleet_dump::lex::Tok;

use crate::backend::write_scope::folded;
use crate::cache::row_change::{Keys, MAX_VALUES};

/// The rows a read reads: those of `table` (any database) whose `col`
/// holds what `rows` says. Names in ASCII lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowKey {
    pub table: String,
    pub col: String,
    pub rows: Rows,
}

/// The values of a key's column that its rows hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rows {
    /// One of these.
    In(Box<[i128]>),
    /// From the first to the second, both included (none when the first
    /// is past the second). Only a read's key is a range.
    Range(i128, i128),
}

impl Rows {
    /// Whether one of `vals` is among these values or in this range.
    pub fn meets(&self, vals: &BTreeSet<i128>) -> bool {
        match self {
            Rows::In(v) => v.iter().any(|x| vals.contains(x)),
            // (a set's range of a past-the-end start would panic)
            Rows::Range(lo, hi) => lo <= hi && vals.range(*lo..=*hi).next().is_some(),
        }
    }
}

impl RowKey {
    /// A write's key as the values it names by column (a range: none).
    pub fn keys(&self) -> Option<Keys> {
        match &self.rows {
            Rows::In(v) => Some([(self.col.clone(), v.iter().copied().collect())].into()),
            Rows::Range(..) => None,
        }
    }

    /// What it holds in memory, kept with an entry (its name and values,
    /// their two allocations, the registered column's number).
    pub fn bytes(&self) -> usize {
        let vals = match &self.rows {
            Rows::In(v) => v.len(),
            Rows::Range(..) => 2,
        };
        self.table.len() + vals * 16 + 48
    }
}

/// At most this many values in an IN list.
const MAX_VALS: usize = 64;

/// Bare words that are values or functions, never a column.
const NOT_COLUMNS: &[&str] = &[
    "TRUE", "FALSE", "NULL", "UNKNOWN", "DEFAULT", "ROWNUM", "ROWID", "LEVEL", "SYSDATE",
];

/// Words that end a WHERE clause.
const AFTER_WHERE: &[&str] = &[
    "RETURNING",
    "GROUP",
    "HAVING",
    "ORDER",
    "LIMIT",
    "WINDOW",
    "FOR",
    "INTO",
    "PROCEDURE",
    "LOCK",
    "FETCH",
    "OFFSET",
];

/// Words that make the text not keyed wherever they stand (MATCH ...
/// AGAINST: a full-text relevance weighs every row of the table).
const NEVER: &[&str] = &[
    "MATCH",
    "AGAINST",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "JOIN",
    "STRAIGHT_JOIN",
    "NATURAL",
    "LATERAL",
    "PARTITION",
    "USE",
    "FORCE",
    "IGNORE",
    "WITH",
    "LOW_PRIORITY",
    "QUICK",
];

/// Words that make the WHERE clause not keyed at its top level.
const LOOSER: &[&str] = &["OR", "XOR", "CASE", "ESCAPE"];

type Token = (Tok, Range<usize>);

/// The rows `sql` (lexed as `toks`) reads, when that is sure; `None`
/// otherwise. The caller has found it cacheable and reads names as the
/// server does (`decide::names_read_alike`).
pub fn read_key(sql: &[u8], toks: &[Token]) -> Option<RowKey> {
    read_key_with(sql, toks, &|_| None)
}

/// [`read_key`] of a prepared statement's text: a `?` where the literal
/// stands is its parameter's value (`param`, by the `?`'s place among
/// them: `stmt::int_param`).
pub fn read_key_with(sql: &[u8], toks: &[Token], param: Param) -> Option<RowKey> {
    if !toks.first()?.0.is_word("SELECT") {
        return None;
    }
    for (t, _) in &toks[1..] {
        if let Tok::Word(w) = t {
            if w == "SELECT" || NEVER.contains(&w.as_str()) {
                return None;
            }
        }
    }
    let from = depth0(toks).find(|&i| toks[i].0.is_word("FROM"))?;
    let (table, where_at) = table_then_where(toks, from + 1)?;
    keyed_where((sql, toks, param), table, where_at, &|_| true, true)
}

/// A prepared statement's parameter value by its place (`None`: not an
/// integer, or not known).
pub type Param<'a> = &'a dyn Fn(usize) -> Option<i128>;

/// The rows an UPDATE or DELETE of one table changes, when its text says
/// so for sure: `UPDATE t [AS x] SET ... WHERE ...` whose SET names no
/// word that is the key's column (so the rows keep their key), or
/// `DELETE FROM t [AS x] WHERE ...`, with the WHERE of [`read_key`]
/// (ORDER BY, LIMIT and RETURNING after it only narrow it) keyed by a
/// link of values (never a range: a write's key is always `Rows::In`). Whether the
/// column is an integer, and whether a trigger or a generated column may
/// change it, is the catalog's to say (`backend/write_scope.rs`). The
/// caller has found it one statement that reads names alike.
pub fn write_key(sql: &[u8], toks: &[Token]) -> Option<RowKey> {
    write_key_with(sql, toks, &|_| None)
}

/// [`write_key`] of a prepared statement's text (see [`read_key_with`]).
pub fn write_key_with(sql: &[u8], toks: &[Token], param: Param) -> Option<RowKey> {
    let first = toks.first()?;
    for (t, _) in &toks[1..] {
        if let Tok::Word(w) = t {
            if w == "SELECT" || w == "UPDATE" || w == "DELETE" || NEVER.contains(&w.as_str()) {
                return None;
            }
        }
    }
    if first.0.is_word("DELETE") {
        if !toks.get(1)?.0.is_word("FROM") {
            return None;
        }
        let (table, where_at) = table_then_where(toks, 2)?;
        return keyed_where((sql, toks, param), table, where_at, &|_| true, false);
    }
    if !first.0.is_word("UPDATE") {
        return None;
    }
    let set = depth0(toks).find(|&i| toks[i].0.is_word("SET"))?;
    let (table, _) = table_then(toks, 1, "SET")?;
    let where_at = depth0(toks).find(|&i| i > set && toks[i].0.is_word("WHERE"))?;
    let in_set = |col: &str| {
        toks[set + 1..where_at].iter().any(|(t, _)| match t {
            Tok::Word(w) | Tok::Quoted(w) => w.eq_ignore_ascii_case(col),
            _ => false,
        })
    };
    keyed_where((sql, toks, param), table, where_at, &|c| !in_set(c), false)
}

/// The values an INSERT writes, by column, when its text says them for
/// sure: `INSERT [INTO] [db.]t (col, ...) VALUES|VALUE (v, ...), ...`
/// (RETURNING after it only reads them), each column whose every row's
/// value is an integer literal or a parameter sent as an integer. A
/// column not given here is unknown (its default, an expression, an
/// AUTO_INCREMENT's next value). Not keyed: INSERT ... SELECT, SET,
/// TABLE, ON DUPLICATE KEY UPDATE, IGNORE and the priorities, REPLACE (it
/// deletes the rows its new ones collide with, whose values it does not
/// name). Whether each column stores the value as written — an integer,
/// not generated, the value in its range, no trigger — is the catalog's
/// to say (`backend/write_scope.rs` `exact_keys`).
pub fn insert_key_with(sql: &[u8], toks: &[Token], param: Param) -> Option<(String, Keys)> {
    if !toks.first()?.0.is_word("INSERT") {
        return None;
    }
    for (t, _) in &toks[1..] {
        if let Tok::Word(w) = t {
            if matches!(
                w.as_str(),
                "SELECT" | "SET" | "TABLE" | "DUPLICATE" | "DELAYED" | "HIGH_PRIORITY" | "ON"
            ) || NEVER.contains(&w.as_str())
            {
                return None;
            }
        }
    }
    let at = if toks.get(1)?.0.is_word("INTO") { 2 } else { 1 };
    let (table, open) = table_then_punct(toks, at, b'(')?;
    // The column list.
    let mut cols = Vec::new();
    let mut i = open + 1;
    loop {
        cols.push(name(toks.get(i)?)?);
        match toks.get(i + 1)?.0 {
            Tok::Punct(b',') => i += 2,
            Tok::Punct(b')') => break,
            _ => return None,
        }
    }
    i += 2;
    if !matches!(&toks.get(i)?.0, Tok::Word(w) if w == "VALUES" || w == "VALUE") {
        return None;
    }
    i += 1;
    // Each row: a value per column, `None` where it is not an integer.
    let mut vals: Vec<Option<BTreeSet<i128>>> = vec![Some(BTreeSet::new()); cols.len()];
    loop {
        if !toks.get(i)?.0.is_punct(b'(') {
            return None;
        }
        i += 1;
        for (n, slot) in vals.iter_mut().enumerate() {
            // The value's tokens: to the next comma or the row's end at
            // its depth.
            let mut depth = 0usize;
            let mut end = i;
            loop {
                match toks.get(end)?.0 {
                    Tok::Punct(b'(') => depth += 1,
                    Tok::Punct(b')') if depth == 0 => break,
                    Tok::Punct(b')') => depth -= 1,
                    Tok::Punct(b',') if depth == 0 => break,
                    _ => {}
                }
                end += 1;
            }
            let last = n + 1 == cols.len();
            if toks[end].0.is_punct(b')') != last {
                return None;
            }
            match int((sql, toks, param), i, end) {
                Some((v, next)) if next == end => {
                    if let Some(set) = slot {
                        set.insert(v);
                        if set.len() > MAX_VALUES {
                            *slot = None;
                        }
                    }
                }
                _ => *slot = None,
            }
            i = end + 1;
        }
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Punct(b',')) => i += 1,
            None => break,
            Some(Tok::Punct(b';')) if i + 1 == toks.len() => break,
            Some(Tok::Word(w)) if w == "RETURNING" => break,
            _ => return None,
        }
    }
    let keys = cols
        .into_iter()
        .zip(vals)
        .filter_map(|(c, v)| Some((c, v?)))
        .collect();
    Some((table, keys))
}

/// A text, its tokens and its parameters' values.
type Text<'a> = (&'a [u8], &'a [Token], Param<'a>);

/// The key of a WHERE clause at `where_at`, on `table`: its first link
/// of values whose column `may` allows, or else (when `ranges`) the range
/// of the first comparing link's column, intersected over its links.
fn keyed_where(
    text: Text,
    table: String,
    where_at: usize,
    may: &dyn Fn(&str) -> bool,
    ranges: bool,
) -> Option<RowKey> {
    let toks = text.1;
    let end = depth0(toks)
        .skip_while(|&i| i <= where_at)
        .find(|&i| match &toks[i].0 {
            Tok::Word(w) => AFTER_WHERE.contains(&w.as_str()),
            Tok::Punct(b';') => true,
            _ => false,
        })
        .unwrap_or(toks.len());
    let clause = where_at + 1..end;
    // Only ANDs at the top level.
    for i in depth0(toks).filter(|i| clause.contains(i)) {
        match &toks[i].0 {
            Tok::Word(w) if LOOSER.contains(&w.as_str()) => return None,
            Tok::Punct(b'|' | b':') => return None,
            _ => {}
        }
    }
    let mut vals: Option<(String, Vec<i128>)> = None;
    let mut range: Option<(String, i128, i128)> = None;
    let mut at = clause.start;
    loop {
        let next = match link(text, at, end) {
            Some((col, found, next)) => {
                match found {
                    _ if !may(&col) => {}
                    Rows::In(v) if vals.is_none() => vals = Some((col, v.into_vec())),
                    Rows::Range(lo, hi) if ranges => match &mut range {
                        None => range = Some((col, lo, hi)),
                        Some((c, a, b)) if *c == col => {
                            *a = (*a).max(lo);
                            *b = (*b).min(hi);
                        }
                        Some(_) => {}
                    },
                    _ => {}
                }
                next
            }
            // Not a link: on to the next top-level AND, unless a BETWEEN
            // (whose AND is its own) stands before it.
            None => depth0(toks)
                .skip_while(|&i| i < at)
                .find(|&i| i >= end || toks[i].0.is_word("AND") || toks[i].0.is_word("BETWEEN"))
                .unwrap_or(end),
        };
        if next >= end {
            break;
        }
        if !toks[next].0.is_word("AND") {
            return None;
        }
        at = next + 1;
    }
    let (col, rows) = match (vals, range) {
        (Some((col, v)), _) => (col, Rows::In(v.into_boxed_slice())),
        (None, Some((col, lo, hi))) => (col, Rows::Range(lo, hi)),
        (None, None) => return None,
    };
    Some(RowKey { table, col, rows })
}

/// The indexes of the tokens outside any parentheses.
fn depth0(toks: &[Token]) -> impl Iterator<Item = usize> + '_ {
    let mut depth = 0usize;
    toks.iter().enumerate().filter_map(move |(i, (t, _))| {
        let here = depth;
        match t {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth = depth.saturating_sub(1),
            _ => {}
        }
        (here == 0 && !t.is_punct(b'(')).then_some(i)
    })
}

/// `[db.]table [[AS] alias] WHERE` from `at`: the table's name and where
/// WHERE stands.
fn table_then_where(toks: &[Token], at: usize) -> Option<(String, usize)> {
    table_then(toks, at, "WHERE")
}

/// `[db.]table [[AS] alias] <next>` from `at`: the table's name and where
/// `next` stands.
fn table_then(toks: &[Token], at: usize, next: &str) -> Option<(String, usize)> {
    let (table, mut i) = qualified(toks, at)?;
    if toks.get(i)?.0.is_word("AS") {
        i += 1;
    }
    if !toks.get(i)?.0.is_word(next) {
        // an alias
        name(toks.get(i)?)?;
        i += 1;
    }
    toks.get(i)?.0.is_word(next).then_some((table, i))
}

/// `[db.]table <c>` from `at` (no alias): the table's name and where the
/// punctuation `c` stands.
fn table_then_punct(toks: &[Token], at: usize, c: u8) -> Option<(String, usize)> {
    let (table, i) = qualified(toks, at)?;
    toks.get(i)?.0.is_punct(c).then_some((table, i))
}

/// `[db.]table` from `at`: the table's name and the index after it.
fn qualified(toks: &[Token], at: usize) -> Option<(String, usize)> {
    let table = name(toks.get(at)?)?;
    if toks.get(at + 1)?.0.is_punct(b'.') {
        return Some((name(toks.get(at + 2)?)?, at + 3));
    }
    Some((table, at + 1))
}

/// A name token, folded.
fn name(t: &Token) -> Option<String> {
    match &t.0 {
        Tok::Word(w)
            if !NOT_COLUMNS.contains(&w.as_str()) && !matches!(w.as_str(), "WHERE" | "SET") =>
        {
            folded(w)
        }
        Tok::Quoted(q) => folded(q),
        _ => None,
    }
}

/// A link at `at`: `[q.[q.]]col` then `= N`, `IN (N, ...)`, `BETWEEN N
/// AND M`, `< N`, `<= N`, `> N` or `>= N`, standing alone before AND or
/// `end`: its column, its rows and the index after it.
fn link(text: Text, at: usize, end: usize) -> Option<(String, Rows, usize)> {
    let toks = text.1;
    let mut i = at;
    let mut col = name(toks.get(i)?)?;
    i += 1;
    for _ in 0..2 {
        if i < end && toks[i].0.is_punct(b'.') {
            col = name(toks.get(i + 1)?)?;
            i += 2;
        }
    }
    if i >= end {
        return None;
    }
    // Whether the token after `i` is the punctuation `c`, written next to it.
    let then = |i: usize, c: u8| {
        i + 1 < end && toks[i + 1].0.is_punct(c) && toks[i].1.end == toks[i + 1].1.start
    };
    let (rows, i) = match &toks[i].0 {
        Tok::Punct(b'=') => {
            let (v, next) = int(text, i + 1, end)?;
            (Rows::In(Box::new([v])), next)
        }
        Tok::Punct(b'<' | b'>') if then(i, b'>') || then(i + 1, b'>') && then(i, b'=') => {
            return None
        }
        Tok::Punct(op @ (b'<' | b'>')) => {
            let or_equal = then(i, b'=');
            let (v, next) = int(text, i + 1 + usize::from(or_equal), end)?;
            let rows = match (op, or_equal) {
                (b'<', true) => Rows::Range(i128::MIN, v),
                (b'<', false) => Rows::Range(i128::MIN, v - 1),
                (_, true) => Rows::Range(v, i128::MAX),
                (_, false) => Rows::Range(v + 1, i128::MAX),
            };
            (rows, next)
        }
        Tok::Word(w) if w == "BETWEEN" => {
            let (lo, and) = int(text, i + 1, end)?;
            if !toks.get(and)?.0.is_word("AND") {
                return None;
            }
            let (hi, next) = int(text, and + 1, end)?;
            (Rows::Range(lo, hi), next)
        }
        Tok::Word(w) if w == "IN" && i + 1 < end && toks[i + 1].0.is_punct(b'(') => {
            let mut vals = Vec::new();
            let mut i = i + 2;
            let after = loop {
                let (v, next) = int(text, i, end)?;
                vals.push(v);
                if vals.len() > MAX_VALS {
                    return None;
                }
                match toks.get(next).map(|t| &t.0) {
                    Some(Tok::Punct(b',')) if next < end => i = next + 1,
                    Some(Tok::Punct(b')')) if next < end => break next + 1,
                    _ => return None,
                }
            };
            (Rows::In(vals.into_boxed_slice()), after)
        }
        _ => return None,
    };
    (i == end || toks[i].0.is_word("AND")).then_some((col, rows, i))
}

/// An integer literal (digits, at most one minus before) at `at`, or a
/// parameter sent as an integer: its value and the index after it.
fn int((sql, toks, param): Text, at: usize, end: usize) -> Option<(i128, usize)> {
    let mut i = at;
    let neg = i < end && toks[i].0.is_punct(b'-');
    if neg {
        i += 1;
    }
    if i >= end {
        return None;
    }
    if toks[i].0.is_punct(b'?') {
        let place = toks[..i].iter().filter(|t| t.0.is_punct(b'?')).count();
        let v = param(place)?;
        return Some((if neg { -v } else { v }, i + 1));
    }
    let (Tok::Literal, r) = &toks[i] else {
        return None;
    };
    let text = sql.get(r.clone())?;
    if text.is_empty() || text.len() > 30 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: i128 = std::str::from_utf8(text).ok()?.parse().ok()?;
    Some((if neg { -v } else { v }, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Got = Option<(String, String, Rows)>;

    fn key(sql: &str) -> Got {
        let toks = sqlfleet_dump::lex::lex(sql.as_bytes()).toks;
        read_key(sql.as_bytes(), &toks).map(|k| (k.table, k.col, k.rows))
    }

    fn some(t: &str, c: &str, v: &[i128]) -> Got {
        Some((t.into(), c.into(), Rows::In(v.into())))
    }

    fn range(t: &str, c: &str, lo: i128, hi: i128) -> Got {
        Some((t.into(), c.into(), Rows::Range(lo, hi)))
    }

    fn vals(k: RowKey) -> Vec<i128> {
        match k.rows {
            Rows::In(v) => v.to_vec(),
            Rows::Range(..) => panic!("a range: {k:?}"),
        }
    }

    #[test]
    fn a_select_is_keyed_only_when_its_rows_are_those_of_one_column_s_values() {
        for (sql, want) in [
            (
                "SELECT c FROM sbtest1 WHERE id=42",
                some("sbtest1", "id", &[42]),
            ),
            (
                "select c from SBtest1 where ID = 42",
                some("sbtest1", "id", &[42]),
            ),
            ("SELECT c FROM db.t WHERE t.id = -7", some("t", "id", &[-7])),
            (
                "SELECT c FROM `t` AS x WHERE x.`Id` = 007 ORDER BY c LIMIT 1",
                some("t", "id", &[7]),
            ),
            (
                "SELECT c FROM t x WHERE a > 3 AND (b OR c) AND id IN (1, 2,3)",
                some("t", "id", &[1, 2, 3]),
            ),
            (
                "SELECT COUNT(*) FROM t WHERE k = 5 GROUP BY c HAVING 1",
                some("t", "k", &[5]),
            ),
            (
                "SELECT SUBSTRING(c FROM 2) FROM t WHERE id = 1;",
                some("t", "id", &[1]),
            ),
            ("SELECT c FROM t WHERE db.t.id = 1", some("t", "id", &[1])),
            (
                "SELECT c FROM t WHERE id = 99999999999999999999",
                some("t", "id", &[99999999999999999999]),
            ),
            // the second link when the first is not one
            (
                "SELECT c FROM t WHERE id > 1 AND k = 2",
                some("t", "k", &[2]),
            ),
            // ranges
            (
                "SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 104",
                range("sbtest1", "id", 5, 104),
            ),
            (
                "SELECT SUM(k) FROM t WHERE a > 1 AND id BETWEEN -5 AND 4 AND b",
                range("t", "a", 2, i128::MAX),
            ),
            (
                "SELECT c FROM t WHERE id >= 10 AND k > 3 AND id < 20 ORDER BY id",
                range("t", "id", 10, 19),
            ),
            (
                "SELECT c FROM t WHERE id<=10 AND id>=20",
                range("t", "id", 20, 10),
            ),
            (
                "SELECT c FROM t WHERE id < -3",
                range("t", "id", i128::MIN, -4),
            ),
            (
                "SELECT c FROM t WHERE b BETWEEN 1 AND 2 AND id = 7",
                some("t", "id", &[7]),
            ),
            (
                "SELECT c FROM t WHERE id > 1 AND k IN (2, 3)",
                some("t", "k", &[2, 3]),
            ),
            // not keyed
            ("SELECT c FROM t WHERE id = 1 OR k = 2", None),
            ("SELECT c FROM t WHERE id <=> 1", None),
            ("SELECT c FROM t WHERE k = 2 AND id = 1 XOR b", None),
            ("SELECT c FROM t WHERE b || id = 1", None),
            ("SELECT c FROM t WHERE id = 1 || b", None),
            ("SELECT c FROM t WHERE id = 1 + 1", None),
            ("SELECT c FROM t WHERE id = 1 | 8", None),
            ("SELECT c FROM t WHERE x = id = 1", None),
            ("SELECT c FROM t WHERE NOT id = 1", None),
            ("SELECT c FROM t WHERE id = 1 IS TRUE", None),
            ("SELECT c FROM t WHERE id = 1 COLLATE utf8mb4_bin", None),
            ("SELECT c FROM t WHERE k BETWEEN 1 AND id = 1", None),
            ("SELECT c FROM t WHERE k BETWEEN id AND 2 AND id = 1", None),
            (
                "SELECT c FROM t WHERE id = 1 AND k BETWEEN 1 AND 2 = 1",
                None,
            ),
            (
                "SELECT c FROM t WHERE id = 1 AND k NOT BETWEEN 1 AND 2",
                None,
            ),
            ("SELECT c FROM t WHERE id BETWEEN 1 AND 2 + 1", None),
            ("SELECT c FROM t WHERE id BETWEEN 1 + 1 AND 2", None),
            ("SELECT c FROM t WHERE id BETWEEN 1 OR 2", None),
            ("SELECT c FROM t WHERE id <> 1", None),
            ("SELECT c FROM t WHERE id != 1", None),
            ("SELECT c FROM t WHERE id < = 1", None),
            ("SELECT c FROM t WHERE id >> 1", None),
            ("SELECT c FROM t WHERE id << 1", None),
            ("SELECT c FROM t WHERE id < 1 IS TRUE", None),
            ("SELECT c FROM t WHERE x = id < 1", None),
            ("SELECT c FROM t WHERE id < 1 = x", None),
            ("SELECT c FROM t WHERE id > '1'", None),
            (
                "SELECT c FROM t WHERE CASE WHEN a AND id = 1 THEN 1 END",
                None,
            ),
            ("SELECT c FROM t WHERE id = '1'", None),
            ("SELECT c FROM t WHERE id = 1.0", None),
            ("SELECT c FROM t WHERE id = 1e0", None),
            ("SELECT c FROM t WHERE id = 0x1", None),
            ("SELECT c FROM t WHERE id = - -1", None),
            ("SELECT c FROM t WHERE id = +1", None),
            ("SELECT c FROM t WHERE id IN (1, k)", None),
            ("SELECT c FROM t WHERE id IN (SELECT 1)", None),
            ("SELECT c FROM t WHERE TRUE = 1", None),
            ("SELECT MATCH (c) AGAINST ('x') FROM t WHERE id = 1", None),
            ("SELECT c FROM t WHERE id = (SELECT MAX(id) FROM t)", None),
            ("SELECT (SELECT 1 FROM u) FROM t WHERE id = 1", None),
            ("SELECT c FROM t, u WHERE id = 1", None),
            ("SELECT c FROM t JOIN u USING (id) WHERE id = 1", None),
            ("SELECT c FROM t USE INDEX (k) WHERE id = 1", None),
            ("SELECT c FROM t PARTITION (p0) WHERE id = 1", None),
            (
                "SELECT c FROM t WHERE id = 1 UNION SELECT c FROM u WHERE id = 1",
                None,
            ),
            ("WITH x AS (SELECT 1) SELECT c FROM t WHERE id = 1", None),
            ("(SELECT c FROM t WHERE id = 1)", None),
            ("SELECT c FROM t", None),
            ("SELECT c FROM t WHERE id", None),
            ("SELECT c FROM t WHERE id =", None),
            ("SELECT c FROM t WHERE id IN (1", None),
            ("SELECT 1", None),
        ] {
            assert_eq!(key(sql), want, "{sql}");
        }
    }

    fn wkey(sql: &str) -> Got {
        let toks = sqlfleet_dump::lex::lex(sql.as_bytes()).toks;
        write_key(sql.as_bytes(), &toks).map(|k| (k.table, k.col, k.rows))
    }

    #[test]
    fn an_update_or_delete_is_keyed_only_when_its_rows_keep_their_key() {
        for (sql, want) in [
            (
                "UPDATE sbtest1 SET k=k+1 WHERE id=5",
                some("sbtest1", "id", &[5]),
            ),
            (
                "UPDATE db.T AS x SET x.v = 'a,b' WHERE x.id IN (1, 2) ORDER BY id LIMIT 2",
                some("t", "id", &[1, 2]),
            ),
            (
                "DELETE FROM t WHERE id = 3 AND v > 2",
                some("t", "id", &[3]),
            ),
            (
                "DELETE FROM t WHERE id = 3 RETURNING v",
                some("t", "id", &[3]),
            ),
            (
                "UPDATE t SET v = 1 WHERE v = 2 AND k = 4",
                some("t", "k", &[4]),
            ),
            // the key's column named in SET
            ("UPDATE t SET id = 6 WHERE id = 5", None),
            ("UPDATE t SET t.`ID` = 6 WHERE id = 5", None),
            ("UPDATE t SET v = id + 1 WHERE id = 5", None),
            // more than one table, modifiers, subqueries
            ("UPDATE t, u SET t.v = 1 WHERE t.id = 5", None),
            (
                "UPDATE t JOIN u ON t.a = u.a SET t.v = 1 WHERE t.id = 5",
                None,
            ),
            ("UPDATE LOW_PRIORITY t SET v = 1 WHERE id = 5", None),
            ("UPDATE IGNORE t SET v = 1 WHERE id = 5", None),
            ("UPDATE t SET v = (SELECT 1) WHERE id = 5", None),
            ("DELETE t FROM t WHERE id = 5", None),
            ("DELETE QUICK FROM t WHERE id = 5", None),
            ("DELETE FROM t USING t JOIN u WHERE id = 5", None),
            ("DELETE FROM t WHERE id = 5 OR 1", None),
            // a write's key is never a range
            ("DELETE FROM t WHERE id BETWEEN 1 AND 5", None),
            ("UPDATE t SET v = 1 WHERE id > 5", None),
            (
                "UPDATE t SET v = 1 WHERE id < 5 AND k BETWEEN 1 AND 2 AND j = 3",
                some("t", "j", &[3]),
            ),
            ("DELETE FROM t", None),
            ("INSERT INTO t (id) VALUES (5)", None),
            ("REPLACE INTO t (id) VALUES (5)", None),
        ] {
            assert_eq!(wkey(sql), want, "{sql}");
        }
    }

    #[test]
    fn an_insert_names_the_values_of_its_integer_columns() {
        type Want<'a> = Option<(&'a str, Vec<(&'a str, Vec<i128>)>)>;
        let rows: Vec<(&str, Want)> = vec![
            (
                "INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 77, 'x', 'y')",
                Some(("sbtest1", vec![("id", vec![5]), ("k", vec![77])])),
            ),
            (
                "insert db.T (`Id`, v) values (1, 2), (3, -4), (1, 9);",
                Some(("t", vec![("id", vec![1, 3]), ("v", vec![-4, 2, 9])])),
            ),
            (
                "INSERT INTO t (id, v) VALUE (1, NULL), (2, 3) RETURNING id",
                Some(("t", vec![("id", vec![1, 2])])),
            ),
            (
                "INSERT INTO t (id, v, w) VALUES (1 + 1, CONCAT('a', 'b'), DEFAULT)",
                Some(("t", vec![])),
            ),
            (
                "INSERT INTO t (id, v) VALUES (f(1, 2), 3)",
                Some(("t", vec![("v", vec![3])])),
            ),
            ("INSERT INTO t (id) VALUES (1), (2, 3)", None),
            ("INSERT INTO t (id, v) VALUES (1)", None),
            ("INSERT INTO t VALUES (1, 2)", None),
            ("INSERT INTO t (id) SELECT 1", None),
            ("INSERT INTO t (id) VALUES ((SELECT 1))", None),
            ("INSERT INTO t SET id = 1", None),
            (
                "INSERT INTO t (id) VALUES (1) ON DUPLICATE KEY UPDATE v = 2",
                None,
            ),
            ("INSERT IGNORE INTO t (id) VALUES (1)", None),
            ("INSERT LOW_PRIORITY INTO t (id) VALUES (1)", None),
            ("INSERT DELAYED INTO t (id) VALUES (1)", None),
            ("INSERT INTO t PARTITION (p0) (id) VALUES (1)", None),
            ("INSERT INTO t (id) VALUES (1) AS n", None),
            ("INSERT INTO t (id) VALUES (1); DELETE FROM t", None),
            ("INSERT INTO t (t.id) VALUES (1)", None),
            ("REPLACE INTO t (id) VALUES (1)", None),
            ("INSERT INTO t (id) VALUES (1", None),
        ];
        for (sql, want) in rows {
            let toks = sqlfleet_dump::lex::lex(sql.as_bytes()).toks;
            let got = insert_key_with(sql.as_bytes(), &toks, &|_| None);
            let want = want.map(|(t, cols)| {
                let keys: Keys = cols
                    .into_iter()
                    .map(|(c, v)| (c.to_string(), v.into_iter().collect()))
                    .collect();
                (t.to_string(), keys)
            });
            assert_eq!(got, want, "{sql}");
        }
        let sql = b"INSERT INTO t (id, k, c) VALUES (?, ?, ?)";
        let toks = sqlfleet_dump::lex::lex(sql).toks;
        let got = insert_key_with(sql, &toks, &|i| (i < 2).then_some(i as i128 + 10));
        assert_eq!(
            got.map(|(_, k)| k.into_keys().collect::<Vec<_>>()),
            Some(vec!["id".to_string(), "k".to_string()])
        );
        let many: Vec<String> = (0..=MAX_VALUES).map(|i| format!("({i})")).collect();
        let sql = format!("INSERT INTO t (id) VALUES {}", many.join(","));
        let toks = sqlfleet_dump::lex::lex(sql.as_bytes()).toks;
        assert_eq!(
            insert_key_with(sql.as_bytes(), &toks, &|_| None).map(|(_, k)| k.len()),
            Some(0),
            "past the bound the column is unknown"
        );
    }

    #[test]
    fn a_parameter_is_its_value_when_sent_as_an_integer() {
        let params = |i: usize| [Some(7i128), None, Some(9)].get(i).copied().flatten();
        let k = |sql: &str| {
            let toks = sqlfleet_dump::lex::lex(sql.as_bytes()).toks;
            read_key_with(sql.as_bytes(), &toks, &params).map(vals)
        };
        assert_eq!(k("SELECT c FROM t WHERE id = ?"), Some(vec![7]));
        assert_eq!(k("SELECT c FROM t WHERE id = -?"), Some(vec![-7]));
        assert_eq!(
            k("SELECT c FROM t WHERE b = ? AND a = ? AND id IN (?, 3)"),
            Some(vec![7]),
            "the first link whose value is known"
        );
        assert_eq!(
            k("SELECT c FROM t WHERE a > ? AND b = ? AND id = 1"),
            Some(vec![1]),
            "the second is not an integer"
        );
        assert_eq!(
            k("SELECT c FROM t WHERE a > ? AND b > ? AND id IN (?, 3)"),
            Some(vec![9, 3])
        );
        let sql = b"SELECT c FROM t WHERE id BETWEEN ? AND ?";
        let toks = sqlfleet_dump::lex::lex(sql).toks;
        assert_eq!(
            read_key_with(sql, &toks, &|i| (i == 0).then_some(5)),
            None,
            "a bound not an integer"
        );
        let sql = b"SELECT c FROM t WHERE id BETWEEN ? AND ? AND id >= ?";
        let toks = sqlfleet_dump::lex::lex(sql).toks;
        assert_eq!(
            read_key_with(sql, &toks, &|i| Some(i as i128 * 10 + 1)).map(|k| k.rows),
            Some(Rows::Range(21, 11))
        );
        assert_eq!(
            k("SELECT c FROM t WHERE x = '?' AND id = ?"),
            Some(vec![7]),
            "a ? in a string is none"
        );
        assert_eq!(
            read_key(
                b"SELECT c FROM t WHERE id = ?",
                &sqlfleet_dump::lex::lex(b"SELECT c FROM t WHERE id = ?").toks
            ),
            None
        );
        let toks = sqlfleet_dump::lex::lex(b"UPDATE t SET v = ? WHERE id = ?").toks;
        assert_eq!(
            write_key_with(b"UPDATE t SET v = ? WHERE id = ?", &toks, &|i| Some(
                i as i128 + 40
            ))
            .map(vals),
            Some(vec![41])
        );
    }

    #[test]
    fn an_in_list_has_a_bound() {
        let list: Vec<String> = (0..=MAX_VALS).map(|i| i.to_string()).collect();
        let sql = format!("SELECT c FROM t WHERE id IN ({})", list.join(","));
        assert_eq!(key(&sql), None);
        let sql = format!("SELECT c FROM t WHERE id IN ({})", list[1..].join(","));
        assert_eq!(
            key(&sql).map(|k| k.2),
            some("t", "id", &(1..=MAX_VALS as i128).collect::<Vec<_>>()).map(|k| k.2)
        );
    }

    proptest::proptest! {
        /// Any INSERT-like text: no panic, and values only for columns
        /// and values the text names.
        #[test]
        fn any_insert_reads_without_panic(
            cols in proptest::collection::vec("[a-z]{1,3}", 1..4),
            rows in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![
                        "-?[0-9]{1,5}", "'[a-z0-9]{0,3}'", "NULL", "DEFAULT", "[0-9] \\+ [0-9]",
                        // (Nothing in the free text that changes where
                        // a value ends: a comma, a quote opening a string
                        // across the row's end, a parenthesis, a comment
                        // — `"), ("` made two drawn rows one.)
                        "\\?", "\\([0-9]\\)", "[ !$%&*+.0-9:<=>@A-Z^_a-z|~]{0,4}"
                    ],
                    1..4,
                ),
                1..4,
            ),
            tail in proptest::prop_oneof![
                proptest::strategy::Just(String::new()),
                proptest::strategy::Just(";".to_string()),
                proptest::strategy::Just(" RETURNING id".to_string()),
                "[ -~]{0,8}",
            ],
        ) {
            let values: Vec<String> = rows.iter().map(|r| format!("({})", r.join(", "))).collect();
            let sql = format!("INSERT INTO t ({}) VALUES {}{tail}", cols.join(", "), values.join(", "));
            let toks = sqlfleet_dump::lex::lex(sql.as_bytes()).toks;
            if let Some((table, keys)) = insert_key_with(sql.as_bytes(), &toks, &|i| Some(i as i128)) {
                proptest::prop_assert_eq!(table, "t");
                for (c, vals) in keys {
                    let at = cols.iter().position(|x| *x == c);
                    proptest::prop_assert!(at.is_some(), "{} is not a column of {}", c, sql);
                    // every row gave the column a value
                    proptest::prop_assert!(rows.iter().all(|r| r.len() == cols.len()));
                    for v in vals {
                        let s = v.unsigned_abs().to_string();
                        proptest::prop_assert!(sql.contains(&s) || sql.contains('?'), "{} not in {}", v, sql);
                    }
                }
            }
        }

        /// Any text: no panic, and a key only for a text that names its
        /// column and every one of its values.
        #[test]
        fn any_text_reads_without_panic(s in "[ -~]{0,80}") {
            let toks = sqlfleet_dump::lex::lex(s.as_bytes()).toks;
            if let Some(k) = read_key(s.as_bytes(), &toks) {
                let low = s.to_ascii_lowercase();
                proptest::prop_assert!(low.contains(&k.col));
                proptest::prop_assert!(low.contains(&k.table));
                match k.rows {
                    Rows::In(vals) => for v in vals.iter() {
                        proptest::prop_assert!(s.contains(&v.unsigned_abs().to_string()));
                    },
                    Rows::Range(..) => proptest::prop_assert!(
                        s.contains('<') || s.contains('>') || low.contains("between")
                    ),
                }
            }
        }
    }
}
