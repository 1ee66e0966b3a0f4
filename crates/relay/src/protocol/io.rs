//! A stream with a read buffer, read packet by packet or forwarded in
//! large spans, and the stream types a relay talks over (TCP, Unix
//! sockets, TLS). A command too big to hold is streamed (`stream`).

use std::pin::Pin;
use std::task::{Context, Poll};

use sqlfleet_wire::packet::{self, WireError, MAX_CHUNK};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::protocol::reply::{Event, ReplyError, Tracker, PREFIX};

mod stream;
pub use stream::{stream_command, Command, Streamed, HEAD, STREAM_OVER};

const BUF: usize = 64 * 1024;
/// The framing buffer is kept up to this size; a larger one (a big
/// command) is let go after its write.
const OUT_KEEP: usize = 64 * 1024;

/// Any byte stream the relay serves clients over.
pub trait Duplex: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static {
    /// What it is (a plain socket can move to another event loop).
    fn as_any(&self) -> &dyn std::any::Any;
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static> Duplex for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

/// A boxed client stream (TCP, Unix or TLS).
pub struct AnyStream(pub Box<dyn Duplex>);

impl AnyStream {
    /// A stand-in while the real stream is on its way to another event
    /// loop: reads end at once, writes go nowhere.
    pub fn gone() -> AnyStream {
        AnyStream(Box::new(tokio::io::join(
            tokio::io::empty(),
            tokio::io::sink(),
        )))
    }
}

impl AsyncRead for AnyStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for AnyStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

pub struct PacketIo<S> {
    pub s: S,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Where [`PacketIo::write_packet`] frames a packet.
    out: Vec<u8>,
    /// On a compressed connection whose commands the relay sends (a
    /// backend's): a packet of sequence 0 starts a new command, whose
    /// frames restart at 0 too.
    reset: Option<sqlfleet_wire::compress::SeqReset>,
    /// The stream speaks the compressed protocol: the frames carry the
    /// sequence, and a command's own packet header's is not checked (as
    /// the server: a command is read whatever its inner sequence id, and
    /// answered from 1).
    compressed: bool,
}

/// Why forwarding a reply stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The backend went away or sent nonsense; `forwarded` says whether
    /// part of the reply already reached the client.
    #[error("backend: {err}")]
    Backend { err: WireError, forwarded: bool },
    #[error("client: {0}")]
    Client(WireError),
}

impl From<ReplyError> for WireError {
    fn from(e: ReplyError) -> WireError {
        WireError::Protocol(e.to_string())
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> PacketIo<S> {
    /// A backend-side stream: replies are read in large spans.
    pub fn new(s: S) -> PacketIo<S> {
        Self::with_capacity(s, BUF)
    }

    /// A client-side stream: commands are small; the buffer grows for
    /// large ones and shrinks back. It starts at 1 KiB: a login response
    /// and a typical statement fit, and a connect-per-query client does not
    /// pay for zeroing more (4 KiB was ~3,000 instructions a connection).
    pub fn small(s: S) -> PacketIo<S> {
        Self::with_capacity(s, 1024)
    }

    fn with_capacity(s: S, n: usize) -> PacketIo<S> {
        PacketIo {
            s,
            buf: vec![0; n],
            start: 0,
            end: 0,
            out: Vec::new(),
            reset: None,
            compressed: false,
        }
    }

    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Reads more bytes, making room for at least `want` buffered bytes.
    /// Waits until at least one unread byte is buffered (reading once if
    /// none is). Cancel-safe: bytes read stay in the buffer.
    pub async fn readable(&mut self) -> Result<(), WireError> {
        if self.buffered() > 0 {
            return Ok(());
        }
        self.fill(1).await
    }

    /// Reads whatever the peer sends next into the buffer (one read).
    pub async fn read_more(&mut self) -> Result<(), WireError> {
        self.fill(self.buffered() + 1).await
    }

    async fn fill(&mut self, want: usize) -> Result<(), WireError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > 4 * BUF && want <= BUF {
                self.buf.truncate(BUF);
                self.buf.shrink_to_fit();
            }
        }
        if self.buf.len() - self.start < want || self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() < want {
                self.buf.resize(want.next_power_of_two(), 0);
            }
        }
        let n = self.s.read(&mut self.buf[self.end..]).await?;
        if n == 0 {
            return Err(WireError::Closed);
        }
        self.end += n;
        Ok(())
    }

    async fn need(&mut self, n: usize) -> Result<(), WireError> {
        while self.buffered() < n {
            self.fill(n).await?;
        }
        Ok(())
    }

    fn header(&self) -> (usize, u8) {
        let h = &self.buf[self.start..self.start + 4];
        (u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize, h[3])
    }

    /// One logical packet (continuations joined): its first sequence id
    /// and payload. `max` bounds the payload.
    pub async fn read_packet(&mut self, max: usize) -> Result<(u8, Vec<u8>), WireError> {
        let mut payload = Vec::new();
        let mut first_seq = None;
        loop {
            self.need(4).await?;
            let (len, seq) = self.header();
            if payload.len() + len > max {
                return Err(WireError::TooBig {
                    len: payload.len() + len,
                    max,
                });
            }
            first_seq.get_or_insert(seq);
            self.need(4 + len).await?;
            payload.extend_from_slice(&self.buf[self.start + 4..self.start + 4 + len]);
            self.start += 4 + len;
            if len < MAX_CHUNK {
                return Ok((first_seq.unwrap_or(0), payload));
            }
        }
    }

    /// Writes one packet (split as the protocol wants past 16 MiB), framed
    /// in a buffer kept for the connection: no allocation per command.
    pub async fn write_packet(&mut self, seq: u8, payload: &[u8]) -> Result<u8, WireError> {
        if seq == 0 {
            if let Some(r) = &self.reset {
                r.new_command();
            }
        }
        let r = packet::write_with(&mut self.s, &mut self.out, seq, payload).await;
        if self.out.capacity() > OUT_KEEP {
            self.out = Vec::new();
        }
        r
    }

    /// Passes one physical packet through to `to` unchanged; returns its
    /// payload length.
    pub async fn pass_packet<W: AsyncWrite + Unpin>(
        &mut self,
        to: &mut W,
    ) -> Result<usize, ForwardError> {
        self.need(4).await.map_err(ForwardError::Client)?;
        let (len, _) = self.header();
        let mut left = 4 + len;
        while left > 0 {
            if self.buffered() == 0 {
                self.fill(1).await.map_err(ForwardError::Client)?;
            }
            let n = left.min(self.buffered());
            to.write_all(&self.buf[self.start..self.start + n])
                .await
                .map_err(|e| ForwardError::Backend {
                    err: e.into(),
                    forwarded: true,
                })?;
            self.start += n;
            left -= n;
        }
        Ok(len)
    }

    /// Forwards a server reply to the client as it arrives, in spans as
    /// large as each read, following it with `tracker` to its last packet.
    /// A LOCAL INFILE request makes the client's file data flow the other
    /// way until its empty packet. Returns the bytes forwarded.
    pub async fn forward_reply<C: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        client: &mut PacketIo<C>,
        tracker: &mut Tracker,
    ) -> Result<u64, ForwardError> {
        let mut total = 0u64;
        let backend_err = |err: WireError, total: u64| ForwardError::Backend {
            err,
            forwarded: total > 0,
        };
        let mut sc = Scan::default();
        loop {
            sc.pos = self.start;
            let stop = self
                .scan(&mut sc, tracker)
                .map_err(|e| backend_err(e, total))?;
            let need = match stop {
                Stop::Need(need) => need,
                Stop::Held(len) => {
                    // A refusal held back (the reply's only packet, read
                    // whole as every ERR is): consumed, not forwarded.
                    self.start = sc.pos + 4 + len;
                    return Ok(total);
                }
                Stop::Replace { len, seq, new, ev } => {
                    // Forward what came before, then the rewritten packet.
                    let mut out = self.buf[self.start..sc.pos].to_vec();
                    let n = new.len() as u32;
                    out.extend_from_slice(&[n as u8, (n >> 8) as u8, (n >> 16) as u8, seq]);
                    out.extend_from_slice(&new);
                    total += pass_on(client, tracker, &out).await?;
                    sc.pos += 4 + len;
                    self.start = sc.pos;
                    match ev {
                        Event::More => continue,
                        Event::End => sc.done = true,
                        Event::LocalInfile => sc.infile = true,
                    }
                    4 + PREFIX
                }
            };
            if (sc.done || sc.infile) && sc.remaining > 0 {
                let n = sc.remaining.min(self.end - sc.pos);
                if let Some(d) = tracker.digest.as_mut() {
                    d.bytes(&self.buf[sc.pos..sc.pos + n]);
                }
                sc.remaining -= n;
                sc.pos += n;
            }
            if sc.pos > self.start {
                total += pass_on(client, tracker, &self.buf[self.start..sc.pos]).await?;
                self.start = sc.pos;
            }
            if sc.done && sc.remaining == 0 {
                // A compressed stream may still hold the last frame.
                client
                    .s
                    .flush()
                    .await
                    .map_err(|e| ForwardError::Client(e.into()))?;
                return Ok(total);
            }
            if sc.infile && sc.remaining == 0 {
                // The client's file, packet by packet, ends with an empty one.
                loop {
                    let len = client.pass_packet(&mut self.s).await?;
                    if len == 0 {
                        break;
                    }
                }
                self.s.flush().await.map_err(|e| ForwardError::Backend {
                    err: e.into(),
                    forwarded: true,
                })?;
                sc.infile = false;
                continue;
            }
            let want = if sc.remaining == 0 { need } else { 1 };
            self.fill(want).await.map_err(|e| backend_err(e, total))?;
        }
    }

    /// Reads the reply's buffered bytes from `sc.pos` with `tracker`, as far
    /// as they go: rows it need not look into are skipped whole, every
    /// other packet is shown to the tracker (its first PREFIX bytes, or
    /// whole where it asks). Stops where more bytes are needed (or the
    /// reply ended, or a LOCAL INFILE request came), at a refusal held
    /// back, or at a packet the tracker rewrote (not passed, `sc.pos` at
    /// its header).
    fn scan(&mut self, sc: &mut Scan, tracker: &mut Tracker) -> Result<Stop, WireError> {
        let mut need = 4 + PREFIX;
        while !sc.done && !sc.infile {
            let pos = sc.pos;
            if sc.remaining > 0 {
                let n = sc.remaining.min(self.end - pos);
                if let Some(d) = tracker.digest.as_mut() {
                    d.bytes(&self.buf[pos..pos + n]);
                }
                sc.remaining -= n;
                sc.pos += n;
                if sc.remaining > 0 {
                    break;
                }
                continue;
            }
            if self.end - pos < 4 {
                need = 4 + PREFIX;
                break;
            }
            let h = &self.buf[pos..pos + 4];
            let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
            let seq = h[3];
            if len > 0 && self.end - pos < 5 {
                need = 4 + len.min(PREFIX);
                break;
            }
            if len > 0 && tracker.plain_row(len, self.buf[pos + 4]) {
                if let Some(d) = tracker.digest.as_mut() {
                    d.packet(true);
                }
                sc.pos += 4;
                sc.remaining = len;
                continue;
            }
            // An OK that may carry session-tracker data is read whole.
            let whole = len > 0 && tracker.needs_whole(len, self.buf[pos + 4]);
            let look = if whole { len } else { len.min(PREFIX) };
            if self.end - pos < 4 + look {
                need = 4 + look;
                break;
            }
            let ev = tracker.packet(len, &mut self.buf[pos + 4..pos + 4 + look])?;
            if let Some(d) = tracker.digest.as_mut() {
                d.packet(!tracker.last_status);
            }
            if tracker.held {
                return Ok(Stop::Held(len));
            }
            if let Some(new) = tracker.replacement.take() {
                return Ok(Stop::Replace { len, seq, new, ev });
            }
            sc.pos += 4;
            sc.remaining = len;
            match ev {
                Event::More => {}
                Event::End => sc.done = true,
                Event::LocalInfile => sc.infile = true,
            }
        }
        Ok(Stop::Need(need))
    }
}

/// How far `forward_reply` has read a reply.
#[derive(Default)]
struct Scan {
    /// The next byte to read in the buffer.
    pos: usize,
    /// Payload bytes of the current packet not yet scanned past.
    remaining: usize,
    /// The reply's last packet was seen.
    done: bool,
    /// A LOCAL INFILE request was seen: the client's file comes next.
    infile: bool,
}

/// Where `scan` stopped.
enum Stop {
    /// At the end of what is buffered: this many bytes from the packet's
    /// header let the next step go on.
    Need(usize),
    /// At a refusal held back, of this payload length.
    Held(usize),
    /// At a packet of payload `len` the tracker rewrote to `new`.
    Replace {
        len: usize,
        seq: u8,
        new: Vec<u8>,
        ev: Event,
    },
}

/// Passes reply bytes on to the client, kept in the tracker's capture while
/// it stays under its bound; returns how many were passed.
async fn pass_on<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut PacketIo<C>,
    tracker: &mut Tracker,
    bytes: &[u8],
) -> Result<u64, ForwardError> {
    client
        .s
        .write_all(bytes)
        .await
        .map_err(|e| ForwardError::Client(e.into()))?;
    if let Some(cap) = tracker.capture.as_mut() {
        cap.extend_from_slice(bytes);
    }
    if tracker
        .capture
        .as_ref()
        .is_some_and(|c| c.len() > tracker.capture_max)
    {
        tracker.capture = None;
    }
    Ok(bytes.len() as u64)
}

impl PacketIo<AnyStream> {
    /// The login has ended with CLIENT_COMPRESS: from here on the stream
    /// speaks the compressed protocol (bytes already buffered, sent right
    /// behind the login, are read through it first). `sends_commands`: the
    /// relay is the client on this stream (a backend connection).
    pub fn compress(&mut self, sends_commands: bool) {
        let ahead = self.buf[self.start..self.end].to_vec();
        self.start = 0;
        self.end = 0;
        let inner = std::mem::replace(&mut self.s, AnyStream::gone());
        let (c, reset) = if ahead.is_empty() {
            let (c, r) = sqlfleet_wire::compress::Compressed::new(inner);
            (AnyStream(Box::new(c)), r)
        } else {
            let (c, r) = sqlfleet_wire::compress::Compressed::new(Prefixed::new(ahead, inner));
            (AnyStream(Box::new(c)), r)
        };
        self.s = c;
        self.reset = sends_commands.then_some(reset);
        self.compressed = true;
    }
}

/// Reads a connection's first packet in as few reads as the peer allows
/// (usually one: header and payload together), returning it and whatever
/// came after it in the same reads (a TLS ClientHello right behind an
/// SSLRequest, or a client that did not wait for the server's answer).
pub async fn read_first<S: AsyncRead + Unpin>(
    s: &mut S,
    max: usize,
) -> Result<(packet::Packet, Vec<u8>), WireError> {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    loop {
        if buf.len() >= 4 {
            let len = u32::from_le_bytes([buf[0], buf[1], buf[2], 0]) as usize;
            if len > max {
                return Err(WireError::TooBig { len, max });
            }
            if buf.len() >= 4 + len {
                let rest = buf.split_off(4 + len);
                let seq = buf[3];
                buf.drain(..4);
                return Ok((packet::Packet { seq, payload: buf }, rest));
            }
        }
        if buf.capacity() - buf.len() < 512 {
            buf.reserve(4096);
        }
        if s.read_buf(&mut buf).await? == 0 {
            return Err(WireError::Closed);
        }
    }
}

/// A stream whose first bytes were already read: they are given back
/// first, then the stream's own.
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        if me.at < me.prefix.len() {
            let n = (me.prefix.len() - me.at).min(buf.remaining());
            buf.put_slice(&me.prefix[me.at..me.at + n]);
            me.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut me.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        v.push(seq);
        v.extend_from_slice(payload);
        v
    }

    #[tokio::test]
    async fn the_first_packet_and_what_came_behind_it() {
        let mut bytes = framed(1, b"hello");
        bytes.extend_from_slice(b"TLS client hello");
        // All at once, and byte by byte.
        for chunk in [bytes.len(), 1] {
            let (mut a, mut b) = tokio::io::duplex(64);
            let data = bytes.clone();
            let writer = tokio::spawn(async move {
                for c in data.chunks(chunk) {
                    a.write_all(c).await.expect("write");
                }
                a
            });
            let (p, ahead) = read_first(&mut b, 100).await.expect("first");
            assert_eq!((p.seq, p.payload.as_slice()), (1, &b"hello"[..]));
            // Whatever was not yet read stays in the stream: together, the
            // rest of the bytes in order.
            let _a = writer.await.expect("writer");
            let mut s = Prefixed::new(ahead, b);
            let mut rest = vec![0; 16];
            s.read_exact(&mut rest).await.expect("rest");
            assert_eq!(rest, b"TLS client hello");
        }
    }

    #[tokio::test]
    async fn a_first_packet_too_big_or_cut_is_refused() {
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&framed(1, &[0; 50])).await.expect("write");
        assert!(matches!(
            read_first(&mut b, 10).await,
            Err(WireError::TooBig { .. })
        ));
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&framed(1, b"hello")[..6]).await.expect("write");
        drop(a);
        assert!(matches!(
            read_first(&mut b, 10).await,
            Err(WireError::Closed)
        ));
    }
}
