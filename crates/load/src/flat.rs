//! `sqlfleet load --into DB.TABLE --format csv|tsv FILE...`: flat files cut
//! into chunks at record boundaries (one pass), each chunk loaded by a
//! worker with `LOAD DATA LOCAL` and journaled in the same transaction.

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mysql_async::prelude::Queryable;
use sqlfleet_conn::quote::ident;
use sqlfleet_conn::Target;
use sqlfleet_flat::{Checks, Chunk, Chunker, FlatError, Format};
use tokio::sync::{mpsc, oneshot};

use crate::chunk_job::ChunkWork;
use crate::engine::{Engine, EngineOptions};
use crate::error::LoadError;
use crate::identity::{self, IdHasher, ID_BYTES};
use crate::job::{Job, Work};
use crate::journal::{self, Ranges, Start};
use crate::progress;
use crate::session::SessionConn;
use crate::summary::Summary;

#[derive(Debug, Clone)]
pub struct FlatOptions {
    pub target: Target,
    /// Whether the load writes the server's binary log.
    pub binlog: crate::session::Binlog,
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
pub async fn load_flat(opts: FlatOptions) -> Result<Summary, LoadError> {
    let started = Instant::now();
    opts.format.check().map_err(|e| setup(e.to_string()))?;
    let (db, table) = match opts.into.split_once('.') {
        Some((d, t)) => (d.to_string(), t.to_string()),
        None => match &opts.target.database {
            Some(d) => (d.clone(), opts.into.clone()),
            None => {
                return Err(setup(format!(
                    "--into {}: name the database (DB.TABLE or -D DB)",
                    opts.into
                )))
            }
        },
    };
    let table_sql = format!("{}.{}", ident(&db), ident(&table));
    let mut control = SessionConn::open(&opts.target, opts.binlog).await?;
    let endpoint = opts.target.endpoint.to_string();
    let cols: Vec<(String, Option<String>, String, Option<u8>)> = control
        .conn
        .exec(
            format!(
                "SELECT COLUMN_NAME, CHARACTER_SET_NAME, EXTRA, {} FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                crate::queue::TAKES_SEQUENCE
            ),
            (&db, &table),
        )
        .await
        .map_err(|e| {
            setup(format!(
                "{endpoint}: reading the columns of {table_sql}: {}",
                crate::error::describe(&e).1
            ))
        })?;
    if cols.is_empty() {
        return Err(setup(format!(
            "{endpoint}: table {table_sql} does not exist (create it before loading)"
        )));
    }
    // A Galera node replicates InnoDB tables only.
    let cluster = crate::galera::detect(&mut control.conn)
        .await
        .map_err(|e| setup(format!("{endpoint}: reading its wsrep settings: {e}")))?;
    if let Some(what) = cluster.as_ref().and_then(|c| c.binlog_refusal(opts.binlog)) {
        return Err(setup(format!("{endpoint}: {what}")));
    }
    if let Some(c) = &cluster {
        let engine: Option<String> = control
            .conn
            .exec_first(
                "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                (&db, &table),
            )
            .await
            .map_err(|e| setup(format!("{endpoint}: reading the engine of {table_sql}: {e}")))?;
        let e = crate::galera::Engine::Named(engine.unwrap_or_default().to_ascii_uppercase());
        if let Some(why) = crate::galera::refusal(&e, false, &c.default_engine) {
            return Err(setup(crate::galera::message(
                c,
                &[crate::galera::Finding {
                    line: 0,
                    table: table_sql.clone(),
                    why,
                }],
            )));
        }
    }
    let auto_inc_col = cols
        .iter()
        .find(|(_, _, extra, _)| extra.contains("auto_increment"))
        .map(|(n, ..)| n.clone());
    let auto_inc = auto_inc_col.is_some();
    let triggers: Option<u64> = control
        .conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TRIGGERS \
             WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?",
            (&db, &table),
        )
        .await
        .map_err(|e| {
            setup(format!(
                "{endpoint}: reading the triggers of {table_sql}: {}",
                crate::error::describe(&e).1
            ))
        })?;
    // Values the server gives rows in the order they arrive: an
    // AUTO_INCREMENT or `DEFAULT NEXTVAL(...)` column the file leaves out.
    let server_given: Vec<String> = cols
        .iter()
        .filter(|(_, _, extra, sequenced)| {
            extra.contains("auto_increment") || sequenced.unwrap_or(0) > 0
        })
        .map(|(n, ..)| n.clone())
        .collect();
    let cols: Vec<(String, Option<String>)> =
        cols.into_iter().map(|(n, cs, _, _)| (n, cs)).collect();
    let chosen: Vec<(String, Option<String>)> = match &opts.columns {
        None => cols.clone(),
        Some(list) => {
            let mut v = Vec::new();
            for c in list {
                match cols.iter().find(|(n, _)| n.eq_ignore_ascii_case(c)) {
                    Some(col) => v.push(col.clone()),
                    None => {
                        return Err(setup(format!("--columns: {table_sql} has no column '{c}'")))
                    }
                }
            }
            v
        }
    };
    // Rows that get server-given values or fire triggers load in file
    // order, one chunk at a time, as LOAD DATA INFILE puts them in (chunks
    // in parallel gave the same rows other ids, silently).
    let left_out = server_given
        .iter()
        .any(|n| !chosen.iter().any(|(c, _)| c.eq_ignore_ascii_case(n)));
    let in_file_order = left_out || triggers.unwrap_or(0) > 0;
    // InnoDB reserves AUTO_INCREMENT values for a LOAD DATA in growing
    // blocks and drops what a statement did not use: ids left to the
    // server follow one LOAD DATA only when the file is one statement.
    let auto_inc_left_out = auto_inc_col
        .as_ref()
        .filter(|col| !chosen.iter().any(|(c, _)| c.eq_ignore_ascii_case(col)));
    if let Some(col) = auto_inc_left_out {
        for f in &opts.files {
            // stdin is not opened here (it can be read once only) and is of
            // unknown size; a file that does not open is named below.
            let (compressed, size) = if sqlfleet_dump::reader::is_stdin(f) {
                (false, None)
            } else {
                match sqlfleet_dump::reader::open(f) {
                    Ok(o) => (
                        o.compression != sqlfleet_dump::reader::Compression::None,
                        o.size,
                    ),
                    Err(_) => continue,
                }
            };
            if several_statements(compressed, size, opts.chunk_bytes) {
                return Err(setup(format!(
                    "{}: the file leaves the AUTO_INCREMENT column `{col}` of {table_sql} to the server, which reserves ids per LOAD DATA statement: loaded in several statements the rows would get other ids than one LOAD DATA gives them. Put the ids in the file, or load it as one statement with --chunk-bytes {} or more",
                    f.display(),
                    size.map_or("(its size)".to_string(), |n| n.to_string()),
                )));
            }
        }
    }
    let columns_sql = match &opts.columns {
        Some(_) => format!(
            "({})",
            chosen
                .iter()
                .map(|(n, _)| ident(n))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => String::new(),
    };
    let utf8 = opts.charset.starts_with("utf8")
        && chosen
            .iter()
            .any(|(_, cs)| cs.as_deref().is_some_and(|c| c.starts_with("utf8")));
    // Ids the file leaves to the server (NULL or 0 in the AUTO_INCREMENT
    // column) cannot be one LOAD DATA's when the file is loaded in several
    // statements: the chunker refuses such a record, naming its line.
    let id_field = auto_inc_col.as_ref().and_then(|col| {
        chosen
            .iter()
            .position(|(c, _)| c.eq_ignore_ascii_case(col))
            .map(|field| (field, col.clone()))
    });
    let server_assigns = match id_field {
        Some((field, column)) => {
            let mode: Option<String> = control
                .conn
                .query_first("SELECT @@SESSION.sql_mode")
                .await
                .unwrap_or(None);
            Some(sqlfleet_flat::ServerAssigns {
                field,
                column,
                zero_is_value: mode
                    .is_some_and(|m| m.to_ascii_uppercase().contains("NO_AUTO_VALUE_ON_ZERO")),
            })
        }
        None => None,
    };
    let checks = Checks {
        fields: Some(chosen.len()),
        utf8,
        header: opts.header,
        server_assigns: None,
    };
    let format = Arc::new(opts.format.clone());
    let read_counter = Arc::new(AtomicU64::new(0));
    let mut sizes = Some(0u64);
    for f in &opts.files {
        let size = if sqlfleet_dump::reader::is_stdin(f) {
            None
        } else {
            std::fs::metadata(f).ok().map(|m| m.len())
        };
        sizes = sizes.zip(size).map(|(a, b)| a + b);
    }
    let engine = Engine::start(EngineOptions {
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
        total: sizes,
        started,
        galera: cluster.clone(),
        // Chunks go as LOAD DATA pieces, each well under the limit.
        max_packet: None,
    })?;
    let shared = engine.shared.clone();

    let mut failure: Option<LoadError> = None;
    let mut runs: Vec<(String, Vec<oneshot::Receiver<()>>)> = Vec::new();
    let mut interrupt = opts.interrupt.clone();
    let watcher = crate::run::watch_interrupt(opts.interrupt.clone(), shared.clone());
    let mut was_interrupted = false;
    let mut skipped = 0;
    let mut already_done = 0;
    let mut bytes = 0;
    'files: for path in &opts.files {
        let shown = sqlfleet_dump::reader::display_name(path);
        let opened = match sqlfleet_dump::reader::open(path) {
            Ok(o) => o,
            Err(source) => {
                failure = Some(LoadError::Open {
                    path: path.clone(),
                    source,
                });
                break;
            }
        };
        let (tx, mut rx) = mpsc::channel(4);
        let reading = ReaderSetup {
            size: opened.size,
            salt: format!("{table_sql}{columns_sql}"),
            format: opts.format.clone(),
            checks: Checks {
                // Only a file of several chunks is several statements.
                server_assigns: server_assigns.clone().filter(|_| {
                    several_statements(
                        opened.compression != sqlfleet_dump::reader::Compression::None,
                        opened.size,
                        opts.chunk_bytes,
                    )
                }),
                ..checks.clone()
            },
            chunk_bytes: opts.chunk_bytes,
            read_counter: read_counter.clone(),
        };
        let reader = spawn_reader(opened.reader, reading, tx);
        let load_id = match rx.recv().await {
            Some(Msg::Id(id)) => id,
            Some(Msg::Error(e)) => {
                failure = Some(LoadError::Flat {
                    path: path.clone(),
                    source: e,
                });
                break;
            }
            _ => {
                failure = Some(LoadError::Empty { path: path.clone() });
                break;
            }
        };
        // What an earlier load of this name recorded: the chunks it
        // committed, each with its bytes' value, and whether it finished.
        let (ranges, chains, was_done, horizon): (Ranges, HashMap<u64, String>, bool, u64) =
            match journal::prepare(
                &mut control.conn,
                &endpoint,
                &load_id,
                &format!("{shown} -> {table_sql}"),
                opts.resume,
                opts.restart,
                opened.size,
                None,
            )
            .await
            {
                Ok(Start::AlreadyDone) => {
                    already_done += 1;
                    eprintln!("sqlfleet load: {shown} was already loaded completely into {table_sql} (load id {load_id}); skipped");
                    drop(rx);
                    let _ = reader.join();
                    continue;
                }
                Ok(Start::Resume(r)) => (r.ranges, r.chains, r.done, r.horizon),
                Ok(Start::Fresh) => Default::default(),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            };
        let mut done = Vec::new();
        let mut saw = false;
        let mut held: Vec<Chunk> = Vec::new();
        let mut finished = false;
        loop {
            let msg = tokio::select! {
                m = rx.recv() => m,
                _ = crate::run::interrupted(&mut interrupt) => {
                    was_interrupted = true;
                    // Chunks in flight stop and roll back; none starts.
                    shared.interrupted.store(true, Ordering::Relaxed);
                    runs.push((load_id, done));
                    break 'files;
                }
            };
            let Some(msg) = msg else { break };
            if shared.stopped() {
                break 'files;
            }
            if shared.is_interrupted() {
                was_interrupted = true;
                runs.push((load_id, done));
                break 'files;
            }
            match msg {
                Msg::Chunk(c) => {
                    saw = true;
                    bytes += c.end - c.offset;
                    if ranges.contains(c.offset) {
                        // Skipped only for the same bytes at the same place.
                        let have = identity::hex(&identity::chunk_value(c.offset, &c.data));
                        if let Some(why) = not_the_same(chains.get(&c.end), &have) {
                            failure = Some(setup(format!(
                                "{shown}: not the file the earlier load of this name read: the chunk at byte offset {} {why}; refusing to {} (use --restart to load this one from the start)",
                                c.offset,
                                if was_done { "call it loaded" } else { "resume" }
                            )));
                            break 'files;
                        }
                        skipped += 1;
                        continue;
                    }
                    if was_done {
                        failure = Some(setup(format!(
                            "{shown}: the chunk at byte offset {} is not among the finished load's chunks: load it with the same --chunk-bytes, or with --restart",
                            c.offset
                        )));
                        break 'files;
                    }
                    if ranges.intersects(c.offset, c.end) {
                        failure = Some(setup(format!(
                            "{shown}: chunk at byte offset {} does not line up with the interrupted run's chunks: resume with the same --chunk-bytes",
                            c.offset
                        )));
                        break 'files;
                    }
                    // On a resume, new chunks wait until every committed
                    // one up to the furthest is checked: a changed input
                    // is refused before anything of it runs.
                    let past = c.end >= horizon;
                    held.push(c);
                    if !past {
                        continue;
                    }
                }
                Msg::Error(e) => {
                    failure = Some(LoadError::Flat {
                        path: path.clone(),
                        source: e,
                    });
                    break 'files;
                }
                Msg::Done => finished = true,
                Msg::Id(_) => continue,
            }
            for c in held.drain(..) {
                let (tx, rx) = oneshot::channel();
                let n = c.data.len();
                let job = Job {
                    work: Work::Chunk(Box::new(ChunkWork {
                        file: shown.clone(),
                        load_id: load_id.clone(),
                        table: table_sql.clone(),
                        columns: columns_sql.clone(),
                        fields: chosen.len(),
                        format: format.clone(),
                        charset: opts.charset.clone(),
                        strict: opts.strict,
                        offset: c.offset,
                        end: c.end,
                        record_lines: c.record_lines,
                        data: bytes::Bytes::from(c.data),
                    })),
                    prelude_len: 0,
                    done: tx,
                };
                engine
                    .queue
                    .push(&table_sql, auto_inc, in_file_order, job, n)
                    .await;
                done.push(rx);
            }
            if finished {
                break;
            }
        }
        let _ = reader.join();
        if !saw && ranges.is_empty() {
            failure = Some(LoadError::Empty { path: path.clone() });
            break;
        }
        if was_done {
            // Every chunk met its recorded bytes: loaded, and checked.
            already_done += 1;
            eprintln!("sqlfleet load: {shown} was already loaded completely into {table_sql} (load id {load_id}; every chunk checked against what was loaded); skipped");
            continue;
        }
        runs.push((load_id, done));
    }
    engine.finish().await;
    watcher.abort();
    let was_interrupted = was_interrupted || shared.is_interrupted();
    let stmt_failure = shared
        .failure
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let rows = shared.rows.load(Ordering::Relaxed);
    for (id, done) in runs {
        for rx in done {
            let _ = rx.await;
        }
        let end = if was_interrupted && stmt_failure.is_none() && failure.is_none() {
            journal::End::Interrupted
        } else if failure.is_none() && stmt_failure.is_none() {
            journal::End::Done
        } else {
            journal::End::Failed
        };
        let _ = journal::finish(&mut control.conn, &endpoint, &id, end, bytes, rows).await;
    }
    let _ = control.conn.disconnect().await;
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(failure) = stmt_failure {
        return Err(LoadError::Chunk {
            failure: Box::new(failure),
        });
    }
    if was_interrupted {
        return Err(LoadError::Interrupted {
            path: opts.files.first().cloned().unwrap_or_default(),
            unit: "chunks",
            statements: shared.batches.load(Ordering::Relaxed),
            rows,
        });
    }
    let seconds = started.elapsed().as_secs_f64();
    let server_counts = *shared.server.lock().unwrap_or_else(|e| e.into_inner());
    let warning_texts = shared
        .warning_texts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(Summary {
        unit: "chunks",
        binlog_skipped: opts.binlog == crate::session::Binlog::Skip,
        source: opts
            .files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        load_id: String::new(),
        complete: true,
        already_done: already_done == opts.files.len(),
        bytes,
        statements: shared.batches.load(Ordering::Relaxed),
        batches: shared.batches.load(Ordering::Relaxed),
        rows,
        tables: 1,
        seconds,
        rows_per_sec: rows as f64 / seconds.max(1e-9),
        mb_per_sec: bytes as f64 / 1e6 / seconds.max(1e-9),
        retries: shared.retries.load(Ordering::Relaxed),
        skipped_on_resume: skipped,
        warning_count: shared.warnings.load(Ordering::Relaxed),
        server: server_counts,
        warnings: warning_texts,
        threads: opts.threads,
        mode: if in_file_order {
            "in file order"
        } else {
            "parallel"
        },
        ..Summary::default()
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
