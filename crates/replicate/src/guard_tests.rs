//! The position guard on a real server: a reader that read the positions
//! before another commit landed (a killed process's last commit still
//! running on the server; a reply lost while its COMMIT went through)
//! must not apply that work again, and a position never moves backwards.
//! Before the guard, both cases applied non-idempotent statements twice
//! (`v = v + 1` one higher on the target, exit 0, every stream "ok").

use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use tokio::sync::mpsc;

use crate::apply::Applier;
use crate::batch_sql::position_sql;
use crate::chunk::{apply_chunk, ChunkEnd};
use crate::gtid::Gtid;
use crate::txn::{Item, Session, Stmt, Txn};
use crate::work::{Done, Job, Outcome};

/// The server's own format description event (a session gets one before
/// anything else), read from the head of its binlog file.
async fn format_event(c: &mut mysql_async::Conn) -> Arc<Vec<u8>> {
    let dir: Option<String> = c.query_first("SELECT @@datadir").await.expect("datadir");
    let st: Option<mysql_async::Row> = c.query_first("SHOW MASTER STATUS").await.expect("status");
    let file: String = st.and_then(|r| r.get(0)).expect("binlog file");
    let raw =
        std::fs::read(std::path::Path::new(&dir.expect("datadir")).join(file)).expect("binlog");
    let size = u32::from_le_bytes([raw[13], raw[14], raw[15], raw[16]]) as usize;
    Arc::new(raw[4..4 + size].to_vec())
}

/// Transactions `seqs` of domain 1, each `UPDATE t SET v = v + 1` in `db`
/// (a statement-logged, non-idempotent change), as one stream's jobs.
fn jobs(
    db: &str,
    seqs: std::ops::RangeInclusive<u64>,
    format: &Arc<Vec<u8>>,
) -> (Vec<Job>, mpsc::UnboundedReceiver<Done>) {
    jobs_in(db, seqs, format, 33)
}

/// [`jobs`] whose statements the source ran with connection collation
/// `collation` (an id; the client's stays utf8mb3).
fn jobs_in(
    db: &str,
    seqs: std::ops::RangeInclusive<u64>,
    format: &Arc<Vec<u8>>,
    collation: u16,
) -> (Vec<Job>, mpsc::UnboundedReceiver<Done>) {
    let mut status = crate::fixtures::default_status();
    // The charset status variable's connection collation (after the
    // code 4 and the client's id): see fixtures::default_status.
    let at = status
        .windows(7)
        .position(|w| w == [4, 33, 0, 33, 0, 8, 0])
        .expect("the charset status variable")
        + 3;
    status[at..at + 2].copy_from_slice(&collation.to_le_bytes());
    let (tx, rx) = mpsc::unbounded_channel();
    let jobs = seqs
        .map(|seq| {
            let txn = Txn {
                gtid: Gtid {
                    domain: 1,
                    server: 1,
                    seq,
                },
                standalone: false,
                timestamp: 1,
                file: "bin.000001".into(),
                end_pos: 100 + seq,
                items: vec![Item::Stmt(Box::new(Stmt {
                    db: Some(db.into()),
                    sql: b"UPDATE t SET v = v + 1 WHERE id = 1".to_vec(),
                    session: Session {
                        timestamp: 1_700_000_000,
                        ctx: crate::context::read(&status),
                        ..Session::default()
                    },
                    infile: None,
                    expect: None,
                }))],
                dbs: [db.to_string()].into_iter().collect(),
                unsupported: None,
                unknown_scope: false,
                first: "UPDATE t SET v = v + 1 WHERE id = 1".into(),
                temp: Default::default(),
                xa: None,
                rolled_back: false,
            };
            Job {
                source: Arc::from("guard"),
                generation: 1,
                idx: seq,
                stream: db.into(),
                txn: Arc::new(txn),
                format: format.clone(),
                reply: tx.clone(),
                budget: None,
                replied: Default::default(),
            }
        })
        .collect();
    (jobs, rx)
}

async fn setup(db: &str) -> mysql_async::Conn {
    let server = sqlfleet_testkit::server();
    let mut c = server.connect().await;
    c.query_drop(format!(
        "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; \
         CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB; \
         INSERT INTO {db}.t VALUES (1, 0)"
    ))
    .await
    .expect("setup");
    crate::position::ensure(&mut c)
        .await
        .expect("position tables");
    c.exec_drop(
        "DELETE FROM sqlfleet.replicate_position WHERE source = 'guard' AND stream = ?",
        (db,),
    )
    .await
    .expect("clean positions");
    c
}

async fn state(c: &mut mysql_async::Conn, db: &str) -> (i64, Option<u64>) {
    let v: Option<i64> = c
        .query_first(format!("SELECT v FROM {db}.t WHERE id = 1"))
        .await
        .expect("v");
    let seq: Option<u64> = c
        .exec_first(
            "SELECT seq_no FROM sqlfleet.replicate_position WHERE source = 'guard' AND stream = ? AND domain_id = 1",
            (db,),
        )
        .await
        .expect("position");
    (v.unwrap_or(-1), seq)
}

async fn outcomes(rx: &mut mpsc::UnboundedReceiver<Done>) -> Vec<Outcome> {
    let mut out = Vec::new();
    while let Ok(d) = rx.try_recv() {
        out.push(d.outcome);
    }
    out
}

fn target() -> sqlfleet_conn::Target {
    sqlfleet_testkit::server().target()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_lands_after_the_positions_were_read_is_not_applied_again() {
    let db = "guard_race";
    let mut c = setup(db).await;
    // The first run: its chunk (transactions 10..12) applied and its
    // positions written, the commit not yet done.
    let fde = format_event(&mut c).await;
    let (first, _rx1) = jobs(db, 10..=12, &fde);
    let mut a = Applier::open(&target()).await.expect("applier a");
    a.run_ahead(&first).await.expect("rows");
    let done: Vec<(&str, &str, &Txn)> = first
        .iter()
        .map(|j| (&*j.source, j.stream.as_str(), &*j.txn))
        .collect();
    for q in position_sql(&done) {
        a.conn().query_drop(q).await.expect("positions");
    }
    // The second run read the positions before that commit (there were
    // none) and applies the same transactions.
    let (second, mut rx2) = jobs(db, 10..=12, &fde);
    let b = tokio::spawn(async move {
        let mut applier = None;
        let end = apply_chunk(&mut applier, &target(), &second, false).await;
        (end, second)
    });
    // It waits for the first run's locks (on the position row: the
    // second run's first statement after START TRANSACTION, which names
    // this test's stream: other tests of this binary write positions of
    // their own on the same server at the same time). A CI run waited
    // 20 s here for exactly one such waiter without a word of what ran:
    // a timeout now lists the busy sessions ...
    let a_id = a.conn().id();
    let stream_hex: String = db.bytes().map(|b| format!("{b:02X}")).collect();
    let start = Instant::now();
    loop {
        let waiting: Option<i64> = c
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE COMMAND = 'Query' AND ID NOT IN (?, CONNECTION_ID()) \
                 AND INFO LIKE '%replicate_position%' AND INFO LIKE CONCAT('%', ?, '%')",
                (a_id, &stream_hex),
            )
            .await
            .expect("processlist");
        if waiting.unwrap_or(0) >= 1 {
            break;
        }
        assert!(
            !b.is_finished(),
            "the second run ended without waiting: {:?}",
            outcomes(&mut rx2).await
        );
        if start.elapsed() > Duration::from_secs(20) {
            let busy: Vec<(u64, String, String, String)> = c
                .query(
                    "SELECT ID, COMMAND, COALESCE(STATE, ''), LEFT(COALESCE(INFO, ''), 300) \
                     FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Sleep'",
                )
                .await
                .expect("processlist");
            panic!(
                "the second run never waited for the first one's locks (the first is {a_id}); busy sessions: {busy:#?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // ... which then commits.
    a.conn().query_drop("COMMIT").await.expect("commit");
    let (end, _second) = b.await.expect("second run");
    let (v, seq) = state(&mut c, db).await;
    assert_eq!(
        v, 3,
        "three increments applied once each (6: applied twice)"
    );
    assert_eq!(seq, Some(12));
    assert_eq!(
        end,
        ChunkEnd::Lost,
        "the second run reads the positions again"
    );
    let out = outcomes(&mut rx2).await;
    assert_eq!(out.len(), 3, "{out:?}");
    for o in out {
        match o {
            Outcome::Lost { error } => assert!(error.contains("not applied again"), "{error}"),
            other => panic!("expected a restart from the positions, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_never_moves_backwards() {
    let db = "guard_back";
    let mut c = setup(db).await;
    let fde = format_event(&mut c).await;
    let (ahead, _rx1) = jobs(db, 20..=22, &fde);
    let mut applier = None;
    assert_eq!(
        apply_chunk(&mut applier, &target(), &ahead, false).await,
        ChunkEnd::Applied
    );
    assert_eq!(state(&mut c, db).await, (3, Some(22)));
    // A reader that starts from an older point offers transactions the
    // stream's row already covers, alone and in a chunk that reaches past
    // it: neither applies, and the row stays where it was.
    for (range, alone) in [(10..=12, false), (21..=25, false), (12..=12, true)] {
        let (stale, mut rx) = jobs(db, range.clone(), &fde);
        let end = apply_chunk(&mut applier, &target(), &stale, alone).await;
        assert_eq!(end, ChunkEnd::Lost, "{range:?}");
        assert_eq!(state(&mut c, db).await, (3, Some(22)), "{range:?}");
        assert!(outcomes(&mut rx)
            .await
            .iter()
            .all(|o| matches!(o, Outcome::Lost { .. })));
    }
    // What follows the row applies as before.
    let (next, _rx) = jobs(db, 23..=24, &fde);
    assert_eq!(
        apply_chunk(&mut applier, &target(), &next, false).await,
        ChunkEnd::Applied
    );
    assert_eq!(state(&mut c, db).await, (5, Some(24)));
    // Chunks on a connection that a statement of the source left in
    // another connection collation — every one the server has whose text
    // is not ASCII-based (ucs2, utf16, utf16le, utf32) and a few that are:
    // the next chunk applies, and one behind the row is refused as the
    // guard's own. Before, the guard did not parse there (its SIGNAL's
    // SQLSTATE literal read as '': ERROR 1407), so every chunk after such
    // a statement stopped the stream.
    let wide: Vec<(u16, String)> = c
        .query(
            "SELECT ID, COLLATION_NAME FROM information_schema.COLLATIONS \
             WHERE CHARACTER_SET_NAME IN ('ucs2', 'utf16', 'utf16le', 'utf32') \
             OR COLLATION_NAME IN ('latin1_swedish_ci', 'utf8mb4_bin', 'sjis_japanese_ci', 'binary') \
             ORDER BY ID",
        )
        .await
        .expect("collations");
    assert!(wide.len() > 80, "the server's wide collations: {wide:?}");
    let (mut seq, mut v) = (24, 5);
    for (id, name) in &wide {
        seq += 1;
        v += 1;
        let (fresh, _rx) = jobs_in(db, seq..=seq, &fde, *id);
        assert_eq!(
            apply_chunk(&mut applier, &target(), &fresh, false).await,
            ChunkEnd::Applied,
            "{name}"
        );
        let (stale, mut rx) = jobs(db, seq - 1..=seq, &fde);
        let end = apply_chunk(&mut applier, &target(), &stale, false).await;
        let out = outcomes(&mut rx).await;
        assert_eq!(end, ChunkEnd::Lost, "{name}: {out:?}");
        assert_eq!(state(&mut c, db).await, (v, Some(seq)), "{name}");
        assert!(
            out.iter().all(
                |o| matches!(o, Outcome::Lost { error } if error.contains("not applied again"))
            ),
            "{name}: {out:?}"
        );
    }
}
