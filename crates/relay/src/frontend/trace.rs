//! A per-client record of which backend connection each command ran on
//! and what held it, for hunting races in tests: off unless the
//! environment has `SQLFLEET_RELAY_TRACE` when the relay starts (then a
//! command costs one short string). The differential oracle prints a
//! failing client's record.

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct Trace(Option<Mutex<HashMap<u32, Vec<String>>>>);

impl Trace {
    /// On when `SQLFLEET_RELAY_TRACE` is set.
    pub fn from_env() -> Trace {
        Trace(
            std::env::var_os("SQLFLEET_RELAY_TRACE")
                .is_some()
                .then(|| Mutex::new(HashMap::new())),
        )
    }

    pub fn on(&self) -> bool {
        self.0.is_some()
    }

    /// Adds a line to client `id`'s record (only called when on).
    pub fn add(&self, id: u32, line: String) {
        if let Some(m) = &self.0 {
            m.lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(id)
                .or_default()
                .push(line);
        }
    }

    /// Client `id`'s record.
    pub fn of(&self, id: u32) -> Vec<String> {
        self.0
            .as_ref()
            .and_then(|m| {
                m.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&id)
                    .cloned()
            })
            .unwrap_or_default()
    }
}
