//! What the primary's binary log says the result cache must forget: a
//! pure reading of the events a replica is sent (`cache/follower.rs`
//! fetches them), one transaction at a time. At each commit it gives what
//! that transaction changed — the tables its row events mapped (only
//! some rows of a table each of whose rows events said which, by its
//! integer columns' values: `cache/row_change.rs`) and the
//! tables its statements write (as the relay reads a write it relays:
//! `decide::write_tables`, names read alike or not at all) — or
//! "everything" for anything it cannot read for sure: DDL and every other
//! statement, XA, LOAD DATA, an incident, an
//! event type it does not know. A wrong "everything" costs hit rate; a
//! wrong list, a stale read. Tables a foreign key's action or a trigger
//! changes unseen are the follower's to add (the catalog, as for writes
//! through the relay).

use std::collections::{BTreeMap, BTreeSet};

use crate::cache::decide;
use crate::cache::row_change::{Keys, MAX_VALUES};
use crate::protocol::sql::{self, starts_with_word as word, TableRef};

/// A binlog event, as far as the cache cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev<'a> {
    /// MariaDB's GTID event: a transaction starts; `standalone`, its one
    /// statement (DDL) is the whole of it.
    Gtid { standalone: bool },
    /// A statement, run in database `db` (empty: none).
    Query { db: &'a [u8], sql: &'a [u8] },
    /// A table map: rows of `db`.`table` follow.
    TableMap { db: &'a [u8], table: &'a [u8] },
    /// Rows of a table mapped before (write, update, delete) that say
    /// nothing for sure about which: every table mapped in the
    /// group is stale whole.
    Rows,
    /// Rows of `db`.`table` (mapped before) whose integer columns' values
    /// the server logged (`cache/row_change.rs`).
    KeyedRows {
        db: &'a [u8],
        table: &'a [u8],
        keys: &'a Keys,
    },
    /// The commit of a transactional group.
    Xid,
    /// Nothing about data: a rotation, a format description, a heartbeat,
    /// a checkpoint, a GTID list, an annotation, a statement's context
    /// (INTVAR, RAND, USER_VAR), a stop.
    Meta,
    /// Anything else (LOAD DATA's blocks, XA PREPARE, an incident, a
    /// compressed event that does not uncompress, an unknown type): what
    /// it changed is not read here.
    Unread,
}

/// What a commit made stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    Whole,
    /// Tables changed, each with its database (as the server logged it).
    Tables(Vec<TableRef>),
    /// Tables changed whole, and tables of which only the rows whose
    /// integer columns held the values given changed (every row event of
    /// the table in the group said so).
    Rows(Vec<TableRef>, Vec<(TableRef, Keys)>),
}

/// The transaction being read.
#[derive(Debug, Default)]
pub struct Follow {
    open: bool,
    standalone: bool,
    whole: bool,
    tables: BTreeSet<(String, String)>,
    /// Tables mapped for rows events (stale whole unless each of their
    /// rows events was keyed).
    mapped: BTreeSet<(String, String)>,
    /// A rows event not keyed: every mapped table is stale whole.
    unkeyed_rows: bool,
    rows: BTreeMap<(String, String), Keys>,
}

impl Follow {
    /// Reads one event; at a transaction's end, what it made stale (if it
    /// changed anything).
    pub fn step(&mut self, ev: Ev<'_>) -> Option<Stale> {
        match ev {
            Ev::Gtid { standalone } => {
                // A group still open (its end not read: a crash of the
                // source, or an end this reader did not know) is made
                // stale all the same: stale for nothing costs a read,
                // dropped for a commit missed, a stale entry.
                let before = self.finish();
                *self = Follow {
                    open: true,
                    standalone,
                    ..Follow::default()
                };
                before
            }
            Ev::Meta => None,
            Ev::Xid => self.finish(),
            Ev::TableMap { db, table } => {
                self.open_if_not();
                self.mapped.insert((text(db), text(table)));
                None
            }
            Ev::Rows => {
                self.open_if_not();
                self.unkeyed_rows = true;
                // (rows of no table mapped: of any)
                self.whole |= self.mapped.is_empty();
                None
            }
            Ev::KeyedRows { db, table, keys } => {
                self.open_if_not();
                let t = (text(db), text(table));
                self.mapped.insert(t.clone());
                match self.rows.get_mut(&t) {
                    Some(k) => merge(k, keys),
                    None => {
                        self.rows.insert(t, keys.clone());
                    }
                }
                None
            }
            Ev::Unread => {
                self.open_if_not();
                self.whole = true;
                self.end_if_standalone()
            }
            Ev::Query { db, sql } => self.statement(db, sql),
        }
    }

    fn statement(&mut self, db: &[u8], sql: &[u8]) -> Option<Stale> {
        if word(sql, "BEGIN") {
            if !self.open {
                *self = Follow {
                    open: true,
                    ..Follow::default()
                };
            }
            return None;
        }
        // The group's end: committed, or rolled back after changing a
        // non-transactional table (what it changed stays changed).
        if word(sql, "COMMIT") || (word(sql, "ROLLBACK") && !rollback_to(sql)) {
            return self.finish();
        }
        self.open_if_not();
        if word(sql, "XA") {
            self.whole = true;
            let second = second_word(sql);
            return if matches!(second.as_str(), "COMMIT" | "ROLLBACK") {
                self.finish()
            } else {
                None
            };
        }
        if word(sql, "SAVEPOINT") || rollback_to(sql) {
            // Undoes part of what was counted: counting it all is enough.
            return None;
        }
        let q = sql::Query::new(sql);
        let fx = q.effects();
        match decide::write_tables(&fx, sql, true) {
            Some(refs) => {
                for r in refs {
                    match (&r.db, db.is_empty()) {
                        (Some(d), _) => {
                            self.tables.insert((d.clone(), r.name.clone()));
                        }
                        (None, false) => {
                            self.tables.insert((text(db), r.name.clone()));
                        }
                        (None, true) => self.whole = true,
                    }
                }
            }
            None => self.whole = true,
        }
        self.end_if_standalone()
    }

    fn open_if_not(&mut self) {
        if !self.open {
            // A group without a GTID event (a server without GTIDs): each
            // statement its own until BEGIN says otherwise.
            *self = Follow {
                open: true,
                standalone: true,
                ..Follow::default()
            };
        }
    }

    fn end_if_standalone(&mut self) -> Option<Stale> {
        if self.standalone {
            self.finish()
        } else {
            None
        }
    }

    fn finish(&mut self) -> Option<Stale> {
        let mut done = std::mem::take(self);
        if done.whole {
            return Some(Stale::Whole);
        }
        // A mapped table is stale whole unless its rows were all keyed.
        for t in std::mem::take(&mut done.mapped) {
            if done.unkeyed_rows || !done.rows.contains_key(&t) {
                done.tables.insert(t);
            }
        }
        done.rows.retain(|t, _| !done.tables.contains(t));
        let tref = |(db, name): (String, String)| TableRef { db: Some(db), name };
        let tables: Vec<TableRef> = done.tables.into_iter().map(tref).collect();
        if done.rows.is_empty() {
            return (!tables.is_empty()).then_some(Stale::Tables(tables));
        }
        let rows = done.rows.into_iter().map(|(t, k)| (tref(t), k)).collect();
        Some(Stale::Rows(tables, rows))
    }
}

/// Two events' keys of one table: the columns both know, with the values
/// of both (past the bound, a column is unknown).
fn merge(into: &mut Keys, other: &Keys) {
    into.retain(|col, vals| match other.get(col) {
        Some(o) => {
            vals.extend(o.iter().copied());
            vals.len() <= MAX_VALUES
        }
        None => false,
    });
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn second_word(sql: &[u8]) -> String {
    String::from_utf8_lossy(sql)
        .split_ascii_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_ascii_uppercase()
}

fn rollback_to(sql: &[u8]) -> bool {
    word(sql, "ROLLBACK")
        && String::from_utf8_lossy(sql)
            .split_ascii_whitespace()
            .take(3)
            .any(|w| w.eq_ignore_ascii_case("TO"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q<'a>(db: &'a str, sql: &'a str) -> Ev<'a> {
        Ev::Query {
            db: db.as_bytes(),
            sql: sql.as_bytes(),
        }
    }

    fn map<'a>(db: &'a str, table: &'a str) -> Ev<'a> {
        Ev::TableMap {
            db: db.as_bytes(),
            table: table.as_bytes(),
        }
    }

    fn tables(list: &[(&str, &str)]) -> Option<Stale> {
        Some(Stale::Tables(
            list.iter()
                .map(|(d, n)| TableRef {
                    db: Some(d.to_string()),
                    name: n.to_string(),
                })
                .collect(),
        ))
    }

    fn keys(cols: &[(&str, &[i128])]) -> Keys {
        cols.iter()
            .map(|(c, v)| (c.to_string(), v.iter().copied().collect()))
            .collect()
    }

    fn tref(d: &str, n: &str) -> TableRef {
        TableRef {
            db: Some(d.into()),
            name: n.into(),
        }
    }

    /// Row events that say which rows (by their integer columns' values):
    /// only those rows, unless another event of the group says less.
    #[test]
    fn keyed_rows_make_stale_only_their_rows_unless_the_group_says_less() {
        let one = keys(&[("id", &[1]), ("k", &[5])]);
        let two = keys(&[("id", &[2])]);
        let kr = |t: &'static str, k: &'static Keys| Ev::KeyedRows {
            db: b"app",
            table: t.as_bytes(),
            keys: k,
        };
        let (one, two): (&'static Keys, &'static Keys) =
            (Box::leak(Box::new(one)), Box::leak(Box::new(two)));
        let begin = q("app", "BEGIN");
        let rows: Vec<(&str, Vec<Ev>, Option<Stale>)> = vec![
            (
                "one table's keyed rows",
                vec![GTID, begin, map("app", "t"), kr("t", one), Ev::Xid],
                Some(Stale::Rows(vec![], vec![(tref("app", "t"), one.clone())])),
            ),
            (
                "two events of a table: the columns both know, every value",
                vec![
                    GTID,
                    begin,
                    map("app", "t"),
                    kr("t", one),
                    kr("t", two),
                    Ev::Xid,
                ],
                Some(Stale::Rows(
                    vec![],
                    vec![(tref("app", "t"), keys(&[("id", &[1, 2])]))],
                )),
            ),
            (
                "a table mapped without keyed rows: whole",
                vec![
                    GTID,
                    begin,
                    map("app", "t"),
                    map("app", "u"),
                    kr("t", one),
                    Ev::Xid,
                ],
                Some(Stale::Rows(
                    vec![tref("app", "u")],
                    vec![(tref("app", "t"), one.clone())],
                )),
            ),
            (
                "a rows event not keyed: every mapped table whole",
                vec![
                    GTID,
                    begin,
                    map("app", "t"),
                    kr("t", one),
                    Ev::Rows,
                    Ev::Xid,
                ],
                tables(&[("app", "t")]),
            ),
            (
                "a statement writing the table: whole",
                vec![
                    GTID,
                    begin,
                    map("app", "t"),
                    kr("t", one),
                    q("app", "UPDATE t SET v = 1"),
                    Ev::Xid,
                ],
                tables(&[("app", "t")]),
            ),
            (
                "rows of no table mapped: everything",
                vec![GTID, begin, Ev::Rows, Ev::Xid],
                Some(Stale::Whole),
            ),
        ];
        for (what, evs, want) in rows {
            let mut f = Follow::default();
            let mut got = None;
            for ev in evs {
                got = f.step(ev);
            }
            assert_eq!(got, want, "{what}");
        }
    }

    const GTID: Ev<'static> = Ev::Gtid { standalone: false };
    const DDL: Ev<'static> = Ev::Gtid { standalone: true };

    /// One row per binlog shape: the events, what the last one gives.
    #[test]
    fn what_each_transaction_makes_stale() {
        let rows: Vec<(&str, Vec<Ev>, Option<Stale>)> = vec![
            (
                "ROW: two tables' rows, committed by XID",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    map("app", "t"),
                    Ev::Rows,
                    map("app", "u"),
                    Ev::Rows,
                    Ev::Xid,
                ],
                tables(&[("app", "t"), ("app", "u")]),
            ),
            (
                "ROW on MyISAM: committed by a COMMIT statement",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    map("app", "m"),
                    Ev::Rows,
                    q("app", "COMMIT"),
                ],
                tables(&[("app", "m")]),
            ),
            (
                "STATEMENT: an UPDATE in the event's database",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    q("app", "UPDATE t SET v = 1 WHERE k = 2"),
                    Ev::Xid,
                ],
                tables(&[("app", "t")]),
            ),
            (
                "STATEMENT: a qualified INSERT from another database",
                vec![
                    GTID,
                    q("other", "BEGIN"),
                    q("other", "INSERT INTO app.t VALUES (1)"),
                    Ev::Xid,
                ],
                tables(&[("app", "t")]),
            ),
            (
                "STATEMENT: an unqualified write with no database",
                vec![GTID, q("", "BEGIN"), q("", "DELETE FROM t"), Ev::Xid],
                Some(Stale::Whole),
            ),
            (
                "a statement with a backslash: names may read otherwise",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    q("app", "UPDATE t SET v = 'a\\'b'"),
                    Ev::Xid,
                ],
                Some(Stale::Whole),
            ),
            (
                "a double quote: a string, or a name under ANSI_QUOTES",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    q("app", "UPDATE t SET v = \"a\" WHERE k = 2"),
                    Ev::Xid,
                ],
                Some(Stale::Whole),
            ),
            (
                "a statement with an executable comment",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    q("app", "UPDATE /*!99999 u, */ t SET v = 1"),
                    Ev::Xid,
                ],
                Some(Stale::Whole),
            ),
            (
                "a stored routine's call logged as a statement",
                vec![GTID, q("app", "BEGIN"), q("app", "SELECT f(1)"), Ev::Xid],
                Some(Stale::Whole),
            ),
            (
                "DDL: its own group",
                vec![DDL, q("app", "ALTER TABLE t ADD COLUMN c INT")],
                Some(Stale::Whole),
            ),
            (
                "TRUNCATE",
                vec![DDL, q("app", "TRUNCATE TABLE t")],
                Some(Stale::Whole),
            ),
            (
                "DROP DATABASE",
                vec![DDL, q("", "DROP DATABASE app")],
                Some(Stale::Whole),
            ),
            (
                "a group rolled back after a non-transactional change",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    map("app", "m"),
                    Ev::Rows,
                    q("app", "ROLLBACK"),
                ],
                tables(&[("app", "m")]),
            ),
            (
                "a savepoint and a rollback to it: the group goes on",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    q("app", "SAVEPOINT a"),
                    map("app", "t"),
                    Ev::Rows,
                    q("app", "ROLLBACK TO a"),
                ],
                None,
            ),
            (
                "... and its commit",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    q("app", "SAVEPOINT a"),
                    map("app", "t"),
                    Ev::Rows,
                    q("app", "ROLLBACK TO a"),
                    Ev::Xid,
                ],
                tables(&[("app", "t")]),
            ),
            (
                "XA: prepared, then committed in a group of its own",
                vec![
                    GTID,
                    q("app", "XA START 'x'"),
                    map("app", "t"),
                    Ev::Rows,
                    q("app", "XA END 'x'"),
                    Ev::Unread,
                ],
                None,
            ),
            (
                "XA COMMIT",
                vec![DDL, q("app", "XA COMMIT 'x'")],
                Some(Stale::Whole),
            ),
            (
                "LOAD DATA logged as a statement (its blocks unread)",
                vec![GTID, q("app", "BEGIN"), Ev::Unread, Ev::Unread, Ev::Xid],
                Some(Stale::Whole),
            ),
            (
                "an unknown event outside any group",
                vec![Ev::Unread],
                Some(Stale::Whole),
            ),
            ("nothing but meta events", vec![Ev::Meta, Ev::Meta], None),
            (
                "a transaction that changed nothing",
                vec![GTID, q("app", "BEGIN"), Ev::Xid],
                None,
            ),
            (
                "a group cut by the source's crash, then the next",
                vec![
                    GTID,
                    q("app", "BEGIN"),
                    map("app", "lost"),
                    Ev::Rows,
                    GTID,
                    q("app", "BEGIN"),
                    map("app", "t"),
                    Ev::Rows,
                    Ev::Xid,
                ],
                tables(&[("app", "t")]),
            ),
            (
                "no GTIDs: a statement alone is its own group",
                vec![q("app", "INSERT INTO t VALUES (1)")],
                tables(&[("app", "t")]),
            ),
            (
                "no GTIDs: BEGIN ... COMMIT",
                vec![
                    q("app", "BEGIN"),
                    q("app", "INSERT INTO t VALUES (1)"),
                    q("app", "UPDATE u SET v = 2"),
                    q("app", "COMMIT"),
                ],
                tables(&[("app", "t"), ("app", "u")]),
            ),
        ];
        for (what, events, want) in rows {
            let mut f = Follow::default();
            let mut got = None;
            let n = events.len();
            for (i, ev) in events.into_iter().enumerate() {
                let out = f.step(ev);
                if i + 1 < n {
                    assert!(
                        out.is_none() || what.contains("cut"),
                        "{what}: gave {out:?} before its end"
                    );
                }
                got = out;
            }
            assert_eq!(got, want, "{what}");
        }
    }

    /// A group whose end this reader never saw (the source crashed, or an
    /// end it does not know) is made stale when the next group starts —
    /// never dropped.
    #[test]
    fn a_group_whose_end_was_not_read_is_made_stale_at_the_next() {
        let mut f = Follow::default();
        for ev in [GTID, q("app", "BEGIN"), map("app", "lost"), Ev::Rows] {
            assert_eq!(f.step(ev), None);
        }
        assert_eq!(f.step(GTID), tables(&[("app", "lost")]));
        f.step(q("app", "BEGIN"));
        f.step(q(
            "app",
            "/* a commit in words it does not know */ COMMIT WORK",
        ));
        assert_eq!(f.step(DDL), Some(Stale::Whole));
    }

    use proptest::prelude::*;

    /// An event drawn from every kind, with any bytes where the server's
    /// would be.
    fn event() -> impl Strategy<Value = (u8, Vec<u8>, Vec<u8>, bool)> {
        (0u8..8, any::<Vec<u8>>(), any::<Vec<u8>>(), any::<bool>())
    }

    fn ev<'a>((kind, a, b, flag): &'a (u8, Vec<u8>, Vec<u8>, bool)) -> Ev<'a> {
        match kind {
            0 => Ev::Gtid { standalone: *flag },
            1 => Ev::Query { db: a, sql: b },
            2 => Ev::TableMap { db: a, table: b },
            3 => Ev::Rows,
            4 => Ev::Xid,
            5 => Ev::Meta,
            6 => Ev::Unread,
            _ => Ev::Query {
                db: a,
                sql: b"COMMIT",
            },
        }
    }

    proptest! {
        /// Any sequence of events, any bytes in them: no panic, and a
        /// group with an event it cannot read ends as "everything".
        #[test]
        fn any_events_read_without_a_panic_and_unread_means_everything(
            events in proptest::collection::vec(event(), 0..40),
        ) {
            let mut f = Follow::default();
            for e in &events {
                let _ = f.step(ev(e));
            }
            let mut f = Follow::default();
            f.step(Ev::Gtid { standalone: false });
            for e in events.iter().filter(|e| e.0 == 2 || e.0 == 3 || e.0 == 5) {
                prop_assert_eq!(f.step(ev(e)), None);
            }
            f.step(Ev::Unread);
            prop_assert_eq!(f.step(Ev::Xid), Some(Stale::Whole));
        }
    }
}
