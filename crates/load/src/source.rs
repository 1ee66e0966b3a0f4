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
    /// End of input, with the decompressed size; `cut_short` when a dump
    /// tool's file lacks its "-- Dump completed" trailer.
    Done {
        bytes: u64,
        cut_short: bool,
    },
    Error(SplitError),
    /// Bad input in one file of a directory: the file, and the offset and
    /// line in it.
    FileError(std::path::PathBuf, SplitError),
}

/// What the reader reads.
pub enum Input {
    /// One stream (a file, decompressed, or stdin) and its size on disk.
    Stream(Box<dyn Read + Send>, Option<u64>),
    /// A mydumper directory: its files one after another, as one stream.
    Dir(crate::dir::DirInput),
}

/// Feeds what passes through to the identity hasher.
struct Hashing<R> {
    inner: R,
    id: IdHasher,
    head: Vec<u8>,
    /// The last [`TAIL_BYTES`] read: where a dump tool writes its
    /// "-- Dump completed" trailer.
    tail: Vec<u8>,
}

const TAIL_BYTES: usize = 512;

/// Whether a dump tool's file lacks its trailer: cut short, or still being
/// copied (false for input no dump tool wrote).
fn lacks_trailer(head: &[u8], tail: &[u8]) -> bool {
    is_dump_header(head) && !has_trailer(tail)
}

/// Whether the end of a dump holds the "-- Dump completed" line
/// mysqldump and mariadb-dump write last.
pub fn has_trailer(tail: &[u8]) -> bool {
    memchr::memmem::find(tail, b"-- Dump completed").is_some()
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
        let new = &buf[n.saturating_sub(TAIL_BYTES)..n];
        let keep = TAIL_BYTES - new.len();
        if self.tail.len() > keep {
            self.tail.drain(..self.tail.len() - keep);
        }
        self.tail.extend_from_slice(new);
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
    if head.len() >= 4 && head.iter().take(64).skip(1).step_by(2).all(|b| *b == 0) && head[0] != 0 {
        return Some("this file looks like UTF-16 text; sqlfleet load reads SQL in UTF-8: convert it with iconv -f UTF-16 -t UTF-8");
    }
    None
}

/// How to read.
pub struct ReadOptions {
    /// Bytes read so far (decompressed, sourced files included).
    pub read: Arc<std::sync::atomic::AtomicU64>,
    pub max_statement: usize,
    /// Keep comments inside statements (the client's `--comments`).
    pub keep_comments: bool,
    /// Where `source FILE` looks first (the main file's directory).
    pub base_dir: Option<std::path::PathBuf>,
    /// Bytes on disk read of a directory's files (for progress).
    pub raw_read: Arc<std::sync::atomic::AtomicU64>,
    /// The client's character set (`--default-character-set`), as far as
    /// reading cares (see `Splitter::set_charset`).
    pub charset: sqlfleet_dump::lex::Multibyte,
}

/// Starts the reader thread. `stop` ends it early.
pub fn spawn(
    input: Input,
    load_id: Option<String>,
    opts: ReadOptions,
    tx: mpsc::Sender<Msg>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("sqlfleet-reader".into())
        .spawn(move || {
            let panic_tx = tx.clone();
            let run = std::panic::AssertUnwindSafe(|| match input {
                Input::Stream(reader, size) => read_all(reader, size, load_id, &opts, &tx, &stop),
                Input::Dir(dir) => read_dir(dir, load_id, &opts, &tx, &stop),
            });
            if let Err(p) = std::panic::catch_unwind(run) {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let _ = panic_tx.blocking_send(Msg::Error(SplitError::Io {
                    offset: 0,
                    line: 0,
                    what: format!("internal error while reading the dump ({what}); nothing after this point was loaded"),
                }));
            }
        })
}

/// How deep `source` may nest (the client has no limit but file handles;
/// a file that sources itself would never end).
const MAX_SOURCE_DEPTH: usize = 16;

/// The reader's state across the main file and the files it sources.
struct Reading<'a> {
    tx: &'a mpsc::Sender<Msg>,
    stop: &'a AtomicBool,
    held: Vec<Msg>,
    id_sent: bool,
    chain: Chain,
    keep_comments: bool,
    max_statement: usize,
    /// Backslash escapes in strings (the session's sql_mode, shared by
    /// every file of the session).
    escapes: bool,
    /// The client's character set, shared by every file (a `charset`
    /// command in one holds for the next, as in the client).
    charset: sqlfleet_dump::lex::Multibyte,
    /// Bytes of sourced files read so far: statements get offsets in one
    /// stream, the main file's bytes with each sourced file's spliced in
    /// where its `source` command stood.
    shift: u64,
    /// Where `source` looks first: the main file's directory.
    base_dir: Option<std::path::PathBuf>,
    read: Arc<std::sync::atomic::AtomicU64>,
}

impl<'a> Reading<'a> {
    /// At the start of the input (backslash escapes on, as the server's
    /// default sql_mode has them); `source` looks in `opts.base_dir`.
    fn new(opts: &ReadOptions, tx: &'a mpsc::Sender<Msg>, stop: &'a AtomicBool) -> Reading<'a> {
        Reading {
            tx,
            stop,
            held: Vec::new(),
            id_sent: false,
            chain: Chain::default(),
            keep_comments: opts.keep_comments,
            max_statement: opts.max_statement,
            escapes: true,
            charset: opts.charset,
            shift: 0,
            base_dir: opts.base_dir.clone(),
            read: opts.read.clone(),
        }
    }

    /// Sends, or holds until the identity is known. False when the
    /// receiver is gone.
    fn emit(&mut self, m: Msg) -> bool {
        if self.id_sent {
            self.tx.blocking_send(m).is_ok()
        } else {
            self.held.push(m);
            true
        }
    }

    fn send_id(&mut self, id: String, dump: bool) -> bool {
        if self.tx.blocking_send(Msg::Id { id, dump }).is_err() {
            return false;
        }
        self.id_sent = true;
        for m in std::mem::take(&mut self.held) {
            if self.tx.blocking_send(m).is_err() {
                return false;
            }
        }
        true
    }

    /// A statement as the client would send it, classified and chained.
    fn item(&mut self, mut stmt: Statement, shift: u64) -> Item {
        if let Some(text) = strip_cr(&stmt.text) {
            stmt.text = text;
        }
        // In a set whose characters hold ASCII bytes, the scanners below
        // (which read byte by byte) read the text with those bytes hidden;
        // the comments of such a statement stay, for the server to skip
        // as it reads: cutting them here cut `/* .. */` out of a string
        // after a `ソ` (0x83 0x5C) and the server stored the rest.
        let hidden = sqlfleet_dump::lex::hide_inner_ascii(&stmt.text, stmt.dialect);
        if !self.keep_comments && hidden.is_none() {
            if let Some(text) = strip_comments(&stmt.text, self.escapes) {
                stmt.text = text;
            }
        }
        let scan: &[u8] = hidden.as_deref().unwrap_or(&stmt.text);
        stmt.offset += shift;
        stmt.end += shift;
        self.read.fetch_max(stmt.end, Ordering::Relaxed);
        let kind = classify(scan);
        if kind == Kind::Session {
            if let Some(on) = backslash_escapes_after(scan) {
                self.escapes = on;
            }
        }
        let traits = inspect(scan);
        let chain = self.chain.add(stmt.offset, &stmt.text);
        Item {
            stmt,
            kind,
            traits,
            chain,
        }
    }

    fn resolve(&self, path: &str) -> std::path::PathBuf {
        let p = std::path::Path::new(path);
        if p.is_absolute() {
            return p.to_path_buf();
        }
        match &self.base_dir {
            Some(d) if d.join(p).exists() => d.join(p),
            _ => p.to_path_buf(),
        }
    }

    /// Reads a sourced file in place of its `source` command (which ends
    /// at virtual offset `at`): its statements follow, then the file that
    /// sourced it goes on. Returns the bytes it spliced in (its own and
    /// those of the files it sourced), or `None` when reading stopped.
    fn source(
        &mut self,
        cmd: &Statement,
        path: &str,
        at: u64,
        depth: usize,
    ) -> Result<Option<u64>, SplitError> {
        let here = |what: String| SplitError::Syntax {
            offset: cmd.offset,
            line: cmd.line,
            what,
        };
        if depth >= MAX_SOURCE_DEPTH {
            return Err(here(format!("'source {path}': sourced files nest deeper than {MAX_SOURCE_DEPTH} (a file that sources itself?)")));
        }
        let full = self.resolve(path);
        let opened = sqlfleet_dump::reader::open(&full)
            .map_err(|e| here(format!("'source {path}': {}: {e}", full.display())))?;
        let origin: Arc<str> = full.display().to_string().into();
        let named = |e: SplitError| {
            let (offset, line, what) = match e {
                SplitError::Syntax { offset, line, what } => (offset, line, what),
                SplitError::Io { offset, line, what } => (offset, line, what),
            };
            here(format!(
                "in {origin} (sourced here), byte offset {offset}, line {line}: {what}"
            ))
        };
        self.splice(opened.reader, &origin, at, depth, false)
            .map_err(named)
    }

    /// Reads one file's statements as if they stood at virtual offset
    /// `at` of the stream (a sourced file, or a directory's file, whose
    /// statements end only at a `;` that ends a line: `line_delimiter`).
    /// Errors are the file's own (its offsets and lines). Returns the
    /// bytes spliced in, or `None` when reading stopped.
    fn splice(
        &mut self,
        reader: Box<dyn Read + Send>,
        origin: &Arc<str>,
        at: u64,
        depth: usize,
        line_delimiter: bool,
    ) -> Result<Option<u64>, SplitError> {
        let mut sp = Splitter::new(reader);
        sp.set_line_delimiter(line_delimiter);
        sp.max_statement = self.max_statement;
        sp.set_backslash_escapes(self.escapes);
        sp.set_charset(self.charset);
        let mut inner = 0u64;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let Some(mut stmt) = sp.next_statement()? else {
                break;
            };
            if let Some(next) = stmt.source.clone() {
                match self.source(&stmt, &next, at + stmt.end + inner, depth + 1)? {
                    Some(n) => inner += n,
                    None => return Ok(None),
                }
                continue;
            }
            stmt.origin = Some(origin.clone());
            self.charset = sp.charset();
            let item = self.item(stmt, at + inner);
            sp.set_backslash_escapes(self.escapes);
            if !self.emit(Msg::Item(Box::new(item))) {
                return Ok(None);
            }
        }
        Ok(Some(sp.bytes_read() + inner))
    }
}

/// Reads a mydumper directory: its plan's statements and files, one
/// after another, as one stream.
fn read_dir(
    dir: crate::dir::DirInput,
    load_id: Option<String>,
    opts: &ReadOptions,
    tx: &mpsc::Sender<Msg>,
    stop: &AtomicBool,
) {
    let mut r = Reading::new(opts, tx, stop);
    if !r.send_id(load_id.unwrap_or(dir.id), true) {
        return;
    }
    let own: Arc<str> = format!("{} (a statement of the load's own)", dir.dir.display()).into();
    let mut at = 0u64;
    for part in dir.parts {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match part {
            crate::dir::Part::Sql(q) => {
                let len = q.len() as u64;
                let stmt = Statement {
                    offset: at,
                    end: at + len,
                    line: 0,
                    text: q.into_bytes(),
                    source: None,
                    origin: Some(own.clone()),
                    vertical: false,
                    // The load's own statements, in UTF-8.
                    dialect: Default::default(),
                };
                let item = r.item(stmt, 0);
                if !r.emit(Msg::Item(Box::new(item))) {
                    return;
                }
                at += len;
            }
            crate::dir::Part::File(path) => {
                let origin: Arc<str> = path.display().to_string().into();
                let read = sqlfleet_dump::reader::open_counted(&path, opts.raw_read.clone())
                    .map_err(|e| SplitError::Io {
                        offset: 0,
                        line: 0,
                        what: e.to_string(),
                    })
                    .and_then(|o| r.splice(o.reader, &origin, at, 0, true));
                match read {
                    Ok(Some(n)) => at += n,
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.blocking_send(Msg::FileError(path, e));
                        return;
                    }
                }
            }
        }
    }
    let _ = tx.blocking_send(Msg::Done {
        bytes: at,
        cut_short: false,
    });
}

fn read_all(
    reader: Box<dyn Read + Send>,
    size: Option<u64>,
    load_id: Option<String>,
    opts: &ReadOptions,
    tx: &mpsc::Sender<Msg>,
    stop: &AtomicBool,
) {
    let mut sp = Splitter::new(Hashing {
        inner: reader,
        id: IdHasher::default(),
        head: Vec::new(),
        tail: Vec::new(),
    });
    sp.max_statement = opts.max_statement;
    sp.set_charset(opts.charset);
    let mut r = Reading::new(opts, tx, stop);
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let next = sp.next_statement();
        if !r.id_sent {
            if let Some(what) = not_sql(&sp.get_ref().head) {
                let _ = tx.blocking_send(Msg::Error(SplitError::Syntax {
                    offset: 0,
                    line: 1,
                    what: what.into(),
                }));
                return;
            }
        }
        let mut finished = false;
        match next {
            Ok(Some(stmt))
                if sp.ended_without_delimiter() && is_dump_header(&sp.get_ref().head) =>
            {
                // A dump tool ends every statement with ';': this one was
                // cut short. Said before it reaches the server (whose
                // answer would be a 1064 "near ''").
                finished = true;
                let e = SplitError::Syntax {
                    offset: stmt.offset + r.shift,
                    line: stmt.line,
                    what: "the dump ends inside this statement, which has no ';' (truncated dump? mysqldump and mariadb-dump end every statement with one; a copy still under way: once it is whole, --resume loads the rest)".into(),
                };
                if !r.emit(Msg::Error(e)) {
                    return;
                }
            }
            Ok(Some(stmt)) => {
                if let Some(path) = stmt.source.clone() {
                    let at = stmt.end + r.shift;
                    r.charset = sp.charset();
                    match r.source(&stmt, &path, at, 0) {
                        Ok(Some(n)) => {
                            r.shift += n;
                            sp.set_backslash_escapes(r.escapes);
                            sp.set_charset(r.charset);
                        }
                        Ok(None) => return,
                        Err(e) => {
                            finished = true;
                            if !r.emit(Msg::Error(e)) {
                                return;
                            }
                        }
                    }
                } else {
                    let shift = r.shift;
                    let item = r.item(stmt, shift);
                    sp.set_backslash_escapes(r.escapes);
                    if !r.emit(Msg::Item(Box::new(item))) {
                        return;
                    }
                }
            }
            Ok(None) => finished = true,
            Err(e) => {
                finished = true;
                let e = match e {
                    SplitError::Syntax { offset, line, what } => SplitError::Syntax {
                        offset: offset + r.shift,
                        line,
                        what,
                    },
                    other => other,
                };
                if !r.emit(Msg::Error(e)) {
                    return;
                }
            }
        }
        if !r.id_sent {
            let h = sp.get_ref();
            if h.id.is_full() || finished {
                let id = load_id.clone().unwrap_or_else(|| h.id.finish(size, ""));
                let dump = is_dump_header(&h.head);
                if !r.send_id(id, dump) {
                    return;
                }
            }
        }
        if finished {
            let h = sp.get_ref();
            let _ = tx.blocking_send(Msg::Done {
                bytes: sp.bytes_read() + r.shift,
                cut_short: lacks_trailer(&h.head, &h.tail),
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
