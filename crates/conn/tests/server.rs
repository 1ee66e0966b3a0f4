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
