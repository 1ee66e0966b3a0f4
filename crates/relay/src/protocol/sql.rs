//! What a statement does to session state, read from its text: which
//! session variables it sets (and whether that can be replayed on another
//! connection), a change of default database, and anything that ties the
//! client to its backend connection (a pin).
//!
//! A small lexer skips strings, quoted names and comments so that `@` in a
//! string is not a user variable; executable comments (`/*! ... */`) are
//! read as code, as the server reads them.

use std::ops::Range;

/// Why a client cannot share its backend connection for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pin {
    /// `session` pooling mode: pinned for the whole session.
    Session,
    TemporaryTable,
    UserVariable,
    LockTables,
    GetLock,
    TextPrepare,
    FoundRows,
    LastInsertId,
    SetExpression,
    SetTransaction,
    SetOption,
    Cursor,
    LongData,
    Handler,
    Xa,
    /// A query rule with `multiplex = false` matched.
    Rule,
}

impl Pin {
    pub const ALL: [Pin; 16] = [
        Pin::Session,
        Pin::TemporaryTable,
        Pin::UserVariable,
        Pin::LockTables,
        Pin::GetLock,
        Pin::TextPrepare,
        Pin::FoundRows,
        Pin::LastInsertId,
        Pin::SetExpression,
        Pin::SetTransaction,
        Pin::SetOption,
        Pin::Cursor,
        Pin::LongData,
        Pin::Handler,
        Pin::Xa,
        Pin::Rule,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Pin::Session => "session_mode",
            Pin::TemporaryTable => "temporary_table",
            Pin::UserVariable => "user_variable",
            Pin::LockTables => "lock_tables",
            Pin::GetLock => "get_lock",
            Pin::TextPrepare => "text_prepare",
            Pin::FoundRows => "found_rows",
            Pin::LastInsertId => "last_insert_id",
            Pin::SetExpression => "set_expression",
            Pin::SetTransaction => "set_transaction",
            Pin::SetOption => "set_option",
            Pin::Cursor => "cursor",
            Pin::LongData => "long_data",
            Pin::Handler => "handler",
            Pin::Xa => "xa",
            Pin::Rule => "rule",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// A word, upper-cased.
    Word(String),
    /// `@name` (a user variable).
    UserVar,
    /// `@@[scope.]name`, lower-cased, with the scope.
    SysVar(Option<String>, String),
    /// A string or number literal.
    Literal,
    /// A backquoted name, unquoted.
    Quoted(String),
    Punct(u8),
}

struct Lexed {
    toks: Vec<(Tok, Range<usize>)>,
}

fn lex(sql: &[u8]) -> Lexed {
    let mut toks = Vec::new();
    let mut i = 0;
    let n = sql.len();
    while i < n {
        let c = sql[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
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
                if matches!(sql.get(i + 2), Some(b'!') | Some(b'M')) {
                    // Executable comment: skip the marker and version, lex the body.
                    i += 3;
                    if sql.get(i - 1) == Some(&b'M') && sql.get(i) == Some(&b'!') {
                        i += 1;
                    }
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
            b'*' if sql.get(i + 1) == Some(&b'/') => i += 2, // end of an executable comment
            b'\'' | b'"' => {
                i += 1;
                while i < n {
                    if sql[i] == b'\\' {
                        i += 2;
                    } else if sql[i] == c {
                        if sql.get(i + 1) == Some(&c) {
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                toks.push((Tok::Literal, start..i.min(n)));
            }
            b'`' => {
                i += 1;
                let mut name = Vec::new();
                while i < n {
                    if sql[i] == b'`' {
                        if sql.get(i + 1) == Some(&b'`') {
                            name.push(b'`');
                            i += 2;
                            continue;
                        }
                        i += 1;
                        break;
                    }
                    name.push(sql[i]);
                    i += 1;
                }
                toks.push((
                    Tok::Quoted(String::from_utf8_lossy(&name).into_owned()),
                    start..i,
                ));
            }
            b'@' if sql.get(i + 1) == Some(&b'@') => {
                i += 2;
                let s = i;
                while i < n && (sql[i].is_ascii_alphanumeric() || sql[i] == b'_' || sql[i] == b'.')
                {
                    i += 1;
                }
                let full = String::from_utf8_lossy(&sql[s..i]).to_ascii_lowercase();
                let tok = match full.split_once('.') {
                    Some((scope, name)) => Tok::SysVar(Some(scope.to_string()), name.to_string()),
                    None => Tok::SysVar(None, full),
                };
                toks.push((tok, start..i));
            }
            b'@' => {
                i += 1;
                if matches!(sql.get(i), Some(b'`' | b'\'' | b'"')) {
                    let q = sql[i];
                    i += 1;
                    while i < n && sql[i] != q {
                        i += 1;
                    }
                    i = (i + 1).min(n);
                } else {
                    while i < n
                        && (sql[i].is_ascii_alphanumeric() || matches!(sql[i], b'_' | b'.' | b'$'))
                    {
                        i += 1;
                    }
                }
                toks.push((Tok::UserVar, start..i));
            }
            c if c.is_ascii_digit() => {
                while i < n && (sql[i].is_ascii_alphanumeric() || sql[i] == b'.') {
                    i += 1;
                }
                toks.push((Tok::Literal, start..i));
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
                while i < n
                    && (sql[i].is_ascii_alphanumeric()
                        || sql[i] == b'_'
                        || sql[i] == b'$'
                        || sql[i] >= 0x80)
                {
                    i += 1;
                }
                let w = String::from_utf8_lossy(&sql[start..i]).to_ascii_uppercase();
                toks.push((Tok::Word(w), start..i));
            }
            _ => {
                toks.push((Tok::Punct(c), start..i + 1));
                i += 1;
            }
        }
    }
    Lexed { toks }
}

/// One tracked session setting, replayable with `SET <text>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The variable (lower case) or a pseudo name: `names`, `charset`,
    /// `transaction isolation`, `transaction access`.
    pub name: String,
    /// What follows SET to restore it, e.g. `@@session.sql_mode = 'ANSI'`.
    pub text: String,
}

impl Setting {
    /// Pseudo settings cannot be put back to their default with `= DEFAULT`.
    pub fn is_pseudo(&self) -> bool {
        matches!(
            self.name.as_str(),
            "names" | "charset" | "transaction isolation" | "transaction access"
        )
    }
}

/// What a COM_QUERY does to the session, as far as its text says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    pub settings: Vec<Setting>,
    pub use_db: Option<String>,
    /// Pins taken by this statement (kept until released).
    pub pins: Vec<Pin>,
    /// Pins this statement releases.
    pub unpins: Vec<Pin>,
    /// Keeps the backend for the next statement only.
    pub pin_next: Option<Pin>,
    /// Only plain reads (SELECT without locking clauses, INTO or functions
    /// with side effects): a replica may answer.
    pub read: bool,
}

fn word(t: Option<&(Tok, Range<usize>)>) -> Option<&str> {
    match t {
        Some((Tok::Word(w), _)) => Some(w.as_str()),
        _ => None,
    }
}

/// A COM_QUERY's text, lexed once for both its effects and its digest.
pub struct Query<'a> {
    sql: &'a [u8],
    lexed: Lexed,
}

impl<'a> Query<'a> {
    pub fn new(sql: &'a [u8]) -> Query<'a> {
        Query {
            sql,
            lexed: lex(sql),
        }
    }

    pub fn effects(&self) -> Effects {
        effects(self.sql, &self.lexed)
    }

    pub fn digest(&self) -> String {
        digest_of(self.sql, &self.lexed)
    }
}

/// Reads one or more `;`-separated statements.
pub fn analyze(sql: &[u8]) -> Effects {
    Query::new(sql).effects()
}

fn effects(sql: &[u8], lexed: &Lexed) -> Effects {
    let mut fx = Effects::default();
    let mut reads = 0;
    let mut others = 0;
    for stmt in lexed.toks.split(|(t, _)| *t == Tok::Punct(b';')) {
        if !stmt.is_empty() {
            statement(sql, stmt, &mut fx);
            if is_read(stmt) {
                reads += 1;
            } else {
                others += 1;
            }
        }
    }
    fx.read = reads > 0 && others == 0;
    fx.pins.sort();
    fx.pins.dedup();
    fx
}

/// A SELECT that changes nothing and locks nothing.
fn is_read(t: &[(Tok, Range<usize>)]) -> bool {
    let first = t.iter().find(|(k, _)| *k != Tok::Punct(b'('));
    if !matches!(word(first), Some("SELECT") | Some("WITH")) {
        return false;
    }
    for (i, (k, _)) in t.iter().enumerate() {
        let next = word(t.get(i + 1));
        match k {
            Tok::UserVar => return false,
            Tok::Word(w) => {
                let call = t.get(i + 1).is_some_and(|(k, _)| *k == Tok::Punct(b'('));
                match w.as_str() {
                    "INTO" | "SQL_CALC_FOUND_ROWS" => return false,
                    "FOR" if next == Some("UPDATE") => return false,
                    "LOCK" if next == Some("IN") => return false,
                    "NEXT" | "PREVIOUS" if next == Some("VALUE") => return false,
                    "GET_LOCK" | "RELEASE_LOCK" | "RELEASE_ALL_LOCKS" | "NEXTVAL" | "SETVAL"
                    | "LASTVAL" | "LAST_INSERT_ID" | "FOUND_ROWS" | "ROW_COUNT"
                    | "MASTER_GTID_WAIT" | "MASTER_POS_WAIT"
                        if call =>
                    {
                        return false
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    true
}

/// A query's digest: literals replaced by `?`, lists of them by `...`,
/// keywords upper-cased, comments dropped, one space between tokens.
pub fn digest(sql: &[u8]) -> String {
    Query::new(sql).digest()
}

fn digest_of(sql: &[u8], lexed: &Lexed) -> String {
    let mut parts: Vec<String> = Vec::with_capacity(lexed.toks.len());
    for (k, r) in &lexed.toks {
        let t = match k {
            Tok::Word(w) => w.clone(),
            Tok::Literal => "?".into(),
            Tok::Quoted(q) => format!("`{q}`"),
            Tok::UserVar | Tok::SysVar(..) => String::from_utf8_lossy(&sql[r.clone()]).into_owned(),
            Tok::Punct(c) => (*c as char).to_string(),
        };
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
                parts.push("...".into());
                parts.push(")".into());
            }
        }
    }
    let mut out = String::new();
    for p in &parts {
        let glue = matches!(p.as_str(), "," | ")" | "." | ";")
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

fn statement(sql: &[u8], t: &[(Tok, Range<usize>)], fx: &mut Effects) {
    let w0 = word(t.first()).unwrap_or("");
    let w1 = word(t.get(1)).unwrap_or("");
    let w2 = word(t.get(2)).unwrap_or("");
    // Anything that reads or writes a user variable keeps state on the
    // backend connection (SET @x is the common case).
    if t.iter().any(|(k, _)| *k == Tok::UserVar) {
        fx.pins.push(Pin::UserVariable);
    }
    for (i, (k, _)) in t.iter().enumerate() {
        let Tok::Word(w) = k else { continue };
        let call = t.get(i + 1).is_some_and(|(k, _)| *k == Tok::Punct(b'('));
        match w.as_str() {
            "GET_LOCK" if call => fx.pins.push(Pin::GetLock),
            "SQL_CALC_FOUND_ROWS" => fx.pin_next = Some(Pin::FoundRows),
            _ => {}
        }
    }
    match w0 {
        "SET" => set(sql, &t[1..], fx),
        "USE" => {
            fx.use_db = match t.get(1) {
                Some((Tok::Word(_), r)) => {
                    Some(String::from_utf8_lossy(&sql[r.clone()]).into_owned())
                }
                Some((Tok::Quoted(q), _)) => Some(q.clone()),
                _ => None,
            }
        }
        "CREATE"
            if w1 == "TEMPORARY"
                || (w1 == "OR" && w2 == "REPLACE" && word(t.get(3)) == Some("TEMPORARY")) =>
        {
            fx.pins.push(Pin::TemporaryTable)
        }
        "LOCK" if w1 == "TABLE" || w1 == "TABLES" => fx.pins.push(Pin::LockTables),
        "UNLOCK" if w1 == "TABLE" || w1 == "TABLES" => fx.unpins.push(Pin::LockTables),
        "PREPARE" | "EXECUTE" | "DEALLOCATE" => fx.pins.push(Pin::TextPrepare),
        "HANDLER" => fx.pins.push(Pin::Handler),
        "XA" => match w1 {
            "COMMIT" | "ROLLBACK" => fx.unpins.push(Pin::Xa),
            _ => fx.pins.push(Pin::Xa),
        },
        "FLUSH" if w1 == "TABLES" && t.iter().any(|(k, _)| *k == Tok::Word("LOCK".into())) => {
            fx.pins.push(Pin::LockTables)
        }
        _ => {}
    }
}

/// `SET` assignments (after the SET keyword).
fn set(sql: &[u8], t: &[(Tok, Range<usize>)], fx: &mut Effects) {
    let mut scope_global = false;
    let mut i = 0;
    match word(t.first()) {
        Some("GLOBAL") => scope_global = true,
        Some("SESSION") | Some("LOCAL") => i = 1,
        Some("STATEMENT") => return, // SET STATEMENT ... FOR: one statement only
        Some("PASSWORD") | Some("ROLE") | Some("DEFAULT") => {
            fx.pins.push(Pin::SetExpression);
            return;
        }
        _ => {}
    }
    if scope_global {
        return; // affects the server, not the session
    }
    if word(t.get(i)) == Some("TRANSACTION") {
        let text = String::from_utf8_lossy(&sql[t[i].1.start..t.last().map_or(0, |x| x.1.end)])
            .into_owned();
        if i == 0 {
            // Without SESSION: the next transaction only.
            fx.pins.push(Pin::SetTransaction);
        } else {
            let what = if text.to_ascii_uppercase().contains("ISOLATION") {
                "transaction isolation"
            } else {
                "transaction access"
            };
            fx.settings.push(Setting {
                name: what.into(),
                text: format!("SESSION {text}"),
            });
        }
        return;
    }
    // Split the assignments at top-level commas.
    let mut parts: Vec<&[(Tok, Range<usize>)]> = Vec::new();
    let mut depth = 0i32;
    let mut from = i;
    for (j, (k, _)) in t.iter().enumerate().skip(i) {
        match k {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            Tok::Punct(b',') if depth == 0 => {
                parts.push(&t[from..j]);
                from = j + 1;
            }
            _ => {}
        }
    }
    parts.push(&t[from..]);
    for a in parts {
        assignment(sql, a, fx);
    }
}

fn assignment(sql: &[u8], a: &[(Tok, Range<usize>)], fx: &mut Effects) {
    let Some((first, _)) = a.first() else { return };
    let text_of = |from: usize| -> String {
        match (a.get(from), a.last()) {
            (Some(s), Some(e)) => String::from_utf8_lossy(&sql[s.1.start..e.1.end]).into_owned(),
            _ => String::new(),
        }
    };
    let (name, mut k) = match first {
        Tok::Word(w) if w == "NAMES" => {
            fx.settings.push(Setting {
                name: "names".into(),
                text: text_of(0),
            });
            return;
        }
        Tok::Word(w) if w == "CHARSET" || (w == "CHARACTER" && word(a.get(1)) == Some("SET")) => {
            fx.settings.push(Setting {
                name: "charset".into(),
                text: text_of(0),
            });
            return;
        }
        Tok::Word(w) if matches!(w.as_str(), "SESSION" | "LOCAL") => match a.get(1) {
            Some((Tok::Word(v), _)) => (v.to_ascii_lowercase(), 2),
            _ => return fx.pins.push(Pin::SetExpression),
        },
        Tok::Word(w) if w == "GLOBAL" => return,
        Tok::Word(w) => (w.to_ascii_lowercase(), 1),
        Tok::Quoted(q) => (q.to_ascii_lowercase(), 1),
        Tok::SysVar(scope, v) => match scope.as_deref() {
            None | Some("session") | Some("local") => (v.clone(), 1),
            Some(_) => return, // @@global.x
        },
        Tok::UserVar => return, // already pinned
        _ => return fx.pins.push(Pin::SetExpression),
    };
    // `=` or `:=`
    match a.get(k) {
        Some((Tok::Punct(b'='), _)) => k += 1,
        Some((Tok::Punct(b':'), _)) if a.get(k + 1).is_some_and(|x| x.0 == Tok::Punct(b'=')) => {
            k += 2
        }
        _ => return fx.pins.push(Pin::SetExpression),
    }
    let value = &a[k..];
    // Replayable: one literal or word, optionally signed. Anything else
    // (a function, another variable, a subquery) is evaluated where it runs.
    let simple = matches!(
        value,
        [(Tok::Literal | Tok::Word(_) | Tok::Quoted(_), _)]
            | [(Tok::Punct(b'-' | b'+'), _), (Tok::Literal, _)]
    );
    if !simple {
        return fx.pins.push(Pin::SetExpression);
    }
    let value = String::from_utf8_lossy(&sql[value[0].1.start..value[value.len() - 1].1.end]);
    fx.settings.push(Setting {
        text: format!("@@session.{name} = {value}"),
        name,
    });
}

#[cfg(test)]
mod tests;
