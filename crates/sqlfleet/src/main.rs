//! The `sqlfleet` binary: parses flags, runs the library crates, maps
//! errors to exit codes. It holds no logic of its own.

mod cmd;
mod exit;
mod fdlimit;
mod log;
mod pipe;
mod proctitle;
mod shutdown;

use clap::{Parser, Subcommand};

use exit::Exit;

/// Parallel tools for MySQL and MariaDB fleets.
#[derive(Parser, Debug)]
#[command(
    name = "sqlfleet",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = "Exit codes: 0 success, 1 usage or setup error, 2 partial failure (some hosts, statements or streams), 3 total failure, 4 a difference found (query --diff), 130 interrupted (Ctrl-C), 141 the output pipe closed, 143 terminated (SIGTERM); each command's --help says which it uses."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
    /// More log lines (-v debug, -vv trace)
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Log lines as text (timestamped) or as JSON objects, one per line
    #[arg(long, value_enum, default_value_t = log::LogFormat::Text, global = true)]
    log_format: log::LogFormat,
}

#[derive(Subcommand, Debug)]
enum Command {
    // load, query and relay take their help (and exit codes) from their
    // argument structs' docs.
    Load(Box<cmd::load::LoadArgs>),
    Query(Box<cmd::query::QueryArgs>),
    Relay(Box<cmd::relay::RelayArgs>),
    Watch(Box<cmd::watch::WatchArgs>),
    Replicate(Box<cmd::replicate::ReplicateArgs>),
    /// Throughput and latency sweeps, direct and through a relay
    #[command(subcommand)]
    Bench(cmd::bench_args::BenchCmd),
    /// Local MariaDB servers (and replicas) in a data dir
    #[command(subcommand)]
    Sandbox(cmd::sandbox::SandboxCmd),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    ///
    /// For example `sqlfleet completions bash > /etc/bash_completion.d/sqlfleet`.
    ///
    /// Exit codes: 0 printed, 1 unknown shell
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Write man pages (sqlfleet.1 and one per command) into a directory
    ///
    /// sqlfleet.1 and one page per command (e.g. sqlfleet-query.1),
    /// generated from these definitions.
    ///
    /// Exit codes: 0 written, 1 the directory cannot be written
    Man {
        /// The folder to write them into (e.g. /usr/local/share/man/man1)
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

fn main() {
    // Started by ssh as its askpass program (watch's host metrics with a
    // stored SSH password): answer and leave.
    if std::env::var_os("SSH_ASKPASS_REQUIRE").is_some() {
        if let Some(sock) = std::env::var_os(sqlfleet_watch::askpass::ENV) {
            std::process::exit(sqlfleet_watch::askpass::answer(std::path::Path::new(&sock)));
        }
    }
    // Faults placed by a test (a build without failpoints refuses a set
    // SQLFLEET_FAILPOINTS rather than run without the fault).
    if let Err(e) = sqlfleet_faults::arm_from_env() {
        eprintln!("sqlfleet: {e}");
        std::process::exit(1);
    }
    // std reads argv lazily from the process's own memory: copy it before
    // the passwords in that memory are overwritten.
    let argv = sqlfleet_conn::normalize_argv(std::env::args_os());
    proctitle::mask_passwords();
    // A word after a bare -p / --password is not taken as the password (as
    // the mysql client); but if it was meant as one, a usage error must not
    // print it back.
    let after_password: Vec<String> = argv
        .windows(2)
        .filter(|w| w[0] == "-p" || w[0] == "--password")
        .filter_map(|w| w[1].to_str().map(str::to_owned))
        .filter(|v| !v.starts_with('-') && !v.is_empty())
        .collect();
    // -? is help everywhere, as for the mysql client and mydumper (-h is
    // the host for the commands that connect).
    let argv: Vec<std::ffi::OsString> = argv
        .into_iter()
        .map(|a| if a == "-?" { "--help".into() } else { a })
        .collect();
    let h_without_value = argv.last().is_some_and(|a| a == "-h");
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            };
            if e.use_stderr() {
                let mut text = e.render().to_string();
                for secret in &after_password {
                    text = text.replace(secret.as_str(), "***");
                }
                if h_without_value {
                    text.push_str(
                        "\n-h is the server's host, as for the mysql client: use --help or -? for help\n",
                    );
                }
                eprint!("{text}");
            } else {
                let _ = e.print();
            }
            std::process::exit(code as i32);
        }
    };
    log::init(cli.verbose, cli.log_format);
    pipe::install();
    match &cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "sqlfleet", &mut script);
            let written = std::io::Write::write_all(&mut std::io::stdout(), &script);
            std::process::exit(match written {
                Ok(()) => Exit::Ok as i32,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => pipe::CLOSED,
                Err(e) => {
                    eprintln!("sqlfleet: writing the completion script: {e}");
                    Exit::Usage as i32
                }
            });
        }
        Command::Man { out } => std::process::exit(
            match cmd::man::write(out, <Cli as clap::CommandFactory>::command()) {
                Ok(files) => {
                    println!("wrote {} man pages in {}", files, out.display());
                    Exit::Ok as i32
                }
                Err(e) => {
                    eprintln!("sqlfleet: {}", exit::one_line(&e));
                    Exit::Usage as i32
                }
            },
        ),
        _ => {}
    }
    // The relay runs its own event loops, one single-threaded runtime per
    // thread (relay --threads); this is the first of them. Query's work is
    // waiting on sockets: one thread drives a thousand logins with a
    // quarter less CPU than two workers handing tasks and wake-ups to each
    // other (its output is written on a thread of its own).
    let mut builder = match &cli.command {
        Command::Relay(_) | Command::Query(_) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sqlfleet: cannot start the async runtime: {e}");
            std::process::exit(Exit::Usage as i32);
        }
    };
    // Errors say which command they are of, as the commands' own
    // messages do ("sqlfleet load: ...").
    let name = match &cli.command {
        Command::Load(_) => "load",
        Command::Query(_) => "query",
        Command::Watch(_) => "watch",
        Command::Replicate(_) => "replicate",
        Command::Relay(_) => "relay",
        Command::Bench(_) => "bench",
        Command::Sandbox(_) => "sandbox",
        Command::Completions { .. } => "completions",
        Command::Man { .. } => "man",
    };
    let result = rt.block_on(async move {
        match cli.command {
            Command::Load(a) => cmd::load::run(*a).await,
            Command::Query(a) => cmd::query::run(*a).await,
            Command::Watch(a) => cmd::watch::run(*a).await,
            Command::Replicate(a) => cmd::replicate::run(*a).await,
            Command::Relay(a) => cmd::relay::run(*a).await,
            Command::Bench(c) => cmd::bench::run(c).await,
            Command::Sandbox(c) => cmd::sandbox::run(c).await,
            Command::Completions { .. } | Command::Man { .. } => Ok(Exit::Ok),
        }
    });
    let code = match result {
        Ok(code) => code,
        Err(e) if pipe::is_closed_pipe(&e) => std::process::exit(pipe::CLOSED),
        Err(e) => {
            eprintln!("sqlfleet {name}: {}", exit::one_line(&e));
            Exit::Usage
        }
    };
    std::process::exit(code as i32);
}

/// The one vocabulary of flags (`cmd/vocab.rs`, docs/guide/conventions.md)
/// checked against every command's definition.
#[cfg(test)]
mod vocabulary {
    use clap::CommandFactory;

    use crate::cmd::vocab::{IDEAS, PRINT_RESULTS, RUN_LONG};

    /// Every (command path, its visible long flags) in the tree.
    fn commands() -> Vec<(String, Vec<String>)> {
        fn walk(c: &clap::Command, path: &str, out: &mut Vec<(String, Vec<String>)>) {
            let flags = c
                .get_arguments()
                .filter(|a| !a.is_hide_set())
                .filter_map(|a| a.get_long().map(str::to_string))
                .collect();
            out.push((path.to_string(), flags));
            for s in c.get_subcommands() {
                let p = if path.is_empty() {
                    s.get_name().to_string()
                } else {
                    format!("{path} {}", s.get_name())
                };
                walk(s, &p, out);
            }
        }
        let mut out = Vec::new();
        walk(&crate::Cli::command(), "", &mut out);
        out
    }

    fn flags_of<'a>(all: &'a [(String, Vec<String>)], cmd: &str) -> &'a [String] {
        &all.iter()
            .find(|(p, _)| p == cmd)
            .unwrap_or_else(|| panic!("no command {cmd}"))
            .1
    }

    #[test]
    fn one_idea_one_flag_in_every_command() {
        let all = commands();
        assert!(all.len() > 20, "{all:?}");
        for (path, flags) in &all {
            for (idea, _, other) in IDEAS {
                for o in *other {
                    assert!(
                        !flags.iter().any(|f| f == o),
                        "`sqlfleet {path} --{o}`: {idea} is spelt otherwise elsewhere (docs/guide/conventions.md)"
                    );
                }
            }
        }
        for cmd in PRINT_RESULTS {
            assert!(
                flags_of(&all, cmd).iter().any(|f| f == "json"),
                "`sqlfleet {cmd}` prints results and has no --json"
            );
        }
        for cmd in RUN_LONG {
            for f in ["progress", "quiet"] {
                assert!(
                    flags_of(&all, cmd).iter().any(|x| x == f),
                    "`sqlfleet {cmd}` runs long and has no --{f}"
                );
            }
        }
    }

    #[test]
    fn every_progress_flag_takes_the_same_four_words() {
        fn walk(c: &clap::Command, path: &str) {
            for a in c.get_arguments() {
                if a.get_long() == Some("progress") {
                    let mut v: Vec<String> = a
                        .get_possible_values()
                        .iter()
                        .filter(|p| !p.is_hide_set())
                        .map(|p| p.get_name().to_string())
                        .collect();
                    v.sort();
                    assert_eq!(
                        v,
                        ["auto", "bar", "json", "none"],
                        "sqlfleet {path} --progress"
                    );
                }
            }
            for s in c.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()));
            }
        }
        walk(&crate::Cli::command(), "");
    }

    #[test]
    fn the_conventions_chapter_names_every_idea() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let guide = std::fs::read_to_string(root.join("../../docs/guide/conventions.md"))
            .expect("docs/guide/conventions.md");
        for (idea, flag, _) in IDEAS {
            assert!(
                guide.contains(&format!("`--{flag}")),
                "conventions.md does not name --{flag} ({idea})"
            );
        }
    }
}
