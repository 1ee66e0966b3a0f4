//! `--ssl-mode`, `--ssl-ca` and a client certificate (`--ssl-cert`,
//! `--ssl-key`), with the mysql client's meanings, and the one TLS
//! connector that carries them out.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

pub use crate::client_cert::{public_key_info, ClientCert};

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

/// Accepts any server certificate (TLS `required` without a CA to check
/// against, as the mysql client's --ssl without --ssl-verify-server-cert).
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--ssl-mode {0} needs --ssl-ca or --ssl-capath (the CA to check the server's certificate against)")]
    NeedsCa(SslMode),
    /// A certificate, key or CA file that cannot be read or used.
    #[error("{}: {what}", path.display())]
    File {
        path: std::path::PathBuf,
        what: String,
    },
    /// `--ssl-key` without `--ssl-cert`.
    #[error("--ssl-key {} is given without --ssl-cert (the certificate it is the key of)", .0.display())]
    KeyWithoutCert(std::path::PathBuf),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}

impl TlsError {
    /// A file's error, naming the file.
    pub fn file(path: &std::path::Path, what: impl std::fmt::Display) -> TlsError {
        TlsError::File {
            path: path.to_path_buf(),
            what: what.to_string(),
        }
    }
}

/// Why switching a login to TLS failed.
#[derive(Debug, thiserror::Error)]
pub enum StartTlsError {
    /// The SSL request could not be sent.
    #[error("{0}")]
    Wire(#[from] sqlfleet_wire::WireError),
    /// The host is no name a certificate can carry.
    #[error("server name {host}: {why}")]
    Name { host: String, why: String },
    /// The TLS handshake failed (certificate refused, connection lost).
    #[error("{0}")]
    Handshake(std::io::Error),
}

/// The one way a login switches to TLS: the SSL request (capabilities
/// `caps`, MariaDB's `ext`, `collation`, sequence 1), then the TLS
/// handshake with `host` as the server name. The login goes on over the
/// returned stream at sequence 2.
pub async fn start<S>(
    mut raw: S,
    connector: &tokio_rustls::TlsConnector,
    host: &str,
    caps: u32,
    ext: u32,
    collation: u8,
) -> Result<tokio_rustls::client::TlsStream<S>, StartTlsError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let request = sqlfleet_wire::handshake::ssl_request(caps, ext, collation);
    sqlfleet_wire::packet::write(&mut raw, 1, &request).await?;
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
        StartTlsError::Name {
            host: host.to_string(),
            why: e.to_string(),
        }
    })?;
    connector
        .connect(name, raw)
        .await
        .map_err(StartTlsError::Handshake)
}

/// The TLS connector for `mode`: `None` for DISABLED; PREFERRED and
/// REQUIRED accept any certificate (encryption without verification, as
/// the mysql client); VERIFY_CA checks the chain against `ca` but not the
/// name; VERIFY_IDENTITY checks both. The one connector every command and
/// the relay's backend side use. `client`: the certificate to show the server.
pub fn connector(
    mode: SslMode,
    ca: Option<&std::path::Path>,
    client: Option<ClientCert<'_>>,
    checks: &crate::tls_policy::TlsChecks,
) -> Result<Option<tokio_rustls::TlsConnector>, TlsError> {
    match mode {
        SslMode::Disabled => Ok(None),
        SslMode::Preferred | SslMode::Required => {
            tls_connector(None, true, client, checks).map(Some)
        }
        SslMode::VerifyCa | SslMode::VerifyIdentity => {
            let verify = Verify::read(mode, ca, checks)?;
            tls_connector(
                Some(verify),
                mode == SslMode::VerifyIdentity,
                client,
                checks,
            )
            .map(Some)
        }
    }
}

/// What a verifying mode checks the server's certificate against: the
/// CA file and the CA directory's certificates, and any revocation lists.
struct Verify {
    roots: rustls::RootCertStore,
    crls: Vec<rustls::pki_types::CertificateRevocationListDer<'static>>,
    /// The file named in errors about the chain.
    named: std::path::PathBuf,
}

impl Verify {
    fn read(
        mode: SslMode,
        ca: Option<&std::path::Path>,
        checks: &crate::tls_policy::TlsChecks,
    ) -> Result<Verify, TlsError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, CertificateRevocationListDer};
        let here = std::path::Path::new(".");
        let files = checks
            .ca_files(ca)
            .map_err(|e| TlsError::file(checks.capath.as_deref().unwrap_or(here), e))?;
        let Some(named) = files.first().cloned() else {
            return Err(TlsError::NeedsCa(mode));
        };
        let mut roots = rustls::RootCertStore::empty();
        for f in &files {
            for c in CertificateDer::pem_file_iter(f).map_err(|e| TlsError::file(f, e))? {
                let c = c.map_err(|e| TlsError::file(f, e))?;
                roots.add(c).map_err(|e| TlsError::file(f, e))?;
            }
        }
        let crl_files = checks
            .crl_files()
            .map_err(|e| TlsError::file(checks.crlpath.as_deref().unwrap_or(here), e))?;
        let mut crls = Vec::new();
        for f in &crl_files {
            for c in
                CertificateRevocationListDer::pem_file_iter(f).map_err(|e| TlsError::file(f, e))?
            {
                crls.push(c.map_err(|e| TlsError::file(f, e))?);
            }
        }
        Ok(Verify { roots, crls, named })
    }
}

fn tls_connector(
    verify: Option<Verify>,
    check_name: bool,
    client: Option<ClientCert<'_>>,
    checks: &crate::tls_policy::TlsChecks,
) -> Result<tokio_rustls::TlsConnector, TlsError> {
    let mut provider = rustls::crypto::ring::default_provider();
    let (versions, suites) = checks
        .offer(&provider.cipher_suites)
        .map_err(TlsError::Config)?;
    provider.cipher_suites = suites;
    let provider = Arc::new(provider);
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match verify {
        Some(v) => {
            let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(v.roots),
                provider.clone(),
            )
            .with_crls(v.crls)
            .build()
            .map_err(|e| TlsError::file(&v.named, e))?;
            if check_name {
                builder.dangerous().with_custom_certificate_verifier(inner)
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
            }
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider.clone()))),
    };
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(c) => builder.with_client_cert_resolver(Arc::new(
            rustls::sign::SingleCertAndKey::from(c.certified(&provider)?),
        )),
    };
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// VERIFY_CA: the chain must lead to the CA; the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
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
