//! A client's command too big to hold in memory, passed to the backend as
//! it arrives. A COM_QUERY whose first packet is at least [`STREAM_OVER`]
//! bytes is read only up to its first [`HEAD`] bytes (what the relay's
//! statement reader, rules and router look at); the rest of that packet
//! and every continuation packet go from the client's socket to the
//! backend's in spans of one socket read. The relay's memory then stays
//! at its read buffer per client whatever the statement's size (a 64 MiB
//! INSERT held 64 MiB in the payload, 16 MiB in the read buffer and 64
//! MiB in the framing buffer before).
//!
//! What the relay cannot see of such a statement is its tail: the caller
//! treats it as a write (the primary) that no replay can repeat.

use sqlfleet_wire::command::COM_QUERY;
use sqlfleet_wire::packet::{WireError, MAX_CHUNK};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::{ForwardError, PacketIo};

/// A COM_QUERY at least this big (its first packet) is streamed.
pub const STREAM_OVER: usize = 1 << 20;
/// The bytes of a streamed command the relay reads before routing it: a
/// read buffer's worth (the buffer is 64 KiB with the packet header).
pub const HEAD: usize = (64 << 10) - 4;

/// Where a streamed command stands: the bytes of its first packet still
/// on the client's socket, whether continuation packets follow, and the
/// bytes and packets it has had so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Streamed {
    /// The first packet's payload length (its header's).
    pub first_len: usize,
    /// Bytes of the current packet's payload not yet passed on.
    pub left: usize,
    /// The current packet is a full 16 MiB one: another follows.
    pub continued: bool,
    /// Payload bytes of the whole command so far.
    pub total: usize,
    /// Packets of the command so far (the reply's sequence id follows).
    pub packets: usize,
    /// The largest command the relay takes (`max_packet`).
    pub max: usize,
}

/// A command as [`PacketIo::read_command`] read it.
pub enum Command {
    /// Read whole: its sequence id and payload.
    Whole(u8, Vec<u8>),
    /// Its first [`HEAD`] bytes (a COM_QUERY's), the rest still to come.
    Head(Vec<u8>, Streamed),
    /// A command must start with sequence id 0; this one's header had
    /// another (its payload is not read: the server answers at once).
    OutOfOrder(u8),
}

impl Streamed {
    /// The sequence id of the reply to this command once it is all read.
    pub fn reply_seq(&self) -> u8 {
        (self.packets % 256) as u8
    }

    /// Every byte of the command has been read.
    pub fn done(&self) -> bool {
        self.left == 0 && !self.continued
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    /// The client's next command: whole, or (a COM_QUERY of at least
    /// `stream_over` bytes) its head only. `max` bounds the command.
    /// Cancel-safe up to its return, as [`PacketIo::read_packet`].
    pub async fn read_command(
        &mut self,
        max: usize,
        stream_over: usize,
    ) -> Result<Command, WireError> {
        self.need(4).await?;
        let (len, seq) = self.header();
        if seq != 0 && !self.compressed {
            return Ok(Command::OutOfOrder(seq));
        }
        // (Compressed: the command is taken as the server takes it, as
        // the first packet of its exchange.)
        let compressed = self.compressed;
        let first = |seq: u8| if compressed { 0 } else { seq };
        if len < stream_over && len < MAX_CHUNK {
            // The common command: one packet, read here (no nested
            // future per command).
            if len > max {
                return Err(WireError::TooBig { len, max });
            }
            self.need(4 + len).await?;
            let p = self.buf[self.start + 4..self.start + 4 + len].to_vec();
            self.start += 4 + len;
            return Ok(Command::Whole(0, p));
        }
        if len < stream_over {
            let (seq, p) = self.read_packet(max).await?;
            return Ok(Command::Whole(first(seq), p));
        }
        self.need(5).await?;
        if self.buf[self.start + 4] != COM_QUERY {
            let (seq, p) = self.read_packet(max).await?;
            return Ok(Command::Whole(first(seq), p));
        }
        if len > max {
            return Err(WireError::TooBig { len, max });
        }
        let head = HEAD.min(len);
        self.need(4 + head).await?;
        let payload = self.buf[self.start + 4..self.start + 4 + head].to_vec();
        self.start += 4 + head;
        Ok(Command::Head(
            payload,
            Streamed {
                first_len: len,
                left: len - head,
                continued: len == MAX_CHUNK,
                total: len,
                packets: 1,
                max,
            },
        ))
    }

    /// Passes the rest of a streamed command to `to` as it arrives: the
    /// rest of its first packet, then each continuation packet with its
    /// header. `s` follows the progress (on an error, how far it got).
    pub async fn pass_rest<W: AsyncWrite + Unpin>(
        &mut self,
        s: &mut Streamed,
        to: &mut W,
    ) -> Result<(), ForwardError> {
        let backend = |e: std::io::Error| ForwardError::Backend {
            err: e.into(),
            forwarded: false,
        };
        loop {
            while s.left > 0 {
                if self.buffered() == 0 {
                    self.fill(1).await.map_err(ForwardError::Client)?;
                }
                let n = s.left.min(self.buffered());
                to.write_all(&self.buf[self.start..self.start + n])
                    .await
                    .map_err(backend)?;
                self.start += n;
                s.left -= n;
            }
            if !s.continued {
                return Ok(());
            }
            self.need(4).await.map_err(ForwardError::Client)?;
            let (len, _) = self.header();
            if s.total + len > s.max {
                return Err(ForwardError::Client(WireError::TooBig {
                    len: s.total + len,
                    max: s.max,
                }));
            }
            to.write_all(&self.buf[self.start..self.start + 4])
                .await
                .map_err(backend)?;
            self.start += 4;
            s.left = len;
            s.continued = len == MAX_CHUNK;
            s.total += len;
            s.packets += 1;
        }
    }

    /// Reads the rest of a streamed command and throws it away (a command
    /// refused before it went anywhere): the client's next command then
    /// starts where it should. Discarding the bytes keeps the memory
    /// bound.
    pub async fn skip_rest(&mut self, s: &mut Streamed) -> Result<(), ForwardError> {
        self.pass_rest(s, &mut tokio::io::sink()).await
    }

    /// Reads the rest of a streamed command into `payload` (a statement
    /// the relay must see whole after all).
    pub async fn read_rest(
        &mut self,
        s: &mut Streamed,
        payload: &mut Vec<u8>,
    ) -> Result<(), ForwardError> {
        payload.reserve(s.total - payload.len());
        self.pass_rest(s, payload).await?;
        Ok(())
    }

    /// Starts a streamed command on a backend connection: the first
    /// packet's header (for `head` plus the `left` bytes still to come)
    /// and its head.
    pub async fn write_head(&mut self, head: &[u8], left: usize) -> Result<(), WireError> {
        if let Some(r) = &self.reset {
            r.new_command();
        }
        let len = head.len() + left;
        if len > MAX_CHUNK {
            return Err(WireError::Protocol(
                "a streamed command's first packet grew past 16 MiB".into(),
            ));
        }
        let mut framed = Vec::with_capacity(4 + head.len());
        framed.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
        framed.push(0);
        framed.extend_from_slice(head);
        self.s.write_all(&framed).await?;
        Ok(())
    }
}

/// Sends a streamed command: its head to `backend`, then its rest from
/// `client` as it arrives. `Err(Some(e))`: the server stopped taking it
/// (1153 past its max_allowed_packet, or gone) and the client's rest was
/// read and dropped, so the server's answer can follow it; `Err(None)`:
/// the client went away or sent more than `max_packet` mid-statement, and
/// nothing more can follow on either side.
pub async fn stream_command<C, B>(
    client: &mut PacketIo<C>,
    backend: &mut PacketIo<B>,
    head: &[u8],
    st: &mut Streamed,
) -> Result<(), Option<WireError>>
where
    C: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let sent = match backend.write_head(head, st.left).await {
        Ok(()) => client.pass_rest(st, &mut backend.s).await,
        Err(e) => Err(ForwardError::Backend {
            err: e,
            forwarded: false,
        }),
    };
    match sent {
        Ok(()) => Ok(()),
        Err(ForwardError::Backend { err, .. }) => match client.skip_rest(st).await {
            Ok(()) => Err(Some(err)),
            Err(_) => Err(None),
        },
        Err(ForwardError::Client(_)) => Err(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// `payload` framed as the client sends it (16 MiB packets, seq 0..).
    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut seq = 0u8;
        let mut rest = payload;
        loop {
            let n = rest.len().min(MAX_CHUNK);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
            out.push(seq);
            out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            seq = seq.wrapping_add(1);
            if n < MAX_CHUNK {
                return out;
            }
        }
    }

    /// A command's inner sequence id: on a plain connection one that is
    /// not 0 is out of order (the server's 1156); under compression the
    /// frames carry the sequence and the command is read whatever its
    /// inner id (as the server reads it), as the first of its exchange.
    #[tokio::test]
    async fn a_compressed_command_is_read_whatever_its_inner_sequence_id() {
        for (compressed, inner_seq) in [
            (false, 0u8),
            (false, 93),
            (true, 0),
            (true, 93),
            (true, 255),
        ] {
            let mut packet = vec![1, 0, 0, inner_seq, 0x0e];
            if compressed {
                let mut frame = Vec::new();
                sqlfleet_wire::compress::encode(&mut frame, 0, &packet);
                packet = frame;
            }
            let (mut client, relay_side) = tokio::io::duplex(1 << 16);
            client.write_all(&packet).await.expect("write");
            let mut io = PacketIo::small(crate::protocol::io::AnyStream(Box::new(relay_side)));
            if compressed {
                io.compress(false);
            }
            let got = io.read_command(1 << 20, STREAM_OVER).await.expect("read");
            match got {
                Command::Whole(seq, p) => {
                    assert!(compressed || inner_seq == 0, "{inner_seq}: read");
                    assert_eq!((seq, p), (0, vec![0x0e]), "{compressed} {inner_seq}");
                }
                Command::OutOfOrder(seq) => {
                    assert!(!compressed && seq == inner_seq, "{compressed} {inner_seq}");
                }
                Command::Head(..) => panic!("a ping is not streamed"),
            }
        }
    }

    fn query(n: usize) -> Vec<u8> {
        let mut p = vec![COM_QUERY];
        p.extend((0..n.saturating_sub(1)).map(|i| b'a' + (i % 26) as u8));
        p
    }

    /// Each size read as the relay reads it, the rest passed (or skipped):
    /// what reaches the server is byte for byte the client's framing, the
    /// reply's sequence id follows the client's last packet, and the next
    /// command is read from where it starts.
    #[tokio::test]
    async fn a_streamed_command_reaches_the_server_byte_for_byte() {
        // (payload bytes, streamed)
        let rows = [
            (10, false),
            (STREAM_OVER - 1, false),
            (STREAM_OVER, true),
            (3 << 20, true),
            (MAX_CHUNK - 1, true),
            (MAX_CHUNK, true),
            (MAX_CHUNK + 5, true),
            (2 * MAX_CHUNK, true),
        ];
        for (n, want_streamed) in rows {
            for skip in [false, true] {
                let cmd = query(n);
                let next = query(7);
                let mut wire = framed(&cmd);
                wire.extend(framed(&next));
                let (mut client, relay_side) = tokio::io::duplex(1 << 16);
                let writer = tokio::spawn(async move {
                    client.write_all(&wire).await.expect("write");
                    client
                });
                let mut io = PacketIo::small(relay_side);
                let got = io.read_command(1 << 30, STREAM_OVER).await.expect("read");
                let mut server = Vec::new();
                match got {
                    Command::Whole(seq, p) => {
                        assert!(!want_streamed, "{n} read whole");
                        assert_eq!(seq, 0);
                        assert_eq!(p, cmd, "{n}");
                    }
                    Command::OutOfOrder(_) => panic!("{n}: in order"),
                    Command::Head(head, mut st) => {
                        assert!(want_streamed, "{n} streamed");
                        assert_eq!(head.len(), HEAD, "{n}");
                        server.extend_from_slice(&(st.first_len as u32).to_le_bytes()[..3]);
                        server.push(0);
                        server.extend_from_slice(&head);
                        if skip {
                            io.skip_rest(&mut st).await.expect("skip");
                        } else {
                            io.pass_rest(&mut st, &mut server).await.expect("pass");
                            assert_eq!(server, framed(&cmd), "{n}: what the server got");
                        }
                        assert!(st.done());
                        assert_eq!(st.total, n, "{n}");
                        assert_eq!(usize::from(st.reply_seq()), n / MAX_CHUNK + 1, "{n}");
                    }
                }
                match io.read_command(1 << 30, STREAM_OVER).await.expect("next") {
                    Command::Whole(0, p) => assert_eq!(p, next, "{n}: the next command"),
                    _ => panic!("{n}: the next command is read from its start"),
                }
                drop(writer.await);
            }
        }
    }

    /// A streamed command past `max`: refused at its first packet, or
    /// when a continuation packet takes it past.
    #[tokio::test]
    async fn past_max_is_refused_at_the_packet_that_crosses_it() {
        let cmd = query(MAX_CHUNK + 10);
        let wire = framed(&cmd);
        let (mut client, relay_side) = tokio::io::duplex(1 << 16);
        let w = wire.clone();
        let writer = tokio::spawn(async move {
            let _ = client.write_all(&w).await;
        });
        let mut io = PacketIo::small(relay_side);
        assert!(matches!(
            io.read_command(MAX_CHUNK - 1, STREAM_OVER).await,
            Err(WireError::TooBig { .. })
        ));
        drop(io);
        drop(writer.await);
        let (mut client, relay_side) = tokio::io::duplex(1 << 16);
        let writer = tokio::spawn(async move {
            let _ = client.write_all(&wire).await;
        });
        let mut io = PacketIo::small(relay_side);
        let Ok(Command::Head(_, mut st)) = io.read_command(MAX_CHUNK + 5, STREAM_OVER).await else {
            panic!("streamed");
        };
        assert!(matches!(
            io.skip_rest(&mut st).await,
            Err(ForwardError::Client(WireError::TooBig { .. }))
        ));
        drop(io);
        drop(writer.await);
    }
}
