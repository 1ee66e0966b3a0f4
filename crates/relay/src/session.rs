//! One client session: log in, lease a backend, pass packets through until
//! the client quits, then hand the backend back (or drop it if its state
//! is unknown).

use std::sync::Arc;

use sqlfleet_wire::handshake::SESSION_SHAPE;
use sqlfleet_wire::packet::{self, WireError};
use tokio::net::TcpStream;

use crate::auth;
use crate::config::RelayConfig;
use crate::pool::{Key, Pool};

const COM_QUIT: u8 = 0x01;
const COM_CHANGE_USER: u8 = 0x11;

enum End {
    /// COM_QUIT: the backend is idle and can be reused.
    Quit,
    /// The client asked for something this relay does not pass through.
    Unsupported(&'static str),
    /// Either side went away mid-session: the backend's state is unknown.
    Gone,
}

pub async fn serve(cfg: Arc<RelayConfig>, pool: Arc<Pool>, mut client: TcpStream, id: u32) {
    let _ = client.set_nodelay(true);
    let Ok((hello, seq)) = auth::login(&cfg, &mut client, id).await else {
        return;
    };
    let key = Key {
        backend: pool.pick(),
        shape: hello.caps & SESSION_SHAPE,
        collation: hello.collation,
        db: hello.database.clone(),
    };
    let mut lease = match pool.lease(key).await {
        Ok(l) => l,
        Err(e) => {
            let code = if matches!(e, crate::pool::LeaseError::Timeout(..)) {
                1040
            } else {
                2003
            };
            let _ = packet::write(
                &mut client,
                seq,
                &packet::err_payload(code, "08004", &format!("sqlfleet relay: {e}")),
            )
            .await;
            return;
        }
    };
    if packet::write(&mut client, seq, &packet::ok_payload(2))
        .await
        .is_err()
    {
        pool.give_back(lease);
        return;
    }
    match pipe(&mut client, &mut lease.conn.stream, cfg.max_packet).await {
        End::Quit => pool.give_back(lease),
        End::Unsupported(what) => {
            let msg = format!("sqlfleet relay: {what} is not supported yet");
            let _ = packet::write(&mut client, 1, &packet::err_payload(1235, "42000", &msg)).await;
        }
        End::Gone => {}
    }
}

async fn pipe(client: &mut TcpStream, backend: &mut TcpStream, max_packet: usize) -> End {
    let (mut cr, mut cw) = client.split();
    let (mut br, mut bw) = backend.split();
    let to_backend = async {
        loop {
            let p = match packet::read(&mut cr, max_packet).await {
                Ok(p) => p,
                Err(WireError::Closed) | Err(_) => return End::Gone,
            };
            if p.seq == 0 {
                match p.payload.first() {
                    Some(&COM_QUIT) => return End::Quit,
                    Some(&COM_CHANGE_USER) => return End::Unsupported("COM_CHANGE_USER"),
                    _ => {}
                }
            }
            if packet::forward(&mut bw, &p).await.is_err() {
                return End::Gone;
            }
        }
    };
    let to_client = async {
        let _ = tokio::io::copy(&mut br, &mut cw).await;
        End::Gone
    };
    tokio::select! {
        e = to_backend => e,
        e = to_client => e,
    }
}
