//! A statement bigger than the server's max_allowed_packet: the client gets
//! the server's own refusal (1153) in a packet its library accepts (the
//! sequence id after its statement's last packet), through the relay as
//! the server's connection allows. Before: the relay answered its own 1158 with sequence id 1
//! after a client had sent packets 0..3, and the library reported "Packet
//! sequence number wrong". Its own server: the limit is a global.

mod common;

use std::time::Duration;

use common::relay::start_relay;
use mysql_async::prelude::Queryable;
use sqlfleet_testkit::proxy::app;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_over_max_allowed_packet_gets_the_server_s_error() {
    let srv = sqlfleet_testkit::server();
    let mut root = srv.connect().await;
    root.query_drop("SET GLOBAL max_allowed_packet = 4194304")
        .await
        .expect("limit");
    root.query_drop(
        "CREATE DATABASE IF NOT EXISTS big; CREATE TABLE IF NOT EXISTS big.t (b LONGBLOB)",
    )
    .await
    .expect("table");
    // Started after the limit: its connections have it.
    let r = start_relay(srv, &["--mode", "transaction"]);
    // Over 16 MiB: a statement of two packets and more.
    let sql = format!("INSERT INTO big.t VALUES ('{}')", "x".repeat(20 << 20));
    let code = |e: mysql_async::Error| match e {
        mysql_async::Error::Server(s) => format!("server {}", s.code),
        other => format!("other: {other}"),
    };
    let mut c = app(r.port, "app-pw", None)
        .connect(Duration::from_secs(10))
        .await
        .expect("connect through the relay");
    let got = c.query_drop(&sql).await.map_err(code);
    // Directly, the server's 1153 is often lost with the connection it
    // resets (the stock client says 2006, this driver "connection reset");
    // through the relay the client gets an error packet in sequence: the
    // server's 1153 when it could be read, else the relay's 1158.
    assert!(
        matches!(
            got.as_ref().map_err(String::as_str),
            Err("server 1153") | Err("server 1158")
        ),
        "through the relay: {got:?}"
    );
    // The relay client goes on (transaction mode: nothing lived there).
    let mut c = app(r.port, "app-pw", None)
        .connect(Duration::from_secs(10))
        .await
        .expect("connect again");
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("select");
    assert_eq!(one, Some(1));
    root.query_drop("SET GLOBAL max_allowed_packet = DEFAULT")
        .await
        .expect("reset");
}
