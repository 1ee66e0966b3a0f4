//! Commands the relay itself sends on a backend connection (state
//! replay, resets, health pings, re-prepares, GTID reads): the whole reply
//! is read and followed, never forwarded to a client.

use std::time::Duration;

use sqlfleet_wire::handshake;
use sqlfleet_wire::packet::WireError;

use crate::pool::BackendConn;
use crate::response::{Expect, Tracker};

/// Sends one command and reads its whole reply without forwarding it;
/// returns the reply's outcome (an ERR is an `Ok` with `error` set).
pub async fn command(
    c: &mut BackendConn,
    payload: &[u8],
    expect: Expect,
) -> Result<crate::response::Outcome, WireError> {
    c.io.write_packet(0, payload).await?;
    let mut t = Tracker::new(expect, c.deprecate_eof());
    loop {
        let (_, mut p) = c.io.read_packet(1 << 30).await?;
        let len = p.len().min(sqlfleet_wire::packet::MAX_CHUNK - 1);
        let look = p.len().min(crate::response::PREFIX);
        if t.packet(len, &mut p[..look])? == crate::response::Event::End {
            return Ok(t.outcome);
        }
    }
}

/// The first column of the first row of a one-column query (NULL: None).
pub async fn query_value(c: &mut BackendConn, sql: &str) -> Result<Option<String>, WireError> {
    let mut p = vec![0x03];
    p.extend_from_slice(sql.as_bytes());
    c.io.write_packet(0, &p).await?;
    let mut t = Tracker::new(Expect::Results { cursor: false }, c.deprecate_eof());
    let mut value = None;
    loop {
        let (_, mut p) = c.io.read_packet(1 << 24).await?;
        let rows_before = t.outcome.rows;
        let look = p.len().min(crate::response::PREFIX);
        let len = p.len().min(sqlfleet_wire::packet::MAX_CHUNK - 1);
        let mut head = p[..look].to_vec();
        let ev = t.packet(len, &mut head)?;
        if t.outcome.rows == 1 && rows_before == 0 {
            // A text row: one length-encoded string, or 0xFB for NULL.
            if p.first() != Some(&0xFB) {
                let mut i = 0;
                let n = handshake::lenenc(&p, &mut i)? as usize;
                value = p
                    .get(i..i + n)
                    .map(|v| String::from_utf8_lossy(v).into_owned());
            }
            p.clear();
        }
        if ev == crate::response::Event::End {
            if let Some((code, msg)) = t.outcome.error {
                return Err(WireError::Protocol(format!("ERROR {code}: {msg}")));
            }
            return Ok(value);
        }
    }
}

/// A command answered by a single OK; an ERR is an error.
pub async fn simple(c: &mut BackendConn, payload: &[u8]) -> Result<(), WireError> {
    let o = command(c, payload, Expect::Single).await?;
    match o.error {
        None => Ok(()),
        Some((code, msg)) => Err(WireError::Protocol(format!("ERROR {code}: {msg}"))),
    }
}

pub(crate) async fn ping(c: &mut BackendConn) -> Result<(), WireError> {
    tokio::time::timeout(Duration::from_secs(2), simple(c, &[0x0E]))
        .await
        .map_err(|_| WireError::Protocol("ping timed out".into()))?
}
