//! The words every command uses for one idea (docs/guide/conventions.md):
//! `--threads` for how much runs at once, `--progress auto|bar|json|none`
//! for a long run's progress, `--json` for machine output, `--quiet` for
//! nothing but results and errors. A flag renamed to them keeps its old
//! spelling hidden for a release, with a note when used ([`renamed`]).
//! The test below walks every command's definition and fails on a second
//! spelling of an idea, or on a command that prints results without
//! `--json`.

use std::io::IsTerminal;

/// A long run's progress, the same four words everywhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Progress {
    /// A status line on a terminal (standard error), none otherwise.
    #[default]
    Auto,
    /// The status line, terminal or not.
    Bar,
    /// One JSON object per line, each a moment of the run.
    Json,
    None,
}

impl Progress {
    /// `auto` decided: `bar` when standard error is a terminal.
    pub fn resolve(self) -> Progress {
        match self {
            Progress::Auto if std::io::stderr().is_terminal() => Progress::Bar,
            Progress::Auto => Progress::None,
            p => p,
        }
    }
}

/// The value of a flag given under its old name (`old`), with a note on
/// standard error that it is now `new`.
pub fn renamed<T>(value: Option<T>, old: &str, new: &str) -> Option<T> {
    if value.is_some() {
        eprintln!("sqlfleet: note: {old} is now {new}; the old name still works in this release");
    }
    value
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// One idea, its one flag, and spellings of it no command may show.
    const IDEAS: &[(&str, &str, &[&str])] = &[
        (
            "how much runs at once",
            "threads",
            &[
                "parallel",
                "clients",
                "processes",
                "jobs",
                "workers",
                "concurrency",
            ],
        ),
        (
            "a long run's progress",
            "progress",
            &["show-progress", "no-progress"],
        ),
        (
            "machine-readable output",
            "json",
            &["as-json", "json-output"],
        ),
        ("only results and errors", "quiet", &["silent"]),
    ];

    /// Commands that print results (and so take `--json`), and commands
    /// that run long (and so take `--progress` and `--quiet`).
    const PRINT_RESULTS: &[&str] = &[
        "load",
        "query",
        "watch",
        "replicate",
        "replicate status",
        "sandbox list",
        "bench insert",
        "bench pool",
    ];
    const RUN_LONG: &[&str] = &["load", "query", "replicate", "bench insert", "bench pool"];

    /// Every (command path, its visible long flags) in the tree.
    fn commands() -> Vec<(String, Vec<String>)> {
        fn walk(c: &clap::Command, path: &str, out: &mut Vec<(String, Vec<String>)>) {
            let flags = c
                .get_arguments()
                .filter(|a| !a.is_hide_set())
                .filter_map(|a| a.get_long().map(str::to_string))
                .collect();
            out.push((path.to_string(), flags));
            for s in c.get_subcommands() {
                let p = if path.is_empty() {
                    s.get_name().to_string()
                } else {
                    format!("{path} {}", s.get_name())
                };
                walk(s, &p, out);
            }
        }
        let mut out = Vec::new();
        walk(&crate::Cli::command(), "", &mut out);
        out
    }

    fn flags_of<'a>(all: &'a [(String, Vec<String>)], cmd: &str) -> &'a [String] {
        &all.iter()
            .find(|(p, _)| p == cmd)
            .unwrap_or_else(|| panic!("no command {cmd}"))
            .1
    }

    #[test]
    fn one_idea_one_flag_in_every_command() {
        let all = commands();
        assert!(all.len() > 20, "{all:?}");
        for (path, flags) in &all {
            for (idea, _, other) in IDEAS {
                for o in *other {
                    assert!(
                        !flags.iter().any(|f| f == o),
                        "`sqlfleet {path} --{o}`: {idea} is spelt otherwise elsewhere (docs/guide/conventions.md)"
                    );
                }
            }
        }
        for cmd in PRINT_RESULTS {
            assert!(
                flags_of(&all, cmd).iter().any(|f| f == "json"),
                "`sqlfleet {cmd}` prints results and has no --json"
            );
        }
        for cmd in RUN_LONG {
            for f in ["progress", "quiet"] {
                assert!(
                    flags_of(&all, cmd).iter().any(|x| x == f),
                    "`sqlfleet {cmd}` runs long and has no --{f}"
                );
            }
        }
    }

    #[test]
    fn every_progress_flag_takes_the_same_four_words() {
        fn walk(c: &clap::Command, path: &str) {
            for a in c.get_arguments() {
                if a.get_long() == Some("progress") {
                    let mut v: Vec<String> = a
                        .get_possible_values()
                        .iter()
                        .filter(|p| !p.is_hide_set())
                        .map(|p| p.get_name().to_string())
                        .collect();
                    v.sort();
                    assert_eq!(
                        v,
                        ["auto", "bar", "json", "none"],
                        "sqlfleet {path} --progress"
                    );
                }
            }
            for s in c.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()));
            }
        }
        walk(&crate::Cli::command(), "");
    }

    #[test]
    fn the_conventions_chapter_names_every_idea() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let guide = std::fs::read_to_string(root.join("../../docs/guide/conventions.md"))
            .expect("docs/guide/conventions.md");
        for (idea, flag, _) in IDEAS {
            assert!(
                guide.contains(&format!("`--{flag}")),
                "conventions.md does not name --{flag} ({idea})"
            );
        }
    }
}
