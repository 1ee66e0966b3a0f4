//! Reading a table statement's engine for a Galera target must never
//! panic, whatever the bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = sqlfleet_load::galera::table_engine(data);
    let c = sqlfleet_load::galera::Cluster {
        name: "g".into(),
        max_ws_size: 1 << 20,
        max_ws_rows: 0,
        default_engine: "INNODB".into(),
        mariadb: true,
    };
    let _ = sqlfleet_load::galera::check(data, 1, &c);
});
