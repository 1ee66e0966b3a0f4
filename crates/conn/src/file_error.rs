//! Why a file a command was given was not taken: it could not be read, or
//! what it says is not valid. The one error of the commands' config files
//! (watch's and replicate's), so a caller can tell a missing file from a
//! wrong one. [`at_line`] is the one way a config file's syntax or key
//! error is said, by every command (relay, watch, replicate): one line,
//! `line N: what`.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The text says where and why.
    #[error("{}: {what}", path.display())]
    Invalid { path: PathBuf, what: String },
}

impl FileError {
    pub fn read(path: &Path, source: std::io::Error) -> FileError {
        FileError::Read {
            path: path.to_path_buf(),
            source,
        }
    }

    pub fn invalid(path: &Path, what: impl std::fmt::Display) -> FileError {
        FileError::Invalid {
            path: path.to_path_buf(),
            what: what.to_string(),
        }
    }
}

/// A config text's error on one line: `line N: message` where the parser
/// gave a place (`span`, bytes of `text`), else the message. (The TOML
/// parser's own rendering is a multi-line snippet, which logs and
/// one-line errors squash.)
pub fn at_line(text: &str, span: Option<std::ops::Range<usize>>, message: &str) -> String {
    let message = message.trim().replace('\n', " ");
    match span {
        Some(s) => {
            let line = text.as_bytes()[..s.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            format!("line {line}: {message}")
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::at_line;

    #[test]
    fn a_config_error_is_one_line_with_its_line_number() {
        let text = "a = 1\nb = 2\nincludes = 3\n";
        let at = text.find("includes").expect("there");
        let rows = [
            (
                Some(at..at + 8),
                "unknown field `includes`",
                "line 3: unknown field `includes`",
            ),
            (Some(0..1), "bad\nthing\n", "line 1: bad thing"),
            (Some(999..1000), "past the end", "line 4: past the end"),
            (None, "no place", "no place"),
        ];
        for (span, msg, want) in rows {
            assert_eq!(at_line(text, span, msg), want);
        }
    }
}
