//! A credential store file from disk (damaged, foreign, hostile) must give
//! an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("sqlfleet-fuzz-creds-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join("creds.age");
    if std::fs::write(&p, data).is_ok() {
        let _ = sqlfleet_watch::creds::load(&p, "fuzz");
    }
});
