//! Why a file a command was given was not taken: it could not be read, or
//! what it says is not valid. The one error of the commands' config files
//! (watch's and replicate's), so a caller can tell a missing file from a
//! wrong one.

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
