//! Text from outside (a dump's statement, a server's message quoting it, a
//! file name) made safe to print on a terminal: control characters —
//! escape sequences that would move the cursor, recolour or retitle the
//! terminal, a carriage return that would hide what came before — are
//! written as `\xNN` (or `\u{NNNN}`), so a message shows what the input
//! held and the terminal stays as it was.

use std::borrow::Cow;

/// `s` with every control character escaped (tab and line feed included:
/// a message is one line).
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            let n = u32::from(c);
            if n < 0x100 {
                out.push_str(&format!("\\x{n:02x}"));
            } else {
                out.push_str(&format!("\\u{{{n:04x}}}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        for (input, want) in [
            ("plain text, é", "plain text, é"),
            ("\x1b[2J\x1b]0;owned\x07", "\\x1b[2J\\x1b]0;owned\\x07"),
            ("a\rb\tc\nd", "a\\x0db\\x09c\\x0ad"),
            ("\u{9b}31m", "\\x9b31m"),
            ("nul\0", "nul\\x00"),
        ] {
            assert_eq!(printable(input), want, "{input:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn nothing_printed_is_a_control_character(s in "\\PC*|[\\x00-\\x1f\\x7f-\\u{9f}]*") {
            proptest::prop_assert!(!printable(&s).chars().any(char::is_control));
        }
    }
}
