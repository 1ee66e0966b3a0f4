//! One client session: log in, lease a backend, pass packets through until
//! the client quits, then hand the backend back (or drop it if its state
//! is unknown).

use std::sync::Arc;

use sqlfleet_wire::handshake::SESSION_SHAPE;
use sqlfleet_wire::packet;
use tokio::net::TcpStream;

use crate::auth;
use crate::config::RelayConfig;
use crate::pool::{Key, Pool};

const COM_QUIT: u8 = 0x01;
const COM_CHANGE_USER: u8 = 0x11;

enum End {
    /// COM_QUIT: the backend is idle and can be reused.
    Quit,
    /// The client asked for something this relay does not pass through.
    Unsupported(&'static str),
    /// Either side went away mid-session: the backend's state is unknown.
    Gone,
}

pub async fn serve(cfg: Arc<RelayConfig>, pool: Arc<Pool>, mut client: TcpStream, id: u32) {
    let _ = client.set_nodelay(true);
    let Ok((hello, seq)) = auth::login(&cfg, &mut client, id).await else {
        return;
    };
    let key = Key {
        backend: pool.pick(),
        shape: hello.caps & SESSION_SHAPE,
        collation: hello.collation,
        db: hello.database.clone(),
    };
    let mut lease = match pool.lease(key).await {
        Ok(l) => l,
        Err(e) => {
            let code = if matches!(e, crate::pool::LeaseError::Timeout(..)) {
                1040
            } else {
                2003
            };
            let _ = packet::write(
                &mut client,
                seq,
                &packet::err_payload(code, "08004", &format!("sqlfleet relay: {e}")),
            )
            .await;
            return;
        }
    };
    if packet::write(&mut client, seq, &packet::ok_payload(2))
        .await
        .is_err()
    {
        pool.give_back(lease);
        return;
    }
    match pipe(&mut client, &mut lease.conn.stream, cfg.max_packet).await {
        End::Quit => pool.give_back(lease),
        End::Unsupported(what) => {
            let msg = format!("sqlfleet relay: {what} is not supported yet");
            let _ = packet::write(&mut client, 1, &packet::err_payload(1235, "42000", &msg)).await;
        }
        End::Gone => {}
    }
}

/// Follows packet boundaries in a byte stream without buffering whole
/// packets: finds each command packet's first byte (sequence id 0), so
/// COM_QUIT and COM_CHANGE_USER can be caught while bytes are copied in
/// large reads. A header cut by a read is held back (at most 4 bytes) so
/// that no part of a caught packet ever reaches the backend.
#[derive(Default)]
struct Framer {
    /// Bytes of the current packet's payload still to pass.
    remaining: usize,
    /// The start of a header the previous read cut off.
    held: Vec<u8>,
}

enum Seen {
    Pass,
    Stop(End),
}

impl Framer {
    /// Takes the next read; returns the bytes to forward now and whether
    /// the session ends here.
    fn scan<'a>(&mut self, read: &'a [u8]) -> (std::borrow::Cow<'a, [u8]>, Seen) {
        let data: std::borrow::Cow<'a, [u8]> = if self.held.is_empty() {
            std::borrow::Cow::Borrowed(read)
        } else {
            let mut v = std::mem::take(&mut self.held);
            v.extend_from_slice(read);
            std::borrow::Cow::Owned(v)
        };
        let mut i = 0;
        while i < data.len() {
            if self.remaining > 0 {
                let n = self.remaining.min(data.len() - i);
                self.remaining -= n;
                i += n;
                continue;
            }
            let h = &data[i..];
            let len = if h.len() >= 3 {
                u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize
            } else {
                usize::MAX
            };
            if len == 0 && h.len() >= 4 {
                i += 4; // an empty packet: no command byte
                continue;
            }
            if h.len() < 5 {
                // Hold the cut header back until the rest arrives.
                self.held = h.to_vec();
                return (cut(data, i), Seen::Pass);
            }
            if h[3] == 0 && h[4] == COM_QUIT {
                return (cut(data, i), Seen::Stop(End::Quit));
            }
            if h[3] == 0 && h[4] == COM_CHANGE_USER {
                return (
                    cut(data, i),
                    Seen::Stop(End::Unsupported("COM_CHANGE_USER")),
                );
            }
            self.remaining = len;
            i += 4;
        }
        (data, Seen::Pass)
    }
}

fn cut(data: std::borrow::Cow<'_, [u8]>, at: usize) -> std::borrow::Cow<'_, [u8]> {
    match data {
        std::borrow::Cow::Borrowed(b) => std::borrow::Cow::Borrowed(&b[..at]),
        std::borrow::Cow::Owned(mut v) => {
            v.truncate(at);
            std::borrow::Cow::Owned(v)
        }
    }
}

async fn pipe(client: &mut TcpStream, backend: &mut TcpStream, _max_packet: usize) -> End {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut cr, mut cw) = client.split();
    let (mut br, mut bw) = backend.split();
    let to_backend = async {
        let mut framer = Framer::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => return End::Gone,
                Ok(n) => n,
            };
            let (out, seen) = framer.scan(&buf[..n]);
            if !out.is_empty() && bw.write_all(&out).await.is_err() {
                return End::Gone;
            }
            if let Seen::Stop(e) = seen {
                return e;
            }
        }
    };
    let to_client = async {
        let _ = tokio::io::copy(&mut br, &mut cw).await;
        let _ = cw.shutdown().await;
        End::Gone
    };
    tokio::select! {
        e = to_backend => e,
        e = to_client => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as u32).to_le_bytes()[..3].to_vec();
        v.push(seq);
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn finds_quit_across_any_split_and_never_forwards_it() {
        let mut stream = pkt(0, b"\x03SELECT 1");
        stream.extend(pkt(0, &[]));
        stream.extend(pkt(0, &[0x03; 300]));
        let quit_at = stream.len();
        stream.extend(pkt(0, &[COM_QUIT]));
        for cut in 0..=stream.len() {
            for cut2 in cut..=stream.len() {
                let mut f = Framer::default();
                let mut out = Vec::new();
                let mut stopped = false;
                for part in [&stream[..cut], &stream[cut..cut2], &stream[cut2..]] {
                    let (o, seen) = f.scan(part);
                    out.extend_from_slice(&o);
                    if matches!(seen, Seen::Stop(End::Quit)) {
                        stopped = true;
                        break;
                    }
                }
                assert!(stopped, "cuts {cut},{cut2}");
                assert_eq!(out, &stream[..quit_at], "cuts {cut},{cut2}");
            }
        }
    }
}
