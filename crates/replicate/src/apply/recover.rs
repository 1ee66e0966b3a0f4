//! Crash recovery on the target, behind [`Applier`] methods: what a re-run
//! of a standalone statement (DDL) or of a `CREATE TABLE ... SELECT`
//! finds after a kill -9 between running it and recording it — "already
//! done" errors, a half-created table, the table the CREATE alone left —
//! and the started-statement mark a refused statement leaves behind. The
//! barrier code in source/barrier.rs decides when to ask.

use mysql_async::prelude::Queryable;
use sqlfleet_conn::quote::ident;

use super::Applier;
use crate::position;
use crate::txn::{Item, Txn};
use crate::work::ApplyError;

/// The table (or sequence) a standalone `CREATE TABLE|SEQUENCE` (or the
/// first statement of a `CREATE TABLE ... SELECT` group) creates,
/// qualified.
pub(crate) fn created(txn: &Txn) -> Option<String> {
    let Some(Item::Stmt(st)) = txn.items.first() else {
        return None;
    };
    let (db, table) = crate::sqltext::created_table(&st.sql, st.session.ctx.dialect())?;
    let db = db.or_else(|| st.db.clone())?;
    Some(format!("{}.{}", ident(&db), ident(&table)))
}

/// Errors that mean a re-run DDL had already been applied: what it
/// creates exists, or what it drops is gone.
pub(crate) fn already_done(code: u16) -> bool {
    sqlfleet_conn::codes::EXISTS.contains(&code) || sqlfleet_conn::codes::GONE.contains(&code)
}

impl Applier {
    /// Marks `txn`, a standalone statement, as started by `source`.
    pub(crate) async fn mark_started(&mut self, source: &str, txn: &Txn) -> Result<(), ApplyError> {
        position::Book::new(&mut self.conn, source)
            .mark_ddl(&txn.gtid, &txn.first)
            .await
            .map_err(|e| ApplyError::from_driver(e, "recording the position"))
    }

    /// Whether the table or sequence a re-run `CREATE` found existing can
    /// be read (true too when the statement creates neither). One row is
    /// read: a sequence that lost its row to the crash "exists" and cannot
    /// be read.
    pub(crate) async fn created_whole(&mut self, txn: &Txn) -> Result<bool, ApplyError> {
        let Some(q) = created(txn) else {
            return Ok(true);
        };
        match self
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
    pub(crate) async fn created_empty(&mut self, txn: &Txn) -> Result<bool, ApplyError> {
        let Some(q) = created(txn) else {
            return Ok(false);
        };
        let sql = format!("SELECT 1 FROM {q} LIMIT 1");
        let row: Option<i64> = self
            .conn
            .query_first(sql.as_str())
            .await
            .map_err(|e| ApplyError::from_driver(e, &sql))?;
        Ok(row.is_none())
    }

    /// Removes the table a kill -9 left half-created by `txn`'s CREATE.
    pub(crate) async fn drop_half_created(&mut self, txn: &Txn) -> Result<(), ApplyError> {
        if let Some(q) = created(txn) {
            let q = format!("DROP TABLE IF EXISTS {q}");
            self.conn
                .query_drop(q.as_str())
                .await
                .map_err(|e| ApplyError::from_driver(e, &q))?;
        }
        Ok(())
    }

    /// Removes `source`'s started-statement mark after the server refused
    /// the statement: it did not happen. Best effort — a mark left behind
    /// only costs the re-run check its certainty, which the caller's stop
    /// already reports. True when it is gone.
    pub(crate) async fn clear_mark(&mut self, source: &str) -> bool {
        self.rollback().await;
        self.conn
            .query_drop(position::clear_ddl_sql(source))
            .await
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::txn;
    use crate::txn::{Session, Stmt};

    fn stmt(db: Option<&str>, sql: &str) -> Item {
        Item::Stmt(Box::new(Stmt {
            db: db.map(str::to_string),
            sql: sql.as_bytes().to_vec(),
            session: Session::default(),
            infile: None,
            expect: None,
        }))
    }

    #[test]
    fn created_names_what_a_create_makes_and_nothing_else() {
        let rows: &[(Option<&str>, &str, Option<&str>)] = &[
            (Some("a"), "CREATE TABLE t (i int)", Some("`a`.`t`")),
            (None, "CREATE TABLE b.t (i int)", Some("`b`.`t`")),
            (Some("a"), "CREATE SEQUENCE s", Some("`a`.`s`")),
            // No default database and none named: nobody can say.
            (None, "CREATE TABLE t (i int)", None),
            (Some("a"), "INSERT INTO t VALUES (1)", None),
            (Some("a"), "DROP TABLE t", None),
        ];
        for (db, sql, want) in rows {
            let t = txn("a", vec![stmt(*db, sql)]);
            assert_eq!(created(&t).as_deref(), *want, "{sql} in {db:?}");
        }
        assert_eq!(created(&txn("a", vec![])), None);
    }

    #[test]
    fn already_done_is_exists_or_gone_only() {
        for (code, want) in [
            (1050, true),
            (1051, true),
            (1007, true),
            (1008, true),
            (1146, true),
            (1062, false),
            (1064, false),
            (0, false),
        ] {
            assert_eq!(already_done(code), want, "{code}");
        }
    }
}
