//! Comments inside a statement, removed as the mysql client removes them
//! by default (`--skip-comments`): so a routine's or trigger's body is
//! stored as `mysql < file.sql` would store it.
//!
//! The client's rules, reimplemented: outside strings, `#` and `-- `
//! drop the rest of their line (the newline stays); `/* ... */` is
//! dropped with the newlines inside it, and a space is put back where
//! the comment ended if code follows on the same line; executable
//! comments (`/*!`, `/*M!`) stay.

/// Line ends as the client reads them: it drops the `\r` of a `\r\n`
/// (everywhere, strings included). `None` when there is none.
pub fn strip_cr(text: &[u8]) -> Option<Vec<u8>> {
    memchr::memmem::find(text, b"\r\n")?;
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\r' && text.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(text[i]);
        i += 1;
    }
    Some(out)
}

/// The statement without its comments, or `None` when it has none.
pub fn strip_comments(text: &[u8], backslash_escapes: bool) -> Option<Vec<u8>> {
    // Nothing anywhere that could start a comment (most INSERTs): one
    // SIMD pass each, cheaper than stepping from string to string.
    if memchr::memchr2(b'#', b'/', text).is_none() && memchr::memmem::find(text, b"--").is_none() {
        return None;
    }
    if !has_comment(text, backslash_escapes) {
        return None;
    }
    rebuild(text, backslash_escapes)
}

/// Would [`rebuild`] drop anything? Strings are skipped with memchr, so
/// an INSERT whose data is full of `/`, `#` or `--` (paths, URLs, dates)
/// is not copied byte by byte only to find no comment.
fn has_comment(text: &[u8], backslash_escapes: bool) -> bool {
    let n = text.len();
    let mut i = 0;
    while i < n {
        // The code up to the next quote.
        let q = memchr::memchr3(b'\'', b'"', b'`', &text[i..]).map_or(n, |k| i + k);
        let mut j = i;
        while let Some(k) = memchr::memchr3(b'#', b'-', b'/', &text[j..q]) {
            j += k;
            if comment_at(text, j) {
                return true;
            }
            j += 1;
        }
        if q == n {
            return false;
        }
        // The string, as `rebuild` reads it.
        let quote = text[q];
        i = q + 1;
        loop {
            if i >= n {
                return false; // (a backslash ended the text)
            }
            let stop = if backslash_escapes {
                memchr::memchr2(quote, b'\\', &text[i..])
            } else {
                memchr::memchr(quote, &text[i..])
            };
            match stop {
                None => return false,
                Some(k) if text[i + k] == b'\\' => i += k + 2,
                Some(k) => {
                    i += k + 1;
                    break;
                }
            }
        }
    }
    false
}

/// Does a comment that [`rebuild`] drops start at `i` (outside strings)?
fn comment_at(text: &[u8], i: usize) -> bool {
    match text[i] {
        b'#' => true,
        b'-' => {
            text.get(i + 1) == Some(&b'-')
                && text
                    .get(i + 2)
                    .is_none_or(|c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        }
        b'/' => {
            text.get(i + 1) == Some(&b'*')
                && text.get(i + 2) != Some(&b'!')
                && !(text.get(i + 2) == Some(&b'M') && text.get(i + 3) == Some(&b'!'))
        }
        _ => false,
    }
}

/// The statement rebuilt without its comments; `None` when nothing was
/// dropped.
fn rebuild(text: &[u8], backslash_escapes: bool) -> Option<Vec<u8>> {
    let n = text.len();
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    let mut changed = false;
    let mut quote: Option<u8> = None;
    let mut need_space = false;
    while i < n {
        let b = text[i];
        if let Some(q) = quote {
            out.push(b);
            if b == b'\\' && backslash_escapes && i + 1 < n {
                out.push(text[i + 1]);
                i += 2;
                continue;
            }
            if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        let at = comment_at(text, i);
        if at && b != b'/' {
            changed = true;
            while i < n && text[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if at {
            changed = true;
            i += 2;
            while i < n && !(text[i] == b'*' && text.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i += 2;
            need_space = true;
            continue;
        }
        if b == b'\n' {
            need_space = false;
        } else if need_space {
            if !b.is_ascii_whitespace() {
                out.push(b' ');
            }
            need_space = false;
        }
        if matches!(b, b'\'' | b'"' | b'`') {
            quote = Some(b);
        }
        out.push(b);
        i += 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str) -> String {
        String::from_utf8(
            strip_comments(t.as_bytes(), true).unwrap_or_else(|| t.as_bytes().to_vec()),
        )
        .expect("utf8")
    }

    #[test]
    fn crlf_becomes_lf() {
        assert_eq!(
            strip_cr(b"a\r\nb\r\n'c\r\n'\r"),
            Some(b"a\nb\n'c\n'\r".to_vec())
        );
        assert_eq!(strip_cr(b"no cr\r here"), None);
    }

    #[test]
    fn as_the_client_strips_them() {
        assert_eq!(
            s("CREATE PROCEDURE p()\nBEGIN\n  SELECT 1; -- a comment\n  SELECT 2; # another\nEND"),
            "CREATE PROCEDURE p()\nBEGIN\n  SELECT 1; \n  SELECT 2; \nEND"
        );
        assert_eq!(s("SELECT 1/* x */+2"), "SELECT 1 +2");
        assert_eq!(s("SELECT 1 /* a\nb */ + 2"), "SELECT 1  + 2");
        assert_eq!(
            s("SELECT '-- no', \"# no\", '/* no */', 'it\\'s -- no'"),
            "SELECT '-- no', \"# no\", '/* no */', 'it\\'s -- no'"
        );
        assert_eq!(s("/*!40101 SET x=1 */"), "/*!40101 SET x=1 */");
        assert_eq!(s("SELECT 1--2"), "SELECT 1--2");
        assert!(strip_comments(b"INSERT INTO t VALUES ('2020-02-30',1)", true).is_none());
    }

    #[test]
    fn data_full_of_comment_characters_is_not_a_comment() {
        for t in [
            &b"INSERT INTO t VALUES ('http://x/y#z','a--b -- c','/* no */'),(1,'\\'#')"[..],
            b"INSERT INTO t VALUES (`a/*`, \"b#\", 'c\\'-- ')",
            b"SELECT 1--2, 3-/**/",
        ] {
            let (has, rebuilt) = (has_comment(t, true), rebuild(t, true));
            assert_eq!(has, rebuilt.is_some(), "{}", String::from_utf8_lossy(t));
        }
        assert!(!has_comment(
            b"INSERT INTO t VALUES ('http://x/y#z','a--b -- c','/* no */')",
            true
        ));
        assert!(has_comment(b"SELECT 3-/**/", true));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = strip_comments(&bytes, true);
            let _ = strip_comments(&bytes, false);
        }

        /// The quick look says "a comment" exactly when the rebuild drops one.
        #[test]
        fn the_quick_look_agrees_with_the_rebuild(
            bytes in proptest::collection::vec(proptest::sample::select(b"'\"`\\#-/*!M \n\tab".to_vec()), 0..80),
            escapes in proptest::bool::ANY,
        ) {
            proptest::prop_assert_eq!(has_comment(&bytes, escapes), rebuild(&bytes, escapes).is_some());
        }
    }
}
