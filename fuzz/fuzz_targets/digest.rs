//! The statement normalizer (relay query rules and statistics, watch's top
//! statements) must never panic on any bytes, and gives one digest for
//! one text.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_dump::digest::digest;

fuzz_target!(|data: &[u8]| {
    assert_eq!(digest(data), digest(data));
});
