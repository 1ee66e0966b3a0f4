//! Bytes of a SQL dump → statements, as the mysql client splits them.
//!
//! Streaming: reads the input in blocks and keeps only the current
//! statement in memory (bounded by `max_statement`). Knows `'…'`, `"…"` and
//! `` `…` `` quoting (doubled quotes; backslash escapes unless
//! NO_BACKSLASH_ESCAPES is switched on), `-- ` and `#` line comments,
//! `/* … */` comments, executable comments `/*!NNNNN … */` and `/*M!… */`
//! whose contents are lexed as SQL (quotes inside them count), and the
//! client's own commands (`DELIMITER`, `use`, `source`, `\\g`, ...) with
//! the rules of its line reader (`commands.rs`). Every statement carries
//! its byte offset and line; every error says where.

use std::io::Read;

use crate::lex::Multibyte;
use crate::printable::printable;
use commands::{Action, Place};

mod commands;

/// One statement of the dump, without its delimiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Byte offset of the statement's first byte in the (decompressed) dump.
    pub offset: u64,
    /// Byte offset just past the statement's delimiter.
    pub end: u64,
    /// 1-based line of the first byte.
    pub line: u64,
    pub text: Vec<u8>,
    /// Set when this is the mysql client's `source FILE` / `\\. FILE`
    /// command rather than SQL (`text` is then the command's line).
    pub source: Option<String>,
    /// The file this statement came from when it is not the main input
    /// (a file read with `source`); its `line` is that file's.
    pub origin: Option<std::sync::Arc<str>>,
    /// Ended by `\G` (the client's `ego`): its rows asked for vertically.
    pub vertical: bool,
    /// How it was read: backslash escapes and the client's character set
    /// then (see [`Statement::scan_text`]).
    pub dialect: crate::lex::Dialect,
}

impl Statement {
    /// The text for a scanner that reads byte by byte: in big5, gbk,
    /// gb18030, sjis and cp932, with the ASCII bytes inside characters
    /// hidden (`lex::hide_inner_ascii`), so a `\\` or a backquote that is a
    /// character's second byte is not read as one; else the text itself.
    pub fn scan_text(&self) -> std::borrow::Cow<'_, [u8]> {
        match crate::lex::hide_inner_ascii(&self.text, self.dialect) {
            Some(hidden) => std::borrow::Cow::Owned(hidden),
            None => std::borrow::Cow::Borrowed(&self.text),
        }
    }

    /// The start of the statement for messages: one line, at most `max` chars.
    pub fn preview(&self, max: usize) -> String {
        let s = String::from_utf8_lossy(&self.text[..self.text.len().min(max * 4)]);
        let flat: String = s
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(max)
            .collect();
        let flat = crate::printable::printable(&flat).into_owned();
        if flat.len() < s.len() && self.text.len() > max {
            format!("{flat}...")
        } else {
            flat
        }
    }
}

/// What went wrong, and where (byte offset and line of the construct).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SplitError {
    #[error("byte offset {offset}, line {line}: {what}")]
    Syntax {
        offset: u64,
        line: u64,
        what: String,
    },
    /// `offset` counts the uncompressed input; `line` is where reading
    /// stopped (every statement before it was read whole).
    #[error("byte offset {offset} of the uncompressed input, line {line}: {what}")]
    Io {
        offset: u64,
        line: u64,
        what: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    Quote(u8),
    LineComment,
    BlockComment,
}

const BLOCK: usize = 256 * 1024;
/// Default bound on one statement: the largest max_allowed_packet (1 GiB).
pub const MAX_STATEMENT: usize = 1 << 30;

pub struct Splitter<R> {
    reader: R,
    buf: Vec<u8>,
    /// Where reads land before joining `buf` (no zeroing per read).
    scratch: Box<[u8]>,
    /// Absolute offset of `buf[0]`.
    base: u64,
    /// Start of the current statement in `buf` (after leading whitespace
    /// once `started`).
    start: usize,
    /// Next byte to scan.
    pos: usize,
    line: u64,
    start_line: u64,
    state: State,
    /// Offset and line where the current quote/comment opened (for errors).
    opened: (u64, u64),
    exec_comment: bool,
    exec_opened: (u64, u64),
    started: bool,
    has_code: bool,
    /// Only whitespace since the last newline (or the start): where the
    /// mysql client recognises its long commands (`use db`, `source f`).
    at_line_start: bool,
    /// `quit`/`exit`/`\\q` was read: the input ends here.
    quit: bool,
    /// `\\-` or `sandbox` was read: commands that touch files are refused.
    sandbox: bool,
    delimiter: Vec<u8>,
    /// The delimiter ends a statement only at the end of a line.
    line_delimiter: bool,
    backslash_escapes: bool,
    /// The client's character set as far as reading cares: in big5, gbk,
    /// gb18030, sjis and cp932 a character's second byte may be `\`, a
    /// backquote or another ASCII byte, which the client reads as part of
    /// the character (its line reader takes a multi-byte character whole,
    /// in and out of quotes). Set from `--default-character-set` and by
    /// the `charset` command, as the client's.
    charset: Multibyte,
    eof: bool,
    pub max_statement: usize,
    total_read: u64,
    /// The last statement returned ended at the end of input, without its
    /// delimiter (the mysql client runs it; a dump tool's file never has
    /// one: see [`Splitter::ended_without_delimiter`]).
    unterminated: bool,
}

impl<R: Read> Splitter<R> {
    pub fn new(reader: R) -> Self {
        Splitter {
            reader,
            buf: Vec::with_capacity(BLOCK * 2),
            scratch: vec![0; BLOCK].into_boxed_slice(),
            base: 0,
            start: 0,
            pos: 0,
            line: 1,
            start_line: 1,
            state: State::Normal,
            opened: (0, 0),
            exec_comment: false,
            exec_opened: (0, 0),
            started: false,
            has_code: false,
            at_line_start: true,
            quit: false,
            sandbox: false,
            delimiter: b";".to_vec(),
            line_delimiter: false,
            backslash_escapes: true,
            charset: Multibyte::AsciiSafe,
            eof: false,
            max_statement: MAX_STATEMENT,
            total_read: 0,
            unterminated: false,
        }
    }

    /// Whether the statement just returned was the input's last and had
    /// no delimiter: a hand-written file's last line, or a dump cut short
    /// (mysqldump and mariadb-dump end every statement with one).
    pub fn ended_without_delimiter(&self) -> bool {
        self.unterminated
    }

    /// How statements are read now (`ANSI_QUOTES` is not followed: the
    /// client does not either).
    fn dialect(&self) -> crate::lex::Dialect {
        crate::lex::Dialect {
            no_backslash_escapes: !self.backslash_escapes,
            ansi_quotes: false,
            charset: self.charset,
        }
    }

    /// Switches backslash escapes off when the dump sets
    /// NO_BACKSLASH_ESCAPES (the caller sees the SET statement).
    pub fn set_backslash_escapes(&mut self, on: bool) {
        self.backslash_escapes = on;
    }

    /// The client's character set (its `--default-character-set`), as far
    /// as reading cares; the `charset` command in the input changes it.
    pub fn set_charset(&mut self, cs: Multibyte) {
        self.charset = cs;
    }

    /// The character set reading is in now.
    pub fn charset(&self) -> Multibyte {
        self.charset
    }

    /// A multi-byte character of the client's set at `pos`: its length
    /// (bytes the client takes whole, whatever they are), or `None`.
    #[inline]
    fn multibyte_at(&mut self) -> Result<Option<usize>, SplitError> {
        if self.charset == Multibyte::AsciiSafe || self.buf[self.pos] < 0x81 {
            return Ok(None);
        }
        self.have(4)?;
        let n = self.charset.char_len(&self.buf, self.pos);
        Ok((n > 1).then_some(n))
    }

    /// Ends statements only at a delimiter that ends its line, as
    /// myloader reads mydumper's files: their trigger and routine bodies
    /// have no DELIMITER, and their inner statements end in `; ` (a
    /// space before the newline) so that they stay one statement.
    pub fn set_line_delimiter(&mut self, on: bool) {
        self.line_delimiter = on;
    }

    /// Is the byte `at` bytes past `pos` the end of a line (or of input)?
    fn line_ends(&mut self, at: usize) -> Result<bool, SplitError> {
        if !self.have(at + 1)? {
            return Ok(true);
        }
        Ok(matches!(self.buf[self.pos + at], b'\n' | b'\r'))
    }

    /// Do backslashes escape in strings (no NO_BACKSLASH_ESCAPES)?
    pub fn backslash_escapes(&self) -> bool {
        self.backslash_escapes
    }

    pub fn delimiter(&self) -> &[u8] {
        &self.delimiter
    }

    /// The reader underneath.
    pub fn get_ref(&self) -> &R {
        &self.reader
    }

    /// Bytes consumed from the input so far.
    pub fn bytes_read(&self) -> u64 {
        self.total_read
    }

    fn abs(&self, i: usize) -> u64 {
        self.base + i as u64
    }

    fn err(&self, at: (u64, u64), what: impl Into<String>) -> SplitError {
        SplitError::Syntax {
            offset: at.0,
            line: at.1,
            what: what.into(),
        }
    }

    /// Reads another block; false at end of input.
    fn fill(&mut self) -> Result<bool, SplitError> {
        if self.eof {
            return Ok(false);
        }
        // Drop what earlier statements used.
        let keep_from = if self.started { self.start } else { self.pos };
        if keep_from > 0 {
            self.buf.drain(..keep_from);
            self.base += keep_from as u64;
            self.start -= keep_from.min(self.start);
            self.pos -= keep_from;
        }
        let n = loop {
            match self.reader.read(&mut self.scratch) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(SplitError::Io {
                        offset: self.base + self.buf.len() as u64,
                        line: self.line,
                        what: e.to_string(),
                    });
                }
            }
        };
        self.buf.extend_from_slice(&self.scratch[..n]);
        self.total_read += n as u64;
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// Ensures `buf[pos..pos+n]` exists if the input has it.
    fn have(&mut self, n: usize) -> Result<bool, SplitError> {
        while self.buf.len() < self.pos + n {
            if !self.fill()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn peek_is(&mut self, s: &[u8]) -> Result<bool, SplitError> {
        Ok(self.have(s.len())? && &self.buf[self.pos..self.pos + s.len()] == s)
    }

    /// The next statement, or `None` at the end of the dump.
    pub fn next_statement(&mut self) -> Result<Option<Statement>, SplitError> {
        let s = self.next_raw()?;
        if let Some(st) = &s {
            // The mysql client refuses a NUL anywhere in a statement (a
            // dump writes one in a string as \0); random or binary bytes
            // have them early, so garbage stops here, at its line.
            if let Some(i) = memchr::memchr(0, &st.text) {
                let line = st.line + memchr::memchr_iter(b'\n', &st.text[..i]).count() as u64;
                return Err(SplitError::Syntax {
                    offset: st.offset + i as u64,
                    line,
                    what: "ASCII '\\0' in the statement: binary data, not SQL (the mysql client refuses it too; a dump writes NUL in a string as \\0)".into(),
                });
            }
        }
        Ok(s)
    }

    fn next_raw(&mut self) -> Result<Option<Statement>, SplitError> {
        loop {
            if self.quit || !self.have(1)? {
                return self.finish();
            }
            if self.abs(self.pos) == 0 && self.peek_is(b"\xEF\xBB\xBF")? {
                // A UTF-8 byte order mark: the client skips it.
                self.pos += 3;
                continue;
            }
            let b = self.buf[self.pos];
            if !self.started {
                if b.is_ascii_whitespace() {
                    if b == b'\n' {
                        self.line += 1;
                        self.at_line_start = true;
                    }
                    self.pos += 1;
                    continue;
                }
                self.started = true;
                self.start = self.pos;
                self.start_line = self.line;
                if self.at_line_start {
                    match self.line_command()? {
                        Command::None => {}
                        Command::Skipped => continue,
                        Command::Statement(s) => return Ok(Some(s)),
                    }
                }
                self.at_line_start = false;
            }
            if self.pos - self.start > self.max_statement {
                return Err(self.err(
                    (self.abs(self.start), self.start_line),
                    format!(
                        "statement longer than {} bytes (a missing delimiter or a truncated string?)",
                        self.max_statement
                    ),
                ));
            }
            match self.state {
                State::Normal => {
                    if b == 0 {
                        return Err(self.err(
                            (self.abs(self.pos), self.line),
                            "NUL byte outside a string: this is binary data, not a SQL dump (compressed with an unknown method?)",
                        ));
                    }
                    if let Some(n) = self.multibyte_at()? {
                        self.has_code = true;
                        self.pos += n;
                        continue;
                    }
                    if !self.delimiter.is_empty()
                        && b == self.delimiter[0]
                        && self.peek_is(&self.delimiter.clone())?
                        && (!self.line_delimiter || self.line_ends(self.delimiter.len())?)
                    {
                        // The client ends a statement at its delimiter even
                        // inside /*! ... */.
                        self.exec_comment = false;
                        let stmt_end = self.pos;
                        self.pos += self.delimiter.len();
                        if self.has_code {
                            match self.statement_at_delimiter(stmt_end)? {
                                Some(st) => return Ok(Some(st)),
                                None => continue,
                            }
                        }
                        self.reset();
                        continue;
                    }
                    if b == b'\\' && self.have(2)? {
                        match self.short_command()? {
                            Command::None => {}
                            Command::Skipped => continue,
                            Command::Statement(s) => return Ok(Some(s)),
                        }
                    }
                    match b {
                        b'\'' | b'"' | b'`' => {
                            self.opened = (self.abs(self.pos), self.line);
                            self.state = State::Quote(b);
                            self.has_code = true;
                            self.pos += 1;
                        }
                        b'#' => {
                            self.opened = (self.abs(self.pos), self.line);
                            self.state = State::LineComment;
                            self.pos += 1;
                        }
                        b'-' if self.peek_is(b"--")? && self.dash_comment()? => {
                            self.opened = (self.abs(self.pos), self.line);
                            self.state = State::LineComment;
                            self.pos += 2;
                        }
                        b'/' if self.peek_is(b"/*")? => {
                            let at = (self.abs(self.pos), self.line);
                            if self.peek_is(b"/*!")? || self.peek_is(b"/*M!")? {
                                if self.exec_comment {
                                    // Not nested in MySQL either: treat as text.
                                    self.pos += 2;
                                } else {
                                    self.exec_comment = true;
                                    self.exec_opened = at;
                                    self.has_code = true;
                                    self.pos += if self.buf[self.pos + 2] == b'M' { 4 } else { 3 };
                                }
                            } else {
                                self.opened = at;
                                self.state = State::BlockComment;
                                self.pos += 2;
                            }
                        }
                        b'*' if self.exec_comment && self.peek_is(b"*/")? => {
                            self.exec_comment = false;
                            self.pos += 2;
                        }
                        b'\n' => {
                            self.line += 1;
                            self.pos += 1;
                            self.at_line_start = true;
                        }
                        _ => {
                            if !b.is_ascii_whitespace() {
                                self.has_code = true;
                            }
                            self.pos += 1;
                        }
                    }
                }
                State::Quote(q) => self.in_quote(q)?,
                State::LineComment => match memchr::memchr(b'\n', &self.buf[self.pos..]) {
                    None => self.pos = self.buf.len(),
                    Some(i) => {
                        self.pos += i + 1;
                        self.line += 1;
                        self.state = State::Normal;
                        self.at_line_start = true;
                        self.drop_leading_comment();
                    }
                },
                State::BlockComment => self.in_block_comment()?,
            }
        }
    }

    /// Inside a quoted string or name: on to the next byte that matters
    /// (its quote, a backslash, a newline) and past it.
    #[inline]
    fn in_quote(&mut self, q: u8) -> Result<(), SplitError> {
        if self.charset != Multibyte::AsciiSafe {
            // A character at a time: a multi-byte character's tail is
            // never a quote or an escape.
            if let Some(n) = self.multibyte_at()? {
                self.pos += n;
                return Ok(());
            }
            let c = self.buf[self.pos];
            if c != q && c != b'\\' && c != b'\n' {
                self.pos += 1;
                return Ok(());
            }
        }
        // Fast path: skip to the next byte that matters.
        let rest = &self.buf[self.pos..];
        let stop = if self.backslash_escapes {
            memchr::memchr3(q, b'\\', b'\n', rest)
        } else {
            memchr::memchr2(q, b'\n', rest)
        };
        match stop {
            None => {
                self.pos = self.buf.len();
                return Ok(());
            }
            Some(i) => self.pos += i,
        }
        let c = self.buf[self.pos];
        if c == b'\n' {
            self.line += 1;
            self.pos += 1;
        } else if c == b'\\' {
            if !self.have(2)? {
                self.pos += 1;
                return Ok(()); // EOF: finish() reports the open quote
            }
            if self.buf[self.pos + 1] == b'\n' {
                self.line += 1;
            }
            self.pos += 2;
        } else if self.have(2)? && self.buf[self.pos + 1] == q {
            self.pos += 2; // doubled quote
        } else {
            self.state = State::Normal;
            self.pos += 1;
        }
        Ok(())
    }

    /// Inside a block comment: on to its end or the next newline.
    #[inline]
    fn in_block_comment(&mut self) -> Result<(), SplitError> {
        let rest = &self.buf[self.pos..];
        match memchr::memchr2(b'*', b'\n', rest) {
            None => self.pos = self.buf.len(),
            Some(i) => {
                self.pos += i;
                if self.buf[self.pos] == b'\n' {
                    self.line += 1;
                    self.pos += 1;
                } else if self.peek_is(b"*/")? {
                    self.pos += 2;
                    self.state = State::Normal;
                    self.drop_leading_comment();
                } else {
                    self.pos += 1;
                }
            }
        }
        Ok(())
    }

    /// `--` starts a comment when followed by whitespace or the end of
    /// input, and always at the start of a statement (the client's rule:
    /// `--x` alone on a line is a comment, `SELECT 1 --x` is not).
    fn dash_comment(&mut self) -> Result<bool, SplitError> {
        if !self.has_code || !self.have(3)? {
            return Ok(true);
        }
        Ok(commands::is_space(self.buf[self.pos + 2]))
    }

    /// A comment before any code is not part of the statement: the
    /// statement's offset and line are those of its first code.
    fn drop_leading_comment(&mut self) {
        if !self.has_code {
            self.started = false;
        }
    }

    fn reset(&mut self) {
        self.started = false;
        self.has_code = false;
        self.at_line_start = false;
    }

    /// The rest of the current line from `from` (exclusive of the
    /// newline), reading more input as needed; returns `(arg, end)` with
    /// `end` at the newline or the end of input.
    fn rest_of_line(&mut self, from_pos: usize) -> Result<(Vec<u8>, usize), SplitError> {
        let rel = from_pos - self.pos;
        loop {
            let from = self.pos + rel;
            if let Some(i) = memchr::memchr(b'\n', &self.buf[from.min(self.buf.len())..]) {
                let end = from + i;
                return Ok((self.buf[from..end].to_vec(), end));
            }
            if !self.fill()? {
                let end = self.buf.len();
                let from = (self.pos + rel).min(end);
                return Ok((self.buf[from..end].to_vec(), end));
            }
        }
    }

    /// A client command's line becomes a statement (or nothing).
    fn command_statement(&mut self, text: Vec<u8>, end: usize, source: Option<String>) -> Command {
        let s = Statement {
            offset: self.abs(self.start),
            end: self.abs(end),
            line: self.start_line,
            text,
            source,
            origin: None,
            vertical: false,
            dialect: self.dialect(),
        };
        self.pos = end;
        self.reset();
        Command::Statement(s)
    }

    fn skip_command(&mut self, end: usize) -> Command {
        self.pos = end;
        self.reset();
        Command::Skipped
    }

    /// At the start of a line with nothing typed: the line may be one of
    /// the client's commands (`use db`, `source f`, `delimiter $$`, ...).
    fn line_command(&mut self) -> Result<Command, SplitError> {
        // Look at the first word only: most lines are SQL (long INSERTs).
        let mut n = commands::LONGEST_NAME + 1;
        while n > 0 && !self.have(n)? {
            n -= 1;
        }
        let head = &self.buf[self.pos..self.pos + n];
        let word_end = head
            .iter()
            .position(|b| b.is_ascii_whitespace() || *b == b';')
            .unwrap_or(head.len());
        if word_end == 0 || word_end > commands::LONGEST_NAME {
            return Ok(Command::None);
        }
        let word = &head[..word_end];
        if !commands::COMMANDS
            .iter()
            .any(|c| c.name.as_bytes().eq_ignore_ascii_case(word))
        {
            return Ok(Command::None);
        }
        let (line, end) = self.rest_of_line(self.pos)?;
        let line = line.strip_suffix(b"\r").unwrap_or(&line).to_vec();
        let Some(cmd) = commands::by_text(&line, &self.delimiter, Place::Line) else {
            return Ok(Command::None);
        };
        let at = (self.abs(self.pos), self.line);
        let effect = self.act(cmd, &line, at)?;
        Ok(self.finish_command(effect, line, end))
    }

    /// A statement ended by the delimiter: SQL, or one of the client's
    /// commands (`use db;`, `status;`); `quit;` goes to the server and
    /// then ends the input, as in the client.
    fn statement_at_delimiter(&mut self, stmt_end: usize) -> Result<Option<Statement>, SplitError> {
        let text = &self.buf[self.start..stmt_end];
        // Most statements are INSERTs: look no further than the first word,
        // without allocating.
        let first = text.iter().position(|b| !b.is_ascii_whitespace());
        let maybe = first.is_some_and(|i| {
            let rest = &text[i..];
            let n = rest
                .iter()
                .take(commands::LONGEST_NAME + 1)
                .take_while(|b| !b.is_ascii_whitespace())
                .count();
            n <= commands::LONGEST_NAME
                && commands::COMMANDS
                    .iter()
                    .any(|c| c.name.as_bytes().eq_ignore_ascii_case(&rest[..n]))
        });
        if maybe {
            let text = text.to_vec();
            if let Some(cmd) = commands::by_text(&text, &self.delimiter, Place::Statement) {
                let at = (self.abs(self.start), self.start_line);
                let effect = self.act(cmd, &text, at)?;
                let end = self.pos;
                return Ok(match self.finish_command(effect, text, end) {
                    Command::Statement(s) => Some(s),
                    _ => None,
                });
            }
            if matches!(
                text.trim_ascii().to_ascii_lowercase().as_slice(),
                b"quit" | b"exit"
            ) {
                self.quit = true;
            }
        }
        Ok(Some(self.take(stmt_end)))
    }

    /// What a client command does, given its text (the line, the
    /// statement, or `\x` and the rest of its line).
    fn act(
        &mut self,
        cmd: &commands::Command,
        text: &[u8],
        at: (u64, u64),
    ) -> Result<Effect, SplitError> {
        let name = cmd.name;
        let sandboxed = |me: &Self| {
            me.err(
                at,
                format!("the mysql client refuses '{name}' in sandbox mode (the input turned it on with \\- or 'sandbox'), and stops there"),
            )
        };
        Ok(match cmd.action {
            Action::Use => match commands::get_arg(text) {
                Some(db) if !db.is_empty() => Effect::Sql(use_sql(&db)),
                _ => return Err(self.err(at, "USE must be followed by a database name")),
            },
            Action::Charset => match commands::get_arg(text) {
                Some(cs) if !cs.is_empty() => {
                    self.charset = Multibyte::of_charset(&String::from_utf8_lossy(&cs));
                    Effect::Sql(names_sql(&cs))
                }
                _ => return Err(self.err(at, "'charset' must be followed by a character set")),
            },
            Action::Source => {
                if self.sandbox {
                    return Err(sandboxed(self));
                }
                match commands::source_arg(text) {
                    Some(path) => Effect::Source(String::from_utf8_lossy(&path).into_owned()),
                    None => return Err(self.err(at, "'source' without a file name")),
                }
            }
            Action::Delimiter => {
                let d = commands::get_arg(text).unwrap_or_default();
                if d.is_empty() {
                    return Err(self.err(
                        at,
                        "DELIMITER must be followed by a 'delimiter' character or string",
                    ));
                }
                if d.contains(&b'\\') {
                    return Err(self.err(at, "DELIMITER cannot contain a backslash character (the mysql client refuses it too)"));
                }
                if d.len() > 15 {
                    return Err(self.err(at, format!("DELIMITER '{}' is longer than the mysql client's 15 bytes", printable(&String::from_utf8_lossy(&d)))));
                }
                self.delimiter = d;
                Effect::Nothing
            }
            Action::Quit => {
                self.quit = true;
                Effect::Nothing
            }
            Action::Sandbox => {
                self.sandbox = true;
                Effect::Nothing
            }
            Action::IgnoreFile if self.sandbox && commands::get_arg(text).is_some() => {
                return Err(sandboxed(self));
            }
            Action::Go | Action::Clear | Action::Ignore | Action::IgnoreFile => Effect::Nothing,
            Action::Refuse => {
                return Err(self.err(
                    at,
                    format!("the mysql client command '{name}' is not supported by sqlfleet load (it changes the connection or runs programs); remove it from the file"),
                ))
            }
        })
    }

    fn finish_command(&mut self, effect: Effect, text: Vec<u8>, end: usize) -> Command {
        match effect {
            Effect::Nothing => self.skip_command(end),
            Effect::Sql(sql) => self.command_statement(sql, end, None),
            Effect::Source(path) => self.command_statement(text, end, Some(path)),
        }
    }

    /// At a backslash outside strings and comments: the client's short
    /// commands (`\g`, `\c`, `\u db`, `\. f`, `\d $$`, `\W`, ...); `\N`
    /// stays SQL and an unknown one is refused, as the client stops at it.
    fn short_command(&mut self) -> Result<Command, SplitError> {
        let ch = self.buf[self.pos + 1];
        if ch == b'N' {
            return Ok(Command::None);
        }
        let at = (self.abs(self.pos), self.line);
        let Some(cmd) = commands::by_char(ch) else {
            return Err(self.err(
                at,
                format!(
                    "unknown mysql client command '\\{}' (the mysql client stops at it too)",
                    printable(&String::from_utf8_lossy(&[ch]))
                ),
            ));
        };
        if !cmd.takes_params {
            match cmd.action {
                Action::Go => {
                    let stmt_end = self.pos;
                    self.pos += 2;
                    if self.has_code {
                        let mut s = self.take(stmt_end);
                        s.vertical = ch == b'G';
                        return Ok(Command::Statement(s));
                    }
                    self.reset();
                    return Ok(Command::Skipped);
                }
                Action::Clear => {
                    // Forgets what was typed of the statement.
                    self.pos += 2;
                    self.reset();
                    self.exec_comment = false;
                    return Ok(Command::Skipped);
                }
                Action::Refuse => {}
                _ => {
                    self.act(cmd, &[], at)?;
                    if self.quit {
                        self.reset();
                        return Ok(Command::Skipped);
                    }
                    // Eats nothing else: the statement goes on after it.
                    self.blank_or_skip(self.pos + 2);
                    return Ok(Command::Skipped);
                }
            }
        }
        let (rest, eol) = self.rest_of_line(self.pos)?;
        let rest = rest.strip_suffix(b"\r").unwrap_or(&rest).to_vec();
        if self.has_code {
            // Inside a statement: output settings are done and their
            // arguments dropped, as the client does; anything else would
            // run before the statement it interrupts.
            if matches!(cmd.action, Action::Ignore | Action::IgnoreFile) {
                self.act(cmd, &rest, at)?;
                let end = self.args_end(eol);
                self.blank_or_skip(end);
                return Ok(Command::Skipped);
            }
            return Err(self.err(
                at,
                format!(
                    "the mysql client command \\{} inside a statement is not supported by sqlfleet load; put it on a line of its own",
                    printable(&String::from_utf8_lossy(&[ch]))
                ),
            ));
        }
        let effect = self.act(cmd, &rest, at)?;
        let end = self.args_end(eol);
        Ok(self.finish_command(effect, rest, end))
    }

    /// Where a short command's arguments end: through the next delimiter
    /// on its line (the one in force after the command), at `*/` inside
    /// an executable comment, else at the line's end.
    fn args_end(&self, eol: usize) -> usize {
        let from = self.pos + 2;
        let line = &self.buf[from.min(eol)..eol];
        if self.exec_comment {
            return memchr::memmem::find(line, b"*/").map_or(eol, |i| from + i);
        }
        match memchr::memmem::find(line, &self.delimiter) {
            Some(i) if !self.delimiter.is_empty() => from + i + self.delimiter.len(),
            _ => eol,
        }
    }

    /// Drops a client command's bytes from the statement being typed:
    /// blanked inside one (the text stays contiguous), skipped before one.
    fn blank_or_skip(&mut self, end: usize) {
        if self.has_code {
            self.buf[self.pos..end].fill(b' ');
        } else {
            self.started = false;
        }
        self.pos = end;
    }

    fn take(&mut self, stmt_end: usize) -> Statement {
        let text = self.buf[self.start..stmt_end].to_vec();
        let s = Statement {
            offset: self.abs(self.start),
            end: self.abs(self.pos),
            line: self.start_line,
            text,
            source: None,
            origin: None,
            vertical: false,
            dialect: self.dialect(),
        };
        self.reset();
        s
    }

    fn finish(&mut self) -> Result<Option<Statement>, SplitError> {
        match self.state {
            State::Quote(q) => {
                return Err(self.err(
                    self.opened,
                    format!(
                    "the dump ends inside a {}-quoted string that starts here (truncated dump?)",
                    q as char
                ),
                ))
            }
            State::BlockComment => {
                return Err(self.err(
                    self.opened,
                    "the dump ends inside a /* comment that starts here (truncated dump?)",
                ))
            }
            State::LineComment => self.state = State::Normal,
            State::Normal => {}
        }
        if self.exec_comment {
            return Err(self.err(
                self.exec_opened,
                "the dump ends inside a /*! comment that starts here (truncated dump?)",
            ));
        }
        if self.started && self.has_code {
            if self.delimiter != b";" {
                return Err(self.err(
                    (self.abs(self.start), self.start_line),
                    format!(
                        "the dump ends inside a DELIMITER {} block, in a statement without its delimiter (truncated dump?)",
                        String::from_utf8_lossy(&self.delimiter)
                    ),
                ));
            }
            // Like the mysql client: a last statement without ';' still runs.
            let end = self.buf.len();
            self.pos = end;
            self.unterminated = true;
            return Ok(Some(self.take(end)));
        }
        Ok(None)
    }
}

/// What a client command turned into.
enum Command {
    /// Not a client command: SQL.
    None,
    /// Done or ignored; nothing to send.
    Skipped,
    /// Becomes this statement (`USE`, `SET NAMES`, a `source`).
    Statement(Statement),
}

/// What running a client command gives the load.
enum Effect {
    Nothing,
    Sql(Vec<u8>),
    Source(String),
}

fn use_sql(db: &[u8]) -> Vec<u8> {
    let mut v = b"USE `".to_vec();
    for &b in db {
        if b == b'`' {
            v.push(b'`');
        }
        v.push(b);
    }
    v.push(b'`');
    v
}

fn names_sql(cs: &[u8]) -> Vec<u8> {
    let mut v = b"SET NAMES ".to_vec();
    v.extend(
        cs.iter()
            .filter(|b| b.is_ascii_alphanumeric() || **b == b'_'),
    );
    v
}

impl<R: Read> Iterator for Splitter<R> {
    type Item = Result<Statement, SplitError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_statement().transpose()
    }
}

#[cfg(test)]
mod tests;
