//! Option files, DSNs, server addresses and client certificates from
//! outside must never panic their parsers.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sqlfleet_conn::tls::public_key_info(data);
    if let Ok(s) = std::str::from_utf8(data) {
        let mut f = sqlfleet_conn::optfile::OptionFiles::default();
        let _ = f.parse_str(s, std::path::Path::new("fuzz.cnf"));
        let _ = sqlfleet_conn::Dsn::parse(s);
        let _ = sqlfleet_conn::addr::parse_address(s, 3306);
    }
});
