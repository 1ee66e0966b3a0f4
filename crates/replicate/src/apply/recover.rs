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
use crate::sqltext::Dialect;
use crate::txn::{Item, Txn};
use crate::work::ApplyError;

/// The table (or sequence) a standalone `CREATE TABLE|SEQUENCE` (or the
/// first statement of a `CREATE TABLE ... SELECT` group) creates,
/// qualified.
pub(crate) fn created(txn: &Txn) -> Option<String> {
    first_statement_names(txn, crate::sqltext::created_table)
}

/// The table `read` finds in `txn`'s first statement, qualified by the
/// statement's default database when the text does not qualify it.
fn first_statement_names(txn: &Txn, read: fn(&[u8], Dialect) -> Option<DbTable>) -> Option<String> {
    let Some(Item::Stmt(st)) = txn.items.first() else {
        return None;
    };
    let (db, table) = read(&st.sql, st.session.ctx.dialect())?;
    let db = db.or_else(|| st.db.clone())?;
    Some(format!("{}.{}", ident(&db), ident(&table)))
}

/// A table's database (when qualified) and name, as the text reader
/// gives them.
type DbTable = (Option<String>, String);

/// The table a standalone `ALTER TABLE` changes, qualified.
pub(crate) fn altered(txn: &Txn) -> Option<String> {
    first_statement_names(txn, crate::sqltext::altered_table)
}

/// A table's definition as `SHOW CREATE TABLE` gives it, without the
/// AUTO_INCREMENT counter (the one part a crash may move on its own).
/// Only the DDL being applied changes a table between the mark and a
/// re-run (it is a barrier: nothing else runs then).
pub(crate) fn comparable_definition(create: &str) -> String {
    create
        .split(' ')
        .filter(|w| {
            !w.strip_prefix("AUTO_INCREMENT=")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Errors that mean a re-run DDL had already been applied: what it
/// creates exists, or what it drops is gone.
pub(crate) fn already_done(code: u16) -> bool {
    sqlfleet_conn::codes::EXISTS.contains(&code) || sqlfleet_conn::codes::GONE.contains(&code)
}

impl Applier {
    /// Marks `txn`, a standalone statement, as started by `source` — an
    /// `ALTER TABLE` with the table's definition before it.
    pub(crate) async fn mark_started(&mut self, source: &str, txn: &Txn) -> Result<(), ApplyError> {
        let before = match altered(txn) {
            Some(q) => self.definition(&q).await?,
            None => None,
        };
        position::Book::new(&mut self.conn, source)
            .mark_ddl(&txn.gtid, &txn.first, before.as_deref())
            .await
            .map_err(|e| ApplyError::from_driver(e, "recording the position"))
    }

    /// The definition of table `q` (qualified) as [`comparable_definition`]
    /// gives it; `None` when the server has no such table to show. Read
    /// in UTF-8 whatever a replayed statement left the session's result
    /// character set at.
    pub(crate) async fn definition(&mut self, q: &str) -> Result<Option<String>, ApplyError> {
        let sql = format!("SHOW CREATE TABLE {q}");
        self.conn
            .query_drop("SET @@session.character_set_results = utf8mb4")
            .await
            .map_err(|e| ApplyError::from_driver(e, "SET character_set_results"))?;
        match self
            .conn
            .query_first::<mysql_async::Row, _>(sql.as_str())
            .await
        {
            Ok(row) => Ok(row
                .and_then(|r| r.get::<String, _>(1))
                .map(|c| comparable_definition(&c))),
            Err(mysql_async::Error::Server(e)) if already_done(e.code) => Ok(None),
            Err(e) => Err(ApplyError::from_driver(e, &sql)),
        }
    }

    /// Whether a re-run of `txn`, an `ALTER TABLE` marked with its table's
    /// definition `before`, finds it already applied: the table is no
    /// longer what it was (or gone: renamed by it).
    pub(crate) async fn altered_already(
        &mut self,
        txn: &Txn,
        before: &str,
    ) -> Result<bool, ApplyError> {
        let Some(q) = altered(txn) else {
            return Ok(false);
        };
        Ok(self.definition(&q).await?.as_deref() != Some(before))
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
    fn a_definition_is_compared_without_its_auto_increment_counter() {
        let rows: &[(&str, &str)] = &[
            (
                "CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=17 DEFAULT CHARSET=latin1",
                "CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=latin1",
            ),
            // A comment or a default that merely reads like it stays.
            (
                "CREATE TABLE `t` (`c` varchar(9) DEFAULT 'AUTO_INCREMENT=5') COMMENT='AUTO_INCREMENT=x'",
                "CREATE TABLE `t` (`c` varchar(9) DEFAULT 'AUTO_INCREMENT=5') COMMENT='AUTO_INCREMENT=x'",
            ),
        ];
        for (create, want) in rows {
            assert_eq!(comparable_definition(create), *want);
        }
        // Two definitions that differ by an index stay different.
        assert_ne!(
            comparable_definition("CREATE TABLE `t` (`a` int, KEY `a` (`a`)) AUTO_INCREMENT=3"),
            comparable_definition(
                "CREATE TABLE `t` (`a` int, KEY `a` (`a`), KEY `a_2` (`a`)) AUTO_INCREMENT=3"
            )
        );
    }

    #[test]
    fn altered_names_the_table_an_alter_changes_and_nothing_else() {
        let rows: &[(Option<&str>, &str, Option<&str>)] = &[
            (Some("a"), "ALTER TABLE t ADD INDEX (x)", Some("`a`.`t`")),
            (None, "ALTER TABLE b.t ADD c INT", Some("`b`.`t`")),
            (None, "ALTER TABLE t ADD c INT", None),
            (Some("a"), "CREATE TABLE t (i int)", None),
            (Some("a"), "ALTER DATABASE a CHARACTER SET latin1", None),
        ];
        for (db, sql, want) in rows {
            let t = txn("a", vec![stmt(*db, sql)]);
            assert_eq!(altered(&t).as_deref(), *want, "{sql} in {db:?}");
        }
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
