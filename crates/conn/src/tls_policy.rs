//! The stock client's other TLS options, as sqlfleet holds a connection
//! to them: `ssl-capath` (a directory of CA certificates under OpenSSL's
//! hashed names), `ssl-crl` and `ssl-crlpath` (revocation lists, checked
//! when the certificate is), `tls-version` and `ssl-cipher` (what the
//! connection may use, checked against what the server reports it uses:
//! `Ssl_version` and `Ssl_cipher`, so both kinds of login are held to the
//! same answer).

use std::path::{Path, PathBuf};

/// The TLS options beyond `--ssl-mode`, `--ssl-ca` and the client
/// certificate; all empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsChecks {
    /// `ssl-capath`: CA certificates, one per file named `HASH.N`.
    pub capath: Option<PathBuf>,
    /// `ssl-crl`: a file of revocation lists (PEM).
    pub crl: Option<PathBuf>,
    /// `ssl-crlpath`: revocation lists, one per file named `HASH.rN`.
    pub crlpath: Option<PathBuf>,
    /// `tls-version`: the protocol versions allowed (`TLSv1.2`, ...).
    pub versions: Vec<String>,
    /// `ssl-cipher`: the cipher names allowed, as the server names them.
    pub ciphers: Vec<String>,
}

/// The versions rustls speaks; a `tls-version` naming none of them could
/// never be met.
const SPOKEN: [&str; 2] = ["TLSv1.2", "TLSv1.3"];

/// Reads `tls-version` (`TLSv1.2,TLSv1.3`, as the stock client takes it).
pub fn parse_versions(v: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for t in v.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let known = ["TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3"];
        let Some(k) = known.iter().find(|k| k.eq_ignore_ascii_case(t)) else {
            return Err(format!(
                "'{t}' is not one of TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3"
            ));
        };
        out.push(k.to_string());
    }
    if !out.iter().any(|v| SPOKEN.contains(&v.as_str())) {
        return Err(format!(
            "'{v}' allows no version sqlfleet speaks (TLSv1.2 and TLSv1.3)"
        ));
    }
    Ok(out)
}

/// Reads `ssl-cipher`: cipher names separated by `:` (or `,`), as the
/// server names them in `Ssl_cipher` (`ECDHE-RSA-AES256-GCM-SHA384`,
/// `TLS_AES_256_GCM_SHA384`). OpenSSL's cipher expressions (`HIGH`,
/// `!aNULL`, `+RSA`, `@STRENGTH`) are refused: sqlfleet does not speak
/// OpenSSL and cannot tell what one would allow.
pub fn parse_ciphers(v: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for t in v.split([':', ',']).map(str::trim).filter(|t| !t.is_empty()) {
        let name_like = t.len() > 4
            && (t.contains('-') || t.contains('_'))
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !name_like {
            return Err(format!(
                "'{t}' is not a cipher name: list the ciphers by the names the server reports in Ssl_cipher (e.g. ECDHE-RSA-AES256-GCM-SHA384:TLS_AES_256_GCM_SHA384); OpenSSL's cipher expressions are not read"
            ));
        }
        out.push(t.to_ascii_uppercase());
    }
    if out.is_empty() {
        return Err("names no cipher".into());
    }
    Ok(out)
}

/// rustls' suites by the names the server reports them under (OpenSSL's).
const SUITE_NAMES: [(rustls::CipherSuite, &str); 9] = [
    (
        rustls::CipherSuite::TLS13_AES_256_GCM_SHA384,
        "TLS_AES_256_GCM_SHA384",
    ),
    (
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
        "TLS_AES_128_GCM_SHA256",
    ),
    (
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        "TLS_CHACHA20_POLY1305_SHA256",
    ),
    (
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-ECDSA-AES256-GCM-SHA384",
    ),
    (
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-ECDSA-AES128-GCM-SHA256",
    ),
    (
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-ECDSA-CHACHA20-POLY1305",
    ),
    (
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-RSA-AES256-GCM-SHA384",
    ),
    (
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-RSA-AES128-GCM-SHA256",
    ),
    (
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-RSA-CHACHA20-POLY1305",
    ),
];

/// What the server says a session's TLS is (two rows: name, value).
pub const SESSION_TLS_SQL: &str =
    "SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')";

impl TlsChecks {
    /// Checks the server's answer to [`SESSION_TLS_SQL`].
    pub fn allows_status(&self, rows: &[(String, String)]) -> Result<(), String> {
        let of = |name: &str| {
            rows.iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
                .unwrap_or_default()
        };
        self.allows(of("Ssl_version"), of("Ssl_cipher"))
    }

    /// Whether anything must be checked once logged in.
    pub fn checks_session(&self) -> bool {
        !self.versions.is_empty() || !self.ciphers.is_empty()
    }

    /// Whether a session that uses `version` and `cipher` (the server's
    /// `Ssl_version` and `Ssl_cipher`; empty on a plain connection) is
    /// one these options allow. Plain text is not these options' concern
    /// (the stock client's `tls-version` does not ask for TLS either).
    /// A TLS 1.3 suite is allowed by a list that names none (OpenSSL
    /// keeps its TLS 1.3 suites then, as the stock client shows).
    pub fn allows(&self, version: &str, cipher: &str) -> Result<(), String> {
        if version.is_empty() {
            return Ok(());
        }
        if !self.versions.is_empty() && !self.versions.iter().any(|v| v == version) {
            return Err(format!(
                "the connection uses {version}, which tls-version ({}) does not allow",
                self.versions.join(",")
            ));
        }
        let is13 = |c: &str| c.starts_with("TLS_");
        let named13 = self.ciphers.iter().any(|c| is13(c));
        let cipher = cipher.to_ascii_uppercase();
        let allowed = self.ciphers.is_empty()
            || self.ciphers.contains(&cipher)
            || (version == "TLSv1.3" && !named13);
        if !allowed {
            return Err(format!(
                "the connection uses the cipher {cipher}, which ssl-cipher ({}) does not allow",
                self.ciphers.join(":")
            ));
        }
        Ok(())
    }

    /// What sqlfleet's own logins offer, as the stock client narrows its
    /// offer: the versions `tls-version` allows, and the suites
    /// `ssl-cipher` names (every TLS 1.3 suite when it names none, as
    /// OpenSSL keeps them). `all`: the provider's suites.
    pub fn offer(
        &self,
        all: &[rustls::SupportedCipherSuite],
    ) -> Result<
        (
            Vec<&'static rustls::SupportedProtocolVersion>,
            Vec<rustls::SupportedCipherSuite>,
        ),
        String,
    > {
        let allowed = |v: &str| self.versions.is_empty() || self.versions.iter().any(|x| x == v);
        let mut versions = Vec::new();
        if allowed("TLSv1.3") {
            versions.push(&rustls::version::TLS13);
        }
        if allowed("TLSv1.2") {
            versions.push(&rustls::version::TLS12);
        }
        let named13 = self.ciphers.iter().any(|c| c.starts_with("TLS_"));
        let suites: Vec<_> = all
            .iter()
            .filter(|s| {
                let name = SUITE_NAMES
                    .iter()
                    .find(|(id, _)| *id == s.suite())
                    .map(|(_, n)| *n)
                    .unwrap_or_default();
                let is13 = name.starts_with("TLS_");
                self.ciphers.is_empty()
                    || self.ciphers.iter().any(|c| c == name)
                    || (is13 && !named13)
            })
            .copied()
            .collect();
        let usable = suites
            .iter()
            .any(|s| versions.iter().any(|v| v.version == s.version().version));
        if !usable {
            return Err(format!(
                "no cipher sqlfleet has is both in ssl-cipher ({}) and of a version tls-version allows ({})",
                self.ciphers.join(":"),
                if self.versions.is_empty() { "any".to_string() } else { self.versions.join(",") }
            ));
        }
        Ok((versions, suites))
    }

    /// The CA files a verifying login trusts: `ca`, then the CA
    /// directory's certificates.
    pub fn ca_files(&self, ca: Option<&Path>) -> std::io::Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = ca.map(|c| vec![c.to_path_buf()]).unwrap_or_default();
        if let Some(dir) = &self.capath {
            files.extend(TlsChecks::hashed_files(dir, false)?);
        }
        Ok(files)
    }

    /// The revocation list files: `crl`, then the directory's lists.
    pub fn crl_files(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut files: Vec<PathBuf> = self.crl.iter().cloned().collect();
        if let Some(dir) = &self.crlpath {
            files.extend(TlsChecks::hashed_files(dir, true)?);
        }
        Ok(files)
    }

    /// The files of `dir` named as OpenSSL looks them up (`HASH.N` for
    /// certificates, `HASH.rN` for revocation lists), in name order.
    pub fn hashed_files(dir: &Path, crl: bool) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if hashed_name(name, crl) {
                out.push(p);
            }
        }
        out.sort();
        Ok(out)
    }
}

/// `5d8b12a3.0` (certificate) or `5d8b12a3.r0` (revocation list).
fn hashed_name(name: &str, crl: bool) -> bool {
    let Some((hash, n)) = name.split_once('.') else {
        return false;
    };
    let n = if crl {
        match n.strip_prefix('r') {
            Some(n) => n,
            None => return false,
        }
    } else {
        n
    };
    hash.len() == 8
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_session_may_use() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        // (tls-version, ssl-cipher, Ssl_version, Ssl_cipher, allowed)
        type Row<'a> = (&'a [&'a str], &'a [&'a str], &'a str, &'a str, bool);
        let rows: &[Row] = &[
            (&[], &[], "TLSv1.3", "TLS_AES_256_GCM_SHA384", true),
            (
                &["TLSv1.3"],
                &[],
                "TLSv1.2",
                "ECDHE-RSA-AES256-GCM-SHA384",
                false,
            ),
            (
                &["TLSv1.2", "TLSv1.3"],
                &[],
                "TLSv1.2",
                "ECDHE-RSA-AES256-GCM-SHA384",
                true,
            ),
            (&["TLSv1.3"], &[], "", "", true),
            (
                &[],
                &["AES256-SHA"],
                "TLSv1.3",
                "TLS_AES_256_GCM_SHA384",
                true,
            ),
            (
                &[],
                &["AES256-SHA"],
                "TLSv1.2",
                "ECDHE-RSA-AES256-GCM-SHA384",
                false,
            ),
            (
                &[],
                &["ECDHE-RSA-AES256-GCM-SHA384"],
                "TLSv1.2",
                "ECDHE-RSA-AES256-GCM-SHA384",
                true,
            ),
            (
                &[],
                &["TLS_AES_128_GCM_SHA256"],
                "TLSv1.3",
                "TLS_AES_256_GCM_SHA384",
                false,
            ),
            (
                &[],
                &["TLS_AES_128_GCM_SHA256"],
                "TLSv1.3",
                "TLS_AES_128_GCM_SHA256",
                true,
            ),
            (
                &[],
                &["ECDHE-RSA-AES256-GCM-SHA384"],
                "TLSv1.2",
                "ecdhe-rsa-aes256-gcm-sha384",
                true,
            ),
        ];
        for (versions, ciphers, got_v, got_c, want) in rows {
            let c = TlsChecks {
                versions: v(versions),
                ciphers: v(ciphers),
                ..TlsChecks::default()
            };
            assert_eq!(
                c.allows(got_v, got_c).is_ok(),
                *want,
                "{versions:?} {ciphers:?} {got_v} {got_c}"
            );
        }
    }

    #[test]
    fn versions_and_ciphers_as_the_stock_client_writes_them() {
        assert_eq!(
            parse_versions("TLSv1.2,tlsv1.3"),
            Ok(vec!["TLSv1.2".into(), "TLSv1.3".into()])
        );
        assert!(parse_versions("TLSv1.1").is_err());
        assert!(parse_versions("SSLv3").is_err());
        assert_eq!(
            parse_ciphers("ECDHE-RSA-AES256-GCM-SHA384:TLS_AES_256_GCM_SHA384"),
            Ok(vec![
                "ECDHE-RSA-AES256-GCM-SHA384".into(),
                "TLS_AES_256_GCM_SHA384".into()
            ])
        );
        for bad in [
            "HIGH",
            "!aNULL",
            "HIGH:!aNULL",
            "+RSA",
            "@STRENGTH",
            "",
            "DEFAULT",
        ] {
            assert!(parse_ciphers(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hashed_names_as_openssl_looks_them_up() {
        for (name, crl, want) in [
            ("5d8b12a3.0", false, true),
            ("5d8b12a3.12", false, true),
            ("5d8b12a3.r0", true, true),
            ("5d8b12a3.r0", false, false),
            ("5d8b12a3.0", true, false),
            ("ca.pem", false, false),
            ("5d8b12a.0", false, false),
            ("5d8b12a3.", false, false),
        ] {
            assert_eq!(hashed_name(name, crl), want, "{name} {crl}");
        }
    }
}
