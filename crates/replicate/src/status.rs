//! `replicate status`, `skip`, `retry` and `retire-domain`: read (and,
//! for the requests, add to) what the target records, and compare with
//! each source's position.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sqlfleet_conn::Target;

use crate::config::Checked;
use crate::gtid::{Gtid, GtidPos};
use crate::position::{self, FLOOR};

#[derive(Debug, Clone, Serialize)]
pub struct StreamStatus {
    pub stream: String,
    pub position: String,
    pub applied_at: String,
    pub state: String,
    pub error: Option<String>,
    pub error_gtid: Option<String>,
    pub statement: Option<String>,
}

impl StreamStatus {
    fn new(stream: &str, position: String, applied_at: String) -> StreamStatus {
        StreamStatus {
            stream: stream.to_string(),
            position,
            applied_at,
            state: "ok".into(),
            error: None,
            error_gtid: None,
            statement: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceStatus {
    pub source: String,
    pub floor: String,
    pub source_position: Option<String>,
    pub source_error: Option<String>,
    /// Why the source is refused: its binlog is behind what the target
    /// applied of it (`GtidPos::behind_the_floor`).
    pub behind_the_floor: Option<String>,
    /// Source transactions past the floor.
    pub behind: Option<u64>,
    /// Seconds since the source committed the oldest transaction not yet
    /// applied (Seconds_Behind_Master's meaning): 0 when caught up, `None`
    /// when the source cannot be asked.
    pub lag_seconds: Option<u64>,
    pub skipped: Vec<String>,
    /// Domains the source deleted, retired at their ends (retired.rs).
    pub retired: Vec<String>,
    pub streams: Vec<StreamStatus>,
}

type Row = position::StreamRow;

pub async fn status(
    cfg: &Checked,
    target: &Target,
    sources: &[Target],
) -> Result<Vec<SourceStatus>, RequestError> {
    let mut t = control(target).await?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut out = Vec::new();
    for (s, st) in cfg.sources.iter().zip(sources) {
        let rows: Vec<Row> = position::Book::new(&mut t, &s.name)
            .stream_rows()
            .await
            .map_err(RequestError::Server)?;
        let errors = position::Book::new(&mut t, &s.name)
            .errors()
            .await
            .map_err(RequestError::Server)?;
        let skipped = position::Book::new(&mut t, &s.name)
            .skips()
            .await
            .map_err(RequestError::Server)?;
        let mut floor = GtidPos::default();
        let mut streams: Vec<StreamStatus> = Vec::new();
        let gtids: Vec<Gtid> = rows
            .iter()
            .map(|(_, _, domain, server, seq, _, _)| Gtid {
                domain: *domain,
                server: *server,
                seq: *seq,
            })
            .collect();
        // The floor and, past it, what each stream applied.
        let reached = GtidPos::furthest(&gtids);
        for ((stream, at, ..), &g) in rows.iter().zip(&gtids) {
            if stream == FLOOR {
                floor.advance(g);
                continue;
            }
            match streams.last_mut() {
                Some(x) if x.stream == *stream => {
                    x.position.push(',');
                    x.position.push_str(&g.to_string());
                }
                _ => streams.push(StreamStatus::new(stream, g.to_string(), at.clone())),
            }
        }
        let retired = position::retired(&mut t, &s.name)
            .await
            .map_err(RequestError::Server)?;
        let (source_position, oldest, source_error) = match source_pos(st, Some(&reached)).await {
            Ok((p, oldest)) => (Some(p), oldest, None),
            Err(e) => (None, Err(String::new()), Some(e)),
        };
        // As a reader judges it when it opens (a domain the source
        // deleted after all of it was applied is retired then, not
        // refused).
        let behind_the_floor = source_position.as_ref().and_then(|p| {
            crate::retired::judge(
                &s.name,
                &reached,
                p,
                oldest.as_ref().map(|(_, l)| &l[..]).map_err(String::as_str),
            )
            .refused
        });
        let behind = source_position.as_ref().map(|p| floor.behind(p));
        let lag_seconds = match behind {
            Some(0) => Some(0),
            // Unknown ("?") when the source's binlog does not say in time:
            // never 0 while behind.
            Some(_) => crate::source::first_after(
                st,
                &s.name,
                &crate::retired::connect_state(
                    &floor,
                    &retired,
                    source_position.as_ref().unwrap_or(&floor),
                ),
            )
            .await
            .ok()
            .flatten()
            .map(|t| now.saturating_sub(u64::from(t))),
            None => None,
        };
        for (stream, gtid, error, statement) in errors {
            let idx = match streams.iter().position(|x| x.stream == stream) {
                Some(i) => i,
                None => {
                    streams.push(StreamStatus::new(&stream, String::new(), String::new()));
                    streams.len() - 1
                }
            };
            let x = &mut streams[idx];
            x.state = "stopped".into();
            x.error = Some(error);
            x.error_gtid = Some(gtid);
            x.statement = Some(statement);
        }
        out.push(SourceStatus {
            source: s.name.clone(),
            floor: floor.to_string(),
            source_position: source_position.map(|p| p.to_string()),
            source_error,
            behind_the_floor,
            behind,
            lag_seconds,
            skipped,
            retired: retired.values().map(|g| g.to_string()).collect(),
            streams,
        });
    }
    Ok(out)
}

/// The source's binlog position and, when it lacks a domain of
/// `reached`, its oldest binlog file's Gtid_list (retired.rs; not asked
/// without `reached`).
async fn source_pos(t: &Target, reached: Option<&GtidPos>) -> Result<(GtidPos, Oldest), String> {
    let mut c = t
        .connect(Duration::from_secs(5))
        .await
        .map_err(|e| e.to_string())?;
    let p = crate::source::binlog_pos(&mut c).await?;
    let oldest = match reached {
        Some(r) if !r.0.keys().all(|d| p.0.contains_key(d)) => {
            crate::source::oldest_gtid_list(&mut c).await
        }
        _ => Err(String::new()),
    };
    let _ = c.disconnect().await;
    Ok((p, oldest))
}

/// The source's oldest binlog file and its Gtid_list, or why not.
type Oldest = Result<(String, Vec<Gtid>), String>;

/// Why the target could not be read (`status`) or a request (`retry`,
/// `skip`) was not recorded on it.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("target: {0}")]
    Connect(#[source] Box<sqlfleet_conn::ConnectError>),
    #[error("target: {0}")]
    Server(#[source] mysql_async::Error),
    #[error("source: {0}")]
    Source(String),
    /// The request was refused: the reason.
    #[error("{0}")]
    Refused(String),
}

/// A target connection with the replicate tables in place (for status
/// and the requests `retry` and `skip` record).
async fn control(target: &Target) -> Result<mysql_async::Conn, RequestError> {
    let mut t = target
        .connect(Duration::from_secs(10))
        .await
        .map_err(|e| RequestError::Connect(Box::new(e)))?;
    position::ensure(&mut t)
        .await
        .map_err(RequestError::Server)?;
    Ok(t)
}

/// Asks a running replicate (and the next start) to try the stopped
/// transactions of `source` (of `stream` only, when given) again.
pub async fn retry(target: &Target, source: &str, stream: &str) -> Result<u64, RequestError> {
    let mut t = control(target).await?;
    position::Book::new(&mut t, source)
        .record_retry(stream)
        .await
        .map_err(RequestError::Server)
}

/// Records that `gtid` of `source` is to be passed over (a running
/// replicate picks it up within a second; the next start otherwise).
pub async fn skip(
    target: &Target,
    source: &str,
    gtid: &Gtid,
    reason: &str,
) -> Result<(), RequestError> {
    let mut t = control(target).await?;
    position::Book::new(&mut t, source)
        .record_skip(gtid, reason)
        .await
        .map_err(RequestError::Server)
}

/// `replicate retire-domain`: records, on the operator's word, that
/// domain `end.domain` of `source` was applied to its end `end` and
/// deleted on the source (retired.rs: the source's binlog no longer says
/// where it ended, so a reader cannot retire it by itself). Refused while
/// a replicate reads the source, and unless `end` is the GTID applied
/// last there and the source does not have the domain.
pub async fn retire_domain(
    target: &Target,
    source_target: &Target,
    source: &str,
    end: &Gtid,
    reason: &str,
) -> Result<(), RequestError> {
    let mut t = control(target).await?;
    // Held until `t` closes: no replicate of the source starts meanwhile.
    // Waited for 2 s: a replicate that has just exited may hold it until
    // the server has ended its session.
    position::lock_source(&mut t, source, 2)
        .await
        .map_err(RequestError::Server)?
        .map_err(|who| RequestError::Refused(format!("source '{source}' {who}")))?;
    let stored = position::Book::new(&mut t, source)
        .load()
        .await
        .map_err(RequestError::Server)?;
    let (at, _) = source_pos(source_target, None)
        .await
        .map_err(RequestError::Source)?;
    crate::retired::operator_may_retire(&stored.reached(), &at, *end)
        .map_err(RequestError::Refused)?;
    let proof: String = format!("stated by the operator (replicate retire-domain): {reason}")
        .chars()
        .take(255)
        .collect();
    position::Book::new(&mut t, source)
        .retire(end, &proof)
        .await
        .map_err(RequestError::Server)?;
    let _ = t.disconnect().await;
    Ok(())
}
