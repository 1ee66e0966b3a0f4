//! The relay's handshake parsers take bytes from strangers: never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sqlfleet_wire::handshake::parse_client_hello(data);
    let _ = sqlfleet_wire::handshake::parse_server_hello(data);
    let _ = sqlfleet_wire::packet::parse_err(data);
});
