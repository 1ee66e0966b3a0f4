//! Any statement text, in any of the dialects a client session can have
//! (the first byte picks NO_BACKSLASH_ESCAPES, ANSI_QUOTES and the
//! character-set class), through the rewrite that writes a client's own
//! ROW_COUNT() and @@last_gtid in: never a panic, and every rewrite reads
//! as the text did (`reads_as_before`: every literal kept byte for byte,
//! the value aside) — the check the relay makes before it sends one, which
//! a rewrite should never need to fail.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_dump::lex::{lex_in, Dialect, Multibyte};
use sqlfleet_relay::protocol::sql::{
    evaluated_now, reads_as_before, substitute_call, substitute_var,
};

const VALUE: i64 = 987_654_321;
const GTID: &str = "7-7-7";

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
        let new = lex_in(&out, d).toks;
        assert!(
            reads_as_before((sql, &toks), (&out, &new), &value),
            "{:?} {d:?}",
            String::from_utf8_lossy(&out)
        );
    }
});
