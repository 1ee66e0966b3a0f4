//! What the server says it did with the rows it was sent: the info text of
//! a LOAD DATA or multi-row INSERT reply (`Records: 1000  Deleted: 0
//! Skipped: 1000  Warnings: 1000`, `Records: 3  Duplicates: 1  Warnings:
//! 0`), added up over a load. These are the server's own figures, so a
//! summary can say how many rows were skipped or warned about instead of
//! "no errors". Written by hand: a handful of `Name: number` pairs, with
//! each name the server may write known and anything else refused (a reply
//! the relay cannot read is not taken as zero).

use serde::Serialize;

/// Rows the server read, inserted, skipped and deleted, and its warnings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ServerCounts {
    /// Rows the server read (LOAD DATA) or was sent (INSERT).
    pub records: u64,
    /// Rows it skipped: duplicates under IGNORE or LOAD DATA LOCAL.
    pub skipped: u64,
    /// Rows REPLACE deleted to make room.
    pub deleted: u64,
    pub warnings: u64,
}

impl ServerCounts {
    /// The counts in a reply's info text; `None` for a text this does not
    /// read (no `Records:`, an unknown name, a number that is not one).
    pub fn from_info(info: &str) -> Option<ServerCounts> {
        let mut c = ServerCounts::default();
        let mut seen_records = false;
        let mut words = info.split_whitespace();
        while let Some(name) = words.next() {
            let value: u64 = words.next()?.parse().ok()?;
            match name {
                "Records:" => {
                    c.records = value;
                    seen_records = true;
                }
                "Skipped:" => c.skipped = value,
                // An INSERT's duplicates: skipped under IGNORE, replaced
                // (deleted, then inserted) under REPLACE or ON DUPLICATE KEY.
                "Duplicates:" => c.skipped = value,
                "Deleted:" => c.deleted = value,
                "Warnings:" => c.warnings = value,
                _ => return None,
            }
        }
        seen_records.then_some(c)
    }

    /// The counts of a reply without info (a one-row INSERT): the rows it
    /// changed and its warning count, from the OK packet itself.
    pub fn from_ok(affected: u64, warnings: u16) -> ServerCounts {
        ServerCounts {
            records: affected,
            warnings: u64::from(warnings),
            ..ServerCounts::default()
        }
    }

    pub fn add(&mut self, o: ServerCounts) {
        self.records += o.records;
        self.skipped += o.skipped;
        self.deleted += o.deleted;
        self.warnings += o.warnings;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_info_texts() {
        // (info, Some((records, skipped, deleted, warnings)))
        type Row<'a> = (&'a str, Option<(u64, u64, u64, u64)>);
        let rows: &[Row] = &[
            (
                "Records: 1000  Deleted: 0  Skipped: 1000  Warnings: 1000",
                Some((1000, 1000, 0, 1000)),
            ),
            (
                "Records: 3  Deleted: 2  Skipped: 0  Warnings: 0",
                Some((3, 0, 2, 0)),
            ),
            ("Records: 3  Duplicates: 1  Warnings: 2", Some((3, 1, 0, 2))),
            ("", None),
            ("Rows matched: 1  Changed: 1  Warnings: 0", None),
            ("Records: many", None),
            ("Records: 3  Duplicates:", None),
            ("Records: -1", None),
        ];
        for (text, want) in rows {
            let got = ServerCounts::from_info(text)
                .map(|c| (c.records, c.skipped, c.deleted, c.warnings));
            assert_eq!(got, *want, "{text:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = ServerCounts::from_info(&s);
        }
    }
}
