//! The configuration matrix: every client library users run — the stock
//! `mariadb` CLI (libmariadb), Python's MySQLdb (libmariadb) and PyMySQL,
//! PHP's mysqli (mysqlnd), go-sql-driver, Node's mysql2 and MariaDB
//! Connector/J — runs one program (tests/clients/matrix.*: server-side
//! prepared statements, result sets ending in EOF or in OK as the driver
//! asks, MariaDB's extended metadata, multi-results from a procedure and
//! from multi-statements, a rolled-back transaction, an error, warnings,
//! LOAD DATA LOCAL) directly against a TLS-capable server and through a
//! relay, and the two outputs must be equal line for line. The relay
//! configurations: backend TLS {disabled, required} × mode {transaction,
//! session} × accounts {shared, per-user}.
//!
//! CI runs a slice: each client in two configurations that differ in every
//! dimension (configuration `(i + seed) % 8` and its complement), so that
//! every configuration and every value of each dimension meets every
//! client. `SQLFLEET_MATRIX=all` runs all 56 pairs (bench/relay_matrix.sh);
//! `SQLFLEET_MATRIX_SEED` turns the slice.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use common::drivers::{clients_dir, go, java, node, php, python};
use common::relay::{quoted, start_config, Relay};
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::proxy::free_port;
use sqlfleet_testkit::TestServer;

const USER: &str = "mx";
const PASSWORD: &str = "mx-pw";

/// The TLS-capable server, with the matrix's own account.
fn tls_server() -> &'static TestServer {
    static S: OnceLock<()> = OnceLock::new();
    let srv = common::servers::tls_server();
    S.get_or_init(|| {
        let rt = tokio::runtime::Runtime::new().expect("rt");
        rt.block_on(async {
            let mut c = srv.connect().await;
            c.query_drop(format!(
                "CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'; \
                 GRANT ALL ON `mx\\_%`.* TO '{USER}'@'%'"
            ))
            .await
            .expect("the matrix account");
        });
    });
    srv
}

/// One relay configuration.
#[derive(Clone, Copy, Debug)]
struct Config {
    tls: &'static str,
    mode: &'static str,
    accounts: &'static str,
}

/// The eight configurations; `i` and `7 - i` differ in every dimension.
fn config(i: usize) -> Config {
    Config {
        tls: ["disabled", "required"][i & 1],
        mode: ["transaction", "session"][(i >> 1) & 1],
        accounts: ["shared", "per-user"][(i >> 2) & 1],
    }
}

fn relay(c: Config) -> Relay {
    let srv = tls_server();
    let port = free_port();
    let metrics_port = free_port();
    let pw = srv.sandbox.password().expect("pw");
    // Shared: the relay's own list says who may log in, and every client
    // runs as root. Per-user: the server's accounts.
    let users = if c.accounts == "shared" {
        format!(
            "[[users]]\nname = \"{USER}\"\n{}\n",
            sqlfleet_relay::config::hash_lines(PASSWORD)
        )
    } else {
        String::new()
    };
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\nmode = \"{}\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword = {}\ntls = \"{}\"\naccounts = \"{}\"\n\n{users}",
        c.mode,
        srv.sandbox.meta.primary().port,
        quoted(pw.expose()),
        c.tls,
        c.accounts,
    );
    start_config(&toml, port, metrics_port)
}

type Program = fn(&Path) -> Command;

/// The clients, each a program run in tests/clients.
const CLIENTS: &[(&str, Program)] = &[
    ("mariadb CLI", |csv| {
        let script = std::fs::read_to_string(clients_dir().join("matrix.sql"))
            .expect("matrix.sql")
            .replace("@CSV@", &csv.display().to_string());
        let mut c = Command::new("bash");
        c.args([
            "-c",
            "mariadb --no-defaults -h \"$RELAY_HOST\" -P \"$RELAY_PORT\" -u \"$RELAY_USER\" \
             --password=\"$RELAY_PASSWORD\" -D \"$RELAY_DB\" --local-infile=1 --force \
             --column-type-info -e \"$MATRIX_SCRIPT\" 2>&1; echo done",
        ])
        .env("MATRIX_SCRIPT", script);
        c
    }),
    ("MySQLdb", |_| {
        let mut c = python("matrix.py");
        c.arg("mysqldb");
        c
    }),
    ("PyMySQL", |_| {
        let mut c = python("matrix.py");
        c.arg("pymysql");
        c
    }),
    ("PHP mysqli", |_| php("matrix.php")),
    ("go-sql-driver", |_| go("matrix.go")),
    ("mysql2", |_| node("matrix.js")),
    ("Connector/J", |_| java("Matrix.java")),
];

/// Runs client `i` against `port` in a fresh database of its own (the
/// same name each time, so that the outputs can be compared).
fn run(i: usize, port: u16, csv: &Path) -> String {
    let (name, program) = CLIENTS[i];
    let db = format!("mx_{i}");
    common::servers::fresh_named_db(tls_server(), &db);
    let o = program(csv)
        .current_dir(clients_dir())
        .env("RELAY_HOST", "127.0.0.1")
        .env("RELAY_PORT", port.to_string())
        .env("RELAY_USER", USER)
        .env("RELAY_PASSWORD", PASSWORD)
        .env("RELAY_DB", &db)
        .env("MATRIX_CSV", csv)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e} (run scripts/deps.sh to install the client)"));
    let out = common::stdout(&o);
    assert!(
        o.status.success() && out.trim_end().ends_with("done"),
        "{name} on port {port}: exit {:?}\nstdout: {out}\nstderr: {}",
        o.status.code(),
        common::stderr(&o)
    );
    out
}

/// The pairs (client, configuration) this run covers.
fn plan() -> Vec<(usize, usize)> {
    if std::env::var("SQLFLEET_MATRIX").as_deref() == Ok("all") {
        return (0..CLIENTS.len())
            .flat_map(|i| (0..8).map(move |c| (i, c)))
            .collect();
    }
    let seed: usize = std::env::var("SQLFLEET_MATRIX_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (0..CLIENTS.len())
        .flat_map(|i| {
            let c = (i + seed) % 8;
            [(i, c), (i, 7 - c)]
        })
        .collect()
}

#[test]
fn every_client_gets_the_same_answers_through_every_relay_configuration() {
    let dir = tempfile::tempdir().expect("tmp");
    let csv = dir.path().join("matrix.csv");
    std::fs::write(&csv, "x,1.00\ny,2.00\nz,3.50\n").expect("csv");
    let direct = tls_server().sandbox.meta.primary().port;
    let plan = plan();
    let mut wanted: Vec<Option<String>> = vec![None; CLIENTS.len()];
    let mut failures = Vec::new();
    for c in 0..8 {
        let clients: Vec<usize> = plan.iter().filter(|p| p.1 == c).map(|p| p.0).collect();
        if clients.is_empty() {
            continue;
        }
        let cfg = config(c);
        let r = relay(cfg);
        for i in clients {
            let want = wanted[i]
                .get_or_insert_with(|| run(i, direct, &csv))
                .clone();
            let got = run(i, r.port, &csv);
            if got != want {
                let at = want
                    .lines()
                    .zip(got.lines())
                    .position(|(a, b)| a != b)
                    .unwrap_or(want.lines().count().min(got.lines().count()));
                failures.push(format!(
                    "{} through {cfg:?}: line {}: directly {:?}, through the relay {:?}",
                    CLIENTS[i].0,
                    at + 1,
                    want.lines().nth(at),
                    got.lines().nth(at)
                ));
            }
        }
    }
    eprintln!("{} client × configuration pairs compared", plan.len());
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
