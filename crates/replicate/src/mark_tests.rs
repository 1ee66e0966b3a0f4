//! The MyISAM marks (`replicate_nontx`) against `replicate retry` on a
//! real server: a retry answers the marks made before it and never one
//! made after it, whatever time the marking session runs at. A worker
//! replays each statement at its source's time, so while it catches up on
//! a backlog its clock is behind the retry's; before, the mark's time
//! decided, a mark made an hour "earlier" read as answered by a retry
//! recorded before it, and a crash inside that transaction applied it a
//! second time.

use mysql_async::prelude::Queryable;

use crate::gtid::Gtid;
use crate::position::{self, Book};

/// The transactions `source` has marked and no retry answered, per stream.
async fn unsure(source: &str) -> std::collections::BTreeMap<String, Gtid> {
    let mut c = sqlfleet_testkit::server().connect().await;
    let s = Book::new(&mut c, source).load().await.expect("load");
    let _ = c.disconnect().await;
    s.unsure
}

async fn retry(source: &str, stream: &str) {
    let mut c = sqlfleet_testkit::server().connect().await;
    Book::new(&mut c, source)
        .record_retry(stream)
        .await
        .expect("retry");
    let _ = c.disconnect().await;
}

#[tokio::test]
async fn a_retry_answers_only_the_marks_made_before_it_whatever_the_session_clock() {
    let mut c = sqlfleet_testkit::server().connect().await;
    position::ensure(&mut c).await.expect("our schema");
    let g: Gtid = "1-100-77".parse().expect("gtid");
    // The marking session's clock against the server's (a backlog, a
    // source ahead), with and without a retry recorded before the mark.
    for (n, offset) in ["- 3600", "", "+ 3600"].into_iter().enumerate() {
        for earlier in [false, true] {
            let source = format!("mark_order_{n}_{earlier}");
            c.exec_drop(
                "DELETE FROM sqlfleet.replicate_retry WHERE source = ?",
                (&source,),
            )
            .await
            .expect("clean");
            if earlier {
                retry(&source, "").await;
            }
            c.query_drop(format!(
                "SET TIMESTAMP = DEFAULT; SET TIMESTAMP = UNIX_TIMESTAMP() {offset}"
            ))
            .await
            .expect("the session's clock");
            Book::new(&mut c, &source)
                .mark_nontx("mo", &g, "UPDATE mo.m SET v = v + 1")
                .await
                .expect("mark");
            let case = format!("clock {offset:?}, a retry before: {earlier}");
            assert_eq!(
                unsure(&source).await.get("mo"),
                Some(&g),
                "{case}: answered by no retry after it"
            );
            retry(&source, "other").await;
            assert_eq!(
                unsure(&source).await.get("mo"),
                Some(&g),
                "{case}: answered by another stream's retry"
            );
            retry(&source, "mo").await;
            assert_eq!(
                unsure(&source).await.get("mo"),
                None,
                "{case}: its stream's retry after it answers it"
            );
        }
    }
    let _ = c.disconnect().await;
}

/// A mark an earlier version made (no retry id: its time alone, which may
/// be its source's) is unsure after the schema is brought up to date,
/// even with a retry whose time is later than its own; a retry recorded
/// after that answers it. (Taken by its time, it read as answered.)
#[tokio::test]
async fn a_mark_of_an_earlier_version_is_answered_by_no_guess() {
    let mut c = sqlfleet_testkit::server().connect().await;
    position::ensure(&mut c).await.expect("our schema");
    retry("mark_old", "").await;
    c.query_drop(
        "REPLACE INTO sqlfleet.replicate_nontx (source, stream, gtid, statement, started_at, after_retry) \
         VALUES ('mark_old', 'mo', '1-100-80', 'UPDATE mo.m SET v = v + 1', NOW(6) - INTERVAL 1 HOUR, NULL)",
    )
    .await
    .expect("an earlier version's mark");
    position::ensure(&mut c)
        .await
        .expect("the schema brought up to date");
    let g: Gtid = "1-100-80".parse().expect("gtid");
    assert_eq!(
        unsure("mark_old").await.get("mo"),
        Some(&g),
        "answered by a retry whose time is later than the mark's"
    );
    retry("mark_old", "mo").await;
    assert_eq!(
        unsure("mark_old").await.get("mo"),
        None,
        "a new retry answers it"
    );
    let _ = c.disconnect().await;
}
