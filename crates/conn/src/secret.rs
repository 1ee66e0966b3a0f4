//! A password that cannot be printed by accident.
//!
//! `Debug` and `Display` both render as `****`, so a `Secret` can sit inside
//! any struct that gets logged or formatted into an error without leaking.

use std::fmt;

#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The plain text, for handing to the driver. Never format this.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A password a config file gives one of three ways — inline, in a file
/// (its content without the final line end), or in an environment
/// variable — or none. `what` names the setting in errors, which never
/// hold the password.
pub fn configured(
    inline: Option<&str>,
    file: Option<&std::path::Path>,
    env: Option<&str>,
    what: &str,
) -> Result<Option<Secret>, SecretError> {
    match (inline, file, env) {
        (Some(p), None, None) => Ok(Some(Secret::new(p))),
        (None, Some(f), None) => std::fs::read_to_string(f)
            .map(|t| Some(Secret::new(t.trim_end_matches(['\n', '\r']))))
            .map_err(|e| SecretError::File {
                what: what.to_string(),
                path: f.to_path_buf(),
                error: e.to_string(),
            }),
        (None, None, Some(v)) => {
            std::env::var(v)
                .map(|p| Some(Secret::new(p)))
                .map_err(|_| SecretError::Env {
                    what: what.to_string(),
                    var: v.to_string(),
                })
        }
        (None, None, None) => Ok(None),
        _ => Err(SecretError::Several(what.to_string())),
    }
}

/// Why a configured password could not be had (never holding it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("{what}.password_file {}: {error}", path.display())]
    File {
        what: String,
        path: std::path::PathBuf,
        error: String,
    },
    #[error("{what}.password_env: ${var} is not set")]
    Env { what: String, var: String },
    #[error("{0}: give the password one way: password, password_file or password_env")]
    Several(String),
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_formats_plaintext() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "****");
        assert_eq!(format!("{s:?}"), "****");
        assert_eq!(s.expose(), "hunter2");
    }
}
