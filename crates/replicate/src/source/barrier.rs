//! Barriers applied on the source's own target connection, each with its
//! recovery after a crash: DDL and other statements outside a transaction
//! (marked as started, run, recorded; re-run with "already done" errors
//! taken as done, a half-created table dropped and made again), a
//! `CREATE TABLE ... SELECT` logged as rows (the CREATE commits alone, the
//! rows with the positions), and a transaction across databases. The
//! dispatcher in source.rs decides which one a transaction is.

use sqlfleet_conn::codes::TABLE_EXISTS;

use super::{Session, SourceRunner};
use crate::apply::{already_done, created, Applier};
use crate::engines::Engines;
use crate::position;
use crate::txn::{Item, Txn};
use crate::work::ApplyError;

impl SourceRunner {
    /// DDL and other statements outside a transaction: marked as started,
    /// run, then recorded; after a crash between the two, re-run with
    /// "already done" errors taken as done.
    pub(super) async fn apply_standalone(
        &self,
        s: &mut Session,
        ctl: &mut Applier,
        txn: &Txn,
    ) -> Result<(), ApplyError> {
        let name = &self.cfg.name;
        let redo = s.stored.ddl == Some(txn.gtid);
        let first = txn.first.clone();
        // An ALTER TABLE marked with its table's definition: a re-run
        // that finds the table changed takes it as done. (Some ALTERs run
        // twice without an error and change the table twice: an index the
        // server names, `ADD INDEX (a)`, is made again as `a_2`.)
        let done_before = match (redo, s.stored.ddl_before.as_deref()) {
            (true, Some(before)) => ctl.altered_already(txn, before).await?,
            _ => false,
        };
        let r = if done_before {
            tracing::warn!(source = %name, gtid = %txn.gtid, "re-run after a crash found the table it alters changed: already applied: {first}");
            Ok(())
        } else {
            ctl.mark_started(name, txn).await?;
            sqlfleet_faults::point!("replicate::ddl_marked");
            ctl.items(txn).await
        };
        sqlfleet_faults::point!("replicate::ddl_ran");
        if let Err(ApplyError::Sql { code, .. }) = &r {
            if !(redo && already_done(*code)) {
                // The server refused it: it did not happen, and a retry
                // must meet the same refusal — never take it for a re-run
                // after a crash ("exists" is not "done" then).
                clear_mark(s, ctl, name).await;
                return r;
            }
        }
        match r {
            Err(ApplyError::Sql { code, .. }) if redo && already_done(code) => {
                if code == TABLE_EXISTS && !ctl.created_whole(txn).await? {
                    // A kill -9 in the middle of a CREATE TABLE (a
                    // partitioned one) can leave a table that "exists" and
                    // cannot be opened: ours, since we had started it.
                    tracing::warn!(source = %name, gtid = %txn.gtid, "re-run after a crash found a half-created table; dropping it and creating it again: {first}");
                    ctl.drop_half_created(txn).await?;
                    ctl.items(txn).await.map_err(|e| match e {
                        ApplyError::Sql {
                            code,
                            error,
                            statement,
                        } => ApplyError::Sql {
                            code,
                            error: format!(
                                "a table half-created when the target was killed could not be created again ({error}); remove what the crash left and `replicate skip` nothing: a restart retries"
                            ),
                            statement,
                        },
                        lost => lost,
                    })?;
                } else {
                    tracing::warn!(source = %name, gtid = %txn.gtid, "re-run after a crash found it already applied: {first}");
                }
            }
            other => other?,
        }
        let streams: Vec<(&str, &str, &Txn)> = txn
            .dbs
            .iter()
            .map(|d| (name.as_str(), d.as_str(), txn))
            .collect();
        ctl.begin().await?;
        ctl.commit_with_positions(&streams, &[position::clear_ddl_sql(name)])
            .await?;
        s.stored.ddl = None;
        s.stored.ddl_before = None;
        Ok(())
    }

    /// A group that opens with a `CREATE TABLE` and carries the rows that
    /// fill it (`CREATE TABLE ... SELECT` logged in row format). The CREATE
    /// commits on its own on the target, so it is marked as started, as
    /// DDL is; the rows then commit with the positions and the mark's
    /// removal. A re-run after a crash between the two finds the table as
    /// the CREATE alone left it — empty, the rows went with the rolled-back
    /// transaction — and applies the rows; a table that is not empty is
    /// not ours to fill, and stops the stream.
    pub(super) async fn apply_created(
        &self,
        s: &mut Session,
        ctl: &mut Applier,
        txn: &Txn,
    ) -> Result<(), ApplyError> {
        let name = self.cfg.name.as_str();
        let Some(Item::Stmt(create)) = txn.items.first() else {
            return self.apply_multi(ctl, &mut s.engines, txn).await;
        };
        let redo = s.stored.ddl == Some(txn.gtid);
        ctl.mark_started(name, txn).await?;
        match ctl.statement(create).await {
            Ok(()) => {}
            Err(ApplyError::Sql { code, .. }) if redo && code == TABLE_EXISTS => {
                if !ctl.created_empty(txn).await? {
                    clear_mark(s, ctl, name).await;
                    return Err(ApplyError::Sql {
                        code,
                        error: format!(
                            "re-run after a crash: {} exists and holds rows, so it is not the empty table this transaction's CREATE left; compare it with the source, then `replicate skip` or drop it and `replicate retry`",
                            created(txn).unwrap_or_default()
                        ),
                        statement: txn.first.clone(),
                    });
                }
                tracing::warn!(source = %name, gtid = %txn.gtid, "re-run after a crash found the table created and empty; applying its rows: {}", txn.first);
            }
            Err(e @ ApplyError::Sql { .. }) => {
                clear_mark(s, ctl, name).await;
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        let streams: Vec<(&str, &str, &Txn)> =
            txn.dbs.iter().map(|d| (name, d.as_str(), txn)).collect();
        let r = async {
            // The table exists now: its engine is the target's word.
            ctl.galera_guard(txn, &txn.items[1..]).await?;
            ctl.begin().await?;
            ctl.items_from(txn, 1).await?;
            ctl.commit_with_positions(&streams, &[position::clear_ddl_sql(name)])
                .await
        }
        .await;
        if let Err(ApplyError::Sql { .. }) = &r {
            // The table stays, created and empty, and so does the mark: a
            // retry once the cause is fixed fills it.
            ctl.rollback().await;
        }
        r?;
        s.stored.ddl = None;
        s.stored.ddl_before = None;
        Ok(())
    }

    /// A transaction across databases: one target transaction with every
    /// touched stream's position.
    pub(super) async fn apply_multi(
        &self,
        ctl: &mut Applier,
        engines: &mut Engines,
        txn: &Txn,
    ) -> Result<(), ApplyError> {
        let name = self.cfg.name.as_str();
        ctl.galera_guard(txn, &txn.items).await?;
        let nontx = self.mark_if_nontx(ctl, engines, txn).await?;
        let r = async {
            ctl.begin().await?;
            ctl.items_as_ended(txn).await?;
            if nontx {
                sqlfleet_faults::point_of!("replicate::nontx_before_commit", name);
            }
            let streams: Vec<(&str, &str, &Txn)> =
                txn.dbs.iter().map(|d| (name, d.as_str(), txn)).collect();
            ctl.commit_with_positions(&streams, &[]).await
        }
        .await;
        if let Err(ApplyError::Sql { .. }) = &r {
            ctl.rollback().await;
        }
        r
    }

    /// When `txn` writes tables a ROLLBACK does not undo: marks it started
    /// on each of its streams, autocommitted on `conn` before its first
    /// write, as a worker's chunk is (chunk.rs); says whether it did. The
    /// engines are read again only after a DDL.
    pub(super) async fn mark_if_nontx(
        &self,
        conn: &mut Applier,
        engines: &mut Engines,
        txn: &Txn,
    ) -> Result<bool, ApplyError> {
        let generation = self.workers.ddl.load(std::sync::atomic::Ordering::Acquire);
        let stale = engines.stale(generation, std::iter::once(txn));
        if !stale.is_empty() {
            engines.store(conn.engines(generation, stale).await?);
        }
        let nontx = engines.no_rollback(txn);
        if nontx {
            conn.mark_nontx(&self.cfg.name, txn.dbs.iter().map(String::as_str), txn)
                .await?;
        }
        Ok(nontx)
    }
}

/// Removes the source's started-statement mark after the server refused
/// the statement (it did not happen); the session forgets it once gone.
async fn clear_mark(s: &mut Session, ctl: &mut Applier, name: &str) {
    if ctl.clear_mark(name).await {
        s.stored.ddl = None;
        s.stored.ddl_before = None;
    }
}
