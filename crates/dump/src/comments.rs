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
    // Quick exit: nothing that could start a comment.
    if memchr::memchr2(b'#', b'/', text).is_none() && memchr::memmem::find(text, b"--").is_none() {
        return None;
    }
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
        let dash = b == b'-'
            && text.get(i + 1) == Some(&b'-')
            && text
                .get(i + 2)
                .is_none_or(|c| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'));
        if b == b'#' || dash {
            changed = true;
            while i < n && text[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b == b'/'
            && text.get(i + 1) == Some(&b'*')
            && text.get(i + 2) != Some(&b'!')
            && !(text.get(i + 2) == Some(&b'M') && text.get(i + 3) == Some(&b'!'))
        {
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

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = strip_comments(&bytes, true);
            let _ = strip_comments(&bytes, false);
        }
    }
}
