//! A replica's binlog dump through the relay (COM_BINLOG_DUMP, MariaDB's
//! GTID form included, and MySQL's COM_BINLOG_DUMP_GTID): the command goes
//! to the client's pinned connection and from then on bytes pass both
//! ways as they come, since the server ends the connection after a dump
//! and the session is nothing but the stream. When either side goes, the
//! other is closed at once — a replica that disconnects from an idle
//! dump does not leave the relay holding a server connection until the
//! next event.
//!
//! A dump the server refuses (no REPLICATION SLAVE: 1227; a server without
//! binary log: 1236 ...) answers with one ERR packet and leaves the
//! session usable: the relay reads that first answer as a packet, passes
//! the error on and goes on serving the client's commands on the same
//! connection, as the server does. (Before, it switched to passing bytes
//! at once: the client got its error, its next command went nowhere, and
//! the session held a server connection for good — any account could use
//! up the pool this way.)

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Fail, Session};
use crate::protocol::sql::Pin;

/// Whether the server keeps a session after refusing its dump with error
/// `code`: a refusal before the dump begins (the privilege check, 1227; a
/// command the server does not know, 1047) leaves it usable; a dump that
/// began and failed (1236 and the rest) ends it (sql_parse.cc: "the thread
/// needs to terminate").
pub(crate) fn session_goes_on(code: Option<u16>) -> bool {
    matches!(code, Some(1227 | 1047))
}

/// The largest first answer read as a packet (an event can be as large as
/// the server's max_allowed_packet, at most 1 GiB).
const MAX_FIRST: usize = 1 << 30;

impl Session {
    pub(super) async fn binlog_dump(&mut self, cmd: &[u8]) -> Result<(), Fail> {
        self.pin(Pin::Replication);
        self.ensure_conn().await?;
        let Some(mut c) = self.conn.take() else {
            return Err(Fail::Close);
        };
        if let Err(e) = c.io.write_packet(0, cmd).await {
            self.ctx.pool.discard(c);
            return Err(Fail::Lost(e.to_string()));
        }
        // The first answer decides: an ERR ends the command, anything else
        // (the first event) starts the stream.
        let first = match c.io.read_packet(MAX_FIRST).await {
            Ok(p) => p,
            Err(e) => {
                self.ctx.pool.discard(c);
                return Err(Fail::Lost(e.to_string()));
            }
        };
        if first.1.first() == Some(&0xFF) {
            let sent = self.io.write_packet(first.0, &first.1).await;
            let code = sqlfleet_wire::packet::parse_err(&first.1).map(|e| e.0);
            if session_goes_on(code) {
                self.conn = Some(c);
                return sent.map(drop).map_err(|_| Fail::Close);
            }
            // A dump that began and failed: the server ends its session.
            self.ctx.pool.discard(c);
            return Err(Fail::Close);
        }
        if self.io.write_packet(first.0, &first.1).await.is_err()
            || self.io.s.flush().await.is_err()
        {
            self.ctx.pool.discard(c);
            return Err(Fail::Close);
        }
        // Events read along with the first one go first, whole.
        while c.io.buffered() > 0 {
            if c.io.pass_packet(&mut self.io.s).await.is_err() {
                self.ctx.pool.discard(c);
                return Err(Fail::Close);
            }
        }
        self.handle.running(Some((c.backend(), c.thread_id())));
        let mut from_server = vec![0u8; 64 * 1024];
        let mut from_client = [0u8; 1024];
        loop {
            tokio::select! {
                n = c.io.s.read(&mut from_server) => {
                    let Ok(n @ 1..) = n else { break };
                    if self.io.s.write_all(&from_server[..n]).await.is_err()
                        || self.io.s.flush().await.is_err()
                    {
                        break;
                    }
                }
                // A replica sends nothing during a dump: any read that
                // ends is its leaving.
                n = self.io.s.read(&mut from_client) => {
                    if !matches!(n, Ok(1..)) {
                        break;
                    }
                }
            }
        }
        self.handle.running(None);
        self.ctx.pool.discard(c);
        Err(Fail::Close)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn which_refusals_keep_the_session() {
        for (code, goes_on) in [
            (Some(1227), true),
            (Some(1047), true),
            (Some(1236), false),
            (Some(1045), false),
            (None, false),
        ] {
            assert_eq!(super::session_goes_on(code), goes_on, "{code:?}");
        }
    }
}
