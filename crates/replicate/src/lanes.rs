//! The workers and the queue they share. Each stream (source, database)
//! queues its transactions in source order; an idle worker takes the
//! next chunk of consecutive transactions of some stream (streams in
//! turn) and applies it as one target transaction with the positions.
//! Several chunks of one stream may be open at once on several workers:
//! [`crate::order`] decides which may run beside earlier ones and when
//! each commits, so a source whose writes go to one database is applied
//! in parallel too, and every stream's position still commits with its
//! transaction, in source order. The stall watcher ([`watcher`]) ends the
//! one wait no server can see: an earlier chunk waiting for a row a later
//! one holds while the later one waits, in here, for the earlier one's
//! commit (see [`crate::order`]).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::FutureExt;
use serde::Serialize;
use sqlfleet_conn::Target;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::apply::Applier;
use crate::chunk::{self as apply, ChunkEnd, DdlGeneration};
use crate::engines::Engines;
use crate::order::{Mode, Order, Turn};
use crate::work::{ApplyError, Job, Outcome};

/// A chunk takes transactions up to this many bytes of rows and
/// statements (and at most the configured batch of transactions): big
/// enough that a commit per chunk costs little, small enough that a
/// target transaction and its undo stay modest.
const CHUNK_BYTES: usize = 16 << 20;

/// A stream of one reading session of a source.
type Key = (Arc<str>, u64, String);

struct Stream {
    queue: VecDeque<Job>,
    order: Order,
    /// The worker that applies this stream when its chunks run one at a
    /// time: always the same one (its session has the stream's tables
    /// open and the source's format), the least loaded when first seen.
    /// When chunks run beside each other, any worker takes them.
    home: usize,
}

#[derive(Default)]
struct State {
    streams: BTreeMap<Key, Stream>,
    /// (source, generation) whose session is lost: its jobs are dropped.
    lost: HashSet<(Arc<str>, u64)>,
    engines: Engines,
    closed: bool,
    /// The stream served last (streams are served in turn).
    cursor: Option<Key>,
    /// Streams at home on each worker.
    homes: Vec<usize>,
}

/// How the chunks went, for the summary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Parallel {
    /// Target transactions (chunks of one stream's transactions).
    pub chunks: u64,
    /// Chunks started beside an earlier open chunk of their stream.
    pub ahead: u64,
    /// Chunks run beside earlier ones that met an error there and ran
    /// again in turn.
    pub conflicts: u64,
    /// Chunks done and waiting for their turn that an earlier chunk
    /// running for long made roll back (they might hold its rows): run
    /// again in turn.
    pub yields: u64,
    /// Source rows statements applied inside another of their chunk
    /// (merge.rs), in chunks that committed.
    pub merged: u64,
    /// Why chunks stopped running beside each other part-way (the stall
    /// watcher stopped at an internal error): they ran in turn after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_turn_after: Option<String>,
}

#[derive(Default)]
struct Stats {
    chunks: AtomicU64,
    ahead: AtomicU64,
    conflicts: AtomicU64,
    yields: AtomicU64,
    merged: AtomicU64,
    in_turn_after: Mutex<Option<String>>,
}

struct Shared {
    state: Mutex<State>,
    /// Bumped on every change a waiting worker may care about.
    changed: watch::Sender<u64>,
    threads: usize,
    batch: usize,
    /// Chunks of one stream may run beside each other (turned off for
    /// good when the stall watcher is gone: see [`watcher`]).
    beside: AtomicBool,
    ddl: DdlGeneration,
    stats: Stats,
    /// The clock chunks' running times are read on.
    epoch: std::time::Instant,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Changes chunk `k`'s order and wakes the workers.
    fn with_order(&self, key: &Key, f: impl FnOnce(&mut Order)) {
        if let Some(s) = self.lock().streams.get_mut(key) {
            f(&mut s.order);
        }
        self.bump();
    }
}

/// The workers' side the sources see: where jobs go.
pub struct Workers {
    shared: Arc<Shared>,
    /// Bumped by whoever applies DDL: workers read the engines again.
    pub ddl: DdlGeneration,
}

impl Workers {
    /// Starts `threads` workers on `target`, each taking chunks of at
    /// most `batch` transactions; `beside`: chunks of one stream may run
    /// beside each other.
    pub fn start(
        target: &Target,
        threads: usize,
        batch: usize,
        beside: bool,
    ) -> (Workers, Vec<JoinHandle<()>>) {
        let ddl = DdlGeneration::default();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: watch::channel(0).0,
            threads: threads.max(1),
            batch: batch.max(1),
            beside: AtomicBool::new(beside && threads > 1),
            ddl: ddl.clone(),
            stats: Stats::default(),
            epoch: std::time::Instant::now(),
        });
        shared.lock().homes = vec![0; threads.max(1)];
        let mut tasks: Vec<JoinHandle<()>> = (0..threads.max(1))
            .enumerate()
            .map(|(me, _)| tokio::spawn(worker(shared.clone(), target.clone(), me)))
            .collect();
        if shared.beside.load(Ordering::Relaxed) {
            tasks.push(tokio::spawn(watcher(shared.clone())));
        }
        (Workers { shared, ddl }, tasks)
    }

    /// Queues a job on its stream; false when the workers are gone.
    pub async fn send(&self, job: Job) -> bool {
        let first = {
            let mut st = self.shared.lock();
            if st.closed {
                return false;
            }
            let key = (job.source.clone(), job.generation, job.stream.clone());
            let (threads, batch) = (self.shared.threads, self.shared.batch);
            if !st.streams.contains_key(&key) {
                // Its home: the least loaded worker, fixed now (a home
                // chosen later could differ between two workers' looks).
                let home = (0..st.homes.len())
                    .min_by_key(|w| st.homes[*w])
                    .unwrap_or(0);
                if let Some(n) = st.homes.get_mut(home) {
                    *n += 1;
                }
                st.streams.insert(
                    key.clone(),
                    Stream {
                        queue: VecDeque::new(),
                        order: Order::new(threads, batch),
                        home,
                    },
                );
            }
            let Some(stream) = st.streams.get_mut(&key) else {
                return false;
            };
            let queue = &mut stream.queue;
            queue.push_back(job);
            queue.len() == 1
        };
        // A queue that held jobs already is known to the workers: they
        // look again when a chunk closes.
        if first {
            self.shared.bump();
        }
        true
    }

    /// How the chunks went so far.
    pub fn parallel(&self) -> Parallel {
        let s = &self.shared.stats;
        Parallel {
            chunks: s.chunks.load(Ordering::Relaxed),
            ahead: s.ahead.load(Ordering::Relaxed),
            conflicts: s.conflicts.load(Ordering::Relaxed),
            yields: s.yields.load(Ordering::Relaxed),
            merged: s.merged.load(Ordering::Relaxed),
            in_turn_after: s
                .in_turn_after
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }
}

impl Drop for Workers {
    /// The workers finish what is queued, then end.
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.bump();
    }
}

/// A chunk a worker took.
struct Chunk {
    key: Key,
    k: u64,
    mode: Mode,
    /// Writes a table that does not roll back: applied alone, not retried.
    alone: bool,
    /// An earlier chunk of its stream was open when it was taken.
    beside: bool,
    jobs: Vec<Job>,
}

enum Take {
    Chunk(Chunk),
    /// Jobs of a stopped stream or a lost session: not applied.
    Drop(Vec<Job>),
    /// The engines of these databases must be read first.
    Refresh(Key, Vec<String>, u64),
    Idle,
    Closed,
}

/// The next chunk any stream may start now (see the module doc).
fn take(st: &mut State, beside: bool, generation: u64, me: usize) -> Take {
    let mut keys: Vec<Key> = st.streams.keys().cloned().collect();
    if let Some(c) = &st.cursor {
        let at = keys.partition_point(|k| k <= c);
        keys.rotate_left(at);
    }
    for key in keys {
        let lost = st.lost.contains(&(key.0.clone(), key.1));
        let Some(s) = st.streams.get_mut(&key) else {
            continue;
        };
        if lost || s.order.stopped() {
            if !s.queue.is_empty() {
                return Take::Drop(s.queue.drain(..).collect());
            }
            if lost && s.order.idle() {
                leave(st, &key);
            }
            continue;
        }
        if s.queue.is_empty() {
            if s.order.idle() {
                leave(st, &key);
            }
            continue;
        }
        if !beside && s.home != me {
            continue;
        }
        if !s.order.can_take(beside) {
            continue;
        }
        let n = s.queue.len().min(s.order.size());
        let stale = st
            .engines
            .stale(generation, s.queue.range(..n).map(|j| &*j.txn));
        if !stale.is_empty() {
            return Take::Refresh(key, stale, generation);
        }
        // A transaction the source rolled back runs alone too: its
        // ROLLBACK must end nothing but it.
        let alone = st.engines.no_rollback(&s.queue[0].txn) || s.queue[0].txn.rolled_back;
        let format = s.queue[0].format.clone();
        let len = if alone {
            1
        } else {
            let n = within_bytes(s.queue.range(..n).map(|j| j.txn.bytes()), CHUNK_BYTES);
            s.queue
                .range(..n)
                .take_while(|j| {
                    j.format == format && !st.engines.no_rollback(&j.txn) && !j.txn.rolled_back
                })
                .count()
        };
        // One chunk at a time: every chunk runs alone anyway.
        let barrier =
            !beside || alone || s.queue.range(..len).any(|j| !st.engines.replayable(&j.txn));
        let Some((k, mode)) = s.order.take(barrier, beside) else {
            continue;
        };
        let jobs: Vec<Job> = s.queue.drain(..len).collect();
        let beside = s.order.behind(k);
        st.cursor = Some(key.clone());
        return Take::Chunk(Chunk {
            key,
            k,
            mode,
            alone,
            beside,
            jobs,
        });
    }
    if st.closed && st.streams.values().all(|s| s.queue.is_empty()) {
        Take::Closed
    } else {
        Take::Idle
    }
}

/// How many of the leading transactions of `sizes` (bytes each) a chunk
/// of at most `cap` bytes takes: at least one, however big.
fn within_bytes(sizes: impl Iterator<Item = usize>, cap: usize) -> usize {
    let mut total = 0usize;
    let mut n = 0;
    for b in sizes {
        total = total.saturating_add(b);
        if n > 0 && total > cap {
            break;
        }
        n += 1;
    }
    n
}

/// Forgets a stream that has nothing queued or open.
fn leave(st: &mut State, key: &Key) {
    if let Some(h) = st.streams.remove(key).map(|s| s.home) {
        if let Some(n) = st.homes.get_mut(h) {
            *n = n.saturating_sub(1);
        }
    }
}

/// One worker (number `me`): its connection, the chunks it takes.
async fn worker(shared: Arc<Shared>, target: Target, me: usize) {
    let mut applier: Option<Applier> = None;
    let mut rx = shared.changed.subscribe();
    loop {
        rx.borrow_and_update();
        let generation = shared.ddl.load(Ordering::Acquire);
        let beside = shared.beside.load(Ordering::Relaxed);
        let next = take(&mut shared.lock(), beside, generation, me);
        match next {
            Take::Chunk(c) => {
                shared.stats.chunks.fetch_add(1, Ordering::Relaxed);
                if c.beside && c.mode == Mode::Speculative {
                    shared.stats.ahead.fetch_add(1, Ordering::Relaxed);
                }
                let ran =
                    std::panic::AssertUnwindSafe(run_chunk(&shared, &mut applier, &target, &c))
                        .catch_unwind()
                        .await;
                if let Err(p) = ran {
                    // A panic in applying (a bug): the jobs it had not
                    // answered stop their stream, said (the commit may or
                    // may not have happened: the stream's position tells
                    // the next run); its connection is not used again, and
                    // the chunk's place in its stream is freed.
                    applier = None;
                    let what = crate::work::panicked("applying", p.as_ref());
                    for j in &c.jobs {
                        apply::reply(
                            j,
                            Outcome::Failed {
                                error: what.clone(),
                                statement: String::new(),
                            },
                        );
                    }
                    done_running(&shared, &c);
                    close(&shared, &c, ChunkEnd::Failed, false);
                }
            }
            Take::Drop(jobs) => {
                for j in &jobs {
                    apply::reply(j, Outcome::Dropped);
                }
            }
            Take::Refresh(key, dbs, generation) => {
                if let Err(e) = refresh(&shared, &mut applier, &target, dbs, generation).await {
                    // The source restarts from its positions (as after
                    // any lost target connection).
                    applier = None;
                    let jobs: Vec<Job> = {
                        let mut st = shared.lock();
                        st.lost.insert((key.0.clone(), key.1));
                        st.streams
                            .get_mut(&key)
                            .map(|s| s.queue.drain(..).collect())
                            .unwrap_or_default()
                    };
                    for j in &jobs {
                        apply::reply(j, Outcome::Lost { error: e.text() });
                    }
                    shared.bump();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            Take::Idle => {
                if rx.changed().await.is_err() {
                    return;
                }
            }
            Take::Closed => return,
        }
    }
}

async fn refresh(
    shared: &Shared,
    applier: &mut Option<Applier>,
    target: &Target,
    dbs: Vec<String>,
    generation: u64,
) -> Result<(), ApplyError> {
    if applier.is_none() {
        *applier = Some(Applier::open(target).await?);
    }
    let Some(a) = applier.as_mut() else {
        return Err(ApplyError::Lost("no connection".into()));
    };
    let read = a.engines(generation, dbs).await?;
    shared.lock().engines.store(read);
    Ok(())
}

/// Waits until chunk `k` may do something other than wait.
async fn turn(shared: &Shared, key: &Key, k: u64) -> Turn {
    let mut rx = shared.changed.subscribe();
    loop {
        rx.borrow_and_update();
        let t = {
            let st = shared.lock();
            if st.lost.contains(&(key.0.clone(), key.1)) {
                Turn::Drop
            } else {
                st.streams.get(key).map_or(Turn::Drop, |s| s.order.turn(k))
            }
        };
        if t != Turn::Wait {
            return t;
        }
        if rx.changed().await.is_err() {
            return Turn::Drop;
        }
    }
}

/// How running a chunk beside earlier ones went.
enum Ahead {
    /// Committed, dropped or lost (replied).
    Done(ChunkEnd),
    /// Rolled back (an error there, or it yielded): it runs again in turn.
    Again,
}

/// Applies a chunk as its mode says (see [`crate::order`]); closes it in
/// the order.
async fn run_chunk(shared: &Shared, applier: &mut Option<Applier>, target: &Target, c: &Chunk) {
    let ran = match c.mode {
        Mode::Speculative => match ahead(shared, applier, target, c).await {
            Ahead::Done(end) => Some(end),
            Ahead::Again => None,
        },
        Mode::InTurn | Mode::Barrier => None,
    };
    let (end, clean) = match ran {
        Some(end) => (end, end == ChunkEnd::Applied),
        None => {
            if turn(shared, &c.key, c.k).await != Turn::Go {
                return drop_chunk(shared, c);
            }
            if applier.is_none() {
                match Applier::open(target).await {
                    Ok(a) => *applier = Some(a),
                    Err(e) => return close(shared, c, lose(&c.jobs, &e.text()), false),
                }
            }
            running(shared, c);
            let end = apply::apply_chunk(applier, target, &c.jobs, c.alone).await;
            done_running(shared, c);
            (end, false)
        }
    };
    let merged = applier
        .as_mut()
        .map_or(0, |a| std::mem::take(&mut a.merged));
    if end == ChunkEnd::Applied {
        shared.stats.merged.fetch_add(merged, Ordering::Relaxed);
    }
    close(shared, c, end, clean)
}

/// Marks chunk `c` as running statements on the target (for the stall
/// watcher).
fn running(shared: &Shared, c: &Chunk) {
    let now = shared.now_ms();
    if let Some(s) = shared.lock().streams.get_mut(&c.key) {
        s.order.run_started(c.k, now);
    }
}

fn done_running(shared: &Shared, c: &Chunk) {
    if let Some(s) = shared.lock().streams.get_mut(&c.key) {
        s.order.run_ended(c.k);
    }
}

/// Runs a chunk beside earlier ones, then commits it in its turn.
async fn ahead(
    shared: &Shared,
    applier: &mut Option<Applier>,
    target: &Target,
    c: &Chunk,
) -> Ahead {
    if applier.is_none() {
        match Applier::open(target).await {
            Ok(a) => *applier = Some(a),
            Err(e) => return Ahead::Done(lose(&c.jobs, &e.text())),
        }
    }
    ahead_on(shared, applier, c).await
}

async fn ahead_on(shared: &Shared, applier: &mut Option<Applier>, c: &Chunk) -> Ahead {
    running(shared, c);
    let ran = match applier.as_mut() {
        Some(a) => a.run_ahead(&c.jobs).await,
        None => Err(ApplyError::Lost("no connection".into())),
    };
    done_running(shared, c);
    match ran {
        Ok(()) => {}
        Err(ApplyError::Lost(e)) => {
            *applier = None;
            return Ahead::Done(lose(&c.jobs, &e));
        }
        Err(ApplyError::Sql { code, error, .. }) => {
            // Not the stream's error yet: an earlier chunk may not have
            // written the row (or this one yielded and was interrupted).
            tracing::debug!(stream = %c.key.2, chunk = c.k, code, "conflict beside earlier chunks: {error}");
            shared.stats.conflicts.fetch_add(1, Ordering::Relaxed);
            return again_in_turn(shared, applier, c).await;
        }
    }
    match turn(shared, &c.key, c.k).await {
        Turn::Go => {
            let committed = match applier.as_mut() {
                Some(a) => a.commit_ahead(&c.jobs).await,
                None => Err(ApplyError::Lost("no connection".into())),
            };
            match committed {
                Ok(()) => {
                    for j in &c.jobs {
                        apply::reply(j, Outcome::Applied);
                    }
                    Ahead::Done(ChunkEnd::Applied)
                }
                Err(ApplyError::Lost(e)) => {
                    *applier = None;
                    Ahead::Done(lose(&c.jobs, &e))
                }
                Err(ApplyError::Sql { .. }) => again_in_turn(shared, applier, c).await,
            }
        }
        Turn::RollBack => {
            let ok = match applier.as_mut() {
                Some(a) => a.rollback().await,
                None => false,
            };
            if !ok {
                *applier = None;
                return Ahead::Done(lose(&c.jobs, "connection lost while rolling back"));
            }
            shared.with_order(&c.key, |o| o.rolled_back(c.k));
            Ahead::Again
        }
        Turn::Drop | Turn::Wait => {
            if let Some(a) = applier.as_mut() {
                let _ = a.rollback().await;
            }
            for j in &c.jobs {
                apply::reply(j, Outcome::Dropped);
            }
            Ahead::Done(ChunkEnd::Dropped)
        }
    }
}

/// Rolls a chunk run beside earlier ones back and marks it to run in
/// turn.
async fn again_in_turn(shared: &Shared, applier: &mut Option<Applier>, c: &Chunk) -> Ahead {
    let ok = match applier.as_mut() {
        Some(a) => a.rollback().await,
        None => false,
    };
    shared.with_order(&c.key, |o| o.conflict(c.k));
    if !ok {
        *applier = None;
    }
    Ahead::Again
}

fn lose(jobs: &[Job], error: &str) -> ChunkEnd {
    for j in jobs {
        apply::reply(
            j,
            Outcome::Lost {
                error: error.to_string(),
            },
        );
    }
    ChunkEnd::Lost
}

fn drop_chunk(shared: &Shared, c: &Chunk) {
    for j in &c.jobs {
        apply::reply(j, Outcome::Dropped);
    }
    close(shared, c, ChunkEnd::Dropped, false);
}

/// Records how chunk `c` ended in its stream's order; `clean`: run ahead
/// with no conflict.
fn close(shared: &Shared, c: &Chunk, end: ChunkEnd, clean: bool) {
    {
        let mut st = shared.lock();
        if end == ChunkEnd::Lost {
            st.lost.insert((c.key.0.clone(), c.key.1));
        }
        if let Some(s) = st.streams.get_mut(&c.key) {
            match end {
                ChunkEnd::Applied => s.order.committed(c.k, clean),
                ChunkEnd::Failed | ChunkEnd::Lost => s.order.failed(c.k),
                ChunkEnd::Dropped => s.order.dropped(c.k),
            }
        }
    }
    shared.bump();
}

/// Every 10 ms while some stream has two chunks open: a chunk running
/// for [`crate::order::STALL_MS`] makes the later chunks waiting for their
/// turn roll back ([`Order::stalled`]). Ends with the workers.
///
/// A panic in it (a bug) turns running beside off for the rest of the
/// run, said in the log and the summary: chunks run in turn, one per
/// stream at a time, which needs no watcher (slower, the same result).
/// Before, the watcher was gone unsaid, and an earlier chunk waiting on a
/// row a later one held waited out the server's lock timeout.
async fn watcher(shared: Arc<Shared>) {
    let watched = std::panic::AssertUnwindSafe(watch_stalls(&shared))
        .catch_unwind()
        .await;
    if let Err(p) = watched {
        let why = format!(
            "the stall watcher stopped at an internal error ({}): {}",
            sqlfleet_conn::text::A_BUG,
            sqlfleet_conn::text::panic_message(p.as_ref())
        );
        tracing::error!("replicate: {why}; chunks of a stream now run in turn, one at a time");
        *shared
            .stats
            .in_turn_after
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(why);
        shared.beside.store(false, Ordering::Relaxed);
        // No new chunk runs beside another now; the ones that do roll
        // back and run again in turn, so that none waits for its turn
        // holding rows an earlier one may need with nobody to tell it.
        for s in shared.lock().streams.values_mut() {
            s.order.yield_all();
        }
        shared.bump();
    }
}

async fn watch_stalls(shared: &Shared) {
    let mut rx = shared.changed.subscribe();
    loop {
        rx.borrow_and_update();
        let (busy, done) = {
            let st = shared.lock();
            (
                st.streams.values().any(|s| s.order.open() >= 2),
                st.closed
                    && st
                        .streams
                        .values()
                        .all(|s| s.queue.is_empty() && s.order.idle()),
            )
        };
        if done {
            return;
        }
        if !busy {
            let _ = tokio::time::timeout(Duration::from_millis(200), rx.changed()).await;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        sqlfleet_faults::point!("replicate::stall_watch");
        let now = shared.now_ms();
        let told: usize = shared
            .lock()
            .streams
            .values_mut()
            .map(|s| s.order.stalled(now))
            .sum();
        if told > 0 {
            shared
                .stats
                .yields
                .fetch_add(told as u64, Ordering::Relaxed);
            tracing::debug!(chunks = told, "later chunks yield to a stalled earlier one");
            shared.bump();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::within_bytes;

    #[test]
    fn a_chunk_stops_at_its_byte_cap_but_takes_at_least_one() {
        let rows: &[(&[usize], usize, usize)] = &[
            (&[], 10, 0),
            (&[5, 5, 5], 10, 2),
            (&[5, 5, 5], 15, 3),
            (&[50], 10, 1),
            (&[50, 1], 10, 1),
            (&[1, 50], 10, 1),
            (&[0, 0, 0], 0, 3),
            (&[usize::MAX, usize::MAX], 10, 1),
        ];
        for (sizes, cap, want) in rows {
            assert_eq!(
                within_bytes(sizes.iter().copied(), *cap),
                *want,
                "{sizes:?} under {cap}"
            );
        }
    }
}
