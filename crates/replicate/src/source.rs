//! One source: read its binlog as a replica would (MariaDB GTID mode),
//! split transactions by target database, hand each to its stream's
//! worker, apply barriers (DDL, transactions across databases) itself
//! once everything before them is applied, and keep the source's floor.
//!
//! Every failure that leaves doubt (source or target connection lost, a
//! `skip` recorded) is handled the same way: wait for what is in flight,
//! then read the positions back from the target and start reading again
//! from the floor — what a stream's own row covers is skipped. That one
//! path is what makes kill -9, a target restart and a reconnect exact.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::BinlogStreamRequest;
use mysql_async::Conn;
use serde::Serialize;
use sqlfleet_conn::quote::literal;
use sqlfleet_conn::Target;
use tokio::sync::{mpsc, watch};

mod barrier;

use crate::apply::Applier;
use crate::config;
use crate::floor::{Floor, Status};
use crate::gtid::{Gtid, GtidPos};
use crate::lanes::Workers;
use crate::position::{self, Stored};
use crate::resume::{self, Stop};
use crate::txn::{Assembler, Out, Txn};
use crate::work::{ApplyError, Done, Job, Outcome};

/// Errors that stop a source for good (bad settings, refused at start).
#[derive(Debug, Clone, thiserror::Error)]
#[error("source '{source_name}': {what}")]
pub struct Refused {
    pub source_name: String,
    pub what: String,
}

/// A stream's state as shown by progress, status and the summary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamView {
    pub position: String,
    pub applied: u64,
    pub last_source_time: u32,
    pub error: Option<String>,
    pub error_gtid: Option<String>,
    pub statement: Option<String>,
}

/// A source's state, shared with the progress printer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceView {
    pub name: String,
    pub state: String,
    pub read: String,
    pub floor: String,
    pub source_pos: String,
    pub applied: u64,
    pub skipped: u64,
    pub reconnects: u64,
    pub last_error: Option<String>,
    /// Seconds since the source committed the oldest transaction not yet
    /// applied (as Seconds_Behind_Master means it): 0 when caught up.
    pub lag_seconds: Option<u64>,
    pub streams: BTreeMap<String, StreamView>,
}

impl SourceView {
    /// Transactions of the source not yet known applied everywhere.
    pub fn behind(&self) -> u64 {
        match (
            GtidPos::parse(&self.floor),
            GtidPos::parse(&self.source_pos),
        ) {
            (Ok(f), Ok(s)) => f.behind(&s),
            _ => 0,
        }
    }
}

pub type Shared = Arc<Mutex<SourceView>>;

fn set<F: FnOnce(&mut SourceView)>(v: &Shared, f: F) {
    if let Ok(mut g) = v.lock() {
        f(&mut g);
    }
}

/// What a source needs to run.
pub struct SourceRunner {
    pub cfg: config::Source,
    pub source: Target,
    pub target: Target,
    pub workers: Arc<Workers>,
    pub view: Shared,
    pub stop: watch::Receiver<bool>,
    /// Return once everything the source had at start is applied.
    pub until_caught_up: bool,
    /// Give the source up after this long without progress.
    pub give_up_after: Option<Duration>,
    /// `[apply] retry_after`: try stopped streams again after this long.
    pub retry_after: Option<Duration>,
    /// Automatic retries since the source last made progress (back-off).
    pub auto_retries: std::sync::atomic::AtomicU32,
    /// In-flight bytes (KiB) of this source's queued transactions.
    pub budget: Arc<tokio::sync::Semaphore>,
}

/// A source's state once `give_up_after` passed without progress.
pub const GAVE_UP: &str = "gave up";

/// Per source: at most this many KiB of transactions queued or applying.
pub const IN_FLIGHT_KIB: u32 = 256 * 1024;

/// One reading session's bookkeeping.
struct Session {
    generation: u64,
    stored: Stored,
    read: GtidPos,
    /// The floor and the window of transactions read (floor.rs).
    floor: Floor,
    outstanding: usize,
    stopped: BTreeMap<String, Gtid>,
    format: Arc<Vec<u8>>,
    /// The source commit time of the last transaction read.
    last_read_time: u32,
    /// The newest `replicate retry` request this session has seen.
    retry_seen: u64,
    /// When the first stream stopped in this session.
    stopped_at: Option<Instant>,
}

/// How a session ended.
enum End {
    Stop,
    CaughtUp,
    Restart(String),
    /// The source cannot go on (what it needs is gone): stop it for good.
    Refused(String),
}

/// ER_MASTER_FATAL_ERROR_READING_BINLOG: the source cannot send from the
/// requested position (its binlog was purged, or never had it).
fn purged(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1236)
}

impl SourceRunner {
    /// Runs until stopped (or caught up); Err only for a refusal at start.
    pub async fn run(mut self) -> Result<(), Refused> {
        let mut generation = 0u64;
        let mut backoff = Duration::from_millis(250);
        let mut first = true;
        // Since when sessions have ended without applying anything.
        let mut stalled_since: Option<std::time::Instant> = None;
        loop {
            let progress_before = self.view.lock().map(|v| v.applied).unwrap_or(0);
            generation += 1;
            let r = self.session(generation, first).await;
            first = false;
            if self.view.lock().map(|v| v.applied).unwrap_or(0) > progress_before {
                stalled_since = None;
                backoff = Duration::from_millis(250);
                self.auto_retries
                    .store(0, std::sync::atomic::Ordering::Relaxed);
            }
            match r {
                Ok(End::Stop) | Ok(End::CaughtUp) => {
                    set(&self.view, |v| v.state = "stopped".into());
                    return Ok(());
                }
                Err(SessionError::Refused(what)) | Ok(End::Refused(what)) => {
                    set(&self.view, |v| {
                        v.state = "stopped".into();
                        v.last_error = Some(what.clone());
                    });
                    return Err(Refused {
                        source_name: self.cfg.name.clone(),
                        what,
                    });
                }
                // Any doubt: read again from the target's positions, quick
                // the first time (a recorded skip, a blip), slower while
                // the cause stays.
                Ok(End::Restart(why)) | Err(SessionError::Retry(why)) => {
                    let since = *stalled_since.get_or_insert_with(std::time::Instant::now);
                    if let Some(limit) = self.give_up_after.filter(|l| since.elapsed() >= *l) {
                        let what = format!(
                            "no progress for {}s, given up (--give-up-after): {why}",
                            limit.as_secs()
                        );
                        tracing::error!(source = %self.cfg.name, "{what}");
                        set(&self.view, |v| {
                            v.state = GAVE_UP.into();
                            v.last_error = Some(what);
                        });
                        return Ok(());
                    }
                    tracing::warn!(source = %self.cfg.name, "{why}; again from the target's positions in {backoff:?}");
                    set(&self.view, |v| {
                        v.state = "reconnecting".into();
                        v.last_error = Some(why);
                        v.reconnects += 1;
                    });
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = self.stop.changed() => {}
                    }
                    if *self.stop.borrow() {
                        return Ok(());
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    }

    async fn session(&mut self, generation: u64, first: bool) -> Result<End, SessionError> {
        let name = self.cfg.name.clone();
        set(&self.view, |v| v.state = "connecting".into());
        let mut ctl = Applier::open(&self.target)
            .await
            .map_err(|e| SessionError::Retry(format!("target: {}", e.text())))?;
        // One replicate per source: a second process would apply the same
        // transactions. The lock lives as long as this session's connection
        // (a killed process's is released by the server when it notices).
        let lock = format!("sqlfleet:{name}");
        let got: Option<Option<i64>> = ctl
            .conn
            .exec_first(
                "SELECT GET_LOCK(?, ?)",
                (lock.as_str(), if first { 3 } else { 10 }),
            )
            .await
            .map_err(|e| SessionError::Retry(format!("target: {e}")))?;
        if got.flatten() != Some(1) {
            let holder: Option<Option<u64>> = ctl
                .conn
                .exec_first("SELECT IS_USED_LOCK(?)", (lock.as_str(),))
                .await
                .unwrap_or(None);
            let what = format!(
                "is being replicated by another sqlfleet replicate (target connection {}); stop that one first",
                holder.flatten().map_or("?".into(), |h| h.to_string())
            );
            return Err(if first {
                SessionError::Refused(what)
            } else {
                SessionError::Retry(what)
            });
        }
        let stored = position::load(&mut ctl.conn, &name)
            .await
            .map_err(|e| SessionError::Retry(format!("target: reading positions: {e}")))?;
        position::clear_errors(&mut ctl.conn, &name)
            .await
            .map_err(|e| SessionError::Retry(format!("target: {e}")))?;
        // Retry requests before this session are answered by it.
        let retry_seen = position::last_retry(&mut ctl.conn, &name)
            .await
            .map_err(|e| SessionError::Retry(format!("target: {e}")))?;
        let mut src = self
            .source
            .connect(Duration::from_secs(10))
            .await
            .map_err(|e| SessionError::Retry(format!("connecting: {e}")))?;
        let facts = check_source(&mut src, &self.cfg.dbs)
            .await
            .map_err(|e| match e {
                CheckError::Refused(w) if first => SessionError::Refused(w),
                CheckError::Refused(w) | CheckError::Query(w) => SessionError::Retry(w),
            })?;
        let start = if stored.started {
            stored.floor.clone()
        } else {
            let p = match &self.cfg.start {
                config::Start::Current => facts.binlog_pos.clone(),
                config::Start::Gtid(p) => p.clone(),
                config::Start::File { file, pos } => {
                    let g: Option<Option<String>> = src
                        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file.as_str(), *pos))
                        .await
                        .map_err(|e| SessionError::Retry(format!("BINLOG_GTID_POS: {e}")))?;
                    let g = g.flatten().ok_or_else(|| {
                        SessionError::Refused(format!(
                            "start = \"file:{file}:{pos}\": the source has no such binlog position"
                        ))
                    })?;
                    GtidPos::parse(&g).map_err(|e| SessionError::Refused(e.to_string()))?
                }
            };
            position::write_start(&mut ctl.conn, &name, &p)
                .await
                .map_err(|e| SessionError::Retry(format!("target: {e}")))?;
            p
        };
        let source_pos = facts.binlog_pos.clone();
        set(&self.view, |v| {
            v.state = "running".into();
            v.source_pos = source_pos.to_string();
            v.floor = start.to_string();
        });
        // Kept to follow the source's position (for lag) while reading.
        let mut probe = Some(src);
        let mut probed = Instant::now();

        let stream_conn = self
            .source
            .connect(Duration::from_secs(10))
            .await
            .map_err(|e| SessionError::Retry(format!("connecting: {e}")))?;
        let mut stream = open_stream(stream_conn, self.cfg.server_id, &start)
            .await
            .map_err(|e| {
                if purged(&e) {
                    SessionError::Refused(format!(
                        "the source no longer has the binlog position {start} (purged?): {e}"
                    ))
                } else {
                    SessionError::Retry(format!("requesting the binlog: {e}"))
                }
            })?;

        let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
        let mut s = Session {
            generation,
            stored,
            read: start.clone(),
            floor: Floor::new(start.clone()),
            outstanding: 0,
            stopped: BTreeMap::new(),
            format: Arc::new(Vec::new()),
            last_read_time: 0,
            retry_seen,
            stopped_at: None,
        };
        let mut asm = Assembler::new(self.cfg.dbs.clone());
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut last_event = Instant::now();
        let mut stop = self.stop.clone();
        let end = loop {
            if self.until_caught_up
                && s.floor.is_settled()
                && !asm.in_transaction()
                && s.read.behind(&source_pos) == 0
            {
                break End::CaughtUp;
            }
            tokio::select! {
                ev = stream.next() => {
                    last_event = Instant::now();
                    let ev = match ev {
                        Some(Ok(ev)) => ev,
                        Some(Err(e)) if purged(&e) => break End::Refused(format!(
                            "the source no longer has the binlog its floor {} needs (purged?); native replication stops here too: {e}",
                            s.floor.position()
                        )),
                        Some(Err(e)) => break End::Restart(format!("binlog stream: {e}")),
                        None => break End::Restart("the source closed the binlog stream".into()),
                    };
                    match asm.push(&ev) {
                        Ok(Out::Nothing) => {}
                        Ok(Out::Format(raw)) => s.format = Arc::new(raw),
                        Ok(Out::Txn(t)) => {
                            if let Err(e) = self.dispatch(&mut s, &mut ctl, *t, &tx, &mut rx).await {
                                break e;
                            }
                        }
                        Err(e) => {
                            // The source's stream cannot be read past here:
                            // it stops as a whole (recorded, in the status),
                            // and the other sources go on.
                            let open = asm.abandon();
                            if !s.stopped.contains_key(ALL_STREAMS) {
                                let g = open
                                    .or_else(|| s.read.0.values().max_by_key(|g| g.seq).copied())
                                    .unwrap_or(Gtid { domain: 0, server: 0, seq: 0 });
                                let why = e.to_string();
                                self.stop_stream(&mut s, &mut ctl, ALL_STREAMS, &g, &why, "", Stop::Refused)
                                    .await;
                            }
                        }
                    }
                }
                Some(d) = rx.recv() => {
                    if let Some(e) = self.done(&mut s, &mut ctl, d).await {
                        break e;
                    }
                }
                _ = tick.tick() => {
                    if let Some(e) = self.tick(&mut s, &mut ctl).await {
                        break e;
                    }
                    if probed.elapsed() >= Duration::from_secs(2) {
                        probed = Instant::now();
                        if let Some(p) = probe.as_mut() {
                            match p.query_first::<String, _>("SELECT @@gtid_binlog_pos").await {
                                Ok(Some(pos)) => set(&self.view, |v| v.source_pos = pos),
                                _ => probe = None,
                            }
                        }
                    }
                    if last_event.elapsed() > Duration::from_secs(30) {
                        break End::Restart("no event or heartbeat from the source for 30 s".into());
                    }
                }
                _ = stop.changed() => {
                    if *stop.borrow() {
                        break End::Stop;
                    }
                }
            }
        };
        // Let what is in flight finish, then record the floor.
        while s.outstanding > 0 {
            match rx.recv().await {
                Some(d) => {
                    let _ = self.done(&mut s, &mut ctl, d).await;
                }
                None => break,
            }
        }
        let _ = self.write_floor(&mut s, &mut ctl).await;
        let _ = stream.close().await;
        Ok(end)
    }

    async fn dispatch(
        &self,
        s: &mut Session,
        ctl: &mut Applier,
        txn: Txn,
        tx: &mpsc::UnboundedSender<Done>,
        rx: &mut mpsc::UnboundedReceiver<Done>,
    ) -> Result<(), End> {
        let g = txn.gtid;
        let prev = s.read.0.get(&g.domain).copied();
        if let Some(p) = prev {
            if g.seq <= p.seq {
                return Err(End::Restart(format!(
                    "GTID {g} after {p} in the same domain: sequence numbers went back (is gtid_strict_mode off on the source?)"
                )));
            }
        }
        s.read.advance(g);
        s.last_read_time = txn.timestamp;
        let after = s.read.clone();
        set(&self.view, |v| v.read = after.to_string());
        let idx = s.floor.admit();
        let ts = txn.timestamp;
        // A stopped transaction stays unapplied: the lag counts it.
        let finish = |s: &mut Session, st: Status| s.floor.place(idx, after.clone(), ts, st);
        let streams: Vec<String> = txn.dbs.iter().cloned().collect();
        // Already applied: below the floor, or (when every stream it
        // touches is known) covered by each of those streams' positions.
        let known = !streams.is_empty() && !txn.unknown_scope;
        if txn.is_empty()
            || s.stored.floor.covers(&g)
            || (known && streams.iter().all(|d| s.stored.applied(d, &g)))
        {
            finish(s, Status::Applied);
            return Ok(());
        }
        if s.stored.skips.contains(&g) {
            // Recorded by `replicate skip`: its streams move past it, all
            // of them in one commit.
            let done: Vec<(&str, &str, &Txn)> = streams
                .iter()
                .map(|d| (self.cfg.name.as_str(), d.as_str(), &txn))
                .collect();
            let committed = async {
                ctl.begin().await?;
                ctl.commit_with_positions(&done, &[]).await
            }
            .await;
            committed.map_err(|e| End::Restart(format!("target: {}", e.text())))?;
            set(&self.view, |v| v.skipped += 1);
            finish(s, Status::Applied);
            return Ok(());
        }
        // A barrier (DDL, several databases) waits for everything before
        // it first — and only then knows whether one of its streams
        // stopped there, which must stop it too.
        let creates = !txn.standalone && barrier::created(&txn).is_some();
        let barrier = txn.standalone || creates || streams.len() > 1;
        if barrier {
            while s.outstanding > 0 {
                match rx.recv().await {
                    Some(d) => {
                        if let Some(e) = self.done(s, ctl, d).await {
                            return Err(e);
                        }
                    }
                    None => break,
                }
            }
        }
        if let Some(at) = s.stopped.get(ALL_STREAMS).copied() {
            // The source stopped as a whole: nothing after it applies.
            let why = format!("waits for the source, stopped at {at}");
            let waiting: Vec<&String> = streams
                .iter()
                .filter(|d| !s.stopped.contains_key(*d))
                .collect();
            for d in waiting {
                self.stop_stream(
                    s,
                    ctl,
                    d,
                    &g,
                    &why,
                    &txn.first,
                    Stop::Waits(ALL_STREAMS.into()),
                )
                .await;
            }
            finish(s, Status::Stopped);
            return Ok(());
        }
        if let Some(why) = &txn.unsupported {
            // Fail closed: a transaction that is not applied stops every
            // stream it touches, and the whole source when it may touch
            // streams nobody can name. The floor stays before it.
            let why = format!(
                "cannot apply {g} ({} position {}) exactly: {why}",
                txn.file, txn.end_pos
            );
            for d in &streams {
                self.stop_stream(s, ctl, d, &g, &why, &txn.first, Stop::Refused)
                    .await;
            }
            if txn.unknown_scope || streams.is_empty() {
                self.stop_stream(s, ctl, ALL_STREAMS, &g, &why, &txn.first, Stop::Refused)
                    .await;
            }
            finish(s, Status::Stopped);
            return Ok(());
        }
        if let Some(d) = streams.iter().find(|d| s.stopped.contains_key(*d)) {
            // Its stream stopped earlier: it, and every stream it
            // touches, waits for that to be resolved.
            let why = format!("waits for stream '{d}', stopped at an earlier transaction");
            for o in &streams {
                if !s.stopped.contains_key(o) {
                    self.stop_stream(s, ctl, o, &g, &why, &txn.first, Stop::Waits(d.clone()))
                        .await;
                }
            }
            finish(s, Status::Stopped);
            return Ok(());
        }
        if barrier {
            ctl.prime(&s.format)
                .await
                .map_err(|e| End::Restart(format!("target: {}", e.text())))?;
            let r = if txn.standalone {
                let r = self.apply_standalone(s, ctl, &txn).await;
                // Engines may have changed: workers read them again.
                self.workers
                    .ddl
                    .fetch_add(1, std::sync::atomic::Ordering::Release);
                r
            } else if creates {
                self.apply_created(s, ctl, &txn).await
            } else {
                self.apply_multi(ctl, &txn).await
            };
            match r {
                Ok(()) => {
                    self.count(&streams, &txn);
                    finish(s, Status::Applied);
                    // All before it is done: the floor can be written now.
                    self.write_floor(s, ctl).await?;
                }
                Err(ApplyError::Lost(e)) => return Err(End::Restart(format!("target: {e}"))),
                Err(ApplyError::Sql {
                    error, statement, ..
                }) => {
                    for d in &streams {
                        self.stop_stream(s, ctl, d, &g, &error, &statement, Stop::Target)
                            .await;
                    }
                    finish(s, Status::Stopped);
                }
            }
            return Ok(());
        }
        let stream = streams[0].clone();
        s.floor.place(idx, after, ts, Status::Pending);
        s.outstanding += 1;
        // Memory stays bounded however far behind the target is: a source
        // has at most IN_FLIGHT_KIB of transactions queued or applying.
        let kib = (txn.bytes() / 1024 + 1).min(IN_FLIGHT_KIB as usize) as u32;
        let budget = self.budget.clone().acquire_many_owned(kib).await.ok();
        let job = Job {
            source: Arc::from(self.cfg.name.as_str()),
            generation: s.generation,
            idx,
            stream,
            txn: Arc::new(txn),
            format: s.format.clone(),
            reply: tx.clone(),
            budget,
        };
        if !self.workers.send(job).await {
            return Err(End::Stop);
        }
        Ok(())
    }

    fn count(&self, streams: &[String], txn: &Txn) {
        set(&self.view, |v| {
            v.applied += 1;
            for d in streams {
                let e = v.streams.entry(d.clone()).or_default();
                e.applied += 1;
                e.position = txn.gtid.to_string();
                e.last_source_time = txn.timestamp;
                e.error = None;
            }
        });
    }

    async fn done(&self, s: &mut Session, ctl: &mut Applier, d: Done) -> Option<End> {
        if d.generation != s.generation {
            return None;
        }
        s.outstanding = s.outstanding.saturating_sub(1);
        let mut end = None;
        let status = match d.outcome {
            Outcome::Applied => Status::Applied,
            Outcome::Dropped => Status::Stopped,
            Outcome::Failed { error, statement } => {
                self.stop_stream(s, ctl, &d.stream, &d.gtid, &error, &statement, Stop::Target)
                    .await;
                Status::Stopped
            }
            Outcome::Lost { error } => {
                end = Some(End::Restart(format!("target: {error}")));
                Status::Stopped
            }
        };
        if status == Status::Applied {
            set(&self.view, |v| {
                v.applied += 1;
                let e = v.streams.entry(d.stream.clone()).or_default();
                e.applied += 1;
                e.error = None;
                e.position = d.gtid.to_string();
                e.last_source_time = d.timestamp;
            });
        }
        // A stopped transaction stays unapplied: the lag keeps counting it.
        s.floor.done(d.idx, status);
        end
    }

    // The stop's facts as the sites have them (stream, GTID, error,
    // statement, kind): a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    async fn stop_stream(
        &self,
        s: &mut Session,
        ctl: &mut Applier,
        stream: &str,
        g: &Gtid,
        error: &str,
        statement: &str,
        stop: Stop,
    ) {
        // The reason carries the command that resumes it (status, the
        // summary and the progress line all show it).
        let error = &resume::reason(error, &stop, &self.cfg.name, g);
        tracing::error!(source = %self.cfg.name, stream, gtid = %g, "stream stopped: {error} (statement: {statement})");
        s.stopped.insert(stream.to_string(), *g);
        s.stopped_at.get_or_insert_with(Instant::now);
        let _ = position::record_error(&mut ctl.conn, &self.cfg.name, stream, g, error, statement)
            .await;
        set(&self.view, |v| {
            let e = v.streams.entry(stream.to_string()).or_default();
            e.error = Some(error.to_string());
            e.error_gtid = Some(g.to_string());
            e.statement = Some(statement.to_string());
        });
    }

    async fn tick(&self, s: &mut Session, ctl: &mut Applier) -> Option<End> {
        if let Err(e) = self.write_floor(s, ctl).await {
            return Some(e);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let oldest = s.floor.oldest_unapplied();
        let read = s.read.clone();
        let last_read = s.last_read_time;
        set(&self.view, |v| {
            let caught_up = GtidPos::parse(&v.source_pos).is_ok_and(|p| read.behind(&p) == 0);
            v.lag_seconds = match oldest {
                Some(t) => Some(now.saturating_sub(u64::from(t))),
                None if caught_up => Some(0),
                // Behind, and nothing read yet: unknown, never 0.
                None if last_read == 0 => None,
                // The reader is behind and nothing is in flight: at least
                // as old as the last transaction read.
                None => Some(now.saturating_sub(u64::from(last_read))),
            };
        });
        if !s.stopped.is_empty() {
            // A `skip` recorded for a stopped stream's transaction
            // restarts the session, which honours it.
            let skips = position::skips(&mut ctl.conn, &self.cfg.name).await;
            match skips {
                Ok(list) => {
                    let list: Vec<Gtid> = list.iter().filter_map(|g| g.parse().ok()).collect();
                    if s.stopped
                        .values()
                        .any(|g| list.contains(g) && !s.stored.skips.contains(g))
                    {
                        return Some(End::Restart("a skip was recorded".into()));
                    }
                }
                Err(e) => return Some(End::Restart(format!("target: {e}"))),
            }
            // `replicate retry`: the session starts again from the target's
            // positions, which tries the stopped transactions again.
            match position::retries(&mut ctl.conn, &self.cfg.name, s.retry_seen).await {
                Ok(list) => {
                    if list
                        .iter()
                        .any(|(_, st)| st.is_empty() || s.stopped.contains_key(st))
                    {
                        return Some(End::Restart("a retry was requested".into()));
                    }
                    if let Some((id, _)) = list.last() {
                        s.retry_seen = *id;
                    }
                }
                Err(e) => return Some(End::Restart(format!("target: {e}"))),
            }
            if let (Some(after), Some(at)) = (self.retry_after, s.stopped_at) {
                let n = self
                    .auto_retries
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .min(6);
                let wait = after * 2u32.pow(n);
                if at.elapsed() >= wait {
                    self.auto_retries
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Some(End::Restart(format!(
                        "trying the stopped streams again after {}s ([apply] retry_after)",
                        wait.as_secs()
                    )));
                }
            }
        }
        None
    }

    async fn write_floor(&self, s: &mut Session, ctl: &mut Applier) -> Result<(), End> {
        if let Some(p) = s.floor.to_write().cloned() {
            sqlfleet_faults::point!("replicate::floor_before_write");
            position::write_floor(&mut ctl.conn, &self.cfg.name, &p)
                .await
                .map_err(|e| End::Restart(format!("target: {e}")))?;
            sqlfleet_faults::point!("replicate::floor_after_write");
            let f = p.to_string();
            s.floor.written(p);
            set(&self.view, |v| v.floor = f);
        }
        Ok(())
    }
}

/// The stream name under which a source stopped as a whole is recorded:
/// a transaction that was not applied and may touch any database.
pub const ALL_STREAMS: &str = "*";

enum SessionError {
    Refused(String),
    Retry(String),
}

enum CheckError {
    Refused(String),
    Query(String),
}

struct Facts {
    binlog_pos: GtidPos,
}

/// Checks a source before anything is applied: reachable, MariaDB with
/// binlog on, and its databases map onto distinct names.
pub async fn preflight(cfg: &config::Source, t: &Target) -> Result<(), Refused> {
    let refuse = |what: String| Refused {
        source_name: cfg.name.clone(),
        what,
    };
    let mut c = match t.connect(Duration::from_secs(10)).await {
        Ok(c) => c,
        // Wrong credentials will not get better; an unreachable server
        // may (its reader retries with back-off, as a replica does).
        Err(e) if e.server_code().is_some() => return Err(refuse(e.to_string())),
        Err(e) => {
            tracing::warn!(source = %cfg.name, "not reachable now, retrying: {e}");
            return Ok(());
        }
    };
    // What the server says is final; a connection lost on the way (the
    // source restarting just now) is retried by the reader, which checks
    // the same again before it reads anything.
    match check_source(&mut c, &cfg.dbs).await {
        Ok(_) => Ok(()),
        Err(CheckError::Refused(w)) => Err(refuse(w)),
        Err(CheckError::Query(w)) => {
            tracing::warn!(source = %cfg.name, "not readable now, retrying: {w}");
            Ok(())
        }
    }
}

/// A source the applier can follow: MariaDB, binlog on, uncompressed,
/// and its databases map onto distinct names on the target.
async fn check_source(c: &mut Conn, map: &config::DbMap) -> Result<Facts, CheckError> {
    let q = |e: mysql_async::Error| CheckError::Query(format!("reading settings: {e}"));
    let version: String = c
        .query_first("SELECT @@version")
        .await
        .map_err(q)?
        .unwrap_or_default();
    if !version.contains("MariaDB") {
        return Err(CheckError::Refused(format!(
            "server version {version} is not MariaDB; replicate reads MariaDB binlogs (GTID mode) only for now"
        )));
    }
    let row: Option<(String, String, String)> = c
        .query_first("SELECT @@log_bin, @@log_bin_compress, @@gtid_binlog_pos")
        .await
        .map_err(q)?;
    let (log_bin, compress, pos) = row.unwrap_or_default();
    if log_bin != "1" && !log_bin.eq_ignore_ascii_case("ON") {
        return Err(CheckError::Refused(
            "binary logging is off (log_bin=OFF): start the server with log_bin=ON (and binlog_format=ROW)".into(),
        ));
    }
    if compress == "1" || compress.eq_ignore_ascii_case("ON") {
        return Err(CheckError::Refused(
            "log_bin_compress=ON: compressed events cannot be applied; set log_bin_compress=OFF"
                .into(),
        ));
    }
    let binlog_pos = GtidPos::parse(&pos).map_err(|e| CheckError::Query(e.to_string()))?;
    let dbs: Vec<String> = c.query("SHOW DATABASES").await.map_err(|e| match e {
        mysql_async::Error::Server(_) => CheckError::Refused(format!("SHOW DATABASES: {e}")),
        other => CheckError::Query(format!("SHOW DATABASES: {other}")),
    })?;
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for d in &dbs {
        if let Some(to) = map.map(d) {
            if let Some(other) = seen.insert(to, d) {
                return Err(CheckError::Refused(format!(
                    "databases '{other}' and '{d}' would both be written into '{to}' (a rename onto an existing name)"
                )));
            }
        }
    }
    Ok(Facts { binlog_pos })
}

/// Registers as a MariaDB GTID replica and asks for events after `start`.
async fn open_stream(
    mut conn: Conn,
    server_id: u32,
    start: &GtidPos,
) -> mysql_async::Result<mysql_async::BinlogStream> {
    conn.query_drop(format!(
        "SET @mariadb_slave_capability = 4, @slave_connect_state = {}, \
         @slave_gtid_strict_mode = 0, @slave_gtid_ignore_duplicates = 0, \
         @master_heartbeat_period = 5000000000",
        literal(&start.to_string())
    ))
    .await?;
    conn.get_binlog_stream(
        BinlogStreamRequest::new(server_id)
            .with_filename(b"")
            .with_pos(4u64),
    )
    .await
}

/// The source commit time of the first transaction after `floor` (the
/// oldest one not applied), read from the source's binlog as a replica
/// reads it; `None` when there is none yet. Registers with an id of its
/// own so a running replicate's reader is not displaced.
pub(crate) async fn first_after(
    source: &Target,
    name: &str,
    floor: &GtidPos,
) -> Result<Option<u32>, String> {
    let conn = source
        .connect(Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    let id = config::default_server_id(&format!("{name}/status"));
    let mut stream = open_stream(conn, id, floor)
        .await
        .map_err(|e| format!("requesting the binlog: {e}"))?;
    let read = async {
        while let Some(ev) = stream.next().await {
            let ev = ev.map_err(|e| e.to_string())?;
            let h = ev.header();
            match h.event_type_raw() {
                crate::event::mariadb::GTID => return Ok(Some(h.timestamp())),
                // A heartbeat: the source has nothing after the floor.
                t if t == mysql_common::binlog::consts::EventType::HEARTBEAT_EVENT as u8 => {
                    return Ok(None)
                }
                _ => {}
            }
        }
        Ok(None)
    };
    let r = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap_or_else(|_| Err("no transaction read from the source's binlog within 10 s".into()));
    let _ = stream.close().await;
    r
}
