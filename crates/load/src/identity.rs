//! Which dump this is, and whether a resumed run reads the same one.
//!
//! - The load id: SHA-256 of the first MiB, the size and a salt (the
//!   target table for CSV/TSV). It finds the journal of an interrupted
//!   load of the same input.
//! - The statement chain: a running XXH3-128 over every statement's
//!   offset and text. Each journal record stores the chain value at its
//!   end; a resumed run recomputes it as it reads and must meet the same
//!   value at every recorded end, or it stops before anything runs (two
//!   dumps with the same first MiB and size differ somewhere later).
//!   It guards against another input by mistake, not against an
//!   adversary, and it runs over every byte of the dump on the reader
//!   thread: SHA-256 took a seventh of the loader's own CPU, XXH3 takes
//!   a fraction of that. Journals name the hash ([`CHAIN_HASH`]); one
//!   written with another is not resumed (see `journal::prepare`).

use sha2::{Digest, Sha256};
use twox_hash::xxhash3_128;

/// The chain's hash, as the journal names it. Journals of sqlfleet
/// before it have none (their chains are SHA-256).
pub const CHAIN_HASH: &str = "xxh3-128";

/// How many leading bytes identify an input (with its size, when known).
pub const ID_BYTES: usize = 1 << 20;

/// Collects the first [`ID_BYTES`] of an input and names it.
#[derive(Clone, Default)]
pub struct IdHasher {
    hasher: Sha256,
    seen: usize,
}

impl IdHasher {
    /// Feeds bytes as they are read; only the first [`ID_BYTES`] count.
    pub fn update(&mut self, bytes: &[u8]) {
        if self.seen < ID_BYTES {
            let take = bytes.len().min(ID_BYTES - self.seen);
            self.hasher.update(&bytes[..take]);
            self.seen += take;
        }
    }

    pub fn is_full(&self) -> bool {
        self.seen >= ID_BYTES
    }

    /// The load id (32 hex digits).
    pub fn finish(&self, size: Option<u64>, salt: &str) -> String {
        let mut h = self.hasher.clone();
        h.update(size.unwrap_or(0).to_le_bytes());
        h.update(salt.as_bytes());
        hex(&h.finalize()[..16])
    }
}

/// The load id of input `input_id` loaded into default database `db`
/// (`-D`; empty for none): a resume is bound to the database it loads
/// into, and the same dump into another database is another load.
pub fn bound(input_id: &str, db: &str) -> String {
    let mut h = Sha256::new();
    h.update(input_id.as_bytes());
    h.update(b"\0-D ");
    h.update(db.as_bytes());
    hex(&h.finalize()[..16])
}

/// The chain value after a statement: 16 bytes.
pub type ChainValue = [u8; 16];

/// The running hash over the statements read so far.
#[derive(Default)]
pub struct Chain(xxhash3_128::Hasher);

impl Chain {
    /// Adds a statement; returns the chain value after it.
    pub fn add(&mut self, offset: u64, text: &[u8]) -> ChainValue {
        self.0.write(&offset.to_le_bytes());
        self.0.write(&(text.len() as u64).to_le_bytes());
        self.0.write(text);
        self.0.finish_128().to_le_bytes()
    }
}

/// A CSV/TSV chunk's own value (its offset and bytes), recorded with the
/// chunk: a resumed or repeated load meets it again only with the same
/// bytes at the same place.
pub fn chunk_value(offset: u64, data: &[u8]) -> ChainValue {
    Chain::default().add(offset, data)
}

/// An input's name as `sqlfleet.loads.source` keeps it (its first 1,000
/// characters): how a load finds the earlier loads of the same name.
pub fn source_column(source: &str) -> String {
    source.chars().take(1000).collect()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_differs_where_the_statements_differ() {
        let mut a = Chain::default();
        let mut b = Chain::default();
        assert_eq!(a.add(0, b"INSERT 1"), b.add(0, b"INSERT 1"));
        assert_ne!(a.add(9, b"INSERT 2"), b.add(9, b"INSERT 3"));
        let mut c = Chain::default();
        c.add(0, b"INSERT 1");
        // Same text at another offset is another dump.
        assert_ne!(c.add(10, b"INSERT 2"), Chain::default().add(9, b"INSERT 2"));
    }

    #[test]
    fn the_chain_is_xxh3_128_of_offsets_lengths_and_texts() {
        // The journal names the hash: these values are what it means.
        let mut c = Chain::default();
        let mut all = Vec::new();
        for (offset, text) in [(0u64, &b"INSERT 1"[..]), (9, b"INSERT 2")] {
            all.extend_from_slice(&offset.to_le_bytes());
            all.extend_from_slice(&(text.len() as u64).to_le_bytes());
            all.extend_from_slice(text);
            assert_eq!(
                c.add(offset, text),
                xxhash3_128::Hasher::oneshot(&all).to_le_bytes()
            );
        }
        assert_eq!(CHAIN_HASH, "xxh3-128");
    }

    #[test]
    fn the_id_covers_only_the_first_mib_and_the_size() {
        let mut a = IdHasher::default();
        a.update(&vec![1u8; ID_BYTES]);
        let mut b = a.clone();
        a.update(b"tail one");
        b.update(b"tail two");
        assert_eq!(a.finish(Some(5), ""), b.finish(Some(5), ""));
        assert_ne!(a.finish(Some(5), ""), a.finish(Some(6), ""));
        assert_ne!(a.finish(Some(5), "t1"), a.finish(Some(5), "t2"));
    }
}
