//! The CSV/TSV chunker and field parser must never panic, and chunks must
//! tile the input after the header.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_flat::{Checks, Chunker, Format};

fuzz_target!(|data: &[u8]| {
    for fmt in [Format::csv(), Format::tsv()] {
        let mut c = Chunker::new(data, fmt.clone(), Checks { fields: None, utf8: true, header: false }, 64);
        let mut next = 0;
        while let Ok(Some(ch)) = c.next_chunk() {
            assert_eq!(ch.offset, next);
            assert_eq!(&data[ch.offset as usize..ch.end as usize], &ch.data[..]);
            next = ch.end;
            let _ = sqlfleet_flat::fields::records(&ch.data, &fmt);
        }
    }
});
