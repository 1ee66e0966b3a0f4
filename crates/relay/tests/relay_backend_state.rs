//! What the relay does when a backend goes away, as an operator and a
//! client see it: a backend a client's command finds dead is logged down
//! once and shows in `/metrics` (`sqlfleet_relay_backend_up`,
//! `_backend_role{role}`), and is logged up again when it is back; and a
//! backend connection the server closes while its client is idle (session
//! mode, `wait_timeout`) closes that client too, as a direct connection
//! would; a relay started before its server greets as the server once it
//! answers.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::relay::start_relay;
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::proxy::app;
use sqlfleet_testkit::TestServer;

/// Log lines the relay writes (a global subscriber: the relay runs on its
/// own thread).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static L: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    L.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let b2 = buf.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Sink(b2.clone()))
            .try_init();
        buf
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);
impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn lines_with(needle: &str) -> usize {
    let l = logs();
    let text = String::from_utf8_lossy(&l.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    text.lines().filter(|x| x.contains(needle)).count()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "waited 30 s for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn own_server() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| sqlfleet_testkit::server_with(&["max-connections=500"]))
}

#[test]
fn a_backend_found_dead_is_logged_once_and_shown_in_metrics() {
    logs();
    let srv = own_server();
    let r = start_relay(srv, &["--mode", "session"]);
    let addr = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let up = format!("sqlfleet_relay_backend_up{{backend=\"{addr}\"}}");
    let role = |r: &str| format!("sqlfleet_relay_backend_role{{backend=\"{addr}\",role=\"{r}\"}}");
    wait_for("the backend up", || r.metric(&up) == 1.0);
    assert_eq!(r.metric(&role("primary")), 1.0);
    assert_eq!(r.metric(&role("down")), 0.0);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let t = app(r.port, "app-pw", None);
        let mut c = t.connect(Duration::from_secs(10)).await.expect("connect");
        let one: Option<i64> = c.query_first("SELECT 1").await.expect("select");
        assert_eq!(one, Some(1));
        let downs_before = lines_with(&format!("backend {addr} is down"));
        sqlfleet_testkit::workload::stop(srv, true).await;
        // The client's command is what finds it dead.
        assert!(c.query_drop("SELECT 1").await.is_err());
        wait_for("the backend down in /metrics", || r.metric(&up) == 0.0);
        assert_eq!(r.metric(&role("down")), 1.0);
        assert_eq!(r.metric(&role("primary")), 0.0);
        // Logged once, whoever noticed first (the client or a check).
        wait_for("the down line", || {
            lines_with(&format!("backend {addr} is down")) > downs_before
        });
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(
            lines_with(&format!("backend {addr} is down")),
            downs_before + 1,
            "one line for one change"
        );
        sqlfleet_testkit::workload::start_again(srv).await;
        wait_for("the backend up again", || r.metric(&up) == 1.0);
        wait_for("the up line", || {
            lines_with(&format!("backend {addr} is up as primary")) > 0
        });
    });
}

#[test]
fn a_backend_connection_the_server_closes_closes_its_idle_client() {
    let srv = sqlfleet_testkit::server();
    let r = start_relay(srv, &["--mode", "session"]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let t = app(r.port, "app-pw", None);
        let mut c = t.connect(Duration::from_secs(10)).await.expect("connect");
        c.query_drop("SET SESSION wait_timeout = 1")
            .await
            .expect("set");
        let before = r.metric("sqlfleet_relay_clients_connected");
        assert!(before >= 1.0);
        // The server closes the idle connection after a second; the relay
        // closes the client's within a moment, without its next command.
        wait_for("the client's connection closed by the relay", || {
            r.metric("sqlfleet_relay_clients_connected") < before
        });
        assert!(
            c.query_drop("SELECT 1").await.is_err(),
            "its session is gone"
        );
    });
}

/// The version string a server (or relay) greets a new connection with.
fn greeting_version(port: u16) -> String {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect to {port}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut h = [0u8; 4];
    s.read_exact(&mut h).expect("greeting header");
    let mut p = vec![0u8; u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize];
    s.read_exact(&mut p).expect("greeting");
    let end = p.iter().skip(1).position(|&b| b == 0).unwrap_or(0);
    String::from_utf8_lossy(&p[1..1 + end]).into_owned()
}

/// A relay started while its server does not answer greets clients with
/// a stand-in version and no MariaDB extensions (drivers read features
/// from both); once the server answers, new clients get its own greeting.
#[test]
fn a_relay_started_before_its_server_greets_as_the_server_once_it_answers() {
    // Not own_server(): the other tests here stop and start it.
    let srv = sqlfleet_testkit::server();
    let link = sqlfleet_testkit::netfault::Link::to(srv.sandbox.meta.primary().port);
    link.cut();
    let port = common::relay::free_port();
    let metrics_port = common::relay::free_port();
    let pw = srv.sandbox.password().expect("pw");
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword = {}\n",
        link.port,
        common::relay::quoted(pw.expose())
    );
    let _relay = common::relay::start_config(&toml, port, metrics_port);
    assert_eq!(greeting_version(port), "5.5.5-10.11.0-MariaDB");
    link.heal();
    let real = greeting_version(srv.sandbox.meta.primary().port);
    assert_ne!(real, "5.5.5-10.11.0-MariaDB");
    let t0 = Instant::now();
    loop {
        let v = greeting_version(port);
        if v == real {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "still greeted as {v}, the server is {real}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A relay whose backend account may not read replication status (no
/// SLAVE MONITOR: a least-privileged application account) keeps its
/// server up as the primary, says once what to grant, and shows it in
/// /status; a statement that runs across several health checks runs to
/// its end. (Before, each check marked the server down and cut the
/// statements running on it.)
#[test]
fn an_account_that_cannot_read_replication_status_keeps_the_server_up_and_says_so() {
    logs();
    // (Not `own_server`, which another test here stops and starts.)
    let srv = sqlfleet_testkit::server();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut root = srv.connect().await;
        root.query_drop(
            "CREATE OR REPLACE USER 'lowpriv'@'%' IDENTIFIED BY 'low-pw'; \
             GRANT SELECT ON *.* TO 'lowpriv'@'%'",
        )
        .await
        .expect("a SELECT-only account");
    });
    let (port, metrics_port) = (common::relay::free_port(), common::relay::free_port());
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"lowpriv\"\npassword = \"low-pw\"\n\
         accounts = \"shared\"\n[routing]\nhealth_interval = 0.2\n\
         [[users]]\nname = \"app\"\n{}\n",
        srv.sandbox.meta.primary().port,
        sqlfleet_relay::config::hash_lines("app-pw"),
    );
    let r = common::relay::start_config(&toml, port, metrics_port);
    let addr = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let role = format!("sqlfleet_relay_backend_role{{backend=\"{addr}\",role=\"primary\"}}");
    wait_for("the backend up as primary", || r.metric(&role) == 1.0);
    wait_for("the line saying what to grant", || {
        lines_with(&format!(
            "backend {addr}: the relay's account cannot read replication status"
        )) > 0
    });
    assert!(
        r.page("/status").contains("grant it SLAVE MONITOR"),
        "/status says why: {}",
        r.page("/status")
    );
    rt.block_on(async {
        let mut c = app(r.port, "app-pw", None)
            .connect(Duration::from_secs(10))
            .await
            .expect("connect");
        // Ten health checks pass while it sleeps.
        let slept: Option<i64> = c
            .query_first("SELECT SLEEP(2)")
            .await
            .expect("runs to its end");
        assert_eq!(slept, Some(0));
    });
    assert_eq!(
        lines_with(&format!(
            "backend {addr}: the relay's account cannot read replication status"
        )),
        1,
        "said once"
    );
    // Never marked down (which would have cut the statement above): still
    // the primary on this relay's own metrics. (Lines saying "is down" may
    // be another test's relay, on the same server.)
    assert_eq!(r.metric(&role), 1.0, "still the primary");
}

/// What a client is told when the relay cannot get a server connection:
/// a server that answers but refuses the relay's login (a wrong password,
/// a limit) "refused the relay's connection", with the server's code; a
/// port nothing answers on "cannot be reached". Neither carries the
/// server's words (they may name the relay's account).
#[test]
fn a_refused_backend_login_is_told_apart_from_an_unreachable_server() {
    let srv = sqlfleet_testkit::server();
    let dead = common::relay::free_port();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for (backend_port, password, want) in [
        (
            srv.sandbox.meta.primary().port,
            "not-the-password",
            "refused the relay's connection: ERROR 1045 (28000)",
        ),
        (dead, "x", "cannot be reached"),
    ] {
        let (port, metrics_port) = (common::relay::free_port(), common::relay::free_port());
        let toml = format!(
            "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\n\
             [backend]\nservers = [\"127.0.0.1:{backend_port}\"]\nuser = \"root\"\n\
             password = \"{password}\"\naccounts = \"shared\"\n[pool]\nwait_timeout = 2\n\
             [[users]]\nname = \"app\"\n{}\n",
            sqlfleet_relay::config::hash_lines("app-pw"),
        );
        let _r = common::relay::start_config(&toml, port, metrics_port);
        let e = rt.block_on(async {
            let mut c = app(port, "app-pw", None)
                .connect(Duration::from_secs(10))
                .await
                .expect("the relay checks the login itself");
            c.query_drop("SELECT 1")
                .await
                .expect_err("no server connection")
        });
        let text = e.to_string();
        assert!(
            text.contains("1429") && text.contains(want),
            "{want}: {text}"
        );
        assert!(!text.contains("Access denied"), "{text}");
    }
}
