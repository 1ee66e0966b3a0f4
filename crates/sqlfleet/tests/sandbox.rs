//! The sandbox against real mariadbd: CLI life cycle, replication, errors.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{assert_setup_error, run_in, stderr, stdout};
use mysql_async::prelude::Queryable;

/// Destroys every sandbox under a home when dropped, pass or fail.
struct Home(tempfile::TempDir);

impl Home {
    fn new() -> Home {
        Home(tempfile::tempdir().expect("tempdir"))
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = run_in(self.path(), &["sandbox", "destroy", "--all"]);
    }
}

fn free_port_block(n: u16) -> u16 {
    // n free ports in a row below the kernel's ephemeral range (32768 and
    // up), none of them handed to another test of this process: tests run
    // at once, and a block that overlaps another test's (whose servers are
    // not listening yet) would collide. Below that range no client
    // connection's own port can take one while a test's server is stopped
    // (a restart found its port "in use" by someone's outgoing connection).
    static TAKEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut seed = std::process::id() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    loop {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let p = 20_000 + ((seed >> 33) % 12_000) as u16;
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        if p + n < 32_768
            && (0..n).all(|i| !taken.contains(&(p + i)))
            && (0..n).all(|i| TcpListener::bind(("127.0.0.1", p + i)).is_ok())
        {
            taken.extend((0..n).map(|i| p + i));
            return p;
        }
    }
}

#[test]
fn up_list_down_up_destroy() {
    let home = Home::new();
    let port = free_port_block(3);
    let ps = port.to_string();
    let o = run_in(
        home.path(),
        &[
            "sandbox",
            "up",
            "--name",
            "life",
            "--port",
            &ps,
            "--replicas",
            "2",
        ],
    );
    assert!(o.status.success(), "up: {}", common::stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("created and started"), "{out}");
    assert!(out.contains(&format!("127.0.0.1:{port}")), "{out}");

    // The defaults file works with the stock client, and the password file is private.
    let cnf = home.path().join("sandboxes/life/client.cnf");
    let mode = |p: &Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).expect("stat").permissions())
            & 0o777
    };
    assert_eq!(mode(&cnf), 0o600);
    assert_eq!(mode(&home.path().join("sandboxes/life/root.pw")), 0o600);
    let q = std::process::Command::new("mariadb")
        .arg(format!("--defaults-file={}", cnf.display()))
        .args([
            "-N",
            "-e",
            "SELECT @@port, @@bind_address, @@log_bin, @@gtid_strict_mode",
        ])
        .output()
        .expect("mariadb client (apt-get install mariadb-client)");
    assert_eq!(
        String::from_utf8_lossy(&q.stdout).trim(),
        format!("{port}\t127.0.0.1\t1\t1")
    );

    let o = run_in(home.path(), &["sandbox", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let nodes = v.as_array().expect("array");
    assert_eq!(nodes.len(), 3);
    for n in nodes {
        assert_eq!(n["running"], true, "{n}");
    }
    for r in &nodes[1..] {
        assert_eq!(r["replication"]["io_running"], "Yes", "{r}");
        assert_eq!(r["replication"]["sql_running"], "Yes", "{r}");
    }
    let table = stdout(&run_in(home.path(), &["sandbox", "list"]));
    assert!(table.contains("node3") && table.contains("ok, "), "{table}");
    // kill -9 of a replica: listed as crashed with its stale pid, not as
    // cleanly stopped.
    let victim = nodes[2]["pid"].as_i64().expect("pid") as i32;
    // SAFETY: kill(2) of a server process this test started.
    unsafe {
        libc::kill(victim, libc::SIGKILL);
    }
    let t0 = Instant::now();
    loop {
        let table = stdout(&run_in(home.path(), &["sandbox", "list"]));
        if table.contains(&format!("crashed (stale pid {victim})")) {
            break;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(10), "{table}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    let o = run_in(home.path(), &["sandbox", "down", "--all"]);
    assert!(o.status.success());
    assert!(
        stdout(&o).contains("stopped (node2, node1)"),
        "{}",
        stdout(&o)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&run_in(home.path(), &["sandbox", "list", "--json"]).stdout)
            .expect("json");
    assert!(
        v.as_array()
            .expect("array")
            .iter()
            .all(|n| n["running"] == false),
        "{v}"
    );
    // A clean stop is "stopped" (the server removes its pid file); the
    // node that died stays "crashed" until it runs again.
    let table = stdout(&run_in(home.path(), &["sandbox", "list"]));
    for l in table.lines().filter(|l| l.starts_with("life ")) {
        let crashed = l.contains("crashed (stale pid");
        assert_eq!(crashed, l.contains(" node3 "), "{table}");
        assert!(crashed || l.contains(" stopped "), "{table}");
    }

    // Restarting an existing sandbox: fast path, replication resumes.
    let t = Instant::now();
    let o = run_in(home.path(), &["sandbox", "up", "--name", "life"]);
    eprintln!(
        "restart of an existing 3-node sandbox took {:?}",
        t.elapsed()
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(stdout(&o).contains("started in"), "{}", stdout(&o));
    let o = run_in(
        home.path(),
        &["sandbox", "up", "--name", "life", "--replicas", "1"],
    );
    assert_setup_error(&o, "has 2 replicas");

    let o = run_in(home.path(), &["sandbox", "destroy", "--name", "life"]);
    assert!(o.status.success());
    assert!(!home.path().join("sandboxes/life").exists());
}

#[test]
fn env_exports_reach_the_server_without_printing_the_password() {
    let home = Home::new();
    let port = free_port_block(1).to_string();
    assert!(run_in(
        home.path(),
        &["sandbox", "up", "--name", "e", "--port", &port]
    )
    .status
    .success());
    let o = run_in(home.path(), &["sandbox", "env", "--name", "e"]);
    let exports = stdout(&o);
    let pw = std::fs::read_to_string(home.path().join("sandboxes/e/root.pw")).expect("pw");
    assert!(!exports.contains(pw.trim()), "password printed");
    let script = format!("{exports}\nmariadb -uroot -N -e 'SELECT 40+2'");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .output()
        .expect("sh");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "42",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn replicas_apply_a_primary_write() {
    let srv = sqlfleet_testkit::replicated();
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let mut p = srv.connect().await;
        p.query_drop("CREATE DATABASE IF NOT EXISTS repl_t; CREATE TABLE IF NOT EXISTS repl_t.x (id INT PRIMARY KEY, v VARCHAR(10))")
            .await
            .expect("ddl");
        p.query_drop("INSERT INTO repl_t.x VALUES (1, 'hello')").await.expect("insert");
        let t0 = Instant::now();
        for i in 1..=2 {
            let mut r = srv.replica_target(i).connect(Duration::from_secs(5)).await.expect("replica");
            loop {
                let v: Option<String> = r.query_first("SELECT v FROM repl_t.x WHERE id = 1").await.unwrap_or(None);
                if v.as_deref() == Some("hello") {
                    break;
                }
                assert!(t0.elapsed() < Duration::from_secs(30), "replica{i} never got the row");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let ro: i64 = r.query_first("SELECT @@read_only").await.expect("q").expect("row");
            assert_eq!(ro, 1);
        }
        eprintln!("write visible on both replicas after {:?}", t0.elapsed());
    });
}

/// A sandbox of another server version (`--mariadbd`, here MariaDB 11.4
/// beside the system's 10.11) is made with that server's install-db and
/// keeps it: a later `up` starts the same server whatever the
/// environment says, and asking for another is refused with nothing
/// changed (a data directory is never handed to another version).
#[test]
fn a_sandbox_keeps_the_server_version_it_was_made_with() {
    let home = Home::new();
    let newer = sqlfleet_testkit::newer_mariadbd();
    let newer = newer.to_str().expect("utf8 path");
    let port = free_port_block(1).to_string();
    let up = |extra: &[&str], env: Option<&str>| {
        let mut cmd = common::sqlfleet();
        cmd.env("SQLFLEET_HOME", home.path());
        cmd.env_remove("SQLFLEET_MARIADBD");
        if let Some(e) = env {
            cmd.env("SQLFLEET_MARIADBD", e);
        }
        cmd.args(["sandbox", "up", "--name", "v", "--port", &port])
            .args(extra)
            .output()
            .expect("run")
    };
    let o = up(&["--mariadbd", newer], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(": 11.4."), "{}", stdout(&o));
    let table = stdout(&run_in(home.path(), &["sandbox", "list"]));
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("v ") && l.contains(" 11.4.")),
        "list names the version: {table}"
    );
    let cnf = home.path().join("sandboxes/v/client.cnf");
    assert!(client_sql(&cnf, &[], "SELECT VERSION()").starts_with("11.4."));
    // Its own files, not the prefix it was compiled for: another
    // language's messages load (before: 1231 for any locale but en_US).
    assert_eq!(
        client_sql(
            &cnf,
            &[],
            "SET lc_time_names = 'de_DE'; SELECT DATE_FORMAT('2024-03-01', '%W')"
        ),
        "Freitag"
    );
    // Stopped and started again with the environment naming the system's.
    let o = run_in(home.path(), &["sandbox", "down", "--name", "v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = up(&[], Some("/usr/sbin/mariadbd"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(client_sql(&cnf, &[], "SELECT VERSION()").starts_with("11.4."));
    // Another server asked for by name: refused, the sandbox as it was.
    let o = up(&["--mariadbd", "/usr/sbin/mariadbd"], None);
    assert_setup_error(&o, "sandbox 'v' was made with ");
    assert!(stderr(&o).contains("destroy the sandbox to make it with another"));
    assert!(client_sql(&cnf, &[], "SELECT VERSION()").starts_with("11.4."));
    // A path that is no server, for a new sandbox.
    let o = run_in(
        home.path(),
        &[
            "sandbox",
            "up",
            "--name",
            "w",
            "--mariadbd",
            "/nonexistent/mariadbd",
        ],
    );
    assert_setup_error(&o, "/nonexistent/mariadbd: no such mariadbd");
}

#[test]
fn port_in_use_is_a_one_line_error() {
    let home = Home::new();
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port().to_string();
    let o = run_in(
        home.path(),
        &["sandbox", "up", "--name", "p", "--port", &port],
    );
    assert_setup_error(&o, &format!("port {port} is in use"));
}

#[test]
fn unknown_sandbox_is_a_one_line_error() {
    let home = Home::new();
    for args in [
        &["sandbox", "down", "--name", "ghost"][..],
        &["sandbox", "env", "--name", "ghost"],
        &["load", "--sandbox", "ghost", "x.sql"],
    ] {
        assert_setup_error(&run_in(home.path(), args), "no sandbox named 'ghost'");
    }
}

#[test]
fn missing_mariadbd_names_the_package() {
    let home = Home::new();
    let o = common::sqlfleet()
        .env("SQLFLEET_HOME", home.path())
        .env("SQLFLEET_MARIADBD", "/nonexistent/mariadbd")
        .args(["sandbox", "up", "--name", "m"])
        .output()
        .expect("run");
    assert_setup_error(&o, "apt-get install mariadb-server");
}

#[test]
fn malformed_option_file_is_a_one_line_error() {
    let home = Home::new();
    let cnf = home.path().join("bad.cnf");
    std::fs::write(&cnf, "[client]\nport = 33o6\n").expect("write");
    let o = run_in(
        home.path(),
        &["query", "--defaults-file", cnf.to_str().expect("utf8")],
    );
    assert_setup_error(&o, "bad.cnf:2: option 'port': '33o6' is not a port number");
    std::fs::write(&cnf, "user=x\n").expect("write");
    let o = run_in(
        home.path(),
        &["query", "--defaults-file", cnf.to_str().expect("utf8")],
    );
    assert_setup_error(
        &o,
        "bad.cnf:1: option 'user' appears before any [group] header",
    );
}

#[test]
fn usage_errors_exit_1() {
    let home = Home::new();
    let o = run_in(home.path(), &["sandbox", "frobnicate"]);
    assert_eq!(o.status.code(), Some(1));
    let o = run_in(
        home.path(),
        &["relay", "--backend", "x:1", "--shared-account"],
    );
    assert_eq!(o.status.code(), Some(1), "a shared account without clients");
}

#[test]
fn promote_makes_a_replica_the_primary_and_the_rest_follow() {
    let home = Home::new();
    let port = free_port_block(3).to_string();
    let o = run_in(
        home.path(),
        &[
            "sandbox",
            "up",
            "--name",
            "pr",
            "--port",
            &port,
            "--replicas",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    // Refused: the primary itself, and a node that does not exist.
    for (node, msg) in [
        ("node1", "already the primary"),
        ("ghost", "no node 'ghost'"),
    ] {
        let o = run_in(
            home.path(),
            &["sandbox", "promote", "--name", "pr", "--node", node],
        );
        assert_eq!(o.status.code(), Some(1));
        assert!(common::stderr(&o).contains(msg), "{}", common::stderr(&o));
    }
    let o = run_in(
        home.path(),
        &["sandbox", "promote", "--name", "pr", "--node", "node3"],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o).contains("node3 is the primary"),
        "{}",
        common::stdout(&o)
    );
    // The default client file now reaches replica2, writable; the others follow it.
    let cnf = run_in(
        home.path(),
        &["sandbox", "env", "--name", "pr", "--defaults-file"],
    );
    let cnf = common::stdout(&cnf).trim().to_string();
    let sql = |cnf: &str, q: &str| {
        let o = std::process::Command::new("mariadb")
            .arg(format!("--defaults-file={cnf}"))
            .args(["-N", "-B", "-e", q])
            .output()
            .expect("mariadb");
        assert!(o.status.success(), "{}", common::stderr(&o));
        common::stdout(&o).trim().to_string()
    };
    let first: u16 = port.parse().expect("port");
    assert_eq!(
        sql(&cnf, "SELECT @@port, @@read_only"),
        format!("{}\t0", first + 2)
    );
    sql(
        &cnf,
        "CREATE DATABASE pr_t; CREATE TABLE pr_t.x (id INT); INSERT INTO pr_t.x VALUES (7)",
    );
    for node in ["node1", "node2"] {
        let o = run_in(
            home.path(),
            &[
                "sandbox",
                "env",
                "--name",
                "pr",
                "--node",
                node,
                "--defaults-file",
            ],
        );
        let cnf = common::stdout(&o).trim().to_string();
        let t0 = std::time::Instant::now();
        loop {
            let o = std::process::Command::new("mariadb")
                .arg(format!("--defaults-file={cnf}"))
                .args([
                    "-N",
                    "-B",
                    "-e",
                    "SELECT @@read_only, (SELECT COUNT(*) FROM pr_t.x)",
                ])
                .output()
                .expect("mariadb");
            if common::stdout(&o).trim() == "1\t1" {
                break;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "{node}: {}",
                common::stderr(&o)
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    let o = run_in(home.path(), &["sandbox", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&common::stdout(&o)).expect("json");
    let roles: Vec<(String, String)> = v
        .as_array()
        .expect("array")
        .iter()
        .filter(|n| n["sandbox"] == "pr")
        .map(|n| {
            (
                n["node"].as_str().unwrap_or_default().into(),
                n["role"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    assert!(
        roles.contains(&("node3".into(), "primary".into())),
        "{roles:?}"
    );
    assert!(
        roles.contains(&("node1".into(), "replica".into())),
        "{roles:?}"
    );
    assert!(run_in(home.path(), &["sandbox", "destroy", "--name", "pr"])
        .status
        .success());
}

/// Writes committed on the primary right before a promotion are on the
/// new primary and the other replica afterwards (the promotion waits for
/// the candidate to apply them), and the next write replicates.
#[test]
fn promote_keeps_every_committed_write() {
    let home = Home::new();
    let port = free_port_block(3).to_string();
    let o = run_in(
        home.path(),
        &[
            "sandbox",
            "up",
            "--name",
            "pk",
            "--port",
            &port,
            "--replicas",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let env = run_in(
        home.path(),
        &["sandbox", "env", "--name", "pk", "--defaults-file"],
    );
    let primary_cnf = common::stdout(&env).trim().to_string();
    let cnf_dir = std::path::Path::new(&primary_cnf)
        .parent()
        .expect("dir")
        .to_path_buf();
    let sql = |cnf: &std::path::Path, q: &str| {
        let o = std::process::Command::new("mariadb")
            .arg(format!("--defaults-file={}", cnf.display()))
            .args(["-N", "-B", "-e", q])
            .output()
            .expect("mariadb");
        assert!(o.status.success(), "{}", common::stderr(&o));
        common::stdout(&o).trim().to_string()
    };
    let primary = std::path::PathBuf::from(&primary_cnf);
    // One big transaction, committed just before the promotion starts.
    sql(
        &primary,
        "CREATE DATABASE pk_t; CREATE TABLE pk_t.x (id INT PRIMARY KEY) ENGINE=InnoDB; \
         USE pk_t; INSERT INTO pk_t.x SELECT seq FROM seq_1_to_300000",
    );
    let o = run_in(
        home.path(),
        &["sandbox", "promote", "--name", "pk", "--node", "node3"],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stdout(&o)
            .contains("had applied everything of the old primary's, up to GTID position "),
        "{}",
        common::stdout(&o)
    );
    // replica2 is now the primary (client.cnf follows it).
    let new_primary = cnf_dir.join("client.cnf");
    assert_eq!(sql(&new_primary, "SELECT COUNT(*) FROM pk_t.x"), "300000");
    sql(&new_primary, "INSERT INTO pk_t.x VALUES (300001)");
    // The old primary and replica1 follow and end with every row.
    for other in ["client-node1.cnf", "client-node2.cnf"] {
        let cnf = cnf_dir.join(other);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let n = sql(&cnf, "SELECT COUNT(*) FROM pk_t.x");
            if n == "300001" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{other} has {n} rows, not 300001; replication: {}",
                sql(&cnf, "SHOW SLAVE STATUS")
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    let _ = run_in(home.path(), &["sandbox", "destroy", "--name", "pk"]);
}

/// `destroy` asks on a terminal before deleting data: "n" keeps the
/// sandbox (exit 1), `--yes` and a non-terminal stdin do not ask.
#[test]
fn destroy_asks_on_a_terminal() {
    let home = tempfile::tempdir().expect("tmp");
    let fake = |name: &str| {
        let dir = home.path().join("sandboxes").join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join("sandbox.toml"),
            format!("name = \"{name}\"\noptions = []\n\n[[nodes]]\nname = \"primary\"\nport = 1\nserver_id = 1\nrole = \"primary\"\n"),
        )
        .expect("meta");
        dir
    };
    let dir = fake("keepme");
    let bin = env!("CARGO_BIN_EXE_sqlfleet");
    // A terminal for the command (script(1)), answering "n".
    let mut child = std::process::Command::new("script")
        .args([
            "-qec",
            &format!("{bin} sandbox destroy --name keepme"),
            "/dev/null",
        ])
        .env("SQLFLEET_HOME", home.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("script(1) from bsdutils");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ = stdin.write_all(b"n\n");
    }
    let o = child.wait_with_output().expect("wait");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("[y/N]") && out.contains("not destroyed"),
        "{out}"
    );
    assert!(dir.exists(), "the sandbox was deleted without a yes");

    let o = common::run_in(
        home.path(),
        &["sandbox", "destroy", "--name", "keepme", "--yes"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!dir.exists());
    let dir = fake("scripted");
    let o = common::sqlfleet()
        .env("SQLFLEET_HOME", home.path())
        .args(["sandbox", "destroy", "--name", "scripted"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!dir.exists());
}

/// The sandbox's rough edges: a refused `--option` is said at once and
/// saved nowhere (no directory left behind); options for a running sandbox
/// need `--restart`; an over-long name says "too long"; a replica whose SQL
/// thread stopped on an error makes `up` report that error at once.
#[test]
fn sandbox_edges_are_refused_clearly_and_leave_nothing_behind() {
    let home = Home::new();
    let o = run_in(
        home.path(),
        &[
            "sandbox",
            "up",
            "--name",
            "bad",
            "--option",
            "no_such_option=1",
        ],
    );
    assert_setup_error(&o, "--option no_such_option=1: the server refuses it");
    assert!(
        !home.path().join("sandboxes/bad").exists(),
        "a failed up left its directory"
    );
    let long = "n".repeat(70);
    assert_setup_error(
        &run_in(home.path(), &["sandbox", "up", "--name", &long]),
        "is too long (70 characters; at most 64)",
    );

    let port = free_port_block(2);
    let ps = port.to_string();
    let o = run_in(
        home.path(),
        &[
            "sandbox",
            "up",
            "--name",
            "e",
            "--port",
            &ps,
            "--replicas",
            "1",
        ],
    );
    assert!(o.status.success(), "up: {}", common::stderr(&o));
    let meta = home.path().join("sandboxes/e/sandbox.toml");
    let before = std::fs::read_to_string(&meta).expect("meta");
    // A good option for a running sandbox needs --restart; a bad one is
    // refused outright; neither is saved.
    for (option, said) in [
        ("max_connections=77", "add --restart"),
        ("no_such_option=1", "the server refuses it"),
    ] {
        let o = run_in(
            home.path(),
            &["sandbox", "up", "--name", "e", "--option", option],
        );
        assert_setup_error(&o, said);
        assert_eq!(std::fs::read_to_string(&meta).expect("meta"), before);
    }

    // Break replication: a row on the replica that the primary then writes too.
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let sb = sqlfleet_sandbox::Sandbox::open(home.path(), "e").expect("open");
    rt.block_on(async {
        let mut p = sb
            .target(sb.meta.primary())
            .expect("t")
            .connect(Duration::from_secs(5))
            .await
            .expect("primary");
        p.query_drop("CREATE DATABASE d").await.expect("db");
        p.query_drop("CREATE TABLE d.t (id INT PRIMARY KEY)")
            .await
            .expect("t");
        let replica = sb.meta.replicas().next().expect("replica").clone();
        let mut r = sb
            .target(&replica)
            .expect("t")
            .connect(Duration::from_secs(5))
            .await
            .expect("replica");
        let t0 = Instant::now();
        while r.query_drop("INSERT INTO d.t VALUES (1)").await.is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "table never replicated"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        p.query_drop("INSERT INTO d.t VALUES (1)")
            .await
            .expect("dup");
        // The replica's SQL thread stops on the duplicate key.
        let t0 = Instant::now();
        loop {
            let row: Option<mysql_async::Row> =
                r.query_first("SHOW SLAVE STATUS").await.expect("status");
            let sql: Option<String> = row.and_then(|r| r.get("Slave_SQL_Running"));
            if sql.as_deref() == Some("No") {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "replication never broke"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    // `up` on the running sandbox: the stopped replica is reported at once.
    let t0 = Instant::now();
    let o = run_in(home.path(), &["sandbox", "up", "--name", "e"]);
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("replication stopped (IO Yes, SQL No)"),
        "{}",
        common::stderr(&o)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "the replication error was not reported at once"
    );
    let o = run_in(home.path(), &["sandbox", "destroy", "--name", "e", "--yes"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
}

/// Runs SQL on a node of sandbox `g` with the stock client; its output.
fn galera_sql(home: &Path, node: u32, sql: &str) -> String {
    let cnf = if node == 1 {
        home.join("sandboxes/g/client.cnf")
    } else {
        home.join(format!("sandboxes/g/client-node{node}.cnf"))
    };
    client_sql(&cnf, &[], sql)
}

/// Runs SQL with the stock client from an option file (and `extra`
/// arguments after it); its output, which must be a success.
fn client_sql(cnf: &Path, extra: &[&str], sql: &str) -> String {
    let o = std::process::Command::new("mariadb")
        .arg(format!("--defaults-file={}", cnf.display()))
        .args(extra)
        .args(["-N", "-B", "-e", sql])
        .output()
        .expect("mariadb");
    assert!(
        o.status.success(),
        "{cnf:?} {extra:?}: {sql}: {}",
        stderr(&o)
    );
    stdout(&o).trim().to_string()
}

fn kill_node(home: &Path, node: u32) {
    let pid_file = home.join(format!("sandboxes/g/node{node}/mariadbd.pid"));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid");
    // SAFETY: a signal to the pid the server wrote.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t0 = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "pid {pid} lives");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn galera_up(home: &Path) -> String {
    let o = run_in(home, &["sandbox", "up", "--name", "g"]);
    assert!(o.status.success(), "up: {}", stderr(&o));
    stdout(&o)
}

/// The rows of `sandbox list --json`, a node each.
fn listed(home: &Path) -> Vec<serde_json::Value> {
    let o = run_in(home, &["sandbox", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    v.as_array().expect("rows").clone()
}

/// The members' wsrep state from `sandbox list --json`.
fn galera_states(home: &Path) -> Vec<(String, String, u64)> {
    listed(home)
        .iter()
        .map(|r| {
            (
                r["node"].as_str().unwrap_or("").to_string(),
                r["galera"]["state"].as_str().unwrap_or("").to_string(),
                r["galera"]["cluster_size"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// A 3-node Galera cluster: made, written on one node and read on
/// another; a node killed -9 rejoins by incremental transfer (IST) with
/// what it missed; a clean full restart; and after every node is killed,
/// the restart bootstraps from the most advanced node, so no committed
/// write is lost.
#[test]
fn galera_cluster_up_kill_rejoin_restart_without_losing_a_write() {
    let home = Home::new();
    let h = home.path();
    // 3 SQL ports, then each node's gcomm, IST and SST ports.
    let port = free_port_block(12).to_string();
    let o = run_in(
        h,
        &[
            "sandbox", "up", "--name", "g", "--galera", "3", "--port", &port,
        ],
    );
    assert!(o.status.success(), "up: {}", stderr(&o));
    assert!(stdout(&o).contains("Galera member"), "{}", stdout(&o));
    let synced3 = |h: &Path| {
        let s = galera_states(h);
        assert_eq!(s.len(), 3, "{s:?}");
        for (n, state, size) in &s {
            assert_eq!((state.as_str(), *size), ("Synced", 3), "{n}: {s:?}");
        }
    };
    synced3(h);
    galera_sql(
        h,
        1,
        "CREATE DATABASE gt; CREATE TABLE gt.t (id INT PRIMARY KEY, node INT); INSERT INTO gt.t VALUES (1, 1)",
    );
    assert_eq!(galera_sql(h, 3, "SELECT COUNT(*) FROM gt.t"), "1");
    galera_sql(h, 3, "INSERT INTO gt.t VALUES (2, 3)");

    // kill -9 one node, write while it is away; it comes back by IST.
    kill_node(h, 2);
    galera_sql(h, 1, "INSERT INTO gt.t VALUES (3, 1), (4, 1)");
    let log = h.join("sandboxes/g/node2/error.log");
    let before = std::fs::read(&log).expect("log").len();
    galera_up(h);
    let tail = String::from_utf8_lossy(&std::fs::read(&log).expect("log")[before..]).into_owned();
    assert!(
        tail.contains("Receiving IST"),
        "node2 did not catch up by IST:\n{tail}"
    );
    assert!(
        !tail.contains("rsync SST completed"),
        "node2 was copied whole (SST) instead of IST"
    );
    assert_eq!(galera_sql(h, 2, "SELECT COUNT(*) FROM gt.t"), "4");
    synced3(h);

    // A clean full restart.
    let o = run_in(h, &["sandbox", "down", "--name", "g"]);
    assert!(o.status.success(), "{}", stderr(&o));
    galera_up(h);
    synced3(h);
    assert_eq!(galera_sql(h, 3, "SELECT COUNT(*) FROM gt.t"), "4");

    // node1 dies first; node2 and node3 go on; then they die too. node1
    // is behind: bootstrapping from it would lose rows 5..=7.
    kill_node(h, 1);
    galera_sql(h, 2, "INSERT INTO gt.t VALUES (5, 2), (6, 2), (7, 2)");
    kill_node(h, 2);
    kill_node(h, 3);
    galera_up(h);
    synced3(h);
    for n in 1..=3 {
        assert_eq!(
            galera_sql(h, n, "SELECT COUNT(*) FROM gt.t"),
            "7",
            "node{n}"
        );
    }

    // Two nodes killed: node1 is alone, outside a Primary component, and
    // refuses writes; `up` restarts the cluster from its most advanced node.
    kill_node(h, 2);
    kill_node(h, 3);
    let t0 = Instant::now();
    loop {
        let s = galera_states(h);
        if s.iter().any(|(n, _, size)| n == "node1" && *size == 1) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{s:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    galera_up(h);
    synced3(h);
    galera_sql(h, 3, "INSERT INTO gt.t VALUES (8, 3)");
    assert_eq!(galera_sql(h, 1, "SELECT COUNT(*) FROM gt.t"), "8");

    // env names each node; promote has no meaning here.
    let o = run_in(h, &["sandbox", "env", "--name", "g", "--node", "node3"]);
    assert!(
        stdout(&o).contains("sandboxes/g/client-node3.cnf"),
        "{}",
        stdout(&o)
    );
    let o = run_in(h, &["sandbox", "promote", "--name", "g", "--node", "node2"]);
    assert_setup_error(&o, "every member takes writes");
}

/// Every port of each member (SQL, gcomm, IST, SST) from `sandbox.toml`.
fn sandbox_ports(home: &Path, name: &str) -> Vec<u16> {
    let sb = sqlfleet_sandbox::Sandbox::open(home, name).expect("open");
    sb.meta
        .nodes
        .iter()
        .flat_map(|n| {
            std::iter::once(n.port).chain(n.galera.iter().flat_map(|g| [g.gcomm, g.ist, g.sst]))
        })
        .collect()
}

/// Two 3-node Galera sandboxes in two homes, started at once: each gets
/// its own SQL and cluster ports (before: the second failed with 'port
/// 4567 is in use', or could take the first's IST/SST ports, bound only
/// during a transfer); both clusters are Synced at size 3; destroyed, the
/// ports are free to reserve again.
#[test]
fn two_galera_sandboxes_in_two_homes_at_once() {
    let (a, b) = (Home::new(), Home::new());
    let registry = tempfile::tempdir().expect("tmp");
    let up = |home: &Path| {
        common::sqlfleet()
            .env("SQLFLEET_HOME", home)
            .env("SQLFLEET_PORT_REGISTRY", registry.path())
            .args(["sandbox", "up", "--name", "g", "--galera", "3"])
            .spawn()
            .expect("spawn")
    };
    let (ca, cb) = (up(a.path()), up(b.path()));
    for (c, h) in [(ca, a.path()), (cb, b.path())] {
        let o = c.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}: {}", h.display(), stderr(&o));
    }
    let (pa, pb) = (sandbox_ports(a.path(), "g"), sandbox_ports(b.path(), "g"));
    assert_eq!(pa.len(), 12, "{pa:?}");
    assert!(
        pa.iter().all(|p| !pb.contains(p)),
        "shared ports: {pa:?} and {pb:?}"
    );
    for h in [a.path(), b.path()] {
        let s = galera_states(h);
        assert!(
            s.len() == 3 && s.iter().all(|(_, st, n)| st == "Synced" && *n == 3),
            "{}: {s:?}",
            h.display()
        );
        let reserved = std::fs::read_dir(registry.path())
            .expect("registry")
            .count();
        assert!(reserved >= 24, "{reserved} ports reserved");
    }
    for h in [a.path(), b.path()] {
        let o = common::sqlfleet()
            .env("SQLFLEET_HOME", h)
            .env("SQLFLEET_PORT_REGISTRY", registry.path())
            .args(["sandbox", "destroy", "--name", "g", "--yes"])
            .output()
            .expect("destroy");
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let left = std::fs::read_dir(registry.path())
        .expect("registry")
        .count();
    assert_eq!(left, 0, "destroy released every port");
}

/// Name, role, port, what `list --json` says is not as sandbox.toml says,
/// and the port it replicates from (0: none), of a sandbox's nodes.
type NodeRow = (String, String, u16, Vec<String>, u64);
fn roles(home: &Path, name: &str) -> Vec<NodeRow> {
    listed(home)
        .iter()
        .filter(|r| r["sandbox"] == name)
        .map(|r| {
            let wrong = r["not_as_configured"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|w| w.as_str())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let port = r["port"].as_u64().unwrap_or(0) as u16;
            (
                r["node"].as_str().unwrap_or("").to_string(),
                r["role"].as_str().unwrap_or("").to_string(),
                port,
                wrong,
                r["replication"]["source_port"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// A promotion killed at each of its steps (the old primary fenced, the
/// candidate caught up, made writable, sandbox.toml saved, one replica
/// repointed) leaves a sandbox `list` says is not as configured, and the
/// next `up` repairs: the primary takes an ordinary account's writes,
/// every replica is read-only and replicates from it, and no committed
/// row is lost.
#[test]
fn a_promotion_killed_at_any_step_is_named_by_list_and_repaired_by_up() {
    let home = Home::new();
    let h = home.path();
    let port = free_port_block(3).to_string();
    let o = run_in(
        h,
        &[
            "sandbox",
            "up",
            "--name",
            "pk",
            "--port",
            &port,
            "--replicas",
            "2",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let cnf = h.join("sandboxes/pk/client.cnf");
    // An account without SUPER: read_only stops its writes, as an
    // application's.
    client_sql(
        &cnf,
        &[],
        "CREATE DATABASE pk; CREATE TABLE pk.t (id INT PRIMARY KEY); \
         CREATE USER app@'127.0.0.1' IDENTIFIED BY 'app-pw'; \
         GRANT SELECT, INSERT ON pk.* TO app@'127.0.0.1'",
    );
    let at = |p: u16, sql: &str| {
        client_sql(
            &cnf,
            &["--protocol=TCP", "-h127.0.0.1", &format!("-P{p}")],
            sql,
        )
    };
    let app_insert = |p: u16, id: u32| {
        let o = std::process::Command::new("mariadb")
            .args([
                "--no-defaults",
                "--protocol=TCP",
                "-h127.0.0.1",
                &format!("-P{p}"),
            ])
            .args([
                "-uapp",
                "-papp-pw",
                "-e",
                &format!("INSERT INTO pk.t VALUES ({id})"),
            ])
            .output()
            .expect("mariadb");
        assert!(
            o.status.success(),
            "app's write on port {p}: {}",
            stderr(&o)
        );
    };
    let mut rows = 0;
    for (i, point) in [
        "promote::old_primary_fenced",
        "promote::caught_up",
        "promote::new_primary_writable",
        "promote::meta_saved",
        "promote::replica_repointed",
    ]
    .into_iter()
    .enumerate()
    {
        let nodes = roles(h, "pk");
        let primary = nodes
            .iter()
            .find(|n| n.1 == "primary")
            .expect("a primary")
            .2;
        rows += 1;
        app_insert(primary, rows);
        let candidate = nodes
            .iter()
            .filter(|n| n.1 == "replica")
            .nth(i % 2)
            .expect("replica")
            .0
            .clone();
        let o = common::sqlfleet()
            .env("SQLFLEET_HOME", h)
            .env("SQLFLEET_FAILPOINTS", format!("{point}=kill@1"))
            .args(["sandbox", "promote", "--name", "pk", "--node", &candidate])
            .output()
            .expect("promote");
        assert_eq!(
            o.status.code(),
            None,
            "{point}: killed there: {}",
            stderr(&o)
        );
        let list = run_in(h, &["sandbox", "list"]);
        assert!(
            stdout(&list).contains("NOT AS sandbox.toml SAYS"),
            "{point}: list names what is wrong: {}",
            stdout(&list)
        );
        let o = run_in(h, &["sandbox", "up", "--name", "pk"]);
        assert!(o.status.success(), "{point}: up: {}", stderr(&o));
        assert!(stdout(&o).contains("repaired "), "{point}: {}", stdout(&o));
        let nodes = roles(h, "pk");
        for n in &nodes {
            assert!(n.3.is_empty(), "{point}: {} after up: {:?}", n.0, n.3);
        }
        let primary = nodes
            .iter()
            .find(|n| n.1 == "primary")
            .expect("a primary")
            .2;
        assert_eq!(at(primary, "SELECT @@read_only"), "0", "{point}");
        rows += 1;
        app_insert(primary, rows);
        for n in nodes.iter().filter(|n| n.1 == "replica") {
            assert_eq!(at(n.2, "SELECT @@read_only"), "1", "{point}: {}", n.0);
            assert_eq!(n.4, u64::from(primary), "{point}: {} replicates from", n.0);
            let t0 = Instant::now();
            loop {
                let have = at(n.2, "SELECT COUNT(*) FROM pk.t");
                if have == rows.to_string() {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(60),
                    "{point}: {} has {have} of {rows} rows",
                    n.0
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        assert_eq!(
            at(primary, "SELECT COUNT(*) FROM pk.t"),
            rows.to_string(),
            "{point}"
        );
    }
}

/// The mariadbd processes whose option file lies under `dir`.
fn servers_under(dir: &Path) -> Vec<String> {
    let needle = format!("--defaults-file={}/", dir.display());
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| {
            let cmd = std::fs::read(e.ok()?.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(&needle).then_some(cmd)
        })
        .collect()
}

/// Sends `sig` to a running `sqlfleet` after `after`; its output.
fn signalled(mut cmd: std::process::Command, after: Duration, sig: i32) -> std::process::Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(after);
    // SAFETY: a signal to our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
    child.wait_with_output().expect("wait")
}

/// Ctrl-C or SIGTERM at seeded instants of a new sandbox's `up` (drawn
/// over the time an `up` takes here) stops it with 130 or 143 and leaves
/// nothing: no server, no directory, the name and ports free for the next
/// `up`, which makes a whole sandbox. A signal to `promote` while the
/// candidate catches up changes nothing (the primary takes writes, no
/// node is left not as configured); one after the candidate caught up
/// finishes the switch. Seeds: SQLFLEET_SANDBOX_SIGNAL_SEED (default 1),
/// SQLFLEET_SANDBOX_SIGNALS instants (default 4).
#[test]
fn signals_at_seeded_instants_leave_up_and_promote_whole_or_undone() {
    use rand::{Rng, SeedableRng};
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let seed = env("SQLFLEET_SANDBOX_SIGNAL_SEED", 1);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let home = Home::new();
    let h = home.path();
    let up = |name: &str| {
        let mut c = common::sqlfleet();
        let port = free_port_block(3).to_string();
        c.env("SQLFLEET_HOME", h).args([
            "sandbox",
            "up",
            "--name",
            name,
            "--port",
            &port,
            "--replicas",
            "2",
        ]);
        c
    };
    let t0 = Instant::now();
    let o = up("whole").output().expect("up");
    let took = t0.elapsed();
    assert!(o.status.success(), "{}", stderr(&o));
    for i in 0..env("SQLFLEET_SANDBOX_SIGNALS", 4) {
        let name = format!("s{i}");
        let at = Duration::from_secs_f64(rng.gen_range(0.0..took.as_secs_f64()));
        let sig = if rng.gen_bool(0.5) {
            libc::SIGINT
        } else {
            libc::SIGTERM
        };
        let why =
            format!("seed {seed}, up {name}, signal {sig} after {at:?} (an up takes {took:?})");
        let t1 = Instant::now();
        let o = signalled(up(&name), at, sig);
        eprintln!("{why}: exit {:?} in {:?}", o.status.code(), t1.elapsed());
        let dir = h.join("sandboxes").join(&name);
        match o.status.code() {
            Some(0) => {}
            Some(code) => {
                assert_eq!(code, 128 + sig, "{why}: {}", stderr(&o));
                assert!(
                    stderr(&o).contains("nothing is left"),
                    "{why}: {}",
                    stderr(&o)
                );
                assert!(!dir.exists(), "{why}: {dir:?} is left");
                assert_eq!(servers_under(&dir), Vec::<String>::new(), "{why}");
                let o = up(&name).output().expect("up");
                assert!(o.status.success(), "{why}: up again: {}", stderr(&o));
            }
            None => panic!("{why}: died by the signal: {}", stderr(&o)),
        }
        let list = stdout(&run_in(h, &["sandbox", "list"]));
        let rows: Vec<&str> = list
            .lines()
            .filter(|l| l.starts_with(&format!("{name} ")))
            .collect();
        assert_eq!(rows.len(), 3, "{why}: {list}");
        assert!(
            rows[1..].iter().all(|r| r.contains(" ok, ")),
            "{why}: {list}"
        );
        let o = run_in(h, &["sandbox", "destroy", "--name", &name, "--yes"]);
        assert!(o.status.success(), "{why}: {}", stderr(&o));
        assert_eq!(servers_under(&dir), Vec::<String>::new(), "{why}");
    }

    // promote: the candidate held back, so it waits to catch up.
    let cnf = h.join("sandboxes/whole/client.cnf");
    let node3 = h.join("sandboxes/whole/client-node3.cnf");
    client_sql(&node3, &[], "STOP SLAVE SQL_THREAD");
    client_sql(
        &cnf,
        &[],
        "CREATE DATABASE w; CREATE TABLE w.t (id INT PRIMARY KEY); INSERT INTO w.t VALUES (1)",
    );
    let at = Duration::from_secs_f64(rng.gen_range(0.0..1.5));
    let why = format!("seed {seed}, promote, SIGINT after {at:?}");
    let mut c = common::sqlfleet();
    c.env("SQLFLEET_HOME", h).args([
        "sandbox", "promote", "--name", "whole", "--node", "node3", "--wait", "60",
    ]);
    let o = signalled(c, at, libc::SIGINT);
    assert_eq!(o.status.code(), Some(130), "{why}: {}", stderr(&o));
    assert!(
        stderr(&o).contains("nothing changed"),
        "{why}: {}",
        stderr(&o)
    );
    assert_eq!(
        client_sql(&cnf, &[], "SELECT @@port, @@read_only"),
        format!("{}\t0", roles(h, "whole")[0].2),
        "{why}"
    );
    client_sql(&cnf, &[], "INSERT INTO w.t VALUES (2)");
    for n in roles(h, "whole") {
        assert!(n.3.is_empty(), "{why}: {} {:?}", n.0, n.3);
    }
    client_sql(&node3, &[], "START SLAVE SQL_THREAD");

    // A signal once the candidate has caught up: the switch is finished.
    let mut c = common::sqlfleet();
    c.env("SQLFLEET_HOME", h)
        .env("SQLFLEET_FAILPOINTS", "promote::caught_up=sleep(1500)")
        .args(["sandbox", "promote", "--name", "whole", "--node", "node3"]);
    let o = signalled(c, Duration::from_millis(700), libc::SIGINT);
    assert!(
        o.status.success(),
        "a begun switch finishes: {}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("finishing a switch already begun"),
        "{}",
        stderr(&o)
    );
    let nodes = roles(h, "whole");
    assert_eq!(
        (nodes[0].0.as_str(), nodes[0].1.as_str()),
        ("node3", "primary"),
        "{nodes:?}"
    );
    for n in &nodes {
        assert!(n.3.is_empty(), "{} {:?}", n.0, n.3);
    }
    assert_eq!(client_sql(&cnf, &[], "SELECT COUNT(*) FROM w.t"), "2");
}

/// Parallel jobs each running `sandbox up` on one name take turns: one
/// makes it (or starts it again), the others wait and find it running;
/// all exit 0 and the sandbox is whole. (Without the lock each made it and
/// removed the other's on failing: every one failed.)
#[test]
fn parallel_ups_of_one_sandbox_take_turns_and_all_succeed() {
    let home = Home::new();
    let h = home.path();
    let port = free_port_block(2).to_string();
    let ups = |n: usize| -> Vec<std::process::Output> {
        let children: Vec<_> = (0..n)
            .map(|_| {
                common::sqlfleet()
                    .env("SQLFLEET_HOME", h)
                    .args(["sandbox", "up", "--name", "race", "--port", &port])
                    .args(["--replicas", "1"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("up")
            })
            .collect();
        children
            .into_iter()
            .map(|c| c.wait_with_output().expect("wait"))
            .collect()
    };
    for (round, verb) in [(0, "created and started"), (1, "started")] {
        if round == 1 {
            let o = run_in(h, &["sandbox", "down", "--name", "race"]);
            assert!(o.status.success(), "{}", stderr(&o));
        }
        let outs = ups(4);
        for o in &outs {
            assert!(o.status.success(), "round {round}: {}", stderr(o));
        }
        let made = outs
            .iter()
            .filter(|o| stdout(o).contains(&format!("sandbox 'race' {verb} in")))
            .count();
        assert_eq!(made, 1, "round {round}: one of them {verb} it");
        let list = stdout(&run_in(h, &["sandbox", "list"]));
        let rows: Vec<&str> = list.lines().filter(|l| l.starts_with("race ")).collect();
        assert_eq!(rows.len(), 2, "{list}");
        assert!(rows.iter().all(|r| r.contains(" running ")), "{list}");
        assert!(rows[1].contains(" ok, "), "{list}");
    }
}
