//! A replica's binlog dump through the relay (COM_BINLOG_DUMP, MariaDB's
//! GTID form included, and MySQL's COM_BINLOG_DUMP_GTID): the command goes
//! to the client's pinned connection and from then on bytes pass both
//! ways as they come, since the server ends the connection after a dump
//! and the session is nothing but the stream. When either side goes, the
//! other is closed at once — a replica that disconnects from an idle
//! dump does not leave the relay holding a server connection until the
//! next event.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Fail, Session};
use crate::protocol::sql::Pin;

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
