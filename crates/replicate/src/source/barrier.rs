//! Barriers applied on the source's own target connection, each with its
//! recovery after a crash: DDL and other statements outside a transaction
//! (marked as started, run, recorded; re-run with "already done" errors
//! taken as done, a half-created table dropped and made again), a
//! `CREATE TABLE ... SELECT` logged as rows (the CREATE commits alone, the
//! rows with the positions), and a transaction across databases. The
//! dispatcher in source.rs decides which one a transaction is.

use mysql_async::prelude::Queryable;
use sqlfleet_conn::codes::TABLE_EXISTS;
use sqlfleet_conn::quote::ident;

use super::{Session, SourceRunner};
use crate::apply::Applier;
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
        position::mark_ddl(&mut ctl.conn, name, &txn.gtid, &first)
            .await
            .map_err(|e| ApplyError::from_driver(e, "recording the position"))?;
        sqlfleet_faults::point!("replicate::ddl_marked");
        let r = ctl.items(txn).await;
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
                if code == TABLE_EXISTS && !created_whole(ctl, txn).await? {
                    // A kill -9 in the middle of a CREATE TABLE (a
                    // partitioned one) can leave a table that "exists" and
                    // cannot be opened: ours, since we had started it.
                    tracing::warn!(source = %name, gtid = %txn.gtid, "re-run after a crash found a half-created table; dropping it and creating it again: {first}");
                    for q in half_created_drop(txn) {
                        ctl.conn
                            .query_drop(q.as_str())
                            .await
                            .map_err(|e| ApplyError::from_driver(e, &q))?;
                    }
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
            return self.apply_multi(ctl, txn).await;
        };
        let redo = s.stored.ddl == Some(txn.gtid);
        position::mark_ddl(&mut ctl.conn, name, &txn.gtid, &txn.first)
            .await
            .map_err(|e| ApplyError::from_driver(e, "recording the position"))?;
        match ctl.statement(create).await {
            Ok(()) => {}
            Err(ApplyError::Sql { code, .. }) if redo && code == TABLE_EXISTS => {
                if !created_empty(ctl, txn).await? {
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
            let _ = ctl.conn.query_drop("ROLLBACK").await;
        }
        r?;
        s.stored.ddl = None;
        Ok(())
    }

    /// A transaction across databases: one target transaction with every
    /// touched stream's position.
    pub(super) async fn apply_multi(&self, ctl: &mut Applier, txn: &Txn) -> Result<(), ApplyError> {
        let name = self.cfg.name.as_str();
        ctl.galera_guard(txn, &txn.items).await?;
        let r = async {
            ctl.begin().await?;
            ctl.items(txn).await?;
            let streams: Vec<(&str, &str, &Txn)> =
                txn.dbs.iter().map(|d| (name, d.as_str(), txn)).collect();
            ctl.commit_with_positions(&streams, &[]).await
        }
        .await;
        if let Err(ApplyError::Sql { .. }) = &r {
            let _ = ctl.conn.query_drop("ROLLBACK").await;
        }
        r
    }
}

/// The table (or sequence) a standalone `CREATE TABLE|SEQUENCE` creates,
/// qualified.
pub(super) fn created(txn: &Txn) -> Option<String> {
    let Some(Item::Stmt(st)) = txn.items.first() else {
        return None;
    };
    let (db, table) = crate::sqltext::created_table(&st.sql, st.session.ctx.dialect())?;
    let db = db.or_else(|| st.db.clone())?;
    Some(format!("{}.{}", ident(&db), ident(&table)))
}

/// Whether the table or sequence a re-run `CREATE` found existing can be
/// read (true too when the statement creates neither). One row is read: a
/// sequence that lost its row to the crash "exists" and cannot be read.
async fn created_whole(ctl: &mut Applier, txn: &Txn) -> Result<bool, ApplyError> {
    let Some(q) = created(txn) else {
        return Ok(true);
    };
    match ctl
        .conn
        .query_drop(format!("SELECT 1 FROM {q} LIMIT 1"))
        .await
    {
        Ok(()) => Ok(true),
        Err(mysql_async::Error::Server(_)) => Ok(false),
        Err(e) => Err(ApplyError::from_driver(e, &q)),
    }
}

/// Whether the table a re-run `CREATE` found existing holds no row.
async fn created_empty(ctl: &mut Applier, txn: &Txn) -> Result<bool, ApplyError> {
    let Some(q) = created(txn) else {
        return Ok(false);
    };
    let sql = format!("SELECT 1 FROM {q} LIMIT 1");
    let row: Option<i64> = ctl
        .conn
        .query_first(sql.as_str())
        .await
        .map_err(|e| ApplyError::from_driver(e, &sql))?;
    Ok(row.is_none())
}

/// Removes the source's started-statement mark after the server refused
/// the statement: it did not happen. Best effort — a mark left behind
/// only costs the re-run check its certainty, which the caller's stop
/// already reports.
async fn clear_mark(s: &mut Session, ctl: &mut Applier, name: &str) {
    let _ = ctl.conn.query_drop("ROLLBACK").await;
    if ctl
        .conn
        .query_drop(position::clear_ddl_sql(name))
        .await
        .is_ok()
    {
        s.stored.ddl = None;
    }
}

/// The statements that remove a half-created table.
fn half_created_drop(txn: &Txn) -> Vec<String> {
    created(txn)
        .map(|q| vec![format!("DROP TABLE IF EXISTS {q}")])
        .unwrap_or_default()
}

/// Errors that mean a re-run DDL had already been applied: what it
/// creates exists, or what it drops is gone.
pub(super) fn already_done(code: u16) -> bool {
    sqlfleet_conn::codes::EXISTS.contains(&code) || sqlfleet_conn::codes::GONE.contains(&code)
}
