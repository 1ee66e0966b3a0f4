//! Starting `sqlfleet relay` against a test server, and clients for it.

use std::process::{Child, Stdio};

#[allow(unused_imports)]
pub use sqlfleet_testkit::proxy::{app, cli, free_port, wait_listening};
use sqlfleet_testkit::proxy::{http_get, metric_in};
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

/// A quick-mode relay in front of `srv` with its shared account (root)
/// and the relay's client accounts app:app-pw and root (the server's
/// password), metrics on a free port.
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
        .args(["--shared-account", "--client-user", "app:app-pw"])
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
        http_get(self.metrics_port, "/metrics")
    }

    /// One sample's value from the metrics page.
    pub fn metric(&self, series: &str) -> f64 {
        metric_in(&self.metrics(), series)
    }
}
