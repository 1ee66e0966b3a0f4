//! Network faults between clients and one server, without root: a TCP
//! link in the test process (as Toxiproxy is) that forwards bytes both
//! ways until told to
//! - **stall**: nothing passes either way and every socket stays open — a
//!   host that stopped answering, a network that drops every packet; new
//!   connections are accepted and get nothing (no greeting);
//! - **cut**: every connection is closed at once and new ones are closed
//!   as they arrive — a partition the peers notice, a killed middlebox;
//! - **heal**: pass again (a stalled connection carries on where it was;
//!   cut ones stay gone).
//!
//! Point the client at [`Link::port`] instead of the server's port.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the link does with traffic now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Stall,
    Cut,
}

/// A link to 127.0.0.1:`upstream`, listening on 127.0.0.1:[`Link::port`],
/// served by its own thread until dropped.
pub struct Link {
    pub port: u16,
    mode: Arc<watch::Sender<Mode>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Link {
    pub fn to(upstream: u16) -> Link {
        let port = crate::proxy::free_port();
        let (mode, _) = watch::channel(Mode::Pass);
        let mode = Arc::new(mode);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, is_ready) = std::sync::mpsc::channel();
        let m = mode.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("link runtime");
            rt.block_on(async move {
                let l = TcpListener::bind(("127.0.0.1", port))
                    .await
                    .expect("link listens");
                let _ = ready.send(());
                tokio::select! {
                    _ = accept_loop(l, upstream, m) => {}
                    _ = stopped => {}
                }
            });
        });
        is_ready.recv().expect("link ready");
        Link {
            port,
            mode,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn stall(&self) {
        self.mode.send_replace(Mode::Stall);
    }

    pub fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
    }

    pub fn heal(&self) {
        self.mode.send_replace(Mode::Pass);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept_loop(l: TcpListener, upstream: u16, mode: Arc<watch::Sender<Mode>>) {
    loop {
        let Ok((client, _)) = l.accept().await else {
            continue;
        };
        if *mode.borrow() == Mode::Cut {
            drop(client);
            continue;
        }
        let rx = mode.subscribe();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                return;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            // Either direction ending (or a cut) ends both.
            tokio::select! {
                _ = pipe(cr, sw, rx.clone()) => {}
                _ = pipe(sr, cw, rx) => {}
            }
        });
    }
}

/// Copies `from` to `to` while the mode lets it; returns at the end of
/// either side or on a cut.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Nothing is read while stalled: the sender's buffers fill as
        // they would against a peer that stopped reading.
        if !passing(&mut mode).await {
            return;
        }
        let n = tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
                continue;
            }
        };
        // Read before a stall began: held until it ends (or a cut).
        if !passing(&mut mode).await || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Waits while the link is stalled; true once it passes, false on a cut
/// (or the link gone).
async fn passing(mode: &mut watch::Receiver<Mode>) -> bool {
    loop {
        let m = *mode.borrow_and_update();
        match m {
            Mode::Pass => return true,
            Mode::Cut => return false,
            Mode::Stall => {
                if mode.changed().await.is_err() {
                    return false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Duration;

    /// An echo server on a free port.
    fn echo() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut s = s;
                    let mut b = [0u8; 1024];
                    while let Ok(n) = s.read(&mut b) {
                        if n == 0 || s.write_all(&b[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        port
    }

    fn round_trip(s: &mut std::net::TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        s.write_all(msg)?;
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got)?;
        Ok(got)
    }

    #[test]
    fn passes_stalls_heals_and_cuts() {
        let link = Link::to(echo());
        let mut s = std::net::TcpStream::connect(("127.0.0.1", link.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        assert_eq!(round_trip(&mut s, b"one").expect("pass"), b"one");
        link.stall();
        std::thread::sleep(Duration::from_millis(50));
        let e = round_trip(&mut s, b"two").expect_err("nothing passes while stalled");
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{e:?}"
        );
        link.heal();
        let mut got = vec![0u8; 3];
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s.read_exact(&mut got).expect("the held bytes arrive");
        assert_eq!(got, b"two");
        link.cut();
        std::thread::sleep(Duration::from_millis(50));
        let mut b = [0u8; 8];
        let closed = matches!(s.read(&mut b), Ok(0) | Err(_));
        assert!(closed, "a cut closes the connection");
        let mut s2 = std::net::TcpStream::connect(("127.0.0.1", link.port)).expect("connect");
        s2.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert!(
            round_trip(&mut s2, b"x").is_err(),
            "new connections are closed"
        );
        link.heal();
        let mut s3 = std::net::TcpStream::connect(("127.0.0.1", link.port)).expect("connect");
        assert_eq!(round_trip(&mut s3, b"three").expect("healed"), b"three");
    }
}
