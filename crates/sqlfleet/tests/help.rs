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
