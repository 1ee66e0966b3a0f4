//! Any statement text, in any of the dialects a client session can have
//! (the first byte picks NO_BACKSLASH_ESCAPES, ANSI_QUOTES and the
//! character-set class), through the rewrite that writes a client's own
//! ROW_COUNT() and @@last_gtid in: never a panic, and when it rewrites, every
//! literal of the text is kept byte for byte and one value is added per
//! read (none inside a string or comment).
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_dump::lex::{lex_in, Dialect, Multibyte, Tok};
use sqlfleet_relay::protocol::sql::{evaluated_now, substitute_call, substitute_var};

const VALUE: i64 = 987_654_321;
const GTID: &str = "7-7-7";

fn literals(sql: &[u8], d: Dialect) -> Vec<Vec<u8>> {
    lex_in(sql, d)
        .toks
        .iter()
        .filter(|(t, _)| matches!(t, Tok::Literal))
        .map(|(_, r)| sql[r.clone()].to_vec())
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, sql)) = data.split_first() else {
        return;
    };
    let charset = [
        Multibyte::AsciiSafe,
        Multibyte::Sjis,
        Multibyte::Big5,
        Multibyte::Gbk,
        Multibyte::Gb18030,
    ][usize::from(pick >> 2) % 5];
    let d = Dialect {
        no_backslash_escapes: pick & 1 == 1,
        ansi_quotes: pick & 2 == 2,
        charset,
    };
    let toks = lex_in(sql, d).toks;
    let _ = evaluated_now(&toks);
    let call = substitute_call(sql, &toks, charset, "ROW_COUNT", VALUE);
    let var = substitute_var(sql, &toks, charset, "last_gtid", GTID);
    // A text whose last token runs to its end may be a string, name or
    // comment left open: the server refuses it whatever is written in.
    if toks.last().is_some_and(|(_, r)| r.end == sql.len()) {
        return;
    }
    for (out, value) in [
        (call, VALUE.to_string().into_bytes()),
        (var, format!("'{GTID}'").into_bytes()),
    ] {
        let Some(out) = out else { continue };
        let kept: Vec<_> = literals(&out, d)
            .into_iter()
            .filter(|l| *l != value)
            .collect();
        let had: Vec<_> = literals(sql, d)
            .into_iter()
            .filter(|l| *l != value)
            .collect();
        assert_eq!(kept, had, "{:?} {d:?}", String::from_utf8_lossy(&out));
    }
});
