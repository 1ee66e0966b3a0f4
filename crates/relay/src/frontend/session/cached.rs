//! The result cache as a session uses it (`cache.rs` says when an entry is
//! exact): a rule's SELECT answered from the cache without a server, or
//! read on the primary and kept on its way; a statement that may write
//! makes everything cached stale around its run.

use std::sync::atomic::Ordering::Relaxed;

use tokio::io::AsyncWriteExt;

use super::{Fail, Session};
use crate::backend::pool::Route;
use crate::backend::write_scope::folded;
use crate::cache::row_key::{self, RowKey};
use crate::cache::{decide, Change, Hit, Key, Leading, Scope, Turn};
use crate::config::Mode;
use crate::protocol::reply::{Outcome, STATUS_AUTOCOMMIT};
use crate::protocol::sql::Effects;

/// Status flags a cached reply may carry besides autocommit: the sql_mode
/// bits the key's settings fix (NO_BACKSLASH_ESCAPES, ANSI_QUOTES), and
/// what the server says of the query itself (no good index used, no index
/// used, slow), which a client may log but never changes its session.
const STATUS_ALSO: u16 = 0x0200 | 0x8000 | 0x0010 | 0x0020 | 0x0800;

/// A cache miss: its rule, key, the version its read started at, and
/// (when it leads the read of its key) what wakes those waiting for it.
pub(super) struct Miss {
    rule: usize,
    key: Key,
    since: u64,
    /// What its read reads (`decide::read_scope`, everything through a view).
    reads: Scope,
    /// The rows it reads, when only those of some values of one column
    /// (`cache/row_key.rs`; a prepared one's by its parameters).
    rows: Option<RowKey>,
    _leading: Option<Leading>,
    /// A text query's analysis, kept with its entry (`Cache::put_analyzed`).
    pub(super) analysis: Option<std::sync::Arc<crate::protocol::sql::Analysis>>,
}

type Token = (sqlfleet_dump::lex::Tok, std::ops::Range<usize>);

/// The longest a miss waits for the same statement's read in flight
/// before it asks the server itself.
const WAIT_FOR_READ: std::time::Duration = std::time::Duration::from_secs(2);

impl Session {
    /// The rule and key of a statement whose result may come from the
    /// cache, in the state the client is in now: a text query (`params`
    /// `None`) run in `db`, or a prepared statement's execute with its
    /// parameters, prepared in `db`.
    pub(super) fn cache_key(
        &self,
        db: Option<String>,
        sql: &[u8],
        fx: &Effects,
        toks: &[Token],
        digest: Option<&str>,
        params: Option<Vec<u8>>,
    ) -> Option<(usize, Key)> {
        if self.st.mode() != Mode::Transaction {
            return None;
        }
        let rule = self
            .ctx
            .cache
            .rule_for(&self.user, db.as_deref(), sql, digest, toks)?;
        let session = decide::Session {
            plain: self.st.is_plain(),
            holds_conn: self.conn.is_some(),
            streamed: self.streamed.is_some(),
        };
        decide::cacheable(fx, toks, session).ok()?;
        if !self.ctx.cache.gate.open() {
            // Blind to writes made elsewhere: as if no rule took it.
            self.ctx.cache.gate.bypassed.fetch_add(1, Relaxed);
            return None;
        }
        Some((
            rule,
            Key {
                user: self.user.clone(),
                db,
                settings: self.st.settings().to_vec(),
                caps: self.caps,
                ext: self.shape.ext,
                collation: self.shape.collation,
                sql: sql.to_vec(),
                params,
                epochs: (self.ctx.pool.epoch(), self.ctx.pool.grants_epoch()),
            },
        ))
    }

    /// The rule and key of a prepared statement's execute whose result may
    /// come from the cache: its text, the database it was prepared in, and
    /// its parameters' types and values (`stmt::params_key`). Its digest is
    /// worked out only when a rule matches by digest.
    pub(super) fn execute_cache_key(
        &self,
        def: &crate::protocol::stmt::StmtDef,
        params: Vec<u8>,
    ) -> Option<(usize, Key)> {
        let digest = self
            .ctx
            .cache
            .matches_digests()
            .then(|| crate::protocol::sql::digest(&def.key.sql));
        self.cache_key(
            def.key.db.clone(),
            &def.key.sql,
            &def.fx,
            &def.toks,
            digest.as_deref(),
            Some(params),
        )
    }

    /// Answers from the cache when it has a fresh entry; else the read
    /// goes to the primary (a replica may be behind a write another
    /// client made through the relay) with its reply recorded.
    pub(super) async fn answer_or_miss(
        &mut self,
        rule: usize,
        key: Key,
        (sql, toks, nparams): (&[u8], &[Token], u16),
        fx: &Effects,
    ) -> Result<Option<Miss>, Fail> {
        let mut leading = None;
        // An entry whose count after it is not told apart answers only
        // where the client's count is its rows again (`Hit::keeps`).
        let known = self.st.known_found_rows();
        let fits = |h: &Hit| h.keeps.is_some() || known == Some(h.rows);
        let hit = match self.ctx.cache.get(rule, &key) {
            Some(h) => Some(h),
            // Identical misses in flight wait for the first (one server
            // read for a cold key), then look again.
            None => match self.ctx.cache.turn(&key) {
                Turn::Lead(l) => {
                    leading = Some(l);
                    None
                }
                Turn::Wait(n) => self.ctx.cache.wait_for(rule, &key, n, WAIT_FOR_READ).await,
            },
        }
        .filter(fits);
        let Some(hit) = hit else {
            let since = self.ctx.cache.version();
            let reads = match decide::read_scope(sql, toks) {
                Scope::Tables(_) if self.names_a_view(sql, toks, fx).await => Scope::Whole,
                r => r,
            };
            let rows = match &reads {
                Scope::Tables(_) => with_params(key.params.as_deref(), nparams, toks, |p| {
                    crate::cache::row_key::read_key_with(sql, toks, p)
                }),
                Scope::Whole => None,
            };
            self.capture = Some(Vec::new());
            self.capture_max = self.ctx.cache.max_entry_bytes(rule);
            if self.route.is_replica() {
                self.route = Route::Primary;
            }
            return Ok(Some(Miss {
                rule,
                key,
                since,
                reads,
                rows,
                _leading: leading,
                analysis: None,
            }));
        };
        self.ctx
            .metrics
            .bytes_to_client
            .fetch_add(hit.reply.len() as u64, Relaxed);
        self.io
            .s
            .write_all(&hit.reply)
            .await
            .map_err(|_| Fail::Close)?;
        self.io.s.flush().await.map_err(|_| Fail::Close)?;
        // What the SELECT leaves: ROW_COUNT() -1, FOUND_ROWS() its rows
        // (or the count before it, as the server left it at the miss).
        let settings = self.st.settings().to_vec();
        let found = (hit.keeps != Some(true)).then_some(hit.rows);
        self.st.answered_locally(&settings, -1, found);
        Ok(None)
    }

    /// Keeps a miss's reply when it is one plain result: no error, no
    /// warnings, no session change, autocommit and nothing else in its
    /// status.
    /// `count_before`: the client's FOUND_ROWS() before the statement,
    /// where known — with the one after it, it tells how a one-row
    /// grouping leaves the count (`Hit::keeps`); not told, not stored.
    pub(super) fn cache_store(
        &self,
        miss: Miss,
        o: &Outcome,
        reply: Option<Vec<u8>>,
        (fx, count_before): (&Effects, Option<u64>),
    ) {
        let plain = o.error.is_none()
            && o.warnings == 0
            && o.changes.is_empty()
            && o.result_sets == 1
            && o.insert_id == 0
            && o.status
                .is_some_and(|st| st & !STATUS_ALSO == STATUS_AUTOCOMMIT);
        let keeps = if fx.found_rows_server {
            Hit::keeps_from(o.rows, count_before, self.st.known_found_rows())
        } else {
            Some(Some(false))
        };
        let (Some(reply), Some(keeps)) = (reply.filter(|_| plain), keeps) else {
            if let Some(c) = self.ctx.cache.counts().get(miss.rule) {
                c.not_stored.fetch_add(1, Relaxed);
            }
            return;
        };
        let hit = Hit {
            reply: std::sync::Arc::new(reply),
            rows: o.rows,
            keeps,
        };
        self.ctx.cache.put_analyzed(
            miss.rule,
            miss.since,
            miss.key,
            hit,
            (miss.reads, miss.rows),
            miss.analysis,
        );
    }

    /// For a statement that may write (`decide::invalidates`) while the
    /// cache is on: the shared context (cloned only then: one atomic count
    /// per statement on a line every session shares costs at 30k q/s) and
    /// what the statement makes stale, for `Cache::write_begins` around
    /// its run: its own tables (`write_scope`), and for a COMMIT the
    /// tables of every write of its transaction (`cache/pending.rs`).
    /// Text queries and prepared executes alike.
    pub(super) async fn cache_stale(
        &mut self,
        fx: &Effects,
        sql: &[u8],
        params: Option<(&[u8], u16)>,
    ) -> Option<(std::sync::Arc<crate::frontend::ctx::Ctx>, Change)> {
        use crate::cache::pending::At;
        let whole = self.streamed.is_none();
        if !self.ctx.cache.active() || !decide::invalidates(fx, sql, self.st.in_trans(), whole) {
            return None;
        }
        let commit =
            whole && fx.statements == 1 && crate::protocol::sql::starts_with_word(sql, "COMMIT");
        let at = if commit {
            At::Commit
        } else if self.st.in_trans() || !self.st.autocommit() {
            At::InTransaction
        } else {
            At::Alone
        };
        let own = self.write_change(fx, sql, params).await;
        Some((self.ctx.clone(), self.cache_pending.statement(at, own)))
    }

    /// What a statement that may write makes stale: the tables it changes
    /// when that is sure (`decide::write_tables`, then the catalog in
    /// `backend/write_scope.rs`), else everything; an UPDATE or DELETE of
    /// one table whose rows are those of some values of a key
    /// (`row_key::write_key`), or an INSERT naming its rows' values
    /// (`row_key::insert_key_with`), only those rows — by the values the
    /// catalog says the rows hold as written (`exact_keys`): the other
    /// keyed columns' entries of the table go stale whole.
    async fn write_change(&self, fx: &Effects, sql: &[u8], params: Option<(&[u8], u16)>) -> Change {
        let whole = self.streamed.is_none();
        let Some(refs) = decide::write_tables(fx, sql, whole) else {
            return Change::whole();
        };
        let db = self.st.db();
        let scopes = &self.ctx.write_scopes;
        let Some(tables) = scopes.tables(db.as_deref(), refs).await else {
            return Change::whole();
        };
        // (lexed again: the session's tokens may be of another text — a
        // rewritten one, or only the head of a streamed one)
        let [r] = refs else {
            return Scope::Tables(std::sync::Arc::new(tables)).into();
        };
        let toks = sqlfleet_dump::lex::lex(sql).toks;
        let (p, n) = params.map_or((None, 0), |(p, n)| (Some(p), n));
        let written = with_params(p, n, &toks, |p| {
            match row_key::write_key_with(sql, &toks, p) {
                Some(k) => Some((k.table.clone(), k.keys()?)),
                None => row_key::insert_key_with(sql, &toks, p),
            }
        })
        .filter(|(t, _)| folded(&r.name).as_deref() == Some(&t[..]));
        let exact = match written {
            Some((t, keys)) => scopes
                .exact_keys(db.as_deref(), r, keys)
                .await
                .map(|k| (t, k)),
            None => None,
        };
        let Some((table, keys)) = exact else {
            return Scope::Tables(std::sync::Arc::new(tables)).into();
        };
        let others = tables.into_iter().filter(|t| *t != table).collect();
        Change {
            scope: Scope::Tables(std::sync::Arc::new(others)),
            rows: std::sync::Arc::new(vec![(table, keys)]),
        }
    }
}

/// `f` with a prepared statement's parameters' integer values (from its
/// execute's cache key, `stmt::int_param`), when its text has as many `?`
/// as the server said it has parameters; a text query's: none.
fn with_params<T>(
    key: Option<&[u8]>,
    nparams: u16,
    toks: &[Token],
    f: impl FnOnce(crate::cache::row_key::Param) -> Option<T>,
) -> Option<T> {
    match key {
        None => f(&|_| None),
        Some(k) => {
            let marks = toks.iter().filter(|(t, _)| t.is_punct(b'?')).count();
            if marks != nparams as usize {
                return None;
            }
            f(&|i| crate::protocol::stmt::int_param(k, nparams, i))
        }
    }
}
