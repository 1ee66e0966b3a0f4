//! Which tables a write through the relay changes, for the result cache's
//! per-table invalidation (`cache.rs`): the tables the statement names
//! (`Effects::writes`) and, through their triggers, every table those
//! write, as far as the server's catalog shows it. `None` — "any table" —
//! whenever that cannot be said for sure: a name that is not a visible
//! base table (a view writes its base tables; an alias or a table the
//! relay's account cannot see may be either), a foreign key whose ON
//! DELETE/ON UPDATE action changes another table, a trigger that calls a
//! routine, triggers deeper than [`MAX_DEPTH`], a failed lookup, or an
//! account without the global SELECT and TRIGGER privileges (without
//! them information_schema hides triggers and other databases' foreign
//! keys). A wrong "any" costs hit rate; a wrong list, a stale read.
//!
//! Asked on the relay's lookup connection, per table, with the schema and
//! name given (one table's catalog rows, never a scan); a verdict is kept
//! for [`TTL`]. DDL through the relay empties it; DDL elsewhere (a new
//! trigger or foreign key) is seen within the TTL.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlfleet_conn::quote::literal;

use crate::admin::metrics::OwnQuery;
use crate::backend::side::{field, LookupError, Row, SideConn};
use crate::protocol::sql::{self, TableRef};

/// How long a table's verdict is trusted.
pub const TTL: Duration = Duration::from_secs(2);

/// How deep triggers writing tables with triggers are followed before the
/// answer is "any table".
const MAX_DEPTH: usize = 4;

/// A table: (database, name) as the catalog spells them.
type Table = (String, String);

/// What the catalog says of one table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The tables its triggers write.
    pub writes: Vec<Table>,
    /// It has a trigger (which may change a row's columns as it is
    /// written: `SET NEW.id = ...`).
    pub triggers: bool,
    /// Its integer columns that are not generated (folded names): a
    /// write's key on one of them is exact (`cache/row_key.rs`).
    pub int_cols: BTreeMap<String, IntCol>,
}

/// An integer column: the values it holds, and whether it is the
/// AUTO_INCREMENT column (0 written there is a new value, not 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntCol {
    pub lo: i128,
    pub hi: i128,
    pub auto: bool,
}

impl IntCol {
    /// The column from the lookup's `type[ unsigned][ auto]` words.
    fn parse(words: &str) -> Option<IntCol> {
        let mut w = words.split(' ');
        let bits = match w.next()? {
            "tinyint" => 8,
            "smallint" => 16,
            "mediumint" => 24,
            "int" => 32,
            "bigint" => 64,
            _ => return None,
        };
        let (mut unsigned, mut auto) = (false, false);
        for x in w {
            match x {
                "unsigned" => unsigned = true,
                "auto" => auto = true,
                _ => return None,
            }
        }
        let (lo, hi) = if unsigned {
            (0, (1i128 << bits) - 1)
        } else {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        };
        Some(IntCol { lo, hi, auto })
    }

    /// Whether writing `v` stores `v` (in range; not the AUTO_INCREMENT
    /// column's 0, which takes the next value).
    pub fn stores(&self, v: i128) -> bool {
        (self.lo..=self.hi).contains(&v) && !(self.auto && v == 0)
    }
}

impl Facts {
    /// Of `keys`, the columns whose every value is stored as written.
    pub fn exact(&self, keys: Keys) -> Keys {
        keys.into_iter()
            .filter(|(c, vals)| {
                self.int_cols
                    .get(c)
                    .is_some_and(|col| vals.iter().all(|v| col.stores(*v)))
            })
            .collect()
    }
}

/// The known integer columns of a table's changed rows and the values
/// they held (names in ASCII lower case); a column not here is unknown
/// (the result cache's `cache/row_change.rs` and `cache/marks.rs`).
pub type Keys = BTreeMap<String, BTreeSet<i128>>;

/// One table's verdict (`None`: a write of it may change any table).
type Verdict = Option<Facts>;

pub struct WriteScopes {
    side: Arc<SideConn>,
    cache: Mutex<HashMap<Table, (Instant, Verdict)>>,
    /// One lookup at a time (writers that missed together wait for it).
    lookup: tokio::sync::Mutex<()>,
    /// 0 not asked, 1 the account sees every table's triggers and keys,
    /// 2 it does not (every write is "any table").
    privileged: AtomicU8,
}

/// Judges one table of database `db` from its lookup rows (`k`, `s`):
/// `table` with its TABLE_TYPE, `trigger` with a body, `cascade` for a
/// foreign key whose action changes another table, `intcol` with
/// `type[ unsigned][ auto]:name` of an integer column that is not
/// generated.
pub fn judge(rows: &[Row], db: &str) -> Verdict {
    let mut writes = Vec::new();
    let mut int_cols = BTreeMap::new();
    let mut triggers = false;
    let mut seen = false;
    for r in rows {
        let kind = field(Some(r), "k").unwrap_or_default();
        let text = field(Some(r), "s").unwrap_or_default();
        match kind.as_str() {
            "table" if matches!(text.as_str(), "BASE TABLE" | "SYSTEM VERSIONED") => seen = true,
            // (one not read is not an integer column: its keys unsure)
            "intcol" => {
                if let Some((words, name)) = text.split_once(':') {
                    if let (Some(c), Some(col)) = (folded(name), IntCol::parse(words)) {
                        int_cols.insert(c, col);
                    }
                }
            }
            "trigger" => {
                triggers = true;
                let q = sql::Query::new(text.as_bytes());
                let fx = q.effects();
                // A routine (a stored function, a CALL) may write anything,
                // and a sequence it advances is a table: not followed.
                if fx.calls_stored || fx.acts_unseen() || fx.statements == 0 {
                    return None;
                }
                writes.extend(
                    q.written_tables()
                        .into_iter()
                        .map(|t| (t.db.unwrap_or_else(|| db.to_string()), t.name)),
                );
            }
            // A view, a sequence, a foreign key that acts, anything else.
            _ => return None,
        }
    }
    seen.then_some(Facts {
        writes,
        triggers,
        int_cols,
    })
}

/// The lookup of one table: its type, its triggers' bodies, and the
/// foreign keys elsewhere whose action on it changes their table.
fn lookup_sql(db: &str, table: &str) -> String {
    let (d, t) = (literal(db), literal(table));
    format!(
        "SELECT 'table' AS k, TABLE_TYPE AS s FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = {d} AND TABLE_NAME = {t} \
         UNION ALL SELECT 'trigger', ACTION_STATEMENT FROM information_schema.TRIGGERS \
         WHERE EVENT_OBJECT_SCHEMA = {d} AND EVENT_OBJECT_TABLE = {t} \
         UNION ALL SELECT 'cascade', CONSTRAINT_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS \
         WHERE UNIQUE_CONSTRAINT_SCHEMA = {d} AND REFERENCED_TABLE_NAME = {t} \
         AND (DELETE_RULE NOT IN ('RESTRICT', 'NO ACTION') OR UPDATE_RULE NOT IN ('RESTRICT', 'NO ACTION')) \
         UNION ALL SELECT 'intcol', CONCAT(DATA_TYPE, \
           IF(COLUMN_TYPE LIKE '%unsigned%', ' unsigned', ''), \
           IF(EXTRA LIKE '%auto_increment%', ' auto', ''), ':', COLUMN_NAME) \
         FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = {d} AND TABLE_NAME = {t} \
         AND DATA_TYPE IN ('tinyint', 'smallint', 'mediumint', 'int', 'bigint') \
         AND IS_GENERATED = 'NEVER' AND EXTRA NOT LIKE '%GENERATED%'"
    )
}

/// A name compared as the cache compares them: ASCII lower case; `None`
/// for a name with other characters (their case folding is not one
/// answer, so such a name makes the scope "any table").
pub fn folded(name: &str) -> Option<String> {
    name.is_ascii().then(|| name.to_ascii_lowercase())
}

impl WriteScopes {
    pub fn new(side: Arc<SideConn>) -> WriteScopes {
        WriteScopes {
            side,
            cache: Mutex::new(HashMap::new()),
            lookup: tokio::sync::Mutex::new(()),
            privileged: AtomicU8::new(0),
        }
    }

    /// The folded names of every table a write naming `refs` (unqualified
    /// ones in `db`) changes; `None` when that is not sure.
    pub async fn tables(&self, db: Option<&str>, refs: &[TableRef]) -> Option<BTreeSet<String>> {
        if refs.is_empty() || !self.privileged().await {
            return None;
        }
        let mut out = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut todo: Vec<(Table, usize)> = Vec::new();
        for r in refs {
            let d = r.db.as_deref().or(db)?;
            todo.push(((d.to_string(), r.name.clone()), 0));
        }
        while let Some((t, depth)) = todo.pop() {
            if depth > MAX_DEPTH {
                return None;
            }
            out.insert(folded(&t.1)?);
            if !seen.insert(t.clone()) {
                continue;
            }
            let written = self.verdict(&t).await?.writes;
            todo.extend(written.into_iter().map(|w| (w, depth + 1)));
        }
        Some(out)
    }

    /// Of `keys`, the values a write of `table` (in `db` when not
    /// qualified) names by column, those its rows hold as named: of
    /// integer columns, not generated, each value one the column stores
    /// as written (`IntCol::stores`). `None` when no value is sure: a
    /// table with triggers (which may change a row's columns as it is
    /// written), not a base table, or not looked up. The catalog as of at
    /// most [`TTL`] ago; the binary log's row events say it exactly
    /// within the cache's lag bound.
    pub async fn exact_keys(&self, db: Option<&str>, table: &TableRef, keys: Keys) -> Option<Keys> {
        let d = table.db.as_deref().or(db)?;
        if !self.privileged().await {
            return None;
        }
        let t = (d.to_string(), table.name.clone());
        let f = self.verdict(&t).await.filter(|f| !f.triggers)?;
        Some(f.exact(keys))
    }

    /// DDL went through the relay: look every table up again.
    pub fn forget(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    fn cached(&self, t: &Table) -> Option<Verdict> {
        let c = self.cache.lock().ok()?;
        c.get(t)
            .filter(|(at, _)| at.elapsed() < TTL)
            .map(|(_, v)| v.clone())
    }

    async fn verdict(&self, t: &Table) -> Verdict {
        if let Some(v) = self.cached(t) {
            return v;
        }
        let _turn = self.lookup.lock().await;
        if let Some(v) = self.cached(t) {
            return v;
        }
        let v = match self.ask(t).await {
            Ok(rows) => judge(&rows, &t.0),
            Err(e) => {
                tracing::warn!(
                    db = %t.0,
                    table = %t.1,
                    "looking up the table's triggers and foreign keys failed ({e}): its writes make the whole result cache stale"
                );
                None
            }
        };
        if let Ok(mut c) = self.cache.lock() {
            if c.len() > 10_000 {
                c.retain(|_, (at, _)| at.elapsed() < TTL);
            }
            c.insert(t.clone(), (Instant::now(), v.clone()));
        }
        v
    }

    async fn ask(&self, t: &Table) -> Result<Vec<Row>, LookupError> {
        Ok(self
            .side
            .queries(OwnQuery::TableScope, &[&lookup_sql(&t.0, &t.1)], 10_000)
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// Whether the relay's account has the global SELECT and TRIGGER
    /// privileges (asked once; warned once when not).
    async fn privileged(&self) -> bool {
        match self.privileged.load(Relaxed) {
            1 => return true,
            2 => return false,
            _ => {}
        }
        let sql =
            "SELECT COUNT(DISTINCT PRIVILEGE_TYPE) AS n FROM information_schema.USER_PRIVILEGES \
                   WHERE PRIVILEGE_TYPE IN ('SELECT', 'TRIGGER')";
        let n = match self.side.queries(OwnQuery::Privileges, &[sql], 1).await {
            Ok(rows) => field(rows.first().and_then(|r| r.first()), "n"),
            // Not known now: asked again next time.
            Err(_) => return false,
        };
        let yes = n.as_deref() == Some("2");
        if !yes {
            tracing::warn!(
                "the relay's backend account lacks the global SELECT or TRIGGER privilege, so it cannot \
                 see every table's triggers and foreign keys: every write through the relay makes the \
                 whole result cache stale (GRANT SELECT, TRIGGER ON *.* to that account for per-table \
                 invalidation)"
            );
        }
        self.privileged.store(if yes { 1 } else { 2 }, Relaxed);
        yes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(k: &str, s: &str) -> Row {
        vec![("k".into(), Some(k.into())), ("s".into(), Some(s.into()))]
    }

    fn t(d: &str, n: &str) -> Table {
        (d.into(), n.into())
    }

    #[test]
    fn a_write_has_a_table_list_only_where_the_catalog_says_all_of_it() {
        let base = row("table", "BASE TABLE");
        // (rows, verdict)
        let rows: Vec<(Vec<Row>, Option<Vec<Table>>)> = vec![
            (vec![base.clone()], Some(vec![])),
            (vec![row("table", "SYSTEM VERSIONED")], Some(vec![])),
            // Not visible: an alias, a table the account cannot see.
            (vec![], None),
            (vec![row("table", "VIEW")], None),
            (vec![row("table", "SEQUENCE")], None),
            (vec![row("table", "TEMPORARY")], None),
            (vec![base.clone(), row("cascade", "fk_child")], None),
            // Triggers that only compute write nothing else.
            (
                vec![base.clone(), row("trigger", "SET NEW.updated = NOW()")],
                Some(vec![]),
            ),
            (
                vec![
                    base.clone(),
                    row(
                        "trigger",
                        "BEGIN INSERT INTO audit (v) VALUES (NEW.v); UPDATE other.Tot SET n = n + 1; END",
                    ),
                ],
                Some(vec![t("app", "audit"), t("other", "Tot")]),
            ),
            (vec![base.clone(), row("trigger", "CALL audit(NEW.id)")], None),
            (vec![base.clone(), row("trigger", "SET NEW.v = f_next()")], None),
            (
                vec![base.clone(), row("trigger", "SET NEW.id = NEXTVAL(s1)")],
                None,
            ),
            (vec![row("trigger", "SET NEW.v = 1")], None),
            (vec![base, row("other", "")], None),
        ];
        for (r, want) in rows {
            assert_eq!(judge(&r, "app").map(|f| f.writes), want, "{r:?}");
        }
    }

    #[test]
    fn a_table_s_integer_columns_and_triggers_are_kept() {
        let base = row("table", "BASE TABLE");
        let f = judge(
            &[
                base.clone(),
                row("intcol", "int unsigned auto:Id"),
                row("intcol", "tinyint:k"),
                row("intcol", "bigint unsigned:a:b"),
            ],
            "app",
        )
        .expect("facts");
        let col = |lo, hi, auto| IntCol { lo, hi, auto };
        assert_eq!(
            f.int_cols,
            [
                ("id".to_string(), col(0, u32::MAX as i128, true)),
                ("k".to_string(), col(-128, 127, false)),
                ("a:b".to_string(), col(0, u64::MAX as i128, false)),
            ]
            .into()
        );
        assert!(!f.triggers);
        let odd = judge(
            &[base.clone(), row("intcol", "float:x"), row("intcol", "y")],
            "app",
        );
        assert_eq!(
            odd.map(|f| f.int_cols.len()),
            Some(0),
            "not read: not integer columns"
        );
        // The values stored as written.
        let keys = |cols: &[(&str, &[i128])]| -> Keys {
            cols.iter()
                .map(|(c, v)| (c.to_string(), v.iter().copied().collect()))
                .collect()
        };
        for (what, given, want) in [
            (
                "in range",
                keys(&[("id", &[1, 7]), ("k", &[-128, 127])]),
                keys(&[("id", &[1, 7]), ("k", &[-128, 127])]),
            ),
            (
                "the next AUTO_INCREMENT value",
                keys(&[("id", &[0, 7])]),
                keys(&[]),
            ),
            (
                "past the column's range",
                keys(&[("k", &[128]), ("id", &[-1])]),
                keys(&[]),
            ),
            ("not an integer column", keys(&[("v", &[1])]), keys(&[])),
            (
                "0 where it is no AUTO_INCREMENT",
                keys(&[("k", &[0])]),
                keys(&[("k", &[0])]),
            ),
        ] {
            assert_eq!(f.exact(given), want, "{what}");
        }
        let f = judge(&[base, row("trigger", "SET NEW.id = NEW.id + 1")], "app").expect("facts");
        assert!(
            f.triggers,
            "a trigger that writes no table is still a trigger"
        );
    }

    #[test]
    fn names_fold_to_ascii_lower_case_or_not_at_all() {
        assert_eq!(folded("Orders").as_deref(), Some("orders"));
        assert_eq!(folded("t_1$x").as_deref(), Some("t_1$x"));
        assert_eq!(folded("Straße"), None);
        assert_eq!(folded("TÅBLE"), None);
    }
}
