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

/// A utf8mb4 string literal written in hex (`_utf8mb4 X'...'`): it means
/// the same text whatever character set the session's client is set to
/// at the time (a replayed statement may have left it at latin1), and no
/// escape rule of any mode applies to it.
pub fn utf8_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2 + 12);
    out.push_str("_utf8mb4 X'");
    for b in s.bytes() {
        out.push_str(&format!("{b:02X}"));
    }
    out.push('\'');
    out
}

/// Sets the session's client character set back to utf8mb4, so that our
/// own text and parameters (UTF-8) mean what they say after a replayed
/// statement set its own.
pub const UTF8_CLIENT: &str = "SET @@session.character_set_client = utf8mb4";

/// A backquoted identifier.
pub fn ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// A dotted name as SQL writes it (`db.t`, `` `my db`.`t``x` ``) back
/// into its parts, unquoted: the inverse of [`ident`] joined with dots.
/// Whitespace outside backquotes is dropped.
pub fn split_qualified(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' if quoted && chars.peek() == Some(&'`') => {
                cur.push('`');
                chars.next();
            }
            '`' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut cur)),
            c if c.is_whitespace() && !quoted => {}
            c => cur.push(c),
        }
    }
    parts.push(cur);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(literal("it's \\ ok"), "'it''s \\\\ ok'");
        assert_eq!(ident("we`ird"), "`we``ird`");
        assert_eq!(utf8_literal("café'\\"), "_utf8mb4 X'636166C3A9275C'");
        assert_eq!(utf8_literal(""), "_utf8mb4 X''");
        assert_eq!(split_qualified("`my db`.`t``x`"), ["my db", "t`x"]);
        assert_eq!(split_qualified("shop . t"), ["shop", "t"]);
        assert_eq!(split_qualified(&ident("a.b")), ["a.b"]);
    }
}
