//! The reading side: a blocking thread that decompresses, splits and
//! classifies the dump and hands statements to the scheduler through a
//! bounded channel (so memory stays bounded whatever the dump's size).
//!
//! It also names the input ([`crate::identity`]), says whether it is a
//! mysqldump/mariadb-dump file (only those load in parallel), refuses
//! inputs that are not SQL text (XML dumps, UTF-16), and turns a panic
//! anywhere in reading into an error rather than a silent end.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sqlfleet_dump::classify::{backslash_escapes_after, classify};
use sqlfleet_dump::comments::{strip_comments, strip_cr};
use sqlfleet_dump::inspect::{inspect, Traits};
use sqlfleet_dump::{Kind, SplitError, Splitter, Statement};
use tokio::sync::mpsc;

use crate::identity::{Chain, ChainValue, IdHasher};

pub struct Item {
    pub stmt: Statement,
    pub kind: Kind,
    pub traits: Traits,
    /// The statement chain after this statement.
    pub chain: ChainValue,
}

pub enum Msg {
    /// The input's identity and whether it is a mysqldump/mariadb-dump
    /// file; always the first message.
    Id {
        id: String,
        dump: bool,
    },
    Item(Box<Item>),
    /// End of input, with the decompressed size.
    Done {
        bytes: u64,
    },
    Error(SplitError),
}

/// Feeds what passes through to the identity hasher.
struct Hashing<R> {
    inner: R,
    id: IdHasher,
    head: Vec<u8>,
}

const HEAD_BYTES: usize = 4096;

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.id.update(&buf[..n]);
        if self.head.len() < HEAD_BYTES {
            let take = n.min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&buf[..take]);
        }
        Ok(n)
    }
}

/// Is this the start of a mysqldump / mariadb-dump file?
pub fn is_dump_header(head: &[u8]) -> bool {
    let head = &head[..head.len().min(HEAD_BYTES)];
    memchr::memmem::find(head, b"-- MySQL dump ").is_some()
        || memchr::memmem::find(head, b"-- MariaDB dump ").is_some()
}

/// Inputs that are not SQL text: say what they are.
fn not_sql(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0xFF, 0xFE]) || head.starts_with(&[0xFE, 0xFF]) {
        return Some("this file is UTF-16 text; sqlfleet load reads SQL in UTF-8 (or another ASCII-compatible character set): convert it with iconv -f UTF-16 -t UTF-8");
    }
    let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let body = body.trim_ascii_start();
    if body.starts_with(b"<?xml") || body.starts_with(b"<mysqldump") {
        return Some(
            "this is an XML dump (mysqldump --xml); sqlfleet load reads SQL dumps, not XML",
        );
    }
    if head.len() >= 4 && head.iter().take(64).step_by(2).skip(1).all(|b| *b == 0) && head[0] != 0 {
        return Some("this file looks like UTF-16 text; sqlfleet load reads SQL in UTF-8: convert it with iconv -f UTF-16 -t UTF-8");
    }
    None
}

/// Starts the reader thread. `stop` ends it early.
pub fn spawn(
    reader: Box<dyn Read + Send>,
    size: Option<u64>,
    load_id: Option<String>,
    max_statement: usize,
    keep_comments: bool,
    tx: mpsc::Sender<Msg>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sqlfleet-reader".into())
        .spawn(move || {
            let panic_tx = tx.clone();
            let run = std::panic::AssertUnwindSafe(|| {
                read_all(reader, size, load_id, max_statement, keep_comments, &tx, &stop)
            });
            if let Err(p) = std::panic::catch_unwind(run) {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let _ = panic_tx.blocking_send(Msg::Error(SplitError::Io {
                    offset: 0,
                    what: format!("internal error while reading the dump ({what}); nothing after this point was loaded"),
                }));
            }
        })
}

fn read_all(
    reader: Box<dyn Read + Send>,
    size: Option<u64>,
    load_id: Option<String>,
    max_statement: usize,
    keep_comments: bool,
    tx: &mpsc::Sender<Msg>,
    stop: &AtomicBool,
) {
    let mut sp = Splitter::new(Hashing {
        inner: reader,
        id: IdHasher::default(),
        head: Vec::new(),
    });
    sp.max_statement = max_statement;
    let mut chain = Chain::default();
    let mut held: Vec<Msg> = Vec::new();
    let mut id_sent = false;
    let send = |m: Msg| tx.blocking_send(m).is_ok();
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let next = sp.next_statement();
        if !id_sent {
            if let Some(what) = not_sql(&sp.get_ref().head) {
                let _ = send(Msg::Error(SplitError::Syntax {
                    offset: 0,
                    line: 1,
                    what: what.into(),
                }));
                return;
            }
        }
        let msg = match next {
            Ok(Some(mut stmt)) => {
                if let Some(text) = strip_cr(&stmt.text) {
                    stmt.text = text;
                }
                if !keep_comments {
                    if let Some(text) = strip_comments(&stmt.text, sp.backslash_escapes()) {
                        stmt.text = text;
                    }
                }
                let kind = classify(&stmt.text);
                if kind == Kind::Session {
                    if let Some(on) = backslash_escapes_after(&stmt.text) {
                        sp.set_backslash_escapes(on);
                    }
                }
                let traits = inspect(&stmt.text);
                let chain = chain.add(stmt.offset, &stmt.text);
                Some(Msg::Item(Box::new(Item {
                    stmt,
                    kind,
                    traits,
                    chain,
                })))
            }
            Ok(None) => None,
            Err(e) => Some(Msg::Error(e)),
        };
        let finished = !matches!(msg, Some(Msg::Item(_)));
        if !id_sent {
            if let Some(m) = msg {
                held.push(m);
            }
            let h = sp.get_ref();
            if h.id.is_full() || finished {
                let id = load_id.clone().unwrap_or_else(|| h.id.finish(size, ""));
                let dump = is_dump_header(&h.head);
                if !send(Msg::Id { id, dump }) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_headers_and_what_is_not_sql() {
        assert!(is_dump_header(
            b"-- MariaDB dump 10.19  Distrib 10.11.6-MariaDB"
        ));
        assert!(is_dump_header(
            b"/*M!999999\\- enable the sandbox mode */ \n-- MariaDB dump 10.19"
        ));
        assert!(is_dump_header(b"-- MySQL dump 10.13  Distrib 8.0.36"));
        assert!(!is_dump_header(b"CREATE TABLE t (a int);"));
        assert!(not_sql(b"<?xml version=\"1.0\"?>\n<mysqldump").is_some());
        assert!(not_sql(b"\xFF\xFEC\x00R\x00").is_some());
        assert!(not_sql(b"C\x00R\x00E\x00A\x00T\x00E\x00").is_some());
        assert!(not_sql(b"\xEF\xBB\xBFSELECT 1;").is_none());
        assert!(not_sql(b"SELECT 1;").is_none());
    }
}
