//! Reaching a source: the checks before anything is applied (MariaDB,
//! binlog on, databases that map onto distinct names),
//! registering as a GTID replica, and reading the commit time of the
//! first transaction after a floor (for `replicate status`).

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::BinlogStreamRequest;
use mysql_async::Conn;
use sqlfleet_conn::quote::literal;
use sqlfleet_conn::Target;

use super::Refused;
use crate::config;
use crate::gtid::{Gtid, GtidPos};

/// ER_MASTER_FATAL_ERROR_READING_BINLOG: the source cannot send from the
/// requested position (its binlog was purged, or never had it).
pub(super) fn purged(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if s.code == 1236)
}

/// Why the source refused to send its binlog from `pos` ([`purged`]): the
/// server's own words say which of the causes it is.
pub(super) fn cannot_send_from(pos: &GtidPos, e: &mysql_async::Error) -> String {
    format!(
        "the source cannot send its binlog from {pos}: its files were purged, or its history lacks that position (another server, a diverged failover, a reset); native replication stops here too: {e}"
    )
}

pub(super) enum CheckError {
    Refused(String),
    Query(String),
}

pub(super) struct Facts {
    pub(super) binlog_pos: GtidPos,
}

/// Checks a source before anything is applied: reachable, MariaDB with
/// binlog on, and its databases map onto distinct names.
pub async fn preflight(cfg: &config::Source, t: &Target) -> Result<(), Refused> {
    let refuse = |what: String| Refused {
        source_name: cfg.name.clone(),
        what,
    };
    let mut c = match t.connect(Duration::from_secs(10)).await {
        Ok(c) => c,
        // Wrong credentials will not get better; an unreachable server
        // may (its reader retries with back-off, as a replica does).
        Err(e) if e.server_code().is_some() => return Err(refuse(e.to_string())),
        Err(e) => {
            tracing::warn!(source = %cfg.name, "not reachable now, retrying: {e}");
            return Ok(());
        }
    };
    // What the server says is final; a connection lost on the way (the
    // source restarting just now) is retried by the reader, which checks
    // the same again before it reads anything.
    match check_source(&mut c, &cfg.dbs).await {
        Ok(_) => Ok(()),
        Err(CheckError::Refused(w)) => Err(refuse(w)),
        Err(CheckError::Query(w)) => {
            tracing::warn!(source = %cfg.name, "not readable now, retrying: {w}");
            Ok(())
        }
    }
}

/// A source the applier can follow: MariaDB, binlog on,
/// and its databases map onto distinct names on the target.
pub(super) async fn check_source(c: &mut Conn, map: &config::DbMap) -> Result<Facts, CheckError> {
    let q = |e: mysql_async::Error| CheckError::Query(format!("reading settings: {e}"));
    let version: String = c
        .query_first("SELECT @@version")
        .await
        .map_err(q)?
        .unwrap_or_default();
    if !version.contains("MariaDB") {
        return Err(CheckError::Refused(format!(
            "server version {version} is not MariaDB; replicate reads MariaDB binlogs (GTID mode) only for now"
        )));
    }
    let row: Option<(String, String)> = c
        .query_first("SELECT @@log_bin, @@gtid_binlog_pos")
        .await
        .map_err(q)?;
    let (log_bin, pos) = row.unwrap_or_default();
    if log_bin != "1" && !log_bin.eq_ignore_ascii_case("ON") {
        return Err(CheckError::Refused(
            "binary logging is off (log_bin=OFF): start the server with log_bin=ON (and binlog_format=ROW)".into(),
        ));
    }
    let binlog_pos = GtidPos::parse(&pos).map_err(|e| CheckError::Query(e.to_string()))?;
    let dbs: Vec<String> = c.query("SHOW DATABASES").await.map_err(|e| match e {
        mysql_async::Error::Server(_) => CheckError::Refused(format!("SHOW DATABASES: {e}")),
        other => CheckError::Query(format!("SHOW DATABASES: {other}")),
    })?;
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for d in &dbs {
        if let Some(to) = map.map(d) {
            if let Some(other) = seen.insert(to, d) {
                return Err(CheckError::Refused(format!(
                    "databases '{other}' and '{d}' would both be written into '{to}' (a rename onto an existing name)"
                )));
            }
        }
    }
    Ok(Facts { binlog_pos })
}

/// Registers as a MariaDB GTID replica and asks for events after `start`.
pub(super) async fn open_stream(
    mut conn: Conn,
    server_id: u32,
    start: &GtidPos,
) -> mysql_async::Result<mysql_async::BinlogStream> {
    conn.query_drop(format!(
        "SET @mariadb_slave_capability = 4, @slave_connect_state = {}, \
         @slave_gtid_strict_mode = 0, @slave_gtid_ignore_duplicates = 0, \
         @master_heartbeat_period = 5000000000",
        literal(&start.to_string())
    ))
    .await?;
    conn.get_binlog_stream(
        BinlogStreamRequest::new(server_id)
            .with_filename(b"")
            .with_pos(4u64),
    )
    .await
}

/// Reads the source's binlog after `from` on `conn` as a replica reads
/// it, registered as `{name}/{role}` so a running replicate's reader is
/// not displaced: each event goes to `each` until it answers `Some`, a
/// heartbeat says there is nothing more, or `limit` passes (`late`, the
/// error then).
async fn read_after<T>(
    conn: Conn,
    name: &str,
    role: &str,
    from: &GtidPos,
    limit: Duration,
    late: &str,
    mut each: impl FnMut(&mysql_common::binlog::events::Event) -> Result<Option<T>, String>,
) -> Result<Option<T>, String> {
    let id = config::default_server_id(&format!("{name}/{role}"));
    let mut stream = open_stream(conn, id, from)
        .await
        .map_err(|e| format!("requesting the binlog: {e}"))?;
    let read = async {
        while let Some(ev) = stream.next().await {
            let ev = ev.map_err(|e| e.to_string())?;
            if ev.header().event_type_raw()
                == mysql_common::binlog::consts::EventType::HEARTBEAT_EVENT as u8
            {
                break;
            }
            if let Some(t) = each(&ev)? {
                return Ok(Some(t));
            }
        }
        Ok(None)
    };
    let r = tokio::time::timeout(limit, read)
        .await
        .unwrap_or_else(|_| Err(late.to_string()));
    let _ = stream.close().await;
    r
}

/// The source commit time of the first transaction after `floor` (the
/// oldest one not applied), read from the source's binlog as a replica
/// reads it; `None` when there is none yet.
pub(crate) async fn first_after(
    source: &Target,
    name: &str,
    floor: &GtidPos,
) -> Result<Option<u32>, String> {
    let conn = source
        .connect(Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    read_after(
        conn,
        name,
        "status",
        floor,
        Duration::from_secs(10),
        "no transaction read from the source's binlog within 10 s",
        |ev| {
            let h = ev.header();
            Ok((h.event_type_raw() == crate::event::mariadb::GTID).then(|| h.timestamp()))
        },
    )
    .await
}

/// The source's binlog position (`@@gtid_binlog_pos`).
pub(crate) async fn binlog_pos(conn: &mut Conn) -> Result<GtidPos, String> {
    let p: Option<String> = conn
        .query_first("SELECT @@gtid_binlog_pos")
        .await
        .map_err(|e| e.to_string())?;
    GtidPos::parse(&p.unwrap_or_default()).map_err(|e| e.to_string())
}

/// The source's oldest binlog file and the GTIDs its Gtid_list event
/// names (retired.rs: where a domain deleted since ended), as the server
/// reports them (`SHOW BINARY LOGS`, `SHOW BINLOG EVENTS`).
pub(crate) async fn oldest_gtid_list(conn: &mut Conn) -> Result<(String, Vec<Gtid>), String> {
    let first: Option<mysql_async::Row> = conn
        .query_first("SHOW BINARY LOGS")
        .await
        .map_err(|e| format!("SHOW BINARY LOGS: {e}"))?;
    let file: String = first
        .and_then(|r| r.get_opt::<String, _>(0).and_then(Result::ok))
        .ok_or("SHOW BINARY LOGS: no binlog file")?;
    let events: Vec<mysql_async::Row> = conn
        .query(format!("SHOW BINLOG EVENTS IN {} LIMIT 4", literal(&file)))
        .await
        .map_err(|e| format!("SHOW BINLOG EVENTS IN '{file}': {e}"))?;
    let info = events
        .iter()
        .find(|r| {
            r.get_opt::<String, _>("Event_type")
                .and_then(Result::ok)
                .is_some_and(|t| t == "Gtid_list")
        })
        .and_then(|r| r.get_opt::<String, _>("Info").and_then(Result::ok))
        .ok_or_else(|| format!("{file} begins with no Gtid_list event"))?;
    let list = crate::retired::parse_list(&info)
        .ok_or_else(|| format!("{file}'s Gtid_list event reads {info:?}, not a GTID list"))?;
    Ok((file, list))
}

/// Of the XA transactions `wanted`, those whose `XA PREPARE` the source's
/// binlog holds after `from`, up to its position when asked (read as a
/// replica reads, until all are found): `replicate seed` tells by it
/// which branches still prepared were prepared before its snapshot.
/// Bounded by 30 minutes of reading.
pub(crate) async fn xa_prepared_after(
    source: &Target,
    name: &str,
    from: &GtidPos,
    wanted: &[crate::gtid::XaId],
) -> Result<std::collections::HashSet<crate::gtid::XaId>, String> {
    let mut conn = source
        .connect(Duration::from_secs(10))
        .await
        .map_err(|e| e.to_string())?;
    let until = binlog_pos(&mut conn).await?;
    let mut seen = from.clone();
    let mut prepared = std::collections::HashSet::new();
    if until.0.values().all(|g| seen.covers(g)) {
        return Ok(prepared);
    }
    read_after(
        conn,
        name,
        "seed",
        from,
        Duration::from_secs(30 * 60),
        "the source's binlog since the snapshot was not read within 30 minutes",
        |ev| {
            if ev.header().event_type_raw() == crate::event::mariadb::GTID {
                let g = crate::gtid::decode_gtid_event(ev.data()).map_err(|e| e.to_string())?;
                if g.flags & crate::gtid::flags::PREPARED_XA != 0 {
                    prepared.extend(g.xid.filter(|x| wanted.contains(x)));
                }
                seen.advance(Gtid {
                    domain: g.domain,
                    server: ev.header().server_id(),
                    seq: g.seq,
                });
            }
            let done = prepared.len() == wanted.len() || until.0.values().all(|g| seen.covers(g));
            Ok(done.then_some(()))
        },
    )
    .await?;
    Ok(prepared)
}
