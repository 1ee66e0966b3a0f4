//! Exit codes shared by every subcommand.

/// 0 success, 1 usage or setup error, 2 partial failure, 3 total failure,
/// 4 a difference found (query --diff), 130 interrupted (SIGINT), 143
/// terminated (SIGTERM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Exit {
    Ok = 0,
    Usage = 1,
    Partial = 2,
    Total = 3,
    /// query --diff: the hosts answered, and not all alike.
    Differ = 4,
    /// Stopped by Ctrl-C (128 + SIGINT, as shells report it).
    Interrupted = 130,
    /// Stopped by SIGTERM (128 + 15).
    Terminated = 143,
}

impl Exit {
    /// `ok` of `total` parts succeeded: 0 all, 2 some, 3 none.
    pub fn of_share(ok: usize, total: usize) -> Exit {
        if ok == total {
            Exit::Ok
        } else if ok == 0 {
            Exit::Total
        } else {
            Exit::Partial
        }
    }
}

/// An error and its causes on one line, `outer: inner: innermost`,
/// skipping causes whose text the outer message already contains.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if out.contains(&s) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&s);
    }
    // Printable: an error quotes what servers and files said (a
    // replication error quoting a statement's values, a name), which a
    // terminal must show, never obey.
    sqlfleet_dump::printable::printable(&out.replace('\n', " ")).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_one_printable_line() {
        let e = anyhow::anyhow!("Duplicate entry '\x1b]0;x\x07'\nfor key")
            .context("node2: replication stopped");
        assert_eq!(
            one_line(&e),
            "node2: replication stopped: Duplicate entry '\\x1b]0;x\\x07' for key"
        );
    }
}
