//! A sweep's frame: its results begun (the parameters, the server's
//! settings, the start time) and finished (the files written, the
//! verdicts, notes and warnings, and what stays on the target or its
//! removal with `--cleanup`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sqlfleet_conn::Target;

use crate::report::{self, Results};

/// Why a sweep's results could not be finished.
#[derive(Debug, thiserror::Error)]
pub enum FinishError {
    #[error("writing the results in {}: {source}", dir.display())]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--cleanup: {0}")]
    Cleanup(#[source] mysql_async::Error),
}

/// Results of `command` with these parameters, before any cell: the
/// target's settings and the time, as the report shows them.
pub async fn begin(
    command: &str,
    parameters: BTreeMap<String, serde_json::Value>,
    target: &Target,
) -> Results {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Results {
        command: command.into(),
        parameters,
        server: crate::server::info(target).await,
        started: report::utc_date(secs),
        insert: Vec::new(),
        pool: Vec::new(),
    }
}

/// After the cells: writes the results into `out` and says (through
/// `say`, a line at a time) what was written and judged; with `cleanup`
/// drops the workloads' database, else says what stays.
pub async fn finish(
    out: &Path,
    results: &Results,
    target: &Target,
    cleanup: bool,
    say: impl Fn(&str),
) -> Result<(), FinishError> {
    let w = report::write(out, results).map_err(|source| FinishError::Write {
        dir: out.to_path_buf(),
        source,
    })?;
    say(&format!(
        "wrote {} in {}",
        w.files.join(", "),
        out.display()
    ));
    for v in report::verdicts(results) {
        say(&format!("verdict: {v}"));
    }
    for n in w.notes {
        say(&format!("note: {n}"));
    }
    for w in report::warnings(results) {
        say(&format!("warning: {w}"));
    }
    if cleanup {
        crate::server::cleanup(target)
            .await
            .map_err(FinishError::Cleanup)?;
        say(&format!(
            "dropped the {} database (--cleanup)",
            crate::server::DB
        ));
    } else {
        say(&format!("note: {}", report::leftover_note()));
    }
    Ok(())
}
