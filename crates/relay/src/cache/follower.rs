//! The result cache's binlog follower: the I/O around `follow.rs` (what an
//! event makes stale) and `caught_up.rs` (how far behind it is). While
//! cache rules exist it reads the binary log of the backend writes go to,
//! as a replica does (its own replica id), from where that log ended when
//! it started, and at each commit read makes stale what the commit
//! changed (the tables, with what their triggers and foreign keys change:
//! `backend/write_scope.rs`, as for writes through the relay) — once at
//! once and once more [`SETTLE`] later, for the commit's engine part that
//! a server makes visible just after writing its binlog. Every
//! [`probe_every`] it asks where the log ends (`SHOW MASTER STATUS`, on a
//! second connection); the gate (`gate.rs`) opens only while everything
//! committed up to `max_lag` ago has been read.
//!
//! On a Galera cluster whose nodes log only their own writes
//! (log_slave_updates OFF) it follows every member's log at once, one
//! gate slot each, the cluster's size checked against the members the
//! relay knows.
//!
//! Blind — the account may not read the log, the log is off, a member
//! unreachable or one the relay does not know, several writable backends,
//! the connection lost or silent — the gate shuts and the cache is
//! bypassed; each restart makes everything stale first. What it costs the
//! primary: one binlog dump connection and a position question a few
//! times a second while rules exist, counted in /metrics
//! (`own_queries_total{kind="binlog_position"}`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn};
use mysql_common::binlog::consts::{BinlogChecksumAlg, BinlogVersion, EventType};
use mysql_common::binlog::events::{Event, QueryEvent, RotateEvent, TableMapEvent};
use sqlfleet_conn::Target;
use sqlfleet_wire::binlog_compressed as compressed;

use crate::admin::metrics::{Metrics, OwnQuery};
use crate::backend::write_scope::WriteScopes;
use crate::cache::caught_up::{BinPos, CaughtUp};
use crate::cache::follow::{Ev, Follow, Stale};
use crate::cache::row_change;
use crate::cache::{Cache, Change, Scope};
use crate::routing::cache_rules::FollowSettings;

/// A commit's invalidation is made again this long after it is read: a
/// server writes its binary log before its storage engine's commit is
/// visible to readers (group commit: microseconds to milliseconds), and a
/// read in between would be kept as if after the commit.
pub const SETTLE: Duration = Duration::from_millis(200);

/// How often the follower asks where the primary's log ends: a quarter
/// of `max_lag`, between 25 ms and 1 s.
pub fn probe_every(max_lag: Duration) -> Duration {
    (max_lag / 4).clamp(Duration::from_millis(25), Duration::from_secs(1))
}

/// A replica id for this relay: derived from the host's name and the
/// relay's listen addresses (stable across restarts, apart from another
/// relay's), high enough not to meet hand-numbered servers; `[cache]
/// server_id` sets it.
pub fn default_server_id(listen: &[String]) -> u32 {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let text = format!("sqlfleet-relay/{}/{}", host.trim(), listen.join(","));
    let h = text.bytes().fold(2_166_136_261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16_777_619)
    });
    0x6000_0000 | (h & 0x0FFF_FFFF)
}

/// The longest a position question or a connect may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// What the follower needs of the relay (wired in relay.rs).
pub struct Wiring<'a> {
    pub cache: &'a Cache,
    pub scopes: &'a WriteScopes,
    pub metrics: &'a Metrics,
    /// The backend writes go to now — its name and how the relay's
    /// account reaches it — or why there is none to follow.
    pub primary: Box<dyn Fn() -> Result<(String, Target), String> + Send + Sync + 'a>,
    /// Every configured member of a Galera cluster, as `primary` names
    /// them (empty when the backends are not one).
    pub members: Box<dyn Fn() -> Vec<(String, Target)> + Send + Sync + 'a>,
    pub server_id: u32,
}

/// Whose log a following session reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The backend writes go to: its log holds every write.
    Writer,
    /// Member `slot` of the `of` a Galera cluster's followed members: its
    /// log holds its own writes, the members' logs together every write.
    Member { slot: usize, of: usize },
}

impl Role {
    fn slot(self) -> usize {
        match self {
            Role::Writer => 0,
            Role::Member { slot, .. } => slot,
        }
    }
}

/// How a following session ended without an error.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// No cache rule left.
    Idle,
    /// The writer is a Galera node whose log holds only its own writes:
    /// every member's log is to be followed.
    Members,
}

/// Follows while the relay runs (the task is dropped with it).
pub async fn run(w: Wiring<'_>, settings: FollowSettings) {
    w.cache.gate.follow();
    let started = Instant::now();
    let mut said = String::new();
    // Again soon after a failure, then less often (up to a second).
    let mut wait = RETRY_FIRST;
    loop {
        if !w.cache.active() {
            w.cache.gate.idle();
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let why = match (w.primary)() {
            Ok((name, target)) => {
                let began = Instant::now();
                let r = match session(&w, &settings, Role::Writer, &name, &target).await {
                    Ok(Ended::Members) => members(&w, &settings).await,
                    Ok(Ended::Idle) => Ok(()),
                    Err(why) => Err(format!("{name}: {why}")),
                };
                if began.elapsed() > Duration::from_secs(10) {
                    wait = RETRY_FIRST;
                }
                match r {
                    Ok(()) => continue,
                    Err(why) => why,
                }
            }
            Err(why) => why,
        };
        w.cache.gate.blind(why.clone());
        // (not while the health checks have yet to find the primary)
        if why != said && started.elapsed() > QUIET_START {
            tracing::warn!("relay cache: bypassed while blind to the primary's writes: {why}");
            said = why;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(1));
    }
}

/// The first wait before following again.
const RETRY_FIRST: Duration = Duration::from_millis(20);

/// At start the health checks have not yet found the primary: no warning.
const QUIET_START: Duration = Duration::from_secs(3);

/// Where the log ends now (file name and position), asked on `c`.
async fn log_end(w: &Wiring<'_>, c: &mut Conn) -> Result<(String, BinPos), String> {
    w.metrics.own_query(OwnQuery::BinlogPosition);
    let mut row = ask(c, "SHOW MASTER STATUS").await?;
    // (MySQL 8.4 knows it only as SHOW BINARY LOG STATUS)
    if matches!(&row, Err(mysql_async::Error::Server(s)) if s.code == 1064) {
        w.metrics.own_query(OwnQuery::BinlogPosition);
        row = ask(c, "SHOW BINARY LOG STATUS").await?;
    }
    let row = row.map_err(|e| match &e {
            mysql_async::Error::Server(s) if s.code == 1227 => format!(
                "the relay's account may not read where the binary log ends ({}): GRANT BINLOG MONITOR, REPLICATION SLAVE ON *.* TO it",
                s.message
            ),
            _ => format!("SHOW MASTER STATUS: {e}"),
        })?;
    let row = row.ok_or(
        "the primary writes no binary log (log_bin is OFF): writes made elsewhere cannot be seen",
    )?;
    // (by name, converted without a panic: the columns are the server's)
    let file: Option<String> = row.get_opt("File").and_then(Result::ok);
    let pos: Option<u64> = row.get_opt("Position").and_then(Result::ok);
    let (Some(file), Some(pos)) = (file, pos) else {
        return Err(format!(
            "SHOW MASTER STATUS gave no File and Position: {row:?}"
        ));
    };
    let at =
        BinPos::of(&file, pos).ok_or_else(|| format!("binary log file {file:?} has no number"))?;
    Ok((file, at))
}

/// One row of `sql` on `c`, within [`ASK_TIMEOUT`].
async fn ask(
    c: &mut Conn,
    sql: &'static str,
) -> Result<mysql_async::Result<Option<mysql_async::Row>>, String> {
    tokio::time::timeout(ASK_TIMEOUT, c.query_first(sql))
        .await
        .map_err(|_| format!("{sql}: no answer within {}s", ASK_TIMEOUT.as_secs()))
}

/// Follows every member of the Galera cluster at once, each on its own
/// gate slot, until one of them ends (its error named).
async fn members(w: &Wiring<'_>, settings: &FollowSettings) -> Result<(), String> {
    let list = (w.members)();
    if list.is_empty() {
        return Err("a Galera node whose binary log holds only its own writes (log_slave_updates is OFF), and no members to follow".into());
    }
    let names: Vec<String> = list.iter().map(|(n, _)| n.clone()).collect();
    w.cache.gate.logs(list.len());
    w.cache.gate.set(|v| {
        v.backend = Some(names.join(", "));
        v.members = names.clone();
    });
    let of = list.len();
    let sessions = list.iter().enumerate().map(|(i, (name, target))| {
        Box::pin(async move {
            let role = Role::Member { slot: i, of };
            match session(w, settings, role, name, target).await {
                Ok(_) => Ok(()),
                Err(why) => Err(format!(
                    "{name} (a Galera member whose log holds only its own writes): {why}"
                )),
            }
        })
    });
    let (first, _, _) = futures_util::future::select_all(sessions).await;
    first
}

/// Whether this server's binary log holds every write the cache must see
/// (`Ok(false)`), or, a Galera node's without the other nodes' writes,
/// only its own (`Ok(true)`); off, none.
async fn check_log(w: &Wiring<'_>, c: &mut Conn) -> Result<bool, String> {
    w.metrics.own_query(OwnQuery::BinlogPosition);
    let rows: Vec<mysql_async::Row> = tokio::time::timeout(
        ASK_TIMEOUT,
        c.query("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('log_bin', 'wsrep_on', 'log_slave_updates', 'binlog_row_metadata')"),
    )
    .await
    .map_err(|_| "no answer to SHOW GLOBAL VARIABLES".to_string())?
    .map_err(|e| format!("SHOW GLOBAL VARIABLES: {e}"))?;
    let text =
        |r: &mysql_async::Row, i: usize| -> Option<String> { r.get_opt(i).and_then(Result::ok) };
    let vars: Vec<(String, String)> = rows
        .iter()
        .filter_map(|r| Some((text(r, 0)?, text(r, 1)?)))
        .collect();
    let on = |n: &str| {
        vars.iter()
            .any(|(k, v)| k.eq_ignore_ascii_case(n) && v.eq_ignore_ascii_case("ON"))
    };
    if !on("log_bin") {
        return Err("the primary writes no binary log (log_bin is OFF): writes made elsewhere cannot be seen".into());
    }
    // (Row events name their columns only with FULL: else a change of
    // rows makes its whole table stale.)
    let meta = vars
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("binlog_row_metadata"))
        .map(|(_, v)| v.clone());
    w.cache.gate.set(|v| v.row_metadata = meta.clone());
    Ok(on("wsrep_on") && !on("log_slave_updates"))
}

/// The number of members of the Galera cluster `c`'s node is in (its
/// `wsrep_cluster_size`).
async fn cluster_size(w: &Wiring<'_>, c: &mut Conn) -> Result<usize, String> {
    w.metrics.own_query(OwnQuery::BinlogPosition);
    let row = ask(c, "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'")
        .await?
        .map_err(|e| format!("SHOW GLOBAL STATUS: {e}"))?;
    row.and_then(|r| r.get_opt::<String, _>(1).and_then(Result::ok))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "no wsrep_cluster_size".to_string())
}

/// Fail closed: a cluster with more members than the relay follows has
/// writes no followed log holds.
async fn all_members_known(w: &Wiring<'_>, c: &mut Conn, known: usize) -> Result<(), String> {
    let size = cluster_size(w, c).await?;
    if size > known {
        return Err(format!(
            "the Galera cluster has {size} members and the relay knows {known}: the others' writes cannot be seen (list every node in [backend] servers, or set log_slave_updates)"
        ));
    }
    Ok(())
}

/// The binary log from `file` at `offset`, as MariaDB sends it to a
/// replica that knows GTID events, with a heartbeat whenever nothing else
/// was sent for `every`.
async fn binlog_stream(
    w: &Wiring<'_>,
    mut stream_conn: Conn,
    file: &str,
    offset: u64,
    every: Duration,
) -> Result<mysql_async::BinlogStream, String> {
    let late = |what: &str| format!("{what}: no answer within {}s", ASK_TIMEOUT.as_secs());
    tokio::time::timeout(
        ASK_TIMEOUT,
        stream_conn.query_drop(format!(
            "SET @mariadb_slave_capability = 4, @master_heartbeat_period = {}",
            every.as_nanos()
        )),
    )
    .await
    .map_err(|_| late("preparing the binlog stream"))?
    .map_err(|e| format!("preparing the binlog stream: {e}"))?;
    let request = stream_conn.get_binlog_stream(
        BinlogStreamRequest::new(w.server_id)
            .with_filename(file.as_bytes())
            .with_pos(offset),
    );
    tokio::time::timeout(ASK_TIMEOUT, request)
        .await
        .map_err(|_| late("requesting the binary log"))?
        .map_err(|e| match &e {
            mysql_async::Error::Server(s) if s.code == 1227 => format!(
                "the relay's account may not read the binary log ({}): GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO it",
                s.message
            ),
            _ => format!("requesting the binary log: {e}"),
        })
}

/// Whether the server `probe` reaches may be followed in `role`: `None`
/// when the writer's log holds only its own writes (every member's log is
/// to be followed instead); else the members followed (0 for the writer).
async fn take_role(w: &Wiring<'_>, probe: &mut Conn, role: Role) -> Result<Option<usize>, String> {
    let own_only = check_log(w, probe).await?;
    match role {
        Role::Writer if own_only => Ok(None),
        Role::Writer => {
            w.cache.gate.logs(1);
            Ok(Some(0))
        }
        // (The members this round follows, not those known now: a node
        // up since is not followed yet.)
        Role::Member { of, .. } => {
            all_members_known(w, probe, of).await?;
            Ok(Some(of))
        }
    }
}

/// One following session: until an error (or the rules are gone).
async fn session(
    w: &Wiring<'_>,
    settings: &FollowSettings,
    role: Role,
    name: &str,
    target: &Target,
) -> Result<Ended, String> {
    let connect = || async {
        target
            .connect(ASK_TIMEOUT)
            .await
            .map_err(|e| format!("connecting: {e}"))
    };
    let mut probe = connect().await?;
    let Some(members) = take_role(w, &mut probe, role).await? else {
        return Ok(Ended::Members);
    };
    let slot = role.slot();
    let every = probe_every(settings.max_lag);
    let sent = Instant::now();
    let (mut file, start) = log_end(w, &mut probe).await?;
    let mut stream = binlog_stream(w, connect().await?, &file, start.offset, every).await?;
    // Blind until now: whatever was kept may predate a write not seen.
    let mut settle: VecDeque<(Instant, Change)> = VecDeque::new();
    w.cache.invalidate();
    settle.push_back((Instant::now() + SETTLE, Change::whole()));
    let mut caught = CaughtUp::start(sent, start);
    w.cache.gate.caught_up_in(slot, sent, settings.max_lag);
    // (/status shows the file and offset of the writer's log, or of the
    // first member's)
    w.cache.gate.set(|v| {
        v.state = "following".into();
        v.reason = None;
        if role == Role::Writer {
            v.backend = Some(name.to_string());
            v.members.clear();
        }
        if slot == 0 {
            v.file = Some(file.clone());
            v.offset = start.offset;
        }
    });
    let mut follow = Follow::default();
    let mut maps = Maps::default();
    let mut formatted = false;
    let (mut file_no, mut last_end) = (start.file, start.offset);
    let mut last_event = Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let due = settle.front().map(|(at, _)| *at);
        tokio::select! {
            ev = stream.next() => {
                let ev = match ev {
                    Some(Ok(ev)) => ev,
                    Some(Err(e)) => return Err(format!("reading the binary log: {e}")),
                    None => return Err("the primary ended the binlog stream".into()),
                };
                last_event = Instant::now();
                let (stale, rotated) = read_event(&ev, &mut follow, &mut maps, &mut formatted)?;
                if let Some(stale) = stale {
                    let change = change_of(w, stale).await;
                    w.cache.invalidate_change(&change);
                    w.cache.gate.set(|v| {
                        v.commits += 1;
                        match change.scope {
                            Scope::Whole => v.whole += 1,
                            Scope::Tables(_) if change.rows.is_empty() => v.tables += 1,
                            Scope::Tables(_) => v.rows += 1,
                        }
                    });
                    settle.push_back((Instant::now() + SETTLE, change));
                }
                // Read to its end once what it made stale is stale (an
                // event's end is in the file it came from: a rotation
                // names the next file, but ends in the one before).
                let end = ev.header().log_pos() as u64;
                if end != 0 {
                    last_end = end;
                    caught.read_to(BinPos { file: file_no, offset: end });
                    if let Some(at) = caught.at() {
                        w.cache.gate.caught_up_in(slot, at, settings.max_lag);
                    }
                }
                if let Some(next) = rotated {
                    file_no = BinPos::of(&next, 0)
                        .ok_or_else(|| format!("binary log file {next:?} has no number"))?
                        .file;
                    file = next;
                }
            }
            _ = tick.tick() => {
                if !w.cache.active() {
                    return Ok(Ended::Idle);
                }
                match role {
                    Role::Writer => match (w.primary)() {
                        Ok((now, _)) if now == name => {}
                        Ok((now, _)) => return Err(format!("writes go to {now} now")),
                        Err(why) => return Err(why),
                    },
                    // (A member's writes are followed wherever the
                    // writer is; the cluster's size, by the first member.)
                    Role::Member { slot: 0, .. } => {
                        all_members_known(w, &mut probe, members).await?
                    }
                    Role::Member { .. } => {}
                }
                let silent = (every * 4).max(Duration::from_secs(2));
                if last_event.elapsed() > silent {
                    return Err(format!(
                        "no event nor heartbeat for {:.1}s",
                        last_event.elapsed().as_secs_f64()
                    ));
                }
                if slot == 0 {
                    w.cache.gate.set(|v| {
                        v.file = Some(file.clone());
                        v.offset = last_end;
                    });
                }
                let sent = Instant::now();
                let (_, end) = log_end(w, &mut probe).await?;
                caught.asked(sent, end);
                if let Some(at) = caught.at() {
                    w.cache.gate.caught_up_in(slot, at, settings.max_lag);
                }
            }
            _ = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            } => {
                let now = Instant::now();
                while settle.front().is_some_and(|(at, _)| *at <= now) {
                    if let Some((_, change)) = settle.pop_front() {
                        w.cache.invalidate_change(&change);
                    }
                }
            }
        }
    }
}

/// What a commit made stale: its tables and what their triggers and
/// foreign keys change, or everything when that is unsure; a table whose
/// rows the log named, only those rows (and what its triggers write,
/// whole) — unless a foreign key's action (which the log does not show)
/// or anything unsure makes it everything.
async fn change_of(w: &Wiring<'_>, stale: Stale) -> Change {
    let (refs, rows) = match stale {
        Stale::Whole => return Change::whole(),
        Stale::Tables(refs) => (refs, Vec::new()),
        Stale::Rows(refs, rows) => (refs, rows),
    };
    let mut tables = std::collections::BTreeSet::new();
    if !refs.is_empty() {
        match w.scopes.tables(None, &refs).await {
            Some(t) => tables.extend(t),
            None => return Change::whole(),
        }
    }
    let mut keyed = Vec::new();
    for (r, keys) in rows {
        let (Some(t), Some(name)) = (
            w.scopes.tables(None, std::slice::from_ref(&r)).await,
            crate::backend::write_scope::folded(&r.name),
        ) else {
            return Change::whole();
        };
        tables.extend(t.into_iter().filter(|n| *n != name));
        keyed.push((name, keys));
    }
    Change {
        scope: Scope::Tables(std::sync::Arc::new(tables)),
        rows: std::sync::Arc::new(keyed),
    }
}

/// The table maps of the group being read, by table id (a rows event
/// names its table by the id its map gave).
#[derive(Default)]
struct Maps(std::collections::HashMap<u64, TableMapEvent<'static>>);

/// MariaDB's event types the binlog library leaves unparsed.
const MARIADB_ANNOTATE_ROWS: u8 = 160;
const MARIADB_BINLOG_CHECKPOINT: u8 = 161;
const MARIADB_GTID: u8 = 162;
const MARIADB_GTID_LIST: u8 = 163;
const MARIADB_START_ENCRYPTION: u8 = 164;
/// A MariaDB GTID event's flag: its group is one statement (DDL).
const FL_STANDALONE: u8 = 1;

/// Reads one event into `follow`: what a commit made stale, and the
/// file a rotation names. A rotation before the stream's format
/// description may carry a checksum in its name (the reader cannot know
/// yet): none is taken from it then (it names the file asked for).
fn read_event(
    ev: &Event,
    follow: &mut Follow,
    maps: &mut Maps,
    formatted: &mut bool,
) -> Result<(Option<Stale>, Option<String>), String> {
    let t = ev.header().event_type_raw();
    if compressed::plain_type(t).is_some() {
        // log_bin_compress=ON: read as the plain event it stands for; one
        // that does not read as one (never seen from a server) makes
        // everything stale.
        let mut raw = Vec::with_capacity(ev.data().len() + 23);
        let _ = ev.write(BinlogVersion::Version4, &mut raw);
        let crc = matches!(
            ev.footer().get_checksum_alg(),
            Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32))
        );
        let lens = ev.fde().event_type_header_lengths();
        return match compressed::plain_event(&raw, crc, lens)
            .ok()
            .and_then(|plain| Event::read(ev.fde(), plain.as_slice()).ok())
        {
            Some(plain) => read_event(&plain, follow, maps, formatted),
            None => Ok((follow.step(Ev::Unread), None)),
        };
    }
    let bad = |what: &str, e: std::io::Error| format!("a {what} event it cannot read: {e}");
    let is = |k: EventType| t == k as u8;
    let stale = if is(EventType::QUERY_EVENT) {
        let q: QueryEvent = ev.read_event().map_err(|e| bad("query", e))?;
        follow.step(Ev::Query {
            db: q.schema_raw(),
            sql: q.query_raw(),
        })
    } else if is(EventType::TABLE_MAP_EVENT) {
        let m: TableMapEvent = ev.read_event().map_err(|e| bad("table map", e))?;
        let stale = follow.step(Ev::TableMap {
            db: m.database_name_raw(),
            table: m.table_name_raw(),
        });
        if maps.0.len() > 10_000 {
            maps.0.clear();
        }
        maps.0.insert(m.table_id(), m.into_owned());
        stale
    } else if is(EventType::XID_EVENT) {
        maps.0.clear();
        follow.step(Ev::Xid)
    } else if t == MARIADB_GTID {
        let flags = ev.data().get(12).copied().unwrap_or(0);
        follow.step(Ev::Gtid {
            standalone: flags & FL_STANDALONE != 0,
        })
    } else if is(EventType::ROTATE_EVENT) {
        if *formatted {
            let r: RotateEvent = ev.read_event().map_err(|e| bad("rotate", e))?;
            return Ok((
                None,
                Some(String::from_utf8_lossy(r.name_raw()).into_owned()),
            ));
        }
        None
    } else if is(EventType::FORMAT_DESCRIPTION_EVENT) {
        *formatted = true;
        None
    } else if [
        EventType::WRITE_ROWS_EVENT,
        EventType::UPDATE_ROWS_EVENT,
        EventType::DELETE_ROWS_EVENT,
        EventType::WRITE_ROWS_EVENT_V1,
        EventType::UPDATE_ROWS_EVENT_V1,
        EventType::DELETE_ROWS_EVENT_V1,
        EventType::PARTIAL_UPDATE_ROWS_EVENT,
    ]
    .into_iter()
    .any(is)
    {
        // Keyed when the log names its table's columns and rows.
        let tm = row_change::table_id(ev).and_then(|id| maps.0.get(&id));
        match tm.and_then(|tm| Some((tm, row_change::keys_of(ev, tm)?))) {
            Some((tm, keys)) => follow.step(Ev::KeyedRows {
                db: tm.database_name_raw(),
                table: tm.table_name_raw(),
                keys: &keys,
            }),
            None => follow.step(Ev::Rows),
        }
    } else if [
        EventType::HEARTBEAT_EVENT,
        EventType::STOP_EVENT,
        EventType::INTVAR_EVENT,
        EventType::RAND_EVENT,
        EventType::USER_VAR_EVENT,
        EventType::ROWS_QUERY_EVENT,
        EventType::PREVIOUS_GTIDS_EVENT,
        // MySQL's GTIDs: its groups open with BEGIN or are one statement
        EventType::GTID_EVENT,
        EventType::ANONYMOUS_GTID_EVENT,
    ]
    .into_iter()
    .any(is)
        || [
            MARIADB_ANNOTATE_ROWS,
            MARIADB_BINLOG_CHECKPOINT,
            MARIADB_GTID_LIST,
            MARIADB_START_ENCRYPTION,
        ]
        .contains(&t)
    {
        follow.step(Ev::Meta)
    } else {
        follow.step(Ev::Unread)
    };
    Ok((stale, None))
}
