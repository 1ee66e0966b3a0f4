//! Faults around the relay: a backend connection killed mid-transaction,
//! a client that vanishes mid-result, malformed packets and stalled
//! handshakes. The affected client gets an error or a clean disconnect;
//! the relay and every other client carry on, and no backend connection
//! with leftover state goes back to the pool. Also, at the packet level,
//! server-side cursors (COM_STMT_FETCH), which no test driver uses.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::relay::{app, cli, start_relay};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::server;
use sqlfleet_wire::handshake;

#[test]
fn a_backend_killed_mid_transaction_fails_only_that_client() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "3"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let (db, _) = srv.fresh_db("relaykill").await;
        let mut direct = srv.connect().await;
        let mut a = app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("a");
        let mut b = app(relay.port, "app-pw", Some(&db))
            .connect(Duration::from_secs(5))
            .await
            .expect("b");
        a.query_drop("CREATE TABLE k (id INT PRIMARY KEY)")
            .await
            .expect("create");
        a.query_drop("BEGIN").await.expect("begin");
        a.query_drop("INSERT INTO k VALUES (1)")
            .await
            .expect("insert");
        let id: u64 = a
            .query_first("SELECT CONNECTION_ID()")
            .await
            .expect("id")
            .expect("row");
        direct
            .query_drop(format!("KILL CONNECTION {id}"))
            .await
            .expect("kill");
        let e = a
            .query_drop("INSERT INTO k VALUES (2)")
            .await
            .expect_err("backend gone");
        // As with a direct connection whose server session was killed: the
        // connection is closed (the driver's own lost-connection error), no
        // error packet from the relay.
        assert!(
            matches!(e, mysql_async::Error::Io(_)),
            "the connection ends as a direct one would: {e:?}"
        );
        // The transaction is gone and A was disconnected: it cannot carry on as if nothing happened.
        assert!(
            a.query_drop("SELECT 1").await.is_err(),
            "a client mid-transaction is disconnected"
        );
        // Others are fine and nothing was committed.
        for _ in 0..10 {
            let n: i64 = b
                .query_first("SELECT COUNT(*) FROM k")
                .await
                .expect("b")
                .expect("row");
            assert_eq!(n, 0);
        }
        assert!(relay.metric("sqlfleet_relay_backend_lost_total") >= 1.0);
        let o = cli(relay.port, &["-e", "SELECT 7"]);
        assert_eq!(common::stdout(&o).trim(), "7", "{}", common::stderr(&o));
    });
}

#[test]
fn a_client_vanishing_mid_result_leaks_nothing() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2", "--wait-timeout", "5"]);
    for _ in 0..4 {
        // `head` stops reading after 100 bytes; the client dies of SIGPIPE mid-result.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "mariadb -h 127.0.0.1 -P {} -u app --password=app-pw -D mysql --quick -N -B \
                 -e \"SELECT REPEAT('x', 2000) FROM seq_1_to_100000\" | head -c 100 > /dev/null",
                relay.port
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh");
        child.wait().expect("wait");
    }
    // The two backend places are free again: no slot leaked.
    for _ in 0..3 {
        let o = cli(
            relay.port,
            &["-D", "mysql", "-e", "SELECT COUNT(*) FROM seq_1_to_1000"],
        );
        assert_eq!(common::stdout(&o).trim(), "1000", "{}", common::stderr(&o));
    }
    let open = relay.metric(&format!(
        "sqlfleet_relay_backend_connections{{backend=\"127.0.0.1:{}\"}}",
        srv.sandbox.meta.primary().port
    ));
    assert!(
        open <= 2.0,
        "{open} backend connections open with a pool of 2"
    );
}

#[test]
fn malformed_packets_and_stalled_handshakes_affect_no_one_else() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    // A client that connects and never answers the greeting.
    let staller = std::net::TcpStream::connect(("127.0.0.1", relay.port)).expect("connect");
    // Garbage instead of a handshake response.
    let mut junk = std::net::TcpStream::connect(("127.0.0.1", relay.port)).expect("connect");
    junk.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut greeting = [0u8; 256];
    let _ = junk.read(&mut greeting);
    let _ = junk.write_all(&[0xFF, 0xFF, 0xFF, 1, 0xDE, 0xAD]);
    let _ = junk.write_all(&[0u8; 64]);
    drop(junk);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        // A logged-in client sends a command with a wrong sequence id.
        let caps = handshake::MULTI_RESULTS | handshake::DEPRECATE_EOF;
        let mut s = logged_in(relay.port, caps, None).await;
        sqlfleet_wire::packet::write(&mut s, 5, b"\x03SELECT 1")
            .await
            .expect("send");
        let p = sqlfleet_wire::packet::read(&mut s, 1 << 20)
            .await
            .expect("reply");
        let (code, _) = sqlfleet_wire::packet::parse_err(&p.payload).expect("an error");
        assert_eq!(code, 1156);
        assert!(
            sqlfleet_wire::packet::read(&mut s, 1 << 20).await.is_err(),
            "closed after"
        );

        // A malformed COM_BINLOG_DUMP gets the server's refusal, and the
        // session ends after it as the server's does after a dump.
        let mut s = logged_in(relay.port, caps, None).await;
        sqlfleet_wire::packet::write(&mut s, 0, &[0x12, 1, 2, 3])
            .await
            .expect("send");
        let p = sqlfleet_wire::packet::read(&mut s, 1 << 20)
            .await
            .expect("reply");
        assert!(
            sqlfleet_wire::packet::parse_err(&p.payload).is_some(),
            "an error: {:?}",
            p.payload
        );
        assert!(
            sqlfleet_wire::packet::read(&mut s, 1 << 20).await.is_err(),
            "closed after the dump"
        );

        // An unknown command gets an error and the session goes on.
        let mut s = logged_in(relay.port, caps, None).await;
        sqlfleet_wire::packet::write(&mut s, 0, &[0xF0, 1, 2, 3])
            .await
            .expect("send");
        let p = sqlfleet_wire::packet::read(&mut s, 1 << 20)
            .await
            .expect("reply");
        assert_eq!(
            sqlfleet_wire::packet::parse_err(&p.payload).map(|e| e.0),
            Some(1047)
        );
        pings(&mut s).await;
    });
    let o = cli(relay.port, &["-e", "SELECT 'still fine'"]);
    assert_eq!(
        common::stdout(&o).trim(),
        "still fine",
        "{}",
        common::stderr(&o)
    );
    drop(staller);
}

/// A raw connection to the relay, logged in as app with these capabilities.
async fn logged_in(port: u16, caps: u32, db: Option<&str>) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    common::wire_login(&mut s, "app", "app-pw", caps, 45, db)
        .await
        .expect("login");
    s
}

/// Reads packets until an EOF/OK terminator (0xFE, short) or an ERR.
async fn until_eof(s: &mut tokio::net::TcpStream) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let p = sqlfleet_wire::packet::read(s, 1 << 24)
            .await
            .expect("packet");
        let end = matches!(p.payload.first(), Some(0xFF))
            || (p.payload.first() == Some(&0xFE) && p.payload.len() < 0xFF_FFFF);
        out.push(p.payload);
        if end {
            return out;
        }
    }
}

/// The session answers COM_PING with OK.
async fn pings(s: &mut tokio::net::TcpStream) {
    sqlfleet_wire::packet::write(s, 0, &[0x0E])
        .await
        .expect("ping");
    let p = sqlfleet_wire::packet::read(s, 1 << 20).await.expect("pong");
    assert_eq!(p.payload.first(), Some(&0x00));
}

/// Sends COM_STMT_PREPARE of `sql`; the statement id of its OK (the
/// definitions after it are left to read).
async fn prepare(s: &mut tokio::net::TcpStream, sql: &[u8]) -> [u8; 4] {
    let mut prep = vec![0x16];
    prep.extend_from_slice(sql);
    sqlfleet_wire::packet::write(s, 0, &prep)
        .await
        .expect("prepare");
    let ok = sqlfleet_wire::packet::read(s, 1 << 20)
        .await
        .expect("prepare ok");
    assert_eq!(ok.payload.first(), Some(&0x00), "{:?}", ok.payload);
    [ok.payload[1], ok.payload[2], ok.payload[3], ok.payload[4]]
}

#[test]
fn server_side_cursors_fetch_through_the_relay() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        for deprecate_eof in [false, true] {
            let mut caps = handshake::MULTI_RESULTS | handshake::PS_MULTI_RESULTS;
            if deprecate_eof {
                caps |= handshake::DEPRECATE_EOF;
            }
            let mut s = logged_in(relay.port, caps, Some("mysql")).await;
            let id = prepare(&mut s, b"SELECT seq FROM seq_1_to_10").await;
            // One column definition, then EOF unless deprecated.
            if deprecate_eof {
                sqlfleet_wire::packet::read(&mut s, 1 << 20)
                    .await
                    .expect("column");
            } else {
                assert_eq!(until_eof(&mut s).await.len(), 2);
            }
            // Execute with a read-only cursor: column count, definition, end of metadata.
            let mut exec = vec![0x17];
            exec.extend_from_slice(&id);
            exec.extend_from_slice(&[1, 1, 0, 0, 0]);
            sqlfleet_wire::packet::write(&mut s, 0, &exec)
                .await
                .expect("execute");
            let meta = if deprecate_eof {
                let mut m = vec![
                    sqlfleet_wire::packet::read(&mut s, 1 << 20)
                        .await
                        .expect("count")
                        .payload,
                ];
                m.extend(until_eof(&mut s).await);
                m
            } else {
                until_eof(&mut s).await
            };
            assert_eq!(meta.first().map(|p| p.as_slice()), Some(&[1u8][..]));
            // Fetch 4 rows, then the rest.
            let mut got = 0;
            for n in [4u32, 100] {
                let mut fetch = vec![0x1C];
                fetch.extend_from_slice(&id);
                fetch.extend_from_slice(&n.to_le_bytes());
                sqlfleet_wire::packet::write(&mut s, 0, &fetch)
                    .await
                    .expect("fetch");
                let rows = until_eof(&mut s).await;
                assert_ne!(rows.last().and_then(|p| p.first()), Some(&0xFF), "{rows:?}");
                got += rows.len() - 1;
            }
            assert_eq!(got, 10, "deprecate_eof={deprecate_eof}");
            // The session goes on normally afterwards.
            pings(&mut s).await;
        }
        assert!(relay.metric("sqlfleet_relay_pins_total{reason=\"cursor\"}") >= 2.0);
    });
}

/// A handshake response whose sequence id is not 1: the server answers
/// 1156 (packets out of order) and logs no one in; so does the relay (the
/// oracle: the same bytes sent to the server directly). Before: the relay
/// logged the client in whatever the sequence id.
#[test]
fn a_handshake_response_out_of_order_is_refused_as_by_the_server() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let pw = srv.sandbox.password().expect("pw");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let answer = |port: u16, user: &'static str, password: String, seq: u8| async move {
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            let hello = handshake::parse_server_hello(
                &sqlfleet_wire::packet::read(&mut s, 1 << 16)
                    .await
                    .expect("greeting")
                    .payload,
            )
            .expect("hello");
            let caps = handshake::client_caps(&hello, handshake::MULTI_RESULTS, false, false);
            let cred = handshake::Credential::Password(password);
            // The answer: an error code, or none (logged in).
            match handshake::respond(
                &mut s,
                &hello,
                &handshake::Response {
                    seq,
                    caps,
                    ext: 0,
                    user,
                    cred: &cred,
                    collation: 45,
                    database: None,
                    secure: false,
                },
            )
            .await
            {
                Ok(_) => Some(None),
                Err(sqlfleet_wire::WireError::Server { code, .. }) => Some(Some(code)),
                Err(_) => None,
            }
        };
        let sport = srv.sandbox.meta.primary().port;
        for seq in [0u8, 2, 5, 200, 255] {
            let direct = answer(sport, "root", pw.expose().to_string(), seq).await;
            let relayed = answer(relay.port, "app", "app-pw".into(), seq).await;
            assert_eq!(direct, Some(Some(1156)), "the server, sequence id {seq}");
            assert_eq!(relayed, direct, "the relay, sequence id {seq}");
        }
        // In order, it logs in.
        assert_eq!(
            answer(relay.port, "app", "app-pw".into(), 1).await,
            Some(None)
        );
    });
}

/// Guessing passwords costs the guesser: after ten failed logins in a row
/// from one address, each new connection from it waits before its greeting
/// (counted in login_delays_total); a login that succeeds ends the streak.
/// Before: every failed login was answered at once, unthrottled.
#[test]
fn failed_logins_in_a_row_make_their_address_wait() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let attempt = |pw: &'static str| async move {
            app(relay.port, pw, None)
                .connect(Duration::from_secs(20))
                .await
                .map(drop)
        };
        for _ in 0..10 {
            assert!(attempt("wrong").await.is_err());
        }
        let delays = || relay.metric("sqlfleet_relay_login_delays_total");
        assert_eq!(delays(), 0.0, "ten failures are free");
        assert!(attempt("wrong").await.is_err());
        assert!(attempt("wrong").await.is_err());
        assert_eq!(delays(), 1.0, "the twelfth waited");
        // The right password still gets in (after its wait), and ends it.
        attempt("app-pw").await.expect("the right password");
        assert_eq!(delays(), 2.0);
        attempt("app-pw").await.expect("again");
        assert_eq!(delays(), 2.0, "a success ended the streak");
    });
}

/// A parameter sent as long data (COM_STMT_SEND_LONG_DATA) reaches the
/// backend statement its execute runs on: without a cursor it is the
/// value; with one, the cursor's statement is another backend statement,
/// and the relay says so (1235) rather than let the server find the value
/// missing. The session goes on either way.
#[test]
fn long_data_reaches_the_statement_its_execute_runs_on() {
    let srv = server();
    let relay = start_relay(srv, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let caps = handshake::MULTI_RESULTS | handshake::PS_MULTI_RESULTS;
        let mut s = logged_in(relay.port, caps, Some("mysql")).await;
        for cursor in [false, true] {
            let id = prepare(&mut s, b"SELECT CONCAT('<', ?, '>')").await;
            // The parameter's and the column's definitions, each list
            // ended by an EOF.
            until_eof(&mut s).await;
            until_eof(&mut s).await;
            for piece in [&b"hel"[..], b"lo"] {
                let mut long = vec![0x18];
                long.extend_from_slice(&id);
                long.extend_from_slice(&0u16.to_le_bytes());
                long.extend_from_slice(piece);
                sqlfleet_wire::packet::write(&mut s, 0, &long)
                    .await
                    .expect("long data");
            }
            // Execute: flags (a read-only cursor or none), one iteration,
            // the null bitmap, types sent, VAR_STRING; the value itself
            // went as long data.
            let mut exec = vec![0x17];
            exec.extend_from_slice(&id);
            exec.extend_from_slice(&[u8::from(cursor), 1, 0, 0, 0, 0, 1, 0xfd, 0]);
            sqlfleet_wire::packet::write(&mut s, 0, &exec)
                .await
                .expect("execute");
            let first = until_eof(&mut s).await;
            if first[0].first() == Some(&0xFF) {
                let code = u16::from_le_bytes([first[0][1], first[0][2]]);
                assert!(cursor, "refused without a cursor: {:?}", first[0]);
                assert_eq!(code, 1235, "{}", String::from_utf8_lossy(&first[0]));
            } else {
                let mut rows = if cursor {
                    let mut fetch = vec![0x1C];
                    fetch.extend_from_slice(&id);
                    fetch.extend_from_slice(&10u32.to_le_bytes());
                    sqlfleet_wire::packet::write(&mut s, 0, &fetch)
                        .await
                        .expect("fetch");
                    until_eof(&mut s).await
                } else {
                    until_eof(&mut s).await
                };
                rows.pop();
                assert_eq!(rows.len(), 1, "one row: {rows:?}");
                // 0x00, the null bitmap, then the value length-encoded.
                assert_eq!(&rows[0][2..], b"\x07<hello>", "cursor={cursor}");
            }
            let mut close = vec![0x19];
            close.extend_from_slice(&id);
            sqlfleet_wire::packet::write(&mut s, 0, &close)
                .await
                .expect("close");
        }
        pings(&mut s).await;
    });
}
