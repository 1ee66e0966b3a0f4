//! `sqlfleet man --out DIR`: roff man pages generated from the command
//! line's own definitions (clap_mangen), one for the program and one per
//! command and subcommand, so they never disagree with `--help`.

use std::path::Path;

use anyhow::Context;

/// Writes the pages of `cmd` (the whole command line, from main.rs);
/// returns how many.
pub fn write(dir: &Path, cmd: clap::Command) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    page(dir, "sqlfleet", cmd)
}

fn page(dir: &Path, name: &str, cmd: clap::Command) -> anyhow::Result<usize> {
    let cmd = cmd.name(name.to_string());
    let mut bytes = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut bytes)
        .context("rendering a man page")?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, bytes).with_context(|| format!("{}", path.display()))?;
    let mut n = 1;
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        n += page(dir, &format!("{name}-{}", sub.get_name()), sub.clone())?;
    }
    Ok(n)
}
