//! Real drivers through the relay in transaction pooling mode, each running
//! DDL, parameterised (mostly server-side prepared) statements, a rolled
//! back and a committed transaction, and an error: PyMySQL, go-sql-driver,
//! mysql2 (Node), MariaDB Connector/J, and sysbench. `scripts/deps.sh`
//! installs them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::relay::start_relay;
use sqlfleet_testkit::server;

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn cache() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    PathBuf::from(home).join(".cache/sqlfleet")
}

/// Runs a client program against a relay and a fresh database; it must
/// print `OK 4` (four rows left after its transactions).
fn run_client(name: &str, mut cmd: Command) {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db(name));
    let o = cmd
        .current_dir(clients_dir())
        .env("RELAY_HOST", "127.0.0.1")
        .env("RELAY_PORT", relay.port.to_string())
        .env("RELAY_USER", "app")
        .env("RELAY_PASSWORD", "app-pw")
        .env("RELAY_DB", &db)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e} (run scripts/deps.sh to install the client)"));
    assert!(
        o.status.success() && common::stdout(&o).trim() == "OK 4",
        "{name}: exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        common::stdout(&o),
        common::stderr(&o)
    );
    assert!(
        relay.metric("sqlfleet_relay_errors_total") >= 1.0,
        "the error case went through"
    );
}

#[test]
fn pymysql() {
    let mut c = Command::new("/usr/bin/python3");
    c.arg("client.py");
    run_client("py", c);
}

#[test]
fn go_sql_driver() {
    let mut c = Command::new("go");
    c.args(["run", "client.go"])
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", cache().join("go-build"))
        .env("GOFLAGS", "");
    run_client("go", c);
}

#[test]
fn node_mysql2() {
    let mut c = Command::new("node");
    c.arg("client.js")
        .env("NODE_PATH", cache().join("node/node_modules"));
    run_client("js", c);
}

#[test]
fn mariadb_connector_j() {
    let mut c = Command::new("java");
    c.args([
        "-cp",
        "/usr/share/java/mariadb-java-client.jar",
        "Client.java",
    ]);
    run_client("java", c);
}

#[test]
fn sysbench_read_write_with_prepared_statements() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let (db, _) = rt.block_on(srv.fresh_db("sb"));
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("sb.cfg");
    std::fs::write(
        &cfg,
        format!(
            "mysql-host=127.0.0.1\nmysql-port={}\nmysql-user=app\nmysql-password=app-pw\nmysql-db={db}\nmysql-ssl=off\ndb-ps-mode=auto\n",
            relay.port
        ),
    )
    .expect("cfg");
    for (step, extra) in [
        ("prepare", vec![]),
        (
            "run",
            vec!["--threads=4", "--time=3", "--report-interval=0"],
        ),
    ] {
        let o = Command::new("sysbench")
            .arg(format!("--config-file={}", cfg.display()))
            .args(["oltp_read_write", "--tables=2", "--table-size=2000"])
            .args(extra)
            .arg(step)
            .output()
            .expect("sysbench (run scripts/deps.sh)");
        assert!(
            o.status.success(),
            "sysbench {step}: {}\n{}",
            common::stdout(&o),
            common::stderr(&o)
        );
        if step == "run" {
            let out = common::stdout(&o);
            assert!(out.contains("transactions:"), "{out}");
        }
    }
    assert!(relay.metric("sqlfleet_relay_commands_total") > 1000.0);
}
