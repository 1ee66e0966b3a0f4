//! Loading into a node of a real 3-node Galera cluster (testkit's
//! `galera()`). A file whose tables include MyISAM or Aria ones (the
//! generator's non-transactional seeds) is refused before anything runs:
//! nothing of it reaches any node. A file of InnoDB tables loads into
//! node2 and every node then equals what the stock client made of the
//! same file on node2 (the same node: Galera gives each node its own
//! AUTO_INCREMENT offset).

mod common;

use sqlfleet_load::LoadError;

/// The generator's seeds, split by whether they make a table that does
/// not roll back; neither kind may need --continue-on-error.
fn seeds() -> (Vec<u64>, Vec<u64>) {
    let (mut nontx, mut dumps, mut files) = (Vec::new(), Vec::new(), Vec::new());
    for seed in 0..400u64 {
        let g = common::gen::generate(seed);
        if g.failing {
            continue;
        }
        if g.nontx && nontx.len() < 3 {
            nontx.push(seed);
        } else if !g.nontx && g.dump && dumps.len() < 2 {
            // Dumps load in parallel; other files in order.
            dumps.push(seed);
        } else if !g.nontx && !g.dump && files.is_empty() {
            files.push(seed);
        }
    }
    dumps.extend(files);
    (nontx, dumps)
}

/// A runtime and a connection to node `node` (0-based) of the cluster.
fn node_conn(
    g: &sqlfleet_testkit::TestServer,
    node: usize,
) -> (tokio::runtime::Runtime, mysql_async::Conn) {
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let c = rt.block_on(async {
        g.sandbox
            .target(&g.sandbox.meta.nodes[node])
            .expect("target")
            .connect(std::time::Duration::from_secs(5))
            .await
            .expect("node")
    });
    (rt, c)
}

fn databases(g: &sqlfleet_testkit::TestServer, node: usize, like: &str) -> Vec<String> {
    use mysql_async::prelude::Queryable;
    let (rt, mut c) = node_conn(g, node);
    rt.block_on(c.exec(
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE ?",
        (like,),
    ))
    .expect("schemata")
}

/// The test options for loading `file` into database `db` of node2.
fn on_node2(
    g: &sqlfleet_testkit::TestServer,
    db: &str,
    file: &std::path::Path,
) -> sqlfleet_load::LoadOptions {
    let mut opts = common::options(g, db, file);
    opts.target = g
        .sandbox
        .target(&g.sandbox.meta.nodes[1])
        .expect("node2")
        .with_database(Some(db));
    opts
}

/// One number a query returns on node `node` (0-based).
fn count_on(g: &sqlfleet_testkit::TestServer, node: usize, sql: &str) -> u64 {
    use mysql_async::prelude::Queryable;
    let (rt, mut c) = node_conn(g, node);
    let v: Option<u64> = rt.block_on(c.query_first(sql)).expect("count");
    v.unwrap_or(0)
}

/// Wait until `sql` answers `want` on node `node` (0-based): Galera
/// applies a write set on the other nodes before the writer's commit
/// returns, but a read there may start before it is applied (the loads
/// below failed once, on a busy machine, with node 2 behind node 1).
fn wait_on(g: &sqlfleet_testkit::TestServer, node: usize, sql: &str, want: u64) {
    use mysql_async::prelude::Queryable;
    let t0 = std::time::Instant::now();
    loop {
        // A table the writer made may not be on this node yet either
        // (1146 on node 1 once, on a fresh machine): asked again.
        let (rt, mut c) = node_conn(g, node);
        let got = match rt.block_on(c.query_first::<u64, _>(sql)) {
            Ok(v) => v.unwrap_or(0).to_string(),
            Err(mysql_async::Error::Server(e)) if matches!(e.code, 1146 | 1049) => e.message,
            Err(e) => panic!("node{}: `{sql}`: {e}", node + 1),
        };
        if got == want.to_string() {
            return;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "node{}: `{sql}` is {got}, not {want}, after 30 s",
            node + 1
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Wait until node 2 has database `db` (created through node 1).
fn on_node2_too(g: &sqlfleet_testkit::TestServer, db: &str) {
    let sql =
        format!("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{db}'");
    wait_on(g, 1, &sql, 1);
}

#[test]
fn a_galera_node_refuses_tables_it_would_not_replicate_and_loads_innodb_identically_on_every_node()
{
    let g = sqlfleet_testkit::galera();
    let (nontx, innodb) = seeds();
    assert!(
        !nontx.is_empty() && !innodb.is_empty(),
        "{nontx:?} {innodb:?}"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let node2 = &g.sandbox.meta.nodes[1];
    for seed in nontx {
        let file = dir.path().join(format!("nontx{seed}.sql"));
        std::fs::write(&file, common::gen::generate(seed).text).expect("write");
        let db = format!("gal_refused_{seed}");
        let mut opts = common::options(g, &db, &file);
        opts.target = g.sandbox.target(node2).expect("t").with_database(None);
        opts.database = Some(db.clone());
        match common::load(opts) {
            Err(LoadError::Refused { what, .. }) => {
                assert!(what.contains("Galera") && what.contains("line "), "{what}");
            }
            other => panic!("seed {seed}: a MyISAM/Aria file was not refused: {other:?}"),
        }
        for n in 0..3 {
            assert!(
                databases(g, n, &db).is_empty(),
                "seed {seed}: the refused load created {db} on node{}",
                n + 1
            );
        }
    }
    // A MyISAM table the target already has, and a file that only
    // inserts into it: no table statement for the file check to read, so
    // the server's word stops the rows before they are sent.
    common::query(
        g,
        "DROP DATABASE IF EXISTS gal_pre; CREATE DATABASE gal_pre; \
         CREATE TABLE gal_pre.t (id INT PRIMARY KEY) ENGINE=MyISAM",
    );
    // (On every node: the counts below read each; node 3 had not made
    // it yet once, 1146 on a busy machine.)
    for n in 0..3 {
        wait_on(
            g,
            n,
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'gal_pre' AND TABLE_NAME = 't'",
            1,
        );
    }
    let file = dir.path().join("rows_only.sql");
    std::fs::write(&file, "INSERT INTO t VALUES (1),(2),(3);\n").expect("write");
    let opts = on_node2(g, "gal_pre", &file);
    match common::load(opts) {
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("Galera") && e.contains("MYISAM"), "{e}");
        }
        Ok(s) => panic!("rows into a MyISAM table on a Galera node were loaded: {s:?}"),
    }
    for n in 0..3 {
        assert_eq!(
            count_on(g, n, "SELECT COUNT(*) FROM gal_pre.t"),
            0,
            "node{}",
            n + 1
        );
    }
    for seed in innodb {
        let file = dir.path().join(format!("innodb{seed}.sql"));
        std::fs::write(&file, common::gen::generate(seed).text).expect("write");
        let (ours, stock) = (format!("gal_ours_{seed}"), format!("gal_stock_{seed}"));
        common::query(
            g,
            &format!("CREATE DATABASE {ours}; CREATE DATABASE {stock}"),
        );
        on_node2_too(g, &ours);
        on_node2_too(g, &stock);
        let port = format!("--port={}", node2.port);
        let o = g.stock_client(&stock, &file, &["--protocol=TCP", &port]);
        assert!(
            o.status.success(),
            "seed {seed}: stock client: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let opts = on_node2(g, &ours, &file);
        let s = common::load(opts).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(s.complete && s.errors == 0, "seed {seed}: {s:?}");
        let rt = tokio::runtime::Runtime::new().expect("rt");
        // Galera applies on the other nodes before their commit returns
        // (virtually synchronous), but a read there may start before:
        // compare once every node has what node2 has.
        let want =
            sqlfleet_testkit::auto_increment_aside(rt.block_on(g.fingerprint_node(1, &stock)));
        for n in 0..3 {
            let t0 = std::time::Instant::now();
            loop {
                let got = sqlfleet_testkit::auto_increment_aside(
                    rt.block_on(g.fingerprint_node(n, &ours)),
                );
                match common::first_difference(&want, &got) {
                    None => break,
                    Some(d) if t0.elapsed() > std::time::Duration::from_secs(20) => {
                        panic!(
                            "seed {seed}: node{} differs from the stock client's load:\n{d}",
                            n + 1
                        )
                    }
                    Some(_) => std::thread::sleep(std::time::Duration::from_millis(200)),
                }
            }
        }
    }
}

/// `--skip-binlog` on a node of MariaDB's Galera: the node's own binary
/// log does not get the rows, the cluster still does (MariaDB replicates
/// a write set whatever `sql_log_bin` says), so every node has them.
#[test]
fn skip_binlog_on_a_mariadb_galera_node_still_reaches_every_node() {
    let g = sqlfleet_testkit::galera();
    let dir = tempfile::tempdir().expect("tmp");
    let rows: Vec<String> = (1..=500).map(|i| format!("({i},'r{i}')")).collect();
    let file = dir.path().join("skip.sql");
    std::fs::write(
        &file,
        format!(
            "CREATE TABLE `t` (`id` int PRIMARY KEY, `v` varchar(10)) ENGINE=InnoDB;\nINSERT INTO `t` VALUES {};\n",
            rows.join(",")
        ),
    )
    .expect("write");
    common::query(
        g,
        "DROP DATABASE IF EXISTS gal_skip; CREATE DATABASE gal_skip",
    );
    on_node2_too(g, "gal_skip");
    let mut opts = on_node2(g, "gal_skip", &file);
    opts.binlog = sqlfleet_load::Binlog::Skip;
    let s = common::load(opts).unwrap_or_else(|e| panic!("{e}"));
    assert!(s.complete && s.rows == 500 && s.binlog_skipped, "{s:?}");
    for n in 0..3 {
        wait_on(g, n, "SELECT COUNT(*) FROM gal_skip.t", 500);
    }
}
