//! The result cache's `max_bytes` bounds the memory it holds, measured
//! by the allocator: entries shaped as a client's (a SELECT's text, its
//! database, a reply of a few hundred bytes, the table it reads) are put
//! until the cache evicts, and the bytes still allocated must stay within
//! the bound the cache counts (`bench/relay_cache_memory.sh` measured the
//! relay at 328 MiB of RSS with a 64 MiB cache before the count included
//! what an entry costs besides its key and reply).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlfleet_relay::cache::{Cache, CacheRule, CacheSettings, Hit, Key, Scope};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counter only adds and subtracts the sizes asked for.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: a pointer the system allocator gave, with its layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: as dealloc, with the new size the caller asked for.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn cache(max_bytes: usize) -> Cache {
    Cache::new(CacheSettings {
        rules: vec![CacheRule {
            name: "kv".into(),
            digest: None,
            regex: None,
            tables: Vec::new(),
            user: None,
            ttl: Duration::from_secs(600),
            max_entry_bytes: 1 << 20,
        }],
        max_bytes,
        follow: None,
    })
}

/// The i-th client read: its own text, as a client's cache key is made.
fn entry(user: &Arc<str>, i: usize) -> (Key, Hit, Scope) {
    let key = Key {
        user: user.clone(),
        db: Some("sbtest".into()),
        settings: Vec::new(),
        caps: 0,
        ext: 0,
        collation: 45,
        sql: format!(
            "SELECT id, v, {i} AS k FROM kv WHERE id = {}",
            i % 10_000 + 1
        )
        .into_bytes(),
        params: None,
        epochs: (0, 0),
    };
    let hit = Hit {
        reply: Arc::new(vec![7u8; 250]),
        rows: 1,
        keeps: Some(false),
    };
    let reads = Scope::Tables(Arc::new(BTreeSet::from(["kv".to_string()])));
    (key, hit, reads)
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

#[test]
fn the_memory_an_entry_holds_is_what_the_cache_counts() {
    let user: Arc<str> = Arc::from("app");
    // No eviction: every entry stays; what is allocated for them against
    // what the cache says it holds.
    let c = cache(1 << 30);
    let before = live();
    for i in 0..20_000 {
        let (k, h, s) = entry(&user, i);
        c.put(0, c.version(), k, h, s);
    }
    let held = (live() - before) as f64;
    let (entries, counted) = c.size();
    assert_eq!(entries, 20_000);
    eprintln!(
        "20,000 entries: {:.0} bytes allocated each, {:.0} counted each",
        held / 20_000.0,
        counted as f64 / 20_000.0
    );
    assert!(
        held <= counted as f64 * 1.1,
        "the cache counts {counted} bytes and holds {held} (more than a tenth over)"
    );
    // ...and not so much more that the bound keeps far fewer entries
    // than fit (the count includes the allocator's headers, which the
    // sizes asked for here do not).
    assert!(
        (counted as f64) <= held * 1.5,
        "the cache counts {counted} bytes for {held} held"
    );
    drop(c);

    // With eviction: the bound holds however many entries go through.
    let bound = 4 << 20;
    let c = cache(bound);
    let before = live();
    for i in 0..200_000 {
        let (k, h, s) = entry(&user, i);
        c.put(0, c.version(), k, h, s);
    }
    let held = live() - before;
    let (entries, counted) = c.size();
    eprintln!("200,000 entries through a {bound}-byte cache: {entries} kept, {counted} counted, {held} allocated");
    assert!(counted <= bound);
    assert!(
        held as f64 <= bound as f64 * 1.15,
        "{held} bytes allocated for a cache of {bound}"
    );
}
