//! A small SQL lexer for reading statements, not executing them: words
//! (upper-cased), user and system variables, literals, backquoted names
//! and punctuation, each with its byte range; comments skipped, the body
//! of executable comments (`/*!NNNNN ... */`, `/*M! ... */`) lexed as SQL.
//! Shared by the relay (statement effects, digests) and replicate
//! (database names in replicated statements).

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

pub fn lex(sql: &[u8]) -> Lexed {
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
            b'\'' | b'"' => {
                i += 1;
                while i < n {
                    if sql[i] == b'\\' {
                        i += 2;
                    } else if sql[i] == c {
                        if sql.get(i + 1) == Some(&c) {
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                toks.push((Tok::Literal, start..i.min(n)));
            }
            b'`' => {
                i += 1;
                let mut name = Vec::new();
                while i < n {
                    if sql[i] == b'`' {
                        if sql.get(i + 1) == Some(&b'`') {
                            name.push(b'`');
                            i += 2;
                            continue;
                        }
                        i += 1;
                        break;
                    }
                    name.push(sql[i]);
                    i += 1;
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
                    i += 1;
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
