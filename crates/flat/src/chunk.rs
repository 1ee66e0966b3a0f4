//! Splitting a flat file into chunks at record boundaries, in one pass.
//!
//! Records are parsed with `LOAD DATA`'s rules (escape character, optional
//! enclosure with doubled enclosure characters, multi-byte terminators), so
//! a line terminator inside quotes or after an escape is not a boundary;
//! in big5, gbk, gb18030, sjis and cp932 a multi-byte character's tail is
//! data, as LOAD DATA reads it (a `\` there is no escape), except in the
//! fields of binary columns, which it reads byte by byte.
//! While at it, each record is checked: its field count (a ragged row is an
//! error naming its line), UTF-8 validity when the table wants it, and an
//! unterminated quote at the end of the file.

use std::io::Read;

use crate::format::{Format, Multibyte};

/// A run of whole records, ready for one `LOAD DATA LOCAL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Byte offset of the chunk's first byte in the file.
    pub offset: u64,
    /// Byte offset just past its last record.
    pub end: u64,
    /// 1-based line of the first record.
    pub first_line: u64,
    /// The line each record starts on (for warnings, which count records).
    pub record_lines: Vec<u64>,
    pub data: Vec<u8>,
}

impl Chunk {
    pub fn records(&self) -> u64 {
        self.record_lines.len() as u64
    }

    /// The last line the chunk touches.
    pub fn last_line(&self) -> u64 {
        let newlines = self.data.iter().filter(|&&b| b == b'\n').count() as u64;
        let trailing = u64::from(self.data.last() == Some(&b'\n'));
        self.first_line + newlines - trailing.min(newlines)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FlatError {
    #[error("line {line} (byte offset {offset}): {what}")]
    Record {
        line: u64,
        offset: u64,
        what: String,
    },
    #[error("byte offset {offset}: read error: {what}")]
    Io { offset: u64, what: String },
}

/// What the chunker checks as it goes.
#[derive(Debug, Clone, Default)]
pub struct Checks {
    /// Every record must have this many fields.
    pub fields: Option<usize>,
    /// Records must be valid UTF-8 (for utf8/utf8mb4 tables).
    pub utf8: bool,
    /// The first record is a header: skipped, not loaded.
    pub header: bool,
    /// A field (by position) the server fills in itself when it is NULL
    /// or, unless `zero_is_value`, 0: an AUTO_INCREMENT column. A record
    /// that leaves it to the server is an error naming its line (the
    /// caller asks for this when one LOAD DATA's ids cannot be matched).
    pub server_assigns: Option<ServerAssigns>,
}

/// The AUTO_INCREMENT field the records must fill in themselves.
#[derive(Debug, Clone)]
pub struct ServerAssigns {
    pub field: usize,
    pub column: String,
    /// sql_mode has NO_AUTO_VALUE_ON_ZERO: only NULL is left to the server.
    pub zero_is_value: bool,
}

/// The common case without parsing the record: the id is its first field,
/// written as plain digits not starting with 0, then the field terminator.
fn plainly_nonzero_first(body: &[u8], field: usize, f: &Format) -> bool {
    if field != 0 || !body.first().is_some_and(|b| (b'1'..=b'9').contains(b)) {
        return false;
    }
    let digits = body.iter().take_while(|b| b.is_ascii_digit()).count();
    body[digits..].starts_with(&f.fields_terminated_by)
}

/// Whether an AUTO_INCREMENT field's text is one the server replaces with
/// the next id: NULL, or a value that converts to 0 (empty, `0`, `0.4`,
/// text without digits), as an integer column takes it.
pub fn leaves_id_to_server(v: Option<&[u8]>, zero_is_value: bool) -> bool {
    let Some(v) = v else { return true };
    if zero_is_value {
        return false;
    }
    let t = String::from_utf8_lossy(v);
    let t = t.trim_start();
    let num: String = t
        .char_indices()
        .take_while(|(i, c)| {
            c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '-' || *c == '+'))
        })
        .map(|(_, c)| c)
        .collect();
    let n: f64 = num.parse().unwrap_or(0.0);
    n.abs() < 0.5
}

struct Rec {
    end: usize,
    fields: usize,
    lines: u64,
}

enum Parse {
    Done(Rec),
    NeedMore,
}

pub struct Chunker<R> {
    reader: R,
    fmt: Format,
    checks: Checks,
    target: usize,
    buf: Vec<u8>,
    scratch: Box<[u8]>,
    /// Absolute offset of `buf[0]`.
    base: u64,
    /// Start of the current chunk / next record in `buf`.
    chunk_start: usize,
    pos: usize,
    line: u64,
    chunk_line: u64,
    record_lines: Vec<u64>,
    eof: bool,
    header_done: bool,
}

const BLOCK: usize = 1 << 20;

impl<R: Read> Chunker<R> {
    pub fn new(reader: R, fmt: Format, checks: Checks, target: usize) -> Self {
        let header_done = !checks.header;
        Chunker {
            reader,
            fmt,
            checks,
            target: target.max(1),
            buf: Vec::with_capacity(BLOCK * 2),
            scratch: vec![0; BLOCK].into_boxed_slice(),
            base: 0,
            chunk_start: 0,
            pos: 0,
            line: 1,
            chunk_line: 1,
            record_lines: Vec::new(),
            eof: false,
            header_done,
        }
    }

    fn fill(&mut self) -> Result<bool, FlatError> {
        if self.eof {
            return Ok(false);
        }
        if self.chunk_start > 0 {
            self.buf.drain(..self.chunk_start);
            self.base += self.chunk_start as u64;
            self.pos -= self.chunk_start;
            self.chunk_start = 0;
        }
        let n = loop {
            match self.reader.read(&mut self.scratch) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(FlatError::Io {
                        offset: self.base + self.buf.len() as u64,
                        what: e.to_string(),
                    })
                }
            }
        };
        self.buf.extend_from_slice(&self.scratch[..n]);
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    fn err(&self, at: usize, line: u64, what: impl Into<String>) -> FlatError {
        FlatError::Record {
            line,
            offset: self.base + at as u64,
            what: what.into(),
        }
    }

    /// The next chunk, or `None` at the end of the file.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, FlatError> {
        while !self.header_done {
            // The header is one line as `IGNORE 1 LINES` reads it: to the
            // first line terminator, escapes honoured but not quotes (a
            // quoted line break in a header ends it, and the rest of that
            // line is the first row, as with LOAD DATA).
            match skip_line(&self.buf, self.pos, &self.fmt, self.eof) {
                Some((end, lines)) => {
                    self.pos = end;
                    self.line += lines;
                    self.header_done = true;
                    self.chunk_start = self.pos;
                    self.chunk_line = self.line;
                }
                None => {
                    self.fill()?;
                }
            }
        }
        loop {
            if self.pos >= self.buf.len() && !self.fill()? {
                return Ok(self.take());
            }
            let parsed = parse_record(&self.buf, self.pos, &self.fmt, self.eof)
                .map_err(|(at, what)| self.err(at, self.line, what))?;
            let rec = match parsed {
                Parse::NeedMore => {
                    if !self.fill()? {
                        // At EOF parse_record never asks for more.
                        continue;
                    }
                    continue;
                }
                Parse::Done(r) => r,
            };
            let start = self.pos;
            let rec_line = self.line;
            self.pos = rec.end;
            self.line += rec.lines;
            let body = &self.buf[start..rec.end];
            if let Some(want) = self.checks.fields {
                if rec.fields != want {
                    return Err(self.err(
                        start,
                        rec_line,
                        format!(
                            "{} field(s) where the table takes {want} (a ragged row?)",
                            rec.fields
                        ),
                    ));
                }
            }
            if self.checks.utf8 {
                if let Err(e) = std::str::from_utf8(body) {
                    let bad = e.valid_up_to();
                    let line =
                        rec_line + body[..bad].iter().filter(|&&b| b == b'\n').count() as u64;
                    return Err(self.err(start + bad, line, "invalid UTF-8 for a utf8 table"));
                }
            }
            if let Some(sa) = self
                .checks
                .server_assigns
                .as_ref()
                .filter(|sa| !plainly_nonzero_first(body, sa.field, &self.fmt))
            {
                let fields = crate::fields::records(body, &self.fmt);
                let v = fields.first().and_then(|r| r.get(sa.field));
                if v.is_some_and(|v| leaves_id_to_server(v.as_deref(), sa.zero_is_value)) {
                    return Err(self.err(
                        start,
                        rec_line,
                        format!(
                            "the AUTO_INCREMENT column `{}` is left to the server here (NULL or 0), which gives a LOAD DATA's ids in blocks per statement: loaded in several statements such rows would get other ids than one LOAD DATA gives them; put the ids in the file, or load it as one statement with --chunk-bytes at least the file's size",
                            sa.column
                        ),
                    ));
                }
            }
            if self.record_lines.is_empty() {
                self.chunk_line = rec_line;
            }
            self.record_lines.push(rec_line);
            if self.pos - self.chunk_start >= self.target {
                if let Some(c) = self.take() {
                    return Ok(Some(c));
                }
            }
        }
    }

    fn take(&mut self) -> Option<Chunk> {
        if self.record_lines.is_empty() {
            return None;
        }
        let c = Chunk {
            offset: self.base + self.chunk_start as u64,
            end: self.base + self.pos as u64,
            first_line: self.chunk_line,
            record_lines: std::mem::take(&mut self.record_lines),
            data: self.buf[self.chunk_start..self.pos].to_vec(),
        };
        self.chunk_start = self.pos;
        Some(c)
    }
}

fn at(buf: &[u8], i: usize, pat: &[u8]) -> bool {
    buf.len() >= i + pat.len() && &buf[i..i + pat.len()] == pat
}

/// The first byte from `i` on that is a terminator's first byte, a newline
/// or the escape character (or the end of `buf`).
fn next_special(buf: &[u8], i: usize, ft0: u8, lt0: u8, esc: Option<u8>) -> usize {
    let rest = &buf[i.min(buf.len())..];
    let found = match (esc, lt0 == b'\n' || ft0 == b'\n') {
        (None, _) => memchr::memchr3(ft0, lt0, b'\n', rest),
        (Some(e), true) => memchr::memchr3(ft0, lt0, e, rest),
        (Some(e), false) => {
            let a = memchr::memchr3(ft0, lt0, e, rest);
            let b = memchr::memchr(b'\n', rest);
            match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            }
        }
    };
    found.map_or(buf.len(), |k| i + k)
}

/// Could `pat` start at `i` but the buffer ends too soon to tell?
fn partial(buf: &[u8], i: usize, pat: &[u8]) -> bool {
    i < buf.len() && buf.len() < i + pat.len() && pat.starts_with(&buf[i..])
}

/// Where the line from `start` ends, as LOAD DATA's `IGNORE n LINES`
/// skips one: after the first line terminator, an escape byte taking the
/// byte after it along, quotes not counted. `None` when the buffer ends
/// first and more input may come. Also the newlines passed.
fn skip_line(buf: &[u8], start: usize, f: &Format, eof: bool) -> Option<(usize, u64)> {
    let lt = &f.lines_terminated_by[..];
    let mut lines = 0;
    let mut i = start;
    while i < buf.len() {
        if Some(buf[i]) == f.escaped_by {
            if i + 1 >= buf.len() {
                break;
            }
            lines += u64::from(buf[i + 1] == b'\n');
            i += 2;
            continue;
        }
        if at(buf, i, lt) {
            lines += lt.iter().filter(|&&c| c == b'\n').count() as u64;
            return Some((i + lt.len(), lines));
        }
        if partial(buf, i, lt) && !eof {
            return None;
        }
        // (A character cut at the buffer's end reads as bytes alone up to
        // that end, where more input is asked for and the line read again.)
        lines += u64::from(buf[i] == b'\n');
        i += f.reading(None).char_len(buf, i);
    }
    eof.then_some((buf.len(), lines))
}

/// Parses one record starting at `start`. `NeedMore` when the buffer ends
/// inside it (and more input may come).
fn parse_record(buf: &[u8], start: usize, f: &Format, eof: bool) -> Result<Parse, (usize, String)> {
    let ft = &f.fields_terminated_by[..];
    let lt = &f.lines_terminated_by[..];
    let mut i = start;
    let mut fields = 1;
    let mut lines = 0u64;
    let mut field_start = true;
    loop {
        if i >= buf.len() {
            if !eof {
                return Ok(Parse::NeedMore);
            }
            if i == start {
                return Err((start, "empty record at end of input".into()));
            }
            return Ok(Parse::Done(Rec {
                end: i,
                fields,
                lines,
            }));
        }
        if !eof && (partial(buf, i, lt) || partial(buf, i, ft)) {
            return Ok(Parse::NeedMore);
        }
        let b = buf[i];
        if field_start && f.enclosed_by == Some(b) {
            // An enclosed field: to the closing enclosure character.
            let q = b;
            let open = i;
            i += 1;
            loop {
                if i >= buf.len() {
                    if !eof {
                        return Ok(Parse::NeedMore);
                    }
                    return Err((open, format!("unterminated {}-quoted field", q as char)));
                }
                let c = buf[i];
                if Some(c) == f.escaped_by && f.escaped_by != Some(q) {
                    if i + 1 >= buf.len() && !eof {
                        return Ok(Parse::NeedMore);
                    }
                    if buf.get(i + 1) == Some(&b'\n') {
                        lines += 1;
                    }
                    i += 2;
                    continue;
                }
                if c == b'\n' {
                    lines += 1;
                }
                if c == q {
                    if i + 1 >= buf.len() && !eof {
                        return Ok(Parse::NeedMore);
                    }
                    if buf.get(i + 1) == Some(&q) {
                        i += 2; // doubled: a literal quote
                        continue;
                    }
                    let after = i + 1;
                    if !eof && (partial(buf, after, ft) || partial(buf, after, lt)) {
                        return Ok(Parse::NeedMore);
                    }
                    if after >= buf.len() || at(buf, after, ft) || at(buf, after, lt) {
                        i = after;
                        break;
                    }
                    // A quote not followed by a terminator is data (as LOAD DATA).
                }
                i += f.reading(Some(fields - 1)).char_len(buf, i);
            }
            field_start = false;
            continue;
        }
        field_start = false;
        if !(b == ft[0] || b == lt[0] || b == b'\n' || Some(b) == f.escaped_by) {
            let mb = f.reading(Some(fields - 1));
            if mb != Multibyte::AsciiSafe {
                // A character at a time: the byte after a multi-byte
                // character's first is data, whatever it is. (One cut at
                // the buffer's end reads as bytes alone up to that end,
                // where the record is read again with more input.)
                i += mb.char_len(buf, i);
                continue;
            }
            // Plain field bytes: jump to the next byte that can matter
            // (most of a file is plain field bytes; this is the hot loop).
            i = next_special(buf, i + 1, ft[0], lt[0], f.escaped_by);
            continue;
        }
        if Some(b) == f.escaped_by && buf.get(i + 1).is_none_or(|&n| f.escapes_before(n)) {
            if i + 1 >= buf.len() && !eof {
                return Ok(Parse::NeedMore);
            }
            if buf.get(i + 1) == Some(&b'\n') {
                lines += 1;
            }
            i = (i + 2).min(buf.len());
            continue;
        }
        if at(buf, i, lt) {
            lines += lt.iter().filter(|&&c| c == b'\n').count() as u64;
            return Ok(Parse::Done(Rec {
                end: i + lt.len(),
                fields,
                lines,
            }));
        }
        if at(buf, i, ft) {
            fields += 1;
            i += ft.len();
            field_start = true;
            continue;
        }
        if b == b'\n' {
            lines += 1;
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests;
