//! What the server itself defines, for generators that draw from it rather
//! than from what a test happened to need: the `sql_mode` flags this
//! machine's mariadbd lists (`mariadbd --verbose --help`).

/// Every sql_mode flag the server takes (`REAL_AS_FLOAT`, ...,
/// `TIME_ROUND_FRACTIONAL`), read once from the mariadbd the sandboxes run.
pub fn sql_mode_flags() -> &'static [String] {
    static FLAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FLAGS.get_or_init(|| {
        let bins = sqlfleet_sandbox::Binaries::find().expect("mariadbd");
        let help = std::process::Command::new(&bins.mariadbd)
            .args(["--no-defaults", "--verbose", "--help"])
            .output()
            .expect("mariadbd --verbose --help");
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        let flags: Vec<String> = help
            .split("--sql-mode=name")
            .nth(1)
            .and_then(|t| t.split("Any combination of:").nth(1))
            .and_then(|t| t.split("Use 'ALL'").next())
            .expect("mariadbd --help lists the sql_mode flags")
            .split(|c: char| c == ',' || c.is_whitespace())
            .map(|f| f.trim_end_matches('.').to_string())
            .filter(|f| !f.is_empty())
            .collect();
        assert!(flags.len() >= 30, "too few sql_mode flags read: {flags:?}");
        flags
    })
}
