//! The job vocabulary between the scheduler, the queue and the workers.

use sqlfleet_dump::Statement;
use tokio::sync::oneshot;

use crate::chunk_job::ChunkWork;
use crate::identity::ChainValue;

pub enum Work {
    /// INSERTs of one table, loaded in one transaction.
    Data {
        table: String,
        stmts: Vec<Statement>,
        /// The statement chain after the last statement.
        chain: ChainValue,
        /// The table cannot roll back (MyISAM, Aria, ...).
        nontx: bool,
        /// Some row leaves its AUTO_INCREMENT id to the server: no fast
        /// path (a rolled-back attempt would use ids up).
        generates_ids: bool,
        /// The table has an AUTO_INCREMENT column.
        auto_inc: bool,
    },
    /// A chunk of a CSV/TSV file.
    Chunk(Box<ChunkWork>),
    /// A deferred `ALTER TABLE ... ADD KEY ...`; `record` is the CREATE
    /// TABLE's range, journaled once the indexes exist.
    Index {
        table: String,
        alter: String,
        record: (u64, u64, u64),
    },
}

pub struct Job {
    pub work: Work,
    pub prelude_len: usize,
    /// Dropped when the job is finished, whatever the outcome.
    pub done: oneshot::Sender<()>,
}
