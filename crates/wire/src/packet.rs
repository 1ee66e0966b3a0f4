//! MySQL packet framing: 3-byte little-endian length, 1-byte sequence id,
//! payload. A payload of 0xFFFFFF bytes continues in the next packet.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const MAX_CHUNK: usize = 0xFF_FFFF;

/// One physical packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub seq: u8,
    pub payload: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("connection closed")]
    Closed,
    #[error("packet of {len} bytes exceeds the limit of {max}")]
    TooBig { len: usize, max: usize },
    #[error("{0}")]
    Protocol(String),
    /// The server's ERR packet.
    #[error("ERROR {code} ({state}): {message}")]
    Server {
        code: u16,
        state: String,
        message: String,
    },
    /// A login the server wants made with an authentication plugin this
    /// side cannot use (or not here), and why.
    #[error("authentication plugin '{plugin}' cannot be used: {why}")]
    Plugin { plugin: String, why: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one physical packet; `max` bounds the payload.
pub async fn read<R: AsyncRead + Unpin>(r: &mut R, max: usize) -> Result<Packet, WireError> {
    let mut h = [0u8; 4];
    match r.read_exact(&mut h).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(WireError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
    if len > max {
        return Err(WireError::TooBig { len, max });
    }
    let mut payload = vec![0; len];
    r.read_exact(&mut payload).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            WireError::Closed
        } else {
            e.into()
        }
    })?;
    Ok(Packet { seq: h[3], payload })
}

/// Writes a logical payload, split into 0xFFFFFF-byte packets as needed;
/// returns the next sequence id.
pub async fn write<W: AsyncWrite + Unpin>(
    w: &mut W,
    seq: u8,
    payload: &[u8],
) -> Result<u8, WireError> {
    let mut buf = Vec::with_capacity(4 + payload.len().min(MAX_CHUNK));
    write_with(w, &mut buf, seq, payload).await
}

/// [`write`], each packet framed in `buf` (cleared first): a caller that
/// writes often keeps one buffer and saves an allocation per packet.
pub async fn write_with<W: AsyncWrite + Unpin>(
    w: &mut W,
    buf: &mut Vec<u8>,
    seq: u8,
    payload: &[u8],
) -> Result<u8, WireError> {
    let seq = frame_into(w, buf, seq, payload).await?;
    w.flush().await?;
    Ok(seq)
}

/// [`write_with`] without the flush: for a writer that buffers (a
/// `BufWriter`), several packets then leave in one write.
pub async fn frame_into<W: AsyncWrite + Unpin>(
    w: &mut W,
    buf: &mut Vec<u8>,
    mut seq: u8,
    payload: &[u8],
) -> Result<u8, WireError> {
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_CHUNK);
        buf.clear();
        buf.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        buf.push(seq);
        buf.extend_from_slice(&rest[..n]);
        w.write_all(buf).await?;
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_CHUNK {
            break;
        }
    }
    Ok(seq)
}

/// Writes a packet exactly as it was read (header rebuilt from it).
pub async fn forward<W: AsyncWrite + Unpin>(w: &mut W, p: &Packet) -> Result<(), WireError> {
    let mut buf = Vec::with_capacity(4 + p.payload.len());
    buf.extend_from_slice(&(p.payload.len() as u32).to_le_bytes()[..3]);
    buf.push(p.seq);
    buf.extend_from_slice(&p.payload);
    w.write_all(&buf).await?;
    w.flush().await?;
    Ok(())
}

/// An ERR packet payload (protocol 4.1 form).
pub fn err_payload(code: u16, state: &str, message: &str) -> Vec<u8> {
    let mut p = vec![0xFF];
    p.extend_from_slice(&code.to_le_bytes());
    p.push(b'#');
    let mut st = state.as_bytes().to_vec();
    st.resize(5, b'0');
    p.extend_from_slice(&st);
    p.extend_from_slice(message.as_bytes());
    p
}

/// A plain OK packet payload.
pub fn ok_payload(status: u16) -> Vec<u8> {
    let mut p = vec![0x00, 0x00, 0x00];
    p.extend_from_slice(&status.to_le_bytes());
    p.extend_from_slice(&0u16.to_le_bytes());
    p
}

/// `(code, message)` of an ERR payload.
pub fn parse_err(p: &[u8]) -> Option<(u16, String)> {
    if p.first() != Some(&0xFF) || p.len() < 3 {
        return None;
    }
    match server_error(p) {
        WireError::Server { code, message, .. } => Some((code, message)),
        _ => None,
    }
}

/// An ERR packet as the error it reports: code, SQLSTATE (HY000 when the
/// packet has none) and message. The one ERR decoder.
pub fn server_error(p: &[u8]) -> WireError {
    let code = p
        .get(1..3)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .unwrap_or(0);
    let (state, msg) = if p.get(3) == Some(&b'#') && p.len() >= 9 {
        (String::from_utf8_lossy(&p[4..9]).into_owned(), &p[9..])
    } else {
        ("HY000".to_string(), p.get(3..).unwrap_or_default())
    };
    WireError::Server {
        code,
        state,
        message: String::from_utf8_lossy(msg).into_owned(),
    }
}

/// Appends `n` as a length-encoded integer (the writer of [`lenenc`]).
pub fn put_lenenc(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=250 => out.push(n as u8),
        251..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// Length-encoded integer at `i`.
pub fn lenenc(p: &[u8], i: &mut usize) -> Result<u64, WireError> {
    let bad = || WireError::Protocol("truncated length-encoded integer".into());
    let first = *p.get(*i).ok_or_else(bad)?;
    *i += 1;
    let n = match first {
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        0xFB | 0xFF => return Err(WireError::Protocol("unexpected NULL/ERR marker".into())),
        v => return Ok(v as u64),
    };
    let bytes = p.get(*i..*i + n).ok_or_else(bad)?;
    *i += n;
    let mut v = [0u8; 8];
    v[..n].copy_from_slice(bytes);
    Ok(u64::from_le_bytes(v))
}

/// Length-encoded string at `i`: its bytes, `i` moved past them. The one
/// reader of the protocol's lenenc strings (a length from the wire is
/// never trusted to fit: the end is checked, not computed with overflow).
pub fn lenenc_bytes<'a>(p: &'a [u8], i: &mut usize) -> Result<&'a [u8], WireError> {
    let n = usize::try_from(lenenc(p, i)?)
        .map_err(|_| WireError::Protocol("length-encoded string longer than memory".into()))?;
    let s = i
        .checked_add(n)
        .and_then(|end| p.get(*i..end))
        .ok_or_else(|| WireError::Protocol("truncated length-encoded string".into()))?;
    *i += n;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_strings_are_read_and_checked() {
        let p = [3, b'a', b'b', b'c', 0xFC, 2, 0, b'x', b'y', 5, b'z'];
        let mut i = 0;
        assert_eq!(lenenc_bytes(&p, &mut i).ok(), Some(&b"abc"[..]));
        assert_eq!(lenenc_bytes(&p, &mut i).ok(), Some(&b"xy"[..]));
        assert!(
            lenenc_bytes(&p, &mut i).is_err(),
            "5 bytes announced, 1 there"
        );
        // A length near u64::MAX: refused, never an overflow.
        let huge = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1];
        let mut i = 0;
        assert!(lenenc_bytes(&huge, &mut i).is_err());
    }

    proptest::proptest! {
        #[test]
        fn put_lenenc_is_read_back(n in proptest::prelude::any::<u64>(), small in 0u64..70_000) {
            for v in [n, small] {
                let mut out = vec![0xAA];
                put_lenenc(&mut out, v);
                let mut i = 1;
                proptest::prop_assert_eq!(lenenc(&out, &mut i).ok(), Some(v));
                proptest::prop_assert_eq!(i, out.len());
            }
        }
    }

    #[tokio::test]
    async fn roundtrip_and_split() {
        let mut buf = Vec::new();
        let next = write(&mut buf, 3, b"hello").await.expect("write");
        assert_eq!(next, 4);
        assert_eq!(&buf[..4], &[5, 0, 0, 3]);
        let p = read(&mut &buf[..], 100).await.expect("read");
        assert_eq!(
            p,
            Packet {
                seq: 3,
                payload: b"hello".to_vec()
            }
        );
        let big = vec![7u8; MAX_CHUNK + 10];
        let mut buf = Vec::new();
        assert_eq!(write(&mut buf, 0, &big).await.expect("write"), 2);
        let mut r = &buf[..];
        assert_eq!(
            read(&mut r, usize::MAX).await.expect("p1").payload.len(),
            MAX_CHUNK
        );
        assert_eq!(
            read(&mut r, usize::MAX).await.expect("p2").payload.len(),
            10
        );
    }

    #[tokio::test]
    async fn limits_and_truncation() {
        let mut buf = Vec::new();
        write(&mut buf, 0, &[1; 50]).await.expect("write");
        assert!(matches!(
            read(&mut &buf[..], 10).await,
            Err(WireError::TooBig { len: 50, max: 10 })
        ));
        assert!(matches!(
            read(&mut &buf[..20], 100).await,
            Err(WireError::Closed)
        ));
        assert!(matches!(
            read(&mut &[][..], 100).await,
            Err(WireError::Closed)
        ));
    }

    #[test]
    fn err_packets() {
        let p = err_payload(1045, "28000", "Access denied");
        assert_eq!(parse_err(&p), Some((1045, "Access denied".into())));
        assert_eq!(parse_err(&ok_payload(2)), None);
    }
}
