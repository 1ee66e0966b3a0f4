//! Real drivers through the relay in transaction pooling mode, each running
//! DDL, parameterised (mostly server-side prepared) statements, a rolled
//! back and a committed transaction, and an error: PyMySQL, go-sql-driver,
//! mysql2 (Node), MariaDB Connector/J, and sysbench. `scripts/deps.sh`
//! installs them.

mod common;

use std::process::Command;

use common::drivers::{clients_dir, go, java, node, python};
use common::relay::start_relay;
use sqlfleet_testkit::server;

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
    run_client("py", python("client.py"));
}

#[test]
fn go_sql_driver() {
    run_client("go", go("client.go"));
}

#[test]
fn node_mysql2() {
    run_client("js", node("client.js"));
}

#[test]
fn mariadb_connector_j() {
    run_client("java", java("Client.java"));
}

/// sysbench's `test` (prepare, then 3 s of 4 threads) with prepared
/// statements (`db-ps-mode=auto`) through `relay` as app, in a fresh
/// database; each step must succeed. The run's output.
fn sysbench_through(relay: &common::relay::Relay, test: &str, sizes: [&str; 2]) -> String {
    let srv = server();
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
    let mut out = String::new();
    for (step, extra) in [
        ("prepare", vec![]),
        (
            "run",
            vec!["--threads=4", "--time=3", "--report-interval=0"],
        ),
    ] {
        let o = Command::new("sysbench")
            .arg(format!("--config-file={}", cfg.display()))
            .arg(test)
            .args(sizes)
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
        out = common::stdout(&o);
    }
    out
}

#[test]
fn sysbench_read_write_with_prepared_statements() {
    let relay = start_relay(server(), &[]);
    let out = sysbench_through(
        &relay,
        "oltp_read_write",
        ["--tables=2", "--table-size=2000"],
    );
    assert!(out.contains("transactions:"), "{out}");
    assert!(relay.metric("sqlfleet_relay_commands_total") > 1000.0);
}

/// Runs `cmd` (a program in tests/clients reading RELAY_VARS_FILE) against
/// `port` as root; returns its output, which must succeed.
fn vars_output(name: &str, mut cmd: Command, port: u16, password: &str) -> String {
    let o = cmd
        .current_dir(clients_dir())
        .env("RELAY_HOST", "127.0.0.1")
        .env("RELAY_PORT", port.to_string())
        .env("RELAY_USER", "root")
        .env("RELAY_PASSWORD", password)
        .env("MYSQL_PWD", password)
        .env("RELAY_VARS_FILE", clients_dir().join("vars.sql"))
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e} (run scripts/deps.sh to install the client)"));
    assert!(
        o.status.success(),
        "{name} on port {port}: exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        common::stdout(&o),
        common::stderr(&o)
    );
    common::stdout(&o)
}

/// The connect-time variable reads the relay answers from the server's
/// recorded reply look to every driver exactly as the server's own: each
/// program prints every column's metadata and value on two connections,
/// directly and through the relay, and the outputs must be equal (the
/// relay answering at least the second connection's reads itself).
#[test]
fn variable_reads_answered_by_the_relay_look_the_same_to_every_driver() {
    let srv = server();
    let relay = start_relay(srv, &[]);
    let pw = srv.sandbox.password().expect("pw").expose().to_string();
    let direct = srv.sandbox.meta.primary().port;
    let reads = std::fs::read_to_string(clients_dir().join("vars.sql"))
        .expect("vars.sql")
        .lines()
        .filter(|l| !l.is_empty())
        .count() as f64;
    // The stock client, twice, with each read's column metadata.
    let cli = || {
        let mut script = String::new();
        for _ in 0..2 {
            script +=
                "mariadb --no-defaults -h 127.0.0.1 -P \"$RELAY_PORT\" -u root --column-type-info \
                       -e \"$(sed 's/$/;/' \"$RELAY_VARS_FILE\")\" || exit 1\n";
        }
        let mut c = Command::new("bash");
        c.args(["-c", &script]);
        c
    };
    type Program = Box<dyn Fn() -> Command>;
    let programs: Vec<(&str, Program)> = vec![
        ("PyMySQL", Box::new(|| python("vars.py"))),
        ("go-sql-driver", Box::new(|| go("vars.go"))),
        ("mysql2", Box::new(|| node("vars.js"))),
        ("Connector/J", Box::new(|| java("Vars.java"))),
        ("mariadb CLI", Box::new(cli)),
    ];
    for (name, program) in programs {
        let want = vars_output(name, program(), direct, &pw);
        let before = relay.metric("sqlfleet_relay_answered_locally_total");
        let got = vars_output(name, program(), relay.port, &pw);
        let answered = relay.metric("sqlfleet_relay_answered_locally_total") - before;
        assert_eq!(got, want, "{name}: through the relay vs directly");
        assert!(
            answered >= reads,
            "{name}: {answered} of its {} reads answered by the relay (at least the second connection's {reads})",
            2.0 * reads
        );
    }
}

/// sysbench's prepared point selects (libmariadb: parameter types sent on
/// a statement's first execute only) through the result cache: every
/// client's first execute may be answered from another's entry, and its
/// later executes, which send no types, still run (before: ERROR 1210 "no
/// parameter types sent" once a first execute was a hit).
#[test]
fn sysbench_prepared_point_selects_through_the_result_cache() {
    let relay = start_relay(
        server(),
        &[
            "--toml",
            "[[cache_rules]]\nname = \"sb\"\nmatch_regex = \"(?i)FROM sbtest\"\nttl = 60\n",
        ],
    );
    relay.wait_cache_following(std::time::Duration::from_secs(20));
    sysbench_through(
        &relay,
        "oltp_point_select",
        ["--tables=1", "--table-size=50"],
    );
    assert!(
        relay.metric("sqlfleet_relay_cache_hits_total{rule=\"sb\"}") > 0.0,
        "no execute was answered from the cache"
    );
}
