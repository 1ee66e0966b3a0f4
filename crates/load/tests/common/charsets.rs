//! The character sets generated files are written in: the server's own
//! list (`information_schema.character_sets`), less the two- and
//! four-byte ones a client cannot use and LOAD DATA cannot read; each
//! with characters of its own (one character each, as the server counts
//! them) that the server converts to utf8mb4 and back unchanged, drawn from byte pairs whose second byte is ASCII (a
//! `\`, a quote or a separator inside a character in big5, gbk, gb18030,
//! sjis and cp932) and from single bytes from 0x80.

use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_testkit::TestServer;

/// A set's name and characters (each its bytes in that set).
pub type Sets = Vec<(String, Vec<Vec<u8>>)>;

pub async fn charsets(srv: &TestServer, seed: u64) -> Sets {
    let mut c = srv.connect().await;
    let names: Vec<String> = c
        .query("SELECT character_set_name FROM information_schema.character_sets ORDER BY 1")
        .await
        .expect("character sets");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xc5);
    let trails = b"\\\\\"'|,;@[]^_`{}~AZaz\t\x7f\x80\xa1\xfe";
    let mut out = Vec::new();
    for cs in names {
        if ["ucs2", "utf16", "utf16le", "utf32"].contains(&cs.as_str()) {
            continue;
        }
        let candidates: Vec<Vec<u8>> = (0..160)
            .map(|i| {
                if i % 4 == 0 {
                    vec![rng.gen_range(0x80..=0xFF)]
                } else {
                    let trail = trails[rng.gen_range(0..trails.len())];
                    vec![rng.gen_range(0x81..=0xFE), trail]
                }
            })
            .collect();
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02X}")).collect::<String>();
        let exprs: Vec<String> = candidates
            .iter()
            .map(|b| {
                format!(
                    "HEX(CONVERT(CONVERT(CONVERT(X'{h}' USING {cs}) USING utf8mb4) USING {cs})) = '{h}' AND CONVERT(X'{h}' USING {cs}) NOT LIKE '%?%' AND CHAR_LENGTH(CONVERT(X'{h}' USING {cs})) = 1",
                    h = hex(b)
                )
            })
            .collect();
        let row: mysql_async::Row = c
            .query_first(format!("SELECT {}", exprs.join(", ")))
            .await
            .expect("round trips")
            .expect("a row");
        let chars: Vec<Vec<u8>> = candidates
            .into_iter()
            .enumerate()
            .filter(|(i, _)| row.get::<Option<i64>, _>(*i).flatten() == Some(1))
            .map(|(_, b)| b)
            .collect();
        out.push((cs, chars));
    }
    out
}
