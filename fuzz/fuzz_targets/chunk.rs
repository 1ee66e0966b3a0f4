//! The CSV/TSV chunker and field parser must never panic, and chunks must
//! tile the input after the header (with and without the check of an
//! AUTO_INCREMENT field left to the server): for CSV, TSV, CSV with the
//! enclosure as the escape, and a layout the input's first four bytes
//! draw (separator, enclosure, escape, line end; 0 for none) when
//! `Format::check` takes it; each also in sjis, big5, gbk and gb18030,
//! whose characters hold ASCII bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_flat::{Checks, Chunker, Format, Multibyte, ServerAssigns};

fuzz_target!(|data: &[u8]| {
    let mut formats = vec![
        Format::csv(),
        Format::tsv(),
        Format {
            escaped_by: Some(b'"'),
            ..Format::csv()
        },
    ];
    if let [sep, enc, esc, eol, ..] = *data {
        let drawn = Format {
            fields_terminated_by: vec![sep],
            enclosed_by: (enc != 0).then_some(enc),
            escaped_by: (esc != 0).then_some(esc),
            lines_terminated_by: vec![eol],
            charset: Multibyte::AsciiSafe,
            binary_fields: Vec::new(),
        };
        if drawn.check().is_ok() {
            formats.push(drawn);
        }
    }
    let sets = [
        Multibyte::Sjis,
        Multibyte::Big5,
        Multibyte::Gbk,
        Multibyte::Gb18030,
    ];
    let in_sets: Vec<Format> = formats
        .iter()
        .flat_map(|f| {
            sets.iter().map(|&charset| Format {
                charset,
                ..f.clone()
            })
        })
        .filter(|f| f.check().is_ok())
        .collect();
    formats.extend(in_sets);
    for fmt in formats {
        for server_assigns in [
            None,
            Some(ServerAssigns {
                field: 0,
                column: "id".into(),
                zero_is_value: false,
            }),
        ] {
            let checks = Checks {
                fields: None,
                utf8: true,
                header: false,
                server_assigns,
            };
            let mut c = Chunker::new(data, fmt.clone(), checks, 64);
            let mut next = 0;
            while let Ok(Some(ch)) = c.next_chunk() {
                assert_eq!(ch.offset, next);
                assert_eq!(&data[ch.offset as usize..ch.end as usize], &ch.data[..]);
                next = ch.end;
                let _ = sqlfleet_flat::fields::records(&ch.data, &fmt);
            }
        }
    }
});
