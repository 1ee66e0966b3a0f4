//! One stream's commit order while its transactions are applied on
//! several connections at once: a pure value, no sockets.
//!
//! A stream's queue is cut into chunks of consecutive transactions; each
//! chunk is one target transaction holding its transactions' positions,
//! so chunks must commit in source order (the position is a prefix). A
//! chunk is
//! - **speculative**: it runs at once, beside earlier chunks still open,
//!   and commits when every earlier one has. A later chunk that needs a
//!   row an earlier one holds simply waits for the server's lock: the
//!   earlier one commits first anyway. The other way round — an earlier
//!   chunk waiting for a row a later one holds, while the later one waits
//!   for the earlier to commit — no server sees (the later one waits in
//!   here, not in a lock). So the oldest open chunk, once it has been
//!   running for [`STALL_MS`], makes every later chunk that is done and
//!   waiting for its turn *yield* ([`Order::stalled`]): it rolls back (freeing its rows)
//!   and runs again in turn. A stall for another reason only costs that
//!   work again. (`INNODB_LOCK_WAITS` would name the holder, but MariaDB
//!   10.11's copy of it was seen minutes stale.) Any error while running beside earlier chunks is a *conflict*,
//!   not yet the stream's failure (an earlier chunk may not have written
//!   the row yet): the chunk rolls back and runs again in turn, where its
//!   errors are the stream's. This is MariaDB's optimistic parallel
//!   replication, run from outside the server. Row events find their rows
//!   by key, so two chunks that write the same row meet on its lock:
//!   applied in the wrong order they wait, yield or conflict — they never
//!   silently commute.
//! - **in turn**: it conflicted or yielded: waits until every earlier
//!   chunk has committed, then runs.
//! - **barrier**: cannot be rolled back and run again as it was (a table
//!   that does not roll back, a statement, a sequence), or the stream has
//!   one worker: taken only when nothing else of the stream is open, and
//!   nothing is taken beside it.
//!
//! Chunks shrink at a conflict and grow back as chunks run cleanly,
//! between [`MIN_CHUNK`] and the configured batch.

use std::collections::{BTreeMap, BTreeSet};

/// The fewest transactions a chunk shrinks to after conflicts.
pub const MIN_CHUNK: usize = 4;

/// How long a chunk runs before later chunks waiting for their turn
/// yield to it, in milliseconds.
pub const STALL_MS: u64 = 20;

/// Chunks run beside others that are judged together: when more than a
/// quarter of them had to run again, the next chunks run one at a time,
/// whole batches (as with one worker) — [`CALM`] of them, twice as many
/// after each bad judgement in a row (at most [`CALM_MAX`]) — then
/// running beside is tried again. So a stream whose transactions keep
/// meeting each other costs about what one worker costs.
pub const JUDGED: u32 = 16;
pub const CALM: u32 = 32;
pub const CALM_MAX: u32 = 2048;

/// How a chunk runs (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Speculative,
    InTurn,
    Barrier,
}

/// What an open chunk does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Every earlier chunk has committed: commit (or, in turn, run).
    Go,
    /// Earlier chunks are still open.
    Wait,
    /// An earlier chunk waits for a row this one holds: roll back now,
    /// run again in turn.
    RollBack,
    /// An earlier chunk failed: the stream stopped; do not apply.
    Drop,
}

/// One stream's chunks (see the module doc).
#[derive(Debug, Clone)]
pub struct Order {
    /// The number the next chunk taken gets.
    next: u64,
    /// The chunk next to commit: every one below it is done.
    head: u64,
    open: BTreeMap<u64, Mode>,
    /// Speculative chunks that must roll back (they may hold a row an
    /// earlier chunk waits for).
    rerun: BTreeSet<u64>,
    /// Chunks running statements on the target, since when (ms).
    running: BTreeMap<u64, u64>,
    /// The chunk that failed: the stream stopped there.
    stopped: Option<u64>,
    /// Open chunks at most.
    limit: usize,
    /// Transactions per chunk now, and at most.
    size: usize,
    batch: usize,
    /// Chunks taken to run beside others, not yet closed.
    beside: BTreeSet<u64>,
    /// Of the chunks run beside others since the last judgement: how
    /// many, and how many had to run again.
    tried: u32,
    trouble: u32,
    /// Chunks still to run one at a time after a bad judgement, and how
    /// many the next bad judgement gives.
    calm: u32,
    next_calm: u32,
}

impl Order {
    pub fn new(limit: usize, batch: usize) -> Order {
        let batch = batch.max(1);
        Order {
            next: 0,
            head: 0,
            open: BTreeMap::new(),
            rerun: BTreeSet::new(),
            running: BTreeMap::new(),
            stopped: None,
            limit: limit.max(1),
            size: batch,
            batch,
            beside: BTreeSet::new(),
            tried: 0,
            trouble: 0,
            calm: 0,
            next_calm: CALM,
        }
    }

    /// Whether the stream stopped (its queued transactions are dropped).
    pub fn stopped(&self) -> bool {
        self.stopped.is_some()
    }

    /// Whether nothing of the stream is open.
    pub fn idle(&self) -> bool {
        self.open.is_empty()
    }

    /// How many chunks are open.
    pub fn open(&self) -> usize {
        self.open.len()
    }

    /// Whether an earlier chunk than `k` is still open (`k` runs beside
    /// it).
    pub fn behind(&self, k: u64) -> bool {
        self.open.range(..k).next().is_some()
    }

    /// How many transactions the next chunk takes at most.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether any chunk may start now (cheap: asked before a chunk is
    /// looked at).
    pub fn can_take(&self, speculate: bool) -> bool {
        self.stopped.is_none()
            && !self.open.values().any(|m| *m == Mode::Barrier)
            && self.open.len() < self.limit
            && (self.open.is_empty() || (speculate && self.calm == 0))
    }

    /// Takes the next chunk, if one may start now: its number and mode.
    /// `barrier`: the chunk cannot be rolled back and run again.
    /// `speculate`: whether running beside others is allowed at all (one
    /// worker: never).
    pub fn take(&mut self, barrier: bool, speculate: bool) -> Option<(u64, Mode)> {
        let calm = self.calm > 0;
        let barrier = barrier || !speculate || calm;
        if self.stopped.is_some()
            || self.open.values().any(|m| *m == Mode::Barrier)
            || self.open.len() >= self.limit
            || (barrier && !self.open.is_empty())
        {
            return None;
        }
        let mode = if barrier {
            Mode::Barrier
        } else {
            Mode::Speculative
        };
        let k = self.next;
        self.next += 1;
        self.open.insert(k, mode);
        if mode == Mode::Speculative {
            self.beside.insert(k);
        } else if calm {
            self.calm -= 1;
        }
        Some((k, mode))
    }

    /// What chunk `k` does next.
    pub fn turn(&self, k: u64) -> Turn {
        if self.stopped.is_some_and(|s| s < k) {
            Turn::Drop
        } else if self.rerun.contains(&k) {
            Turn::RollBack
        } else if self.head != k {
            Turn::Wait
        } else {
            Turn::Go
        }
    }

    /// Chunk `k` starts running statements at `now_ms`.
    pub fn run_started(&mut self, k: u64, now_ms: u64) {
        self.running.insert(k, now_ms);
    }

    /// Chunk `k` stopped running statements (it waits for its turn, or is
    /// done).
    pub fn run_ended(&mut self, k: u64) {
        self.running.remove(&k);
    }

    /// At `now_ms`: when the oldest open chunk has been running for
    /// [`STALL_MS`], every later speculative chunk that is not running
    /// (done, holding its rows, waiting for its turn) must roll back. Only
    /// the oldest: every chunk before it has committed, so no earlier
    /// chunk can be what it waits for (a later chunk waiting for an
    /// earlier one's row is an ordinary wait). How many were told.
    pub fn stalled(&mut self, now_ms: u64) -> usize {
        let k = self.head;
        if self
            .running
            .get(&k)
            .is_none_or(|t| now_ms.saturating_sub(*t) < STALL_MS)
        {
            return 0;
        }
        let later: Vec<u64> = self
            .open
            .range(k + 1..)
            .filter(|(j, m)| {
                **m == Mode::Speculative && !self.running.contains_key(j) && !self.rerun.contains(j)
            })
            .map(|(j, _)| *j)
            .collect();
        if !later.is_empty() {
            self.shrink();
        }
        self.rerun.extend(later.iter().copied());
        later.len()
    }

    /// Every open speculative chunk after the oldest, running or not,
    /// must roll back and run again in turn: what a stream does when
    /// nothing will watch for stalls any more (lanes.rs's watcher is
    /// gone), so that no chunk waits for its turn holding rows an earlier
    /// one may need.
    pub fn yield_all(&mut self) {
        let later: Vec<u64> = self
            .open
            .range(self.head + 1..)
            .filter(|(_, m)| **m == Mode::Speculative)
            .map(|(j, _)| *j)
            .collect();
        self.rerun.extend(later);
    }

    /// Chunk `k` met an error running beside earlier chunks: it runs
    /// again in turn; chunks shrink.
    pub fn conflict(&mut self, k: u64) {
        self.rerun.remove(&k);
        if let Some(m) = self.open.get_mut(&k) {
            *m = Mode::InTurn;
        }
        self.shrink();
    }

    fn shrink(&mut self) {
        self.size = (self.size / 2).max(MIN_CHUNK.min(self.batch));
    }

    /// Chunk `k` rolled back as told ([`Turn::RollBack`]): it runs again
    /// in turn.
    pub fn rolled_back(&mut self, k: u64) {
        self.rerun.remove(&k);
        if let Some(m) = self.open.get_mut(&k) {
            *m = Mode::InTurn;
        }
    }

    /// Chunk `k` committed; `clean`: run with no conflict, chunks grow.
    pub fn committed(&mut self, k: u64, clean: bool) {
        if clean {
            self.size = (self.size + self.size / 4 + 1).min(self.batch);
        }
        if self.beside.remove(&k) {
            self.tried += 1;
            if !clean {
                self.trouble += 1;
            }
            if self.tried >= JUDGED {
                if self.trouble * 4 > self.tried {
                    self.calm = self.next_calm;
                    self.next_calm = (self.next_calm * 2).min(CALM_MAX);
                    self.size = self.batch;
                } else {
                    self.next_calm = CALM;
                }
                self.tried = 0;
                self.trouble = 0;
            }
        }
        self.close(k);
    }

    /// Chunk `k` failed: the stream stops; later chunks are dropped.
    pub fn failed(&mut self, k: u64) {
        self.stopped = Some(self.stopped.map_or(k, |s| s.min(k)));
        self.close(k);
    }

    /// Chunk `k` was dropped (the stream stopped before it).
    pub fn dropped(&mut self, k: u64) {
        self.close(k);
    }

    fn close(&mut self, k: u64) {
        self.beside.remove(&k);
        self.open.remove(&k);
        self.rerun.remove(&k);
        self.running.remove(&k);
        if self.head == k {
            self.head = k + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy)]
    enum Step {
        Take {
            barrier: bool,
        },
        Conflict(u64),
        /// Chunk runs from ms.
        Runs(u64, u64),
        /// Chunk stops running.
        Ran(u64),
        /// The clock reads ms.
        At(u64),
        /// Nothing watches for stalls any more.
        YieldAll,
        RolledBack(u64),
        Commit(u64),
        Fail(u64),
        Drop(u64),
    }
    use Step::*;

    fn run(limit: usize, speculate: bool, steps: &[Step]) -> (Order, Vec<Option<(u64, Mode)>>) {
        let mut o = Order::new(limit, 64);
        let mut taken = Vec::new();
        for s in steps {
            match *s {
                Take { barrier } => taken.push(o.take(barrier, speculate)),
                Conflict(k) => o.conflict(k),
                Runs(k, t) => o.run_started(k, t),
                Ran(k) => o.run_ended(k),
                At(t) => {
                    o.stalled(t);
                }
                YieldAll => o.yield_all(),
                RolledBack(k) => o.rolled_back(k),
                Commit(k) => o.committed(k, true),
                Fail(k) => o.failed(k),
                Drop(k) => o.dropped(k),
            }
        }
        (o, taken)
    }

    const T: Step = Take { barrier: false };
    const B: Step = Take { barrier: true };
    use Mode::*;

    /// Every rule of taking a chunk, one row each: (limit, speculate,
    /// steps, the takes' results).
    #[test]
    fn taking_chunks() {
        type Row<'a> = (&'a str, usize, bool, &'a [Step], &'a [Option<(u64, Mode)>]);
        let rows: &[Row] = &[
            (
                "the first chunk speculates too",
                4,
                true,
                &[T],
                &[Some((0, Speculative))],
            ),
            (
                "chunks run beside each other up to the limit",
                2,
                true,
                &[T, T, T],
                &[Some((0, Speculative)), Some((1, Speculative)), None],
            ),
            (
                "one worker: every chunk is a barrier",
                4,
                false,
                &[T, T, Commit(0), T],
                &[Some((0, Barrier)), None, Some((1, Barrier))],
            ),
            (
                "a barrier waits for open chunks",
                4,
                true,
                &[T, B],
                &[Some((0, Speculative)), None],
            ),
            (
                "nothing is taken beside a barrier",
                4,
                true,
                &[B, T],
                &[Some((0, Barrier)), None],
            ),
            (
                "a barrier is taken once the stream is idle",
                4,
                true,
                &[T, Commit(0), B],
                &[Some((0, Speculative)), Some((1, Barrier))],
            ),
            (
                "chunks keep running beside one that conflicted",
                4,
                true,
                &[T, T, Conflict(0), T],
                &[
                    Some((0, Speculative)),
                    Some((1, Speculative)),
                    Some((2, Speculative)),
                ],
            ),
            (
                "a stopped stream takes nothing",
                4,
                true,
                &[T, Fail(0), T],
                &[Some((0, Speculative)), None],
            ),
        ];
        for (name, limit, speculate, steps, want) in rows {
            let (_, got) = run(*limit, *speculate, steps);
            assert_eq!(&got, want, "{name}");
        }
    }

    /// `can_take` says no exactly where no chunk at all could be taken.
    #[test]
    fn can_take_agrees_with_take() {
        let cases: &[(&[Step], bool)] = &[
            (&[], true),
            (&[T], true),
            (&[B], true),
            (&[T, T, T, T], true),
        ];
        for (steps, speculate) in cases {
            let (o, _) = run(4, *speculate, steps);
            for barrier in [false, true] {
                let mut probe = o.clone();
                if probe.take(barrier, *speculate).is_some() {
                    assert!(o.can_take(*speculate), "{steps:?} {barrier}");
                }
            }
            let any = [false, true]
                .iter()
                .any(|b| o.clone().take(*b, *speculate).is_some());
            assert_eq!(o.can_take(*speculate), any, "{steps:?}");
        }
        let (o, _) = run(4, false, &[T]);
        assert!(!o.can_take(false), "one at a time");
    }

    /// Every rule of a chunk's turn: (steps, chunk, turn).
    #[test]
    fn turns() {
        let rows: &[(&str, &[Step], u64, Turn)] = &[
            ("the oldest open chunk goes", &[T, T], 0, Turn::Go),
            ("a later chunk waits", &[T, T], 1, Turn::Wait),
            (
                "it goes once the earlier one committed",
                &[T, T, Commit(0)],
                1,
                Turn::Go,
            ),
            (
                "a later chunk waiting for its turn yields to a stalled earlier one",
                &[T, T, Runs(0, 0), Runs(1, 0), Ran(1), At(STALL_MS)],
                1,
                Turn::RollBack,
            ),
            (
                "not before the stall",
                &[T, T, Runs(0, 0), Runs(1, 0), Ran(1), At(STALL_MS - 1)],
                1,
                Turn::Wait,
            ),
            (
                "a later chunk still running does not yield",
                &[T, T, Runs(0, 0), Runs(1, 0), At(STALL_MS)],
                1,
                Turn::Wait,
            ),
            (
                "a later chunk running long (waiting for an earlier one's row) makes none yield",
                &[T, T, T, Runs(1, 0), Runs(2, 0), Ran(2), At(STALL_MS)],
                2,
                Turn::Wait,
            ),
            (
                "an earlier chunk never yields to a later one",
                &[T, T, Runs(1, 0), At(STALL_MS)],
                0,
                Turn::Go,
            ),
            (
                "a chunk in turn holds no rows: no yield",
                &[T, T, Conflict(1), Runs(0, 0), At(STALL_MS)],
                1,
                Turn::Wait,
            ),
            (
                "a chunk done running does not stall",
                &[T, T, Runs(0, 0), Ran(0), At(STALL_MS)],
                1,
                Turn::Wait,
            ),
            (
                "rolled back, it waits for its turn",
                &[T, T, Runs(0, 0), At(STALL_MS), RolledBack(1)],
                1,
                Turn::Wait,
            ),
            (
                "then goes after the earlier one",
                &[T, T, Runs(0, 0), At(STALL_MS), RolledBack(1), Commit(0)],
                1,
                Turn::Go,
            ),
            (
                "a conflicting chunk waits for its turn",
                &[T, T, Conflict(1)],
                1,
                Turn::Wait,
            ),
            (
                "and runs once the earlier ones committed",
                &[T, T, Conflict(1), Commit(0)],
                1,
                Turn::Go,
            ),
            (
                "after a failure later chunks drop",
                &[T, T, Fail(0)],
                1,
                Turn::Drop,
            ),
            (
                "a failed chunk's earlier ones are not dropped",
                &[T, T, Fail(1)],
                0,
                Turn::Go,
            ),
            (
                "unwatched, a later chunk still running yields too",
                &[T, T, Runs(0, 0), Runs(1, 0), YieldAll],
                1,
                Turn::RollBack,
            ),
            (
                "unwatched, a later chunk waiting yields",
                &[T, T, T, Runs(1, 0), Ran(1), Ran(2), YieldAll],
                2,
                Turn::RollBack,
            ),
            (
                "unwatched, the oldest open chunk goes",
                &[T, T, Runs(0, 0), YieldAll],
                0,
                Turn::Go,
            ),
            (
                "unwatched, a chunk in turn waits for its turn",
                &[T, T, Conflict(1), YieldAll],
                1,
                Turn::Wait,
            ),
            (
                "a dropped chunk still moves the head",
                &[T, T, T, Fail(0), Drop(1)],
                2,
                Turn::Drop,
            ),
        ];
        for (name, steps, k, want) in rows {
            let (o, _) = run(4, true, steps);
            assert_eq!(o.turn(*k), *want, "{name}");
        }
    }

    #[test]
    fn chunks_shrink_at_a_conflict_and_grow_back_as_chunks_run_cleanly() {
        let mut o = Order::new(4, 64);
        assert_eq!(o.size(), 64);
        let mut sizes = Vec::new();
        for _ in 0..5 {
            let (k, _) = o.take(false, true).expect("a chunk");
            o.conflict(k);
            sizes.push(o.size());
            o.committed(k, false);
        }
        assert_eq!(
            sizes,
            vec![32, 16, 8, 4, 4],
            "halved, never below {MIN_CHUNK}"
        );
        for _ in 0..40 {
            let (k, _) = o.take(false, true).expect("a chunk");
            o.committed(k, true);
        }
        assert_eq!(o.size(), 64, "grown back to the batch");
        assert_eq!(Order::new(4, 2).size(), 2, "never above the batch");
    }

    #[test]
    fn a_stream_whose_chunks_keep_meeting_runs_one_at_a_time_for_a_while() {
        let mut o = Order::new(4, 64);
        // A quarter exactly is tolerated.
        for i in 0..JUDGED {
            let (k, mode) = o.take(false, true).expect("a chunk");
            assert_eq!(mode, Mode::Speculative);
            o.committed(k, i % 4 != 0);
        }
        assert_eq!(o.take(false, true).map(|t| t.1), Some(Mode::Speculative));
        o.committed(JUDGED as u64, true);
        let mut o = Order::new(4, 64);
        for i in 0..JUDGED {
            let (k, _) = o.take(false, true).expect("a chunk");
            if i % 2 == 0 {
                o.conflict(k);
            }
            o.committed(k, i % 2 != 0);
        }
        for _ in 0..CALM {
            let (k, mode) = o.take(false, true).expect("a chunk");
            assert_eq!(mode, Mode::Barrier, "one at a time");
            assert_eq!(o.size(), 64, "whole batches");
            assert!(o.take(false, true).is_none(), "nothing beside it");
            o.committed(k, false);
        }
        // Tried again; a second bad judgement in a row: twice as long.
        for i in 0..JUDGED {
            let (k, mode) = o.take(false, true).expect("a chunk");
            assert_eq!(mode, Mode::Speculative, "tried again ({i})");
            o.committed(k, false);
        }
        for _ in 0..2 * CALM {
            let (k, mode) = o.take(false, true).expect("a chunk");
            assert_eq!(mode, Mode::Barrier);
            o.committed(k, false);
        }
        assert_eq!(o.take(false, true).map(|t| t.1), Some(Mode::Speculative));
    }

    /// Random schedules of takes, conflicts, stalls, rollbacks and
    /// commits: a chunk goes only when every earlier one is closed, and
    /// only speculative chunks that are not running are told to roll back.
    #[test]
    fn random_schedules_keep_the_order() {
        let mut seed = 0x5eed_u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..500 {
            let mut o = Order::new(4, 64);
            let mut closed: BTreeSet<u64> = BTreeSet::new();
            let mut clock = 0u64;
            for _ in 0..80 {
                let open: Vec<u64> = o.open.keys().copied().collect();
                let pick = |r: u64| open.get(r as usize % open.len().max(1)).copied();
                match rnd(6) {
                    0 => {
                        let _ = o.take(rnd(6) == 0, true);
                    }
                    1 => {
                        if let Some(k) = pick(rnd(8)) {
                            o.conflict(k);
                        }
                    }
                    2 => {
                        if let Some(k) = pick(rnd(8)) {
                            o.run_started(k, clock);
                        }
                        clock += rnd(40);
                        let before: BTreeSet<u64> = o.rerun.clone();
                        let modes = o.open.clone();
                        o.stalled(clock);
                        for h in o.rerun.difference(&before) {
                            assert_eq!(modes.get(h), Some(&Mode::Speculative), "{h}");
                            assert!(!o.running.contains_key(h), "{h} was running");
                        }
                    }
                    3 => {
                        if let Some(k) = pick(rnd(8)) {
                            o.run_ended(k);
                        }
                    }
                    _ => {
                        for k in open {
                            match o.turn(k) {
                                Turn::Go => {
                                    assert!(
                                        (0..k).all(|j| closed.contains(&j)),
                                        "{k} before {closed:?}"
                                    );
                                    o.committed(k, true);
                                    closed.insert(k);
                                }
                                Turn::RollBack => o.rolled_back(k),
                                Turn::Drop => {
                                    o.dropped(k);
                                    closed.insert(k);
                                }
                                Turn::Wait => {}
                            }
                        }
                    }
                }
            }
        }
    }
}
