//! First-start set-up of a node's users, and GTID replication between nodes.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use sqlfleet_conn::quote::literal;
use sqlfleet_conn::Secret;

use crate::error::{Result, SandboxError};
use crate::meta::{NodeLayout, NodeMeta};
use crate::node::socket_target;

const CONNECT: Duration = Duration::from_secs(10);
pub const REPL_USER: &str = "repl";

fn sql_err(node: &str) -> impl Fn(mysql_async::Error) -> SandboxError + '_ {
    move |e| SandboxError::Sql {
        node: node.to_string(),
        what: match e {
            mysql_async::Error::Server(s) => format!("ERROR {}: {}", s.code, s.message),
            other => other.to_string(),
        },
    }
}

/// Connects as root on the node's socket.
pub async fn root_conn(
    label: &str,
    layout: &NodeLayout,
    password: Option<&Secret>,
) -> Result<Conn> {
    socket_target(layout, password)
        .connect(CONNECT)
        .await
        .map_err(|e| SandboxError::Sql {
            node: label.to_string(),
            what: e.what,
        })
}

/// Gives root a password (socket and 127.0.0.1), removes every other
/// account install-db made, and adds the replication user. Not written to
/// the binlog, so replicas start from an empty history.
pub async fn secure_users(label: &str, layout: &NodeLayout, password: &Secret) -> Result<()> {
    // A previous attempt may have set the password already.
    let mut conn = match root_conn(label, layout, None).await {
        Ok(c) => c,
        Err(_) => root_conn(label, layout, Some(password)).await?,
    };
    let e = sql_err(label);
    conn.query_drop("SET SESSION sql_log_bin = 0")
        .await
        .map_err(&e)?;
    let others: Vec<(String, String)> = conn
        .query(
            "SELECT User, Host FROM mysql.user \
             WHERE NOT (User = 'root' AND Host = 'localhost') AND User <> 'mariadb.sys'",
        )
        .await
        .map_err(&e)?;
    for (user, host) in others {
        conn.query_drop(format!("DROP USER {}@{}", literal(&user), literal(&host)))
            .await
            .map_err(&e)?;
    }
    let pw = literal(password.expose());
    for stmt in [
        "ALTER USER 'root'@'localhost'",
        "CREATE OR REPLACE USER 'root'@'127.0.0.1'",
        "CREATE OR REPLACE USER 'repl'@'127.0.0.1'",
    ] {
        conn.query_drop(format!("{stmt} IDENTIFIED BY {pw}"))
            .await
            .map_err(&e)?;
    }
    conn.query_drop("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
        .await
        .map_err(&e)?;
    conn.query_drop("GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'127.0.0.1'")
        .await
        .map_err(&e)?;
    conn.query_drop("FLUSH PRIVILEGES").await.map_err(&e)?;
    let _ = conn.disconnect().await;
    Ok(())
}

/// Points a replica at the primary with GTID and starts it.
pub async fn start_replication(
    label: &str,
    layout: &NodeLayout,
    password: &Secret,
    primary: &NodeMeta,
) -> Result<()> {
    let mut conn = root_conn(label, layout, Some(password)).await?;
    let e = sql_err(label);
    conn.query_drop("STOP SLAVE").await.map_err(&e)?;
    conn.query_drop(format!(
        "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {}, \
         MASTER_USER = '{REPL_USER}', MASTER_PASSWORD = {}, \
         MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
        primary.port,
        literal(password.expose())
    ))
    .await
    .map_err(&e)?;
    conn.query_drop("START SLAVE").await.map_err(&e)?;
    let _ = conn.disconnect().await;
    Ok(())
}

/// A replica's replication threads and lag, from SHOW SLAVE STATUS.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReplHealth {
    pub io_running: String,
    pub sql_running: String,
    pub seconds_behind: Option<u64>,
    pub last_error: String,
    /// GTID position received from the primary (Gtid_IO_Pos).
    pub gtid_io_pos: String,
    /// Where it replicates from (Master_Host, Master_Port).
    pub source_host: String,
    pub source_port: u16,
}

impl ReplHealth {
    pub fn healthy(&self) -> bool {
        self.io_running == "Yes" && self.sql_running == "Yes"
    }
}

pub async fn repl_health(conn: &mut Conn, label: &str) -> Result<Option<ReplHealth>> {
    let e = sql_err(label);
    let row: Option<Row> = conn.query_first("SHOW SLAVE STATUS").await.map_err(&e)?;
    let Some(row) = row else { return Ok(None) };
    let text = |col: &str| -> String {
        row.get_opt::<Option<String>, _>(col)
            .and_then(|r| r.ok())
            .flatten()
            .unwrap_or_default()
    };
    let io_err = text("Last_IO_Error");
    let sql_err = text("Last_SQL_Error");
    Ok(Some(ReplHealth {
        io_running: text("Slave_IO_Running"),
        sql_running: text("Slave_SQL_Running"),
        seconds_behind: text("Seconds_Behind_Master").parse().ok(),
        last_error: if io_err.is_empty() { sql_err } else { io_err },
        gtid_io_pos: text("Gtid_IO_Pos"),
        source_host: text("Master_Host"),
        source_port: text("Master_Port").parse().unwrap_or(0),
    }))
}

/// What a node reports about its role (for [`crate::converge::fixes`]):
/// `@@read_only` and where it replicates from, with the replication
/// health that says it (`None`: none configured).
pub async fn seen(
    conn: &mut Conn,
    label: &str,
) -> Result<(crate::converge::Seen, Option<ReplHealth>)> {
    let read_only: Option<bool> = conn
        .query_first("SELECT @@read_only")
        .await
        .map_err(sql_err(label))?;
    let health = repl_health(conn, label).await?;
    let source = health
        .as_ref()
        .filter(|h| !h.source_host.is_empty())
        .map(|h| (h.source_host.clone(), h.source_port));
    let seen = crate::converge::Seen {
        read_only: read_only.unwrap_or(false),
        source,
    };
    Ok((seen, health))
}

/// Carries out one fix on a node (`primary`: where a replica points).
pub async fn apply_fix(
    label: &str,
    layout: &NodeLayout,
    password: &Secret,
    primary: &NodeMeta,
    fix: crate::converge::Fix,
) -> Result<()> {
    use crate::converge::Fix;
    let read_only = match fix {
        Fix::Replicate => return start_replication(label, layout, password, primary).await,
        Fix::Writable => 0,
        Fix::ReadOnly => 1,
    };
    let mut conn = root_conn(label, layout, Some(password)).await?;
    conn.query_drop(format!("SET GLOBAL read_only = {read_only}"))
        .await
        .map_err(sql_err(label))?;
    let _ = conn.disconnect().await;
    Ok(())
}

/// Waits until both replication threads run.
pub async fn wait_replicating(
    label: &str,
    layout: &NodeLayout,
    password: &Secret,
    stop: &crate::Interrupt,
) -> Result<()> {
    let mut conn = root_conn(label, layout, Some(password)).await?;
    let start = Instant::now();
    let mut restarted = false;
    loop {
        stop.check()?;
        let h = repl_health(&mut conn, label).await?;
        match &h {
            Some(h) if h.healthy() => break,
            // A thread stopped by an error will not start by waiting: say so now.
            Some(h)
                if (h.io_running == "No" || h.sql_running == "No") && !h.last_error.is_empty() =>
            {
                return Err(SandboxError::Sql {
                    node: label.to_string(),
                    what: format!(
                        "replication stopped (IO {}, SQL {}): {}",
                        h.io_running, h.sql_running, h.last_error
                    ),
                });
            }
            // Stopped by someone (STOP SLAVE), without an error: start it once.
            Some(h)
                if !restarted
                    && (h.io_running == "No" || h.sql_running == "No")
                    && start.elapsed() > Duration::from_millis(500) =>
            {
                restarted = true;
                conn.query_drop("START SLAVE")
                    .await
                    .map_err(|e| SandboxError::Sql {
                        node: label.to_string(),
                        what: format!("START SLAVE: {e}"),
                    })?;
            }
            Some(h) if start.elapsed() > Duration::from_secs(60) => {
                return Err(SandboxError::Sql {
                    node: label.to_string(),
                    what: format!(
                        "replication not running after 60s (IO {}, SQL {}): {}",
                        h.io_running, h.sql_running, h.last_error
                    ),
                })
            }
            None => {
                return Err(SandboxError::Sql {
                    node: label.to_string(),
                    what: "replica has no replication configured".into(),
                })
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    let _ = conn.disconnect().await;
    Ok(())
}
