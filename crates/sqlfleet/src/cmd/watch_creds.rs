//! `sqlfleet watch creds`: the encrypted credential store's subcommands,
//! and how the store and its passphrase are found (also for `watch`).

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use anyhow::Context;
use sqlfleet_watch::config::FileConfig;
use sqlfleet_watch::creds::{self, Entry};

use crate::exit::Exit;

#[derive(clap::Args, Debug, Clone)]
pub struct StoreArgs {
    /// The credential store [default: $SQLFLEET_HOME/watch/creds.age when it exists]
    #[arg(long, value_name = "FILE", global = true)]
    pub creds: Option<PathBuf>,
    /// A file whose first line is the store's passphrase (else
    /// $SQLFLEET_CREDS_PASSPHRASE, else a prompt)
    #[arg(long, value_name = "FILE", global = true)]
    creds_key_file: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
pub enum CredsCmd {
    /// Create an empty store (asks for a new passphrase)
    Init,
    /// Add or replace a server's login; the password is read from the
    /// terminal or one line of standard input, never from the command line
    Add {
        /// host:port (or unix:/path) as the host list names it
        server: String,
        #[arg(long)]
        user: Option<String>,
        /// user@host for host metrics over SSH
        #[arg(long, value_name = "USER@HOST")]
        ssh: Option<String>,
        /// Store no password (the server or option files provide the login)
        #[arg(long)]
        no_password: bool,
        /// Also store a password for the SSH login (read after the
        /// server's, from the terminal or the next line of standard input)
        #[arg(long, requires = "ssh")]
        ssh_password: bool,
    },
    /// Set the web page's login (HTTP basic auth for --listen); the
    /// password is read from the terminal or one line of standard input
    Web {
        #[arg(long)]
        user: String,
    },
    /// List the servers in the store (never the passwords)
    List,
    /// Remove a server's entry
    Remove { server: String },
    /// Change the store's passphrase
    Passwd,
}

pub fn store_path(s: &StoreArgs, file: Option<&FileConfig>) -> PathBuf {
    s.creds
        .clone()
        .or_else(|| file.and_then(|f| f.creds.clone()))
        .unwrap_or_else(|| creds::default_path(&sqlfleet_conn::home::sqlfleet_home()))
}

/// The passphrase: key file, environment, or a prompt on the terminal.
pub fn passphrase(s: &StoreArgs, prompt: &str) -> anyhow::Result<String> {
    if let Some(f) = &s.creds_key_file {
        let t = std::fs::read_to_string(f).with_context(|| format!("{}", f.display()))?;
        let p = t.lines().next().unwrap_or_default().to_string();
        anyhow::ensure!(!p.is_empty(), "{}: the first line is empty", f.display());
        return Ok(p);
    }
    if let Ok(p) = std::env::var("SQLFLEET_CREDS_PASSPHRASE") {
        return Ok(p);
    }
    rpassword::prompt_password(prompt).context(
        "no passphrase: give --creds-key-file FILE or SQLFLEET_CREDS_PASSPHRASE, or run on a terminal",
    )
}

fn new_passphrase(s: &StoreArgs) -> anyhow::Result<String> {
    if s.creds_key_file.is_some() || std::env::var_os("SQLFLEET_CREDS_PASSPHRASE").is_some() {
        return passphrase(s, "");
    }
    let a = rpassword::prompt_password("New passphrase: ")?;
    let b = rpassword::prompt_password("Again: ")?;
    anyhow::ensure!(a == b, "the passphrases differ; nothing changed");
    anyhow::ensure!(!a.is_empty(), "an empty passphrase protects nothing");
    Ok(a)
}

/// A password from the terminal (no echo) or one line of stdin.
fn read_password(server: &str) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        return Ok(rpassword::prompt_password(format!(
            "Password for {server}: "
        ))?);
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\n', '\r']).to_string())
}

pub fn run(c: CredsCmd, s: &StoreArgs) -> anyhow::Result<Exit> {
    let path = store_path(s, None);
    match c {
        CredsCmd::Init => {
            let p = new_passphrase(s)?;
            let _lock = creds::lock(&path)?;
            creds::init(&path, &p)?;
            println!("created {}", path.display());
        }
        CredsCmd::Add {
            server,
            user,
            ssh,
            no_password,
            ssh_password,
        } => {
            let p = passphrase(s, "Store passphrase: ")?;
            // A wrong passphrase is said before a person types a password.
            if std::io::stdin().is_terminal() {
                creds::load(&path, &p)?;
            }
            let password = if no_password {
                None
            } else {
                Some(read_password(&server)?)
            };
            let ssh_password = if ssh_password {
                let d = ssh.as_deref().unwrap_or_default();
                Some(read_password(&format!("{d} (SSH)"))?)
            } else {
                None
            };
            // Read, changed and written under the store's lock (never
            // held while a password is typed).
            let _lock = creds::lock(&path)?;
            let mut store = creds::load(&path, &p)?;
            store.put(Entry {
                server: server.clone(),
                user,
                password,
                ssh,
                ssh_password,
            });
            creds::save(&path, &p, &store)?;
            println!("saved {server} in {}", path.display());
        }
        CredsCmd::Web { user } => {
            let p = passphrase(s, "Store passphrase: ")?;
            if std::io::stdin().is_terminal() {
                creds::load(&path, &p)?;
            }
            let password = read_password(&format!("the web page's user {user}"))?;
            anyhow::ensure!(!password.is_empty(), "an empty password protects nothing");
            let _lock = creds::lock(&path)?;
            let mut store = creds::load(&path, &p)?;
            store.put(Entry {
                server: creds::WEB_LOGIN.into(),
                user: Some(user.clone()),
                password: Some(password),
                ssh: None,
                ssh_password: None,
            });
            creds::save(&path, &p, &store)?;
            println!("saved the web login {user} in {}", path.display());
        }
        CredsCmd::List => {
            let p = passphrase(s, "Store passphrase: ")?;
            let store = creds::load(&path, &p)?;
            for e in &store.entries {
                println!(
                    "{}\tuser={}\tpassword={}\tssh={}\tssh_password={}",
                    e.server,
                    e.user.as_deref().unwrap_or("-"),
                    if e.password.is_some() { "yes" } else { "no" },
                    e.ssh.as_deref().unwrap_or("-"),
                    if e.ssh_password.is_some() {
                        "yes"
                    } else {
                        "no"
                    },
                );
            }
        }
        CredsCmd::Remove { server } => {
            let p = passphrase(s, "Store passphrase: ")?;
            let _lock = creds::lock(&path)?;
            let mut store = creds::load(&path, &p)?;
            anyhow::ensure!(
                store.remove(&server),
                "{server} is not in {}",
                path.display()
            );
            creds::save(&path, &p, &store)?;
            println!("removed {server}");
        }
        CredsCmd::Passwd => {
            let old = passphrase(s, "Current passphrase: ")?;
            creds::load(&path, &old)?;
            let new = if std::io::stdin().is_terminal() {
                let a = rpassword::prompt_password("New passphrase: ")?;
                let b = rpassword::prompt_password("Again: ")?;
                anyhow::ensure!(a == b, "the passphrases differ; nothing changed");
                a
            } else {
                read_password("the store (new passphrase)")?
            };
            anyhow::ensure!(!new.is_empty(), "an empty passphrase protects nothing");
            // Read again under the lock: what another command saved while
            // the new passphrase was typed is kept.
            let _lock = creds::lock(&path)?;
            let store = creds::load(&path, &old)?;
            creds::save(&path, &new, &store)?;
            println!("passphrase changed for {}", path.display());
        }
    }
    Ok(Exit::Ok)
}
