//! With GTIDs, a source's entry pointed at its promoted replica goes on
//! where it stopped: nothing lost, nothing applied twice.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use sqlfleet_replicate::config;
use sqlfleet_replicate::run::{self, Options};
use sqlfleet_replicate::source::SourceView;
use sqlfleet_testkit::workload::{create_db, workload};
use sqlfleet_testkit::TestServer;
use tokio::sync::watch;

fn spawn(
    src: &TestServer,
    start: &str,
) -> (
    watch::Sender<bool>,
    tokio::task::JoinHandle<Result<run::Summary, run::RunError>>,
) {
    let cfg = config::parse(&format!(
        "[target]\ndsn = \"{}\"\n[[source]]\nname = \"pr\"\ndsn = \"{}\"\ninclude = [\"pr_*\"]\nstart = \"gtid:{start}\"\n",
        dsn(target()),
        src.dsn()
    ))
    .expect("config");
    let (tx, rx) = watch::channel(false);
    let views = vec![Arc::new(Mutex::new(SourceView::default()))];
    let t = src.target();
    let task = tokio::spawn(async move {
        run::run(
            &cfg,
            &target().target(),
            &[t],
            &Options::default(),
            rx,
            views,
        )
        .await
    });
    (tx, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_entry_pointed_at_the_promoted_replica_goes_on_exactly() {
    let old = sqlfleet_testkit::replicated();
    let start = binlog_pos(old).await.to_string();
    create_db(old, "pr_a").await;
    let (stop, task) = spawn(old, &start);
    workload(old, "pr_a", None, 31, 200).await;
    wait_caught_up("pr", old, Duration::from_secs(60)).await;
    let _ = stop.send(true);
    let s = task.await.expect("task").expect("run");
    assert_eq!(s.stopped_streams, 0, "{s:?}");

    // The primary is replaced by node2; the config now names it.
    let mut sb = old.sandbox.clone();
    sb.promote("node2", Duration::from_secs(60), &Default::default())
        .await
        .expect("promote node2");
    let new = TestServer { sandbox: sb };
    assert_ne!(new.dsn(), old.dsn(), "a different server");
    workload(&new, "pr_a", None, 32, 200).await;
    // `start` is ignored now: the target's recorded floor decides.
    let (stop, task) = spawn(&new, "0-1-999999");
    wait_caught_up("pr", &new, Duration::from_secs(60)).await;
    assert_same(&new, "pr_a", "pr_a").await;
    let _ = stop.send(true);
    let s = task.await.expect("task").expect("run");
    assert_eq!(s.stopped_streams, 0, "{s:?}");
    assert_eq!(s.sources[0].reconnects, 0, "{s:?}");
}
