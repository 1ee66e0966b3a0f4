//! What a client of one shared account may not do, because the server
//! would let it act on the account every client shares: run a KILL the
//! relay cannot map to a client (`protocol/sql/kill.rs`; the server lets
//! an account kill its own connections without any privilege), or change
//! that account itself — its password, default role, privileges, limits
//! or name (`protocol/sql/account_targets.rs`; `SET PASSWORD` and `SET
//! DEFAULT ROLE` for oneself need no privilege either). Per-user, each
//! client's account is its own and the server decides.

use super::{Fail, Session};
use crate::backend::command;
use crate::protocol::sql::{Effects, Unread};

impl Session {
    /// Refuses what a client of one shared account may not run (see the
    /// module doc); per-user, nothing.
    pub(super) async fn shared_account_guard(&mut self, fx: &Effects) -> Result<(), Fail> {
        if let Some(refused) = self
            .unread_kill_refused(fx.kill_unread)
            .or_else(|| self.own_account_change_refused(fx))
        {
            return Err(refused);
        }
        if let Some(var) = &fx.dynamic_var {
            self.dynamic_var_checked(var).await?;
        }
        Ok(())
    }

    /// Whether a text that may run a KILL the relay cannot read
    /// (`protocol/sql/kill.rs`) is refused: from a client of one shared
    /// account, whose KILL the server would run as the account every client
    /// shares. Dynamic SQL from a text the relay cannot read runs when the
    /// config says `shared_dynamic_sql = "run"`. Per-user, the server
    /// decides as the client's own account.
    fn unread_kill_refused(&self, u: Unread) -> Option<Fail> {
        match u {
            _ if self.account.is_some() => None,
            Unread::No => None,
            Unread::Dynamic if self.ctx.cfg.shared_dynamic_sql => None,
            u => Some(refusal(u)),
        }
    }

    /// Before `PREPARE s FROM @v` or `EXECUTE IMMEDIATE @v` from a client
    /// of one shared account: reads `@v` in the client's session and
    /// checks its value as the text it is (its KILLs and account
    /// statements). A session whose FOUND_ROWS()
    /// only the server knows is refused instead (reading the variable
    /// would change it).
    async fn dynamic_var_checked(&mut self, var: &str) -> Result<(), Fail> {
        if self.account.is_some() || self.ctx.cfg.shared_dynamic_sql {
            return Ok(());
        }
        if self
            .st
            .pins()
            .contains(&crate::protocol::sql::Pin::FoundRows)
        {
            return Err(refusal(Unread::Dynamic));
        }
        self.settle_found_rows().await?;
        let c = self.ensure_conn().await?;
        // As characters (utf8mb4, sent as hex: the session's
        // character_set_results may be any), with the character set the
        // server reads the text in.
        let row = command::query_row(
            c,
            &format!(
                "SELECT HEX(CONVERT({var} USING utf8mb4)) AS v, @@character_set_connection AS cs"
            ),
        )
        .await
        .map_err(|e| Fail::Lost(e.to_string()))?;
        self.release_if_free();
        let get = |name: &str| {
            row.iter()
                .flatten()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.clone())
        };
        let Some(text) = value_text(get("v").as_deref(), get("cs").as_deref()) else {
            return Err(refusal(Unread::Dynamic));
        };
        let fx = crate::protocol::sql::analyze(&text);
        if let Some(refused) = self.own_account_change_refused(&fx) {
            return Err(refused);
        }
        let read = match fx.kill_unread {
            Unread::No if fx.kill.is_some() => Unread::Kill,
            Unread::No if fx.dynamic_var.is_some() => Unread::Dynamic,
            u => u,
        };
        match self.unread_kill_refused(read) {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// The error for a statement that changes the shared account itself
    /// (or may: any name it acts on that is the account's user name, or
    /// CURRENT_USER): every client would then log in with the new
    /// password, run with the new role or lose the account.
    fn own_account_change_refused(&self, fx: &Effects) -> Option<Fail> {
        let t = fx.account_targets.as_ref()?;
        if self.account.is_some() {
            return None;
        }
        let user = &self.ctx.cfg.backend_user;
        if !(t.own || t.names.iter().any(|n| n == user)) {
            return None;
        }
        Some(Fail::Err(
            1227,
            "42000",
            format!(
                "sqlfleet relay: with one shared account, a statement that changes that account \
                 ('{user}': its password, default role, privileges, limits or name) is refused: it \
                 would change every client's account; change it directly on the server"
            ),
        ))
    }
}

/// The error for a text a client of one shared account may not run
/// (`u` is Dynamic or Kill).
fn refusal(u: Unread) -> Fail {
    let why = if u == Unread::Kill {
        "this text may run a KILL whose target only the server reads (an expression or QUERY ID, \
         KILL among other statements or in a compound one, or in dynamic SQL), and the server \
         would kill as the account every client shares; send KILL [QUERY|CONNECTION] <number> \
         or KILL ... USER <name> alone"
    } else {
        "this dynamic SQL's text is not one plain string, so the relay cannot see whether it runs \
         a KILL or changes that account, which the server would do as the account every client \
         shares (set [backend] shared_dynamic_sql = \"run\" to let it run anyway)"
    };
    Fail::Err(
        1235,
        "42000",
        format!("sqlfleet relay: with one shared account, {why}"),
    )
}

/// A variable's value as the relay read it (`HEX(CONVERT(@v USING
/// utf8mb4))`, and the connection's character set), as UTF-8 text; None
/// when it cannot be sure of it: hex it cannot read (the results came in
/// a character set that is not ASCII's), or a connection character set
/// in which the server would read other characters (ucs2, utf16,
/// utf16le, utf32).
fn value_text(hex: Option<&str>, charset: Option<&str>) -> Option<Vec<u8>> {
    let cs = charset?;
    if !cs.bytes().all(|b| b.is_ascii_alphanumeric())
        || ["ucs2", "utf16", "utf16le", "utf32"].contains(&cs.to_ascii_lowercase().as_str())
    {
        return None;
    }
    let Some(hex) = hex else {
        // NULL: the server has nothing to run.
        return Some(Vec::new());
    };
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::value_text;

    #[test]
    fn a_value_is_read_only_when_the_relay_can_be_sure_of_it() {
        for (hex, cs, want) in [
            (Some("4B494C4C2037"), Some("utf8mb4"), Some(&b"KILL 7"[..])),
            (Some("4b494c4c"), Some("latin1"), Some(&b"KILL"[..])),
            (None, Some("gbk"), Some(&b""[..])),
            (Some(""), Some("utf8mb4"), Some(&b""[..])),
            (Some("4B4"), Some("utf8mb4"), None),
            (Some("4G"), Some("utf8mb4"), None),
            (Some("\u{0}4\u{0}B"), Some("utf8mb4"), None),
            (Some("4B"), Some("utf16"), None),
            (Some("4B"), Some("UCS2"), None),
            (Some("4B"), Some("u\u{0}t\u{0}f"), None),
            (Some("4B"), None, None),
        ] {
            assert_eq!(value_text(hex, cs).as_deref(), want, "{hex:?} {cs:?}");
        }
    }
}
