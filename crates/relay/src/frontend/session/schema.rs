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

/// The character set a user name comes in: the collation the packet
/// names (COM_CHANGE_USER may), else the session's client set (its SET
/// NAMES, else its login collation). Whether it is UTF-8, and its name
/// for a message.
pub fn name_set(settings: &[Setting], login_collation: u8, named: Option<u8>) -> (bool, String) {
    let of_id = |id: u8| {
        sqlfleet_conn::charset::HANDSHAKE_COLLATIONS
            .iter()
            .find(|(_, c)| *c == id)
            .map_or_else(
                || format!("collation id {id}"),
                |(name, _)| (*name).to_string(),
            )
    };
    if let Some(id) = named {
        return (utf8_collation(id), of_id(id));
    }
    let utf8 = utf8_client(settings, login_collation);
    match client_set(settings, login_collation) {
        Some(ClientSet::Named(cs)) => (utf8, cs.into_owned()),
        Some(ClientSet::Collation(id)) => (utf8, of_id(id)),
        None => (utf8, "not known".into()),
    }
}

/// Whether the relay reads a user name as the server does: ASCII, or in
/// a UTF-8 set. The relay's accounts are named in UTF-8; a name in
/// another character set would be another name to it (or, where its
/// bytes happen to be valid UTF-8, another account's name, whose
/// password and rules it would check), so such a login is refused in
/// words instead ([`user_name_refusal`]).
pub fn user_name_readable(raw: &[u8], utf8_set: bool) -> bool {
    raw.is_ascii() || utf8_set
}

/// The refusal of a login or COM_CHANGE_USER whose user name, in the
/// character set `set`, the relay does not read as the server would:
/// code, SQL state and message.
pub fn user_name_refusal(set: &str) -> (u16, &'static str, String) {
    (
        1235,
        "42000",
        format!(
            "This version of the sqlfleet relay doesn't yet support a user name outside ASCII from a client whose character set is {set}: log in with a utf8mb4 client, or an ASCII name"
        ),
    )
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

    #[test]
    fn which_user_names_the_relay_reads_as_the_server_does() {
        const LATIN1: u8 = 8;
        const UTF8MB4: u8 = 45;
        let set = |v: &str| {
            vec![s(
                "character_set_client",
                &format!("@@session.character_set_client = '{v}'"),
            )]
        };
        // (name as sent, session settings, login collation, collation the
        // packet names, readable, the set named in a refusal)
        type Row = (
            &'static [u8],
            Vec<Setting>,
            u8,
            Option<u8>,
            bool,
            &'static str,
        );
        let rows: Vec<Row> = vec![
            (b"root", vec![], LATIN1, None, true, "latin1"),
            (b"caf\xc3\xa9", vec![], UTF8MB4, None, true, "utf8mb4"),
            (b"caf\xe9", vec![], LATIN1, None, false, "latin1"),
            // Valid UTF-8 bytes, but latin1's: another name.
            (b"\xc3\xa9", vec![], LATIN1, None, false, "latin1"),
            // COM_CHANGE_USER: the packet's collation first, then the
            // session's SET NAMES, then the login's.
            (b"\xc3\xa9", vec![], LATIN1, Some(UTF8MB4), true, "utf8mb4"),
            (b"\xc3\xa9", vec![], UTF8MB4, Some(LATIN1), false, "latin1"),
            (b"\xc3\xa9", set("latin1"), UTF8MB4, None, false, "latin1"),
            (b"\xc3\xa9", set("utf8mb4"), LATIN1, None, true, "utf8mb4"),
            (b"\x95\x5c", vec![], 13, None, false, "sjis"),
        ];
        for (raw, settings, login, named, readable, name) in rows {
            let (utf8, set_name) = name_set(&settings, login, named);
            assert_eq!(
                user_name_readable(raw, utf8),
                readable,
                "{raw:02x?} {login} {named:?}"
            );
            assert_eq!(set_name, name, "{raw:02x?} {login} {named:?}");
            assert!(user_name_refusal(&set_name).2.contains(name));
        }
    }
}
