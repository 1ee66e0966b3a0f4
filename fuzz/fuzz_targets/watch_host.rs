//! What a watched host sends back — the SSH session's /proc blocks and
//! replication status rows of any flavour — must never panic the parsers.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let a = sqlfleet_watch::ssh::parse_block(&lines);
    let _ = sqlfleet_watch::ssh::metrics(Some(&a), &a);
    let row: sqlfleet_watch::sample::Row = lines
        .chunks(2)
        .map(|c| (c[0].clone(), c.get(1).cloned()))
        .collect();
    let _ = sqlfleet_watch::sample::Channel::from_row(&row);
});
