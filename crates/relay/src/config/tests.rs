use super::*;

fn write(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(f.path(), text).expect("write");
    f
}

#[test]
fn a_full_file() {
    let hashes = hash_lines("app-pw");
    let f = write(&format!(
        r#"
[relay]
listen = ["127.0.0.1:6033", "unix:/tmp/r.sock"]
mode = "session"
metrics = "127.0.0.1:9104"

[backend]
servers = ["db1:3307", "db2"]
user = "relay"
password = "x"

[pool]
max = 20
min = 2
wait_timeout = 0.5

[[users]]
name = "app"
{hashes}
"#
    ));
    let c = load(f.path()).expect("loads");
    assert_eq!(c.mode, Mode::Session);
    assert_eq!(c.backends[1].addr(), "db2:3306");
    assert_eq!(c.dynamic.pool.max, 20);
    assert_eq!(c.dynamic.pool.wait_timeout, Duration::from_millis(500));
    assert!(c.dynamic.users["app"] == Account::from_password("app-pw"));
}

#[test]
fn errors_name_the_line() {
    let f =
        write("[relay]\nlisten = [\"a:1\"]\nbogus = 1\n[backend]\nservers=[\"x\"]\nuser=\"u\"\n");
    let e = load(f.path()).map(|_| ()).expect_err("fails").to_string();
    assert!(e.contains("line 3") && e.contains("bogus"), "{e}");
    let f = write("[relay]\nlisten = [\"a:1\"]\n[backend]\nservers=[\"x\"]\nuser=\"u\"\n[[users]]\nname=\"a\"\nnative_hash=\"*12\"\n");
    let e = load(f.path()).map(|_| ()).expect_err("fails").to_string();
    assert!(e.contains("native_hash"), "{e}");
    let f = write("[relay]\nlisten = [\"a:1\"]\n[backend]\nservers=[\"x\", \"y\"]\nuser=\"u\"\ngroups = [\"\", \"olap\"]\n[[rules]]\nmatch_regex=\"x\"\nroute=\"replica\"\ngroup=\"oltp\"\n");
    let e = load(f.path()).map(|_| ()).expect_err("fails").to_string();
    assert!(e.contains("no server is in group \"oltp\""), "{e}");
    let f = write("[relay\n");
    let e = load(f.path()).map(|_| ()).expect_err("fails").to_string();
    assert!(e.contains("line 1"), "{e}");
}

#[test]
fn event_loop_threads() {
    let hashes = hash_lines("app-pw");
    let file = |threads: &str| {
        write(&format!(
            "[relay]\nlisten = [\"127.0.0.1:6033\"]\n{threads}\n[backend]\nservers = [\"db1\"]\nuser = \"relay\"\npassword = \"x\"\n\n[[users]]\nname = \"app\"\n{hashes}\n"
        ))
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let c = load(file("").path()).expect("default");
    assert_eq!(c.threads, cores, "one per core by default");
    let c = load(file("threads = 3").path()).expect("three");
    assert_eq!(c.threads, 3);
    for bad in ["threads = 0", "threads = 1000"] {
        let e = load(file(bad).path()).expect_err(bad);
        assert!(e.to_string().contains("relay.threads"), "{bad}: {e}");
    }
}

/// Per-user accounts are the default; the shared account is said.
#[test]
fn accounts_are_per_user_unless_shared_is_chosen() {
    let base = "[relay]\nlisten = [\"a:1\"]\n[backend]\nservers=[\"x\"]\nuser=\"u\"\n";
    for (line, per_user) in [
        ("", Ok(true)),
        ("accounts = \"per-user\"\n", Ok(true)),
        ("accounts = \"shared\"\n", Ok(false)),
        (
            "accounts = \"everyone\"\n",
            Err("use \"shared\" or \"per-user\""),
        ),
    ] {
        let f = write(&format!("{base}{line}"));
        match (load(f.path()), per_user) {
            (Ok(c), Ok(want)) => assert_eq!(c.per_user_accounts, want, "{line:?}"),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{line:?}: {e}"),
            (got, want) => panic!(
                "{line:?}: {:?} (expected {want:?})",
                got.map(|c| c.per_user_accounts)
            ),
        }
    }
}

#[test]
fn dynamic_sql_a_shared_account_cannot_read_is_refused_unless_the_file_says_run() {
    let base = "[relay]\nlisten = [\"a:1\"]\n[backend]\nservers=[\"x\"]\nuser=\"u\"\n";
    for (lines, run) in [
        ("accounts = \"shared\"\n", Ok(false)),
        (
            "accounts = \"shared\"\nshared_dynamic_sql = \"refuse\"\n",
            Ok(false),
        ),
        (
            "accounts = \"shared\"\nshared_dynamic_sql = \"run\"\n",
            Ok(true),
        ),
        (
            "shared_dynamic_sql = \"run\"\n",
            Err("only with accounts = \"shared\""),
        ),
        (
            "accounts = \"shared\"\nshared_dynamic_sql = \"yes\"\n",
            Err("use \"refuse\" or \"run\""),
        ),
    ] {
        let f = write(&format!("{base}{lines}"));
        match (load(f.path()), run) {
            (Ok(c), Ok(want)) => assert_eq!(c.shared_dynamic_sql, want, "{lines:?}"),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{lines:?}: {e}"),
            (got, want) => panic!(
                "{lines:?}: {:?} (expected {want:?})",
                got.map(|c| c.shared_dynamic_sql)
            ),
        }
    }
}

#[test]
fn a_users_file_names_its_bad_line() {
    // (text, accounts read, error)
    let rows: [(&str, Vec<&str>, Option<&str>); 5] = [
        (
            "app:pw\n# a comment\n\nops:secret:with:colons\n",
            vec!["app", "ops"],
            None,
        ),
        ("", vec![], None),
        (
            "app:pw\nnocolon\n",
            vec![],
            Some("users.txt:2: expected NAME:PASSWORD"),
        ),
        (
            ":pw\n",
            vec![],
            Some("users.txt:1: --client-user: empty user name"),
        ),
        ("  app:pw  \n", vec!["app"], None),
    ];
    for (text, names, err) in rows {
        match super::parse_users_file(text, "users.txt") {
            Ok(v) => {
                assert_eq!(err, None, "{text:?}");
                let got: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(got, names, "{text:?}");
            }
            Err(e) => assert_eq!(Some(e.to_string().as_str()), err, "{text:?}"),
        }
    }
}

/// Several writable non-Galera servers share writes only when the file
/// says so; the default refuses them.
#[test]
fn multi_primary_is_an_explicit_choice() {
    let base = "[relay]\nlisten = [\"127.0.0.1:6033\"]\n[backend]\nservers = [\"db1\", \"db2\"]\nuser = \"relay\"\npassword = \"x\"\n";
    let c = load(write(base).path()).expect("loads");
    assert!(!c.routing.multi_primary, "off by default");
    let on = format!("{base}[routing]\nmulti_primary = true\n");
    assert!(
        load(write(&on).path())
            .expect("loads")
            .routing
            .multi_primary
    );
}

/// Replicas' sessions must read with the primary's settings unless the
/// file names those that may differ; a name the relay does not compare
/// is refused, naming the ones it does.
#[test]
fn settings_that_may_differ_are_named_from_the_compared_ones() {
    let base = "[relay]\nlisten = [\"127.0.0.1:6033\"]\n[backend]\nservers = [\"db1\", \"db2\"]\nuser = \"relay\"\npassword = \"x\"\n";
    let c = load(write(base).path()).expect("loads");
    assert!(c.routing.settings_may_differ.is_empty(), "none by default");
    let some = format!(
        "{base}[routing]\nsettings_may_differ = [\"GROUP_CONCAT_MAX_LEN\", \"time_zone\"]\n"
    );
    assert_eq!(
        load(write(&some).path())
            .expect("loads")
            .routing
            .settings_may_differ,
        ["group_concat_max_len", "time_zone"]
    );
    let bad = format!("{base}[routing]\nsettings_may_differ = [\"sort_buffer_size\"]\n");
    let e = load(write(&bad).path()).expect_err("refused").to_string();
    assert!(
        e.contains("'sort_buffer_size' is not a setting the relay compares")
            && e.contains("time_zone"),
        "{e}"
    );
}

/// A server reached through its socket goes by the name others know it
/// by (`unix:/path as host:port`): one name in /status, metrics and logs
/// across commands, the socket as an extra field.
#[test]
fn a_socket_backend_goes_by_the_name_it_is_given() {
    /// (the name, the socket) or what the refusal says
    type Want<'a> = Result<(&'a str, Option<&'a str>), &'a str>;
    let rows: &[(&str, Want)] = &[
        ("db1:3307", Ok(("db1:3307", None))),
        (
            "unix:/run/m.sock",
            Ok(("unix:/run/m.sock", Some("unix:/run/m.sock"))),
        ),
        (
            "unix:/run/m.sock as 127.0.0.1:3307",
            Ok(("127.0.0.1:3307", Some("unix:/run/m.sock"))),
        ),
        ("db1:3307 as db2:3307", Err("only a socket backend")),
        ("unix:/run/m.sock as ", Err("the name after 'as'")),
    ];
    for (text, want) in rows {
        match (crate::config::Backend::parse(text), want) {
            (Ok(b), Ok((name, socket))) => {
                assert_eq!(b.addr(), *name, "{text}");
                assert_eq!(b.socket_addr().as_deref(), *socket, "{text}");
            }
            (Err(e), Err(why)) => assert!(e.to_string().contains(why), "{text}: {e}"),
            (got, _) => panic!("{text}: {got:?}"),
        }
    }
}

/// `[cache]`: the binlog follower is on by default with a 1 s lag bound;
/// `binlog = false` turns it off; a lag or replica id out of range is
/// named.
#[test]
fn the_cache_follows_the_binlog_unless_told_not_to() {
    let base = "[relay]\nlisten = [\"a:1\"]\n[backend]\nservers=[\"x\"]\nuser=\"u\"\n[[cache_rules]]\ntables = [\"t\"]\nttl = 5\n";
    let c = load(write(base).path()).expect("loads");
    let f = c.dynamic.cache.follow.expect("on by default");
    assert_eq!((f.max_lag, f.server_id), (Duration::from_secs(1), None));
    for (cache, want) in [
        ("binlog = false", Ok(None)),
        (
            "max_lag = 0.25\nserver_id = 77",
            Ok(Some((Duration::from_millis(250), Some(77)))),
        ),
        ("max_lag = 0", Err("cache.max_lag")),
        ("max_lag = 7200", Err("cache.max_lag")),
        ("server_id = 0", Err("cache.server_id")),
        ("binlgo = true", Err("binlgo")),
    ] {
        let r = load(write(&format!("{base}[cache]\n{cache}\n")).path());
        match (r, want) {
            (Ok(c), Ok(w)) => assert_eq!(
                c.dynamic.cache.follow.map(|f| (f.max_lag, f.server_id)),
                w,
                "{cache}"
            ),
            (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{cache}: {e}"),
            (r, w) => panic!("{cache}: {:?} where {w:?}", r.map(|_| ())),
        }
    }
}
