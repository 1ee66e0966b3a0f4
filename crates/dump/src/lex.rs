//! A small SQL lexer for reading statements, not executing them: words
//! (upper-cased), user and system variables, literals, backquoted names
//! and punctuation, each with its byte range; comments skipped, the body
//! of executable comments (`/*!NNNNN ... */`, `/*M! ... */`) lexed as SQL.
//! Shared by the relay (statement effects, digests) and replicate
//! (database names in replicated statements).
//!
//! [`lex`] reads the dialect of a default session (backslash escapes, `"`
//! quoting strings, text whose multi-byte characters never hold an ASCII
//! byte, as in UTF-8 and latin1). [`lex_in`] reads any session's: under
//! `NO_BACKSLASH_ESCAPES` a backslash is an ordinary character, under
//! `ANSI_QUOTES` `"` quotes a name, and in big5, gbk, gb18030, sjis and
//! cp932 the second byte of a character may be `\` or a backquote
//! (0x5C, 0x60), which are then part of the character, never an escape
//! or the end of a name.

use std::ops::Range;

use compact_str::CompactString;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A word, upper-cased. Kept inline when short (24 bytes or less, as
    /// nearly every keyword and name is): the relay lexes every text
    /// statement, and a heap string per word was a fifth of its work.
    Word(CompactString),
    /// `@name` (a user variable).
    UserVar,
    /// `@@[scope.]name`, lower-cased, with the scope.
    SysVar(Option<String>, String),
    /// A string or number literal.
    Literal,
    /// A backquoted name, unquoted.
    Quoted(CompactString),
    Punct(u8),
}

impl Tok {
    /// Whether this is the punctuation `c` (cheaper than `==`, which
    /// compares whole tokens).
    #[inline]
    pub fn is_punct(&self, c: u8) -> bool {
        matches!(self, Tok::Punct(p) if *p == c)
    }

    /// Whether this is the word `w` (upper case).
    #[inline]
    pub fn is_word(&self, w: &str) -> bool {
        matches!(self, Tok::Word(x) if x == w)
    }
}

pub struct Lexed {
    pub toks: Vec<(Tok, Range<usize>)>,
}

/// How a session's text is written: what the server's own lexer takes
/// from sql_mode and character_set_client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dialect {
    /// sql_mode NO_BACKSLASH_ESCAPES.
    pub no_backslash_escapes: bool,
    /// sql_mode ANSI_QUOTES: `"` quotes a name.
    pub ansi_quotes: bool,
    pub charset: Multibyte,
}

/// The multi-byte character sets whose characters can hold ASCII bytes
/// (every other one the server accepts as a client character set has
/// only bytes from 0x80 in its multi-byte characters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Multibyte {
    #[default]
    AsciiSafe,
    Big5,
    Gbk,
    Gb18030,
    /// sjis and cp932 (the same lead and trail bytes).
    Sjis,
}

impl Multibyte {
    /// The character set of collation id `id` (the number a binlog event
    /// gives for character_set_client), as far as the lexer cares: the
    /// ids of every collation of big5, gbk, gb18030, sjis and cp932,
    /// MariaDB's NO PAD ones included (checked against a server's own
    /// list in replicate's tests).
    pub fn of_collation(id: u16) -> Multibyte {
        match id {
            1 | 84 | 1025 | 1108 => Multibyte::Big5,
            28 | 87 | 1052 | 1111 => Multibyte::Gbk,
            248..=250 => Multibyte::Gb18030,
            13 | 88 | 1037 | 1112 | 95 | 96 | 1119 | 1120 => Multibyte::Sjis,
            _ => Multibyte::AsciiSafe,
        }
    }

    /// The character set named `name` (a client's `--default-character-set`),
    /// as far as the lexer cares.
    pub fn of_charset(name: &str) -> Multibyte {
        match name.to_ascii_lowercase().as_str() {
            "big5" => Multibyte::Big5,
            "gbk" => Multibyte::Gbk,
            "gb18030" => Multibyte::Gb18030,
            "sjis" | "cp932" => Multibyte::Sjis,
            _ => Multibyte::AsciiSafe,
        }
    }

    /// The length of the character at `i` (1 when it is a single byte or
    /// not a well-formed multi-byte character).
    #[inline]
    pub fn char_len(self, sql: &[u8], i: usize) -> usize {
        let (Some(&a), Some(&b)) = (sql.get(i), sql.get(i + 1)) else {
            return 1;
        };
        let two = match self {
            Multibyte::AsciiSafe => false,
            Multibyte::Big5 => {
                (0xA1..=0xF9).contains(&a)
                    && ((0x40..=0x7E).contains(&b) || (0xA1..=0xFE).contains(&b))
            }
            Multibyte::Gbk => {
                (0x81..=0xFE).contains(&a)
                    && ((0x40..=0x7E).contains(&b) || (0x80..=0xFE).contains(&b))
            }
            Multibyte::Gb18030 => {
                if (0x81..=0xFE).contains(&a) && b.is_ascii_digit() {
                    let four = matches!(
                        (sql.get(i + 2), sql.get(i + 3)),
                        (Some(c), Some(d)) if (0x81..=0xFE).contains(c) && d.is_ascii_digit()
                    );
                    if four {
                        return 4;
                    }
                }
                (0x81..=0xFE).contains(&a)
                    && ((0x40..=0x7E).contains(&b) || (0x80..=0xFE).contains(&b))
            }
            Multibyte::Sjis => {
                ((0x81..=0x9F).contains(&a) || (0xE0..=0xFC).contains(&a))
                    && ((0x40..=0x7E).contains(&b) || (0x80..=0xFC).contains(&b))
            }
        };
        if two {
            2
        } else {
            1
        }
    }
}

/// Lexes text written in a default session (see [`lex_in`]).
pub fn lex(sql: &[u8]) -> Lexed {
    lex_in(sql, Dialect::default())
}

/// Lexes text written in a session with dialect `d`.
pub fn lex_in(sql: &[u8], d: Dialect) -> Lexed {
    let mb = d.charset != Multibyte::AsciiSafe;
    // The next character's length at j (a multi-byte one whole).
    let step = |j: usize| -> usize {
        if mb && sql[j] >= 0x80 {
            d.charset.char_len(sql, j)
        } else {
            1
        }
    };
    let mut toks = Vec::with_capacity((sql.len() / 4).clamp(8, 256));
    let mut i = 0;
    let n = sql.len();
    while i < n {
        let c = sql[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'#' => {
                while i < n && sql[i] != b'\n' {
                    i += 1;
                }
            }
            b'-' if sql.get(i + 1) == Some(&b'-')
                && sql.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                while i < n && sql[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if sql.get(i + 1) == Some(&b'*') => {
                if matches!(sql.get(i + 2), Some(b'!') | Some(b'M')) {
                    // Executable comment: skip the marker and version, lex the body.
                    i += 3;
                    if sql.get(i - 1) == Some(&b'M') && sql.get(i) == Some(&b'!') {
                        i += 1;
                    }
                    while i < n && sql[i].is_ascii_digit() {
                        i += 1;
                    }
                } else {
                    i += 2;
                    while i + 1 < n && !(sql[i] == b'*' && sql[i + 1] == b'/') {
                        i += 1;
                    }
                    i = (i + 2).min(n);
                }
            }
            b'*' if sql.get(i + 1) == Some(&b'/') => i += 2, // end of an executable comment
            b'\'' | b'"' if !(c == b'"' && d.ansi_quotes) => {
                i += 1;
                while i < n {
                    if sql[i] == b'\\' && !d.no_backslash_escapes {
                        i += 2;
                    } else if sql[i] == c {
                        if sql.get(i + 1) == Some(&c) {
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    } else {
                        i += step(i);
                    }
                }
                toks.push((Tok::Literal, start..i.min(n)));
            }
            b'`' | b'"' => {
                i += 1;
                let mut name = Vec::new();
                while i < n {
                    if sql[i] == c {
                        if sql.get(i + 1) == Some(&c) {
                            name.push(c);
                            i += 2;
                            continue;
                        }
                        i += 1;
                        break;
                    }
                    let k = step(i).min(n - i);
                    name.extend_from_slice(&sql[i..i + k]);
                    i += k;
                }
                toks.push((Tok::Quoted(text_of(&name)), start..i));
            }
            b'@' if sql.get(i + 1) == Some(&b'@') => {
                i += 2;
                let s = i;
                while i < n && (sql[i].is_ascii_alphanumeric() || sql[i] == b'_' || sql[i] == b'.')
                {
                    i += 1;
                }
                let full = String::from_utf8_lossy(&sql[s..i]).to_ascii_lowercase();
                let tok = match full.split_once('.') {
                    Some((scope, name)) => Tok::SysVar(Some(scope.to_string()), name.to_string()),
                    None => Tok::SysVar(None, full),
                };
                toks.push((tok, start..i));
            }
            b'@' => {
                i += 1;
                if matches!(sql.get(i), Some(b'`' | b'\'' | b'"')) {
                    let q = sql[i];
                    i += 1;
                    while i < n && sql[i] != q {
                        i += 1;
                    }
                    i = (i + 1).min(n);
                } else {
                    while i < n
                        && (sql[i].is_ascii_alphanumeric() || matches!(sql[i], b'_' | b'.' | b'$'))
                    {
                        i += 1;
                    }
                }
                toks.push((Tok::UserVar, start..i));
            }
            c if c.is_ascii_digit() => {
                while i < n && (sql[i].is_ascii_alphanumeric() || sql[i] == b'.') {
                    i += 1;
                }
                toks.push((Tok::Literal, start..i));
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
                while i < n
                    && (sql[i].is_ascii_alphanumeric()
                        || sql[i] == b'_'
                        || sql[i] == b'$'
                        || sql[i] >= 0x80)
                {
                    i += step(i);
                }
                toks.push((Tok::Word(upper_word(&sql[start..i])), start..i));
            }
            _ => {
                toks.push((Tok::Punct(c), start..i + 1));
                i += 1;
            }
        }
    }
    Lexed { toks }
}

/// `sql` with every ASCII byte that is part of a multi-byte character (a
/// second byte in big5, gbk, sjis and cp932, any in gb18030's two- and
/// four-byte ones) replaced by 0x80, as [`lex_in`] reads the characters of
/// strings, names and words; `None` when no character holds one (in every
/// other set, and in most text), so there is nothing to change. Lengths
/// and every other byte are kept: a scanner that reads byte by byte sees
/// the statement's strings, names and comments where the server does.
pub fn hide_inner_ascii(sql: &[u8], d: Dialect) -> Option<Vec<u8>> {
    let mb = d.charset;
    if mb == Multibyte::AsciiSafe {
        return None;
    }
    // No byte from 0x81 followed by an ASCII one (0x30..=0x7E holds every
    // second byte these sets allow): no character can hold one.
    if !sql
        .windows(2)
        .any(|w| w[0] >= 0x81 && (0x30..=0x7E).contains(&w[1]))
    {
        return None;
    }
    let mut out: Option<Vec<u8>> = None;
    for (tok, r) in lex_in(sql, d).toks {
        let (mut i, escapes) = match tok {
            Tok::Literal if matches!(sql.get(r.start), Some(b'\'' | b'"')) => {
                (r.start + 1, !d.no_backslash_escapes)
            }
            Tok::Quoted(_) => (r.start + 1, false),
            Tok::Word(_) => (r.start, false),
            _ => continue,
        };
        // The token's characters, stepped as lex_in steps them.
        while i < r.end {
            let b = sql[i];
            if escapes && b == b'\\' {
                i += 2;
            } else if b >= 0x80 {
                let k = mb.char_len(sql, i);
                for j in i + 1..(i + k).min(sql.len()) {
                    if sql[j] < 0x80 {
                        out.get_or_insert_with(|| sql.to_vec())[j] = 0x80;
                    }
                }
                i += k;
            } else {
                i += 1;
            }
        }
    }
    out
}

/// A word upper-cased: an ASCII word of up to 24 bytes (nearly all of
/// them) is cased on the stack and kept inline, without the heap.
fn upper_word(b: &[u8]) -> CompactString {
    let mut buf = [0u8; 24];
    if let Some(out) = buf.get_mut(..b.len()) {
        out.copy_from_slice(b);
        out.make_ascii_uppercase();
        if let Ok(s) = std::str::from_utf8(out) {
            return CompactString::new(s);
        }
    }
    let mut w = text_of(b);
    w.as_mut_str().make_ascii_uppercase();
    w
}

/// Bytes as text, invalid UTF-8 replaced.
fn text_of(b: &[u8]) -> CompactString {
    match std::str::from_utf8(b) {
        Ok(s) => CompactString::new(s),
        Err(_) => CompactString::from(String::from_utf8_lossy(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ascii_bytes_inside_characters_are_hidden_only_there() {
        let sjis = Dialect {
            charset: Multibyte::Sjis,
            ..Dialect::default()
        };
        let nbe = Dialect {
            no_backslash_escapes: true,
            ..sjis
        };
        let gb = Dialect {
            charset: Multibyte::Gb18030,
            ..Dialect::default()
        };
        // (text, how it is read, the text with what is hidden)
        type Row<'a> = (&'a [u8], Dialect, Option<&'a [u8]>);
        let rows: &[Row] = &[
            // ソ (0x83 0x5C) in a string, then a comment-like text in
            // another: only the 0x5C goes.
            (
                b"INSERT INTO t VALUES ('\x83\x5C', 'a /* b */ c')",
                sjis,
                Some(b"INSERT INTO t VALUES ('\x83\x80', 'a /* b */ c')"),
            ),
            // In a backquoted name and an unquoted word (0x95 0x5C, 表).
            (
                b"SELECT `\x95\x5C` FROM \x95\x60",
                sjis,
                Some(b"SELECT `\x95\x80` FROM \x95\x80"),
            ),
            // A half-width katakana holds no ASCII byte; neither does
            // UTF-8 text, nor any text read byte by byte.
            (b"SELECT '\xB1\\n'", sjis, None),
            (b"SELECT '\xE8\xA1\xA8'", sjis, None),
            (b"SELECT '\x83\x5C'", Dialect::default(), None),
            // Comments and numbers are not touched.
            (b"/* \x83\x5C */ SELECT 1", sjis, None),
            // A backslash escapes the byte after it (one byte, as the
            // server's lexer takes it) unless NO_BACKSLASH_ESCAPES.
            (b"SELECT '\\\x83\x5C'", sjis, None),
            (b"SELECT '\\\x83\x5C'", nbe, Some(b"SELECT '\\\x83\x80'")),
            // gb18030's four bytes, two of them digits.
            (
                b"SELECT '\x81\x30\x81\x39'",
                gb,
                Some(b"SELECT '\x81\x80\x81\x80'"),
            ),
        ];
        for (sql, d, want) in rows {
            assert_eq!(
                hide_inner_ascii(sql, *d).as_deref(),
                *want,
                "{:?} in {:?}",
                String::from_utf8_lossy(sql),
                d.charset
            );
        }
    }

    /// Statement-like bytes: keywords, names in every case, quoted names
    /// with doubled quotes, literals, variables, comments, long words,
    /// non-ASCII and invalid UTF-8.
    fn sqlish() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"select ".to_vec()),
            Just(b"InSeRt INTO ".to_vec()),
            Just(b"`we``ird name` ".to_vec()),
            Just(b"'it''s' ".to_vec()),
            Just(b"@@session.autocommit ".to_vec()),
            Just(b"@v ".to_vec()),
            Just(b"/*!40101 SET x=1 */".to_vec()),
            Just(b"-- note\n".to_vec()),
            Just("caf\u{e9}_t\u{e4}ble ".as_bytes().to_vec()),
            Just(b"a_very_long_identifier_name_over_24_bytes ".to_vec()),
            Just(b"\xff\xfe".to_vec()),
            "[a-zA-Z_$][a-zA-Z0-9_$]{0,30}".prop_map(|s| s.into_bytes()),
            prop::collection::vec(any::<u8>(), 0..8),
        ];
        prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
    }

    proptest! {
        /// Tokens lie inside the text, in order; a word is exactly its
        /// bytes upper-cased (invalid UTF-8 replaced), whether it was kept
        /// inline or not.
        #[test]
        fn words_are_their_bytes_upper_cased(sql in sqlish()) {
            let mut last = 0;
            for (tok, r) in lex(&sql).toks {
                prop_assert!(r.start >= last && r.start <= r.end && r.end <= sql.len());
                last = r.start;
                if let Tok::Word(w) = tok {
                    let want = String::from_utf8_lossy(&sql[r]).to_ascii_uppercase();
                    prop_assert_eq!(w.as_str(), want.as_str());
                }
            }
        }

        /// A backquoted name is its bytes between the quotes, doubled
        /// quotes made single.
        #[test]
        fn quoted_names_are_unquoted(name in "[a-z`é ]{0,30}") {
            let sql = format!("`{}`", name.replace('`', "``"));
            let toks = lex(sql.as_bytes()).toks;
            prop_assert_eq!(toks.len(), 1);
            prop_assert_eq!(&toks[0].0, &Tok::Quoted(name.as_str().into()));
        }
    }

    /// A session's dialect: what a string or a name is, by sql_mode and
    /// character set; each row a statement whose tokens differ from the
    /// default session's reading.
    #[test]
    fn a_client_character_set_by_name() {
        for (name, want) in [
            ("sjis", Multibyte::Sjis),
            ("CP932", Multibyte::Sjis),
            ("big5", Multibyte::Big5),
            ("gbk", Multibyte::Gbk),
            ("gb18030", Multibyte::Gb18030),
            ("gb2312", Multibyte::AsciiSafe),
            ("ujis", Multibyte::AsciiSafe),
            ("utf8mb4", Multibyte::AsciiSafe),
            ("latin1", Multibyte::AsciiSafe),
        ] {
            assert_eq!(Multibyte::of_charset(name), want, "{name}");
        }
    }

    #[test]
    fn each_session_dialect_reads_its_own_text() {
        let nbe = Dialect {
            no_backslash_escapes: true,
            ..Dialect::default()
        };
        let ansi = Dialect {
            ansi_quotes: true,
            ..Dialect::default()
        };
        let sjis = Dialect {
            charset: Multibyte::Sjis,
            ..Dialect::default()
        };
        let kinds = |sql: &[u8], d: Dialect| -> Vec<Tok> {
            lex_in(sql, d).toks.into_iter().map(|t| t.0).collect()
        };
        let lit = Tok::Literal;
        let w = |s: &str| Tok::Word(s.into());
        // 'C:\dir\' then a name: one string, then a word, under NBE.
        assert_eq!(kinds(b"'C:\\dir\\' x", nbe), vec![lit.clone(), w("X")]);
        // By default the backslash escapes the quote: the string runs on.
        assert_eq!(
            kinds(b"'C:\\dir\\' x", Dialect::default()),
            vec![lit.clone()]
        );
        // ANSI_QUOTES: "a" is a name.
        assert_eq!(kinds(b"\"a\"\"b\"", ansi), vec![Tok::Quoted("a\"b".into())]);
        assert_eq!(kinds(b"\"a\"", Dialect::default()), vec![lit.clone()]);
        // sjis 0x95 0x5C is one character: the quote after it ends the
        // string, and `x` is a word of its own.
        assert_eq!(kinds(b"'\x95\\' x", sjis), vec![lit.clone(), w("X")]);
        assert_eq!(kinds(b"'\x95\\' x", Dialect::default()), vec![lit.clone()]);
        // ... and 0x95 0x60 inside a backquoted name is a character.
        assert_eq!(lex_in(b"`\x95\x60` y", sjis).toks.len(), 2);
        for (id, cs) in [
            (1, Multibyte::Big5),
            (84, Multibyte::Big5),
            (28, Multibyte::Gbk),
            (13, Multibyte::Sjis),
            (95, Multibyte::Sjis),
            (1119, Multibyte::Sjis),
            (248, Multibyte::Gb18030),
            (33, Multibyte::AsciiSafe),
            (45, Multibyte::AsciiSafe),
            (8, Multibyte::AsciiSafe),
            (12, Multibyte::AsciiSafe), // ujis: trail bytes from 0xA1
        ] {
            assert_eq!(Multibyte::of_collation(id), cs, "collation {id}");
        }
        assert_eq!(Multibyte::Gb18030.char_len(b"\x81\x30\x81\x30", 0), 4);
        assert_eq!(Multibyte::Big5.char_len(b"\xa4\x5c", 0), 2);
        assert_eq!(Multibyte::Gbk.char_len(b"\x81\x5c", 0), 2);
        assert_eq!(Multibyte::Sjis.char_len(b"\x81", 0), 1);
    }

    proptest! {
        /// In any dialect tokens stay inside the text, in order, and no
        /// input panics.
        #[test]
        fn any_dialect_any_bytes(sql in prop::collection::vec(any::<u8>(), 0..64), nbe: bool, ansi: bool, cs in 0usize..5) {
            let charset = [Multibyte::AsciiSafe, Multibyte::Big5, Multibyte::Gbk, Multibyte::Gb18030, Multibyte::Sjis][cs];
            let d = Dialect { no_backslash_escapes: nbe, ansi_quotes: ansi, charset };
            let mut last = 0;
            for (_, r) in lex_in(&sql, d).toks {
                prop_assert!(r.start >= last && r.start <= r.end && r.end <= sql.len());
                last = r.start;
            }
        }

        /// Statements of strings, names and words made of a set's
        /// characters (second bytes `\\`, a quote, a backquote, ...): with
        /// the ASCII bytes inside characters hidden, a byte-by-byte reading
        /// finds the tokens a reading in the set finds, and only ASCII
        /// bytes inside characters change.
        #[test]
        fn hidden_text_reads_byte_by_byte_as_the_set_reads_it(
            parts in prop::collection::vec((0usize..4, prop::collection::vec((0x81u8..=0xFC, prop::sample::select(vec![0x5Cu8, 0x60, 0x27, 0x40, 0x7C, 0x22, 0x80, 0xA1])), 0..4)), 1..6),
        ) {
            let d = Dialect { charset: Multibyte::Sjis, ..Dialect::default() };
            let mut sql = b"SELECT ".to_vec();
            for (shape, chars) in &parts {
                let body: Vec<u8> = chars.iter().flat_map(|(a, b)| [*a, *b]).collect();
                match shape {
                    0 => { sql.push(b'\''); sql.extend(&body); sql.push(b'\''); }
                    1 => { sql.push(b'`'); sql.extend(&body); sql.push(b'`'); }
                    2 => { sql.extend(b"w"); sql.extend(&body); }
                    _ => sql.extend(b"/* c */"),
                }
                sql.extend(b", ");
            }
            sql.extend(b"1");
            let hidden = hide_inner_ascii(&sql, d).unwrap_or_else(|| sql.clone());
            prop_assert_eq!(hidden.len(), sql.len());
            for (h, o) in hidden.iter().zip(&sql) {
                prop_assert!(h == o || (*o < 0x80 && *h == 0x80));
            }
            let ranges = |l: Lexed| l.toks.into_iter().map(|t| t.1).collect::<Vec<_>>();
            prop_assert_eq!(ranges(lex(&hidden)), ranges(lex_in(&sql, d)));
        }
    }

    #[test]
    fn words_are_upper_cased_and_names_kept_as_written() {
        let toks: Vec<Tok> = lex(b"select `MiXed` from t_\xc3\xa9")
            .toks
            .into_iter()
            .map(|t| t.0)
            .collect();
        assert_eq!(
            toks,
            vec![
                Tok::Word("SELECT".into()),
                Tok::Quoted("MiXed".into()),
                Tok::Word("FROM".into()),
                Tok::Word("T_\u{e9}".into()),
            ]
        );
    }
}
