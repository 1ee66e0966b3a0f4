//! query's and watch's client reading a reply from a server that is not
//! what it says (a broken proxy, another protocol on the port, a hostile
//! endpoint): any bytes after a statement is sent, with or without
//! DEPRECATE_EOF — never a panic, every row as wide as the columns that
//! announced it, and the reading ends (the bytes run out: an error or
//! the end of the reply).
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_wire::client::{Client, Step};
use sqlfleet_wire::handshake::ServerHello;

fuzz_target!(|data: &[u8]| {
    let Some((&how, reply)) = data.split_first() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (mut server, client_side) = tokio::io::duplex(1 << 20);
        let hello = ServerHello {
            version: "10.11.19-MariaDB".into(),
            connection_id: 7,
            caps: u32::MAX,
            collation: 45,
            ext: 0,
            nonce: vec![1; 20],
            plugin: "mysql_native_password".into(),
        };
        // PROTOCOL_41 and, drawn, DEPRECATE_EOF.
        let caps = (1 << 9) | if how & 1 != 0 { 1 << 24 } else { 0 };
        let mut c = Client::new(Box::new(client_side), hello, caps, false);
        {
            use tokio::io::AsyncWriteExt;
            let _ = server.write_all(reply).await;
            let _ = server.shutdown().await;
        }
        if c.query("SELECT 1").await.is_err() {
            return;
        }
        let mut width = None;
        for _ in 0..100_000 {
            match c.step().await {
                Ok(Some(Step::Columns(cols))) => width = Some(cols.len()),
                Ok(Some(Step::Row(r))) => {
                    assert_eq!(Some(r.len()), width, "a row as wide as its columns")
                }
                Ok(Some(Step::Done { more, .. })) => {
                    width = None;
                    if !more {
                        return;
                    }
                }
                Ok(None) | Err(_) => return,
            }
        }
        panic!("the reply never ended on {} bytes", reply.len());
    });
});
