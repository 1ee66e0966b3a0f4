//! Whether the target started again since the last run, and what that
//! cost the copies: a MEMORY table keeps its rows in memory only, so a
//! restart of the target empties its copy while the source's keeps its
//! rows — as on any restarted replica, and nothing in either binary log
//! says so (the source logs the emptying of its own MEMORY tables after
//! its restarts, which the copies then follow). replicate cannot refill
//! them; it says so at start, naming the tables, instead of going on as
//! if the copies were whole.
//!
//! The server tells it itself: a MEMORY table of ours,
//! `sqlfleet.replicate_memory`, holds a row per source its runs put
//! there, and `sqlfleet.replicate_target` (InnoDB) records that they did. A record
//! without the row is a start that emptied MEMORY tables — exact, where
//! a start time computed from `Uptime` moves by a second between reads.
//! [`restarted`] is the decision, table-tested below; [`check`] reads
//! and records.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// Our MEMORY table: a row per source, gone after a restart.
const MEMORY_TABLE: &str = "CREATE TABLE IF NOT EXISTS sqlfleet.replicate_memory (
    source VARCHAR(64) NOT NULL PRIMARY KEY) ENGINE=MEMORY";

/// Whether the target emptied its MEMORY tables since the last run:
/// that run recorded (`recorded`) the row it put in our MEMORY table, and
/// the row is gone (`row`). No record: a first run, nothing to say.
pub fn restarted(recorded: bool, row: bool) -> bool {
    recorded && !row
}

/// For each source, reads whether the target started again since that
/// source's last run, puts the row and its record back, and when it did,
/// names the MEMORY tables of the databases the source writes in a
/// warning each. Kept per source: two processes replicating other
/// sources into one target each learn of the restart. Asked when a run
/// starts and when a source's reading session opens again (a restart
/// while a run goes on). A failure to read or record is a warning too: a
/// run is not refused for it.
/// `dbs`: the target's databases, as the caller read them
/// (`SELECT SCHEMA_NAME FROM information_schema.SCHEMATA`).
pub async fn check(
    c: &mut Conn,
    sources: &[&crate::config::Source],
    dbs: &[String],
) -> Vec<String> {
    let mut out = Vec::new();
    if let Err(e) = c.query_drop(MEMORY_TABLE).await {
        return vec![format!(
            "could not make sqlfleet.replicate_memory, so a restart of the target that empties its MEMORY tables will go unsaid: {e}"
        )];
    }
    for src in sources {
        let name = src.name.as_str();
        let written: Vec<String> = dbs
            .iter()
            .filter(|d| src.dbs.writes_into(d))
            .map(|d| sqlfleet_conn::quote::utf8_literal(d))
            .collect();
        let read = async |c: &mut Conn, table: &str| -> Result<bool, String> {
            c.exec_first::<i64, _, _>(
                format!("SELECT COUNT(*) FROM sqlfleet.{table} WHERE source = ?"),
                (name,),
            )
            .await
            .map(|n| n.unwrap_or(0) > 0)
            .map_err(|e| format!("sqlfleet.{table}: {e}"))
        };
        let (recorded, row) = match (
            read(c, "replicate_target").await,
            read(c, "replicate_memory").await,
        ) {
            (Ok(r), Ok(m)) => (r, m),
            (Err(e), _) | (_, Err(e)) => {
                out.push(format!(
                    "source {name}: could not tell whether the target started again (a restart empties its MEMORY tables): {e}"
                ));
                continue;
            }
        };
        if restarted(recorded, row) && !written.is_empty() {
            let tables: Vec<(String, String)> = c
                .query(format!(
                    "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
                     WHERE ENGINE = 'MEMORY' AND TABLE_TYPE = 'BASE TABLE' \
                     AND TABLE_SCHEMA IN ({}) ORDER BY 1, 2 LIMIT 50",
                    written.join(",")
                ))
                .await
                .unwrap_or_default();
            out.extend(tables.into_iter().map(|(d, t)| {
                format!(
                    "the target started again since the last run of source {name}: MEMORY table \
                     {d}.{t} lost its rows there (a restart empties MEMORY tables, as on any \
                     replica) while the source's kept theirs; the copy differs until it is filled \
                     again"
                )
            }));
        }
        if !(recorded && row) {
            for put in [
                "INSERT IGNORE INTO sqlfleet.replicate_memory (source) VALUES (?)",
                "INSERT IGNORE INTO sqlfleet.replicate_target (source) VALUES (?)",
            ] {
                if let Err(e) = c.exec_drop(put, (name,)).await {
                    out.push(format!("source {name}: recording the target's start: {e}"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_row_that_is_gone_is_a_restart() {
        // (recorded by the last run, the row there now, restarted)
        let rows = [
            (false, false, false),
            (false, true, false),
            (true, true, false),
            (true, false, true),
        ];
        for (recorded, row, want) in rows {
            assert_eq!(restarted(recorded, row), want, "{recorded} {row}");
        }
    }
}
