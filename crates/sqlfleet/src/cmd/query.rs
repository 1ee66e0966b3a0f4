//! `sqlfleet query`: the same SQL on many servers, results merged.

use clap::builder::TypedValueParser as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use sqlfleet_conn::ConnArgs;
use sqlfleet_fanout::output::Format;
use sqlfleet_fanout::run::{self, Databases, Mode, QueryOptions, State};

use super::vocab::{renamed, Progress};

use super::inventory::{self, HostArgs};
use crate::exit::Exit;

/// Run SQL on many servers at once and merge the results.
///
/// Hosts come from --hosts or --hosts-file; else from a server named on
/// the command line (-h, -S, --dsn, --sandbox: every server of the
/// sandbox); else from standard input; else from the option files or
/// SQLFLEET_SANDBOX. One per line: `host`, `host:port`, `[v6]:port` or
/// `unix:/path`, then optional name=value tags (`user=` and `password=`
/// override the credentials for that host).
///
/// Exit codes: 0 every host ok (with --diff: and all alike), 1 usage
/// error, 2 some hosts (or databases) failed, 3 all failed, 4 with --diff:
/// every host answered and not all alike, 130 interrupted (Ctrl-C), 141
/// the output pipe closed (`| head`), 143 terminated (SIGTERM).
#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct QueryArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::HelpLong)]
    help: Option<bool>,
    #[command(flatten)]
    hosts: HostArgs,
    /// With --discover: print the host list (hosts-file format) and exit
    /// (2 if a server in the topology could not be reached)
    #[arg(long, requires = "discover")]
    discover_only: bool,
    /// SQL to run (several statements allowed)
    #[arg(short = 'e', long = "execute", value_name = "SQL")]
    execute: Option<String>,
    /// A file of SQL to run
    #[arg(long, value_name = "FILE", conflicts_with = "execute")]
    file: Option<PathBuf>,
    /// tsv (like mysql --batch), jsonl, csv, table, or vertical (like mysql
    /// -E; statements that all end in \G ask for it too)
    #[arg(
        long,
        default_value = "tsv",
        value_parser = clap::builder::PossibleValuesParser::new(Format::ALL.map(Format::name))
            .try_map(|s| s.parse::<Format>())
    )]
    format: Format,
    /// Rows vertically, a `name: value` line per column (--format vertical)
    #[arg(short = 'E', long, conflicts_with_all = ["format", "json"])]
    vertical: bool,
    /// Print a header line with the column names
    #[arg(long)]
    header: bool,
    /// Host tags shown as columns after the host, e.g. node,role (tags come
    /// from hosts files, --discover and --sandbox); jsonl gets "tags"
    #[arg(long, value_delimiter = ',', value_name = "KEY,...")]
    tags: Vec<String>,
    /// Print each distinct result once, under the hosts that gave it
    #[arg(long, conflicts_with = "diff")]
    collapse: bool,
    /// Print only the hosts whose result differs from the majority; exit 4
    /// when one does (as diff(1) and pt-config-diff say "different")
    #[arg(long)]
    diff: bool,
    /// Hosts worked on at once
    #[arg(long, default_value_t = 256)]
    threads: usize,
    /// The old name of --threads
    #[arg(long, hide = true, conflicts_with = "threads")]
    parallel: Option<usize>,
    /// Rows as JSON lines (--format jsonl)
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// auto (hosts done, on a terminal), bar, json (lines on standard
    /// error: standard output has the rows) or none
    #[arg(long, value_enum, default_value_t = Progress::Auto)]
    progress: Progress,
    /// Rows and errors only: no summary line
    #[arg(long)]
    quiet: bool,
    /// Seconds to wait for a connection
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    connect_timeout: f64,
    /// Seconds a statement may run (server-side limit where supported, then KILL QUERY)
    #[arg(long, value_name = "S")]
    query_timeout: Option<f64>,
    /// Seconds for the whole run; hosts not finished by then are reported as timed out
    #[arg(long, value_name = "S")]
    deadline: Option<f64>,
    /// Run in each of these databases
    #[arg(
        short = 'B',
        long = "databases",
        value_delimiter = ',',
        value_name = "DB,DB",
        conflicts_with = "all_databases"
    )]
    databases: Option<Vec<String>>,
    /// Run in every database except the system ones
    #[arg(long)]
    all_databases: bool,
    /// Run every statement on every host as given. Without it, a run with
    /// any statement that is not a plain read makes each read-only
    /// server's session read-only first (tx_read_only, sql_log_bin = 0),
    /// and each Galera member's but one per cluster: the server refuses
    /// the writes there (ERROR 1792) instead of forking a replica from its
    /// primary or applying a write once per Galera member
    #[arg(long)]
    writes_on_read_only: bool,
    /// Write the per-host status as JSON to this file
    #[arg(long, value_name = "FILE")]
    status_json: Option<PathBuf>,
}

fn secs(v: f64, what: &str) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        v.is_finite() && v > 0.0,
        "{what} must be a positive number of seconds"
    );
    Ok(Duration::from_secs_f64(v))
}

/// A SQL file's text: UTF-8, or an error naming the first byte that is
/// not (query sends its SQL as UTF-8 text; "stream did not contain valid
/// UTF-8" named no place and no way on).
fn sql_text(bytes: Vec<u8>) -> anyhow::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count();
        anyhow::anyhow!(
            "not UTF-8 at byte offset {at} (line {line}): query reads its SQL as UTF-8; convert the file (iconv -f CHARSET -t UTF-8) and run it with --default-character-set utf8mb4"
        )
    })
}

/// The statements to run, and for each whether it ended in `\G`.
fn statements(sql: &str) -> anyhow::Result<(Vec<String>, Vec<bool>)> {
    let (mut out, mut vertical) = (Vec::new(), Vec::new());
    for st in sqlfleet_dump::Splitter::new(sql.as_bytes()) {
        let st = st.context("the SQL")?;
        out.push(String::from_utf8_lossy(&st.text).trim().to_string());
        vertical.push(st.vertical);
    }
    anyhow::ensure!(
        !out.is_empty(),
        "no SQL statement to run (-e SQL or --file F)"
    );
    Ok((out, vertical))
}

/// The format rows are written in: the one asked for (`--format`, `--json`,
/// `-E`), or vertical when every statement ends in `\G` as the mysql client
/// reads it. One format serves a whole run, so `\G` on some statements
/// only (without `-E`), or with another format than tsv asked, is refused
/// rather than half obeyed; so is vertical with `--diff` (its lines are
/// compared).
fn output_format(asked: Format, diff: bool, ends_in_g: &[bool]) -> Result<Format, String> {
    let g = ends_in_g.iter().filter(|v| **v).count();
    let fmt = if g == 0 || asked == Format::Vertical {
        asked
    } else if let Some(i) = ends_in_g.iter().position(|v| !v) {
        let j = ends_in_g.iter().position(|v| *v).unwrap_or(0);
        return Err(format!(
            "statement {} ends in \\G (rows vertically) and statement {} does not: a run writes one format; end every statement alike, or give -E for every result vertically",
            j + 1,
            i + 1
        ));
    } else {
        match asked {
            Format::Tsv | Format::Vertical => Format::Vertical,
            other => {
                return Err(format!(
                    "the statements end in \\G (rows vertically) and --format {} asks for another format: drop one",
                    other.name()
                ))
            }
        }
    };
    if diff && fmt == Format::Vertical {
        return Err(
            "--diff writes tsv or jsonl (the lines each host lacks and has extra); vertical rows (-E, \\G) are for reading".into(),
        );
    }
    Ok(fmt)
}

/// JSON is UTF-8 (RFC 8259): with jsonl, text in a client character set
/// that is not (`charset`) would be written mangled, so it is refused
/// before any host is asked.
fn jsonl_gets_utf8(a: &QueryArgs, charset: Option<&str>) -> anyhow::Result<()> {
    let Some(cs) = charset else { return Ok(()) };
    let utf8 = matches!(
        cs.to_ascii_lowercase().as_str(),
        "utf8mb4" | "utf8mb3" | "utf8" | "ascii"
    );
    anyhow::ensure!(
        !(a.json || a.format == Format::Jsonl) || utf8,
        "--format jsonl writes UTF-8, and --default-character-set {cs} would give it \
         {cs} bytes as text: use utf8mb4 (the default) with jsonl, or tsv/csv for {cs}"
    );
    Ok(())
}

pub async fn run(a: QueryArgs) -> anyhow::Result<Exit> {
    anyhow::ensure!(
        !(a.diff && matches!(a.format, Format::Csv | Format::Table)),
        "--diff writes tsv or jsonl (the lines each host lacks and has extra); --format {} is for rows",
        a.format.name()
    );
    let (base, origin) = sqlfleet_conn::resolve_interactive_traced(&a.conn)?;
    jsonl_gets_utf8(&a, base.charset.as_deref())?;
    let connect_timeout = secs(a.connect_timeout, "--connect-timeout")?;
    let inv =
        inventory::resolve("query", &a.hosts, &a.conn, &base, &origin, connect_timeout).await?;
    if a.discover_only {
        for h in &inv.hosts {
            let tags: Vec<String> = h.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("{} {}", h.addr(), tags.join(" "));
        }
        return Ok(if inv.unreachable.is_empty() {
            Exit::Ok
        } else {
            Exit::Partial
        });
    }
    let hosts = inv.hosts;
    let sql = match (&a.execute, &a.file) {
        (Some(s), _) => s.clone(),
        (None, Some(f)) => {
            let bytes = std::fs::read(f).with_context(|| format!("{}", f.display()))?;
            sql_text(bytes).with_context(|| format!("{}", f.display()))?
        }
        (None, None) => anyhow::bail!("no SQL: give -e SQL or --file F (or --discover-only)"),
    };
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (statements, ends_in_g) = statements(&sql)?;
    let asked = if a.json {
        Format::Jsonl
    } else if a.vertical {
        Format::Vertical
    } else {
        a.format
    };
    let format = output_format(asked, a.diff, &ends_in_g).map_err(anyhow::Error::msg)?;
    let opts = QueryOptions {
        base,
        hosts,
        statements,
        databases: match (&a.databases, a.all_databases) {
            (Some(l), _) => Databases::List(l.clone()),
            (None, true) => Databases::All,
            (None, false) => Databases::Default,
        },
        parallel: renamed(a.parallel, "--parallel", "--threads")
            .unwrap_or(a.threads)
            .max(1),
        connect_timeout,
        query_timeout: a
            .query_timeout
            .map(|v| secs(v, "--query-timeout"))
            .transpose()?,
        deadline: a.deadline.map(|v| secs(v, "--deadline")).transpose()?,
        format,
        header: a.header,
        tag_columns: a.tags.clone(),
        mode: if a.collapse {
            Mode::Collapse
        } else if a.diff {
            Mode::Diff
        } else {
            Mode::Stream
        },
        interrupt: Some(crate::shutdown::on_interrupt(
            "query",
            "stopping the statements in flight",
        )),
        finished: Some(finished.clone()),
        writes_on_read_only: a.writes_on_read_only,
        clusters: Default::default(),
    };
    let total = opts.hosts.len();
    let ticker = show_progress(a.progress.resolve(), finished, total);
    let report = run::run(opts, Box::new(std::io::stdout())).await;
    if let Some(t) = ticker {
        t.abort();
        if a.progress.resolve() == Progress::Bar {
            eprint!("\r\x1b[2K");
        }
    }
    let report = report?;
    say_report(&a, &report);
    if let Some(p) = &a.status_json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("{}", p.display()))?;
    }
    Ok(exit_of(&a, &report))
}

/// The run's summary, its databases and each host that was not ok, on
/// standard error (the summary line unless --quiet).
fn say_report(a: &QueryArgs, report: &run::Report) {
    if !a.quiet {
        eprintln!(
        "sqlfleet query: {} in {:.3}s: {} ok, {} error, {} timeout, {} unreachable, {} stalled{}",
        sqlfleet_conn::text::count(report.hosts as u64, "host"),
        report.seconds,
        report.ok,
        report.error,
        report.timeout,
        report.unreachable,
        report.stalled,
        if report.interrupted > 0 {
            format!(", {} interrupted", report.interrupted)
        } else {
            String::new()
        }
    );
    }
    let t = &report.timing;
    tracing::debug!(
        "where the time went: tasks spawned at {:.3}s, last login done at {:.3}s, last host done at {:.3}s, output done at {:.3}s; per host login p50 {:.1} ms (max {:.1}), statements p50 {:.1} ms (max {:.1})",
        t.spawned,
        t.last_login,
        t.last_host,
        report.seconds,
        t.login_p50 * 1e3,
        t.login_max * 1e3,
        t.statements_p50 * 1e3,
        t.statements_max * 1e3
    );
    if report.databases_ok + report.databases_failed > 0 && !a.quiet {
        eprintln!(
            "sqlfleet query: databases: {} ok, {} failed (per host and database in --status-json)",
            report.databases_ok, report.databases_failed
        );
    }
    let failed: Vec<_> = report
        .statuses
        .iter()
        .filter(|s| s.state != State::Ok)
        .collect();
    for s in failed.iter().take(50) {
        eprintln!(
            "  {:<24} {:<11} {}",
            s.host,
            format!("{:?}", s.state).to_lowercase(),
            s.message.as_deref().unwrap_or("")
        );
    }
    if failed.len() > 50 {
        eprintln!("  ... and {} more (see --status-json)", failed.len() - 50);
    }
}

/// The exit code a run's report gives (see the command's help).
fn exit_of(a: &QueryArgs, report: &run::Report) -> Exit {
    if report.interrupted > 0 {
        crate::shutdown::interrupted_exit()
    } else if a.diff && report.differing > 0 && report.ok == report.hosts {
        Exit::Differ
    } else if report.ok == report.hosts {
        Exit::Ok
    } else if report.ok == 0 && report.databases_ok == 0 {
        // Partial when some database ran clean on some host (-B db1,nosuchdb).
        Exit::Total
    } else {
        Exit::Partial
    }
}

/// Hosts done out of `total`, every 200 ms: a line rewritten in place on
/// standard error (`bar`), or one JSON object per line there (`json`,
/// once a second: standard output carries the rows).
fn show_progress(
    mode: Progress,
    finished: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    total: usize,
) -> Option<tokio::task::JoinHandle<()>> {
    use std::io::Write;
    if !matches!(mode, Progress::Bar | Progress::Json) {
        return None;
    }
    let started = std::time::Instant::now();
    Some(tokio::spawn(async move {
        let tick = if mode == Progress::Json { 1000 } else { 200 };
        loop {
            tokio::time::sleep(Duration::from_millis(tick)).await;
            let done = finished.load(std::sync::atomic::Ordering::Relaxed);
            let secs = started.elapsed().as_secs_f64();
            let mut e = std::io::stderr().lock();
            let _ = if mode == Progress::Json {
                writeln!(
                    e,
                    "{}",
                    serde_json::json!({"event": "progress", "seconds": (secs * 1000.0).round() / 1000.0, "hosts_done": done, "hosts": total})
                )
            } else {
                write!(
                    e,
                    "\r\x1b[2Ksqlfleet query: {done}/{total} hosts done, {secs:.1}s"
                )
            };
            let _ = e.flush();
        }
    }))
}

#[cfg(test)]
mod tests {
    /// A file that is not UTF-8 is named at its first such byte.
    #[test]
    fn a_sql_file_that_is_not_utf8_is_named_at_its_byte() {
        let rows: &[(&[u8], Option<&str>)] = &[
            (b"SELECT 1;", None),
            (b"SELECT '\xc3\xa9';", None),
            (
                b"SELECT 1;\nSELECT 'caf\xe9';",
                Some("not UTF-8 at byte offset 21 (line 2)"),
            ),
            (b"\x95\\", Some("not UTF-8 at byte offset 0 (line 1)")),
        ];
        for (bytes, want) in rows {
            let got = super::sql_text(bytes.to_vec()).err().map(|e| e.to_string());
            match (want, got) {
                (None, None) => {}
                (Some(w), Some(g)) => assert!(g.starts_with(w) && g.contains("iconv"), "{g}"),
                (w, g) => panic!("{bytes:?}: wanted {w:?}, got {g:?}"),
            }
        }
    }

    use super::*;

    #[test]
    fn rows_are_vertical_when_asked_or_when_every_statement_ends_in_backslash_g() {
        use Format::*;
        // (asked, --diff, statements ending in \G, the format or the refusal's words)
        type Row = (Format, bool, &'static [bool], Result<Format, &'static str>);
        let rows: &[Row] = &[
            (Tsv, false, &[false], Ok(Tsv)),
            (Tsv, false, &[false, false], Ok(Tsv)),
            (Jsonl, false, &[false], Ok(Jsonl)),
            (Vertical, false, &[false], Ok(Vertical)),
            (Tsv, false, &[true], Ok(Vertical)),
            (Tsv, false, &[true, true], Ok(Vertical)),
            (Vertical, false, &[true], Ok(Vertical)),
            (Vertical, false, &[true, false], Ok(Vertical)),
            (Tsv, false, &[true, false], Err("statement 1 ends in \\G")),
            (
                Tsv,
                false,
                &[false, false, true],
                Err("and statement 1 does not"),
            ),
            (Csv, false, &[true], Err("--format csv")),
            (Table, false, &[true], Err("--format table")),
            (Jsonl, false, &[true], Err("--format jsonl")),
            (Tsv, true, &[true], Err("--diff")),
            (Vertical, true, &[false], Err("--diff")),
            (Tsv, true, &[false], Ok(Tsv)),
        ];
        for (asked, diff, ends, want) in rows {
            let got = output_format(*asked, *diff, ends);
            match (want, &got) {
                (Ok(f), Ok(g)) => assert_eq!(f, g, "{asked:?} {diff} {ends:?}"),
                (Err(words), Err(e)) => assert!(e.contains(words), "{e}"),
                _ => panic!("{asked:?} {diff} {ends:?}: {got:?}, want {want:?}"),
            }
        }
    }
}
