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

/// A certificate authority and what it signed, for tests that need a
/// client certificate: `ca.pem`, a server certificate for `localhost`
/// and 127.0.0.1 (`server-cert.pem`, `server-key.pem`), and a client
/// certificate with common name `client_cn` (`client-cert.pem`,
/// `client-key.pem`), also as X.509 version 1 (what `openssl x509 -req`
/// makes without extensions: `client-v1-cert.pem`, `client-v1-key.pem`).
pub struct Authority {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub client_v1_cert: PathBuf,
    pub client_v1_key: PathBuf,
}

/// Makes an [`Authority`] in `dir` with the openssl command.
pub fn authority(dir: &Path, client_cn: &str) -> Authority {
    let run = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl (apt-get install openssl)");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=sqlfleet test CA",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca.pem",
    ]);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .expect("server.ext");
    std::fs::write(dir.join("client.ext"), "basicConstraints=CA:FALSE\n").expect("client.ext");
    let sign = |name: &str, cn: &str, ext: Option<&str>| {
        let (key, csr, cert) = (
            format!("{name}-key.pem"),
            format!("{name}.csr"),
            format!("{name}-cert.pem"),
        );
        let subj = format!("/CN={cn}");
        run(&[
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", &subj, "-keyout", &key, "-out", &csr,
        ]);
        let mut args = vec![
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &cert,
        ];
        if let Some(e) = ext {
            args.extend(["-extfile", e]);
        }
        run(&args);
    };
    sign("server", "localhost", Some("server.ext"));
    sign("client", client_cn, Some("client.ext"));
    sign("client-v1", client_cn, None);
    Authority {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server-cert.pem"),
        server_key: dir.join("server-key.pem"),
        client_cert: dir.join("client-cert.pem"),
        client_key: dir.join("client-key.pem"),
        client_v1_cert: dir.join("client-v1-cert.pem"),
        client_v1_key: dir.join("client-v1-key.pem"),
    }
}

/// A revocation list signed by `a`'s CA in `dir`/`name`: revoking the
/// server's certificate when `revoke_server`, else empty.
pub fn crl(dir: &Path, a: &Authority, name: &str, revoke_server: bool) -> PathBuf {
    let db = dir.join(format!("{name}.db"));
    std::fs::create_dir_all(&db).expect("crl db");
    std::fs::write(db.join("index.txt"), "").expect("index");
    std::fs::write(db.join("crlnumber"), "01\n").expect("crlnumber");
    let cnf = db.join("ca.cnf");
    std::fs::write(
        &cnf,
        format!(
            "[ca]\ndefault_ca = test\n[test]\ndatabase = {}\ncrlnumber = {}\ndefault_md = sha256\ndefault_crl_days = 2\n",
            db.join("index.txt").display(),
            db.join("crlnumber").display()
        ),
    )
    .expect("ca.cnf");
    let key = a.ca.with_file_name("ca-key.pem");
    let run = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .arg("-config")
            .arg(&cnf)
            .arg("-keyfile")
            .arg(&key)
            .arg("-cert")
            .arg(&a.ca)
            .output()
            .expect("openssl");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    if revoke_server {
        let cert = a.server_cert.display().to_string();
        run(&["ca", "-revoke", &cert]);
    }
    let out = dir.join(name);
    let out_s = out.display().to_string();
    run(&["ca", "-gencrl", "-out", &out_s]);
    out
}

/// A directory holding `a`'s CA certificate under OpenSSL's hashed name
/// (`HASH.0`), as `ssl-capath` expects it.
pub fn hashed_ca_dir(dir: &Path, a: &Authority) -> PathBuf {
    let o = Command::new("openssl")
        .args(["x509", "-hash", "-noout", "-in"])
        .arg(&a.ca)
        .output()
        .expect("openssl");
    assert!(o.status.success());
    let hash = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let d = dir.join("capath");
    std::fs::create_dir_all(&d).expect("capath");
    std::fs::copy(&a.ca, d.join(format!("{hash}.0"))).expect("copy");
    d
}
