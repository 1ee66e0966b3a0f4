//! A string literal's text as the server reads it, for the readers of
//! dynamic SQL's strings and account names (`kill.rs`,
//! `account_targets.rs`).

/// A string literal's text: doubled quotes as one, and (with
/// `backslashes`) the server's escapes read (`\n` a newline, `\x` x for
/// any other x but `%` and `_`, which keep their backslash).
pub(super) fn unquote(inner: &[u8], quote: u8, backslashes: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        if c == quote && inner.get(i + 1) == Some(&quote) {
            out.push(quote);
            i += 2;
        } else if c == b'\\' && backslashes && i + 1 < inner.len() {
            let e = inner[i + 1];
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'b' => out.push(8),
                b'0' => out.push(0),
                b'Z' => out.push(26),
                b'%' | b'_' => out.extend_from_slice(&[b'\\', e]),
                _ => out.push(e),
            }
            i += 2;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}
