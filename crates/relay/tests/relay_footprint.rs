//! Do no harm: what the relay asks the server on its own behalf stays
//! small and never grows with the server's catalog. A server with many
//! databases full of views (MariaDB 10.11 crashed inside the relay's old
//! whole-catalog `information_schema.VIEWS` scan under 64 clients), 64
//! clients in per-user transaction mode reading and writing through the
//! relay; the server's own general log is the witness that no query the
//! relay sent scans the catalog, and /metrics counts every own query by
//! kind (the ratio to client statements is printed for
//! docs/benchmarks.md; `FOOTPRINT_DBS` / `FOOTPRINT_SECONDS` make the
//! long run in bench/).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::relay::{free_port, quoted, start_config};
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_conn::{Endpoint, PasswordSpec, Secret, SslMode, Target};
use sqlfleet_testkit::TestServer;

/// A server of this test alone (its general log is read).
fn srv() -> &'static TestServer {
    static S: OnceLock<TestServer> = OnceLock::new();
    S.get_or_init(|| sqlfleet_testkit::server_with(&["max-connections=400"]))
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn client(port: u16) -> Target {
    Target {
        endpoint: Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port,
        },
        user: "fp".into(),
        password: Some(PasswordSpec::Given(Secret::new("fp-pw"))),
        database: Some("fp_app".into()),
        ssl_mode: SslMode::Disabled,
        ssl_ca: None,
        ssl_cert: None,
        ssl_key: None,
        tls: Default::default(),
        charset: None,
    }
}

#[test]
fn many_views_and_64_per_user_clients_cost_the_server_no_catalog_scan() {
    let dbs = env_or("FOOTPRINT_DBS", 200);
    let seconds = env_or("FOOTPRINT_SECONDS", 10);
    let s = srv();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let mut root = s.connect().await;
        // The catalog: `dbs` databases of 10 views each (a tenth of them
        // calling a stored function), and the application's database.
        let mut batch = String::new();
        for d in 0..dbs {
            batch.push_str(&format!(
                "CREATE DATABASE fp_{d}; CREATE TABLE fp_{d}.t (id INT PRIMARY KEY, v INT); \
                 CREATE FUNCTION fp_{d}.f() RETURNS INT DETERMINISTIC RETURN 1;"
            ));
            for v in 0..10 {
                if v == 0 {
                    batch.push_str(&format!("CREATE VIEW fp_{d}.v{v} AS SELECT fp_{d}.f() AS x;"));
                } else {
                    batch.push_str(&format!("CREATE VIEW fp_{d}.v{v} AS SELECT id, v FROM fp_{d}.t;"));
                }
            }
            if d % 20 == 19 {
                root.query_drop(std::mem::take(&mut batch)).await.expect("catalog");
            }
        }
        if !batch.is_empty() {
            root.query_drop(batch).await.expect("catalog");
        }
        root.query_drop(
            "CREATE DATABASE fp_app; \
             CREATE TABLE fp_app.t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB; \
             INSERT INTO fp_app.t SELECT seq, 0 FROM fp_app.seq_1_to_1000; \
             CREATE VIEW fp_app.v_plain AS SELECT id, v FROM fp_app.t; \
             CREATE USER 'fp'@'%' IDENTIFIED BY 'fp-pw'; \
             GRANT SELECT, UPDATE ON fp_app.* TO 'fp'@'%'; \
             GRANT SELECT ON fp_1.* TO 'fp'@'%'; \
             SET GLOBAL log_output = 'TABLE'; TRUNCATE mysql.general_log; SET GLOBAL general_log = 1",
        )
        .await
        .expect("app");
        let _ = root.disconnect().await;
    });

    let port = free_port();
    let metrics_port = free_port();
    let pw = s.sandbox.password().expect("pw");
    let toml = format!(
        "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmetrics = \"127.0.0.1:{metrics_port}\"\nmode = \"transaction\"\n\n\
         [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword = {}\naccounts = \"per-user\"\n\n\
         [pool]\nmax = 32\nwait_timeout = 10\n\n\
         [[users]]\nname = \"fp\"\n{}\n",
        s.sandbox.meta.primary().port,
        quoted(pw.expose()),
        sqlfleet_relay::config::hash_lines("fp-pw"),
    );
    let relay = start_config(&toml, port, metrics_port);
    let statements = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let until = Instant::now() + Duration::from_secs(seconds);
        let tasks: Vec<_> = (0..64u64)
            .map(|c| {
                let (statements, failures) = (statements.clone(), failures.clone());
                tokio::spawn(async move {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(c);
                    let mut conn = match client(port).connect(Duration::from_secs(10)).await {
                        Ok(conn) => conn,
                        Err(e) => {
                            eprintln!("client {c}: {e}");
                            failures.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    };
                    while Instant::now() < until {
                        let id = rng.gen_range(1..=1000);
                        let sql = match rng.gen_range(0..10) {
                            0..=4 => format!("SELECT v FROM t WHERE id = {id}"),
                            5..=6 => format!("UPDATE t SET v = v + 1 WHERE id = {id}"),
                            7 => format!("SELECT v FROM v_plain WHERE id = {id}"),
                            8 => format!("SELECT COUNT(*) FROM fp_1.v{}", rng.gen_range(1..10)),
                            _ => "SELECT x FROM fp_1.v0".to_string(),
                        };
                        match conn.query_drop(&sql).await {
                            Ok(()) => {
                                statements.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => {
                                eprintln!("client {c}: {sql}: {e}");
                                failures.fetch_add(1, Ordering::Relaxed);
                                return;
                            }
                        }
                    }
                    let _ = conn.disconnect().await;
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("client task");
        }
    });
    let own: Vec<(String, f64)> = [
        "view_names",
        "view_definition",
        "table_effects",
        "privileges",
        "account",
    ]
    .iter()
    .map(|k| {
        (
            k.to_string(),
            relay.metric(&format!("sqlfleet_relay_own_queries_total{{kind=\"{k}\"}}")),
        )
    })
    .collect();
    drop(relay);
    let n = statements.load(Ordering::Relaxed);
    let total_own: f64 = own.iter().map(|(_, v)| v).sum();
    let ratio = total_own / n.max(1) as f64;
    println!(
        "footprint: {dbs} databases x 10 views, 64 per-user clients, {seconds} s: {n} client statements, own queries {own:?}, {ratio:.5} per statement"
    );
    rt.block_on(async {
        // The server is alive, and what the relay's account (root) sent
        // that reads information_schema names its schema every time.
        let mut root = s.connect().await;
        let alive: Option<i64> = root
            .query_first("SELECT 1")
            .await
            .expect("the server is alive");
        assert_eq!(alive, Some(1));
        root.query_drop("SET GLOBAL general_log = 0")
            .await
            .expect("log off");
        let sent: Vec<String> = root
            .query(
                "SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log \
                 WHERE command_type = 'Query' AND user_host LIKE 'root[root]%' \
                 AND argument LIKE '%information_schema%'",
            )
            .await
            .expect("general log");
        let _ = root.query_drop("TRUNCATE mysql.general_log").await;
        let _ = root.disconnect().await;
        assert!(
            !sent.is_empty(),
            "the relay looked something up (the log works)"
        );
        let wide: Vec<&String> = sent
            .iter()
            .filter(|q| !(q.contains("TABLE_SCHEMA =") || q.contains("EVENT_OBJECT_SCHEMA =")))
            .filter(|q| !q.contains("USER_PRIVILEGES"))
            .collect();
        assert!(
            wide.is_empty(),
            "catalog-wide queries from the relay: {wide:?}"
        );
        // Bounded by time, not by statements or the catalog: per database
        // a statement is in or names, one list per TTL (2 s); per view
        // named (11 here), one definition per TTL; per table written,
        // its effects per TTL.
        let periods = seconds as f64 / 2.0 + 2.0;
        assert!(
            total_own <= 25.0 * periods,
            "own queries grow with the statements: {own:?} for {n} statements"
        );
        assert!(ratio < 0.01, "{ratio} own queries per client statement");
    });
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "every client statement succeeded"
    );
    assert!(n > 1000, "the clients ran: {n} statements");
}

/// The server's count of table definitions opened so far.
async fn opened_definitions(c: &mut mysql_async::Conn) -> u64 {
    let row: Option<(String, u64)> = c
        .query_first("SHOW GLOBAL STATUS LIKE 'Opened_table_definitions'")
        .await
        .expect("status");
    row.expect("Opened_table_definitions").1
}

/// Listing a database's views (after DDL through the relay, and once per
/// TTL) reads each name's type without opening its table:
/// information_schema.TABLES opened every table's definition in the
/// database, a cost that grew with it and that also counted the tables'
/// features (Feature_check_constraint, Feature_gis) on the relay's own
/// connection, where a client's FLUSH STATUS could not see them
/// (mysql-test's main.features).
#[test]
fn listing_a_databases_views_opens_none_of_its_tables() {
    let s = sqlfleet_testkit::server_with(&[]);
    let relay = common::relay::start_relay(&s, &["--pool-max", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut root = s.connect().await;
        let mut ddl = String::from("CREATE DATABASE fp_many;");
        for t in 0..60 {
            ddl.push_str(&format!(
                "CREATE TABLE fp_many.t{t} (a INT CHECK (a > 5), g POINT);"
            ));
        }
        ddl.push_str("CREATE VIEW fp_many.v AS SELECT 1 AS one; FLUSH TABLES;");
        root.query_drop(ddl).await.expect("catalog");
        let before = opened_definitions(&mut root).await;
        let mut c = common::relay::app(relay.port, "app-pw", Some("fp_many"))
            .connect(Duration::from_secs(5))
            .await
            .expect("connect via relay");
        // A statement in the database lists its views; DDL through the
        // relay makes the next one list them again.
        c.query_drop("SELECT one FROM v").await.expect("read");
        c.query_drop("CREATE TABLE t_new (a INT)")
            .await
            .expect("ddl");
        c.query_drop("SELECT one FROM v").await.expect("read");
        let _ = c.disconnect().await;
        let opened = opened_definitions(&mut root).await - before;
        let _ = root.disconnect().await;
        assert!(
            relay.metric("sqlfleet_relay_own_queries_total{kind=\"view_names\"}") >= 2.0,
            "the relay listed the database's views"
        );
        // The view's definition, t_new's, and the statements' own.
        assert!(
            opened < 10,
            "{opened} table definitions opened for two statements in a database of 60 tables"
        );
    });
}
