//! Exactly once through failures: the target killed (-9) and restarted
//! mid-apply, the applier dropped mid-run and started again, the source
//! killed and restarted — the target's copy ends identical to the source.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use sqlfleet_replicate::config;
use sqlfleet_replicate::run::{self, Options};
use sqlfleet_replicate::source::SourceView;
use sqlfleet_testkit::workload::{crash_and_restart, create_db, workload};
use tokio::sync::watch;

fn spawn(
    cfg: &config::Checked,
    rx: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Result<run::Summary, run::RunError>> {
    let c2 = cfg.clone();
    let views = cfg
        .sources
        .iter()
        .map(|_| Arc::new(Mutex::new(SourceView::default())))
        .collect();
    tokio::spawn(async move {
        run::run(
            &c2,
            &target().target(),
            &[source(0).target()],
            &Options::default(),
            rx,
            views,
        )
        .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn target_crash_applier_crash_and_source_crash_leave_the_copy_identical() {
    let s = source(0);
    let p = binlog_pos(s).await;
    let cfg = config::parse(&format!(
        r#"
        [target]
        dsn = "{}"
        [apply]
        threads = 2
        batch = 8
        [[source]]
        name = "fa"
        dsn = "{}"
        include = ["fa_*"]
        start = "gtid:{p}"
        "#,
        dsn(target()),
        dsn(s)
    ))
    .expect("config");
    create_db(s, "fa_a").await;
    create_db(s, "fa_b").await;
    let (tx, rx) = watch::channel(false);
    let run1 = spawn(&cfg, rx);
    let writes = tokio::spawn(async move {
        tokio::join!(
            workload(source(0), "fa_a", Some("fa_b"), 11, 500),
            workload(source(0), "fa_b", None, 12, 500),
        );
    });
    // The target dies while transactions are being applied: some are,
    // the source is still writing.
    let start = floor("fa").await;
    while floor("fa").await.behind(&binlog_pos(s).await) == 0 || floor("fa").await == start {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !writes.is_finished(),
        "the crash comes while the source is written"
    );
    crash_and_restart(target()).await;
    // The applier dies (its connections drop mid-transaction) and starts
    // again from what the target recorded.
    tokio::time::sleep(Duration::from_millis(700)).await;
    run1.abort();
    let _ = run1.await;
    let run2 = spawn(&cfg, tx.subscribe());
    writes.await.expect("workload");
    // The second run is streaming (caught up) before the source dies: on
    // a busy machine its first connection could otherwise come after the
    // restart, which it would not see as one.
    wait_caught_up("fa", s, Duration::from_secs(120)).await;
    // The source dies and comes back; more writes after it.
    crash_and_restart(s).await;
    workload(s, "fa_a", Some("fa_b"), 13, 100).await;
    wait_caught_up("fa", s, Duration::from_secs(120)).await;
    assert_same(s, "fa_a", "fa_a").await;
    assert_same(s, "fa_b", "fa_b").await;
    let _ = tx.send(true);
    let summary = tokio::time::timeout(Duration::from_secs(60), run2)
        .await
        .expect("stops")
        .expect("task")
        .expect("ran");
    assert_eq!(summary.stopped_streams, 0, "{summary:?}");
    assert!(
        summary.sources[0].reconnects > 0,
        "the source's restart was seen: {summary:?}"
    );
}
