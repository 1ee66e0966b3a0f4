//! What `--help` tells a newcomer: every command's exit codes, its own
//! options apart from the connection flags, each option described, no
//! "see README".

mod common;

const COMMANDS: &[&[&str]] = &[
    &["load"],
    &["query"],
    &["relay"],
    &["bench", "insert"],
    &["bench", "pool"],
    &["bench", "compare"],
    &["sandbox", "up"],
    &["sandbox", "down"],
    &["sandbox", "list"],
    &["sandbox", "env"],
    &["sandbox", "destroy"],
    &["sandbox", "promote"],
    &["replicate"],
    &["replicate", "status"],
    &["replicate", "skip"],
];

fn help(cmd: &[&str]) -> String {
    let o = common::sqlfleet()
        .args(cmd)
        .arg("--help")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{cmd:?}: {}", common::stderr(&o));
    common::stdout(&o)
}

#[test]
fn every_command_states_its_exit_codes_and_describes_every_option() {
    for cmd in COMMANDS {
        let h = help(cmd);
        let flat = h.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("Exit codes:"),
            "{cmd:?} lacks exit codes:\n{h}"
        );
        assert!(
            !h.contains("README"),
            "{cmd:?} sends the reader elsewhere:\n{h}"
        );
        // Long help: each option's line is followed by its description.
        let lines: Vec<&str> = h.lines().skip_while(|l| !l.starts_with("Usage:")).collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            // Options are indented 2-6 columns, descriptions 10.
            if l.len() - t.len() > 6 {
                continue;
            }
            if t.starts_with("--") || (t.starts_with('-') && t.len() > 2 && t.as_bytes()[2] == b',')
            {
                // Compact layout: "--flag <V>   description" on one line.
                let same_line = t
                    .split_once("  ")
                    .is_some_and(|(_, d)| !d.trim().is_empty() && !d.trim().starts_with('['));
                let next = lines.get(i + 1).map_or("", |n| n.trim());
                assert!(
                    same_line
                        || (!next.is_empty() && !next.starts_with('-') && !next.starts_with('[')),
                    "{cmd:?}: option without a description: {t}\n{h}"
                );
            }
        }
    }
}

#[test]
fn help_sits_under_options_and_protocol_values_appear_once() {
    for cmd in [&["query"][..], &["bench", "pool"], &["load"], &["relay"]] {
        let h = help(cmd);
        let conn = h.find("Connection (").unwrap_or(h.len());
        let help_at = h.find("--help").expect("--help listed");
        assert!(
            help_at < conn,
            "{cmd:?}: --help under the connection heading:\n{h}"
        );
        let own = h.find("Options:").expect("Options heading");
        assert!(own < conn, "{cmd:?}");
        assert!(
            h.contains("[possible values: tcp, socket]"),
            "{cmd:?}: --protocol values once each:\n{h}"
        );
    }
}

/// Completions and man pages come from the same definitions as --help.
/// Every exit code the binary has (exit.rs's enum, the closed-pipe code)
/// is in the guide's table and in `sqlfleet --help`.
#[test]
fn every_exit_code_is_in_the_guide_and_the_help() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(root.join("src/exit.rs")).expect("exit.rs");
    let pipe = std::fs::read_to_string(root.join("src/pipe.rs")).expect("pipe.rs");
    let mut codes: Vec<String> = src
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_suffix(',')?
                .split_once(" = ")
                .map(|(_, n)| n.to_string())
        })
        .filter(|n| n.parse::<i32>().is_ok())
        .collect();
    codes.extend(
        pipe.lines()
            .filter_map(|l| l.strip_prefix("pub const CLOSED: i32 = "))
            .map(|n| n.trim_end_matches(';').to_string()),
    );
    assert!(codes.len() >= 8, "{codes:?}");
    let guide =
        std::fs::read_to_string(root.join("../../docs/guide/operations.md")).expect("guide");
    let h = common::stdout(&common::sqlfleet().arg("--help").output().expect("run"));
    let flat = h.split_whitespace().collect::<Vec<_>>().join(" ");
    for c in &codes {
        assert!(
            guide.contains(&format!("| {c} |")),
            "exit code {c} is not in operations.md's table"
        );
        assert!(
            flat.contains(&format!(" {c} ")),
            "exit code {c} is not in sqlfleet --help:\n{h}"
        );
    }
}

#[test]
fn completions_and_man_pages() {
    for shell in ["bash", "zsh", "fish"] {
        let o = common::sqlfleet()
            .args(["completions", shell])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let s = common::stdout(&o);
        assert!(
            s.contains("sandbox") && s.contains("hosts-file"),
            "{shell}: {s}"
        );
        // Flags with a fixed set of values complete those values.
        for values in ["tsv jsonl csv table", "auto bar json none"] {
            let all = values.split(' ').all(|v| s.contains(v));
            assert!(all, "{shell}: the values {values} are not offered");
        }
    }
    let dir = tempfile::tempdir().expect("tmp");
    let o = common::sqlfleet()
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", common::stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("sqlfleet-query.1")).expect("page");
    assert!(page.starts_with(".ie") || page.contains(".TH"), "{page}");
    assert!(
        page.contains("hosts\\-file") || page.contains("hosts-file"),
        "{page}"
    );
    assert!(dir.path().join("sqlfleet-sandbox-promote.1").is_file());
    // Without --out: refused, and nothing written where it ran.
    let o = common::sqlfleet()
        .arg("man")
        .current_dir(dir.path().join(".."))
        .output()
        .expect("run");
    assert_ne!(o.status.code(), Some(0));
    assert!(
        common::stderr(&o).contains("--out"),
        "{}",
        common::stderr(&o)
    );
}

/// Log lines carry a timestamp, and `--log-format json` makes each one a
/// JSON object (here the relay's start line).
#[test]
fn log_lines_are_timestamped_text_or_json() {
    // -v and --log-format are taken by every command.
    let o = common::sqlfleet()
        .args(["bench", "compare", "/nonexistent-a", "/nonexistent-b"])
        .args(["-v", "--log-format", "json"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    let lport = sqlfleet_testkit::proxy::free_port();
    let mut child = common::sqlfleet()
        .args([
            "relay",
            "--log-format",
            "json",
            "--listen",
            &format!("127.0.0.1:{lport}"),
        ])
        .args([
            "--backend",
            "127.0.0.1:9",
            "--no-defaults",
            "-u",
            "x",
            "--shared-account",
            "--client-user",
            "a:b",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = child.stderr.take().expect("stderr");
    // Every line is timestamped JSON with a level; the start says where
    // it listens (after a warning that no backend answered, here).
    let mut seen = Vec::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(&mut stderr);
        for _ in 0..5 {
            let mut line = String::new();
            if r.read_line(&mut line).expect("a log line") == 0 {
                break;
            }
            let v: serde_json::Value =
                serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{e}: {line}"));
            assert!(
                v["timestamp"].as_str().is_some_and(|t| t.starts_with("20")),
                "{v}"
            );
            assert!(v["level"].as_str().is_some(), "{v}");
            let listening = v["message"]
                .as_str()
                .is_some_and(|m| m.contains("listening on"));
            seen.push(v.clone());
            if listening {
                assert_eq!(v["level"], "INFO", "{v}");
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen.iter().any(|v| v["message"]
            .as_str()
            .is_some_and(|m| m.contains("listening on"))),
        "{seen:?}"
    );
}

/// Runs `args` with stdout into a reader that takes one line and closes
/// the pipe; returns the command's status and its stderr.
fn with_head_1(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    use std::io::{BufRead, Read};
    use std::os::unix::process::ExitStatusExt;
    let mut child = common::sqlfleet()
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("a first line");
    assert!(!first.is_empty(), "{args:?} printed nothing");
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    let status = child.wait().expect("wait");
    (status.code().or(status.signal().map(|s| 128 + s)), err)
}

/// One policy for a closed output pipe (`sqlfleet ... | head -1`), on
/// every command that prints: end quietly with the status a shell gives
/// SIGPIPE (141), as mysql and grep do — no panic, no "Broken pipe" line.
#[test]
fn a_closed_output_pipe_ends_a_command_quietly() {
    let srv = sqlfleet_testkit::server();
    let cnf = srv.defaults_file();
    let defaults = format!("--defaults-file={}", cnf.display());
    let many_rows =
        "SELECT a.COLUMN_NAME FROM information_schema.COLUMNS a, information_schema.COLLATIONS b";
    let cases: Vec<Vec<&str>> = vec![
        vec!["query", &defaults, "-e", many_rows],
        vec!["query", &defaults, "--format", "jsonl", "-e", many_rows],
        vec!["query", &defaults, "--format", "table", "-e", many_rows],
        vec!["completions", "bash"],
        vec!["sandbox", "list"],
    ];
    for args in cases {
        let home = srv.home();
        let (code, err) = with_head_1(&args, &[("SQLFLEET_HOME", home.to_str().unwrap_or("."))]);
        // A command that printed everything before the pipe closed ends 0.
        assert!(
            code == Some(141) || code == Some(0),
            "{args:?}: status {code:?}: {err}"
        );
        assert!(
            !err.contains("panicked") && !err.contains("Broken pipe"),
            "{args:?}: {err}"
        );
        // The command's own --help says the code it ended with.
        if code == Some(141) && args[0] == "query" {
            let h = help(&args[..1])
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(h.contains("141 the output pipe closed"), "{args:?}: {h}");
        }
    }
}

/// `-?` prints help on every command, as mysql's and mydumper's do; `-h`
/// stays the host where a command connects, and a bare `-h` says so.
#[test]
fn dash_question_mark_is_help_everywhere() {
    for cmd in [
        &[][..],
        &["load"],
        &["query"],
        &["relay"],
        &["bench", "pool"],
        &["sandbox"],
        &["sandbox", "up"],
        &["watch"],
        &["replicate"],
    ] {
        let o = common::sqlfleet()
            .args(cmd)
            .arg("-?")
            .output()
            .expect("run");
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{cmd:?} -?: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains("Usage:"), "{cmd:?} -?: {out}");
    }
    let o = common::sqlfleet()
        .args(["query", "-h"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("use --help or -? for help"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `sqlfleet --help` gives each command's summary on one line (the
/// details, exit codes and formats are in each command's own --help).
#[test]
fn the_command_list_has_one_line_per_command() {
    let out = help(&[]);
    let list: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(list.len() >= 9, "{out}");
    for l in &list {
        assert!(
            l.starts_with("  ") && !l.starts_with("   "),
            "a summary runs onto a second line: {l:?}\n{out}"
        );
    }
}

/// The guide's introduction is the README with its links made relative
/// to the guide (scripts/introduction.sh writes it): they cannot drift.
#[test]
fn the_guide_introduction_is_the_readme() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let intro =
        std::fs::read_to_string(root.join("docs/guide/introduction.md")).expect("introduction");
    let want = readme
        .replace("](docs/guide/", "](")
        .replace("](docs/", "](../");
    assert!(
        intro == want,
        "docs/guide/introduction.md is not the README: run scripts/introduction.sh"
    );
}

/// The subcommands `path --help` lists (its "Commands:" section, less
/// `help`).
fn subcommands(path: &[String]) -> Vec<String> {
    let o = common::sqlfleet()
        .args(path)
        .arg("--help")
        .output()
        .expect("run");
    common::stdout(&o)
        .lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// Every command and subcommand the tool lists — walked from `sqlfleet
/// --help` down, not from a list kept by hand — answers `--help` and
/// `-?` with its help and exit 0 (`watch creds add --help` was an error:
/// watch gives up clap's help flag for `-h` = `--host`, and so did its
/// subcommands).
#[test]
fn every_command_the_tool_lists_answers_help_and_question_mark() {
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        for flag in ["--help", "-?"] {
            let o = common::sqlfleet()
                .args(&path)
                .arg(flag)
                .output()
                .expect("run");
            assert_eq!(
                o.status.code(),
                Some(0),
                "sqlfleet {} {flag}: {}",
                path.join(" "),
                common::stderr(&o)
            );
            assert!(
                common::stdout(&o).contains("Usage:"),
                "sqlfleet {} {flag} printed no usage",
                path.join(" ")
            );
        }
        seen += 1;
        for sub in subcommands(&path) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
    }
    assert!(seen > 25, "only {seen} commands found");
}
