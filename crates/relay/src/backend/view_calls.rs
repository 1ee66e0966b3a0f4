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
//! suspect too. A definition the relay's account may not read (it takes
//! SELECT and SHOW VIEW; else only the definer sees it) counts as suspect; a lookup that
//! fails makes every statement suspect until one succeeds. Names match
//! without regard to case, and a column or alias spelt like a suspect view
//! counts as well: a wrong yes costs sharing, a wrong no correctness. DDL
//! through the relay makes the next statement look again; DDL elsewhere
//! is seen within the TTL, or at once in a database new to the look (a
//! view in it named from another database waits for the TTL).
//!
//! Cost: every MariaDB server has such views (its sys schema's call its
//! own functions), so the check runs on every statement in transaction
//! mode. A session keeps its [`Look`] while it holds (a clock read and an
//! atomic read per statement); a statement in a database without suspect
//! views and with no qualified name is then passed without a lookup in
//! any set. A lookup whose rows did not change reuses the last judgement.

use std::ops::Range;

use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlfleet_dump::lex::Tok;

use crate::backend::side::{field, Row, SideConn};
use crate::protocol::sql;

/// How long a look at the views is trusted.
pub const TTL: Duration = Duration::from_secs(2);

/// More views than this are not judged one by one: every statement is
/// suspect.
const MAX_VIEWS: usize = 100_000;

const LOOKUP: &str = "SELECT TABLE_SCHEMA AS d, TABLE_NAME AS n, VIEW_DEFINITION AS s \
                      FROM information_schema.VIEWS";

/// The views whose reading may change the session unseen.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Suspects {
    /// View name -> its databases, both in ASCII lower case (names match
    /// without regard to case: a wrong yes only costs sharing).
    views: FxHashMap<String, Vec<String>>,
    /// The databases that hold suspect views (ASCII lower case): a
    /// statement in another one is looked at only for qualified names.
    dbs: FxHashSet<String>,
    /// The lookup failed: anything may be such a view.
    all: bool,
    /// The databases this look covers (as named): those that had views,
    /// and those statements asked about. A statement in another one (a
    /// database made a moment ago) looks again at once.
    covers: FxHashSet<String>,
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

    fn insert(&mut self, db: &str, name: &str) {
        let dbs = self.views.entry(name.to_ascii_lowercase()).or_default();
        let db = db.to_ascii_lowercase();
        if !dbs.contains(&db) {
            dbs.push(db.clone());
        }
        self.dbs.insert(db);
    }

    fn contains(&self, db: &str, name: &str) -> bool {
        self.in_dbs(name, &[db])
    }

    /// Whether `name` is a suspect view in one of `dbs`.
    fn in_dbs(&self, name: &str, dbs: &[&str]) -> bool {
        with_lower(name, |k| self.views.get(k)).is_some_and(|in_dbs| {
            in_dbs
                .iter()
                .any(|v| dbs.iter().any(|d| d.eq_ignore_ascii_case(v)))
        })
    }

    /// Whether one of `dbs` holds suspect views.
    fn holds_any(&self, dbs: &[&str]) -> bool {
        dbs.iter().any(|d| with_lower(d, |d| self.dbs.contains(d)))
    }

    /// Whether a statement (its tokens) names a suspect view: `db.view`,
    /// or `view` in one of `dbs` (the session's database and one a USE in
    /// the text makes current). `local` is [`Suspects::holds_any`] of
    /// `dbs`: without it, only qualified names are looked up.
    fn names(&self, toks: &[(Tok, Range<usize>)], dbs: &[&str], local: bool) -> bool {
        if self.all {
            return true;
        }
        if self.views.is_empty() {
            return false;
        }
        (0..toks.len()).any(|i| {
            let qualified = i >= 2 && toks[i - 1].0.is_punct(b'.');
            if !qualified && !local {
                return false;
            }
            let Some(name) = name_at(toks, i) else {
                return false;
            };
            match qualified.then(|| name_at(toks, i - 2)).flatten() {
                Some(db) => self.contains(db, name),
                None => self.in_dbs(name, dbs),
            }
        })
    }
}

/// `f` of `s` in ASCII lower case, cased on the stack when short.
fn with_lower<R>(s: &str, f: impl FnOnce(&str) -> R) -> R {
    let mut buf = [0u8; 64];
    if let Some(b) = buf.get_mut(..s.len()) {
        b.copy_from_slice(s.as_bytes());
        b.make_ascii_lowercase();
        if let Ok(k) = std::str::from_utf8(b) {
            return f(k);
        }
    }
    f(&s.to_ascii_lowercase())
}

/// The name at token `i` (a word or a backquoted name).
fn name_at(toks: &[(Tok, Range<usize>)], i: usize) -> Option<&str> {
    match &toks.get(i)?.0 {
        Tok::Word(w) | Tok::Quoted(w) => Some(w.as_str()),
        _ => None,
    }
}

/// Judges every view from the lookup's rows (`d` database, `n` view, `s`
/// definition): those that call what may change the session unseen, whose
/// definition is hidden, or that name such a view.
pub fn judge(rows: &[Row]) -> Suspects {
    let mut out = Suspects::default();
    // Each definition lexed once: (database, view, its tokens).
    let mut rest = Vec::new();
    for r in rows {
        let get = |c| field(Some(r), c).unwrap_or_default();
        let (d, n, def) = (get("d"), get("n"), get("s"));
        out.covers.insert(d.clone());
        let q = sql::Query::new(def.as_bytes());
        if def.trim().is_empty() || q.effects().acts_unseen() {
            out.insert(&d, &n);
        } else {
            rest.push((d, n, q.into_tokens()));
        }
    }
    // Views of suspect views, until nothing more is found.
    loop {
        let (more, still): (Vec<_>, Vec<_>) = rest
            .into_iter()
            .partition(|(d, _, toks)| out.names(toks, &[d], out.holds_any(&[d])));
        if more.is_empty() {
            return out;
        }
        for (d, n, _) in &more {
            out.insert(d, n);
        }
        rest = still;
    }
}

/// A session's hold on the current look: reused, with no lock and no
/// lookup, while it is the current one, has not run out, and the session
/// is in the database it was taken in.
pub struct Look {
    generation: u64,
    expires: Instant,
    db: Option<String>,
    suspects: Arc<Suspects>,
    /// The statement's databases hold suspect views (else only qualified
    /// names are looked up).
    local: bool,
}

impl Look {
    /// The look taken at `at` for a session in `db` whose statement is in
    /// `dbs`.
    fn new(
        at: Instant,
        generation: u64,
        suspects: Arc<Suspects>,
        dbs: &[&str],
        db: Option<&str>,
    ) -> Look {
        Look {
            generation,
            expires: at + TTL,
            db: db.map(str::to_string),
            local: suspects.holds_any(dbs),
            suspects,
        }
    }

    /// Whether a statement (its tokens) names a suspect view; `dbs` are
    /// its databases, those the look was taken for.
    pub fn names(&self, toks: &[(Tok, Range<usize>)], dbs: &[&str]) -> bool {
        self.suspects.names(toks, dbs, self.local)
    }
}

pub struct ViewCalls {
    side: Arc<SideConn>,
    /// The current look: when it was taken, its generation, what it found.
    seen: std::sync::Mutex<Option<(Instant, u64, Arc<Suspects>)>>,
    /// Counts looks and forgets: a session's [`Look`] of another
    /// generation is taken again.
    generation: std::sync::atomic::AtomicU64,
    /// One lookup at a time: statements that found the look stale
    /// together wait for the first one's answer.
    lookup: tokio::sync::Mutex<()>,
    /// Whether the last lookup failed (warned once per run of failures).
    failing: std::sync::atomic::AtomicBool,
    /// Whether hidden definitions were warned about (once).
    warned_hidden: std::sync::atomic::AtomicBool,
    /// The last lookup's rows (their hash, with keys drawn per process)
    /// and what they were judged to be.
    last: std::sync::Mutex<Option<(u64, Suspects)>>,
    hasher: std::collections::hash_map::RandomState,
}

impl ViewCalls {
    pub fn new(side: Arc<SideConn>) -> ViewCalls {
        ViewCalls {
            side,
            seen: std::sync::Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(0),
            lookup: tokio::sync::Mutex::new(()),
            failing: std::sync::atomic::AtomicBool::new(false),
            warned_hidden: std::sync::atomic::AtomicBool::new(false),
            last: std::sync::Mutex::new(None),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Whether a session's look still holds at `now` in database `db`.
    pub fn still(&self, look: &Look, db: Option<&str>, now: Instant) -> bool {
        now < look.expires
            && look.db.as_deref() == db
            && self.generation.load(std::sync::atomic::Ordering::Acquire) == look.generation
    }

    fn fresh(&self, dbs: &[&str], db: Option<&str>) -> Option<Look> {
        let s = self.seen.lock().ok()?;
        let (at, generation, v) = s.as_ref()?;
        (at.elapsed() < TTL && (v.all || dbs.iter().all(|d| v.covers.contains(*d))))
            .then(|| Look::new(*at, *generation, v.clone(), dbs, db))
    }

    /// The current look for a session in `db` whose statement is in
    /// `dbs`; looked up again when the last look is older than the TTL or
    /// does not cover one of `dbs`.
    pub async fn look(&self, dbs: &[&str], db: Option<&str>) -> Look {
        if let Some(l) = self.fresh(dbs, db) {
            return l;
        }
        let _turn = self.lookup.lock().await;
        if let Some(l) = self.fresh(dbs, db) {
            return l;
        }
        use std::sync::atomic::Ordering::{AcqRel, Relaxed};
        let s = match self.side.queries(&[LOOKUP], MAX_VIEWS + 1).await {
            Ok(mut r) => {
                self.failing.store(false, Relaxed);
                let rows = r.pop().unwrap_or_default();
                if rows.len() > MAX_VIEWS {
                    Suspects::everything()
                } else {
                    let mut s = self.judged(&rows);
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
        let generation = self.generation.fetch_add(1, AcqRel) + 1;
        let at = Instant::now();
        let s = Arc::new(s);
        if let Ok(mut seen) = self.seen.lock() {
            *seen = Some((at, generation, s.clone()));
        }
        Look::new(at, generation, s, dbs, db)
    }

    /// The judgement of `rows`: the last one again when the rows are the
    /// same (the usual case: views change seldom, and MariaDB's sys
    /// schema alone has a hundred long definitions to read).
    fn judged(&self, rows: &[Row]) -> Suspects {
        use std::hash::BuildHasher;
        let key = self.hasher.hash_one(rows);
        if let Ok(last) = self.last.lock() {
            if let Some((k, s)) = last.as_ref() {
                if *k == key {
                    return s.clone();
                }
            }
        }
        self.warn_hidden(rows);
        let s = judge(rows);
        if let Ok(mut last) = self.last.lock() {
            *last = Some((key, s.clone()));
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
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlfleet_dump::lex::lex;

    fn row(d: &str, n: &str, s: &str) -> Row {
        vec![
            ("d".into(), Some(d.into())),
            ("n".into(), Some(n.into())),
            ("s".into(), Some(s.into())),
        ]
    }

    /// Whether `sql` names one of `s`'s views from `dbs`.
    fn named_in(s: &Suspects, sql: &[u8], dbs: &[&str]) -> bool {
        s.names(&lex(sql).toks, dbs, s.holds_any(dbs))
    }

    fn views(s: &Suspects) -> Vec<(String, String)> {
        let mut v: Vec<_> = s
            .views
            .iter()
            .flat_map(|(n, dbs)| dbs.iter().map(move |d| (d.clone(), n.clone())))
            .collect();
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
        assert!(named_in(&s, b"SELECT * FROM v_lock", &["shop"]));
        assert!(named_in(&s, b"select l from `V_LOCK` where 1", &["Shop"]));
        assert!(named_in(&s, b"SELECT * FROM shop.v_lock", &[]));
        assert!(named_in(
            &s,
            b"INSERT INTO t SELECT l FROM `shop`.`v_lock`",
            &["x"]
        ));
        assert!(!named_in(&s, b"SELECT * FROM v_lock", &["other"]));
        assert!(!named_in(&s, b"SELECT * FROM other.v_lock", &["shop"]));
        assert!(!named_in(&s, b"SELECT * FROM t", &["shop"]));
        assert!(!named_in(&s, b"SELECT 'v_lock'", &["shop"]));
        let all = Suspects::everything();
        assert!(named_in(&all, b"SELECT 1", &[]));
    }

    #[test]
    fn a_look_skips_statements_that_cannot_name_a_suspect_view() {
        let s = Arc::new(judge(&[row(
            "sys",
            "x_io",
            "select `sys`.`format_bytes`(1) AS `b`",
        )]));
        let look = |db: &str| Look::new(Instant::now(), 1, s.clone(), &[db], Some(db));
        let names =
            |l: &Look, sql: &[u8]| l.names(&lex(sql).toks, &[l.db.as_deref().unwrap_or("")]);
        let app = look("app");
        assert!(!app.local);
        assert!(!names(&app, b"SELECT * FROM x_io"));
        assert!(names(&app, b"SELECT * FROM sys.x_io"));
        assert!(!names(&app, b"SELECT t.v FROM t"));
        let sys = look("SYS");
        assert!(sys.local);
        assert!(names(&sys, b"SELECT * FROM x_io"));
    }
}
