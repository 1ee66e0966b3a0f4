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
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use mysql_async::prelude::Queryable;
use sqlfleet_conn::Target;
use tokio::sync::{mpsc, watch};

mod barrier;
mod check;
mod open;
mod plan;
mod temp;
mod upkeep;
mod view;
mod xa;

pub use check::preflight;
use check::purged;
pub(crate) use check::{binlog_pos, first_after, oldest_gtid_list, xa_prepared_after};
use open::Opened;
use plan::{Barrier, Blocked, Kind};
use view::set;
pub use view::{Shared, SourceView, StreamView};

use crate::apply::Applier;
use crate::config;
use crate::floor::{Floor, Status};
use crate::gtid::{Gtid, GtidPos};
use crate::lanes::Workers;
use crate::position::Stored;
use crate::resume::Stop;
use crate::txn::{Assembler, Out, Txn};
use crate::work::{ApplyError, Done, Job, Outcome};

/// Errors that stop a source for good (bad settings, refused at start).
#[derive(Debug, Clone, thiserror::Error)]
#[error("source '{source_name}': {what}")]
pub struct Refused {
    pub source_name: String,
    pub what: String,
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
    /// The source refused the floor alone (1236) where retired domains
    /// could be asked for at their ends: the next session asks for them
    /// (retired.rs).
    pub ask_retired: std::sync::atomic::AtomicBool,
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
    /// The target's tables a ROLLBACK does not undo, as the barriers
    /// across databases last read them (engines.rs).
    engines: crate::engines::Engines,
    /// Prepared XA groups waiting for their end (xa.rs).
    xa: xa::Held,
    /// Retired domains the source was asked for at their ends (it wanted
    /// them): the session ends at the first binlog file that no longer
    /// lists one (retired.rs).
    asked_retired: std::collections::BTreeSet<u32>,
    /// Retired domains could be asked for (the source lacks them).
    may_ask_retired: bool,
}

/// How a session ended.
enum End {
    Stop,
    CaughtUp,
    Restart(String),
    /// The source cannot go on (what it needs is gone): stop it for good.
    Refused(String),
}

impl SourceRunner {
    /// Runs until stopped (or caught up); Err only for a refusal at start.
    pub async fn run(mut self) -> Result<(), Refused> {
        let mut generation = 0u64;
        let mut backoff = Duration::from_millis(250);
        let mut first = true;
        // Source sessions' temporary tables outlive a reading session
        // (their connections are this process's).
        let mut temp = temp::Sessions::default();
        // Since when sessions have ended without applying anything.
        let mut stalled_since: Option<std::time::Instant> = None;
        loop {
            let progress_before = self.view.lock().map(|v| v.applied).unwrap_or(0);
            generation += 1;
            // A panic in the reading (a bug, or a library meeting bytes it
            // cannot take) ends this source as a refusal, said where its
            // state is shown, instead of a task gone while it still reads
            // "running" and the other sources go on.
            let r = std::panic::AssertUnwindSafe(self.session(generation, first, &mut temp))
                .catch_unwind()
                .await
                .unwrap_or_else(|p| {
                    Err(SessionError::Refused(crate::work::panicked(
                        "its reading",
                        p.as_ref(),
                    )))
                });
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

    async fn session(
        &mut self,
        generation: u64,
        first: bool,
        temp: &mut temp::Sessions,
    ) -> Result<End, SessionError> {
        let Opened {
            mut ctl,
            session: mut s,
            source_pos,
            probe,
            mut stream,
        } = self.open(generation, first).await?;
        temp.recorded(&s.stored.temp);
        // (A new reading session holds nothing yet: it reads the prepared
        // groups it holds again from the floor.)
        set(&self.view, |v| v.xa_held = 0);
        // Kept to follow the source's position (for lag) while reading.
        let mut probe = Some(probe);
        let mut probed = Instant::now();
        let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
        let mut asm = Assembler::new(self.cfg.dbs.clone());
        asm.resume(s.read.newest(), &s.stored.skips);
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut last_event = Instant::now();
        let mut stop = self.stop.clone();
        // When a stop came (it may wait for temporary tables: `temp::at_stop`).
        let mut stop_came: Option<Instant> = None;
        let end = loop {
            if let Some(t0) = stop_came {
                match temp::at_stop(&temp.open(), t0.elapsed()) {
                    temp::AtStop::Now => break End::Stop,
                    temp::AtStop::Wait => {}
                    temp::AtStop::Losing(sessions) => {
                        tracing::warn!(
                            source = %self.cfg.name,
                            "stopping with temporary tables of source sessions {sessions:?} still open on the target after {}s: they are lost, and those sessions' later statements that use them will stop their streams with the reason",
                            temp::STOP_WAIT.as_secs()
                        );
                        break End::Stop;
                    }
                }
            }
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
                        Some(Err(e)) if purged(&e) && s.may_ask_retired && s.asked_retired.is_empty() => {
                            self.ask_retired.store(true, std::sync::atomic::Ordering::Relaxed);
                            break End::Restart(format!(
                                "the source wants a retired domain asked for at its end (a file to be read still lists it): reading again so ({e})"
                            ));
                        }
                        Some(Err(e)) if purged(&e) => break End::Refused(
                            check::cannot_send_from(s.floor.position(), &e)
                        ),
                        Some(Err(e)) => break End::Restart(format!("binlog stream: {e}")),
                        None => break End::Restart("the source closed the binlog stream".into()),
                    };
                    if let Some(d) = crate::retired::unlisted(&s.asked_retired, &ev) {
                        break End::Restart(format!(
                            "read into the binlog written after domain {d} was deleted: reading on without asking for it"
                        ));
                    }
                    match asm.push(&ev) {
                        Ok(Out::Nothing) => {}
                        Ok(Out::Format { raw, server_start }) => {
                            if server_start {
                                self.source_started(temp, &mut ctl).await;
                            }
                            s.format = Arc::new(raw);
                        }
                        Ok(Out::Txn(t)) => {
                            if let Err(e) = self.dispatch(&mut s, &mut ctl, temp, *t, &tx, &mut rx).await {
                                break e;
                            }
                        }
                        Err(e) => self.unreadable(&mut s, &mut ctl, &mut asm, &e.to_string()).await,
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
                        if let Some(e) = self.probe_source(&mut probe, &s).await {
                            break e;
                        }
                    }
                    if last_event.elapsed() > Duration::from_secs(30) {
                        break End::Restart("no event or heartbeat from the source for 30 s".into());
                    }
                }
                _ = stop.changed(), if stop_came.is_none() => {
                    if *stop.borrow() {
                        let open = temp.open();
                        if !open.is_empty() {
                            tracing::warn!(
                                source = %self.cfg.name,
                                "source sessions {open:?} hold temporary tables on the target: applying on until they drop them (at most {}s), as a replica is stopped with none open; Ctrl-C again stops now and loses them",
                                temp::STOP_WAIT.as_secs()
                            );
                        }
                        stop_came = Some(Instant::now());
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

    /// The source's stream cannot be read past here (`why`): it stops as
    /// a whole (recorded, in the status), and the other sources go on.
    async fn unreadable(&self, s: &mut Session, ctl: &mut Applier, asm: &mut Assembler, why: &str) {
        let open = asm.abandon();
        // Read, and stopped at: a run until caught up ends when it was
        // the source's last (it waited for ever to read it).
        if let Some(g) = open {
            s.read.advance(g);
        }
        if !s.stopped.contains_key(ALL_STREAMS) {
            // (An incident, which has no GTID, is named by the one read
            // before it: its skip.)
            let g = open.or(asm.last()).unwrap_or(Gtid {
                domain: 0,
                server: 0,
                seq: 0,
            });
            self.stop_stream(s, ctl, ALL_STREAMS, &g, why, "", Stop::Refused)
                .await;
        }
    }

    /// The source's binlog position, asked every 2 s on `probe` (dropped
    /// when it fails): a binlog reset while it is read ends the session
    /// refused — the reading waits on the old file, and the new
    /// history's GTIDs are ones already read; a domain gone from it ends
    /// the session for the next to judge.
    async fn probe_source(
        &self,
        probe: &mut Option<mysql_async::Conn>,
        s: &Session,
    ) -> Option<End> {
        let p = probe.as_mut()?;
        match p.query_first::<String, _>("SELECT @@gtid_binlog_pos").await {
            Ok(Some(pos)) => {
                let source = GtidPos::parse(&pos).ok();
                if let Some(why) = source
                    .as_ref()
                    .and_then(|p| GtidPos::behind_the_floor(&s.read, p))
                {
                    // A domain gone from the source altogether may be one
                    // it deleted after everything of it was read: a new
                    // session judges it (retired.rs); behind in a domain
                    // it has, it is refused.
                    let gone = source
                        .as_ref()
                        .is_some_and(|p| crate::retired::only_gone(&s.read, p));
                    return Some(if gone {
                        End::Restart(format!(
                            "the source's binlog has no domain the target applied ({why})"
                        ))
                    } else {
                        End::Refused(why)
                    });
                }
                set(&self.view, |v| v.source_pos = pos);
            }
            _ => *probe = None,
        }
        None
    }

    /// One transaction read: decided by plan.rs, carried out here —
    /// passed over, held back by a stop, applied as a barrier on this
    /// connection, or handed to its stream's worker.
    async fn dispatch(
        &self,
        s: &mut Session,
        ctl: &mut Applier,
        temp: &mut temp::Sessions,
        txn: Txn,
        tx: &mpsc::UnboundedSender<Done>,
        rx: &mut mpsc::UnboundedReceiver<Done>,
    ) -> Result<(), End> {
        let g = txn.gtid;
        if let Some(p) = s.read.0.get(&g.domain).copied().filter(|p| g.seq <= p.seq) {
            // Reading again finds it again: the source stops here, for
            // the operator (a loop of restarts never ended a run).
            return Err(End::Refused(format!(
                "the source wrote GTID {g} after {p} in the same domain (gtid_strict_mode=OFF on the source, and a session set gtid_seq_no or two servers wrote the domain): positions kept per domain cannot tell whether {g} is applied, so it is not guessed at; a native replica in gtid_strict_mode stops here too (error 1950). Set gtid_strict_mode=ON on the source, and start this source again from a GTID after it"
            )));
        }
        s.read.advance(g);
        s.last_read_time = txn.timestamp;
        let after = s.read.clone();
        set(&self.view, |v| v.read = after.to_string());
        let idx = s.floor.admit();
        // A prepared XA group waits for its end; its end brings its
        // changes (xa.rs).
        let covered = s.stored.floor.covers(&g);
        let mut txn = match s.xa.read(idx, txn, covered) {
            xa::Next::Hold => {
                s.floor.place(idx, after, s.last_read_time, Status::Held);
                set(&self.view, |v| v.xa_held = s.xa.len());
                return Ok(());
            }
            xa::Next::Go { txn, tied } => {
                if let Some(held) = tied {
                    s.floor.tie(held, idx);
                    set(&self.view, |v| v.xa_held = s.xa.len());
                }
                *txn
            }
        };
        // (Most transactions are not thread-specific: nothing to decide.)
        let route = match txn.temp.thread {
            None => temp::Route::Normal,
            Some(_) => temp::route(
                &txn.temp,
                &|n| temp::mentions(&txn, n),
                &temp.open(),
                temp.lost(),
            ),
        };
        match &route {
            temp::Route::Refuse(why) => {
                txn.unsupported.get_or_insert_with(|| why.clone());
            }
            temp::Route::Normal => {
                temp::without_drops(&mut txn);
                if let Some(gone) = temp.forget_dropped(&self.cfg.name, &txn.temp) {
                    // Best effort: a record left behind only refuses that
                    // session's later use of what it names (fail closed).
                    let _ = ctl.run(&gone).await;
                }
            }
            temp::Route::Session(_) => {}
        }
        let ts = txn.timestamp;
        // A stopped transaction stays unapplied: the lag counts it.
        let finish = |s: &mut Session, st: Status| s.floor.place(idx, after.clone(), ts, st);
        let kind = match (plan::kind(&txn, &s.stored), route) {
            (Kind::Barrier(_) | Kind::Stream, temp::Route::Session(p)) => {
                Kind::Barrier(Barrier::Thread(p))
            }
            (k, _) => k,
        };
        match kind {
            Kind::Applied => {
                finish(s, Status::Applied);
                return Ok(());
            }
            Kind::Skip => {
                self.skip(ctl, &txn).await?;
                finish(s, Status::Applied);
                return Ok(());
            }
            // A barrier waits for everything before it first — and only
            // then knows whether one of its streams stopped there.
            Kind::Barrier(_) => self.drain(s, ctl, rx).await?,
            Kind::Stream => {}
        }
        if let Some(b) = plan::blocked(&txn, &s.stopped, &s.stored.unsure) {
            self.hold(s, ctl, &txn, b).await;
            finish(s, Status::Stopped);
            return Ok(());
        }
        let Kind::Barrier(barrier) = kind else {
            s.floor.place(idx, after, ts, Status::Pending);
            return self.send(s, idx, txn, tx).await;
        };
        match self.barrier(s, ctl, temp, &txn, barrier).await {
            Ok(()) => {
                self.count(&txn, &s.stopped);
                finish(s, Status::Applied);
                // All before it is done: the floor can be written now.
                self.write_floor(s, ctl).await
            }
            Err(ApplyError::Lost(e)) => Err(End::Restart(format!("target: {e}"))),
            Err(ApplyError::Sql {
                error, statement, ..
            }) => {
                for d in &txn.dbs {
                    self.stop_stream(s, ctl, d, &g, &error, &statement, Stop::Target)
                        .await;
                }
                finish(s, Status::Stopped);
                Ok(())
            }
        }
    }

    /// Recorded by `replicate skip`: its streams move past it, all of them
    /// in one commit.
    async fn skip(&self, ctl: &mut Applier, txn: &Txn) -> Result<(), End> {
        let done: Vec<(&str, &str, &Txn)> = txn
            .dbs
            .iter()
            .map(|d| (self.cfg.name.as_str(), d.as_str(), txn))
            .collect();
        let committed = async {
            ctl.begin().await?;
            ctl.commit_with_positions(&done, &[]).await
        }
        .await;
        committed.map_err(|e| End::Restart(format!("target: {}", e.text())))?;
        set(&self.view, |v| v.skipped += 1);
        Ok(())
    }

    /// Waits until nothing this session handed out is in flight.
    async fn drain(
        &self,
        s: &mut Session,
        ctl: &mut Applier,
        rx: &mut mpsc::UnboundedReceiver<Done>,
    ) -> Result<(), End> {
        while s.outstanding > 0 {
            let Some(d) = rx.recv().await else {
                break;
            };
            if let Some(e) = self.done(s, ctl, d).await {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Fail closed: a transaction held back stops every stream it touches
    /// (each with why), and the whole source when it may touch streams
    /// nobody can name. The floor stays before it.
    async fn hold(&self, s: &mut Session, ctl: &mut Applier, txn: &Txn, b: Blocked) {
        let (why, stop, whole) = match b {
            Blocked::Source(at) => (
                format!("waits for the source, stopped at {at}"),
                Stop::Waits(ALL_STREAMS.into()),
                false,
            ),
            Blocked::Unsupported { why, whole_source } => (why, Stop::Refused, whole_source),
            Blocked::Stream(d) => (
                format!("waits for stream '{d}', stopped at an earlier transaction"),
                Stop::Waits(d),
                false,
            ),
            Blocked::Unsure(d) => (
                format!(
                    "stream '{d}': {} writes tables a ROLLBACK does not undo (MyISAM, Aria ...), and the run that began it stopped (a crash of the target or of replicate, a lost connection) before its commit was recorded: its writes to such tables may be on the target, the rest of it is not; not applied again",
                    txn.gtid
                ),
                Stop::Unsure,
                false,
            ),
        };
        let refused = matches!(stop, Stop::Refused | Stop::Unsure);
        for d in &txn.dbs {
            // A refusal is recorded on every stream; a wait only where
            // nothing is recorded yet.
            if refused || !s.stopped.contains_key(d) {
                self.stop_stream(s, ctl, d, &txn.gtid, &why, &txn.first, stop.clone())
                    .await;
            }
        }
        if whole {
            self.stop_stream(
                s,
                ctl,
                ALL_STREAMS,
                &txn.gtid,
                &why,
                &txn.first,
                Stop::Refused,
            )
            .await;
        }
    }

    /// Applies a barrier on this connection, as its kind is applied.
    async fn barrier(
        &self,
        s: &mut Session,
        ctl: &mut Applier,
        temp: &mut temp::Sessions,
        txn: &Txn,
        b: Barrier,
    ) -> Result<(), ApplyError> {
        // (A session's own connection is primed where it is opened.)
        if !matches!(b, Barrier::Thread(_)) {
            ctl.prime(&s.format).await?;
        }
        let r = match b {
            Barrier::Standalone => self.apply_standalone(s, ctl, txn).await,
            Barrier::Created => self.apply_created(s, ctl, txn).await,
            Barrier::Multi => self.apply_multi(ctl, &mut s.engines, txn).await,
            Barrier::Thread(p) => self.apply_in_session(s, temp, p, txn).await,
        };
        if txn.standalone {
            // DDL (also a session's, `CREATE TABLE ... SELECT` from its
            // temporary table): engines may have changed, workers read
            // them again.
            self.workers
                .ddl
                .fetch_add(1, std::sync::atomic::Ordering::Release);
        }
        r
    }

    /// Hands a one-stream transaction to its stream's worker.
    async fn send(
        &self,
        s: &mut Session,
        idx: u64,
        txn: Txn,
        tx: &mpsc::UnboundedSender<Done>,
    ) -> Result<(), End> {
        let Some(stream) = txn.dbs.first().cloned() else {
            // plan.rs sends only transactions of one stream here.
            return Err(End::Refused(format!(
                "{}: a transaction with no stream to apply it in",
                txn.gtid
            )));
        };
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
            replied: Default::default(),
        };
        if !self.workers.send(job).await {
            return Err(End::Stop);
        }
        Ok(())
    }

    /// A transaction applied: its streams' positions move on. A stream's
    /// error goes only once it runs again (after `retry` or `skip`, in a
    /// new session): an earlier transaction of a stream that a later one
    /// has since stopped can finish after that stop, and must not make
    /// it look fine (the summary counted it as running, and exited 0).
    fn count(&self, txn: &Txn, stopped: &BTreeMap<String, Gtid>) {
        set(&self.view, |v| {
            v.applied += 1;
            for d in &txn.dbs {
                let e = v.streams.entry(d.clone()).or_default();
                e.applied += 1;
                e.position = txn.gtid.to_string();
                e.last_source_time = txn.timestamp;
                if !stopped.contains_key(d) {
                    e.error = None;
                }
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
            let stopped = s.stopped.contains_key(&d.stream);
            set(&self.view, |v| {
                v.applied += 1;
                let e = v.streams.entry(d.stream.clone()).or_default();
                e.applied += 1;
                // (As in `count`: a later stop of the stream stands.)
                if !stopped {
                    e.error = None;
                }
                e.position = d.gtid.to_string();
                e.last_source_time = d.timestamp;
            });
        }
        // A stopped transaction stays unapplied: the lag keeps counting it.
        s.floor.done(d.idx, status);
        end
    }
}

/// The stream name under which a source stopped as a whole is recorded:
/// a transaction that was not applied and may touch any database.
pub const ALL_STREAMS: &str = "*";

enum SessionError {
    Refused(String),
    Retry(String),
}
