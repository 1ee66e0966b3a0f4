//! The collation id a login's handshake carries for a client character set.
//!
//! The stock client names its `default-character-set` in the handshake (the
//! set's default collation id), and the server sets
//! `character_set_client`, `_connection` and `_results` from it: the same
//! as `SET NAMES` would, without a round trip after the login. A set not in
//! this table is still honoured, by `SET NAMES` after the login.
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

/// utf8mb4_general_ci: the collation a login asks for when the client
/// names no character set (the mysql client's default).
pub const UTF8MB4_GENERAL_CI: u8 = 45;

/// The id to put in the handshake for a character set as `SET NAMES`
/// takes it (lower case), or `None` when only `SET NAMES` can set it.
/// `utf8` is utf8mb3, as the server reads it by default.
pub fn handshake_collation(charset: &str) -> Option<u8> {
    let name = if charset == "utf8" {
        "utf8mb3"
    } else {
        charset
    };
    HANDSHAKE_COLLATIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, id)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_their_default_collation_and_others_to_none() {
        for (name, want) in [
            ("utf8mb4", Some(45)),
            ("utf8", Some(33)),
            ("utf8mb3", Some(33)),
            ("latin1", Some(8)),
            ("binary", Some(63)),
            ("sjis", Some(13)),
            ("ucs2", None),
            ("utf16", None),
            ("nosuch", None),
            ("", None),
        ] {
            assert_eq!(handshake_collation(name), want, "{name}");
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
