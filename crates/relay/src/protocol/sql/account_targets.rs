//! Whom a statement that changes accounts acts on, as written: the user
//! names after its USER, TO, FROM or FOR, and whether it acts on the
//! session's own account (`CURRENT_USER`, `USER()`, or `SET PASSWORD` /
//! `SET DEFAULT ROLE` without FOR, which need no privilege at all).
//!
//! With one shared account, a client that changed that account (its
//! password, default role, privileges, limits, name) would change every
//! client's: the session refuses such a statement there. Names are read
//! generously (any name after those words), so a doubt refuses.

use std::ops::Range;

use sqlfleet_dump::lex::Tok;

use super::literal::unquote;
use super::word;

/// The accounts an account statement names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountTargets {
    /// Whether it acts on the session's own account.
    pub own: bool,
    /// User names as written (unquoted, case kept; host parts too, as
    /// names: reading generously costs only a refusal).
    pub names: Vec<String>,
}

/// Adds to `all` whom the account statement starting at `t[0]` acts on
/// (nothing when it is no account statement).
pub(super) fn add_account_statement(
    sql: &[u8],
    t: &[(Tok, Range<usize>)],
    all: &mut Option<AccountTargets>,
) {
    if let Some(a) = account_targets(sql, t) {
        let all = all.get_or_insert_with(Default::default);
        all.own |= a.own;
        all.names.extend(a.names);
    }
}

/// How an account statement starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Head {
    /// CREATE, ALTER, DROP, RENAME or CREATE OR REPLACE USER: the names
    /// from this token on.
    User(usize),
    /// SET PASSWORD or SET DEFAULT ROLE: the session's own account unless
    /// FOR names another.
    SetOwn,
    Grant,
    Revoke,
}

/// How `t` starts, when it starts an account statement (its first words
/// only: cheap, for every token of a compound statement).
fn head(t: &[(Tok, Range<usize>)]) -> Option<Head> {
    let w = |k: usize| word(t.get(k)).unwrap_or("");
    match (w(0), w(1), w(2)) {
        ("CREATE" | "ALTER" | "DROP" | "RENAME", "USER", _) => Some(Head::User(2)),
        ("CREATE", "OR", "REPLACE") if w(3) == "USER" => Some(Head::User(4)),
        ("SET", "PASSWORD", _) | ("SET", "DEFAULT", "ROLE") => Some(Head::SetOwn),
        ("GRANT", _, _) => Some(Head::Grant),
        ("REVOKE", _, _) => Some(Head::Revoke),
        _ => None,
    }
}

/// Whether `t` starts with the words of an account statement.
pub(super) fn starts_account_statement(t: &[(Tok, Range<usize>)]) -> bool {
    head(t).is_some()
}

/// What `t` (one statement) names, when it changes accounts or
/// privileges; None otherwise. (It reads the rest of `t`: inside a
/// compound statement, where any token may start one, its caller bounds
/// how often.)
fn account_targets(sql: &[u8], t: &[(Tok, Range<usize>)]) -> Option<AccountTargets> {
    let head = head(t)?;
    // From which token on the names are.
    let from = match head {
        Head::User(from) => from,
        Head::SetOwn => after(t, &["FOR"]).unwrap_or(t.len()),
        Head::Grant => after(t, &["TO"])?,
        Head::Revoke => after(t, &["FROM"])?,
    };
    let no_for = head == Head::SetOwn && from == t.len();
    let mut out = AccountTargets {
        own: no_for,
        names: Vec::new(),
    };
    for (i, (k, r)) in t.iter().enumerate() {
        let call = t.get(i + 1).is_some_and(|(k, _)| k.is_punct(b'('));
        match k {
            Tok::Word(w)
                if w == "CURRENT_USER"
                    || (call && matches!(w.as_str(), "USER" | "SESSION_USER" | "SYSTEM_USER")) =>
            {
                out.own = true
            }
            _ if i < from => {}
            Tok::Word(_) => out
                .names
                .push(String::from_utf8_lossy(&sql[r.clone()]).into_owned()),
            Tok::Quoted(q) => out.names.push(q.to_string()),
            Tok::Literal => {
                let raw = &sql[r.clone()];
                if raw.len() >= 2 && matches!(raw[0], b'\'' | b'"') {
                    // Read with and without backslash escapes, as the
                    // session's sql_mode may take it.
                    for backslashes in [true, false] {
                        let text = unquote(&raw[1..raw.len() - 1], raw[0], backslashes);
                        out.names.push(String::from_utf8_lossy(&text).into_owned());
                    }
                }
            }
            _ => {}
        }
    }
    Some(out)
}

/// The index after the last of `words` (outside parentheses).
fn after(t: &[(Tok, Range<usize>)], words: &[&str]) -> Option<usize> {
    let mut depth = 0i32;
    let mut at = None;
    for (i, (k, _)) in t.iter().enumerate() {
        match k {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            Tok::Word(w) if depth == 0 && words.contains(&w.as_str()) => at = Some(i + 1),
            _ => {}
        }
    }
    at
}
