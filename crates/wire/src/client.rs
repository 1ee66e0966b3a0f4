//! A small text-protocol client: COM_QUERY and COM_INIT_DB on a logged-in
//! connection, result sets read row by row.
//!
//! Written by hand because `sqlfleet query` needs what the driver cannot
//! give: the login in one handshake with TLS taken only when the server
//! offers it (conn's `dial` does that with [`crate::handshake`]), and no
//! post-connect queries. Rows stay bytes as the server sent them (the text
//! protocol), which is what query prints.

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufStream};

use crate::command::{COM_INIT_DB, COM_QUERY, COM_QUIT};
use crate::handshake::{ServerHello, DEPRECATE_EOF};
use crate::packet::{self, WireError, MAX_CHUNK};
use crate::packet::{lenenc, lenenc_bytes};

/// Any byte stream a client talks over (TCP, Unix, TLS).
pub trait Duplex: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Duplex for T {}

/// The largest row (logical packet) accepted.
const MAX_PACKET: usize = 1 << 30;
const MORE_RESULTS: u16 = 0x0008;

/// What reading a reply gives, step by step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A result set starts: its columns.
    Columns(Vec<Column>),
    /// One row: each value as sent, `None` for SQL NULL.
    Row(Vec<Option<Vec<u8>>>),
    /// A statement finished (after its rows, or an OK without rows);
    /// `more` when another result follows.
    Done { affected: u64, more: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the first packet of a result.
    Head,
    /// Reading rows of a result set with this many columns.
    Rows(usize),
    /// Nothing in flight.
    Idle,
}

/// A logged-in connection.
pub struct Client {
    io: BufStream<Box<dyn Duplex>>,
    pub hello: ServerHello,
    /// The capabilities both sides agreed on.
    pub caps: u32,
    /// Whether the connection is encrypted.
    pub tls: bool,
    phase: Phase,
    seq: u8,
    /// COM_QUIT went out behind the last command ([`Client::query_last`]).
    quit_sent: bool,
}

impl Client {
    /// Wraps a stream on which the login has completed.
    pub fn new(stream: Box<dyn Duplex>, hello: ServerHello, caps: u32, tls: bool) -> Client {
        Client::buffered(BufStream::new(stream), hello, caps, tls)
    }

    /// [`Client::new`] on a stream already buffered (the login read from
    /// the same buffer).
    pub fn buffered(
        io: BufStream<Box<dyn Duplex>>,
        hello: ServerHello,
        caps: u32,
        tls: bool,
    ) -> Client {
        Client {
            io,
            hello,
            caps,
            tls,
            phase: Phase::Idle,
            seq: 0,
            quit_sent: false,
        }
    }

    /// The server's thread id for this connection (for KILL QUERY).
    pub fn id(&self) -> u32 {
        self.hello.connection_id
    }

    /// MariaDB rather than MySQL, from the greeting's version string.
    pub fn is_mariadb(&self) -> bool {
        self.hello.version.contains("MariaDB")
    }

    async fn command(&mut self, code: u8, arg: &[u8], then_quit: bool) -> Result<(), WireError> {
        if self.phase != Phase::Idle || self.quit_sent {
            return Err(WireError::Protocol(
                "a command was sent before the previous reply was read".into(),
            ));
        }
        let mut p = Vec::with_capacity(1 + arg.len());
        p.push(code);
        p.extend_from_slice(arg);
        let mut buf = Vec::with_capacity(4 + p.len().min(MAX_CHUNK));
        self.seq = packet::frame_into(&mut self.io, &mut buf, 0, &p).await?;
        if then_quit {
            packet::frame_into(&mut self.io, &mut buf, 0, &[COM_QUIT]).await?;
            self.quit_sent = true;
        }
        self.io.flush().await?;
        self.phase = Phase::Head;
        Ok(())
    }

    /// One logical packet (physical ones of 0xFFFFFF bytes continue).
    async fn read(&mut self) -> Result<Vec<u8>, WireError> {
        let mut p = packet::read(&mut self.io, MAX_CHUNK).await?;
        self.seq = p.seq.wrapping_add(1);
        let mut payload = std::mem::take(&mut p.payload);
        let mut last = payload.len();
        while last == MAX_CHUNK {
            let next = packet::read(&mut self.io, MAX_CHUNK).await?;
            self.seq = next.seq.wrapping_add(1);
            last = next.payload.len();
            if payload.len() + last > MAX_PACKET {
                return Err(WireError::TooBig {
                    len: payload.len() + last,
                    max: MAX_PACKET,
                });
            }
            payload.extend_from_slice(&next.payload);
        }
        Ok(payload)
    }

    /// Sends a query; read its reply with [`Client::step`] until `Done`
    /// without `more`.
    pub async fn query(&mut self, sql: &str) -> Result<(), WireError> {
        self.command(COM_QUERY, sql.as_bytes(), false).await
    }

    /// [`Client::query`] for the connection's last statement: COM_QUIT goes
    /// in the same write, so the server reads both with one wake-up, runs
    /// the statement, answers it and closes (one send and one server
    /// wake-up less per connection). The connection takes no command after
    /// it. Safe because this client never offers LOCAL_FILES: the server
    /// reads nothing from the client while it runs a statement.
    pub async fn query_last(&mut self, sql: &str) -> Result<(), WireError> {
        self.command(COM_QUERY, sql.as_bytes(), true).await
    }

    /// The next piece of the reply; `Ok(None)` when nothing is in flight.
    /// A server error ends the reply (as [`WireError::Server`]).
    pub async fn step(&mut self) -> Result<Option<Step>, WireError> {
        match self.phase {
            Phase::Idle => Ok(None),
            Phase::Head => {
                let p = self.read().await?;
                match p.first() {
                    Some(0xFF) => {
                        self.phase = Phase::Idle;
                        Err(crate::packet::server_error(&p))
                    }
                    Some(0x00) => Ok(Some(self.done(&p)?)),
                    Some(0xFB) => {
                        // LOAD DATA LOCAL INFILE: we send no file (an empty
                        // packet); the server answers with OK or ERR, which
                        // the next step reads.
                        packet::write(&mut self.io, self.seq, &[]).await?;
                        self.io.flush().await?;
                        Err(WireError::Protocol(
                            "the server asked for a local file (LOAD DATA LOCAL); query sends none"
                                .into(),
                        ))
                    }
                    _ => {
                        let mut i = 0;
                        let n = lenenc(&p, &mut i)? as usize;
                        let mut names = Vec::with_capacity(n.min(4096));
                        for _ in 0..n {
                            let c = self.read().await?;
                            names.push(column(&c)?);
                        }
                        if self.caps & DEPRECATE_EOF == 0 {
                            self.read().await?; // EOF after the definitions
                        }
                        self.phase = Phase::Rows(n);
                        Ok(Some(Step::Columns(names)))
                    }
                }
            }
            Phase::Rows(n) => {
                let p = self.read().await?;
                match p.first() {
                    Some(0xFF) => {
                        self.phase = Phase::Idle;
                        Err(crate::packet::server_error(&p))
                    }
                    // EOF (or OK with the EOF header under DEPRECATE_EOF):
                    // shorter than any row could be with this marker.
                    Some(0xFE) if p.len() < 0xFF_FFFF => Ok(Some(self.end_of_rows(&p)?)),
                    _ => Ok(Some(Step::Row(row(&p, n)?))),
                }
            }
        }
    }

    fn done(&mut self, ok: &[u8]) -> Result<Step, WireError> {
        let mut i = 1;
        let affected = lenenc(ok, &mut i)?;
        let _insert_id = lenenc(ok, &mut i)?;
        let status = ok
            .get(i..i + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .unwrap_or(0);
        Ok(self.after(affected, status))
    }

    fn end_of_rows(&mut self, p: &[u8]) -> Result<Step, WireError> {
        if self.caps & DEPRECATE_EOF != 0 {
            return self.done(p);
        }
        // EOF: 0xFE, warnings (2), status (2)
        let status = p
            .get(3..5)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .unwrap_or(0);
        Ok(self.after(0, status))
    }

    fn after(&mut self, affected: u64, status: u16) -> Step {
        let more = status & MORE_RESULTS != 0;
        self.phase = if more { Phase::Head } else { Phase::Idle };
        Step::Done { affected, more }
    }

    /// Reads the rest of any reply in flight (rows are dropped).
    pub async fn finish(&mut self) -> Result<(), WireError> {
        while self.step().await?.is_some() {}
        Ok(())
    }

    /// Runs a query and returns the first column of its first result set.
    pub async fn column(&mut self, sql: &str) -> Result<Vec<Option<String>>, WireError> {
        self.query(sql).await?;
        let mut out = Vec::new();
        let mut first = true;
        while let Some(s) = self.step().await? {
            match s {
                Step::Row(r) if first => out.push(
                    r.into_iter()
                        .next()
                        .flatten()
                        .map(|b| String::from_utf8_lossy(&b).into_owned()),
                ),
                Step::Done { .. } => first = false,
                _ => {}
            }
        }
        Ok(out)
    }

    /// Runs a statement, dropping any rows.
    pub async fn execute(&mut self, sql: &str) -> Result<(), WireError> {
        self.query(sql).await?;
        self.finish().await
    }

    /// COM_INIT_DB: the default database, as `USE` sets it.
    pub async fn use_db(&mut self, db: &str) -> Result<(), WireError> {
        self.command(COM_INIT_DB, db.as_bytes(), false).await?;
        self.finish().await
    }

    /// COM_QUIT, then closes. A plain socket is closed by dropping it (the
    /// kernel sends its FIN; a `shutdown` first would be one more system
    /// call per host); TLS says close_notify first.
    pub async fn quit(mut self) {
        if self.phase == Phase::Idle && !self.quit_sent {
            // (packet::write flushes.)
            let _ = packet::write(&mut self.io, 0, &[COM_QUIT]).await;
        }
        if self.tls {
            let _ = self.io.shutdown().await;
        }
    }
}

/// The column's name (alias) from a ColumnDefinition41 packet.
/// A result set's column: its name and what the server says its values are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    /// The protocol's type code (MYSQL_TYPE_*).
    pub type_code: u8,
    /// Column flags (UNSIGNED is 0x20, BINARY 0x80).
    pub flags: u16,
    /// The values' character set id (63: binary).
    pub charset: u16,
}

/// A column definition packet (Protocol::ColumnDefinition41).
pub fn column(p: &[u8]) -> Result<Column, WireError> {
    let mut i = 0;
    for _ in 0..4 {
        lenenc_bytes(p, &mut i)?; // catalog, schema, table, org_table
    }
    let name = String::from_utf8_lossy(lenenc_bytes(p, &mut i)?).into_owned();
    lenenc_bytes(p, &mut i)?; // org_name
    let fixed = lenenc(p, &mut i)? as usize;
    let f = i
        .checked_add(fixed.max(10))
        .and_then(|end| p.get(i..end))
        .ok_or_else(|| WireError::Protocol("short column definition".into()))?;
    Ok(Column {
        name,
        charset: u16::from_le_bytes([f[0], f[1]]),
        type_code: f[6],
        flags: u16::from_le_bytes([f[7], f[8]]),
    })
}

/// A text-protocol row of `n` values.
pub fn row(p: &[u8], n: usize) -> Result<Vec<Option<Vec<u8>>>, WireError> {
    let mut i = 0;
    let mut out = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        if p.get(i) == Some(&0xFB) {
            i += 1;
            out.push(None);
        } else {
            out.push(Some(lenenc_bytes(p, &mut i)?.to_vec()));
        }
    }
    if i != p.len() {
        return Err(WireError::Protocol(format!(
            "a row of {n} values has {} bytes left over",
            p.len() - i
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rows_with_nulls_and_lengths() {
        let p = [3, b'a', b'b', b'c', 0xFB, 0];
        assert_eq!(
            row(&p, 3).expect("row"),
            vec![Some(b"abc".to_vec()), None, Some(Vec::new())]
        );
        assert!(row(&p, 2).is_err(), "bytes left over");
        assert!(row(&p, 4).is_err(), "truncated");
        let e = crate::packet::server_error(&crate::packet::err_payload(1146, "42S02", "no table"));
        assert_eq!(e.to_string(), "ERROR 1146 (42S02): no table");
    }

    proptest! {
        #[test]
        fn any_reply_bytes_parse_without_panic(p in proptest::collection::vec(any::<u8>(), 0..64), n in 0usize..8) {
            let _ = row(&p, n);
            let _ = column(&p);
            let _ = crate::packet::server_error(&p);
        }
    }
}
