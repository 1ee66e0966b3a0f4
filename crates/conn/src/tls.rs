//! `--ssl-mode` and `--ssl-ca`, with the mysql client's meanings.

use std::fmt;
use std::str::FromStr;

/// How hard to insist on TLS, as the mysql client's `--ssl-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    /// Plain TCP.
    Disabled,
    /// TLS when the server offers it, plain otherwise; no certificate checks.
    #[default]
    Preferred,
    /// TLS or fail; no certificate checks.
    Required,
    /// TLS, certificate must chain to `--ssl-ca` (or the system roots).
    VerifyCa,
    /// As `VerifyCa`, and the certificate must name the host.
    VerifyIdentity,
}

impl FromStr for SslMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().replace('-', "_").as_str() {
            "DISABLED" => Ok(SslMode::Disabled),
            "PREFERRED" => Ok(SslMode::Preferred),
            "REQUIRED" => Ok(SslMode::Required),
            "VERIFY_CA" => Ok(SslMode::VerifyCa),
            "VERIFY_IDENTITY" => Ok(SslMode::VerifyIdentity),
            _ => Err(format!(
                "ssl-mode '{s}' is not one of DISABLED, PREFERRED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY"
            )),
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SslMode::Disabled => "DISABLED",
            SslMode::Preferred => "PREFERRED",
            SslMode::Required => "REQUIRED",
            SslMode::VerifyCa => "VERIFY_CA",
            SslMode::VerifyIdentity => "VERIFY_IDENTITY",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_spellings() {
        assert_eq!("disabled".parse(), Ok(SslMode::Disabled));
        assert_eq!("Verify-CA".parse(), Ok(SslMode::VerifyCa));
        assert_eq!("VERIFY_IDENTITY".parse(), Ok(SslMode::VerifyIdentity));
        assert!("maybe".parse::<SslMode>().is_err());
        for m in [
            SslMode::Disabled,
            SslMode::Preferred,
            SslMode::Required,
            SslMode::VerifyCa,
            SslMode::VerifyIdentity,
        ] {
            assert_eq!(m.to_string().parse(), Ok(m));
        }
    }
}
