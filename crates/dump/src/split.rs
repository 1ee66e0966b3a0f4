//! Bytes of a SQL dump → statements, as the mysql client splits them.
//!
//! Streaming: reads the input in blocks and keeps only the current
//! statement in memory (bounded by `max_statement`). Knows `'…'`, `"…"` and
//! `` `…` `` quoting (doubled quotes; backslash escapes unless
//! NO_BACKSLASH_ESCAPES is switched on), `-- ` and `#` line comments,
//! `/* … */` comments, executable comments `/*!NNNNN … */` and `/*M!… */`
//! whose contents are lexed as SQL (quotes inside them count), and the
//! client's `DELIMITER` command. Every statement carries its byte offset
//! and line; every error says where.

use std::io::Read;

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
}

impl Statement {
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
    delimiter: Vec<u8>,
    backslash_escapes: bool,
    eof: bool,
    pub max_statement: usize,
    total_read: u64,
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
            delimiter: b";".to_vec(),
            backslash_escapes: true,
            eof: false,
            max_statement: MAX_STATEMENT,
            total_read: 0,
        }
    }

    /// Switches backslash escapes off when the dump sets
    /// NO_BACKSLASH_ESCAPES (the caller sees the SET statement).
    pub fn set_backslash_escapes(&mut self, on: bool) {
        self.backslash_escapes = on;
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
                if self.try_delimiter_command()? {
                    continue;
                }
                if self.at_line_start {
                    match self.try_long_command()? {
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
                    if !self.delimiter.is_empty()
                        && b == self.delimiter[0]
                        && !self.exec_comment
                        && self.peek_is(&self.delimiter.clone())?
                    {
                        let stmt_end = self.pos;
                        self.pos += self.delimiter.len();
                        if self.has_code {
                            return Ok(Some(self.take(stmt_end)));
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
                State::Quote(q) => {
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
                            continue;
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
                            continue; // EOF: finish() reports the open quote
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
                }
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
                State::BlockComment => {
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
                }
            }
        }
    }

    /// `--` starts a comment only when followed by whitespace, a control
    /// character or the end of input.
    fn dash_comment(&mut self) -> Result<bool, SplitError> {
        if !self.have(3)? {
            return Ok(true);
        }
        let c = self.buf[self.pos + 2];
        Ok(c.is_ascii_whitespace() || c.is_ascii_control())
    }

    /// At a statement's first byte: handles `DELIMITER xyz` (a client
    /// command, never sent to the server). Returns true if it was one.
    fn try_delimiter_command(&mut self) -> Result<bool, SplitError> {
        const KW: &[u8] = b"delimiter";
        if !self.have(KW.len() + 1)? {
            return Ok(false);
        }
        let w = &self.buf[self.pos..self.pos + KW.len()];
        if !w.eq_ignore_ascii_case(KW) || !self.buf[self.pos + KW.len()].is_ascii_whitespace() {
            return Ok(false);
        }
        let at = (self.abs(self.pos), self.line);
        // The rest of the line is the new delimiter.
        let mut end = self.pos + KW.len();
        loop {
            match memchr::memchr(b'\n', &self.buf[end..]) {
                Some(i) => {
                    end += i;
                    break;
                }
                None => {
                    // fill() may move the buffer: measure again after it.
                    let more = self.fill()?;
                    end = if more {
                        self.pos + KW.len()
                    } else {
                        self.buf.len()
                    };
                    if !more {
                        break;
                    }
                }
            }
        }
        let arg = &self.buf[self.pos + KW.len()..end];
        let arg: Vec<u8> = arg.trim_ascii().to_vec();
        let delim: Vec<u8> = arg
            .split(|b| b.is_ascii_whitespace())
            .next()
            .unwrap_or_default()
            .to_vec();
        if delim.is_empty() {
            return Err(self.err(at, "DELIMITER command without a delimiter"));
        }
        if delim.contains(&b'\\')
            || delim.contains(&b'\'')
            || delim.contains(&b'"')
            || delim.contains(&b'`')
        {
            return Err(self.err(
                at,
                format!(
                    "DELIMITER '{}' uses a quote or backslash, which the mysql client refuses",
                    String::from_utf8_lossy(&delim)
                ),
            ));
        }
        self.delimiter = delim;
        self.pos = end;
        self.reset();
        Ok(true)
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

    /// At the start of a line with nothing buffered: the mysql client's
    /// long commands (`use db`, `source file`, `charset cs`, `quit`, ...),
    /// done as the client does them, or refused with the line.
    fn try_long_command(&mut self) -> Result<Command, SplitError> {
        // Look at the first word only: most lines are SQL (long INSERTs).
        const LONGEST: usize = "resetconnection".len() + 1;
        let mut n = LONGEST;
        while n > 0 && !self.have(n)? {
            n -= 1;
        }
        let head = &self.buf[self.pos..self.pos + n];
        let word_end = head
            .iter()
            .position(|b| b.is_ascii_whitespace() || *b == b';')
            .unwrap_or(head.len());
        if word_end == 0
            || word_end == LONGEST
            || !COMMANDS.contains(&&*head[..word_end].to_ascii_lowercase())
        {
            return Ok(Command::None);
        }
        let (line, end) = self.rest_of_line(self.pos)?;
        let word = line[..word_end].to_ascii_lowercase();
        let arg = strip_delimiter(line[word_end..].trim_ascii(), &self.delimiter);
        let at = (self.abs(self.pos), self.line);
        let name = String::from_utf8_lossy(&word).into_owned();
        Ok(match word.as_slice() {
            b"use" => {
                let db = first_word(arg);
                if db.is_empty() {
                    return Err(self.err(at, "'use' without a database name"));
                }
                self.command_statement(use_sql(&db), end, None)
            }
            b"source" => {
                let path = String::from_utf8_lossy(arg).into_owned();
                if path.is_empty() {
                    return Err(self.err(at, "'source' without a file name"));
                }
                self.command_statement(line.clone(), end, Some(path))
            }
            b"charset" => {
                let cs = first_word(arg);
                if cs.is_empty() {
                    return Err(self.err(at, "'charset' without a character set"));
                }
                self.command_statement(names_sql(&cs), end, None)
            }
            b"quit" | b"exit" => {
                self.quit = true;
                self.skip_command(end)
            }
            b"go" | b"ego" | b"clear" | b"warnings" | b"nowarning" | b"print" | b"tee"
            | b"notee" | b"pager" | b"nopager" | b"prompt" | b"rehash" | b"status" | b"help"
            | b"?" => {
                // Client-side only (output, prompts): nothing reaches the server.
                self.skip_command(end)
            }
            b"connect" | b"system" | b"edit" | b"resetconnection" => {
                return Err(self.err(
                    at,
                    format!("the mysql client command '{name}' is not supported by sqlfleet load (it changes the connection or runs programs); remove it from the file"),
                ))
            }
            _ => Command::None,
        })
    }

    /// At a backslash outside strings and comments: the mysql client's
    /// short commands (`\\g`, `\\G`, `\\c`, `\\u db`, `\\. file`, `\\C cs`,
    /// `\\d delim`, `\\q`, ...). Anything else (`\\N`) stays SQL.
    fn short_command(&mut self) -> Result<Command, SplitError> {
        let c = self.buf[self.pos + 1];
        let at = (self.abs(self.pos), self.line);
        let nothing_before = !self.has_code;
        let refuse = |me: &Self, what: String| -> SplitError { me.err(at, what) };
        match c {
            b'g' | b'G' => {
                let stmt_end = self.pos;
                self.pos += 2;
                if self.has_code {
                    return Ok(Command::Statement(self.take(stmt_end)));
                }
                self.reset();
                Ok(Command::Skipped)
            }
            b'c' => {
                // Clears what was typed of the statement.
                self.pos += 2;
                self.reset();
                self.exec_comment = false;
                Ok(Command::Skipped)
            }
            b'q' => {
                self.quit = true;
                self.reset();
                Ok(Command::Skipped)
            }
            b'u' | b'.' | b'C' | b'd' | b'W' | b'w' | b'p' | b't' | b'T' | b'n' | b'P' | b'R'
            | b'#' | b's' | b'h' | b'?' => {
                if !nothing_before {
                    return Err(refuse(
                        self,
                        format!(
                            "the mysql client command \\{} inside a statement is not supported by sqlfleet load; put it on a line of its own",
                            c as char
                        ),
                    ));
                }
                let (rest, end) = self.rest_of_line(self.pos + 2)?;
                let arg = strip_delimiter(rest.trim_ascii(), &self.delimiter).to_vec();
                match c {
                    b'u' => {
                        let db = first_word(&arg);
                        if db.is_empty() {
                            return Err(refuse(self, "\\u without a database name".into()));
                        }
                        Ok(self.command_statement(use_sql(&db), end, None))
                    }
                    b'.' => {
                        let path = String::from_utf8_lossy(&arg).into_owned();
                        if path.is_empty() {
                            return Err(refuse(self, "\\. without a file name".into()));
                        }
                        let line = self.buf[self.pos..end].to_vec();
                        Ok(self.command_statement(line, end, Some(path)))
                    }
                    b'C' => {
                        let cs = first_word(&arg);
                        if cs.is_empty() {
                            return Err(refuse(self, "\\C without a character set".into()));
                        }
                        Ok(self.command_statement(names_sql(&cs), end, None))
                    }
                    b'd' => {
                        let delim: Vec<u8> = rest
                            .trim_ascii()
                            .split(|b| b.is_ascii_whitespace())
                            .next()
                            .unwrap_or_default()
                            .to_vec();
                        if delim.is_empty() || delim.iter().any(|b| b"\\'\"`".contains(b)) {
                            return Err(refuse(self, "\\d needs a delimiter without quotes or backslashes".into()));
                        }
                        self.delimiter = delim;
                        Ok(self.skip_command(end))
                    }
                    _ => Ok(self.skip_command(end)), // output-only commands
                }
            }
            b'r' | b'!' | b'e' | b'x' => Err(refuse(
                self,
                format!(
                    "the mysql client command \\{} is not supported by sqlfleet load (it changes the connection or runs programs); remove it from the file",
                    c as char
                ),
            )),
            _ => Ok(Command::None),
        }
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
            return Ok(Some(self.take(end)));
        }
        Ok(None)
    }
}

/// The mysql client's long command names (recognised at a line start).
const COMMANDS: &[&[u8]] = &[
    b"use",
    b"source",
    b"charset",
    b"quit",
    b"exit",
    b"go",
    b"ego",
    b"clear",
    b"warnings",
    b"nowarning",
    b"print",
    b"tee",
    b"notee",
    b"pager",
    b"nopager",
    b"prompt",
    b"rehash",
    b"status",
    b"help",
    b"?",
    b"connect",
    b"system",
    b"edit",
    b"resetconnection",
];

/// What a client command turned into.
enum Command {
    /// Not a client command: SQL.
    None,
    /// Done or ignored; nothing to send.
    Skipped,
    /// Becomes this statement (`USE`, `SET NAMES`, a `source`).
    Statement(Statement),
}

fn strip_delimiter<'a>(arg: &'a [u8], delimiter: &[u8]) -> &'a [u8] {
    let arg = arg.strip_suffix(delimiter).unwrap_or(arg);
    arg.strip_suffix(b";").unwrap_or(arg).trim_ascii()
}

/// The first word of an argument, without quotes around it.
fn first_word(arg: &[u8]) -> Vec<u8> {
    let w = arg
        .split(|b| b.is_ascii_whitespace())
        .next()
        .unwrap_or_default();
    let w = w.strip_suffix(b";").unwrap_or(w);
    for q in [b'`', b'\'', b'"'] {
        if w.len() >= 2 && w[0] == q && w[w.len() - 1] == q {
            return w[1..w.len() - 1].to_vec();
        }
    }
    w.to_vec()
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
