//! The bank through the relay under faults, as a seeded campaign: clients
//! move money between 10 accounts in transactions (`SELECT ... FOR
//! UPDATE`, two UPDATEs, a ledger row with the transfer's key, COMMIT;
//! retried on deadlock), readers check the total on replicas
//! (read/write split, read-your-writes), while faults land on the
//! replicas and the primary: SIGSTOP, the network to it stalled or cut
//! (testkit `netfault` links in front of every server), kill -9 of a
//! replica and its restart. After each round every server is healed and
//! the invariants are checked: the total is what it was on every server,
//! and every transfer a client was told committed is in the ledger
//! exactly once, on every server, with nothing there no client wrote.
//!
//! `SQLFLEET_FAULT_SEED` / `SQLFLEET_FAULT_ROUNDS` choose the campaign
//! (CI: 4 rounds); `bench/faults.sh` runs it long.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::relay::app;
use common::routing::start_routing_relay_at;
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_sandbox::{node, UpOptions};
use sqlfleet_testkit::faults::{Campaign, Ledger};
use sqlfleet_testkit::netfault::Link;
use sqlfleet_testkit::replicated;

const ACCOUNTS: i64 = 10;
const TOTAL: i64 = 10_000;
const MOVERS: usize = 6;
const READERS: usize = 2;

/// What the clients learnt: transfers told committed, transfers whose
/// outcome they never learnt, totals read that were not the total.
#[derive(Default)]
struct Told {
    ledger: Ledger,
    unknown: Vec<String>,
    bad_totals: Vec<i64>,
    errors: u64,
}

fn is_deadlock(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1213 || s.code == 1205)
}

/// One transfer as a client runs it: Ok(true) committed, Ok(false) a
/// deadlock rolled it back (not applied), Err its outcome is unknown.
async fn transfer(
    c: &mut mysql_async::Conn,
    key: &str,
    from: i64,
    to: i64,
    amount: i64,
) -> Result<bool, mysql_async::Error> {
    c.query_drop("BEGIN").await?;
    let r = async {
        let _: Vec<(i64, i64)> = c
            .query(format!(
                "SELECT id, balance FROM accounts WHERE id IN ({from}, {to}) ORDER BY id FOR UPDATE"
            ))
            .await?;
        c.query_drop(format!(
            "UPDATE accounts SET balance = balance - {amount} WHERE id = {from}"
        ))
        .await?;
        c.query_drop(format!(
            "UPDATE accounts SET balance = balance + {amount} WHERE id = {to}"
        ))
        .await?;
        c.query_drop(format!(
            "INSERT INTO ledger (tx_key, from_id, to_id, amount) VALUES ('{key}', {from}, {to}, {amount})"
        ))
        .await
    }
    .await;
    match r {
        Ok(()) => {}
        Err(e) if is_deadlock(&e) => {
            let _ = c.query_drop("ROLLBACK").await;
            return Ok(false);
        }
        Err(e) => return Err(e),
    }
    c.query_drop("COMMIT").await.map(|()| true)
}

/// Totals and ledger keys on the server at `port` (directly).
async fn state_at(srv: &sqlfleet_testkit::TestServer, i: usize, db: &str) -> (i64, Vec<String>) {
    let mut c = srv
        .sandbox
        .target(&srv.sandbox.meta.nodes[i])
        .expect("target")
        .connect(Duration::from_secs(10))
        .await
        .expect("direct");
    let total: Option<i64> = c
        .query_first(format!(
            "SELECT CAST(SUM(balance) AS SIGNED) FROM `{db}`.accounts"
        ))
        .await
        .expect("sum");
    let keys: Vec<String> = c
        .query(format!("SELECT tx_key FROM `{db}`.ledger"))
        .await
        .expect("ledger");
    (total.unwrap_or(0), keys)
}

#[test]
fn bank_transfers_through_the_relay_survive_faults_on_every_server() {
    let seed = sqlfleet_testkit::faults::seed(20261128);
    let rounds = sqlfleet_testkit::faults::rounds(4);
    let mut campaign = Campaign::new(
        "bank_transfers_through_the_relay_survive_faults_on_every_server",
        seed,
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let links: Vec<Link> = srv
        .sandbox
        .meta
        .nodes
        .iter()
        .map(|n| Link::to(n.port))
        .collect();
    let ports: Vec<u16> = links.iter().map(|l| l.port).collect();
    let relay = start_routing_relay_at(
        srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"session\"\nhealth_interval = 0.2",
        "",
        "",
        &ports,
    );
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("bank"));
    rt.block_on(async {
        let mut c = app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect");
        c.query_drop(format!(
            "CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL); \
             INSERT INTO accounts SELECT seq, {} FROM seq_1_to_{ACCOUNTS}; \
             CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, tx_key VARCHAR(64) NOT NULL, \
               from_id INT, to_id INT, amount BIGINT, UNIQUE KEY (tx_key))",
            TOTAL / ACCOUNTS
        ))
        .await
        .expect("schema");
    });
    std::thread::sleep(Duration::from_secs(1));
    let told = Arc::new(Mutex::new(Told::default()));
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for m in 0..MOVERS {
            let (stop, done, told, db) = (stop.clone(), done.clone(), told.clone(), db.clone());
            let port = relay.port;
            let mut r = rand::rngs::StdRng::seed_from_u64(seed ^ ((round * 100 + m) as u64));
            tasks.push(rt.spawn(async move {
                let target = app(port, "app-pw", Some(&db));
                let mut c = None;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if c.is_none() {
                        match target.connect(Duration::from_secs(5)).await {
                            Ok(x) => c = Some(x),
                            Err(_) => {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                continue;
                            }
                        }
                    }
                    let Some(conn) = c.as_mut() else { continue };
                    n += 1;
                    let key = format!("r{round}-m{m}-{n}");
                    let from = r.gen_range(1..=ACCOUNTS);
                    let to = (from % ACCOUNTS) + 1;
                    let amount = r.gen_range(1..=50);
                    match transfer(conn, &key, from, to, amount).await {
                        Ok(true) => {
                            done.fetch_add(1, Ordering::Relaxed);
                            told.lock().expect("told").ledger.acknowledge(key);
                        }
                        Ok(false) => {}
                        Err(_) => {
                            // At COMMIT nobody knows; before it the server
                            // rolls back what a lost connection left, but
                            // the client cannot tell which happened first:
                            // either way at most once, never required.
                            let mut t = told.lock().expect("told");
                            t.errors += 1;
                            t.unknown.push(key);
                            c = None;
                        }
                    }
                }
            }));
        }
        for _ in 0..READERS {
            let (stop, told, db) = (stop.clone(), told.clone(), db.clone());
            let port = relay.port;
            tasks.push(rt.spawn(async move {
                let target = app(port, "app-pw", Some(&db));
                let mut c = None;
                while !stop.load(Ordering::Relaxed) {
                    if c.is_none() {
                        c = target.connect(Duration::from_secs(5)).await.ok();
                        if c.is_none() {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    }
                    let Some(conn) = c.as_mut() else { continue };
                    match conn
                        .query_first::<i64, _>("SELECT CAST(SUM(balance) AS SIGNED) FROM accounts")
                        .await
                    {
                        Ok(Some(t)) if t == TOTAL => {}
                        Ok(t) => told.lock().expect("told").bad_totals.push(t.unwrap_or(-1)),
                        Err(_) => c = None,
                    }
                }
            }));
        }
        std::thread::sleep(Duration::from_millis(1500));
        // One fault per round, on a seeded server, for a seeded while.
        let i = rng.gen_range(0..srv.sandbox.meta.nodes.len());
        let n = srv.sandbox.meta.nodes[i].clone();
        let ms = rng.gen_range(1500..4000);
        let which = rng.gen_range(0..4);
        let what = match which {
            0 => "SIGSTOP",
            1 => "network stalled",
            2 => "network cut",
            _ if i != 0 => "kill -9 and restart",
            _ => "network cut",
        };
        campaign.fault(format!("round {round}: {what} on {} for {ms} ms", n.name));
        let pid = node::running_pid(&srv.sandbox.layout.node(&n)).expect("running");
        match what {
            "SIGSTOP" => {
                common::stall::signal(pid, libc::SIGSTOP);
                std::thread::sleep(Duration::from_millis(ms));
                common::stall::signal(pid, libc::SIGCONT);
            }
            "network stalled" => {
                links[i].stall();
                std::thread::sleep(Duration::from_millis(ms));
                links[i].heal();
            }
            "network cut" => {
                links[i].cut();
                std::thread::sleep(Duration::from_millis(ms));
                links[i].heal();
            }
            _ => {
                common::stall::signal(pid, libc::SIGKILL);
                while node::is_alive(pid) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                std::thread::sleep(Duration::from_millis(ms));
                rt.block_on(async {
                    let opts = UpOptions {
                        name: srv.sandbox.meta.name.clone(),
                        die_with_parent: true,
                        ..UpOptions::default()
                    };
                    sqlfleet_sandbox::up(&srv.sandbox.home, &opts)
                        .await
                        .expect("restart the replica");
                });
            }
        }
        // Transfers go on after the fault too.
        let before = done.load(Ordering::Relaxed);
        let t0 = std::time::Instant::now();
        while done.load(Ordering::Relaxed) < before + 20 {
            if t0.elapsed() > Duration::from_secs(30) {
                campaign.violations.push(format!(
                    "round {round}: no transfer committed for 30 s after the fault"
                ));
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        rt.block_on(async {
            for t in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
            }
        });
        relay.wait_roles(1, 2);
        // Every server: the total, and the ledger against what clients
        // were told (replicas once they have caught up).
        let (ledger, unknown) = {
            let t = told.lock().expect("told");
            (t.ledger.clone(), t.unknown.clone())
        };
        let (_, primary_keys) = rt.block_on(state_at(srv, 0, &db));
        for (i, n) in srv.sandbox.meta.nodes.iter().enumerate() {
            let t0 = std::time::Instant::now();
            let (total, keys) = loop {
                let (total, keys) = rt.block_on(state_at(srv, i, &db));
                if keys.len() >= primary_keys.len() || t0.elapsed() > Duration::from_secs(30) {
                    break (total, keys);
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            if total != TOTAL {
                campaign.violations.push(format!(
                    "round {round}: {} holds a total of {total}",
                    n.name
                ));
            }
            for v in ledger.check(&keys, &unknown) {
                campaign
                    .violations
                    .push(format!("round {round}: {}: {v}", n.name));
            }
        }
    }
    let t = told.lock().expect("told");
    for bad in &t.bad_totals {
        campaign.violations.push(format!(
            "a reader saw a total of {bad}, a state that never existed"
        ));
    }
    eprintln!(
        "bank: {} transfers acknowledged, {} of unknown outcome, {} client errors, {} rounds",
        t.ledger.len(),
        t.unknown.len(),
        t.errors,
        rounds
    );
    campaign.assert_clean();
}
