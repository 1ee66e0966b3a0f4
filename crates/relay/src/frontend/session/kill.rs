//! `KILL [QUERY|CONNECTION] <id>` and COM_PROCESS_KILL with the ids the
//! relay hands out: the id names a relay client, never a backend thread.
//! The server thread id a client learnt from CONNECTION_ID() names it too
//! (asking CONNECTION_ID() pins the client to that connection). A
//! statement that client is running is killed on its backend with
//! `KILL QUERY <thread>` over a connection of its own (the pool may be
//! full); KILL CONNECTION also ends that client's session. A client may
//! kill only sessions of its own account.

use sqlfleet_wire::packet;

use super::{Fail, Session};
use crate::backend::command;
use crate::backend::dial::Shape;

impl Session {
    /// `KILL QUERY <thread>` on backend `b`, over a connection of its own
    /// (the pool may be full). A statement that finished meanwhile leaves
    /// nothing to kill.
    pub(super) async fn kill_backend_query(&self, b: usize, thread: u32) {
        let backend = &self.ctx.cfg.backends[b];
        let shape = Shape {
            caps: 0,
            collation: self.shape.collation,
            ext: 0,
        };
        // As the client's own backend account in per-user mode (a query of
        // its own), else the relay's.
        let account = self.account.as_deref();
        if let Ok(mut c) = self.ctx.pool.dialer().login(backend, shape, account).await {
            let q = format!("\x03KILL QUERY {thread}");
            let _ = command::simple(&mut c, q.as_bytes()).await;
        }
    }

    pub(super) async fn kill(&mut self, query_only: bool, id: u64) -> Result<(), Fail> {
        let target = u32::try_from(id).ok().and_then(|i| self.ctx.clients.get(i));
        let Some((target_id, target)) = target else {
            return Err(Fail::Err(1094, "HY000", format!("Unknown thread id: {id}")));
        };
        if target.user() != self.user {
            return Err(Fail::Err(
                1095,
                "HY000",
                format!("You are not owner of thread {id}"),
            ));
        }
        if target_id == self.id {
            if query_only {
                // Nothing of ours runs while this runs.
                return self.local_ok().await;
            }
            // As the server does: the error, then the connection closes.
            let _ = self
                .io
                .write_packet(
                    1,
                    &packet::err_payload(1927, "70100", "Connection was killed"),
                )
                .await;
            return Err(Fail::Close);
        }
        if let Some((b, thread)) = target.running_at() {
            self.kill_backend_query(b, thread).await;
        }
        if !query_only {
            target.kill();
        }
        self.local_ok().await
    }
}
