//! Quoting values and identifiers for SQL text we build ourselves.

/// A single-quoted string literal, safe with or without
/// NO_BACKSLASH_ESCAPES (quotes are doubled, backslashes doubled).
/// Note: with NO_BACKSLASH_ESCAPES a doubled backslash stays two characters,
/// so use this only for values without backslashes in that mode.
pub fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A backquoted identifier.
pub fn ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(literal("it's \\ ok"), "'it''s \\\\ ok'");
        assert_eq!(ident("we`ird"), "`we``ird`");
    }
}
