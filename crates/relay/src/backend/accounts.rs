//! Per-user mode: accounts made on the server log in through the relay
//! without being listed in its config. A user the relay's list does not
//! name is looked up in `mysql.user` with the relay's own account (it
//! needs SELECT on mysql.user). The row the server itself would match for
//! a login from the relay's host is chosen by the server's rules (most
//! specific host, then user: an anonymous `''@localhost` beats
//! `name@'%'`); its mysql_native_password hash checks the client's token
//! as the server would, and the client's backend connections then log in
//! as that name (the server has the last word). Accounts found are kept
//! for [`TTL`], so a burst of connects costs one lookup, and a name not
//! found for [`ABSENT_TTL`], so a flood of logins with unknown names costs
//! the server at most one lookup per name per second — and one lookup at
//! a time, whatever the names ([`ServerAccounts::lookup`] waits its turn).
//! A statement through the relay that changes accounts (CREATE/DROP/ALTER/
//! RENAME USER, GRANT, REVOKE, SET PASSWORD, FLUSH PRIVILEGES) empties
//! both; an account made directly on the server logs in once its name's
//! absence is older than [`ABSENT_TTL`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sqlfleet_conn::quote::literal;

use crate::backend::dial::Dialer;
use crate::backend::side::{field, LookupError, SideConn};
use crate::config::{Account, Backend};

/// How long a looked-up account is trusted.
pub const TTL: Duration = Duration::from_secs(2);

/// How long a name's absence is trusted.
pub const ABSENT_TTL: Duration = Duration::from_secs(1);

/// Names kept at most; past it the cache starts afresh.
const KEEP: usize = 50_000;

pub struct ServerAccounts {
    side: SideConn,
    cache: std::sync::Mutex<HashMap<String, (Instant, Option<Account>)>>,
    /// One lookup at a time: logins that missed together wait for the
    /// first one's answer, and unknown names cannot fan out into many
    /// server queries at once.
    turn: tokio::sync::Mutex<()>,
}

/// Whether a kept answer (`found` or not, kept at `at`) still holds.
fn fresh(at: Instant, found: bool) -> bool {
    at.elapsed() < if found { TTL } else { ABSENT_TTL }
}

/// `*` and 40 hex digits (mysql.user's native hash) → the 20 bytes.
pub fn parse_native(s: &str) -> Option<[u8; 20]> {
    let hex = s.strip_prefix('*')?;
    if hex.len() != 40 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 20];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// One row of mysql.user as the lookup reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub user: String,
    pub host: String,
    pub plugin: String,
    pub auth: String,
}

impl Row {
    /// What checks a client's token for this account: a
    /// mysql_native_password hash (an account without a password stores
    /// an empty string, and only an empty password logs in, as on the
    /// server). Other plugins: none, so the login is refused.
    fn account(&self) -> Option<Account> {
        if self.plugin == sqlfleet_wire::handshake::OLD {
            let old = match self.auth.as_str() {
                "" => Some(sqlfleet_wire::handshake::old_hash(b"")),
                h => sqlfleet_wire::handshake::parse_old_hash(h),
            };
            return old.map(|h| Account {
                native: None,
                sha2: None,
                old: Some(h),
            });
        }
        if !matches!(self.plugin.as_str(), "mysql_native_password" | "") {
            return None;
        }
        let hash = match self.auth.as_str() {
            "" => Some(sqlfleet_wire::handshake::native_hash("")),
            h => parse_native(h),
        };
        hash.map(|h| Account {
            native: Some(h),
            sha2: None,
            old: None,
        })
    }
}

/// How specific a user or host pattern is, as the server ranks its
/// accounts: a name without wildcards first, then patterns by how late
/// their first wildcard comes, the empty name (anonymous, any host) last.
fn specificity(s: &str) -> u8 {
    if s.is_empty() {
        return 0;
    }
    match s.chars().position(|c| c == '%' || c == '_') {
        None => 128,
        Some(p) => (p + 1).min(127) as u8,
    }
}

/// `host` against a Host column pattern: `%` and `_` wildcards (a
/// backslash escapes), letters compared without case; an
/// `address/netmask` pattern by its bits.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    if let Some((addr, mask)) = pattern.split_once('/') {
        let (Ok(a), Ok(m), Ok(h)) = (
            addr.parse::<std::net::Ipv4Addr>(),
            mask.parse::<std::net::Ipv4Addr>(),
            host.parse::<std::net::Ipv4Addr>(),
        ) else {
            return false;
        };
        let (a, m, h) = (u32::from(a), u32::from(m), u32::from(h));
        return h & m == a;
    }
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let h: Vec<char> = host.to_lowercase().chars().collect();
    like(&p, &h)
}

fn like(p: &[char], s: &[char]) -> bool {
    // Iterative wildcard match with one backtrack point for `%`.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some('%') => {
                star = Some((pi, si));
                pi += 1;
                continue;
            }
            Some('\\') if p.get(pi + 1) == Some(&s[si]) => {
                pi += 2;
                si += 1;
                continue;
            }
            Some('_') => {
                pi += 1;
                si += 1;
                continue;
            }
            Some(c) if *c != '\\' && *c == s[si] => {
                pi += 1;
                si += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '%')
}

/// The account the server matches for a login from `host`: of the rows
/// whose host pattern matches, the one with the most specific host, then
/// the most specific user (so an anonymous `''@localhost` wins over
/// `name@'%'`, the server's well-known rule).
pub fn matching<'a>(rows: &'a [Row], host: &str) -> Option<&'a Row> {
    rows.iter()
        .filter(|r| host_matches(&r.host, host))
        .max_by_key(|r| (specificity(&r.host), specificity(&r.user)))
}

impl ServerAccounts {
    pub fn new(
        dialer: Dialer,
        backends: Vec<Backend>,
        health: std::sync::Arc<crate::backend::health::Health>,
        metrics: std::sync::Arc<crate::admin::metrics::Metrics>,
    ) -> ServerAccounts {
        ServerAccounts {
            side: SideConn::new(dialer, backends, health, metrics),
            cache: std::sync::Mutex::new(HashMap::new()),
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// The server's account `user` (one mysql_native_password hash for
    /// every host it is defined for), or None: unknown, another plugin,
    /// hosts with different passwords. Err when the server could not be
    /// asked (logged): the client is told the server is unreachable, not
    /// that its password is wrong.
    pub async fn lookup(&self, user: &str) -> Result<Option<Account>, LookupError> {
        if let Some(a) = self.kept(user) {
            return Ok(a);
        }
        let _turn = self.turn.lock().await;
        if let Some(a) = self.kept(user) {
            return Ok(a);
        }
        let found = match self.query(user).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(user, "looking up a server account failed: {e}");
                return Err(e);
            }
        };
        // (A kept account that changed meanwhile is safe: the server checks
        // the client's backend login itself.)
        if let Ok(mut c) = self.cache.lock() {
            if c.len() > KEEP {
                c.retain(|_, (at, a)| fresh(*at, a.is_some()));
                if c.len() > KEEP {
                    c.clear();
                }
            }
            c.insert(user.to_string(), (Instant::now(), found.clone()));
        }
        Ok(found)
    }

    /// The kept answer for `user`, while it holds.
    fn kept(&self, user: &str) -> Option<Option<Account>> {
        let c = self.cache.lock().ok()?;
        c.get(user)
            .filter(|(at, a)| fresh(*at, a.is_some()))
            .map(|(_, a)| a.clone())
    }

    /// Accounts changed through the relay: look everything up again.
    pub fn forget(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    async fn query(&self, user: &str) -> Result<Option<Account>, LookupError> {
        // The rows the server could match for this name: its own and the
        // anonymous ones, roles left out. Which one wins is decided below
        // as the server decides it, for the host the relay logs in from.
        let sql = format!(
            "SELECT User AS u, Host AS h, plugin AS p, authentication_string AS a \
             FROM mysql.user WHERE User IN ({}, '') AND is_role = 'N'",
            literal(user)
        );
        // The host the server sees the relay's logins come from.
        let host_sql = "SELECT SUBSTRING_INDEX(USER(), '@', -1) AS h";
        let got = self
            .side
            .queries(
                crate::backend::side::OwnQuery::Account,
                &[host_sql, &sql],
                10_000,
            )
            .await?;
        let host = field(got.first().and_then(|r| r.first()), "h").unwrap_or_default();
        let rows: Vec<Row> = got
            .get(1)
            .into_iter()
            .flatten()
            .map(|r| Row {
                user: field(Some(r), "u").unwrap_or_default(),
                host: field(Some(r), "h").unwrap_or_default(),
                plugin: field(Some(r), "p").unwrap_or_default(),
                auth: field(Some(r), "a").unwrap_or_default(),
            })
            .collect();
        Ok(matching(&rows, &host).and_then(Row::account))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(user: &str, host: &str) -> Row {
        Row {
            user: user.into(),
            host: host.into(),
            plugin: "mysql_native_password".into(),
            auth: String::new(),
        }
    }

    #[test]
    fn the_server_s_account_order_decides() {
        let rows = [row("conn", "%"), row("", "localhost")];
        assert_eq!(matching(&rows, "localhost"), Some(&rows[1]));
        assert_eq!(matching(&rows, "10.0.0.1"), Some(&rows[0]));
        let rows = [row("", "%"), row("u", "%"), row("u", "10.0.%")];
        assert_eq!(matching(&rows, "10.0.3.4"), Some(&rows[2]));
        assert_eq!(matching(&rows, "127.0.0.1"), Some(&rows[1]));
        let rows = [row("u", "10.0.0.0/255.255.255.0")];
        assert!(matching(&rows, "10.0.0.9").is_some());
        assert!(matching(&rows, "10.0.1.9").is_none());
        assert!(matching(&[row("u", "LocalHost")], "localhost").is_some());
        assert!(matching(&[row("u", "local_ost")], "localhost").is_some());
        assert!(matching(&[row("u", "local")], "localhost").is_none());
        assert!(matching(&[row("u", "l%t")], "localhost").is_some());
        assert!(matching(&[row("u", "a\\_b")], "a_b").is_some());
        assert!(matching(&[row("u", "a\\_b")], "axb").is_none());
    }

    #[test]
    fn old_password_accounts_carry_their_hash() {
        let mut r = row("u", "%");
        r.plugin = "mysql_old_password".into();
        r.auth = "09301740536db389".into();
        let a = r.account().expect("an old-password account");
        assert_eq!(a.old, Some([0x0930_1740, 0x536d_b389]));
        assert!(a.native.is_none() && a.sha2.is_none());
    }

    #[test]
    fn other_plugins_are_not_checked_by_the_relay() {
        let mut r = row("u", "%");
        r.plugin = "ed25519".into();
        assert!(r.account().is_none());
        r.plugin = "mysql_native_password".into();
        r.auth = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19".into();
        assert_eq!(r.account().and_then(|a| a.native).map(|h| h[0]), Some(0x24));
    }

    #[test]
    fn native_hashes_parse() {
        let h = parse_native("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19").expect("hash");
        assert_eq!(h[0], 0x24);
        assert_eq!(h[19], 0x19);
        assert!(parse_native("2470C0C0").is_none());
        assert!(parse_native("*ZZ70C0C06DEE42FD1618BB99005ADCA2EC9D1E19").is_none());
        assert!(parse_native("").is_none());
    }
}
