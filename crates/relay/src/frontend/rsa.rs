//! The relay's RSA key pair, for caching_sha2_password full
//! authentication of clients that have no TLS.

use std::sync::Arc;

/// The relay's RSA key pair for caching_sha2_password full authentication
/// without TLS, made once on first use (2048 bits).
pub struct RsaKey {
    pub private: rsa::RsaPrivateKey,
    pub public_pem: String,
}

pub async fn rsa_key() -> Arc<RsaKey> {
    static KEY: tokio::sync::OnceCell<Arc<RsaKey>> = tokio::sync::OnceCell::const_new();
    KEY.get_or_init(|| async {
        let make = || {
            use rsa::pkcs8::EncodePublicKey;
            let private = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048)
                .expect("RSA key generation with the system RNG");
            let public_pem = private
                .to_public_key()
                .to_public_key_pem(rsa::pkcs8::LineEnding::LF)
                .expect("PEM encoding of a fresh key");
            Arc::new(RsaKey {
                private,
                public_pem,
            })
        };
        match tokio::task::spawn_blocking(make).await {
            Ok(k) => k,
            Err(_) => make(),
        }
    })
    .await
    .clone()
}

/// The password a client sent RSA-OAEP(SHA-1)-encrypted, XORed with the
/// nonce and NUL-terminated (caching_sha2_password / sha256_password).
pub fn rsa_password(key: &rsa::RsaPrivateKey, cipher: &[u8], nonce: &[u8]) -> Option<Vec<u8>> {
    let plain = key.decrypt(rsa::Oaep::new::<sha1::Sha1>(), cipher).ok()?;
    let mut pw: Vec<u8> = plain
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ nonce[i % nonce.len().max(1)])
        .collect();
    if pw.last() == Some(&0) {
        pw.pop();
    }
    Some(pw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_password_roundtrip() {
        let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 1024).expect("key");
        let nonce = [7u8; 20];
        let mut plain = b"s3cret\0".to_vec();
        for (i, b) in plain.iter_mut().enumerate() {
            *b ^= nonce[i % 20];
        }
        let cipher = key
            .to_public_key()
            .encrypt(
                &mut rand::thread_rng(),
                rsa::Oaep::new::<sha1::Sha1>(),
                &plain,
            )
            .expect("encrypt");
        assert_eq!(
            rsa_password(&key, &cipher, &nonce),
            Some(b"s3cret".to_vec())
        );
        assert_eq!(rsa_password(&key, &cipher[1..], &nonce), None);
    }
}
