//! What the result cache's rules are (`[[cache_rules]]` and `[cache]`):
//! config builds them, `cache.rs` reads them.

use std::time::Duration;

/// An opt-in cache rule (`[[cache_rules]]`): which statements, how long.
#[derive(Debug, Clone)]
pub struct CacheRule {
    pub name: String,
    /// The statement's digest, normalized as the relay's digests are.
    pub digest: Option<String>,
    pub regex: Option<regex::Regex>,
    /// Names (`table` or `db.table`, lower case) of which the statement
    /// must name one.
    pub tables: Vec<String>,
    /// The relay account it applies to (all when none).
    pub user: Option<String>,
    /// The longest an entry is given.
    pub ttl: Duration,
    /// Replies larger than this are not kept.
    pub max_entry_bytes: usize,
}

/// The cache's settings: its rules and its size.
#[derive(Debug, Clone, Default)]
pub struct CacheSettings {
    pub rules: Vec<CacheRule>,
    /// All entries together at most: their whole footprint in memory
    /// (reply, key, what each reads, their share of the tables).
    pub max_bytes: usize,
    /// Following the primary's binary log (`[cache] binlog`); `None`:
    /// writes made elsewhere are seen when an entry's ttl ends.
    pub follow: Option<FollowSettings>,
}

/// How the cache follows the primary's binary log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowSettings {
    /// Entries are given only while everything committed on the primary
    /// up to this long ago has been read (and made stale).
    pub max_lag: Duration,
    /// The replica id the relay registers with (unique among the
    /// primary's replicas: another with the same id would be cut off).
    pub server_id: Option<u32>,
}
