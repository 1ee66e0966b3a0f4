//! Writes that change the session out of every tracker's sight. A column
//! `DEFAULT NEXTVAL(s)` advances a sequence, and a trigger may take a user
//! lock, advance a sequence or call a routine that does: the writer's
//! LASTVAL and locks then live on the backend connection, and the server
//! reports none of it. A client whose write may do so keeps its
//! connection (transaction mode would hand it to another client, who
//! would see the lock or the LASTVAL, while the writer saw neither).
//!
//! Which tables do: their triggers' bodies and column defaults (and
//! whether the name is a view, which is assumed to) are read from
//! information_schema on the relay's own lookup connection and judged with
//! the relay's statement reader; a trigger that writes other tables makes
//! its table as suspect as those. A verdict is kept for [`TTL`]; DDL
//! through the relay empties the cache, DDL elsewhere is seen within the
//! TTL. A trigger that reads a view whose stored function acts unseen
//! (`view_calls.rs` knows which) counts too. A lookup that fails counts as "may": sharing is lost, never
//! correctness. So does a table the relay's account sees but none of whose
//! columns it sees (per-user mode, where clients' accounts may have
//! rights the relay's lacks): its defaults are unknown. The global TRIGGER
//! privilege the relay asks for (see `ask_privilege`) makes every table
//! visible; a name not visible at all (an alias the statement reader
//! passed on, a table that does not exist) is nothing to fear. An account
//! that sees some of a table's columns (grants on single columns) is
//! trusted for the rest.
//!
//! The same lookup names the table's AUTO_INCREMENT column (its place
//! among the visible columns) and whether it has triggers, for how an
//! INSERT leaves LAST_INSERT_ID() (`protocol/sql/insert_id.rs`); a failed
//! lookup names none, and the id is then asked of the server.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlfleet_conn::quote::literal;

use crate::backend::side::{field, LookupError, OwnQuery, Row, SideConn};
use crate::backend::view_calls::ViewCalls;
use crate::protocol::sql::insert_id::AutoCol;
use crate::protocol::sql::{self, TableRef};

/// How long a table's verdict is trusted.
pub const TTL: Duration = Duration::from_secs(2);

/// How deep triggers writing tables with triggers are followed before the
/// answer is "may".
const MAX_DEPTH: usize = 4;

pub struct WriteEffects {
    side: Arc<SideConn>,
    cache: std::sync::Mutex<HashMap<(String, String), (Instant, Entry)>>,
    /// One lookup at a time: writers that missed the cache together wait
    /// for the first one's answer instead of each asking again.
    lookup: tokio::sync::Mutex<()>,
    /// Whether the relay's account was asked if it can see triggers
    /// (information_schema shows only those of tables it has the TRIGGER
    /// privilege on): once, and a warning when it cannot.
    asked_privilege: std::sync::atomic::AtomicBool,
}

/// What is kept of one table: whether writing it may change the session
/// unseen, and its AUTO_INCREMENT column (for how an INSERT leaves
/// LAST_INSERT_ID(): `protocol/sql/insert_id.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    hidden: bool,
    auto: Option<AutoCol>,
}

/// What one table's lookup says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Writing it may change the session unseen.
    Hidden,
    /// Not by itself; its triggers write these tables (unqualified names
    /// are in the trigger's database).
    Writes(Vec<TableRef>),
}

/// Judges one table from its lookup rows: (`k`, `s`) with `k` one of
/// `table` (the table is visible; `s` counts the columns the relay's
/// account sees), `trigger` (the body), `default` (a column default) or
/// `view`.
pub fn judge(rows: &[Row]) -> Verdict {
    let mut writes = Vec::new();
    for r in rows {
        let kind = field(Some(r), "k").unwrap_or_default();
        let text = field(Some(r), "s").unwrap_or_default();
        match kind.as_str() {
            "table" if text.parse::<u64>().is_ok_and(|n| n > 0) => {}
            "table" => return Verdict::Hidden,
            "view" => return Verdict::Hidden,
            "auto" => {}
            "default" | "trigger" => {
                let q = sql::Query::new(text.as_bytes());
                if q.effects().acts_unseen() {
                    return Verdict::Hidden;
                }
                if kind == "trigger" {
                    writes.extend(q.written_tables());
                }
            }
            _ => return Verdict::Hidden,
        }
    }
    Verdict::Writes(writes)
}

/// The table's AUTO_INCREMENT column from its lookup rows (`auto`:
/// "position name", the position among the visible columns — those a
/// VALUES row without a column list gives, 0 for an INVISIBLE column),
/// and whether it has triggers.
pub fn auto_col(rows: &[Row]) -> Option<AutoCol> {
    let triggers = rows
        .iter()
        .any(|r| field(Some(r), "k").as_deref() == Some("trigger"));
    rows.iter().find_map(|r| {
        if field(Some(r), "k").as_deref() != Some("auto") {
            return None;
        }
        let s = field(Some(r), "s")?;
        let (pos, name) = s.split_once(' ')?;
        Some(AutoCol {
            name: name.to_lowercase(),
            position: pos.parse().ok()?,
            triggers,
        })
    })
}

/// Whether a trigger among `rows` (of a table in `db`, where its
/// unqualified names are) names a view whose definition calls a stored
/// function that acts unseen.
async fn reads_a_calling_view(rows: &[Row], db: &str, views: &ViewCalls) -> bool {
    for r in rows {
        if field(Some(r), "k").as_deref() != Some("trigger") {
            continue;
        }
        let body = field(Some(r), "s").unwrap_or_default();
        let q = sql::Query::new(body.as_bytes());
        if views.names_in(body.as_bytes(), q.tokens(), db).await {
            return true;
        }
    }
    false
}

/// The lookup of one table: whether the relay sees it and how many of its
/// columns, its triggers' bodies, its column defaults, and whether it is
/// a view.
fn lookup_sql(db: &str, table: &str) -> String {
    let (d, t) = (literal(db), literal(table));
    format!(
        "SELECT 'table' AS k, (SELECT COUNT(*) FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = {d} AND TABLE_NAME = {t}) AS s FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = {d} AND TABLE_NAME = {t} \
         UNION ALL SELECT 'trigger', ACTION_STATEMENT FROM information_schema.TRIGGERS \
         WHERE EVENT_OBJECT_SCHEMA = {d} AND EVENT_OBJECT_TABLE = {t} \
         UNION ALL SELECT 'default', COLUMN_DEFAULT FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = {d} AND TABLE_NAME = {t} AND COLUMN_DEFAULT IS NOT NULL \
         UNION ALL SELECT 'view', '' FROM information_schema.VIEWS \
         WHERE TABLE_SCHEMA = {d} AND TABLE_NAME = {t} \
         UNION ALL SELECT 'auto', CONCAT(IF(c.EXTRA LIKE '%INVISIBLE%', 0, \
         (SELECT COUNT(*) FROM information_schema.COLUMNS v WHERE v.TABLE_SCHEMA = {d} \
         AND v.TABLE_NAME = {t} AND v.ORDINAL_POSITION <= c.ORDINAL_POSITION \
         AND v.EXTRA NOT LIKE '%INVISIBLE%')), ' ', c.COLUMN_NAME) \
         FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = {d} AND c.TABLE_NAME = {t} \
         AND c.EXTRA LIKE '%auto_increment%'"
    )
}

impl WriteEffects {
    pub fn new(side: Arc<SideConn>) -> WriteEffects {
        WriteEffects {
            side,
            cache: std::sync::Mutex::new(HashMap::new()),
            lookup: tokio::sync::Mutex::new(()),
            asked_privilege: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn cached(&self, key: &(String, String)) -> Option<Entry> {
        let c = self.cache.lock().ok()?;
        c.get(key)
            .filter(|(at, _)| at.elapsed() < TTL)
            .map(|(_, v)| v.clone())
    }

    /// Whether writing `db`.`table` may change the writer's session in a
    /// way no tracker reports; `views` says which views call stored
    /// functions that do (a trigger may read one).
    pub async fn hidden(&self, db: &str, table: &str, views: &ViewCalls) -> bool {
        self.entry(db, table, views).await.hidden
    }

    /// The AUTO_INCREMENT column of `db`.`table` (none when it has none,
    /// or the lookup failed).
    pub async fn auto_col(&self, db: &str, table: &str, views: &ViewCalls) -> Option<AutoCol> {
        self.entry(db, table, views).await.auto
    }

    async fn entry(&self, db: &str, table: &str, views: &ViewCalls) -> Entry {
        let key = (db.to_string(), table.to_string());
        if let Some(v) = self.cached(&key) {
            return v;
        }
        let _turn = self.lookup.lock().await;
        if let Some(v) = self.cached(&key) {
            return v;
        }
        let v = match self.follow(db, table, views).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(
                    db,
                    table,
                    "looking up the table's triggers and defaults failed ({e}): its writers keep their connections"
                );
                Entry {
                    hidden: true,
                    auto: None,
                }
            }
        };
        if let Ok(mut c) = self.cache.lock() {
            if c.len() > 10_000 {
                c.retain(|_, (at, _)| at.elapsed() < TTL);
            }
            c.insert(key, (Instant::now(), v.clone()));
        }
        v
    }

    /// DDL went through the relay: look every table up again.
    pub fn forget(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    /// The table and, through triggers, every table it writes; a trigger
    /// that names a view calling a stored function that acts unseen
    /// (`view_calls.rs`) makes it hidden too.
    async fn follow(&self, db: &str, table: &str, views: &ViewCalls) -> Result<Entry, LookupError> {
        self.ask_privilege().await?;
        let mut auto = None;
        let hidden = |auto| Entry { hidden: true, auto };
        let mut seen = HashSet::new();
        let mut todo = vec![(db.to_string(), table.to_string(), 0usize)];
        while let Some((d, t, depth)) = todo.pop() {
            if !seen.insert((d.clone(), t.clone())) {
                continue;
            }
            if depth > MAX_DEPTH {
                return Ok(hidden(auto));
            }
            let rows = self
                .side
                .queries(OwnQuery::TableEffects, &[&lookup_sql(&d, &t)], 10_000)
                .await?
                .pop()
                .unwrap_or_default();
            if depth == 0 {
                auto = auto_col(&rows);
            }
            match judge(&rows) {
                Verdict::Hidden => return Ok(hidden(auto)),
                Verdict::Writes(_) if reads_a_calling_view(&rows, &d, views).await => {
                    return Ok(hidden(auto))
                }
                Verdict::Writes(w) => todo.extend(
                    w.into_iter()
                        .map(|r| (r.db.unwrap_or_else(|| d.clone()), r.name, depth + 1)),
                ),
            }
        }
        Ok(Entry {
            hidden: false,
            auto,
        })
    }

    /// Warns once when the relay's account lacks the global TRIGGER
    /// privilege: information_schema then hides triggers from it (and
    /// tables it has no other right on), and the writes they make unseen
    /// cannot be followed.
    async fn ask_privilege(&self) -> Result<(), LookupError> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.asked_privilege.load(Relaxed) {
            return Ok(());
        }
        let sql = "SELECT COUNT(*) AS n FROM information_schema.USER_PRIVILEGES \
                   WHERE PRIVILEGE_TYPE = 'TRIGGER'";
        let rows = self.side.queries(OwnQuery::Privileges, &[sql], 1).await?;
        let n = field(rows.first().and_then(|r| r.first()), "n").unwrap_or_default();
        if n == "0" {
            tracing::warn!(
                "the relay's backend account has no global TRIGGER privilege, so information_schema \
                 shows it no triggers, nor tables it has no other right on: writes to tables whose \
                 triggers or column defaults take user locks or advance sequences are not followed \
                 (GRANT TRIGGER ON *.* to that account)"
            );
        }
        self.asked_privilege.store(true, Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(k: &str, s: &str) -> Row {
        vec![("k".into(), Some(k.into())), ("s".into(), Some(s.into()))]
    }

    /// A table whose lookup shows `n` columns, then `rows`.
    fn seen(n: &str, rows: &[Row]) -> Vec<Row> {
        [vec![row("table", n)], rows.to_vec()].concat()
    }

    #[test]
    fn the_auto_increment_column_is_read_from_the_lookup() {
        assert_eq!(auto_col(&seen("2", &[])), None);
        let with = seen("2", &[row("auto", "1 ID")]);
        assert_eq!(
            auto_col(&with),
            Some(AutoCol {
                name: "id".into(),
                position: 1,
                triggers: false
            })
        );
        assert_eq!(judge(&with), Verdict::Writes(vec![]), "no reason to hide");
        let trig = seen("2", &[row("auto", "3 n"), row("trigger", "SET NEW.v = 1")]);
        assert_eq!(
            auto_col(&trig).map(|a| (a.position, a.triggers)),
            Some((3, true))
        );
        assert_eq!(auto_col(&seen("2", &[row("auto", "x")])), None);
    }

    #[test]
    fn what_makes_a_write_hidden() {
        assert_eq!(judge(&seen("2", &[])), Verdict::Writes(vec![]));
        for rows in [
            vec![row("default", "nextval(`shop`.`s`)")],
            vec![row("default", "NEXT VALUE FOR s")],
            vec![row("trigger", "SET NEW.v = GET_LOCK('x', 1)")],
            vec![row("trigger", "BEGIN DO RELEASE_LOCK('x'); END")],
            vec![row("trigger", "BEGIN SET NEW.id = f_next(); END")],
            vec![row("trigger", "CALL audit(NEW.id)")],
            vec![row("view", "")],
        ] {
            assert_eq!(judge(&seen("3", &rows)), Verdict::Hidden, "{rows:?}");
        }
        // A table the relay's account sees but none of whose columns:
        // its defaults are unknown.
        assert_eq!(judge(&seen("0", &[])), Verdict::Hidden);
        // A name it does not see at all (an alias, a missing table).
        assert_eq!(judge(&[]), Verdict::Writes(vec![]));
        // Defaults and triggers that only compute, or set user variables
        // (which the server reports), are no reason.
        assert_eq!(
            judge(&seen(
                "4",
                &[
                    row("default", "current_timestamp()"),
                    row("trigger", "SET @last = NEW.v"),
                    row(
                        "trigger",
                        "BEGIN IF NEW.v < 0 THEN SET NEW.v = 0; END IF; END"
                    ),
                ]
            )),
            Verdict::Writes(vec![])
        );
        // A trigger writing another table passes the question on.
        assert_eq!(
            judge(&seen(
                "1",
                &[row(
                    "trigger",
                    "BEGIN INSERT INTO audit (v) VALUES (NEW.v); UPDATE other.`Tot` SET n = n + 1; END"
                )]
            )),
            Verdict::Writes(vec![
                TableRef {
                    db: None,
                    name: "audit".into()
                },
                TableRef {
                    db: Some("other".into()),
                    name: "Tot".into()
                },
            ])
        );
    }
}
