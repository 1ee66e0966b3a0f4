//! A LOAD DATA the source logged as a statement (an Execute_load_query
//! event): the statement a replayer sends for it, or why none can be sent.
//!
//! The server does not log the statement it was given: it writes one of
//! its own, `LOAD DATA INFILE '...' [REPLACE|IGNORE] INTO TABLE `db`.`t`
//! [CHARACTER SET cs] FIELDS TERMINATED BY '..' [OPTIONALLY] ENCLOSED BY
//! '..' ESCAPED BY '..' LINES TERMINATED BY '..' [STARTING BY '..'] ...`,
//! then the column list and SET clause as the client wrote them (names
//! quoted as the session quotes them: backquotes, double quotes under
//! ANSI_QUOTES, none with `sql_quote_show_create = 0`). Read on
//! MariaDB 10.11 and 11.4, that text is wrong in two ways a native
//! replica follows (both seen on a native replica of 10.11.19):
//!
//! - its strings are escaped with backslashes whatever the session's
//!   `sql_mode`: under `NO_BACKSLASH_ESCAPES` (logged with the statement)
//!   `'\t'` reads as a backslash and a `t`, so the replica splits the file
//!   elsewhere and loads other rows, silently (`ESCAPED BY ''`) or stops
//!   at 1083 (`ESCAPED BY '\\'`, two characters). Here the strings are
//!   read back to the bytes the source used and written again as the
//!   session reads them. One thing is lost in that text: under that mode
//!   a LOAD DATA that names no escape character has none, and one that
//!   names `ESCAPED BY '\'` has a backslash, and both are logged as
//!   `ESCAPED BY '\\'`. A file without a backslash loads the same
//!   either way; one with a backslash is refused, naming the two;
//! - a `LOAD XML` is written as this LOAD DATA (its row tag as the line
//!   terminator, the XML defaults as the field clauses), which splits the
//!   XML at the tag instead of reading it. Nothing in the event tells the
//!   two apart, so a LOAD DATA of that exact shape is refused, naming
//!   both.
//!
//! Written by hand: a few fixed clauses in the server's own spelling; a
//! text in any other shape is refused rather than guessed at.

use crate::event::LoadQuery;

/// Why a LOAD DATA logged as a statement could not be applied.
pub const LOAD_REFUSAL: &str = "a LOAD DATA logged as a statement";

/// The statement to send for `q`, its `INFILE 'name' [REPLACE|IGNORE]
/// INTO` part made `LOCAL INFILE` of the applier's own bytes (as
/// `mariadb-binlog` writes it), the duplicate handling kept, and its
/// clause strings written as a session with `backslash_escapes` (false:
/// `NO_BACKSLASH_ESCAPES`) reads them; `file` is what it loads. `Err`:
/// why it is refused.
pub fn statement(q: &LoadQuery, backslash_escapes: bool, file: &[u8]) -> Result<Sent, String> {
    let dup: &[u8] = match q.dup {
        2 => b" REPLACE",
        1 => b" IGNORE",
        _ => b"",
    };
    let tail = &q.sql[q.fn_end..];
    let Some(w) = written(tail) else {
        return Err(format!(
            "{LOAD_REFUSAL} whose text is not in the form the server writes (INTO TABLE, FIELDS and LINES clauses): cannot tell what it loads"
        ));
    };
    if w.xml_shaped() {
        return Err(format!(
            "{LOAD_REFUSAL} that may be a LOAD XML: the server logs a LOAD XML as a LOAD DATA with its row tag ({}) as the line terminator, which a replica would apply as LOAD DATA, not as XML; LOAD XML under row-based logging (binlog_format = ROW for its session) replicates",
            String::from_utf8_lossy(&w.lines_terminated.value)
        ));
    }
    if !backslash_escapes && w.escaped.value == b"\\" && file.contains(&b'\\') {
        return Err(format!(
            "{LOAD_REFUSAL} under NO_BACKSLASH_ESCAPES whose file holds backslashes: the server logs a LOAD DATA that names no escape character (none, in that mode) and one with ESCAPED BY '\\' (a backslash) alike, so which one the source ran cannot be told; under row-based logging (binlog_format = ROW for its session) it replicates"
        ));
    }
    let mut sql = q.sql[..q.fn_start].to_vec();
    sql.extend_from_slice(b" LOCAL INFILE 'sqlfleet-binlog-load'");
    sql.extend_from_slice(dup);
    sql.extend_from_slice(b" INTO");
    let mut at = 0;
    for s in w.strings() {
        sql.extend_from_slice(&tail[at..s.span.0]);
        match sent_literal(&s.value, backslash_escapes) {
            Some(lit) => sql.extend_from_slice(&lit),
            None => sql.extend_from_slice(&tail[s.span.0..s.span.1]),
        }
        at = s.span.1;
    }
    sql.extend_from_slice(&tail[at..]);
    Ok(Sent {
        sql,
        charset_named: w.charset_named,
    })
}

/// A statement to send, and whether it names the file's character set
/// (without `CHARACTER SET` the server reads the file in the default
/// database's, which the binary log does not carry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub sql: Vec<u8>,
    pub charset_named: bool,
}

/// What decides the character set a LOAD DATA read its file in.
#[derive(Debug, Clone, Copy)]
pub struct CharsetCase<'a> {
    /// The statement names it (`CHARACTER SET`).
    pub named: bool,
    /// The source session's default database (empty: none).
    pub default_db: &'a str,
    /// The target has that database (replicated, renamed or not): the
    /// same character set, as the DDL that made it was replicated.
    pub default_db_on_target: bool,
    /// The event carries the session's collation_database (MariaDB
    /// writes it when the session has no default database).
    pub logged: bool,
    pub file_ascii: bool,
}

/// Why a LOAD DATA naming no CHARACTER SET cannot be read on the target
/// as on the source, if so: the source read its file in its default
/// database's character set, which the binary log does not carry, and
/// the target does not have that database (the filters exclude it) — a
/// utf16 one reads even an ASCII file as other text. With no default
/// database the server logs the session's collation_database (given to
/// the target); were it not logged, a file that is not ASCII is refused
/// too (a server whose own default set is not ASCII's, utf16, is taken
/// not to be run).
pub fn unknown_charset(c: &CharsetCase) -> Option<String> {
    if c.named || c.default_db_on_target || c.logged {
        return None;
    }
    if c.default_db.is_empty() {
        return (!c.file_ascii).then(|| {
            format!(
                "{LOAD_REFUSAL} naming no CHARACTER SET, run with no default database, its file not ASCII: the source read the file in its session's collation_database (the server's default when it logged in), which this event does not carry; a LOAD DATA naming its CHARACTER SET, or under row-based logging, replicates"
            )
        });
    }
    Some(format!(
        "{LOAD_REFUSAL} naming no CHARACTER SET, run with default database `{}`, which this source's filters exclude: the source read the file in that database's character set, which the binary log does not carry and the target does not have (a utf16 one reads even an ASCII file as other text); a LOAD DATA naming its CHARACTER SET, or under row-based logging, replicates",
        c.default_db
    ))
}

/// The table a statement of [`statement`]'s making loads into (its
/// database when named), as the names read after any renaming.
pub fn table_of(sent: &[u8]) -> Option<(Option<Vec<u8>>, Vec<u8>)> {
    let marker: &[u8] = b" LOCAL INFILE 'sqlfleet-binlog-load'";
    // The first place it reads at (the one [`statement`] put there).
    sent.windows(marker.len())
        .enumerate()
        .filter(|(_, w)| *w == marker)
        .find_map(|(i, _)| {
            let mut r = Reader {
                s: sent,
                at: i + marker.len(),
            };
            let _ = r.word("IGNORE").or_else(|| r.word("REPLACE"));
            r.word("INTO")?;
            r.word("TABLE")?;
            r.table()
        })
}

/// A clause string as the target's session reads it, where the logged
/// literal would not do (`None`: it does). The parser keeps a literal's
/// bytes as they are (no conversion) and so does a hex literal: bytes
/// over 0x7F or a NUL go as hex — the server escaped them byte by byte,
/// so a sjis `表` (0x95 0x5C) was logged as 0x95 `\\`, which a session
/// in sjis reads as the character and an escaped quote —; without
/// backslash escapes the rest go as they are, a quote doubled.
fn sent_literal(v: &[u8], backslash_escapes: bool) -> Option<Vec<u8>> {
    if v.iter().any(|b| *b == 0 || *b > 0x7F) {
        let mut out = b"X'".to_vec();
        for b in v {
            out.extend_from_slice(format!("{b:02X}").as_bytes());
        }
        out.push(b'\'');
        return Some(out);
    }
    if backslash_escapes {
        return None;
    }
    let mut out = vec![b'\''];
    for &b in v {
        if b == b'\'' {
            out.push(b'\'');
        }
        out.push(b);
    }
    out.push(b'\'');
    Some(out)
}

/// A string of the clauses: its bytes, and where its literal (quotes
/// included) lies in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Literal {
    pub value: Vec<u8>,
    pub span: (usize, usize),
}

/// The clauses the server writes after `INTO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub charset_named: bool,
    pub fields_terminated: Literal,
    pub optionally: bool,
    pub enclosed: Literal,
    pub escaped: Literal,
    pub lines_terminated: Literal,
    pub lines_starting: Option<Literal>,
}

impl Written {
    /// The clause strings in the order they stand in the text.
    fn strings(&self) -> Vec<&Literal> {
        let mut all = vec![
            &self.fields_terminated,
            &self.enclosed,
            &self.escaped,
            &self.lines_terminated,
        ];
        all.extend(self.lines_starting.as_ref());
        all.sort_by_key(|l| l.span.0);
        all
    }

    /// What a LOAD XML is logged as: the field clauses of LOAD XML (it has
    /// none of its own), no line start, and a tag as the line terminator.
    pub fn xml_shaped(&self) -> bool {
        let l = &self.lines_terminated.value;
        self.fields_terminated.value == b"\t"
            && self.enclosed.value.is_empty()
            && !self.optionally
            && self.escaped.value == b"\\"
            && self.lines_starting.is_none()
            && l.len() >= 3
            && l[0] == b'<'
            && l[l.len() - 1] == b'>'
    }
}

/// Reads the clauses after `INTO` as the server writes them; `None` when
/// the text is not in that form.
pub fn written(tail: &[u8]) -> Option<Written> {
    let mut r = Reader { s: tail, at: 0 };
    r.word("TABLE")?;
    r.table()?;
    let charset_named = r.word("CHARACTER").is_some();
    if charset_named {
        r.word("SET")?;
        r.any_word()?;
    }
    r.word("FIELDS")?;
    r.word("TERMINATED")?;
    r.word("BY")?;
    let fields_terminated = r.literal()?;
    let optionally = r.word("OPTIONALLY").is_some();
    r.word("ENCLOSED")?;
    r.word("BY")?;
    let enclosed = r.literal()?;
    r.word("ESCAPED")?;
    r.word("BY")?;
    let escaped = r.literal()?;
    r.word("LINES")?;
    let mut lines_terminated = None;
    let mut lines_starting = None;
    loop {
        let slot = if r.word("TERMINATED").is_some() {
            &mut lines_terminated
        } else if r.word("STARTING").is_some() {
            &mut lines_starting
        } else {
            break;
        };
        r.word("BY")?;
        if slot.replace(r.literal()?).is_some() {
            return None;
        }
    }
    Some(Written {
        charset_named,
        fields_terminated,
        optionally,
        enclosed,
        escaped,
        lines_terminated: lines_terminated?,
        lines_starting,
    })
}

struct Reader<'a> {
    s: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn blank(&mut self) {
        while self.s.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn any_word(&mut self) -> Option<&[u8]> {
        self.blank();
        let start = self.at;
        while self
            .s
            .get(self.at)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
        {
            self.at += 1;
        }
        (self.at > start).then(|| &self.s[start..self.at])
    }

    /// The keyword `w` (any case), or nothing read.
    fn word(&mut self, w: &str) -> Option<()> {
        let back = self.at;
        match self.any_word() {
            Some(got) if got.eq_ignore_ascii_case(w.as_bytes()) => Some(()),
            _ => {
                self.at = back;
                None
            }
        }
    }

    fn punct(&mut self, p: u8) -> bool {
        self.blank();
        let hit = self.s.get(self.at) == Some(&p);
        if hit {
            self.at += 1;
        }
        hit
    }

    /// A name as the server writes one: in backquotes, in double quotes
    /// (ANSI_QUOTES), a quote doubled inside, or bare
    /// (`sql_quote_show_create = 0`); its bytes unquoted.
    fn name(&mut self) -> Option<Vec<u8>> {
        self.blank();
        let q = *self.s.get(self.at)?;
        if q != b'`' && q != b'"' {
            let start = self.at;
            while self
                .s
                .get(self.at)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$' || *b > 0x7F)
            {
                self.at += 1;
            }
            return (self.at > start).then(|| self.s[start..self.at].to_vec());
        }
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let b = *self.s.get(self.at)?;
            if b == q && self.s.get(self.at + 1) == Some(&q) {
                out.push(q);
                self.at += 2;
            } else if b == q {
                self.at += 1;
                return Some(out);
            } else {
                out.push(b);
                self.at += 1;
            }
        }
    }

    /// `[db.]table`.
    fn table(&mut self) -> Option<(Option<Vec<u8>>, Vec<u8>)> {
        let first = self.name()?;
        if self.punct(b'.') {
            Some((Some(first), self.name()?))
        } else {
            Some((None, first))
        }
    }

    /// A string literal as the server writes these clauses: single
    /// quotes, backslash escapes. An escape the writer does not make is
    /// not read.
    fn literal(&mut self) -> Option<Literal> {
        self.blank();
        let start = self.at;
        let (value, end) = crate::server_written::unescaped(self.s, start)?;
        self.at = end;
        Some(Literal {
            value,
            span: (start, end),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn query(sql: &[u8], fn_start: usize, fn_end: usize, dup: u8) -> LoadQuery {
        LoadQuery {
            status_vars: vec![],
            db: vec![],
            sql: sql.to_vec(),
            file_id: 1,
            fn_start,
            fn_end,
            dup,
            error_code: 0,
        }
    }

    /// A statement as the server logs it: `LOAD DATA `, the file part,
    /// then `tail`.
    fn logged(tail: &str, dup: u8) -> LoadQuery {
        let head = "LOAD DATA INFILE '/tmp/SQL_LOAD-1-2-3.data' INTO";
        let sql = format!("{head}{tail}");
        query(sql.as_bytes(), "LOAD DATA ".len() - 1, head.len(), dup)
    }

    const DEFAULTS: &str = " TABLE `db`.`t` FIELDS TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (`a`, `b`)";

    /// Texts the servers (10.11.19, 11.4.5) wrote, and what is sent for
    /// each in a session with and without backslash escapes.
    #[test]
    fn the_servers_texts_are_sent_as_each_mode_reads_them() {
        let rows: &[(&str, u8, &str, &str)] = &[
            (
                DEFAULTS,
                0,
                " TABLE `db`.`t` FIELDS TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (`a`, `b`)",
                " TABLE `db`.`t` FIELDS TERMINATED BY '\t' ENCLOSED BY '' ESCAPED BY '\\' LINES TERMINATED BY '\n' (`a`, `b`)",
            ),
            (
                "  TABLE `x`.`s` FIELDS TERMINATED BY ',' OPTIONALLY  ENCLOSED BY '\"' ESCAPED BY '\\'' LINES TERMINATED BY '\\r\\n' STARTING BY 'x' (`a`, @`v`) SET `b`= CONCAT('\\\\', @v, 'it''s')",
                2,
                "  TABLE `x`.`s` FIELDS TERMINATED BY ',' OPTIONALLY  ENCLOSED BY '\"' ESCAPED BY '\\'' LINES TERMINATED BY '\\r\\n' STARTING BY 'x' (`a`, @`v`) SET `b`= CONCAT('\\\\', @v, 'it''s')",
                // The SET clause is the client's own text: kept.
                "  TABLE `x`.`s` FIELDS TERMINATED BY ',' OPTIONALLY  ENCLOSED BY '\"' ESCAPED BY '''' LINES TERMINATED BY '\r\n' STARTING BY 'x' (`a`, @`v`) SET `b`= CONCAT('\\\\', @v, 'it''s')",
            ),
            (
                " TABLE `a``b`.`t.x` CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\0' ENCLOSED BY '' ESCAPED BY '' LINES TERMINATED BY '\\Z' IGNORE 1 LINES  (`a`)",
                1,
                " TABLE `a``b`.`t.x` CHARACTER SET utf8mb4 FIELDS TERMINATED BY X'00' ENCLOSED BY '' ESCAPED BY '' LINES TERMINATED BY '\\Z' IGNORE 1 LINES  (`a`)",
                " TABLE `a``b`.`t.x` CHARACTER SET utf8mb4 FIELDS TERMINATED BY X'00' ENCLOSED BY '' ESCAPED BY '' LINES TERMINATED BY '\u{1a}' IGNORE 1 LINES  (`a`)",
            ),
        ];
        // ANSI_QUOTES names, and bare ones (sql_quote_show_create = 0).
        let ansi = DEFAULTS.replace("`db`.`t`", "\"d\"\"b\".\"t\"");
        let bare = DEFAULTS.replace("`db`.`t`", "db.t");
        let more: Vec<(&str, u8, String, String)> = [ansi.as_str(), bare.as_str()]
            .iter()
            .map(|t| {
                (
                    *t,
                    0,
                    t.to_string(),
                    t.replace("'\\t'", "'\t'")
                        .replace("'\\\\'", "'\\'")
                        .replace("'\\n'", "'\n'"),
                )
            })
            .collect();
        let rows: Vec<(&str, u8, &str, &str)> = rows
            .iter()
            .copied()
            .chain(
                more.iter()
                    .map(|(a, b, c, d)| (*a, *b, c.as_str(), d.as_str())),
            )
            .collect();
        for (tail, dup, with, without) in &rows {
            let q = logged(tail, *dup);
            let d = ["", " IGNORE", " REPLACE"][*dup as usize];
            let head = format!("LOAD DATA LOCAL INFILE 'sqlfleet-binlog-load'{d} INTO");
            assert_eq!(
                String::from_utf8_lossy(&statement(&q, true, b"").expect("sent").sql),
                format!("{head}{with}"),
                "{tail}"
            );
            assert_eq!(
                String::from_utf8_lossy(&statement(&q, false, b"").expect("sent").sql),
                format!("{head}{without}"),
                "{tail}"
            );
        }
    }

    /// A sjis terminator (`表`, 0x95 0x5C) as 10.11.19 logged it — its
    /// second byte escaped as if it stood alone — goes as its bytes, in
    /// either mode.
    #[test]
    fn a_multibyte_terminator_goes_as_its_bytes() {
        let mut tail = b" TABLE `x`.`sj` FIELDS TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '\\\\' LINES TERMINATED BY '".to_vec();
        tail.extend_from_slice(&[0x95, b'\\', b'\\']);
        tail.extend_from_slice(b"' (`a`)");
        let q = logged(&String::from_utf8_lossy(&[]), 0);
        let mut sql = q.sql.clone();
        sql.extend_from_slice(&tail);
        let q = query(&sql, q.fn_start, q.fn_end, 0);
        for mode in [true, false] {
            let got = statement(&q, mode, b"").expect("sent").sql;
            let got = String::from_utf8_lossy(&got);
            assert!(got.ends_with("LINES TERMINATED BY X'955C' (`a`)"), "{got}");
        }
    }

    /// What a LOAD XML is logged as is refused, naming it; a LOAD DATA
    /// differing from that shape in any one clause is sent.
    #[test]
    fn the_shape_of_a_logged_load_xml_is_refused_and_no_other() {
        let xml = " TABLE `x`.`t` CHARACTER SET latin1 FIELDS TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '\\\\' LINES TERMINATED BY '<record>' IGNORE 1 LINES  (`a`, @`b`) SET `b`= UPPER(@b)";
        let e = statement(&logged(xml, 0), true, b"").expect_err("refused");
        assert!(e.contains("LOAD XML") && e.contains("<record>"), "{e}");
        let e = statement(&logged(xml, 0), false, b"").expect_err("refused");
        assert!(e.contains("LOAD XML"), "{e}");
        for (from, to) in [
            ("BY '\\t'", "BY ','"),
            ("ENCLOSED BY ''", "ENCLOSED BY '\"'"),
            ("ENCLOSED BY ''", "OPTIONALLY ENCLOSED BY ''"),
            ("ESCAPED BY '\\\\'", "ESCAPED BY ''"),
            ("'<record>'", "'<record>' STARTING BY 'x'"),
            ("'<record>'", "'<record'"),
            ("'<record>'", "'<>'"),
            ("'<record>'", "'\\n'"),
        ] {
            let other = xml.replacen(from, to, 1);
            assert_ne!(other, xml);
            assert!(statement(&logged(&other, 0), true, b"").is_ok(), "{other}");
        }
    }

    /// Under NO_BACKSLASH_ESCAPES a logged `ESCAPED BY '\\'` is the
    /// default (no escape character) or a backslash named: sent when the
    /// file holds no backslash (the same rows either way), refused when
    /// it does; with backslash escapes it is the backslash, sent.
    #[test]
    fn an_escape_the_log_cannot_tell_is_refused_only_where_it_matters() {
        let q = logged(DEFAULTS, 0);
        assert!(statement(&q, false, b"1\tx\n").is_ok());
        let e = statement(&q, false, b"1\t\\x\n").expect_err("refused");
        assert!(
            e.contains("NO_BACKSLASH_ESCAPES") && e.contains("ESCAPED BY"),
            "{e}"
        );
        assert!(statement(&q, true, b"1\t\\x\n").is_ok());
        let none = logged(&DEFAULTS.replace("ESCAPED BY '\\\\'", "ESCAPED BY ''"), 0);
        assert!(statement(&none, false, b"1\t\\x\n").is_ok());
    }

    /// When the character set a file was read in is not known.
    #[test]
    fn a_file_s_character_set_unknown_to_the_target_is_refused() {
        // (named, default db, on target, logged, ascii) -> refused
        let rows: &[(bool, &str, bool, bool, bool, bool)] = &[
            (true, "x", false, false, false, false),
            (false, "app", true, false, false, false),
            (false, "skipped", false, false, true, true),
            (false, "skipped", false, false, false, true),
            (false, "skipped", false, true, false, false),
            (false, "", false, true, false, false),
            (false, "", false, false, true, false),
            (false, "", false, false, false, true),
        ];
        for &(named, db, on_target, logged, ascii, refused) in rows {
            let got = unknown_charset(&CharsetCase {
                named,
                default_db: db,
                default_db_on_target: on_target,
                logged,
                file_ascii: ascii,
            });
            assert_eq!(
                got.is_some(),
                refused,
                "{named} {db} {on_target} {logged} {ascii}: {got:?}"
            );
            if let Some(why) = got {
                assert!(why.contains("CHARACTER SET"), "{why}");
            }
        }
    }

    /// The table of a sent statement, in each spelling of its name.
    #[test]
    fn the_table_a_sent_statement_loads_into() {
        let rows: &[(&str, Option<&str>, &str)] = &[
            (" TABLE `db`.`t` FIELDS", Some("db"), "t"),
            ("  TABLE \"d\"\"b\".\"t x\" FIELDS", Some("d\"b"), "t x"),
            (" TABLE `a``b` CHARACTER SET latin1 FIELDS", None, "a`b"),
            (" TABLE db.t FIELDS", Some("db"), "t"),
        ];
        for (tail, db, t) in rows {
            for dup in [0, 1, 2] {
                let mut sql = b"LOAD DATA LOCAL INFILE 'sqlfleet-binlog-load'".to_vec();
                sql.extend_from_slice([&b""[..], b" IGNORE", b" REPLACE"][dup]);
                sql.extend_from_slice(b" INTO");
                sql.extend_from_slice(tail.as_bytes());
                let got = table_of(&sql).expect("a table");
                assert_eq!(got.0.as_deref(), db.map(str::as_bytes), "{tail}");
                assert_eq!(got.1, t.as_bytes(), "{tail}");
            }
        }
        assert_eq!(table_of(b"LOAD DATA INFILE 'x' INTO TABLE t"), None);
    }

    /// Texts not in the server's form are refused as unreadable.
    #[test]
    fn a_text_in_another_form_is_refused() {
        for tail in [
            "",
            " TABLE t. FIELDS TERMINATED BY ',' ENCLOSED BY '' ESCAPED BY '' LINES TERMINATED BY '\\n'",
            " TABLE `t` LINES TERMINATED BY '\\n'",
            " TABLE `t` FIELDS TERMINATED BY '\\q' ENCLOSED BY '' ESCAPED BY '' LINES TERMINATED BY '\\n'",
            " TABLE `t` FIELDS TERMINATED BY ',' ENCLOSED BY '' ESCAPED BY '' LINES",
            " TABLE `t` FIELDS TERMINATED BY ',' ENCLOSED BY '' ESCAPED BY '' LINES TERMINATED BY 'a' TERMINATED BY 'b'",
            " TABLE `t` FIELDS TERMINATED BY ',' ENCLOSED BY '' ESCAPED BY '' LINES TERMINATED BY 'a",
            " TABLE `t FIELDS",
            " TABLE \"t` FIELDS TERMINATED BY ',' ENCLOSED BY '' ESCAPED BY '' LINES TERMINATED BY 'a'",
        ] {
            let e = statement(&logged(tail, 0), true, b"").expect_err("refused");
            assert!(e.contains("not in the form"), "{tail}: {e}");
        }
    }

    /// The server's escaping, as MariaDB's writer makes it.
    fn escaped(v: &[u8]) -> Vec<u8> {
        let mut out = vec![b'\''];
        for &b in v {
            match b {
                0 => out.extend_from_slice(b"\\0"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                26 => out.extend_from_slice(b"\\Z"),
                b'\\' | b'\'' => out.extend_from_slice(&[b'\\', b]),
                _ => out.push(b),
            }
        }
        out.push(b'\'');
        out
    }

    proptest! {
        /// Any bytes the clauses hold are read back as they were written.
        #[test]
        fn clause_strings_read_back(
            ft in proptest::collection::vec(any::<u8>(), 0..6),
            lt in proptest::collection::vec(any::<u8>(), 0..6),
            ls in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..4)),
        ) {
            let mut tail = b" TABLE `d`.`t` FIELDS TERMINATED BY ".to_vec();
            tail.extend(escaped(&ft));
            tail.extend_from_slice(b" ENCLOSED BY '' ESCAPED BY '\\\\' LINES TERMINATED BY ");
            tail.extend(escaped(&lt));
            if let Some(s) = &ls {
                tail.extend_from_slice(b" STARTING BY ");
                tail.extend(escaped(s));
            }
            tail.extend_from_slice(b" (`a`)");
            let w = written(&tail).expect("read");
            prop_assert_eq!(&w.fields_terminated.value, &ft);
            prop_assert_eq!(&w.lines_terminated.value, &lt);
            prop_assert_eq!(w.lines_starting.map(|l| l.value), ls);
        }

        /// No text makes the reader panic.
        #[test]
        fn any_text_is_read_or_refused(tail in proptest::collection::vec(any::<u8>(), 0..200), end in 0usize..220) {
            let q = query(&tail, 0, end.min(tail.len()), 0);
            let _ = statement(&q, true, b"");
            let _ = statement(&q, false, b"");
        }
    }
}
