//! Asking a server whether it is read_only, the way a write would be
//! routed.
//!
//! `query` and `load` ask before they write (a replica's `read_only` does
//! not stop an account with SUPER). Through a read/write-splitting proxy
//! (the relay with `--read-write-split`, ProxySQL, MaxScale) a plain
//! SELECT goes to a replica, which answers 1 for the primary the writes
//! reach; a locking read goes where the writes go. A server that refuses
//! the locking form (a syntax error) is asked plainly.

/// The question, as a locking read.
pub const ASK: &str = "SELECT @@global.read_only + 0 FROM DUAL FOR UPDATE";

/// The plain form, for a server that refuses [`ASK`] with ERROR 1064.
pub const ASK_PLAIN: &str = "SELECT @@global.read_only + 0";

/// The server's syntax error, after which [`ASK_PLAIN`] is asked.
pub const SYNTAX_ERROR: u16 = 1064;

/// Whether an answer says read-only (`1`; a proxy or an old server may
/// say `ON`).
pub fn says_read_only(v: &str) -> bool {
    v.trim() == "1" || v.trim().eq_ignore_ascii_case("ON")
}

/// Asks a driver connection ([`ASK`], then [`ASK_PLAIN`] on a syntax
/// error); `true` when the server is read-only or gives no answer.
pub async fn ask(conn: &mut mysql_async::Conn) -> Result<bool, mysql_async::Error> {
    use mysql_async::prelude::Queryable;
    let v: Option<String> = match conn.query_first(ASK).await {
        Err(mysql_async::Error::Server(e)) if e.code == SYNTAX_ERROR => {
            conn.query_first(ASK_PLAIN).await?
        }
        r => r?,
    };
    Ok(answer_is_read_only(v.as_deref()))
}

/// Whether the first answer says read-only; no row or NULL is taken as
/// read-only (unsure: the write is refused there, not let through).
pub fn answer_is_read_only(first: Option<&str>) -> bool {
    first.is_none_or(says_read_only)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_answers_say_read_only() {
        for (v, ro) in [
            ("1", true),
            ("ON", true),
            ("on", true),
            ("0", false),
            ("OFF", false),
            ("", false),
        ] {
            assert_eq!(says_read_only(v), ro, "{v:?}");
        }
        assert!(
            answer_is_read_only(None),
            "no answer: refused, not let through"
        );
        assert!(!answer_is_read_only(Some("0")));
    }
}
