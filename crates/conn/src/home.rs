//! Where sqlfleet keeps its own state: `$SQLFLEET_HOME`, by default
//! `$XDG_DATA_HOME/sqlfleet` or `~/.local/share/sqlfleet`.
//!
//! Lives here, at the bottom of the crate graph, because both the sandbox
//! (which writes sandboxes) and connection resolution (`--sandbox NAME`)
//! need the same paths.

use std::path::{Path, PathBuf};

/// The sqlfleet state directory for this process's environment.
pub fn sqlfleet_home() -> PathBuf {
    home_from(
        std::env::var_os("SQLFLEET_HOME").map(PathBuf::from),
        std::env::var_os("XDG_DATA_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn home_from(explicit: Option<PathBuf>, xdg: Option<PathBuf>, home: Option<PathBuf>) -> PathBuf {
    if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return p;
    }
    if let Some(x) = xdg.filter(|p| p.is_absolute()) {
        return x.join("sqlfleet");
    }
    home.unwrap_or_else(|| PathBuf::from("/tmp"))
        .join(".local/share/sqlfleet")
}

/// The directory of sandbox `name` under `home`.
pub fn sandbox_dir(home: &Path, name: &str) -> PathBuf {
    home.join("sandboxes").join(name)
}

/// The client option file a sandbox writes for other tools
/// (`mariadb --defaults-file=...`, `sqlfleet --sandbox NAME`).
pub fn sandbox_defaults_file(home: &Path, name: &str) -> PathBuf {
    sandbox_dir(home, name).join("client.cnf")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(home_from(p("/x"), p("/xdg"), p("/h")), PathBuf::from("/x"));
        assert_eq!(
            home_from(None, p("/xdg"), p("/h")),
            PathBuf::from("/xdg/sqlfleet")
        );
        assert_eq!(
            home_from(None, p("rel"), p("/h")),
            PathBuf::from("/h/.local/share/sqlfleet")
        );
        assert_eq!(
            home_from(p(""), None, p("/h")),
            PathBuf::from("/h/.local/share/sqlfleet")
        );
    }
}
