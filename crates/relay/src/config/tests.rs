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
