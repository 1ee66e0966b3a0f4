//! The result cache: opt-in by `[[cache_rules]]`, for SELECTs that
//! [`decide::cacheable`] finds exact to give again. An entry is the reply
//! as a client of that key received it (bytes, sequence ids and all),
//! kept under its key — the relay account, the database, the session's
//! settings, the client's capabilities and collation, the text — for at
//! most its rule's `ttl`, in at most `[cache] max_bytes` over all
//! entries (the least recently used go first).
//!
//! Honest for writes through the relay: every statement that is not a
//! plain read (and every prepared execute that is not) invalidates before
//! it is sent and again after its reply, and while any such statement is
//! in flight no entry is stored; an entry is stored only if no
//! invalidation of what it reads came between its read's start and its
//! store. So once a write's OK (or its COMMIT's) has reached its client,
//! no client is given a result read before it. What an invalidation
//! covers is a [`Scope`]: the tables an autocommit INSERT, REPLACE, UPDATE
//! or DELETE changes when the catalog says all of them
//! (`backend/write_scope.rs`: the named tables and, through triggers,
//! theirs; none behind a view, a routine or a foreign key's action),
//! else every entry; an autocommit UPDATE or DELETE of one table by an
//! integer key it keeps, only the rows of those values (a [`Change`]).
//! An entry reads the tables its text names (every
//! identifier in it, by name, in any database), or everything when it
//! names a view; a SELECT of one table by such a key, only those rows
//! (`cache/row_key.rs`, `cache/marks.rs`). Writes made elsewhere (directly on the server, another
//! relay) are read from the primary's binary log (`cache/follower.rs`);
//! entries are used only while it is caught up within `max_lag`
//! (`cache/gate.rs`), else the cache is bypassed; with `[cache] binlog =
//! false`, such writes are seen when the entry's `ttl` ends.

pub mod caught_up;
pub mod decide;
pub mod flying;
pub mod follow;
pub mod follower;
pub mod gate;
pub mod marks;
pub mod pending;
pub mod row_change;
pub mod row_key;

use std::collections::{BTreeMap, BTreeSet};

/// The maps keyed by what clients send (see Cargo.toml's foldhash).
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use sqlfleet_dump::lex::Tok;

use crate::protocol::sql::{Analysis, Setting};
use flying::Flying;
use marks::{Keyed, Marks};
use row_key::RowKey;

pub use crate::routing::cache_rules::{CacheRule, CacheSettings, FollowSettings};

/// What an entry is kept under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// The relay account (a user never reads another's entry).
    pub user: Arc<str>,
    pub db: Option<String>,
    pub settings: Vec<Setting>,
    /// The client's capabilities and collation (the reply's form).
    pub caps: u32,
    pub ext: u32,
    pub collation: u8,
    pub sql: Vec<u8>,
    /// A prepared statement's execute: its parameters' types and values
    /// (`stmt::params_key`; the reply is binary rows). `None`: a text query.
    pub params: Option<Vec<u8>>,
    /// How many globals and grants clients had changed through the relay
    /// when the entry was read (`Pool::epoch`, `Pool::grants_epoch`): after
    /// a `SET GLOBAL` a new session's defaults differ, after a REVOKE the
    /// account may not read what it read, so an older entry is not this
    /// client's answer (one computed under the old
    /// `div_precision_increment` was served).
    pub epochs: (u64, u64),
}

/// What one heap allocation costs besides the bytes asked for: the
/// allocator's header and rounding (glibc's, on 64-bit).
const ALLOC: usize = 16;

impl Key {
    /// Its heap bytes (the account's name is shared by all its keys).
    fn bytes(&self) -> usize {
        let settings = if self.settings.capacity() == 0 {
            0
        } else {
            self.settings.capacity() * std::mem::size_of::<Setting>()
                + ALLOC
                + self
                    .settings
                    .iter()
                    .map(|s| s.name.capacity() + s.text.capacity() + 2 * ALLOC)
                    .sum::<usize>()
        };
        self.sql.capacity()
            + ALLOC
            + self.db.as_ref().map_or(0, |d| d.capacity() + ALLOC)
            + self.params.as_ref().map_or(0, |p| p.capacity() + ALLOC)
            + settings
    }
}

/// What an entry holds in memory, all of it: the reply, the key (kept
/// once, shared by the map and the recency order), what it reads, and its
/// share of the map's and the order's tables. `bench/relay_cache_memory.sh`
/// found the relay at 328 MiB with a 64 MiB cache when only the reply and
/// the key's text were counted; `tests/cache_memory.rs` holds this to the
/// allocator's own count.
fn footprint(key: &Key, hit: &Hit, reads: &Scope) -> usize {
    use std::mem::size_of;
    let word = size_of::<usize>();
    let reply = hit.reply.capacity() + ALLOC + 2 * word + size_of::<Vec<u8>>() + ALLOC;
    let key_box = 2 * word + size_of::<Key>() + ALLOC + key.bytes();
    let reads = match reads {
        Scope::Whole => 0,
        // (an Arc'd set per entry: its box, one B-tree leaf, the names)
        Scope::Tables(t) => {
            2 * word
                + size_of::<BTreeSet<String>>()
                + ALLOC
                + BTREE_LEAF
                + t.iter().map(|n| n.capacity() + ALLOC).sum::<usize>()
        }
    };
    // The map's slot (its table at most half empty after it grows) and
    // the order's (B-tree leaves about half full when appended to).
    let map = 2 * (size_of::<Arc<Key>>() + size_of::<Entry>() + 1);
    let order = 2 * (size_of::<u64>() + size_of::<Arc<Key>>()) + 8;
    reply + key_box + reads + map + order
}

/// A B-tree leaf of eleven short strings with its header and allocation.
const BTREE_LEAF: usize = 11 * 24 + 16 + ALLOC;

/// What a write changes, or what a cached read reads: some tables
/// (names in ASCII lower case, `backend::write_scope::folded`, matched in
/// every database) or anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Whole,
    Tables(Arc<BTreeSet<String>>),
}

/// What a write made stale: everything that reads what `scope` names,
/// and what reads the rows `rows` names (by table, folded: `marks.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub scope: Scope,
    pub rows: Arc<Vec<(String, row_change::Keys)>>,
}

impl Change {
    pub fn whole() -> Change {
        Scope::Whole.into()
    }

    /// The same, with each table whose rows it names stale whole.
    pub fn tables_only(&self) -> Scope {
        match &self.scope {
            Scope::Tables(t) if !self.rows.is_empty() => {
                let mut all = (**t).clone();
                all.extend(self.rows.iter().map(|(n, _)| n.clone()));
                Scope::Tables(Arc::new(all))
            }
            s => s.clone(),
        }
    }
}

impl From<Scope> for Change {
    fn from(scope: Scope) -> Change {
        Change {
            scope,
            rows: Default::default(),
        }
    }
}

/// A cached reply and what it left of the session.
#[derive(Debug, Clone)]
pub struct Hit {
    pub reply: Arc<Vec<u8>>,
    /// Its rows.
    pub rows: u64,
    /// How it leaves FOUND_ROWS(), as the server did at the miss: its
    /// rows (`Some(false)`), the count before it (`Some(true)`: a
    /// grouping whose WHERE the optimizer found impossible,
    /// `sql/found_rows.rs`), or not told apart there (`None`: the count
    /// before it was its rows too; answered only where it is again).
    /// What makes a WHERE impossible — constants, the rows a key names —
    /// changes only by a write that makes the entry stale.
    pub keeps: Option<bool>,
}

impl Hit {
    /// [`Hit::keeps`] of a grouping whose count only the server knows
    /// (`sql/found_rows.rs`), from the client's count before it and the
    /// server's after it (each where known) and its `rows`; `None`: not
    /// told, the reply is not kept.
    pub fn keeps_from(rows: u64, before: Option<u64>, after: Option<u64>) -> Option<Option<bool>> {
        let (b, a) = (before?, after?);
        if b == rows && a == b {
            Some(None)
        } else if a == rows {
            Some(Some(false))
        } else if a == b {
            Some(Some(true))
        } else {
            None
        }
    }
}

struct Entry {
    hit: Hit,
    /// The invalidation count when its read started.
    since: u64,
    reads: Scope,
    /// The rows it reads, when only those of some values of a column.
    keyed: Option<Keyed>,
    expires: Instant,
    /// When it was last read (or stored).
    tick: u64,
    /// Where it sits in the recency order: its tick when it was put there,
    /// at or before `tick` (see [`Store::evict`]).
    pos: u64,
    bytes: usize,
    /// It counts in `Store::by_text` (its text's analysis was kept).
    analyzed: bool,
}

#[derive(Default)]
struct Store {
    map: HashMap<Arc<Key>, Entry>,
    /// Least recently used first (the map's keys, shared), by each
    /// entry's `pos`: a hit only moves its entry's `tick`, and eviction
    /// puts an entry read since its `pos` back in its place.
    lru: BTreeMap<u64, Arc<Key>>,
    tick: u64,
    bytes: usize,
    marks: Marks,
    /// The writes through the relay in flight.
    flying: Flying,
    /// The analysis of each text some entries hold, and how many do: a
    /// statement whose text is here is not lexed again (`Cache::analysis`).
    by_text: HashMap<Arc<[u8]>, (Arc<Analysis>, usize)>,
}

impl Store {
    /// Drops least recently read entries until the bytes fit `max`. The
    /// order's first entry is the least recently read one unless it was
    /// read after it was put there: then it moves to its read's place and
    /// the next is looked at — the same order as moving it on every read
    /// (each entry's place is at or before its last read, and ticks are
    /// unique), without a move per hit.
    fn evict(&mut self, max: usize) {
        while self.bytes > max {
            let Some((pos, oldest)) = self.lru.pop_first() else {
                break;
            };
            match self.map.get_mut(&oldest) {
                Some(e) if e.tick > pos => {
                    e.pos = e.tick;
                    self.lru.insert(e.tick, oldest);
                }
                Some(_) => {
                    if let Some(e) = self.map.remove(&oldest) {
                        self.forget(&oldest, &e);
                    }
                }
                None => {}
            }
        }
    }

    fn remove(&mut self, key: &Key) {
        if let Some(e) = self.map.remove(key) {
            self.lru.remove(&e.pos);
            self.forget(key, &e);
        }
    }

    /// What a removed entry counted for.
    fn forget(&mut self, key: &Key, e: &Entry) {
        self.bytes -= e.bytes;
        if e.analyzed {
            if let Some((_, n)) = self.by_text.get_mut(&key.sql[..]) {
                *n -= 1;
                if *n == 0 {
                    self.by_text.remove(&key.sql[..]);
                }
            }
        }
    }
}

/// Per rule: what happened.
#[derive(Debug, Default)]
pub struct RuleCounts {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub stores: AtomicU64,
    /// Misses whose reply was not kept (an invalidation came during the
    /// read, a write was in flight, warnings, too big).
    pub not_stored: AtomicU64,
    /// Misses that waited for the same key's read already in flight
    /// (coalesced) instead of asking the server themselves.
    pub waited: AtomicU64,
}

/// A metric family of the per-rule counts: name, help, which count.
type Family = (&'static str, &'static str, fn(&RuleCounts) -> &AtomicU64);

/// The cache every session shares.
pub struct Cache {
    settings: RwLock<Arc<CacheSettings>>,
    counts: RwLock<Arc<Vec<RuleCounts>>>,
    store: Mutex<Store>,
    /// Bumped by every invalidation.
    version: AtomicU64,
    /// Invalidations of everything, and of some tables only.
    invalidations: AtomicU64,
    table_invalidations: AtomicU64,
    /// Changes of rows of one table (a row event of the binary log, or a
    /// write through the relay of some rows by their key).
    row_invalidations: AtomicU64,
    /// Any rule configured (read per statement: one atomic load).
    active: AtomicBool,
    /// Keys whose miss is being read now: later misses of the same key
    /// wait for it (bounded) instead of asking the server too.
    reading: Arc<Reading>,
    /// Open while the binlog follower (if one runs) is caught up.
    pub gate: gate::Gate,
}

type Reading = Mutex<HashMap<Key, Arc<tokio::sync::Notify>>>;

/// The read of a key in flight, led by one miss: dropped when its reply
/// was stored (or not), waking those that wait for it.
pub struct Leading {
    reading: Arc<Reading>,
    key: Key,
}

impl Drop for Leading {
    fn drop(&mut self) {
        let mut r = self.reading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = r.remove(&self.key) {
            n.notify_waiters();
        }
    }
}

/// What a miss does.
pub enum Turn {
    /// Read it from the server (and store it).
    Lead(Leading),
    /// Another read of the key is in flight: wait for it, then look again.
    Wait(Arc<tokio::sync::Notify>),
}

/// A write in flight: made by [`Cache::write_begins`], it invalidates
/// what it changes again when dropped (after its reply, or if the
/// session stops), and ends its flight (`cache/flying.rs`).
pub struct Write<'a>(&'a Cache, u64, Change);

impl Drop for Write<'_> {
    fn drop(&mut self) {
        let mut st = self.0.store.lock().unwrap_or_else(|e| e.into_inner());
        self.0.invalidate_in(&mut st, &self.2.scope, &self.2.rows);
        st.flying.end(self.1);
    }
}

impl Cache {
    pub fn new(s: CacheSettings) -> Cache {
        let counts = s.rules.iter().map(|_| RuleCounts::default()).collect();
        let active = !s.rules.is_empty();
        Cache {
            settings: RwLock::new(Arc::new(s)),
            counts: RwLock::new(Arc::new(counts)),
            store: Mutex::new(Store::default()),
            version: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
            table_invalidations: AtomicU64::new(0),
            row_invalidations: AtomicU64::new(0),
            active: AtomicBool::new(active),
            reading: Arc::new(Mutex::new(HashMap::default())),
            gate: gate::Gate::default(),
        }
    }

    /// New rules and size (SIGHUP): every entry goes.
    pub fn reconfigure(&self, s: CacheSettings) {
        let counts = s.rules.iter().map(|_| RuleCounts::default()).collect();
        *self.counts.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(counts);
        self.active.store(!s.rules.is_empty(), Relaxed);
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(s);
        let mut st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        // (the writes in flight fly on)
        let flying = std::mem::take(&mut st.flying);
        *st = Store::default();
        st.flying = flying;
        // (and a read begun before is not kept: the marks start from
        // "everything is stale now", not from nothing)
        let now = self.version.fetch_add(1, Relaxed) + 1;
        st.marks.whole(now);
        self.invalidations.fetch_add(1, Relaxed);
    }

    fn settings(&self) -> Arc<CacheSettings> {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn counts(&self) -> Arc<Vec<RuleCounts>> {
        self.counts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether any rule is configured (else nothing here costs anything).
    pub fn active(&self) -> bool {
        self.active.load(Relaxed)
    }

    /// The first rule that takes this statement: its index.
    pub fn rule_for(
        &self,
        user: &str,
        db: Option<&str>,
        sql: &[u8],
        digest: Option<&str>,
        toks: &[(Tok, std::ops::Range<usize>)],
    ) -> Option<usize> {
        let s = self.settings();
        s.rules.iter().position(|r| {
            r.user.as_deref().is_none_or(|u| u == user)
                && r.digest.as_deref().is_none_or(|d| Some(d) == digest)
                && r.regex
                    .as_ref()
                    .is_none_or(|x| crate::protocol::sql::regex_matches(x, sql))
                && (r.tables.is_empty() || names_a_table(&r.tables, db, sql, toks))
        })
    }

    /// Whether a rule matches statements by digest (else none is needed).
    pub fn matches_digests(&self) -> bool {
        self.settings().rules.iter().any(|r| r.digest.is_some())
    }

    /// The largest reply rule `rule` keeps.
    pub fn max_entry_bytes(&self, rule: usize) -> usize {
        self.settings()
            .rules
            .get(rule)
            .map_or(0, |r| r.max_entry_bytes)
    }

    /// The analysis of `sql` when an entry of that text holds one.
    pub fn analysis(&self, sql: &[u8]) -> Option<Arc<Analysis>> {
        let st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        st.by_text.get(sql).map(|(a, _)| a.clone())
    }

    /// A fresh entry for `key` (counted as a hit or a miss of `rule`).
    pub fn get(&self, rule: usize, key: &Key) -> Option<Hit> {
        let now = Instant::now();
        let hit = {
            let mut guard = self.store.lock().unwrap_or_else(|e| e.into_inner());
            let st = &mut *guard;
            // One lookup of the key (hashed and compared once).
            match st.map.get_mut(key) {
                Some(e)
                    if e.expires > now && st.marks.fresh(e.since, &e.reads, e.keyed.as_ref()) =>
                {
                    // (Its place in the recency order moves when an
                    // eviction reaches it: `Store::evict`.)
                    st.tick += 1;
                    e.tick = st.tick;
                    Some(e.hit.clone())
                }
                Some(_) => {
                    st.remove(key);
                    None
                }
                None => None,
            }
        };
        if let Some(c) = self.counts().get(rule) {
            match hit {
                Some(_) => c.hits.fetch_add(1, Relaxed),
                None => c.misses.fetch_add(1, Relaxed),
            };
        }
        hit
    }

    /// Whether this miss reads its key from the server or waits for the
    /// read of it already in flight.
    pub fn turn(&self, key: &Key) -> Turn {
        let mut r = self.reading.lock().unwrap_or_else(|e| e.into_inner());
        match r.get(key) {
            Some(n) => Turn::Wait(n.clone()),
            None => {
                r.insert(key.clone(), Arc::new(tokio::sync::Notify::new()));
                Turn::Lead(Leading {
                    reading: self.reading.clone(),
                    key: key.clone(),
                })
            }
        }
    }

    /// Waits (at most `bound`) for the read of `key` in flight; then the
    /// entry if it was stored. Counted as a wait of `rule`.
    pub async fn wait_for(
        &self,
        rule: usize,
        key: &Key,
        notify: Arc<tokio::sync::Notify>,
        bound: std::time::Duration,
    ) -> Option<Hit> {
        let woken = notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        // The leader may have finished between `turn` and `enable`.
        let still = self
            .reading
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .is_some_and(|n| Arc::ptr_eq(n, &notify));
        if still {
            let _ = tokio::time::timeout(bound, woken).await;
        }
        if let Some(c) = self.counts().get(rule) {
            c.waited.fetch_add(1, Relaxed);
        }
        self.peek(key)
    }

    /// A fresh entry for `key`, not counted.
    fn peek(&self, key: &Key) -> Option<Hit> {
        // (the gate shut while it waited: no entry, as for a new statement)
        if !self.gate.open() {
            return None;
        }
        let st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        st.map
            .get(key)
            .filter(|e| {
                e.expires > Instant::now() && st.marks.fresh(e.since, &e.reads, e.keyed.as_ref())
            })
            .map(|e| e.hit.clone())
    }

    /// Where a miss's read starts: the invalidation count its store is
    /// checked against.
    pub fn version(&self) -> u64 {
        self.version.load(Relaxed)
    }

    /// Keeps a miss's reply (of a read of `reads`) when nothing it reads
    /// was invalidated since its read started (`since`) and no write is in
    /// flight.
    pub fn put(&self, rule: usize, since: u64, key: Key, hit: Hit, reads: Scope) {
        self.put_analyzed(rule, since, key, hit, (reads, None), None)
    }

    /// [`Cache::put`], keeping beside the entry its text's analysis (a
    /// text query's, taken whole): a later statement of that text, in any
    /// session, is not read again ([`Cache::analysis`]).
    pub fn put_analyzed(
        &self,
        rule: usize,
        since: u64,
        key: Key,
        hit: Hit,
        (reads, rows): (Scope, Option<RowKey>),
        analysis: Option<Arc<Analysis>>,
    ) {
        let s = self.settings();
        let counts = self.counts();
        let (Some(r), Some(c)) = (s.rules.get(rule), counts.get(rule)) else {
            return;
        };
        // (The analysis counted whole for each entry of its text, and its
        // text again: a bound from above.)
        let analysis = analysis.filter(|_| key.params.is_none());
        // (keyed only on a read of tables)
        let rows = rows.filter(|_| matches!(reads, Scope::Tables(_)));
        let bytes = footprint(&key, &hit, &reads)
            + rows.as_ref().map_or(0, RowKey::bytes)
            + analysis
                .as_ref()
                .map_or(0, |a| a.bytes() + key.sql.len() + 2 * ALLOC + 48);
        if hit.reply.len() > r.max_entry_bytes || bytes > s.max_bytes {
            c.not_stored.fetch_add(1, Relaxed);
            return;
        }
        let mut st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let flying = st.flying.holds(&reads, rows.as_ref());
        let keyed = rows.map(|r| Keyed {
            col: st.marks.column(&r.table, &r.col),
            table: r.table,
            rows: r.rows,
        });
        // Checked under the store's lock, which an invalidation's clean-up
        // takes too. (The gate: a follower gone blind during the read may
        // have missed a write made elsewhere.)
        if flying || !st.marks.fresh(since, &reads, keyed.as_ref()) || !self.gate.open() {
            c.not_stored.fetch_add(1, Relaxed);
            return;
        }
        st.remove(&key);
        st.tick += 1;
        let tick = st.tick;
        let analyzed = analysis.is_some();
        if let Some(a) = analysis {
            match st.by_text.get_mut(&key.sql[..]) {
                Some((_, n)) => *n += 1,
                None => {
                    st.by_text.insert(Arc::from(&key.sql[..]), (a, 1));
                }
            }
        }
        let key = Arc::new(key);
        st.lru.insert(tick, key.clone());
        st.bytes += bytes;
        st.map.insert(
            key,
            Entry {
                hit,
                since,
                reads,
                keyed,
                expires: Instant::now() + r.ttl,
                tick,
                pos: tick,
                bytes,
                analyzed,
            },
        );
        st.evict(s.max_bytes);
        c.stores.fetch_add(1, Relaxed);
    }

    /// Every entry is stale from now on.
    pub fn invalidate(&self) {
        self.invalidate_scope(&Scope::Whole);
    }

    /// Every entry that reads what `scope` names is stale from now on.
    pub fn invalidate_scope(&self, scope: &Scope) {
        self.invalidate_changes(scope, &[]);
    }

    /// Every entry that reads what `c` changed is stale from now on.
    pub fn invalidate_change(&self, c: &Change) {
        self.invalidate_changes(&c.scope, &c.rows)
    }

    /// Every entry that reads what `scope` names, and every entry that
    /// reads rows `rows` changed (by table, folded: `marks.rs`), is
    /// stale from now on.
    pub fn invalidate_changes(&self, scope: &Scope, rows: &[(String, row_change::Keys)]) {
        let mut st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        self.invalidate_in(&mut st, scope, rows);
    }

    /// [`Cache::invalidate_changes`] with the store's lock held.
    fn invalidate_in(&self, st: &mut Store, scope: &Scope, rows: &[(String, row_change::Keys)]) {
        let now = self.version.fetch_add(1, Relaxed) + 1;
        match scope {
            Scope::Whole => {
                st.marks.whole(now);
                self.invalidations.fetch_add(1, Relaxed);
            }
            Scope::Tables(t) => {
                if !t.is_empty() || rows.is_empty() {
                    self.table_invalidations.fetch_add(1, Relaxed);
                }
                st.marks.tables(now, t);
            }
        }
        for (table, keys) in rows {
            self.row_invalidations.fetch_add(1, Relaxed);
            st.marks.rows(now, table, keys);
        }
    }

    /// A statement that may change `change` is about to be sent: what it
    /// may change is stale, and no read of it is stored until its reply
    /// is in (one lock for both: no store slips between them).
    pub fn write_begins(&self, change: impl Into<Change>) -> Write<'_> {
        let change = change.into();
        let mut st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let id = st.flying.begin(change.clone());
        self.invalidate_in(&mut st, &change.scope, &change.rows);
        Write(self, id, change)
    }

    /// Entries and their bytes now.
    pub fn size(&self) -> (usize, usize) {
        let st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        (st.map.len(), st.bytes)
    }

    /// The cache's Prometheus families.
    pub fn render(&self, o: &mut String) {
        use std::fmt::Write as _;
        let s = self.settings();
        if s.rules.is_empty() {
            return;
        }
        let counts = self.counts();
        let families: [Family; 5] = [
            ("cache_hits_total", "Statements answered from the result cache.", |c| &c.hits),
            ("cache_misses_total", "Cacheable statements that went to a server.", |c| &c.misses),
            ("cache_stores_total", "Replies kept in the result cache.", |c| &c.stores),
            (
                "cache_not_stored_total",
                "Replies of misses not kept (invalidated during the read, a write in flight, warnings, too big).",
                |c| &c.not_stored,
            ),
            (
                "cache_waits_total",
                "Misses that waited for the same statement's read already in flight instead of asking the server.",
                |c| &c.waited,
            ),
        ];
        for (name, help, field) in families {
            let _ = writeln!(o, "# HELP sqlfleet_relay_{name} {help}");
            let _ = writeln!(o, "# TYPE sqlfleet_relay_{name} counter");
            for (r, c) in s.rules.iter().zip(counts.iter()) {
                let _ = writeln!(
                    o,
                    "sqlfleet_relay_{name}{{rule=\"{}\"}} {}",
                    crate::admin::metrics::label(&r.name),
                    field(c).load(Relaxed)
                );
            }
        }
        let (entries, bytes) = self.size();
        let _ = writeln!(o, "# HELP sqlfleet_relay_cache_invalidations_total Writes that made the result cache stale: everything (scope=\"whole\"), only what reads the tables they change (scope=\"tables\"), or only what reads the rows they name by key (a binary-log row event; an UPDATE or DELETE by key, or an INSERT by its values, through the relay), one table each (scope=\"rows\").");
        let _ = writeln!(o, "# TYPE sqlfleet_relay_cache_invalidations_total counter");
        for (scope, n) in [
            ("whole", &self.invalidations),
            ("tables", &self.table_invalidations),
            ("rows", &self.row_invalidations),
        ] {
            let _ = writeln!(
                o,
                "sqlfleet_relay_cache_invalidations_total{{scope=\"{scope}\"}} {}",
                n.load(Relaxed)
            );
        }
        let _ = writeln!(
            o,
            "# HELP sqlfleet_relay_cache_entries Entries in the result cache."
        );
        let _ = writeln!(o, "# TYPE sqlfleet_relay_cache_entries gauge");
        let _ = writeln!(o, "sqlfleet_relay_cache_entries {entries}");
        let _ = writeln!(
            o,
            "# HELP sqlfleet_relay_cache_bytes Bytes the result cache holds."
        );
        let _ = writeln!(o, "# TYPE sqlfleet_relay_cache_bytes gauge");
        let _ = writeln!(o, "sqlfleet_relay_cache_bytes {bytes}");
        if self.gate.status().is_some() {
            let _ = writeln!(o, "# HELP sqlfleet_relay_cache_blind 1 while the result cache is bypassed because its binlog follower is not caught up within cache.max_lag (down, refused, stalled or behind).");
            let _ = writeln!(o, "# TYPE sqlfleet_relay_cache_blind gauge");
            let _ = writeln!(
                o,
                "sqlfleet_relay_cache_blind {}",
                u8::from(!self.gate.open())
            );
        }
        let _ = writeln!(o, "# HELP sqlfleet_relay_cache_bypassed_total Cacheable statements sent to a server without the cache while its binlog follower was not caught up.");
        let _ = writeln!(o, "# TYPE sqlfleet_relay_cache_bypassed_total counter");
        let _ = writeln!(
            o,
            "sqlfleet_relay_cache_bypassed_total {}",
            self.gate.bypassed.load(Relaxed)
        );
    }

    /// The cache in /status.
    pub fn status(&self) -> serde_json::Value {
        let s = self.settings();
        let counts = self.counts();
        let (entries, bytes) = self.size();
        let rules: Vec<serde_json::Value> = s
            .rules
            .iter()
            .zip(counts.iter())
            .map(|(r, c)| {
                serde_json::json!({
                    "name": r.name,
                    "ttl_seconds": r.ttl.as_secs_f64(),
                    "hits": c.hits.load(Relaxed),
                    "misses": c.misses.load(Relaxed),
                    "stores": c.stores.load(Relaxed),
                    "not_stored": c.not_stored.load(Relaxed),
                    "waited": c.waited.load(Relaxed),
                })
            })
            .collect();
        serde_json::json!({
            "entries": entries,
            "bytes": bytes,
            "max_bytes": s.max_bytes,
            "invalidations": self.invalidations.load(Relaxed),
            "table_invalidations": self.table_invalidations.load(Relaxed),
            "row_invalidations": self.row_invalidations.load(Relaxed),
            "rules": rules,
            "binlog": self.gate.status(),
        })
    }
}

/// Whether the statement names one of `tables` (`t` or `db.t`, lower
/// case); an unqualified word is in the session's database.
fn names_a_table(
    tables: &[String],
    db: Option<&str>,
    sql: &[u8],
    toks: &[(Tok, std::ops::Range<usize>)],
) -> bool {
    let dbs: Vec<&str> = db.into_iter().collect();
    crate::backend::view_calls::candidates(sql, toks, &dbs)
        .iter()
        .any(|(d, n)| {
            tables.iter().any(|t| match t.split_once('.') {
                Some((td, tn)) => td == d && tn == n,
                None => t == n,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cache(max_bytes: usize) -> Cache {
        Cache::new(CacheSettings {
            rules: vec![CacheRule {
                name: "all".into(),
                digest: None,
                regex: None,
                tables: Vec::new(),
                user: None,
                ttl: Duration::from_secs(60),
                max_entry_bytes: 1000,
            }],
            max_bytes,
            follow: None,
        })
    }

    fn key(sql: &str) -> Key {
        Key {
            user: Arc::from("app"),
            db: Some("shop".into()),
            settings: Vec::new(),
            caps: 0,
            ext: 0,
            collation: 45,
            sql: sql.as_bytes().to_vec(),
            params: None,
            epochs: (0, 0),
        }
    }

    fn hit(n: usize) -> Hit {
        Hit {
            reply: Arc::new(vec![7; n]),
            rows: 1,
            keeps: Some(false),
        }
    }

    /// (rows, count before, count after, how the entry leaves the count)
    #[test]
    fn how_a_grouping_left_the_count_is_told_from_the_counts_around_it() {
        type Row = (u64, Option<u64>, Option<u64>, Option<Option<bool>>);
        let rows: &[Row] = &[
            (1, Some(5), Some(1), Some(Some(false))),
            (1, Some(5), Some(5), Some(Some(true))),
            (1, Some(0), Some(0), Some(Some(true))),
            (1, Some(1), Some(1), Some(None)),
            (1, Some(5), Some(7), None),
            (1, None, Some(1), None),
            (1, Some(5), None, None),
        ];
        for (n, before, after, want) in rows {
            assert_eq!(
                Hit::keeps_from(*n, *before, *after),
                *want,
                "{n} {before:?} {after:?}"
            );
        }
    }

    #[test]
    fn an_entry_is_given_until_an_invalidation() {
        let c = cache(1 << 20);
        let v = c.version();
        c.put(0, v, key("a"), hit(10), Scope::Whole);
        assert!(c.get(0, &key("a")).is_some());
        c.invalidate();
        assert!(c.get(0, &key("a")).is_none());
    }

    #[test]
    fn a_read_that_saw_an_invalidation_or_a_write_in_flight_is_not_kept() {
        let c = cache(1 << 20);
        let v = c.version();
        c.invalidate();
        c.put(0, v, key("a"), hit(10), Scope::Whole);
        assert!(c.get(0, &key("a")).is_none(), "invalidated during the read");
        let v = c.version();
        let w = c.write_begins(Scope::Whole);
        c.put(0, c.version(), key("b"), hit(10), Scope::Whole);
        assert!(c.get(0, &key("b")).is_none(), "a write in flight");
        drop(w);
        c.put(0, v, key("c"), hit(10), Scope::Whole);
        assert!(c.get(0, &key("c")).is_none(), "began before the write");
        let v = c.version();
        c.put(0, v, key("d"), hit(10), Scope::Whole);
        assert!(c.get(0, &key("d")).is_some(), "after the write's reply");
        // A write of table u in flight: a read of t is kept, one of u not.
        let w = c.write_begins(tables(&["u"]));
        c.put(0, c.version(), key("e"), hit(10), tables(&["t"]));
        assert!(c.get(0, &key("e")).is_some(), "reads another table");
        c.put(0, c.version(), key("f"), hit(10), tables(&["u"]));
        assert!(c.get(0, &key("f")).is_none(), "reads the table in flight");
        drop(w);
    }

    #[test]
    fn keys_differ_by_account_database_settings_shape_and_protocol() {
        let c = cache(1 << 20);
        c.put(0, c.version(), key("a"), hit(10), Scope::Whole);
        let other_user = Key {
            user: Arc::from("other"),
            ..key("a")
        };
        let other_db = Key {
            db: None,
            ..key("a")
        };
        let other_settings = Key {
            settings: vec![Setting {
                name: "time_zone".into(),
                text: "@@session.time_zone = '+01:00'".into(),
            }],
            ..key("a")
        };
        let other_shape = Key {
            collation: 8,
            ..key("a")
        };
        // The same text as a prepared statement's execute (binary rows).
        let an_execute = Key {
            params: Some(Vec::new()),
            ..key("a")
        };
        // After a global or a grant changed through the relay.
        let after_global = Key {
            epochs: (1, 0),
            ..key("a")
        };
        let after_grant = Key {
            epochs: (0, 1),
            ..key("a")
        };
        for k in [
            other_user,
            other_db,
            other_settings,
            other_shape,
            an_execute,
            after_global,
            after_grant,
        ] {
            assert!(c.get(0, &k).is_none(), "{k:?}");
        }
    }

    #[tokio::test]
    async fn identical_misses_wait_for_the_first_read() {
        let c = Arc::new(cache(1 << 20));
        let Turn::Lead(lead) = c.turn(&key("a")) else {
            panic!("the first miss leads");
        };
        let Turn::Wait(n) = c.turn(&key("a")) else {
            panic!("the second waits");
        };
        assert!(
            matches!(c.turn(&key("b")), Turn::Lead(_)),
            "another key leads"
        );
        let waiter = {
            let c = c.clone();
            tokio::spawn(async move { c.wait_for(0, &key("a"), n, Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.put(0, c.version(), key("a"), hit(10), Scope::Whole);
        drop(lead);
        let got = waiter.await.expect("waiter");
        assert!(got.is_some(), "woken with the stored entry");
        assert!(
            matches!(c.turn(&key("a")), Turn::Lead(_)),
            "no read in flight any more"
        );
    }

    /// A miss that waited for another's read gets no entry once the
    /// binlog gate shut meanwhile (the follower went blind).
    #[tokio::test]
    async fn a_waiter_gets_no_entry_once_the_gate_shut() {
        let c = Arc::new(cache(1 << 20));
        c.gate.follow();
        c.gate.caught_up(Instant::now(), Duration::from_secs(60));
        let Turn::Lead(lead) = c.turn(&key("a")) else {
            panic!("the first miss leads");
        };
        let Turn::Wait(n) = c.turn(&key("a")) else {
            panic!("the second waits");
        };
        let waiter = {
            let c = c.clone();
            tokio::spawn(async move { c.wait_for(0, &key("a"), n, Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        c.put(0, c.version(), key("a"), hit(10), Scope::Whole);
        c.gate.blind("lost".into());
        drop(lead);
        assert!(
            waiter.await.expect("waiter").is_none(),
            "an entry past the shut gate"
        );
    }

    #[test]
    fn the_least_recently_used_go_first_and_the_total_stays_under_max_bytes() {
        let one = footprint(&key("k0"), &hit(100), &Scope::Whole);
        let c = cache(3 * one);
        for i in 0..3 {
            c.put(
                0,
                c.version(),
                key(&format!("k{i}")),
                hit(100),
                Scope::Whole,
            );
        }
        assert!(
            c.get(0, &key("k0")).is_some(),
            "k0 used: k1 is the oldest now"
        );
        c.put(0, c.version(), key("k3"), hit(100), Scope::Whole);
        assert!(c.get(0, &key("k1")).is_none());
        assert!(c.get(0, &key("k0")).is_some());
        assert!(c.size().1 <= 3 * one);
        c.put(0, c.version(), key("big"), hit(1001), Scope::Whole);
        assert!(c.get(0, &key("big")).is_none(), "over max_entry_bytes");
    }

    proptest::proptest! {
        /// Reads and stores of a few keys of one size against a model of
        /// exact least-recently-used order: the same keys are kept (the
        /// cache moves a read entry only when an eviction reaches it).
        #[test]
        fn eviction_keeps_what_exact_lru_keeps(
            ops in proptest::collection::vec((proptest::bool::ANY, 0u8..8), 1..200),
            room in 1usize..6,
        ) {
            let one = footprint(&key("k0"), &hit(100), &Scope::Whole);
            let c = cache(room * one);
            // Most recently used last.
            let mut model: Vec<u8> = Vec::new();
            for (store, k) in ops {
                let name = format!("k{k}");
                if store {
                    c.put(0, c.version(), key(&name), hit(100), Scope::Whole);
                    model.retain(|x| *x != k);
                    model.push(k);
                    if model.len() > room {
                        model.remove(0);
                    }
                } else {
                    let got = c.get(0, &key(&name)).is_some();
                    let want = model.contains(&k);
                    proptest::prop_assert_eq!(got, want, "read of {}", name);
                    if want {
                        model.retain(|x| *x != k);
                        model.push(k);
                    }
                }
            }
        }
    }

    #[test]
    fn a_texts_analysis_is_kept_while_an_entry_of_it_is() {
        let one = footprint(&key("k0"), &hit(100), &Scope::Whole);
        let c = cache(40 * one);
        let analysed = |sql: &str| {
            let q = crate::protocol::sql::Query::new(sql.as_bytes());
            Some(Arc::new(Analysis {
                toks: q.tokens().to_vec(),
                fx: q.effects(),
                digest: q.digest(),
            }))
        };
        let other_user = |sql: &str| Key {
            user: Arc::from("other"),
            ..key(sql)
        };
        assert!(c.analysis(b"SELECT 1").is_none());
        let (a, b) = (analysed("SELECT 1"), analysed("SELECT 1"));
        c.put_analyzed(
            0,
            c.version(),
            key("SELECT 1"),
            hit(10),
            (Scope::Whole, None),
            a,
        );
        c.put_analyzed(
            0,
            c.version(),
            other_user("SELECT 1"),
            hit(10),
            (Scope::Whole, None),
            b,
        );
        let kept = c.analysis(b"SELECT 1").expect("kept");
        assert_eq!(kept.digest, "SELECT ?");
        assert!(kept.fx.read);
        assert!(c.analysis(b"SELECT 2").is_none(), "another text");
        // A stale entry goes when read; the other entry of the text keeps
        // the analysis until it goes too.
        c.invalidate();
        assert!(c.get(0, &key("SELECT 1")).is_none());
        assert!(
            c.analysis(b"SELECT 1").is_some(),
            "one entry of the text is left"
        );
        assert!(c.get(0, &other_user("SELECT 1")).is_none());
        assert!(
            c.analysis(b"SELECT 1").is_none(),
            "no entry of the text is left"
        );
        // Stored again, then pushed out by newer entries: gone with it.
        c.put_analyzed(
            0,
            c.version(),
            key("SELECT 1"),
            hit(10),
            (Scope::Whole, None),
            analysed("SELECT 1"),
        );
        assert!(c.analysis(b"SELECT 1").is_some());
        for i in 0..100 {
            c.put(
                0,
                c.version(),
                key(&format!("k{i}")),
                hit(100),
                Scope::Whole,
            );
        }
        assert!(c.get(0, &key("SELECT 1")).is_none(), "evicted");
        assert!(c.analysis(b"SELECT 1").is_none(), "its analysis with it");
        // The bytes counted come back to what is kept.
        assert!(c.size().1 <= 40 * one);
    }

    fn tables(names: &[&str]) -> Scope {
        Scope::Tables(Arc::new(names.iter().map(|n| n.to_string()).collect()))
    }

    #[test]
    fn a_write_to_some_tables_makes_stale_only_what_reads_them() {
        // (what the entry reads, what the write changes, still given)
        let rows: &[(Scope, Scope, bool)] = &[
            (tables(&["orders"]), tables(&["orders"]), false),
            (tables(&["orders"]), tables(&["users"]), true),
            (tables(&["orders", "users"]), tables(&["users"]), false),
            (tables(&["orders"]), tables(&["audit", "orders"]), false),
            (tables(&["orders"]), Scope::Whole, false),
            // An entry that reads a view: any write.
            (Scope::Whole, tables(&["users"]), false),
            (Scope::Whole, Scope::Whole, false),
        ];
        for (reads, write, kept) in rows {
            let c = cache(1 << 20);
            c.put(0, c.version(), key("a"), hit(10), reads.clone());
            assert!(c.get(0, &key("a")).is_some(), "{reads:?} stored");
            drop(c.write_begins(write.clone()));
            assert_eq!(
                c.get(0, &key("a")).is_some(),
                *kept,
                "{reads:?} after a write of {write:?}"
            );
        }
    }

    /// A read begun before new rules came (SIGHUP) is not kept after them.
    #[test]
    fn a_read_begun_before_a_reconfiguration_is_not_kept() {
        let c = cache(1 << 20);
        let since = c.version();
        c.invalidate();
        let rules = c.settings().rules.clone();
        c.reconfigure(CacheSettings {
            rules,
            max_bytes: 1 << 20,
            follow: None,
        });
        c.put(0, since, key("a"), hit(10), Scope::Whole);
        assert!(c.get(0, &key("a")).is_none());
    }

    /// `SELECT c FROM t WHERE id = 7` kept, then rows of t changed as a
    /// binary log's row event names them.
    #[test]
    fn a_change_of_rows_makes_stale_only_the_entries_that_read_them() {
        let row_key = |v: i128| RowKey {
            table: "t".into(),
            col: "id".into(),
            rows: row_key::Rows::In(Box::new([v])),
        };
        let keys = |id: &[i128]| -> Vec<(String, row_change::Keys)> {
            let k = [("id".to_string(), id.iter().copied().collect())].into();
            vec![("t".to_string(), k)]
        };
        let reads = tables(&["t", "id", "c"]);
        let c = cache(1 << 20);
        let put = |name: &str, v: i128, since: u64| {
            c.put_analyzed(
                0,
                since,
                key(name),
                hit(10),
                (reads.clone(), Some(row_key(v))),
                None,
            )
        };
        put("7", 7, c.version());
        put("8", 8, c.version());
        c.put(0, c.version(), key("all of t"), hit(10), reads.clone());
        c.invalidate_changes(&tables(&[]), &keys(&[8, 9]));
        assert!(c.get(0, &key("7")).is_some(), "another row changed");
        assert!(c.get(0, &key("8")).is_none(), "its row changed");
        assert!(c.get(0, &key("all of t")).is_none(), "not keyed");
        // A read during which its row changed is not kept; one during
        // which another row changed is.
        let since = c.version();
        c.invalidate_changes(&tables(&[]), &keys(&[7]));
        put("7 again", 7, since);
        put("9", 9, since);
        assert!(c.get(0, &key("7 again")).is_none());
        assert!(c.get(0, &key("9")).is_some());
        // The table whole, and a change whose column is not known.
        c.invalidate_changes(&tables(&["t"]), &[]);
        assert!(c.get(0, &key("9")).is_none());
        put("10", 10, c.version());
        c.invalidate_changes(&tables(&[]), &[("t".into(), Default::default())]);
        assert!(c.get(0, &key("10")).is_none(), "id not known");
    }

    #[test]
    fn a_read_is_kept_only_if_what_it_reads_was_not_written_during_it() {
        let c = cache(1 << 20);
        let v = c.version();
        c.invalidate_scope(&tables(&["users"]));
        c.put(0, v, key("a"), hit(10), tables(&["orders"]));
        assert!(c.get(0, &key("a")).is_some(), "another table was written");
        let v = c.version();
        c.invalidate_scope(&tables(&["orders"]));
        c.put(0, v, key("b"), hit(10), tables(&["orders"]));
        assert!(c.get(0, &key("b")).is_none(), "its table was written");
        let v = c.version();
        c.invalidate_scope(&tables(&["users"]));
        c.put(0, v, key("c"), hit(10), Scope::Whole);
        assert!(c.get(0, &key("c")).is_none(), "it reads a view: any write");
        // An entry stored before a later write of its table stays stale
        // after further writes elsewhere.
        let c = cache(1 << 20);
        c.put(0, c.version(), key("d"), hit(10), tables(&["orders"]));
        c.invalidate_scope(&tables(&["orders"]));
        c.invalidate_scope(&tables(&["users"]));
        assert!(c.get(0, &key("d")).is_none());
    }
}
