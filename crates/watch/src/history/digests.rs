//! Statement digests over time: each server's top digests of each read
//! (at most [`PER_READ`], by time), their calls and seconds, kept beside
//! the samples at the same two resolutions — every read for the raw
//! window, folded into minutes after — and trimmed with them, so a chart
//! of one digest's calls and latency can be drawn for the last hour or
//! week. The texts are stored once each. Each read also gets a row of its
//! own (empty schema and text: [`READ`]) with the seconds it covers and
//! its statements' totals, so that a bucket's rate is over the time the
//! reads in it covered, not over its width.

use rusqlite::{params, Connection, Transaction};

use super::{History, HistoryError};

/// How many digests of one read are kept (the bound on rows per check).
pub const PER_READ: usize = 10;

/// The schema and text of a read's own row.
pub const READ: (&str, &str) = ("", "");

/// One digest's share of one read of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct DigestPoint {
    pub server: String,
    /// When the read was taken (Unix seconds).
    pub at: f64,
    /// The seconds it covers.
    pub span: f64,
    pub schema: String,
    pub digest: String,
    pub calls: u64,
    pub seconds: f64,
}

/// What a chart of one digest shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestMetric {
    /// Calls per second.
    Calls,
    /// Average latency in milliseconds (calls counted: performance_schema).
    Latency,
    /// Seconds of statement time per second (busy share; processlist
    /// sampling's only figure).
    Time,
}

impl DigestMetric {
    pub fn parse(s: &str) -> Option<DigestMetric> {
        match s {
            "calls" => Some(DigestMetric::Calls),
            "latency" => Some(DigestMetric::Latency),
            "time" => Some(DigestMetric::Time),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            DigestMetric::Calls => "calls/s",
            DigestMetric::Latency => "avg latency (ms)",
            DigestMetric::Time => "statement seconds/s",
        }
    }

    /// The bucket's value from its sums (`None`: nothing to show, e.g. a
    /// latency without calls).
    pub fn value(self, calls: f64, seconds: f64, span: f64) -> Option<f64> {
        match self {
            DigestMetric::Calls => (span > 0.0).then(|| calls / span),
            DigestMetric::Latency => (calls > 0.0).then(|| seconds * 1000.0 / calls),
            DigestMetric::Time => (span > 0.0).then(|| seconds / span),
        }
    }
}

/// What one read of one server leaves in the history: a row of its own
/// ([`READ`]: the time it covers, its statements' totals) and its
/// [`PER_READ`] costliest digests by time.
pub fn points_of_read(
    server: &str,
    at: f64,
    span: f64,
    deltas: &[crate::statements::Delta],
) -> Vec<DigestPoint> {
    let point = |schema: &str, digest: &str, calls: u64, seconds: f64| DigestPoint {
        server: server.to_string(),
        at,
        span,
        schema: schema.to_string(),
        digest: digest.to_string(),
        calls,
        seconds,
    };
    let mut top: Vec<&crate::statements::Delta> = deltas.iter().collect();
    top.sort_by(|a, b| {
        b.seconds
            .total_cmp(&a.seconds)
            .then_with(|| a.digest.cmp(&b.digest))
    });
    top.truncate(PER_READ);
    let mut out = Vec::with_capacity(top.len() + 1);
    out.push(point(
        READ.0,
        READ.1,
        deltas.iter().map(|d| d.calls).sum(),
        deltas.iter().map(|d| d.seconds).sum(),
    ));
    out.extend(
        top.into_iter()
            .map(|d| point(&d.schema, &d.digest, d.calls, d.seconds)),
    );
    out
}

pub(super) const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS digest_texts(
        id INTEGER PRIMARY KEY, schema TEXT NOT NULL, text TEXT NOT NULL, UNIQUE(schema, text));
    CREATE TABLE IF NOT EXISTS digest_samples(
        server INTEGER NOT NULL, digest INTEGER NOT NULL, tier INTEGER NOT NULL, at INTEGER NOT NULL,
        calls REAL NOT NULL, seconds REAL NOT NULL, span REAL NOT NULL,
        PRIMARY KEY(server, digest, tier, at)) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS digest_samples_by_time ON digest_samples(tier, at);";

impl History {
    /// Writes the digests of a batch of reads in one transaction.
    pub fn record_digests(&self, points: &[DigestPoint]) -> Result<(), HistoryError> {
        if points.is_empty() {
            return Ok(());
        }
        self.with(|c| {
            let tx = c.transaction()?;
            {
                let mut server = tx.prepare_cached(super::SERVER_ID)?;
                let mut text = tx.prepare_cached(
                    "INSERT INTO digest_texts(schema, text) VALUES (?1, ?2)
                     ON CONFLICT(schema, text) DO UPDATE SET text = text RETURNING id",
                )?;
                let mut ins = tx.prepare_cached(
                    "INSERT INTO digest_samples(server, digest, tier, at, calls, seconds, span)
                     VALUES (?1, ?2, 0, ?3, ?4, ?5, ?6)
                     ON CONFLICT(server, digest, tier, at) DO UPDATE SET
                       calls = calls + excluded.calls, seconds = seconds + excluded.seconds,
                       span = span + excluded.span",
                )?;
                for p in points {
                    let s: i64 = server.query_row([&p.server], |r| r.get(0))?;
                    let d: i64 = text.query_row(params![p.schema, p.digest], |r| r.get(0))?;
                    ins.execute(params![
                        s,
                        d,
                        p.at.floor() as i64,
                        p.calls as f64,
                        p.seconds,
                        p.span
                    ])?;
                }
            }
            tx.commit()
        })
    }

    /// One digest of one server between `from` and `to`, at most `points`
    /// values (summed into equal buckets), from the reads when the range
    /// lies within the raw window, else from the minutes.
    #[allow(clippy::too_many_arguments)]
    pub fn digest_series(
        &self,
        server: &str,
        schema: &str,
        digest: &str,
        metric: DigestMetric,
        from: f64,
        to: f64,
        points: usize,
        now: f64,
    ) -> Result<Vec<(f64, f64)>, HistoryError> {
        let tier = i64::from(from < now - self.cfg.raw_keep);
        let step = if tier == 0 { 1.0 } else { 60.0 };
        let bucket = (((to - from) / points.max(1) as f64).max(step)).ceil() as i64;
        self.with(|c| {
            let mut q = c.prepare_cached(
                "SELECT (d.at / ?5) * ?5 AS b, SUM(d.calls), SUM(d.seconds), SUM(d.span)
                 FROM digest_samples d JOIN servers v ON v.id = d.server
                 JOIN digest_texts t ON t.id = d.digest
                 WHERE v.name = ?1 AND t.schema = ?2 AND t.text = ?3 AND d.tier = ?6
                   AND d.at >= ?4 AND d.at <= ?7
                 GROUP BY b ORDER BY b",
            )?;
            let mut sums =
                |schema: &str, text: &str| -> rusqlite::Result<Vec<(i64, f64, f64, f64)>> {
                    q.query_map(
                        params![
                            server,
                            schema,
                            text,
                            from.floor() as i64,
                            bucket,
                            tier,
                            to.ceil() as i64
                        ],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )?
                    .collect()
                };
            // The time the reads of each bucket covered.
            let covered: std::collections::HashMap<i64, f64> = sums(READ.0, READ.1)?
                .into_iter()
                .map(|(b, _, _, span)| (b, span))
                .collect();
            let mut out = Vec::new();
            for (b, calls, seconds, _) in sums(schema, digest)? {
                let span = covered.get(&b).copied().unwrap_or(bucket as f64);
                if let Some(v) = metric.value(calls, seconds, span) {
                    out.push((b as f64, v));
                }
            }
            Ok(out)
        })
    }
}

/// Folds the reads of finished minutes `[done, boundary)` into the minute
/// tier and drops what aged out (called inside compaction's transaction).
pub(super) fn compact(
    tx: &Transaction<'_>,
    done: i64,
    boundary: i64,
    raw_before: i64,
    minute_before: i64,
) -> rusqlite::Result<()> {
    if boundary > done {
        tx.execute(
            "INSERT OR REPLACE INTO digest_samples(server, digest, tier, at, calls, seconds, span)
             SELECT server, digest, 1, (at / 60) * 60, SUM(calls), SUM(seconds), SUM(span)
             FROM digest_samples WHERE tier = 0 AND at >= ?1 AND at < ?2
             GROUP BY server, digest, at / 60",
            params![done, boundary],
        )?;
    }
    tx.execute(
        "DELETE FROM digest_samples WHERE tier = 0 AND at < ?1",
        [raw_before],
    )?;
    tx.execute(
        "DELETE FROM digest_samples WHERE tier = 1 AND at < ?1",
        [minute_before],
    )?;
    tx.execute(
        "DELETE FROM digest_texts WHERE id NOT IN (SELECT DISTINCT digest FROM digest_samples)",
        [],
    )?;
    Ok(())
}

/// Drops a tier's digest rows older than `cut` (the size bound's trim).
pub(super) fn trim(c: &Connection, tier: i64, cut: i64) -> rusqlite::Result<()> {
    c.execute(
        "DELETE FROM digest_samples WHERE tier = ?1 AND at < ?2",
        params![tier, cut],
    )
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::HistoryConfig;

    fn point(at: f64, digest: &str, calls: u64, seconds: f64) -> DigestPoint {
        DigestPoint {
            server: "db1:3306".into(),
            at,
            span: 1.0,
            schema: "app".into(),
            digest: digest.into(),
            calls,
            seconds,
        }
    }

    #[test]
    fn metrics_from_a_buckets_sums() {
        use DigestMetric::*;
        let rows: &[(DigestMetric, f64, f64, f64, Option<f64>)] = &[
            (Calls, 30.0, 1.5, 10.0, Some(3.0)),
            (Latency, 30.0, 1.5, 10.0, Some(50.0)),
            (Latency, 0.0, 1.5, 10.0, None),
            (Time, 0.0, 2.5, 10.0, Some(0.25)),
            (Calls, 5.0, 0.0, 0.0, None),
        ];
        for (m, calls, seconds, span, want) in rows {
            assert_eq!(m.value(*calls, *seconds, *span), *want, "{m:?}");
        }
        assert_eq!(DigestMetric::parse("latency"), Some(Latency));
        assert_eq!(DigestMetric::parse("size"), None);
    }

    #[test]
    fn a_read_leaves_its_totals_and_its_costliest_digests() {
        let deltas: Vec<_> = (0..15)
            .map(|i| crate::statements::tests::delta(&format!("SELECT {i}"), 2, i as f64))
            .collect();
        let pts = points_of_read("db1:3306", 100.0, 1.0, &deltas);
        assert_eq!(pts.len(), 1 + PER_READ);
        assert_eq!((pts[0].schema.as_str(), pts[0].digest.as_str()), READ);
        assert_eq!((pts[0].calls, pts[0].seconds), (30, 105.0));
        assert_eq!(pts[1].digest, "SELECT 14");
        assert_eq!(pts[PER_READ].digest, "SELECT 5");
        assert!(pts.iter().all(|p| p.at == 100.0 && p.span == 1.0));
        assert_eq!(points_of_read("db1:3306", 1.0, 1.0, &[]).len(), 1);
    }

    #[test]
    fn one_digest_over_time_from_reads_and_then_minutes() {
        let dir = tempfile::tempdir().expect("tmp");
        let h = History::open(HistoryConfig::new(dir.path().join("h.db"))).expect("open");
        let t0 = 1_800_000_000.0 - 1_800_000_000.0 % 60.0;
        let mut pts = Vec::new();
        for i in 0..120 {
            // A read every second for the first 100 s, then a gap.
            if i >= 100 {
                continue;
            }
            pts.push(point(t0 + i as f64, "SELECT ? FROM t", 10, 0.02));
            pts.push(point(t0 + i as f64, "SELECT COUNT(*) FROM big", 1, 0.5));
            let mut read = point(t0 + i as f64, READ.1, 11, 0.52);
            read.schema = READ.0.into();
            pts.push(read);
        }
        h.record_digests(&pts).expect("record");
        let series = |schema: &str, text: &str, m, from, to, points, now| {
            h.digest_series("db1:3306", schema, text, m, from, to, points, now)
                .expect("series")
        };
        let now = t0 + 120.0;
        let calls = series(
            "app",
            "SELECT ? FROM t",
            DigestMetric::Calls,
            t0,
            now,
            1000,
            now,
        );
        assert_eq!(calls.len(), 100);
        assert!(
            calls.iter().all(|&(_, v)| (v - 10.0).abs() < 1e-9),
            "{calls:?}"
        );
        // In buckets of 60 s: the rate over the time the reads covered (40
        // s of the second minute), not over the minute.
        let wide = series(
            "app",
            "SELECT ? FROM t",
            DigestMetric::Calls,
            t0,
            now,
            2,
            now,
        );
        assert_eq!(wide.len(), 2, "{wide:?}");
        assert!(
            wide.iter().all(|&(_, v)| (v - 10.0).abs() < 1e-9),
            "{wide:?}"
        );
        let lat = series(
            "app",
            "SELECT COUNT(*) FROM big",
            DigestMetric::Latency,
            t0,
            now,
            4,
            now,
        );
        assert!(
            !lat.is_empty() && lat.iter().all(|&(_, v)| (v - 500.0).abs() < 1e-6),
            "{lat:?}"
        );
        // Another schema's digest of the same text is another digest.
        let none = series(
            "other",
            "SELECT ? FROM t",
            DigestMetric::Calls,
            t0,
            now,
            10,
            now,
        );
        assert!(none.is_empty());
        // Two hours later the reads have aged out; the minutes remain.
        h.compact(now).expect("compact");
        let later = now + 7200.0;
        h.compact(later).expect("compact");
        let minutes = series(
            "app",
            "SELECT ? FROM t",
            DigestMetric::Calls,
            t0,
            later,
            1000,
            later,
        );
        assert_eq!(minutes.len(), 2, "{minutes:?}");
        assert!(
            minutes.iter().all(|&(_, v)| (v - 10.0).abs() < 1e-9),
            "{minutes:?}"
        );
    }
}
