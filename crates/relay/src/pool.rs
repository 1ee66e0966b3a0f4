//! Backend connections, logged in ahead of need and reused across client
//! sessions. A connection serves only clients with the same session shape
//! (protocol flags), collation and default database. Returning one resets
//! it (COM_RESET_CONNECTION) and checks it is clean, off the client's path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlfleet_wire::handshake;
use sqlfleet_wire::packet::{self, WireError};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::RelayConfig;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub backend: usize,
    pub shape: u32,
    pub collation: u8,
    pub db: Option<String>,
}

pub struct BackendConn {
    pub stream: TcpStream,
    pub key: Key,
}

/// A backend connection in use by one client.
pub struct Lease {
    pub conn: BackendConn,
    _permit: OwnedSemaphorePermit,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("no backend connection became free within {0:?} (pool of {1} per backend is busy)")]
    Timeout(Duration, usize),
    #[error("backend {0}: {1}")]
    Connect(String, WireError),
}

pub struct Pool {
    cfg: Arc<RelayConfig>,
    idle: Mutex<HashMap<Key, Vec<BackendConn>>>,
    slots: Vec<Arc<Semaphore>>,
}

impl Pool {
    pub fn new(cfg: Arc<RelayConfig>) -> Arc<Pool> {
        let slots = cfg
            .backends
            .iter()
            .map(|_| Arc::new(Semaphore::new(cfg.pool_max)))
            .collect();
        Arc::new(Pool {
            cfg,
            idle: Mutex::new(HashMap::new()),
            slots,
        })
    }

    /// The backend with the most free slots (least outstanding work).
    pub fn pick(&self) -> usize {
        (0..self.slots.len())
            .max_by_key(|&i| self.slots[i].available_permits())
            .unwrap_or(0)
    }

    fn take_idle(&self, key: &Key) -> Option<BackendConn> {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(key)?
            .pop()
    }

    pub async fn lease(&self, key: Key) -> Result<Lease, LeaseError> {
        let sem = self.slots[key.backend].clone();
        let permit = tokio::time::timeout(self.cfg.wait_timeout, sem.acquire_owned())
            .await
            .map_err(|_| LeaseError::Timeout(self.cfg.wait_timeout, self.cfg.pool_max))?
            .map_err(|_| LeaseError::Timeout(self.cfg.wait_timeout, self.cfg.pool_max))?;
        if let Some(conn) = self.take_idle(&key) {
            return Ok(Lease {
                conn,
                _permit: permit,
            });
        }
        let b = &self.cfg.backends[key.backend];
        let connect = async {
            let mut s = TcpStream::connect((b.host.as_str(), b.port)).await?;
            s.set_nodelay(true)?;
            handshake::login(
                &mut s,
                &self.cfg.backend_user,
                &self.cfg.backend_password,
                key.shape,
                key.collation,
                key.db.as_deref(),
            )
            .await?;
            Ok::<_, WireError>(s)
        };
        let stream = connect
            .await
            .map_err(|e| LeaseError::Connect(b.addr(), e))?;
        Ok(Lease {
            conn: BackendConn { stream, key },
            _permit: permit,
        })
    }

    /// Resets a connection a client has finished with and keeps it if clean.
    pub fn give_back(self: &Arc<Self>, lease: Lease) {
        let pool = self.clone();
        tokio::spawn(async move {
            let Lease { mut conn, _permit } = lease;
            // The slot frees now; the reset happens off the client's path.
            drop(_permit);
            if reset(&mut conn).await.is_ok() {
                let mut idle = pool.idle.lock().unwrap_or_else(|e| e.into_inner());
                let list = idle.entry(conn.key.clone()).or_default();
                if list.len() < pool.cfg.pool_max {
                    list.push(conn);
                }
            }
        });
    }
}

/// One command and its single OK/ERR reply.
async fn simple(s: &mut TcpStream, payload: &[u8]) -> Result<(), WireError> {
    packet::write(s, 0, payload).await?;
    let r = packet::read(s, 1 << 16).await?;
    match r.payload.first() {
        Some(0x00) if r.seq == 1 => Ok(()),
        _ => Err(WireError::Protocol(
            "unexpected reply while resetting a backend connection".into(),
        )),
    }
}

/// COM_RESET_CONNECTION, then the default database back to the key's.
async fn reset(c: &mut BackendConn) -> Result<(), WireError> {
    simple(&mut c.stream, &[0x1F]).await?;
    match &c.key.db {
        Some(db) => {
            let mut p = vec![0x02];
            p.extend_from_slice(db.as_bytes());
            simple(&mut c.stream, &p).await
        }
        None => {
            // The session may have run USE: only a connection without a
            // default database may serve clients that asked for none.
            packet::write(&mut c.stream, 0, b"\x03SELECT DATABASE() IS NULL").await?;
            let deprecate_eof = c.key.shape & handshake::DEPRECATE_EOF != 0;
            let mut packets = Vec::new();
            loop {
                let p = packet::read(&mut c.stream, 1 << 16).await?;
                let end = match p.payload.first() {
                    Some(0xFF) => return Err(WireError::Protocol("reset check failed".into())),
                    // EOF (or OK-as-EOF) ends the rows; without DEPRECATE_EOF one EOF
                    // also ends the column definitions.
                    Some(0xFE) if p.payload.len() < 0xFF_FFFF => {
                        let n_eof = packets
                            .iter()
                            .filter(|q: &&Vec<u8>| q.first() == Some(&0xFE))
                            .count();
                        deprecate_eof || n_eof == 1
                    }
                    _ => false,
                };
                packets.push(p.payload);
                if end {
                    break;
                }
            }
            // The row is "1" when there is no default database.
            let clean = packets.iter().any(|p| p.as_slice() == b"\x011");
            if clean {
                Ok(())
            } else {
                Err(WireError::Protocol(
                    "session left a default database".into(),
                ))
            }
        }
    }
}
