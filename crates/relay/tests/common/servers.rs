//! Servers the relay's tests put behind a relay beyond testkit's default
//! one: a MariaDB that offers TLS (a self-signed certificate, made once per
//! test binary), and databases of a fixed name made afresh.

use std::path::Path;
use std::sync::OnceLock;

use mysql_async::prelude::Queryable;
use sqlfleet_testkit::TestServer;

fn certs() -> &'static Path {
    static D: OnceLock<tempfile::TempDir> = OnceLock::new();
    D.get_or_init(|| {
        let d = tempfile::tempdir().expect("tmp");
        sqlfleet_testkit::tls::self_signed(d.path(), "127.0.0.1");
        d
    })
    .path()
}

/// A MariaDB that offers TLS (and LOAD DATA LOCAL), one per test binary.
pub fn tls_server() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| {
        let d = certs();
        let cert = format!("ssl-cert={}", d.join("cert.pem").display());
        let key = format!("ssl-key={}", d.join("key.pem").display());
        sqlfleet_testkit::server_with(&[&cert, &key, "local-infile=1"])
    })
}

/// The newer MariaDB (testkit's 11.4, beside the system's 10.11), one
/// per test binary: what the relay meets behind it differs (its session
/// tracker, for one).
pub fn newer_server() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| sqlfleet_testkit::newer_server_with(&[]))
}

/// Drops and creates database `db` on `srv` (a fixed name, so that runs
/// directly and through a relay print the same).
pub fn fresh_named_db(srv: &TestServer, db: &str) {
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut c = srv.connect().await;
        c.query_drop(format!(
            "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}"
        ))
        .await
        .expect("database");
    });
}
