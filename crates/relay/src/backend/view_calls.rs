//! Reads that change the session unseen, through views. A view whose
//! definition calls a stored function (directly or through another view)
//! runs that function for every statement that reads it, and the function
//! may take a user lock or advance a sequence, which no tracker reports:
//! `SELECT * FROM v` is then `SELECT f()` in disguise. A statement that
//! names such a view keeps its connection and is no read for a replica,
//! like the call itself (write_effects.rs does the same for writes).
//! A view whose definition reads the server's own state (its schemas, a
//! user lock's state, `VERSION()`: `protocol/sql/server_state.rs`) is
//! that read in disguise too: a statement naming it is the primary's to
//! answer, as the read itself is (a replica has its own threads, locks and
//! catalog) — [`Reading`] says which of the two, or neither.
//!
//! Do no harm: the relay asks the server only about the names a statement
//! uses, never about the whole catalog (a scan of information_schema.VIEWS
//! opens every view on the server, grows with its databases, and crashed
//! MariaDB 10.11 under 64 clients). Per database the statement is in (or
//! names), the names of its views are listed once per [`TTL`]
//! (`SHOW FULL TABLES FROM db WHERE Table_type = 'VIEW'`, which reads each
//! name's type from its .frm header without opening the table); only a
//! word of the statement that is one of them has its definition read (`information_schema.VIEWS` with schema and name), and
//! a definition that names further views has those read in turn, at most
//! [`MAX_DEPTH`] deep. A statement in a database without views and with no
//! qualified name asks nothing: the session keeps its [`Look`] (the
//! database's view names) while it holds, a clock read and an atomic read
//! per statement.
//!
//! Fail closed: a view whose definition the relay's account may not read
//! (it takes SELECT and SHOW VIEW; else only the definer sees it) counts as
//! calling one; a lookup that fails makes the statement count too, and its
//! database for one [`TTL`] (a struggling server is not asked again for
//! every statement). Names match without regard to case, and a column or
//! alias spelt like a view counts as well: a wrong yes costs sharing, a
//! wrong no correctness. DDL through the relay makes the next statement
//! look again; DDL elsewhere is seen within the TTL.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlfleet_conn::quote::{ident, literal};
use sqlfleet_dump::lex::Tok;

use crate::backend::side::{field, LookupError, OwnQuery, SideConn};
use crate::protocol::sql;

/// How long a database's view names and a view's verdict are trusted.
pub const TTL: Duration = Duration::from_secs(2);

/// How deep views of views are followed before the answer is "may".
const MAX_DEPTH: usize = 4;

/// Views listed per database at most; more and every statement there
/// counts as naming one.
const MAX_VIEWS: usize = 100_000;

/// A database's view names (ASCII lower case), or None when they could
/// not be read (everything there is suspect).
type Names = Option<Arc<HashSet<String>>>;

/// The (database, name) pairs a statement's words may mean, in `dbs` for
/// unqualified words (the session's database and one a USE in the text
/// makes current) — every word, since a wrong no costs correctness.
pub fn candidates(sql: &[u8], toks: &[(Tok, Range<usize>)], dbs: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in 0..toks.len() {
        let Some(name) = name_at(sql, toks, i) else {
            continue;
        };
        let qualified = i >= 2 && toks[i - 1].0.is_punct(b'.');
        match qualified.then(|| name_at(sql, toks, i - 2)).flatten() {
            Some(db) => out.push((db.to_string(), name.to_string())),
            None if qualified => {}
            None => out.extend(dbs.iter().map(|d| (d.to_string(), name.to_string()))),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// What reading a view does beyond reading tables: the strongest of its
/// definition and the views it reads (ordered weakest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reading {
    /// Tables only (or no view at all): a read like any other.
    Plain,
    /// The server's own state: the primary's to answer.
    Server,
    /// It calls what may change the session unseen, or it could not be
    /// judged (hidden, a lookup that failed, too deep): pinned, no
    /// replica's read.
    Unseen,
}

/// What a view's definition says on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Definition {
    /// It calls what may change the session unseen, or it is hidden.
    Suspect,
    /// It may still read such a view: these names (in the view's
    /// database when unqualified); `server`: it reads the server's own
    /// state itself.
    Reads {
        names: Vec<(String, String)>,
        server: bool,
    },
}

/// Judges one definition (of a view in `db`).
pub fn judge(db: &str, definition: Option<&str>) -> Definition {
    let def = definition.unwrap_or_default();
    if def.trim().is_empty() {
        return Definition::Suspect;
    }
    let q = sql::Query::new(def.as_bytes());
    let fx = q.effects();
    if fx.acts_unseen() {
        return Definition::Suspect;
    }
    Definition::Reads {
        names: candidates(def.as_bytes(), q.tokens(), &[db]),
        server: fx.reads_server,
    }
}

/// The name at token `i` (a word or a backquoted name) as written: the
/// lexer upper-cases words, and the server's names are case-sensitive.
fn name_at<'a>(
    sql: &'a [u8],
    toks: &'a [(Tok, Range<usize>)],
    i: usize,
) -> Option<std::borrow::Cow<'a, str>> {
    let (t, r) = toks.get(i)?;
    match t {
        Tok::Word(_) => sql.get(r.clone()).map(String::from_utf8_lossy),
        Tok::Quoted(w) => Some(std::borrow::Cow::Borrowed(w.as_str())),
        _ => None,
    }
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
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

/// A session's hold on its database's view names: reused, with no lock
/// and no lookup, while it has not run out, nothing was forgotten since,
/// and the session is in the database it was taken in.
pub struct Look {
    generation: u64,
    expires: Instant,
    db: Option<String>,
    names: Names,
}

pub struct ViewCalls {
    side: Arc<SideConn>,
    /// Per database (lower case): when listed, its view names.
    lists: Mutex<HashMap<String, (Instant, Names)>>,
    /// Per (database, view) in lower case: when judged, what reading it
    /// does.
    verdicts: Mutex<HashMap<(String, String), (Instant, Reading)>>,
    /// Counts forgets: a session's [`Look`] of another generation is
    /// taken again.
    generation: AtomicU64,
    /// One lookup at a time: statements that missed together wait for the
    /// first one's answer.
    lookup: tokio::sync::Mutex<()>,
    /// Whether the last lookup failed (warned once per run of failures).
    failing: AtomicBool,
    /// Whether hidden definitions were warned about (once).
    warned_hidden: AtomicBool,
}

impl ViewCalls {
    pub fn new(side: Arc<SideConn>) -> ViewCalls {
        ViewCalls {
            side,
            lists: Mutex::new(HashMap::new()),
            verdicts: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            lookup: tokio::sync::Mutex::new(()),
            failing: AtomicBool::new(false),
            warned_hidden: AtomicBool::new(false),
        }
    }

    /// Whether a session's look still holds at `now` in database `db`.
    pub fn still(&self, look: &Look, db: Option<&str>, now: Instant) -> bool {
        now < look.expires
            && look.db.as_deref() == db
            && self.generation.load(Ordering::Acquire) == look.generation
    }

    /// The look for a session in `db`: its database's view names.
    pub async fn look(&self, db: Option<&str>) -> Look {
        let generation = self.generation.load(Ordering::Acquire);
        let at = Instant::now();
        let names = match db {
            Some(d) => self.list(d).await,
            None => Some(Arc::new(HashSet::new())),
        };
        Look {
            generation,
            expires: at + TTL,
            db: db.map(str::to_string),
            names,
        }
    }

    /// What reading the views a statement (its tokens) names does, the
    /// strongest of them; `dbs` are its databases (the look's first, when
    /// there is one).
    pub async fn names(
        &self,
        look: &Look,
        sql: &[u8],
        toks: &[(Tok, Range<usize>)],
        dbs: &[&str],
    ) -> Reading {
        self.names_where(look, sql, toks, dbs, false).await
    }

    /// [`names`](Self::names), or with `any` every view counts as
    /// [`Reading::Unseen`] (or may: a database whose views could not be
    /// listed) — the result cache's question, since a view reads tables
    /// its name does not say.
    pub async fn names_where(
        &self,
        look: &Look,
        sql: &[u8],
        toks: &[(Tok, Range<usize>)],
        dbs: &[&str],
        any: bool,
    ) -> Reading {
        let qualified = toks.iter().any(|(t, _)| t.is_punct(b'.'));
        let in_look = |d: &str| look.db.as_deref() == Some(d);
        if !qualified && dbs.iter().all(|d| in_look(d)) {
            // Only the look's database (the common statement): its view
            // names are in memory, each word checked without allocating.
            let (db, names) = match (look.db.as_deref(), look.names.as_ref()) {
                // No database: no unqualified word names a view.
                (None, _) => return Reading::Plain,
                // Its views could not be listed: suspect.
                (Some(_), None) => return Reading::Unseen,
                (Some(db), Some(names)) => (db, names),
            };
            if names.is_empty() {
                return Reading::Plain;
            }
            let mut worst = Reading::Plain;
            for i in 0..toks.len() {
                let Some(n) = name_at(sql, toks, i) else {
                    continue;
                };
                if with_lower(&n, |k| names.contains(k)) {
                    worst = worst.max(if any {
                        Reading::Unseen
                    } else {
                        self.reading(db, &n, 0).await
                    });
                    if worst == Reading::Unseen {
                        break;
                    }
                }
            }
            return worst;
        }
        let mut worst = Reading::Plain;
        for (d, n) in candidates(sql, toks, dbs) {
            let names = if in_look(&d) {
                look.names.clone()
            } else {
                self.list(&d).await
            };
            // Views unknown there (the list failed): suspect, without
            // asking about each word.
            let Some(names) = names else {
                return Reading::Unseen;
            };
            if names.contains(&lower(&n)) {
                worst = worst.max(if any {
                    Reading::Unseen
                } else {
                    self.reading(&d, &n, 0).await
                });
                if worst == Reading::Unseen {
                    break;
                }
            }
        }
        worst
    }

    /// Whether a text in `db` (a trigger's body) names a view whose
    /// reading may change the session unseen.
    pub async fn names_in(&self, sql: &[u8], toks: &[(Tok, Range<usize>)], db: &str) -> bool {
        let look = self.look(Some(db)).await;
        self.names(&look, sql, toks, &[db]).await == Reading::Unseen
    }

    /// `db`'s view names, listed when the last list ran out.
    async fn list(&self, db: &str) -> Names {
        let key = lower(db);
        if let Some(n) = self.cached_list(&key) {
            return n;
        }
        let _turn = self.lookup.lock().await;
        if let Some(n) = self.cached_list(&key) {
            return n;
        }
        // SHOW FULL TABLES reads each name's type from its .frm header;
        // information_schema.TABLES opens every table's definition to
        // judge TABLE_TYPE (Opened_table_definitions: 0 against one per
        // table, MariaDB 10.11), which also counts the tables' features
        // (Feature_gis, Feature_check_constraint) on the relay's connection.
        let sql = format!(
            "SHOW FULL TABLES FROM {} WHERE Table_type = 'VIEW'",
            ident(db)
        );
        let names = match self
            .side
            .queries(OwnQuery::ViewNames, &[&sql], MAX_VIEWS + 1)
            .await
        {
            Ok(mut r) => {
                self.failing.store(false, Ordering::Relaxed);
                let rows = r.pop().unwrap_or_default();
                (rows.len() <= MAX_VIEWS).then(|| {
                    Arc::new(
                        rows.iter()
                            .filter_map(|r| r.first().and_then(|(_, v)| v.clone()))
                            .map(|n| lower(&n))
                            .collect(),
                    )
                })
            }
            // SHOW FULL TABLES of a database that does not exist (a
            // statement names one): it has no views.
            Err(LookupError::Refused { code: 1049, .. }) => Some(Arc::new(HashSet::new())),
            Err(e) => {
                self.warn_failing(&e.to_string());
                None
            }
        };
        if let Ok(mut l) = self.lists.lock() {
            if l.len() > 10_000 {
                l.retain(|_, (at, _)| at.elapsed() < TTL);
            }
            l.insert(key, (Instant::now(), names.clone()));
        }
        names
    }

    fn cached_list(&self, key: &str) -> Option<Names> {
        let l = self.lists.lock().ok()?;
        l.get(key)
            .filter(|(at, _)| at.elapsed() < TTL)
            .map(|(_, n)| n.clone())
    }

    fn cached_verdict(&self, key: &(String, String)) -> Option<Reading> {
        let v = self.verdicts.lock().ok()?;
        v.get(key)
            .filter(|(at, _)| at.elapsed() < TTL)
            .map(|(_, s)| *s)
    }

    /// What reading the view `db`.`name` does: its definition, and the
    /// views it names, `depth` views down.
    fn reading<'a>(
        &'a self,
        db: &'a str,
        name: &'a str,
        depth: usize,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Reading> + Send + 'a>> {
        Box::pin(async move {
            if depth > MAX_DEPTH {
                return Reading::Unseen;
            }
            let key = (lower(db), lower(name));
            if let Some(v) = self.cached_verdict(&key) {
                return v;
            }
            let def = {
                let _turn = self.lookup.lock().await;
                if let Some(v) = self.cached_verdict(&key) {
                    return v;
                }
                let sql = format!(
                    "SELECT VIEW_DEFINITION AS s FROM information_schema.VIEWS \
                     WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {}",
                    literal(db),
                    literal(name)
                );
                match self
                    .side
                    .queries(OwnQuery::ViewDefinition, &[&sql], 1)
                    .await
                {
                    Ok(mut r) => {
                        self.failing.store(false, Ordering::Relaxed);
                        let rows = r.pop().unwrap_or_default();
                        match rows.first() {
                            // Listed a moment ago, gone now: not a view.
                            None => Some(None),
                            Some(row) => Some(Some(field(Some(row), "s"))),
                        }
                    }
                    Err(e) => {
                        self.warn_failing(&e.to_string());
                        None
                    }
                }
            };
            let v = match def {
                None => Reading::Unseen,
                Some(None) => Reading::Plain,
                Some(Some(def)) => {
                    if def.as_deref().is_none_or(|s| s.trim().is_empty()) {
                        self.warn_hidden(db, name);
                    }
                    match judge(db, def.as_deref()) {
                        Definition::Suspect => Reading::Unseen,
                        Definition::Reads { names, server } => {
                            let mut worst = if server {
                                Reading::Server
                            } else {
                                Reading::Plain
                            };
                            for (d, n) in names {
                                let is_view = match self.list(&d).await {
                                    None => {
                                        worst = Reading::Unseen;
                                        break;
                                    }
                                    Some(v) => v.contains(&lower(&n)),
                                };
                                if is_view {
                                    worst = worst.max(self.reading(&d, &n, depth + 1).await);
                                    if worst == Reading::Unseen {
                                        break;
                                    }
                                }
                            }
                            worst
                        }
                    }
                }
            };
            if let Ok(mut m) = self.verdicts.lock() {
                if m.len() > 10_000 {
                    m.retain(|_, (at, _)| at.elapsed() < TTL);
                }
                m.insert(key, (Instant::now(), v));
            }
            v
        })
    }

    fn warn_failing(&self, e: &str) {
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "looking up views failed ({e}): statements that may read one keep their connections until a lookup succeeds"
            );
        }
    }

    /// Warns once when a view's definition is hidden from the relay's
    /// account: reads of it keep their connections.
    fn warn_hidden(&self, db: &str, name: &str) {
        if !self.warned_hidden.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the relay's backend account may not read the definition of view {db}.{name} (and perhaps others), so reads of them keep their connections as if they called stored functions (GRANT SELECT, SHOW VIEW on them, or ON *.*, to that account)"
            );
        }
    }

    /// DDL went through the relay: look again before the next statement.
    pub fn forget(&self) {
        if let Ok(mut l) = self.lists.lock() {
            l.clear();
        }
        if let Ok(mut v) = self.verdicts.lock() {
            v.clear();
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlfleet_dump::lex::lex;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut out: Vec<_> = v
            .iter()
            .map(|(d, n)| (d.to_string(), n.to_string()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_statement_asks_only_about_its_own_words() {
        // (sql, dbs, the (database, name) pairs it may mean)
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let table: &[(&[u8], &[&str], Pairs)] = &[
            (b"SELECT 1", &[], &[]),
            (b"SELECT * FROM shop.v", &[], &[("shop", "v")]),
            (
                b"SELECT a FROM v",
                &["shop"],
                &[
                    ("shop", "SELECT"),
                    ("shop", "a"),
                    ("shop", "FROM"),
                    ("shop", "v"),
                ],
            ),
            (
                b"SELECT * FROM `Shop`.`V_Lock` JOIN t",
                &["app"],
                &[
                    ("Shop", "V_Lock"),
                    ("app", "SELECT"),
                    ("app", "FROM"),
                    ("app", "JOIN"),
                    ("app", "Shop"),
                    ("app", "t"),
                ],
            ),
            (
                b"select x from v",
                &["a", "b"],
                &[
                    ("a", "select"),
                    ("a", "x"),
                    ("a", "from"),
                    ("a", "v"),
                    ("b", "select"),
                    ("b", "x"),
                    ("b", "from"),
                    ("b", "v"),
                ],
            ),
            (b"SELECT 'shop.v'", &[], &[]),
        ];
        for (sql, dbs, want) in table {
            let got = candidates(sql, &lex(sql).toks, dbs);
            assert_eq!(got, pairs(want), "{}", String::from_utf8_lossy(sql));
        }
    }

    #[test]
    fn a_definition_is_suspect_when_it_calls_unseen_or_is_hidden() {
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        // The names a definition may read, and whether it reads the
        // server's own state.
        type Reads<'a> = (Pairs<'a>, bool);
        // (definition, None: suspect, or what it reads)
        let table: &[(Option<&str>, Option<Reads>)] = &[
            (
                Some("select `shop`.`t`.`a` AS `a` from `shop`.`t`"),
                Some((
                    &[
                        ("shop", "a"),
                        ("shop", "t"),
                        ("shop", "AS"),
                        ("shop", "from"),
                        ("shop", "select"),
                    ],
                    false,
                )),
            ),
            (Some("select `shop`.`f_lock`() AS `l`"), None),
            (Some("select nextval(`shop`.`s`) AS `id`"), None),
            (Some("select get_lock('x', 0) AS `l`"), None),
            (Some(""), None),
            (None, None),
            // The server's own state, as the server writes a definition.
            (
                Some(
                    "select `information_schema`.`PROCESSLIST`.`ID` AS `ID` \
                     from `information_schema`.`PROCESSLIST`",
                ),
                Some((&[("information_schema", "PROCESSLIST")], true)),
            ),
            (Some("select is_free_lock('x') AS `f`"), Some((&[], true))),
            (Some("select version() AS `v`"), Some((&[], true))),
            (
                Some("select `m`.`User` AS `User` from `mysql`.`user` `m`"),
                Some((&[("mysql", "user")], true)),
            ),
            // A view of a view: the inner one is judged by its own
            // definition.
            (
                Some("select `shop`.`v`.`ID` AS `ID` from `shop`.`v`"),
                Some((&[("shop", "v")], false)),
            ),
        ];
        for (def, want) in table {
            let got = judge("shop", *def);
            match want {
                None => assert_eq!(got, Definition::Suspect, "{def:?}"),
                Some((names, server)) => {
                    let Definition::Reads {
                        names: got,
                        server: got_server,
                    } = got
                    else {
                        panic!("{def:?}: {got:?}");
                    };
                    assert_eq!(got_server, *server, "{def:?}: reads the server");
                    for n in pairs(names) {
                        assert!(got.contains(&n), "{def:?}: {n:?} not in {got:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_strongest_reading_wins() {
        assert!(Reading::Plain < Reading::Server && Reading::Server < Reading::Unseen);
        assert_eq!(Reading::Server.max(Reading::Plain), Reading::Server);
        assert_eq!(Reading::Server.max(Reading::Unseen), Reading::Unseen);
    }
}
