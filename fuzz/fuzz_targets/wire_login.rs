//! The login as query, watch and the relay's backends make it, against a
//! server that answers anything (auth switches to any plugin, more data,
//! RSA keys, OK, errors, garbage): never a panic, and on a connection that
//! is not encrypted the password itself never leaves in what the client
//! writes, whatever the server asks for.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_wire::handshake::{respond, Credential, Response, ServerHello};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PASSWORD: &str = "Pw-9f3kQ-never-in-clear";
const PLUGINS: &[&str] = &[
    "mysql_native_password",
    "caching_sha2_password",
    "client_ed25519",
    "mysql_clear_password",
    "mysql_old_password",
    "dialog",
    "sha256_password",
    "",
];

fuzz_target!(|data: &[u8]| {
    let Some((&how, reply)) = data.split_first() else {
        return;
    };
    let secure = how & 1 != 0;
    let plugin = PLUGINS[usize::from(how >> 1) % PLUGINS.len()];
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
            nonce: (1..=20).collect(),
            plugin: plugin.into(),
        };
        let _ = server.write_all(reply).await;
        let _ = server.shutdown().await;
        let cred = Credential::Password(PASSWORD.into());
        let mut s = client_side;
        let _ = respond(
            &mut s,
            &hello,
            &Response {
                seq: 1,
                caps: (1 << 9) | (1 << 15) | (1 << 19),
                ext: 0,
                user: "app",
                cred: &cred,
                collation: 45,
                database: None,
                secure,
            },
        )
        .await;
        drop(s);
        let mut written = Vec::new();
        let _ = server.read_to_end(&mut written).await;
        if !secure {
            assert!(
                !written
                    .windows(PASSWORD.len())
                    .any(|w| w == PASSWORD.as_bytes()),
                "the password left in clear over a plain connection ({plugin})"
            );
        }
    });
});
