//! A self-signed certificate and key for a test's TLS server (made with
//! the openssl command, which scripts/deps.sh installs).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes `cert.pem` and `key.pem` for common name `cn` into `dir`;
/// returns their paths.
pub fn self_signed(dir: &Path, cn: &str) -> (PathBuf, PathBuf) {
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    let o = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .arg("-subj")
        .arg(format!("/CN={cn}"))
        .arg("-keyout")
        .arg(&k)
        .arg("-out")
        .arg(&c)
        .output()
        .expect("openssl (apt-get install openssl)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (c, k)
}
