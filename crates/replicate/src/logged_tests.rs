//! Our own bookkeeping statements on a target that logs statements
//! (`binlog_format = STATEMENT`), on a real server, from a session whose
//! clock a replayed statement left at its source's: each is safe to log
//! so (no 1592 warning, which the server also writes to its error log, on
//! every transaction applied), and a position's `applied_at` is the
//! target's time. Before, the position rows read `SYSDATE(6)` and the
//! MyISAM mark was a `REPLACE ... SELECT`, both unsafe.

use mysql_async::prelude::Queryable;

use crate::gtid::{Gtid, GtidPos};
use crate::position::{self, Applied, Book};

/// A session logging statements, its clock in 2001 (as a replayed
/// statement leaves it).
async fn replaying_session() -> mysql_async::Conn {
    let mut c = sqlfleet_testkit::server().connect().await;
    position::ensure(&mut c).await.expect("our schema");
    c.query_drop("SET SESSION binlog_format = 'STATEMENT'; SET TIMESTAMP = 1000000000")
        .await
        .expect("statement logging, a source's clock");
    c
}

async fn warnings(c: &mut mysql_async::Conn) -> Vec<(String, u32, String)> {
    c.query("SHOW WARNINGS").await.expect("warnings")
}

#[tokio::test]
async fn a_myisam_mark_logged_as_a_statement_leaves_no_warning() {
    let mut c = replaying_session().await;
    let g: Gtid = "1-100-78".parse().expect("gtid");
    Book::new(&mut c, "logged_mark")
        .mark_nontx("mo", &g, "UPDATE mo.m SET v = v + 1")
        .await
        .expect("mark");
    let w = warnings(&mut c).await;
    assert!(w.is_empty(), "{w:?}");
    let _ = c.disconnect().await;
}

#[tokio::test]
async fn positions_logged_as_statements_leave_no_warning_and_say_when_they_were_applied() {
    let mut c = replaying_session().await;
    let now: String = {
        let mut f = sqlfleet_testkit::server().connect().await;
        let v: Option<String> = f.query_first("SELECT NOW(6)").await.expect("now");
        let _ = f.disconnect().await;
        v.expect("now")
    };
    let g: Gtid = "1-100-79".parse().expect("gtid");
    let done = [Applied {
        source: "logged_pos",
        stream: "db",
        gtid: g,
        file: "bin.000001",
        end_pos: 400,
        time: 1_000_000_000,
    }];
    for q in position::positions(&done) {
        c.query_drop(q).await.expect("a stream's position");
        let w = warnings(&mut c).await;
        assert!(w.is_empty(), "a stream's position: {w:?}");
    }
    Book::new(&mut c, "logged_pos")
        .write_floor(&GtidPos::parse("1-100-79").expect("pos"))
        .await
        .expect("the floor");
    let w = warnings(&mut c).await;
    assert!(w.is_empty(), "the floor: {w:?}");
    let stale: Option<i64> = c
        .exec_first(
            "SELECT COUNT(*) FROM sqlfleet.replicate_position WHERE source = 'logged_pos' AND applied_at < ?",
            (now.as_str(),),
        )
        .await
        .expect("applied_at");
    assert_eq!(stale, Some(0), "a position dated by the replayed clock");
    let _ = c.disconnect().await;
}
