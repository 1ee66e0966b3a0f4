//! Reads that change the session unseen, through views. A view whose
//! definition calls a stored function (directly or through another view)
//! runs that function for every statement that reads it, and the function
//! may take a user lock or advance a sequence, which no tracker reports:
//! `SELECT * FROM v` is then `SELECT f()` in disguise. A statement that
//! names such a view keeps its connection and is no read for a replica,
//! like the call itself (write_effects.rs does the same for writes).
//!
//! Which views do: every view's definition is read from
//! information_schema.VIEWS on the relay's lookup connection, at most once
//! per [`TTL`] (by the first statement after it ran out, or the first in
//! a database the last look did not cover) and judged with
//! the relay's statement reader; a view that names a suspect view is
//! suspect too. A definition the relay's account may not read (without
//! SHOW VIEW only the definer sees it) counts as suspect; a lookup that
//! fails makes every statement suspect until one succeeds. Names match
//! without regard to case, and a column or alias spelt like a suspect view
//! counts as well: a wrong yes costs sharing, a wrong no correctness. DDL
//! through the relay makes the next statement look again; DDL elsewhere
//! is seen within the TTL, or at once in a database new to the look (a
//! view in it named from another database waits for the TTL). A server without such views (the usual case)
//! costs a statement a clock read and a look at an empty set.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlfleet_dump::lex::{lex, Tok};

use crate::backend::side::{field, Row, SideConn};
use crate::protocol::sql;

/// How long a look at the views is trusted.
pub const TTL: Duration = Duration::from_secs(2);

/// More views than this are not judged one by one: every statement is
/// suspect.
const MAX_VIEWS: usize = 100_000;

const LOOKUP: &str = "SELECT TABLE_SCHEMA AS d, TABLE_NAME AS n, VIEW_DEFINITION AS s \
                      FROM information_schema.VIEWS";

/// The views whose reading may change the session unseen, as `(database,
/// view)` in lower case.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Suspects {
    views: HashSet<(String, String)>,
    /// The lookup failed: anything may be such a view.
    all: bool,
    /// The databases this look covers (as named): those that had views,
    /// and those statements asked about. A statement in another one (a
    /// database made a moment ago) looks again at once.
    covers: HashSet<String>,
}

impl Suspects {
    /// Every statement is suspect (the views could not be judged).
    fn everything() -> Suspects {
        Suspects {
            all: true,
            ..Suspects::default()
        }
    }

    /// Nothing to fear from any statement.
    pub fn is_empty(&self) -> bool {
        !self.all && self.views.is_empty()
    }

    /// Whether `sql` names a suspect view: `db.view`, or `view` in one of
    /// `dbs` (the session's database and one a USE in the text makes
    /// current).
    pub fn named_in(&self, sql: &[u8], dbs: &[&str]) -> bool {
        if self.all {
            return true;
        }
        if self.views.is_empty() {
            return false;
        }
        let toks = lex(sql).toks;
        (0..toks.len()).any(|i| {
            let Some(name) = name_at(&toks, i) else {
                return false;
            };
            let qualified = i >= 2 && toks[i - 1].0.is_punct(b'.');
            match qualified.then(|| name_at(&toks, i - 2)).flatten() {
                Some(db) => self.views.contains(&(db, name)),
                None => dbs
                    .iter()
                    .any(|d| self.views.contains(&(d.to_lowercase(), name.clone()))),
            }
        })
    }
}

/// The name at token `i` (a word or a backquoted name), lower case.
fn name_at(toks: &[(Tok, Range<usize>)], i: usize) -> Option<String> {
    match &toks.get(i)?.0 {
        Tok::Word(w) | Tok::Quoted(w) => Some(w.as_str().to_lowercase()),
        _ => None,
    }
}

/// Judges every view from the lookup's rows (`d` database, `n` view, `s`
/// definition): those that call what may change the session unseen, whose
/// definition is hidden, or that name such a view.
pub fn judge(rows: &[Row]) -> Suspects {
    let views: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            let get = |c| field(Some(r), c).unwrap_or_default();
            (get("d").to_lowercase(), get("n").to_lowercase(), get("s"))
        })
        .collect();
    let mut out = Suspects {
        covers: rows.iter().filter_map(|r| field(Some(r), "d")).collect(),
        ..Suspects::default()
    };
    for (d, n, def) in &views {
        if def.trim().is_empty() || sql::Query::new(def.as_bytes()).effects().acts_unseen() {
            out.views.insert((d.clone(), n.clone()));
        }
    }
    // Views of suspect views, until nothing more is found.
    loop {
        let more: Vec<(String, String)> = views
            .iter()
            .filter(|(d, n, def)| {
                !out.views.contains(&(d.clone(), n.clone())) && out.named_in(def.as_bytes(), &[d])
            })
            .map(|(d, n, _)| (d.clone(), n.clone()))
            .collect();
        if more.is_empty() {
            return out;
        }
        out.views.extend(more);
    }
}

pub struct ViewCalls {
    side: Arc<SideConn>,
    seen: std::sync::Mutex<Option<(Instant, Arc<Suspects>)>>,
    /// One lookup at a time: statements that found the look stale
    /// together wait for the first one's answer.
    lookup: tokio::sync::Mutex<()>,
    /// Whether the last lookup failed (warned once per run of failures).
    failing: std::sync::atomic::AtomicBool,
    /// Whether hidden definitions were warned about (once).
    warned_hidden: std::sync::atomic::AtomicBool,
}

impl ViewCalls {
    pub fn new(side: Arc<SideConn>) -> ViewCalls {
        ViewCalls {
            side,
            seen: std::sync::Mutex::new(None),
            lookup: tokio::sync::Mutex::new(()),
            failing: std::sync::atomic::AtomicBool::new(false),
            warned_hidden: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn fresh(&self, dbs: &[&str]) -> Option<Arc<Suspects>> {
        let s = self.seen.lock().ok()?;
        s.as_ref()
            .filter(|(at, v)| {
                at.elapsed() < TTL && (v.all || dbs.iter().all(|d| v.covers.contains(*d)))
            })
            .map(|(_, v)| v.clone())
    }

    /// The suspect views, looked up again when the last look is older than
    /// the TTL or does not cover one of `dbs` (the statement's databases).
    pub async fn suspects(&self, dbs: &[&str]) -> Arc<Suspects> {
        if let Some(s) = self.fresh(dbs) {
            return s;
        }
        let _turn = self.lookup.lock().await;
        if let Some(s) = self.fresh(dbs) {
            return s;
        }
        use std::sync::atomic::Ordering::Relaxed;
        let s = match self.side.queries(&[LOOKUP], MAX_VIEWS + 1).await {
            Ok(mut r) => {
                self.failing.store(false, Relaxed);
                let rows = r.pop().unwrap_or_default();
                if rows.len() > MAX_VIEWS {
                    Suspects::everything()
                } else {
                    self.warn_hidden(&rows);
                    let mut s = judge(&rows);
                    s.covers.extend(dbs.iter().map(|d| d.to_string()));
                    s
                }
            }
            Err(e) => {
                if !self.failing.swap(true, Relaxed) {
                    tracing::warn!(
                        "looking up views failed ({e}): every statement keeps its connection until a lookup succeeds"
                    );
                }
                Suspects::everything()
            }
        };
        let s = Arc::new(s);
        if let Ok(mut seen) = self.seen.lock() {
            *seen = Some((Instant::now(), s.clone()));
        }
        s
    }

    /// Warns once when views' definitions are hidden from the relay's
    /// account: reads of them all keep their connections.
    fn warn_hidden(&self, rows: &[Row]) {
        use std::sync::atomic::Ordering::Relaxed;
        let hidden = rows
            .iter()
            .filter(|r| field(Some(r), "s").is_none_or(|s| s.trim().is_empty()))
            .count();
        if hidden > 0 && !self.warned_hidden.swap(true, Relaxed) {
            tracing::warn!(
                "the relay's backend account may not read the definitions of {}, so reads of them keep their connections as if they called stored functions (GRANT SELECT, SHOW VIEW on them, or ON *.*, to that account)",
                sqlfleet_conn::text::count(u64::try_from(hidden).unwrap_or(u64::MAX), "view")
            );
        }
    }

    /// DDL went through the relay: look again before the next statement.
    pub fn forget(&self) {
        if let Ok(mut s) = self.seen.lock() {
            *s = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(d: &str, n: &str, s: &str) -> Row {
        vec![
            ("d".into(), Some(d.into())),
            ("n".into(), Some(n.into())),
            ("s".into(), Some(s.into())),
        ]
    }

    fn views(s: &Suspects) -> Vec<(String, String)> {
        let mut v: Vec<_> = s.views.iter().cloned().collect();
        v.sort();
        v
    }

    #[test]
    fn views_that_call_functions_and_views_of_them_are_suspect() {
        let s = judge(&[
            row(
                "shop",
                "plain",
                "select `shop`.`t`.`a` AS `a` from `shop`.`t`",
            ),
            row(
                "shop",
                "counts",
                "select count(0) AS `n`, now() AS `at` from `shop`.`t`",
            ),
            row("shop", "v_lock", "select `shop`.`f_lock`() AS `l`"),
            row("shop", "v_seq", "select nextval(`shop`.`s`) AS `id`"),
            row(
                "shop",
                "V_Outer",
                "select `v_lock`.`l` AS `l` from `shop`.`v_lock`",
            ),
            row("shop", "v_outer2", "select `l` from `shop`.`V_OUTER`"),
            row("other", "hidden", ""),
        ]);
        assert_eq!(
            views(&s),
            vec![
                ("other".into(), "hidden".into()),
                ("shop".into(), "v_lock".into()),
                ("shop".into(), "v_outer".into()),
                ("shop".into(), "v_outer2".into()),
                ("shop".into(), "v_seq".into()),
            ]
        );
        assert!(!s.is_empty());
        // The look covers the databases that had views (as named).
        let mut covers: Vec<_> = s.covers.iter().cloned().collect();
        covers.sort();
        assert_eq!(covers, vec!["other".to_string(), "shop".to_string()]);
        assert!(judge(&[row("shop", "plain", "select 1 AS `1`")]).is_empty());
    }

    #[test]
    fn a_statement_names_a_suspect_view_in_its_database_or_qualified() {
        let s = judge(&[row("shop", "v_lock", "select `shop`.`f`() AS `l`")]);
        assert!(s.named_in(b"SELECT * FROM v_lock", &["shop"]));
        assert!(s.named_in(b"select l from `V_LOCK` where 1", &["Shop"]));
        assert!(s.named_in(b"SELECT * FROM shop.v_lock", &[]));
        assert!(s.named_in(b"INSERT INTO t SELECT l FROM `shop`.`v_lock`", &["x"]));
        assert!(!s.named_in(b"SELECT * FROM v_lock", &["other"]));
        assert!(!s.named_in(b"SELECT * FROM other.v_lock", &["shop"]));
        assert!(!s.named_in(b"SELECT * FROM t", &["shop"]));
        assert!(!s.named_in(b"SELECT 'v_lock'", &["shop"]));
        let all = Suspects::everything();
        assert!(all.named_in(b"SELECT 1", &[]));
    }
}
