//! MariaDB global transaction ids: `domain-server-seq`, positions (one
//! GTID per replication domain, as `@@gtid_binlog_pos` prints them), and
//! the decoding of MariaDB's own GTID event, which the binlog library does
//! not know (MariaDB event type 162).
//!
//! Written by hand because the layout is MariaDB's (log_event.h,
//! `Gtid_log_event`) and small: a fixed prefix we must read exactly; the
//! rest of the body (XA ids, extra flags) is skipped. Property-tested and
//! fuzzed (`fuzz/fuzz_targets/replicate_event.rs`).

use std::collections::BTreeMap;
use std::fmt;

/// One MariaDB GTID.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.seq)
    }
}

/// A GTID or position that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GtidError {
    #[error("'{0}' is not a MariaDB GTID (domain-server-seq, e.g. 0-1-1234)")]
    NotAGtid(String),
    #[error("'{position}' names domain {domain} twice")]
    DomainTwice { position: String, domain: u32 },
}

impl std::str::FromStr for Gtid {
    type Err = GtidError;
    fn from_str(s: &str) -> Result<Gtid, GtidError> {
        let bad = || GtidError::NotAGtid(s.to_string());
        let mut it = s.trim().splitn(3, '-');
        let (Some(d), Some(sv), Some(n)) = (it.next(), it.next(), it.next()) else {
            return Err(bad());
        };
        Ok(Gtid {
            domain: d.parse().map_err(|_| bad())?,
            server: sv.parse().map_err(|_| bad())?,
            seq: n.parse().map_err(|_| bad())?,
        })
    }
}

/// A replication position: the last GTID of each domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidPos(pub BTreeMap<u32, Gtid>);

impl GtidPos {
    /// Parses `0-1-5,1-2-9` (spaces and newlines allowed, as the server
    /// prints long lists); the empty string is the empty position.
    pub fn parse(s: &str) -> Result<GtidPos, GtidError> {
        let mut m = BTreeMap::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let g: Gtid = part.parse()?;
            if m.insert(g.domain, g).is_some() {
                return Err(GtidError::DomainTwice {
                    position: s.to_string(),
                    domain: g.domain,
                });
            }
        }
        Ok(GtidPos(m))
    }

    /// Records `g` as its domain's latest.
    pub fn advance(&mut self, g: Gtid) {
        self.0.insert(g.domain, g);
    }

    /// The sequence number reached in `domain` (0: none).
    pub fn seq(&self, domain: u32) -> u64 {
        self.0.get(&domain).map_or(0, |g| g.seq)
    }

    /// True when `g` is at or before this position in its domain.
    pub fn covers(&self, g: &Gtid) -> bool {
        self.0.get(&g.domain).is_some_and(|p| p.seq >= g.seq)
    }

    /// Transactions of `ahead` that this position has not reached, summed
    /// over domains (sequence numbers are dense within a domain).
    pub fn behind(&self, ahead: &GtidPos) -> u64 {
        ahead
            .0
            .values()
            .map(|g| g.seq.saturating_sub(self.seq(g.domain)))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for GtidPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for g in self.0.values() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{g}")?;
        }
        Ok(())
    }
}

/// MariaDB's GTID event flags (`flags2`).
pub mod flags {
    /// No BEGIN/COMMIT around the event group: a single DDL or a
    /// statement on a non-transactional table.
    pub const STANDALONE: u8 = 1;
    pub const GROUP_COMMIT_ID: u8 = 2;
    pub const TRANSACTIONAL: u8 = 4;
    pub const ALLOW_PARALLEL: u8 = 8;
    pub const WAITED: u8 = 16;
    pub const DDL: u8 = 32;
    pub const PREPARED_XA: u8 = 64;
    pub const COMPLETED_XA: u8 = 128;
}

/// The fields of a MariaDB GTID event the applier needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GtidEvent {
    pub seq: u64,
    pub domain: u32,
    pub flags: u8,
    pub commit_id: Option<u64>,
}

impl GtidEvent {
    pub fn standalone(&self) -> bool {
        self.flags & flags::STANDALONE != 0
    }
    pub fn xa(&self) -> bool {
        self.flags & (flags::PREPARED_XA | flags::COMPLETED_XA) != 0
    }
}

/// A body that is not what its event type promises.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} (event body of {len} bytes)")]
pub struct DecodeError {
    pub what: String,
    pub len: usize,
}

/// Decodes a MariaDB GTID event body (after the 19-byte header, without
/// the checksum): seq_no u64, domain_id u32, flags2 u8, then the group
/// commit id (u64) when flagged.
pub fn decode_gtid_event(body: &[u8]) -> Result<GtidEvent, DecodeError> {
    let err = |what: &str| DecodeError {
        what: what.to_string(),
        len: body.len(),
    };
    let seq = u64::from_le_bytes(
        body.get(0..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| err("GTID event too short for its sequence number"))?,
    );
    let domain = u32::from_le_bytes(
        body.get(8..12)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| err("GTID event too short for its domain id"))?,
    );
    let flags = *body
        .get(12)
        .ok_or_else(|| err("GTID event too short for its flags"))?;
    let commit_id = if flags & flags::GROUP_COMMIT_ID != 0 {
        Some(u64::from_le_bytes(
            body.get(13..21)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| err("GTID event flags a commit id it does not hold"))?,
        ))
    } else {
        None
    };
    Ok(GtidEvent {
        seq,
        domain,
        flags,
        commit_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn positions_parse_print_and_compare() {
        let p = GtidPos::parse("0-1-5, 2-7-9\n").expect("parses");
        assert_eq!(p.to_string(), "0-1-5,2-7-9");
        assert!(p.covers(&Gtid {
            domain: 0,
            server: 3,
            seq: 5
        }));
        assert!(!p.covers(&Gtid {
            domain: 1,
            server: 1,
            seq: 1
        }));
        let ahead = GtidPos::parse("0-1-8,2-7-9,3-1-2").expect("parses");
        assert_eq!(p.behind(&ahead), 3 + 2);
        assert!(GtidPos::parse("").expect("empty").is_empty());
        assert!(GtidPos::parse("0-1-5,0-1-6").is_err());
        assert!(GtidPos::parse("0-1").is_err());
        assert!("x-1-2".parse::<Gtid>().is_err());
    }

    #[test]
    fn a_gtid_event_with_a_commit_id_decodes() {
        let mut b = 77u64.to_le_bytes().to_vec();
        b.extend(3u32.to_le_bytes());
        b.push(flags::GROUP_COMMIT_ID | flags::TRANSACTIONAL);
        b.extend(9u64.to_le_bytes());
        let e = decode_gtid_event(&b).expect("decodes");
        assert_eq!((e.seq, e.domain, e.commit_id), (77, 3, Some(9)));
        assert!(!e.standalone());
        b.truncate(15);
        assert!(decode_gtid_event(&b).is_err());
    }

    proptest! {
        #[test]
        fn gtid_event_round_trips(seq: u64, domain: u32, fl: u8, cid: u64, tail in proptest::collection::vec(any::<u8>(), 0..16)) {
            let mut b = seq.to_le_bytes().to_vec();
            b.extend(domain.to_le_bytes());
            b.push(fl);
            if fl & flags::GROUP_COMMIT_ID != 0 { b.extend(cid.to_le_bytes()); }
            b.extend(&tail);
            let e = decode_gtid_event(&b).expect("a well-formed body decodes");
            prop_assert_eq!(e.seq, seq);
            prop_assert_eq!(e.domain, domain);
            prop_assert_eq!(e.flags, fl);
            prop_assert_eq!(e.commit_id, (fl & flags::GROUP_COMMIT_ID != 0).then_some(cid));
        }

        #[test]
        fn any_bytes_decode_or_fail_without_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode_gtid_event(&b);
        }

        #[test]
        fn positions_round_trip(m in proptest::collection::btree_map(any::<u32>(), (any::<u32>(), any::<u64>()), 0..5)) {
            let pos = GtidPos(m.into_iter().map(|(d, (s, n))| (d, Gtid { domain: d, server: s, seq: n })).collect());
            prop_assert_eq!(GtidPos::parse(&pos.to_string()).expect("own output parses"), pos);
        }
    }
}
