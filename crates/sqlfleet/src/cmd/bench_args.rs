//! `sqlfleet bench`'s command line: the subcommands, their flags, and
//! the one flag value that needs parsing (`--queries-per-connection`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::vocab::Progress;
use sqlfleet_conn::ConnArgs;

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Concurrent inserters x table sizes x index: rates, stalls, errors, lost rows.
    /// Exit codes: 0 done, 1 usage or setup error, 2 acknowledged rows were
    /// lost, 130 interrupted by Ctrl-C, 143 by SIGTERM (the cells finished
    /// are written)
    Insert(Box<InsertArgs>),
    /// Connect / q queries / disconnect clients, direct and through relays.
    /// Exit codes: 0 done, 1 usage or setup error, 2 a cell failed (more
    /// errors than --max-errors), 130 interrupted by Ctrl-C, 143 by SIGTERM
    /// (the cells finished are written)
    Pool(Box<PoolArgs>),
    /// Compare two result directories (Welch's t test per cell). Exit
    /// codes: 0 no regression, 1 the runs do not compare (different
    /// benchmarks, no cell in common), 2 a regression or a cell that
    /// failed in B
    Compare {
        /// The earlier run's directory (results.json)
        a: PathBuf,
        /// The later run's directory
        b: PathBuf,
        /// A cell regressed only when lower by at least PCT percent (and
        /// beyond the noise, where samples tell it); with one sample each,
        /// a drop of PCT percent counts (for scripted comparisons)
        #[arg(long, value_name = "PCT")]
        fail_on_regression: Option<f64>,
    },
}

#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct InsertArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::HelpLong)]
    pub help: Option<bool>,
    /// Concurrent inserters to try
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub threads: Vec<usize>,
    /// The old name of --threads
    #[arg(long, hide = true, value_delimiter = ',', conflicts_with = "threads")]
    pub processes: Option<Vec<usize>>,
    /// Rows in the table before each run
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub table_sizes: Vec<u64>,
    /// Index on (fname, version): on, off or both
    #[arg(long, default_value = "both", value_parser = ["on", "off", "both"])]
    pub index: String,
    /// per-insert (connect for every insert) or persistent
    #[arg(long, default_value = "persistent", value_parser = ["per-insert", "persistent"])]
    pub connect: String,
    /// Seconds per cell, after a 1 s warm-up
    #[arg(long, default_value_t = 5, conflicts_with = "rows")]
    pub duration: u64,
    /// Or: acknowledged inserts per cell
    #[arg(long)]
    pub rows: Option<u64>,
    /// Where to write CSV, JSON, charts and report.html
    #[arg(long, default_value = "bench-insert")]
    pub out: PathBuf,
    /// Drop the sqlfleet_bench database from the target at the end
    #[arg(long)]
    pub cleanup: bool,
    #[command(flatten)]
    pub show: ShowArgs,
}

#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct PoolArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::HelpLong)]
    pub help: Option<bool>,
    /// Also measure through this relay or proxy (repeatable): HOST:PORT
    /// (with the direct target's user, password and TLS) or a URL with its
    /// own, mysql://user:pass@host:port/?ssl-mode=DISABLED
    #[arg(long, value_name = "HOST:PORT|URL")]
    pub via: Vec<String>,
    /// Fail the run (exit 2) when a cell's errors exceed this percentage of
    /// its attempts (connects and queries), or when it ran no query at all
    #[arg(long, default_value_t = 1.0, value_name = "PCT")]
    pub max_errors: f64,
    /// A list (1,2,5) or a range (1..10)
    #[arg(long, default_value = "1,2,5,10,20")]
    pub queries_per_connection: String,
    /// A statement each client sends right after logging in, as drivers
    /// do, timed as part of its connect (repeatable, in order): e.g. the
    /// mariadb client's `select @@version_comment limit 1`
    #[arg(long, value_name = "SQL")]
    pub connect_query: Vec<String>,
    /// Rows in the table each query reads whole
    #[arg(long, default_value_t = 256)]
    pub rows: u32,
    /// CHAR columns in that table
    #[arg(long, default_value_t = 16)]
    pub columns: u32,
    /// Width of each CHAR column (1 to 255)
    #[arg(long, default_value_t = 32)]
    pub column_size: u32,
    /// Concurrent clients to try
    #[arg(long, value_delimiter = ',', default_value = "8")]
    pub threads: Vec<usize>,
    /// The old name of --threads
    #[arg(long, hide = true, value_delimiter = ',', conflicts_with = "threads")]
    pub clients: Option<Vec<usize>>,
    /// Measured 1-second windows per cell (after one warm-up window)
    #[arg(long, default_value_t = 5)]
    pub samples: usize,
    /// Where to write CSV, JSON, charts and report.html
    #[arg(long, default_value = "bench-pool")]
    pub out: PathBuf,
    /// Drop the sqlfleet_bench database from the target at the end
    #[arg(long)]
    pub cleanup: bool,
    #[command(flatten)]
    pub show: ShowArgs,
}

/// How a sweep shows itself, the same for every bench command.
#[derive(Args, Debug, Clone, Copy)]
pub struct ShowArgs {
    /// Print a progress line every S seconds (as sysbench's
    /// --report-interval); without it a terminal gets one line updated in place
    #[arg(long, value_name = "S")]
    pub report_interval: Option<u64>,
    /// auto (a line on a terminal), bar, json (lines on standard error) or none
    #[arg(long, value_enum, default_value_t = Progress::Auto)]
    pub progress: Progress,
    /// The results as one JSON object on standard output (results.json's
    /// content) instead of the table
    #[arg(long)]
    pub json: bool,
    /// The results table and errors only: no progress, no lines about
    /// the files written
    #[arg(long)]
    pub quiet: bool,
}

pub fn parse_qs(s: &str) -> anyhow::Result<Vec<u32>> {
    if let Some((a, b)) = s.split_once("..") {
        let (a, b): (u32, u32) = (a.trim().parse()?, b.trim().parse()?);
        anyhow::ensure!(
            a >= 1 && a <= b,
            "--queries-per-connection {s}: need 1 <= A <= B"
        );
        return Ok((a..=b).collect());
    }
    let v: Vec<u32> = s
        .split(',')
        .map(|x| x.trim().parse())
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(
        v.iter().all(|&q| q >= 1),
        "queries per connection must be at least 1"
    );
    Ok(v)
}
