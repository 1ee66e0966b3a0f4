//! Logging a client in: greeting, HandshakeResponse41, mysql_native_password
//! (switching the client to it when it proposes another plugin).

use rand::RngCore;
use sqlfleet_wire::handshake::{self, ClientHello, NATIVE};
use sqlfleet_wire::packet::{self, WireError};
use tokio::net::TcpStream;

use crate::config::RelayConfig;

pub const SERVER_VERSION: &str = "10.11.0-sqlfleet-relay";

/// Greets and authenticates; on success the client has been sent nothing
/// yet after its credentials (the session sends OK once a backend is ready).
/// Returns the hello and the next sequence id.
pub async fn login(
    cfg: &RelayConfig,
    c: &mut TcpStream,
    id: u32,
) -> Result<(ClientHello, u8), WireError> {
    let mut nonce = [0u8; 20];
    rand::thread_rng().fill_bytes(&mut nonce);
    for b in nonce.iter_mut() {
        // The nonce must not contain NUL (it is NUL-terminated on the wire).
        *b = (*b % 94) + 33;
    }
    packet::write(c, 0, &handshake::greeting(SERVER_VERSION, id, &nonce, 45)).await?;
    let r = packet::read(c, 1 << 16).await?;
    let mut hello = handshake::parse_client_hello(&r.payload)?;
    let mut seq = r.seq.wrapping_add(1);
    if hello.plugin.as_deref().is_some_and(|p| p != NATIVE) {
        // Ask the client to answer with mysql_native_password.
        let mut sw = vec![0xFE];
        sw.extend_from_slice(NATIVE.as_bytes());
        sw.push(0);
        sw.extend_from_slice(&nonce);
        sw.push(0);
        packet::write(c, seq, &sw).await?;
        let r = packet::read(c, 1 << 16).await?;
        hello.auth = r.payload;
        seq = r.seq.wrapping_add(1);
    }
    let ok = cfg
        .users
        .get(&hello.user)
        .is_some_and(|stored| handshake::native_verify(&nonce, &hello.auth, stored));
    if !ok {
        let msg = format!(
            "Access denied for user '{}' (using password: {})",
            hello.user,
            if hello.auth.is_empty() { "NO" } else { "YES" }
        );
        packet::write(c, seq, &packet::err_payload(1045, "28000", &msg)).await?;
        return Err(WireError::Protocol(msg));
    }
    Ok((hello, seq))
}
