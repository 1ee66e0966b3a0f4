//! Every capability flag a login can carry, drawn from the protocol's
//! own space: each of the 32 client flags and each of MariaDB's 32
//! extended flags turned over from what libmariadb sends, and seeded
//! random words. The same login is made directly and through the relay
//! (per-user accounts, transaction mode) and a fixed list of requests,
//! each chosen because some flag changes its answer, must get the same
//! bytes back: FOUND_ROWS (an UPDATE that changes nothing), IGNORE_SPACE
//! (@@sql_mode), INTERACTIVE (@@wait_timeout), MULTI_STATEMENTS,
//! MULTI_RESULTS and PS_MULTI_RESULTS (a procedure's two results, as text
//! and prepared), LOCAL_FILES (LOAD DATA LOCAL), SESSION_TRACK (SET and
//! USE), DEPRECATE_EOF (every result's end), NO_SCHEMA
//! (`db.table.column`), a warning and an error.
//!
//! A flag the relay's greeting does not offer is one its client cannot
//! ask for: the oracle for it is the direct login without that flag.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_wire::compress::{Compressed, SeqReset};
use sqlfleet_wire::handshake::{self, ServerHello};
use sqlfleet_wire::packet;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

const USER: &str = "capu";
const PASSWORD: &str = "capu-pw";
const DB: &str = "capdb";
/// libmariadb's login flags (mariadb 10.11's client, no TLS, with a
/// database).
const BASE: u32 = handshake::LONG_FLAG
    | handshake::CONNECT_WITH_DB
    | handshake::LOCAL_FILES
    | handshake::PROTOCOL_41
    | handshake::TRANSACTIONS
    | handshake::SECURE_CONNECTION
    | handshake::MULTI_STATEMENTS
    | handshake::MULTI_RESULTS
    | handshake::PS_MULTI_RESULTS
    | handshake::PLUGIN_AUTH
    | handshake::CONNECT_ATTRS
    | handshake::PLUGIN_AUTH_LENENC
    | handshake::SESSION_TRACK;
/// Flags this sweep leaves to other tests: TLS (relay_tls_*), and the
/// old protocol's different login layout.
const NOT_SWEPT: u32 = handshake::SSL | handshake::PROTOCOL_41;

/// A request, and why it is on the list.
enum Request {
    Text(&'static str),
    /// A text in the client's own bytes (not UTF-8).
    Bytes(&'static [u8]),
    /// COM_INIT_DB with a name in the client's own bytes.
    InitDb(&'static [u8]),
    /// Prepared, executed with one integer parameter, closed.
    Prepared(&'static str),
}

const REQUESTS: &[(Request, &str)] = &[
    (
        Request::Text("SELECT @@sql_mode, @@wait_timeout, @@autocommit"),
        "IGNORE_SPACE adds to sql_mode, INTERACTIVE takes interactive_timeout",
    ),
    (
        Request::Text("UPDATE capdb.t SET v = v WHERE id = 1"),
        "FOUND_ROWS: matched, not changed",
    ),
    (Request::Text("SELECT 1; SELECT 'two'"), "MULTI_STATEMENTS"),
    (Request::Text("CALL capdb.p()"), "MULTI_RESULTS"),
    (Request::Prepared("CALL capdb.p()"), "PS_MULTI_RESULTS"),
    (
        Request::Text("LOAD DATA LOCAL INFILE 'nothing.tsv' INTO TABLE capdb.t"),
        "LOCAL_FILES: the request for the file, or a refusal",
    ),
    (
        Request::Text("SET @capx = 1, SESSION autocommit = 1"),
        "SESSION_TRACK",
    ),
    (Request::Text("USE capdb"), "SESSION_TRACK: the schema"),
    (
        Request::Text("SELECT capdb.t.v FROM capdb.t WHERE id = 1"),
        "NO_SCHEMA",
    ),
    (
        Request::Text("SELECT COUNT (*) FROM capdb.t"),
        "IGNORE_SPACE: a function name and its parenthesis apart",
    ),
    (
        Request::Prepared("SELECT ? + 1, v FROM capdb.t WHERE id = 1"),
        "DEPRECATE_EOF in a prepare's metadata and a binary result",
    ),
    (
        Request::Text("SELECT 1 / 0"),
        "a warning in the result's end",
    ),
    (Request::Text("SELECT * FROM capdb.nosuch"), "an error"),
];

impl Request {
    /// Its command byte and body.
    fn command(&self) -> (u8, &'static [u8]) {
        match self {
            Request::Text(t) => (0x03, t.as_bytes()),
            Request::Bytes(b) => (0x03, b),
            Request::InitDb(b) => (0x02, b),
            Request::Prepared(sql) => (0x16, sql.as_bytes()),
        }
    }

    fn text(&self) -> String {
        match self {
            Request::Text(s) | Request::Prepared(s) => s.to_string(),
            Request::Bytes(b) | Request::InitDb(b) => String::from_utf8_lossy(b).into_owned(),
        }
    }
}

/// One login: a raw HandshakeResponse41 laid out as `caps` says (how the
/// auth data is sized, whether a database, a plugin name and connection
/// attributes follow, where the extended flags go).
async fn login(
    port: u16,
    (caps, ext): (u32, u32),
    collation: u8,
    db: &[u8],
) -> Result<(TcpStream, ServerHello), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let hello = handshake::parse_server_hello(
        &packet::read(&mut s, 1 << 16)
            .await
            .map_err(|e| format!("greeting: {e}"))?
            .payload,
    )
    .map_err(|e| format!("greeting: {e}"))?;
    let token = handshake::native_token(&hello.nonce, PASSWORD);
    if caps & handshake::SECURE_CONNECTION == 0 && token.contains(&0) {
        // A NUL-terminated token cannot hold a NUL: no client sends one.
        return Err(AGAIN.into());
    }
    let mut p = Vec::new();
    p.extend_from_slice(&caps.to_le_bytes());
    p.extend_from_slice(&(1u32 << 24).to_le_bytes());
    p.push(collation);
    p.extend_from_slice(&[0; 19]);
    p.extend_from_slice(&ext.to_le_bytes());
    p.extend_from_slice(USER.as_bytes());
    p.push(0);
    // MariaDB reads a length (lenenc or one byte, the same for 20 bytes)
    // only with SECURE_CONNECTION.
    if caps & handshake::SECURE_CONNECTION != 0 {
        p.push(token.len() as u8);
        p.extend_from_slice(&token);
    } else {
        // The old layout: a NUL-terminated token (which a token with a
        // zero byte in it cannot be; the server then sees another one).
        p.extend_from_slice(&token);
        p.push(0);
    }
    if caps & handshake::CONNECT_WITH_DB != 0 {
        p.extend_from_slice(db);
        p.push(0);
    }
    if caps & handshake::PLUGIN_AUTH != 0 {
        p.extend_from_slice(handshake::NATIVE.as_bytes());
        p.push(0);
    }
    if caps & handshake::CONNECT_ATTRS != 0 {
        let mut attrs = Vec::new();
        for (k, v) in [("_client_name", "capabilities"), ("_pid", "1")] {
            attrs.push(k.len() as u8);
            attrs.extend_from_slice(k.as_bytes());
            attrs.push(v.len() as u8);
            attrs.extend_from_slice(v.as_bytes());
        }
        p.push(attrs.len() as u8);
        p.extend_from_slice(&attrs);
    }
    packet::write(&mut s, 1, &p)
        .await
        .map_err(|e| format!("login: {e}"))?;
    loop {
        let r = tokio::time::timeout(Duration::from_secs(5), packet::read(&mut s, 1 << 16))
            .await
            .map_err(|_| "no answer to the login".to_string())?
            .map_err(|e| format!("closed at login: {e}"))?;
        match r.payload.first() {
            Some(0x00) => return Ok((s, hello)),
            Some(0xFF) => return Err(error_of(&r.payload)),
            Some(0xFE) => {
                // An authentication switch: answer for the plugin named.
                let mut i = 1;
                let end = r.payload[i..].iter().position(|&b| b == 0).unwrap_or(0);
                let plugin = String::from_utf8_lossy(&r.payload[i..i + end]).into_owned();
                i += end + 1;
                let nonce: Vec<u8> = r.payload[i..]
                    .iter()
                    .copied()
                    .take_while(|&b| b != 0)
                    .collect();
                if plugin != handshake::NATIVE {
                    return Err(format!("asked to switch to {plugin}"));
                }
                packet::write(
                    &mut s,
                    r.seq.wrapping_add(1),
                    &handshake::native_token(&nonce, PASSWORD),
                )
                .await
                .map_err(|e| format!("auth switch: {e}"))?;
            }
            _ => return Err(format!("unexpected login packet {:02x?}", r.payload)),
        }
    }
}

/// What [`login`] says when the greeting's nonce gave a token the
/// login's layout cannot carry.
const AGAIN: &str = "again";

/// An ERR packet as `code: message`, without the SQL state.
fn error_of(p: &[u8]) -> String {
    let code = u16::from_le_bytes([
        p.get(1).copied().unwrap_or(0),
        p.get(2).copied().unwrap_or(0),
    ]);
    let msg = if p.get(3) == Some(&b'#') {
        &p[9.min(p.len())..]
    } else {
        &p[3.min(p.len())..]
    };
    format!("{code}: {}", String::from_utf8_lossy(msg))
}

/// A reply's packets, each with its sequence id.
type Reply = Vec<(u8, Vec<u8>)>;

/// The status flags of a result's end (EOF or OK), if it is one.
fn end_status(p: &[u8], deprecate_eof: bool) -> Option<u16> {
    match p.first() {
        Some(0xFE) if !deprecate_eof && p.len() < 9 => {
            Some(u16::from_le_bytes([*p.get(3)?, *p.get(4)?]))
        }
        Some(0xFE) | Some(0x00) if deprecate_eof || p[0] == 0 => ok_status(p),
        _ => None,
    }
}

fn ok_status(p: &[u8]) -> Option<u16> {
    let mut i = 1;
    packet::lenenc(p, &mut i).ok()?;
    packet::lenenc(p, &mut i).ok()?;
    Some(u16::from_le_bytes([*p.get(i)?, *p.get(i + 1)?]))
}

const MORE_RESULTS: u16 = 0x08;

struct Conn<S> {
    s: S,
    reset: Option<SeqReset>,
    deprecate_eof: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    async fn read(&mut self, into: &mut Reply) -> Result<Vec<u8>, String> {
        let p = tokio::time::timeout(Duration::from_secs(5), packet::read(&mut self.s, 1 << 24))
            .await
            .map_err(|_| "no answer".to_string())?
            .map_err(|e| format!("closed: {e}"))?;
        into.push((p.seq, p.payload.clone()));
        Ok(p.payload)
    }

    async fn command(&mut self, body: &[u8]) -> Result<(), String> {
        if let Some(r) = &self.reset {
            r.new_command();
        }
        packet::write(&mut self.s, 0, body)
            .await
            .map_err(|e| format!("write: {e}"))?;
        Ok(())
    }

    /// Column definitions (and their EOF unless deprecated).
    async fn definitions(&mut self, n: u64, out: &mut Reply) -> Result<(), String> {
        for _ in 0..n {
            self.read(out).await?;
        }
        if n > 0 && !self.deprecate_eof {
            self.read(out).await?;
        }
        Ok(())
    }

    /// A whole reply to a query or an execute: results until one ends
    /// without "more results"; a LOCAL INFILE request is answered with
    /// no data.
    async fn results(&mut self, out: &mut Reply) -> Result<(), String> {
        loop {
            let first = self.read(out).await?;
            match first.first() {
                Some(0xFF) => return Ok(()),
                Some(0x00) => {
                    if ok_status(&first).unwrap_or(0) & MORE_RESULTS == 0 {
                        return Ok(());
                    }
                }
                Some(0xFB) => {
                    let seq = out.last().map(|(s, _)| s.wrapping_add(1)).unwrap_or(0);
                    packet::write(&mut self.s, seq, &[])
                        .await
                        .map_err(|e| format!("write: {e}"))?;
                }
                _ => {
                    let mut i = 0;
                    let n =
                        packet::lenenc(&first, &mut i).map_err(|e| format!("column count: {e}"))?;
                    self.definitions(n, out).await?;
                    let status = loop {
                        let row = self.read(out).await?;
                        if row.first() == Some(&0xFF) {
                            return Ok(());
                        }
                        if let Some(st) = end_status(&row, self.deprecate_eof) {
                            if row[0] == 0xFE {
                                break st;
                            }
                        }
                    };
                    if status & MORE_RESULTS == 0 {
                        return Ok(());
                    }
                }
            }
        }
    }

    async fn request(&mut self, r: &Request) -> Result<Reply, String> {
        let mut out = Vec::new();
        let (command, sql) = r.command();
        let mut body = vec![command];
        body.extend_from_slice(sql);
        self.command(&body).await?;
        if !matches!(r, Request::Prepared(_)) {
            self.results(&mut out).await?;
            return Ok(out);
        }
        // Prepared: its metadata, then executed with one parameter, closed.
        let ok = self.read(&mut out).await?;
        if ok.first() != Some(&0x00) || ok.len() < 9 {
            return Ok(out);
        }
        // The statement id is each side's own.
        let id = [ok[1], ok[2], ok[3], ok[4]];
        if let Some((_, p)) = out.last_mut() {
            p[1..5].copy_from_slice(&[0; 4]);
        }
        let columns = u16::from_le_bytes([ok[5], ok[6]]) as u64;
        let params = u16::from_le_bytes([ok[7], ok[8]]) as u64;
        self.definitions(params, &mut out).await?;
        self.definitions(columns, &mut out).await?;
        let mut exec = vec![0x17];
        exec.extend_from_slice(&id);
        exec.push(0);
        exec.extend_from_slice(&1u32.to_le_bytes());
        if params > 0 {
            exec.extend(std::iter::repeat_n(0, params.div_ceil(8) as usize));
            exec.push(1);
            for _ in 0..params {
                exec.extend_from_slice(&[0x08, 0x00]);
            }
            for _ in 0..params {
                exec.extend_from_slice(&41i64.to_le_bytes());
            }
        }
        self.command(&exec).await?;
        self.results(&mut out).await?;
        let mut close = vec![0x19];
        close.extend_from_slice(&id);
        self.command(&close).await?;
        Ok(out)
    }
}

/// What a login with these flags gets: its refusal, or each request's
/// reply.
async fn session(port: u16, caps: u32, ext: u32) -> Result<Vec<Result<Reply, String>>, String> {
    session_of(port, (caps, ext), 45, DB.as_bytes(), REQUESTS).await
}

/// [`session`] with this collation, database and requests.
async fn session_of(
    port: u16,
    (caps, ext): (u32, u32),
    collation: u8,
    db: &[u8],
    requests: &[(Request, &str)],
) -> Result<Vec<Result<Reply, String>>, String> {
    let (s, _) = loop {
        match login(port, (caps, ext), collation, db).await {
            Err(e) if e == AGAIN => continue,
            r => break r?,
        }
    };
    let deprecate_eof = caps & handshake::DEPRECATE_EOF != 0;
    let mut out = Vec::new();
    if caps & handshake::COMPRESS != 0 {
        let (c, reset) = Compressed::new(s);
        let mut conn = Conn {
            s: c,
            reset: Some(reset),
            deprecate_eof,
        };
        for (r, _) in requests {
            out.push(conn.request(r).await);
        }
    } else {
        let mut conn = Conn {
            s,
            reset: None,
            deprecate_eof,
        };
        for (r, _) in requests {
            out.push(conn.request(r).await);
        }
    }
    Ok(out)
}

/// The flag words tried: libmariadb's, each flag of either word turned
/// over, and `random` seeded draws of both words.
fn flag_words(random: u64) -> Vec<(u32, u32)> {
    let mut words = vec![(BASE, 0)];
    for bit in 0..32 {
        if NOT_SWEPT & (1 << bit) == 0 {
            words.push((BASE ^ (1 << bit), 0));
        }
        // Extended flags are read only when CLIENT_MYSQL (bit 0) is clear.
        words.push((BASE & !handshake::LONG_PASSWORD, 1 << bit));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xCA95);
    for _ in 0..random {
        let caps: u32 = (rng.gen::<u32>() & !NOT_SWEPT) | handshake::PROTOCOL_41;
        let ext = if caps & handshake::LONG_PASSWORD == 0 {
            rng.gen()
        } else {
            0
        };
        words.push((caps, ext));
    }
    words
}

/// The account, databases and procedure both tests use, made once per
/// test binary (the tests run side by side).
async fn setup(srv: &'static sqlfleet_testkit::TestServer) {
    static DONE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    DONE.get_or_init(|| make(srv)).await;
}

async fn make(srv: &sqlfleet_testkit::TestServer) {
    let mut root = srv.connect().await;
    for sql in [
        format!("CREATE OR REPLACE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'"),
        format!("CREATE DATABASE IF NOT EXISTS {DB}"),
        format!("CREATE OR REPLACE TABLE {DB}.t (id INT PRIMARY KEY, v VARCHAR(10))"),
        format!("INSERT INTO {DB}.t VALUES (1, 'a')"),
        format!("CREATE OR REPLACE PROCEDURE {DB}.p() BEGIN SELECT 1; SELECT 'two'; END"),
        format!("GRANT ALL ON {DB}.* TO '{USER}'@'%'"),
        // Databases named outside ASCII: in latin1 `caf\xe9`, in sjis
        // 0x95 0x5c (whose second byte is a backslash).
        "CREATE DATABASE IF NOT EXISTS `café`".into(),
        "CREATE OR REPLACE TABLE `café`.t (i INT)".into(),
        "INSERT INTO `café`.t VALUES (7)".into(),
        "CREATE DATABASE IF NOT EXISTS `表`".into(),
        "CREATE OR REPLACE TABLE `表`.t (i INT)".into(),
        "INSERT INTO `表`.t VALUES (8)".into(),
        format!("GRANT ALL ON `café`.* TO '{USER}'@'%'"),
        format!("GRANT ALL ON `表`.* TO '{USER}'@'%'"),
        // Apart from wait_timeout, so INTERACTIVE shows.
        "SET GLOBAL interactive_timeout = 4321".into(),
    ] {
        root.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// A relay (transaction mode, per-user accounts) before `srv` for
/// [`USER`].
async fn relay_for(
    srv: &'static sqlfleet_testkit::TestServer,
) -> (
    u16,
    tokio::sync::oneshot::Sender<()>,
    std::sync::Arc<sqlfleet_relay::Relay>,
) {
    setup(srv).await;
    let users = format!(
        "[[users]]\nname = \"{USER}\"\n{}\n",
        sqlfleet_relay::config::hash_lines(PASSWORD)
    );
    super::common::serve_relay(&super::per_user_config(srv, &users), None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_capability_flag_gives_through_the_relay_what_a_direct_login_gives() {
    let srv = sqlfleet_testkit::server();
    let (relay_port, _stop, _relay) = relay_for(srv).await;
    let direct_port = srv.sandbox.meta.primary().port;
    let (_, offered) = login(relay_port, (BASE, 0), 45, DB.as_bytes())
        .await
        .expect("a plain login to the relay");
    let random = super::env_num("SQLFLEET_CAPS_RANDOM", 40);
    let mut failures = Vec::new();
    let words = flag_words(random);
    for &(caps, ext) in &words {
        let direct = session(direct_port, caps & offered.caps, ext & offered.ext).await;
        // Twice through the relay: on a new connection, and on the one the
        // first session left (reset for the next client).
        let first = session(relay_port, caps, ext).await;
        // (The reset runs after the client has gone.)
        tokio::time::sleep(Duration::from_millis(30)).await;
        for relayed in [first, session(relay_port, caps, ext).await] {
            match (&direct, &relayed) {
                (Err(d), Err(r)) if d == r => {}
                (Ok(d), Ok(r)) => {
                    for (i, (d, r)) in d.iter().zip(r).enumerate() {
                        if d != r {
                            failures.push(format!(
                            "flags {caps:#010x} ext {ext:#010x}, {} ({}):\n  direct {d:02x?}\n  relay  {r:02x?}",
                            REQUESTS[i].0.text(),
                            REQUESTS[i].1
                        ));
                            break;
                        }
                    }
                }
                _ => failures.push(format!(
                    "flags {caps:#010x} ext {ext:#010x}: login direct {:?}, relay {:?}",
                    direct.as_ref().map(|_| "ok"),
                    relayed.as_ref().map(|_| "ok")
                )),
            }
        }
    }
    let mut root = srv.connect().await;
    let _ = root
        .query_drop("SET GLOBAL interactive_timeout = DEFAULT")
        .await;
    eprintln!(
        "capability flags: {} flag words, {} requests each, {} differences",
        words.len(),
        REQUESTS.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A logged-in plain connection (libmariadb's flags) with this collation
/// and database.
async fn open(port: u16, collation: u8, db: &[u8]) -> Conn<TcpStream> {
    open_with_nonce(port, collation, db).await.0
}

async fn open_with_nonce(port: u16, collation: u8, db: &[u8]) -> (Conn<TcpStream>, Vec<u8>) {
    let (s, hello) = loop {
        match login(port, (BASE, 0), collation, db).await {
            Err(e) if e == AGAIN => continue,
            r => break r.expect("login"),
        }
    };
    (
        Conn {
            s,
            reset: None,
            deprecate_eof: false,
        },
        hello.nonce,
    )
}

/// COM_CHANGE_USER to [`USER`] with this database and collation (the
/// token from the connection's greeting `nonce`); the reply's packets.
async fn change_user(c: &mut Conn<TcpStream>, nonce: &[u8], db: &[u8], collation: u8) -> Reply {
    change_user_as(c, nonce, USER.as_bytes(), db, collation).await
}

/// COM_CHANGE_USER to `user` (its bytes as sent) with [`PASSWORD`].
async fn change_user_as(
    c: &mut Conn<TcpStream>,
    nonce: &[u8],
    user: &[u8],
    db: &[u8],
    collation: u8,
) -> Reply {
    let token = handshake::native_token(nonce, PASSWORD);
    let mut p = vec![0x11];
    p.extend_from_slice(user);
    p.push(0);
    p.push(token.len() as u8);
    p.extend_from_slice(&token);
    p.extend_from_slice(db);
    p.push(0);
    p.extend_from_slice(&[collation, 0]);
    p.extend_from_slice(handshake::NATIVE.as_bytes());
    p.push(0);
    // (The login had CONNECT_ATTRS: none this time.)
    p.push(0);
    let mut out = Vec::new();
    c.command(&p).await.expect("change user");
    loop {
        let r = c.read(&mut out).await.expect("change user reply");
        match r.first() {
            Some(0xFE) if r.len() > 1 => {
                let mut i = 1;
                let end = r[i..].iter().position(|&b| b == 0).unwrap_or(0);
                i += end + 1;
                let nonce: Vec<u8> = r[i..].iter().copied().take_while(|&b| b != 0).collect();
                let seq = out.last().map(|(s, _)| s.wrapping_add(1)).unwrap_or(0);
                packet::write(&mut c.s, seq, &handshake::native_token(&nonce, PASSWORD))
                    .await
                    .expect("auth switch");
            }
            _ => return out,
        }
    }
}

/// A database named in the client's own character set, outside ASCII, is
/// the one the client means through the relay as directly: named at login
/// (latin1, sjis, utf8mb4, and bytes utf8mb4 cannot hold), and by USE
/// followed by another client of the same account and collation taking
/// the connection between two statements. Directly and through the
/// relay, each step's reply is byte for byte the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_named_in_the_clients_own_character_set_is_the_one_it_means() {
    let srv = sqlfleet_testkit::server();
    let (relay_port, _stop, _relay) = relay_for(srv).await;
    let direct_port = srv.sandbox.meta.primary().port;
    const LATIN1: u8 = 8;
    const SJIS: u8 = 13;
    const UTF8MB4: u8 = 45;
    let here: &[(Request, &str)] = &[
        (
            Request::Text("SELECT DATABASE(), i FROM t"),
            "which database",
        ),
        (Request::Text("SELECT 1"), "again"),
        (Request::Text("SELECT DATABASE(), i FROM t"), "still"),
    ];
    let mut failures = Vec::new();
    for (collation, db) in [
        (LATIN1, &b"caf\xe9"[..]),
        (SJIS, &b"\x95\x5c"[..]),
        (UTF8MB4, "café".as_bytes()),
        (UTF8MB4, &b"caf\xe9"[..]),
    ] {
        let direct = session_of(direct_port, (BASE, 0), collation, db, here).await;
        let relayed = session_of(relay_port, (BASE, 0), collation, db, here).await;
        if direct != relayed {
            failures.push(format!(
                "login as {collation} to {db:02x?}:\n  direct {direct:02x?}\n  relay  {relayed:02x?}"
            ));
        }
    }
    // USE (or COM_INIT_DB), then another client between two statements.
    for (collation, use_db) in [
        (LATIN1, Request::Bytes(b"USE `caf\xe9`")),
        (SJIS, Request::Bytes(b"USE `\x95\x5c`")),
        (LATIN1, Request::InitDb(b"caf\xe9")),
        (SJIS, Request::InitDb(b"\x95\x5c")),
    ] {
        let mut replies = Vec::new();
        for port in [direct_port, relay_port] {
            let mut a = open(port, collation, DB.as_bytes()).await;
            let mut got = vec![a.request(&use_db).await];
            let mut b = open(port, collation, DB.as_bytes()).await;
            for _ in 0..3 {
                got.push(b.request(&Request::Text("SELECT DATABASE()")).await);
            }
            got.push(
                a.request(&Request::Text("SELECT DATABASE(), i FROM t"))
                    .await,
            );
            got.push(b.request(&Request::Text("SELECT DATABASE()")).await);
            got.push(a.request(&Request::Text("USE capdb")).await);
            got.push(b.request(&Request::Text("SELECT DATABASE()")).await);
            got.push(a.request(&Request::Text("SELECT DATABASE()")).await);
            replies.push(got);
        }
        if replies[0] != replies[1] {
            failures.push(format!(
                "{}:\n  direct {:02x?}\n  relay  {:02x?}",
                use_db.text(),
                replies[0],
                replies[1]
            ));
        }
    }
    // COM_CHANGE_USER naming such a database.
    for (collation, db) in [(LATIN1, &b"caf\xe9"[..]), (SJIS, &b"\x95\x5c"[..])] {
        let mut replies = Vec::new();
        for port in [direct_port, relay_port] {
            let (mut a, nonce) = open_with_nonce(port, UTF8MB4, DB.as_bytes()).await;
            // How the exchange goes differs (the server switches the
            // plugin, the relay checks the token it has; the server's OK
            // reports the session's changes): how it ends, compared.
            let ended = change_user(&mut a, &nonce, db, collation).await;
            let ended = ended.last().map(|(_, p)| p.first().copied());
            let mut got = vec![vec![(0, vec![ended.flatten().unwrap_or(0)])]];
            let mut b = open(port, collation, DB.as_bytes()).await;
            got.push(
                b.request(&Request::Text("SELECT DATABASE()"))
                    .await
                    .expect("b"),
            );
            got.push(
                a.request(&Request::Text("SELECT DATABASE(), i FROM t"))
                    .await
                    .expect("a"),
            );
            replies.push(got);
        }
        if replies[0] != replies[1] {
            failures.push(format!(
                "change user to {db:02x?}:\n  direct {:02x?}\n  relay  {:02x?}",
                replies[0], replies[1]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// PyMySQL's login as `user` in `charset` (it sends the name in that
/// character set, as the server reads it): "ok CURRENT_USER()" or
/// "err CODE MESSAGE".
fn pymysql_login(port: u16, user: &str, charset: &str) -> String {
    const SCRIPT: &str = r#"
import sys, pymysql
port, user, charset = int(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=sys.argv[4], charset=charset)
    cur = c.cursor()
    cur.execute("SELECT CURRENT_USER()")
    print("ok", cur.fetchone()[0])
except pymysql.err.MySQLError as e:
    print("err", e.args[0], e.args[1] if len(e.args) > 1 else "")
"#;
    let o = std::process::Command::new("/usr/bin/python3")
        .args(["-c", SCRIPT, &port.to_string(), user, charset, PASSWORD])
        .output()
        .expect("python3 with pymysql (scripts/deps.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A user name outside ASCII is the account the server finds: from a
/// utf8mb4 client the same through the relay as directly; from a client
/// whose character set is not UTF-8 the relay cannot read it as the
/// server does, and refuses it in words (1235). Before, such a name was
/// "Access denied" for a garbled name, or, where the client's bytes
/// happened to be valid UTF-8 (latin1 "Ã©" is the bytes of UTF-8 "é"),
/// checked against the other account's password and rules (per-user
/// mode; the server then checked its own on the backend login), or taken
/// for the other account (a config's shared-account users).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_name_in_the_clients_own_character_set_is_never_another_account() {
    let srv = sqlfleet_testkit::server();
    let (relay_port, _stop, _relay) = relay_for(srv).await;
    let direct_port = srv.sandbox.meta.primary().port;
    let mut root = srv
        .target()
        .connect(Duration::from_secs(5))
        .await
        .expect("root");
    for name in ["café", "é", "Ã©"] {
        mysql_async::prelude::Queryable::query_drop(
            &mut root,
            format!("CREATE USER IF NOT EXISTS '{name}'@'%' IDENTIFIED BY '{PASSWORD}'"),
        )
        .await
        .expect("account");
    }
    for (user, charset) in [
        ("café", "utf8mb4"),
        ("é", "utf8mb4"),
        ("café", "latin1"),
        ("Ã©", "latin1"),
    ] {
        let direct = pymysql_login(direct_port, user, charset);
        let relayed = pymysql_login(relay_port, user, charset);
        assert_eq!(
            direct,
            format!("ok {user}@%"),
            "{user} in {charset}, directly"
        );
        if charset == "utf8mb4" {
            assert_eq!(relayed, direct, "{user} in {charset}");
        } else {
            assert!(
                relayed.starts_with("err 1235 ") && relayed.contains("latin1"),
                "{user} in {charset} through the relay: {relayed}"
            );
        }
    }
    // COM_CHANGE_USER naming such a user: latin1 bytes, and UTF-8 ones.
    const LATIN1: u8 = 8;
    const UTF8MB4: u8 = 45;
    for (user, collation, relay_refuses) in [
        (&b"caf\xe9"[..], LATIN1, true),
        (&b"\xc3\xa9"[..], LATIN1, true),
        ("café".as_bytes(), UTF8MB4, false),
    ] {
        let mut ended = Vec::new();
        for port in [direct_port, relay_port] {
            let (mut a, nonce) = open_with_nonce(port, UTF8MB4, DB.as_bytes()).await;
            let reply = change_user_as(&mut a, &nonce, user, DB.as_bytes(), collation).await;
            let last = reply.last().map(|(_, p)| p.clone()).unwrap_or_default();
            let who = if last.first() == Some(&0) {
                a.request(&Request::Text("SELECT CURRENT_USER()"))
                    .await
                    .map(|r| format!("{r:02x?}"))
                    .unwrap_or_else(|e| e)
            } else {
                error_of(&last)
            };
            ended.push(who);
        }
        if relay_refuses {
            assert!(
                ended[1].starts_with("1235"),
                "change user to {user:02x?}: {ended:?}"
            );
            assert!(!ended[0].starts_with("1235"), "{ended:?}");
        } else {
            assert_eq!(ended[0], ended[1], "change user to {user:02x?}");
        }
    }
}
