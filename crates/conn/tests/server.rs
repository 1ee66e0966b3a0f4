//! Connection resolution end to end against a real server: --sandbox,
//! DSNs, option files and TLS modes.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use sqlfleet_conn::{resolve, ConnArgs, Env, SslMode};

fn env_for(home: &std::path::Path) -> Env {
    Env {
        sqlfleet_home: home.to_owned(),
        login_user: Some("nobody-here".into()),
        ..Env::default()
    }
}

async fn whoami(args: &ConnArgs, env: &Env) -> Result<String, String> {
    let t = resolve(args, env).map_err(|e| e.to_string())?;
    let mut c = t
        .connect(Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    let v: Option<String> = c
        .query_first("SELECT CONCAT(CURRENT_USER(), ' ', IFNULL(DATABASE(), '-'))")
        .await
        .map_err(|e| e.to_string())?;
    let _ = c.disconnect().await;
    Ok(v.unwrap_or_default())
}

#[tokio::test]
async fn sandbox_dsn_and_defaults_file_targets_connect() {
    let srv = sqlfleet_testkit::server();
    let (db, _) = srv.fresh_db("conn").await;
    let env = env_for(srv.home());
    let name = srv.sandbox.name().to_string();

    let by_sandbox = ConnArgs {
        sandbox: Some(name.clone()),
        database: Some(db.clone()),
        ..ConnArgs::default()
    };
    assert_eq!(
        whoami(&by_sandbox, &env).await,
        Ok(format!("root@127.0.0.1 {db}"))
    );

    let by_file = ConnArgs {
        defaults_file: Some(srv.defaults_file()),
        ..ConnArgs::default()
    };
    assert_eq!(
        whoami(&by_file, &env).await,
        Ok("root@127.0.0.1 -".to_string())
    );

    let pw = srv.sandbox.password().expect("pw");
    let port = srv.sandbox.meta.primary().port;
    let dsn = format!("mysql://root:{}@127.0.0.1:{port}/{db}", pw.expose());
    let by_dsn = ConnArgs {
        dsn: Some(dsn.clone()),
        no_defaults: true,
        ..ConnArgs::default()
    };
    assert_eq!(
        whoami(&by_dsn, &env).await,
        Ok(format!("root@127.0.0.1 {db}"))
    );

    // A wrong password: the server's refusal, naming host and user, never the password.
    let wrong = ConnArgs {
        password: Some(Some("definitely-wrong".into())),
        ..by_dsn.clone()
    };
    let e = whoami(&wrong, &env).await.expect_err("denied");
    assert!(
        e.starts_with(&format!("127.0.0.1:{port} (user 'root'): ERROR 1045")),
        "{e}"
    );
    assert!(
        !e.contains("definitely-wrong") && !e.contains(pw.expose()),
        "{e}"
    );
}

#[tokio::test]
async fn ssl_modes_against_a_server_without_tls() {
    let srv = sqlfleet_testkit::server();
    let env = env_for(srv.home());
    let name = srv.sandbox.name().to_string();
    let args = |m: SslMode| ConnArgs {
        sandbox: Some(name.clone()),
        ssl_mode: Some(m),
        ..ConnArgs::default()
    };
    // The sandbox has no certificate: PREFERRED falls back to plain, REQUIRED refuses.
    assert!(whoami(&args(SslMode::Preferred), &env).await.is_ok());
    assert!(whoami(&args(SslMode::Disabled), &env).await.is_ok());
    let e = whoami(&args(SslMode::Required), &env)
        .await
        .expect_err("no TLS");
    assert!(
        e.contains("ssl-mode REQUIRED but the server does not offer TLS"),
        "{e}"
    );
}

#[tokio::test]
async fn fresh_databases_are_distinct_and_empty() {
    let srv = sqlfleet_testkit::server();
    let (a, ta) = srv.fresh_db("fx").await;
    let (b, _) = srv.fresh_db("fx").await;
    assert_ne!(a, b);
    let mut c = ta.connect(Duration::from_secs(5)).await.expect("connect");
    let n: Option<i64> = c
        .query_first(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
        )
        .await
        .expect("q");
    assert_eq!(n, Some(0));
}

/// The session a dialled login leaves, as one text value.
async fn session_charsets(c: &mut sqlfleet_wire::client::Client) -> String {
    let v = c
        .column(
            "SELECT CONCAT_WS(' ', @@character_set_client, @@character_set_connection, \
             @@character_set_results, @@collation_connection)",
        )
        .await
        .expect("session character sets");
    v.into_iter().flatten().next().unwrap_or_default()
}

/// A login names its character set in the handshake (no `SET NAMES` after
/// it, as the stock client does): every character set the server lets a
/// client use, drawn from the server's own list, must either be in the
/// handshake table with the server's own default collation id, and leave
/// the session exactly as `SET NAMES` does, or go by `SET NAMES`.
#[tokio::test]
async fn every_client_character_set_leaves_the_session_as_set_names_does() {
    let srv = sqlfleet_testkit::server();
    let base = srv.target();
    let mut c = base.dial(Duration::from_secs(5)).await.expect("dial");
    let rows = c
        .column(
            "SELECT CONCAT(CHARACTER_SET_NAME, ' ', ID) FROM information_schema.COLLATIONS \
             WHERE IS_DEFAULT = 'Yes' ORDER BY ID",
        )
        .await
        .expect("collations");
    let server: Vec<(String, u64)> = rows
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let (n, id) = r.split_once(' ')?;
            Some((n.to_string(), id.parse().ok()?))
        })
        .collect();
    assert!(server.len() > 30, "the server's character sets: {server:?}");
    let version = c.hello.version.clone();
    assert!(
        sqlfleet_conn::charset::handshake_collation("utf8mb4", &version).is_some(),
        "the table is checked on a server it is used for, not {version}"
    );
    for (name, id) in &server {
        // Can a client use it? The server says (ucs2, utf16, utf32 no).
        let usable = c.execute(&format!("SET NAMES {name}")).await.is_ok();
        c.execute("SET NAMES utf8mb4")
            .await
            .expect("back to utf8mb4");
        let ours = sqlfleet_conn::charset::handshake_collation(name, &version);
        if !usable {
            assert_eq!(ours, None, "{name}: the server refuses it as a client set");
            continue;
        }
        assert_eq!(
            ours.map(u64::from),
            Some(*id),
            "{name}: the handshake table against the server's default collation"
        );
        let mut by_handshake = base.clone();
        by_handshake.charset = Some(name.clone());
        let mut h = by_handshake
            .dial(Duration::from_secs(5))
            .await
            .expect("dial with the set in the handshake");
        let mut s = base.dial(Duration::from_secs(5)).await.expect("dial");
        s.execute(&format!("SET NAMES {name}"))
            .await
            .expect("SET NAMES");
        assert_eq!(
            session_charsets(&mut h).await,
            session_charsets(&mut s).await,
            "{name}"
        );
        h.quit().await;
        s.quit().await;
    }
    // Every row of the table is a set the server has, under that id.
    for (name, id) in sqlfleet_conn::charset::HANDSHAKE_COLLATIONS {
        assert!(
            server
                .iter()
                .any(|(n, i)| n == name && *i == u64::from(*id)),
            "{name} {id} is not the server's"
        );
    }
    // utf8 goes by SET NAMES: the server's old_mode says what it means.
    let mut old = base.clone();
    old.charset = Some("utf8".into());
    let mut o = old.dial(Duration::from_secs(5)).await.expect("dial utf8");
    assert!(session_charsets(&mut o).await.starts_with("utf8mb3 "));
    c.quit().await;
}
