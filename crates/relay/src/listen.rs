//! Client listeners (TCP or Unix socket) and the loop that accepts on them.

use std::path::PathBuf;

use tokio::net::{TcpListener, UnixListener};

use crate::protocol::io::AnyStream;

/// Connections the kernel queues before the relay accepts them (capped
/// by net.core.somaxconn). tokio's 1024 was too few for a burst of
/// thousands of clients: SYNs past a full queue are dropped, and the
/// client retries them for 30 s and more instead of getting an answer.
const BACKLOG: i32 = 8192;

/// A bound client listener.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `HOST:PORT` or `unix:/path` (a stale socket file is replaced).
    pub async fn bind(addr: &str) -> std::io::Result<Listener> {
        match addr.strip_prefix("unix:") {
            Some(path) => {
                let path = PathBuf::from(path);
                if std::fs::symlink_metadata(&path).is_ok()
                    && std::os::unix::net::UnixStream::connect(&path).is_err()
                {
                    let _ = std::fs::remove_file(&path);
                }
                let l = UnixListener::bind(&path)?;
                let _ = socket2::SockRef::from(&l).listen(BACKLOG);
                Ok(Listener::Unix(l, path))
            }
            None => {
                let l = TcpListener::bind(addr).await?;
                // Accepted sockets inherit it (Linux): no setsockopt per
                // client. `accept_loop` checks the first one.
                let _ = socket2::SockRef::from(&l).set_tcp_nodelay(true);
                let _ = socket2::SockRef::from(&l).listen(BACKLOG);
                Ok(Listener::Tcp(l))
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into()),
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A client connection just accepted.
pub enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

/// A client connection and its host as the server would name it in
/// errors (the address accept gave; 'localhost' over a socket).
pub struct Client {
    pub conn: Accepted,
    pub host: String,
}

/// An accepted connection taken off its event loop's poller, to be
/// registered on another loop's ([`Detached::attach`] there).
pub enum Detached {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Accepted {
    pub fn detach(self) -> std::io::Result<Detached> {
        Ok(match self {
            Accepted::Tcp(s) => Detached::Tcp(s.into_std()?),
            Accepted::Unix(s) => Detached::Unix(s.into_std()?),
        })
    }
}

impl From<Accepted> for AnyStream {
    fn from(a: Accepted) -> AnyStream {
        match a {
            Accepted::Tcp(s) => AnyStream(Box::new(s)),
            Accepted::Unix(s) => AnyStream(Box::new(s)),
        }
    }
}

/// Whether [`detach_plain`] can move this stream: a plain TCP or Unix
/// socket (a TLS stream keeps its loop).
pub fn is_plain(s: &AnyStream) -> bool {
    let any = s.0.as_any();
    any.is::<tokio::net::TcpStream>() || any.is::<tokio::net::UnixStream>()
}

/// A stream's plain socket taken off this event loop's poller (to be
/// [`Detached::attach`]ed on another loop); `None`, with the stream left
/// in place, when it is not [`is_plain`].
pub fn detach_plain(s: &mut AnyStream) -> Option<std::io::Result<Detached>> {
    if !is_plain(s) {
        return None;
    }
    let taken = std::mem::replace(s, AnyStream::gone()).0.into_any();
    Some(match taken.downcast::<tokio::net::TcpStream>() {
        Ok(t) => Accepted::Tcp(*t).detach(),
        Err(other) => match other.downcast::<tokio::net::UnixStream>() {
            Ok(u) => Accepted::Unix(*u).detach(),
            Err(_) => Err(std::io::Error::other("not a plain socket")),
        },
    })
}

impl Detached {
    /// Registers the connection on the calling event loop's poller.
    pub fn attach(self) -> std::io::Result<Accepted> {
        Ok(match self {
            Detached::Tcp(s) => Accepted::Tcp(tokio::net::TcpStream::from_std(s)?),
            Detached::Unix(s) => Accepted::Unix(tokio::net::UnixStream::from_std(s)?),
        })
    }
}

/// Accepts on one listener and hands each connection to `start` (which
/// spawns its session) on the accepting task itself: no channel and no
/// second task between the accept and the session.
pub async fn accept_loop(l: Listener, start: impl Fn(Client)) {
    // Whether accepted sockets came with TCP_NODELAY from the listener;
    // if not, it is set on each.
    let mut inherits_nodelay = None;
    loop {
        let a = match &l {
            Listener::Tcp(t) => t.accept().await.map(|(s, addr)| {
                let inherits =
                    *inherits_nodelay.get_or_insert_with(|| s.nodelay().unwrap_or(false));
                if !inherits {
                    let _ = s.set_nodelay(true);
                }
                Client {
                    conn: Accepted::Tcp(s),
                    host: addr.ip().to_canonical().to_string(),
                }
            }),
            Listener::Unix(u, _) => u.accept().await.map(|(s, _)| Client {
                conn: Accepted::Unix(s),
                host: "localhost".into(),
            }),
        };
        match a {
            Ok(a) => start(a),
            // Out of file descriptors and the like: back off briefly.
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}
