//! Whether a session's default database can be named again on another
//! connection. The relay keeps the name as the server reports it (UTF-8)
//! and names it with COM_INIT_DB, whose bytes the server reads in the
//! connection's client character set. A name outside ASCII from a client
//! whose set is not UTF-8 (`café` from a latin1 client) would reach the
//! server as other characters — another database, or none — so such a
//! session keeps its connection while that database is its default
//! (`Pin::Schema`); the name is only ever sent in the client's own bytes
//! (its login's, its USE statement's). Pure.

use super::dialect::{client_set, ClientSet};
use crate::protocol::sql::Setting;

/// Collation ids (one byte, as a login carries them) of utf8mb3 and
/// utf8mb4: MariaDB's and MySQL's (255 is MySQL's utf8mb4_0900_ai_ci).
fn utf8_collation(id: u8) -> bool {
    matches!(id, 33 | 45 | 46 | 83 | 192..=215 | 223 | 224..=247 | 255)
}

/// Whether the session's client character set is known to be UTF-8.
pub fn utf8_client(settings: &[Setting], login_collation: u8) -> bool {
    match client_set(settings, login_collation) {
        Some(ClientSet::Collation(id)) => utf8_collation(id),
        Some(ClientSet::Named(cs)) => ["utf8", "utf8mb3", "utf8mb4"]
            .iter()
            .any(|u| cs.eq_ignore_ascii_case(u)),
        None => false,
    }
}

/// Whether a session with default database `db` (as the server names it)
/// must keep its connection: the name is not ASCII and the client's set
/// is not known to be UTF-8.
pub fn keeps_connection(db: Option<&str>, settings: &[Setting], login_collation: u8) -> bool {
    db.is_some_and(|d| !d.is_ascii()) && !utf8_client(settings, login_collation)
}

/// The name a login's database bytes give, when the relay can name it
/// again: ASCII, or UTF-8 from a UTF-8 client. `None`: only the client's
/// own bytes name it (the session keeps the connection they went to).
pub fn login_name(bytes: &[u8], login_collation: u8) -> Option<String> {
    if bytes.is_ascii() || utf8_collation(login_collation) {
        return String::from_utf8(bytes.to_vec()).ok();
    }
    None
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
    fn who_keeps_the_connection_for_the_name() {
        const LATIN1: u8 = 8;
        const UTF8MB4: u8 = 45;
        const UTF8MB3: u8 = 33;
        let cs = |v: &str| {
            vec![s(
                "character_set_client",
                &format!("@@session.character_set_client = '{v}'"),
            )]
        };
        type Row = (Option<&'static str>, Vec<Setting>, u8, bool);
        let rows: Vec<Row> = vec![
            (None, vec![], LATIN1, false),
            (Some("shop"), vec![], LATIN1, false),
            (Some("café"), vec![], LATIN1, true),
            (Some("café"), vec![], UTF8MB4, false),
            (Some("café"), vec![], UTF8MB3, false),
            (Some("café"), vec![], 255, false),
            // sjis, gbk, a collation id of another set.
            (Some("表"), vec![], 13, true),
            (Some("表"), vec![], 28, true),
            (Some("表"), vec![], 2, true),
            // A setting decides over the login.
            (Some("café"), cs("latin1"), UTF8MB4, true),
            (Some("café"), cs("utf8mb4"), LATIN1, false),
            (Some("café"), cs("UTF8"), LATIN1, false),
            (
                Some("café"),
                vec![s(
                    "character_set_client",
                    "@@session.character_set_client = DEFAULT",
                )],
                LATIN1,
                true,
            ),
            (
                Some("café"),
                vec![s("names", "NAMES utf8mb4 COLLATE utf8mb4_bin")],
                LATIN1,
                false,
            ),
            (
                Some("café"),
                vec![s("names", "NAMES latin1")],
                UTF8MB4,
                true,
            ),
            // Unsure: kept.
            (
                Some("café"),
                vec![s("names", "NAMES DEFAULT")],
                UTF8MB4,
                true,
            ),
            (
                Some("café"),
                vec![s(
                    "character_set_client",
                    "@@session.character_set_client = @cs",
                )],
                UTF8MB4,
                true,
            ),
        ];
        for (db, settings, login, want) in rows {
            assert_eq!(
                keeps_connection(db, &settings, login),
                want,
                "{db:?} {settings:?} login {login}"
            );
        }
    }

    #[test]
    fn login_names_the_relay_can_say_again() {
        assert_eq!(login_name(b"shop", 8), Some("shop".into()));
        assert_eq!(login_name("café".as_bytes(), 45), Some("café".into()));
        assert_eq!(login_name(b"caf\xe9", 8), None);
        // Not UTF-8 from a UTF-8 client: the server's to refuse.
        assert_eq!(login_name(b"caf\xe9", 45), None);
    }
}
