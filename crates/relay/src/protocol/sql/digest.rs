//! A statement's digest, the key query rules match (`match_digest`) and
//! per-digest statistics are kept under: literals replaced by `?`, lists
//! of them by `...`, keywords and identifiers as written, comments dropped.

use std::borrow::Cow;
use std::ops::Range;

use sqlfleet_dump::lex::{Lexed, Tok};

/// A query's digest: literals replaced by `?`, lists of them by `...`,
/// keywords and identifiers as written, comments dropped, one space
/// between tokens.
pub fn digest(sql: &[u8]) -> String {
    super::Query::new(sql).digest()
}

/// One token as the digest shows it, borrowed from the statement where it
/// can be (an allocation per token would be the digest's main cost).
pub(super) fn digest_token<'a>(sql: &'a [u8], k: &Tok, r: &Range<usize>) -> Cow<'a, str> {
    match k {
        // Keywords and identifiers as written; only literals go.
        Tok::Word(_) | Tok::UserVar | Tok::SysVar(..) => String::from_utf8_lossy(&sql[r.clone()]),
        Tok::Literal => Cow::Borrowed("?"),
        Tok::Quoted(q) => Cow::Owned(format!("`{q}`")),
        Tok::Punct(c) if c.is_ascii() && sql.get(r.clone()) == Some(&[*c][..]) => {
            String::from_utf8_lossy(&sql[r.clone()])
        }
        Tok::Punct(c) => Cow::Owned((*c as char).to_string()),
    }
}

/// The digest of a lexed text.
pub(super) fn of(sql: &[u8], lexed: &Lexed) -> String {
    let mut parts: Vec<Cow<'_, str>> = Vec::with_capacity(lexed.toks.len());
    for (k, r) in &lexed.toks {
        let t = digest_token(sql, k, r);
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
