//! The CSV/TSV chunker and field parser must never panic, and chunks must
//! tile the input after the header (with and without the check of an
//! AUTO_INCREMENT field left to the server).
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_flat::{Checks, Chunker, Format, ServerAssigns};

fuzz_target!(|data: &[u8]| {
    for fmt in [Format::csv(), Format::tsv()] {
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
