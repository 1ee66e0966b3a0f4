//! Full mode: a TOML config with hashed accounts, --check-config, SIGHUP
//! reloads; client authentication with mysql_native_password and
//! caching_sha2_password (scramble and full), TLS offered and required.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::relay::{free_port, wait_listening};
use mysql_async::prelude::Queryable;
use sqlfleet_conn::{Endpoint, PasswordSpec, Secret, SslMode, Target};
use sqlfleet_testkit::{server, TestServer};

fn hashes(pw: &str) -> String {
    let mut child = common::sqlfleet()
        .args(["relay", "--hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{pw}\n").as_bytes())
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert!(o.status.success());
    String::from_utf8(o.stdout).expect("utf8")
}

/// Only the caching_sha2_password hash line, for accounts without a
/// mysql_native_password one.
fn sha2_only(pw: &str) -> String {
    hashes(pw)
        .lines()
        .filter(|l| l.starts_with("sha2"))
        .collect()
}

fn cert(dir: &Path) -> (String, String) {
    let (c, k) = sqlfleet_testkit::tls::self_signed(dir, "localhost");
    (c.display().to_string(), k.display().to_string())
}

struct Full {
    child: std::process::Child,
    stderr: std::path::PathBuf,
}

impl Drop for Full {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a config with `users` (TOML [[users]] blocks) and `extra`.
fn write_config(
    dir: &Path,
    srv: &TestServer,
    port: u16,
    users: &str,
    extra: &str,
) -> std::path::PathBuf {
    let pwfile = dir.join("backend.pw");
    std::fs::write(&pwfile, srv.sandbox.password().expect("pw").expose()).expect("pw");
    let cfg = dir.join("relay.toml");
    std::fs::write(
        &cfg,
        format!(
            "[relay]\nlisten = [\"127.0.0.1:{port}\"]\nmode = \"transaction\"\n{extra}\n\
             [backend]\nservers = [\"127.0.0.1:{}\"]\nuser = \"root\"\npassword_file = \"{}\"\naccounts = \"shared\"\n\n\
             [pool]\nmax = 10\n\n{users}",
            srv.sandbox.meta.primary().port,
            pwfile.display()
        ),
    )
    .expect("config");
    cfg
}

fn start_full(dir: &Path, cfg: &Path, port: u16) -> Full {
    let stderr = dir.join("relay.err");
    let child = common::sqlfleet()
        .args(["relay", "--config"])
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).expect("log"))
        .spawn()
        .expect("spawn");
    wait_listening(port);
    Full { child, stderr }
}

fn user(port: u16, name: &str, pw: &str, ssl: SslMode) -> Target {
    Target {
        endpoint: Endpoint::Tcp {
            host: "127.0.0.1".into(),
            port,
        },
        user: name.into(),
        password: Some(PasswordSpec::Given(Secret::new(pw))),
        database: None,
        ssl_mode: ssl,
        ssl_ca: None,
        ssl_cert: None,
        ssl_key: None,
        tls: Default::default(),
        charset: None,
    }
}

async fn select_one(t: &Target) -> Result<i64, String> {
    let mut c = t
        .connect(Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    let v: Option<i64> = c.query_first("SELECT 1").await.map_err(|e| e.to_string())?;
    Ok(v.unwrap_or(0))
}

#[test]
fn config_file_checks_and_errors_name_the_line() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let users = format!("[[users]]\nname = \"app\"\n{}", hashes("app-pw"));
    let cfg = write_config(dir.path(), srv, free_port(), &users, "");
    let o = common::sqlfleet()
        .args(["relay", "--check-config", "--config"])
        .arg(&cfg)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(common::stdout(&o).contains("ok"));
    let text = std::fs::read_to_string(&cfg)
        .expect("read")
        .replace("max = 10", "max = 10\nmax_size = 3");
    std::fs::write(&cfg, text).expect("write");
    let o = common::sqlfleet()
        .args(["relay", "--check-config", "--config"])
        .arg(&cfg)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    let line = std::fs::read_to_string(&cfg)
        .expect("read")
        .lines()
        .position(|l| l.starts_with("max_size"))
        .expect("line")
        + 1;
    let err = common::stderr(&o);
    assert!(
        err.contains(&format!("line {line}")) && err.contains("max_size"),
        "{err}"
    );
}

#[test]
fn both_plugins_tls_and_reload() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let (c, k) = cert(dir.path());
    let port = free_port();
    // `app` has both hashes; `sha` only the caching_sha2_password one.
    let sha_only = sha2_only("sha-pw");
    let users = format!(
        "[[users]]\nname = \"app\"\n{}\n[[users]]\nname = \"sha\"\n{sha_only}\n",
        hashes("app-pw")
    );
    let tls = format!("[tls]\ncert = \"{c}\"\nkey = \"{k}\"\n");
    let cfg = write_config(dir.path(), srv, port, &users, "sha2_full_auth = false\n");
    std::fs::write(
        &cfg,
        format!("{}\n{tls}", std::fs::read_to_string(&cfg).expect("read")),
    )
    .expect("write");
    let relay = start_full(dir.path(), &cfg, port);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        // mysql_native_password, plain and TLS.
        assert_eq!(
            select_one(&user(port, "app", "app-pw", SslMode::Disabled)).await,
            Ok(1)
        );
        assert_eq!(
            select_one(&user(port, "app", "app-pw", SslMode::Required)).await,
            Ok(1)
        );
        // caching_sha2_password by auth switch (the scramble, no TLS needed).
        assert_eq!(
            select_one(&user(port, "sha", "sha-pw", SslMode::Disabled)).await,
            Ok(1)
        );
        let e = select_one(&user(port, "sha", "wrong", SslMode::Disabled))
            .await
            .expect_err("denied");
        assert!(e.contains("1045"), "{e}");
        let e = select_one(&user(port, "nobody", "x", SslMode::Disabled))
            .await
            .expect_err("denied");
        assert!(e.contains("1045"), "{e}");
    });
    // The stock client: TLS, and caching_sha2_password.
    let cli = |u: &str, pw: &str, extra: &[&str]| {
        Command::new("mariadb")
            .args([
                "-h",
                "127.0.0.1",
                "-P",
                &port.to_string(),
                "-u",
                u,
                &format!("--password={pw}"),
                "-N",
                "-B",
            ])
            .args(extra)
            .args(["-e", "SELECT 42"])
            .output()
            .expect("mariadb")
    };
    let o = cli("app", "app-pw", &["--ssl"]);
    assert_eq!(common::stdout(&o).trim(), "42", "{}", common::stderr(&o));
    let o = cli("sha", "sha-pw", &[]);
    assert_eq!(common::stdout(&o).trim(), "42", "{}", common::stderr(&o));

    // Reload: a new user appears; a broken file is refused and the running config stays.
    let users2 = format!("{users}[[users]]\nname = \"late\"\n{}", hashes("late-pw"));
    let cfg2 = write_config(dir.path(), srv, port, &users2, "");
    std::fs::write(
        &cfg2,
        format!("{}\n{tls}", std::fs::read_to_string(&cfg2).expect("read")),
    )
    .expect("write");
    let hup = |pid: u32| {
        let ok = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(ok.success());
    };
    hup(relay.child.id());
    let t0 = Instant::now();
    loop {
        let o = cli("late", "late-pw", &[]);
        if o.status.success() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "reload not applied: {}",
            common::stderr(&o)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::write(&cfg, "[relay\nbroken").expect("break");
    hup(relay.child.id());
    let t0 = Instant::now();
    while !std::fs::read_to_string(&relay.stderr)
        .unwrap_or_default()
        .contains("reload refused")
    {
        assert!(t0.elapsed() < Duration::from_secs(10), "no refusal logged");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = cli("late", "late-pw", &[]);
    assert!(
        o.status.success(),
        "running config kept: {}",
        common::stderr(&o)
    );
    drop(relay);
}

/// A relay in full mode whose only account, `name`, has just a
/// caching_sha2_password hash, with full authentication and TLS required.
fn sha2_tls_relay(dir: &Path, srv: &TestServer, name: &str, pw: &str) -> (Full, u16) {
    let (c, k) = cert(dir);
    let port = free_port();
    let sha_only = sha2_only(pw);
    let users = format!("[[users]]\nname = \"{name}\"\n{sha_only}\n");
    let cfg = write_config(dir, srv, port, &users, "sha2_full_auth = true\n");
    std::fs::write(
        &cfg,
        format!(
            "{}\n[tls]\ncert = \"{c}\"\nkey = \"{k}\"\nrequire = true\n",
            std::fs::read_to_string(&cfg).expect("read")
        ),
    )
    .expect("write");
    (start_full(dir, &cfg, port), port)
}

#[test]
fn tls_required_and_full_sha2_authentication() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let (_relay, port) = sha2_tls_relay(dir.path(), srv, "sha", "sha-pw");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        let e = select_one(&user(port, "sha", "sha-pw", SslMode::Disabled))
            .await
            .expect_err("needs TLS");
        assert!(e.contains("3159") || e.contains("TLS"), "{e}");
        // Full authentication: the password itself, over TLS.
        assert_eq!(
            select_one(&user(port, "sha", "sha-pw", SslMode::Required)).await,
            Ok(1)
        );
        let e = select_one(&user(port, "sha", "nope", SslMode::Required))
            .await
            .expect_err("denied");
        assert!(e.contains("1045"), "{e}");
    });
}

/// A quick-mode relay in front of relay `backend` (as user relay, with
/// this `--ssl-mode`), run for one `SELECT 1` by app; its result.
fn select_through_chain(backend: u16, ssl_mode: &str) -> Result<i64, String> {
    let port = free_port();
    let mut relay = common::sqlfleet()
        .args(["relay", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--backend", &format!("127.0.0.1:{backend}")])
        .args([
            "--no-defaults",
            "-u",
            "relay",
            "--shared-account",
            "--client-user",
            "app:app-pw",
        ])
        .args(["--ssl-mode", ssl_mode])
        .env("MYSQL_PWD", "relay-pw")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("relay");
    wait_listening(port);
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let r = rt.block_on(select_one(&user(port, "app", "app-pw", SslMode::Disabled)));
    let _ = relay.kill();
    let _ = relay.wait();
    r
}

#[test]
fn a_relay_logs_in_to_its_backend_over_tls_with_caching_sha2() {
    // client -> relay A -> (TLS, caching_sha2_password full auth) -> relay B -> server
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let (_b, port_b) = sha2_tls_relay(dir.path(), srv, "relay", "relay-pw");
    assert_eq!(select_through_chain(port_b, "REQUIRED"), Ok(1));
    // PREFERRED takes the TLS the backend offers, in the same handshake.
    assert_eq!(select_through_chain(port_b, "PREFERRED"), Ok(1));
    // Without TLS the backend relay refuses the front relay's login: a clear error.
    let e = select_through_chain(port_b, "DISABLED").expect_err("backend login refused");
    assert!(e.contains("3159") || e.contains("TLS"), "{e}");
}

#[test]
fn full_sha2_authentication_without_tls_uses_the_rsa_key_exchange() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let port = free_port();
    let users = format!(
        "[[users]]\nname = \"sha\"\n{}\n[[users]]\nname = \"relay\"\n{}\n",
        sha2_only("sha-pw"),
        sha2_only("relay-pw")
    );
    let cfg = write_config(dir.path(), srv, port, &users, "sha2_full_auth = true\n");
    let _relay = start_full(dir.path(), &cfg, port);
    // A relay in front logs in to this one the same way; PREFERRED stays
    // plain when the backend offers no TLS.
    assert_eq!(select_through_chain(port, "DISABLED"), Ok(1));
    assert_eq!(select_through_chain(port, "PREFERRED"), Ok(1));
    let rt = tokio::runtime::Runtime::new().expect("rt");
    rt.block_on(async {
        // The driver asks for the relay's public key and sends the password encrypted.
        assert_eq!(
            select_one(&user(port, "sha", "sha-pw", SslMode::Disabled)).await,
            Ok(1)
        );
        let e = select_one(&user(port, "sha", "wrong", SslMode::Disabled))
            .await
            .expect_err("denied");
        assert!(e.contains("1045"), "{e}");
    });
}

/// Quick-mode flags go through the config file's checks: what the file
/// refuses, the flags refuse the same way (exit 1, the flag named, no
/// panic), and what it accepts they accept.
#[test]
fn quick_mode_flags_are_checked_like_the_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let quick = |extra: &[&str]| {
        common::sqlfleet()
            .args(["relay", "--check-config", "--listen", "127.0.0.1:0"])
            .args([
                "--backend",
                "127.0.0.1:3306",
                "--no-defaults",
                "-u",
                "relay",
            ])
            .args(["--shared-account", "--client-user", "app:pw"])
            .args(extra)
            .output()
            .expect("run")
    };
    let file = |routing: &str, pool: &str| {
        let p = dir.path().join("relay.toml");
        std::fs::write(
            &p,
            format!(
                "[relay]\nlisten = [\"127.0.0.1:0\"]\n[backend]\nservers = [\"127.0.0.1:3306\"]\nuser = \"relay\"\naccounts = \"shared\"\n[pool]\n{pool}\n[routing]\n{routing}\n[[users]]\nname = \"app\"\n{}",
                hashes("pw")
            ),
        )
        .expect("write");
        common::sqlfleet()
            .args(["relay", "--check-config", "--config"])
            .arg(&p)
            .output()
            .expect("run")
    };
    let cases: &[(&[&str], &str, &str, &str)] = &[
        (&["--max-lag=-1"], "max_lag = -1.0", "", "--max-lag"),
        (&["--max-lag=NaN"], "max_lag = nan", "", "--max-lag"),
        (
            &["--health-interval=0"],
            "health_interval = 0.0",
            "",
            "--health-interval",
        ),
        (
            &["--wait-timeout=-2"],
            "",
            "wait_timeout = -2.0",
            "--wait-timeout",
        ),
        (
            &["--pool-min=5", "--pool-max=2"],
            "",
            "min = 5\nmax = 2",
            "--pool-min",
        ),
    ];
    for (flags, routing, pool, named) in cases {
        let q = quick(flags);
        let f = file(routing, pool);
        assert_eq!(
            q.status.code(),
            Some(1),
            "{flags:?}: {}",
            common::stderr(&q)
        );
        assert_eq!(
            f.status.code(),
            Some(1),
            "{routing}{pool}: {}",
            common::stderr(&f)
        );
        assert!(
            common::stderr(&q).contains(named) && !common::stderr(&q).contains("panicked"),
            "{flags:?}: {}",
            common::stderr(&q)
        );
    }
    // Admin pages beyond loopback need a token.
    let q = quick(&["--metrics", "0.0.0.0:9104"]);
    assert_eq!(q.status.code(), Some(1));
    assert!(
        common::stderr(&q).contains("--metrics-token-file"),
        "{}",
        common::stderr(&q)
    );
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").expect("write");
    let q = quick(
        &["--metrics", "0.0.0.0:9104", "--metrics-token-file"]
            .into_iter()
            .chain([token.to_str().expect("utf8")])
            .collect::<Vec<_>>(),
    );
    assert!(q.status.success(), "{}", common::stderr(&q));
    // Accepted by both.
    let q = quick(&["--max-lag=0", "--health-interval=0.1"]);
    assert!(q.status.success(), "{}", common::stderr(&q));
    let f = file("max_lag = 0.0\nhealth_interval = 0.1", "");
    assert!(f.status.success(), "{}", common::stderr(&f));
}
