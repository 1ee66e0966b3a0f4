//! A small SQL lexer for reading statements, not executing them: words
//! (upper-cased), user and system variables, literals, backquoted names
//! and punctuation, each with its byte range; comments skipped, the body
//! of executable comments (`/*!NNNNN ... */`, `/*M! ... */`) lexed as SQL.
//! Shared by the relay (statement effects, digests) and replicate
//! (database names in replicated statements).

use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A word, upper-cased.
    Word(String),
    /// `@name` (a user variable).
    UserVar,
    /// `@@[scope.]name`, lower-cased, with the scope.
    SysVar(Option<String>, String),
    /// A string or number literal.
    Literal,
    /// A backquoted name, unquoted.
    Quoted(String),
    Punct(u8),
}

pub struct Lexed {
    pub toks: Vec<(Tok, Range<usize>)>,
}

pub fn lex(sql: &[u8]) -> Lexed {
    let mut toks = Vec::new();
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
                toks.push((
                    Tok::Quoted(String::from_utf8_lossy(&name).into_owned()),
                    start..i,
                ));
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
                let w = String::from_utf8_lossy(&sql[start..i]).to_ascii_uppercase();
                toks.push((Tok::Word(w), start..i));
            }
            _ => {
                toks.push((Tok::Punct(c), start..i + 1));
                i += 1;
            }
        }
    }
    Lexed { toks }
}
