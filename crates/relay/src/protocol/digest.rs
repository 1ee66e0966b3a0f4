//! A reply's digest: what a client saw of a statement's reply, as one
//! 128-bit value, so that the statement run again elsewhere can be shown
//! to give the same answer (transaction replay, `frontend/session/replay.rs`).
//!
//! Digested: every payload byte of the reply's packets that are not
//! status packets (column counts, column definitions, rows), then the
//! reply's affected rows, last insert id (unless left out), error code,
//! result sets and rows. Left out: packet headers (sequence numbers), OK,
//! EOF and ERR packets themselves (status flags, warnings, session-tracker
//! data and error texts differ between servers and connections for the
//! same answer). Both readers of a reply feed it the same way: the
//! forwarding loop (`io.rs`, span by span as bytes arrive) and the relay's
//! own reader (`backend/command.rs` `command_digest`, packet by packet);
//! XXH3's streaming hash gives the same value however the bytes are cut.

use twox_hash::xxhash3_128;

/// What a reply's digest leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Leave {
    /// Nothing: a different generated key is a different answer.
    #[default]
    Nothing,
    /// The last insert id (an application that never reads generated
    /// keys, on servers that hand them out differently, as Galera nodes
    /// with `wsrep_auto_increment_control` do).
    InsertIds,
}

/// What a reply ended with, as far as the digest counts it (the reply
/// tracker's outcome gives it: `reply::Outcome::answer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Answer {
    pub affected: u64,
    pub insert_id: u64,
    /// The error's code (0: none); its text is not the answer.
    pub error: u16,
    pub result_sets: u32,
    pub rows: u64,
}

/// A digest being taken as a reply streams past.
pub struct ReplyDigest {
    h: xxhash3_128::Hasher,
    /// The current packet's payload is digested.
    on: bool,
}

impl Default for ReplyDigest {
    fn default() -> Self {
        ReplyDigest {
            h: xxhash3_128::Hasher::new(),
            on: false,
        }
    }
}

impl std::fmt::Debug for ReplyDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyDigest").field("on", &self.on).finish()
    }
}

impl Clone for ReplyDigest {
    /// A fresh digest: a reply's digest is never copied midway.
    fn clone(&self) -> Self {
        ReplyDigest::default()
    }
}

impl ReplyDigest {
    /// A packet starts; `counted`: its payload is part of the answer (not
    /// a status packet).
    pub fn packet(&mut self, counted: bool) {
        self.on = counted;
    }

    /// Payload bytes of the current packet, in order (any cut).
    pub fn bytes(&mut self, b: &[u8]) {
        if self.on {
            self.h.write(b);
        }
    }

    /// The digest of the whole reply, which ended with `o`.
    pub fn finish(mut self, o: Answer, leave: Leave) -> u128 {
        self.on = true;
        let insert_id = match leave {
            Leave::Nothing => o.insert_id,
            Leave::InsertIds => 0,
        };
        let code = o.error;
        // A separator no payload byte sequence can fake: the fields'
        // position is fixed after the payload.
        for v in [
            o.affected,
            insert_id,
            u64::from(code),
            u64::from(o.result_sets),
            o.rows,
        ] {
            self.h.write(&v.to_le_bytes());
        }
        self.h.finish_128()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(affected: u64, insert_id: u64, code: Option<u16>) -> Answer {
        Answer {
            affected,
            insert_id,
            error: code.unwrap_or(0),
            ..Answer::default()
        }
    }

    fn digest(packets: &[(&[u8], bool)], o: &Answer, leave: Leave, cut: usize) -> u128 {
        let mut d = ReplyDigest::default();
        for (p, counted) in packets {
            d.packet(*counted);
            for chunk in p.chunks(cut.max(1)) {
                d.bytes(chunk);
            }
        }
        d.finish(*o, leave)
    }

    #[test]
    fn the_same_answer_cut_anywhere_is_the_same_digest() {
        let rows: &[(&[u8], bool)] =
            &[(b"\x01", true), (b"\x03def\x02id", true), (b"\x0212", true)];
        let o = outcome(0, 0, None);
        let whole = digest(rows, &o, Leave::Nothing, 1000);
        for cut in 1..6 {
            assert_eq!(digest(rows, &o, Leave::Nothing, cut), whole, "cut {cut}");
        }
    }

    #[test]
    fn status_packets_do_not_count_and_everything_else_does() {
        let o = outcome(1, 0, None);
        let a = digest(&[(b"\x00\x01\x00\x02\x00", false)], &o, Leave::Nothing, 8);
        let b = digest(
            &[(b"\x00\x01\x00\x03\x40\x00", false)],
            &o,
            Leave::Nothing,
            8,
        );
        assert_eq!(
            a, b,
            "OK packets' status flags and tracker data are not the answer"
        );
        let r1 = digest(&[(b"\x0210", true)], &o, Leave::Nothing, 8);
        let r2 = digest(&[(b"\x0211", true)], &o, Leave::Nothing, 8);
        assert_ne!(r1, r2, "a different row is a different answer");
    }

    #[test]
    fn the_outcome_counts_by_field() {
        let p: &[(&[u8], bool)] = &[];
        let base = digest(p, &outcome(1, 7, None), Leave::Nothing, 8);
        // (affected, insert id, error code) each change it.
        for o in [
            outcome(2, 7, None),
            outcome(1, 8, None),
            outcome(1, 7, Some(1062)),
        ] {
            assert_ne!(digest(p, &o, Leave::Nothing, 8), base, "{o:?}");
        }
        // Left out on request: the insert id only.
        assert_eq!(
            digest(p, &outcome(1, 8, None), Leave::InsertIds, 8),
            digest(p, &outcome(1, 7, None), Leave::InsertIds, 8)
        );
        assert_ne!(
            digest(p, &outcome(2, 8, None), Leave::InsertIds, 8),
            digest(p, &outcome(1, 7, None), Leave::InsertIds, 8)
        );
        // The error's code is the answer (its text is not even read).
        assert_ne!(
            digest(p, &outcome(0, 0, Some(1062)), Leave::Nothing, 8),
            digest(p, &outcome(0, 0, Some(1213)), Leave::Nothing, 8)
        );
    }
}
