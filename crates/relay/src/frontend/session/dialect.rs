//! How the server reads a session's text: its sql_mode's
//! NO_BACKSLASH_ESCAPES and ANSI_QUOTES, and its client character set
//! (sjis, big5, gbk... have `\` as some characters' second byte). The
//! statement reader must lex in the same dialect, or `SELECT 'a\'; INSERT
//! ...` under NO_BACKSLASH_ESCAPES is one string to it and a write to the
//! server — sent to a replica as a read, where it ran. Pure: from the
//! session's recorded settings and what its login started with.

use std::borrow::Cow;

use sqlfleet_dump::lex::{Dialect, Multibyte};

use crate::protocol::sql::Setting;

/// sql_mode names that stand for several flags, and whether they hold
/// ANSI_QUOTES (none holds NO_BACKSLASH_ESCAPES).
const COMBINATIONS: [&str; 6] = ["ANSI", "DB2", "MAXDB", "MSSQL", "ORACLE", "POSTGRESQL"];

/// Whether NO_AUTO_VALUE_ON_ZERO is in the sql_mode of a session whose
/// recorded settings are `settings` (`of_session`'s reading; `None` when
/// it cannot be told): an INSERT's 0 is then an id, not a new one.
pub fn zero_is_value(settings: &[Setting], login_sql_mode: Option<&str>) -> Option<bool> {
    let set = settings
        .iter()
        .rev()
        .find(|s| s.name == "sql_mode")
        .map(|s| value_of(&s.text));
    let mode: Cow<'_, str> = match set {
        None | Some(Value::Default) => Cow::Borrowed(login_sql_mode?),
        Some(Value::Literal(v)) => v,
        Some(Value::Unknown) => return None,
    };
    Some(
        mode.split(',')
            .any(|f| f.trim().eq_ignore_ascii_case("NO_AUTO_VALUE_ON_ZERO")),
    )
}

/// The dialect of a session whose recorded settings are `settings`, which
/// logged in with `login_collation` on a server whose global sql_mode was
/// `login_sql_mode`. `None` when the sql_mode cannot be told (the global
/// not read yet, or a setting's value not a plain literal): the caller
/// then takes the careful reading.
pub fn of_session(
    settings: &[Setting],
    login_sql_mode: Option<&str>,
    login_collation: u8,
) -> Option<Dialect> {
    // (Run for every statement: no allocation unless a value holds an
    // escape.)
    let set = |name: &str| {
        settings
            .iter()
            .rev()
            .find(|s| s.name == name)
            .map(|s| value_of(&s.text))
    };
    let mode: Cow<'_, str> = match set("sql_mode") {
        None | Some(Value::Default) => Cow::Borrowed(login_sql_mode?),
        Some(Value::Literal(v)) => v,
        Some(Value::Unknown) => return None,
    };
    // One pass over the flags (most fail at the length compare).
    let (mut no_backslash_escapes, mut ansi_quotes) = (false, false);
    for f in mode.split(',').map(str::trim) {
        if f.eq_ignore_ascii_case("NO_BACKSLASH_ESCAPES") {
            no_backslash_escapes = true;
        } else if f.eq_ignore_ascii_case("ANSI_QUOTES")
            || COMBINATIONS.iter().any(|c| f.eq_ignore_ascii_case(c))
        {
            ansi_quotes = true;
        }
    }
    let charset = match client_set(settings, login_collation)? {
        ClientSet::Collation(id) => Multibyte::of_collation(u16::from(id)),
        ClientSet::Named(cs) => Multibyte::of_charset(&cs),
    };
    Some(Dialect {
        no_backslash_escapes,
        ansi_quotes,
        charset,
    })
}

/// How a session's client character set is known.
pub enum ClientSet<'a> {
    /// The login's collation (no setting since, or `= DEFAULT`).
    Collation(u8),
    /// A set named by a setting.
    Named(Cow<'a, str>),
}

/// The session's client character set: the variable as the server
/// reported it, or a `SET NAMES` / `SET CHARACTER SET` recorded from the
/// text (a server without session tracking; it replaces the variable,
/// `upsert`), else the login's. `None` when a setting's value cannot be
/// told.
pub fn client_set(settings: &[Setting], login_collation: u8) -> Option<ClientSet<'_>> {
    let client = settings.iter().rev().find(|s| {
        matches!(
            s.name.as_str(),
            "character_set_client" | "names" | "charset"
        )
    });
    Some(match client {
        None => ClientSet::Collation(login_collation),
        Some(s) if s.name == "character_set_client" => match value_of(&s.text) {
            Value::Literal(cs) => ClientSet::Named(cs),
            Value::Default => ClientSet::Collation(login_collation),
            Value::Unknown => return None,
        },
        Some(s) => ClientSet::Named(Cow::Borrowed(named_set(&s.text)?)),
    })
}

/// The character set a recorded `NAMES cs [COLLATE c]`, `CHARSET cs` or
/// `CHARACTER SET cs` names; `None` (unsure) for DEFAULT or anything but
/// a plain name.
fn named_set(text: &str) -> Option<&str> {
    let mut words = text.split_ascii_whitespace();
    let first = words.next()?;
    if first.eq_ignore_ascii_case("CHARACTER") {
        words.next().filter(|w| w.eq_ignore_ascii_case("SET"))?;
    }
    let cs = words
        .next()?
        .trim_matches(|c| c == '\'' || c == '"' || c == '`');
    let plain = !cs.is_empty() && cs.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    (plain && !cs.eq_ignore_ascii_case("DEFAULT")).then_some(cs)
}

enum Value<'a> {
    Literal(Cow<'a, str>),
    Default,
    Unknown,
}

/// The value of a recorded `@@session.name = value`: a quoted literal as
/// `Setting::from_server` writes it (`''` and `\\` inside), a bare word,
/// or DEFAULT.
fn value_of(text: &str) -> Value<'_> {
    let Some((_, v)) = text.split_once('=') else {
        return Value::Unknown;
    };
    let v = v.trim();
    if v.eq_ignore_ascii_case("DEFAULT") {
        return Value::Default;
    }
    if let Some(inner) = v.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        if !inner.contains(['\\', '\'']) {
            return Value::Literal(Cow::Borrowed(inner));
        }
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' | '\'' => match chars.next() {
                    Some(n) => out.push(n),
                    None => return Value::Unknown,
                },
                c => out.push(c),
            }
        }
        return Value::Literal(Cow::Owned(out));
    }
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Value::Literal(Cow::Borrowed(v));
    }
    Value::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, text: &str) -> Setting {
        Setting {
            name: name.into(),
            text: text.into(),
        }
    }

    #[test]
    fn a_session_reads_text_as_its_sql_mode_and_character_set_say() {
        let d = |nbe, ansi, charset| {
            Some(Dialect {
                no_backslash_escapes: nbe,
                ansi_quotes: ansi,
                charset,
            })
        };
        use Multibyte::{AsciiSafe, Big5, Sjis};
        let default = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO";
        // (settings, the global sql_mode at login, login collation, dialect)
        type Case<'a> = (Vec<Setting>, Option<&'a str>, u8, Option<Dialect>);
        let cases: Vec<Case> = vec![
            (vec![], Some(default), 45, d(false, false, AsciiSafe)),
            (
                vec![],
                Some("NO_BACKSLASH_ESCAPES"),
                45,
                d(true, false, AsciiSafe),
            ),
            // The global not read yet: unsure.
            (vec![], None, 45, None),
            // A login in sjis (collation 13).
            (vec![], Some(""), 13, d(false, false, Sjis)),
            (
                vec![Setting::from_server(
                    "sql_mode",
                    "NO_BACKSLASH_ESCAPES,ANSI_QUOTES",
                )],
                Some(default),
                45,
                d(true, true, AsciiSafe),
            ),
            (
                vec![s("sql_mode", "@@session.sql_mode = 'ANSI'")],
                Some(""),
                45,
                d(false, true, AsciiSafe),
            ),
            (
                vec![s("sql_mode", "@@session.sql_mode = oracle")],
                Some(""),
                45,
                d(false, true, AsciiSafe),
            ),
            (
                vec![s("sql_mode", "@@session.sql_mode = DEFAULT")],
                Some("NO_BACKSLASH_ESCAPES"),
                45,
                d(true, false, AsciiSafe),
            ),
            (
                vec![s(
                    "sql_mode",
                    "@@session.sql_mode = CONCAT(@@sql_mode, ',X')",
                )],
                Some(""),
                45,
                None,
            ),
            // The last one recorded counts.
            (
                vec![
                    Setting::from_server("sql_mode", "NO_BACKSLASH_ESCAPES"),
                    Setting::from_server("sql_mode", ""),
                ],
                Some(""),
                45,
                d(false, false, AsciiSafe),
            ),
            (
                vec![Setting::from_server("character_set_client", "big5")],
                Some(""),
                45,
                d(false, false, Big5),
            ),
            (
                vec![Setting::from_server("character_set_client", "latin1")],
                Some(""),
                13,
                d(false, false, AsciiSafe),
            ),
            // A server without session tracking: SET NAMES as written,
            // which replaced the variable.
            (
                vec![s("names", "NAMES sjis")],
                Some(""),
                45,
                d(false, false, Sjis),
            ),
            (
                vec![s("names", "names 'big5' COLLATE big5_bin")],
                Some(""),
                45,
                d(false, false, Big5),
            ),
            (
                vec![s("charset", "CHARACTER SET gbk")],
                Some(""),
                45,
                d(false, false, Multibyte::Gbk),
            ),
            (
                vec![
                    Setting::from_server("character_set_client", "sjis"),
                    s("charset", "CHARSET latin1"),
                ],
                Some(""),
                45,
                d(false, false, AsciiSafe),
            ),
            (vec![s("names", "NAMES DEFAULT")], Some(""), 13, None),
        ];
        for (settings, global, collation, want) in cases {
            assert_eq!(
                of_session(&settings, global, collation),
                want,
                "{settings:?} on {global:?}, login collation {collation}"
            );
        }
    }
}
