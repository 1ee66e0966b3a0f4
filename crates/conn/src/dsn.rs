//! `mysql://user:pass@host:port/db?ssl-mode=REQUIRED&socket=/path` URLs.
//!
//! Schemes `mysql://` and `mariadb://`. User and password are
//! percent-decoded; hosts may be `[v6]`. Query parameters: `socket`,
//! `ssl-mode`, `ssl-ca`, `ssl-cert`, `ssl-key`, `ssl-capath`, `ssl-crl`,
//! `ssl-crlpath`, `tls-version`, `ssl-cipher` (`_` and `-` alike). Errors echo the DSN with the
//! password masked.

use crate::secret::Secret;
use crate::tls::SslMode;
use percent_encoding::percent_decode_str;

/// The parts a DSN may set; every field is optional.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dsn {
    pub user: Option<String>,
    pub password: Option<Secret>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub database: Option<String>,
    pub socket: Option<String>,
    pub ssl_mode: Option<SslMode>,
    pub ssl_ca: Option<String>,
    /// A client certificate (PEM) and its key, as the mysql client's
    /// `--ssl-cert` and `--ssl-key`.
    pub ssl_cert: Option<String>,
    pub ssl_key: Option<String>,
    /// The stock client's other TLS options (see `tls_policy`).
    pub ssl_capath: Option<String>,
    pub ssl_crl: Option<String>,
    pub ssl_crlpath: Option<String>,
    pub tls_version: Option<Vec<String>>,
    pub ssl_cipher: Option<Vec<String>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid DSN '{shown}': {what}")]
pub struct DsnError {
    /// The DSN with any password replaced by `****`.
    pub shown: String,
    pub what: String,
}

/// Replaces the password part of a URL-like string with `****`.
pub fn mask_password(dsn: &str) -> String {
    let Some(scheme_end) = dsn.find("://") else {
        return dsn.to_string();
    };
    let rest = &dsn[scheme_end + 3..];
    let auth_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..auth_end].rfind('@') else {
        return dsn.to_string();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:****{}",
            &dsn[..scheme_end + 3],
            &rest[..colon],
            &rest[at..]
        ),
        None => dsn.to_string(),
    }
}

impl Dsn {
    pub fn parse(input: &str) -> Result<Dsn, DsnError> {
        let err = |what: &str| DsnError {
            shown: mask_password(input),
            what: what.to_string(),
        };
        let rest = input
            .strip_prefix("mysql://")
            .or_else(|| input.strip_prefix("mariadb://"))
            .ok_or_else(|| err("must start with mysql:// or mariadb://"))?;
        let (before_query, query) = match rest.split_once('?') {
            Some((a, q)) => (a, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match before_query.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (before_query, None),
        };
        let mut dsn = Dsn::default();
        let hostport = match authority.rsplit_once('@') {
            Some((userinfo, hp)) => {
                let (u, p) = match userinfo.split_once(':') {
                    Some((u, p)) => (u, Some(p)),
                    None => (userinfo, None),
                };
                let u = decode(u).map_err(|_| err("user is not valid percent-encoded UTF-8"))?;
                if u.is_empty() {
                    return Err(err("empty user name before '@'"));
                }
                dsn.user = Some(u);
                if let Some(p) = p {
                    let p = decode(p)
                        .map_err(|_| err("password is not valid percent-encoded UTF-8"))?;
                    dsn.password = Some(Secret::new(p));
                }
                hp
            }
            None => authority,
        };
        // The one host[:port] reader (conn::addr); a DSN may leave the host out.
        let (h, port) = crate::addr::split_host_port(hostport).map_err(|w| err(&w.to_string()))?;
        if !h.is_empty() {
            let h = if hostport.starts_with('[') {
                h.to_string()
            } else {
                decode(h).map_err(|_| err("bad host encoding"))?
            };
            dsn.host = Some(h);
        }
        dsn.port = port;
        if let Some(db) = path {
            if db.contains('/') {
                return Err(err("path must be a single database name"));
            }
            if !db.is_empty() {
                dsn.database = Some(decode(db).map_err(|_| err("bad database encoding"))?);
            }
        }
        for pair in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| err(&format!("query parameter '{pair}' has no '='")))?;
            let v = decode(v).map_err(|_| err("bad parameter encoding"))?;
            match k.replace('_', "-").to_ascii_lowercase().as_str() {
                "socket" => dsn.socket = Some(v),
                "ssl-mode" | "sslmode" => {
                    dsn.ssl_mode = Some(v.parse().map_err(|e: String| err(&e))?);
                }
                "ssl-ca" => dsn.ssl_ca = Some(v),
                "ssl-cert" => dsn.ssl_cert = Some(v),
                "ssl-key" => dsn.ssl_key = Some(v),
                "ssl-capath" => dsn.ssl_capath = Some(v),
                "ssl-crl" => dsn.ssl_crl = Some(v),
                "ssl-crlpath" => dsn.ssl_crlpath = Some(v),
                "tls-version" => {
                    dsn.tls_version =
                        Some(crate::tls_policy::parse_versions(&v).map_err(|e| err(&e))?)
                }
                "ssl-cipher" => {
                    dsn.ssl_cipher =
                        Some(crate::tls_policy::parse_ciphers(&v).map_err(|e| err(&e))?)
                }
                other => return Err(err(&format!("unknown parameter '{other}'"))),
            }
        }
        Ok(dsn)
    }
}

fn decode(s: &str) -> Result<String, std::str::Utf8Error> {
    percent_decode_str(s).decode_utf8().map(|c| c.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_dsn() {
        let d = Dsn::parse(
            "mysql://al%40ice:p%3Ass@db.example:3307/shop?ssl-mode=REQUIRED&ssl_ca=/ca.pem",
        )
        .expect("valid");
        assert_eq!(d.user.as_deref(), Some("al@ice"));
        assert_eq!(d.password.as_ref().map(|p| p.expose()), Some("p:ss"));
        assert_eq!(d.host.as_deref(), Some("db.example"));
        assert_eq!(d.port, Some(3307));
        assert_eq!(d.database.as_deref(), Some("shop"));
        assert_eq!(d.ssl_mode, Some(SslMode::Required));
        assert_eq!(d.ssl_ca.as_deref(), Some("/ca.pem"));
    }

    #[test]
    fn every_tls_option_of_the_stock_client() {
        let d = Dsn::parse(
            "mysql://u@h/?ssl-cert=/c.pem&ssl_key=/k.pem&ssl-capath=/cas&ssl-crl=/crl.pem\
             &ssl-crlpath=/crls&tls-version=TLSv1.3&ssl-cipher=TLS_AES_256_GCM_SHA384",
        )
        .expect("valid");
        assert_eq!(d.ssl_cert.as_deref(), Some("/c.pem"));
        assert_eq!(d.ssl_key.as_deref(), Some("/k.pem"));
        assert_eq!(d.ssl_capath.as_deref(), Some("/cas"));
        assert_eq!(d.ssl_crl.as_deref(), Some("/crl.pem"));
        assert_eq!(d.ssl_crlpath.as_deref(), Some("/crls"));
        assert_eq!(d.tls_version, Some(vec!["TLSv1.3".to_string()]));
        assert_eq!(
            d.ssl_cipher,
            Some(vec!["TLS_AES_256_GCM_SHA384".to_string()])
        );
        let e = Dsn::parse("mysql://u@h/?ssl-cipher=HIGH:!aNULL").expect_err("refused");
        assert!(e.what.contains("not a cipher name"), "{e}");
    }

    #[test]
    fn partial_dsns() {
        let d = Dsn::parse("mariadb://root@[::1]:3306").expect("valid");
        assert_eq!(d.host.as_deref(), Some("::1"));
        assert_eq!(d.port, Some(3306));
        assert_eq!(d.password, None);
        let d = Dsn::parse("mysql://localhost/").expect("valid");
        assert_eq!(d.host.as_deref(), Some("localhost"));
        assert_eq!(d.database, None);
        let d = Dsn::parse("mysql:///db?socket=/run/x.sock").expect("valid");
        assert_eq!(d.host, None);
        assert_eq!(d.socket.as_deref(), Some("/run/x.sock"));
        // Empty password is a password.
        let d = Dsn::parse("mysql://u:@h").expect("valid");
        assert_eq!(d.password.as_ref().map(|p| p.expose()), Some(""));
    }

    #[test]
    fn bad_dsns_are_clear_and_masked() {
        let cases = [
            ("postgres://u@h/db", "must start with mysql://"),
            (
                "mysql://u:secret@h:99999/db",
                "port '99999' is not a number",
            ),
            ("mysql://u:secret@h:abc/db", "port 'abc'"),
            ("mysql://u:secret@h:0", "port '0'"),
            ("mysql://u:secret@[::1/db", "closing ']'"),
            ("mysql://u:secret@::1/db", "brackets"),
            ("mysql://:secret@h/db", "empty user"),
            ("mysql://u:secret@h/a/b", "single database"),
            ("mysql://u:secret@h/db?foo=1", "unknown parameter 'foo'"),
            ("mysql://u:secret@h/db?ssl-mode=SOMETIMES", "SOMETIMES"),
            ("mysql://u:secret@h/db?flag", "has no '='"),
            ("mysql://u:%ff@h/db", "password is not valid"),
        ];
        for (dsn, want) in cases {
            let e = Dsn::parse(dsn).expect_err(dsn).to_string();
            assert!(e.contains(want), "{dsn}: {e}");
            assert!(!e.contains("secret"), "password leaked: {e}");
        }
    }

    #[test]
    fn masking() {
        assert_eq!(mask_password("mysql://u:pw@h/db"), "mysql://u:****@h/db");
        assert_eq!(mask_password("mysql://u@h/db"), "mysql://u@h/db");
        assert_eq!(mask_password("mysql://u:p@w@h/db"), "mysql://u:****@h/db");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,80}") {
            let _ = Dsn::parse(&s);
            let _ = Dsn::parse(&format!("mysql://{s}"));
        }

        #[test]
        fn errors_never_show_password(pw in "[a-zA-Z0-9]{6,12}", junk in "[:/@?&=a-z0-9\\[\\]]{0,12}") {
            let dsn = format!("mysql://user:{pw}@{junk}");
            if let Err(e) = Dsn::parse(&dsn) {
                proptest::prop_assert!(!e.to_string().contains(&pw));
            }
        }
    }
}
