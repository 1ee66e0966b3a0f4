//! Reply packets from a server (rows, errors) read by query's client must
//! never panic it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let n = data.first().copied().unwrap_or(0) as usize % 16;
    let _ = sqlfleet_wire::client::row(data.get(1..).unwrap_or_default(), n);
    let _ = sqlfleet_wire::packet::server_error(data);
});
