//! MariaDB global transaction ids: `domain-server-seq`, positions (one
//! GTID per replication domain, as `@@gtid_binlog_pos` prints them), and
//! the decoding of MariaDB's own GTID event, which the binlog library does
//! not know (MariaDB event type 162).
//!
//! Written by hand because the layout is MariaDB's (log_event.h,
//! `Gtid_log_event`) and small: a fixed prefix we must read exactly, the
//! group commit id or XA id it flags (passed over), then the extra flags
//! when the body goes on — which say, among others, that the group is one
//! phase of an ALTER logged in two (`binlog_alter_two_phase`, MariaDB
//! 10.8+), and which START ALTER a COMMIT or ROLLBACK ALTER ends.
//! Property-tested and fuzzed (`fuzz/fuzz_targets/replicate_event.rs`).

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

    /// The furthest of `gtids` in each domain: what the target applied of
    /// a source, from its floor and every stream's position.
    pub fn furthest<'a>(gtids: impl IntoIterator<Item = &'a Gtid>) -> GtidPos {
        let mut p = GtidPos::default();
        for g in gtids {
            if !p.covers(g) {
                p.advance(*g);
            }
        }
        p
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

    /// This position's GTIDs that `source` has not reached in their domain
    /// (a domain `source` lacks counts as not reached): where a floor is
    /// ahead of the server it says it was read from.
    pub fn ahead_of(&self, source: &GtidPos) -> Vec<Gtid> {
        self.0
            .values()
            .filter(|g| g.seq > source.seq(g.domain))
            .copied()
            .collect()
    }

    /// Why a source cannot be read on from `floor` (what the target has
    /// applied of it) when its own binlog position is `source`: nothing
    /// when the source has reached the floor in every domain. A native
    /// replica stops there too (1236); read on, its next transactions
    /// would take sequence numbers the floor already covers and be passed
    /// over as applied, silently.
    pub fn behind_the_floor(floor: &GtidPos, source: &GtidPos) -> Option<String> {
        let ahead = floor.ahead_of(source);
        if ahead.is_empty() {
            return None;
        }
        let list = ahead
            .iter()
            .map(|g| match source.0.get(&g.domain) {
                Some(at) => format!("{g} applied, the source at {at}"),
                None => format!("{g} applied, the source has no domain {}", g.domain),
            })
            .collect::<Vec<_>>()
            .join("; ");
        Some(format!(
            "the source's binlog is behind what the target applied of it ({list}): its binlog was reset (RESET MASTER), a domain of it deleted (FLUSH BINARY LOGS DELETE_DOMAIN_ID; its next transactions there start again at sequence 1), this is another server that lacks those transactions (a failover to a replica behind it), or a session of it set `gtid_seq_no` below its domain's last (or past the greatest, which wraps to 0; a source without gtid_strict_mode logs it); its next transactions would be taken for applied ones, so it is refused, as a native replica is once the source writes there again (1236). A domain deleted after everything of it was applied is read on from while the source's oldest binlog file still names its end; otherwise point the source at the server it was read from, or copy it again from this server (`sqlfleet replicate seed --force`)"
        ))
    }

    /// The GTID with the highest sequence number over all domains (the
    /// lowest domain on a tie): one fixed name for "where this position
    /// is", for what has no GTID of its own.
    pub fn newest(&self) -> Option<Gtid> {
        self.0
            .values()
            .max_by(|a, b| a.seq.cmp(&b.seq).then(b.domain.cmp(&a.domain)))
            .copied()
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

/// A GTID event's extra flags (`flags_extra`, after the fixed part).
pub mod flags_extra {
    /// The transaction wrote more than one engine (one more byte follows).
    pub const MULTI_ENGINE: u8 = 1;
    pub const START_ALTER: u8 = 2;
    pub const COMMIT_ALTER: u8 = 4;
    pub const ROLLBACK_ALTER: u8 = 8;
    /// MariaDB 11.5+: the source session's thread id follows.
    pub const THREAD_ID: u8 = 16;
    /// Every flag whose meaning is known.
    pub const KNOWN: u8 = MULTI_ENGINE | START_ALTER | COMMIT_ALTER | ROLLBACK_ALTER | THREAD_ID;
}

/// The fields of a MariaDB GTID event the applier needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GtidEvent {
    pub seq: u64,
    pub domain: u32,
    pub flags: u8,
    pub commit_id: Option<u64>,
    /// The extra flags (0 when the body ends before them).
    pub extra: u8,
    /// For a COMMIT or ROLLBACK ALTER: the sequence number of its START
    /// ALTER's group.
    pub start_alter: Option<u64>,
    /// The XA transaction a prepared or completed XA group belongs to.
    pub xid: Option<XaId>,
}

/// An XA transaction's id as the server logs it (format id, global
/// transaction id, branch qualifier; each part at most 64 bytes), kept
/// in place so a GTID event stays a plain value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct XaId {
    pub format: u32,
    gtrid_len: u8,
    bqual_len: u8,
    data: [u8; 128],
}

impl XaId {
    /// `None` when a part is longer than the server allows (64 bytes).
    pub fn new(format: u32, gtrid: &[u8], bqual: &[u8]) -> Option<XaId> {
        if gtrid.len() > 64 || bqual.len() > 64 {
            return None;
        }
        let mut data = [0u8; 128];
        data[..gtrid.len()].copy_from_slice(gtrid);
        data[gtrid.len()..gtrid.len() + bqual.len()].copy_from_slice(bqual);
        Some(XaId {
            format,
            gtrid_len: gtrid.len() as u8,
            bqual_len: bqual.len() as u8,
            data,
        })
    }
    pub fn gtrid(&self) -> &[u8] {
        &self.data[..self.gtrid_len as usize]
    }
    pub fn bqual(&self) -> &[u8] {
        let g = self.gtrid_len as usize;
        &self.data[g..g + self.bqual_len as usize]
    }
}

/// As `XA RECOVER FORMAT='SQL'` and mariadb-binlog write it:
/// `X'6131',X'',1`.
impl std::fmt::Display for XaId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        write!(
            f,
            "X'{}',X'{}',{}",
            hex(self.gtrid()),
            hex(self.bqual()),
            self.format
        )
    }
}

impl std::fmt::Debug for XaId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// Which part of an ALTER logged in two phases a group is
/// (`binlog_alter_two_phase=ON`): the source logs the ALTER's text at its
/// start, and again once it committed or rolled back, each its own GTID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not one: the group is applied as it stands.
    Whole,
    /// The ALTER started on the source; it may still fail there.
    StartAlter,
    /// The ALTER (started at that sequence number) committed.
    CommitAlter(u64),
    /// The ALTER (started at that sequence number) failed or was killed
    /// on the source, which keeps nothing of it.
    RollbackAlter(u64),
}

impl Phase {
    /// Whether the group's statement runs on the target. Only a committed
    /// ALTER does, once: its start would run it before the source knew
    /// whether it succeeds (and a second time at its commit: an index
    /// named by the server, `a_2`, doubled), its rollback not at all.
    pub fn applies(self) -> bool {
        matches!(self, Phase::Whole | Phase::CommitAlter(_))
    }
}

impl GtidEvent {
    /// The group's phase; `Err` says why it cannot be told (a flag whose
    /// meaning is unknown, or two phases at once): the group is refused.
    pub fn phase(&self) -> Result<Phase, String> {
        use flags_extra::*;
        let unknown = self.extra & !KNOWN;
        if unknown != 0 {
            return Err(format!(
                "its GTID event carries extra flags 0x{unknown:02x} whose meaning is not known here"
            ));
        }
        match (
            self.extra & (START_ALTER | COMMIT_ALTER | ROLLBACK_ALTER),
            self.start_alter,
        ) {
            (0, _) => Ok(Phase::Whole),
            (START_ALTER, _) => Ok(Phase::StartAlter),
            (COMMIT_ALTER, Some(s)) => Ok(Phase::CommitAlter(s)),
            (ROLLBACK_ALTER, Some(s)) => Ok(Phase::RollbackAlter(s)),
            (f, _) => Err(format!(
                "its GTID event flags ALTER phases 0x{f:02x} at once"
            )),
        }
    }

    pub fn standalone(&self) -> bool {
        self.flags & flags::STANDALONE != 0
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
    let mut at = 13 + if commit_id.is_some() { 8 } else { 0 };
    let mut xid = None;
    if flags & (flags::PREPARED_XA | flags::COMPLETED_XA) != 0 {
        // format id (4), the two lengths, then gtrid and bqual.
        let missing = || err("GTID event flags an XA id it does not hold");
        let head = body.get(at..at + 6).ok_or_else(missing)?;
        let format = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let (g, b) = (head[4] as usize, head[5] as usize);
        let parts = body.get(at + 6..at + 6 + g + b).ok_or_else(missing)?;
        xid = Some(
            XaId::new(format, &parts[..g], &parts[g..])
                .ok_or_else(|| err("GTID event holds an XA id longer than a server allows"))?,
        );
        at += 6 + g + b;
    }
    // The extra flags when the body goes on (a GTID event without a
    // commit id is padded with zeros to 19 bytes: no flags, then).
    let extra = body.get(at).copied().unwrap_or(0);
    at += 1;
    if extra & flags_extra::MULTI_ENGINE != 0 {
        at += 1;
    }
    let start_alter = if extra & (flags_extra::COMMIT_ALTER | flags_extra::ROLLBACK_ALTER) != 0 {
        Some(u64::from_le_bytes(
            body.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| err("GTID event flags an ALTER's end without its start"))?,
        ))
    } else {
        None
    };
    Ok(GtidEvent {
        seq,
        domain,
        flags,
        commit_id,
        extra,
        start_alter,
        xid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_floor_ahead_of_its_source_is_named_domain_by_domain() {
        // (floor, source, GTIDs of the floor the source has not reached)
        for (floor, source, want) in [
            ("", "", ""),
            ("", "0-1-5", ""),
            ("0-1-3", "0-1-3", ""),
            ("0-1-3", "0-1-9", ""),
            ("0-1-3", "0-2-4", ""),
            ("0-1-3", "0-1-1", "0-1-3"),
            ("0-1-3", "", "0-1-3"),
            ("0-1-3", "5-1-9", "0-1-3"),
            ("0-1-3,5-1-2", "0-1-3,5-1-1", "5-1-2"),
            ("0-1-3,5-1-2", "0-2-1", "0-1-3,5-1-2"),
        ] {
            let (f, s) = (
                GtidPos::parse(floor).expect("f"),
                GtidPos::parse(source).expect("s"),
            );
            let got: Vec<String> = f.ahead_of(&s).iter().map(|g| g.to_string()).collect();
            assert_eq!(got.join(","), want, "floor {floor} source {source}");
            let why = GtidPos::behind_the_floor(&f, &s);
            assert_eq!(why.is_some(), !want.is_empty(), "{floor} {source}");
            if let Some(why) = why {
                // Each way a source comes to be behind (a domain deleted
                // on purpose among them: measured on 10.11, its next
                // transaction there was 5-1-1 after 5-1-2).
                for cause in ["RESET MASTER", "DELETE_DOMAIN_ID", "another server"] {
                    assert!(why.contains(cause), "{cause}: {why}");
                }
            }
        }
    }

    #[test]
    fn the_furthest_gtid_of_each_domain_is_kept() {
        // (GTIDs in the order read, what they reach)
        for (gtids, want) in [
            ("", ""),
            ("0-1-3", "0-1-3"),
            ("0-1-3,0-1-2", "0-1-3"),
            ("0-1-2,0-1-3", "0-1-3"),
            ("0-1-3,0-2-3", "0-1-3"),
            ("0-1-3,0-2-4", "0-2-4"),
            ("0-1-9,5-1-2,0-1-4,5-3-7", "0-1-9,5-3-7"),
        ] {
            let list: Vec<Gtid> = gtids
                .split(',')
                .filter(|g| !g.is_empty())
                .map(|g| g.parse().expect("gtid"))
                .collect();
            assert_eq!(GtidPos::furthest(&list).to_string(), want, "{gtids}");
        }
    }

    #[test]
    fn the_newest_gtid_of_a_position_is_one_fixed_choice() {
        for (pos, want) in [
            ("", None),
            ("0-1-5", Some("0-1-5")),
            ("0-1-5,7-107-3", Some("0-1-5")),
            ("0-1-5,7-107-9", Some("7-107-9")),
            ("3-1-9,7-107-9", Some("3-1-9")),
        ] {
            let got = GtidPos::parse(pos).expect("a position").newest();
            assert_eq!(got.map(|g| g.to_string()).as_deref(), want, "{pos}");
        }
    }

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

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// GTID event bodies (without header and CRC32) from a MariaDB 10.11
    /// binlog, `binlog_alter_two_phase=ON`: `mariadb-binlog` calls them
    /// "START ALTER", "COMMIT ALTER id=22", "ROLLBACK ALTER id=15"; then
    /// what an event says of its phase, and bodies that lie.
    #[test]
    fn the_phase_of_an_alter_logged_in_two_is_read_from_the_extra_flags() {
        let rows: &[(&str, Result<Phase, &str>)] = &[
            (
                "16000000000000000000000029020000000000",
                Ok(Phase::StartAlter),
            ),
            (
                "17000000000000000000000029041600000000000000",
                Ok(Phase::CommitAlter(0x16)),
            ),
            (
                "10000000000000000000000029080f00000000000000",
                Ok(Phase::RollbackAlter(0x0f)),
            ),
            // A plain DDL (padded with zeros) and a transaction with a
            // commit id and no extra flags.
            ("05000000000000000000000029000000000000", Ok(Phase::Whole)),
            (
                "0500000000000000000000000e0900000000000000",
                Ok(Phase::Whole),
            ),
            // Multi-engine (one more byte), then the COMMIT ALTER's start.
            (
                "1700000000000000000000002905020b00000000000000",
                Ok(Phase::CommitAlter(0x0b)),
            ),
            // The thread id of 11.5+ after a start.
            (
                "160000000000000000000000291207000000",
                Ok(Phase::StartAlter),
            ),
            // Unknown flags, two phases, an end without its start.
            ("16000000000000000000000029200000000000", Err("not known")),
            (
                "16000000000000000000000029060000000000000000",
                Err("at once"),
            ),
            ("170000000000000000000000290416", Err("without its start")),
        ];
        for (body, want) in rows {
            let got = decode_gtid_event(&hex(body))
                .map_err(|e| e.what)
                .and_then(|g| g.phase());
            match (want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "{body}"),
                (Err(w), Err(g)) => assert!(g.contains(w), "{body}: {g}"),
                _ => panic!("{body}: {got:?}, not {want:?}"),
            }
        }
        assert!(Phase::Whole.applies() && Phase::CommitAlter(1).applies());
        assert!(!Phase::StartAlter.applies() && !Phase::RollbackAlter(1).applies());
    }

    /// An XA group's id is passed over to the extra flags behind it.
    #[test]
    fn the_extra_flags_after_an_xa_id_are_read() {
        let mut b = 9u64.to_le_bytes().to_vec();
        b.extend(0u32.to_le_bytes());
        b.push(flags::PREPARED_XA);
        b.extend(1u32.to_le_bytes());
        b.extend([2, 1]);
        b.extend(b"abc");
        b.push(flags_extra::MULTI_ENGINE);
        b.push(2);
        let e = decode_gtid_event(&b).expect("decodes");
        assert_eq!((e.extra, e.start_alter), (flags_extra::MULTI_ENGINE, None));
        let xid = e.xid.expect("the XA id");
        assert_eq!(
            (xid.gtrid(), xid.bqual(), xid.format),
            (&b"ab"[..], &b"c"[..], 1)
        );
        assert_eq!(xid.to_string(), "X'6162',X'63',1");
        assert!(decode_gtid_event(&b[..17]).is_err(), "an XA id cut short");
        assert!(decode_gtid_event(&b[..20]).is_err(), "an XA id cut short");
        // A part longer than a server allows.
        let mut long = b[..19].to_vec();
        long[17..19].copy_from_slice(&[65, 0]);
        long.extend([b'x'; 66]);
        assert!(decode_gtid_event(&long).is_err(), "a 65-byte gtrid");
        assert_eq!(
            XaId::new(1, &[b'a'; 64], &[b'b'; 64]).map(|x| x.bqual().len()),
            Some(64)
        );
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
        fn gtid_event_round_trips(
            seq: u64,
            domain: u32,
            fl: u8,
            cid: u64,
            xa_id in proptest::collection::vec(any::<u8>(), 0..20),
            extra in prop_oneof![Just(0u8), Just(1), Just(2), Just(4), Just(8), Just(5), Just(16), Just(18)],
            start: u64,
            pad in 0usize..6,
        ) {
            let mut b = seq.to_le_bytes().to_vec();
            b.extend(domain.to_le_bytes());
            b.push(fl);
            if fl & flags::GROUP_COMMIT_ID != 0 { b.extend(cid.to_le_bytes()); }
            if fl & (flags::PREPARED_XA | flags::COMPLETED_XA) != 0 {
                b.extend(1u32.to_le_bytes());
                let g = xa_id.len() / 2;
                b.extend([g as u8, (xa_id.len() - g) as u8]);
                b.extend(&xa_id);
            }
            b.push(extra);
            if extra & flags_extra::MULTI_ENGINE != 0 { b.push(3); }
            if extra & (flags_extra::COMMIT_ALTER | flags_extra::ROLLBACK_ALTER) != 0 { b.extend(start.to_le_bytes()); }
            if extra & flags_extra::THREAD_ID != 0 { b.extend(7u32.to_le_bytes()); }
            b.extend(std::iter::repeat_n(0, pad));
            let e = decode_gtid_event(&b).expect("a well-formed body decodes");
            prop_assert_eq!(e.seq, seq);
            prop_assert_eq!(e.domain, domain);
            prop_assert_eq!(e.flags, fl);
            prop_assert_eq!(e.commit_id, (fl & flags::GROUP_COMMIT_ID != 0).then_some(cid));
            prop_assert_eq!(e.extra, extra);
            let ends = extra & (flags_extra::COMMIT_ALTER | flags_extra::ROLLBACK_ALTER) != 0;
            prop_assert_eq!(e.start_alter, ends.then_some(start));
            prop_assert!(e.phase().is_ok());
            if fl & (flags::PREPARED_XA | flags::COMPLETED_XA) != 0 {
                let x = e.xid.expect("an XA id");
                let g = xa_id.len() / 2;
                prop_assert_eq!((x.gtrid(), x.bqual()), (&xa_id[..g], &xa_id[g..]));
            } else {
                prop_assert!(e.xid.is_none());
            }
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
