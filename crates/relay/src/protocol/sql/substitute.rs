//! A client's own values written into its statement: a read of
//! ROW_COUNT(), FOUND_ROWS() or `@@last_gtid` becomes `COALESCE(value,
//! target)` (the column keeps its type), and a select item holding one
//! keeps the column name the server would give it (`AS` its own text).
//! Read from the statement's tokens as the session wrote it: a call the
//! session's dialect puts inside a string is data, never rewritten.

use std::ops::Range;

use sqlfleet_dump::lex::{Multibyte, Tok};

use super::{after_set_statement, word};

/// Whether a statement's reads are evaluated as it runs, so that a
/// client's own values may be written into them: it starts (after any
/// `(` and a `SET STATEMENT ... FOR`) with a word of a statement that
/// runs its expressions now. Never a definition the server keeps — a
/// routine's, trigger's, event's or view's body, a column's DEFAULT,
/// CHECK or generated expression (CREATE and ALTER are none of these
/// words) — where the literal would stand for every later run.
pub fn evaluated_now(t: &[(Tok, Range<usize>)]) -> bool {
    const NOW: &[&str] = &[
        "SELECT", "WITH", "VALUES", "TABLE", "INSERT", "REPLACE", "UPDATE", "DELETE", "SET", "DO",
        "CALL", "LOAD", "EXECUTE",
    ];
    let t = after_set_statement(t, &mut Vec::new());
    let first = t.iter().find(|(k, _)| !k.is_punct(b'('));
    word(first).is_some_and(|w| NOW.contains(&w))
}

/// Whether a statement creates a table (`CREATE [OR REPLACE] [TEMPORARY]
/// TABLE`, after any `SET STATEMENT ... FOR`): its `... SELECT` reads
/// ROW_COUNT() and FOUND_ROWS() as it runs, and the server refuses both
/// in every expression a table keeps (a column's DEFAULT, CHECK or
/// generated expression: 1901, measured on 10.11), so they may be
/// written in anywhere in it; `@@last_gtid` may not (a DEFAULT keeps it).
pub fn creates_table(t: &[(Tok, Range<usize>)]) -> bool {
    let t = after_set_statement(t, &mut Vec::new());
    let mut words = t.iter().map(|x| word(Some(x)));
    if words.next() != Some(Some("CREATE")) {
        return false;
    }
    let mut next = words.next();
    if next == Some(Some("OR")) {
        if words.next() != Some(Some("REPLACE")) {
            return false;
        }
        next = words.next();
    }
    if next == Some(Some("TEMPORARY")) {
        next = words.next();
    }
    next == Some(Some("TABLE"))
}

/// The statement with every call `NAME()` (no arguments) answering
/// `value` (`COALESCE(value, NAME())`, so the column keeps the call's type);
/// a select-list item holding a call and no alias keeps the column name
/// the server would give it, its own text (`... AS `NAME()``,
/// `... AS `hex(NAME())``). `None` when the statement has no such call.
/// `t` are the statement's tokens, as the session wrote it (its dialect),
/// `cs` its character set.
pub fn substitute_call(
    sql: &[u8],
    t: &[(Tok, Range<usize>)],
    cs: Multibyte,
    name: &str,
    value: i64,
) -> Option<Vec<u8>> {
    substitute(sql, t, cs, &value.to_string(), |t, i| {
        (matches!(&t[i].0, Tok::Word(w) if w == name)
            && t.get(i + 1).is_some_and(|x| x.0.is_punct(b'('))
            && t.get(i + 2).is_some_and(|x| x.0.is_punct(b')')))
        .then_some(i + 2)
    })
}

/// The statement with every read of the session variable `name`
/// (`@@name`, `@@session.name`) answering the string `value`, as
/// [`substitute_call`] does for a call. `None` when it reads none.
pub fn substitute_var(
    sql: &[u8],
    t: &[(Tok, Range<usize>)],
    cs: Multibyte,
    name: &str,
    value: &str,
) -> Option<Vec<u8>> {
    substitute(sql, t, cs, &sqlfleet_conn::quote::literal(value), |t, i| {
        matches!(&t[i].0, Tok::SysVar(scope, n)
            if n == name && scope.as_deref().is_none_or(|s| s == "session" || s == "local"))
        .then_some(i)
    })
}

/// Every target (`end(t, i)`: the index of its last token, when one
/// starts at `i`) becomes `COALESCE(value, target)`, and a select item
/// holding one and no alias keeps its text as its name.
fn substitute(
    sql: &[u8],
    t: &[(Tok, Range<usize>)],
    cs: Multibyte,
    value: &str,
    end: impl Fn(&[(Tok, Range<usize>)], usize) -> Option<usize>,
) -> Option<Vec<u8>> {
    let targets: Vec<(usize, usize)> = (0..t.len())
        .filter_map(|i| end(t, i).map(|e| (i, e)))
        .collect();
    if targets.is_empty() {
        return None;
    }
    // Each select item holding a target keeps the name the server would
    // give it: the target alone is named as written, an expression around
    // it (hex(concat(row_count()))) by its own text.
    let mut aliases: Vec<(usize, Vec<u8>)> = Vec::new();
    for item in select_items(t) {
        let (a, b) = (item.start, item.end);
        // (Targets are in text order: the first at or after `a`.)
        let first = targets.partition_point(|(c, _)| *c < a);
        if targets.get(first).is_none_or(|(c, _)| *c >= b) || has_alias(&t[a..b]) {
            continue;
        }
        let text = &sql[t[a].1.start..t[b - 1].1.end];
        let Some(alias) = alias_of(text, cs) else {
            continue;
        };
        aliases.push((t[b - 1].1.end, alias));
    }
    let mut out = Vec::with_capacity(sql.len() + 32);
    let mut at = 0;
    let mut edits: Vec<(usize, usize, Vec<u8>)> = targets
        .iter()
        .map(|&(i, e)| {
            let (start, end) = (t[i].1.start, t[e].1.end);
            // COALESCE(value, target) keeps the target's type and length
            // in the column definition (a bare literal would be a shorter
            // INT).
            // A target written against a word (`SELECT@@last_gtid`) is
            // kept apart from it: `SELECTCOALESCE` would be one name.
            let joined = start > 0 && ident_byte(sql[start - 1]);
            let mut v = format!("{}COALESCE({value}, ", if joined { " " } else { "" }).into_bytes();
            v.extend_from_slice(&sql[start..end]);
            v.push(b')');
            (start, end, v)
        })
        .collect();
    edits.extend(aliases.into_iter().map(|(pos, v)| (pos, pos, v)));
    // An alias goes after the target that ends where its item ends.
    edits.sort_by_key(|e| (e.0, e.1 == e.0));
    for (start, end, v) in edits {
        out.extend_from_slice(&sql[at..start]);
        out.extend_from_slice(&v);
        at = end;
    }
    out.extend_from_slice(&sql[at..]);
    Some(out)
}

/// ` AS `text`` for a select item's text: a backquote is doubled; a byte
/// of a multi-byte character (sjis has 0x60 as a second byte) is not one.
/// None when a byte of the text is no character in a character set whose
/// second bytes include the backquote (a lead byte alone, as the text
/// stood before a space): written before the alias's closing backquote it
/// would take it as its second byte, and the rest of the statement would
/// read otherwise; or when the text ends in `-`, where ` AS` would start
/// a comment. The item then keeps the name the server gives it.
fn alias_of(text: &[u8], cs: Multibyte) -> Option<Vec<u8>> {
    // After a `-`, the space before AS would start a `-- ` comment.
    if text.last() == Some(&b'-') {
        return None;
    }
    let mut alias = b" AS `".to_vec();
    let mut k = 0;
    while k < text.len() {
        let n = cs.char_len(text, k);
        if n == 1 && text[k] >= 0x80 && cs != Multibyte::AsciiSafe {
            return None;
        }
        if n == 1 && text[k] == b'`' {
            alias.push(b'`');
        }
        alias.extend_from_slice(&text[k..k + n]);
        k += n;
    }
    alias.push(b'`');
    Some(alias)
}

/// Whether `new`, a rewrite of `old` (each with its tokens, lexed in the
/// session's dialect), reads as `old` did with only `value` written in:
/// the same string and number literals, in the same order, once those
/// equal to `value` are left out. A rewrite that fails this would change
/// what the client's statement says (a string ended elsewhere, a comment
/// begun): it is refused, never sent.
pub fn reads_as_before<'a>(
    (old, old_toks): (&'a [u8], &'a [(Tok, Range<usize>)]),
    (new, new_toks): (&'a [u8], &'a [(Tok, Range<usize>)]),
    value: &'a [u8],
) -> bool {
    // (A negative count is written as `-1`: the lexer reads a `-` and a
    // literal `1`.)
    let digits = value.strip_prefix(b"-").unwrap_or(value);
    let literals = |sql: &'a [u8], t: &'a [(Tok, Range<usize>)]| {
        t.iter()
            .filter(|(k, _)| matches!(k, Tok::Literal))
            .filter_map(move |(_, r)| sql.get(r.clone()))
            .filter(move |l| *l != value && *l != digits)
    };
    literals(old, old_toks).eq(literals(new, new_toks))
}

/// A byte that may be part of a name or a number the server reads on
/// (letters, digits, `_`, `$`, and any byte of a multi-byte character).
fn ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The select items of every SELECT in `t`, as token ranges: from after
/// the SELECT (and its modifiers) to the next comma at its depth, or to the
/// FROM, INTO, UNION ... that ends its list.
fn select_items(t: &[(Tok, Range<usize>)]) -> Vec<Range<usize>> {
    let mut depth = Vec::with_capacity(t.len());
    let mut d = 0i32;
    for (k, _) in t {
        if k.is_punct(b')') {
            d -= 1;
        }
        depth.push(d);
        if k.is_punct(b'(') {
            d += 1;
        }
    }
    const MODIFIERS: &[&str] = &[
        "ALL",
        "DISTINCT",
        "DISTINCTROW",
        "HIGH_PRIORITY",
        "STRAIGHT_JOIN",
        "SQL_SMALL_RESULT",
        "SQL_BIG_RESULT",
        "SQL_BUFFER_RESULT",
        "SQL_CACHE",
        "SQL_NO_CACHE",
        "SQL_CALC_FOUND_ROWS",
    ];
    const ENDS: &[&str] = &[
        "FROM",
        "INTO",
        "UNION",
        "EXCEPT",
        "INTERSECT",
        "MINUS",
        "WHERE",
        "GROUP",
        "HAVING",
        "ORDER",
        "LIMIT",
        "FOR",
        "LOCK",
        "WINDOW",
        "FETCH",
        "OFFSET",
    ];
    let mut items = Vec::new();
    for s in 0..t.len() {
        if word(t.get(s)) != Some("SELECT") {
            continue;
        }
        let ds = depth[s];
        let mut a = s + 1;
        while word(t.get(a)).is_some_and(|w| MODIFIERS.contains(&w)) {
            a += 1;
        }
        let mut k = a;
        while k < t.len() {
            let here = depth[k];
            if here < ds
                || (here == ds
                    && (t[k].0.is_punct(b';') || word(t.get(k)).is_some_and(|w| ENDS.contains(&w))))
            {
                break;
            }
            if here == ds && t[k].0.is_punct(b',') {
                if k > a {
                    items.push(a..k);
                }
                a = k + 1;
            }
            k += 1;
        }
        if k > a {
            items.push(a..k);
        }
    }
    items
}

/// Whether a select item names its column itself: `expr AS name`,
/// `expr name`, `expr 'name'`.
fn has_alias(item: &[(Tok, Range<usize>)]) -> bool {
    let n = item.len();
    if n < 2 {
        return false;
    }
    if word(item.get(n - 2)) == Some("AS") {
        return true;
    }
    let last_names = matches!(item[n - 1].0, Tok::Word(_) | Tok::Quoted(_) | Tok::Literal);
    let prev_ends_expr = item[n - 2].0.is_punct(b')')
        || matches!(
            item[n - 2].0,
            Tok::Quoted(_) | Tok::Literal | Tok::SysVar(..) | Tok::UserVar
        );
    last_names && prev_ends_expr
}

#[cfg(test)]
mod tests;
