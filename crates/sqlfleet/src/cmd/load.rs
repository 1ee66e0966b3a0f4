//! `sqlfleet load`: a SQL dump (file, gzip, zstd or stdin) in parallel.

use std::path::PathBuf;

use sqlfleet_conn::ConnArgs;
use sqlfleet_load::progress::Mode;
use sqlfleet_load::LoadOptions;

use crate::exit::Exit;

/// Load a mysqldump/mariadb-dump file in parallel, crash-safe and resumable.
///
/// Exit codes: 0 loaded; 1 setup error (connection, missing file, an
/// unfinished earlier load without --resume); 2 loaded with quarantined
/// statements (--continue-on-error); 3 the load stopped (bad input or a
/// failing statement; committed work is journaled, --resume continues).
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct LoadArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// The dump: a file (plain, gzip or zstd) or - for stdin
    path: PathBuf,
    /// Parallel connections
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Continue an interrupted load of the same dump: skip what the journal
    /// (table sqlfleet.load_journal on the server) says committed
    #[arg(long, conflicts_with = "restart")]
    resume: bool,
    /// Load from the start even though an earlier load of this dump stopped
    #[arg(long)]
    restart: bool,
    /// Don't stop at a failing statement: quarantine it and go on (exit 2)
    #[arg(long)]
    continue_on_error: bool,
    /// Where --continue-on-error writes failed statements [default: PATH.quarantine.sql]
    #[arg(long, value_name = "FILE")]
    quarantine: Option<PathBuf>,
    /// Create tables without secondary indexes; add them after the table's data
    #[arg(long)]
    defer_indexes: bool,
    /// auto (a status line on a terminal), bar, json (lines on stdout) or none
    #[arg(long, default_value = "auto")]
    progress: Mode,
    /// Statements per transaction, in bytes
    #[arg(long, default_value_t = 4 << 20, value_name = "BYTES")]
    batch_bytes: usize,
    /// Bytes of batches queued ahead of the workers, so several tables load
    /// at once (bounds memory together with --batch-bytes)
    #[arg(long, default_value_t = 128 << 20, value_name = "BYTES")]
    read_ahead: usize,
    /// The dump's identity for the journal [default: hash of its first MiB and size]
    #[arg(long)]
    load_id: Option<String>,
    /// Always send the dump's INSERT statements as they are (by default,
    /// batches of plain INSERTs go as LOAD DATA LOCAL rows when the result
    /// is provably the same: all rows, no warnings; otherwise as INSERTs)
    #[arg(long)]
    no_fast_path: bool,
    /// Print the summary as JSON
    #[arg(long)]
    json: bool,
}

pub async fn run(a: LoadArgs) -> anyhow::Result<Exit> {
    let target = sqlfleet_conn::resolve_interactive(&a.conn)?;
    if let Some(id) = &a.load_id {
        anyhow::ensure!(
            !id.is_empty()
                && id.len() <= 32
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "--load-id must be 1-32 letters, digits, '-' or '_'"
        );
    }
    anyhow::ensure!(a.threads >= 1, "--threads must be at least 1");
    let quarantine = a.quarantine.clone().or_else(|| {
        a.continue_on_error.then(|| {
            let base = if a.path == std::path::Path::new("-") {
                PathBuf::from("stdin")
            } else {
                a.path.clone()
            };
            let mut s = base.into_os_string();
            s.push(".quarantine.sql");
            PathBuf::from(s)
        })
    });
    let opts = LoadOptions {
        target,
        path: a.path,
        threads: a.threads,
        resume: a.resume,
        restart: a.restart,
        continue_on_error: a.continue_on_error,
        quarantine,
        defer_indexes: a.defer_indexes,
        progress: a.progress,
        database: None,
        batch_bytes: a.batch_bytes.max(1),
        load_id: a.load_id,
        fast_path: !a.no_fast_path,
        read_ahead: a.read_ahead,
    };
    let json = a.json || a.progress == Mode::Json;
    match sqlfleet_load::load(opts).await {
        Ok(summary) => {
            if json {
                let mut v = serde_json::to_value(&summary)?;
                v["event"] = "summary".into();
                println!("{v}");
            } else {
                println!("{}", summary.paragraph());
            }
            Ok(if summary.errors > 0 {
                Exit::Partial
            } else {
                Exit::Ok
            })
        }
        Err(e) => {
            eprintln!("sqlfleet load: {e}");
            Ok(match e.exit_code() {
                1 => Exit::Usage,
                _ => Exit::Total,
            })
        }
    }
}
