//! Connection resolution end to end against a real server: --sandbox,
//! DSNs, option files and TLS modes.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use sqlfleet_conn::{resolve, ConnArgs, Env, SslMode, Target};

fn env_for(home: &std::path::Path) -> Env {
    Env {
        sqlfleet_home: home.to_owned(),
        login_user: Some("nobody-here".into()),
        ..Env::default()
    }
}

async fn whoami(args: &ConnArgs, env: &Env) -> Result<String, String> {
    let t = resolve(args, env).map_err(|e| e.to_string())?;
    let mut c = t
        .connect(Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    let v: Option<String> = c
        .query_first("SELECT CONCAT(CURRENT_USER(), ' ', IFNULL(DATABASE(), '-'))")
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.disconnect().await;
    Ok(v.unwrap_or_default())
}

#[tokio::test]
async fn sandbox_dsn_and_defaults_file_targets_connect() {
    let srv = sqlfleet_testkit::server();
    let (db, _) = srv.fresh_db("conn").await;
    let env = env_for(srv.home());
    let name = srv.sandbox.name().to_string();

    let by_sandbox = ConnArgs {
        sandbox: Some(name.clone()),
        database: Some(db.clone()),
        ..ConnArgs::default()
    };
    assert_eq!(
        whoami(&by_sandbox, &env).await,
        Ok(format!("root@127.0.0.1 {db}"))
    );

    let by_file = ConnArgs {
        defaults_file: Some(srv.defaults_file()),
        ..ConnArgs::default()
    };
    assert_eq!(
        whoami(&by_file, &env).await,
        Ok("root@127.0.0.1 -".to_string())
    );

    let pw = srv.sandbox.password().expect("pw");
    let port = srv.sandbox.meta.primary().port;
    let dsn = format!("mysql://root:{}@127.0.0.1:{port}/{db}", pw.expose());
    let by_dsn = ConnArgs {
        dsn: Some(dsn.clone()),
        no_defaults: true,
        ..ConnArgs::default()
    };
    assert_eq!(
        whoami(&by_dsn, &env).await,
        Ok(format!("root@127.0.0.1 {db}"))
    );

    // A wrong password: the server's refusal, naming host and user, never the password.
    let wrong = ConnArgs {
        password: Some(Some("definitely-wrong".into())),
        ..by_dsn.clone()
    };
    let e = whoami(&wrong, &env).await.expect_err("denied");
    assert!(
        e.starts_with(&format!("127.0.0.1:{port} (user 'root'): ERROR 1045")),
        "{e}"
    );
    assert!(
        !e.contains("definitely-wrong") && !e.contains(pw.expose()),
        "{e}"
    );
}

#[tokio::test]
async fn ssl_modes_against_a_server_without_tls() {
    let srv = sqlfleet_testkit::server();
    let env = env_for(srv.home());
    let name = srv.sandbox.name().to_string();
    let args = |m: SslMode| ConnArgs {
        sandbox: Some(name.clone()),
        ssl_mode: Some(m),
        ..ConnArgs::default()
    };
    // The sandbox has no certificate: PREFERRED falls back to plain, REQUIRED refuses.
    assert!(whoami(&args(SslMode::Preferred), &env).await.is_ok());
    assert!(whoami(&args(SslMode::Disabled), &env).await.is_ok());
    let e = whoami(&args(SslMode::Required), &env)
        .await
        .expect_err("no TLS");
    assert!(
        e.contains("ssl-mode REQUIRED but the server does not offer TLS"),
        "{e}"
    );
}

#[tokio::test]
async fn fresh_databases_are_distinct_and_empty() {
    let srv = sqlfleet_testkit::server();
    let (a, ta) = srv.fresh_db("fx").await;
    let (b, _) = srv.fresh_db("fx").await;
    assert_ne!(a, b);
    let mut c = ta.connect(Duration::from_secs(5)).await.expect("connect");
    let n: Option<i64> = c
        .query_first(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
        )
        .await
        .expect("q");
    assert_eq!(n, Some(0));
}

/// The session a dialled login leaves, as one text value.
async fn session_charsets(c: &mut sqlfleet_wire::client::Client) -> String {
    let v = c
        .column(
            "SELECT CONCAT_WS(' ', @@character_set_client, @@character_set_connection, \
             @@character_set_results, @@collation_connection)",
        )
        .await
        .expect("session character sets");
    v.into_iter().flatten().next().unwrap_or_default()
}

/// A login names its character set in the handshake (no `SET NAMES` after
/// it, as the stock client does): every character set the server lets a
/// client use, drawn from the server's own list, must either be in the
/// handshake table with the server's own default collation id, and leave
/// the session exactly as `SET NAMES` does, or go by `SET NAMES`.
#[tokio::test]
async fn every_client_character_set_leaves_the_session_as_set_names_does() {
    let srv = sqlfleet_testkit::server();
    let base = srv.target();
    let mut c = base.dial(Duration::from_secs(5)).await.expect("dial");
    let rows = c
        .column(
            "SELECT CONCAT(CHARACTER_SET_NAME, ' ', ID) FROM information_schema.COLLATIONS \
             WHERE IS_DEFAULT = 'Yes' ORDER BY ID",
        )
        .await
        .expect("collations");
    let server: Vec<(String, u64)> = rows
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let (n, id) = r.split_once(' ')?;
            Some((n.to_string(), id.parse().ok()?))
        })
        .collect();
    assert!(server.len() > 30, "the server's character sets: {server:?}");
    let version = c.hello.version.clone();
    assert!(
        sqlfleet_conn::charset::handshake_collation("utf8mb4", &version).is_some(),
        "the table is checked on a server it is used for, not {version}"
    );
    for (name, id) in &server {
        // Can a client use it? The server says (ucs2, utf16, utf32 no).
        let usable = c.execute(&format!("SET NAMES {name}")).await.is_ok();
        c.execute("SET NAMES utf8mb4")
            .await
            .expect("back to utf8mb4");
        let ours = sqlfleet_conn::charset::handshake_collation(name, &version);
        if !usable {
            assert_eq!(ours, None, "{name}: the server refuses it as a client set");
            continue;
        }
        assert_eq!(
            ours.map(u64::from),
            Some(*id),
            "{name}: the handshake table against the server's default collation"
        );
        let mut by_handshake = base.clone();
        by_handshake.charset = Some(name.clone());
        let mut h = by_handshake
            .dial(Duration::from_secs(5))
            .await
            .expect("dial with the set in the handshake");
        let mut s = base.dial(Duration::from_secs(5)).await.expect("dial");
        s.execute(&format!("SET NAMES {name}"))
            .await
            .expect("SET NAMES");
        assert_eq!(
            session_charsets(&mut h).await,
            session_charsets(&mut s).await,
            "{name}"
        );
        h.quit().await;
        s.quit().await;
    }
    // Every row of the table is a set the server has, under that id.
    for (name, id) in sqlfleet_conn::charset::HANDSHAKE_COLLATIONS {
        assert!(
            server
                .iter()
                .any(|(n, i)| n == name && *i == u64::from(*id)),
            "{name} {id} is not the server's"
        );
    }
    // utf8 goes by SET NAMES: the server's old_mode says what it means.
    let mut old = base.clone();
    old.charset = Some("utf8".into());
    let mut o = old.dial(Duration::from_secs(5)).await.expect("dial utf8");
    assert!(session_charsets(&mut o).await.starts_with("utf8mb3 "));
    c.quit().await;
}

/// What a login came to: the account it is (`CURRENT_USER()`) or the
/// error code it ended with.
type Outcome = Result<String, u16>;

fn error_code(text: &str) -> u16 {
    text.split("ERROR ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no error code in: {text}"))
}

/// The stock client with these arguments, running `sql`: its one
/// value, or the error code it ended with.
fn stock<S: AsRef<std::ffi::OsStr>>(args: &[S], sql: &str) -> Outcome {
    let o = std::process::Command::new("mariadb")
        .args(args)
        .args(["-N", "-B", "-e", sql])
        .output()
        .expect("mariadb client");
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout)
            .trim_end_matches('\n')
            .to_string())
    } else {
        Err(error_code(&String::from_utf8_lossy(&o.stderr)))
    }
}

const CURRENT_USER: &str = "SELECT CURRENT_USER()";

/// The stock client's login with password `pw` and these options.
fn stock_login(port: u16, user: &str, options: &[&str]) -> Outcome {
    stock_login_as(port, user, "pw", options)
}

/// The stock client's login over TCP with this password and options.
fn stock_login_as(port: u16, user: &str, password: &str, options: &[&str]) -> Outcome {
    let mut args = vec![
        "--no-defaults".to_string(),
        "-h127.0.0.1".into(),
        format!("-P{port}"),
        format!("-u{user}"),
        format!("-p{password}"),
    ];
    args.extend(options.iter().map(|o| o.to_string()));
    stock(&args, CURRENT_USER)
}

/// The stock client's login over the Unix socket, with these options.
fn stock_socket_login(
    socket: &std::path::Path,
    user: &str,
    password: &str,
    options: &[String],
) -> Outcome {
    let mut args = vec![
        "--no-defaults".to_string(),
        format!("--socket={}", socket.display()),
        format!("-u{user}"),
        format!("-p{password}"),
    ];
    args.extend(options.iter().cloned());
    stock(&args, CURRENT_USER)
}

/// Our own login (`dial`, as query and watch) running `sql`: its one
/// value, or the error's words.
async fn own_login(t: &Target, sql: &str) -> Result<String, String> {
    let mut c = t
        .dial(Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    Ok(c.column(sql)
        .await
        .expect("a value")
        .into_iter()
        .flatten()
        .next()
        .unwrap_or_default())
}

/// The driver's login (`connect`, as load, replicate and bench) running
/// `sql`: its one value, or the error's words.
async fn driver_login(t: &Target, sql: &str) -> Result<String, String> {
    let mut c = t
        .connect(Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    Ok(c.query_first::<String, _>(sql)
        .await
        .expect("a value")
        .unwrap_or_default())
}

/// A login's outcome by its error code.
fn outcome(r: Result<String, String>) -> Outcome {
    r.map_err(|e| error_code(&e))
}

/// Our two logins of `args`: the command's own (`dial`, as query and
/// watch) and the driver's (`connect`, as load, replicate and bench).
async fn our_logins(args: &ConnArgs, env: &Env) -> (Outcome, Outcome) {
    let t = resolve(args, env).unwrap_or_else(|e| panic!("resolve: {e}"));
    (
        outcome(own_login(&t, CURRENT_USER).await),
        outcome(driver_login(&t, CURRENT_USER).await),
    )
}

/// Accounts made REQUIRE X509 and REQUIRE SUBJECT, and one that needs no
/// certificate, log in (or are refused) as the stock client's are with
/// the same certificate, given as flags, in an option file, in a DSN, or
/// with the key inside the certificate's file; a key that is not the
/// certificate's is refused before the login, naming both files, as the
/// stock client refuses it (2026). Before, the certificate options were
/// not read and every certificate account was "Access denied".
#[tokio::test]
async fn a_client_certificate_logs_in_where_the_stock_client_does() {
    let dir = tempfile::tempdir().expect("dir");
    let pki = sqlfleet_testkit::tls::authority(dir.path(), "client");
    let srv = sqlfleet_testkit::server_with(&[
        &format!("ssl-ca={}", pki.ca.display()),
        &format!("ssl-cert={}", pki.server_cert.display()),
        &format!("ssl-key={}", pki.server_key.display()),
    ]);
    let mut root = srv
        .target()
        .connect(Duration::from_secs(5))
        .await
        .expect("root");
    for (user, require) in [
        ("cx", "REQUIRE X509"),
        ("cs", "REQUIRE SUBJECT '/CN=client'"),
        ("co", "REQUIRE SUBJECT '/CN=someone else'"),
        ("cn", ""),
    ] {
        root.query_drop(format!(
            "CREATE USER IF NOT EXISTS {user}@'%' IDENTIFIED BY 'pw' {require}"
        ))
        .await
        .expect("create user");
    }
    root.query_drop("DELETE FROM mysql.global_priv WHERE User = ''; FLUSH PRIVILEGES")
        .await
        .expect("no anonymous accounts");
    let port = srv.sandbox.meta.primary().port;
    let env = env_for(srv.home());
    let both = dir.path().join("both.pem");
    let text = |p: &std::path::Path| std::fs::read_to_string(p).expect("pem");
    std::fs::write(&both, text(&pki.client_cert) + &text(&pki.client_key)).expect("both");
    let path = |p: &std::path::Path| p.display().to_string();

    // (name, certificate, key) as the stock client takes them.
    let certs: Vec<(&str, Option<String>, Option<String>)> = vec![
        ("none", None, None),
        (
            "client",
            Some(path(&pki.client_cert)),
            Some(path(&pki.client_key)),
        ),
        ("key inside", Some(path(&both)), None),
        (
            "server's",
            Some(path(&pki.server_cert)),
            Some(path(&pki.server_key)),
        ),
        (
            "wrong key",
            Some(path(&pki.client_cert)),
            Some(path(&pki.server_key)),
        ),
    ];
    let mut compared = 0;
    for (name, cert, key) in &certs {
        let mut stock_args = Vec::new();
        if let Some(c) = cert {
            stock_args.push(format!("--ssl-cert={c}"));
        }
        if let Some(k) = key {
            stock_args.push(format!("--ssl-key={k}"));
        }
        let stock_args: Vec<&str> = stock_args.iter().map(String::as_str).collect();
        // The same options three ways.
        let optfile = dir.path().join(format!("{}.cnf", name.replace(' ', "-")));
        let mut cnf = format!("[client]\nhost=127.0.0.1\nport={port}\npassword=pw\n");
        if let Some(c) = cert {
            cnf.push_str(&format!("ssl-cert={c}\n"));
        }
        if let Some(k) = key {
            cnf.push_str(&format!("ssl-key={k}\n"));
        }
        std::fs::write(&optfile, cnf).expect("option file");
        let mut query = Vec::new();
        if let Some(c) = cert {
            query.push(format!("ssl-cert={c}"));
        }
        if let Some(k) = key {
            query.push(format!("ssl_key={k}"));
        }
        for user in ["cx", "cs", "co", "cn"] {
            let want = stock_login(port, user, &stock_args);
            let ways = [
                (
                    "flags",
                    ConnArgs {
                        host: Some("127.0.0.1".into()),
                        port: Some(port),
                        user: Some(user.into()),
                        password: Some(Some("pw".into())),
                        ssl_cert: cert.as_ref().map(Into::into),
                        ssl_key: key.as_ref().map(Into::into),
                        no_defaults: true,
                        ..ConnArgs::default()
                    },
                ),
                (
                    "option file",
                    ConnArgs {
                        user: Some(user.into()),
                        defaults_file: Some(optfile.clone()),
                        ..ConnArgs::default()
                    },
                ),
                (
                    "dsn",
                    ConnArgs {
                        dsn: Some(format!(
                            "mysql://{user}:pw@127.0.0.1:{port}/?{}",
                            query.join("&")
                        )),
                        no_defaults: true,
                        ..ConnArgs::default()
                    },
                ),
            ];
            for (how, args) in ways {
                let (own, driver) = our_logins(&args, &env).await;
                assert_eq!(
                    own, want,
                    "own login: {user} with the {name} certificate by {how}"
                );
                assert_eq!(
                    driver, want,
                    "driver: {user} with the {name} certificate by {how}"
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, certs.len() * 4 * 3);
    // The certificate accounts log in only with the right certificate,
    // so the comparison above is not between two refusals.
    assert_eq!(stock_login(port, "cs", &[]), Err(1045));
    let (c, k) = (path(&pki.client_cert), path(&pki.client_key));
    assert_eq!(
        stock_login(
            port,
            "cs",
            &[&format!("--ssl-cert={c}"), &format!("--ssl-key={k}")]
        ),
        Ok("cs@%".to_string())
    );

    // A wrong key is named with its certificate.
    let wrong = ConnArgs {
        host: Some("127.0.0.1".into()),
        port: Some(port),
        user: Some("cs".into()),
        password: Some(Some("pw".into())),
        ssl_cert: Some(pki.client_cert.clone()),
        ssl_key: Some(pki.server_key.clone()),
        no_defaults: true,
        ..ConnArgs::default()
    };
    let t = resolve(&wrong, &env).expect("resolve");
    let Err(e) = t.dial(Duration::from_secs(5)).await else {
        panic!("refused")
    };
    assert!(
        e.to_string().contains(&format!(
            "{}: is not the key of the certificate in {}",
            pki.server_key.display(),
            pki.client_cert.display()
        )),
        "{e}"
    );

    // A key without a certificate is refused as the target is read.
    let key_only = ConnArgs {
        ssl_cert: None,
        ..wrong.clone()
    };
    let Err(e) = resolve(&key_only, &env) else {
        panic!("refused")
    };
    assert!(e.to_string().contains("without --ssl-cert"), "{e}");

    // Over the Unix socket the stock client shows the certificate by TLS
    // there too, and so does our own login; the driver cannot use TLS on
    // a socket, and its refusal says the certificate was not shown.
    let socket = srv.sandbox.layout.node(srv.sandbox.meta.primary()).socket();
    let by_socket = ConnArgs {
        host: None,
        port: None,
        socket: Some(socket.clone()),
        ssl_key: Some(pki.client_key.clone()),
        ..wrong.clone()
    };
    let stock = stock_socket_login(
        &socket,
        "cs",
        "pw",
        &[
            format!("--ssl-cert={}", pki.client_cert.display()),
            format!("--ssl-key={}", pki.client_key.display()),
        ],
    );
    let (own, driver) = our_logins(&by_socket, &env).await;
    assert_eq!(stock, Ok("cs@%".to_string()));
    assert_eq!(own, stock);
    assert_eq!(driver, Err(1045));
    let t = resolve(&by_socket, &env).expect("resolve");
    let Err(e) = t.connect(Duration::from_secs(5)).await else {
        panic!("driver refused")
    };
    assert!(
        e.to_string()
            .contains("the client certificate was not shown"),
        "{e}"
    );

    // A version 1 certificate: the stock client and our own login show
    // it; the driver cannot, and says so instead of failing on the
    // server's certificate.
    let v1 = ConnArgs {
        ssl_cert: Some(pki.client_v1_cert.clone()),
        ssl_key: Some(pki.client_v1_key.clone()),
        ..wrong
    };
    let (own, _) = our_logins(&v1, &env).await;
    let stock = stock_login(
        port,
        "cs",
        &[
            &format!("--ssl-cert={}", pki.client_v1_cert.display()),
            &format!("--ssl-key={}", pki.client_v1_key.display()),
        ],
    );
    assert_eq!(own, stock);
    assert_eq!(own, Ok("cs@%".to_string()));
    let t = resolve(&v1, &env).expect("resolve");
    let Err(e) = t.connect(Duration::from_secs(5)).await else {
        panic!("driver refuses")
    };
    assert!(e.to_string().contains("X.509 version 1 certificate"), "{e}");
}

/// Logins the stock client makes and sqlfleet does not, by the client
/// plugin the server asks for: sqlfleet says so (2059, naming it).
/// mysql_clear_password only over plain TCP, where the stock client sends
/// the password in clear text to whoever asks; sqlfleet sends it over
/// TLS or a Unix socket (the test logs in by both TCP and the socket).
const NOT_MADE: &[&str] = &["dialog", "mysql_clear_password"];

/// Our own login ended as the stock client's did, or with 2059 naming a
/// client plugin sqlfleet lacks ([`NOT_MADE`], or any for the server's
/// own test plugins).
fn as_the_stock_client(
    plugin: &str,
    test_only: bool,
    said: &Result<String, String>,
    stock: &Outcome,
    how: &str,
    password: &str,
) {
    let words = said.as_ref().err().map(String::as_str).unwrap_or_default();
    let lacked = NOT_MADE
        .iter()
        .any(|p| words.contains(&format!("Authentication plugin '{p}' cannot be loaded")));
    let own = outcome(said.clone());
    if lacked {
        assert_eq!(own, Err(2059), "{plugin} {how}: {words}");
    } else if test_only && own == Err(2059) {
        assert!(
            words.contains(" cannot be loaded: "),
            "{plugin} {how}: {words}"
        );
    } else {
        assert_eq!(
            &own, stock,
            "own login {how}, {plugin}, password {password}: {words}"
        );
    }
}

/// Every authentication plugin the server can load (its own list,
/// `information_schema.ALL_PLUGINS`, the test plugins included) gets an
/// account with the password `pw` where the plugin takes one; each
/// account logs in by the stock client, by sqlfleet's own login (query,
/// watch) and by the driver (load, replicate, bench), with the right and
/// a wrong password. Our logins end as the stock client's does (the same
/// account, or the same error code), or, for a client plugin sqlfleet
/// does not have, with 2059 naming it — never a panic (the driver
/// panicked on ed25519 before), never "unreachable" (the own login called
/// an unknown plugin that), and never a wrong parse of the server's
/// request (the pre-4.1 switch was "unterminated string").
#[tokio::test]
async fn every_authentication_plugin_the_server_has_logs_in_as_with_the_stock_client() {
    let srv = sqlfleet_testkit::server_with(&["secure-auth=0", "plugin-maturity=unknown"]);
    let mut root = srv
        .target()
        .connect(Duration::from_secs(5))
        .await
        .expect("root");
    let listed: Vec<(String, Option<String>, String, String)> = root
        .query(
            "SELECT PLUGIN_NAME, PLUGIN_LIBRARY, PLUGIN_STATUS, PLUGIN_MATURITY \
             FROM information_schema.ALL_PLUGINS \
             WHERE PLUGIN_TYPE = 'AUTHENTICATION' ORDER BY PLUGIN_NAME",
        )
        .await
        .expect("plugins");
    // The server's own test plugins (maturity Unknown or Experimental)
    // ask for client plugins that only mysql-test has: sqlfleet may say
    // 2059 for them where the stock client ends otherwise.
    let mut active: Vec<(String, bool)> = Vec::new();
    for (name, library, status, maturity) in &listed {
        if status != "ACTIVE" {
            let Some(lib) = library else { continue };
            if root
                .query_drop(format!("INSTALL PLUGIN {name} SONAME '{lib}'"))
                .await
                .is_err()
            {
                continue;
            }
        }
        if !active.iter().any(|(a, _)| a == name) {
            let test_only = matches!(maturity.as_str(), "Unknown" | "Experimental");
            active.push((name.clone(), test_only));
        }
    }
    for must in [
        "mysql_native_password",
        "mysql_old_password",
        "ed25519",
        "unix_socket",
        "pam",
    ] {
        assert!(
            active.iter().any(|(a, _)| a == must),
            "{must} among {active:?}"
        );
    }
    let port = srv.sandbox.meta.primary().port;
    let socket = srv.sandbox.layout.node(srv.sandbox.meta.primary()).socket();
    let env = env_for(srv.home());
    let mut checked = Vec::new();
    for (i, (plugin, test_only)) in active.iter().enumerate() {
        let user = format!("ap{i}");
        let with_password =
            format!("CREATE USER {user}@'%' IDENTIFIED VIA {plugin} USING PASSWORD('pw')");
        if root.query_drop(&with_password).await.is_err() {
            root.query_drop(format!("CREATE USER {user}@'%' IDENTIFIED VIA {plugin}"))
                .await
                .unwrap_or_else(|e| panic!("an account for {plugin}: {e}"));
        }
        root.query_drop("DELETE FROM mysql.global_priv WHERE User = ''; FLUSH PRIVILEGES")
            .await
            .expect("no anonymous accounts");
        for password in ["pw", "wrong"] {
            // Over the Unix socket: our own login only (the stock
            // client's socket login is the oracle; the driver's socket
            // logins are the TCP ones here).
            let stock = stock_socket_login(&socket, &user, password, &[]);
            let by_socket = ConnArgs {
                socket: Some(socket.clone()),
                user: Some(user.clone()),
                password: Some(Some(password.into())),
                no_defaults: true,
                ..ConnArgs::default()
            };
            let t = resolve(&by_socket, &env).expect("resolve");
            let said = own_login(&t, CURRENT_USER).await;
            if let Err(e) = &said {
                assert!(
                    !e.contains("Authentication plugin 'mysql_clear_password'"),
                    "{plugin}: the clear password goes over a socket: {e}"
                );
            }
            as_the_stock_client(plugin, *test_only, &said, &stock, "by socket", password);

            let stock = stock_login_as(port, &user, password, &[]);
            let args = ConnArgs {
                host: Some("127.0.0.1".into()),
                port: Some(port),
                user: Some(user.clone()),
                password: Some(Some(password.into())),
                no_defaults: true,
                ..ConnArgs::default()
            };
            let t = resolve(&args, &env).expect("resolve");
            let said = own_login(&t, CURRENT_USER).await;
            as_the_stock_client(plugin, *test_only, &said, &stock, "by TCP", password);
            let driver = outcome(driver_login(&t, CURRENT_USER).await);
            // The driver: the same, or its own 2059 for a plugin it lacks.
            assert!(
                driver == stock || driver == Err(2059),
                "driver, {plugin}, password {password}: {driver:?} where the stock client has {stock:?}"
            );
            checked.push((plugin.clone(), password, stock));
        }
    }
    // The comparison is not only between refusals: the password plugins
    // log in with the right password.
    for p in ["mysql_native_password", "mysql_old_password", "ed25519"] {
        assert!(
            checked
                .iter()
                .any(|(plugin, pw, stock)| plugin == p && *pw == "pw" && stock.is_ok()),
            "{p}: {checked:?}"
        );
    }
}

/// The options a program lists in `--help --verbose` (its variables).
fn listed_options(program: &str) -> std::collections::BTreeSet<String> {
    let o = std::process::Command::new(program)
        .args(["--no-defaults", "--help", "--verbose"])
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let text = String::from_utf8_lossy(&o.stdout);
    let Some((_, vars)) = text.split_once("Variables (--variable-name=value)") else {
        panic!("{program} --help --verbose lists no variables");
    };
    vars.lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| !w.starts_with('-') && w.len() > 1)
        .map(str::to_string)
        .collect()
}

/// Every option the stock client programs share — what a `[client]`
/// group holds for all of them, drawn from the installed programs' own
/// lists — is read by sqlfleet with the stock client's meaning, or left
/// alone or refused for a stated reason (`CLIENT_OPTIONS`); one a newer
/// MariaDB adds fails here until it is decided. (`ssl-cert` and
/// `ssl-key` were silently left alone before.)
#[test]
fn every_option_the_stock_clients_share_is_decided() {
    let programs = ["mariadb", "mariadb-dump", "mariadb-admin", "mariadb-import"];
    let mut shared: Option<std::collections::BTreeSet<String>> = None;
    for p in programs {
        let listed = listed_options(p);
        assert!(
            listed.contains("host") && listed.contains("ssl-ca"),
            "{p}: {listed:?}"
        );
        shared = Some(match shared {
            None => listed,
            Some(s) => s.intersection(&listed).cloned().collect(),
        });
    }
    let shared = shared.unwrap_or_default();
    let decided: Vec<&str> = sqlfleet_conn::resolve::CLIENT_OPTIONS
        .iter()
        .map(|(k, _)| *k)
        .collect();
    let undecided: Vec<&String> = shared
        .iter()
        .filter(|o| !decided.contains(&o.as_str()))
        .collect();
    assert!(
        undecided.is_empty(),
        "options every stock client reads that sqlfleet has not decided on: {undecided:?}"
    );
    assert!(shared.len() >= 20, "{shared:?}");
}

/// A server with TLS from a test authority, and the authority.
fn authority_server() -> (
    tempfile::TempDir,
    sqlfleet_testkit::tls::Authority,
    sqlfleet_testkit::TestServer,
) {
    let dir = tempfile::tempdir().expect("dir");
    let pki = sqlfleet_testkit::tls::authority(dir.path(), "client");
    let srv = sqlfleet_testkit::server_with(&[
        &format!("ssl-ca={}", pki.ca.display()),
        &format!("ssl-cert={}", pki.server_cert.display()),
        &format!("ssl-key={}", pki.server_key.display()),
    ]);
    (dir, pki, srv)
}

/// The session's TLS as the server reports it ("TLSv1.3 TLS_AES_..."; a
/// space alone for plain text), or the login's error code.
const TLS_OF_SESSION: &str = "SELECT CONCAT(\
    (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'SSL_VERSION'), ' ', \
    (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'SSL_CIPHER'))";

/// The stock client's TLS options in an option file are held as the
/// stock client holds them, by both our logins: `skip-ssl` is plain
/// text; `ssl-capath` finds the CA under its hashed name (and not under
/// another name); `ssl-crl` refuses a revoked server certificate;
/// `tls-version` and `ssl-cipher` narrow what the connection uses. The
/// driver cannot check revocation lists or narrow its offer: it refuses
/// (2026) where it cannot do as asked, never connecting otherwise.
#[tokio::test]
async fn the_stock_clients_tls_options_are_held_as_it_holds_them() {
    let (dir, pki, srv) = authority_server();
    let mut root = srv
        .target()
        .connect(Duration::from_secs(5))
        .await
        .expect("root");
    root.query_drop(
        "CREATE USER IF NOT EXISTS tl@'%' IDENTIFIED BY 'pw'; \
         DELETE FROM mysql.global_priv WHERE User = ''; FLUSH PRIVILEGES",
    )
    .await
    .expect("account");
    let port = srv.sandbox.meta.primary().port;
    let env = env_for(srv.home());
    let capath = sqlfleet_testkit::tls::hashed_ca_dir(dir.path(), &pki);
    let unhashed = dir.path().join("unhashed");
    std::fs::create_dir_all(&unhashed).expect("dir");
    std::fs::copy(&pki.ca, unhashed.join("ca.pem")).expect("copy");
    let revoking = sqlfleet_testkit::tls::crl(dir.path(), &pki, "revoking.pem", true);
    let empty = sqlfleet_testkit::tls::crl(dir.path(), &pki, "empty.pem", false);
    let ca = pki.ca.display().to_string();
    let verify = format!("ssl-ca={ca}\nssl-verify-server-cert");
    // (options, whether the driver can do as asked)
    let cases: Vec<(String, bool)> = vec![
        ("skip-ssl".into(), true),
        ("ssl=0".into(), true),
        (
            format!("ssl-capath={}\nssl-verify-server-cert", capath.display()),
            true,
        ),
        (
            format!("ssl-capath={}\nssl-verify-server-cert", unhashed.display()),
            true,
        ),
        (format!("{verify}\nssl-crl={}", revoking.display()), false),
        (format!("{verify}\nssl-crl={}", empty.display()), false),
        ("tls-version=TLSv1.2".into(), false),
        ("tls-version=TLSv1.3".into(), true),
        (
            "tls-version=TLSv1.2\nssl-cipher=ECDHE-RSA-AES128-GCM-SHA256".into(),
            false,
        ),
        ("ssl-cipher=TLS_AES_128_GCM_SHA256".into(), false),
        ("ssl-cipher=AES256-SHA".into(), true),
    ];
    let mut outcomes = Vec::new();
    for (i, (options, driver_can)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("tls{i}.cnf"));
        std::fs::write(
            &file,
            format!("[client]\nhost=127.0.0.1\nport={port}\nuser=tl\npassword=pw\n{options}\n"),
        )
        .expect("option file");
        let stock = stock(
            &[format!("--defaults-file={}", file.display())],
            TLS_OF_SESSION,
        );
        let args = ConnArgs {
            defaults_file: Some(file.clone()),
            ..ConnArgs::default()
        };
        let t = resolve(&args, &env).unwrap_or_else(|e| panic!("{options}: {e}"));
        let own = outcome(own_login(&t, TLS_OF_SESSION).await);
        assert_eq!(own, stock, "own login with {options:?}");
        let driver = outcome(driver_login(&t, TLS_OF_SESSION).await);
        if *driver_can || stock.is_err() {
            assert_eq!(driver, stock, "driver with {options:?}");
        } else {
            assert!(
                driver == stock || driver == Err(2026),
                "driver with {options:?}: {driver:?}, stock {stock:?}"
            );
        }
        outcomes.push((options.clone(), stock));
    }
    // Not all alike: plain text, TLS 1.2 and 1.3, refusals.
    let seen = |p: &dyn Fn(&Outcome) -> bool| outcomes.iter().any(|(_, o)| p(o));
    assert!(
        seen(&|o| o.as_ref().is_ok_and(|s| s.trim().is_empty())),
        "{outcomes:?}"
    );
    assert!(
        seen(&|o| o
            .as_ref()
            .is_ok_and(|s| s.starts_with("TLSv1.2 ECDHE-RSA-AES128"))),
        "{outcomes:?}"
    );
    assert!(
        seen(&|o| o
            .as_ref()
            .is_ok_and(|s| s == "TLSv1.3 TLS_AES_128_GCM_SHA256")),
        "{outcomes:?}"
    );
    assert!(seen(&|o| *o == Err(2026)), "{outcomes:?}");
}

/// The option files read, in order, are the ones the stock client's own
/// `--help` lists under the same environment (`MARIADB_HOME`'s my.cnf,
/// `--defaults-extra-file`, `~/.my.cnf`); MARIADB_HOME was not read before.
#[test]
fn the_option_files_read_are_the_ones_the_stock_client_lists() {
    let home = tempfile::tempdir().expect("home");
    let mh = tempfile::tempdir().expect("mariadb home");
    let extra = mh.path().join("extra.cnf");
    std::fs::write(&extra, "[client]\n").expect("extra");
    for with_extra in [false, true] {
        let mut cmd = std::process::Command::new("mariadb");
        cmd.env("HOME", home.path())
            .env("MARIADB_HOME", mh.path())
            .env_remove("MYSQL_HOME");
        if with_extra {
            cmd.arg(format!("--defaults-extra-file={}", extra.display()));
        }
        let o = cmd.arg("--help").output().expect("mariadb --help");
        let text = String::from_utf8_lossy(&o.stdout);
        let listed: Vec<std::path::PathBuf> = text
            .lines()
            .skip_while(|l| !l.starts_with("Default options are read from"))
            .nth(1)
            .expect("the stock client lists its option files")
            .split_whitespace()
            .map(|f| match f.strip_prefix("~/") {
                Some(rest) => home.path().join(rest),
                None => f.into(),
            })
            .collect();
        let env = Env {
            home: Some(home.path().to_path_buf()),
            mysql_home: Some(mh.path().to_path_buf()),
            ..Env::from_process()
        };
        let args = ConnArgs {
            defaults_extra_file: with_extra.then(|| extra.clone()),
            ..ConnArgs::default()
        };
        assert_eq!(
            sqlfleet_conn::resolve::option_files_read(&args, &env).expect("list"),
            listed,
            "with_extra={with_extra}"
        );
    }
}

mod option_files_as_the_stock_client_reads_them {
    use proptest::prelude::*;
    use sqlfleet_conn::optfile::{normalize_key, OptionFiles};
    use std::collections::BTreeMap;

    /// The groups sqlfleet reads, asked of my_print_defaults too (which
    /// adds the suffixed ones itself when MARIADB_GROUP_SUFFIX is set).
    const GROUPS: &[&str] = sqlfleet_conn::resolve::GROUPS;

    /// The group suffix the generated files are read with.
    const SUFFIX: &str = "_x";

    fn line() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "host",
            "user",
            "password",
            "port",
            "socket",
            "database",
            "ssl-ca",
            "loose-user",
            "default_character_set",
            "ssl_mode",
            "loose_ssl-mode",
        ]);
        let token = prop::sample::select(vec![
            "a",
            "b c",
            " ",
            "#",
            "x#y",
            " #c",
            ";",
            " ;d",
            "\\\\",
            "\\t",
            "\\s",
            "\\b",
            "\\\"",
            "\\'",
            "'",
            "\"",
            "\"q w\"",
            "'q w'",
            "\"a\\tb\"",
            "'a\\sb'",
            "=",
            "\\x",
            "\\",
        ]);
        let value = prop::collection::vec(token, 0..5).prop_map(|t| t.concat());
        let sep = prop::sample::select(vec!["=", " = ", "= ", " =", "=\t"]);
        let indent = prop::sample::select(vec!["", "  ", "\t"]);
        prop_oneof![
            2 => prop::sample::select(vec![
                "[client]", "[sqlfleet]", "[client-server]", "[client-mariadb]", "[mysql]",
                "[ client ]", "[mysqld]", "[client_x]", "[SQLFLEET_X]",
            ])
            .prop_map(str::to_string),
            1 => prop::sample::select(vec!["", "# note", "; note", "   # indented"]).prop_map(str::to_string),
            1 => (indent.clone(), key.clone()).prop_map(|(i, k)| format!("{i}{k}")),
            1 => prop::sample::select(vec!["!include {SECOND}", "!include /nonexistent/x.cnf"])
                .prop_map(str::to_string),
            6 => (indent, key, sep, value).prop_map(|(i, k, s, v)| format!("{i}{k}{s}{v}")),
        ]
    }

    /// What the stock client's own reader gives for these groups: the
    /// last value of each option (None for a bare option), or None when
    /// it refuses the file or complains about it.
    fn stock(path: &std::path::Path, suffix: bool) -> Option<BTreeMap<String, Option<String>>> {
        let mut cmd = std::process::Command::new("my_print_defaults");
        cmd.env_remove("MYSQL_GROUP_SUFFIX")
            .env_remove("MARIADB_GROUP_SUFFIX");
        if suffix {
            cmd.env("MARIADB_GROUP_SUFFIX", SUFFIX);
        }
        let o = cmd
            .arg(format!("--defaults-file={}", path.display()))
            .args(GROUPS)
            .output()
            .expect("my_print_defaults (mariadb-client-core)");
        // A file it complains about (it goes on past an included file's
        // error, printing it) is one sqlfleet refuses.
        if !o.status.success() || String::from_utf8_lossy(&o.stderr).contains("error:") {
            return None;
        }
        let mut out = BTreeMap::new();
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            let l = l.strip_prefix("--").unwrap_or(l);
            let (k, v) = match l.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (l, None),
            };
            out.insert(normalize_key(k), v);
        }
        Some(out)
    }

    fn ours(
        text: &str,
        path: &std::path::Path,
        suffix: bool,
    ) -> Option<BTreeMap<String, Option<String>>> {
        let mut f = OptionFiles::default();
        f.parse_str(text, path).ok()?;
        let env = sqlfleet_conn::Env {
            group_suffix: suffix.then(|| SUFFIX.to_string()),
            ..sqlfleet_conn::Env::default()
        };
        let groups = env.groups();
        Some(
            f.merged(&groups.iter().map(String::as_str).collect::<Vec<_>>())
                .into_iter()
                .map(|(k, v)| (k, v.value))
                .collect(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
        /// Generated option files (groups in any order, comments, quotes,
        /// escapes, `#` and `;` inside and after values, bare options,
        /// `loose-` and `_`) are read as MariaDB's own reader
        /// (my_print_defaults) reads them: the same value for every
        /// option of the groups sqlfleet reads, the line read last
        /// winning; a file it refuses is refused.
        #[test]
        fn generated_option_files_read_as_my_print_defaults_reads_them(
            lines in prop::collection::vec(line(), 1..12),
            second in prop::collection::vec(line(), 0..6),
            suffix in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().expect("dir");
            let path = dir.path().join("my.cnf");
            let second_path = dir.path().join("second.cnf");
            // The second file includes nothing (no loops).
            let second: Vec<String> = second.into_iter().filter(|l| !l.starts_with('!')).collect();
            std::fs::write(&second_path, format!("{}\n", second.join("\n"))).expect("write");
            let text = format!("{}\n", lines.join("\n"))
                .replace("{SECOND}", &second_path.display().to_string());
            std::fs::write(&path, &text).expect("write");
            let stock = stock(&path, suffix);
            let ours = ours(&text, &path, suffix);
            prop_assert_eq!(ours, stock, "file:\n{}\nsecond:\n{}", text, second.join("\n"));
        }
    }
}
