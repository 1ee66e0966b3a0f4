use super::*;
use proptest::prelude::*;

fn chunks(
    input: &[u8],
    fmt: Format,
    checks: Checks,
    target: usize,
) -> Result<Vec<Chunk>, FlatError> {
    let mut c = Chunker::new(input, fmt, checks, target);
    let mut out = Vec::new();
    while let Some(ch) = c.next_chunk()? {
        out.push(ch);
    }
    Ok(out)
}

fn all(input: &[u8], fmt: Format, checks: Checks) -> Chunk {
    let mut v = chunks(input, fmt, checks, usize::MAX).expect("chunks");
    assert_eq!(v.len(), 1);
    v.remove(0)
}

#[test]
fn tsv_records_and_lines() {
    let c = all(
        b"1\ta\n2\t\\N\n3\tx\\\ny\n",
        Format::tsv(),
        Checks {
            fields: Some(2),
            ..Checks::default()
        },
    );
    assert_eq!(c.record_lines, vec![1, 2, 3]);
    assert_eq!(c.last_line(), 4);
}

/// In sjis, big5, gbk and gb18030 a character's second byte may be `\`,
/// a quote or a separator: LOAD DATA reads it as part of the character
/// (checked against a server's LOAD DATA ... CHARACTER SET), so neither
/// the chunker nor the field reader may take it for an escape or a
/// terminator. (`表` is 0x95 0x5C in sjis; before, the record ran on into
/// the next line and was refused as ragged.)
#[test]
fn a_multibyte_characters_tail_is_data() {
    use crate::format::Multibyte::{Big5, Gb18030, Gbk, Sjis};
    type Row<'a> = (crate::format::Multibyte, &'a [u8], &'a [&'a [&'a [u8]]]);
    let rows: &[Row] = &[
        (
            Sjis,
            b"1\t\x95\\\n2\tx\n",
            &[&[b"1", b"\x95\\"], &[b"2", b"x"]],
        ),
        (Sjis, b"1\t\x95\\\\n\n", &[&[b"1", b"\x95\\\n"]]),
        (Big5, b"1\t\xa4\\\t\n", &[&[b"1", b"\xa4\\", b""]]),
        (Gbk, b"1,\"\x81\\\"\n", &[&[b"1", b"\x81\\"]]),
        (
            Gb18030,
            b"\x81\x30\x81\x30\t\x81\\\n",
            &[&[b"\x81\x30\x81\x30", b"\x81\\"]],
        ),
        // A first byte without a well-formed second is a byte alone.
        (Sjis, b"\x95\t\\N\n", &[&[b"\x95", b"\\N"]]),
    ];
    for (charset, input, want) in rows {
        let base = if input.contains(&b',') {
            Format::csv()
        } else {
            Format::tsv()
        };
        let fmt = Format {
            charset: *charset,
            ..base
        };
        let c = all(input, fmt.clone(), Checks::default());
        assert_eq!(c.data, *input, "{charset:?} {input:?}");
        let got = crate::fields::records(&c.data, &fmt);
        let want: Vec<Vec<Option<Vec<u8>>>> = want
            .iter()
            .map(|r| {
                r.iter()
                    .map(|f| (*f != b"\\N").then(|| f.to_vec()))
                    .collect()
            })
            .collect();
        assert_eq!(got, want, "{charset:?} {input:?}");
    }
    // A binary column's field is read byte by byte: there the 0x5C
    // escapes the tab (the server reads `x`, then 0x95, a tab and `y`);
    // the next field is read in sjis again.
    let fmt = Format {
        charset: Sjis,
        binary_fields: vec![false, true, false],
        ..Format::tsv()
    };
    let input: &[u8] = b"x\t\x95\\\ty\t\x95\\\n";
    let c = all(input, fmt.clone(), Checks::default());
    assert_eq!(c.data, input);
    let want: Vec<Vec<Option<Vec<u8>>>> = vec![vec![
        Some(b"x".to_vec()),
        Some(b"\x95\ty".to_vec()),
        Some(b"\x95\\".to_vec()),
    ]];
    assert_eq!(crate::fields::records(&c.data, &fmt), want);
}

#[test]
fn csv_quotes_hide_separators_and_newlines() {
    let input = b"1,\"a,b\",\"line\none\"\n2,\"say \"\"hi\"\"\",\n3,,\"x\\\"y\"\n";
    let c = all(
        input,
        Format::csv(),
        Checks {
            fields: Some(3),
            ..Checks::default()
        },
    );
    assert_eq!(c.record_lines, vec![1, 3, 4]);
    assert_eq!(c.data, input);
}

#[test]
fn crlf_and_multibyte_terminators() {
    let fmt = Format {
        lines_terminated_by: b"\r\n".to_vec(),
        ..Format::csv()
    };
    let c = all(
        b"1,\"a\r\nb\"\r\n2,c\r\n",
        fmt,
        Checks {
            fields: Some(2),
            ..Checks::default()
        },
    );
    assert_eq!(c.record_lines, vec![1, 3]);
    let fmt = Format {
        fields_terminated_by: b"||".to_vec(),
        ..Format::tsv()
    };
    let c = all(
        b"a||b||c\nd||e||f",
        fmt,
        Checks {
            fields: Some(3),
            ..Checks::default()
        },
    );
    assert_eq!(c.records(), 2);
}

#[test]
fn header_is_skipped() {
    let c = all(
        b"id,name\n1,a\n2,b\n",
        Format::csv(),
        Checks {
            header: true,
            fields: Some(2),
            ..Checks::default()
        },
    );
    assert_eq!(c.offset, 8);
    assert_eq!(c.data, b"1,a\n2,b\n");
    assert_eq!(c.record_lines, vec![2, 3]);
}

/// The header is a line as `IGNORE 1 LINES` reads it: a quoted line
/// break ends it, and the rest of that line is the first row (as LOAD DATA
/// loads it); an escaped one does not.
#[test]
fn the_header_ends_at_the_first_line_end_quotes_or_not() {
    let header = |input: &[u8]| {
        all(
            input,
            Format::csv(),
            Checks {
                header: true,
                ..Checks::default()
            },
        )
    };
    let c = header(b"\"id\nx\",name\n1,a\n");
    assert_eq!(c.data, b"x\",name\n1,a\n");
    assert_eq!(c.record_lines, vec![2, 3]);
    let c = header(b"id\\\nx,name\n1,a\n");
    assert_eq!(c.data, b"1,a\n");
    assert_eq!(c.record_lines, vec![3]);
}

/// With `ESCAPED BY '"'` and `ENCLOSED BY '"'`, a quote outside quotes
/// escapes only a quote: before a line end it is data and the line ends.
#[test]
fn an_escape_that_is_the_enclosure_escapes_only_itself() {
    let fmt = Format {
        escaped_by: Some(b'"'),
        ..Format::csv()
    };
    let c = all(b"a\"\nb,c\"\"d\n", fmt.clone(), Checks::default());
    assert_eq!(c.record_lines, vec![1, 2]);
    assert_eq!(
        crate::fields::records(&c.data, &fmt),
        vec![
            vec![Some(b"a\"".to_vec())],
            vec![Some(b"b".to_vec()), Some(b"c\"d".to_vec())]
        ]
    );
}

#[test]
fn chunks_end_at_record_boundaries() {
    let input: Vec<u8> = (0..1000)
        .flat_map(|i| format!("{i},\"v\n{i}\"\n").into_bytes())
        .collect();
    let v = chunks(
        &input,
        Format::csv(),
        Checks {
            fields: Some(2),
            ..Checks::default()
        },
        100,
    )
    .expect("chunks");
    assert!(v.len() > 10);
    let joined: Vec<u8> = v.iter().flat_map(|c| c.data.clone()).collect();
    assert_eq!(joined, input);
    let mut next = 0;
    for c in &v {
        assert_eq!(c.offset, next);
        next = c.end;
        assert!(c.data.ends_with(b"\"\n"));
    }
    assert_eq!(v.iter().map(Chunk::records).sum::<u64>(), 1000);
}

#[test]
fn errors_name_the_line() {
    let e = all_err(
        b"1,a\n2,b,c\n",
        Checks {
            fields: Some(2),
            ..Checks::default()
        },
    );
    assert_eq!(
        e.to_string(),
        "line 2 (byte offset 4): 3 field(s) where the table takes 2 (a ragged row?)"
    );
    let e = all_err(b"1,a\n2,\"open\n3,c\n", Checks::default());
    assert_eq!(
        e.to_string(),
        "line 2 (byte offset 6): unterminated \"-quoted field"
    );
    let e = all_err(
        b"1,a\n2,\xff\xfe\n",
        Checks {
            utf8: true,
            ..Checks::default()
        },
    );
    assert_eq!(
        e.to_string(),
        "line 2 (byte offset 6): invalid UTF-8 for a utf8 table"
    );
}

fn all_err(input: &[u8], checks: Checks) -> FlatError {
    chunks(input, Format::csv(), checks, usize::MAX).expect_err("must fail")
}

struct Trickle<'a>(&'a [u8]);
impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.0.is_empty() || buf.is_empty() {
            return Ok(0);
        }
        buf[0] = self.0[0];
        self.0 = &self.0[1..];
        Ok(1)
    }
}

fn csv_field(v: &Option<String>) -> String {
    match v {
        None => "\\N".into(),
        Some(s) if s.contains([',', '"', '\n', '\\']) || s.is_empty() => {
            format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\"\""))
        }
        Some(s) => s.clone(),
    }
}

proptest! {
    #[test]
    fn any_table_chunks_back_to_itself(
        rows in prop::collection::vec(prop::collection::vec(prop::option::of("[a-z0-9 ,\"\n\\\\]{0,8}"), 3), 1..40),
        target in 1usize..200,
        crlf in any::<bool>(),
    ) {
        let lt = if crlf { "\r\n" } else { "\n" };
        let input: String = rows.iter().map(|r| r.iter().map(csv_field).collect::<Vec<_>>().join(",") + lt).collect();
        let fmt = Format { lines_terminated_by: lt.as_bytes().to_vec(), ..Format::csv() };
        let checks = Checks { fields: Some(3), ..Checks::default() };
        let v = chunks(input.as_bytes(), fmt.clone(), checks.clone(), target).expect("chunks");
        let joined: Vec<u8> = v.iter().flat_map(|c| c.data.clone()).collect();
        prop_assert_eq!(&joined, input.as_bytes());
        prop_assert_eq!(v.iter().map(Chunk::records).sum::<u64>(), rows.len() as u64);
        // Reading one byte at a time finds the same boundaries.
        let mut slow = Chunker::new(Trickle(input.as_bytes()), fmt.clone(), checks.clone(), target);
        let mut n = 0;
        while let Some(c) = slow.next_chunk().expect("chunks") {
            prop_assert_eq!(&c, &v[n]);
            n += 1;
        }
        prop_assert_eq!(n, v.len());
        // The fields parse back to the rows.
        let parsed: Vec<Vec<Option<Vec<u8>>>> = v.iter().flat_map(|c| crate::fields::records(&c.data, &fmt)).collect();
        let want: Vec<Vec<Option<Vec<u8>>>> = rows.iter().map(|r| r.iter().map(|f| f.as_ref().map(|s| s.as_bytes().to_vec())).collect()).collect();
        prop_assert_eq!(parsed, want);
    }

    /// The chunker and the field reader (two readers of one syntax: one
    /// cuts, one reads values for INSERTs) agree on where records end,
    /// whatever the bytes and the format.
    #[test]
    fn the_chunker_and_the_field_reader_find_the_same_records(
        bytes in prop::collection::vec(prop::sample::select(b"ab,;\"'\\\n\r\t~N ".to_vec()), 0..200),
        which in 0usize..5,
        target in 1usize..40,
    ) {
        let fmt = match which {
            0 => Format::csv(),
            1 => Format::tsv(),
            2 => Format { escaped_by: Some(b'"'), ..Format::csv() },
            3 => Format { enclosed_by: Some(b'\''), fields_terminated_by: b";".to_vec(), lines_terminated_by: b"\r\n".to_vec(), ..Format::csv() },
            _ => Format { escaped_by: None, lines_terminated_by: b"~~".to_vec(), ..Format::csv() },
        };
        if let Ok(v) = chunks(&bytes, fmt.clone(), Checks::default(), target) {
            for c in v {
                prop_assert_eq!(crate::fields::records(&c.data, &fmt).len() as u64, c.records(), "{:?}", String::from_utf8_lossy(&c.data));
            }
        }
    }

    /// In a set whose characters hold ASCII bytes, with a binary
    /// column's field (read byte by byte) now and then: the chunker finds
    /// the same records reading a byte at a time as reading all at once
    /// (a character cut at a read's end is waited for, not guessed), and
    /// the field reader agrees with it.
    #[test]
    fn multibyte_files_chunk_the_same_however_they_are_read(
        bytes in prop::collection::vec(prop::sample::select(b"a,\"\\\n\t|\x95\xa4\x81\x30".to_vec()), 0..200),
        set in 0usize..4,
        tsv in any::<bool>(),
        binary_fields in prop::collection::vec(any::<bool>(), 0..3),
        target in 1usize..40,
    ) {
        use crate::format::Multibyte::{Big5, Gb18030, Gbk, Sjis};
        let charset = [Sjis, Big5, Gbk, Gb18030][set];
        let base = if tsv { Format::tsv() } else { Format::csv() };
        let fmt = Format { charset, binary_fields, ..base };
        let whole = chunks(&bytes, fmt.clone(), Checks::default(), target);
        let mut slow = Chunker::new(Trickle(&bytes), fmt.clone(), Checks::default(), target);
        let mut got = Vec::new();
        let trickled = loop {
            match slow.next_chunk() {
                Ok(Some(c)) => got.push(c),
                Ok(None) => break Ok(got),
                Err(e) => break Err(e),
            }
        };
        prop_assert_eq!(&whole, &trickled);
        if let Ok(v) = whole {
            for c in v {
                prop_assert_eq!(crate::fields::records(&c.data, &fmt).len() as u64, c.records(), "{:?}", String::from_utf8_lossy(&c.data));
            }
        }
    }

    #[test]
    fn never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300), target in 1usize..50) {
        let _ = chunks(&bytes, Format::csv(), Checks { fields: Some(2), utf8: true, header: false, server_assigns: None }, target);
        let sa = ServerAssigns { field: 1, column: "id".into(), zero_is_value: false };
        let _ = chunks(&bytes, Format::tsv(), Checks { server_assigns: Some(sa), ..Checks::default() }, target);
        let _ = chunks(&bytes, Format::tsv(), Checks::default(), target);
    }
}

#[test]
fn a_record_that_leaves_its_id_to_the_server_is_named() {
    for (v, zero_is_value, left) in [
        (None, false, true),
        (Some(&b"0"[..]), false, true),
        (Some(&b""[..]), false, true),
        (Some(&b" 0.4"[..]), false, true),
        (Some(&b"abc"[..]), false, true),
        (Some(&b"7"[..]), false, false),
        (Some(&b"0.5"[..]), false, false),
        (Some(&b"-3"[..]), false, false),
        (Some(&b"0"[..]), true, false),
        (None, true, true),
    ] {
        assert_eq!(
            leaves_id_to_server(v, zero_is_value),
            left,
            "{v:?} {zero_is_value}"
        );
    }
    // Plain digits first need no parse; anything else is parsed.
    assert!(plainly_nonzero_first(b"10\tx\n", 0, &Format::tsv()));
    assert!(!plainly_nonzero_first(b"0\tx\n", 0, &Format::tsv()));
    assert!(!plainly_nonzero_first(b"1.5\tx\n", 0, &Format::tsv()));
    assert!(!plainly_nonzero_first(b"10\tx\n", 1, &Format::tsv()));
    let checks = Checks {
        fields: Some(2),
        server_assigns: Some(ServerAssigns {
            field: 0,
            column: "id".into(),
            zero_is_value: false,
        }),
        ..Checks::default()
    };
    assert!(chunks(b"1\ta\n2\tb\n", Format::tsv(), checks.clone(), 4).is_ok());
    let e = chunks(b"1\ta\n2\tb\n\\N\tc\n", Format::tsv(), checks, 4).expect_err("NULL id");
    assert!(
        matches!(&e, FlatError::Record { line: 3, what, .. } if what.contains("`id`")),
        "{e}"
    );
}
