//! `sqlfleet load`: a SQL dump (file, gzip, zstd or stdin) in parallel.

use clap::builder::TypedValueParser as _;
use std::path::PathBuf;

use sqlfleet_conn::ConnArgs;
use sqlfleet_load::progress::Mode;
use sqlfleet_load::LoadOptions;

use crate::exit::Exit;

/// Load a mysqldump/mariadb-dump file or CSV/TSV files: parallel, crash-safe, resumable.
///
/// A dump is one file (or - for stdin) or a mydumper directory (loaded
/// as myloader would: -D loads its one database under another name, as
/// myloader's -B); CSV/TSV files go into one table: --into DB.TABLE, or
/// the table their name gives in the -D database (as mysqlimport). A
/// dump that goes to another database than -D names (--databases,
/// --all-databases) stops before it does: leave -D out for such a dump.
///
/// Exit codes: 0 loaded; 1 setup error (connection, missing file, an
/// unfinished earlier load without --resume); 2 loaded with quarantined
/// statements (--continue-on-error); 3 the load stopped (bad input or a
/// failing statement; committed work is journaled, --resume continues);
/// 130 interrupted by Ctrl-C, 143 by SIGTERM (what committed is
/// journaled: --resume continues).
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct LoadArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::HelpLong)]
    help: Option<bool>,
    /// The dump (one file; plain, gzip or zstd; - for stdin; or a mydumper
    /// directory), or the CSV/TSV files: named .csv/.tsv (each maybe .gz or
    /// .zst), or any name with --into
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Load CSV/TSV files into this table (DB.TABLE, or TABLE with -D).
    /// Without it, files named .csv/.tsv go into the table their name gives
    /// (up to the first dot, as mysqlimport: orders.1.tsv.gz is orders) in
    /// the -D database
    #[arg(long, value_name = "DB.TABLE", help_heading = "CSV/TSV files")]
    into: Option<String>,
    /// csv (',' optionally enclosed by '"', '\' escapes) or tsv (LOAD DATA's
    /// defaults) [default: as the files are named, .csv or .tsv; else tsv]
    #[arg(long, value_parser = ["csv", "tsv"], help_heading = "CSV/TSV files")]
    format: Option<String>,
    /// The first line of each file is a header, not data
    #[arg(long, help_heading = "CSV/TSV files")]
    header: bool,
    /// Field separator (\t, \x1f, ',', '||' ...)
    #[arg(long, value_name = "S", help_heading = "CSV/TSV files")]
    fields_terminated_by: Option<String>,
    /// Optional field quote character ('' for none)
    #[arg(long, value_name = "C", help_heading = "CSV/TSV files")]
    enclosed_by: Option<String>,
    /// Escape character ('' for none)
    #[arg(long, value_name = "C", help_heading = "CSV/TSV files")]
    escaped_by: Option<String>,
    /// Line terminator (\n, \r\n ...)
    #[arg(long, value_name = "S", help_heading = "CSV/TSV files")]
    lines_terminated_by: Option<String>,
    /// The table columns the fields go to, in order
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "A,B,C",
        help_heading = "CSV/TSV files"
    )]
    columns: Option<Vec<String>>,
    /// Server warnings (truncation, bad values) fail the chunk instead of being reported
    #[arg(long, help_heading = "CSV/TSV files")]
    strict: bool,
    /// Character set of the files [default: utf8mb4]
    #[arg(long, help_heading = "CSV/TSV files")]
    character_set: Option<String>,
    /// Size of the chunks a file is cut into [default: 8388608]
    #[arg(long, value_name = "BYTES", help_heading = "CSV/TSV files")]
    chunk_bytes: Option<usize>,
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
    /// Drop each table before creating it (myloader's --overwrite-tables):
    /// for dumps made without DROP TABLE (--skip-add-drop-table, mydumper)
    /// into a database that already has the tables. Their rows are lost
    #[arg(long)]
    overwrite_tables: bool,
    /// Load into a server that reports read_only = ON (a replica) too;
    /// without it such a server is refused before anything runs
    #[arg(long)]
    writes_on_read_only: bool,
    /// Do not write the load into the server's binary log (sql_log_bin = 0
    /// on every connection, as myloader does unless --enable-binlog):
    /// replicas and point-in-time recovery will not see it. Needs the
    /// BINLOG ADMIN or SUPER privilege
    #[arg(long)]
    skip_binlog: bool,
    /// auto (a status line on a terminal), bar, json (lines on stdout) or none
    #[arg(
        long,
        default_value = "auto",
        value_parser = clap::builder::PossibleValuesParser::new(["auto", "bar", "json", "none"])
            .try_map(|s| s.parse::<Mode>())
    )]
    progress: Mode,
    /// Statements per transaction, in bytes (a table that fits loads in one
    /// transaction: fewer, larger transactions cost the server less)
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
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
    /// Run every statement in file order on one connection, as the mysql
    /// client does (the default for .sql files that are not
    /// mysqldump/mariadb-dump output; dumps load in parallel)
    #[arg(long)]
    serial: bool,
    /// Keep comments inside statements (routine and trigger bodies) as the
    /// mysql client's --comments does; by default they are removed, as the
    /// client removes them
    #[arg(long)]
    comments: bool,
    /// Print the summary (or the error) as JSON
    #[arg(long)]
    json: bool,
    /// Errors and warnings only: no progress, no summary (the exit code
    /// says how it went)
    #[arg(long, conflicts_with = "json")]
    quiet: bool,
}

pub async fn run(a: LoadArgs) -> anyhow::Result<Exit> {
    let target = sqlfleet_conn::resolve_interactive(&a.conn)?;
    if let Some(into) = flat_table(&a, &target)? {
        return run_flat(a, target, into).await;
    }
    if let Some(flag) = flat_only(&a).first() {
        anyhow::bail!(
            "{flag} is for CSV/TSV files (named .csv or .tsv, or loaded with --into DB.TABLE); {}",
            if *flag == "--character-set" {
                "a dump's character set is what its SET NAMES says, or --default-character-set"
            } else {
                "these paths are read as a SQL dump, which takes no such option"
            }
        );
    }
    anyhow::ensure!(
        a.paths.len() == 1,
        "a dump is one file (or -) or a mydumper directory; several files are for CSV/TSV loads with --into DB.TABLE"
    );
    let path = a.paths[0].clone();
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
            let base = if sqlfleet_dump::reader::is_stdin(&path) {
                PathBuf::from("stdin")
            } else {
                path.clone()
            };
            let mut s = base.into_os_string();
            s.push(".quarantine.sql");
            PathBuf::from(s)
        })
    });
    let opts = LoadOptions {
        binlog: a.binlog(),
        writes_on_read_only: a.writes_on_read_only,
        target,
        path,
        threads: a.threads,
        resume: a.resume,
        restart: a.restart,
        continue_on_error: a.continue_on_error,
        quarantine,
        defer_indexes: a.defer_indexes,
        overwrite_tables: a.overwrite_tables,
        progress: if a.quiet { Mode::None } else { a.progress },
        database: None,
        batch_bytes: a.batch_bytes.max(1),
        load_id: a.load_id,
        fast_path: !a.no_fast_path,
        read_ahead: a.read_ahead,
        serial: a.serial,
        comments: a.comments,
        interrupt: Some(crate::shutdown::on_interrupt(
            "load",
            "stopping: the batches in flight roll back at their next statement (journaled up to the last commit)",
        )),
    };
    let json = a.json || a.progress == Mode::Json;
    report(sqlfleet_load::load(opts).await, json, a.quiet)
}

fn report(
    result: Result<sqlfleet_load::Summary, sqlfleet_load::LoadError>,
    json: bool,
    quiet: bool,
) -> anyhow::Result<Exit> {
    match result {
        Ok(summary) => {
            if crate::shutdown::seen() {
                // The signal came after the last commit (the load watches
                // for it until everything queued is done): nothing stopped.
                eprintln!("sqlfleet load: the signal came after everything had committed: the load finished");
            }
            if json {
                let mut v = serde_json::to_value(&summary)?;
                v["event"] = "summary".into();
                println!("{v}");
            } else if !quiet {
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
            let exit = match e.exit_code() {
                1 => Exit::Usage,
                130 => crate::shutdown::interrupted_exit(),
                _ => Exit::Total,
            };
            if json {
                let v = serde_json::json!({
                    "event": "error",
                    "error": e.to_string(),
                    "exit_code": e.exit_code(),
                });
                println!("{v}");
            }
            Ok(exit)
        }
    }
}

/// The CSV/TSV-only options given on a command line that loads a dump.
impl LoadArgs {
    fn binlog(&self) -> sqlfleet_load::Binlog {
        if self.skip_binlog {
            sqlfleet_load::Binlog::Skip
        } else {
            sqlfleet_load::Binlog::Write
        }
    }
}

/// The table of a CSV/TSV load: --into's, or the one the files' names
/// give (mysqlimport's rule, `naming::implied_table`) in the -D database;
/// `None` for a dump.
fn flat_table(a: &LoadArgs, target: &sqlfleet_conn::Target) -> anyhow::Result<Option<String>> {
    if a.into.is_some() {
        return Ok(a.into.clone());
    }
    let paths: Vec<&std::path::Path> = a.paths.iter().map(|p| p.as_path()).collect();
    let table = sqlfleet_flat::naming::implied_table(&paths).map_err(anyhow::Error::msg)?;
    if let Some(t) = &table {
        anyhow::ensure!(
            target.database.is_some(),
            "{}: a CSV/TSV file goes into the table its name gives (`{t}`, as mysqlimport reads it) \
             in the -D database: give -D DB, or --into DB.TABLE",
            a.paths[0].display()
        );
    }
    Ok(table)
}

fn flat_only(a: &LoadArgs) -> Vec<&'static str> {
    let given = [
        ("--format", a.format.is_some()),
        ("--header", a.header),
        ("--fields-terminated-by", a.fields_terminated_by.is_some()),
        ("--enclosed-by", a.enclosed_by.is_some()),
        ("--escaped-by", a.escaped_by.is_some()),
        ("--lines-terminated-by", a.lines_terminated_by.is_some()),
        ("--columns", a.columns.is_some()),
        ("--strict", a.strict),
        ("--character-set", a.character_set.is_some()),
        ("--chunk-bytes", a.chunk_bytes.is_some()),
    ];
    given.iter().filter(|(_, g)| *g).map(|(f, _)| *f).collect()
}

async fn run_flat(
    a: LoadArgs,
    target: sqlfleet_conn::Target,
    into: String,
) -> anyhow::Result<Exit> {
    use sqlfleet_flat::format::{parse_byte, parse_sep, Format};
    use sqlfleet_flat::naming::{agreed_kind, Kind};
    let paths: Vec<&std::path::Path> = a.paths.iter().map(|p| p.as_path()).collect();
    let kind = match a.format.as_deref() {
        Some("csv") => Kind::Csv,
        Some(_) => Kind::Tsv,
        None => agreed_kind(&paths)
            .map_err(anyhow::Error::msg)?
            .unwrap_or(Kind::Tsv),
    };
    let mut format = match kind {
        Kind::Csv => Format::csv(),
        Kind::Tsv => Format::tsv(),
    };
    if let Some(s) = &a.fields_terminated_by {
        format.fields_terminated_by = parse_sep(s)?;
    }
    if let Some(s) = &a.enclosed_by {
        format.enclosed_by = parse_byte(s, "--enclosed-by")?;
    }
    if let Some(s) = &a.escaped_by {
        format.escaped_by = parse_byte(s, "--escaped-by")?;
    }
    if let Some(s) = &a.lines_terminated_by {
        format.lines_terminated_by = parse_sep(s)?;
    }
    format.check()?;
    let charset = a.character_set.clone().unwrap_or_else(|| "utf8mb4".into());
    anyhow::ensure!(
        charset
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
        "--character-set '{charset}' is not a character set name"
    );
    let opts = sqlfleet_load::flat::FlatOptions {
        target,
        binlog: a.binlog(),
        writes_on_read_only: a.writes_on_read_only,
        files: a.paths,
        into,
        format,
        header: a.header,
        columns: a.columns,
        threads: a.threads,
        resume: a.resume,
        restart: a.restart,
        strict: a.strict,
        progress: if a.quiet { Mode::None } else { a.progress },
        chunk_bytes: a.chunk_bytes.unwrap_or(8 << 20).max(1),
        read_ahead: a.read_ahead,
        charset,
        fast_path: !a.no_fast_path,
        interrupt: Some(crate::shutdown::on_interrupt(
            "load",
            "finishing the chunks in flight and journaling them",
        )),
    };
    let json = a.json || a.progress == Mode::Json;
    report(sqlfleet_load::flat::load_flat(opts).await, json, a.quiet)
}
