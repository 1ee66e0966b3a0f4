//! A session moving between event loops between commands: its client
//! socket (plain TCP or Unix; a TLS session stays where it is) and the
//! backend connection it holds leave one loop's poller for another's.

use super::Session;

impl Session {
    /// The client's socket can move to another event loop (plain TCP or
    /// Unix; a TLS session stays where it is).
    pub(super) fn movable(&self) -> bool {
        crate::listen::is_plain(&self.io.s)
    }

    /// Takes the client's socket off this loop's poller (`run` asked for a
    /// move only when it is `movable`); `None` when the socket was lost on
    /// the way.
    pub(super) fn take_off(&mut self) -> Option<crate::listen::Detached> {
        match crate::listen::detach_plain(&mut self.io.s)? {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::debug!(
                    client = self.id,
                    "a client socket could not leave its event loop: {e}"
                );
                None
            }
        }
    }

    /// Registers a moved session's sockets on this loop's poller (the
    /// client's, and the backend connection's it holds); false when one
    /// was lost (the session then ends, as its server session would have).
    pub(super) fn put_on(&mut self, client: crate::listen::Detached) -> bool {
        if let Some(c) = self.conn.as_mut() {
            if c.come_home().is_err() {
                if let Some(c) = self.conn.take() {
                    self.ctx.pool.discard(c);
                }
                return false;
            }
        }
        match client.attach() {
            Ok(a) => {
                self.io.s = a.into();
                true
            }
            Err(_) => {
                self.finish();
                false
            }
        }
    }
}
