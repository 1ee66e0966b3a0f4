//! Helpers for tests of anything that listens for MySQL clients (the
//! relay, run in-process or as the binary): free ports, waiting for a
//! listener, admin pages, and clients as the test account `app`.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use sqlfleet_conn::{Endpoint, PasswordSpec, Secret, SslMode, Target};

/// Where [`free_port`] looks: below Linux's ephemeral range (32768 and
/// up), above the sandboxes' blocks (3307 and 4567 up).
const PORTS: std::ops::Range<u16> = 20_000..32_768;

/// A TCP port nobody listens on (just now), never handed out twice in
/// this process.
///
/// Not the kernel's `bind(:0)` pick: that is an ephemeral port, which the
/// kernel may give next to an outgoing connection (tests open many)
/// before the caller binds it ("Address already in use" in a relay's
/// start, seen in CI).
pub fn free_port() -> u16 {
    use rand::Rng;
    static TAKEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut rng = rand::thread_rng();
    loop {
        let p = rng.gen_range(PORTS);
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        if !taken.contains(&p) && TcpListener::bind(("127.0.0.1", p)).is_ok() {
            taken.push(p);
            return p;
        }
    }
}

/// Waits (up to 10 s) until something accepts on 127.0.0.1:`port`.
pub fn wait_listening(port: u16) {
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nothing listens on port {port}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The whole HTTP/1.0 response for GET `path` on 127.0.0.1:`port`.
pub fn http_get(port: u16, path: &str) -> String {
    crate::http::raw(
        &format!("127.0.0.1:{port}"),
        &format!("GET {path} HTTP/1.0\r\n\r\n"),
    )
}

/// One sample's value from a Prometheus text page (panics when absent).
pub fn metric_in(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{page}"))
}

/// A client target for user `app` on 127.0.0.1:`port`, without TLS.
pub fn app(port: u16, password: &str, db: Option<&str>) -> Target {
    Target {
        endpoint: Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port,
        },
        user: "app".into(),
        password: Some(PasswordSpec::Given(Secret::new(password))),
        database: db.map(str::to_owned),
        ssl_mode: SslMode::Disabled,
        ssl_ca: None,
        ssl_cert: None,
        ssl_key: None,
        tls: Default::default(),
        charset: None,
    }
}

/// The stock client as app (password app-pw) on 127.0.0.1:`port`, batch
/// mode without column names.
pub fn cli(port: u16, args: &[&str]) -> Output {
    Command::new("mariadb")
        .args([
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-P",
            &port.to_string(),
            "-u",
            "app",
            "--password=app-pw",
            "-N",
            "-B",
        ])
        .args(args)
        .output()
        .expect("mariadb client")
}
