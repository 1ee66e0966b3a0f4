//! One dump load from start to end: open the input, connect, lock, check
//! what a resume may trust, feed the scheduler, report.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mysql_async::prelude::Queryable;
use sqlfleet_conn::Target;
use sqlfleet_dump::Kind;
use tokio::sync::mpsc;

use crate::engine::{self, Connected, Ended, Engine, EngineOptions, Next};
use crate::error::{LoadError, StatementFailure};
use crate::journal::{self, Start};
use crate::schedule::{Regime, Scheduler};
use crate::session::SessionConn;
use crate::source::{self, Msg};
use crate::summary::Summary;
use crate::{dir, galera, identity, progress};

/// What to load and how.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub target: Target,
    /// Whether the load writes the server's binary log.
    pub binlog: crate::session::Binlog,
    /// Load into a server that reports read_only = ON (a replica) too;
    /// without it such a server is refused before anything runs.
    pub writes_on_read_only: bool,
    pub path: PathBuf,
    pub threads: usize,
    pub resume: bool,
    pub restart: bool,
    pub continue_on_error: bool,
    pub quarantine: Option<PathBuf>,
    pub defer_indexes: bool,
    /// Drop each table before its CREATE TABLE runs (myloader's
    /// `--overwrite-tables`): for dumps and directories made without
    /// DROP TABLE statements, into a database that has the tables.
    pub overwrite_tables: bool,
    pub progress: progress::Mode,
    /// Database for statements before the dump's first `USE`.
    pub database: Option<String>,
    /// Target size of one transaction's statements.
    pub batch_bytes: usize,
    /// Overrides the dump's identity (needed to resume a stdin stream
    /// whose first MiB is not unique).
    pub load_id: Option<String>,
    /// Send INSERT batches as LOAD DATA LOCAL when that is exact.
    pub fast_path: bool,
    /// Bytes of batches the scheduler may queue ahead of the workers
    /// (so several tables load at once; bounds memory).
    pub read_ahead: usize,
    /// Run every statement in file order on one connection, as the
    /// stock client does (the default for files that are not dumps).
    pub serial: bool,
    /// Keep comments inside statements (the client's `--comments`); by
    /// default they are removed as the client removes them.
    pub comments: bool,
    /// Turns true on SIGINT or SIGTERM: the load stops reading, lets what
    /// it started commit, journals it and says how to go on.
    pub interrupt: Option<tokio::sync::watch::Receiver<bool>>,
}

/// Holds back what would run on `--resume` until the input has been
/// checked against the interrupted load's journal up to the furthest
/// point it recorded (the statement chain at every recorded end), so a
/// different dump is refused before anything of it runs.
struct ResumeCheck {
    horizon: u64,
    chains: std::collections::HashMap<u64, String>,
    verified: bool,
    /// The last recorded end that matched (for the message).
    matched: u64,
    held: Vec<source::Item>,
}

impl ResumeCheck {
    fn new(r: &journal::Resume) -> ResumeCheck {
        ResumeCheck {
            horizon: r.horizon,
            chains: r.chains.clone(),
            verified: r.horizon == 0,
            matched: 0,
            held: Vec::new(),
        }
    }

    /// Checks an item; `Err` says where the input differs.
    fn check(&mut self, item: &source::Item) -> Result<(), String> {
        let end = item.stmt.end;
        if let Some(want) = self.chains.get(&end) {
            if *want != identity::hex(&item.chain) {
                return Err(format!(
                    "this is not the input the interrupted load read: it first differs between byte {} and byte {end} (line {}); refusing to resume (use --restart to load it from the start)",
                    self.matched, item.stmt.line
                ));
            }
            self.matched = end;
        }
        if !self.verified && end >= self.horizon {
            if end != self.horizon {
                // No statement ended where the journal's last one did: the
                // statements lie elsewhere, so no recorded chain was met.
                return Err(format!(
                    "this is not the input the interrupted load read: no statement ends at byte {} where its journal's last one did (first differs after byte {}); refusing to resume (use --restart)",
                    self.horizon, self.matched
                ));
            }
            self.verified = true;
        }
        Ok(())
    }
}

/// Loads a dump or a mydumper directory. `Ok` also when statements were
/// quarantined (see `Summary::errors`); `Err` when the load stopped.
pub async fn load(mut opts: LoadOptions) -> Result<Summary, LoadError> {
    let started = Instant::now();
    let source_name = sqlfleet_dump::reader::display_name(&opts.path);
    let mut setup = Setup::open(&mut opts).await?;
    let mut reading = Reading::start(&opts, &mut setup.input)?;
    let (input_id, is_dump) = reading.identify(&opts.path).await?;
    let ids = Ids::bind(&opts, input_id);
    let Some(begun) = begin(&opts, &mut setup, &ids, &source_name).await? else {
        reading.stop_and_join();
        return Ok(Summary {
            unit: "statements",
            source: source_name,
            load_id: ids.load_id,
            complete: true,
            already_done: true,
            seconds: started.elapsed().as_secs_f64(),
            threads: opts.threads,
            ..Summary::default()
        });
    };
    let mut engine = Engine::start(setup.engine_options(&opts, &ids, &reading, started))?;
    let mut check = ResumeCheck::new(&begun.resume);
    // A finished load resumed: "already loaded" once the whole input met
    // its recorded chains (the check refuses another input first).
    let from_done = begun.resume.done;
    let regime = regime(is_dump, opts.serial, &source_name);
    let (position, endpoint) = (setup.input.position.take(), setup.endpoint.clone());
    let mut sched = schedule(&engine, setup, begun, &opts, regime);
    // A dump that goes to another database than the one -D named would
    // write where the user did not mean (see `Scheduler::elsewhere`).
    sched.named_database = opts.target.database.clone().filter(|_| is_dump);
    if sched.named_database.is_some() {
        // How the server compares database names (unread: as written).
        use mysql_async::prelude::Queryable;
        let lctn: Option<u32> = sched
            .bookkeeping
            .query_first("SELECT @@lower_case_table_names")
            .await
            .ok()
            .flatten();
        sched.names_fold = lctn.is_some_and(|v| v != 0);
    }
    let fed = feed(
        &mut engine,
        &mut sched,
        &mut reading,
        &mut check,
        &opts.path,
    )
    .await;
    reading.stop();
    if fed.changed.is_none() {
        sched.finish().await;
    }
    let prelude = engine.ctx.prelude.clone();
    let mut ended = engine.finish().await;
    reading.stop_and_join();
    let failure = ended.failure.take();
    let closing = (&ended, &fed, &opts, &ids);
    let closed = close(sched, &prelude, failure, closing, &source_name, &endpoint).await;
    let bytes = fed.bytes;
    verdict(fed, closed.failure, &ended, &opts.path)?;
    let mut summary = ended.summary("statements", source_name, bytes);
    summary.load_id = ids.load_id;
    summary.already_done = from_done && summary.statements == 0;
    summary.tables = closed.tables;
    summary.skipped_on_resume = closed.skipped;
    summary.mode = closed.mode;
    summary.warnings = closed
        .warnings
        .into_iter()
        .chain(summary.warnings)
        .collect();
    summary.quarantine = opts.quarantine.clone().filter(|_| opts.continue_on_error);
    summary.source_position = position.map(Into::into);
    Ok(summary)
}

/// The scheduler of a load that begun, on its two connections.
fn schedule(
    engine: &Engine,
    setup: Setup,
    begun: Begun,
    opts: &LoadOptions,
    regime: Regime,
) -> Scheduler {
    let batch_bytes = setup.batch_bytes(opts.batch_bytes);
    let mut sched = Scheduler::new(
        engine.ctx.clone(),
        engine.queue.clone(),
        setup.control,
        setup.bookkeeping,
        begun.resume,
        batch_bytes,
        opts.defer_indexes,
        opts.database
            .clone()
            .or_else(|| opts.target.database.clone()),
        regime,
    );
    sched.warnings.extend(begun.warnings);
    sched.begin = begun.begin;
    sched.overwrite_tables = opts.overwrite_tables;
    sched
}

/// The input opened, as one stream of statements.
struct Input {
    /// Taken by the reader thread.
    stream: Option<source::Input>,
    /// A mydumper directory's plan.
    dir: Option<dir::DirInput>,
    /// Bytes read from disk (before decompression).
    raw_read: Arc<AtomicU64>,
    /// Its size on disk, when known.
    total: Option<u64>,
    compressed: bool,
    /// A mydumper directory's source position.
    position: Option<sqlfleet_dump::mydumper::Position>,
}

impl Input {
    /// Opens a file, stdin or a mydumper directory. A directory takes
    /// -D as the database its one database loads into (myloader's -B),
    /// created when absent; connections then name none.
    fn open(opts: &mut LoadOptions) -> Result<Input, LoadError> {
        if opts.path.is_dir() {
            let into = opts.target.database.take();
            let d = dir::open(&opts.path, into.as_deref()).map_err(|e| LoadError::Refused {
                path: e.path,
                what: e.what,
            })?;
            return Ok(Input {
                stream: Some(source::Input::Dir(d.clone())),
                raw_read: Arc::new(AtomicU64::new(0)),
                total: Some(d.size),
                compressed: d.compressed,
                position: d.position.clone(),
                dir: Some(d),
            });
        }
        let opened = sqlfleet_dump::reader::open(&opts.path).map_err(|source| LoadError::Open {
            path: opts.path.clone(),
            source,
        })?;
        Ok(Input {
            compressed: opened.compression != sqlfleet_dump::reader::Compression::None,
            stream: Some(source::Input::Stream(opened.reader, opened.size)),
            dir: None,
            raw_read: opened.raw_read,
            total: opened.size,
            position: None,
        })
    }

    /// On a Galera node: refuses a file with tables the cluster would not
    /// replicate, read whole before anything of it runs.
    async fn refuse_for_galera(
        &self,
        c: &galera::Cluster,
        path: &Path,
        charset: sqlfleet_dump::lex::Multibyte,
    ) -> Result<(), LoadError> {
        let files: Vec<PathBuf> = match &self.dir {
            Some(d) => d
                .parts
                .iter()
                .filter_map(|p| match p {
                    dir::Part::File(f) => Some(f.clone()),
                    dir::Part::Sql(_) => None,
                })
                .collect(),
            None if sqlfleet_dump::reader::is_stdin(path) => Vec::new(),
            None => vec![path.to_path_buf()],
        };
        for path in files {
            let (p, c2) = (path.clone(), c.clone());
            let in_dir = self.dir.is_some();
            let found = tokio::task::spawn_blocking(move || galera::scan(&p, &c2, in_dir, charset))
                .await
                .map_err(|e| LoadError::Setup {
                    what: format!("checking the dump for Galera: {e}"),
                })?
                .map_err(|source| LoadError::Input {
                    path: path.clone(),
                    source,
                })?;
            if !found.is_empty() {
                return Err(LoadError::Refused {
                    path,
                    what: galera::message(c, &found),
                });
            }
        }
        Ok(())
    }
}

/// The input and the two connections, checked before a byte of it runs.
struct Setup {
    input: Input,
    /// The first connection: the one-connection regime's and the
    /// ordered statements'.
    control: SessionConn,
    /// The lock and the journal's own bookkeeping, outside any
    /// transaction the file opens.
    bookkeeping: mysql_async::Conn,
    cluster: Option<galera::Cluster>,
    endpoint: String,
    /// The largest statement the server takes (see schedule.rs).
    max_packet: Option<u64>,
}

impl Setup {
    async fn open(opts: &mut LoadOptions) -> Result<Setup, LoadError> {
        let input = Input::open(opts)?;
        // Connect first: a wrong password should not wait for the dump.
        let Connected {
            session: control,
            cluster,
            endpoint,
        } = engine::connect(&opts.target, opts.binlog, opts.writes_on_read_only).await?;
        let mut bookkeeping = SessionConn::open(&opts.target, opts.binlog).await?.conn;
        let max_packet: Option<u64> = bookkeeping
            .query_first("SELECT @@max_allowed_packet")
            .await
            .map_err(|e| LoadError::Setup {
                what: format!("{endpoint}: reading its max_allowed_packet: {e}"),
            })?;
        if let Some(c) = &cluster {
            input
                .refuse_for_galera(
                    c,
                    &opts.path,
                    reading_charset(&opts.target, input.dir.is_some()),
                )
                .await?;
        }
        Ok(Setup {
            input,
            control,
            bookkeeping,
            cluster,
            endpoint,
            max_packet,
        })
    }

    /// A transaction's size on this server (a Galera write set is bound).
    fn batch_bytes(&self, asked: usize) -> usize {
        self.cluster
            .as_ref()
            .map_or(asked, |c| c.batch_bytes(asked))
    }

    /// The engine of this load.
    fn engine_options(
        &self,
        opts: &LoadOptions,
        ids: &Ids,
        reading: &Reading,
        started: Instant,
    ) -> EngineOptions {
        EngineOptions {
            target: opts.target.clone(),
            binlog: opts.binlog,
            threads: opts.threads,
            load_id: ids.load_id.clone(),
            resuming: opts.resume,
            continue_on_error: opts.continue_on_error,
            quarantine: opts.quarantine.clone(),
            fast_path: opts.fast_path,
            queue_bytes: opts.read_ahead.max(self.batch_bytes(opts.batch_bytes)),
            progress: opts.progress,
            raw_read: self.input.raw_read.clone(),
            compressed: self.input.compressed,
            read: reading.read.clone(),
            total: self.input.total,
            started,
            galera: self.cluster.clone(),
            max_packet: self.max_packet,
            interrupt: opts.interrupt.clone(),
        }
    }
}

/// The reader thread of the input and its statements.
struct Reading {
    reader: Option<std::thread::JoinHandle<()>>,
    rx: Option<mpsc::Receiver<Msg>>,
    stop: Arc<AtomicBool>,
    /// Input bytes read (decompressed), for progress.
    read: Arc<AtomicU64>,
}

impl Reading {
    fn start(opts: &LoadOptions, input: &mut Input) -> Result<Reading, LoadError> {
        let stop = Arc::new(AtomicBool::new(false));
        let read = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::channel::<Msg>(32);
        let stream = input.stream.take().ok_or_else(|| LoadError::Setup {
            what: "the input was read already".into(),
        })?;
        let reader = source::spawn(
            stream,
            opts.load_id.clone(),
            source::ReadOptions {
                read: read.clone(),
                max_statement: sqlfleet_dump::split::MAX_STATEMENT,
                keep_comments: opts.comments,
                // (a directory's files name none: `source` there is as
                // the client's, relative to the working directory)
                base_dir: opts
                    .path
                    .parent()
                    .filter(|_| !sqlfleet_dump::reader::is_stdin(&opts.path) && input.dir.is_none())
                    .map(Path::to_path_buf),
                raw_read: input.raw_read.clone(),
                charset: reading_charset(&opts.target, input.dir.is_some()),
            },
            tx,
            stop.clone(),
        )
        .map_err(|source| LoadError::Open {
            path: opts.path.clone(),
            source,
        })?;
        Ok(Reading {
            reader: Some(reader),
            rx: Some(rx),
            stop,
            read,
        })
    }

    /// The input's identity and whether it is a dump: its first message.
    async fn identify(&mut self, path: &Path) -> Result<(String, bool), LoadError> {
        let first = match self.rx.as_mut() {
            Some(rx) => rx.recv().await,
            None => None,
        };
        let e = match first {
            Some(Msg::Id { id, dump }) => return Ok((id, dump)),
            Some(Msg::Error(source)) => LoadError::Input {
                path: path.to_path_buf(),
                source,
            },
            Some(Msg::FileError(path, source)) => LoadError::Input { path, source },
            _ => LoadError::Empty {
                path: path.to_path_buf(),
            },
        };
        self.stop_and_join();
        Err(e)
    }

    /// Tells the reader to stop and stops taking its messages.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.rx = None;
    }

    fn stop_and_join(&mut self) {
        self.stop();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

impl Drop for Reading {
    /// A load that returns early stops its reader too.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The load's identity in the journal.
struct Ids {
    /// The input's own (its first MiB, its size).
    input: String,
    /// The database it loads into ("" for the connection's none).
    target_db: String,
    /// The journal's: the input bound to its database, or the user's
    /// `--load-id`.
    load_id: String,
}

impl Ids {
    /// A resume is bound to the database it loads into: the same dump
    /// loaded with another -D is another load (an id given with
    /// --load-id is the user's to choose).
    fn bind(opts: &LoadOptions, input: String) -> Ids {
        let target_db = opts.target.database.clone().unwrap_or_default();
        let load_id = if opts.load_id.is_some() {
            input.clone()
        } else {
            identity::bound(&input, &target_db)
        };
        Ids {
            input,
            target_db,
            load_id,
        }
    }

    fn bound(&self) -> journal::Bound<'_> {
        Some((self.input.as_str(), self.target_db.as_str()))
    }
}

/// What the journal said this run starts from.
struct Begun {
    resume: journal::Resume,
    /// A fresh load's journal writes, run with its first statement.
    begin: Option<journal::Begin>,
    warnings: Vec<String>,
}

/// Locks the load, reads its journal and checks what a resume may
/// trust. `None`: this input was loaded completely already.
async fn begin(
    opts: &LoadOptions,
    setup: &mut Setup,
    ids: &Ids,
    source_name: &str,
) -> Result<Option<Begun>, LoadError> {
    let (bookkeeping, endpoint) = (&mut setup.bookkeeping, setup.endpoint.as_str());
    let total = setup.input.total;
    let load_id = &ids.load_id;
    journal::take_turn(bookkeeping, endpoint, load_id).await?;
    setup
        .control
        .conn
        .query_drop(journal::slot_lock_sql(load_id, "c"))
        .await
        .map_err(journal::jerr(endpoint))?;
    let (start, begin) = journal::decide(
        bookkeeping,
        endpoint,
        load_id,
        source_name,
        opts.resume,
        opts.restart,
        total,
        ids.bound(),
    )
    .await?;
    // A fresh load writes its journal once its first statement has run
    // (the scheduler); a resumed one's is there, and says so now.
    // (a resume with nothing to resume — no journal at all, or none for
    // this input — starts fresh: nothing of a journal is read after this)
    let mut resume = match start {
        Start::Fresh => {
            return Ok(Some(Begun {
                resume: Default::default(),
                begin: Some(begin),
                warnings: Vec::new(),
            }))
        }
        Start::AlreadyDone | Start::Resume(_) => {
            begin
                .run(bookkeeping)
                .await
                .map_err(journal::jerr(endpoint))?;
            match start {
                Start::Resume(r) => *r,
                _ => return Ok(None),
            }
        }
    };
    let warnings = check_resume(
        opts,
        bookkeeping,
        endpoint,
        ids,
        source_name,
        total,
        &mut resume,
    )
    .await?;
    if opts.resume && !resume.ranges.is_empty() {
        journal::restore_auto_increments(bookkeeping, endpoint, load_id).await?;
    }
    Ok(Some(Begun {
        resume,
        begin: None,
        warnings,
    }))
}

/// Refuses a resume of another input or of a session a new connection
/// cannot rebuild, and empties the non-transactional tables a batch was
/// in flight on. The warnings say what was emptied.
async fn check_resume(
    opts: &LoadOptions,
    bookkeeping: &mut mysql_async::Conn,
    endpoint: &str,
    ids: &Ids,
    source_name: &str,
    total: Option<u64>,
    resume: &mut journal::Resume,
) -> Result<Vec<String>, LoadError> {
    let load_id = &ids.load_id;
    if let Some(earlier) = &resume.taken_over {
        progress::say(&format!(
            "note: resuming the earlier load of {source_name} (load id {earlier}), which read an input of another size: the part it loaded is checked byte for byte before anything runs"
        ));
    }
    let refuse = |what: String| LoadError::Changed {
        path: opts.path.clone(),
        what,
    };
    if let (Some(was), Some(now)) = (resume.size, total) {
        if was != now {
            return Err(refuse(format!(
                "the interrupted load read a file of {was} bytes, this one has {now}: not the same input; refusing to resume (use --restart)"
            )));
        }
    }
    let stateful = journal::stateful_since(bookkeeping, load_id)
        .await
        .map_err(journal::jerr(endpoint))?;
    if let Some((line, why)) = stateful {
        return Err(refuse(format!(
            "the interrupted load had reached line {line}, where {why} tied the file to one connection's state, which a new connection does not have: it cannot be resumed exactly; restore the target and load with --restart"
        )));
    }
    let mut warnings = Vec::new();
    for t in std::mem::take(&mut resume.dirty_tables) {
        let n = journal::reset_dirty_table(bookkeeping, endpoint, load_id, &t).await?;
        let w = format!(
            "table {t} is not transactional and had a batch in flight when the load stopped: its {n} rows were deleted and its data is loaded again"
        );
        progress::say(&format!("warning: {w}"));
        warnings.push(w);
        let again = journal::prepare(
            bookkeeping,
            endpoint,
            load_id,
            source_name,
            true,
            false,
            total,
            ids.bound(),
        )
        .await?;
        if let Start::Resume(r) = again {
            *resume = journal::Resume {
                dirty_tables: Vec::new(),
                ..*r
            };
        }
    }
    Ok(warnings)
}

/// How the file's statements run: a dump's in parallel, anything else's
/// in file order on one connection, as the mysql client runs them.
fn regime(is_dump: bool, serial: bool, source_name: &str) -> Regime {
    if is_dump && !serial {
        return Regime::Parallel;
    }
    if !serial {
        progress::say(&format!(
            "note: {source_name} is not a mysqldump/mariadb-dump file (no dump header): its statements run in file order on one connection, as with the mysql client"
        ));
    }
    Regime::Ordered
}

/// What reading the input came to.
#[derive(Default)]
struct Fed {
    /// Input bytes read (decompressed) when it ended.
    bytes: u64,
    /// It ended without mysqldump's last line.
    cut_short: bool,
    saw_statement: bool,
    /// Not the input the resumed load read (why).
    changed: Option<String>,
    input_error: Option<LoadError>,
}

/// Hands the input's statements to the scheduler until it ends, fails,
/// is not the input a resume expects, or the load stops.
async fn feed(
    engine: &mut Engine,
    sched: &mut Scheduler,
    reading: &mut Reading,
    check: &mut ResumeCheck,
    path: &Path,
) -> Fed {
    let mut fed = Fed::default();
    let Some(rx) = reading.rx.as_mut() else {
        return fed;
    };
    loop {
        let msg = match engine.next(rx).await {
            Next::Msg(m) => m,
            Next::Closed | Next::Failed | Next::Interrupted => break,
        };
        match msg {
            Msg::Item(item) => {
                fed.saw_statement = true;
                if let Err(what) = check.check(&item) {
                    fed.changed = Some(what);
                    break;
                }
                if check.verified {
                    for held in std::mem::take(&mut check.held) {
                        sched.feed(held).await;
                    }
                    sched.feed(*item).await;
                    // A resumed run that cannot go on exactly stops here.
                    if let Some(what) = sched.refused.take() {
                        fed.changed = Some(what);
                        break;
                    }
                } else if check.held.is_empty()
                    && (matches!(item.kind, Kind::Session | Kind::Use(_) | Kind::Hint)
                        || sched.resume.ranges.contains(item.stmt.offset))
                {
                    sched.feed(*item).await; // runs nothing
                } else {
                    check.held.push(*item);
                }
            }
            Msg::Done { bytes, cut_short } => {
                fed.bytes = bytes;
                fed.cut_short = cut_short;
                if cut_short {
                    let w = format!(
                        "{}: the dump has no \"-- Dump completed\" line at its end, which mysqldump and mariadb-dump write last: it may have been cut short (or still be copying: once it is whole, the same command with --resume loads the rest); everything in it was loaded",
                        path.display()
                    );
                    progress::say(&format!("warning: {w}"));
                    sched.warnings.push(w);
                }
                if !check.verified {
                    fed.changed = Some(format!(
                        "this is not the input the interrupted load read: it ends at byte {bytes}, before byte {} that the interrupted load had reached; refusing to resume (use --restart)",
                        check.horizon
                    ));
                }
                break;
            }
            Msg::Error(source) => {
                fed.input_error = Some(LoadError::Input {
                    path: path.to_path_buf(),
                    source,
                });
                break;
            }
            Msg::FileError(path, source) => {
                fed.input_error = Some(LoadError::Input { path, source });
                break;
            }
            Msg::Id { .. } => {}
        }
    }
    fed
}

/// What the end of the load left to report.
struct Closed {
    /// The statement that stopped the load.
    failure: Option<StatementFailure>,
    tables: usize,
    skipped: u64,
    mode: &'static str,
    /// The load's own notes.
    warnings: Vec<String>,
}

/// Writes the quarantine file, closes the connections and records how
/// the load ended in its journal (a load that never began records
/// nothing: it left nothing on the target).
async fn close(
    sched: Scheduler,
    prelude: &crate::session::Prelude,
    failure: Option<StatementFailure>,
    (ended, fed, opts, ids): (&Ended, &Fed, &LoadOptions, &Ids),
    source_name: &str,
    endpoint: &str,
) -> Closed {
    let Scheduler {
        control,
        mut bookkeeping,
        warnings,
        skipped,
        tables,
        regime,
        begin,
        ..
    } = sched;
    let load_id = &ids.load_id;
    let when: Option<String> = bookkeeping
        .query_first("SELECT NOW()")
        .await
        .unwrap_or(None);
    ended.shared.write_quarantine(
        prelude,
        &format!(
            "{source_name} (load id {load_id}), run of {}",
            when.unwrap_or_default()
        ),
        opts.database.as_deref().or(opts.target.database.as_deref()),
    );
    if let Some(c) = control {
        let _ = c.conn.disconnect().await;
    }
    let ok = failure.is_none()
        && fed.input_error.is_none()
        && fed.changed.is_none()
        && fed.saw_statement
        && !ended.interrupted;
    // Never begun: nothing ran. A load that stopped there leaves nothing
    // on the target; one that ends well (nothing in it to run) is
    // recorded as done.
    let recorded = match begin {
        None => true,
        Some(b) if ok => b.run(&mut bookkeeping).await.is_ok(),
        Some(_) => false,
    };
    let failure = failure.map(|f| StatementFailure {
        nothing_written: !recorded,
        ..f
    });
    if fed.changed.is_none() && recorded {
        let end = if ok && fed.cut_short {
            journal::End::Cut
        } else if ok {
            journal::End::Done
        } else if ended.interrupted && failure.is_none() {
            journal::End::Interrupted
        } else {
            journal::End::Failed
        };
        let (bytes, rows) = (fed.bytes, ended.rows);
        let _ = journal::finish(&mut bookkeeping, endpoint, load_id, end, bytes, rows).await;
        if fed.input_error.is_some() && !fed.saw_statement {
            let _ = journal::forget_if_empty(&mut bookkeeping, endpoint, load_id).await;
        }
    }
    let _ = bookkeeping.disconnect().await;
    Closed {
        failure,
        tables: tables.len(),
        skipped,
        mode: match regime {
            Regime::Parallel => "parallel",
            Regime::Ordered => "ordered",
            Regime::Stateful => "one connection",
        },
        warnings,
    }
}

/// The load's error, if it did not end well: another input than the
/// resumed one's, the input's own, a statement's, the interrupt, or no
/// statement at all.
fn verdict(
    fed: Fed,
    failure: Option<StatementFailure>,
    ended: &Ended,
    path: &Path,
) -> Result<(), LoadError> {
    if let Some(what) = fed.changed {
        return Err(LoadError::Changed {
            path: path.to_path_buf(),
            what,
        });
    }
    if let Some(e) = fed.input_error {
        return Err(e);
    }
    if let Some(f) = failure {
        return Err(LoadError::Statement {
            path: path.to_path_buf(),
            failure: Box::new(f),
        });
    }
    ended.interrupt_error(path, "statements")?;
    if !fed.saw_statement {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// The character set the input is read in, as far as reading cares: a
/// dump file in the client's `--default-character-set` (utf8mb4 when
/// none), as the mysql client reads it; a mydumper directory byte by byte,
/// as myloader reads it (mydumper writes `SET NAMES binary` and escapes
/// every `\`: read in sjis, its `\x95\\` ran a string on, and a
/// directory myloader loads stopped at "unknown mysql client command").
fn reading_charset(target: &sqlfleet_conn::Target, dir: bool) -> sqlfleet_dump::lex::Multibyte {
    if dir {
        return sqlfleet_dump::lex::Multibyte::AsciiSafe;
    }
    sqlfleet_dump::lex::Multibyte::of_charset(target.charset.as_deref().unwrap_or("utf8mb4"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlfleet_dump::inspect::Traits;

    fn item(offset: u64, end: u64, chain: u8) -> source::Item {
        source::Item {
            stmt: sqlfleet_dump::Statement {
                offset,
                end,
                line: 1,
                text: Vec::new(),
                source: None,
                origin: None,
                vertical: false,
                dialect: Default::default(),
            },
            kind: Kind::Barrier,
            traits: Traits::default(),
            chain: [chain; 16],
        }
    }

    fn check_for(horizon: u64) -> ResumeCheck {
        let r = journal::Resume {
            horizon,
            chains: [(horizon, identity::hex(&[7u8; 16]))].into_iter().collect(),
            ..journal::Resume::default()
        };
        ResumeCheck::new(&r)
    }

    #[test]
    fn a_resume_is_verified_only_where_a_statement_ends_at_the_recorded_end() {
        let mut same = check_for(100);
        assert!(same.check(&item(0, 50, 1)).is_ok() && !same.verified);
        assert!(same.check(&item(50, 100, 7)).is_ok() && same.verified);
        // Other statement boundaries: no recorded end is ever met.
        let mut shifted = check_for(100);
        assert!(shifted.check(&item(0, 60, 1)).is_ok());
        assert!(shifted.check(&item(60, 120, 7)).is_err());
        // The same end with another chain.
        let mut changed = check_for(100);
        assert!(changed.check(&item(0, 100, 8)).is_err());
    }
}
