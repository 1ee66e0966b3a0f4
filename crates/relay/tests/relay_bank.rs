//! The bank through the relay under faults, as seeded campaigns: clients
//! move money between 10 accounts in transactions (`SELECT ... FOR
//! UPDATE`, two UPDATEs, a ledger row with the transfer's key, COMMIT;
//! retried on deadlock), readers check the total on replicas
//! (read/write split, read-your-writes), while faults land on the
//! servers. After each round every server is healed and the invariants
//! are checked: the total is what it was on every server, and every
//! transfer a client was told committed is in the ledger exactly once,
//! on every server, with nothing there no client wrote.
//!
//! Three campaigns:
//! - primary + 2 replicas, faults on any server: SIGSTOP, the network to
//!   it stalled or cut (testkit `netfault` links in front of every
//!   server), kill -9 of a replica and its restart;
//! - a 3-node Galera cluster whose writer is killed (-9) and restarted
//!   (the first round, then seeded), stopped (SIGSTOP) or cut off from the
//!   relay, or a reader stopped cleanly and restarted: transactions the
//!   writer held are replayed on the new writer, so the only client
//!   errors are COMMITs whose outcome nobody can know;
//! - primary + 2 replicas whose primary is killed (-9) and a replica
//!   promoted (`sandbox promote`): the same, and what asynchronous
//!   replication lost at the failover (committed on the old primary,
//!   never sent) is told apart from anything the relay lost by reading
//!   the old primary's own ledger when it is back.
//!
//! `SQLFLEET_FAULT_SEED` / `SQLFLEET_FAULT_ROUNDS` choose the campaign
//! (CI: 4 rounds, 2 for Galera); `bench/faults.sh` runs them long.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::relay::app;
use common::routing::{start_routing_relay, start_routing_relay_through_links};
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_sandbox::{node, UpOptions};
use sqlfleet_testkit::faults::{Campaign, Ledger};
use sqlfleet_testkit::{replicated, TestServer};

const ACCOUNTS: i64 = 10;
const TOTAL: i64 = 10_000;
const MOVERS: usize = 6;
const READERS: usize = 2;

/// What the clients learnt: transfers told committed, transfers whose
/// outcome they never learnt, totals read that were not the total, and
/// the errors they saw — at COMMIT (whose outcome a direct client cannot
/// know either) or before it.
#[derive(Default)]
struct Told {
    ledger: Ledger,
    unknown: Vec<String>,
    bad_totals: Vec<i64>,
    at_commit: u64,
    before_commit: Vec<String>,
    /// A server's own refusal (1047 not in the Primary component, 1053
    /// shutting down, 1927 killed by it), passed through as a direct
    /// client gets it: the statement did not run.
    refused: Vec<String>,
}

/// A server's "not here, not now" (the relay passes it through).
fn is_refusal(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if matches!(s.code, 1047 | 1053 | 1927))
}

fn is_deadlock(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1213 || s.code == 1205)
}

/// One transfer as a client runs it: Ok(true) committed, Ok(false) a
/// deadlock rolled it back (not applied), Err the statement that failed
/// and why (the transfer's outcome is unknown to the client).
async fn transfer(
    c: &mut mysql_async::Conn,
    key: &str,
    from: i64,
    to: i64,
    amount: i64,
) -> Result<bool, (&'static str, mysql_async::Error)> {
    c.query_drop("BEGIN").await.map_err(|e| ("BEGIN", e))?;
    let r = async {
        let _: Vec<(i64, i64)> = c
            .query(format!(
                "SELECT id, balance FROM accounts WHERE id IN ({from}, {to}) ORDER BY id FOR UPDATE"
            ))
            .await
            .map_err(|e| ("SELECT", e))?;
        c.query_drop(format!(
            "UPDATE accounts SET balance = balance - {amount} WHERE id = {from}"
        ))
        .await
        .map_err(|e| ("UPDATE", e))?;
        c.query_drop(format!(
            "UPDATE accounts SET balance = balance + {amount} WHERE id = {to}"
        ))
        .await
        .map_err(|e| ("UPDATE", e))?;
        c.query_drop(format!(
            "INSERT INTO ledger (tx_key, from_id, to_id, amount) VALUES ('{key}', {from}, {to}, {amount})"
        ))
        .await
        .map_err(|e| ("INSERT", e))
    }
    .await;
    match r {
        Ok(()) => {}
        Err((_, e)) if is_deadlock(&e) => {
            let _ = c.query_drop("ROLLBACK").await;
            return Ok(false);
        }
        Err(e) => return Err(e),
    }
    match c.query_drop("COMMIT").await {
        Ok(()) => Ok(true),
        Err(e) if is_deadlock(&e) => Ok(false),
        Err(e) => Err(("COMMIT", e)),
    }
}

/// Totals and ledger keys on node `i` (directly).
async fn state_at(srv: &TestServer, i: usize, db: &str) -> (i64, Vec<String>) {
    let mut c = srv
        .sandbox
        .target(&srv.sandbox.meta.nodes[i])
        .expect("target")
        .connect(Duration::from_secs(30))
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

/// Restarts whatever of the sandbox is not running (a killed node).
fn restart(rt: &tokio::runtime::Runtime, srv: &TestServer) {
    rt.block_on(async {
        let opts = UpOptions {
            name: srv.sandbox.meta.name.clone(),
            die_with_parent: true,
            ..UpOptions::default()
        };
        sqlfleet_sandbox::up(&srv.sandbox.home, &opts)
            .await
            .expect("restart the killed node");
    });
}

fn kill9(srv: &TestServer, i: usize) {
    let nl = srv.sandbox.layout.node(&srv.sandbox.meta.nodes[i]);
    let pid = node::running_pid(&nl).expect("running");
    common::stall::signal(pid, libc::SIGKILL);
    while node::is_alive(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A bank through a relay, its clients' tally and the campaign.
struct Bank<'a> {
    srv: &'a TestServer,
    rt: tokio::runtime::Runtime,
    port: u16,
    db: String,
    seed: u64,
    told: Arc<Mutex<Told>>,
    campaign: Campaign,
}

impl<'a> Bank<'a> {
    /// The accounts and the ledger, made through the relay at `port`.
    fn open(name: &str, srv: &'a TestServer, port: u16, seed: u64) -> Bank<'a> {
        relay_log_in_output();
        let rt = tokio::runtime::Runtime::new().expect("rt");
        let (db, _) = rt.block_on(srv.fresh_db("bank"));
        rt.block_on(async {
            let mut c = app(port, "app-pw", Some(&db))
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
        Bank {
            srv,
            rt,
            port,
            db,
            seed,
            told: Arc::new(Mutex::new(Told::default())),
            campaign: Campaign::new(name, seed),
        }
    }

    /// One round: movers and readers run, `fault` lands 1.5 s in, and
    /// the round ends once 20 more transfers committed after it.
    fn round(&mut self, round: usize, fault: impl FnOnce(&mut Campaign, &tokio::runtime::Runtime)) {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for m in 0..MOVERS {
            let (stop, done, told, db) = (
                stop.clone(),
                done.clone(),
                self.told.clone(),
                self.db.clone(),
            );
            let port = self.port;
            let mut r = rand::rngs::StdRng::seed_from_u64(self.seed ^ ((round * 100 + m) as u64));
            tasks.push(self.rt.spawn(async move {
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
                        Err((stage, e)) => {
                            // At COMMIT nobody knows; before it the server
                            // rolls back what a lost connection left, but
                            // the client cannot tell which happened first:
                            // either way at most once, never required.
                            let mut t = told.lock().expect("told");
                            if stage == "COMMIT" {
                                t.at_commit += 1;
                            } else if is_refusal(&e) {
                                t.refused.push(format!("{key} at {stage}: {e}"));
                            } else {
                                t.before_commit.push(format!("{key} at {stage}: {e}"));
                            }
                            t.unknown.push(key);
                            c = None;
                        }
                    }
                }
            }));
        }
        for _ in 0..READERS {
            let (stop, told, db) = (stop.clone(), self.told.clone(), self.db.clone());
            let port = self.port;
            tasks.push(self.rt.spawn(async move {
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
        fault(&mut self.campaign, &self.rt);
        // Transfers go on after the fault too.
        let before = done.load(Ordering::Relaxed);
        let t0 = std::time::Instant::now();
        while done.load(Ordering::Relaxed) < before + 20 {
            if t0.elapsed() > Duration::from_secs(60) {
                self.campaign.violations.push(format!(
                    "round {round}: no transfer committed for 60 s after the fault"
                ));
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        self.rt.block_on(async {
            for t in tasks {
                let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
            }
        });
    }

    /// The invariants on `nodes`, once each has as many ledger rows as
    /// `reference` (replicas catching up); `lost_at_failover`: keys the
    /// failover itself lost (committed on a primary that died before
    /// sending them), which are not the relay's.
    fn check(
        &mut self,
        round: usize,
        nodes: &[usize],
        reference: usize,
        lost_at_failover: &[String],
    ) {
        let (ledger, unknown) = {
            let t = self.told.lock().expect("told");
            (t.ledger.clone(), t.unknown.clone())
        };
        let (_, reference_keys) = self.rt.block_on(state_at(self.srv, reference, &self.db));
        for &i in nodes {
            let name = self.srv.sandbox.meta.nodes[i].name.clone();
            let t0 = std::time::Instant::now();
            let (total, keys) = loop {
                let (total, keys) = self.rt.block_on(state_at(self.srv, i, &self.db));
                if keys.len() >= reference_keys.len() || t0.elapsed() > Duration::from_secs(30) {
                    break (total, keys);
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            if total != TOTAL {
                self.campaign
                    .violations
                    .push(format!("round {round}: {name} holds a total of {total}"));
            }
            for v in ledger.check(&keys, &unknown) {
                if let sqlfleet_testkit::faults::Violation::Lost(k) = &v {
                    if lost_at_failover.contains(k) {
                        continue;
                    }
                }
                self.campaign
                    .violations
                    .push(format!("round {round}: {name}: {v}"));
            }
        }
    }

    /// Prints the tally; returns it (transfers, errors at COMMIT, errors
    /// before it) after asserting the invariants held.
    fn finish(self) -> (usize, u64, Vec<String>) {
        let mut campaign = self.campaign;
        let t = self.told.lock().expect("told");
        for bad in &t.bad_totals {
            campaign.violations.push(format!(
                "a reader saw a total of {bad}, a state that never existed"
            ));
        }
        eprintln!(
            "{}: {} transfers acknowledged, {} of unknown outcome; client errors: {} at COMMIT, {} before it, {} a server's refusal passed through; {} faults",
            campaign.name,
            t.ledger.len(),
            t.unknown.len(),
            t.at_commit,
            t.before_commit.len(),
            t.refused.len(),
            campaign.faults.len()
        );
        for e in t.refused.iter().take(5) {
            eprintln!("  refused by the server: {e}");
        }
        for e in t.before_commit.iter().take(10) {
            eprintln!("  error before COMMIT: {e}");
        }
        campaign.assert_clean();
        (t.ledger.len(), t.at_commit, t.before_commit.clone())
    }
}

/// The relay's log lines (info: replays, what was not replayed and why,
/// health changes) go to the test's captured output, shown when a
/// campaign fails. The relay runs in this process, on threads spawned
/// from the test's, which inherit its capture.
fn relay_log_in_output() {
    let _ = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_test_writer()
        .try_init();
}

/// Transaction replay as the campaign runs it: on, unless
/// `SQLFLEET_BANK_REPLAY=off` (the figures to compare, from bench/faults.sh).
fn replay_on() -> (bool, &'static str) {
    if std::env::var("SQLFLEET_BANK_REPLAY").is_ok_and(|v| v == "off") {
        (false, "[replay]\nenabled = false\n")
    } else {
        (true, "")
    }
}

/// The relay's replay counters, for the campaign's report.
fn replay_counters(relay: &common::relay::Relay) -> String {
    let m = |s: &str| relay.metric(&format!("sqlfleet_relay_{s}_total"));
    format!(
        "replays {} (failed {}: {} a reply differed; refused {}), statements run again {}",
        m("transaction_replays"),
        m("transaction_replay_failures"),
        m("transaction_replay_mismatches"),
        m("transaction_replay_refused"),
        m("lost_retries")
    )
}

#[test]
fn bank_transfers_through_the_relay_survive_faults_on_every_server() {
    let seed = sqlfleet_testkit::faults::seed(20261128);
    let rounds = sqlfleet_testkit::faults::rounds(4);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let srv = replicated();
    let dir = tempfile::tempdir().expect("tmp");
    let (relay, links) = start_routing_relay_through_links(srv, dir.path(), "");
    let mut bank = Bank::open(
        "bank_transfers_through_the_relay_survive_faults_on_every_server",
        srv,
        relay.port,
        seed,
    );
    let all: Vec<usize> = (0..srv.sandbox.meta.nodes.len()).collect();
    for round in 0..rounds {
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
        let links = &links;
        bank.round(round, |campaign, rt| {
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
                    kill9(srv, i);
                    std::thread::sleep(Duration::from_millis(ms));
                    restart(rt, srv);
                }
            }
        });
        relay.wait_roles(1, 2);
        bank.check(round, &all, 0, &[]);
    }
    eprintln!("relay: {}", replay_counters(&relay));
    bank.finish();
}

#[test]
fn bank_on_galera_with_the_writer_killed_stopped_or_cut_off_replays_its_transactions() {
    let seed = sqlfleet_testkit::faults::seed(20261128);
    let rounds = sqlfleet_testkit::faults::rounds(2);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let g = sqlfleet_testkit::galera();
    let dir = tempfile::tempdir().expect("tmp");
    let (replay, extra) = replay_on();
    // The relay reaches each node through a fault link (the cluster's
    // own traffic does not pass there).
    let (relay, links) = start_routing_relay_through_links(g, dir.path(), extra);
    let ready = ["writer", "reader", "reader"];
    let settled = |relay: &common::relay::Relay| {
        let t0 = std::time::Instant::now();
        loop {
            let mut roles: Vec<String> = relay.roles().into_iter().map(|r| r.1).collect();
            roles.sort();
            let mut want: Vec<&str> = ready.to_vec();
            want.sort();
            if roles.iter().map(String::as_str).eq(want.iter().copied()) {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "roles stay {roles:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    settled(&relay);
    let mut bank = Bank::open(
        "bank_on_galera_with_the_writer_killed_stopped_or_cut_off_replays_its_transactions",
        g,
        relay.port,
        seed,
    );
    let all: Vec<usize> = (0..g.sandbox.meta.nodes.len()).collect();
    for round in 0..rounds {
        let ms = rng.gen_range(1500..4000);
        let roles = relay.roles();
        let writer = roles
            .iter()
            .position(|(_, r)| r == "writer")
            .expect("a writer");
        let reader = (writer + 1 + rng.gen_range(0..2)) % all.len();
        // The first round always kills the writer; later ones choose.
        let which = if round == 0 { 0 } else { rng.gen_range(0..4) };
        let links = &links;
        bank.round(round, |campaign, rt| {
            let name = |i: usize| g.sandbox.meta.nodes[i].name.clone();
            let pid = |i: usize| {
                node::running_pid(&g.sandbox.layout.node(&g.sandbox.meta.nodes[i]))
                    .expect("running")
            };
            match which {
                0 => {
                    campaign.fault(format!(
                        "round {round}: kill -9 of the writer {}, restarted {ms} ms later",
                        name(writer)
                    ));
                    kill9(g, writer);
                    std::thread::sleep(Duration::from_millis(ms));
                    restart(rt, g);
                }
                1 => {
                    campaign.fault(format!(
                        "round {round}: SIGSTOP of the writer {} for {ms} ms",
                        name(writer)
                    ));
                    let p = pid(writer);
                    common::stall::signal(p, libc::SIGSTOP);
                    std::thread::sleep(Duration::from_millis(ms));
                    common::stall::signal(p, libc::SIGCONT);
                }
                2 => {
                    campaign.fault(format!(
                        "round {round}: the relay's network to the writer {} cut for {ms} ms",
                        name(writer)
                    ));
                    links[writer].cut();
                    std::thread::sleep(Duration::from_millis(ms));
                    links[writer].heal();
                }
                _ => {
                    campaign.fault(format!(
                        "round {round}: clean stop (SIGTERM) of the reader {}, restarted {ms} ms later",
                        name(reader)
                    ));
                    let p = pid(reader);
                    common::stall::signal(p, libc::SIGTERM);
                    while node::is_alive(p) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    std::thread::sleep(Duration::from_millis(ms));
                    restart(rt, g);
                }
            }
        });
        settled(&relay);
        bank.check(round, &all, (writer + 1) % all.len(), &[]);
    }
    let counters = replay_counters(&relay);
    eprintln!("relay: {counters}");
    let mismatches = relay.metric("sqlfleet_relay_transaction_replay_mismatches_total");
    let (_, _, before_commit) = bank.finish();
    assert!(
        !replay || before_commit.len() as f64 <= mismatches,
        "with transaction replay a client sees only errors whose outcome is unknown (at COMMIT) \
         or of a replay whose replies differed (fail closed); {} before COMMIT: {before_commit:?} ({counters})",
        before_commit.len()
    );
}

#[test]
fn bank_with_the_primary_killed_and_a_replica_promoted_replays_its_transactions() {
    let seed = sqlfleet_testkit::faults::seed(20261128);
    let srv = sqlfleet_testkit::replicated_own();
    let dir = tempfile::tempdir().expect("tmp");
    let (replay, extra) = replay_on();
    let relay = start_routing_relay(
        &srv,
        dir.path(),
        "read_write_split = true\nconsistency = \"session\"\nhealth_interval = 0.2",
        "",
        extra,
    );
    let mut bank = Bank::open(
        "bank_with_the_primary_killed_and_a_replica_promoted_replays_its_transactions",
        &srv,
        relay.port,
        seed,
    );
    let sb = &srv.sandbox;
    let mut promoted = 1;
    bank.round(0, |campaign, rt| {
        kill9(&srv, 0);
        // As a DBA would: the replica that received the most of the dead
        // primary's log (another would leave the ahead one unable to
        // replicate from it).
        let pos = |i: usize| -> u64 {
            rt.block_on(async {
                let mut c = sb
                    .target(&sb.meta.nodes[i])
                    .expect("target")
                    .connect(Duration::from_secs(10))
                    .await
                    .expect("replica");
                let p: Option<String> = c
                    .query_first("SELECT @@gtid_slave_pos")
                    .await
                    .expect("position");
                p.and_then(|p| p.rsplit('-').next().and_then(|n| n.parse().ok()))
                    .unwrap_or(0)
            })
        };
        // Wait until both have read what they can of the dead primary.
        std::thread::sleep(Duration::from_millis(500));
        if pos(2) > pos(1) {
            promoted = 2;
        }
        let name = sb.meta.nodes[promoted].name.clone();
        campaign.fault(format!("kill -9 of the primary node1, {name} promoted"));
        rt.block_on(async {
            let mut s = sqlfleet_sandbox::Sandbox::open(&sb.home, &sb.meta.name).expect("open");
            s.promote(&name, Duration::from_secs(60), &Default::default())
                .await
                .expect("promote");
        });
    });
    let other = 3 - promoted;
    // What the old primary committed: read on it once it is back (it
    // then replicates from the new primary; its own rows stay). A
    // transaction it committed and never sent stops that replication (an
    // out-of-order GTID): the sandbox says so, and the node still runs.
    bank.rt.block_on(async {
        let opts = UpOptions {
            name: srv.sandbox.meta.name.clone(),
            die_with_parent: true,
            ..UpOptions::default()
        };
        if let Err(e) = sqlfleet_sandbox::up(&srv.sandbox.home, &opts).await {
            eprintln!("the old primary is back; its replication: {e}");
        }
    });
    let (_, on_old) = bank.rt.block_on(state_at(&srv, 0, &bank.db));
    let (_, on_new) = bank.rt.block_on(state_at(&srv, promoted, &bank.db));
    let lost: Vec<String> = on_old
        .iter()
        .filter(|k| !on_new.contains(k))
        .cloned()
        .collect();
    eprintln!(
        "asynchronous replication lost {} committed transfer(s) at the failover (on the old primary only)",
        lost.len()
    );
    bank.check(0, &[promoted, other], promoted, &lost);
    let counters = replay_counters(&relay);
    eprintln!("relay: {counters}");
    let mismatches = relay.metric("sqlfleet_relay_transaction_replay_mismatches_total");
    let (_, _, before_commit) = bank.finish();
    assert!(
        !replay || before_commit.len() as f64 <= mismatches,
        "with transaction replay a client sees only errors whose outcome is unknown (at COMMIT) \
         or of a replay whose replies differed (fail closed); {} before COMMIT: {before_commit:?} ({counters})",
        before_commit.len()
    );
}
