//! A GTID domain the source deleted (`FLUSH BINARY LOGS DELETE_DOMAIN_ID`)
//! after the target applied all of it, as a value.
//!
//! The server deletes a domain only when no binlog file holds a
//! transaction of it any more (it refuses with 1076 otherwise: "binlog
//! files may contain gtids from the domain"), so the domain's last GTID
//! survives only in the Gtid_list event of the oldest file, until that
//! file is purged; the files after the deletion list no such domain, and
//! a transaction written in it later starts again at sequence 1. Measured
//! on MariaDB 10.11.19 with the server's binlog dump (what a replica and
//! this reader ask for): a start position holding the deleted domain at
//! its last GTID is taken while the oldest file lists it, and after that
//! file is purged; one without it is refused (1236, "Could not find GTID
//! state") while a file to be read lists it; once the domain is written
//! again, a position holding its old GTID is refused ("not in the
//! master's binlog"), and a session that asked for it before is passed
//! over the new transaction with that same GTID.
//!
//! A floor that keeps such a domain stops the source for good (its binlog
//! is behind the floor there: `GtidPos::behind_the_floor`), and a floor
//! that dropped it by guess could pass over transactions never applied.
//! So the domain is *retired* only on the server's word: the oldest
//! file's Gtid_list names, as the domain's end, exactly the GTID the
//! target applied last in it — nothing of it was left unread. Retired, it
//! leaves the floor (its next transactions, from sequence 1, are new
//! ones) and its end is recorded (`sqlfleet.replicate_retired`): the
//! source is asked for the floor alone, and for the domain at its end
//! only when it refuses that ([`connect_state`]), in a session that ends
//! where the files stop listing the domain ([`unlisted`]). Anything else
//! — no file lists it any more, or the list names another end — stays
//! refused, naming the operator's way on: `replicate retire-domain`
//! ([`operator_may_retire`]) or a new copy.
//!
//! Pure; source/open.rs and status.rs ask the source and carry the
//! answer out.

use std::collections::BTreeMap;

use crate::gtid::{Gtid, GtidPos};

/// What is known of a domain the target applied of the source and the
/// source's binlog no longer has at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The oldest binlog file names `end`, the last GTID applied, as the
    /// domain's end: every transaction of it was applied.
    Retire { end: Gtid },
    /// The oldest file names an end the target has not applied: the
    /// transactions after `applied` up to `listed` were purged unread.
    Lost { applied: Gtid, listed: Gtid },
    /// No file lists the domain, or lists another history of it (another
    /// server id, an end before what was applied): not known.
    Unknown { applied: Gtid, listed: Option<Gtid> },
}

/// Each domain of `reached` (what the target applied of the source) that
/// `source` (its `@@gtid_binlog_pos`) does not have, judged by
/// `oldest_list` (the Gtid_list of the source's oldest binlog file, every
/// server's GTID of each domain, as the server prints it).
pub fn deleted(reached: &GtidPos, source: &GtidPos, oldest_list: &[Gtid]) -> Vec<Deleted> {
    let ends = GtidPos::furthest(oldest_list);
    reached
        .0
        .values()
        .filter(|g| !source.0.contains_key(&g.domain))
        .map(|&applied| match ends.0.get(&applied.domain).copied() {
            Some(listed) if listed == applied => Deleted::Retire { end: applied },
            Some(listed) if listed.seq > applied.seq => Deleted::Lost { applied, listed },
            listed => Deleted::Unknown { applied, listed },
        })
        .collect()
}

/// A Gtid_list event's text as `SHOW BINLOG EVENTS` prints it:
/// `[0-1-3,5-1-2]` (`[]` when empty). `None` when it is not one.
pub fn parse_list(info: &str) -> Option<Vec<Gtid>> {
    let inner = info.trim().strip_prefix('[')?.strip_suffix(']')?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse().ok())
        .collect()
}

/// The position to ask the source for when it refuses the floor `start`
/// (1236): with each retired domain's end while the source
/// (`@@gtid_binlog_pos`) has no such domain — the server wants it while
/// a file to be read lists it. Only then: asked for a domain it no longer
/// lists, the server passes over that domain's transactions until it
/// meets that GTID — the domain's new ones, from sequence 1, among them
/// (measured: a new 26-123-1 after the old end 26-123-1 was never sent).
/// So a session asked this way ends at the first file that does not list
/// the domain ([`unlisted`]), and the next asks from the floor alone.
pub fn connect_state(start: &GtidPos, retired: &BTreeMap<u32, Gtid>, source: &GtidPos) -> GtidPos {
    let mut p = start.clone();
    for (d, end) in retired {
        if !source.0.contains_key(d) && !p.0.contains_key(d) {
            p.advance(*end);
        }
    }
    p
}

/// What a reader does about domains the source no longer has.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Judged {
    /// Domains to retire, at their ends.
    pub retire: Vec<Gtid>,
    /// Why the source is refused (behind the floor in a domain it has,
    /// or a domain it lacks that cannot be retired), if it is.
    pub refused: Option<String>,
}

/// `reached` (what the target applied of the source) against `source`
/// (its `@@gtid_binlog_pos`), with `oldest`, the Gtid_list of the
/// source's oldest binlog file — or why it could not be read; only
/// consulted when the source lacks a domain.
pub fn judge(
    name: &str,
    reached: &GtidPos,
    source: &GtidPos,
    oldest: Result<&[Gtid], &str>,
) -> Judged {
    let verdicts = deleted(reached, source, oldest.unwrap_or(&[]));
    let mut rest = reached.clone();
    let mut reasons = Vec::new();
    let mut retire = Vec::new();
    for v in &verdicts {
        match (v, v.refusal(name)) {
            (Deleted::Retire { end }, _) => {
                rest.0.remove(&end.domain);
                retire.push(*end);
            }
            (_, Some(why)) => reasons.push(why),
            (_, None) => {}
        }
    }
    if let Err(e) = oldest {
        if !reasons.is_empty() {
            reasons.push(format!("(its binlog files could not be read: {e})"));
        }
    }
    let refused = GtidPos::behind_the_floor(&rest, source).map(|why| {
        reasons.push(why);
        reasons.join("; ")
    });
    Judged { retire, refused }
}

/// Whether every domain in which `read` is ahead of `source` (its
/// `@@gtid_binlog_pos`) is one the source has no longer at all — a reader
/// following it ends its session for the next to judge them ([`judge`]);
/// behind in a domain it has, the source is refused at once (true, too,
/// when `read` is nowhere ahead).
pub fn only_gone(read: &GtidPos, source: &GtidPos) -> bool {
    read.ahead_of(source)
        .iter()
        .all(|g| !source.0.contains_key(&g.domain))
}

/// A retired domain of `asked` that binlog event `ev`, a Gtid_list
/// event (a binlog file's start), does not list: the file was written
/// after the domain was deleted. `None` for any other event.
pub fn unlisted(
    asked: &std::collections::BTreeSet<u32>,
    ev: &mysql_common::binlog::events::Event,
) -> Option<u32> {
    if asked.is_empty() || ev.header().event_type_raw() != crate::event::mariadb::GTID_LIST {
        return None;
    }
    let listed = list_domains(ev.data())?;
    asked.iter().copied().find(|d| !listed.contains(d))
}

/// The domains a Gtid_list event's body names: a count (its low 28
/// bits; the high 4 are flags), then domain, server (4 bytes each) and
/// sequence number (8) per GTID, little-endian. `None` when the body is
/// shorter than its count says.
pub fn list_domains(body: &[u8]) -> Option<std::collections::BTreeSet<u32>> {
    let count = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) & 0x0fff_ffff;
    (0..count as usize)
        .map(|i| {
            let at = 4 + i * 16;
            Some(u32::from_le_bytes(body.get(at..at + 4)?.try_into().ok()?))
        })
        .collect()
}

/// Whether an operator may retire domain `end.domain` at `end` (`replicate
/// retire-domain`: the source's binlog no longer says where the domain
/// ended, and the operator knows): `end` must be the GTID the target
/// applied last there (`reached`), and the source (`@@gtid_binlog_pos`)
/// must not have the domain at all. Having it past `end`, its
/// transactions could not be told from the applied ones; below `end`, it
/// may as well be another server's history of the domain (a failover to
/// a replica behind the target), whose transactions before `end` the
/// target has: read from the domain's start, they would be applied twice.
pub fn operator_may_retire(reached: &GtidPos, source: &GtidPos, end: Gtid) -> Result<(), String> {
    let d = end.domain;
    match reached.0.get(&d) {
        None => Err(format!(
            "the target has no position in domain {d} for this source (never read, or retired already)"
        )),
        Some(applied) if *applied != end => Err(format!(
            "the target applied domain {d} up to {applied}, not {end}: name the GTID applied last (`replicate status` shows the floor)"
        )),
        Some(_) => match source.0.get(&d) {
            Some(at) => Err(format!(
                "the source has domain {d} (at {at}): it was not deleted, or was written again since, or is another server's history of it, and which of its transactions the target has cannot be told; copy the source again (`replicate seed --force`)"
            )),
            None => Ok(()),
        },
    }
}

impl Deleted {
    /// Why source `name` is still refused for this domain (`None`:
    /// retired), with the operator's way on.
    pub fn refusal(&self, name: &str) -> Option<String> {
        match self {
            Deleted::Retire { .. } => None,
            Deleted::Lost { applied, listed } => Some(format!(
                "domain {} ended at {listed} on the source, whose binlog no longer has it (deleted, FLUSH BINARY LOGS DELETE_DOMAIN_ID), but the target applied it only to {applied}: the transactions between were purged before they were read (copy the source again, `sqlfleet replicate seed --config FILE --source {name} --force`; or, accepting they are missing on the target, `sqlfleet replicate retire-domain --config FILE --source {name} --gtid {applied}`)",
                applied.domain
            )),
            Deleted::Unknown { applied, listed } => Some(format!(
                "domain {} is not in the source's binlog (deleted with FLUSH BINARY LOGS DELETE_DOMAIN_ID, or RESET MASTER), and {}: whether the target applied all of it ({applied} last) cannot be told from the source",
                applied.domain,
                match listed {
                    Some(l) => format!("its oldest binlog file names {l} as the domain's end, another history"),
                    None => "no binlog file left names where the domain ended".to_string(),
                }
            ) + &format!(" (if it did, say so: `sqlfleet replicate retire-domain --config FILE --source {name} --gtid {applied}`)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(s: &str) -> GtidPos {
        GtidPos::parse(s).expect("position")
    }

    #[test]
    fn a_domain_is_retired_only_when_the_oldest_file_names_its_end_as_applied() {
        // (applied, the source's position, the oldest file's Gtid_list,
        // the verdict per domain the source lacks)
        for (reached, source, list, want) in [
            // Nothing missing: nothing to judge.
            ("0-1-9", "0-1-9", "[0-1-3]", vec![]),
            ("0-1-9,5-1-2", "0-1-9,5-1-1", "[0-1-3,5-1-2]", vec![]),
            // The measured case: deleted at 5-1-2, the oldest file lists it.
            (
                "0-1-4,5-1-2",
                "0-1-4",
                "[0-1-3,5-1-2]",
                vec![Deleted::Retire {
                    end: "5-1-2".parse().expect("g"),
                }],
            ),
            // Every server of the domain listed: its end is the furthest.
            (
                "0-1-4,5-2-7",
                "0-1-4",
                "[0-1-3,5-1-2,5-2-7]",
                vec![Deleted::Retire {
                    end: "5-2-7".parse().expect("g"),
                }],
            ),
            // Purged unread: the list ends further than applied.
            (
                "0-1-4,5-1-2",
                "0-1-4",
                "[0-1-3,5-1-6]",
                vec![Deleted::Lost {
                    applied: "5-1-2".parse().expect("g"),
                    listed: "5-1-6".parse().expect("g"),
                }],
            ),
            // The file that listed it is purged too.
            (
                "0-1-4,5-1-2",
                "0-1-4",
                "[0-1-3]",
                vec![Deleted::Unknown {
                    applied: "5-1-2".parse().expect("g"),
                    listed: None,
                }],
            ),
            // RESET MASTER: an empty list.
            (
                "0-1-4",
                "",
                "[]",
                vec![Deleted::Unknown {
                    applied: "0-1-4".parse().expect("g"),
                    listed: None,
                }],
            ),
            // Another history: the same sequence number by another server,
            // or an end before what was applied.
            (
                "0-1-4,5-1-2",
                "0-1-4",
                "[0-1-3,5-3-2]",
                vec![Deleted::Unknown {
                    applied: "5-1-2".parse().expect("g"),
                    listed: Some("5-3-2".parse().expect("g")),
                }],
            ),
            (
                "0-1-4,5-1-2",
                "0-1-4",
                "[0-1-3,5-1-1]",
                vec![Deleted::Unknown {
                    applied: "5-1-2".parse().expect("g"),
                    listed: Some("5-1-1".parse().expect("g")),
                }],
            ),
        ] {
            let list = parse_list(list).expect("a list");
            let got = deleted(&pos(reached), &pos(source), &list);
            assert_eq!(got, want, "{reached} / {source} / {list:?}");
            for d in &got {
                assert_eq!(
                    d.refusal("eu").is_none(),
                    matches!(d, Deleted::Retire { .. }),
                    "{d:?}"
                );
            }
        }
    }

    #[test]
    fn a_source_lacking_a_domain_is_retired_there_and_judged_on_the_rest() {
        let list = parse_list("[0-1-3,5-1-2,7-1-9]").expect("list");
        // (applied, the source, retired, refused naming)
        for (reached, source, oldest, retire, refused) in [
            ("0-1-4", "0-1-4", Ok(&list[..]), "", None),
            ("0-1-4,5-1-2", "0-1-4", Ok(&list[..]), "5-1-2", None),
            // Retired where the list says, refused where it cannot.
            (
                "0-1-4,5-1-2,7-1-3",
                "0-1-4",
                Ok(&list[..]),
                "5-1-2",
                Some("purged before they were read"),
            ),
            // Retired, and behind in a domain it has: refused for that.
            (
                "0-1-4,5-1-2",
                "0-1-1",
                Ok(&list[..]),
                "5-1-2",
                Some("0-1-4 applied, the source at 0-1-1"),
            ),
            // The list could not be read: nothing retired, the reason said.
            (
                "0-1-4,5-1-2",
                "0-1-4",
                Err("1227 (42000): Access denied"),
                "",
                Some("could not be read: 1227"),
            ),
        ] {
            let j = judge("eu", &pos(reached), &pos(source), oldest);
            let got: Vec<String> = j.retire.iter().map(|g| g.to_string()).collect();
            assert_eq!(got.join(","), retire, "{reached} / {source}");
            match (refused, &j.refused) {
                (None, None) => {}
                (Some(want), Some(why)) => {
                    assert!(why.contains(want), "{reached} / {source}: {why}")
                }
                (want, got) => panic!("{reached} / {source}: {want:?} vs {got:?}"),
            }
        }
    }

    #[test]
    fn a_gtid_list_event_body_names_its_domains() {
        let gtid = |d: u32, s: u32, n: u64| {
            let mut v = d.to_le_bytes().to_vec();
            v.extend(s.to_le_bytes());
            v.extend(n.to_le_bytes());
            v
        };
        let body = |count: u32, gtids: &[Vec<u8>]| {
            let mut v = count.to_le_bytes().to_vec();
            gtids.iter().for_each(|g| v.extend(g));
            v
        };
        let set = |d: &[u32]| Some(d.iter().copied().collect());
        assert_eq!(list_domains(&body(0, &[])), set(&[]));
        assert_eq!(
            list_domains(&body(2, &[gtid(0, 1, 3), gtid(5, 1, 2)])),
            set(&[0, 5])
        );
        // Flags in the high bits; a checksum after the list.
        let mut b = body(0x1000_0001, &[gtid(7, 2, 9)]);
        b.extend([1, 2, 3, 4]);
        assert_eq!(list_domains(&b), set(&[7]));
        // Shorter than its count.
        assert_eq!(list_domains(&body(2, &[gtid(0, 1, 3)])), None);
        assert_eq!(list_domains(&[1, 0]), None);
    }

    #[test]
    fn an_operator_retires_a_domain_only_at_the_end_applied_and_one_the_source_lacks() {
        // (applied, the source, the end stated, refused naming)
        for (reached, source, end, refused) in [
            ("0-1-4,5-1-2", "0-1-9", "5-1-2", None),
            // Written again, or another server's history: not told apart.
            (
                "0-1-4,5-1-2",
                "0-1-9,5-1-1",
                "5-1-2",
                Some("the source has domain 5 (at 5-1-1)"),
            ),
            (
                "0-1-4,5-1-2",
                "0-1-9",
                "5-1-1",
                Some("up to 5-1-2, not 5-1-1"),
            ),
            (
                "0-1-4,5-1-2",
                "0-1-9",
                "5-2-2",
                Some("up to 5-1-2, not 5-2-2"),
            ),
            ("0-1-4", "0-1-9", "5-1-2", Some("no position in domain 5")),
            (
                "0-1-4,5-1-2",
                "0-1-9,5-1-2",
                "5-1-2",
                Some("has domain 5 (at"),
            ),
            (
                "0-1-4,5-1-2",
                "0-1-9,5-3-8",
                "5-1-2",
                Some("has domain 5 (at 5-3-8)"),
            ),
        ] {
            let got = operator_may_retire(&pos(reached), &pos(source), end.parse().expect("g"));
            match (refused, got) {
                (None, Ok(())) => {}
                (Some(want), Err(why)) => {
                    assert!(why.contains(want), "{reached} {source} {end}: {why}")
                }
                (want, got) => panic!("{reached} {source} {end}: {want:?} vs {got:?}"),
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_or_text_read_as_a_list_or_refused(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80), t in ".{0,40}") {
            if let Some(d) = list_domains(&b) {
                let count = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & 0x0fff_ffff;
                proptest::prop_assert!(d.len() <= count as usize);
                proptest::prop_assert!(b.len() >= 4 + 16 * count as usize);
            }
            if let Some(l) = parse_list(&t) {
                let again = format!("[{}]", l.iter().map(|g| g.to_string()).collect::<Vec<_>>().join(","));
                proptest::prop_assert_eq!(parse_list(&again), Some(l));
            }
        }
    }

    #[test]
    fn a_reader_ends_for_a_domain_gone_and_is_refused_for_one_behind() {
        // (read, the source, only gone)
        for (read, source, want) in [
            ("0-1-4", "0-1-4", true),
            ("0-1-4,5-1-2", "0-1-4", true),
            ("0-1-4,5-1-2,6-1-1", "0-1-9", true),
            ("0-1-4,5-1-2", "0-1-4,5-1-1", false),
            ("0-1-4,5-1-2", "0-1-1", false),
            ("0-1-4,5-1-2", "", true),
        ] {
            assert_eq!(
                only_gone(&pos(read), &pos(source)),
                want,
                "{read} / {source}"
            );
        }
    }

    #[test]
    fn gtid_list_text_as_the_server_prints_it() {
        for (info, want) in [
            ("[]", Some(vec![])),
            ("[0-1-3]", Some(vec!["0-1-3"])),
            ("[0-1-3,5-1-2]", Some(vec!["0-1-3", "5-1-2"])),
            (" [0-1-3, 0-2-9] ", Some(vec!["0-1-3", "0-2-9"])),
            ("0-1-3", None),
            ("[0-1]", None),
            ("[x]", None),
            ("", None),
        ] {
            let want: Option<Vec<Gtid>> =
                want.map(|v| v.iter().map(|g| g.parse().expect("g")).collect());
            assert_eq!(parse_list(info), want, "{info:?}");
        }
    }

    #[test]
    fn a_retired_domain_is_asked_for_while_the_source_has_no_such_domain() {
        let retired: BTreeMap<u32, Gtid> = [(5, "5-1-2".parse().expect("g"))].into();
        // (floor, source, position asked)
        for (start, source, want) in [
            // Deleted: the server wants its end while a file lists it.
            ("0-1-4", "0-1-9", "0-1-4,5-1-2"),
            // Written again since: its new history is read from its start.
            ("0-1-4", "0-1-9,5-1-1", "0-1-4"),
            // Applied again since (the floor has it): the floor's.
            ("0-1-4,5-1-1", "0-1-9,5-1-1", "0-1-4,5-1-1"),
            ("0-1-4,5-1-1", "0-1-9", "0-1-4,5-1-1"),
        ] {
            assert_eq!(
                connect_state(&pos(start), &retired, &pos(source)).to_string(),
                want,
                "{start} / {source}"
            );
        }
    }
}
