//! The reading side: a blocking thread that decompresses, splits and
//! classifies the dump and hands statements to the scheduler through a
//! bounded channel (so memory stays bounded whatever the dump's size).

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use sqlfleet_dump::classify::{backslash_escapes_after, classify};
use sqlfleet_dump::{Kind, SplitError, Splitter, Statement};
use tokio::sync::mpsc;

/// How many leading bytes identify a dump (with its size, when known).
const ID_BYTES: u64 = 1 << 20;

pub struct Item {
    pub stmt: Statement,
    pub kind: Kind,
}

pub enum Msg {
    /// The dump's identity; always the first message.
    Id(String),
    Item(Item),
    /// End of input, with the decompressed size.
    Done {
        bytes: u64,
    },
    Error(SplitError),
}

/// Hashes the first [`ID_BYTES`] that pass through.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    seen: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.seen < ID_BYTES {
            let take = (n as u64).min(ID_BYTES - self.seen) as usize;
            self.hasher.update(&buf[..take]);
            self.seen += take as u64;
        }
        Ok(n)
    }
}

/// Starts the reader thread. `stop` ends it early.
pub fn spawn(
    reader: Box<dyn Read + Send>,
    size: Option<u64>,
    load_id: Option<String>,
    max_statement: usize,
    tx: mpsc::Sender<Msg>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("sqlfleet-reader".into())
        .spawn(move || {
            let hashing = Hashing {
                inner: reader,
                hasher: Sha256::new(),
                seen: 0,
            };
            let mut sp = Splitter::new(hashing);
            sp.max_statement = max_statement;
            let mut held: Vec<Msg> = Vec::new();
            let mut id_sent = false;
            let send = |m: Msg| tx.blocking_send(m).is_ok();
            loop {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let next = sp.next_statement();
                let msg = match next {
                    Ok(Some(stmt)) => {
                        let kind = classify(&stmt.text);
                        if kind == Kind::Session {
                            if let Some(on) = backslash_escapes_after(&stmt.text) {
                                sp.set_backslash_escapes(on);
                            }
                        }
                        Some(Msg::Item(Item { stmt, kind }))
                    }
                    Ok(None) => None,
                    Err(e) => Some(Msg::Error(e)),
                };
                let finished = !matches!(msg, Some(Msg::Item(_)));
                if !id_sent {
                    if let Some(m) = msg {
                        held.push(m);
                    }
                    if sp.bytes_read() >= ID_BYTES || finished {
                        let id = load_id.clone().unwrap_or_else(|| {
                            // Finalize a clone: the hasher may still be fed.
                            let mut h = sp_hasher(&sp).clone();
                            h.update(size.unwrap_or(0).to_le_bytes());
                            hex32(&h.finalize())
                        });
                        if !send(Msg::Id(id)) {
                            return;
                        }
                        id_sent = true;
                        for m in held.drain(..) {
                            if !send(m) {
                                return;
                            }
                        }
                    }
                } else if let Some(m) = msg {
                    if !send(m) {
                        return;
                    }
                }
                if finished {
                    let _ = send(Msg::Done {
                        bytes: sp.bytes_read(),
                    });
                    return;
                }
            }
        })
        .expect("spawn reader thread")
}

fn sp_hasher<R: Read>(sp: &Splitter<Hashing<R>>) -> &Sha256 {
    &sp.get_ref().hasher
}

fn hex32(bytes: &[u8]) -> String {
    bytes.iter().take(16).map(|b| format!("{b:02x}")).collect()
}
