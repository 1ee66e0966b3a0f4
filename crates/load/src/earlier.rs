//! An earlier load of the same name that read another input (another
//! size or first MiB, so another load id): taken over on `--resume` when
//! it can be checked, refused with the reason when it cannot.
//!
//! The common case is a file still being copied when it was first
//! loaded: the load stopped (or finished at a statement's end, with the
//! "no -- Dump completed line" warning), the copy finished, and the
//! user resumes. What decides whether the rest may run is not the size
//! or the first MiB but the content of the part already loaded: the
//! earlier load's journal holds the statement chain at every recorded
//! end (`identity`), and the resumed run checks the input against each
//! of them before anything runs (`run::ResumeCheck`). So a dump whose
//! loaded part is byte-for-byte the same resumes under its own id (the
//! journal moves to it), and another one is refused where it differs.
//!
//! [`judge`] is the pure decision; [`move_sql`] the statements that move
//! the journal (run by `journal::decide`).

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use sqlfleet_conn::quote::literal;

use crate::identity::CHAIN_HASH;

/// The earlier load, as its row in `sqlfleet.loads` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Earlier {
    pub load_id: String,
    pub state: String,
    pub size: Option<u64>,
    /// The database it loaded into (`-D`; empty for none), `None` for a
    /// CSV/TSV load or a journal of an older sqlfleet.
    pub target_db: Option<String>,
    pub chain_hash: Option<String>,
    /// It finished without the dump's trailer (a copy still under way?).
    pub cut_short: bool,
}

/// What this run does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not this input's business (a finished load of a whole dump:
    /// another dump written in its place later, the daily dump of a
    /// `--resume` cron job, is a new load): this run starts as it would
    /// without it.
    Ignore,
    /// Resume it: its journal is checked against this input.
    TakeOver,
    /// Refused, and why (the whole message).
    Refuse(String),
}

/// Decides. `db` is this run's `-D` database for a dump (`None`: a
/// CSV/TSV load, whose chunks are checked by their own values and whose
/// identity is the file's); `size` this input's.
pub fn judge(e: &Earlier, source: &str, db: Option<&str>, size: Option<u64>) -> Verdict {
    let grew = matches!((e.size, size), (Some(was), Some(now)) if now > was);
    if e.state == "done" && !(e.cut_short && grew) {
        return Verdict::Ignore;
    }
    let sizes = format!(
        "{}{}",
        e.size.map(|s| format!(", {s} bytes")).unwrap_or_default(),
        size.map(|s| format!("; this one has {s} bytes"))
            .unwrap_or_default()
    );
    let Some(db) = db else {
        return Verdict::Refuse(format!(
            "{source}: the interrupted load of this name (load id {}{sizes}) read another input: not the same input; refusing to resume (use --restart to load this one from the start)",
            e.load_id
        ));
    };
    match &e.target_db {
        Some(d) if d == db => {}
        other => {
            return Verdict::Refuse(match other {
                Some(d) => format!(
                    "{source}: the earlier load of this name (load id {}) was loading with {} ({}); resume it with {}, or load this one with {} from the start with --restart",
                    e.load_id,
                    with_db(d),
                    e.state,
                    with_db(d),
                    with_db(db)
                ),
                None => format!(
                    "{source}: the interrupted load of this name (load id {}{sizes}) was recorded by an older sqlfleet that did not note its database: refusing to resume (use --restart)",
                    e.load_id
                ),
            });
        }
    }
    if e.chain_hash.as_deref() != Some(CHAIN_HASH) {
        return Verdict::Refuse(format!(
            "{source}: the earlier load of this name (load id {}{sizes}) was recorded by another sqlfleet version, which checks inputs with {} ({CHAIN_HASH} here), so this one cannot tell whether the part it loaded is the same: refusing to resume (use --restart)",
            e.load_id,
            e.chain_hash.as_deref().unwrap_or("SHA-256")
        ));
    }
    Verdict::TakeOver
}

/// How a load's `-D` reads in a message: `-D NAME`, or `no -D`.
pub fn with_db(db: &str) -> String {
    if db.is_empty() {
        "no -D".to_string()
    } else {
        format!("-D {db}")
    }
}

/// The most recent earlier load of `source` under another id, if any.
pub async fn find(
    conn: &mut Conn,
    source: &str,
    load_id: &str,
) -> Result<Option<Earlier>, mysql_async::Error> {
    type Row = (
        String,
        String,
        Option<u64>,
        Option<String>,
        Option<String>,
        Option<bool>,
    );
    let row: Option<Row> = conn
        .query_first(format!(
            "SELECT load_id, CAST(state AS CHAR), size, target_db, chain_hash, cut_short FROM sqlfleet.loads \
             WHERE source = {} AND load_id <> {} ORDER BY started_at DESC LIMIT 1",
            literal(&crate::identity::source_column(source)),
            literal(load_id)
        ))
        .await?;
    Ok(row.map(
        |(load_id, state, size, target_db, chain_hash, cut_short)| Earlier {
            load_id,
            state,
            size,
            target_db,
            chain_hash,
            cut_short: cut_short.unwrap_or(false),
        },
    ))
}

/// The statements that move the earlier load's row and records to
/// `load_id` (this input's), in one transaction; run once no run of it is
/// alive (`journal::decide` holds its lock and waits for a killed run's
/// statements first). The resumed run then checks the input against the
/// moved chains before anything runs; a rerun of the earlier input finds
/// the journal by name the same way.
pub fn move_sql(e: &Earlier, load_id: &str) -> Vec<String> {
    let (old, new) = (literal(&e.load_id), literal(load_id));
    vec![
        "START TRANSACTION".into(),
        format!("UPDATE sqlfleet.load_journal SET load_id = {new} WHERE load_id = {old}"),
        format!(
            "UPDATE sqlfleet.loads SET load_id = {new}, state = 'running' WHERE load_id = {old}"
        ),
        "COMMIT".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (`"done, cut"`: finished without the dump's trailer)
    fn earlier(state: &str, size: Option<u64>, db: Option<&str>, hash: Option<&str>) -> Earlier {
        Earlier {
            load_id: "old".into(),
            state: state.trim_end_matches(", cut").into(),
            size,
            target_db: db.map(str::to_owned),
            chain_hash: hash.map(str::to_owned),
            cut_short: state.ends_with(", cut"),
        }
    }

    #[test]
    fn what_an_earlier_load_of_the_same_name_becomes() {
        let x = Some(CHAIN_HASH);
        #[rustfmt::skip]
        let rows: &[(Earlier, Option<&str>, Option<u64>, &str)] = &[
            // The copy grew while its part loaded (or after: a dump cut
            // short ends unfinished).
            (earlier("running", Some(10), Some("d"), x), Some("d"), Some(20), "take over"),
            (earlier("interrupted", Some(10), Some("d"), x), Some("d"), Some(20), "take over"),
            (earlier("failed", Some(10), Some(""), x), Some(""), Some(20), "take over"),
            (earlier("done, cut", Some(10), Some("d"), x), Some("d"), Some(20), "take over"),
            // A finished load of a whole, smaller dump: yesterday's at the
            // same path (a cron job's --resume), not today's copy.
            (earlier("done", Some(10), Some("d"), x), Some("d"), Some(20), "ignore"),
            (earlier("done, cut", Some(30), Some("d"), x), Some("d"), Some(20), "ignore"),
            (earlier("done, cut", None, Some("d"), x), Some("d"), Some(20), "ignore"),
            // Another size, not grown: the chains still decide.
            (earlier("running", Some(30), Some("d"), x), Some("d"), Some(20), "take over"),
            (earlier("running", None, Some("d"), x), Some("d"), None, "take over"),
            // A finished load: not ours, whatever its size.
            (earlier("done", Some(30), Some("d"), x), Some("d"), Some(20), "ignore"),
            (earlier("done", Some(20), Some("d"), x), Some("d"), Some(20), "ignore"),
            (earlier("done", None, Some("d"), x), Some("d"), Some(20), "ignore"),
            // Refused: another database, CSV/TSV, no chains to check with.
            (earlier("running", Some(10), Some("e"), x), Some("d"), Some(20), "with -D e"),
            (earlier("running", Some(10), Some("e"), x), Some(""), Some(20), "with no -D from the start"),
            (earlier("running", Some(10), None, x), Some("d"), Some(20), "older sqlfleet"),
            (earlier("running", Some(10), Some("d"), x), None, Some(20), "read another input"),
            (earlier("running", Some(10), Some("d"), None), Some("d"), Some(20), "SHA-256"),
            (earlier("running", Some(10), Some("d"), Some("md5")), Some("d"), Some(20), "md5"),
        ];
        for (e, db, size, want) in rows {
            let got = judge(e, "f.sql", *db, *size);
            let ok = match (&got, *want) {
                (Verdict::TakeOver, "take over") | (Verdict::Ignore, "ignore") => true,
                (Verdict::Refuse(m), w) => m.contains(w) && m.contains("--restart"),
                _ => false,
            };
            assert!(ok, "{e:?} {db:?} {size:?}: wanted {want}, got {got:?}");
        }
    }
}
