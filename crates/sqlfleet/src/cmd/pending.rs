//! Subcommands that are planned but not built yet: they accept the shared
//! connection flags and say plainly that they do not exist yet.

use sqlfleet_conn::ConnArgs;

use crate::exit::Exit;

#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct PendingArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Print help
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

pub fn run(name: &str, issue: u32, args: PendingArgs) -> anyhow::Result<Exit> {
    // Validate the connection flags and option files even so, so that
    // mistakes there surface the same way they will once the command exists.
    sqlfleet_conn::resolve(&args.conn, &sqlfleet_conn::Env::from_process())?;
    eprintln!("sqlfleet {name}: not built yet (planned in issue {issue}); nothing was done");
    Ok(Exit::Usage)
}
