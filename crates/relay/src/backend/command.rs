//! Commands the relay itself sends on a backend connection (state
//! replay, resets, health pings, re-prepares, GTID reads): the whole reply
//! is read and followed, never forwarded to a client.

use std::time::Duration;

use sqlfleet_wire::packet::WireError;

use crate::protocol::io::{AnyStream, PacketIo};
use crate::protocol::reply::{Expect, Tracker};

/// A logged-in backend connection the relay can send its own commands on.
pub trait Link {
    fn io(&mut self) -> &mut PacketIo<AnyStream>;
    /// CLIENT_DEPRECATE_EOF is in effect (results end with an OK, not EOF).
    fn deprecate_eof(&self) -> bool;
    /// The relay is about to send a statement of its own: what the
    /// connection's session holds for a client may change with it (a
    /// SELECT's row count becomes FOUND_ROWS()).
    fn own_statement(&mut self) {}
    /// CLIENT_SESSION_TRACK is in effect: OKs carry the session's changes
    /// (read into the outcome's `changes`).
    fn session_track(&self) -> bool {
        false
    }
    /// A reply of the relay's own command carried the session tracker's
    /// report (SESSION_STATE_CHANGED): whatever it had marked went out
    /// with it (`BackendConn::restores`).
    fn state_reported(&mut self) {}
}

/// The end of a reply to the relay's own command.
fn ended(c: &mut impl Link, o: &crate::protocol::reply::Outcome) {
    if o.status
        .is_some_and(|s| s & crate::protocol::track::STATUS_SESSION_STATE_CHANGED != 0)
    {
        c.state_reported();
    }
}

/// How much of a packet the tracker is shown: the prefix, or all of it
/// where it reads the whole (an ERR, whose message the relay may repeat;
/// an OK with session-state data).
fn look(t: &Tracker, p: &[u8], len: usize) -> usize {
    match p.first() {
        Some(&first) if t.needs_whole(len, first) => p.len(),
        _ => p.len().min(crate::protocol::reply::PREFIX),
    }
}

/// Sends one command and reads its whole reply without forwarding it;
/// returns the reply's outcome (an ERR is an `Ok` with `error` set).
pub async fn command(
    c: &mut impl Link,
    payload: &[u8],
    expect: Expect,
) -> Result<crate::protocol::reply::Outcome, WireError> {
    c.own_statement();
    c.io().write_packet(0, payload).await?;
    let mut t = Tracker::new(expect, c.deprecate_eof()).tracking(
        c.session_track(),
        crate::protocol::reply::ClientTracking::Raw,
    );
    loop {
        let (_, mut p) = c.io().read_packet(1 << 30).await?;
        let len = p.len().min(sqlfleet_wire::packet::MAX_CHUNK - 1);
        let look = look(&t, &p, len);
        if t.packet(len, &mut p[..look])? == crate::protocol::reply::Event::End {
            ended(c, &t.outcome);
            return Ok(t.outcome);
        }
    }
}

/// Sends one of a client's statements again (transaction replay) and
/// reads its whole reply without forwarding it: its outcome and the
/// digest of its answer, taken as the forwarding loop takes a client's
/// (`protocol/digest.rs`).
pub async fn command_digest(
    c: &mut impl Link,
    payload: &[u8],
    leave: crate::protocol::digest::Leave,
) -> Result<(crate::protocol::reply::Outcome, u128), WireError> {
    c.own_statement();
    c.io().write_packet(0, payload).await?;
    let mut t = Tracker::new(Expect::Results { cursor: false }, c.deprecate_eof());
    let mut d = crate::protocol::digest::ReplyDigest::default();
    loop {
        let (_, p) = c.io().read_packet(1 << 30).await?;
        let len = p.len().min(sqlfleet_wire::packet::MAX_CHUNK - 1);
        let look = look(&t, &p, len);
        let mut head = p[..look].to_vec();
        let ev = t.packet(len, &mut head)?;
        d.packet(!t.last_status);
        d.bytes(&p);
        match ev {
            crate::protocol::reply::Event::End => {
                ended(c, &t.outcome);
                let digest = d.finish(t.outcome.answer(), leave);
                return Ok((t.outcome, digest));
            }
            crate::protocol::reply::Event::LocalInfile => {
                return Err(WireError::Protocol(
                    "a replayed statement asked for a local file".into(),
                ))
            }
            crate::protocol::reply::Event::More => {}
        }
    }
}

/// The first column of the first row of a one-column query (NULL: None).
pub async fn query_value(c: &mut impl Link, sql: &str) -> Result<Option<String>, WireError> {
    c.own_statement();
    let mut p = vec![0x03];
    p.extend_from_slice(sql.as_bytes());
    c.io().write_packet(0, &p).await?;
    let mut t = Tracker::new(Expect::Results { cursor: false }, c.deprecate_eof());
    let mut value = None;
    loop {
        let (_, mut p) = c.io().read_packet(1 << 24).await?;
        let rows_before = t.outcome.rows;
        let len = p.len().min(sqlfleet_wire::packet::MAX_CHUNK - 1);
        let look = look(&t, &p, len);
        let mut head = p[..look].to_vec();
        let ev = t.packet(len, &mut head)?;
        if t.outcome.rows == 1 && rows_before == 0 {
            // A text row of one value (NULL: none).
            value = sqlfleet_wire::client::row(&p, 1)?
                .pop()
                .flatten()
                .map(|v| String::from_utf8_lossy(&v).into_owned());
            p.clear();
        }
        if ev == crate::protocol::reply::Event::End {
            ended(c, &t.outcome);
            if let Some((code, msg)) = t.outcome.error {
                return Err(WireError::Protocol(format!("ERROR {code}: {msg}")));
            }
            return Ok(value);
        }
    }
}

/// A command answered by a single OK; an ERR is an error.
pub async fn simple(c: &mut impl Link, payload: &[u8]) -> Result<(), WireError> {
    let o = command(c, payload, Expect::Single).await?;
    match o.error {
        None => Ok(()),
        Some((code, msg)) => Err(WireError::Protocol(format!("ERROR {code}: {msg}"))),
    }
}

pub(crate) async fn ping(c: &mut impl Link) -> Result<(), WireError> {
    tokio::time::timeout(
        Duration::from_secs(2),
        simple(c, &[sqlfleet_wire::command::COM_PING]),
    )
    .await
    .map_err(|_| WireError::Protocol("ping timed out".into()))?
}

/// The first row of a query as (column name, value) pairs; `None` when it
/// returns no row. For the relay's own small queries (health checks).
pub async fn query_row(
    c: &mut impl Link,
    sql: &str,
) -> Result<Option<Vec<(String, Option<String>)>>, WireError> {
    Ok(query_rows(c, sql, 1).await?.into_iter().next())
}

/// Up to `limit` rows of a query's result (the rest are read and
/// dropped), each as (column name, value) pairs; none for an OK.
pub async fn query_rows(
    c: &mut impl Link,
    sql: &str,
    limit: usize,
) -> Result<Vec<Vec<(String, Option<String>)>>, WireError> {
    c.own_statement();
    let mut p = vec![0x03];
    p.extend_from_slice(sql.as_bytes());
    c.io().write_packet(0, &p).await?;
    let max = 1 << 24;
    let (_, first) = c.io().read_packet(max).await?;
    match first.first() {
        Some(0xFF) => return Err(sqlfleet_wire::packet::server_error(&first)),
        Some(0x00) | None => return Ok(Vec::new()),
        _ => {}
    }
    let mut i = 0;
    let n = usize::try_from(sqlfleet_wire::packet::lenenc(&first, &mut i)?)
        .map_err(|_| WireError::Protocol("column count".into()))?;
    let mut names = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        let (_, def) = c.io().read_packet(max).await?;
        names.push(sqlfleet_wire::client::column(&def)?.name);
    }
    if !c.deprecate_eof() {
        c.io().read_packet(max).await?;
    }
    let mut rows = Vec::new();
    loop {
        let (_, p) = c.io().read_packet(max).await?;
        // An error in the middle of the rows is the query's error: the
        // rows before it are not its answer.
        if p.first() == Some(&0xFF) {
            return Err(sqlfleet_wire::packet::server_error(&p));
        }
        let end =
            p.first() == Some(&0xFE) && p.len() < 0xFF_FFFF && (p.len() < 9 || c.deprecate_eof());
        if end {
            return Ok(rows);
        }
        if rows.len() < limit {
            let values = sqlfleet_wire::client::row(&p, n)?;
            rows.push(
                names
                    .iter()
                    .cloned()
                    .zip(
                        values
                            .into_iter()
                            .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned())),
                    )
                    .collect(),
            );
        }
    }
}
