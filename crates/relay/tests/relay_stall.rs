//! A backend that stops answering — SIGSTOP (a hung server), then the
//! network to it stalled or cut (a fault link in front of each server):
//! the socket stays open and nothing comes back, or every connection
//! closes — costs only the statements that are on it, up to the health
//! check's timeout; every other client keeps reading. On the relay's own
//! primary + 2 replicas (read/write split, read-your-writes), readers in
//! a database that has a view (so the relay's view lookups are on their
//! path) read while (1) a replica and then (2) the primary are stopped for
//! a few seconds. Each scene asserts that only the reads the fault
//! caught were slow (at most two per reader, however long the stall),
//! that no read waited longer than a bound well under the stall, that no
//! read failed (a read whose replica stops answering is retried
//! elsewhere, as one whose replica dies is), and that the readers kept at
//! least a quarter of their rate (a floor against every read paying; the
//! machine's own noise is up to half).

mod common;

use std::time::Duration;

use common::relay::app;
use common::routing::{start_routing_relay, start_routing_relay_through_links};
use mysql_async::prelude::Queryable;
use sqlfleet_sandbox::node;
use sqlfleet_testkit::netfault::Link;
use sqlfleet_testkit::replicated;

/// How long each stall lasts.
const STALL: Duration = Duration::from_secs(8);

#[test]
fn a_stopped_replica_or_primary_costs_only_its_own_statements() {
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_routing_relay(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"session\"\nhealth_interval = 0.2",
        "",
        "",
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("stall"));
    rt.block_on(async {
        let mut c = app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect");
        c.query_drop(
            "CREATE TABLE acct (id INT PRIMARY KEY, balance BIGINT); \
             INSERT INTO acct SELECT seq, 100 FROM seq_1_to_100; \
             CREATE VIEW rich AS SELECT id FROM acct WHERE balance > 1000",
        )
        .await
        .expect("schema");
    });
    // Both replicas have the table before the readers start.
    std::thread::sleep(Duration::from_secs(1));
    for (scene, name) in [
        ("a replica stopped", "node3"),
        ("the primary stopped", "node1"),
    ] {
        let n = srv
            .sandbox
            .meta
            .nodes
            .iter()
            .find(|n| n.name == name)
            .expect("node");
        let pid = node::running_pid(&srv.sandbox.layout.node(n)).expect("running");
        let st = common::stall::stall(
            &rt,
            &relay,
            app(relay.port, "app-pw", Some(&db)),
            "SELECT COUNT(*) FROM acct WHERE balance >= 0",
            common::stall::sigstop(pid),
            n.port,
            STALL,
        );
        st.check(scene, false);
        // The stopped node is back in its role before the next scene.
        relay.wait_roles(1, 2);
    }
    drop(relay);

    // The same through the network: a relay whose backends are reached
    // through fault links (the servers keep running; only the path to one
    // fails). A stalled link is a peer that stops answering with every
    // socket open; a cut one closes them all.
    let (relay, links) = start_routing_relay_through_links(srv, dir.path(), "");
    type Scene = (&'static str, usize, fn(&Link));
    let scenes: [Scene; 4] = [
        ("the network to a replica stalled", 2, Link::stall),
        ("the network to a replica cut", 2, Link::cut),
        ("the network to the primary stalled", 0, Link::stall),
        ("the network to the primary cut", 0, Link::cut),
    ];
    for (scene, i, fault) in scenes {
        let link = &links[i];
        let st = common::stall::stall(
            &rt,
            &relay,
            app(relay.port, "app-pw", Some(&db)),
            "SELECT COUNT(*) FROM acct WHERE balance >= 0",
            (move || fault(link), move || link.heal()),
            link.port,
            STALL,
        );
        st.check(scene, false);
        relay.wait_roles(1, 2);
    }
}
