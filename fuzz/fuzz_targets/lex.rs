//! The statement lexer must never panic, its tokens must lie inside the
//! text in order, and a word must be its own bytes upper-cased.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_dump::lex::{lex, lex_in, Dialect, Multibyte, Tok};

fuzz_target!(|data: &[u8]| {
    // Every session dialect: tokens stay inside the text, in order.
    for charset in [Multibyte::AsciiSafe, Multibyte::Big5, Multibyte::Gbk, Multibyte::Gb18030, Multibyte::Sjis] {
        for (no_backslash_escapes, ansi_quotes) in [(false, false), (true, false), (false, true), (true, true)] {
            let d = Dialect { no_backslash_escapes, ansi_quotes, charset };
            let mut last = 0;
            for (_, r) in lex_in(data, d).toks {
                assert!(r.start >= last && r.start <= r.end && r.end <= data.len());
                last = r.start;
            }
        }
    }
    let mut last = 0;
    for (tok, r) in lex(data).toks {
        assert!(r.start >= last && r.start <= r.end && r.end <= data.len());
        last = r.start;
        if let Tok::Word(w) = tok {
            assert_eq!(w.as_str(), String::from_utf8_lossy(&data[r]).to_ascii_uppercase());
        }
    }
});
