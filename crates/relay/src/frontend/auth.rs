//! Logging a client in: greeting, optional switch to TLS, HandshakeResponse41,
//! then mysql_native_password or caching_sha2_password (fast path with the
//! scramble; full authentication with the password over TLS), switching
//! the client to the plugin its account has. COM_CHANGE_USER reuses the
//! same checks.

use std::sync::Arc;

use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlfleet_wire::handshake::{self, ClientHello, Credential, NATIVE, SSL};
use sqlfleet_wire::packet::{self, WireError};
use tokio::io::{AsyncRead, AsyncWrite};

use super::rsa::{rsa_key, rsa_password};
use crate::config::{sha2_hash, Account, RelayConfig};
use crate::protocol::io::{AnyStream, Prefixed};

pub const SHA2: &str = "caching_sha2_password";

/// What the relay presents itself as; the backend's version goes first so
/// that drivers keep the features they pick by version.
#[derive(Clone)]
pub struct Greeting {
    pub version: String,
    /// The backend's default collation (what a direct greeting carries).
    pub collation: u8,
    /// MariaDB extended capabilities offered (those the backend has and
    /// the relay passes through: extended column metadata).
    pub ext: u32,
    pub tls: Option<Arc<tokio_rustls::TlsAcceptor>>,
    pub tls_required: bool,
    /// No backend answered yet: the version and capabilities are the
    /// relay's guess until one does.
    pub stand_in: bool,
}

impl Greeting {
    /// The greeting a backend's own (`hello`) makes: its exact version
    /// string (with MariaDB's "5.5.5-" prefix, which drivers read for
    /// features), collation, and the MariaDB extended capabilities the
    /// relay passes through; a stand-in when no backend answered.
    pub fn of(
        hello: Option<&sqlfleet_wire::handshake::ServerHello>,
        tls: Option<Arc<tokio_rustls::TlsAcceptor>>,
        tls_required: bool,
    ) -> Greeting {
        Greeting {
            version: hello.map_or_else(|| "5.5.5-10.11.0-MariaDB".into(), |h| h.version.clone()),
            collation: hello.map_or(45, |h| h.collation),
            ext: hello.map_or(0, |h| {
                h.ext
                    & (handshake::MARIADB_EXTENDED_METADATA
                        | handshake::MARIADB_STMT_BULK_OPERATIONS)
            }),
            tls,
            tls_required,
            stand_in: hello.is_none(),
        }
    }
}

pub struct LoggedIn {
    pub stream: AnyStream,
    pub hello: ClientHello,
    /// Sequence id for the OK that completes the login.
    pub seq: u8,
    pub nonce: [u8; 20],
    pub tls: bool,
    /// What proves this client's password to a server (per-user backend
    /// accounts), when its login gave the relay one.
    pub credential: Option<Credential>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("{0}")]
    Wire(#[from] WireError),
    #[error("access denied for {0}")]
    Denied(String),
    /// The login could not be checked (the server could not be asked);
    /// the client was told so.
    #[error("{0}")]
    Unavailable(String),
    /// The server would refuse what the login asks for (a character set
    /// a client cannot use); the client was told so, in the server's words.
    #[error("{0}")]
    Refused(String),
}

/// A login packet must come with the sequence id the one before it asks
/// for (the server's own rule): anything else ends the login with the
/// server's 1156, as a direct login does.
async fn in_order<S: AsyncWrite + Unpin>(s: &mut S, got: u8, want: u8) -> Result<(), AuthError> {
    if got == want {
        return Ok(());
    }
    let msg = "Got packets out of order";
    packet::write(
        s,
        got.wrapping_add(1),
        &packet::err_payload(1156, "08S01", msg),
    )
    .await?;
    Err(WireError::Protocol(format!("{msg} (sequence id {got}, expected {want})")).into())
}

/// Reads the client's next login packet, which must follow `sent`.
async fn read_after<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    sent: u8,
) -> Result<packet::Packet, AuthError> {
    let r = packet::read(s, 1 << 16).await?;
    in_order(s, r.seq, sent.wrapping_add(1)).await?;
    Ok(r)
}

fn nonce() -> [u8; 20] {
    let mut n = [0u8; 20];
    rand::thread_rng().fill_bytes(&mut n);
    for b in n.iter_mut() {
        // The nonce must not contain NUL (it is NUL-terminated on the wire).
        *b = (*b % 94) + 33;
    }
    n
}

/// The account an unknown user is checked against, so that the login
/// takes the same steps as a known user's: hashes of a random password
/// drawn once per process (a login hashes nothing more than it must).
fn unknown_account() -> &'static Account {
    static UNKNOWN: std::sync::OnceLock<Account> = std::sync::OnceLock::new();
    UNKNOWN.get_or_init(|| {
        let pw: String = nonce().iter().map(|&b| char::from(b)).collect();
        Account::from_password(&pw)
    })
}

/// caching_sha2_password's scramble check against SHA256(SHA256(pw)).
pub fn sha2_verify(nonce: &[u8], token: &[u8], stored: &[u8; 32]) -> bool {
    if token.len() != 32 {
        return false;
    }
    let mut h = Sha256::new();
    h.update(stored);
    h.update(nonce);
    let x = h.finalize();
    let candidate: Vec<u8> = token.iter().zip(x.iter()).map(|(a, b)| a ^ b).collect();
    let check: [u8; 32] = Sha256::digest(&candidate).into();
    check == *stored
}

/// Greets, switches to TLS if the client asks, reads its credentials and
/// checks them. On success nothing has been sent after the credentials
/// (the caller sends OK, possibly after checking the default database).
/// `users` with `user` added from the server when it is not there
/// (per-user mode: accounts made on the server need no config entry; a
/// name the config lists keeps its listed password).
pub async fn with_server_account<'a>(
    users: &'a std::collections::HashMap<String, Account>,
    server: Option<&crate::backend::accounts::ServerAccounts>,
    user: &str,
    extra: &'a mut Option<std::collections::HashMap<String, Account>>,
) -> Result<&'a std::collections::HashMap<String, Account>, crate::backend::side::LookupError> {
    let Some(sa) = server.filter(|_| !users.contains_key(user)) else {
        return Ok(users);
    };
    match sa.lookup(user).await? {
        Some(a) => {
            let mut m = users.clone();
            m.insert(user.to_string(), a);
            Ok(extra.insert(m))
        }
        None => Ok(users),
    }
}

/// The error a client gets when its login cannot be checked because the
/// server cannot be asked: a can't-connect error in the server's range
/// (never "Access denied", which would make the client blame its
/// password).
pub fn unreachable_payload(user: &str, why: &str) -> (String, Vec<u8>) {
    let msg = format!(
        "sqlfleet relay: cannot check the login of '{user}': the relay could not ask the server ({why})"
    );
    let payload = packet::err_payload(crate::backend::pool::UNREACHABLE_CODE, "HY000", &msg);
    (msg, payload)
}

/// The server side of a TLS handshake on `io`.
async fn tls_accept<IO>(
    acceptor: &tokio_rustls::TlsAcceptor,
    io: IO,
) -> Result<AnyStream, WireError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    let tls = acceptor
        .accept(io)
        .await
        .map_err(|e| WireError::Protocol(format!("TLS handshake: {e}")))?;
    Ok(AnyStream(Box::new(tls)))
}

#[allow(clippy::too_many_arguments)]
pub async fn login<S>(
    cfg: &RelayConfig,
    users: &std::collections::HashMap<String, Account>,
    server: Option<&crate::backend::accounts::ServerAccounts>,
    g: &Greeting,
    mut raw: S,
    id: u32,
    host: &str,
) -> Result<LoggedIn, AuthError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + Sync + 'static,
{
    let nonce = nonce();
    let mut caps = handshake::SERVER_CAPS;
    if g.tls.is_some() {
        caps |= SSL;
    }
    packet::write(
        &mut raw,
        0,
        &handshake::greeting_with(&g.version, id, &nonce, g.collation, caps, g.ext),
    )
    .await?;
    // One read for header and payload; what came behind the packet (a
    // TLS ClientHello, usually) is read again from `ahead` first.
    let (first, ahead) = crate::protocol::io::read_first(&mut raw, 1 << 16).await?;
    in_order(&mut raw, first.seq, 1).await?;
    let caps_of = |p: &[u8]| {
        p.get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .unwrap_or(0)
    };
    let (mut stream, r, tls) = if first.payload.len() == 32 && caps_of(&first.payload) & SSL != 0 {
        let Some(acceptor) = &g.tls else {
            return Err(WireError::Protocol(
                "client asked for TLS, which is not configured".into(),
            )
            .into());
        };
        let mut stream = if ahead.is_empty() {
            tls_accept(acceptor, raw).await?
        } else {
            tls_accept(acceptor, Prefixed::new(ahead, raw)).await?
        };
        let r = read_after(&mut stream, first.seq).await?;
        (stream, r, true)
    } else if ahead.is_empty() {
        (AnyStream(Box::new(raw)), first, false)
    } else {
        (AnyStream(Box::new(Prefixed::new(ahead, raw))), first, false)
    };
    if g.tls_required && !tls {
        let msg =
            "Connections using insecure transport are prohibited by the relay (TLS is required)";
        packet::write(
            &mut stream,
            r.seq.wrapping_add(1),
            &packet::err_payload(3159, "HY000", msg),
        )
        .await?;
        return Err(WireError::Protocol(msg.into()).into());
    }
    // A login the server would not read, or would refuse as it reads it,
    // gets the server's refusal, not a closed connection.
    let refusal = match handshake::parse_client_hello(&r.payload) {
        Err(e) => Some(((1043, "08S01", "Bad handshake"), e)),
        Ok(h) => handshake::refusal(&h).map(|r| (r, WireError::Protocol(r.2.into()))),
    };
    if let Some(((code, state, msg), e)) = refusal {
        packet::write(
            &mut stream,
            r.seq.wrapping_add(1),
            &packet::err_payload(code, state, msg),
        )
        .await?;
        return Err(e.into());
    }
    let mut hello = handshake::parse_client_hello(&r.payload)?;
    let (utf8, set) = super::session::schema::name_set(&[], hello.collation, None);
    if !super::session::schema::user_name_readable(&hello.user_raw, utf8) {
        let (code, state, msg) = super::session::schema::user_name_refusal(&set);
        packet::write(
            &mut stream,
            r.seq.wrapping_add(1),
            &packet::err_payload(code, state, &msg),
        )
        .await?;
        return Err(AuthError::Refused(msg));
    }
    let token = std::mem::take(&mut hello.auth);
    let mut extra = None;
    let users = match with_server_account(users, server, &hello.user, &mut extra).await {
        Ok(users) => users,
        Err(why) => {
            let (msg, payload) = unreachable_payload(&hello.user, &why.to_string());
            packet::write(&mut stream, r.seq.wrapping_add(1), &payload).await?;
            return Err(AuthError::Unavailable(msg));
        }
    };
    let (seq, credential) = check(
        cfg,
        users,
        &mut stream,
        r.seq.wrapping_add(1),
        &hello.user,
        hello.plugin.as_deref(),
        token,
        &nonce,
        tls,
        host,
    )
    .await?;
    // The server checks the password, then the character set the login's
    // collation names: one a client cannot use ends the login there, with
    // the server's error (passed on to a backend login, it would fail that
    // login instead and look like a backend fault).
    if let Some(cs) = sqlfleet_conn::charset::refused_as_client(hello.collation) {
        let msg = format!("Variable 'character_set_client' can't be set to the value of '{cs}'");
        packet::write(&mut stream, seq, &packet::err_payload(1231, "42000", &msg)).await?;
        return Err(AuthError::Refused(msg));
    }
    Ok(LoggedIn {
        stream,
        hello,
        seq,
        nonce,
        tls,
        credential,
    })
}

/// Checks credentials (switching plugin if needed) and returns the
/// sequence id for the final OK, with what proves the password to a server
/// when the login gave one (SHA1(password) from a native token; the
/// password itself from caching_sha2_password's full authentication).
/// Sends the ERR itself when denied.
#[allow(clippy::too_many_arguments)]
pub async fn check<S: AsyncRead + AsyncWrite + Unpin>(
    cfg: &RelayConfig,
    users: &std::collections::HashMap<String, Account>,
    s: &mut S,
    mut seq: u8,
    user: &str,
    plugin: Option<&str>,
    mut token: Vec<u8>,
    nonce: &[u8; 20],
    tls: bool,
    host: &str,
) -> Result<(u8, Option<Credential>), AuthError> {
    // Unknown users go through the same steps (no user enumeration).
    let acct = users.get(user).unwrap_or_else(|| unknown_account());
    let use_old = acct.old.is_some();
    let use_sha2 =
        !use_old && acct.sha2.is_some() && (plugin == Some(SHA2) || acct.native.is_none());
    let want = match (use_old, use_sha2) {
        (true, _) => handshake::OLD,
        (_, true) => SHA2,
        _ => NATIVE,
    };
    if plugin.unwrap_or(NATIVE) != want {
        let mut sw = vec![0xFE];
        sw.extend_from_slice(want.as_bytes());
        sw.push(0);
        // The pre-4.1 scramble uses 8 bytes of the nonce.
        sw.extend_from_slice(if use_old { &nonce[..8] } else { &nonce[..] });
        sw.push(0);
        packet::write(s, seq, &sw).await?;
        let r = read_after(s, seq).await?;
        token = r.payload;
        seq = r.seq.wrapping_add(1);
    }
    let empty = token.is_empty() || token == [0];
    let mut credential = None;
    let ok = if let Some(stored) = acct.old {
        if empty {
            let ok = stored == handshake::old_hash(b"");
            if ok {
                credential = Some(Credential::Password(String::new()));
            }
            ok
        } else {
            let ok = handshake::old_check(&nonce[..8], &token, stored);
            if ok {
                credential = Some(Credential::OldHash(stored));
            }
            ok
        }
    } else if use_sha2 {
        let stored = acct.sha2.unwrap_or_default();
        if empty {
            let ok = stored == sha2_hash("");
            if ok {
                credential = Some(Credential::Password(String::new()));
            }
            ok
        } else if !sha2_verify(nonce, &token, &stored) {
            false
        } else if cfg.sha2_full_auth {
            // Ask for the password itself: in clear over TLS, else
            // encrypted with the relay's RSA key.
            packet::write(s, seq, &[0x01, 0x04]).await?;
            let mut r = read_after(s, seq).await?;
            seq = r.seq.wrapping_add(1);
            let pw = if tls {
                r.payload.strip_suffix(&[0]).unwrap_or(&r.payload).to_vec()
            } else {
                let key = rsa_key().await;
                if r.payload == [0x02] {
                    let mut p = vec![0x01];
                    p.extend_from_slice(key.public_pem.as_bytes());
                    packet::write(s, seq, &p).await?;
                    r = read_after(s, seq).await?;
                    seq = r.seq.wrapping_add(1);
                }
                rsa_password(&key.private, &r.payload, nonce).unwrap_or_default()
            };
            let pw = String::from_utf8_lossy(&pw).into_owned();
            let ok = !pw.is_empty() && sha2_hash(&pw) == stored;
            if ok {
                credential = Some(Credential::Password(pw));
            }
            ok
        } else {
            packet::write(s, seq, &[0x01, 0x03]).await?;
            seq = seq.wrapping_add(1);
            true
        }
    } else {
        let stored = acct.native.unwrap_or_default();
        if empty {
            let ok = stored == handshake::native_hash("");
            if ok {
                credential = Some(Credential::Password(String::new()));
            }
            ok
        } else {
            match handshake::native_stage1(nonce, &token, &stored) {
                Some(stage1) => {
                    credential = Some(Credential::NativeStage1(stage1));
                    true
                }
                None => false,
            }
        }
    };
    if !ok || !users.contains_key(user) {
        let msg = format!(
            "Access denied for user '{user}'@'{host}' (using password: {})",
            if empty { "NO" } else { "YES" }
        );
        packet::write(s, seq, &packet::err_payload(1045, "28000", &msg)).await?;
        return Err(AuthError::Denied(msg));
    }
    Ok((seq, credential))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::sha2_hash;

    #[test]
    fn sha2_scramble_roundtrip() {
        let nonce = [9u8; 20];
        let t = sqlfleet_wire::handshake::sha2_token(&nonce, "pw");
        assert!(sha2_verify(&nonce, &t, &sha2_hash("pw")));
        assert!(!sha2_verify(&nonce, &t, &sha2_hash("other")));
        assert!(!sha2_verify(&[1u8; 20], &t, &sha2_hash("pw")));
        // Same as mysql_common's client-side scramble.
        let theirs = mysql_common::scramble::scramble_sha256(&nonce, b"pw").expect("scramble");
        assert_eq!(t, theirs.to_vec());
    }

    #[test]
    fn the_unknown_account_is_drawn_once_and_takes_no_empty_password() {
        let a = unknown_account();
        assert!(std::ptr::eq(a, unknown_account()));
        assert_ne!(a.native, Some(handshake::native_hash("")));
        assert_ne!(a.sha2, Some(sha2_hash("")));
        assert!(a.old.is_none());
    }
}
