//! MySQL option files (`my.cnf`), read the way the mysql client reads them.
//!
//! Read as MariaDB's own reader (`my_print_defaults`) reads them, which a
//! test holds it to on generated files: `[group]` headers (to the first
//! `]`, any case), `key`, `key=value` (spaces around `=`), values in
//! matching quotes or bare with the client's escapes (`\n \t \r \b \s
//! \" \' \\`), `#` and `;` comment lines, a `#` outside quotes ending
//! the line, `loose-` prefixes, `!include FILE` and `!includedir DIR`
//! (files ending in `.cnf`, in name order). Option names treat `_` and `-`
//! alike.
//!
//! A malformed file is an error naming the file and line, never a silent skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Errors while reading option files. Each names the file, and the line
/// where there is one.
#[derive(Debug, thiserror::Error)]
pub enum OptFileError {
    #[error("{path}: cannot read option file: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {what}")]
    Syntax {
        path: PathBuf,
        line: usize,
        what: String,
    },
    #[error("{path}: !include nesting deeper than {MAX_DEPTH} (a loop?)")]
    TooDeep { path: PathBuf },
}

const MAX_DEPTH: usize = 10;

/// One `key[=value]` entry, remembering where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptValue {
    /// `None` for a bare `key` line (a flag, or "prompt" for `password`).
    pub value: Option<String>,
    pub path: PathBuf,
    pub line: usize,
    /// Where it came among every option line read (files in the order
    /// read, lines in file order): the later one wins, whatever its group.
    pub order: usize,
}

/// The options of one group, later lines overriding earlier ones.
pub type Group = BTreeMap<String, OptValue>;

/// The parsed contents of one or more option files: every group seen, in
/// the order files were read, later values winning.
#[derive(Debug, Default, Clone)]
pub struct OptionFiles {
    groups: BTreeMap<String, Group>,
    /// Option lines read so far.
    lines_read: usize,
    /// Files that were read, in order (for `--print-defaults`-style output).
    pub files: Vec<PathBuf>,
}

impl OptionFiles {
    /// Reads `path` (and what it includes) on top of what is already here.
    pub fn read(&mut self, path: &Path) -> Result<(), OptFileError> {
        self.read_depth(path, 0)
    }

    /// Reads `path` if it exists; a missing file is not an error (the
    /// global and per-user files are optional).
    pub fn read_if_exists(&mut self, path: &Path) -> Result<(), OptFileError> {
        match std::fs::metadata(path) {
            Ok(_) => self.read(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(OptFileError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses option-file text (used by `read` and by tests).
    pub fn parse_str(&mut self, text: &str, path: &Path) -> Result<(), OptFileError> {
        self.parse_depth(text, path, 0)
    }

    /// The options of `group`, if it appeared.
    pub fn group(&self, group: &str) -> Option<&Group> {
        self.groups.get(group)
    }

    /// The merged view of several groups: as the stock client reads
    /// them, the option line read last wins, whatever its group (a later
    /// file over an earlier one, a later line over an earlier one).
    pub fn merged(&self, groups: &[&str]) -> Group {
        let mut out = Group::new();
        for g in groups {
            if let Some(opts) = self.groups.get(*g) {
                for (k, v) in opts {
                    if out.get(k).is_none_or(|had: &OptValue| had.order < v.order) {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        out
    }

    fn read_depth(&mut self, path: &Path, depth: usize) -> Result<(), OptFileError> {
        if depth > MAX_DEPTH {
            return Err(OptFileError::TooDeep {
                path: path.to_owned(),
            });
        }
        if world_writable(path) {
            // As the mysql client: anyone could have put options (a host,
            // a user) in it.
            eprintln!(
                "Warning: World-writable config file '{}' is ignored",
                path.display()
            );
            return Ok(());
        }
        let bytes = std::fs::read(path).map_err(|source| OptFileError::Io {
            path: path.to_owned(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let offset = e.utf8_error().valid_up_to();
            let line = e.as_bytes()[..offset]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            OptFileError::Syntax {
                path: path.to_owned(),
                line,
                what: format!("invalid UTF-8 at byte offset {offset}"),
            }
        })?;
        self.files.push(path.to_owned());
        self.parse_depth(&text, path, depth)
    }

    fn parse_depth(&mut self, text: &str, path: &Path, depth: usize) -> Result<(), OptFileError> {
        let mut current: Option<String> = None;
        for (idx, raw) in text.lines().enumerate() {
            let line_no = idx + 1;
            let syntax = |what: String| OptFileError::Syntax {
                path: path.to_owned(),
                line: line_no,
                what,
            };
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(rest) = line.strip_prefix('!') {
                let (directive, arg) = rest
                    .split_once(char::is_whitespace)
                    .map(|(d, a)| (d, a.trim()))
                    .unwrap_or((rest, ""));
                if arg.is_empty() {
                    return Err(syntax(format!("!{directive} needs a path")));
                }
                // As MariaDB's reader: a relative path is taken from the
                // current directory (not the including file's), and a file
                // that cannot be opened is passed over (a directory that
                // cannot be read is an error).
                let target = PathBuf::from(arg);
                match directive {
                    "include" => match std::fs::File::open(&target) {
                        Ok(_) => self.read_depth(&target, depth + 1)?,
                        Err(_) => continue,
                    },
                    "includedir" => self.read_dir(&target, depth + 1)?,
                    other => return Err(syntax(format!("unknown directive !{other}"))),
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix('[') {
                // As MariaDB's reader: the name runs to the first ']'
                // (what follows it is not read), trailing spaces trimmed
                // and leading ones kept (`[ client ]` is another group),
                // matched without regard to case.
                let Some((name, _)) = rest.split_once(']') else {
                    return Err(syntax(format!("group header '{line}' has no closing ']'")));
                };
                let name = name.trim_end().to_ascii_lowercase();
                self.groups.entry(name.clone()).or_default();
                current = Some(name);
                continue;
            }
            let Some(group) = &current else {
                return Err(syntax(format!(
                    "option '{}' appears before any [group] header",
                    line.split('=').next().unwrap_or(line).trim()
                )));
            };
            let line = strip_end_comment(line);
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim_end(), Some(parse_value(v))),
                None => (line.trim_end(), None),
            };
            let key = normalize_key(key);
            self.lines_read += 1;
            self.groups.entry(group.clone()).or_default().insert(
                key,
                OptValue {
                    value,
                    path: path.to_owned(),
                    line: line_no,
                    order: self.lines_read,
                },
            );
        }
        Ok(())
    }

    fn read_dir(&mut self, dir: &Path, depth: usize) -> Result<(), OptFileError> {
        let entries = std::fs::read_dir(dir).map_err(|source| OptFileError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "cnf") && p.is_file())
            .collect();
        files.sort();
        for f in files {
            self.read_depth(&f, depth)?;
        }
        Ok(())
    }
}

/// `Ssl_Mode` and `loose-ssl-mode` are both `ssl-mode`.
pub fn normalize_key(key: &str) -> String {
    let k = key.trim().to_ascii_lowercase().replace('_', "-");
    match k.strip_prefix("loose-") {
        Some(rest) => rest.to_string(),
        None => k,
    }
}

/// Cuts a line at its first `#` outside quotes, as MariaDB's reader
/// does (`password=ab#cd` is `ab`; `"ab#cd"` keeps it; a backslash
/// protects a quote only inside quotes).
fn strip_end_comment(s: &str) -> &str {
    let mut quote: Option<u8> = None;
    let mut escape = false;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        if (b == b'\'' || b == b'"') && !escape {
            match quote {
                None => quote = Some(b),
                Some(q) if q == b => quote = None,
                Some(_) => {}
            }
        }
        if quote.is_none() && b == b'#' {
            return &s[..i];
        }
        escape = quote.is_some() && b == b'\\' && !escape;
    }
    s
}

/// The text after `=`, as MariaDB's reader takes it: spaces trimmed at
/// both ends, one pair of matching quotes around the whole removed, then
/// the escapes `\n \t \r \b \s \" \' \\` (any other backslash is
/// kept with the character after it; an unmatched quote is kept as it is).
fn parse_value(v: &str) -> String {
    let v = v.trim_matches(|c: char| c.is_ascii_whitespace());
    let b = v.as_bytes();
    let v = if b.len() > 1 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        &v[1..v.len() - 1]
    } else {
        v
    };
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' || chars.peek().is_none() {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else { break };
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'b' => out.push('\u{8}'),
            's' => out.push(' '),
            '"' | '\'' | '\\' => out.push(e),
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<OptionFiles, OptFileError> {
        let mut f = OptionFiles::default();
        f.parse_str(text, Path::new("/t/my.cnf"))?;
        Ok(f)
    }

    fn val(f: &OptionFiles, g: &str, k: &str) -> Option<Option<String>> {
        f.group(g)?.get(k).map(|v| v.value.clone())
    }

    #[test]
    fn groups_keys_and_values() {
        let f = parse(
            "# comment\n; also comment\n[client]\nuser = alice\nport=3307\n\
             ssl_mode = REQUIRED\nloose-socket=/tmp/s.sock\n\n[sqlfleet]\nhost = db1 # trailing\n",
        )
        .expect("parses");
        assert_eq!(val(&f, "client", "user"), Some(Some("alice".into())));
        assert_eq!(val(&f, "client", "port"), Some(Some("3307".into())));
        assert_eq!(val(&f, "client", "ssl-mode"), Some(Some("REQUIRED".into())));
        assert_eq!(
            val(&f, "client", "socket"),
            Some(Some("/tmp/s.sock".into()))
        );
        assert_eq!(val(&f, "sqlfleet", "host"), Some(Some("db1".into())));
    }

    #[test]
    fn quoted_values_and_escapes() {
        let f =
            parse("[client]\npassword=\"a b#c\\\"d\"\nuser='x\\sy'\nhost=a#b\n").expect("parses");
        assert_eq!(val(&f, "client", "password"), Some(Some("a b#c\"d".into())));
        assert_eq!(val(&f, "client", "user"), Some(Some("x y".into())));
        // '#' outside quotes ends the line, as MariaDB's reader reads it
        // (my_print_defaults gives `--host=a`).
        assert_eq!(val(&f, "client", "host"), Some(Some("a".into())));
    }

    #[test]
    fn bare_key_and_later_wins() {
        let f = parse("[client]\npassword\nuser=a\n[client]\nuser=b\n").expect("parses");
        assert_eq!(val(&f, "client", "password"), Some(None));
        assert_eq!(val(&f, "client", "user"), Some(Some("b".into())));
    }

    #[test]
    fn merged_groups_later_overrides() {
        let f = parse("[client]\nuser=a\nport=1\n[sqlfleet]\nuser=b\n").expect("parses");
        let m = f.merged(&["client", "sqlfleet"]);
        assert_eq!(m["user"].value.as_deref(), Some("b"));
        assert_eq!(m["port"].value.as_deref(), Some("1"));
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse("[client]\nuser=a\n[broken\n").expect_err("must fail");
        assert_eq!(
            e.to_string(),
            "/t/my.cnf:3: group header '[broken' has no closing ']'"
        );
        let e = parse("\nuser=a\n").expect_err("must fail");
        assert!(e
            .to_string()
            .starts_with("/t/my.cnf:2: option 'user' appears before"));
        // An unmatched quote is part of the value, as MariaDB reads it.
        let f = parse("[client]\npassword=\"abc\n").expect("parses");
        assert_eq!(val(&f, "client", "password"), Some(Some("\"abc".into())));
        let e = parse("[client]\n!bogus x\n").expect_err("must fail");
        assert!(
            e.to_string().contains(":2: unknown directive !bogus"),
            "{e}"
        );
    }

    #[test]
    fn includes_and_includedir() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::create_dir(d.join("conf.d")).expect("mkdir");
        std::fs::write(d.join("conf.d/b.cnf"), "[client]\nport=2\n").expect("write");
        std::fs::write(d.join("conf.d/a.cnf"), "[client]\nport=1\nuser=u\n").expect("write");
        std::fs::write(d.join("conf.d/ignored.txt"), "garbage [").expect("write");
        std::fs::write(d.join("inc.cnf"), "[sqlfleet]\nhost=h\n").expect("write");
        std::fs::write(
            d.join("my.cnf"),
            format!(
                "[client]\nuser=first\n!includedir {}\n!include {}\n!include {}\n",
                d.join("conf.d").display(),
                d.join("inc.cnf").display(),
                d.join("missing.cnf").display(),
            ),
        )
        .expect("write");
        let mut f = OptionFiles::default();
        f.read(&d.join("my.cnf")).expect("reads");
        // a.cnf then b.cnf, both after 'user=first'.
        assert_eq!(val(&f, "client", "port"), Some(Some("2".into())));
        assert_eq!(val(&f, "client", "user"), Some(Some("u".into())));
        assert_eq!(val(&f, "sqlfleet", "host"), Some(Some("h".into())));
        assert_eq!(f.files.len(), 4);
    }

    /// As MariaDB's reader: a relative path is the current directory's,
    /// not the including file's (the tests run in the crate's directory,
    /// which has no inc.cnf), and a file that cannot be opened is passed
    /// over; a directory that cannot be read is an error.
    #[test]
    fn relative_includes_are_the_current_directorys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::write(d.join("inc.cnf"), "[client]\nuser=included\n").expect("write");
        std::fs::write(d.join("my.cnf"), "[client]\nuser=own\n!include inc.cnf\n").expect("write");
        let mut f = OptionFiles::default();
        f.read(&d.join("my.cnf")).expect("reads");
        assert_eq!(val(&f, "client", "user"), Some(Some("own".into())));
        std::fs::write(d.join("dir.cnf"), "[client]\n!includedir no-such-dir\n").expect("write");
        let e = OptionFiles::default()
            .read(&d.join("dir.cnf"))
            .expect_err("a missing directory");
        assert!(e.to_string().contains("no-such-dir"), "{e}");
    }

    #[test]
    fn include_loop_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("loop.cnf");
        std::fs::write(&p, format!("!include {}\n", p.display())).expect("write");
        let mut f = OptionFiles::default();
        let e = f.read(&p).expect_err("loop");
        assert!(e.to_string().contains("nesting deeper"), "{e}");
    }

    #[test]
    fn missing_file_errors_name_it() {
        let mut f = OptionFiles::default();
        let e = f
            .read(Path::new("/nonexistent/x.cnf"))
            .expect_err("missing");
        assert!(
            e.to_string().starts_with("/nonexistent/x.cnf: cannot read"),
            "{e}"
        );
        f.read_if_exists(Path::new("/nonexistent/x.cnf"))
            .expect("optional");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn quoted_roundtrip(v in "[a-zA-Z0-9 #;=!@$%^&*()\\[\\]{}<>,.?/|~`+-]{0,40}") {
            let text = format!("[client]\npassword=\"{v}\"\n");
            let f = parse(&text).expect("parses");
            proptest::prop_assert_eq!(val(&f, "client", "password"), Some(Some(v)));
        }
    }
}

/// Is `path` a regular file anyone may write?
fn world_writable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o002 != 0)
}

#[cfg(test)]
mod world_writable_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_world_writable_file_is_ignored_as_the_client_does() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("my.cnf");
        std::fs::write(&p, "[client]\nhost=evil\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let mut f = OptionFiles::default();
        f.read(&p).expect("read");
        assert!(
            f.merged(&["client"]).is_empty(),
            "options of a world-writable file were used"
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let mut f = OptionFiles::default();
        f.read(&p).expect("read");
        assert_eq!(f.merged(&["client"]).len(), 1);
    }
}
