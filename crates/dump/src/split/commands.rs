//! The mysql client's own commands, as its line reader finds them
//! (MariaDB 10.11's `mariadb` in batch mode, checked command by command
//! against the stock client: `crates/load/tests/differential.rs` and the
//! table below).
//!
//! The client knows a command three ways, and each has its own rules:
//! - **a line of its own** (nothing of a statement typed yet): the first
//!   word, up to a space or tab, names the command case-insensitively;
//!   a command that takes no arguments followed by any is SQL (`quit foo`);
//!   a line holding the delimiter or `\g` is not a command line, except a
//!   `delimiter` line;
//! - **a statement ended by the delimiter** whose text is a command
//!   (`use db;`, `status;`), except `quit`, `exit`, `go` and `ego`, which
//!   reach the server as SQL (and `quit;`/`exit;` then end the input);
//! - **a backslash and one character** anywhere outside strings and
//!   comments (`\\N` is SQL). One that takes arguments eats them up to the
//!   next delimiter on its line (the delimiter too, without ending the
//!   statement) or the line's end; one without arguments eats nothing.
//!
//! Arguments are read as the client's `get_arg` reads them: the first
//! word, up to a space only, or a quoted word with backslash escapes.
//! A command's effect on the load is one of [`Action`]; the decision is
//! pure and tested as a table.

/// What a client command does to the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// `use db`: becomes `USE db`.
    Use,
    /// `charset cs`: becomes `SET NAMES cs`.
    Charset,
    /// `source file`: the file's statements, in place.
    Source,
    /// `delimiter x`: the delimiter changes.
    Delimiter,
    /// `\g`: sends the statement typed so far.
    Go,
    /// `\c`: forgets the statement typed so far.
    Clear,
    /// `quit`, `\q`: the input ends here.
    Quit,
    /// `sandbox`, `\-`: commands that touch files are refused from now on.
    Sandbox,
    /// Output and prompt settings: nothing reaches the server.
    Ignore,
    /// Output to a file or a program (`tee f`, `pager p`): nothing reaches
    /// the server, but the sandbox mode refuses it.
    IgnoreFile,
    /// Changes the connection or runs a program: refused.
    Refuse,
}

#[derive(Debug)]
pub(super) struct Command {
    pub name: &'static str,
    pub short: u8,
    pub takes_params: bool,
    pub action: Action,
}

const fn c(name: &'static str, short: u8, takes_params: bool, action: Action) -> Command {
    Command {
        name,
        short,
        takes_params,
        action,
    }
}

/// The client's command table (`help` lists it).
pub(super) const COMMANDS: &[Command] = &[
    c("?", b'?', true, Action::Ignore),
    c("charset", b'C', true, Action::Charset),
    c("clear", b'c', false, Action::Clear),
    c("connect", b'r', true, Action::Refuse),
    c("delimiter", b'd', true, Action::Delimiter),
    c("edit", b'e', false, Action::Refuse),
    c("ego", b'G', false, Action::Go),
    c("exit", b'q', false, Action::Quit),
    c("go", b'g', false, Action::Go),
    c("help", b'h', true, Action::Ignore),
    c("nopager", b'n', false, Action::Ignore),
    c("notee", b't', false, Action::Ignore),
    c("nowarning", b'w', false, Action::Ignore),
    c("pager", b'P', true, Action::IgnoreFile),
    c("print", b'p', false, Action::Ignore),
    c("prompt", b'R', true, Action::Ignore),
    c("quit", b'q', false, Action::Quit),
    c("rehash", b'#', false, Action::Ignore),
    c("sandbox", b'-', false, Action::Sandbox),
    c("source", b'.', true, Action::Source),
    c("status", b's', false, Action::Ignore),
    c("system", b'!', true, Action::Refuse),
    c("tee", b'T', true, Action::IgnoreFile),
    c("use", b'u', true, Action::Use),
    c("warnings", b'W', false, Action::Ignore),
];

/// The longest command name (for looking at a line's first word only).
pub(super) const LONGEST_NAME: usize = 9;

/// `\X`: the command of the character after a backslash.
pub(super) fn by_char(ch: u8) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.short == ch)
}

pub(super) fn is_space(b: u8) -> bool {
    // The client's my_isspace: space, \t, \n, \v, \f, \r.
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Where a text is read as a command (the client's `find_command`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// A line read with no statement typed before it.
    Line,
    /// A statement's text, at its delimiter.
    Statement,
}

/// The command a line or a statement is, if it is one.
pub(super) fn by_text(text: &[u8], delimiter: &[u8], place: Place) -> Option<&'static Command> {
    let i = text.iter().position(|b| !is_space(*b))?;
    let name = &text[i..];
    let is_delimiter_command = name.len() >= 9 && name[..9].eq_ignore_ascii_case(b"delimiter");
    if memchr::memmem::find(name, b"\\g").is_some()
        || (!delimiter.is_empty()
            && memchr::memmem::find(name, delimiter).is_some()
            && !is_delimiter_command)
    {
        return None;
    }
    let (word, has_args) = match name.iter().position(|b| *b == b' ' || *b == b'\t') {
        Some(end) => (&name[..end], name[end..].iter().any(|b| !is_space(*b))),
        None => (name, false),
    };
    let cmd = COMMANDS
        .iter()
        .find(|c| c.name.as_bytes().eq_ignore_ascii_case(word))?;
    if has_args && (!cmd.takes_params || get_arg(name).is_none()) {
        return None;
    }
    if place == Place::Statement && matches!(cmd.name, "quit" | "exit" | "go" | "ego") {
        // The client sends these to the server when a delimiter ends them.
        return None;
    }
    Some(cmd)
}

/// A command's argument as the client's `get_arg` reads it from the
/// command's text (`use db`, `\\u db`): after the command word, the first
/// word up to a space, or a quoted one; a backslash takes the next byte
/// as it is (not in a `` ` ``-quoted word of a long command).
pub(super) fn get_arg(text: &[u8]) -> Option<Vec<u8>> {
    let mut i = text.iter().position(|b| !is_space(*b))?;
    let short = text[i] == b'\\';
    if short {
        i += 2;
    } else {
        while i < text.len() && !is_space(text[i]) {
            i += 1;
        }
    }
    while i < text.len() && is_space(text[i]) {
        i += 1;
    }
    if i >= text.len() {
        return None;
    }
    let mut quote = None;
    if matches!(text[i], b'\'' | b'"' | b'`') {
        quote = Some(text[i]);
        i += 1;
    }
    let mut arg = Vec::new();
    while i < text.len() {
        let b = text[i];
        let escapes = if short {
            b == b'\\'
        } else {
            b == b'\\' && quote != Some(b'`')
        };
        if escapes && i + 1 < text.len() {
            arg.push(text[i + 1]);
            i += 2;
            continue;
        }
        if b == quote.unwrap_or(b' ') {
            break;
        }
        arg.push(b);
        i += 1;
    }
    if arg.is_empty() && quote.is_some() {
        return None;
    }
    Some(arg)
}

/// `source`'s file name as the client's `com_source` reads it: all after
/// the first space, without the spaces and control bytes around it.
pub(super) fn source_arg(text: &[u8]) -> Option<Vec<u8>> {
    let i = text.iter().position(|b| !is_space(*b))?;
    let text = &text[i..];
    let sp = text.iter().position(|b| *b == b' ')?;
    let rest = &text[sp..];
    let start = rest.iter().position(|b| !is_space(*b))?;
    let mut name = &rest[start..];
    while let Some((&last, head)) = name.split_last() {
        if is_space(last) || last.is_ascii_control() {
            name = head;
        } else {
            break;
        }
    }
    (!name.is_empty()).then(|| name.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Option<&'static str> {
        by_text(text.as_bytes(), b";", Place::Line).map(|c| c.name)
    }

    fn stmt(text: &str) -> Option<&'static str> {
        by_text(text.as_bytes(), b";", Place::Statement).map(|c| c.name)
    }

    #[test]
    fn which_lines_are_commands() {
        // (text, as a line, as a statement at its delimiter): each row
        // checked against the stock client.
        let rows: &[(&str, Option<&str>, Option<&str>)] = &[
            ("use db", Some("use"), Some("use")),
            ("  USE\tdb", Some("use"), Some("use")),
            ("use db; SELECT 1;", None, None),
            ("quit", Some("quit"), None),
            ("  QUIT  ", Some("quit"), None),
            ("quit foo", None, None),
            ("exit", Some("exit"), None),
            ("go", Some("go"), None),
            ("ego", Some("ego"), None),
            ("status", Some("status"), Some("status")),
            ("status now", None, None),
            ("clear", Some("clear"), Some("clear")),
            ("warnings", Some("warnings"), Some("warnings")),
            ("delimiter $$", Some("delimiter"), Some("delimiter")),
            ("DELIMITER ;;", Some("delimiter"), Some("delimiter")),
            ("source f.sql", Some("source"), Some("source")),
            ("SELECT 1", None, None),
            ("use_count", None, None),
            ("users", None, None),
            ("SELECT 1\\g", None, None),
            ("use ''", None, None),
            ("", None, None),
            ("   ", None, None),
        ];
        for (text, as_line, as_stmt) in rows {
            assert_eq!(line(text), *as_line, "line {text:?}");
            assert_eq!(stmt(text), *as_stmt, "statement {text:?}");
        }
    }

    #[test]
    fn arguments_as_the_client_reads_them() {
        let rows: &[(&str, Option<&str>)] = &[
            ("use db", Some("db")),
            ("use db extra", Some("db")),
            ("use\tdb", Some("db")),
            ("use `my db`", Some("my db")),
            ("use 'my db'", Some("my db")),
            ("use \"d\"", Some("d")),
            ("use db;", Some("db;")),
            ("use mysql\nSELECT 2", Some("mysql\nSELECT")),
            ("\\u db; SELECT 1;", Some("db;")),
            ("\\udb", Some("db")),
            ("\\u  db", Some("db")),
            ("\\u", None),
            ("use", None),
            ("use ''", None),
            ("delimiter '$$'", Some("$$")),
            ("delimiter $$ foo", Some("$$")),
            ("\\d $$ SELECT 2$$", Some("$$")),
            ("use a\\ b", Some("a b")),
            ("use `a\\b`", Some("a\\b")),
            ("\\u `a\\b`", Some("ab")),
        ];
        for (text, want) in rows {
            let got = get_arg(text.as_bytes()).map(|a| String::from_utf8_lossy(&a).into_owned());
            assert_eq!(got.as_deref(), *want, "{text:?}");
        }
    }

    #[test]
    fn source_file_names_as_the_client_reads_them() {
        let rows: &[(&str, Option<&str>)] = &[
            ("source f.sql", Some("f.sql")),
            ("source  my file.sql  ", Some("my file.sql")),
            ("\\. f.sql;", Some("f.sql;")),
            ("\\. f.sql\r", Some("f.sql")),
            ("\\.f.sql", None),
            ("source", None),
        ];
        for (text, want) in rows {
            let got = source_arg(text.as_bytes()).map(|a| String::from_utf8_lossy(&a).into_owned());
            assert_eq!(got.as_deref(), *want, "{text:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = get_arg(&bytes);
            let _ = source_arg(&bytes);
            let _ = by_text(&bytes, b";", Place::Line);
            let _ = by_text(&bytes, b"", Place::Statement);
        }
    }

    #[test]
    fn every_short_command_is_known_and_unique() {
        for c in COMMANDS {
            assert!(c.name.len() <= LONGEST_NAME, "{}", c.name);
            let same: Vec<_> = COMMANDS.iter().filter(|o| o.short == c.short).collect();
            // \q is both quit and exit.
            assert!(same.len() == 1 || c.short == b'q', "{}", c.name);
        }
        assert!(by_char(b'N').is_none(), "\\N is NULL, not a command");
        assert!(by_char(b'X').is_none());
    }
}
