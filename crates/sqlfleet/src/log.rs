//! Log lines: operational events (the relay's start, reloads and stop;
//! which target bench chose), timestamped on stderr, as text or as JSON
//! lines (`--log-format json`), more of them with `-v`. A command's
//! results and summaries are its output, not log lines.

use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// `2026-11-23T07:20:01.123456Z  INFO message`
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, fields
    Json,
}

/// Installs the process-wide logger: INFO and above, DEBUG with `-v`,
/// TRACE with `-vv`.
pub fn init(verbose: u8, format: LogFormat) {
    let level = match verbose {
        0 => tracing::Level::INFO,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_target(false);
    let installed = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    // A second init (tests) keeps the first logger.
    let _ = installed;
}
