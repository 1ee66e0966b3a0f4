//! A source's floor as a value: the position a restart reads from.
//!
//! Every transaction read gets a place in a window (its index, the source
//! position after it, its state). The floor is the position after the
//! longest prefix of finished transactions; a transaction that stopped its
//! stream freezes it there for the rest of the session (a restart must read
//! that transaction again), and one still in flight holds it back until it
//! is done. What the floor is written as on the target (`written`) is
//! remembered so the source writes it only when it moved.
//!
//! Pure: the source's reading loop (source.rs) asks it and writes what it
//! says; the decisions are table-tested below.

use std::collections::BTreeMap;

use crate::gtid::GtidPos;

/// Where a transaction in the window stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Status {
    /// Sent to a worker, not done yet.
    Pending,
    /// Applied (or already there, or skipped): the floor may pass it.
    Applied,
    /// Not applied: its stream stopped; the floor stays before it.
    Stopped,
    /// A prepared XA group waiting for its end on the source
    /// (source/xa.rs): it holds the floor but counts no lag (nothing is
    /// committed there yet), and takes its end's status once that ends
    /// ([`Floor::tie`]).
    Held,
}

/// One reading session's floor and window.
#[derive(Debug)]
pub(crate) struct Floor {
    floor: GtidPos,
    written: GtidPos,
    frozen: bool,
    window: BTreeMap<u64, (GtidPos, Status)>,
    next: u64,
    /// Source commit times of the transactions not applied yet (in flight
    /// or stopped), by index: the lag counts them.
    unapplied_times: BTreeMap<u64, u32>,
    /// An XA end's index → the held prepared group's, which ends as it does.
    ties: BTreeMap<u64, u64>,
}

impl Floor {
    /// A session that starts reading at `start`, which the target already
    /// holds as the floor.
    pub(crate) fn new(start: GtidPos) -> Floor {
        Floor {
            floor: start.clone(),
            written: start,
            frozen: false,
            window: BTreeMap::new(),
            next: 0,
            unapplied_times: BTreeMap::new(),
            ties: BTreeMap::new(),
        }
    }

    /// The next transaction read gets this index.
    pub(crate) fn admit(&mut self) -> u64 {
        let idx = self.next;
        self.next += 1;
        idx
    }

    /// Transaction `idx` (source position `after` it, commit time `ts`)
    /// ends in `status` — or, `Pending`, goes to a worker.
    pub(crate) fn place(&mut self, idx: u64, after: GtidPos, ts: u32, status: Status) {
        self.window.insert(idx, (after, status));
        if !matches!(status, Status::Applied | Status::Held) {
            self.unapplied_times.insert(idx, ts);
        }
        self.follow(idx, status);
        self.advance();
    }

    /// The held group at `held` ends as transaction `end` (its XA
    /// COMMIT or ROLLBACK, read but not placed yet) ends.
    pub(crate) fn tie(&mut self, held: u64, end: u64) {
        self.ties.insert(end, held);
    }

    /// A tied end finished: its held group takes its status.
    fn follow(&mut self, idx: u64, status: Status) {
        if matches!(status, Status::Pending | Status::Held) {
            return;
        }
        if let Some(held) = self.ties.remove(&idx) {
            if let Some(e) = self.window.get_mut(&held) {
                e.1 = status;
            }
        }
    }

    /// A worker's answer for a pending transaction. An index the window
    /// no longer holds (an answer from before a restart) changes nothing.
    pub(crate) fn done(&mut self, idx: u64, status: Status) {
        if let Some(e) = self.window.get_mut(&idx) {
            e.1 = status;
            if status == Status::Applied {
                self.unapplied_times.remove(&idx);
            }
            self.follow(idx, status);
        }
        self.advance();
    }

    /// Moves the floor past every finished transaction at the window's
    /// front; a stopped one freezes it.
    fn advance(&mut self) {
        while let Some(e) = self.window.first_entry() {
            match e.get().1 {
                Status::Pending | Status::Held => break,
                Status::Applied => {
                    let (p, _) = e.remove();
                    if !self.frozen {
                        self.floor = p;
                    }
                }
                Status::Stopped => {
                    self.frozen = true;
                    e.remove();
                }
            }
        }
    }

    /// The position to write on the target, when it moved since the last
    /// write.
    pub(crate) fn to_write(&self) -> Option<&GtidPos> {
        (self.floor != self.written).then_some(&self.floor)
    }

    /// The target holds `pos` as the floor now.
    pub(crate) fn written(&mut self, pos: GtidPos) {
        self.written = pos;
    }

    /// The floor as it stands (not necessarily written yet).
    pub(crate) fn position(&self) -> &GtidPos {
        &self.floor
    }

    /// Nothing read in this session is waiting for a worker. (Without
    /// prepared XA groups, whose end the source has not logged yet, the
    /// window is then empty: nothing holds the floor.)
    pub(crate) fn is_settled(&self) -> bool {
        self.window.values().all(|e| e.1 != Status::Pending)
    }

    /// The source commit time of the oldest transaction read and not
    /// applied (in flight or stopped).
    pub(crate) fn oldest_unapplied(&self) -> Option<u32> {
        self.unapplied_times.values().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(s: &str) -> GtidPos {
        GtidPos::parse(s).expect("pos")
    }

    /// One step of a session, as the reading loop takes it.
    #[derive(Clone, Copy)]
    enum Step {
        /// Read a transaction that ends at once (applied, skipped,
        /// already there, a barrier done, or stopped).
        Ends(&'static str, Status),
        /// Read a transaction and send it to a worker.
        Sends(&'static str),
        /// The worker's answer for the n-th transaction read.
        Answer(u64, Status),
        /// An answer from before a restart (an index not in the window).
        Stale(u64),
        /// The floor was written.
        Write,
        /// Read a prepared XA group and hold it.
        Holds(&'static str),
        /// Read the end of the group held at that index; it ends at once.
        EndsTied(&'static str, u64, Status),
        /// Read the end of the group held at that index; sent to a worker.
        SendsTied(&'static str, u64),
    }
    use Status::*;
    use Step::*;

    struct Row {
        name: &'static str,
        start: &'static str,
        steps: &'static [Step],
        /// The floor afterwards; what is to be written (None: nothing new);
        /// whether the window is empty; the oldest unapplied time.
        floor: &'static str,
        to_write: Option<&'static str>,
        settled: bool,
        oldest: Option<u32>,
    }

    const ROWS: &[Row] = &[
        Row {
            name: "a fresh session holds the start and has nothing to write",
            start: "1-1-10",
            steps: &[],
            floor: "1-1-10",
            to_write: None,
            settled: true,
            oldest: None,
        },
        Row {
            name: "applied and skipped transactions move it at once",
            start: "1-1-10",
            steps: &[Ends("1-1-11", Applied), Ends("1-1-12", Applied)],
            floor: "1-1-12",
            to_write: Some("1-1-12"),
            settled: true,
            oldest: None,
        },
        Row {
            name: "a pending transaction holds it back; what finished after it waits",
            start: "1-1-10",
            steps: &[Sends("1-1-11"), Ends("1-1-12", Applied)],
            floor: "1-1-10",
            to_write: None,
            settled: false,
            oldest: Some(11),
        },
        Row {
            name: "answers out of order: the floor moves only over the finished prefix",
            start: "1-1-10",
            steps: &[
                Sends("1-1-11"),
                Sends("1-1-12"),
                Sends("1-1-13"),
                Answer(1, Applied),
                Answer(0, Applied),
            ],
            floor: "1-1-12",
            to_write: Some("1-1-12"),
            settled: false,
            oldest: Some(13),
        },
        Row {
            name: "a barrier after the in-flight work ends: the whole prefix",
            start: "1-1-10",
            steps: &[Sends("1-1-11"), Answer(0, Applied), Ends("1-1-12", Applied)],
            floor: "1-1-12",
            to_write: Some("1-1-12"),
            settled: true,
            oldest: None,
        },
        Row {
            name: "a stop freezes it before the stopped transaction for the session",
            start: "1-1-10",
            steps: &[
                Ends("1-1-11", Applied),
                Ends("1-1-12", Stopped),
                Ends("1-1-13", Applied),
                Sends("1-1-14"),
                Answer(3, Applied),
            ],
            floor: "1-1-11",
            to_write: Some("1-1-11"),
            settled: true,
            oldest: Some(12),
        },
        Row {
            name: "a worker's failure stops it as a refusal does",
            start: "1-1-10",
            steps: &[
                Sends("1-1-11"),
                Sends("1-1-12"),
                Answer(1, Applied),
                Answer(0, Stopped),
            ],
            floor: "1-1-10",
            to_write: None,
            settled: true,
            oldest: Some(11),
        },
        Row {
            name: "written: nothing to write until it moves again",
            start: "1-1-10",
            steps: &[Ends("1-1-11", Applied), Write, Ends("1-1-12", Applied)],
            floor: "1-1-12",
            to_write: Some("1-1-12"),
            settled: true,
            oldest: None,
        },
        Row {
            name: "written and unmoved: nothing to write",
            start: "1-1-10",
            steps: &[Ends("1-1-11", Applied), Write, Sends("1-1-12")],
            floor: "1-1-11",
            to_write: None,
            settled: false,
            oldest: Some(12),
        },
        Row {
            name: "an answer from before a restart changes nothing",
            start: "1-1-10",
            steps: &[Sends("1-1-11"), Stale(7)],
            floor: "1-1-10",
            to_write: None,
            settled: false,
            oldest: Some(11),
        },
        Row {
            name: "a restart starts from the floor the target holds, several domains",
            start: "1-1-10,2-2-5",
            steps: &[Ends("1-1-10,2-2-6", Applied), Sends("1-1-11,2-2-6")],
            floor: "1-1-10,2-2-6",
            to_write: Some("1-1-10,2-2-6"),
            settled: false,
            oldest: Some(12),
        },
        Row {
            name: "a prepared XA group holds it, counts no lag and leaves it settled",
            start: "1-1-10",
            steps: &[
                Ends("1-1-11", Applied),
                Holds("1-1-12"),
                Ends("1-1-13", Applied),
            ],
            floor: "1-1-11",
            to_write: Some("1-1-11"),
            settled: true,
            oldest: None,
        },
        Row {
            name: "its commit applied by a worker moves it past both",
            start: "1-1-10",
            steps: &[
                Holds("1-1-11"),
                Ends("1-1-12", Applied),
                SendsTied("1-1-13", 0),
                Answer(2, Applied),
            ],
            floor: "1-1-13",
            to_write: Some("1-1-13"),
            settled: true,
            oldest: None,
        },
        Row {
            name: "its commit in flight holds it back",
            start: "1-1-10",
            steps: &[Holds("1-1-11"), SendsTied("1-1-12", 0)],
            floor: "1-1-10",
            to_write: None,
            settled: false,
            oldest: Some(12),
        },
        Row {
            name: "its commit stopped freezes it before the prepare: a restart reads both again",
            start: "1-1-10",
            steps: &[
                Holds("1-1-11"),
                Ends("1-1-12", Applied),
                EndsTied("1-1-13", 0, Stopped),
                Ends("1-1-14", Applied),
            ],
            floor: "1-1-10",
            to_write: None,
            settled: true,
            oldest: Some(13),
        },
        Row {
            name: "its commit stopped by a worker does the same",
            start: "1-1-10",
            steps: &[Holds("1-1-11"), SendsTied("1-1-12", 0), Answer(1, Stopped)],
            floor: "1-1-10",
            to_write: None,
            settled: true,
            oldest: Some(12),
        },
        Row {
            name: "its rollback frees it at once",
            start: "1-1-10",
            steps: &[
                Holds("1-1-11"),
                Holds("1-1-12"),
                EndsTied("1-1-13", 0, Applied),
            ],
            floor: "1-1-11",
            to_write: Some("1-1-11"),
            settled: true,
            oldest: None,
        },
    ];

    #[test]
    fn the_floor_decides_as_the_table_says() {
        for row in ROWS {
            let mut f = Floor::new(pos(row.start));
            let mut n = 0u32;
            for step in row.steps {
                match *step {
                    Ends(p, st) => {
                        n += 1;
                        let idx = f.admit();
                        f.place(idx, pos(p), 10 + n, st);
                    }
                    Sends(p) => {
                        n += 1;
                        let idx = f.admit();
                        f.place(idx, pos(p), 10 + n, Pending);
                    }
                    Holds(p) => {
                        n += 1;
                        let idx = f.admit();
                        f.place(idx, pos(p), 10 + n, Held);
                    }
                    EndsTied(p, held, st) => {
                        n += 1;
                        let idx = f.admit();
                        f.tie(held, idx);
                        f.place(idx, pos(p), 10 + n, st);
                    }
                    SendsTied(p, held) => {
                        n += 1;
                        let idx = f.admit();
                        f.tie(held, idx);
                        f.place(idx, pos(p), 10 + n, Pending);
                    }
                    Answer(idx, st) => f.done(idx, st),
                    Stale(idx) => f.done(idx, Applied),
                    Write => {
                        let p = f.position().clone();
                        f.written(p);
                    }
                }
            }
            assert_eq!(f.position(), &pos(row.floor), "{}: floor", row.name);
            assert_eq!(
                f.to_write().cloned(),
                row.to_write.map(pos),
                "{}: to write",
                row.name
            );
            assert_eq!(f.is_settled(), row.settled, "{}: settled", row.name);
            assert_eq!(f.oldest_unapplied(), row.oldest, "{}: oldest", row.name);
        }
    }
}
