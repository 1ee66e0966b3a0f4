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
    let w = |k: usize| word(t.get(k)).unwrap_or("");
    if let Some(a) = account_targets(sql, t, [w(0), w(1), w(2)]) {
        let all = all.get_or_insert_with(Default::default);
        all.own |= a.own;
        all.names.extend(a.names);
    }
}

/// What `t` (one statement, first words `w`) names, when it changes
/// accounts or privileges; None otherwise.
fn account_targets(
    sql: &[u8],
    t: &[(Tok, Range<usize>)],
    [w0, w1, w2]: [&str; 3],
) -> Option<AccountTargets> {
    // From which token on the names are.
    let from = match (w0, w1, w2) {
        ("CREATE" | "ALTER" | "DROP" | "RENAME", "USER", _) => 2,
        ("CREATE", "OR", "REPLACE") if word(t.get(3)) == Some("USER") => 4,
        ("SET", "PASSWORD", _) | ("SET", "DEFAULT", "ROLE") => {
            after(t, &["FOR"]).unwrap_or(t.len())
        }
        ("GRANT", _, _) => after(t, &["TO"])?,
        ("REVOKE", _, _) => after(t, &["FROM"])?,
        _ => return None,
    };
    let no_for = matches!((w0, w1), ("SET", "PASSWORD") | ("SET", "DEFAULT")) && from == t.len();
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
