//! Opening a reading session: the target connection and the lock that
//! makes it the only one for this source, the positions recorded there,
//! the source checked again, the start chosen the first time (and
//! recorded), and the binlog asked for from there.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, Conn};

use super::check::{
    cannot_send_from, check_source, oldest_gtid_list, open_stream, purged, CheckError,
};
use super::{set, Session, SessionError, SourceRunner};
use crate::apply::Applier;
use crate::config;
use crate::floor::Floor;
use crate::gtid::GtidPos;
use crate::retired;
use crate::work::ApplyError;

/// A session ready to read.
pub(super) struct Opened {
    pub(super) ctl: Applier,
    pub(super) session: Session,
    /// The source's binlog position when the session started.
    pub(super) source_pos: GtidPos,
    /// A second source connection, to follow its position while reading.
    pub(super) probe: Conn,
    pub(super) stream: BinlogStream,
}

impl SourceRunner {
    pub(super) async fn open(&self, generation: u64, first: bool) -> Result<Opened, SessionError> {
        let name = self.cfg.name.clone();
        set(&self.view, |v| v.state = "connecting".into());
        let mut ctl = Applier::open(&self.target)
            .await
            .map_err(|e| SessionError::Retry(format!("target: {}", e.text())))?;
        // One replicate per source: a second process would apply the same
        // transactions. The lock lives as long as this session's connection
        // (a killed process's is released by the server when it notices).
        let target = |e: ApplyError| SessionError::Retry(format!("target: {}", e.text()));
        let driver = |e: mysql_async::Error| SessionError::Retry(format!("target: {e}"));
        if let Err(what) = ctl
            .lock_source(&name, if first { 3 } else { 10 })
            .await
            .map_err(target)?
        {
            return Err(if first {
                SessionError::Refused(what)
            } else {
                SessionError::Retry(what)
            });
        }
        let mut book = ctl.book(&name);
        let mut stored = book
            .load()
            .await
            .map_err(|e| SessionError::Retry(format!("target: reading positions: {e}")))?;
        book.clear_errors().await.map_err(driver)?;
        // Retry requests before this session are answered by it.
        let retry_seen = book.last_retry().await.map_err(driver)?;
        if !first {
            // The target may have started again since this run began
            // (the run's own start asked already).
            for w in ctl.target_restarted(&self.cfg).await {
                tracing::warn!(source = %name, "{w}");
                set(&self.view, |v| v.warnings.push(w));
            }
        }
        let mut src = self
            .source
            .connect(Duration::from_secs(10))
            .await
            .map_err(|e| SessionError::Retry(format!("connecting: {e}")))?;
        let facts = check_source(&mut src, &self.cfg.dbs)
            .await
            .map_err(|e| match e {
                CheckError::Refused(w) if first => SessionError::Refused(w),
                CheckError::Refused(w) | CheckError::Query(w) => SessionError::Retry(w),
            })?;
        let mut start = if stored.started {
            stored.floor.clone()
        } else {
            let p = match &self.cfg.start {
                config::Start::Current => facts.binlog_pos.clone(),
                config::Start::Gtid(p) => p.clone(),
                config::Start::File { file, pos } => {
                    let g: Option<Option<String>> = src
                        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file.as_str(), *pos))
                        .await
                        .map_err(|e| SessionError::Retry(format!("BINLOG_GTID_POS: {e}")))?;
                    let g = g.flatten().ok_or_else(|| {
                        SessionError::Refused(format!(
                            "start = \"file:{file}:{pos}\": the source has no such binlog position"
                        ))
                    })?;
                    GtidPos::parse(&g).map_err(|e| SessionError::Refused(e.to_string()))?
                }
            };
            ctl.book(&name).write_start(&p).await.map_err(driver)?;
            p
        };
        let source_pos = facts.binlog_pos.clone();
        // What the target applied of it (from the start it records now,
        // the first time).
        let reached = if stored.started {
            stored.reached()
        } else {
            start.clone()
        };
        // A domain the source deleted after all of it was applied is
        // retired on the server's word (retired.rs); anything else behind
        // the floor is refused.
        let oldest = if reached.0.keys().all(|d| source_pos.0.contains_key(d)) {
            Err(String::new())
        } else {
            oldest_gtid_list(&mut src).await
        };
        let judged = retired::judge(
            &name,
            &reached,
            &source_pos,
            oldest.as_ref().map(|(_, l)| &l[..]).map_err(String::as_str),
        );
        for end in &judged.retire {
            let file = oldest.as_ref().map(|(f, _)| f.as_str()).unwrap_or("");
            ctl.book(&name)
                .retire(end, &format!("the Gtid_list of {file}"))
                .await
                .map_err(driver)?;
            stored.retire(*end);
            start.0.remove(&end.domain);
            tracing::info!(source = %name, "domain {} deleted on the source after everything of it was applied (its end {end}, named by the Gtid_list of {file}): retired, its next transactions are read as new ones", end.domain);
        }
        if let Some(why) = judged.refused {
            return Err(SessionError::Refused(why));
        }
        set(&self.view, |v| {
            v.state = "running".into();
            v.source_pos = source_pos.to_string();
            v.floor = start.to_string();
        });

        // From the floor; a retired domain is asked for at its end only
        // when the server wants it (1236 — at the request, or as the
        // stream's first answer, and the next session asks so: a file to
        // be read still lists it), and that session ends where the files
        // stop listing it (retired.rs).
        let with = retired::connect_state(&start, &stored.retired, &source_pos);
        let mut ask = if self
            .ask_retired
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            with.clone()
        } else {
            start.clone()
        };
        let stream = loop {
            let stream_conn = self
                .source
                .connect(Duration::from_secs(10))
                .await
                .map_err(|e| SessionError::Retry(format!("connecting: {e}")))?;
            match open_stream(stream_conn, self.cfg.server_id, &ask).await {
                Ok(stream) => break stream,
                Err(e) if purged(&e) && ask != with => ask = with.clone(),
                Err(e) if purged(&e) => {
                    return Err(SessionError::Refused(cannot_send_from(&ask, &e)))
                }
                Err(e) => return Err(SessionError::Retry(format!("requesting the binlog: {e}"))),
            }
        };
        let asked_retired = ask
            .0
            .keys()
            .filter(|d| !start.0.contains_key(d))
            .copied()
            .collect();

        let session = Session {
            generation,
            stored,
            read: start.clone(),
            floor: Floor::new(start.clone()),
            outstanding: 0,
            stopped: BTreeMap::new(),
            format: Arc::new(Vec::new()),
            last_read_time: 0,
            retry_seen,
            stopped_at: None,
            engines: Default::default(),
            xa: Default::default(),
            asked_retired,
            may_ask_retired: with != start,
        };
        Ok(Opened {
            ctl,
            session,
            source_pos,
            probe: src,
            stream,
        })
    }
}
