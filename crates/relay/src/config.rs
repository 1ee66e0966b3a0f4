//! Relay settings (quick mode: everything from flags).

use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backend {
    pub host: String,
    pub port: u16,
}

impl Backend {
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

#[derive(Clone)]
pub struct RelayConfig {
    pub listen: String,
    pub backends: Vec<Backend>,
    pub backend_user: String,
    pub backend_password: String,
    /// Client user name → SHA1(SHA1(password)); plaintext is not kept.
    pub users: HashMap<String, [u8; 20]>,
    /// Backend connections per backend and session shape.
    pub pool_max: usize,
    /// How long a client waits for a backend connection before an error.
    pub wait_timeout: Duration,
    pub max_packet: usize,
}

impl std::fmt::Debug for RelayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayConfig")
            .field("listen", &self.listen)
            .field("backends", &self.backends)
            .field("backend_user", &self.backend_user)
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("pool_max", &self.pool_max)
            .finish_non_exhaustive()
    }
}

/// Parses `NAME:PASSWORD` into the stored form.
pub fn parse_user(s: &str) -> Result<(String, [u8; 20]), String> {
    let (name, pw) = s.split_once(':').ok_or("--user takes NAME:PASSWORD")?;
    if name.is_empty() {
        return Err("--user: empty user name".into());
    }
    Ok((name.to_string(), sqlfleet_wire::handshake::native_hash(pw)))
}
