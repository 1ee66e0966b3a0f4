//! How the tests run the real client programs in tests/clients, one
//! language each (`scripts/deps.sh` installs the drivers).

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

pub fn cache() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    PathBuf::from(home).join(".cache/sqlfleet")
}

/// How each language runs one of the programs in tests/clients.
pub fn python(file: &str) -> Command {
    let mut c = Command::new("/usr/bin/python3");
    c.arg(file);
    c
}

pub fn go(file: &str) -> Command {
    let mut c = Command::new("go");
    c.args(["run", file])
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", cache().join("go-build"))
        .env("GOFLAGS", "");
    c
}

pub fn node(file: &str) -> Command {
    let mut c = Command::new("node");
    c.arg(file)
        .env("NODE_PATH", cache().join("node/node_modules"));
    c
}

pub fn java(file: &str) -> Command {
    let mut c = Command::new("java");
    c.args(["-cp", "/usr/share/java/mariadb-java-client.jar", file]);
    c
}

/// PHP with LOAD DATA LOCAL allowed (php.ini forbids it by default).
pub fn php(file: &str) -> Command {
    let mut c = Command::new("php");
    c.args(["-d", "mysqli.allow_local_infile=1", file]);
    c
}
