//! The relay in front of a MariaDB that speaks TLS, with `tls = "required"`
//! and `"preferred"` to the backend: the stock `mariadb` client (on
//! libmariadb, which asks MariaDB for its extended capabilities: cached
//! result-set metadata) must get the same answers through the relay as
//! directly. Before, every statement failed with ERROR 2027 "Received
//! malformed packet": the relay's SSLRequest to the backend carried no
//! extended capabilities, so the server sent result sets without the
//! metadata flag the relay and the client expected.

mod common;

use std::process::Command;

use common::relay::{quoted, start_config, stdout};
use sqlfleet_testkit::proxy::free_port;

use common::servers::tls_server;

fn relay(mode: &str, tls: &str) -> common::relay::Relay {
    let srv = tls_server();
    let port = free_port();
    let metrics_port = free_port();
    let pw = srv.sandbox.password().expect("pw");
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\nmode = \"{mode}\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword = {}\ntls = \"{tls}\"\naccounts = \"shared\"\n\n\
         [[users]]\nname = \"app\"\n{}\n",
        srv.sandbox.meta.primary().port,
        quoted(pw.expose()),
        sqlfleet_relay::config::hash_lines("app-pw"),
    );
    start_config(&toml, port, metrics_port)
}

/// What the stock client prints for a few statements: a plain select, a
/// result set of several types, an empty one, a multi-result, a prepared
/// statement and the session's TLS state as the server sees it.
const SCRIPT: &str = "SELECT 1; \
    SELECT 'é' AS s, 1.5 AS d, NULL AS n, CAST('2026-11-26' AS DATE) AS t; \
    SELECT 1 FROM DUAL WHERE 0; \
    PREPARE p FROM 'SELECT ? + 1'; SET @a = 41; EXECUTE p USING @a; \
    SELECT COUNT(*) FROM information_schema.COLLATIONS WHERE ID < 10; \
    SELECT VARIABLE_VALUE <> '' FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher'";

/// The stock client through the relay, plain to it (testkit's `cli`).
fn stock_client(port: u16) -> std::process::Output {
    sqlfleet_testkit::proxy::cli(port, &["--ssl=0", "-e", SCRIPT])
}

#[test]
fn the_stock_client_works_through_a_relay_with_tls_to_the_backend() {
    // Directly, the expected answers (the last line: the session has TLS).
    let direct = Command::new("mariadb")
        .arg(format!(
            "--defaults-file={}",
            tls_server().defaults_file().display()
        ))
        .args(["-N", "-B", "--ssl", "-e", SCRIPT])
        .output()
        .expect("mariadb client");
    assert!(
        direct.status.success(),
        "{}",
        String::from_utf8_lossy(&direct.stderr)
    );
    let want = stdout(&direct);
    assert!(
        want.trim_end().ends_with('1'),
        "the direct session uses TLS: {want}"
    );
    for mode in ["transaction", "session"] {
        for tls in ["required", "preferred"] {
            let r = relay(mode, tls);
            let out = stock_client(r.port);
            assert!(
                out.status.success(),
                "mode {mode}, backend tls {tls}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(stdout(&out), want, "mode {mode}, backend tls {tls}");
        }
    }
}
