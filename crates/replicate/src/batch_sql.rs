//! The SQL a worker sends, built as values (no I/O): `BINLOG` statements
//! cut to the server's limits, the session `SET` a source statement ran
//! under, the position rows of transactions applied together, and the
//! multi-statement queries of a one-trip batch. Table-tested below; the
//! connection that sends them is apply.rs's `Applier`.

use base64::Engine;
use sqlfleet_conn::quote::{ident, UTF8_CLIENT};

use crate::context;
use crate::event;
use crate::merge::{Add, Merged};
use crate::position;
use crate::txn::{Item, Session, Stmt, Txn, VarValue};
use crate::work::{ApplyError, Collations, Job};

/// Raw bytes per `BINLOG` statement, at most (base64 makes it 4/3 of
/// this): well under the default max_allowed_packet of 16 MiB.
pub(crate) const CHUNK: usize = 4 << 20;

/// Splits one statement's events (table maps first, then rows events)
/// into pieces of about `limit` bytes, each starting with every table map:
/// the server forgets table maps at the end of each `BINLOG` statement and
/// silently ignores rows events whose map it does not have.
pub fn rows_chunks(raw: &[u8], limit: usize) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut p = 0;
    while p + event::HEADER_LEN <= raw.len() {
        let size = u32::from_le_bytes([raw[p + 9], raw[p + 10], raw[p + 11], raw[p + 12]]) as usize;
        if size < event::HEADER_LEN || p + size > raw.len() {
            // Not our own framing: send it whole, as it was.
            return vec![raw.to_vec()];
        }
        events.push(&raw[p..p + size]);
        p += size;
    }
    if p != raw.len() || raw.len() <= limit {
        return vec![raw.to_vec()];
    }
    let maps: Vec<u8> = events
        .iter()
        .take_while(|e| e[4] == 19)
        .flat_map(|e| e.iter().copied())
        .collect();
    let n_maps = events.iter().take_while(|e| e[4] == 19).count();
    let mut out = Vec::new();
    let mut cur = maps.clone();
    for e in &events[n_maps..] {
        if cur.len() > maps.len() && cur.len() + e.len() > limit {
            out.push(std::mem::replace(&mut cur, maps.clone()));
        }
        cur.extend_from_slice(e);
    }
    if cur.len() > maps.len() {
        out.push(cur);
    }
    out
}

/// `BINLOG '<base64>'` for raw events.
pub fn binlog_statement(raw: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
    format!("BINLOG '{b64}'")
}

/// The default database of a statement, named as our own UTF-8 text: the
/// client character set is utf8mb4 while `USE` is read (a statement
/// replayed before may have left it at its own, e.g. latin1, which would
/// turn `café` into another name), then [`session_sql`] sets the
/// statement's own — the order a replica keeps (database, then the
/// event's character sets).
pub fn use_sql(db: &str) -> String {
    format!("{UTF8_CLIENT}\n;\nUSE {}", ident(db))
}

/// The `USE` before a statement: its default database, or our own schema
/// when it has none ([`Stmt::db`]).
pub fn stmt_use_sql(st: &Stmt) -> String {
    use_sql(st.db.as_deref().unwrap_or(position::SCHEMA))
}

/// The `SET` that gives a session the source statement's state, user
/// variables included (a string in its character set and collation, as
/// logged; the collation's names from `names`).
pub fn session_sql(s: &Session, names: &Collations) -> Result<String, ApplyError> {
    let mut v = vec![
        format!("@@session.pseudo_thread_id = {}", s.thread_id),
        match s.ctx.usec {
            Some(u) => format!("TIMESTAMP = {}.{u:06}", s.timestamp),
            None => format!("TIMESTAMP = {}", s.timestamp),
        },
    ];
    // The whole context, every time (context.rs): nothing a statement
    // before set is left for this one.
    v.extend(context::set_items(&s.ctx).map_err(|why| ApplyError::Sql {
        code: 0,
        error: why,
        statement: String::new(),
    })?);
    if let Some(i) = s.insert_id {
        v.push(format!("INSERT_ID = {i}"));
    }
    if let Some(i) = s.last_insert_id {
        v.push(format!("LAST_INSERT_ID = {i}"));
    }
    if let Some((a, b)) = s.rand {
        v.push(format!("@@RAND_SEED1 = {a}, @@RAND_SEED2 = {b}"));
    }
    for (name, value) in &s.user_vars {
        let lit = match value {
            VarValue::Null => "NULL".to_string(),
            VarValue::Int(i) => i.to_string(),
            VarValue::UInt(u) => u.to_string(),
            // Shortest exact round trip, in E notation: a DOUBLE literal.
            VarValue::Real(f) => format!("{f:E}"),
            VarValue::Decimal(d) => d.clone(),
            VarValue::Str { collation, bytes } => {
                let (cs, coll) = names.get(collation).ok_or_else(|| ApplyError::Sql {
                    code: 1273,
                    error: format!(
                        "user variable @{name}: collation id {collation} is unknown on the target"
                    ),
                    statement: String::new(),
                })?;
                let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
                format!("_{cs} X'{hex}' COLLATE {}", ident(coll))
            }
        };
        v.push(format!("@{} := {lit}", ident(name)));
    }
    Ok(format!("SET {}", v.join(", ")))
}

/// The position rows for transactions applied together (see
/// [`position::positions`]).
pub fn position_sql(done: &[(&str, &str, &Txn)]) -> Vec<String> {
    let rows: Vec<position::Applied> = done
        .iter()
        .map(|(source, stream, t)| position::Applied {
            source,
            stream,
            gtid: t.gtid,
            file: &t.file,
            end_pos: t.end_pos,
            time: t.timestamp,
        })
        .collect();
    position::positions(&rows)
}

/// One query of a batch: its text and, when it ends with a `BINLOG` of
/// rows, their base64 text, sent apart (see [`ROWS_VARS`]).
#[derive(Debug)]
pub struct Query {
    pub sql: Vec<u8>,
    pub rows: Option<String>,
    /// Source rows statements its rows apply inside another (merge.rs).
    pub merged: usize,
}

/// Source rows statements `queries` send merged into another.
pub fn merged_in(queries: &[Query]) -> u64 {
    queries.iter().map(|q| q.merged as u64).sum()
}

/// The client character set around the rows' `SET` (see
/// [`Applier::run_query`]); our own text after it is read as utf8mb4 again.
pub(crate) const CLIENT_BINARY: &str = "SET @@session.character_set_client = binary";

/// The user variables a batch's rows reach the server in: set by a
/// prepared statement (its parameter is not parsed as SQL text), then
/// `BINLOG @a, @b` applies their concatenation and empties both. The
/// server's lexer otherwise scans every byte of a `BINLOG '<base64>'`
/// literal: about a tenth of the target's CPU on a row-heavy stream.
pub(crate) const ROWS_VARS: (&str, &str) = ("@`sqlfleet rows 0`", "@`sqlfleet rows 1`");

/// The queries of [`try_batch_one_trip`]; without `commit`, those of
/// [`Applier::run_ahead`]: no positions, no COMMIT.
pub fn batch_queries(
    jobs: &[Job],
    names: &Collations,
    commit: bool,
) -> Result<Vec<Query>, ApplyError> {
    let mut out: Vec<Query> = Vec::new();
    let mut q: Vec<u8> = b"START TRANSACTION".to_vec();
    let done: Vec<(&str, &str, &Txn)> = jobs
        .iter()
        .map(|j| (&*j.source, j.stream.as_str(), &*j.txn))
        .collect();
    if commit {
        for sql in position_sql(&done) {
            q.extend_from_slice(b"\n;\n");
            q.extend_from_slice(sql.as_bytes());
        }
    }
    let mut rows: Vec<u8> = Vec::new();
    // Statements merged into the rows not yet flushed.
    let saved = std::cell::Cell::new(0usize);
    let flush = |q: &mut Vec<u8>, rows: &mut Vec<u8>, out: &mut Vec<Query>| {
        if !rows.is_empty() {
            if !q.is_empty() {
                q.extend_from_slice(b"\n;\n");
            }
            q.extend_from_slice(format!("BINLOG {}, {}", ROWS_VARS.0, ROWS_VARS.1).as_bytes());
            out.push(Query {
                sql: std::mem::take(q),
                rows: Some(base64::engine::general_purpose::STANDARD.encode(&*rows)),
                merged: saved.replace(0),
            });
            rows.clear();
        }
    };
    let next = |q: &mut Vec<u8>| {
        if !q.is_empty() {
            q.extend_from_slice(b"\n;\n");
        }
    };
    // Consecutive rows statements merge into one (merge.rs); what is
    // merged goes into `rows` before anything else does.
    let mut merged = Merged::default();
    let emit = |merged: &mut Merged, q: &mut Vec<u8>, rows: &mut Vec<u8>, out: &mut Vec<Query>| {
        if !merged.is_empty() {
            if rows.len() + merged.len() > CHUNK {
                flush(q, rows, out);
            }
            saved.set(saved.get() + merged.statements().saturating_sub(1));
            rows.extend_from_slice(&merged.take());
        }
    };
    for j in jobs {
        for item in &j.txn.items {
            match item {
                Item::Rows(r) if r.bytes.len() > CHUNK => {
                    emit(&mut merged, &mut q, &mut rows, &mut out);
                    flush(&mut q, &mut rows, &mut out);
                    for chunk in rows_chunks(&r.bytes, CHUNK) {
                        rows.extend_from_slice(&chunk);
                        flush(&mut q, &mut rows, &mut out);
                    }
                }
                Item::Rows(r) => {
                    let mut add = merged.add(r, CHUNK);
                    if add == Add::Full {
                        emit(&mut merged, &mut q, &mut rows, &mut out);
                        add = merged.add(r, CHUNK);
                    }
                    if add == Add::Alone {
                        emit(&mut merged, &mut q, &mut rows, &mut out);
                        if rows.len() + r.bytes.len() > CHUNK {
                            flush(&mut q, &mut rows, &mut out);
                        }
                        rows.extend_from_slice(&r.bytes);
                    }
                }
                // A LOAD DATA's file is given only on the source's own
                // connection (plan.rs makes it a barrier): never here.
                Item::Stmt(st) if st.infile.is_some() => {
                    return Err(ApplyError::Sql {
                        code: 0,
                        error: "a LOAD DATA logged as a statement reached a batch".into(),
                        statement: String::from_utf8_lossy(&st.sql).into_owned(),
                    })
                }
                Item::Stmt(st) => {
                    emit(&mut merged, &mut q, &mut rows, &mut out);
                    flush(&mut q, &mut rows, &mut out);
                    next(&mut q);
                    q.extend_from_slice(stmt_use_sql(st).as_bytes());
                    q.extend_from_slice(b"\n;\n");
                    q.extend_from_slice(session_sql(&st.session, names)?.as_bytes());
                    q.extend_from_slice(b"\n;\n");
                    q.extend_from_slice(&st.sql);
                }
            }
        }
    }
    emit(&mut merged, &mut q, &mut rows, &mut out);
    flush(&mut q, &mut rows, &mut out);
    if commit {
        next(&mut q);
        q.extend_from_slice(b"COMMIT");
    }
    if !q.is_empty() {
        out.push(Query {
            sql: q,
            rows: None,
            merged: 0,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::mpsc;

    use super::*;
    use crate::txn::Stmt;

    use crate::fixtures::{ev, txn};

    #[test]
    fn big_statements_split_with_their_table_maps_in_every_piece() {
        let (m1, m2) = (ev(19, 40, 1), ev(19, 30, 2));
        let rows: Vec<Vec<u8>> = (0..10).map(|i| ev(23, 100, 10 + i)).collect();
        let mut raw = [m1.clone(), m2.clone()].concat();
        for r in &rows {
            raw.extend_from_slice(r);
        }
        let chunks = rows_chunks(&raw, 350);
        assert!(chunks.len() > 1);
        let maps = [m1, m2].concat();
        let mut rejoined = Vec::new();
        for c in &chunks {
            assert!(
                c.starts_with(&maps),
                "every piece starts with the table maps"
            );
            assert!(c.len() <= 350 || c.len() == maps.len() + 100);
            rejoined.extend_from_slice(&c[maps.len()..]);
        }
        assert_eq!(rejoined, rows.concat(), "every rows event once, in order");
        assert_eq!(rows_chunks(&raw, 1 << 20), vec![raw.clone()]);
        assert_eq!(
            rows_chunks(&raw[..raw.len() - 1], 100),
            vec![raw[..raw.len() - 1].to_vec()]
        );
    }

    /// Three transactions of one rows statement each: one `BINLOG` whose
    /// rows are one statement (each table map once, one end flag); a
    /// statement between them ends the merge, and one without a known
    /// framing goes as it came.
    #[test]
    fn a_chunks_rows_statements_go_as_one() {
        use crate::fixtures::{crc_map, crc_rows};
        let layout = Some(crate::txn::Layout {
            crc: true,
            map_ph: 8,
            rows_ph: 8,
        });
        let st = |id: u64, t: &str, body: &[u8], layout| {
            Item::Rows(crate::txn::Rows {
                bytes: [crc_map(id, t), crc_rows(24, id, 1, body)].concat(),
                what: String::new(),
                layout,
            })
        };
        let decoded = |q: &Query| {
            base64::engine::general_purpose::STANDARD
                .decode(q.rows.as_deref().unwrap_or_default())
                .expect("base64")
        };
        let ends = |raw: &[u8]| {
            let mut p = 0;
            let (mut maps, mut ends) = (0, 0);
            while p < raw.len() {
                let size = u32::from_le_bytes([raw[p + 9], raw[p + 10], raw[p + 11], raw[p + 12]])
                    as usize;
                let e = &raw[p..p + size];
                if e[4] == 19 {
                    maps += 1;
                } else if event::rows_header(e, 8).map(|(_, f)| f & event::STMT_END_F) == Ok(1) {
                    ends += 1;
                }
                p += size;
            }
            (maps, ends)
        };
        // The maps and end flags of each BINLOG of `jobs`' queries.
        let binlogs = |jobs: &[Job]| -> Vec<(usize, usize)> {
            batch_queries(jobs, &Collations::new(), true)
                .expect("queries")
                .iter()
                .filter(|q| q.rows.is_some())
                .map(|q| ends(&decoded(q)))
                .collect()
        };
        let jobs: Vec<Job> = [(7, "a", b"1"), (8, "b", b"2"), (7, "a", b"3")]
            .into_iter()
            .map(|(id, t, b)| job(vec![st(id, t, b, layout)]))
            .collect();
        assert_eq!(
            binlogs(&jobs),
            [(2, 1)],
            "one BINLOG: two table maps, one end of statement"
        );
        let apart = [
            job(vec![st(7, "a", b"1", layout)]),
            job(vec![st(7, "a", b"2", None)]),
            job(vec![st(7, "a", b"3", layout)]),
        ];
        assert_eq!(
            binlogs(&apart),
            [(3, 3)],
            "three statements: the middle one is not merged"
        );
    }

    /// A queued job of one transaction of `items` in database `db`.
    fn job(items: Vec<Item>) -> Job {
        let (tx, _rx) = mpsc::unbounded_channel();
        Job {
            source: Arc::from("s"),
            generation: 1,
            idx: 0,
            stream: "db".into(),
            txn: Arc::new(txn("db", items)),
            format: Arc::new(vec![]),
            reply: tx,
            budget: None,
            replied: Default::default(),
        }
    }

    #[test]
    fn a_batch_ends_each_query_at_a_binlog_statement_and_commits_with_its_positions() {
        let rows = || {
            Item::Rows(crate::txn::Rows {
                bytes: [ev(19, 40, 1), ev(23, 60, 2)].concat(),
                what: "Write_rows event on table d.t".into(),
                layout: None,
            })
        };
        let stmt = Item::Stmt(Box::new(Stmt {
            db: Some("db".into()),
            sql: b"UPDATE t SET a = 1".to_vec(),
            session: Session {
                ctx: crate::context::read(&crate::fixtures::default_status()),
                ..Session::default()
            },
            infile: None,
            expect: None,
        }));
        let jobs = vec![job(vec![rows(), rows()]), job(vec![stmt, rows()])];
        let qs = batch_queries(&jobs, &Collations::new(), true).expect("queries");
        let text: Vec<String> = qs
            .iter()
            .map(|q| String::from_utf8_lossy(&q.sql).into_owned())
            .collect();
        assert!(text[0].starts_with("START TRANSACTION"), "{text:?}");
        assert!(
            text[0].contains("replicate_position"),
            "positions in the same transaction"
        );
        assert_eq!(text.last().map(|t| t.ends_with("COMMIT")), Some(true));
        let binlog = format!("BINLOG {}, {}", ROWS_VARS.0, ROWS_VARS.1);
        for (q, t) in qs.iter().zip(&text) {
            let binlogs = t.matches("BINLOG").count();
            assert!(binlogs <= 1, "one BINLOG per query: {t}");
            assert_eq!(
                binlogs == 1,
                q.rows.is_some(),
                "rows go with their BINLOG: {t}"
            );
            if binlogs == 1 {
                assert!(t.ends_with(&binlog), "BINLOG ends its query: {t}");
            }
        }
        // Every rows event reaches the server once, in order, as base64
        // the server decodes (padded pieces joined are valid).
        let sent: Vec<u8> = qs
            .iter()
            .filter_map(|q| q.rows.as_ref())
            .flat_map(|b| {
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .expect("base64")
            })
            .collect();
        let ev_all = [ev(19, 40, 1), ev(23, 60, 2)].concat();
        assert_eq!(sent, [ev_all.clone(), ev_all.clone(), ev_all].concat());
        // The two transactions' first rows merge into one BINLOG; the
        // statement splits them.
        assert_eq!(
            text.iter().filter(|t| t.contains("BINLOG")).count(),
            2,
            "{text:?}"
        );
        assert!(text.iter().any(
            |t| t.contains("USE `db`\n;\nSET @@session.pseudo_thread_id")
                && t.contains("\n;\nUPDATE t SET a = 1")
        ));
    }

    #[test]
    fn a_chunk_run_ahead_leaves_positions_and_commit_to_its_turn() {
        let rows = Item::Rows(crate::txn::Rows {
            bytes: [ev(19, 40, 1), ev(23, 60, 2)].concat(),
            what: "Write_rows event on table d.t".into(),
            layout: None,
        });
        let qs = batch_queries(&[job(vec![rows])], &Collations::new(), false).expect("queries");
        let text: Vec<String> = qs
            .iter()
            .map(|q| String::from_utf8_lossy(&q.sql).into_owned())
            .collect();
        assert!(text[0].starts_with("START TRANSACTION"), "{text:?}");
        assert!(
            text.iter().all(|t| !t.contains("replicate_position")),
            "{text:?}"
        );
        assert!(text.iter().all(|t| !t.contains("COMMIT")), "{text:?}");
        assert_eq!(text.len(), 1, "{text:?}");
    }

    #[test]
    fn user_variables_become_exact_literals() {
        let mut names = Collations::new();
        names.insert(8, ("latin1".into(), "latin1_swedish_ci".into()));
        let s = Session {
            ctx: crate::context::read(&crate::fixtures::default_status()),
            user_vars: vec![
                ("n".into(), VarValue::Null),
                ("i".into(), VarValue::Int(-42)),
                ("u".into(), VarValue::UInt(u64::MAX)),
                ("r".into(), VarValue::Real(0.1)),
                ("d".into(), VarValue::Decimal("123.4567890123".into())),
                (
                    "l".into(),
                    VarValue::Str {
                        collation: 8,
                        bytes: vec![0xE7, b'a'],
                    },
                ),
            ],
            ..Session::default()
        };
        let sql = session_sql(&s, &names).expect("sql");
        for want in [
            "@`n` := NULL",
            "@`i` := -42",
            "@`u` := 18446744073709551615",
            "@`r` := 1E-1",
            "@`d` := 123.4567890123",
            "@`l` := _latin1 X'E761' COLLATE `latin1_swedish_ci`",
        ] {
            assert!(sql.contains(want), "{sql} lacks {want}");
        }
        names.clear();
        assert!(
            session_sql(&s, &names).is_err(),
            "an unknown collation is an error, not a guess"
        );
    }

    #[test]
    fn the_session_set_names_every_state_the_source_had() {
        let s = Session {
            timestamp: 1_700_000_000,
            thread_id: 9,
            ctx: crate::context::Context {
                flags2: Some(crate::context::OPTION_NO_FOREIGN_KEY_CHECKS),
                sql_mode: Some(1_411_383_296),
                charset: Some((33, 33, 45)),
                time_zone: Some("+02:00".into()),
                ..Default::default()
            },
            insert_id: Some(5),
            ..Session::default()
        };
        let sql = session_sql(&s, &Collations::new()).expect("sql");
        for want in [
            "pseudo_thread_id = 9",
            "TIMESTAMP = 1700000000",
            "foreign_key_checks = 0",
            "unique_checks = 1",
            "sql_mode = 1411383296",
            "collation_server = 45",
            "time_zone = '+02:00'",
            "INSERT_ID = 5",
        ] {
            assert!(sql.contains(want), "{sql} lacks {want}");
        }
    }
}
