//! A reading session's upkeep on the target: a stopped stream recorded
//! (error, GTID, the command that resumes it), and every half second
//! the floor written, the lag worked out, and the `replicate skip` /
//! `replicate retry` requests and `[apply] retry_after` that restart the
//! session looked for.

use std::time::Instant;

use super::{set, End, Session, SourceRunner};
use crate::apply::Applier;
use crate::gtid::{Gtid, GtidPos};
use crate::resume::{self, Stop};

impl SourceRunner {
    // The stop's facts as the sites have them (stream, GTID, error,
    // statement, kind): a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn stop_stream(
        &self,
        s: &mut Session,
        ctl: &mut Applier,
        stream: &str,
        g: &Gtid,
        error: &str,
        statement: &str,
        stop: Stop,
    ) {
        // The reason carries the command that resumes it (status, the
        // summary and the progress line all show it).
        let error = &resume::reason(error, &stop, &self.cfg.name, g);
        tracing::error!(source = %self.cfg.name, stream, gtid = %g, "stream stopped: {error} (statement: {statement})");
        s.stopped.insert(stream.to_string(), *g);
        s.stopped_at.get_or_insert_with(Instant::now);
        let _ = ctl
            .book(&self.cfg.name)
            .record_error(stream, g, error, statement)
            .await;
        set(&self.view, |v| {
            let e = v.streams.entry(stream.to_string()).or_default();
            e.error = Some(error.to_string());
            e.error_gtid = Some(g.to_string());
            e.statement = Some(statement.to_string());
        });
    }

    pub(super) async fn tick(&self, s: &mut Session, ctl: &mut Applier) -> Option<End> {
        if let Err(e) = self.write_floor(s, ctl).await {
            return Some(e);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let oldest = s.floor.oldest_unapplied();
        let read = s.read.clone();
        let last_read = s.last_read_time;
        set(&self.view, |v| {
            let caught_up = GtidPos::parse(&v.source_pos).is_ok_and(|p| read.behind(&p) == 0);
            v.lag_seconds = match oldest {
                Some(t) => Some(now.saturating_sub(u64::from(t))),
                None if caught_up => Some(0),
                // Behind, and nothing read yet: unknown, never 0.
                None if last_read == 0 => None,
                // The reader is behind and nothing is in flight: at least
                // as old as the last transaction read.
                None => Some(now.saturating_sub(u64::from(last_read))),
            };
        });
        if !s.stopped.is_empty() {
            // A `skip` recorded for a stopped stream's transaction
            // restarts the session, which honours it.
            let skips = ctl.book(&self.cfg.name).skips().await;
            match skips {
                Ok(list) => {
                    let list: Vec<Gtid> = list.iter().filter_map(|g| g.parse().ok()).collect();
                    if s.stopped
                        .values()
                        .any(|g| list.contains(g) && !s.stored.skips.contains(g))
                    {
                        return Some(End::Restart("a skip was recorded".into()));
                    }
                }
                Err(e) => return Some(End::Restart(format!("target: {e}"))),
            }
            // `replicate retry`: the session starts again from the target's
            // positions, which tries the stopped transactions again.
            match ctl.book(&self.cfg.name).retries(s.retry_seen).await {
                Ok(list) => {
                    if list
                        .iter()
                        .any(|(_, st)| st.is_empty() || s.stopped.contains_key(st))
                    {
                        return Some(End::Restart("a retry was requested".into()));
                    }
                    if let Some((id, _)) = list.last() {
                        s.retry_seen = *id;
                    }
                }
                Err(e) => return Some(End::Restart(format!("target: {e}"))),
            }
            if let (Some(after), Some(at)) = (self.retry_after, s.stopped_at) {
                let n = self
                    .auto_retries
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .min(6);
                let wait = after * 2u32.pow(n);
                if at.elapsed() >= wait {
                    self.auto_retries
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Some(End::Restart(format!(
                        "trying the stopped streams again after {}s ([apply] retry_after)",
                        wait.as_secs()
                    )));
                }
            }
        }
        None
    }

    pub(super) async fn write_floor(&self, s: &mut Session, ctl: &mut Applier) -> Result<(), End> {
        if let Some(p) = s.floor.to_write().cloned() {
            sqlfleet_faults::point!("replicate::floor_before_write");
            ctl.book(&self.cfg.name)
                .write_floor(&p)
                .await
                .map_err(|e| End::Restart(format!("target: {e}")))?;
            sqlfleet_faults::point!("replicate::floor_after_write");
            let f = p.to_string();
            s.floor.written(p);
            set(&self.view, |v| v.floor = f);
        }
        Ok(())
    }
}
