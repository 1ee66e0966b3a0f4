//! How far behind the primary the cache's binlog follower is, as a pure
//! value: the follower asks the primary where its binary log ends (`SHOW
//! MASTER STATUS`) every so often; every commit made before that question
//! was sent lies at or before the position answered. Once the follower
//! has read (and made stale) everything up to that position, nothing
//! committed before the question's instant can be missing from the cache's
//! invalidations: the follower is caught up to that instant. The cache
//! serves entries only while that instant is within `max_lag` of now.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A place in the primary's binary log: the file's sequence number (the
/// digits after its last dot) and the byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BinPos {
    pub file: u64,
    pub offset: u64,
}

impl BinPos {
    /// `mariadb-bin.000012` at `offset`; `None` for a name without a
    /// number after its last dot (not a binlog file name).
    pub fn of(file: &str, offset: u64) -> Option<BinPos> {
        let (_, n) = file.rsplit_once('.')?;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(BinPos {
            file: n.parse().ok()?,
            offset,
        })
    }
}

/// The questions not yet reached, and the instant caught up to.
#[derive(Debug, Default)]
pub struct CaughtUp {
    /// (when the question was sent, the position answered), oldest first.
    pending: VecDeque<(Instant, BinPos)>,
    read: Option<BinPos>,
    at: Option<Instant>,
}

/// At most this many questions wait to be reached (a follower this far
/// behind is not caught up to any of them anyway).
const MAX_PENDING: usize = 64;

impl CaughtUp {
    /// The follower starts reading at `pos`, the answer to a question sent
    /// at `sent`: caught up to that instant at once.
    pub fn start(sent: Instant, pos: BinPos) -> CaughtUp {
        CaughtUp {
            pending: VecDeque::new(),
            read: Some(pos),
            at: Some(sent),
        }
    }

    /// The primary answered `pos` to a question sent at `sent`.
    pub fn asked(&mut self, sent: Instant, pos: BinPos) {
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_front();
        }
        self.pending.push_back((sent, pos));
        self.advance();
    }

    /// Everything up to `pos` was read and made stale.
    pub fn read_to(&mut self, pos: BinPos) {
        if self.read.is_none_or(|r| pos > r) {
            self.read = Some(pos);
        }
        self.advance();
    }

    fn advance(&mut self) {
        let Some(read) = self.read else { return };
        while let Some(&(sent, pos)) = self.pending.front() {
            if pos > read {
                break;
            }
            self.pending.pop_front();
            if self.at.is_none_or(|a| sent > a) {
                self.at = Some(sent);
            }
        }
    }

    /// The instant the follower is caught up to.
    pub fn at(&self) -> Option<Instant> {
        self.at
    }

    /// How far behind now it is.
    pub fn lag(&self, now: Instant) -> Option<Duration> {
        self.at.map(|a| now.saturating_duration_since(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(file: u64, offset: u64) -> BinPos {
        BinPos { file, offset }
    }

    #[test]
    fn binlog_file_names_order_by_their_number() {
        for (name, want) in [
            ("mariadb-bin.000012", Some(12)),
            ("/var/lib/mysql/log.bin.1000000", Some(1_000_000)),
            ("mariadb-bin", None),
            ("mariadb-bin.", None),
            ("mariadb-bin.00a1", None),
        ] {
            assert_eq!(BinPos::of(name, 4).map(|p| p.file), want, "{name}");
        }
        assert!(p(2, 4) > p(1, 900_000));
        assert!(p(1, 200) > p(1, 100));
    }

    /// One row per timeline: questions asked (ms after t0, position),
    /// positions read, the instant caught up to (ms after t0).
    #[test]
    fn caught_up_to_the_last_question_whose_answer_was_read() {
        enum Step {
            Ask(u64, BinPos),
            Read(BinPos),
        }
        use Step::*;
        let rows: Vec<(&str, Vec<Step>, Option<u64>)> = vec![
            ("just started", vec![], Some(0)),
            (
                "asked, not yet read that far",
                vec![Ask(100, p(1, 500))],
                Some(0),
            ),
            (
                "asked, then read to it",
                vec![Ask(100, p(1, 500)), Read(p(1, 500))],
                Some(100),
            ),
            (
                "read past it before the answer came",
                vec![Read(p(1, 900)), Ask(100, p(1, 500))],
                Some(100),
            ),
            (
                "two questions, read to the first only",
                vec![Ask(100, p(1, 500)), Ask(200, p(1, 800)), Read(p(1, 600))],
                Some(100),
            ),
            (
                "two questions, read to both",
                vec![Ask(100, p(1, 500)), Ask(200, p(1, 800)), Read(p(1, 800))],
                Some(200),
            ),
            (
                "the answer in a later file",
                vec![Ask(100, p(2, 4)), Read(p(1, 999_999))],
                Some(0),
            ),
            (
                "read into the later file",
                vec![Ask(100, p(2, 4)), Read(p(2, 4))],
                Some(100),
            ),
            (
                "an idle primary: the same answer each time",
                vec![
                    Ask(100, p(1, 400)),
                    Ask(200, p(1, 400)),
                    Ask(300, p(1, 400)),
                ],
                Some(300),
            ),
            (
                "a position read never goes back",
                vec![Read(p(1, 900)), Read(p(1, 500)), Ask(100, p(1, 800))],
                Some(100),
            ),
        ];
        for (what, steps, want) in rows {
            let t0 = Instant::now();
            let mut c = CaughtUp::start(t0, p(1, 400));
            for s in steps {
                match s {
                    Ask(ms, pos) => c.asked(t0 + Duration::from_millis(ms), pos),
                    Read(pos) => c.read_to(pos),
                }
            }
            let got = c.at().map(|a| a.duration_since(t0).as_millis() as u64);
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn questions_left_waiting_are_bounded() {
        let t0 = Instant::now();
        let mut c = CaughtUp::start(t0, p(1, 4));
        for i in 0..1000 {
            c.asked(t0 + Duration::from_millis(i), p(1, 1000 + i));
        }
        assert!(c.pending.len() <= MAX_PENDING);
        assert_eq!(c.lag(t0), Some(Duration::ZERO));
    }
}
