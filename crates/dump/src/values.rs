//! The fast path: an extended `INSERT ... VALUES (...),(...)` turned into
//! the tab-separated rows `LOAD DATA` reads, which the server ingests with
//! far less parsing than SQL.
//!
//! Only the value forms a dump writes for ordinary columns are converted:
//! `NULL`, numeric literals, and quoted strings (with the SQL escapes
//! unescaped and the `LOAD DATA` escapes applied): single quotes always,
//! double quotes (mydumper's) only when the session has no ANSI_QUOTES; an
//! empty string only when the session has no EMPTY_STRING_IS_NULL (the
//! server reads it as NULL there). Anything else — hex and
//! bit literals, charset introducers, functions, comments — returns
//! `None`, and the loader runs the original INSERT instead.
//!
//! In big5, gbk, gb18030, sjis and cp932 a character's second byte may be
//! `\` or a quote: strings are read a character at a time there, as the
//! server's lexer reads them (`lex::Multibyte::char_len`). LOAD DATA in
//! that set reads a text column's field a character at a time too (such a
//! character goes into the row as it is) but a binary column's byte by
//! byte (its `\` is escaped): the caller says which values go into binary
//! columns. Where the two readings could part — a backslash before a byte
//! from 0x80, or an escape the row needs right after a byte that would
//! take its `\` as a character's second byte — the statement is not
//! converted.

use crate::lex::Multibyte;

/// How the session reads string literals (its sql_mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quoting {
    /// Backslashes escape (no NO_BACKSLASH_ESCAPES).
    pub backslash_escapes: bool,
    /// `"..."` is a string, not a name (no ANSI_QUOTES).
    pub double_quoted_strings: bool,
    /// `''` is an empty string (no EMPTY_STRING_IS_NULL, under which the
    /// server reads it as NULL: such a statement is not converted).
    pub empty_strings: bool,
    /// The session's character set, as far as strings' bytes care
    /// (`@@character_set_client`).
    pub charset: Multibyte,
}

impl Quoting {
    /// The server's default sql_mode: backslash escapes, `"` quotes strings.
    pub const DEFAULT: Quoting = Quoting {
        backslash_escapes: true,
        double_quoted_strings: true,
        empty_strings: true,
        charset: Multibyte::AsciiSafe,
    };
}

/// How the INSERT treats duplicate keys; `LOAD DATA` has the same three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Duplicates {
    Error,
    Ignore,
    Replace,
}

/// Where an INSERT's rows go: what `LOAD DATA` needs besides the rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// The table as the statement wrote it (`` `t` `` or `` `db`.`t` ``).
    pub table: String,
    /// The column list as written, with its parentheses, if any.
    pub columns: Option<String>,
    pub duplicates: Duplicates,
}

/// An INSERT rewritten as rows for `LOAD DATA`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    pub target: Target,
    /// Tab-separated fields, `\N` for NULL, one row per `\n`.
    pub tsv: Vec<u8>,
    pub rows: u64,
}

impl Target {
    /// The `LOAD DATA LOCAL` statement for these rows.
    pub fn load_sql(&self, file: &str, charset: &str) -> String {
        let dup = match self.duplicates {
            Duplicates::Error => "",
            Duplicates::Ignore => " IGNORE",
            Duplicates::Replace => " REPLACE",
        };
        format!(
            "LOAD DATA LOCAL INFILE '{file}'{dup} INTO TABLE {} CHARACTER SET {charset} \
             FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'{}",
            self.table,
            self.columns
                .as_deref()
                .map(|c| format!(" {c}"))
                .unwrap_or_default()
        )
    }
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> P<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn kw(&mut self, k: &str) -> bool {
        self.ws();
        let end = self.i + k.len();
        if end <= self.s.len()
            && self.s[self.i..end].eq_ignore_ascii_case(k.as_bytes())
            && self
                .s
                .get(end)
                .is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        {
            self.i = end;
            true
        } else {
            false
        }
    }
    fn byte(&mut self, b: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    /// A backquoted or bare identifier; returns its source text.
    /// A name: bare, backquoted, or (`ansi`: the session has
    /// ANSI_QUOTES) double-quoted.
    fn ident(&mut self, ansi: bool) -> Option<&'a [u8]> {
        self.ws();
        let start = self.i;
        let q = *self.s.get(self.i)?;
        if q == b'`' || (ansi && q == b'"') {
            self.i += 1;
            loop {
                match self.s.get(self.i)? {
                    c if *c == q && self.s.get(self.i + 1) == Some(&q) => self.i += 2,
                    c if *c == q => {
                        self.i += 1;
                        break;
                    }
                    _ => self.i += 1,
                }
            }
        } else {
            while self
                .s
                .get(self.i)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$')
            {
                self.i += 1;
            }
            if self.i == start {
                return None;
            }
        }
        Some(&self.s[start..self.i])
    }
}

/// Converts one INSERT statement; `None` if it uses anything the fast
/// path does not reproduce exactly.
/// (In a set whose characters hold ASCII bytes, as if every column were
/// text: see [`append_rows`].)
pub fn insert_to_rows(text: &[u8], quoting: Quoting) -> Option<Rows> {
    let mut tsv = Vec::with_capacity(text.len());
    let width = target(text, quoting).map_or(0, |t| t.1);
    let (target, rows) = append_rows(text, quoting, &vec![false; width], &mut tsv)?;
    Some(Rows { target, tsv, rows })
}

/// Converts one INSERT statement, appending its rows to `out`: where
/// they go and how many there are. `None` (with `out` as it was) if it
/// uses anything the fast path does not reproduce exactly. The loader
/// converts a whole batch into one buffer it keeps.
///
/// `binary`: by a value's place in its row, whether its column is binary
/// (LOAD DATA reads those byte by byte). Read only in a set whose
/// characters hold ASCII bytes, where a row wider than it is not
/// converted.
pub fn append_rows(
    text: &[u8],
    quoting: Quoting,
    binary: &[bool],
    out: &mut Vec<u8>,
) -> Option<(Target, u64)> {
    let mark = out.len();
    let r = append(text, quoting, binary, out);
    if r.is_none() {
        out.truncate(mark);
    }
    r
}

/// Where an INSERT the fast path may convert goes, and how many values
/// its first row has: what a caller asks the server about before
/// [`append_rows`] in a multi-byte set.
pub fn target(text: &[u8], quoting: Quoting) -> Option<(Target, usize)> {
    let mut p = P { s: text, i: 0 };
    let t = header(&mut p, text, quoting)?;
    // The first row's values, counted by reading it (into a scratch
    // buffer, as a binary column's: every value reads so).
    if !p.byte(b'(') {
        return None;
    }
    let mut scratch = Vec::new();
    let mut width = 0;
    loop {
        value(&mut p, &mut scratch, quoting, true)?;
        width += 1;
        if p.byte(b')') {
            return Some((t, width));
        }
        if !p.byte(b',') {
            return None;
        }
    }
}

/// `INSERT [IGNORE] | REPLACE [INTO] table [(columns)] VALUES`, up to the
/// first row.
fn header(p: &mut P, text: &[u8], quoting: Quoting) -> Option<Target> {
    let duplicates = if p.kw("INSERT") {
        if p.kw("IGNORE") {
            Duplicates::Ignore
        } else {
            Duplicates::Error
        }
    } else if p.kw("REPLACE") {
        Duplicates::Replace
    } else {
        return None;
    };
    p.kw("INTO");
    // Names as the session reads them: under ANSI_QUOTES `"t"` is one,
    // written into the LOAD DATA that runs in that session.
    let ansi = !quoting.double_quoted_strings;
    let t0 = {
        p.ws();
        p.i
    };
    p.ident(ansi)?;
    if p.s.get(p.i) == Some(&b'.') {
        p.i += 1;
        p.ident(ansi)?;
    }
    let table = std::str::from_utf8(&text[t0..p.i]).ok()?.to_string();
    let columns = if p.byte(b'(') {
        let c0 = p.i - 1;
        loop {
            p.ident(ansi)?;
            if p.byte(b')') {
                break;
            }
            if !p.byte(b',') {
                return None;
            }
        }
        Some(std::str::from_utf8(&text[c0..p.i]).ok()?.to_string())
    } else {
        None
    };
    if !(p.kw("VALUES") || p.kw("VALUE")) {
        return None;
    }
    Some(Target {
        table,
        columns,
        duplicates,
    })
}

fn append(
    text: &[u8],
    quoting: Quoting,
    binary: &[bool],
    tsv: &mut Vec<u8>,
) -> Option<(Target, u64)> {
    let mut p = P { s: text, i: 0 };
    let target = header(&mut p, text, quoting)?;
    let mb = quoting.charset != Multibyte::AsciiSafe;
    let mut rows = 0u64;
    loop {
        if !p.byte(b'(') {
            return None;
        }
        let mut column = 0;
        loop {
            let bin = match binary.get(column) {
                Some(&b) => b,
                None if mb => return None,
                None => false,
            };
            value(&mut p, tsv, quoting, bin)?;
            column += 1;
            if p.byte(b')') {
                break;
            }
            if !p.byte(b',') {
                return None;
            }
            tsv.push(b'\t');
        }
        tsv.push(b'\n');
        rows += 1;
        if !p.byte(b',') {
            break;
        }
    }
    p.ws();
    if p.i != text.len() {
        return None; // ON DUPLICATE KEY UPDATE, RETURNING, a comment...
    }
    Some((target, rows))
}

/// One value into `out` as a LOAD DATA field; `binary`: its column is
/// binary (LOAD DATA reads it byte by byte).
fn value(p: &mut P, out: &mut Vec<u8>, quoting: Quoting, binary: bool) -> Option<()> {
    // How LOAD DATA reads the field back: in the session's set, or byte
    // by byte.
    let field_set = if binary {
        Multibyte::AsciiSafe
    } else {
        quoting.charset
    };
    p.ws();
    let b = *p.s.get(p.i)?;
    match b {
        // Double quotes are strings only without ANSI_QUOTES (then they
        // name columns, which no LOAD DATA row reproduces).
        b'\'' | b'"' if b == b'\'' || quoting.double_quoted_strings => {
            let q = b;
            p.i += 1;
            let opened = p.i;
            loop {
                // Copy the run of ordinary bytes up to the next quote or
                // backslash in one go; escape it only if it needs it.
                let rest = &p.s[p.i..];
                let run = next_special(rest, q, quoting)?;
                push_field_run(out, &rest[..run], field_set)?;
                p.i += run;
                let c = p.s[p.i];
                p.i += 1;
                if c == q {
                    if p.s.get(p.i) == Some(&q) {
                        p.i += 1;
                        out.push(q);
                        continue;
                    }
                    // `''` under EMPTY_STRING_IS_NULL is the server's NULL.
                    if p.i == opened + 1 && !quoting.empty_strings {
                        return None;
                    }
                    return Some(());
                }
                // A backslash escape (of one byte, as the server's lexer
                // takes it: one from 0x80 would split a character).
                let e = *p.s.get(p.i)?;
                if e >= 0x80 && quoting.charset != Multibyte::AsciiSafe {
                    return None;
                }
                p.i += 1;
                let raw = match e {
                    b'0' => 0,
                    b'b' => 8,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'Z' => 26,
                    // \% and \_ keep their backslash in SQL strings.
                    b'%' | b'_' => {
                        escape_after(out, field_set)?;
                        push_field_byte(out, b'\\');
                        e
                    }
                    other => other,
                };
                if matches!(raw, b'\\' | b'\t' | b'\n' | 0) {
                    escape_after(out, field_set)?;
                }
                push_field_byte(out, raw);
            }
        }
        b'N' | b'n' => {
            if p.kw("NULL") {
                out.extend_from_slice(b"\\N");
                Some(())
            } else {
                None
            }
        }
        b'-' | b'+' | b'0'..=b'9' | b'.' => {
            let start = p.i;
            if b == b'-' || b == b'+' {
                p.i += 1;
            }
            // 0x / 0b literals are bytes, not numbers: not for the fast path.
            if p.s.get(p.i) == Some(&b'0')
                && matches!(p.s.get(p.i + 1), Some(b'x' | b'X' | b'b' | b'B'))
            {
                return None;
            }
            let mut digits = 0;
            let mut seen_e = false;
            while let Some(&c) = p.s.get(p.i) {
                if c.is_ascii_digit() {
                    digits += 1;
                } else if c == b'.' && !seen_e {
                } else if (c == b'e' || c == b'E') && !seen_e && digits > 0 {
                    seen_e = true;
                    if matches!(p.s.get(p.i + 1), Some(b'-' | b'+')) {
                        p.i += 1;
                    }
                } else {
                    break;
                }
                p.i += 1;
            }
            if digits == 0 {
                return None;
            }
            out.extend_from_slice(&p.s[start..p.i]);
            Some(())
        }
        _ => None,
    }
}

/// Where the next `q` (or, with backslash escapes, `\\`) that is a
/// character of its own lies in `rest`: in a set whose characters hold
/// ASCII bytes, one inside a character is data.
fn next_special(rest: &[u8], q: u8, quoting: Quoting) -> Option<usize> {
    let find = |r: &[u8]| {
        if quoting.backslash_escapes {
            memchr::memchr2(q, b'\\', r)
        } else {
            memchr::memchr(q, r)
        }
    };
    let mb = quoting.charset;
    if mb == Multibyte::AsciiSafe {
        return find(rest);
    }
    let mut from = 0;
    loop {
        let at = from + find(&rest[from..])?;
        // Walk the characters up to it from the first byte that may start
        // a multi-byte one; one running over `at` hides it.
        let Some(high) = rest[from..at].iter().position(|&b| b >= 0x80) else {
            return Some(at);
        };
        let mut i = from + high;
        while i < at {
            i += if rest[i] >= 0x80 {
                mb.char_len(rest, i)
            } else {
                1
            };
        }
        if i == at {
            return Some(at);
        }
        from = i;
    }
}

/// A run of string bytes into a field: in a multi-byte set, each
/// multi-byte character as it is (its `\\` is not an escape to LOAD DATA
/// reading that set either), the rest escaped.
fn push_field_run(out: &mut Vec<u8>, bytes: &[u8], mb: Multibyte) -> Option<()> {
    if mb == Multibyte::AsciiSafe || bytes.iter().all(|&b| b < 0x80) {
        push_field_bytes(out, bytes);
        return Some(());
    }
    let mut i = 0;
    while i < bytes.len() {
        let n = if bytes[i] >= 0x80 {
            mb.char_len(bytes, i)
        } else {
            1
        };
        if n == 1 {
            if matches!(bytes[i], b'\\' | b'\t' | b'\n' | 0) {
                escape_after(out, mb)?;
            }
            push_field_byte(out, bytes[i]);
        } else {
            out.extend_from_slice(&bytes[i..i + n]);
        }
        i += n;
    }
    Some(())
}

/// Before an escape (`\\...`) is written: `None` when the byte before it
/// would take that `\\` as its second byte in a multi-byte set (LOAD DATA
/// would read one character where the INSERT had two).
fn escape_after(out: &[u8], mb: Multibyte) -> Option<()> {
    match out.last() {
        Some(&b) if b >= 0x80 && mb.char_len(&[b, b'\\'], 0) == 2 => None,
        _ => Some(()),
    }
}

/// Field data, escaped for `FIELDS ESCAPED BY '\\'`: copied whole when
/// it has nothing to escape (the common case).
fn push_field_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let special =
        memchr::memchr3(b'\\', b'\t', b'\n', bytes).is_some() || memchr::memchr(0, bytes).is_some();
    if special {
        for &b in bytes {
            push_field_byte(out, b);
        }
    } else {
        out.extend_from_slice(bytes);
    }
}

/// A byte of field data, escaped for `FIELDS ESCAPED BY '\\'`.
fn push_field_byte(out: &mut Vec<u8>, b: u8) {
    match b {
        b'\\' => out.extend_from_slice(b"\\\\"),
        b'\t' => out.extend_from_slice(b"\\t"),
        b'\n' => out.extend_from_slice(b"\\n"),
        0 => out.extend_from_slice(b"\\0"),
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn conv(s: &str) -> Option<(String, u64)> {
        insert_to_rows(s.as_bytes(), Quoting::DEFAULT)
            .map(|r| (String::from_utf8_lossy(&r.tsv).into_owned(), r.rows))
    }

    #[test]
    fn converts_dump_inserts() {
        assert_eq!(
            conv("INSERT INTO `t` VALUES (1,'a'),(2,NULL)"),
            Some(("1\ta\n2\t\\N\n".into(), 2))
        );
        let r = insert_to_rows(
            b"INSERT IGNORE INTO `d`.`t` (`a`, `b`) VALUES (-1.5e-3,'x\\ty\\\\z')",
            Quoting::DEFAULT,
        )
        .expect("ok");
        assert_eq!(r.target.table, "`d`.`t`");
        assert_eq!(r.target.columns.as_deref(), Some("(`a`, `b`)"));
        assert_eq!(r.target.duplicates, Duplicates::Ignore);
        assert_eq!(r.tsv, b"-1.5e-3\tx\\ty\\\\z\n");
        assert_eq!(
            r.target.load_sql("f", "utf8mb4"),
            "LOAD DATA LOCAL INFILE 'f' IGNORE INTO TABLE `d`.`t` CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (`a`, `b`)"
        );
        // Escapes: quote forms, \0, newline, the literal string "\N".
        assert_eq!(
            conv(r"REPLACE INTO t VALUES ('it''s','\'','\0','a\nb','\\N', 'x\%')"),
            Some(("it's\t'\t\\0\ta\\nb\t\\\\N\tx\\\\%\n".into(), 1))
        );
    }

    #[test]
    fn converts_mydumpers_double_quoted_strings_unless_ansi_quotes() {
        let sql = b"INSERT INTO `t1` VALUES\n(1001,\"v\\\"1\",\"\\0\xff\\n\\'\",NULL),\n(2,\"a\"\"b'c\",\"2020-01-01 00:00:00\")";
        let r = insert_to_rows(sql, Quoting::DEFAULT).expect("converts");
        assert_eq!(r.rows, 2);
        assert_eq!(
            r.tsv,
            b"1001\tv\"1\t\\0\xff\\n'\t\\N\n2\ta\"b'c\t2020-01-01 00:00:00\n"
        );
        let ansi = Quoting {
            double_quoted_strings: false,
            ..Quoting::DEFAULT
        };
        assert_eq!(
            insert_to_rows(sql, ansi),
            None,
            "with ANSI_QUOTES \"..\" is a name"
        );
        // A --compatible=ansi dump: double-quoted names, kept as written
        // for the LOAD DATA that runs in the same ANSI_QUOTES session;
        // without ANSI_QUOTES such a "name" is the server's error to give.
        let sql = b"INSERT INTO \"d\".\"t\" (\"a\", \"b\"\"c\") VALUES (1,'x')";
        let r = insert_to_rows(sql, ansi).expect("converts under ANSI_QUOTES");
        assert_eq!(r.target.table, "\"d\".\"t\"");
        assert_eq!(r.target.columns.as_deref(), Some("(\"a\", \"b\"\"c\")"));
        assert_eq!(r.tsv, b"1\tx\n");
        assert_eq!(insert_to_rows(sql, Quoting::DEFAULT), None);
    }

    #[test]
    fn refuses_what_it_cannot_reproduce() {
        for s in [
            "INSERT INTO t VALUES (0x00FF)",
            "INSERT INTO t VALUES (b'101')",
            "INSERT INTO t VALUES (_binary 'x')",
            "INSERT INTO t VALUES (NOW())",
            "INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a=1",
            "INSERT INTO t SELECT 1",
            "INSERT INTO t VALUES (1) /* c */",
            "INSERT INTO t VALUES (1",
            "INSERT INTO t VALUES ('abc",
            "UPDATE t SET a=1",
            "INSERT INTO t VALUES (TRUE)",
        ] {
            assert_eq!(conv(s), None, "{s}");
        }
        assert_eq!(
            insert_to_rows(
                b"INSERT INTO t VALUES ('a\\')",
                Quoting {
                    backslash_escapes: false,
                    ..Quoting::DEFAULT
                }
            )
            .map(|r| r.tsv),
            Some(b"a\\\\\n".to_vec())
        );
        // EMPTY_STRING_IS_NULL: `''` is the server's NULL (and `'\''`, a
        // quote, or `' '` are not empty): a statement with one runs as
        // written.
        let e = Quoting {
            empty_strings: false,
            ..Quoting::DEFAULT
        };
        assert_eq!(
            insert_to_rows(b"INSERT INTO t VALUES (1,'')", e).map(|r| r.tsv),
            None
        );
        assert_eq!(
            insert_to_rows(b"INSERT INTO t VALUES (1,\"\")", e).map(|r| r.tsv),
            None
        );
        assert_eq!(
            insert_to_rows(b"INSERT INTO t VALUES ('''',' ','\\'')", e).map(|r| r.tsv),
            Some(b"'\t \t'\n".to_vec())
        );
        assert_eq!(
            insert_to_rows(b"INSERT INTO t VALUES (1,'')", Quoting::DEFAULT).map(|r| r.tsv),
            Some(b"1\t\n".to_vec())
        );
    }

    #[test]
    fn appending_adds_rows_after_what_is_there_and_a_refusal_leaves_it_as_it_was() {
        let mut out = b"1\ta\n".to_vec();
        let (t, n) = append_rows(
            b"INSERT INTO `t` VALUES (2,'b')",
            Quoting::DEFAULT,
            &[],
            &mut out,
        )
        .expect("ok");
        assert_eq!((t.table.as_str(), n), ("`t`", 1));
        assert_eq!(out, b"1\ta\n2\tb\n");
        // Refused after some rows were written: they are taken back.
        assert_eq!(
            append_rows(
                b"INSERT INTO `t` VALUES (3,'c'),(4,NOW())",
                Quoting::DEFAULT,
                &[],
                &mut out
            ),
            None
        );
        assert_eq!(out, b"1\ta\n2\tb\n");
    }

    /// Reads LOAD DATA fields back (the server's side of the format).
    fn read_tsv(tsv: &[u8]) -> Vec<Vec<Option<Vec<u8>>>> {
        let mut rows = Vec::new();
        let body = tsv.strip_suffix(b"\n").unwrap_or(tsv);
        for line in body.split(|&b| b == b'\n') {
            let mut row = Vec::new();
            for f in line.split(|&b| b == b'\t') {
                if f == b"\\N" {
                    row.push(None);
                    continue;
                }
                let v = read_field(f, Multibyte::AsciiSafe);
                row.push(Some(v));
            }
            rows.push(row);
        }
        rows
    }

    fn sql_string(v: &[u8], q: u8) -> Vec<u8> {
        let mut s = vec![q];
        for &b in v {
            match b {
                0 => s.extend_from_slice(b"\\0"),
                b'\n' => s.extend_from_slice(b"\\n"),
                b'\r' => s.extend_from_slice(b"\\r"),
                b'\\' => s.extend_from_slice(b"\\\\"),
                b'\'' => s.extend_from_slice(b"\\'"),
                b'"' => s.extend_from_slice(b"\\\""),
                26 => s.extend_from_slice(b"\\Z"),
                o => s.push(o),
            }
        }
        s.push(q);
        s
    }

    /// In a set whose characters hold ASCII bytes, a string is read a
    /// character at a time, as the server's lexer reads it, and written
    /// as LOAD DATA in that set reads it; where the two could part, the
    /// statement is not converted.
    #[test]
    fn multibyte_strings_convert_as_the_server_reads_them() {
        let sjis = Quoting {
            charset: Multibyte::Sjis,
            ..Quoting::DEFAULT
        };
        let gb = Quoting {
            charset: Multibyte::Gb18030,
            ..Quoting::DEFAULT
        };
        // (the VALUES part, how the session reads it, the rows)
        type Row<'a> = (&'a [u8], Quoting, Option<&'a [u8]>);
        let rows: &[Row] = &[
            // ソ ends in 0x5C: data, written as it is (escaped, LOAD DATA
            // in sjis would read two characters).
            (b"('\x83\x5C')", sjis, Some(b"\x83\x5C\n")),
            // ... and read byte by byte, its 0x5C escapes the quote: the
            // string never ends.
            (b"('\x83\x5C')", Quoting::DEFAULT, None),
            // An escaped backslash after it.
            (b"('\x83\x5C\\\\')", sjis, Some(b"\x83\x5C\\\\\n")),
            // 0x81 and a backslash are one character: `n` is data.
            (b"('\x81\\n')", sjis, Some(b"\x81\x5Cn\n")),
            // A half-width katakana is one byte: the escape after it stays.
            (b"('\xB1\\t')", sjis, Some(b"\xB1\\t\n")),
            // A backslash before a byte from 0x80 would split a character.
            (b"('\\\x83\x40')", sjis, None),
            // A lone lead byte, then a tab the row must escape: LOAD DATA
            // would read 0x81 and that escape's backslash as one character.
            (b"('\x81\t')", sjis, None),
            // Four bytes in gb18030, two of them digits; then a quote.
            (b"('\x81\x30\x81\x30''')", gb, Some(b"\x81\x30\x81\x30'\n")),
            // A character whose second byte is `\`: the `''` after it is
            // a quote in the string, which never ends.
            (b"('\x81\x5C'', 1)", gb, None),
            (b"('\x81\x40', 1)", gb, Some(b"\x81\x40\t1\n")),
            // mariadb-dump --default-character-set=big5 of 0xA15C `x\'` 0xA15C.
            (
                b"(1,'\xA1\\x\\\\\\'\xA1\\')",
                Quoting {
                    charset: Multibyte::Big5,
                    ..Quoting::DEFAULT
                },
                Some(b"1\t\xA1\\x\\\\'\xA1\\\n"),
            ),
        ];
        // The same value into a binary column, which LOAD DATA reads byte
        // by byte: its 0x5C is escaped there.
        let big5 = Quoting {
            charset: Multibyte::Big5,
            ..Quoting::DEFAULT
        };
        let sql = b"INSERT INTO t VALUES (1,'\xA1\\x','\xA1\\x'),(2,'\xA1\x40','\xA1\x40')";
        assert_eq!(target(sql, big5).map(|t| t.1), Some(3));
        let mut out = Vec::new();
        let got = append_rows(sql, big5, &[false, false, true], &mut out);
        assert_eq!(got.map(|g| g.1), Some(2));
        assert_eq!(out, b"1\t\xA1\\x\t\xA1\\\\x\n2\t\xA1\x40\t\xA1\x40\n");
        // A row wider than what is known of its columns is not converted.
        assert_eq!(append_rows(sql, big5, &[false, false], &mut out), None);
        for (values, q, want) in rows {
            let mut sql = b"INSERT INTO t VALUES ".to_vec();
            sql.extend_from_slice(values);
            let got = insert_to_rows(&sql, *q).map(|r| r.tsv);
            assert_eq!(
                got.as_deref(),
                *want,
                "{:?} in {:?}",
                String::from_utf8_lossy(values),
                q.charset
            );
        }
    }

    /// A model of LOAD DATA reading a field in a set: a multi-byte
    /// character is data, a `\\` of its own escapes.
    fn read_field(f: &[u8], mb: Multibyte) -> Vec<u8> {
        let mut v = Vec::new();
        let mut i = 0;
        while i < f.len() {
            let n = mb.char_len(f, i);
            if n > 1 {
                v.extend_from_slice(&f[i..i + n]);
                i += n;
            } else if f[i] == b'\\' && i + 1 < f.len() {
                v.push(match f[i + 1] {
                    b'0' => 0,
                    b'n' => b'\n',
                    b't' => b'\t',
                    o => o,
                });
                i += 2;
            } else {
                v.push(f[i]);
                i += 1;
            }
        }
        v
    }

    proptest! {
        /// Strings of sjis characters (second bytes `\`, `|`, `@`, ...),
        /// half-width katakana and ASCII with the bytes SQL escapes,
        /// written as a client in sjis escapes them: converted, each comes
        /// back as written.
        #[test]
        fn sjis_strings_survive(values in prop::collection::vec(prop::collection::vec(prop_oneof![
            (0x81u8..=0x9F, prop::sample::select(vec![0x40u8, 0x5C, 0x7C, 0x7E, 0x80, 0x9F, 0xFC])).prop_map(|(a, b)| vec![a, b]),
            (0xE0u8..=0xFC, prop::sample::select(vec![0x40u8, 0x5C, 0x60, 0xA0])).prop_map(|(a, b)| vec![a, b]),
            (0xA1u8..=0xDF).prop_map(|a| vec![a]),
            prop::sample::select(vec![b'a', b'\\', b'\'', b'"', b'\t', b'\n', 0, b'%']).prop_map(|a| vec![a]),
        ], 0..12), 1..6)) {
            let q = Quoting { charset: Multibyte::Sjis, ..Quoting::DEFAULT };
            let mut sql = b"INSERT INTO `t` VALUES (".to_vec();
            let mut want = Vec::new();
            for (i, chars) in values.iter().enumerate() {
                if i > 0 { sql.push(b','); }
                sql.push(b'\'');
                let mut v = Vec::new();
                for c in chars {
                    v.extend_from_slice(c);
                    match c.as_slice() {
                        [b'\\'] => sql.extend_from_slice(b"\\\\"),
                        [b'\''] => sql.extend_from_slice(b"\\'"),
                        [b'\n'] => sql.extend_from_slice(b"\\n"),
                        [0] => sql.extend_from_slice(b"\\0"),
                        other => sql.extend_from_slice(other),
                    }
                }
                sql.push(b'\'');
                want.push(v);
            }
            sql.push(b')');
            if let Some(r) = insert_to_rows(&sql, q) {
                let body = r.tsv.strip_suffix(b"\n").expect("a row");
                let mut got = Vec::new();
                // Fields end at a tab of their own (no sjis character holds one).
                for f in body.split(|&b| b == b'\t') {
                    got.push(read_field(f, Multibyte::Sjis));
                }
                prop_assert_eq!(got, want);
            } else {
                // Only where LOAD DATA could read an escape's backslash as
                // a character's second byte.
                prop_assert!(values.iter().flatten().any(|c| c.len() == 2 && (0x81..=0x9F).contains(&c[1]) || c.len() == 2 && (0xE0..=0xFC).contains(&c[1])), "{:?}", String::from_utf8_lossy(&sql));
            }
        }

        #[test]
        fn strings_and_nulls_survive(rows in prop::collection::vec(prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..20)), 1..5), 1..6), double in any::<bool>()) {
            let q = if double { b'"' } else { b'\'' };
            let width = rows[0].len();
            let rows: Vec<_> = rows.into_iter().map(|mut r| { r.resize(width, None); r }).collect();
            let mut sql = b"INSERT INTO `t` VALUES ".to_vec();
            for (i, r) in rows.iter().enumerate() {
                if i > 0 { sql.push(b','); }
                sql.push(b'(');
                for (j, v) in r.iter().enumerate() {
                    if j > 0 { sql.push(b','); }
                    match v { None => sql.extend_from_slice(b"NULL"), Some(v) => sql.extend(sql_string(v, q)) }
                }
                sql.push(b')');
            }
            let conv = insert_to_rows(&sql, Quoting::DEFAULT).expect("converts");
            prop_assert_eq!(conv.rows as usize, rows.len());
            prop_assert_eq!(read_tsv(&conv.tsv), rows);
        }

        #[test]
        fn never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut s = b"INSERT INTO t VALUES (".to_vec();
            s.extend(bytes);
            for backslash_escapes in [true, false] {
                for double_quoted_strings in [true, false] {
                    for empty_strings in [true, false] {
                        for charset in [Multibyte::AsciiSafe, Multibyte::Sjis, Multibyte::Big5, Multibyte::Gbk, Multibyte::Gb18030] {
                            let q = Quoting { backslash_escapes, double_quoted_strings, empty_strings, charset };
                            let _ = insert_to_rows(&s, q);
                        }
                    }
                }
            }
        }
    }
}
