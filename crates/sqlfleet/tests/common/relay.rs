//! Starting `sqlfleet relay` against a test server, and clients for it.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlfleet_conn::{Endpoint, PasswordSpec, Secret, Target};
use sqlfleet_testkit::TestServer;

pub struct Relay {
    pub child: Child,
    pub port: u16,
    pub metrics_port: u16,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

pub fn wait_listening(port: u16) {
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "relay did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A quick-mode relay in front of `srv` with accounts app:app-pw and
/// root (the server's password), metrics on a free port.
pub fn start_relay(srv: &TestServer, extra: &[&str]) -> Relay {
    let port = free_port();
    let metrics_port = free_port();
    let pw = srv.sandbox.password().expect("pw");
    let backend = format!("127.0.0.1:{}", srv.sandbox.meta.primary().port);
    let child = super::sqlfleet()
        .args([
            "relay",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--backend",
            &backend,
            "--no-defaults",
            "-u",
            "root",
            "--metrics",
            &format!("127.0.0.1:{metrics_port}"),
        ])
        .args(["--client-user", "app:app-pw"])
        .arg("--client-user")
        .arg(format!("root:{}", pw.expose()))
        .args(extra)
        .env("MYSQL_PWD", pw.expose())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn relay");
    wait_listening(port);
    Relay {
        child,
        port,
        metrics_port,
    }
}

impl Relay {
    /// The metrics page.
    pub fn metrics(&self) -> String {
        use std::io::{Read, Write};
        let mut s =
            std::net::TcpStream::connect(("127.0.0.1", self.metrics_port)).expect("metrics");
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
            .expect("request");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("response");
        out
    }

    /// One sample's value from the metrics page.
    pub fn metric(&self, series: &str) -> f64 {
        let page = self.metrics();
        page.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{page}"))
    }
}

pub fn app(port: u16, password: &str, db: Option<&str>) -> Target {
    Target {
        endpoint: Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port,
        },
        user: "app".into(),
        password: Some(PasswordSpec::Given(Secret::new(password))),
        database: db.map(str::to_owned),
        ssl_mode: sqlfleet_conn::SslMode::Disabled,
        ssl_ca: None,
        charset: None,
    }
}

/// The stock client through the relay as app.
pub fn cli(port: u16, args: &[&str]) -> std::process::Output {
    Command::new("mariadb")
        .args([
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
