//! A client certificate and its key (`--ssl-cert`, `--ssl-key`), read and
//! checked before a login shows them.
//!
//! rustls checks that a key is its certificate's only for certificates
//! it can parse itself, and it cannot parse version 1 certificates, which
//! `openssl x509 -req` makes when no extension is given and which the
//! stock client shows without complaint. So the certificate's public key
//! (its SubjectPublicKeyInfo) is found here by walking the DER by hand,
//! for every version: a wrong key is refused naming both files, instead of
//! a TLS alert from the server that reads as a lost connection.

use std::path::Path;
use std::sync::Arc;

use crate::tls::TlsError;

/// A client certificate chain and its private key, PEM files (as the
/// mysql client's `--ssl-cert` and `--ssl-key`): what an account made
/// `REQUIRE X509`, `SUBJECT` or `ISSUER` must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCert<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
}

impl<'a> ClientCert<'a> {
    /// From the two options: the key is read from the certificate's file
    /// when not given (as the MariaDB client reads it); a key without a
    /// certificate is refused (the stock client would send neither).
    pub fn of(
        cert: Option<&'a Path>,
        key: Option<&'a Path>,
    ) -> Result<Option<ClientCert<'a>>, TlsError> {
        match (cert, key) {
            (None, None) => Ok(None),
            (Some(cert), key) => Ok(Some(ClientCert {
                cert,
                key: key.unwrap_or(cert),
            })),
            (None, Some(key)) => Err(TlsError::KeyWithoutCert(key.to_path_buf())),
        }
    }

    /// The chain and the key, read, loaded by `provider` and checked to
    /// belong together.
    pub(crate) fn certified(
        self,
        provider: &rustls::crypto::CryptoProvider,
    ) -> Result<rustls::sign::CertifiedKey, TlsError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_file_iter(self.cert)
            .map_err(|e| TlsError::file(self.cert, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::file(self.cert, e))?;
        let Some(first) = chain.first() else {
            return Err(TlsError::file(self.cert, "no certificate in the file"));
        };
        let Some(cert_key) = public_key_info(first) else {
            return Err(TlsError::file(
                self.cert,
                "not a readable X.509 certificate",
            ));
        };
        let key = PrivateKeyDer::from_pem_file(self.key)
            .map_err(|e| TlsError::file(self.key, format!("no private key read from it ({e})")))?;
        let key: Arc<dyn rustls::sign::SigningKey> = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsError::file(self.key, e))?;
        if let Some(k) = key.public_key() {
            if k.as_ref() != cert_key {
                return Err(TlsError::file(
                    self.key,
                    format!(
                        "is not the key of the certificate in {}",
                        self.cert.display()
                    ),
                ));
            }
        }
        Ok(rustls::sign::CertifiedKey::new(chain, key))
    }
}

impl ClientCert<'_> {
    /// For logins through the driver most commands use (mysql_async over
    /// rustls' own reading): the checks of [`ClientCert::certified`], and
    /// a version 1 certificate refused in words, which that driver could
    /// only fail on as an unreadable peer certificate.
    pub fn check_for_driver(self) -> Result<(), TlsError> {
        let provider = rustls::crypto::ring::default_provider();
        let certified = self.certified(&provider)?;
        if certified.cert.first().is_some_and(|c| version_1(c)) {
            return Err(TlsError::file(
                self.cert,
                "an X.509 version 1 certificate, which this command's TLS library cannot show (`sqlfleet query` can); make a version 3 one, as `openssl x509 -req` does when given any extension (-extfile with basicConstraints=CA:FALSE)",
            ));
        }
        Ok(())
    }
}

/// Whether a certificate is X.509 version 1 (it has no version field).
fn version_1(cert: &[u8]) -> bool {
    element(cert)
        .and_then(|(_, certificate, _)| element(certificate))
        .is_some_and(|(_, tbs, _)| tbs.first() != Some(&0xa0))
}

/// One DER element at the start of `d`: (tag, contents, the rest).
fn element(d: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, d) = d.split_first()?;
    let (&first, d) = d.split_first()?;
    let (len, d) = if first < 0x80 {
        (usize::from(first), d)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || d.len() < n {
            return None;
        }
        let len = d[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &d[n..])
    };
    (d.len() >= len).then(|| (tag, &d[..len], &d[len..]))
}

/// The SubjectPublicKeyInfo of a certificate, whole (tag and length
/// included), for every X.509 version: Certificate → TBSCertificate →
/// [0] version (absent in version 1), serial, signature algorithm,
/// issuer, validity, subject, then the key.
pub fn public_key_info(cert: &[u8]) -> Option<&[u8]> {
    const SEQUENCE: u8 = 0x30;
    let (tag, certificate, _) = element(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = element(rest)?.2;
    }
    // serial, signature algorithm, issuer, validity, subject
    for _ in 0..5 {
        rest = element(rest)?.2;
    }
    let (tag, _, after) = element(rest)?;
    (tag == SEQUENCE).then(|| &rest[..rest.len() - after.len()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_key_needs_its_certificate_and_a_certificate_may_hold_its_key() {
        let (c, k) = (Path::new("c.pem"), Path::new("k.pem"));
        // (--ssl-cert, --ssl-key, what is shown: None when refused)
        type Row<'a> = (
            Option<&'a Path>,
            Option<&'a Path>,
            Option<Option<(&'a Path, &'a Path)>>,
        );
        let rows: [Row; 4] = [
            (None, None, Some(None)),
            (Some(c), Some(k), Some(Some((c, k)))),
            (Some(c), None, Some(Some((c, c)))),
            (None, Some(k), None),
        ];
        for (cert, key, want) in rows {
            let got = ClientCert::of(cert, key)
                .ok()
                .map(|o| o.map(|cc| (cc.cert, cc.key)));
            assert_eq!(got, want, "{cert:?} {key:?}");
        }
    }

    #[test]
    fn elements_are_read_in_both_length_forms_and_never_past_the_end() {
        assert_eq!(
            element(&[0x30, 2, 1, 2, 9]),
            Some((0x30, &[1u8, 2][..], &[9u8][..]))
        );
        let long: Vec<u8> = [0x04, 0x81, 3, 7, 8, 9].to_vec();
        assert_eq!(element(&long), Some((0x04, &[7u8, 8, 9][..], &[][..])));
        assert_eq!(element(&[0x30, 5, 1]), None);
        assert_eq!(element(&[0x30, 0x80]), None);
        assert_eq!(element(&[0x30, 0x85, 1, 1, 1, 1, 1]), None);
        assert_eq!(element(&[0x30]), None);
    }

    proptest! {
        #[test]
        fn any_bytes_are_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Some(k) = public_key_info(&bytes) {
                prop_assert!(k.len() <= bytes.len());
            }
        }
    }
}
