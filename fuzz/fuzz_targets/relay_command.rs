//! A client's bytes after login, read as the relay reads commands (whole,
//! or a big COM_QUERY's head with its rest passed on) — on a plain
//! connection, or (the first byte odd) one that logged in with
//! CLIENT_COMPRESS, so the bytes are compressed frames — and any statement
//! text through the result cache's decision: never a panic, and a
//! streamed command's rest is never more than its header said.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_relay::protocol::io::{AnyStream, Command, PacketIo};

fuzz_target!(|data: &[u8]| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (mut client, relay_side) = tokio::io::duplex(1 << 16);
        let compressed = data.first().is_some_and(|b| b & 1 == 1);
        let bytes = data.get(1..).unwrap_or_default().to_vec();
        let writer = async move {
            use tokio::io::AsyncWriteExt;
            let _ = client.write_all(&bytes).await;
        };
        let reader = async move {
            let mut io = PacketIo::small(AnyStream(Box::new(relay_side)));
            if compressed {
                io.compress(false);
            }
            // A small threshold, so that short inputs stream too.
            for _ in 0..64 {
                match io.read_command(1 << 20, 8).await {
                    Ok(Command::Whole(..)) => {}
                    Ok(Command::Head(_, mut st)) => {
                        let mut sink = Vec::new();
                        if io.pass_rest(&mut st, &mut sink).await.is_err() {
                            return;
                        }
                        assert!(sink.len() <= st.total + 4 * st.packets);
                    }
                    Ok(Command::OutOfOrder(_)) | Err(_) => return,
                }
            }
        };
        tokio::join!(writer, reader);
    });
    let q = sqlfleet_relay::protocol::sql::Query::new(data);
    if !sqlfleet_relay::protocol::sql::may_touch_the_account(data) {
        // Session mode, with one shared account, lexes only texts the
        // cheap test flags.
        let fx = q.effects();
        assert!(fx.kill.is_none() && fx.dynamic_var.is_none() && fx.account_targets.is_none());
        assert_eq!(fx.kill_unread, sqlfleet_relay::protocol::sql::Unread::No);
    }
    let s = sqlfleet_relay::cache::decide::Session {
        plain: true,
        holds_conn: false,
        streamed: false,
    };
    let _ = sqlfleet_relay::cache::decide::cacheable(&q.effects(), q.tokens(), s);
});
