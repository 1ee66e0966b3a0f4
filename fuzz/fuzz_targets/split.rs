//! The dump splitter and classifier must never panic, and every statement
//! must point at its own bytes (the same bytes, but for a client command
//! inside it blanked to spaces; `use` and `charset` lines become SQL of
//! their own); nor may what the loader does with each statement
//! (comments stripped, traits inspected, rows converted); in the
//! client's character sets whose characters hold ASCII bytes too.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_dump::comments::{strip_comments, strip_cr};
use sqlfleet_dump::inspect::{generates_ids, inspect};
use sqlfleet_dump::values::{insert_to_rows, Quoting};
use sqlfleet_dump::lex::Multibyte;
use sqlfleet_dump::{classify, Splitter};

fuzz_target!(|data: &[u8]| {
    let mut last = 0;
    // The client's set, drawn from the first byte: the sets whose
    // characters hold ASCII bytes among them.
    let sets = [
        Multibyte::AsciiSafe,
        Multibyte::Sjis,
        Multibyte::Big5,
        Multibyte::Gbk,
        Multibyte::Gb18030,
    ];
    let mut sp = Splitter::new(data);
    let set = sets[usize::from(data.first().copied().unwrap_or(0)) % sets.len()];
    sp.set_charset(set);
    for st in sp {
        let Ok(st) = st else { break };
        assert!(last <= st.offset && st.offset <= st.end && st.end as usize <= data.len());
        last = st.offset;
        let span = &data[st.offset as usize..st.end as usize];
        let made = st.text.starts_with(b"USE `") || st.text.starts_with(b"SET NAMES ");
        if !made && st.source.is_none() {
            let at = &span[..st.text.len()];
            assert!(
                at.iter().zip(&st.text).all(|(a, b)| a == b || *b == b' '),
                "{at:?} vs {:?}",
                st.text
            );
        }
        let _ = classify(&st.text);
        let scan = st.scan_text();
        assert_eq!(scan.len(), st.text.len());
        let text = strip_cr(&st.text).unwrap_or(st.text);
        for escapes in [true, false] {
            let _ = strip_comments(&text, escapes);
            for double_quoted_strings in [true, false] {
                for empty_strings in [true, false] {
                    let quoting = Quoting {
                        backslash_escapes: escapes,
                        double_quoted_strings,
                        empty_strings,
                        charset: set,
                    };
                    let _ = insert_to_rows(&text, quoting);
                    let _ = sqlfleet_dump::values::target(&text, quoting);
                }
            }
        }
        let _ = inspect(&text);
        let _ = generates_ids(&text, 0, "id");
    }
});
