//! The oracle for flat files: generated files (CSV, TSV and other
//! separators, enclosures, escapes and line ends; fields that need
//! quoting or escaping, NULLs, too few or too many fields, and now and
//! then bytes written raw where they should have been escaped) loaded by
//! the stock client's one `LOAD DATA LOCAL INFILE` and by `sqlfleet load
//! --into` (random threads and chunk sizes, by LOAD DATA or by INSERTs)
//! must give the same rows, or sqlfleet must refuse the file clearly (a
//! malformed one only). Files come in the server's character sets, with
//! characters whose second byte is `\`, a quote or a separator.
//!
//! `SQLFLEET_FLAT_DIFF_FILES` (default 100) sets the budget and
//! `SQLFLEET_FLAT_DIFF_SEED` the first seed; a failure prints the seed and
//! keeps the file.

mod common;

use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use sqlfleet_flat::Format;
use sqlfleet_load::flat::FlatOptions;
use sqlfleet_testkit::{server, TestServer};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One generated file: its bytes, its format, whether its first line is
/// a header, its character set.
struct Flat {
    text: Vec<u8>,
    format: Format,
    header: bool,
    charset: String,
    /// Column b is a BLOB.
    blob_b: bool,
    /// CSV or TSV as written by `SELECT ... INTO OUTFILE`, with neither
    /// ragged rows nor bytes written raw: nothing to refuse. (Other
    /// formats' files can read otherwise than the generator meant: a
    /// separator of letters, the enclosure as the escape.)
    well_formed: bool,
}

fn pick<'a, T>(rng: &mut impl Rng, xs: &'a [T]) -> &'a T {
    &xs[rng.gen_range(0..xs.len())]
}

fn generate(seed: u64, sets: &[(String, Vec<Vec<u8>>)]) -> Flat {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // Half the files in utf8mb4; of the others, half in a set whose
    // characters hold ASCII bytes.
    let ascii_inside = ["big5", "gbk", "gb18030", "sjis", "cp932"];
    let (charset, chars) = match rng.gen_range(0..4) {
        0 | 1 => ("utf8mb4".to_string(), Vec::new()),
        2 => {
            let inside: Vec<_> = sets
                .iter()
                .filter(|(n, _)| ascii_inside.contains(&n.as_str()))
                .collect();
            let (n, c) = *pick(&mut rng, &inside);
            (n.clone(), c.clone())
        }
        _ => {
            let (n, c) = pick(&mut rng, sets);
            (n.clone(), c.clone())
        }
    };
    let mb = sqlfleet_flat::Multibyte::of_charset(&charset);
    // Column b is a BLOB in some files: its field is written byte by byte
    // (LOAD DATA reads it so).
    let blob_b = rng.gen_bool(0.3);
    let shape = rng.gen_range(0..12);
    let format = match shape {
        // Any bytes LOAD DATA takes: separators, enclosures and escapes
        // drawn from the printable ASCII bytes, tab and space (letters and
        // digits included), lines ended by one or two of them or a
        // newline.
        8..=11 => any_format(&mut rng),
        5 => Format {
            // The enclosure is the escape too.
            fields_terminated_by: b",".to_vec(),
            enclosed_by: Some(b'"'),
            escaped_by: Some(b'"'),
            lines_terminated_by: b"\n".to_vec(),
            charset: sqlfleet_flat::Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        },
        6 => Format {
            // Lines end with something other than a newline.
            fields_terminated_by: b"\t".to_vec(),
            enclosed_by: Some(b'"'),
            escaped_by: Some(b'\\'),
            lines_terminated_by: b"~~".to_vec(),
            charset: sqlfleet_flat::Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        },
        7 => Format {
            fields_terminated_by: b", ".to_vec(),
            enclosed_by: Some(b'"'),
            escaped_by: Some(b'\\'),
            lines_terminated_by: b";\n".to_vec(),
            charset: sqlfleet_flat::Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        },
        0 => Format::csv(),
        1 => Format::tsv(),
        2 => Format {
            fields_terminated_by: b";".to_vec(),
            enclosed_by: Some(b'\''),
            escaped_by: Some(b'\\'),
            lines_terminated_by: b"\r\n".to_vec(),
            charset: sqlfleet_flat::Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        },
        3 => Format {
            fields_terminated_by: b"||".to_vec(),
            enclosed_by: None,
            escaped_by: Some(b'\\'),
            lines_terminated_by: b"\n".to_vec(),
            charset: sqlfleet_flat::Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        },
        _ => Format {
            fields_terminated_by: b",".to_vec(),
            enclosed_by: Some(b'"'),
            escaped_by: None,
            lines_terminated_by: b"\n".to_vec(),
            charset: sqlfleet_flat::Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        },
    };
    let format = Format {
        charset: mb,
        ..format
    };
    let header = rng.gen_bool(0.3);
    let mut text = Vec::new();
    let sep = format.fields_terminated_by.clone();
    let eol = format.lines_terminated_by.clone();
    if header {
        // Now and then a header whose name holds a line break, quoted.
        let first: Vec<u8> = match format.enclosed_by {
            Some(q) if rng.gen_bool(0.3) => [&[q][..], b"a\nb", &[q][..]].concat(),
            _ => b"a".to_vec(),
        };
        text.extend_from_slice(&first);
        text.extend_from_slice(&sep);
        text.extend_from_slice(b"b");
        text.extend_from_slice(&sep);
        text.extend_from_slice(b"c");
        text.extend_from_slice(&eol);
    }
    // Pieces of field content: the format's own bytes among them.
    let mut pieces: Vec<Vec<u8>> = [
        "x",
        "plain",
        "two words",
        " lead",
        "trail ",
        "N",
        "NULL",
        "é",
        "😀",
        "0",
        "-1.5",
        ",",
        ";",
        "|",
        "\t",
        "\n",
        "\r",
        "\"",
        "'",
        "\\",
        "\\N",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    pieces.push(sep.clone());
    pieces.push(eol.clone());
    if charset != "utf8mb4" {
        // The file's set: its own characters, no UTF-8.
        pieces.retain(|p| p.is_ascii());
        for _ in 0..3 {
            pieces.extend(chars.iter().cloned());
        }
    }
    // Some files are malformed: ragged rows, or bytes written raw where
    // they should have been quoted or escaped.
    let ragged = rng.gen_bool(0.15);
    let raw = rng.gen_bool(0.15);
    let rows = rng.gen_range(1..60);
    for _ in 0..rows {
        let fields = match rng.gen_range(0..20) {
            0 if ragged => 2,
            1 if ragged => 4,
            _ => 3,
        };
        for f in 0..fields {
            let mb = if blob_b && f == 1 {
                sqlfleet_flat::Multibyte::AsciiSafe
            } else {
                mb
            };
            if f > 0 {
                text.extend_from_slice(&sep);
            }
            let how = rng.gen_range(0..20);
            if how == 0 {
                // NULL as the format writes it.
                text.extend_from_slice(if format.escaped_by.is_some() {
                    b"\\N"
                } else {
                    b"NULL"
                });
                continue;
            }
            let mut v = Vec::new();
            for _ in 0..rng.gen_range(0..4) {
                let piece: &Vec<u8> = pick(&mut rng, &pieces);
                v.extend_from_slice(piece);
            }
            if how == 1 && raw {
                // Raw: written as it is, however the server reads it.
                text.extend_from_slice(&v);
            } else if let (Some(q), true) = (format.enclosed_by, how % 2 == 0) {
                text.push(q);
                for c in characters(&v, mb) {
                    // A character's tail is data, never a quote.
                    if let [b] = *c {
                        if Some(b) == format.escaped_by {
                            text.push(b);
                        }
                        if b == q {
                            text.push(q);
                        }
                    }
                    text.extend_from_slice(c);
                }
                text.push(q);
            } else if let Some(e) = format.escaped_by {
                // Escaped: the escape byte before every byte that would
                // end the field or the line or be read as a quote.
                let mut i = 0;
                for c in characters(&v, mb) {
                    if c.len() > 1 {
                        // A character's tail is data, never escaped.
                        text.extend_from_slice(c);
                        i += c.len();
                        continue;
                    }
                    let rest = &v[i..];
                    let special = rest.starts_with(&sep)
                        || rest.starts_with(&eol)
                        || rest[0] == e
                        || (i == 0 && Some(rest[0]) == format.enclosed_by);
                    match rest[0] {
                        b'\n' => text.extend_from_slice(&[e, b'n']),
                        b'\t' => text.extend_from_slice(&[e, b't']),
                        b'\r' => text.extend_from_slice(&[e, b'r']),
                        b if special => text.extend_from_slice(&[e, b]),
                        b => text.push(b),
                    }
                    i += 1;
                }
            } else {
                // Neither quoted nor escapable: only bytes that cannot end
                // anything.
                text.extend(
                    v.iter()
                        .filter(|b| {
                            !sep.contains(b) && !eol.contains(b) && Some(**b) != format.enclosed_by
                        })
                        .copied(),
                );
            }
        }
        text.extend_from_slice(&eol);
    }
    if rng.gen_bool(0.2) {
        // No line end after the last record.
        text.truncate(text.len() - eol.len());
    }
    Flat {
        text,
        format,
        header,
        charset,
        blob_b,
        well_formed: !ragged && !raw && shape <= 1,
    }
}

/// `v` cut into the characters of `mb` (a multi-byte one whole).
fn characters(v: &[u8], mb: sqlfleet_flat::Multibyte) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let n = mb.char_len(v, i);
        out.push(&v[i..i + n]);
        i += n;
    }
    out
}

/// A format drawn from the bytes LOAD DATA's clauses take, not from the
/// formats files usually have: a field separator of one to three bytes,
/// an enclosure and an escape (each a byte or none), a line end of one or
/// two bytes or a newline; separator and line end differ, and neither
/// starts with the other (LOAD DATA would read the one where the other
/// ends).
fn any_format(rng: &mut impl Rng) -> Format {
    let bytes: Vec<u8> = (0x21u8..0x7f).chain([b'\t', b' ']).collect();
    let mut draw = |n: usize| -> Vec<u8> { (0..n).map(|_| *pick(rng, &bytes)).collect() };
    loop {
        let n = 1 + draw(1)[0] as usize % 3;
        let sep = draw(n);
        let eol = match draw(1)[0] % 3 {
            0 => b"\n".to_vec(),
            1 => draw(1),
            _ => draw(2),
        };
        let one = draw(2);
        let enclosed_by = (one[0] % 3 != 0).then_some(one[0]);
        let escaped_by = (one[1] % 3 != 0).then_some(one[1]);
        if sep.starts_with(&eol) || eol.starts_with(&sep) {
            continue;
        }
        return Format {
            fields_terminated_by: sep,
            enclosed_by,
            escaped_by,
            lines_terminated_by: eol,
            charset: sqlfleet_flat::Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        };
    }
}

/// The table both loads go into; `b` is a BLOB in some runs (LOAD DATA
/// reads a binary column's field byte by byte, whatever the file's set).
async fn make_table(srv: &TestServer, prefix: &str, b: &str) -> String {
    let (db, _) = srv.fresh_db(prefix).await;
    let mut c = srv.connect().await;
    c.query_drop(format!(
        "CREATE TABLE `{db}`.t (a TEXT, b {b}, c TEXT) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    ))
    .await
    .expect("create");
    db
}

/// One column's value: NULL or its bytes.
type Value = Option<Vec<u8>>;

/// The table's rows, sorted (chunks load in any order).
async fn rows(srv: &TestServer, db: &str) -> Vec<Vec<Value>> {
    let mut c = srv.connect().await;
    let mut v: Vec<(Value, Value, Value)> = c
        .query(format!("SELECT a, b, c FROM `{db}`.t"))
        .await
        .expect("rows");
    v.sort();
    v.into_iter().map(|(a, b, c)| vec![a, b, c]).collect()
}

#[test]
fn generated_flat_files_load_like_one_load_data() {
    let srv = server();
    let files = env_u64("SQLFLEET_FLAT_DIFF_FILES", 100);
    let first = env_u64("SQLFLEET_FLAT_DIFF_SEED", 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let mut failures = Vec::new();
    let (mut compared, mut refused, mut bad_formats) = (0, 0, 0);
    let sets = rt.block_on(common::charsets::charsets(srv, first));
    let mut per_set = std::collections::BTreeMap::<String, usize>::new();
    for seed in first..first + files {
        let g = generate(seed, &sets);
        *per_set.entry(g.charset.clone()).or_default() += 1;
        let path = dir.path().join(format!("flat-{seed}.txt"));
        std::fs::write(&path, &g.text).expect("write");
        let b = if g.blob_b { "BLOB" } else { "TEXT" };
        let stock = rt.block_on(make_table(srv, "fstock", b));
        let load = format!(
            "LOAD DATA LOCAL INFILE '{}' INTO TABLE `{stock}`.t CHARACTER SET {} {}{}",
            path.display(),
            g.charset,
            g.format.clause(),
            if g.header { " IGNORE 1 LINES" } else { "" }
        );
        let stmt = dir.path().join(format!("flat-{seed}.load.sql"));
        std::fs::write(&stmt, format!("{load};\n")).expect("write");
        let o = srv.stock_client(&stock, &stmt, &["--local-infile=1"]);
        assert!(
            o.status.success(),
            "seed {seed}: the stock client failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let ours = rt.block_on(make_table(srv, "fours", b));
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xf1a7);
        let opts = FlatOptions {
            target: srv.target().with_database(Some(&ours)),
            binlog: sqlfleet_load::Binlog::Write,
            writes_on_read_only: false,
            files: vec![path.clone()],
            into: "t".into(),
            format: g.format.clone(),
            header: g.header,
            columns: None,
            threads: rng.gen_range(1..=4),
            resume: false,
            restart: false,
            strict: false,
            progress: sqlfleet_load::progress::Mode::None,
            chunk_bytes: *pick(&mut rng, &[1usize, 64, 300, 4096, 1 << 20]),
            read_ahead: 1 << 20,
            charset: g.charset.clone(),
            fast_path: rng.gen_bool(0.5),
            interrupt: None,
        };
        let how = format!(
            "{} threads, chunks of {} bytes, {}",
            opts.threads,
            opts.chunk_bytes,
            if opts.fast_path {
                "LOAD DATA"
            } else {
                "INSERTs"
            }
        );
        match rt.block_on(sqlfleet_load::flat::load_flat(opts)) {
            Ok(_) => {
                compared += 1;
                let (want, got) =
                    rt.block_on(async { (rows(srv, &stock).await, rows(srv, &ours).await) });
                if want != got {
                    let at = want.iter().zip(&got).position(|(a, b)| a != b);
                    failures.push(format!(
                        "seed {seed} ({:?} in {}, b {b}, header={}; {how}): {} rows from LOAD DATA, {} from sqlfleet; first difference: {:?} against {:?}",
                        g.format,
                        g.charset,
                        g.header,
                        want.len(),
                        got.len(),
                        at.map(|i| &want[i]),
                        at.map(|i| &got[i]),
                    ));
                }
            }
            Err(e) => {
                // A refusal must name the file and a place in it, or be
                // the format's own refusal.
                let msg = e.to_string();
                let format_refused = g.format.check().err().map(|f| f.to_string());
                if format_refused
                    .as_ref()
                    .is_some_and(|f| msg.contains(f.as_str()))
                {
                    bad_formats += 1;
                } else if g.well_formed {
                    failures.push(format!(
                        "seed {seed} ({how}; {:?} in {}, header={}): a well-formed file refused: {msg}",
                        g.format, g.charset, g.header
                    ));
                } else if msg.contains(&path.display().to_string()) && msg.contains("line") {
                    if std::env::var_os("SQLFLEET_FLAT_DIFF_SHOW").is_some() {
                        eprintln!("seed {seed} ({how}; {:?}): refused: {msg}", g.format);
                    }
                    refused += 1;
                } else {
                    failures.push(format!(
                        "seed {seed} ({how}; {:?}, header={}): refused without a place: {msg}",
                        g.format, g.header
                    ));
                }
            }
        }
    }
    common::report(
        ("flat differential", "one LOAD DATA"),
        dir.path(),
        "sqlfleet-flat-differential",
        |seed| format!("flat-{seed}.txt"),
        &failures,
        (files, compared),
        format!("{files} files from seed {first}: {compared} compared, {refused} clear refusals, {bad_formats} formats refused; by character set {per_set:?}"),
    );
}
