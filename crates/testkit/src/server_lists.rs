//! What the server itself defines, for generators that draw from it rather
//! than from what a test happened to need: the `sql_mode` flags this
//! machine's mariadbd lists (`mariadbd --verbose --help`).

/// Every sql_mode flag the server takes (`REAL_AS_FLOAT`, ...,
/// `TIME_ROUND_FRACTIONAL`), read once from the mariadbd the sandboxes run.
pub fn sql_mode_flags() -> &'static [String] {
    static FLAGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    FLAGS.get_or_init(|| {
        let bins = sqlfleet_sandbox::Binaries::find(None).expect("mariadbd");
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

/// A session system variable as `information_schema.SYSTEM_VARIABLES`
/// describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionVariable {
    /// Lower case, as `SHOW VARIABLES` names it.
    pub name: String,
    /// `BOOLEAN`, `ENUM`, `SET`, `FLAGSET`, `VARCHAR`, `INT UNSIGNED`, ...
    pub kind: String,
    /// This session's value.
    pub value: String,
    /// The values an ENUM, SET or FLAGSET takes (empty when the server
    /// lists none: character sets, collations, locales).
    pub choices: Vec<String>,
    pub min: Option<String>,
    pub max: Option<String>,
}

/// Every session variable a client may set (writable, session scope), as
/// the server on `c` lists them.
pub async fn session_variables(c: &mut mysql_async::Conn) -> Vec<SessionVariable> {
    use mysql_async::prelude::Queryable;
    type Row = (
        String,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let rows: Vec<Row> = c
        .query(
            "SELECT LOWER(VARIABLE_NAME), VARIABLE_TYPE, SESSION_VALUE, ENUM_VALUE_LIST, \
             NUMERIC_MIN_VALUE, NUMERIC_MAX_VALUE FROM information_schema.SYSTEM_VARIABLES \
             WHERE VARIABLE_SCOPE IN ('SESSION', 'SESSION ONLY') AND READ_ONLY = 'NO' \
             ORDER BY VARIABLE_NAME",
        )
        .await
        .expect("information_schema.SYSTEM_VARIABLES");
    let vars: Vec<SessionVariable> = rows
        .into_iter()
        .map(|(name, kind, value, choices, min, max)| SessionVariable {
            name,
            kind,
            value: value.unwrap_or_default(),
            choices: choices
                .map(|l| l.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
            min,
            max,
        })
        .collect();
    assert!(
        vars.len() >= 100,
        "too few session variables read: {}",
        vars.len()
    );
    vars
}

impl SessionVariable {
    /// Values other than the session's own, as SQL literals, drawn from
    /// the server's description: every choice of an ENUM; the empty set
    /// and each member of a SET; each flag of a FLAGSET turned the other
    /// way; a number's least and greatest; for the ENUMs the server lists
    /// no choices for (character sets, collations, locales) and the
    /// VARCHARs this table knows, a few real ones. Empty when the
    /// description gives no way to pick one.
    pub fn other_values(&self) -> Vec<String> {
        let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"));
        let cur = self.value.as_str();
        let others = |list: &[&str]| -> Vec<String> {
            list.iter()
                .filter(|c| !c.eq_ignore_ascii_case(cur))
                .map(|c| quote(c))
                .collect()
        };
        match self.kind.as_str() {
            "BOOLEAN" => vec![if cur.eq_ignore_ascii_case("ON") {
                "OFF"
            } else {
                "ON"
            }
            .into()],
            "ENUM" if !self.choices.is_empty() => {
                let list: Vec<&str> = self.choices.iter().map(String::as_str).collect();
                others(&list)
            }
            "ENUM" if self.name.starts_with("collation") => others(&[
                "latin1_german1_ci",
                "utf8mb4_unicode_ci",
                "utf8mb4_bin",
                "binary",
                "sjis_japanese_ci",
            ]),
            // Results in ucs2 would be unreadable to the reading client
            // (its column definitions too).
            "ENUM" if self.name == "character_set_results" => {
                others(&["latin1", "utf8mb3", "binary", "sjis"])
            }
            "ENUM" if self.name.starts_with("character_set") => {
                others(&["latin1", "utf8mb3", "binary", "sjis", "ucs2"])
            }
            "ENUM" if self.name.starts_with("lc_") => others(&["de_DE", "ja_JP"]),
            "ENUM" => vec![],
            "SET" => {
                let mut v: Vec<String> = self
                    .choices
                    .iter()
                    .filter(|c| !c.eq_ignore_ascii_case(cur))
                    .map(|c| quote(c))
                    .collect();
                if !cur.is_empty() {
                    v.insert(0, "''".into());
                }
                v
            }
            "FLAGSET" => cur
                .split(',')
                .filter_map(|f| f.split_once('='))
                .map(|(flag, on)| {
                    let flipped = if on == "on" { "off" } else { "on" };
                    quote(&format!("{flag}={flipped}"))
                })
                .collect(),
            "VARCHAR" => match self.name.as_str() {
                "time_zone" => others(&["+05:00", "-11:30", "SYSTEM"]),
                n if n.ends_with("storage_engine") => others(&["Aria", "MyISAM", "MEMORY"]),
                "system_versioning_asof" => others(&["2020-01-01 00:00:00"]),
                "default_master_connection" => others(&["other"]),
                "innodb_tmpdir" => others(&["/tmp"]),
                "session_track_system_variables" => others(&["time_zone", ""]),
                // MariaDB 11.2+: the collation a named character set gets.
                "character_set_collations" => others(&[
                    "utf8mb4=utf8mb4_uca1400_ai_ci,utf8mb3=utf8mb3_bin",
                    "utf8mb4=utf8mb4_unicode_ci",
                ]),
                _ => vec![],
            },
            _ => {
                // A number: the least and the greatest the server takes.
                let same = |a: &str| a.parse::<f64>().ok() == cur.parse::<f64>().ok();
                [&self.min, &self.max]
                    .into_iter()
                    .flatten()
                    .filter(|v| !same(v))
                    .cloned()
                    .collect()
            }
        }
    }
}

/// Every built-in function the server on `c` lists
/// (`information_schema.SQL_FUNCTIONS`, MariaDB 10.6+), upper case.
pub async fn sql_functions(c: &mut mysql_async::Conn) -> Vec<String> {
    use mysql_async::prelude::Queryable;
    c.query("SELECT UPPER(FUNCTION) FROM information_schema.SQL_FUNCTIONS ORDER BY 1")
        .await
        .expect("information_schema.SQL_FUNCTIONS")
}

#[cfg(test)]
mod tests {
    use super::SessionVariable;

    fn var(
        name: &str,
        kind: &str,
        value: &str,
        choices: &str,
        min: &str,
        max: &str,
    ) -> SessionVariable {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        SessionVariable {
            name: name.into(),
            kind: kind.into(),
            value: value.into(),
            choices: choices
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect(),
            min: opt(min),
            max: opt(max),
        }
    }

    #[test]
    fn other_values_are_drawn_from_what_the_server_says_the_variable_takes() {
        let cases: [(SessionVariable, &[&str]); 13] = [
            (var("autocommit", "BOOLEAN", "ON", "", "", ""), &["OFF"]),
            (var("big_tables", "BOOLEAN", "OFF", "", "", ""), &["ON"]),
            (
                var(
                    "binlog_format",
                    "ENUM",
                    "MIXED",
                    "MIXED,STATEMENT,ROW",
                    "",
                    "",
                ),
                &["'STATEMENT'", "'ROW'"],
            ),
            (
                var("lc_time_names", "ENUM", "de_DE", "", "", ""),
                &["'ja_JP'"],
            ),
            (
                var("character_set_results", "ENUM", "latin1", "", "", ""),
                &["'utf8mb3'", "'binary'", "'sjis'"],
            ),
            (
                var(
                    "sql_mode",
                    "SET",
                    "ANSI_QUOTES",
                    "ANSI_QUOTES,REAL_AS_FLOAT",
                    "",
                    "",
                ),
                &["''", "'REAL_AS_FLOAT'"],
            ),
            (
                var("old_mode", "SET", "", "NO_PROGRESS_INFO,X", "", ""),
                &["'NO_PROGRESS_INFO'", "'X'"],
            ),
            (
                var(
                    "optimizer_trace",
                    "FLAGSET",
                    "enabled=off",
                    "enabled,default",
                    "",
                    "",
                ),
                &["'enabled=on'"],
            ),
            (
                var(
                    "optimizer_switch",
                    "FLAGSET",
                    "a=on,b=off",
                    "a,b,default",
                    "",
                    "",
                ),
                &["'a=off'", "'b=on'"],
            ),
            (
                var("time_zone", "VARCHAR", "SYSTEM", "", "", ""),
                &["'+05:00'", "'-11:30'"],
            ),
            (
                var("innodb_ft_user_stopword_table", "VARCHAR", "", "", "", ""),
                &[],
            ),
            (
                var(
                    "max_statement_time",
                    "DOUBLE",
                    "0.000000",
                    "",
                    "0",
                    "31536000",
                ),
                &["31536000"],
            ),
            (
                var("max_user_connections", "INT", "0", "", "-1", "2147483647"),
                &["-1", "2147483647"],
            ),
        ];
        for (v, want) in cases {
            assert_eq!(v.other_values(), want, "{v:?}");
        }
    }
}
