//! A mydumper directory's file names and metadata are outside bytes:
//! planning them never panics, and a plan runs each listed file once.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_dump::mydumper::{metadata, plan, Step, METADATA};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = metadata(&text);
    let mut names: Vec<String> = text.lines().map(str::to_owned).collect();
    names.push(METADATA.into());
    for into in [None, Some("x")] {
        if let Ok(p) = plan(&names, into) {
            let files: Vec<&String> = p
                .steps
                .iter()
                .filter_map(|s| match s {
                    Step::File(f) => Some(f),
                    Step::Sql(_) => None,
                })
                .collect();
            let mut unique = files.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), files.len(), "a file planned twice");
            assert!(files.iter().all(|f| names.contains(f)));
        }
    }
});
