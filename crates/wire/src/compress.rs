//! The compressed protocol (CLIENT_COMPRESS, zlib): after the login's OK
//! every byte travels in frames of a 7-byte header — compressed length (3),
//! sequence id (1), uncompressed length (3; 0 when the payload is sent as
//! it is) — carrying the ordinary packet stream, which may run across
//! frames. [`Compressed`] wraps a stream so that the code above it reads
//! and writes ordinary packets, unaware of the frames.
//!
//! Sequence ids: a frame answering the peer continues from the last frame
//! read (+1 per frame written); a new command from the client side starts
//! again at 0, which the code above says with [`SeqReset`] (the relay's
//! backend connections set it whenever they write a packet of sequence 0).
//!
//! Written by hand: it sits on the forwarding path, must be exact about
//! frames and ids, and must refuse any malformed frame without panicking
//! (every length is checked, a payload that does not inflate to its stated
//! size is an error).

use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Payloads shorter than this go uncompressed (as the server's
/// MIN_COMPRESS_LENGTH).
const MIN_COMPRESS: usize = 50;
/// The plain bytes one written frame carries at most.
const FRAME_MAX: usize = 1 << 20;
/// The largest uncompressed length a frame header can state.
const ULEN_MAX: usize = 0xFF_FFFF;
const HEADER: usize = 7;

/// Set by the code above when the next frame written starts a new command
/// (sequence id 0).
#[derive(Debug, Default, Clone)]
pub struct SeqReset(Arc<AtomicBool>);

impl SeqReset {
    pub fn new_command(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn take(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}

/// A stream speaking the compressed protocol underneath, plain packets
/// above.
pub struct Compressed<S> {
    inner: S,
    /// Frame bytes read and not yet decoded.
    raw: Vec<u8>,
    /// Plain bytes decoded and not yet read, from `plain_at`.
    plain: Vec<u8>,
    plain_at: usize,
    /// Frame bytes to write, from `out_at`.
    out: Vec<u8>,
    out_at: usize,
    seq: u8,
    reset: SeqReset,
}

/// One frame's header, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub len: usize,
    pub seq: u8,
    /// 0: the payload is not compressed.
    pub ulen: usize,
}

pub fn parse_header(h: &[u8]) -> Option<FrameHeader> {
    let h = h.get(..HEADER)?;
    Some(FrameHeader {
        len: u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize,
        seq: h[3],
        ulen: u32::from_le_bytes([h[4], h[5], h[6], 0]) as usize,
    })
}

/// A frame's payload as plain bytes.
pub fn decode(h: FrameHeader, payload: &[u8]) -> std::io::Result<Vec<u8>> {
    if h.ulen == 0 {
        return Ok(payload.to_vec());
    }
    let mut out = Vec::with_capacity(h.ulen);
    // One byte more than stated, to tell a payload that inflates longer.
    flate2::read::ZlibDecoder::new(payload)
        .take(h.ulen as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad(format!("compressed frame does not inflate: {e}")))?;
    if out.len() != h.ulen {
        return Err(bad(format!(
            "compressed frame inflates to {} bytes, its header says {}",
            out.len(),
            h.ulen
        )));
    }
    Ok(out)
}

/// Appends one frame carrying `plain` (at most [`ULEN_MAX`] bytes).
pub fn encode(out: &mut Vec<u8>, seq: u8, plain: &[u8]) {
    let mut z = Vec::new();
    if plain.len() >= MIN_COMPRESS {
        let mut e = flate2::write::ZlibEncoder::new(
            Vec::with_capacity(plain.len() / 2),
            flate2::Compression::default(),
        );
        if e.write_all(plain).is_ok() {
            z = e.finish().unwrap_or_default();
        }
    }
    let (body, ulen) = if !z.is_empty() && z.len() < plain.len() {
        (&z[..], plain.len())
    } else {
        (plain, 0)
    };
    out.extend_from_slice(&(body.len() as u32).to_le_bytes()[..3]);
    out.push(seq);
    out.extend_from_slice(&(ulen as u32).to_le_bytes()[..3]);
    out.extend_from_slice(body);
}

fn bad(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

impl<S> Compressed<S> {
    /// Wraps a stream whose login has just ended.
    pub fn new(inner: S) -> (Compressed<S>, SeqReset) {
        let reset = SeqReset::default();
        let c = Compressed {
            inner,
            raw: Vec::new(),
            plain: Vec::new(),
            plain_at: 0,
            out: Vec::new(),
            out_at: 0,
            seq: 0,
            reset: reset.clone(),
        };
        (c, reset)
    }

    /// Decodes one whole frame from `raw` into `plain`, if one is there.
    fn decode_one(&mut self) -> std::io::Result<bool> {
        let Some(h) = parse_header(&self.raw) else {
            return Ok(false);
        };
        if h.ulen > ULEN_MAX || self.raw.len() < HEADER + h.len {
            return Ok(false);
        }
        let plain = decode(h, &self.raw[HEADER..HEADER + h.len])?;
        self.raw.drain(..HEADER + h.len);
        self.seq = h.seq.wrapping_add(1);
        self.plain = plain;
        self.plain_at = 0;
        Ok(true)
    }
}

impl<S: AsyncWrite + Unpin> Compressed<S> {
    /// Writes out pending frame bytes; Ready when none are left.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while self.out_at < self.out.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.out[self.out_at..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => self.out_at += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.out.clear();
        self.out_at = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Compressed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        loop {
            if me.plain_at < me.plain.len() {
                let n = (me.plain.len() - me.plain_at).min(buf.remaining());
                buf.put_slice(&me.plain[me.plain_at..me.plain_at + n]);
                me.plain_at += n;
                return Poll::Ready(Ok(()));
            }
            if me.decode_one()? {
                continue;
            }
            if parse_header(&me.raw).is_some_and(|h| h.ulen > ULEN_MAX) {
                return Poll::Ready(Err(bad("compressed frame header out of range".into())));
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut rb = ReadBuf::new(&mut chunk);
            match Pin::new(&mut me.inner).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let got = rb.filled();
                    if got.is_empty() {
                        if me.raw.is_empty() {
                            return Poll::Ready(Ok(())); // end of stream
                        }
                        return Poll::Ready(Err(std::io::ErrorKind::UnexpectedEof.into()));
                    }
                    me.raw.extend_from_slice(got);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Compressed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = &mut *self;
        if me.poll_drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = buf.len().min(FRAME_MAX);
        if me.reset.take() {
            me.seq = 0;
        }
        encode(&mut me.out, me.seq, &buf[..n]);
        me.seq = me.seq.wrapping_add(1);
        // Accepted: what the inner stream does not take now goes out at
        // the next write or flush.
        if let Poll::Ready(Err(e)) = me.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        if me.poll_drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut me.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let me = &mut *self;
        if me.poll_drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut me.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn frames_round_trip_short_and_long() {
        for plain in [&b"SELECT 1"[..], &[b'x'; 5000][..], &[][..]] {
            let mut f = Vec::new();
            encode(&mut f, 3, plain);
            let h = parse_header(&f).expect("header");
            assert_eq!(h.seq, 3);
            assert_eq!(h.len, f.len() - HEADER);
            // Short payloads go as they are; a long repetitive one shrinks.
            assert_eq!(h.ulen == 0, plain.len() < MIN_COMPRESS);
            assert_eq!(decode(h, &f[HEADER..]).expect("decode"), plain);
        }
    }

    #[test]
    fn a_frame_that_lies_about_its_size_is_refused() {
        let mut f = Vec::new();
        encode(&mut f, 0, &[b'y'; 400]);
        let mut h = parse_header(&f).expect("header");
        h.ulen = 399;
        assert!(decode(h, &f[HEADER..]).is_err());
        h.ulen = 401;
        assert!(decode(h, &f[HEADER..]).is_err());
        h.ulen = 400;
        assert!(decode(h, &f[HEADER..f.len() - 1]).is_err());
    }

    #[tokio::test]
    async fn packets_cross_frames_and_ids_follow_the_peer() {
        let (a, b) = tokio::io::duplex(1 << 16);
        let (mut client, _) = Compressed::new(a);
        let (mut server, server_reset) = Compressed::new(b);
        // A command of two frames, the second's packet cut across them.
        let big = vec![b'q'; 3000];
        client.write_all(&big[..1000]).await.expect("w1");
        client.write_all(&big[1000..]).await.expect("w2");
        client.flush().await.expect("flush");
        let mut got = vec![0; 3000];
        server.read_exact(&mut got).await.expect("read");
        assert_eq!(got, big);
        // The reply continues the ids: the client wrote frames 0 and 1.
        server.write_all(b"reply").await.expect("reply");
        server.flush().await.expect("flush");
        let mut raw_reader = client.inner;
        let mut hdr = [0u8; 7];
        raw_reader.read_exact(&mut hdr).await.expect("hdr");
        assert_eq!(parse_header(&hdr).map(|h| h.seq), Some(2));
        let mut rest = [0u8; 5];
        raw_reader.read_exact(&mut rest).await.expect("rest");
        // A new command restarts at 0.
        server_reset.new_command();
        server.write_all(b"next").await.expect("next");
        server.flush().await.expect("flush");
        raw_reader.read_exact(&mut hdr).await.expect("hdr");
        assert_eq!(parse_header(&hdr).map(|h| h.seq), Some(0));
    }

    #[tokio::test]
    async fn garbage_and_a_cut_frame_are_errors_not_panics() {
        let (mut a, b) = tokio::io::duplex(1 << 12);
        let (mut c, _) = Compressed::new(b);
        // Says 10 bytes inflate to 100, carries junk.
        a.write_all(&[10, 0, 0, 0, 100, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
            .await
            .expect("w");
        let mut buf = [0u8; 8];
        assert!(c.read(&mut buf).await.is_err());
        let (mut a, b) = tokio::io::duplex(1 << 12);
        let (mut c, _) = Compressed::new(b);
        a.write_all(&[10, 0, 0, 0, 0, 0, 0, 1, 2]).await.expect("w");
        drop(a);
        assert!(c.read(&mut buf).await.is_err());
    }

    proptest::proptest! {
        #[test]
        fn decoding_never_panics(p in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Some(h) = parse_header(&p) {
                let end = (HEADER + h.len).min(p.len());
                let _ = decode(h, &p[HEADER.min(end)..end]);
            }
        }
    }
}
