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
    #[error("byte offset {offset}: read error: {what}")]
    Io { offset: u64, what: String },
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
        loop {
            if !self.have(1)? {
                return self.finish();
            }
            let b = self.buf[self.pos];
            if !self.started {
                if b.is_ascii_whitespace() {
                    if b == b'\n' {
                        self.line += 1;
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
                    end = self.buf.len();
                    if !self.fill()? {
                        break;
                    }
                    // fill() may have moved the buffer.
                    end = self.pos + KW.len();
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
    }

    fn take(&mut self, stmt_end: usize) -> Statement {
        let text = self.buf[self.start..stmt_end].to_vec();
        let s = Statement {
            offset: self.abs(self.start),
            end: self.abs(self.pos),
            line: self.start_line,
            text,
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

impl<R: Read> Iterator for Splitter<R> {
    type Item = Result<Statement, SplitError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_statement().transpose()
    }
}

#[cfg(test)]
mod tests;
