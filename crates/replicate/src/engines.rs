//! Which of the target's tables a ROLLBACK does not undo (MyISAM, Aria,
//! MEMORY ...) and which are sequences, per database, each as read at a
//! DDL generation. Decides how a transaction may be applied: one writing
//! a table that does not roll back is applied alone and never retried (a
//! retry would apply its writes twice); one that is not pure rows of
//! ordinary rolled-back tables is never run ahead of its turn (see
//! [`crate::order`]). Only the databases of the jobs at hand are read, and
//! again only after a DDL: a consolidation target holds many databases,
//! and information_schema opens every table it lists an engine for.

use std::collections::{BTreeSet, HashMap, HashSet};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sqlfleet_conn::quote::utf8_literal;

use crate::event;
use crate::sequence;
use crate::txn::{Item, Txn};

#[derive(Default, Debug, Clone)]
struct Known {
    generation: u64,
    no_rollback: HashSet<String>,
    sequences: HashSet<String>,
}

/// The engines known per database (see the module doc).
#[derive(Default, Debug)]
pub struct Engines {
    dbs: HashMap<String, Known>,
}

/// What was read for some databases at one DDL generation.
pub struct Read {
    generation: u64,
    dbs: Vec<String>,
    rows: Vec<(String, String, String)>,
}

impl Engines {
    /// The databases of `txns` not read since DDL `generation`.
    pub fn stale<'a>(&self, generation: u64, txns: impl Iterator<Item = &'a Txn>) -> Vec<String> {
        let set: BTreeSet<&str> = txns
            .flat_map(|t| t.dbs.iter())
            .filter(|d| self.dbs.get(*d).is_none_or(|k| k.generation != generation))
            .map(String::as_str)
            .collect();
        set.into_iter().map(str::to_string).collect()
    }

    /// Reads `dbs` on the target.
    pub async fn read(
        conn: &mut Conn,
        generation: u64,
        dbs: Vec<String>,
    ) -> Result<Read, mysql_async::Error> {
        if dbs.is_empty() {
            return Ok(Read {
                generation,
                dbs,
                rows: Vec::new(),
            });
        }
        let list = dbs
            .iter()
            .map(|d| utf8_literal(d))
            .collect::<Vec<_>>()
            .join(", ");
        let q = format!(
            "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA IN ({list}) AND \
             ((TABLE_TYPE = 'BASE TABLE' AND ENGINE <> 'InnoDB') OR TABLE_TYPE = 'SEQUENCE')"
        );
        let rows = conn.query(q.as_str()).await?;
        Ok(Read {
            generation,
            dbs,
            rows,
        })
    }

    /// Keeps what [`Engines::read`] read.
    pub fn store(&mut self, r: Read) {
        for d in r.dbs {
            self.dbs.insert(
                d,
                Known {
                    generation: r.generation,
                    ..Known::default()
                },
            );
        }
        for (d, t, ty) in r.rows {
            if let Some(k) = self.dbs.get_mut(&d) {
                if ty == "SEQUENCE" {
                    k.sequences.insert(t);
                } else {
                    k.no_rollback.insert(t);
                }
            }
        }
    }

    fn holds(&self, db: &str) -> Option<&Known> {
        self.dbs
            .get(db)
            .filter(|k| !k.no_rollback.is_empty() || !k.sequences.is_empty())
    }

    /// Whether applying `txn` may write a table that does not roll back:
    /// a rows event on one, or a statement in a database holding one.
    pub fn no_rollback(&self, txn: &Txn) -> bool {
        self.no_rollback_in(&txn.dbs, &txn.items)
    }

    /// [`Engines::no_rollback`] for some of a transaction's items.
    pub fn no_rollback_in(&self, dbs: &BTreeSet<String>, items: &[Item]) -> bool {
        if !dbs
            .iter()
            .any(|d| self.holds(d).is_some_and(|k| !k.no_rollback.is_empty()))
        {
            return false;
        }
        items.iter().any(|item| match item {
            Item::Rows(r) => self.maps_touch(&r.bytes, |k, t| k.no_rollback.contains(t)),
            Item::Stmt(_) => true,
        })
    }

    /// Whether `txn` may run ahead of its turn: only rows events, none on
    /// a table that does not roll back or on a sequence (unreadable
    /// events: no).
    pub fn replayable(&self, txn: &Txn) -> bool {
        if !txn.dbs.iter().any(|d| self.holds(d).is_some()) {
            // No such table where it writes: only its kind of items counts
            // (no table map needs reading).
            return txn.items.iter().all(|i| matches!(i, Item::Rows(_)));
        }
        txn.items.iter().all(|item| match item {
            Item::Rows(r) => !self.maps_touch(&r.bytes, |k, t| {
                k.no_rollback.contains(t) || k.sequences.contains(t)
            }),
            Item::Stmt(_) => false,
        })
    }

    /// Whether a table map in `bytes` names a table `hit` says yes to
    /// (unreadable maps: yes).
    fn maps_touch(&self, bytes: &[u8], hit: impl Fn(&Known, &str) -> bool) -> bool {
        sequence::split(bytes).is_none_or(|(maps, _)| {
            maps.iter().any(|m| {
                event::table_map(m, event::crc_ok(m), 8).map_or(true, |tm| {
                    self.holds(&String::from_utf8_lossy(&tm.db))
                        .is_some_and(|k| hit(k, &String::from_utf8_lossy(&tm.table)))
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{ev, table_map, txn};
    use crate::txn::{Rows, Session, Stmt};

    fn known() -> Engines {
        let mut e = Engines::default();
        e.store(Read {
            generation: 1,
            dbs: vec!["db".into(), "other".into()],
            rows: vec![
                ("db".into(), "myi".into(), "BASE TABLE".into()),
                ("db".into(), "seq".into(), "SEQUENCE".into()),
            ],
        });
        e
    }

    fn rows(t: &str) -> Item {
        Item::Rows(Rows {
            bytes: [table_map("db", t), ev(23, 60, 2)].concat(),
            what: String::new(),
            layout: None,
        })
    }

    fn stmt() -> Item {
        Item::Stmt(Box::new(Stmt {
            db: Some("db".into()),
            sql: b"UPDATE t SET v = v + 1".to_vec(),
            session: Session::default(),
            infile: None,
            expect: None,
        }))
    }

    /// Every rule, one row each: (what, database, items, applied alone,
    /// may run ahead).
    #[test]
    fn how_a_transaction_may_be_applied() {
        let unreadable = || {
            Item::Rows(Rows {
                bytes: vec![1, 2, 3],
                what: String::new(),
                layout: None,
            })
        };
        let rows_: Vec<(&str, &str, Vec<Item>, bool, bool)> = vec![
            (
                "rows of an InnoDB table",
                "db",
                vec![rows("t")],
                false,
                true,
            ),
            (
                "rows of the MyISAM table",
                "db",
                vec![rows("myi")],
                true,
                false,
            ),
            ("rows of a sequence", "db", vec![rows("seq")], false, false),
            (
                "a statement in a database holding MyISAM",
                "db",
                vec![stmt()],
                true,
                false,
            ),
            ("a statement elsewhere", "other", vec![stmt()], false, false),
            ("unreadable rows", "db", vec![unreadable()], true, false),
            (
                "rows and a statement",
                "db",
                vec![rows("t"), stmt()],
                true,
                false,
            ),
        ];
        let e = known();
        for (what, db, items, alone, ahead) in rows_ {
            let t = txn(db, items);
            assert_eq!(e.no_rollback(&t), alone, "{what}: alone");
            assert_eq!(e.replayable(&t), ahead, "{what}: ahead");
        }
    }

    #[test]
    fn a_database_is_read_again_after_a_ddl() {
        let e = known();
        let t = [txn("db", vec![]), txn("new", vec![])];
        assert_eq!(e.stale(1, t.iter()), vec!["new".to_string()]);
        assert_eq!(
            e.stale(2, t.iter()),
            vec!["db".to_string(), "new".to_string()]
        );
    }
}
