//! A differential protocol fuzzer: the same seeded packet sequences sent to
//! the server directly and through the relay (transaction mode, per-user
//! accounts: each side runs as the same unprivileged account) must get
//! replies of the same kind — OK, ERR with the same code, EOF, a result,
//! text, nothing, or a closed connection — with the same sequence id, step
//! by step; the relay never panics and a fresh client is served after
//! every sequence.
//!
//! The sequences are drawn from the protocol's own space: every command
//! byte 0x00..=0x1f, MariaDB's 0xfa..=0xfe and unassigned bytes; bodies
//! empty, random, or shaped for the command (statement ids, database
//! names, statements from a list that opens transactions, temporary
//! tables, user variables, errors, warnings); wrong sequence ids; empty
//! packets; frames whose length lies (then the sequence ends). After each
//! step a sentinel `SELECT 'sentinel'` marks where its reply ends.
//!
//! Where the relay answers differently on purpose, [`ALLOWED`] names the
//! command and why; every other difference fails the test with the seed.
//! Seeds: SQLFLEET_PROTO_FUZZ_SEEDS (default 40) from
//! SQLFLEET_PROTO_FUZZ_FIRST (default 0); bench/relay_protocol_fuzz.sh runs
//! the long campaign. Odd seeds speak the compressed protocol
//! (CLIENT_COMPRESS: each packet in a frame of its own).

#[path = "protocol_differential/capabilities.rs"]
mod capabilities;
mod common;

use std::time::Duration;

use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_wire::packet;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Packets the relay answers differently on purpose: which (the command
/// byte, and whether a packet is one), and why.
type Allowed = (u8, fn(&[u8]) -> bool, &'static str);
const ALLOWED: &[Allowed] = &[
    (
        0x08,
        |_| true,
        "COM_SHUTDOWN: the relay never passes it on (1047); through a shared account it would stop the server for anyone",
    ),
    (
        0x11,
        |p| !p[1..].contains(&0),
        "COM_CHANGE_USER cut before its user name ends: the server starts an authentication exchange for what it read; the relay refuses it as malformed (1047), after the session reset a refusal makes on the server",
    ),
];

const USER: &str = "fz";
const PASSWORD: &str = "fz-pw";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Ok,
    Err(u16),
    Eof,
    /// A result set, prepare OK's metadata, field list: anything else
    /// that starts with a length or a column.
    Result,
    /// COM_STATISTICS's plain text.
    Text,
}

/// What one step got: the first reply packet's kind and sequence id, and
/// how the connection ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    /// `None`: no packet before the sentinel's reply (COM_STMT_CLOSE,
    /// long data) or the end.
    kind: Option<(Kind, u8)>,
    /// The connection closed (after what came).
    closed: bool,
    /// Nothing more came within the wait (a frame the peer still reads).
    silent: bool,
}

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    /// A command packet: sequence id, payload.
    Packet(u8, Vec<u8>),
    /// A frame whose header promises `promised` bytes and has fewer
    /// (the sequence ends after it).
    Lie { promised: usize, payload: Vec<u8> },
}

fn kind_of(p: &[u8]) -> Kind {
    match p.first() {
        Some(0x00) => Kind::Ok,
        Some(0xFF) => Kind::Err(packet::parse_err(p).map_or(0, |(c, _)| c)),
        Some(0xFE) if p.len() < 9 => Kind::Eof,
        Some(b) if b.is_ascii_alphabetic() && p.len() > 8 => Kind::Text,
        _ => Kind::Result,
    }
}

/// Statements a COM_QUERY or COM_STMT_PREPARE carries.
const STATEMENTS: &[&str] = &[
    "SELECT 1",
    "SELECT * FROM t",
    "INSERT INTO t VALUES (NULL, 'x')",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SET @a = 1",
    "SELECT @a",
    "SET autocommit = 0",
    "SET autocommit = 1",
    "CREATE TEMPORARY TABLE IF NOT EXISTS tt (a INT)",
    "SELECT * FROM tt",
    "SELECT 1/0",
    "SHOW WARNINGS",
    "SELECT ROW_COUNT(), FOUND_ROWS()",
    "SELEC garbage",
    "SELECT * FROM nowhere",
    "DO SLEEP(0)",
    "SELECT ?",
    "INSERT INTO t VALUES (?, ?)",
    "SET NAMES latin1",
    "SET NAMES utf8mb4",
    "",
];

fn body(rng: &mut rand::rngs::StdRng, cmd: u8, db: &str) -> Vec<u8> {
    let mut p = vec![cmd];
    match rng.gen_range(0..4) {
        0 => {}
        1 => {
            let n = rng.gen_range(1..40);
            p.extend((0..n).map(|_| rng.gen::<u8>()));
        }
        _ => match cmd {
            0x03 | 0x16 => {
                p.extend_from_slice(STATEMENTS[rng.gen_range(0..STATEMENTS.len())].as_bytes())
            }
            0x02 => {
                let names = [db, "mysql", "nowhere", ""];
                p.extend_from_slice(names[rng.gen_range(0..names.len())].as_bytes());
            }
            0x04 => {
                p.extend_from_slice(if rng.gen_bool(0.5) {
                    b"t\0"
                } else {
                    b"nowhere\0"
                });
            }
            0x1b => p.extend_from_slice(&[rng.gen_range(0..3u8), 0]),
            // Statement commands: a small id, then what an execute or
            // fetch carries (flags, iterations / rows).
            // (ids as the k-th statement this connection prepared, put in
            // by `run`; or MariaDB's "the last prepared", 0xffffffff)
            0x17..=0x1c | 0xfa => {
                let id = match rng.gen_range(0..6u32) {
                    5 => u32::MAX,
                    k => PREPARED + k,
                };
                p.extend_from_slice(&id.to_le_bytes());
                if matches!(cmd, 0x17 | 0x1c | 0xfa) {
                    p.extend_from_slice(&[0, 1, 0, 0, 0]);
                }
            }
            // Binlog dump: a position, flags, server id, file name.
            0x12 | 0x1e | 0x15 => {
                p.extend_from_slice(&4u32.to_le_bytes());
                p.extend_from_slice(&[0, 0]);
                p.extend_from_slice(&rng.gen_range(1000..2000u32).to_le_bytes());
            }
            _ => {
                let n = rng.gen_range(1..8);
                p.extend((0..n).map(|_| rng.gen::<u8>()));
            }
        },
    }
    p
}

fn command_byte(rng: &mut rand::rngs::StdRng) -> u8 {
    match rng.gen_range(0..10) {
        0 => rng.gen::<u8>(),
        1 => rng.gen_range(0xfa..=0xfe),
        2..=4 => 0x03,
        5 => rng.gen_range(0x16..=0x1c),
        _ => rng.gen_range(0..=0x1f),
    }
}

fn generate(seed: u64, db: &str, steps: usize) -> Vec<Step> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for _ in 0..steps {
        let cmd = command_byte(&mut rng);
        let payload = body(&mut rng, cmd, db);
        match rng.gen_range(0..30) {
            0 => out.push(Step::Packet(rng.gen_range(1..=255), payload)),
            1 => out.push(Step::Packet(0, Vec::new())),
            2 => {
                let promised = payload.len() + rng.gen_range(1..100);
                out.push(Step::Lie { promised, payload });
                break;
            }
            _ => out.push(Step::Packet(0, payload)),
        }
    }
    out
}

/// The same sequence with the database name the other side uses.
fn for_db(steps: &[Step], from: &str, to: &str) -> Vec<Step> {
    let swap = |p: &[u8]| -> Vec<u8> {
        if p.len() > from.len() && &p[1..] == from.as_bytes() {
            [&p[..1], to.as_bytes()].concat()
        } else {
            p.to_vec()
        }
    };
    steps
        .iter()
        .map(|s| match s {
            Step::Packet(q, p) => Step::Packet(*q, swap(p)),
            Step::Lie { promised, payload } => Step::Lie {
                promised: *promised,
                payload: payload.clone(),
            },
        })
        .collect()
}

const SENTINEL: &[u8] = b"\x03SELECT 'sentinel'";

/// A statement id in a generated body meaning "the k-th statement this
/// connection prepared" (PREPARED + k): the server's ids and the relay's
/// are each their own, so each side gets its own.
const PREPARED: u32 = 0xFFFF_FF00;

/// `p` with a placeholder statement id replaced by this side's.
fn with_ids(p: &[u8], ids: &[u32]) -> Vec<u8> {
    let mut p = p.to_vec();
    if matches!(p.first(), Some(0x17..=0x1c | 0xfa)) && p.len() >= 5 {
        let id = u32::from_le_bytes([p[1], p[2], p[3], p[4]]);
        if (PREPARED..PREPARED + 5).contains(&id) {
            let k = (id - PREPARED) as usize;
            // No such statement: an id neither side ever gave.
            let real = ids.get(k).copied().unwrap_or(0x7FFF_0000 + k as u32);
            p[1..5].copy_from_slice(&real.to_le_bytes());
        }
    }
    p
}

/// Runs `steps` on a fresh connection to `port` (logged in to `db`,
/// with CLIENT_COMPRESS when `compressed`: every packet then travels in
/// compressed frames, one frame per packet, each command's first at
/// frame sequence 0); one answer per step until the connection ends.
async fn run(port: u16, user: &str, db: &str, steps: &[Step], compressed: bool) -> Vec<Answer> {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let mut shape =
        sqlfleet_wire::handshake::MULTI_RESULTS | sqlfleet_wire::handshake::PS_MULTI_RESULTS;
    if compressed {
        shape |= sqlfleet_wire::handshake::COMPRESS;
    }
    common::wire_login(&mut s, user, PASSWORD, shape, 45, Some(db))
        .await
        .expect("login");
    if compressed {
        // The login's OK (read by the login) was the last plain packet.
        let (c, reset) = sqlfleet_wire::compress::Compressed::new(s);
        return run_on(c, Some(reset), steps).await;
    }
    run_on(s, None, steps).await
}

/// Whether a step ends its sequence: a frame that lies, or (plain
/// protocol) a packet out of order — the server closes, or waits for the
/// rest. With compression a command's inner sequence id is not checked.
fn ends_sequence(step: &Step, compressed: bool) -> bool {
    match step {
        Step::Lie { .. } => true,
        Step::Packet(seq, _) => *seq != 0 && !compressed,
    }
}

async fn run_on<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    reset: Option<sqlfleet_wire::compress::SeqReset>,
    steps: &[Step],
) -> Vec<Answer> {
    let new_command = || {
        if let Some(r) = &reset {
            r.new_command();
        }
    };
    let mut out = Vec::new();
    let mut ids = Vec::new();
    for step in steps {
        new_command();
        let wrote = match step {
            Step::Packet(seq, p) => {
                let p = with_ids(p, &ids);
                write_packet(&mut s, *seq, &p, p.len()).await
            }
            Step::Lie { promised, payload } => write_packet(&mut s, 0, payload, *promised).await,
        };
        // A packet out of order or a frame that lies ends the sequence
        // (the server closes, or waits for the rest): no sentinel, whose
        // bytes would race the peer's close or fill the frame.
        let last = ends_sequence(step, reset.is_some());
        let wrote = wrote.is_ok()
            && (last || {
                new_command();
                write_packet(&mut s, 0, SENTINEL, SENTINEL.len())
                    .await
                    .is_ok()
            });
        let (a, first) = if wrote {
            answer(&mut s, !last).await
        } else {
            (
                Answer {
                    kind: None,
                    closed: true,
                    silent: false,
                },
                None,
            )
        };
        // A prepare's OK: the id this side gave.
        if let (Step::Packet(seq, p), Some(f)) = (step, &first) {
            let a_command = *seq == 0 || reset.is_some();
            if a_command && p.first() == Some(&0x16) && f.first() == Some(&0) && f.len() >= 5 {
                ids.push(u32::from_le_bytes([f[1], f[2], f[3], f[4]]));
            }
        }
        let end = a.closed || a.silent;
        out.push(a);
        if end {
            break;
        }
    }
    out
}

async fn write_packet<S: tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    seq: u8,
    p: &[u8],
    len: usize,
) -> std::io::Result<()> {
    let mut f = (len as u32).to_le_bytes()[..3].to_vec();
    f.push(seq);
    f.extend_from_slice(p);
    s.write_all(&f).await?;
    s.flush().await
}

/// Reads until the sentinel's reply has ended (or, without a sentinel,
/// until the peer closes or is quiet): the kind of the first packet
/// before it, and that packet.
async fn answer<S: tokio::io::AsyncRead + Unpin>(
    s: &mut S,
    sentinel: bool,
) -> (Answer, Option<Vec<u8>>) {
    let mut before: Vec<(Vec<u8>, u8)> = Vec::new();
    let wait = Duration::from_millis(if sentinel { 2000 } else { 700 });
    let end = |before: &[(Vec<u8>, u8)], closed: bool, silent: bool| {
        (
            Answer {
                kind: first_of(before),
                closed,
                silent,
            },
            before.first().map(|(p, _)| p.clone()),
        )
    };
    loop {
        let got = tokio::time::timeout(wait, packet::read(s, 1 << 24)).await;
        let p = match got {
            Err(_) => return end(&before, false, true),
            Ok(Err(_)) => return end(&before, true, false),
            Ok(Ok(p)) => p,
        };
        // The sentinel's row: its one value. Its column count came just
        // before its column definition (the packet naming it).
        if sentinel && p.payload == b"\x08sentinel" {
            let def = before
                .iter()
                .rposition(|(q, _)| q.windows(8).any(|w| w == b"sentinel"))
                .unwrap_or(before.len());
            before.truncate(def.saturating_sub(1));
            // Its terminator.
            let _ = tokio::time::timeout(wait, packet::read(s, 1 << 24)).await;
            return end(&before, false, false);
        }
        before.push((p.payload, p.seq));
    }
}

fn first_of(ps: &[(Vec<u8>, u8)]) -> Option<(Kind, u8)> {
    ps.first().map(|(p, seq)| (kind_of(p), *seq))
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The command byte of step `at` (a packet at sequence id 0).
fn command_of(steps: &[Step], at: usize) -> Option<u8> {
    match steps.get(at)? {
        Step::Packet(0, p) => p.first().copied(),
        _ => None,
    }
}

/// The command byte of step `at` when [`ALLOWED`] names it.
fn allowed(steps: &[Step], at: usize, compressed: bool) -> Option<u8> {
    let p = match steps.get(at)? {
        Step::Packet(0, p) => p,
        Step::Packet(_, p) if compressed => p,
        Step::Lie { payload, .. } => payload,
        Step::Packet(..) => return None,
    };
    let cmd = *p.first()?;
    ALLOWED
        .iter()
        .any(|(c, applies, _)| *c == cmd && applies(p))
        .then_some(cmd)
}

/// The account both sides run as, its two databases, and a relay in
/// transaction mode with per-user accounts.
/// The account lane `k` logs in as: lanes side by side each run as an
/// account of their own, so a KILL of one lane names none of another's
/// sessions it may end (the server and the relay kill only the
/// account's own).
fn lane_user(k: usize) -> String {
    match k {
        0 => USER.into(),
        k => format!("{USER}{k}"),
    }
}

/// The databases lane `k` runs in, directly and through the relay
/// (lanes run sequences side by side, each in databases of its own).
fn lane_dbs(k: usize) -> (String, String) {
    match k {
        0 => ("fzd".into(), "fzr".into()),
        k => (format!("fzd{k}"), format!("fzr{k}")),
    }
}

async fn fuzz_setup(
    srv: &sqlfleet_testkit::TestServer,
    lanes: usize,
) -> (
    u16,
    tokio::sync::oneshot::Sender<()>,
    std::sync::Arc<sqlfleet_relay::Relay>,
) {
    let mut root = srv.connect().await;
    let mut users = String::new();
    for k in 0..lanes {
        let user = lane_user(k);
        root.query_drop(format!(
            "CREATE OR REPLACE USER '{user}'@'%' IDENTIFIED BY '{PASSWORD}'"
        ))
        .await
        .expect("setup");
        let (d, r) = lane_dbs(k);
        for db in [d, r] {
            for sql in [
                format!("CREATE DATABASE IF NOT EXISTS {db}"),
                format!("CREATE TABLE IF NOT EXISTS {db}.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))"),
                format!("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, CREATE TEMPORARY TABLES ON {db}.* TO '{user}'@'%'"),
            ] {
                root.query_drop(sql).await.expect("setup");
            }
        }
        users.push_str(&format!(
            "\n[[users]]\nname = \"{user}\"\n{}\n",
            sqlfleet_relay::config::hash_lines(PASSWORD)
        ));
    }
    // Room for every lane's transaction.
    let max = 4 * lanes;
    let tail = format!("[pool]\nmax = {max}\nmax_per_account = {max}\nwait_timeout = 10\n{users}");
    common::serve_relay(&per_user_config(srv, &tail), None).await
}

/// A relay config before `srv` in transaction mode with per-user accounts
/// (each side runs as the same account), and `tail` (`[pool]`,
/// `[[users]]`).
fn per_user_config(srv: &sqlfleet_testkit::TestServer, tail: &str) -> String {
    format!(
        r#"
[relay]
listen = ["127.0.0.1:0"]
mode = "transaction"

[backend]
servers = ["127.0.0.1:{port}"]
user = "root"
password = "{pw}"
accounts = "per-user"

{tail}"#,
        port = srv.sandbox.meta.primary().port,
        pw = srv.sandbox.password().expect("pw").expose(),
    )
}

/// What one sequence came to.
#[derive(Default)]
struct Compared {
    /// The first difference, described.
    failure: Option<String>,
    /// Stopped at an allowed difference of this command.
    tolerated: Option<u8>,
}

/// Sends sequence `seed` directly and through the relay in `lane`'s
/// databases, compares the answers, and checks that a fresh client is
/// served after it.
async fn one_sequence(
    seed: u64,
    (lane, lanes): (usize, usize),
    direct_port: u16,
    relay_port: u16,
    steps_per: usize,
) -> Compared {
    let (dd, rd) = lane_dbs(lane);
    let user = lane_user(lane);
    let steps = generate(seed, &dd, steps_per);
    let relay_steps = for_db(&steps, &dd, &rd);
    // Odd seeds speak the compressed protocol.
    let compressed = seed % 2 == 1;
    let (d, r) = tokio::join!(
        run(direct_port, &user, &dd, &steps, compressed),
        run(relay_port, &user, &rd, &relay_steps, compressed)
    );
    let mut out = Compared::default();
    for i in 0..d.len().max(r.len()) {
        if d.get(i) == r.get(i) {
            continue;
        }
        if let Some(cmd) = allowed(&steps, i, compressed) {
            // What follows an allowed difference is not compared.
            out.tolerated = Some(cmd);
            break;
        }
        // Side by side, a KILL's random id may name a session of the
        // same account that is alive on one side only (the server's
        // thread ids and the relay's client ids are each their own; one
        // after another, the ids a sequence can name are long gone on
        // both).
        if lanes > 1 && command_of(&steps, i) == Some(0x0c) {
            out.tolerated = Some(0x0c);
            break;
        }
        out.failure = Some(format!(
            "seed {seed} (compressed: {compressed}) step {i}: {:?}\n  direct: {:?}\n  relay:  {:?}\n  steps before: {:?}\n  answers before: {:?}",
            steps.get(i),
            d.get(i),
            r.get(i),
            &steps[..i],
            &d[..i]
        ));
        break;
    }
    // Other sessions stay served.
    let mut c = mysql_async::Conn::new(
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(relay_port)
            .user(Some(user))
            .pass(Some(PASSWORD))
            .db_name(Some(rd))
            .prefer_socket(false),
    )
    .await
    .expect("a fresh client logs in");
    let one: Option<i64> = tokio::time::timeout(Duration::from_secs(5), c.query_first("SELECT 1"))
        .await
        .unwrap_or_else(|_| panic!("seed {seed}: a fresh client is not served"))
        .expect("select");
    assert_eq!(one, Some(1));
    drop(c.disconnect().await);
    out
}

/// Seeds SQLFLEET_PROTO_FUZZ_SEEDS from SQLFLEET_PROTO_FUZZ_FIRST, in
/// SQLFLEET_PROTO_FUZZ_LANES lanes side by side (default 1: one after
/// another; lane k takes every k-th seed, so a seed's steps and
/// databases do not depend on the lane count but its neighbours do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_answers_every_packet_sequence_as_the_server_does() {
    let srv = sqlfleet_testkit::server();
    let first = env_num("SQLFLEET_PROTO_FUZZ_FIRST", 0);
    let seeds = env_num("SQLFLEET_PROTO_FUZZ_SEEDS", 40);
    let steps_per = env_num("SQLFLEET_PROTO_FUZZ_STEPS", 12) as usize;
    let lanes = env_num("SQLFLEET_PROTO_FUZZ_LANES", 1).clamp(1, 64) as usize;
    let (relay_port, _stop, _relay) = fuzz_setup(srv, lanes).await;
    let direct_port = srv.sandbox.meta.primary().port;
    let tasks: Vec<_> = (0..lanes)
        .map(|lane| {
            tokio::spawn(async move {
                let mut results = Vec::new();
                let mut seed = first + lane as u64;
                while seed < first + seeds {
                    let c =
                        one_sequence(seed, (lane, lanes), direct_port, relay_port, steps_per).await;
                    results.push(c);
                    seed += lanes as u64;
                }
                results
            })
        })
        .collect();
    let mut failures = Vec::new();
    let mut tolerated = std::collections::BTreeMap::<u8, usize>::new();
    for t in tasks {
        for c in t.await.expect("a lane ended") {
            failures.extend(c.failure);
            if let Some(cmd) = c.tolerated {
                *tolerated.entry(cmd).or_default() += 1;
            }
        }
    }
    eprintln!(
        "protocol differential: {seeds} sequences from seed {first} ({} in compressed frames, {lanes} lanes), stopped at an allowed difference (by command byte): {tolerated:02x?}, {} differences",
        (first..first + seeds).filter(|s| s % 2 == 1).count(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

async fn read_payload(s: &mut TcpStream) -> Vec<u8> {
    packet::read(s, 1 << 24).await.expect("reply").payload
}

/// One text query on a raw connection: the first row's values, or the
/// error code. (No DEPRECATE_EOF: the login above does not ask for it.)
async fn row(s: &mut TcpStream, sql: &str) -> Result<Vec<Option<String>>, u16> {
    let mut p = vec![0x03];
    p.extend_from_slice(sql.as_bytes());
    write_packet(s, 0, &p, p.len()).await.expect("send");
    let first = read_payload(s).await;
    match first.first() {
        Some(0xFF) => return Err(packet::parse_err(&first).map_or(0, |e| e.0)),
        Some(0x00) => return Ok(Vec::new()),
        _ => {}
    }
    let n = first[0] as usize;
    for _ in 0..n {
        read_payload(s).await;
    }
    read_payload(s).await; // EOF after the columns
    let mut values = Vec::new();
    let mut r = read_payload(s).await;
    if r.first() != Some(&0xFE) {
        let mut i = 0;
        for _ in 0..n {
            if r[i] == 0xFB {
                values.push(None);
                i += 1;
            } else {
                let v = packet::lenenc_bytes(&r, &mut i).expect("value");
                values.push(Some(String::from_utf8_lossy(v).into_owned()));
            }
        }
        while r.first() != Some(&0xFE) || r.len() >= 9 {
            r = read_payload(s).await;
        }
    }
    Ok(values)
}

/// A COM_CHANGE_USER the server refuses resets the session first (its
/// transaction rolled back, user variables, temporary tables and
/// character set back to a new session's) and keeps the user and
/// database; through the relay the client finds the same. (Before, the
/// relay kept the old session whole: a later COMMIT committed what the
/// server had rolled back.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_change_user_leaves_the_session_as_the_server_does() {
    let srv = sqlfleet_testkit::server();
    let (relay_port, _stop, _relay) = fuzz_setup(srv, 1).await;
    let direct_port = srv.sandbox.meta.primary().port;
    let mut seen = Vec::new();
    for (port, db) in [(direct_port, "fzd"), (relay_port, "fzr")] {
        let mut s = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let shape = sqlfleet_wire::handshake::MULTI_RESULTS;
        common::wire_login(&mut s, USER, PASSWORD, shape, 45, Some(db))
            .await
            .expect("login");
        for sql in [
            "SET @a = 1",
            "SET NAMES latin1",
            "CREATE TEMPORARY TABLE cu_tmp (a INT)",
            "BEGIN",
            "INSERT INTO t (v) VALUES ('cu')",
        ] {
            row(&mut s, sql).await.expect(sql);
        }
        // Wrong password (20 bytes of native scramble), same database.
        let mut cu = vec![0x11];
        cu.extend_from_slice(USER.as_bytes());
        cu.push(0);
        cu.push(20);
        cu.extend_from_slice(&[7; 20]);
        cu.extend_from_slice(db.as_bytes());
        cu.push(0);
        cu.extend_from_slice(&[45, 0]);
        cu.extend_from_slice(b"mysql_native_password\0");
        write_packet(&mut s, 0, &cu, cu.len())
            .await
            .expect("change user");
        let mut reply = packet::read(&mut s, 1 << 16).await.expect("reply");
        if reply.payload.first() == Some(&0xFE) {
            // An auth switch (a fresh scramble): the wrong answer again.
            write_packet(&mut s, reply.seq.wrapping_add(1), &[9; 20], 20)
                .await
                .expect("auth switch answer");
            reply = packet::read(&mut s, 1 << 16).await.expect("reply");
        }
        let reply = reply.payload;
        let refused = packet::parse_err(&reply).map(|e| e.0);
        let state = row(
            &mut s,
            "SELECT @a IS NULL, @@in_transaction, DATABASE() = 'fzd' OR DATABASE() = 'fzr', CURRENT_USER(), @@character_set_client = @@global.character_set_client OR @@character_set_client = 'utf8mb4'",
        )
        .await;
        let tmp = row(&mut s, "SELECT COUNT(*) FROM cu_tmp").await;
        row(&mut s, "COMMIT").await.expect("commit");
        let kept = row(&mut s, "SELECT COUNT(*) FROM t WHERE v = 'cu'").await;
        row(&mut s, "DELETE FROM t WHERE v = 'cu'")
            .await
            .expect("clean");
        seen.push((refused, state, tmp, kept));
    }
    assert_eq!(seen[0].0, Some(1045), "the server refuses it");
    assert_eq!(
        seen[0].1,
        Ok(vec![
            Some("1".into()),
            Some("0".into()),
            Some("1".into()),
            Some("fz@%".into()),
            Some("1".into())
        ]),
        "the server's session after the refusal"
    );
    assert_eq!(
        seen[1], seen[0],
        "through the relay (left) as directly (right)"
    );
}
