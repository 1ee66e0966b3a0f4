//! Helpers for running the `sqlfleet` binary in tests.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

pub mod relay;

pub fn sqlfleet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sqlfleet"))
}

/// `sqlfleet load` on the server of `defaults_file`, without progress.
pub fn load(defaults_file: &Path, args: &[&str]) -> Output {
    sqlfleet()
        .arg("load")
        .arg(format!("--defaults-file={}", defaults_file.display()))
        .args(["--progress", "none"])
        .args(args)
        .output()
        .expect("run sqlfleet")
}

/// Runs `sqlfleet args...` with `$SQLFLEET_HOME` set to `home`.
pub fn run_in(home: &Path, args: &[&str]) -> Output {
    sqlfleet()
        .env("SQLFLEET_HOME", home)
        .args(args)
        .output()
        .expect("run sqlfleet")
}

/// Runs `cmd` with `input` on its standard input; its output.
pub fn output_with_stdin(cmd: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut c = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    c.stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    c.wait_with_output().expect("wait")
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

/// Kills `child` with SIGKILL once `progress()` reaches `at_least`, failing
/// if the child finishes first or nothing happens for a minute.
pub fn kill_9_when(child: &mut std::process::Child, at_least: i64, progress: impl FnMut() -> i64) {
    signal_when(child, libc::SIGKILL, at_least, progress);
    child.wait().expect("reap");
}

/// Sends `sig` to `child` once `progress()` reaches `at_least`, failing if
/// the child finishes first or nothing happens for a minute.
pub fn signal_when(
    child: &mut std::process::Child,
    sig: libc::c_int,
    at_least: i64,
    mut progress: impl FnMut() -> i64,
) {
    let t0 = std::time::Instant::now();
    while progress() < at_least {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "finished before it could be stopped"
        );
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "no progress"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: a signal to our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Runs tmux with `args` (a terminal screen driven in a pane); its stdout.
pub fn tmux(args: &[&str]) -> String {
    let o = std::process::Command::new("tmux")
        .args(args)
        .output()
        .expect("tmux (scripts/deps.sh installs it)");
    String::from_utf8_lossy(&o.stdout).into_owned()
}
