//! The words every command uses for one idea (docs/guide/conventions.md):
//! `--threads` for how much runs at once, `--progress auto|bar|json|none`
//! for a long run's progress, `--json` for machine output, `--quiet` for
//! nothing but results and errors. A flag renamed to them keeps its old
//! spelling hidden for a release, with a note when used ([`renamed`]).
//! main.rs's test walks every command's definition against [`IDEAS`],
//! [`PRINT_RESULTS`] and [`RUN_LONG`] and fails on a second spelling of
//! an idea, or on a command that prints results without `--json`.

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

/// One idea, its one flag, and spellings of it no command may show.
#[cfg(test)]
pub(crate) const IDEAS: &[(&str, &str, &[&str])] = &[
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
    (
        "writing on a read-only server",
        "writes-on-read-only",
        &[
            "allow-read-only",
            "write-read-only",
            "write-replicas",
            "allow-writes",
        ],
    ),
];

/// Commands that print results (and so take `--json`), and commands
/// that run long (and so take `--progress` and `--quiet`).
#[cfg(test)]
pub(crate) const PRINT_RESULTS: &[&str] = &[
    "load",
    "query",
    "watch",
    "replicate",
    "replicate status",
    "sandbox list",
    "bench insert",
    "bench pool",
];
#[cfg(test)]
pub(crate) const RUN_LONG: &[&str] = &["load", "query", "replicate", "bench insert", "bench pool"];
