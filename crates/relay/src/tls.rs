//! The acceptor clients connect to (the connector towards backends is
//! conn's, shared with every command).

use std::sync::Arc;

use sqlfleet_conn::tls::TlsError;

/// A TLS acceptor from PEM files.
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| TlsError::file(cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::file(cert, e))?;
    if certs.is_empty() {
        return Err(TlsError::file(cert, "no certificate found"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::file(key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| TlsError::Config(format!("certificate/key: {e}")))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
