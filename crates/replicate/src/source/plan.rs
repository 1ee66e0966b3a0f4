//! What the reader does with a transaction it has read, decided as a
//! value: [`kind`] before anything waits (already applied, skipped, a
//! barrier, or its stream's worker), then — once a barrier has waited for
//! what was in flight, which may have stopped one of its streams —
//! [`blocked`] says whether something stopped holds it back. source.rs
//! carries the answer out; the table tests below are the rules.

use std::collections::BTreeMap;

use crate::gtid::Gtid;
use crate::position::Stored;
use crate::txn::Txn;

use super::ALL_STREAMS;

/// Where a transaction goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Below the floor, or covered by every stream it touches.
    Applied,
    /// Recorded by `replicate skip`: its streams move past it.
    Skip,
    /// Applied on the source's own connection once all before it is.
    Barrier(Barrier),
    /// Its one stream's worker applies it.
    Stream,
}

/// The three barriers, each applied (and recovered) its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Barrier {
    /// DDL and other statements outside a transaction.
    Standalone,
    /// `CREATE TABLE ... SELECT` logged as rows.
    Created,
    /// A transaction of a source session with temporary tables on the
    /// target: applied on that session's connection (temp.rs).
    Thread(u32),
    /// A transaction across databases.
    Multi,
}

/// What holds a transaction back (it stops its streams, unapplied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Blocked {
    /// The source stopped as a whole at this GTID.
    Source(Gtid),
    /// It cannot be applied exactly; `whole_source` when it may touch
    /// streams nobody can name.
    Unsupported { why: String, whole_source: bool },
    /// This stream of it stopped at an earlier transaction.
    Stream(String),
    /// It writes tables a ROLLBACK does not undo, and an earlier run
    /// started it on this stream without recording it: part or all of it
    /// may be on the target (position.rs, `replicate_nontx`).
    Unsure(String),
}

/// What to do with `txn` given what the target has recorded.
pub(super) fn kind(txn: &Txn, stored: &Stored) -> Kind {
    let g = &txn.gtid;
    let known = !txn.dbs.is_empty() && !txn.unknown_scope;
    if txn.is_empty()
        || stored.floor.covers(g)
        || (known && txn.dbs.iter().all(|d| stored.applied(d, g)))
    {
        return Kind::Applied;
    }
    if stored.skips.contains(g) {
        return Kind::Skip;
    }
    if txn.standalone {
        Kind::Barrier(Barrier::Standalone)
    } else if crate::apply::created(txn).is_some() {
        Kind::Barrier(Barrier::Created)
    } else if txn.dbs.len() > 1 || txn.loads_a_file() || txn.expects_an_error() {
        // (A LOAD DATA's file is given on this connection, statement by
        // statement: never in a worker's batch; nor is a statement that is
        // to end with the source's error, which a batch would stop at.)
        Kind::Barrier(Barrier::Multi)
    } else {
        Kind::Stream
    }
}

/// Whether a stop holds `txn` back, in the order that wins: the whole
/// source first, then a transaction that cannot be applied, then one
/// that may be half on the target (`unsure`: per stream, the GTID of such
/// a one), then one of its streams stopped earlier.
pub(super) fn blocked(
    txn: &Txn,
    stopped: &BTreeMap<String, Gtid>,
    unsure: &BTreeMap<String, Gtid>,
) -> Option<Blocked> {
    if let Some(at) = stopped.get(ALL_STREAMS) {
        return Some(Blocked::Source(*at));
    }
    if let Some(why) = &txn.unsupported {
        return Some(Blocked::Unsupported {
            why: format!(
                "cannot apply {} ({} position {}) exactly: {why}",
                txn.gtid, txn.file, txn.end_pos
            ),
            whole_source: txn.unknown_scope || txn.dbs.is_empty(),
        });
    }
    if let Some(d) = txn.dbs.iter().find(|d| unsure.get(*d) == Some(&txn.gtid)) {
        return Some(Blocked::Unsure(d.clone()));
    }
    txn.dbs
        .iter()
        .find(|d| stopped.contains_key(*d))
        .map(|d| Blocked::Stream(d.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::txn;
    use crate::gtid::GtidPos;
    use crate::txn::{Item, Session, Stmt};

    fn stored(floor: &str, streams: &[(&str, &str)], skips: &[&str]) -> Stored {
        Stored {
            floor: GtidPos::parse(floor).expect("floor"),
            streams: streams
                .iter()
                .map(|(d, p)| (d.to_string(), GtidPos::parse(p).expect("pos")))
                .collect(),
            skips: skips.iter().map(|g| g.parse().expect("gtid")).collect(),
            ddl: None,
            ddl_before: None,
            started: true,
            temp: Default::default(),
            unsure: Default::default(),
            retired: Default::default(),
        }
    }

    fn stmt(sql: &str) -> Item {
        Item::Stmt(Box::new(Stmt {
            db: Some("a".into()),
            sql: sql.as_bytes().to_vec(),
            session: Session::default(),
            infile: None,
            expect: None,
        }))
    }

    /// The transaction 1-1-5 as each row shapes it.
    fn shaped(shape: &str) -> Txn {
        let mut t = txn("a", vec![stmt("INSERT INTO t VALUES (1)")]);
        match shape {
            "plain" => {}
            "empty" => {
                t.items.clear();
                t.dbs.clear();
            }
            "two dbs" => {
                t.dbs.insert("b".into());
            }
            "ddl" => t.standalone = true,
            "create select" => t.items = vec![stmt("CREATE TABLE t2 (i int)"), stmt("x")],
            "unknown scope" => t.unknown_scope = true,
            "load data" => {
                t.items = vec![Item::Stmt(Box::new(Stmt {
                    db: Some("a".into()),
                    sql: b"LOAD DATA LOCAL INFILE 'f' INTO TABLE t".to_vec(),
                    session: Session::default(),
                    infile: Some(std::sync::Arc::new(b"1\n".to_vec())),
                    expect: None,
                }))]
            }
            "source error" => {
                t.items = vec![Item::Stmt(Box::new(Stmt {
                    expect: Some(crate::txn::SourceEnd::Error(1062)),
                    ..match stmt("INSERT INTO m VALUES (1), (1)") {
                        Item::Stmt(s) => *s,
                        Item::Rows(_) => unreachable!(),
                    }
                }))]
            }
            "ddl with a source error" => {
                t = shaped("source error");
                t.standalone = true;
            }
            other => panic!("no shape {other}"),
        }
        t
    }

    #[test]
    fn kind_follows_the_target_record_then_the_shape() {
        use Barrier::*;
        // (shape, floor, stream positions, skips, kind)
        type Row<'a> = (
            &'a str,
            &'a str,
            &'a [(&'a str, &'a str)],
            &'a [&'a str],
            Kind,
        );
        let rows: &[Row] = &[
            ("plain", "", &[], &[], Kind::Stream),
            ("empty", "", &[], &[], Kind::Applied),
            ("plain", "1-1-5", &[], &[], Kind::Applied),
            ("plain", "1-1-4", &[], &[], Kind::Stream),
            ("plain", "", &[("a", "1-1-5")], &[], Kind::Applied),
            ("plain", "", &[("a", "1-1-4")], &[], Kind::Stream),
            ("plain", "", &[("b", "1-1-9")], &[], Kind::Stream),
            // Two streams: applied only when both say so.
            ("two dbs", "", &[("a", "1-1-5")], &[], Kind::Barrier(Multi)),
            (
                "two dbs",
                "",
                &[("a", "1-1-5"), ("b", "1-1-6")],
                &[],
                Kind::Applied,
            ),
            // Databases not all known: only the floor says applied.
            ("unknown scope", "", &[("a", "1-1-5")], &[], Kind::Stream),
            ("unknown scope", "1-1-5", &[], &[], Kind::Applied),
            ("plain", "", &[], &["1-1-5"], Kind::Skip),
            ("plain", "", &[], &["1-1-6"], Kind::Stream),
            ("plain", "1-1-5", &[], &["1-1-5"], Kind::Applied),
            ("ddl", "", &[], &[], Kind::Barrier(Standalone)),
            ("ddl", "", &[], &["1-1-5"], Kind::Skip),
            ("create select", "", &[], &[], Kind::Barrier(Created)),
            // Its file is given on the source's own connection.
            ("load data", "", &[], &[], Kind::Barrier(Multi)),
            ("load data", "1-1-5", &[], &[], Kind::Applied),
            // A statement to end with the source's error: alone, on the
            // source's own connection (a batch would stop at it).
            ("source error", "", &[], &[], Kind::Barrier(Multi)),
            ("source error", "", &[("a", "1-1-5")], &[], Kind::Applied),
            (
                "ddl with a source error",
                "",
                &[],
                &[],
                Kind::Barrier(Standalone),
            ),
        ];
        for (shape, floor, streams, skips, want) in rows {
            let got = kind(&shaped(shape), &stored(floor, streams, skips));
            assert_eq!(
                got, *want,
                "{shape} floor={floor} streams={streams:?} skips={skips:?}"
            );
        }
    }

    #[test]
    fn blocked_takes_the_source_then_the_refusal_then_an_unsure_mark_then_a_stream() {
        let g = |s: &str| -> Gtid { s.parse().expect("gtid") };
        let unsupported = |t: &mut Txn| t.unsupported = Some("XA".into());
        // (shape, refused, stopped streams, unsure marks, blocked)
        type Row<'a> = (
            &'a str,
            bool,
            &'a [&'a str],
            &'a [(&'a str, &'a str)],
            Option<&'a str>,
        );
        let rows: &[Row] = &[
            ("plain", false, &[], &[], None),
            ("plain", false, &["b"], &[], None),
            ("plain", false, &["a"], &[], Some("stream a")),
            ("two dbs", false, &["b"], &[], Some("stream b")),
            ("plain", false, &["*", "a"], &[], Some("source")),
            ("plain", true, &[], &[], Some("refused")),
            ("plain", true, &["a"], &[], Some("refused")),
            ("plain", true, &["*"], &[], Some("source")),
            ("unknown scope", true, &[], &[], Some("refused whole")),
            ("empty", true, &[], &[], Some("refused whole")),
            // A mark of this very transaction on one of its streams.
            ("plain", false, &[], &[("a", "1-1-5")], Some("unsure a")),
            ("two dbs", false, &[], &[("b", "1-1-5")], Some("unsure b")),
            ("plain", false, &["a"], &[("a", "1-1-5")], Some("unsure a")),
            ("plain", false, &["*"], &[("a", "1-1-5")], Some("source")),
            // Another transaction's mark, or another stream's: not this one.
            ("plain", false, &[], &[("a", "1-1-6")], None),
            ("plain", false, &[], &[("a", "1-2-5")], None),
            ("plain", false, &[], &[("b", "1-1-5")], None),
            ("plain", false, &["a"], &[("a", "1-1-4")], Some("stream a")),
        ];
        for (shape, refused, stopped, marks, want) in rows {
            let mut t = shaped(shape);
            if *refused {
                unsupported(&mut t);
            }
            let stopped: BTreeMap<String, Gtid> = stopped
                .iter()
                .map(|s| (s.to_string(), g("1-1-3")))
                .collect();
            let unsure: BTreeMap<String, Gtid> =
                marks.iter().map(|(d, at)| (d.to_string(), g(at))).collect();
            let got = match blocked(&t, &stopped, &unsure) {
                None => None,
                Some(Blocked::Unsure(d)) if d == "a" => Some("unsure a"),
                Some(Blocked::Unsure(_)) => Some("unsure b"),
                Some(Blocked::Source(at)) => {
                    assert_eq!(at, g("1-1-3"));
                    Some("source")
                }
                Some(Blocked::Stream(d)) if d == "a" => Some("stream a"),
                Some(Blocked::Stream(_)) => Some("stream b"),
                Some(Blocked::Unsupported { why, whole_source }) => {
                    assert!(
                        why.starts_with("cannot apply 1-1-5 (bin.000001 position 100) exactly: XA"),
                        "{why}"
                    );
                    Some(if whole_source {
                        "refused whole"
                    } else {
                        "refused"
                    })
                }
            };
            assert_eq!(
                got, *want,
                "{shape} refused={refused} stopped={stopped:?} marks={marks:?}"
            );
        }
    }
}
