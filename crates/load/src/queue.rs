//! The work queue between the scheduler and the workers, by table.
//!
//! A plain FIFO would put every worker on the same table, because a dump
//! holds one table's rows after another: they then fight over that
//! table's index pages and, for LOAD DATA into an AUTO_INCREMENT table,
//! its table-level AUTO-INC lock. Instead the scheduler reads ahead (up to
//! `cap_bytes` of queued batches) and each free worker takes the oldest
//! batch of the table with the fewest workers on it, so several tables
//! load at once, and one big table still gets every worker.
//!
//! The lease says whether the batch may use LOAD DATA: always for tables
//! without AUTO_INCREMENT, and for the others only for the first worker
//! on the table (two LOAD DATA into one AUTO_INCREMENT table would
//! serialize on its AUTO-INC lock; multi-row INSERTs don't).

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::Notify;

use crate::job::Job;

struct TableQ {
    key: String,
    jobs: VecDeque<(Job, usize)>,
    active: usize,
    auto_inc: bool,
    /// One worker at a time, in queue order (rows whose order decides
    /// the result: INSERT IGNORE, REPLACE, --continue-on-error).
    ordered: bool,
}

#[derive(Default)]
struct State {
    tables: Vec<TableQ>,
    queued_bytes: usize,
    closed: bool,
}

pub struct JobQueue {
    state: Mutex<State>,
    changed: Notify,
    cap_bytes: usize,
}

/// A job taken from the queue; hand it back with [`JobQueue::done`].
pub struct Lease {
    pub job: Job,
    pub table: String,
    /// May this batch go through LOAD DATA?
    pub fast_ok: bool,
}

impl JobQueue {
    pub fn new(cap_bytes: usize) -> JobQueue {
        JobQueue {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            cap_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a job for `table`, waiting while the queue holds more than
    /// its byte budget (so memory stays bounded).
    pub async fn push(&self, table: &str, auto_inc: bool, ordered: bool, job: Job, bytes: usize) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.lock();
                if st.queued_bytes == 0 || st.queued_bytes + bytes <= self.cap_bytes {
                    st.queued_bytes += bytes;
                    match st.tables.iter_mut().find(|t| t.key == table) {
                        Some(t) => {
                            t.jobs.push_back((job, bytes));
                            t.auto_inc = auto_inc;
                            t.ordered |= ordered;
                        }
                        None => st.tables.push(TableQ {
                            key: table.to_string(),
                            jobs: VecDeque::from([(job, bytes)]),
                            active: 0,
                            auto_inc,
                            ordered,
                        }),
                    }
                    drop(st);
                    self.changed.notify_waiters();
                    return;
                }
            }
            notified.await;
        }
    }

    /// The next job for a worker; `None` once closed and empty.
    pub async fn pop(&self) -> Option<Lease> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.lock();
                let best = st
                    .tables
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| !(t.jobs.is_empty() || t.ordered && t.active > 0))
                    .min_by_key(|(i, t)| (t.active, *i))
                    .map(|(i, _)| i);
                if let Some(i) = best {
                    let t = &mut st.tables[i];
                    let (job, bytes) = t.jobs.pop_front()?;
                    let fast_ok = !t.auto_inc || t.active == 0;
                    t.active += 1;
                    let table = t.key.clone();
                    st.queued_bytes -= bytes;
                    drop(st);
                    self.changed.notify_waiters();
                    return Some(Lease {
                        job,
                        table,
                        fast_ok,
                    });
                }
                // Closed: done once nothing is left (jobs of an ordered
                // table may still wait for its running one).
                if st.closed && st.tables.iter().all(|t| t.jobs.is_empty()) {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// A worker finished a job of `table`.
    pub fn done(&self, table: &str) {
        let mut st = self.lock();
        if let Some(i) = st.tables.iter().position(|t| t.key == table) {
            st.tables[i].active -= 1;
            if st.tables[i].active == 0 && st.tables[i].jobs.is_empty() {
                st.tables.remove(i);
            }
        }
        drop(st);
        self.changed.notify_waiters();
    }

    /// No more jobs will come; workers exit once the queue is empty.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_waiters();
    }
}

/// An information_schema.COLUMNS condition: the column's default takes a
/// sequence's next value (`nextval(s)`, `NEXT VALUE FOR s`), so rows that
/// leave it to the default get values in the order they are inserted.
pub const TAKES_SEQUENCE: &str =
    "(COLUMN_DEFAULT LIKE '%nextval%' OR COLUMN_DEFAULT LIKE '%next%value%for%')";

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    fn job() -> (Job, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let job = Job {
            work: crate::job::Work::Index {
                table: String::new(),
                alter: String::new(),
                record: (0, 0, 0),
            },
            prelude_len: 0,
            done: tx,
        };
        (job, rx)
    }

    #[tokio::test]
    async fn spreads_workers_over_tables_and_limits_fast_path() {
        let q = JobQueue::new(1 << 20);
        for t in ["a", "a", "a", "b"] {
            q.push(t, true, false, job().0, 10).await;
        }
        let l1 = q.pop().await.expect("job");
        let l2 = q.pop().await.expect("job");
        let l3 = q.pop().await.expect("job");
        assert_eq!((l1.table.as_str(), l1.fast_ok), ("a", true));
        // The second worker goes to the other table, not the first one's.
        assert_eq!((l2.table.as_str(), l2.fast_ok), ("b", true));
        // A third joins table a, as a plain INSERT worker (AUTO_INCREMENT).
        assert_eq!((l3.table.as_str(), l3.fast_ok), ("a", false));
        q.done("a");
        q.done("b");
        q.done("a");
        let l4 = q.pop().await.expect("the last 'a' job");
        assert_eq!((l4.table.as_str(), l4.fast_ok), ("a", true));
        q.push("c", false, false, job().0, 10).await;
        q.push("c", false, false, job().0, 10).await;
        let l5 = q.pop().await.expect("job");
        let l6 = q.pop().await.expect("job");
        assert_eq!((l5.table.as_str(), l6.table.as_str()), ("c", "c"));
        assert!(
            l5.fast_ok && l6.fast_ok,
            "no AUTO_INCREMENT: both may LOAD DATA"
        );
        q.close();
        assert!(q.pop().await.is_none());
    }

    #[tokio::test]
    async fn push_waits_for_room() {
        let q = std::sync::Arc::new(JobQueue::new(15));
        q.push("a", false, false, job().0, 10).await;
        let q2 = q.clone();
        let pusher = tokio::spawn(async move { q2.push("a", false, false, job().0, 10).await });
        tokio::task::yield_now().await;
        assert!(!pusher.is_finished());
        let _l = q.pop().await.expect("job");
        pusher.await.expect("pushed once there was room");
    }

    #[tokio::test]
    async fn an_ordered_table_gets_one_worker_at_a_time_in_order() {
        let q = JobQueue::new(1 << 20);
        let (j1, _r1) = job();
        let (j2, _r2) = job();
        q.push("t", false, true, j1, 10).await;
        q.push("t", false, true, j2, 10).await;
        q.push("u", false, false, job().0, 10).await;
        let a = q.pop().await.expect("job");
        assert_eq!(a.table, "t");
        let b = q.pop().await.expect("job");
        assert_eq!(b.table, "u", "t's second batch waits for its first");
        q.close();
        let q = std::sync::Arc::new(q);
        let q2 = q.clone();
        let next = tokio::spawn(async move { q2.pop().await.map(|l| l.table) });
        tokio::task::yield_now().await;
        assert!(!next.is_finished());
        q.done("t");
        assert_eq!(next.await.expect("join").as_deref(), Some("t"));
    }
}
