//! The connected clients by the id each was given in its greeting, so that
//! `KILL [QUERY] <id>` from one client reaches the statement another is
//! running on whatever backend connection it has at that moment.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The first id the relay gives a client (server thread ids stay below).
pub const FIRST_ID: u32 = 1 << 30;

/// One client as others see it.
pub struct Handle {
    user: Mutex<String>,
    /// The client's host as the server would name it.
    host: String,
    /// (backend index, server thread id) of the statement running now.
    running: Mutex<Option<(usize, u32)>>,
    alias: Mutex<Option<u32>>,
    killed: AtomicBool,
    wake: Notify,
    /// The session has ended (its client socket closed).
    ended: AtomicBool,
    ended_wake: Notify,
}

impl Handle {
    /// The relay account the client is logged in as.
    pub fn user(&self) -> String {
        self.user.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// After COM_CHANGE_USER.
    pub fn set_user(&self, user: &str) {
        *self.user.lock().unwrap_or_else(|e| e.into_inner()) = user.to_string();
    }

    /// Records the backend thread running this client's command (or none).
    pub fn running(&self, at: Option<(usize, u32)>) {
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = at;
    }

    pub fn running_at(&self) -> Option<(usize, u32)> {
        *self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server thread the client is pinned to (its CONNECTION_ID()).
    pub fn set_alias(&self, thread: Option<u32>) {
        *self.alias.lock().unwrap_or_else(|e| e.into_inner()) = thread;
    }

    pub fn alias(&self) -> Option<u32> {
        *self.alias.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the session to end (KILL CONNECTION).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
        self.wake.notify_one();
    }

    /// Resolves once the session has ended and its client's socket is
    /// closed: KILL CONNECTION answers after that, as the server does (the
    /// killed client's next command fails instead of racing the kill).
    pub async fn ended(&self) {
        let n = self.ended_wake.notified();
        tokio::pin!(n);
        n.as_mut().enable();
        if self.ended.load(Ordering::SeqCst) {
            return;
        }
        n.await;
    }

    /// Resolves once the session has been killed.
    pub async fn killed(&self) {
        loop {
            let n = self.wake.notified();
            if self.killed.load(Ordering::SeqCst) {
                return;
            }
            n.await;
        }
    }
}

type Map = Arc<Mutex<HashMap<u32, Arc<Handle>>>>;

/// Clients by relay id, and by the server thread id of a connection a
/// client is pinned to after asking CONNECTION_ID().
#[derive(Default)]
pub struct Clients(Map);

impl Clients {
    /// Adds a client; it stays until the returned guard is dropped.
    pub fn register(&self, id: u32, user: &str, host: &str) -> (Arc<Handle>, Registered) {
        let h = Arc::new(Handle {
            user: Mutex::new(user.to_string()),
            host: host.to_string(),
            running: Mutex::new(None),
            alias: Mutex::new(None),
            killed: AtomicBool::new(false),
            wake: Notify::new(),
            ended: AtomicBool::new(false),
            ended_wake: Notify::new(),
        });
        self.lock().insert(id, h.clone());
        (h, Registered(self.0.clone(), id))
    }

    /// The client with relay id `id`, or pinned to server thread `id`.
    pub fn get(&self, id: u32) -> Option<(u32, Arc<Handle>)> {
        let map = self.lock();
        if let Some(h) = map.get(&id) {
            return Some((id, h.clone()));
        }
        map.iter()
            .find(|(_, h)| h.alias() == Some(id))
            .map(|(k, h)| (*k, h.clone()))
    }

    /// The clients logged in as `user` (from a host matching `host`,
    /// when given), by relay id.
    pub fn of_user(&self, user: &str, host: Option<&str>) -> Vec<(u32, Arc<Handle>)> {
        self.lock()
            .iter()
            .filter(|(_, h)| h.user() == user)
            .filter(|(_, h)| {
                host.is_none_or(|p| crate::backend::accounts::host_matches(p, h.host()))
            })
            .map(|(k, h)| (*k, h.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<Handle>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Removes a client from the registry when its session ends.
pub struct Registered(Map, u32);

impl Drop for Registered {
    fn drop(&mut self) {
        let h = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
        if let Some(h) = h {
            h.ended.store(true, Ordering::SeqCst);
            h.ended_wake.notify_waiters();
        }
    }
}
