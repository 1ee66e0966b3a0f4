//! `sqlfleet load --into DB.TABLE --format csv|tsv FILE...`: flat files cut
//! into chunks at record boundaries (one pass), each chunk loaded by a
//! worker with `LOAD DATA LOCAL` and journaled in the same transaction.

mod table;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use sqlfleet_conn::Target;
use sqlfleet_flat::{Checks, Chunk, Chunker, FlatError, Format};
use tokio::sync::{mpsc, oneshot};

use crate::chunk_job::ChunkWork;
use crate::engine::{self, Connected, Ended, Engine, EngineOptions, Next};
use crate::error::LoadError;
use crate::identity::{self, IdHasher, ID_BYTES};
use crate::job::{Job, Work};
use crate::journal::{self, Ranges, Start};
use crate::progress;
use crate::summary::Summary;
use table::FlatTable;

#[derive(Debug, Clone)]
pub struct FlatOptions {
    pub target: Target,
    /// Whether the load writes the server's binary log.
    pub binlog: crate::session::Binlog,
    /// See [`crate::LoadOptions::writes_on_read_only`].
    pub writes_on_read_only: bool,
    pub files: Vec<PathBuf>,
    /// `db.table` or `table` (then the connection's database).
    pub into: String,
    pub format: Format,
    pub header: bool,
    pub columns: Option<Vec<String>>,
    pub threads: usize,
    pub resume: bool,
    pub restart: bool,
    pub strict: bool,
    pub progress: progress::Mode,
    pub chunk_bytes: usize,
    pub read_ahead: usize,
    pub charset: String,
    pub fast_path: bool,
    /// SIGINT or SIGTERM (see [`crate::LoadOptions::interrupt`]).
    pub interrupt: Option<tokio::sync::watch::Receiver<bool>>,
}

/// What the reader thread sends for one file.
enum Msg {
    /// The file's identity, before its first chunk.
    Id(String),
    Chunk(Chunk),
    Error(FlatError),
    Done,
}

/// How to read one file.
struct ReaderSetup {
    size: Option<u64>,
    /// Mixed into the identity: the target table and columns.
    salt: String,
    format: Format,
    checks: Checks,
    chunk_bytes: usize,
    read_counter: Arc<AtomicU64>,
}

/// Reads, hashes (first MiB) and chunks one file in a blocking thread.
fn spawn_reader(
    reader: Box<dyn Read + Send>,
    r: ReaderSetup,
    tx: mpsc::Sender<Msg>,
) -> std::thread::JoinHandle<()> {
    let ReaderSetup {
        size,
        salt,
        format,
        checks,
        chunk_bytes,
        read_counter,
    } = r;
    std::thread::spawn(move || {
        let mut head = Vec::new();
        let mut reader = reader;
        // The identity: the first MiB, the size and the target table.
        let mut buf = vec![0; 64 * 1024];
        while head.len() < ID_BYTES {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.blocking_send(Msg::Error(FlatError::Io {
                        offset: head.len() as u64,
                        what: e.to_string(),
                    }));
                    return;
                }
            }
        }
        let mut h = IdHasher::default();
        h.update(&head);
        let id = h.finish(size, &salt);
        if tx.blocking_send(Msg::Id(id)).is_err() {
            return;
        }
        let mut chunker = Chunker::new(
            std::io::Cursor::new(head).chain(reader),
            format,
            checks,
            chunk_bytes,
        );
        loop {
            match chunker.next_chunk() {
                Ok(Some(c)) => {
                    read_counter.fetch_add(c.end - c.offset, Ordering::Relaxed);
                    if tx.blocking_send(Msg::Chunk(c)).is_err() {
                        return;
                    }
                }
                Ok(None) => {
                    let _ = tx.blocking_send(Msg::Done);
                    return;
                }
                Err(e) => {
                    let _ = tx.blocking_send(Msg::Error(e));
                    return;
                }
            }
        }
    })
}

/// Whether a file will be loaded in more than one LOAD DATA statement:
/// bigger than a chunk, of unknown size (stdin), or compressed (its size
/// says nothing of its chunks).
fn several_statements(compressed: bool, size: Option<u64>, chunk_bytes: usize) -> bool {
    compressed || size.is_none_or(|n| n as usize > chunk_bytes)
}

fn setup(what: String) -> LoadError {
    LoadError::Setup { what }
}

/// Loads CSV/TSV files into one table.
pub async fn load_flat(mut opts: FlatOptions) -> Result<Summary, LoadError> {
    let started = Instant::now();
    // The files are read as the server reads them: in their character set.
    // Not in one whose every character is two or four bytes: LOAD DATA
    // reads its terminators as single bytes there (the server's manual:
    // such files cannot be loaded), and so would the chunks.
    let wide = ["ucs2", "utf16", "utf16le", "utf32"];
    if wide.contains(&opts.charset.to_ascii_lowercase().as_str()) {
        return Err(setup(format!(
            "--character-set {}: LOAD DATA cannot read files in a character set of two- or four-byte characters; convert them to utf8mb4 first (iconv -f {} -t UTF-8)",
            opts.charset,
            opts.charset.to_ascii_uppercase()
        )));
    }
    opts.format.charset = sqlfleet_flat::Multibyte::of_charset(&opts.charset);
    opts.format.check().map_err(|e| setup(e.to_string()))?;
    let Connected {
        session: mut control,
        cluster,
        endpoint,
    } = engine::connect(&opts.target, opts.binlog, opts.writes_on_read_only).await?;
    let table = FlatTable::read(&mut control.conn, &opts, &endpoint, cluster.as_ref()).await?;
    opts.format.binary_fields = table.binary.clone();
    table.refuse_split_ids(&opts)?;
    let read_counter = Arc::new(AtomicU64::new(0));
    let mut engine = Engine::start(EngineOptions {
        target: opts.target.clone(),
        binlog: opts.binlog,
        threads: opts.threads,
        load_id: String::new(),
        resuming: opts.resume,
        continue_on_error: false,
        quarantine: None,
        fast_path: opts.fast_path,
        queue_bytes: opts.read_ahead.max(opts.chunk_bytes),
        progress: opts.progress,
        raw_read: read_counter.clone(),
        compressed: false,
        read: read_counter.clone(),
        total: total_size(&opts.files),
        started,
        galera: cluster,
        // Chunks go as LOAD DATA pieces, each well under the limit.
        max_packet: None,
        interrupt: opts.interrupt.clone(),
    })?;
    let mut files = Files::new(&table, &opts, &endpoint, read_counter);
    for path in &opts.files {
        if files.load(&mut engine, &mut control.conn, path).await == Go::Stop {
            break;
        }
    }
    let mut ended = engine.finish().await;
    let chunk_failure = ended.failure.take();
    let failed = files.failure.is_some() || chunk_failure.is_some();
    files.record_ends(&mut control.conn, failed, &ended).await;
    let _ = control.conn.disconnect().await;
    let (bytes, skipped, already_done) = (files.bytes, files.skipped, files.already_done);
    if let Some(e) = files.failure {
        return Err(e);
    }
    if let Some(failure) = chunk_failure {
        return Err(LoadError::Chunk {
            failure: Box::new(failure),
        });
    }
    ended.interrupt_error(opts.files.first().map_or(Path::new(""), |p| p), "chunks")?;
    let names: Vec<String> = opts.files.iter().map(|p| p.display().to_string()).collect();
    Ok(Summary {
        already_done: already_done == opts.files.len(),
        tables: 1,
        skipped_on_resume: skipped,
        mode: if table.in_file_order {
            "in file order"
        } else {
            "parallel"
        },
        ..ended.summary("chunks", names.join(", "), bytes)
    })
}

/// Whether the load goes on with the next file.
#[derive(Debug, PartialEq, Eq)]
enum Go {
    On,
    Stop,
}

/// The files of one load, one after another, and what they came to.
struct Files<'a> {
    table: &'a FlatTable,
    opts: &'a FlatOptions,
    endpoint: &'a str,
    read_counter: Arc<AtomicU64>,
    /// Each file's load id and its chunks' completions, for its journal.
    runs: Vec<(String, Vec<oneshot::Receiver<()>>)>,
    /// Chunks an earlier load committed.
    skipped: u64,
    /// Files an earlier load loaded completely.
    already_done: usize,
    bytes: u64,
    /// Why the load stopped, if not for a chunk.
    failure: Option<LoadError>,
}

/// What an earlier load of one file recorded: the chunks it committed,
/// each with its bytes' value, whether it finished, and the furthest end.
#[derive(Default)]
struct Earlier {
    ranges: Ranges,
    chains: HashMap<u64, String>,
    done: bool,
    horizon: u64,
}

/// The files' size on disk, when every one's is known.
fn total_size(files: &[PathBuf]) -> Option<u64> {
    let mut total = Some(0u64);
    for f in files {
        let size = if sqlfleet_dump::reader::is_stdin(f) {
            None
        } else {
            std::fs::metadata(f).ok().map(|m| m.len())
        };
        total = total.zip(size).map(|(a, b)| a + b);
    }
    total
}

impl<'a> Files<'a> {
    fn new(
        table: &'a FlatTable,
        opts: &'a FlatOptions,
        endpoint: &'a str,
        read_counter: Arc<AtomicU64>,
    ) -> Files<'a> {
        Files {
            table,
            opts,
            endpoint,
            read_counter,
            runs: Vec::new(),
            skipped: 0,
            already_done: 0,
            bytes: 0,
            failure: None,
        }
    }

    /// Loads one file: reads its identity, asks its journal what an
    /// earlier load did, and queues its chunks.
    async fn load(&mut self, engine: &mut Engine, conn: &mut mysql_async::Conn, path: &Path) -> Go {
        let (opts, table) = (self.opts, self.table);
        let shown = sqlfleet_dump::reader::display_name(path);
        let opened = match sqlfleet_dump::reader::open(path) {
            Ok(o) => o,
            Err(source) => {
                let path = path.to_path_buf();
                return self.stop(LoadError::Open { path, source });
            }
        };
        let several = several_statements(
            opened.compression != sqlfleet_dump::reader::Compression::None,
            opened.size,
            opts.chunk_bytes,
        );
        let (tx, mut rx) = mpsc::channel(4);
        let reading = ReaderSetup {
            size: opened.size,
            salt: format!("{}{}", table.sql, table.columns_sql),
            format: opts.format.clone(),
            checks: Checks {
                fields: Some(table.chosen.len()),
                utf8: table.utf8,
                header: opts.header,
                // Only a file of several chunks is several statements.
                server_assigns: table.server_assigns.clone().filter(|_| several),
            },
            chunk_bytes: opts.chunk_bytes,
            read_counter: self.read_counter.clone(),
        };
        let reader = spawn_reader(opened.reader, reading, tx);
        let load_id = match rx.recv().await {
            Some(Msg::Id(id)) => id,
            Some(Msg::Error(source)) => {
                let path = path.to_path_buf();
                return self.stop(LoadError::Flat { path, source });
            }
            _ => {
                let path = path.to_path_buf();
                return self.stop(LoadError::EmptyFlat { path });
            }
        };
        // One run of a file's load at a time (the lock lives with this
        // connection).
        if let Err(e) = journal::take_turn(conn, self.endpoint, &load_id).await {
            return self.stop(e);
        }
        let name = format!("{shown} -> {}", table.sql);
        let earlier = match journal::prepare(
            conn,
            self.endpoint,
            &load_id,
            &name,
            opts.resume,
            opts.restart,
            opened.size,
            None,
        )
        .await
        {
            Ok(Start::AlreadyDone) => {
                self.already_done += 1;
                eprintln!("sqlfleet load: {shown} was already loaded completely into {} (load id {load_id}); skipped", table.sql);
                drop(rx);
                let _ = reader.join();
                return Go::On;
            }
            Ok(Start::Resume(r)) => Earlier {
                ranges: r.ranges,
                chains: r.chains,
                done: r.done,
                horizon: r.horizon,
            },
            Ok(Start::Fresh) => Earlier::default(),
            Err(e) => return self.stop(e),
        };
        let (go, saw, done) = self
            .chunks(engine, &mut rx, &earlier, &shown, &load_id, path)
            .await;
        drop(rx);
        if go == Go::Stop {
            // (the reader ends at its next chunk, unjoined: it may wait
            // on a slow stdin)
            return go;
        }
        let _ = reader.join();
        if !saw && earlier.ranges.is_empty() {
            let path = path.to_path_buf();
            return self.stop(LoadError::EmptyFlat { path });
        }
        if earlier.done {
            // Every chunk met its recorded bytes: loaded, and checked.
            self.already_done += 1;
            eprintln!("sqlfleet load: {shown} was already loaded completely into {} (load id {load_id}; every chunk checked against what was loaded); skipped", table.sql);
            return Go::On;
        }
        self.runs.push((load_id, done));
        Go::On
    }

    /// Records in each file's journal how the load ended, once its
    /// queued chunks are done.
    async fn record_ends(&mut self, conn: &mut mysql_async::Conn, failed: bool, ended: &Ended) {
        let end = if failed {
            journal::End::Failed
        } else if ended.interrupted {
            journal::End::Interrupted
        } else {
            journal::End::Done
        };
        for (id, done) in std::mem::take(&mut self.runs) {
            for rx in done {
                let _ = rx.await;
            }
            let (bytes, rows) = (self.bytes, ended.rows);
            let _ = journal::finish(conn, self.endpoint, &id, end, bytes, rows).await;
        }
    }

    fn stop(&mut self, e: LoadError) -> Go {
        self.failure = Some(e);
        Go::Stop
    }

    /// Queues one file's chunks; on a resume, the ones an earlier load
    /// committed are checked and skipped, and new ones wait until every
    /// committed one up to the furthest is checked (a changed input is
    /// refused before anything of it runs). Whether it saw a chunk, and
    /// the queued chunks' completions.
    async fn chunks(
        &mut self,
        engine: &mut Engine,
        rx: &mut mpsc::Receiver<Msg>,
        earlier: &Earlier,
        shown: &str,
        load_id: &str,
        path: &Path,
    ) -> (Go, bool, Vec<oneshot::Receiver<()>>) {
        let mut done = Vec::new();
        let mut saw = false;
        let mut held: Vec<Chunk> = Vec::new();
        loop {
            let finished = match engine.next(rx).await {
                Next::Msg(Msg::Chunk(c)) => {
                    saw = true;
                    self.bytes += c.end - c.offset;
                    match admit(&c, earlier, shown) {
                        Ok(Admit::Skip) => {
                            self.skipped += 1;
                            continue;
                        }
                        Ok(Admit::Hold) => {
                            held.push(c);
                            continue;
                        }
                        Ok(Admit::Queue) => held.push(c),
                        Err(e) => return (self.stop(e), saw, done),
                    }
                    false
                }
                Next::Msg(Msg::Error(source)) => {
                    let path = path.to_path_buf();
                    return (self.stop(LoadError::Flat { path, source }), saw, done);
                }
                Next::Msg(Msg::Done) => true,
                Next::Msg(Msg::Id(_)) => continue,
                Next::Closed => break,
                Next::Failed => return (Go::Stop, saw, done),
                Next::Interrupted => {
                    self.runs.push((load_id.to_string(), done));
                    return (Go::Stop, saw, Vec::new());
                }
            };
            for c in held.drain(..) {
                let (tx, rx) = oneshot::channel();
                let n = c.data.len();
                let job = self.job(c, shown, load_id, tx);
                let t = self.table;
                engine
                    .queue
                    .push(&t.sql, t.auto_inc, t.in_file_order, job, n)
                    .await;
                done.push(rx);
            }
            if finished {
                break;
            }
        }
        (Go::On, saw, done)
    }

    fn job(&self, c: Chunk, shown: &str, load_id: &str, done: oneshot::Sender<()>) -> Job {
        let (opts, table) = (self.opts, self.table);
        Job {
            work: Work::Chunk(Box::new(ChunkWork {
                file: shown.to_string(),
                load_id: load_id.to_string(),
                table: table.sql.clone(),
                columns: table.columns_sql.clone(),
                fields: table.chosen.len(),
                format: Arc::new(opts.format.clone()),
                charset: opts.charset.clone(),
                strict: opts.strict,
                offset: c.offset,
                end: c.end,
                record_lines: c.record_lines,
                data: bytes::Bytes::from(c.data),
            })),
            prelude_len: 0,
            done,
        }
    }
}

/// What a chunk read on a resume becomes.
#[derive(Debug, PartialEq, Eq)]
enum Admit {
    /// An earlier load committed these bytes here.
    Skip,
    /// New, before the furthest committed chunk: waits for the check.
    Hold,
    /// New: queued (with any held before it).
    Queue,
}

/// Decides a chunk against what an earlier load of its file recorded;
/// `Err` when the file is not the one it read.
fn admit(c: &Chunk, earlier: &Earlier, shown: &str) -> Result<Admit, LoadError> {
    if earlier.ranges.contains(c.offset) {
        // Skipped only for the same bytes at the same place.
        let have = identity::hex(&identity::chunk_value(c.offset, &c.data));
        if let Some(why) = not_the_same(earlier.chains.get(&c.end), &have) {
            return Err(setup(format!(
                "{shown}: not the file the earlier load of this name read: the chunk at byte offset {} {why}; refusing to {} (use --restart to load this one from the start)",
                c.offset,
                if earlier.done { "call it loaded" } else { "resume" }
            )));
        }
        return Ok(Admit::Skip);
    }
    if earlier.done {
        return Err(setup(format!(
            "{shown}: the chunk at byte offset {} is not among the finished load's chunks: load it with the same --chunk-bytes, or with --restart",
            c.offset
        )));
    }
    if earlier.ranges.intersects(c.offset, c.end) {
        return Err(setup(format!(
            "{shown}: chunk at byte offset {} does not line up with the interrupted run's chunks: resume with the same --chunk-bytes",
            c.offset
        )));
    }
    Ok(if c.end >= earlier.horizon {
        Admit::Queue
    } else {
        Admit::Hold
    })
}

/// Why a chunk cannot be skipped as one an earlier load committed: its
/// recorded value is not `have` (None: the same bytes).
fn not_the_same(recorded: Option<&String>, have: &str) -> Option<&'static str> {
    match recorded {
        Some(r) if r == have => None,
        Some(_) => Some("differs from the one loaded"),
        None => Some(
            "was recorded without its contents (by an older sqlfleet), so this run cannot tell whether it is the same",
        ),
    }
}
