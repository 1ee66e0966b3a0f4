//! Connect-time variable reads the relay answers without a server round
//! trip: byte for byte the server's own reply, for every session shape, in
//! the state the server would leave; a global set through the relay is
//! seen at once. Real drivers' views of the same reads are compared in
//! relay_clients.rs.

mod common;

use common::relay::{start_relay, Relay};
use sqlfleet_testkit::{server, TestServer};
use sqlfleet_wire::handshake;
use sqlfleet_wire::packet;
use tokio::net::TcpStream;

/// Logs in as root (the same account directly and through the relay).
async fn login(port: u16, password: &str, caps: u32, collation: u8) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    common::wire_login(&mut s, "root", password, caps, collation, None)
        .await
        .expect("login");
    s
}

/// [`login`], or how it was refused.
async fn try_login(
    port: u16,
    password: &str,
    caps: u32,
    collation: u8,
) -> Result<TcpStream, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    common::wire_login(&mut s, "root", password, caps, collation, None)
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(s)
}

/// Sends a COM_QUERY and returns the whole reply as it came over the
/// wire (packet headers included): a result set's metadata, rows and
/// terminator, or an OK / ERR.
async fn reply(s: &mut TcpStream, sql: &str, deprecate_eof: bool) -> Vec<u8> {
    let mut q = vec![0x03];
    q.extend_from_slice(sql.as_bytes());
    packet::write(s, 0, &q).await.expect("send");
    let mut out = Vec::new();
    let push = |p: &packet::Packet, out: &mut Vec<u8>| {
        let n = p.payload.len() as u32;
        out.extend_from_slice(&n.to_le_bytes()[..3]);
        out.push(p.seq);
        out.extend_from_slice(&p.payload);
    };
    let first = packet::read(s, 1 << 24).await.expect("reply");
    push(&first, &mut out);
    if matches!(first.payload.first(), Some(0x00 | 0xFF)) {
        return out;
    }
    let mut i = 0;
    let columns = sqlfleet_wire::packet::lenenc(&first.payload, &mut i).expect("column count");
    for _ in 0..columns {
        push(&packet::read(s, 1 << 24).await.expect("column"), &mut out);
    }
    if !deprecate_eof {
        push(&packet::read(s, 1 << 24).await.expect("eof"), &mut out);
    }
    loop {
        let p = packet::read(s, 1 << 24).await.expect("row");
        push(&p, &mut out);
        if matches!(p.payload.first(), Some(0xFE | 0xFF)) {
            return out;
        }
    }
}

/// A reply with each OK's session-tracker entries in one order: a server
/// lists the variables a statement changed in no fixed order (two direct
/// sessions may differ), so replies are compared as sets of entries.
fn entries_sorted(reply: &[u8]) -> Vec<u8> {
    fn lenenc_at(p: &[u8], i: &mut usize) -> Option<usize> {
        let mut j = *i;
        let n = sqlfleet_wire::packet::lenenc(p, &mut j).ok()? as usize;
        *i = j;
        Some(n)
    }
    fn sort_ok(p: &[u8]) -> Option<Vec<u8>> {
        let mut i = 1;
        lenenc_at(p, &mut i)?;
        lenenc_at(p, &mut i)?;
        let status = u16::from_le_bytes([*p.get(i)?, *p.get(i + 1)?]);
        i += 4;
        if status & 0x4000 == 0 || i >= p.len() {
            return None;
        }
        let n = lenenc_at(p, &mut i)?;
        i += n;
        let block_len = lenenc_at(p, &mut i)?;
        let block_start = i;
        let block = p.get(i..i + block_len)?;
        let mut entries = Vec::new();
        let mut j = 0;
        while j < block.len() {
            let start = j;
            j += 1;
            let n = lenenc_at(block, &mut j)?;
            j += n;
            entries.push(block.get(start..j)?.to_vec());
        }
        entries.sort();
        let mut out = p[..block_start].to_vec();
        out.extend(entries.concat());
        out.extend_from_slice(p.get(block_start + block_len..)?);
        Some(out)
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= reply.len() {
        let n = u32::from_le_bytes([reply[at], reply[at + 1], reply[at + 2], 0]) as usize;
        let end = (at + 4 + n).min(reply.len());
        let payload = &reply[at + 4..end];
        out.extend_from_slice(&reply[at..at + 4]);
        match payload.first() {
            Some(0x00) => out.extend(sort_ok(payload).unwrap_or_else(|| payload.to_vec())),
            _ => out.extend_from_slice(payload),
        }
        at = end;
    }
    out
}

/// One value of a one-row, one-column reply (text protocol).
async fn value(s: &mut TcpStream, sql: &str, deprecate_eof: bool) -> String {
    let r = reply(s, sql, deprecate_eof).await;
    // Walk to the row: count, definition, [EOF], row.
    let mut at = 0;
    let mut packets = Vec::new();
    while at + 4 <= r.len() {
        let n = u32::from_le_bytes([r[at], r[at + 1], r[at + 2], 0]) as usize;
        packets.push(&r[at + 4..at + 4 + n]);
        at += 4 + n;
    }
    let row = packets[if deprecate_eof { 2 } else { 3 }];
    let mut i = 0;
    let len = sqlfleet_wire::packet::lenenc(row, &mut i).expect("value length") as usize;
    String::from_utf8_lossy(&row[i..i + len]).into_owned()
}

const READS: &[&str] = &[
    "select @@version_comment limit 1",
    "SELECT @@max_allowed_packet",
    "SELECT @@session.auto_increment_increment AS auto_increment_increment, @@character_set_client AS character_set_client, @@character_set_connection AS character_set_connection, @@character_set_results AS character_set_results, @@character_set_server AS character_set_server, @@collation_server AS collation_server, @@init_connect AS init_connect, @@interactive_timeout AS interactive_timeout, @@license AS license, @@lower_case_table_names AS lower_case_table_names, @@max_allowed_packet AS max_allowed_packet, @@net_write_timeout AS net_write_timeout, @@query_cache_size AS query_cache_size, @@query_cache_type AS query_cache_type, @@sql_mode AS sql_mode, @@system_time_zone AS system_time_zone, @@time_zone AS time_zone, @@tx_isolation AS transaction_isolation, @@wait_timeout AS wait_timeout",
    "SELECT @@version, @@version_compile_os, @@global.max_allowed_packet",
];

fn shapes() -> Vec<(u32, u8)> {
    let base = handshake::MULTI_RESULTS | handshake::PS_MULTI_RESULTS;
    let mut v = Vec::new();
    for extra in [
        0,
        handshake::DEPRECATE_EOF,
        handshake::SESSION_TRACK,
        handshake::DEPRECATE_EOF | handshake::SESSION_TRACK | handshake::MULTI_STATEMENTS,
        handshake::INTERACTIVE,
    ] {
        // utf8mb4_general_ci and latin1_swedish_ci.
        for collation in [45u8, 8] {
            v.push((base | extra, collation));
        }
    }
    v
}

/// Held by the tests that set a global on the server they share (which a
/// direct login made meanwhile would read) and by those comparing what
/// those globals decide (max_allowed_packet, the tracked variables).
static GLOBALS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn local(relay: &Relay) -> f64 {
    relay.metric("sqlfleet_relay_answered_locally_total")
}

fn password(srv: &TestServer) -> String {
    srv.sandbox.password().expect("pw").expose().to_string()
}

/// A recorded reply is given again for a second (`answers::TTL`): a
/// pair of statements further apart than this (a machine busy with
/// other work) is compared byte for byte but not counted as answered.
const FRESH: std::time::Duration = std::time::Duration::from_millis(900);

#[test]
fn variable_reads_answered_locally_are_the_servers_bytes() {
    let _globals = GLOBALS.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "4"]);
    let pw = password(srv);
    let direct_port = srv.sandbox.meta.primary().port;
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        for (caps, collation) in shapes() {
            let deprecate = caps & handshake::DEPRECATE_EOF != 0;
            for sql in READS {
                let mut d = login(direct_port, &pw, caps, collation).await;
                let want = reply(&mut d, sql, deprecate).await;
                // The first client's read goes to the server (and is
                // recorded); the second's is answered by the relay.
                let before = local(&relay);
                let mut first = login(relay.port, &pw, caps, collation).await;
                let mut second = login(relay.port, &pw, caps, collation).await;
                let recorded = std::time::Instant::now();
                let got_first = reply(&mut first, sql, deprecate).await;
                let got_second = reply(&mut second, sql, deprecate).await;
                let fresh = recorded.elapsed() < FRESH;
                let answered = local(&relay) - before;
                assert_eq!(
                    got_first, want,
                    "{sql} (caps {caps:#x}, collation {collation}): forwarded"
                );
                assert_eq!(
                    got_second, want,
                    "{sql} (caps {caps:#x}, collation {collation}): answered by the relay"
                );
                assert!(
                    answered >= 1.0 || !fresh,
                    "{sql} (caps {caps:#x}, collation {collation}): the second read was answered by the relay ({answered})"
                );
                // After the read, the session is where the server's reply
                // leaves it: ROW_COUNT() -1, FOUND_ROWS() 1, no warnings.
                let after = "SELECT ROW_COUNT(), FOUND_ROWS(), @@warning_count";
                let w = reply(&mut d, after, deprecate).await;
                let g = reply(&mut second, after, deprecate).await;
                assert_eq!(g, w, "{sql}: the session after a read answered by the relay");
            }
        }
    });
}

#[test]
fn reads_that_must_reach_the_server_do() {
    let _globals = GLOBALS.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let pw = password(srv);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let caps = handshake::MULTI_RESULTS | handshake::DEPRECATE_EOF;
    rt.block_on(async {
        let mut c = login(relay.port, &pw, caps, 45).await;
        // Record the reply.
        value(&mut c, "SELECT @@max_allowed_packet", true).await;
        // A global set through the relay is seen at once.
        let was = value(&mut c, "SELECT @@global.max_allowed_packet", true).await;
        let was_n: u64 = was.parse().expect("number");
        let new = was_n + 1024;
        reply(
            &mut c,
            &format!("SET GLOBAL max_allowed_packet = {new}"),
            true,
        )
        .await;
        let mut fresh = login(relay.port, &pw, caps, 45).await;
        let seen = value(&mut fresh, "SELECT @@max_allowed_packet", true).await;
        reply(
            &mut c,
            &format!("SET GLOBAL max_allowed_packet = {was_n}"),
            true,
        )
        .await;
        assert_eq!(
            seen,
            new.to_string(),
            "a new client reads the global set through the relay"
        );
        // A session that changed a setting, or holds a transaction, is
        // not answered for: its own value comes from the server.
        let before = local(&relay);
        reply(&mut fresh, "SET SESSION time_zone = '+05:00'", true).await;
        assert_eq!(
            value(&mut fresh, "SELECT @@time_zone", true).await,
            "+05:00"
        );
        reply(&mut fresh, "SET SESSION time_zone = DEFAULT", true).await;
        reply(&mut fresh, "BEGIN", true).await;
        value(&mut fresh, "SELECT @@version_comment", true).await;
        value(&mut fresh, "SELECT @@version_comment", true).await;
        reply(&mut fresh, "COMMIT", true).await;
        assert_eq!(
            local(&relay),
            before,
            "nothing answered locally in a changed session or a transaction"
        );
    });
}

/// COM_RESET_CONNECTION; its OK must come back.
async fn reset(s: &mut TcpStream) {
    packet::write(s, 0, &[0x1f]).await.expect("reset");
    let ok = packet::read(s, 1 << 20).await.expect("reset reply");
    assert_eq!(ok.payload.first(), Some(&0x00), "reset OK");
}

/// A client with CLIENT_IGNORE_SPACE starts with IGNORE_SPACE in its
/// sql_mode (the server adds it at login). Through the relay it must keep
/// it on a pooled connection that another client changed (undoing a
/// setting with `DEFAULT` would drop it), and after COM_RESET_CONNECTION
/// it must have what a direct connection has after one. Connector/J logs
/// in this way and builds its sql_mode from `@@sql_mode`.
#[test]
fn ignore_space_clients_keep_their_sql_mode_on_pooled_connections() {
    let srv = server();
    let pw = password(srv);
    let direct_port = srv.sandbox.meta.primary().port;
    let caps = handshake::MULTI_RESULTS | handshake::DEPRECATE_EOF | handshake::IGNORE_SPACE;
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (initial, after_reset) = rt.block_on(async {
        let mut d = login(direct_port, &pw, caps, 45).await;
        let initial = value(&mut d, "SELECT @@sql_mode", true).await;
        reset(&mut d).await;
        (initial, value(&mut d, "SELECT @@sql_mode", true).await)
    });
    assert!(initial.contains("IGNORE_SPACE"), "{initial}");
    for mode in ["transaction", "session"] {
        let relay = start_relay(srv, &["--pool-max", "1", "--mode", mode]);
        rt.block_on(async {
            let mut a = login(relay.port, &pw, caps, 45).await;
            reply(
                &mut a,
                "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')",
                true,
            )
            .await;
            drop(a);
            let mut b = login(relay.port, &pw, caps, 45).await;
            assert_eq!(
                value(&mut b, "SELECT @@sql_mode", true).await,
                initial,
                "{mode} mode: a new client on the connection another one changed"
            );
            reset(&mut b).await;
            assert_eq!(
                value(&mut b, "SELECT @@sql_mode", true).await,
                after_reset,
                "{mode} mode: after COM_RESET_CONNECTION"
            );
        });
    }
}

/// Session SETs drivers send at login, each alone and after another.
const SETS: &[&[&str]] = &[
    &["SET NAMES utf8mb4"],
    &["SET NAMES latin1 COLLATE latin1_bin"],
    &["set names 'utf8'"],
    &["SET autocommit=1"],
    &["SET character_set_results = NULL"],
    &["SET SESSION time_zone = '+00:00', sql_mode = 'ANSI_QUOTES'"],
    &["SET NAMES utf8mb4", "SET autocommit=1"],
];

/// What a session's settings and diagnostics are after a statement.
const AFTER_SET: &str = "SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection, @@autocommit, @@time_zone, @@sql_mode, ROW_COUNT(), FOUND_ROWS(), @@warning_count, @@in_transaction";

#[test]
fn session_sets_answered_locally_are_the_servers_bytes_and_leave_the_same_session() {
    let _globals = GLOBALS.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "4"]);
    let pw = password(srv);
    let direct_port = srv.sandbox.meta.primary().port;
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        for (caps, collation) in shapes() {
            let deprecate = caps & handshake::DEPRECATE_EOF != 0;
            for sets in SETS {
                let what = format!("{sets:?} (caps {caps:#x}, collation {collation})");
                let mut d = login(direct_port, &pw, caps, collation).await;
                let mut first = login(relay.port, &pw, caps, collation).await;
                let mut second = login(relay.port, &pw, caps, collation).await;
                // A SELECT first, so that FOUND_ROWS() has something to keep.
                for s in [&mut d, &mut first, &mut second] {
                    reply(s, "SELECT 1 UNION SELECT 2", deprecate).await;
                }
                let before = local(&relay);
                let recorded = std::time::Instant::now();
                for sql in *sets {
                    let want = reply(&mut d, sql, deprecate).await;
                    // The first client's SET goes to the server (and is
                    // recorded); the second's is answered by the relay.
                    let got_first = reply(&mut first, sql, deprecate).await;
                    let got_second = reply(&mut second, sql, deprecate).await;
                    let want = entries_sorted(&want);
                    assert_eq!(entries_sorted(&got_first), want, "{what}: {sql} forwarded");
                    assert_eq!(
                        entries_sorted(&got_second),
                        want,
                        "{what}: {sql} answered by the relay"
                    );
                }
                let answered = local(&relay) - before;
                assert!(
                    answered >= sets.len() as f64 || recorded.elapsed() >= FRESH,
                    "{what}: the second client's SETs were answered by the relay ({answered})"
                );
                let w = reply(&mut d, AFTER_SET, deprecate).await;
                for (who, s) in [("forwarded", &mut first), ("answered", &mut second)] {
                    let g = reply(s, AFTER_SET, deprecate).await;
                    assert_eq!(g, w, "{what}: the session after ({who})");
                }
            }
        }
    });
}

#[test]
fn sets_that_fail_or_warn_are_never_answered_locally() {
    let _globals = GLOBALS.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let pw = password(srv);
    let direct_port = srv.sandbox.meta.primary().port;
    let caps = handshake::MULTI_RESULTS | handshake::DEPRECATE_EOF;
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let before = local(&relay);
        for sql in [
            "SET NAMES nosuchcharset",
            "SET SESSION sql_mode = 'NO_SUCH_MODE'",
            // Below the minimum: truncated, with a warning.
            "SET SESSION max_sort_length = 1",
            "SET @user_variable = 1",
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET autocommit = 0",
        ] {
            let mut d = login(direct_port, &pw, caps, 45).await;
            reply(&mut d, "SELECT 1 UNION SELECT 2", true).await;
            let want = reply(&mut d, sql, true).await;
            let want_after = reply(&mut d, AFTER_SET, true).await;
            for _ in 0..3 {
                let mut c = login(relay.port, &pw, caps, 45).await;
                reply(&mut c, "SELECT 1 UNION SELECT 2", true).await;
                assert_eq!(reply(&mut c, sql, true).await, want, "{sql}");
                assert_eq!(
                    reply(&mut c, AFTER_SET, true).await,
                    want_after,
                    "{sql}: after"
                );
            }
        }
        assert_eq!(local(&relay), before, "none of them answered by the relay");
    });
}

/// A tracking client is shown what its own session tracks: after a global
/// change of the tracked variables made through the relay, what a new
/// session tracks then.
#[test]
fn tracking_clients_see_the_tracking_a_global_set_through_the_relay_gives() {
    let _globals = GLOBALS.lock().unwrap_or_else(|e| e.into_inner());
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let pw = password(srv);
    let direct_port = srv.sandbox.meta.primary().port;
    let caps = handshake::MULTI_RESULTS | handshake::DEPRECATE_EOF | handshake::SESSION_TRACK;
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let sql = "SET SESSION sql_mode = 'ANSI_QUOTES'";
    let (want, got) = rt.block_on(async {
        let mut admin = login(relay.port, &pw, caps, 45).await;
        // A tracking client first, so that the relay has read the old
        // setting.
        let mut before = login(relay.port, &pw, caps, 45).await;
        reply(&mut before, sql, true).await;
        let was = value(
            &mut admin,
            "SELECT @@global.session_track_system_variables",
            true,
        )
        .await;
        reply(
            &mut admin,
            "SET GLOBAL session_track_system_variables = 'autocommit,sql_mode'",
            true,
        )
        .await;
        let mut d = login(direct_port, &pw, caps, 45).await;
        let want = reply(&mut d, sql, true).await;
        let mut r = login(relay.port, &pw, caps, 45).await;
        let got = reply(&mut r, sql, true).await;
        reply(
            &mut admin,
            &format!("SET GLOBAL session_track_system_variables = '{was}'"),
            true,
        )
        .await;
        (want, got)
    });
    assert!(
        want.windows(8).any(|w| w == b"sql_mode"),
        "the server reports sql_mode once it is tracked"
    );
    assert_eq!(entries_sorted(&got), entries_sorted(&want));
}

/// What a login's collation decides, with a literal the client's
/// character set encodes and its own reading of it.
const CHARSET_READ: &str = "SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection, 'a\\\\b', CHARSET('x'), COLLATION('x'), LENGTH('x')";

/// Every collation the server lists that fits the handshake's byte, given
/// as a client's login collation: its session reads what a direct login
/// with that collation reads, byte for byte — through a relay whose one
/// pooled connection a client of another collation used in between, and
/// again after that client, and after COM_RESET_CONNECTION. Drawn from
/// `information_schema.COLLATIONS`, so the collations a client library
/// rarely sends are drawn too: every sjis or gbk one, and ucs2, utf16 and
/// utf32, which the server refuses as a client's — the relay refuses them
/// alike at login, and no backend login fails for them (one did, and the
/// backend was marked down for every other client).
#[test]
fn every_login_collation_the_server_lists_gives_what_a_direct_login_gives() {
    let srv = server();
    let pw = password(srv);
    let direct_port = srv.sandbox.meta.primary().port;
    let caps = handshake::MULTI_RESULTS | handshake::DEPRECATE_EOF;
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let ids: Vec<u8> = rt.block_on(async {
        use mysql_async::prelude::Queryable;
        let mut c = srv.connect().await;
        let ids: Vec<u32> = c
            .query("SELECT ID FROM information_schema.COLLATIONS WHERE ID BETWEEN 1 AND 255 ORDER BY ID")
            .await
            .expect("collations");
        let _ = c.disconnect().await;
        ids.into_iter().filter_map(|i| u8::try_from(i).ok()).collect()
    });
    assert!(ids.len() > 150, "{} collations", ids.len());
    let mut wrong = Vec::new();
    let mut refused = 0;
    for mode in ["transaction", "session"] {
        let relay = start_relay(srv, &["--pool-max", "1", "--mode", mode]);
        rt.block_on(async {
            for &id in &ids {
                // A collation the server refuses a client (ucs2, utf16,
                // utf32) is refused alike.
                let mut d = match try_login(direct_port, &pw, caps, id).await {
                    Ok(d) => d,
                    Err(direct) => {
                        let relayed = match try_login(relay.port, &pw, caps, id).await {
                            Ok(mut r) => {
                                // (What a client let in would go on to do.)
                                reply(&mut r, CHARSET_READ, true).await;
                                None
                            }
                            Err(e) => Some(e),
                        };
                        if relayed.as_ref() != Some(&direct) {
                            wrong.push(format!(
                                "{mode} mode, collation {id}: refused directly ({direct}), through the relay {relayed:?}"
                            ));
                        }
                        refused += 1;
                        continue;
                    }
                };
                let want = reply(&mut d, CHARSET_READ, true).await;
                reset(&mut d).await;
                let want_reset = reply(&mut d, CHARSET_READ, true).await;
                drop(d);
                let mut a = login(relay.port, &pw, caps, id).await;
                let first = reply(&mut a, CHARSET_READ, true).await;
                if mode == "transaction" {
                    // Another collation's client on the same connection.
                    let mut b = login(relay.port, &pw, caps, if id == 8 { 45 } else { 8 }).await;
                    reply(&mut b, CHARSET_READ, true).await;
                    drop(b);
                }
                let again = reply(&mut a, CHARSET_READ, true).await;
                reset(&mut a).await;
                let after_reset = reply(&mut a, CHARSET_READ, true).await;
                for (what, got, want) in [
                    ("at login", &first, &want),
                    ("after another collation's client", &again, &want),
                    ("after COM_RESET_CONNECTION", &after_reset, &want_reset),
                ] {
                    if got != want {
                        wrong.push(format!(
                            "{mode} mode, collation {id}, {what}:\n    direct {}\n    relay  {}",
                            String::from_utf8_lossy(want).escape_debug(),
                            String::from_utf8_lossy(got).escape_debug()
                        ));
                    }
                }
            }
        });
        // Do no harm: no client's character set failed a backend login
        // (one did, and the backend was marked down for every client).
        let errors = relay.metric("sqlfleet_relay_backend_connect_errors_total");
        if errors != 0.0 {
            wrong.push(format!("{mode} mode: {errors} backend logins failed"));
        }
    }
    eprintln!(
        "{} login collations, {refused} refused (in both modes)",
        ids.len()
    );
    assert!(
        wrong.is_empty(),
        "{} differences:\n  {}",
        wrong.len(),
        wrong
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}
