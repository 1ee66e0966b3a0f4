//! Driving one chunk of a stream's jobs to its end: one target
//! transaction with the positions (the one-trip batch), retried on
//! deadlocks, and on a refusal statement by statement to find the
//! culprit; every job gets its answer. The lanes (lanes.rs) decide which
//! chunk runs when; this decides how one runs.

use std::sync::Arc;
use std::time::Duration;

use sqlfleet_conn::Target;

use crate::apply::{Applier, GALERA_REFUSAL};
use crate::batch_sql::{batch_queries, merged_in};
use crate::txn::{Item, Session, Txn};
use crate::work::{ApplyError, Done, Job, Outcome};

/// Deadlock and lock wait timeout: retried, not a stream failure.
const RETRYABLE: &[u16] = sqlfleet_conn::codes::TRANSIENT;

/// Bumped after every DDL the target applies: workers read again which
/// tables do not roll back.
pub type DdlGeneration = Arc<std::sync::atomic::AtomicU64>;

/// How a chunk of one stream's jobs ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkEnd {
    /// Every job committed with its position.
    Applied,
    /// The target refused one: the stream stops there (jobs before it in
    /// the chunk may have committed one by one).
    Failed,
    /// The connection failed: the source restarts from the positions.
    Lost,
    /// Not applied: its stream had stopped before it.
    Dropped,
}

/// Applies one stream's jobs in one target transaction (in turn: every
/// earlier job has committed); on an error, one by one to find the
/// culprit (not `alone` ones: they fail as they are). Replies for every
/// job.
pub async fn apply_chunk(
    applier: &mut Option<Applier>,
    target: &Target,
    live: &[Job],
    alone: bool,
) -> ChunkEnd {
    if live.is_empty() {
        return ChunkEnd::Applied;
    }
    if applier.is_none() {
        match Applier::open(target).await {
            Ok(a) => *applier = Some(a),
            Err(e) => {
                for j in live {
                    reply(j, Outcome::Lost { error: e.text() });
                }
                return ChunkEnd::Lost;
            }
        }
    }
    let Some(a) = applier.as_mut() else {
        return ChunkEnd::Lost;
    };
    if alone && a.galera {
        // Written on this node only, never on the others: the stream
        // stops rather than let the cluster's nodes differ.
        for j in live {
            reply(
                j,
                Outcome::Failed {
                    error: GALERA_REFUSAL.into(),
                    statement: j.txn.first.clone(),
                },
            );
        }
        return ChunkEnd::Failed;
    }
    let t0 = std::time::Instant::now();
    let r = match mark_nontx(a, live, alone).await {
        Ok(()) => apply_batch(a, live, true, alone).await,
        Err(e) => Err(e),
    };
    tracing::debug!(
        jobs = live.len(),
        micros = t0.elapsed().as_micros() as u64,
        "batch"
    );
    match r {
        Ok(()) => {
            for j in live {
                reply(j, Outcome::Applied);
            }
            ChunkEnd::Applied
        }
        Err(ApplyError::Lost(e)) => {
            *applier = None;
            for j in live {
                reply(j, Outcome::Lost { error: e.clone() });
            }
            ChunkEnd::Lost
        }
        Err(ApplyError::Sql {
            error, statement, ..
        }) if alone => {
            for j in live {
                reply(
                    j,
                    Outcome::Failed {
                        error: error.clone(),
                        statement: statement.clone(),
                    },
                );
            }
            ChunkEnd::Failed
        }
        Err(ApplyError::Sql { .. }) => {
            // Find the failing transaction: one by one; after it, the
            // rest of the chunk is dropped (its stream stops there).
            let mut end = ChunkEnd::Applied;
            for j in live {
                if end != ChunkEnd::Applied {
                    reply(j, Outcome::Dropped);
                    continue;
                }
                let Some(a) = applier.as_mut() else {
                    reply(
                        j,
                        Outcome::Lost {
                            error: "connection lost".into(),
                        },
                    );
                    end = ChunkEnd::Lost;
                    continue;
                };
                match apply_batch(a, std::slice::from_ref(j), false, false).await {
                    Ok(()) => reply(j, Outcome::Applied),
                    Err(ApplyError::Sql {
                        error, statement, ..
                    }) => {
                        reply(j, Outcome::Failed { error, statement });
                        end = ChunkEnd::Failed;
                    }
                    Err(ApplyError::Lost(e)) => {
                        *applier = None;
                        reply(j, Outcome::Lost { error: e });
                        end = ChunkEnd::Lost;
                    }
                }
            }
            end
        }
    }
}

/// A chunk writing tables a ROLLBACK does not undo is marked as started
/// on the target first (autocommitted): a crash before its commit then
/// stops its stream on the next run rather than apply it twice
/// (position.rs, `replicate_nontx`).
async fn mark_nontx(a: &mut Applier, live: &[Job], alone: bool) -> Result<(), ApplyError> {
    if !alone {
        return Ok(());
    }
    for j in live {
        a.mark_nontx(&j.source, [j.stream.as_str()], &j.txn).await?;
    }
    Ok(())
}

pub fn reply(j: &Job, outcome: Outcome) {
    if j.replied.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    let _ = j.reply.send(Done {
        generation: j.generation,
        idx: j.idx,
        stream: j.stream.clone(),
        gtid: j.txn.gtid,
        timestamp: j.txn.timestamp,
        outcome,
    });
}

/// Applies jobs in one target transaction with their positions; retries
/// deadlocks and lock wait timeouts, unless the jobs write tables a
/// ROLLBACK does not undo (`alone`: a retry would write them twice).
async fn apply_batch(
    a: &mut Applier,
    jobs: &[Job],
    one_trip: bool,
    alone: bool,
) -> Result<(), ApplyError> {
    let mut tries = 0;
    loop {
        // (A transaction the source rolled back ends with its own
        // ROLLBACK before its positions: statement by statement.)
        let r = if one_trip && !jobs.iter().any(|j| j.txn.rolled_back) {
            try_batch_one_trip(a, jobs, alone).await
        } else {
            try_batch(a, jobs).await
        };
        match &r {
            Err(ApplyError::Sql { code, .. })
                if !alone && RETRYABLE.contains(code) && tries < 5 =>
            {
                let _ = a.run("ROLLBACK").await;
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50 << tries)).await;
            }
            Err(ApplyError::Sql { .. }) => {
                a.run("ROLLBACK").await?;
                return r;
            }
            _ => return r,
        }
    }
}

/// The whole batch in few round trips: START TRANSACTION and the positions,
/// the rows of consecutive transactions merged into few `BINLOG`
/// statements, statements with their session, COMMIT — as multi-statement
/// queries. A `BINLOG` statement always ends its query: the server does not
/// flag further results after one (MariaDB 10.11 desynchronises the
/// protocol otherwise). On an error the server stops at the failing
/// statement (the COMMIT never runs); the caller rolls back and finds the
/// culprit statement by statement ([`try_batch`]).
async fn try_batch_one_trip(a: &mut Applier, jobs: &[Job], alone: bool) -> Result<(), ApplyError> {
    if let Some(f) = jobs.first().map(|j| &j.format) {
        if jobs.iter().all(|j| j.format == *f) {
            a.prime(f).await?;
        } else {
            return try_batch(a, jobs).await;
        }
    }
    a.learn(&user_var_sessions(jobs)).await?;
    let queries = batch_queries(jobs, &a.collations, true)?;
    let last = queries.len().saturating_sub(1);
    for (i, q) in queries.iter().enumerate() {
        if i == last {
            // Rows and positions sent, the transaction open on the target.
            sqlfleet_faults::point!("replicate::batch_before_commit");
            if alone {
                // The same instant in a chunk that writes tables a
                // ROLLBACK does not undo (its own name: a test arms it
                // without touching other runs' chunks; `@source`: nor
                // other sources' runs in the same process).
                sqlfleet_faults::point_of!(
                    "replicate::nontx_before_commit",
                    jobs.first().map_or("", |j| &*j.source)
                );
            }
        }
        a.run_query(q).await?;
    }
    a.merged = merged_in(&queries);
    // Committed; its reply (and so the floor) not yet advanced.
    sqlfleet_faults::point!("replicate::batch_after_commit");
    Ok(())
}

/// The sessions of `jobs`' statements that carry user variables (whose
/// collations the applier must know by name).
fn user_var_sessions(jobs: &[Job]) -> Vec<Session> {
    jobs.iter()
        .flat_map(|j| j.txn.items.iter())
        .filter_map(|i| match i {
            Item::Stmt(st) if !st.session.user_vars.is_empty() => Some(st.session.clone()),
            _ => None,
        })
        .collect()
}

/// Statement by statement: slower, but an error names its statement.
async fn try_batch(a: &mut Applier, jobs: &[Job]) -> Result<(), ApplyError> {
    a.merged = 0;
    a.begin().await?;
    a.learn(&user_var_sessions(jobs)).await?;
    for j in jobs {
        a.prime(&j.format).await?;
        a.items_as_ended(&j.txn).await?;
    }
    let done: Vec<(&str, &str, &Txn)> = jobs
        .iter()
        .map(|j| (&*j.source, j.stream.as_str(), &*j.txn))
        .collect();
    a.commit_with_positions(&done, &[]).await
}
