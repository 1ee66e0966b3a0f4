//! Per-user mode: accounts made on the server log in through the relay
//! without being listed in its config. A user the relay's list does not
//! name is looked up in `mysql.user` with the relay's own account (it
//! needs SELECT on mysql.user); the mysql_native_password hash found there
//! checks the client's token as the server would, and the client's backend
//! connections then log in as it (the server has the last word). Answers
//! are kept for a few seconds, so a burst of connects costs one lookup and
//! a changed password or a dropped user is seen within that time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sqlfleet_conn::quote::literal;

use crate::backend::command::query_row;
use crate::backend::dial::{Dialer, Login, Shape};
use crate::config::{Account, Backend};

/// How long a looked-up account (or its absence) is trusted.
pub const TTL: Duration = Duration::from_secs(2);

pub struct ServerAccounts {
    dialer: Dialer,
    backends: Vec<Backend>,
    cache: std::sync::Mutex<HashMap<String, (Instant, Option<Account>)>>,
    conn: tokio::sync::Mutex<Option<Login>>,
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

impl ServerAccounts {
    pub fn new(dialer: Dialer, backends: Vec<Backend>) -> ServerAccounts {
        ServerAccounts {
            dialer,
            backends,
            cache: std::sync::Mutex::new(HashMap::new()),
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// The server's account `user` (one mysql_native_password hash for
    /// every host it is defined for), or None: unknown, another plugin,
    /// hosts with different passwords, or the lookup failed (logged).
    pub async fn lookup(&self, user: &str) -> Option<Account> {
        if let Ok(c) = self.cache.lock() {
            if let Some((at, a)) = c.get(user) {
                if at.elapsed() < TTL {
                    return a.clone();
                }
            }
        }
        let found = match self.query(user).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(user, "looking up a server account failed: {e}");
                return None;
            }
        };
        if let Ok(mut c) = self.cache.lock() {
            if c.len() > 10_000 {
                c.retain(|_, (at, _)| at.elapsed() < TTL);
            }
            c.insert(user.to_string(), (Instant::now(), found.clone()));
        }
        found
    }

    async fn query(&self, user: &str) -> Result<Option<Account>, String> {
        let sql = format!(
            "SELECT COUNT(DISTINCT authentication_string) AS n, MAX(authentication_string) AS h \
             FROM mysql.user WHERE User = {} AND plugin IN ('mysql_native_password', '')",
            literal(user)
        );
        let mut guard = self.conn.lock().await;
        for attempt in 0..2 {
            if guard.is_none() {
                *guard = Some(self.dial().await?);
            }
            let Some(c) = guard.as_mut() else { continue };
            match query_row(c, &sql).await {
                Ok(row) => {
                    let get = |col: &str| {
                        row.as_ref()
                            .and_then(|r| r.iter().find(|(n, _)| n == col))
                            .and_then(|(_, v)| v.clone())
                    };
                    if get("n").as_deref() != Some("1") {
                        return Ok(None);
                    }
                    // An account without a password stores an empty string:
                    // only an empty password logs in, as on the server.
                    let hash = match get("h").as_deref() {
                        Some("") => Some(sqlfleet_wire::handshake::native_hash("")),
                        Some(h) => parse_native(h),
                        None => None,
                    };
                    return Ok(hash.map(|h| Account {
                        native: Some(h),
                        sha2: None,
                    }));
                }
                // A kept connection may have gone stale: dial once more.
                Err(e) if attempt == 0 => {
                    tracing::debug!("account lookup connection: {e}");
                    *guard = None;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("no connection".into())
    }

    async fn dial(&self) -> Result<Login, String> {
        let shape = Shape {
            caps: 0,
            collation: 45,
            ext: 0,
        };
        let mut last = String::from("no backend");
        for b in &self.backends {
            match self.dialer.login(b, shape, None).await {
                Ok(l) => return Ok(l),
                Err(e) => last = format!("{}:{}: {e}", b.host, b.port),
            }
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
