//! Precedence tests: each source overrides exactly the ones below it.

use super::*;
use std::fs;

struct Fixture {
    dir: tempfile::TempDir,
    env: Env,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    fs::create_dir_all(&home).expect("mkdir");
    let env = Env {
        home: Some(home),
        sqlfleet_home: dir.path().join("sqlfleet"),
        login_user: Some("login".into()),
        global_files: vec![dir.path().join("etc-my.cnf")],
        ..Env::default()
    };
    Fixture { dir, env }
}

impl Fixture {
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, text).expect("write");
        p
    }
    fn user_cnf(&self, text: &str) {
        self.write("home/.my.cnf", text);
    }
}

fn tcp(host: &str, port: u16) -> Endpoint {
    Endpoint::Tcp {
        host: host.into(),
        port,
    }
}

fn pw(t: &Target) -> Option<&str> {
    t.secret().map(|s| s.expose())
}

#[test]
fn builtin_defaults_are_the_mysql_clients() {
    let f = fixture();
    let t = resolve(&ConnArgs::default(), &f.env).expect("resolves");
    assert_eq!(t.endpoint, Endpoint::Socket(DEFAULT_SOCKET.into()));
    assert_eq!(t.user, "login");
    assert_eq!(t.password, None);
    assert_eq!(t.ssl_mode, SslMode::Preferred);
}

#[test]
fn full_precedence_chain() {
    let mut f = fixture();
    f.env.mysql_pwd = Some(Secret::new("env-pw"));
    f.env.mysql_host = Some("envhost".into());
    f.write(
        "etc-my.cnf",
        "[client]\nhost=globalhost\nport=1111\nuser=globaluser\n",
    );
    f.user_cnf("[client]\nuser=clientuser\npassword=client-pw\n[sqlfleet]\nport=2222\n");

    // Option files beat the environment, a later line (here [sqlfleet] after
    // [client]) beats an earlier one, ~/.my.cnf beats /etc.
    let t = resolve(&ConnArgs::default(), &f.env).expect("resolves");
    assert_eq!(t.endpoint, tcp("globalhost", 2222));
    assert_eq!(t.user, "clientuser");
    assert_eq!(pw(&t), Some("client-pw"));

    // The DSN beats option files.
    let args = ConnArgs {
        dsn: Some("mysql://dsnuser:dsn-pw@dsnhost:3333/dsndb".into()),
        ..ConnArgs::default()
    };
    let t = resolve(&args, &f.env).expect("resolves");
    assert_eq!(t.endpoint, tcp("dsnhost", 3333));
    assert_eq!((t.user.as_str(), pw(&t)), ("dsnuser", Some("dsn-pw")));
    assert_eq!(t.database.as_deref(), Some("dsndb"));

    // Flags beat the DSN, field by field.
    let args = ConnArgs {
        port: Some(4444),
        password: Some(Some("flag-pw".into())),
        ..args
    };
    let t = resolve(&args, &f.env).expect("resolves");
    assert_eq!(t.endpoint, tcp("dsnhost", 4444));
    assert_eq!((t.user.as_str(), pw(&t)), ("dsnuser", Some("flag-pw")));
}

#[test]
fn mysql_pwd_used_when_nothing_else_sets_a_password() {
    let mut f = fixture();
    f.env.mysql_pwd = Some(Secret::new("env-pw"));
    let t = resolve(&ConnArgs::default(), &f.env).expect("resolves");
    assert_eq!(pw(&t), Some("env-pw"));
}

#[test]
fn defaults_file_replaces_the_search_list() {
    let f = fixture();
    f.user_cnf("[client]\nuser=fromhome\n");
    let only = f.write("only.cnf", "[client]\nhost=onlyhost\n");
    let args = ConnArgs {
        defaults_file: Some(only),
        ..ConnArgs::default()
    };
    let t = resolve(&args, &f.env).expect("resolves");
    assert_eq!(t.user, "login");
    assert_eq!(t.endpoint, tcp("onlyhost", 3306));
}

#[test]
fn defaults_extra_file_sits_between_global_and_user() {
    let f = fixture();
    f.write("etc-my.cnf", "[client]\nuser=g\nhost=g\nport=1\n");
    let extra = f.write("extra.cnf", "[client]\nuser=e\nhost=e\n");
    f.user_cnf("[client]\nuser=u\n");
    let args = ConnArgs {
        defaults_extra_file: Some(extra),
        ..ConnArgs::default()
    };
    let t = resolve(&args, &f.env).expect("resolves");
    assert_eq!(t.user, "u");
    assert_eq!(t.endpoint, tcp("e", 1));
}

#[test]
fn no_defaults_reads_nothing() {
    let f = fixture();
    f.user_cnf("[client]\nuser=fromhome\n");
    let args = ConnArgs {
        no_defaults: true,
        ..ConnArgs::default()
    };
    assert_eq!(resolve(&args, &f.env).expect("resolves").user, "login");
}

#[test]
fn localhost_socket_rules() {
    let f = fixture();
    f.user_cnf("[client]\nsocket=/tmp/my.sock\nport=3310\n");
    // localhost + port from an option file: still the socket (as mysql).
    let t = resolve(&ConnArgs::default(), &f.env).expect("resolves");
    assert_eq!(t.endpoint, Endpoint::Socket("/tmp/my.sock".into()));
    // A port on the command line without a socket means TCP (as mariadb).
    let args = ConnArgs {
        port: Some(3399),
        ..ConnArgs::default()
    };
    assert_eq!(
        resolve(&args, &f.env).expect("ok").endpoint,
        tcp("127.0.0.1", 3399)
    );
    // --protocol wins.
    let args = ConnArgs {
        protocol: Some("tcp".into()),
        ..ConnArgs::default()
    };
    assert_eq!(
        resolve(&args, &f.env).expect("ok").endpoint,
        tcp("127.0.0.1", 3310)
    );
    let args = ConnArgs {
        host: Some("db".into()),
        protocol: Some("socket".into()),
        ..ConnArgs::default()
    };
    assert_eq!(
        resolve(&args, &f.env).expect("ok").endpoint,
        Endpoint::Socket("/tmp/my.sock".into())
    );
}

#[test]
fn bare_password_prompts() {
    let f = fixture();
    f.user_cnf("[client]\npassword\n");
    let t = resolve(&ConnArgs::default(), &f.env).expect("resolves");
    assert_eq!(t.password, Some(PasswordSpec::Prompt));
    let args = ConnArgs {
        password: Some(None),
        ..ConnArgs::default()
    };
    assert_eq!(
        resolve(&args, &f.env).expect("ok").password,
        Some(PasswordSpec::Prompt)
    );
}

#[test]
fn sandbox_target_reads_its_defaults_file_only() {
    let f = fixture();
    f.user_cnf("[client]\nuser=fromhome\npassword=nope\n");
    f.write(
        "sqlfleet/sandboxes/demo/client.cnf",
        "[client]\nhost=127.0.0.1\nport=23306\nuser=root\npassword=sbx\n",
    );
    let args = ConnArgs {
        sandbox: Some("demo".into()),
        ..ConnArgs::default()
    };
    let t = resolve(&args, &f.env).expect("resolves");
    assert_eq!(t.endpoint, tcp("127.0.0.1", 23306));
    assert_eq!((t.user.as_str(), pw(&t)), ("root", Some("sbx")));
    // Flags still override.
    let args = ConnArgs {
        database: Some("x".into()),
        ..args
    };
    assert_eq!(
        resolve(&args, &f.env).expect("ok").database.as_deref(),
        Some("x")
    );
}

/// A sandbox none of whose servers' sockets is there is stopped: the
/// error says so and how to start it (not a bare ERROR 2003 later); with
/// any node's socket there (even not the primary's) it resolves.
#[test]
fn a_stopped_sandbox_is_called_stopped() {
    let f = fixture();
    let sock = f.env.sqlfleet_home.join("sandboxes/demo/node1/mysqld.sock");
    f.write(
        "sqlfleet/sandboxes/demo/client.cnf",
        &format!(
            "[client]\nhost=127.0.0.1\nport=23306\nuser=root\nsocket = {}\n",
            sock.display()
        ),
    );
    let args = ConnArgs {
        sandbox: Some("demo".into()),
        ..ConnArgs::default()
    };
    std::fs::create_dir_all(sock.parent().expect("dir")).expect("dir");
    let e = resolve(&args, &f.env).expect_err("stopped").to_string();
    assert!(
        e.starts_with("the sandbox 'demo' is stopped")
            && e.contains("sqlfleet sandbox up --name demo"),
        "{e}"
    );
    let replica = f.env.sqlfleet_home.join("sandboxes/demo/node2/mysqld.sock");
    std::fs::create_dir_all(replica.parent().expect("dir")).expect("dir");
    std::fs::write(&replica, "").expect("socket stand-in");
    assert!(resolve(&args, &f.env).is_ok(), "a replica runs");
    std::fs::remove_file(&replica).expect("rm");
    std::fs::write(&sock, "").expect("socket stand-in");
    assert!(resolve(&args, &f.env).is_ok());
}

/// A server that did not stop cleanly (killed, or the machine restarted)
/// leaves its socket and pid file: the sandbox is still called stopped
/// when the pid names no process, or a process that is not a server (a
/// number taken again after a restart), and runs while a server process
/// has it.
#[test]
fn a_sandbox_whose_servers_died_is_called_stopped() {
    let f = fixture();
    let node = f.env.sqlfleet_home.join("sandboxes/demo/node1");
    f.write(
        "sqlfleet/sandboxes/demo/client.cnf",
        "[client]\nhost=127.0.0.1\nport=23306\nuser=root\n",
    );
    std::fs::create_dir_all(&node).expect("dir");
    std::fs::write(node.join("mysqld.sock"), "").expect("socket left behind");
    let args = ConnArgs {
        sandbox: Some("demo".into()),
        ..ConnArgs::default()
    };
    let stopped = |why: &str| {
        let e = resolve(&args, &f.env)
            .map(|_| ())
            .expect_err(why)
            .to_string();
        assert!(e.starts_with("the sandbox 'demo' is stopped"), "{why}: {e}");
    };
    // A pid that was never handed out (above the kernel's limit).
    std::fs::write(node.join("mariadbd.pid"), "4194305\n").expect("pid");
    stopped("no such process");
    std::fs::write(
        node.join("mariadbd.pid"),
        format!("{}\n", std::process::id()),
    )
    .expect("pid");
    stopped("the number is this test's, not a server's");
    // A process whose name is a server's.
    let bin = f.dir.path().join("mariadbd");
    std::os::unix::fs::symlink("/bin/sleep", &bin).expect("link");
    let mut server = std::process::Command::new(&bin)
        .arg("30")
        .spawn()
        .expect("sleep");
    std::fs::write(node.join("mariadbd.pid"), format!("{}\n", server.id())).expect("pid");
    let running = resolve(&args, &f.env).map(|_| ());
    let _ = server.kill();
    let _ = server.wait();
    assert!(running.is_ok(), "{running:?}");
    stopped("the server is gone");
}

#[test]
fn errors_are_one_line_and_name_the_cause() {
    let f = fixture();
    let args = ConnArgs {
        sandbox: Some("ghost".into()),
        ..ConnArgs::default()
    };
    let e = resolve(&args, &f.env).expect_err("unknown").to_string();
    assert!(e.starts_with("no sandbox named 'ghost'"), "{e}");
    let args = ConnArgs {
        sandbox: Some("../etc".into()),
        ..ConnArgs::default()
    };
    assert!(resolve(&args, &f.env).is_err());

    f.user_cnf("[client]\nport=eighty\n");
    let e = resolve(&ConnArgs::default(), &f.env)
        .expect_err("bad port")
        .to_string();
    assert!(
        e.ends_with(".my.cnf:2: option 'port': 'eighty' is not a port number"),
        "{e}"
    );

    f.user_cnf("[client\nport=1\n");
    let e = resolve(&ConnArgs::default(), &f.env)
        .expect_err("bad file")
        .to_string();
    assert!(e.contains(".my.cnf:1: group header"), "{e}");
    assert!(!e.contains('\n'));

    let args = ConnArgs {
        defaults_file: Some("/nonexistent.cnf".into()),
        ..ConnArgs::default()
    };
    let e = resolve(&args, &f.env).expect_err("missing").to_string();
    assert!(e.starts_with("/nonexistent.cnf: cannot read"), "{e}");
}

#[test]
fn passwords_never_in_debug_output() {
    let f = fixture();
    let args = ConnArgs {
        dsn: Some("mysql://u:topsecret@h/db".into()),
        ..ConnArgs::default()
    };
    let t = resolve(&args, &f.env).expect("resolves");
    assert!(!format!("{t:?}").contains("topsecret"));
}

#[test]
fn default_character_set_from_files_and_flags() {
    let f = fixture();
    f.user_cnf("[client]\ndefault-character-set=latin1\n");
    let t = resolve(&ConnArgs::default(), &f.env).expect("ok");
    assert_eq!(t.charset.as_deref(), Some("latin1"));
    let args = ConnArgs {
        default_character_set: Some("auto".into()),
        ..ConnArgs::default()
    };
    assert_eq!(
        resolve(&args, &f.env).expect("ok").charset.as_deref(),
        Some("utf8mb4")
    );
    let args = ConnArgs {
        default_character_set: Some("utf8; DROP".into()),
        ..ConnArgs::default()
    };
    assert!(resolve(&args, &f.env).is_err());
    let f = fixture();
    assert_eq!(
        resolve(&ConnArgs::default(), &f.env).expect("ok").charset,
        None
    );
}

/// `sqlfleet sandbox env` exports SQLFLEET_SANDBOX: it points every command
/// at that sandbox (over ~/.my.cnf), and yields to a server named on the
/// command line; each result says which source named the server.
#[test]
fn sqlfleet_sandbox_points_at_the_sandbox_and_origins_are_reported() {
    let mut f = fixture();
    let home_cnf = f.dir.path().join("home/.my.cnf");
    f.user_cnf("[client]\nhost=db.example\nuser=fromhome\n");
    f.write(
        "sqlfleet/sandboxes/demo/client.cnf",
        "[client]\nhost=127.0.0.1\nport=23306\nuser=root\npassword=sbx\n",
    );
    let none = ConnArgs::default();
    let (t, o) = resolve_traced(&none, &f.env).expect("resolves");
    assert_eq!(t.endpoint, tcp("db.example", 3306));
    assert_eq!(o, Origin::OptionFile(home_cnf.clone()));

    f.env.sqlfleet_sandbox = Some("demo".into());
    let (t, o) = resolve_traced(&none, &f.env).expect("resolves");
    assert_eq!(t.endpoint, tcp("127.0.0.1", 23306));
    assert_eq!((t.user.as_str(), pw(&t)), ("root", Some("sbx")));
    assert_eq!(
        o,
        Origin::Sandbox {
            name: "demo".into(),
            from_env: true
        }
    );

    let flags = ConnArgs {
        host: Some("db2".into()),
        ..ConnArgs::default()
    };
    let (t, o) = resolve_traced(&flags, &f.env).expect("resolves");
    assert_eq!(t.endpoint, tcp("db2", 3306));
    assert_eq!(t.user, "fromhome", "~/.my.cnf is read again");
    assert_eq!(o, Origin::Flags);

    let dsn = ConnArgs {
        dsn: Some("mysql://u@db3:3310/".into()),
        ..ConnArgs::default()
    };
    assert_eq!(resolve_traced(&dsn, &f.env).expect("ok").1, Origin::Dsn);

    f.env.sqlfleet_sandbox = None;
    f.user_cnf("[client]\nuser=fromhome\n");
    let (_, o) = resolve_traced(&none, &f.env).expect("resolves");
    assert_eq!(o, Origin::BuiltIn);
    assert!(!o.named());
    f.env.mysql_host = Some("envhost".into());
    assert_eq!(
        resolve_traced(&none, &f.env).expect("ok").1,
        Origin::Environment
    );
}

#[test]
fn an_option_file_written_for_a_target_reads_back_as_that_target() {
    let f = fixture();
    let mut t = resolve(&ConnArgs::default(), &f.env).expect("resolves");
    t.endpoint = tcp("db.example.com", 3310);
    t.user = "repl".into();
    t.password = Some(PasswordSpec::Given(Secret::new(r#"p"w\d #;x"#)));
    let cnf = f.write("written.cnf", &t.option_file());
    let back = resolve(
        &ConnArgs {
            defaults_file: Some(cnf),
            ..ConnArgs::default()
        },
        &f.env,
    )
    .expect("resolves");
    assert_eq!(back.endpoint, t.endpoint);
    assert_eq!(back.user, "repl");
    assert_eq!(pw(&back), Some(r#"p"w\d #;x"#));
}

/// The TLS words of the MariaDB client's option files, and an
/// init-command, as the stock client would take them: one row per file.
#[test]
fn an_option_file_asking_for_a_checked_certificate_gets_one() {
    let cases: [(&str, Result<SslMode, &str>); 9] = [
        ("ssl-verify-server-cert\n", Ok(SslMode::VerifyIdentity)),
        ("ssl_verify_server_cert = 1\n", Ok(SslMode::VerifyIdentity)),
        (
            "loose-ssl-verify-server-cert = ON\n",
            Ok(SslMode::VerifyIdentity),
        ),
        (
            "ssl-mode = PREFERRED\nssl-verify-server-cert\n",
            Ok(SslMode::VerifyIdentity),
        ),
        ("ssl-verify-server-cert = 0\n", Ok(SslMode::Preferred)),
        (
            "ssl-verify-server-cert = OFF\nssl-mode = REQUIRED\n",
            Ok(SslMode::Required),
        ),
        // `ssl` alone is the default already: TLS where offered.
        ("ssl\n", Ok(SslMode::Preferred)),
        (
            "ssl-verify-server-cert = maybe\n",
            Err(".my.cnf:3: option 'ssl-verify-server-cert': 'maybe' is not 1/0"),
        ),
        (
            "init-command = SET sql_log_bin = 0\n",
            Err(".my.cnf:3: option 'init-command': sqlfleet does not run an init-command"),
        ),
    ];
    for (text, want) in cases {
        let f = fixture();
        f.user_cnf(&format!("[client]\nhost = db1\n{text}"));
        let got = resolve(&ConnArgs::default(), &f.env);
        match (got, want) {
            (Ok(t), Ok(mode)) => assert_eq!(t.ssl_mode, mode, "{text}"),
            (Err(e), Err(words)) => {
                let e = e.to_string();
                assert!(e.contains(".my.cnf") && e.contains(words), "{text}: {e}");
            }
            (got, want) => panic!("{text}: {:?} where {want:?}", got.map(|t| t.ssl_mode)),
        }
    }
    // The command line still decides.
    let f = fixture();
    f.user_cnf("[client]\nssl-verify-server-cert\n");
    let args = ConnArgs {
        ssl_mode: Some(SslMode::Disabled),
        ..ConnArgs::default()
    };
    assert_eq!(
        resolve(&args, &f.env).expect("resolves").ssl_mode,
        SslMode::Disabled
    );
}

/// Each option the table says is read changes the resolved target (or
/// is refused as a bad value) when an option file sets it to its sample;
/// each one it says is ignored changes nothing; each refused one is
/// refused naming its line.
#[test]
fn every_shared_client_option_is_read_ignored_or_refused_as_the_table_says() {
    let f = fixture();
    // By the socket and by TCP: a port is seen only over TCP, a socket
    // only over the socket.
    let ways = [
        ConnArgs::default(),
        ConnArgs {
            protocol: Some("tcp".into()),
            ..ConnArgs::default()
        },
    ];
    f.user_cnf("[client]\n");
    let bases: Vec<Target> = ways
        .iter()
        .map(|a| resolve(a, &f.env).expect("base"))
        .collect();
    for (key, handling) in CLIENT_OPTIONS {
        let value = match handling {
            ClientOption::Read(v) => *v,
            _ => "1",
        };
        f.user_cnf(&format!("[client]\n{key}={value}\n"));
        let got: Vec<_> = ways.iter().map(|a| resolve(a, &f.env)).collect();
        match handling {
            ClientOption::Read(_) => {
                let mut changed = false;
                for (g, base) in got.iter().zip(&bases) {
                    match g {
                        Ok(t) => changed |= t != base,
                        // Read, and refused alone (a key without its certificate).
                        Err(e) if e.to_string().contains(key) => changed = true,
                        Err(e) => panic!("{key}={value}: {e}"),
                    }
                }
                assert!(changed, "{key}={value} was not read");
            }
            ClientOption::Ignored(_) => {
                for (g, base) in got.into_iter().zip(&bases) {
                    assert_eq!(&g.expect("ignored"), base, "{key} changed the target");
                }
            }
            ClientOption::Refused(_) => {
                for g in got {
                    let e = g.expect_err("refused").to_string();
                    assert!(e.contains(":2:"), "{key}: {e}");
                }
            }
        }
    }
}

#[test]
fn ssl_off_is_plain_text_and_ssl_on_asks_for_no_more_than_preferred() {
    let f = fixture();
    let args = ConnArgs::default();
    for (text, want) in [
        ("ssl=0", SslMode::Disabled),
        ("skip-ssl", SslMode::Disabled),
        ("disable-ssl", SslMode::Disabled),
        ("ssl=OFF", SslMode::Disabled),
        ("ssl", SslMode::Preferred),
        ("ssl=1", SslMode::Preferred),
        ("ssl-verify-server-cert", SslMode::VerifyIdentity),
    ] {
        f.user_cnf(&format!("[client]\n{text}\n"));
        let t = resolve(&args, &f.env).expect(text);
        assert_eq!(t.ssl_mode, want, "{text}");
    }
}

#[test]
fn the_home_variables_file_and_the_group_suffix_are_read_as_the_stock_client_reads_them() {
    let mut f = fixture();
    let mh = f.write("mh/my.cnf", "[client]\nuser=fromhome\nport=1\n");
    f.env.mysql_home = mh.parent().map(Path::to_path_buf);
    f.write("etc-my.cnf", "[client]\nuser=global\n");
    let extra = f.write("extra.cnf", "[client_prod]\nport=2\n[client]\nport=3\n");
    let args = ConnArgs {
        defaults_extra_file: Some(extra.clone()),
        protocol: Some("tcp".into()),
        ..ConnArgs::default()
    };
    assert_eq!(
        option_files_read(&args, &f.env).expect("list"),
        vec![
            f.dir.path().join("etc-my.cnf"),
            mh.clone(),
            extra.clone(),
            f.dir.path().join("home/.my.cnf"),
        ]
    );
    let t = resolve(&args, &f.env).expect("resolves");
    assert_eq!(t.user, "fromhome");
    assert_eq!(t.endpoint, tcp("127.0.0.1", 3));
    // With the suffix, [client_prod] is read too; the later line wins.
    f.env.group_suffix = Some("_prod".into());
    assert_eq!(
        resolve(&args, &f.env).expect("resolves").endpoint,
        tcp("127.0.0.1", 3)
    );
    f.write("extra.cnf", "[client]\nport=3\n[CLIENT_PROD]\nport=2\n");
    assert_eq!(
        resolve(&args, &f.env).expect("resolves").endpoint,
        tcp("127.0.0.1", 2)
    );
    f.env.group_suffix = None;
    assert_eq!(
        resolve(&args, &f.env).expect("resolves").endpoint,
        tcp("127.0.0.1", 3)
    );
}

#[test]
fn the_mariadb_clients_tls_switches_on_the_command_line() {
    let f = fixture();
    for (args, want) in [
        (
            ConnArgs {
                skip_ssl: true,
                ..ConnArgs::default()
            },
            SslMode::Disabled,
        ),
        (
            ConnArgs {
                ssl: true,
                ..ConnArgs::default()
            },
            SslMode::Preferred,
        ),
        (
            ConnArgs {
                ssl_verify_server_cert: true,
                ..ConnArgs::default()
            },
            SslMode::VerifyIdentity,
        ),
    ] {
        assert_eq!(
            resolve(&args, &f.env).expect("resolves").ssl_mode,
            want,
            "{args:?}"
        );
    }
    // A flag beats an option file's mode, as any flag does.
    f.user_cnf("[client]\nssl-mode=REQUIRED\n");
    let args = ConnArgs {
        skip_ssl: true,
        ..ConnArgs::default()
    };
    assert_eq!(
        resolve(&args, &f.env).expect("resolves").ssl_mode,
        SslMode::Disabled
    );
}
