//! Routing a client's statements: replicas for plain autocommit reads
//! when read/write split is on, the writable backend otherwise; waiting
//! for a client's own writes on a replica (consistency = session); query
//! rules; one transparent retry of a read whose replica died.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::{Fail, Session};
use crate::backend::command;
use crate::backend::pool::Route;
use crate::backend::view_calls::Reading;
use crate::config::{Mode, RouteTo};
use crate::protocol::reply::{Expect, Outcome};
use crate::protocol::sql::{Effects, Pin};
use crate::protocol::stmt::{StmtDef, StmtKey};
use crate::routing::read::{self, BeforeRead, Facts, RuleRoute};
use sqlfleet_wire::packet::WireError;

use super::state::ClientState;

/// What a statement sends, made afresh for each backend connection it
/// may run on (see `Session::run_statement`).
pub(super) enum Send<'a> {
    /// A COM_QUERY, sent as it is.
    Text(&'a [u8]),
    /// A prepared statement's execute (or bulk execute).
    Execute(Execute<'a>),
}

/// A prepared execute: the client's packet, its statement (client id and
/// definition), the backend statement it runs as, and whether it opens a
/// cursor.
pub(super) struct Execute<'a> {
    pub cmd: &'a [u8],
    pub cid: u32,
    pub def: &'a StmtDef,
    pub key: &'a StmtKey,
    pub cursor: bool,
}

impl Send<'_> {
    fn is_text(&self) -> bool {
        matches!(self, Send::Text(_))
    }

    /// A lost replica read may run again elsewhere: not an execute whose
    /// long data died with the connection.
    fn may_retry(&self, st: &ClientState) -> bool {
        match self {
            Send::Text(_) => true,
            Send::Execute(e) => !st.has_long_data(e.cid),
        }
    }
}

impl Session {
    /// The writable backend: without read/write split, replicas stand by
    /// (a statement spread over them would write where the user did not
    /// mean, and root's writes pass read_only). One backend is taken as
    /// it is.
    pub(super) fn default_route(&self) -> Route {
        if self.ctx.cfg.backends.len() > 1 {
            Route::Primary
        } else {
            Route::Any
        }
    }

    /// A replica for a plain read of data outside a transaction with
    /// nothing pinning the client, when read/write split is on; a read of
    /// the server itself (`reads_server`, or any read while the default
    /// database is one of the server's own schemas) is the primary's.
    pub(super) fn choose_route(&mut self, read: bool, reads_server: bool) {
        // (The default database is looked at for reads only.)
        let reads_server = reads_server
            || (read
                && self
                    .st
                    .db()
                    .as_deref()
                    .is_some_and(crate::protocol::sql::server_schema));
        self.route = read::route_for(Facts {
            split: self.ctx.cfg.routing.read_write_split,
            read,
            reads_server,
            may_read_elsewhere: self.st.may_read_elsewhere(),
            holds_conn: self.conn.is_some(),
            current: self.route,
            fixed: self.route_fixed,
        });
    }

    /// A backend for the current route; while no backend is writable
    /// (a failover in progress), waits up to the pool's wait timeout.
    pub(super) async fn pick_backend(&mut self) -> Result<usize, Fail> {
        let deadline = Instant::now() + self.ctx.pool.settings().wait_timeout;
        loop {
            if let Some(b) = self.ctx.pool.pick(self.route) {
                return Ok(b);
            }
            if let Some(addrs) = self.ctx.pool.several_primaries() {
                // Not a moment to wait out: refused at once, and said why.
                return Err(Fail::Err(
                    1290,
                    "HY000",
                    format!(
                        "sqlfleet relay: several backends are writable ({}); writes on more than one \
                         primary would diverge them, so the relay sends them nowhere: set read_only \
                         on all but one, or [routing] multi_primary = true if they share writes by design",
                        addrs.join(", ")
                    ),
                ));
            }
            if Instant::now() >= deadline {
                let why = if self.ctx.pool.is_galera() {
                    "no Galera node may take traffic (none is Synced in the Primary component; the relay's status page says why for each)"
                } else {
                    "the primary is down and no replica has been promoted"
                };
                return Err(Fail::Err(
                    crate::backend::pool::UNREACHABLE_CODE,
                    "HY000",
                    format!("sqlfleet relay: no writable backend ({why})"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The refusal of rule `i` when it rejects (its hit counted).
    fn rule_rejects(rules: &crate::routing::rules::RuleSet, i: usize) -> Result<(), Fail> {
        let r = &rules.rules[i];
        match &r.reject {
            Some(msg) => {
                rules.hits[i].fetch_add(1, Relaxed);
                Err(Fail::Err(
                    1227,
                    "42000",
                    format!("sqlfleet relay: rejected by rule '{}': {msg}", r.name),
                ))
            }
            None => Ok(()),
        }
    }

    /// A prepare the first matching rule rejects is refused (the client
    /// learns it before it executes); the rule's other actions apply at
    /// each execute ([`Self::apply_rules`]).
    pub(super) fn rules_refuse_prepare(
        &self,
        rules: &crate::routing::rules::RuleSet,
        sql: &[u8],
        digest: &str,
    ) -> Result<(), Fail> {
        match rules.first_match(&self.user, self.st.db().as_deref(), sql, digest) {
            Some(i) => Self::rule_rejects(rules, i),
            None => Ok(()),
        }
    }

    /// Applies the first matching query rule: reject, route, or pin. A
    /// text statement matches in the session's database, a prepared one's
    /// execute in the one it was prepared in (`schema`), where it runs.
    pub(super) fn apply_rules(
        &mut self,
        rules: &crate::routing::rules::RuleSet,
        sql: &[u8],
        digest: &str,
        schema: Option<&str>,
    ) -> Result<(), Fail> {
        if rules.rules.is_empty() {
            return Ok(());
        }
        if let Some(i) = rules.first_match(&self.user, schema, sql, digest) {
            let r = &rules.rules[i];
            if r.reject.is_some() {
                return Self::rule_rejects(rules, i);
            }
            rules.hits[i].fetch_add(1, Relaxed);
            if !r.multiplex {
                self.pin(Pin::Rule);
            }
            let to = match (r.route, &r.group) {
                (Some(RouteTo::Primary), _) => Some(RuleRoute::Primary),
                (Some(RouteTo::Replica), None) => Some(RuleRoute::Replica),
                (Some(RouteTo::Replica), Some(g)) => Some(RuleRoute::Group(
                    self.ctx.pool.group_names().iter().position(|n| n == g),
                )),
                (None, _) => None,
            };
            let split = self.ctx.cfg.routing.read_write_split;
            let held = self.conn.is_some();
            if let Some(route) =
                to.and_then(|to| read::rule_route(split, to, held, !self.st.may_read_elsewhere()))
            {
                self.route = route;
                // Keep choose_route from changing it.
                self.route_fixed = true;
            }
            return Ok(());
        }
        Ok(())
    }

    /// The one place a client's statement goes to a backend: with the
    /// current route, a read on a replica first waits for the client's own
    /// last write; a read whose replica died or stopped answering before
    /// any reply (or during that wait), or refused it as a server that
    /// will not serve now, is retried once elsewhere (not an execute with
    /// long data, which died with its connection). Text queries and
    /// prepared executes alike ([`Send`]).
    pub(super) async fn run_statement(&mut self, send: Send<'_>) -> Result<Outcome, Fail> {
        // One await site (a loop, not two calls): the future holds one
        // try's state, not two.
        let mut retried = false;
        loop {
            match self.send_once(&send).await {
                // (Never a streamed statement: only its head is left here.)
                Err(Fail::Lost(why))
                    if !retried
                        && self.route.is_replica()
                        && send.may_retry(&self.st)
                        && self.streamed_seq.is_none() =>
                {
                    retried = true;
                    self.replica_died(&why);
                }
                r => return r,
            }
        }
    }

    /// One try of [`run_statement`](Self::run_statement) on the
    /// connection the route leases.
    async fn send_once(&mut self, send: &Send<'_>) -> Result<Outcome, Fail> {
        self.before_replica_read(send.is_text()).await?;
        self.restore_found_rows().await?;
        // A refusal of the replica's (not Synced, shutting down) is held
        // back for the retry.
        self.hold_refusal = self.route.is_replica();
        match *send {
            Send::Text(cmd) => {
                self.forward(cmd, Expect::Results { cursor: false }, None)
                    .await
            }
            Send::Execute(ref e) => {
                let out = self.execute_packet(e).await?;
                self.forward(&out, Expect::Results { cursor: e.cursor }, None)
                    .await
            }
        }
    }

    /// For a read going to a replica: its connection, caught up with what
    /// the consistency setting asks for. `text`: the read is a COM_QUERY
    /// (on a Galera node it may carry its own causality wait).
    pub(super) async fn before_replica_read(&mut self, text: bool) -> Result<(), Fail> {
        self.sync_wait_next = false;
        if self.route.is_replica() {
            self.ensure_conn().await?;
            self.wait_for_own_write(text).await?;
        }
        Ok(())
    }

    /// The replica under a read died before replying: mark it down so
    /// the retry goes elsewhere.
    pub(super) fn replica_died(&mut self, why: &str) {
        if let Some(b) = self.backend {
            self.ctx.pool.health.mark_down(b, why);
        }
        self.ctx.metrics.read_retries.fetch_add(1, Relaxed);
    }

    /// The primary's binlog position now (consistency = global).
    async fn primary_position(&mut self) -> Result<Option<String>, Fail> {
        let Some(p) = self.ctx.pool.pick(Route::Primary) else {
            return Ok(None);
        };
        let mut c = self.ctx.pool.lease(p, self.want()).await?;
        // A Galera writer: the last GTID it has seen committed anywhere.
        let q = if self.ctx.pool.health.get(p).galera.is_some() {
            "SELECT WSREP_LAST_SEEN_GTID()"
        } else {
            "SELECT @@gtid_binlog_pos"
        };
        match command::query_value(&mut c, q).await {
            Ok(v) => {
                self.ctx.pool.put(c);
                Ok(v.filter(|v| !v.is_empty()))
            }
            Err(e) => {
                self.ctx.pool.discard(c);
                Err(Fail::Lost(e.to_string()))
            }
        }
    }

    /// Read-your-writes on the replica holding the client's connection
    /// (`routing::read::before_read` decides): with consistency = session
    /// it must have applied the client's last write, with global
    /// everything the primary had committed when the read arrived. An
    /// async replica waits (`MASTER_GTID_WAIT`) up to `consistency_wait`,
    /// else the read goes to the primary. A Galera node makes the read
    /// itself wait: it is sent as `SET STATEMENT wsrep_sync_wait = 1 FOR
    /// <read>`, and the node applies every write set the cluster committed
    /// before it (waiting for the write's GTID with
    /// WSREP_SYNC_WAIT_UPTO_GTID was measured not to be enough on MariaDB
    /// 10.11 / galera-4: reads right after it missed the write in 4 of
    /// 22,244 pairs); a read that cannot carry the setting (a prepared
    /// statement's execute) goes to the writer.
    async fn wait_for_own_write(&mut self, text: bool) -> Result<(), Fail> {
        let Some(b) = self.backend else {
            return Ok(());
        };
        let galera = self.ctx.pool.health.get(b).galera.is_some();
        let step = read::before_read(
            self.ctx.cfg.routing.consistency,
            galera,
            text,
            self.own_write_unknown,
            self.last_write_gtid.as_deref(),
        );
        let gtid = match step {
            BeforeRead::Nothing => return Ok(()),
            BeforeRead::CausalRead => {
                self.sync_wait_next = true;
                self.ctx.metrics.consistency_waits.fetch_add(1, Relaxed);
                return Ok(());
            }
            BeforeRead::OnPrimary => return self.read_on_primary().await,
            BeforeRead::WaitFor(g) => g,
            BeforeRead::WaitForPrimary => match self.primary_position().await? {
                Some(g) => g,
                None => return Ok(()),
            },
        };
        let st = self.ctx.pool.health.get(b);
        if !read::must_wait(st.read_only, &st.gtid, &gtid) {
            return Ok(());
        }
        let wait = self.ctx.cfg.routing.consistency_wait.as_secs_f64();
        let Some(c) = self.conn.as_mut() else {
            return Ok(());
        };
        let gtid = gtid.replace('\'', "");
        let q = format!("SELECT 1 FROM DUAL WHERE MASTER_GTID_WAIT('{gtid}', {wait:.3}) = 0");
        let mut p = vec![0x03];
        p.extend_from_slice(q.as_bytes());
        let health = self.ctx.pool.health.clone();
        let waited = health.unless_gone(
            b,
            command::command(c, &p, Expect::Results { cursor: false }),
        );
        let Some(waited) = waited.await else {
            if let Some(c) = self.conn.take() {
                self.ctx.pool.discard(c);
            }
            return Err(Fail::Lost(super::lease::found_down(
                &self.ctx.cfg.backends,
                &self.ctx.pool.health,
                b,
            )));
        };
        let o = waited.map_err(|e| Fail::Lost(e.to_string()))?;
        if o.error.is_none() && o.rows == 1 {
            self.ctx.metrics.consistency_waits.fetch_add(1, Relaxed);
            return Ok(());
        }
        // Too far behind: read from the primary instead.
        self.read_on_primary().await
    }

    /// The read goes to the primary (the Galera writer) instead of a
    /// replica; counted as a consistency fallback.
    async fn read_on_primary(&mut self) -> Result<(), Fail> {
        self.ctx.metrics.consistency_fallbacks.fetch_add(1, Relaxed);
        if let Some(c) = self.conn.take() {
            self.ctx.pool.put(c);
        }
        self.route = Route::Primary;
        self.ensure_conn().await.map(drop)
    }

    /// After a reply that showed the connection's variable tracker lost
    /// count (`backend/tracker.rs`): the tracker is started afresh before
    /// the connection serves again, and a statement that may have
    /// committed a write outside a transaction has its GTID asked of the
    /// server (the tracker's report of it was not taken): a GTID the
    /// connection did not have before is the client's write.
    async fn mend_tracking(&mut self, read: bool) -> Result<(), Fail> {
        let Some(c) = self.conn.as_mut().filter(|c| c.tracking_lost()) else {
            return Ok(());
        };
        let lost = |e: WireError| Fail::Lost(format!("re-arming session tracking: {e}"));
        c.mend_tracking().await.map_err(lost)?;
        if read || self.st.in_trans() {
            return Ok(());
        }
        let asked = command::query_value(c, "SELECT @@last_gtid")
            .await
            .map_err(lost)?
            .unwrap_or_default();
        if !asked.is_empty() && c.last_gtid() != Some(asked.as_str()) {
            self.st.note_own_gtid(asked.clone());
        }
        c.note_last_gtid(&asked);
        Ok(())
    }

    /// consistency = session, with read/write split: after a committed
    /// write, remember its GTID — the one the server's session tracking
    /// reported with the write's OK (`ClientState::own_gtid`), else (a
    /// Galera node's, or no tracking) a query on the client's connection,
    /// so only where replicas serve reads; without a split nothing is
    /// asked.
    pub(super) async fn after_write(&mut self, read: bool, o: &Outcome) -> Result<(), Fail> {
        self.mend_tracking(read).await?;
        let routing = &self.ctx.cfg.routing;
        if !read::remember_write(
            routing.read_write_split,
            routing.consistency,
            read,
            o.error.is_some(),
            self.st.in_trans(),
            self.route.is_replica(),
        ) {
            return Ok(());
        }
        let Some(c) = self.conn.as_mut() else {
            return Ok(());
        };
        let galera = self
            .backend
            .is_some_and(|b| self.ctx.pool.health.get(b).galera.is_some());
        if !galera && c.tracking() {
            // (A write that logged nothing leaves the client's previous
            // one, which is all it has to wait for.)
            self.own_write_unknown = false;
            if let Some(g) = self.st.own_gtid().filter(|g| !g.is_empty()) {
                self.last_write_gtid = Some(g.to_string());
            }
            return Ok(());
        }
        let q = if galera {
            "SELECT WSREP_LAST_WRITTEN_GTID()"
        } else {
            "SELECT @@last_gtid"
        };
        match command::query_value(c, q).await {
            Ok(v) => {
                self.own_write_unknown = false;
                if let Some(g) = v.filter(|g| !g.is_empty()) {
                    self.last_write_gtid = Some(g);
                }
            }
            Err(_) => {
                // The write committed (its reply is the client's); the
                // connection died before its position was read. Nothing
                // of the client's was on it: it goes, and reads go to
                // the primary until a later write's position is known.
                if let Some(c) = self.conn.take() {
                    self.ctx.pool.discard(c);
                }
                self.own_write_unknown = true;
            }
        }
        Ok(())
    }

    /// A write to a table whose column default or trigger may advance a
    /// sequence or take a user lock (`backend/write_effects.rs`) keeps the
    /// connection: the server reports neither. Only transaction mode
    /// shares connections between statements; a session-mode client's
    /// connection is reset before another client gets it.
    pub(super) async fn pin_unseen_write_effects(&mut self, fx: &Effects) {
        if self.st.mode() != Mode::Transaction
            || fx.writes.is_empty()
            || self.st.pins().contains(&Pin::WriteEffects)
        {
            return;
        }
        for w in &fx.writes {
            // An unqualified name is in the session's database, or in the
            // one a USE in the same text makes current.
            let dbs: Vec<&String> = match &w.db {
                Some(d) => vec![d],
                None => self.st.db().iter().chain(fx.use_db.iter()).collect(),
            };
            for db in dbs {
                if self
                    .ctx
                    .write_effects
                    .hidden(db, &w.name, &self.ctx.view_calls)
                    .await
                {
                    self.pin(Pin::WriteEffects);
                    return;
                }
            }
        }
    }

    /// Chooses the statement's route and takes its pins, before anything
    /// can release the connection: those its text names, a stored
    /// function's when it reads a view that calls one, and a write's whose
    /// table acts unseen. `toks` are the statement's tokens; `cursor`: a
    /// prepared execute that opens a cursor, which holds its connection
    /// while it is open (on the primary: on a replica the client's next
    /// writes would follow it there).
    pub(super) async fn route_and_pin(
        &mut self,
        sql: &[u8],
        toks: &[(sqlfleet_dump::lex::Tok, std::ops::Range<usize>)],
        fx: &Effects,
        cursor: bool,
    ) -> Result<(), Fail> {
        let through_views = self.view_reading(sql, toks, fx).await;
        let via_view = through_views == Reading::Unseen;
        let read = !via_view && !cursor && fx.read && fx.pins.is_empty() && fx.pin_next.is_none();
        self.refuse_writes_on_a_replica(read, fx)?;
        self.choose_route(read, fx.reads_server || through_views == Reading::Server);
        for p in self.st.take_statement_pins(fx) {
            self.ctx.metrics.pin(p);
        }
        if via_view {
            self.pin(Pin::StoredFunction);
        }
        self.pin_unseen_write_effects(fx).await;
        Ok(())
    }

    /// How the statement will leave LAST_INSERT_ID() where its OK carries
    /// an id (`protocol/sql/insert_id.rs`), judged with the catalog's
    /// AUTO_INCREMENT column of the table an INSERT writes (the lookup
    /// `pin_unseen_write_effects` made, kept for a while). Only transaction
    /// mode carries the id between connections; a connection kept for the
    /// whole session holds it, and the OK's id is kept as before.
    /// `params`: an execute's parameters (`stmt::params_key`) and count.
    pub(super) async fn judge_insert_id(&mut self, fx: &Effects, params: Option<(&[u8], u16)>) {
        use crate::protocol::sql::insert_id::{self, InsertId};
        if self.st.mode() != Mode::Transaction {
            self.st.expect_insert_id(InsertId::Sets);
            return;
        }
        // (Most statements are no INSERT: judged without the catalog or
        // the session's sql_mode.)
        if fx.insert.is_none() {
            let param = |_: usize| None;
            let rule = insert_id::after_ok(None, fx.sets_insert_id, None, None, &param);
            self.st.expect_insert_id(rule);
            return;
        }
        let mut auto = None;
        if let [w] = fx.writes.as_slice() {
            let db = w.db.as_ref().or(self.st.db().as_ref()).cloned();
            if let Some(db) = db {
                auto = self
                    .ctx
                    .write_effects
                    .auto_col(&db, &w.name, &self.ctx.view_calls)
                    .await;
            }
        }
        let login = self
            .login_sql_mode
            .clone()
            .or_else(|| self.ctx.pool.health.sql_mode());
        let zero = super::dialect::zero_is_value(self.st.settings(), login.as_deref());
        let param = |k: usize| params.and_then(|(p, n)| crate::protocol::stmt::int_param(p, n, k));
        self.st.expect_insert_id(insert_id::after_ok(
            fx.insert.as_ref(),
            fx.sets_insert_id,
            auto.as_ref(),
            zero,
            &param,
        ));
    }

    /// A client holding a replica's connection got there by a read that
    /// left something open the relay did not expect (a transaction: that
    /// replica's sessions start with autocommit off, its @@global.autocommit
    /// or init_connect unlike the primary's). Only reads and the COMMIT or
    /// ROLLBACK that ends it run there: anything else could write on the
    /// replica (root's writes pass read_only) and is refused, never sent.
    fn refuse_writes_on_a_replica(&self, read: bool, fx: &Effects) -> Result<(), Fail> {
        let Some(b) = self.backend.filter(|_| self.conn.is_some()) else {
            return Ok(());
        };
        if read::runs_on_held(
            self.leased_on_replica,
            read,
            fx.ends_transaction,
            fx.statements,
        ) || self.ctx.pool.health.role(b) != "replica"
        {
            return Ok(());
        }
        Err(Fail::Err(
            1792,
            "25006",
            format!(
                "sqlfleet relay: this session is held on the replica {} by what a read opened \
                 there (a transaction: that server's sessions may start with autocommit off, \
                 unlike the primary's, by its @@global.autocommit or init_connect); only reads, \
                 COMMIT and ROLLBACK may run there until it ends. End it (COMMIT), and give \
                 every backend the same autocommit",
                self.ctx.cfg.backends[b].addr()
            ),
        ))
    }

    /// In transaction mode, what reading the views the statement names
    /// does (`backend/view_calls.rs`): one that calls a stored function
    /// makes the statement the call itself (pinned, never a replica's
    /// read), one that reads the server's own state makes it the
    /// primary's. The session keeps its look at the views while it holds
    /// (one atomic read and a clock read per statement); a text that USEs
    /// another database looks for that statement alone.
    pub(super) async fn view_reading(
        &mut self,
        sql: &[u8],
        toks: &[(sqlfleet_dump::lex::Tok, std::ops::Range<usize>)],
        fx: &Effects,
    ) -> Reading {
        self.views_named(sql, toks, fx, false).await
    }

    /// Whether the statement names any view at all (the result cache's
    /// question: a view reads tables its name does not say).
    pub(super) async fn names_a_view(
        &mut self,
        sql: &[u8],
        toks: &[(sqlfleet_dump::lex::Tok, std::ops::Range<usize>)],
        fx: &Effects,
    ) -> bool {
        self.views_named(sql, toks, fx, true).await != Reading::Plain
    }

    /// [`view_reading`](Self::view_reading), or with `any` every view
    /// counts as [`Reading::Unseen`].
    async fn views_named(
        &mut self,
        sql: &[u8],
        toks: &[(sqlfleet_dump::lex::Tok, std::ops::Range<usize>)],
        fx: &Effects,
        any: bool,
    ) -> Reading {
        if self.st.mode() != Mode::Transaction || fx.calls_stored {
            return Reading::Plain;
        }
        let views = &self.ctx.view_calls;
        let db = self.st.db().as_deref();
        let mut dbs = [""; 2];
        let mut n = 0;
        for d in db.iter().chain(fx.use_db.as_deref().iter()) {
            dbs[n] = d;
            n += 1;
        }
        let dbs = &dbs[..n];
        let now = std::time::Instant::now();
        let held = self
            .view_look
            .as_ref()
            .is_some_and(|l| views.still(l, db, now));
        if !held {
            let look = views.look(db).await;
            self.view_look = Some(look);
        }
        match self.view_look.as_ref() {
            Some(look) => views.names_where(look, sql, toks, dbs, any).await,
            None => Reading::Unseen,
        }
    }
}
