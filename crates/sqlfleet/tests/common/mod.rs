//! Helpers for running the `sqlfleet` binary in tests.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

pub fn sqlfleet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sqlfleet"))
}

/// Runs `sqlfleet args...` with `$SQLFLEET_HOME` set to `home`.
pub fn run_in(home: &Path, args: &[&str]) -> Output {
    sqlfleet()
        .env("SQLFLEET_HOME", home)
        .args(args)
        .output()
        .expect("run sqlfleet")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts exit code 1 and a single-line error on stderr containing `want`.
pub fn assert_setup_error(o: &Output, want: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "exit code; stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(want), "wanted '{want}' in: {err}");
}
