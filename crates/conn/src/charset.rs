//! The collation id a login's handshake carries for a client character set.
//!
//! The stock client names its `default-character-set` in the handshake (the
//! set's default collation id), and the server sets
//! `character_set_client`, `_connection` and `_results` from it: the same
//! as `SET NAMES` would, without a round trip after the login. A set not in
//! this table is still honoured, by `SET NAMES` after the login, and so is
//! every set wherever the server could read the name differently from the
//! id: `utf8` (utf8mb3 or utf8mb4 by the server's `old_mode`), MySQL (its
//! own default collations, utf8mb4_0900_ai_ci) and MariaDB from 11.2
//! (`character_set_collations` can map a set to another default). When
//! unsure, the server decides.
//!
//! The ids are the server's own (`information_schema.COLLATIONS`, the row
//! with `IS_DEFAULT = 'Yes'`); a test against a real server checks every
//! row, and that a handshake with it leaves the session as `SET NAMES`
//! does.

/// `(character set, its default collation's id)`, for the sets a client
/// may use (not ucs2, utf16 or utf32: the server refuses those as client
/// character sets).
pub const HANDSHAKE_COLLATIONS: &[(&str, u8)] = &[
    ("big5", 1),
    ("dec8", 3),
    ("cp850", 4),
    ("hp8", 6),
    ("koi8r", 7),
    ("latin1", 8),
    ("latin2", 9),
    ("swe7", 10),
    ("ascii", 11),
    ("ujis", 12),
    ("sjis", 13),
    ("hebrew", 16),
    ("tis620", 18),
    ("euckr", 19),
    ("koi8u", 22),
    ("gb2312", 24),
    ("greek", 25),
    ("cp1250", 26),
    ("gbk", 28),
    ("latin5", 30),
    ("armscii8", 32),
    ("utf8mb3", 33),
    ("cp866", 36),
    ("keybcs2", 37),
    ("macce", 38),
    ("macroman", 39),
    ("cp852", 40),
    ("latin7", 41),
    ("utf8mb4", 45),
    ("cp1251", 51),
    ("cp1256", 57),
    ("cp1257", 59),
    ("binary", 63),
    ("geostd8", 92),
    ("cp932", 95),
    ("eucjpms", 97),
];

/// The character set of a login collation id the server refuses as a
/// client's — ucs2, utf16, utf16le, utf32, whose ASCII characters take
/// more than one byte — as the server's refusal names it (`ERROR 1231:
/// Variable 'character_set_client' can't be set to the value of 'ucs2'`).
/// The ids are the same on MariaDB and MySQL; the relay's tests check them
/// against a server's own list.
pub fn refused_as_client(id: u8) -> Option<&'static str> {
    match id {
        35 | 90 | 128..=151 | 159 => Some("ucs2"),
        54 | 55 | 101..=124 => Some("utf16"),
        56 | 62 => Some("utf16le"),
        60 | 61 | 160..=183 => Some("utf32"),
        _ => None,
    }
}

/// utf8mb4_general_ci: the collation a login asks for when the client
/// names no character set (the mysql client's default).
pub const UTF8MB4_GENERAL_CI: u8 = 45;

/// The id to put in the handshake for a character set as `SET NAMES`
/// takes it (lower case), on a server whose greeting gave `version`; `None`
/// when only `SET NAMES` sets it as the server means it (see the module
/// doc).
pub fn handshake_collation(charset: &str, version: &str) -> Option<u8> {
    if !same_defaults_as_the_table(version) {
        return None;
    }
    HANDSHAKE_COLLATIONS
        .iter()
        .find(|(n, _)| *n == charset)
        .map(|&(_, id)| id)
}

/// MariaDB before 11.2: every set's default collation is fixed, the one
/// the table names. A version it cannot read is not.
fn same_defaults_as_the_table(version: &str) -> bool {
    if !version.contains("MariaDB") {
        return false;
    }
    // MariaDB 10 and later prefix "5.5.5-" for old clients.
    let v = version.strip_prefix("5.5.5-").unwrap_or(version);
    let mut parts = v.split(['.', '-']);
    let major = parts.next().and_then(|p| p.parse::<u32>().ok());
    let minor = parts.next().and_then(|p| p.parse::<u32>().ok());
    matches!((major, minor), (Some(m), Some(n)) if (m, n) < (11, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARIADB_10_11: &str = "5.5.5-10.11.19-MariaDB-0+deb12u1-log";

    #[test]
    fn names_map_to_their_default_collation_and_others_to_none() {
        for (name, want) in [
            ("utf8mb4", Some(45)),
            ("utf8mb3", Some(33)),
            ("latin1", Some(8)),
            ("binary", Some(63)),
            ("sjis", Some(13)),
            // old_mode decides whether it is utf8mb3 or utf8mb4
            ("utf8", None),
            ("ucs2", None),
            ("utf16", None),
            ("nosuch", None),
            ("", None),
        ] {
            assert_eq!(handshake_collation(name, MARIADB_10_11), want, "{name}");
        }
    }

    #[test]
    fn only_servers_whose_defaults_the_table_names_take_the_handshake() {
        for (version, want) in [
            (MARIADB_10_11, Some(45)),
            ("10.5.27-MariaDB", Some(45)),
            ("5.5.5-11.1.6-MariaDB", Some(45)),
            // character_set_collations from 11.2
            ("5.5.5-11.2.1-MariaDB", None),
            ("11.8.2-MariaDB-ubu2404", None),
            ("12.0.1-MariaDB", None),
            // MySQL's utf8mb4 default is utf8mb4_0900_ai_ci
            ("8.0.40", None),
            ("8.4.3-0ubuntu0.24.04.1", None),
            ("5.5.5-MariaDB", None),
            ("", None),
        ] {
            assert_eq!(handshake_collation("utf8mb4", version), want, "{version}");
        }
    }

    #[test]
    fn every_id_and_name_is_listed_once() {
        let mut ids: Vec<u8> = HANDSHAKE_COLLATIONS.iter().map(|c| c.1).collect();
        let mut names: Vec<&str> = HANDSHAKE_COLLATIONS.iter().map(|c| c.0).collect();
        ids.sort_unstable();
        ids.dedup();
        names.sort_unstable();
        names.dedup();
        assert_eq!(ids.len(), HANDSHAKE_COLLATIONS.len());
        assert_eq!(names.len(), HANDSHAKE_COLLATIONS.len());
    }
}
