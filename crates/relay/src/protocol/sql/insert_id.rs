//! How a statement leaves LAST_INSERT_ID(), which the relay carries from
//! one pooled connection to the next (`@@session.last_insert_id`).
//!
//! The server's OK packet does not say it: its insert id is the first id
//! the statement generated, or — where it generated none — the
//! AUTO_INCREMENT value of its last row as written (an explicit id), or
//! the argument of LAST_INSERT_ID(expr); LAST_INSERT_ID() takes the
//! first and the last of those and keeps its value through the second
//! (measured on MariaDB 10.11: after `INSERT INTO t (id, v) VALUES (500,
//! 1)` the OK says 500 and LAST_INSERT_ID() is still the id generated
//! before). Taking the OK's id for the client's value gave a client that
//! moved to another connection the explicit id (`tests/differential.rs`
//! `an_explicit_id_leaves_last_insert_id_as_the_server_does`).
//!
//! So an INSERT or REPLACE is read here into an [`InsertShape`] (which
//! columns it gives values, and what kind of value each row gives), and
//! judged with what the catalog says of its table (the AUTO_INCREMENT
//! column, whether triggers may write it: `backend/write_effects.rs`) into
//! an [`InsertId`]: the OK's id is the client's value, or the value
//! before stands, or only the server knows (the relay then asks it before
//! the connection may go to another client). NULL, DEFAULT and 0 (unless
//! NO_AUTO_VALUE_ON_ZERO) generate; an integer literal is explicit; any
//! other value (an expression, a parameter, a string) is not judged.

use std::ops::Range;

use sqlfleet_dump::lex::Tok;

use super::word;

/// How a statement whose OK carried a non-zero insert id left
/// LAST_INSERT_ID().
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertId {
    /// It is the OK's id.
    Sets,
    /// LAST_INSERT_ID(expr) set it: the OK's id where an OK carries one;
    /// a SELECT's rows carry none, nor does an OK where expr is 0 (only
    /// the server knows then).
    Setter,
    /// It is what it was before (every row's id was written explicitly).
    Keeps,
    /// A one-row upsert without the setter whose id is generated: the
    /// reply's affected rows say — 1, inserted (the OK's id generated, and
    /// LAST_INSERT_ID()'s); 2, updated (the OK's id is the row's, and
    /// LAST_INSERT_ID() stays); measured on MariaDB 10.11, with and
    /// without CLIENT_FOUND_ROWS (an update that changes nothing says 0,
    /// or 1 with an OK id of 0).
    ByAffected,
    /// Only the server knows.
    Unsure,
}

/// What one row gives the AUTO_INCREMENT column, as far as the text says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// NULL or DEFAULT: a new id.
    Generates,
    /// The literal 0: a new id, but under NO_AUTO_VALUE_ON_ZERO.
    Zero,
    /// An integer literal other than 0: written as it is.
    Explicit,
    /// The statement's parameter of this index (its `?` marks counted
    /// from 0): judged by the value an execute binds.
    Param(usize),
    /// Anything else (an expression, a parameter, a string literal).
    Unknown,
}

/// An INSERT or REPLACE as far as its insert id goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InsertShape {
    /// The columns named (folded to lower case), in order; `None`: no
    /// column list, the values are the table's columns in order.
    pub columns: Option<Vec<String>>,
    /// Each row's values; `None`: the rows come from a query.
    pub rows: Option<Vec<Vec<Value>>>,
    /// Nothing makes the OK's id mean something else: no IGNORE (a row
    /// left out may have taken the generated id), a shape read to its end
    /// (but for an ON DUPLICATE KEY UPDATE clause: `upsert`).
    pub plain: bool,
    /// It calls LAST_INSERT_ID(expr) outside an ON DUPLICATE KEY UPDATE
    /// clause.
    pub calls_setter: bool,
    /// It has an ON DUPLICATE KEY UPDATE clause: whether that clause
    /// calls LAST_INSERT_ID(expr) (the upsert idiom `id =
    /// LAST_INSERT_ID(id)`, which makes the OK's id the row's, updated or
    /// generated; without it an updated row's id is the OK's while
    /// LAST_INSERT_ID() stays: measured on MariaDB 10.11).
    pub upsert: Option<bool>,
}

/// The AUTO_INCREMENT column of the table an INSERT writes, as the
/// catalog says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoCol {
    /// Its name, folded to lower case.
    pub name: String,
    /// Its place among the table's visible columns (1 for the first),
    /// which a VALUES row without a column list gives in order; 0 for an
    /// INVISIBLE column, which such a row does not give.
    pub position: usize,
    /// The table has triggers (one may set the column: `SET NEW.id`).
    pub triggers: bool,
}

/// How the statement left LAST_INSERT_ID() where its OK carried an id:
/// `shape` is the INSERT's (none for other statements), `sets` whether
/// the text calls LAST_INSERT_ID(expr), `auto` the written table's
/// AUTO_INCREMENT column, `zero_is_value` whether NO_AUTO_VALUE_ON_ZERO
/// is in the session's sql_mode (`None`: not known), `param` an execute's
/// integer parameter by index (`None`: NULL, another type, or a text
/// statement).
pub fn after_ok(
    shape: Option<&InsertShape>,
    sets: bool,
    auto: Option<&AutoCol>,
    zero_is_value: Option<bool>,
    param: &dyn Fn(usize) -> Option<i128>,
) -> InsertId {
    let Some(shape) = shape else {
        return if sets {
            InsertId::Setter
        } else {
            InsertId::Unsure
        };
    };
    let Some(auto) = auto.filter(|a| !a.triggers) else {
        return InsertId::Unsure;
    };
    if !shape.plain || shape.calls_setter {
        return InsertId::Unsure;
    }
    if let Some(setter) = shape.upsert {
        // Rows inserted generate ids, rows updated call the setter: the
        // OK's id is LAST_INSERT_ID()'s either way; a written id (or
        // one not known) may leave it as it was.
        let generated = match &shape.columns {
            Some(cols) => !cols.contains(&auto.name),
            None => auto.position == 0,
        };
        let one_row = shape.rows.as_ref().is_some_and(|r| r.len() == 1);
        return match (setter, generated) {
            (true, true) => InsertId::Sets,
            (false, true) if one_row => InsertId::ByAffected,
            _ => InsertId::Unsure,
        };
    }
    let at = match &shape.columns {
        Some(cols) => match cols.iter().position(|c| *c == auto.name) {
            Some(i) => i,
            // Not given: every row's id is generated.
            None => return InsertId::Sets,
        },
        None if auto.position == 0 => return InsertId::Sets,
        None => auto.position - 1,
    };
    let Some(rows) = &shape.rows else {
        return InsertId::Unsure;
    };
    let (mut generated, mut unknown) = (false, false);
    for row in rows {
        let v = match row.get(at) {
            Some(Value::Param(k)) => match param(*k) {
                Some(0) => Some(&Value::Zero),
                Some(n) if n > 0 => Some(&Value::Explicit),
                _ => Some(&Value::Unknown),
            },
            v => v,
        };
        match v {
            Some(Value::Generates) => generated = true,
            Some(Value::Zero) if zero_is_value == Some(false) => generated = true,
            Some(Value::Zero) if zero_is_value.is_none() => unknown = true,
            Some(Value::Zero) | Some(Value::Explicit) => {}
            Some(Value::Unknown) | Some(Value::Param(_)) | None => unknown = true,
        }
    }
    // The first generated id is the OK's and LAST_INSERT_ID()'s, whatever
    // the other rows wrote.
    if generated {
        InsertId::Sets
    } else if unknown {
        InsertId::Unsure
    } else {
        InsertId::Keeps
    }
}

/// What a reply says of LAST_INSERT_ID().
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// It is this.
    Is(u64),
    /// It is what it was.
    Stays,
    /// Only the server knows.
    Unknown,
}

/// LAST_INSERT_ID() after a reply `o` to a statement judged `rule`
/// ([`after_ok`]); `known`: the client's value before, where the relay
/// knows it (an id that equals it is the same either way).
pub fn after_reply(
    rule: InsertId,
    o: &crate::protocol::reply::Outcome,
    known: Option<u64>,
) -> After {
    let id = o.insert_id;
    match rule {
        // LAST_INSERT_ID(expr) where no OK carried its value (a SELECT's
        // rows, an expr of 0).
        InsertId::Setter if o.error.is_none() && (id == 0 || o.result_sets > 0) => After::Unknown,
        _ if id == 0 => After::Stays,
        InsertId::Sets | InsertId::Setter => After::Is(id),
        InsertId::ByAffected if o.affected == 1 => After::Is(id),
        // Updated: the OK's id is the row's.
        InsertId::ByAffected if o.affected == 2 => After::Stays,
        InsertId::Keeps => After::Stays,
        InsertId::Unsure | InsertId::ByAffected if known == Some(id) => After::Stays,
        InsertId::Unsure | InsertId::ByAffected => After::Unknown,
    }
}

/// Reads one statement's tokens (after any `SET STATEMENT ... FOR`) as an
/// INSERT or REPLACE; `None` for any other statement.
pub fn shape(text: &[u8], t: &[(Tok, Range<usize>)]) -> Option<InsertShape> {
    let first = word(t.first())?;
    if first != "INSERT" && first != "REPLACE" {
        return None;
    }
    let dup = t
        .windows(2)
        .position(|w| w[0].0.is_word("DUPLICATE") && w[1].0.is_word("KEY"))
        .unwrap_or(t.len());
    let setter = |from: usize, to: usize| {
        t.get(from..to).is_some_and(|t| {
            t.windows(3).any(|w| {
                w[0].0.is_word("LAST_INSERT_ID") && w[1].0.is_punct(b'(') && !w[2].0.is_punct(b')')
            })
        })
    };
    let mut s = InsertShape {
        calls_setter: setter(0, dup),
        upsert: (dup < t.len()).then(|| setter(dup, t.len())),
        ..InsertShape::default()
    };
    // Each `?` by where it starts: its index among the statement's.
    let marks: Vec<usize> = t
        .iter()
        .filter(|(k, _)| k.is_punct(b'?'))
        .map(|(_, r)| r.start)
        .collect();
    let value = |v: &[(Tok, Range<usize>)]| match v {
        [(k, r)] if k.is_punct(b'?') => marks
            .iter()
            .position(|m| *m == r.start)
            .map_or(Value::Unknown, Value::Param),
        _ => value(text, v),
    };
    let mut i = 1;
    let mut plain = true;
    while let Some(w) = word(t.get(i)) {
        match w {
            "LOW_PRIORITY" | "DELAYED" | "HIGH_PRIORITY" | "INTO" => i += 1,
            "IGNORE" => {
                plain = false;
                i += 1;
            }
            _ => break,
        }
    }
    // The table, maybe qualified.
    i += 1;
    if t.get(i).is_some_and(|(k, _)| k.is_punct(b'.')) {
        i += 2;
    }
    if word(t.get(i)) == Some("PARTITION") {
        i = after_brackets(t, i + 1)?;
    }
    if t.get(i).is_some_and(|(k, _)| k.is_punct(b'('))
        && !matches!(
            word(t.get(i + 1)),
            Some("SELECT" | "WITH" | "VALUES" | "TABLE")
        )
    {
        let end = after_brackets(t, i)?;
        let mut cols = Vec::new();
        for item in t[i + 1..end - 1].split(|(k, _)| k.is_punct(b',')) {
            cols.push(name(item)?);
        }
        s.columns = Some(cols);
        i = end;
    }
    match word(t.get(i)) {
        Some("VALUES" | "VALUE") => {
            let mut rows = Vec::new();
            i += 1;
            loop {
                if !t.get(i).is_some_and(|(k, _)| k.is_punct(b'(')) {
                    return None;
                }
                let end = after_brackets(t, i)?;
                // (At the commas outside brackets: a value may call a
                // function of several arguments.)
                let row = if end == i + 2 {
                    Vec::new()
                } else {
                    split_top(&t[i + 1..end - 1])
                        .into_iter()
                        .map(value)
                        .collect()
                };
                rows.push(row);
                i = end;
                if t.get(i).is_some_and(|(k, _)| k.is_punct(b',')) {
                    i += 1;
                } else {
                    break;
                }
            }
            s.rows = Some(rows);
        }
        Some("SET") if s.columns.is_none() => {
            // `SET a = 1, b = DEFAULT`: one row, named.
            let (mut cols, mut row) = (Vec::new(), Vec::new());
            // (To the ON of ON DUPLICATE KEY, or RETURNING.)
            let end = t[i..]
                .iter()
                .position(|(k, _)| k.is_word("RETURNING"))
                .map_or(t.len(), |e| i + e)
                .min(if dup < t.len() { dup - 1 } else { t.len() });
            for item in split_top(&t[i + 1..end]) {
                let eq = item.iter().position(|(k, _)| k.is_punct(b'='))?;
                cols.push(name(&item[..eq])?);
                row.push(value(&item[eq + 1..]));
            }
            s.columns = Some(cols);
            s.rows = Some(vec![row]);
            i = end;
        }
        // The rows of a query: only the column list can tell.
        Some("SELECT" | "WITH" | "TABLE") => i = t.len(),
        _ if t.get(i).is_some_and(|(k, _)| k.is_punct(b'(')) => i = t.len(),
        _ => return None,
    }
    match word(t.get(i)) {
        None | Some("RETURNING") => {}
        Some("ON") if i + 1 == dup => {}
        // Anything not read.
        _ => plain = false,
    }
    s.plain = plain;
    Some(s)
}

/// The index after the bracket group opening at `i`.
fn after_brackets(t: &[(Tok, Range<usize>)], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, (k, _)) in t.iter().enumerate().skip(i) {
        if k.is_punct(b'(') {
            depth += 1;
        } else if k.is_punct(b')') {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(j + 1);
            }
        }
    }
    None
}

/// Splits at the commas outside brackets.
fn split_top(t: &[(Tok, Range<usize>)]) -> Vec<&[(Tok, Range<usize>)]> {
    let mut out = Vec::new();
    let (mut depth, mut from) = (0usize, 0);
    for (j, (k, _)) in t.iter().enumerate() {
        if k.is_punct(b'(') {
            depth += 1;
        } else if k.is_punct(b')') {
            depth = depth.saturating_sub(1);
        } else if k.is_punct(b',') && depth == 0 {
            out.push(&t[from..j]);
            from = j + 1;
        }
    }
    out.push(&t[from..]);
    out
}

/// A column named alone (maybe qualified: its last part), folded.
fn name(item: &[(Tok, Range<usize>)]) -> Option<String> {
    let last = match item {
        [one] => one,
        [_, dot, last] if dot.0.is_punct(b'.') => last,
        [_, d1, _, d2, last] if d1.0.is_punct(b'.') && d2.0.is_punct(b'.') => last,
        _ => return None,
    };
    match &last.0 {
        Tok::Word(w) => Some(w.as_str().to_lowercase()),
        Tok::Quoted(q) => Some(q.as_str().to_lowercase()),
        _ => None,
    }
}

/// What one value gives the column (split at top-level commas first:
/// a value with a bracket is an expression, `Unknown`).
fn value(text: &[u8], v: &[(Tok, Range<usize>)]) -> Value {
    match v {
        [(Tok::Word(w), _)] if w == "NULL" || w == "DEFAULT" => Value::Generates,
        [(Tok::Literal, r)] => match text.get(r.clone()) {
            Some(b) if !b.is_empty() && b.iter().all(u8::is_ascii_digit) => {
                if b.iter().all(|c| *c == b'0') {
                    Value::Zero
                } else {
                    Value::Explicit
                }
            }
            _ => Value::Unknown,
        },
        _ => Value::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auto(name: &str, position: usize) -> AutoCol {
        AutoCol {
            name: name.into(),
            position,
            triggers: false,
        }
    }

    /// Each row: a statement, the catalog's AUTO_INCREMENT column (id,
    /// first of the table's columns), and how the statement leaves
    /// LAST_INSERT_ID() — measured against MariaDB 10.11 where the rule
    /// says so (`tests/differential.rs`).
    #[test]
    fn how_a_statement_leaves_last_insert_id() {
        use InsertId::*;
        let id = Some(auto("id", 1));
        let cases: &[(&str, Option<AutoCol>, Option<bool>, InsertId)] = &[
            (
                "INSERT INTO t (v) VALUES (1)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO t (v) VALUES (?)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO t (v) SELECT v FROM u",
                id.clone(),
                Some(false),
                Sets,
            ),
            ("INSERT INTO t SET v = 1 + 2", id.clone(), Some(false), Sets),
            (
                "INSERT INTO t (id, v) VALUES (500, 1)",
                id.clone(),
                Some(false),
                Keeps,
            ),
            (
                "INSERT INTO t (`ID`, v) VALUES (500, 1), (501, 2)",
                id.clone(),
                Some(false),
                Keeps,
            ),
            (
                "INSERT INTO t VALUES (500, 1)",
                id.clone(),
                Some(false),
                Keeps,
            ),
            (
                "REPLACE INTO t (id, v) VALUES (500, 1)",
                id.clone(),
                Some(false),
                Keeps,
            ),
            (
                "INSERT INTO t SET id = 7, v = 1",
                id.clone(),
                Some(false),
                Keeps,
            ),
            (
                "INSERT INTO t (id, v) VALUES (NULL, 1), (700, 2)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO t (id, v) VALUES (700, 1), (DEFAULT, 2)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO t (id, v) VALUES (0, 1)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO t (id, v) VALUES (0, 1)",
                id.clone(),
                Some(true),
                Keeps,
            ),
            (
                "INSERT INTO t VALUES (NULL, 1)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO db.t (db.t.id, v) VALUES (9, 1)",
                id.clone(),
                Some(false),
                Keeps,
            ),
            (
                "INSERT INTO t (id, v) VALUES (?, ?)",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (id, v) VALUES (1 + 1, 1)",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (v, id) VALUES (GREATEST(1, 7, 2), NULL)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO t SET v = (SELECT 1 FROM u JOIN w ON u.a = w.a), id = 9",
                id.clone(),
                Some(false),
                Keeps,
            ),
            (
                "INSERT INTO t SET k = 1, v = 2 ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO t (id, v) VALUES ('5', 1)",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (id, v) VALUES (-5, 1)",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (id, v) VALUES (@x, 1)",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (id, v) SELECT 5, 1",
                id.clone(),
                Some(false),
                Unsure,
            ),
            ("INSERT INTO t SELECT 5, 1", id.clone(), Some(false), Unsure),
            (
                "INSERT IGNORE INTO t (v) VALUES (1)",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (v) VALUES (1) ON DUPLICATE KEY UPDATE v = 2",
                id.clone(),
                Some(false),
                ByAffected,
            ),
            (
                "INSERT INTO t (v) VALUES (1), (2) ON DUPLICATE KEY UPDATE v = 2",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t SET v = 1 ON DUPLICATE KEY UPDATE v = 2",
                id.clone(),
                Some(false),
                ByAffected,
            ),
            (
                "INSERT INTO t (id, v) VALUES (5, 1) ON DUPLICATE KEY UPDATE v = 2",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (k, v) VALUES (1, 5) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id), v = VALUES(v)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT INTO t (id, v) VALUES (950, 5) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (v) SELECT v FROM u ON DUPLICATE KEY UPDATE v = 1",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (v) SELECT v FROM u ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
                id.clone(),
                Some(false),
                Sets,
            ),
            (
                "INSERT IGNORE INTO t (v) VALUES (1) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (v) VALUES (LAST_INSERT_ID(5))",
                id.clone(),
                Some(false),
                Unsure,
            ),
            (
                "INSERT INTO t (v) VALUES (1) RETURNING id",
                id.clone(),
                Some(false),
                Sets,
            ),
            ("INSERT INTO t (v) VALUES (1)", None, Some(false), Unsure),
            (
                "UPDATE t SET v = LAST_INSERT_ID(77) WHERE id = 5",
                id.clone(),
                Some(false),
                Setter,
            ),
            ("SELECT LAST_INSERT_ID(5)", None, Some(false), Setter),
            ("CALL p()", None, Some(false), Unsure),
            (
                "LOAD DATA INFILE 'f' INTO TABLE t",
                id.clone(),
                Some(false),
                Unsure,
            ),
        ];
        for (sql, auto, zero, want) in cases {
            let q = crate::protocol::sql::Query::new(sql.as_bytes());
            let t = q.tokens();
            let s = shape(sql.as_bytes(), t);
            assert_eq!(
                s,
                q.effects().insert,
                "{sql}: read once, kept in the effects"
            );
            let sets = q.effects().sets_insert_id;
            assert_eq!(
                after_ok(s.as_ref(), sets, auto.as_ref(), *zero, &|_| None),
                *want,
                "{sql}"
            );
        }
        // A table with triggers: one may write the column.
        let mut trig = auto("id", 1);
        trig.triggers = true;
        let s = shape(
            b"INSERT INTO t (v) VALUES (1)",
            crate::protocol::sql::Query::new(b"INSERT INTO t (v) VALUES (1)").tokens(),
        );
        assert_eq!(
            after_ok(s.as_ref(), false, Some(&trig), Some(false), &|_| None),
            InsertId::Unsure
        );
        // The column elsewhere in the table: the positional value counts.
        let sql = b"INSERT INTO t VALUES ('a', 500)";
        let s = shape(sql, crate::protocol::sql::Query::new(sql).tokens());
        assert_eq!(
            after_ok(
                s.as_ref(),
                false,
                Some(&auto("id", 2)),
                Some(false),
                &|_| None
            ),
            InsertId::Keeps
        );
        // An INVISIBLE column: a row without a column list does not give it.
        let invisible = auto("id", 0);
        assert_eq!(
            after_ok(s.as_ref(), false, Some(&invisible), Some(false), &|_| None),
            InsertId::Sets
        );
    }

    /// What a reply says, by the statement's rule: its id, its affected
    /// rows (an upsert), a result set (LAST_INSERT_ID(expr) in a SELECT).
    #[test]
    fn what_a_reply_says_of_last_insert_id() {
        use crate::protocol::reply::Outcome;
        use InsertId::*;
        let reply = |id: u64, affected: u64, result_sets: u32| Outcome {
            insert_id: id,
            affected,
            result_sets,
            ..Outcome::default()
        };
        let cases = [
            (Sets, reply(5, 1, 0), Some(1), After::Is(5)),
            (Sets, reply(0, 0, 0), Some(1), After::Stays),
            (Keeps, reply(500, 1, 0), Some(1), After::Stays),
            (Setter, reply(42, 1, 0), Some(1), After::Is(42)),
            (Setter, reply(0, 1, 0), Some(1), After::Unknown),
            (Setter, reply(0, 0, 1), Some(1), After::Unknown),
            (ByAffected, reply(7, 1, 0), Some(1), After::Is(7)),
            (ByAffected, reply(3, 2, 0), Some(1), After::Stays),
            (ByAffected, reply(0, 1, 0), Some(1), After::Stays),
            (ByAffected, reply(3, 4, 0), Some(1), After::Unknown),
            (Unsure, reply(9, 1, 0), Some(1), After::Unknown),
            (Unsure, reply(9, 1, 0), Some(9), After::Stays),
            (Unsure, reply(9, 1, 0), None, After::Unknown),
        ];
        for (rule, o, known, want) in cases {
            assert_eq!(
                after_reply(rule, &o, known),
                want,
                "{rule:?} {o:?} {known:?}"
            );
        }
    }

    /// A parameter is judged by the value an execute binds: an integer
    /// other than 0 is written, 0 generates, NULL or another type only
    /// the server can tell.
    #[test]
    fn a_parameter_is_judged_by_its_value() {
        let sql = b"INSERT INTO t (v, id, w) VALUES (?, ?, ?), (1, ?, 2)";
        let s = shape(sql, crate::protocol::sql::Query::new(sql).tokens());
        let id = auto("id", 1);
        let judge = |vals: [Option<i128>; 4]| {
            after_ok(s.as_ref(), false, Some(&id), Some(false), &|k| {
                vals.get(k).copied().flatten()
            })
        };
        assert_eq!(
            judge([Some(9), Some(500), Some(9), Some(501)]),
            InsertId::Keeps
        );
        assert_eq!(
            judge([Some(9), Some(500), Some(9), Some(0)]),
            InsertId::Sets
        );
        assert_eq!(judge([Some(9), None, Some(9), Some(501)]), InsertId::Unsure);
        assert_eq!(
            judge([Some(9), Some(-1), Some(9), Some(501)]),
            InsertId::Unsure
        );
    }

    /// Any bytes: no panic, and a shape only for INSERT and REPLACE.
    #[test]
    fn any_text_reads_without_panic() {
        use proptest::prelude::*;
        proptest!(|(s in "(INSERT|REPLACE|SELECT)? ?[ a-z0-9(),=?'@.`]{0,60}")| {
            let q = crate::protocol::sql::Query::new(s.as_bytes());
            let got = shape(s.as_bytes(), q.tokens());
            if got.is_some() {
                prop_assert!(s.starts_with("INSERT") || s.starts_with("REPLACE"));
            }
        });
    }
}
