//! `replicate seed`: the copy phase native replication does not have. A
//! source's included databases are dumped by `mariadb-dump` from one
//! consistent snapshot (`--single-transaction --gtid --master-data=2`,
//! which also writes that snapshot's GTID position), the dump is rewritten
//! with the config's renames into a work file, loaded into the target by
//! `sqlfleet load` (parallel, journaled, resumable after kill -9), and the
//! snapshot's GTID is recorded as where the source's streams start, so
//! `replicate` continues exactly from it.
//!
//! This file holds the parts that decide: where the dump's GTID is, how a
//! dump statement is renamed (through [`crate::sqltext`], failing closed
//! on a statement it cannot read for sure), and what the work directory's
//! state says to do on a rerun. The binary wires them to the dump program
//! and the loader.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sqlfleet_dump::Splitter;

use crate::config::DbMap;
use crate::gtid::GtidPos;
use crate::position::Stored;
use crate::sqltext;

/// The GTID position a `mariadb-dump --gtid --master-data=2` dump was taken
/// at: its `-- SET GLOBAL gtid_slave_pos='...'` line (written at the end).
pub fn dump_gtid(text: &[u8]) -> Option<GtidPos> {
    const KEY: &[u8] = b"-- SET GLOBAL gtid_slave_pos='";
    let at = memchr::memmem::rfind(text, KEY)? + KEY.len();
    let end = text[at..].iter().position(|b| *b == b'\'')?;
    GtidPos::parse(std::str::from_utf8(&text[at..at + end]).ok()?).ok()
}

/// What a work directory holds for one source, across reruns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The dump file was written whole and renamed.
    pub dumped: bool,
    /// The snapshot's GTID position.
    pub gtid: String,
    /// The target databases the dump writes.
    pub databases: Vec<String>,
}

/// The work files of one source.
#[derive(Debug, Clone)]
pub struct Work {
    pub raw: PathBuf,
    pub dump: PathBuf,
    pub state: PathBuf,
}

impl Work {
    pub fn new(dir: &Path, source: &str) -> Work {
        Work {
            raw: dir.join(format!("{source}.raw.sql")),
            dump: dir.join(format!("{source}.sql")),
            state: dir.join(format!("{source}.state.json")),
        }
    }

    /// The state a previous run left (default when none or unreadable:
    /// start over).
    pub fn read_state(&self) -> State {
        std::fs::read(&self.state)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub fn write_state(&self, s: &State) -> std::io::Result<()> {
        let tmp = self.state.with_extension("json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, &self.state)
    }
}

/// What a rerun does with a source, from its work state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// No whole dump yet: dump (again, from a new snapshot), then load from
    /// the start.
    Dump,
    /// The dump is whole: load it, resuming what an interrupted load did.
    Load,
}

pub fn next_step(s: &State, dump_exists: bool) -> Step {
    if s.dumped && dump_exists && !s.gtid.is_empty() {
        Step::Load
    } else {
        Step::Dump
    }
}

/// What the target's positions for a source mean to a seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positions {
    /// None: seed.
    None,
    /// Exactly this work directory's snapshot and nothing since: an
    /// earlier run loaded and recorded it and was stopped before it
    /// removed its work files. Finish (the positions are already right).
    ThisSeed,
    /// Anything else (streams applied, another snapshot, a started
    /// statement): the source replicates; seeding over it needs --force.
    Other,
}

/// Judges the target's positions for a source against the work state.
pub fn positions(stored: &Stored, s: &State, dump_exists: bool) -> Positions {
    if !stored.started {
        return Positions::None;
    }
    let same = next_step(s, dump_exists) == Step::Load
        && GtidPos::parse(&s.gtid).is_ok_and(|g| g == stored.floor)
        && stored.streams.is_empty()
        && stored.skips.is_empty()
        && stored.ddl.is_none();
    if same {
        Positions::ThisSeed
    } else {
        Positions::Other
    }
}

/// What [`rewrite`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewritten {
    pub statements: u64,
    pub renamed: u64,
    /// Target databases the dump creates or uses.
    pub databases: Vec<String>,
}

/// An INSERT of mariadb-dump's own form on an unqualified table
/// (`INSERT INTO \`t\` VALUES ...`): names no database, so it is copied
/// without being read (the bulk of a dump).
fn unqualified_insert(t: &[u8]) -> bool {
    let Some(rest) = t.strip_prefix(b"INSERT INTO `") else {
        return false;
    };
    let mut i = 0;
    while i < rest.len() {
        if rest[i] == b'`' {
            if rest.get(i + 1) == Some(&b'`') {
                i += 2;
                continue;
            }
            return rest.get(i + 1) != Some(&b'.');
        }
        i += 1;
    }
    false
}

/// `USE \`db\``: the database, if the statement is one.
fn use_db(t: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(t).ok()?.trim();
    s.get(..4).filter(|h| h.eq_ignore_ascii_case("USE "))?;
    let name = s[4..].trim();
    let name = name
        .strip_prefix('`')
        .and_then(|n| n.strip_suffix('`'))
        .map(|n| n.replace("``", "`"))
        .unwrap_or_else(|| name.to_string());
    Some(name)
}

/// Copies a dump with every database name renamed as `map` says: `USE`,
/// `CREATE DATABASE` and the qualified names in views, triggers and
/// routines. Statements keep their text and delimiters otherwise. A
/// statement whose names cannot be read for sure is an error naming its
/// line (never copied unrenamed); so is a database `map` does not take.
/// The renamed copy of a dump, its second line `-- {stamp}`: a stamp of
/// this dump alone (the source, the snapshot, when, a nonce). The loader
/// knows an input by its first MiB and size; two dumps of an unchanged
/// source are byte for byte the same, and without the stamp a new seed's
/// load would be taken for an earlier seed's finished one ("already
/// loaded", nothing loaded, the seed recorded over empty databases).
pub fn rewrite(
    input: impl Read,
    out: impl Write,
    map: &DbMap,
    stamp: &str,
) -> Result<Rewritten, SeedError> {
    rename(input, out, map, stamp).map_err(SeedError::Dump)
}

fn rename(
    input: impl Read,
    out: impl Write,
    map: &DbMap,
    stamp: &str,
) -> Result<Rewritten, String> {
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut sp = Splitter::new(input);
    let mut r = Rewritten::default();
    let io = |e: std::io::Error| format!("writing the renamed dump: {e}");
    // The loader knows a dump by this line.
    out.write_all(b"-- MariaDB dump (renamed by sqlfleet replicate seed)\n")
        .map_err(io)?;
    let stamp = stamp.replace(['\n', '\r'], " ");
    out.write_all(format!("-- {stamp}\n").as_bytes())
        .map_err(io)?;
    let target = |db: &str| -> Result<String, String> {
        map.map(db).map(str::to_string).ok_or_else(|| {
            format!(
                "the dump names database '{db}', which this source's include/exclude do not take"
            )
        })
    };
    while let Some(st) = sp.next_statement().map_err(|e| e.to_string())? {
        if st.source.is_some() {
            return Err(format!("line {}: a `source` command in a dump", st.line));
        }
        r.statements += 1;
        let text: Vec<u8> = if unqualified_insert(&st.text) {
            st.text
        } else if let Some(db) = use_db(&st.text) {
            let to = target(&db)?;
            if !r.databases.contains(&to) {
                r.databases.push(to.clone());
            }
            r.renamed += u64::from(to != db);
            format!("USE `{}`", to.replace('`', "``")).into_bytes()
        } else {
            let named = sqltext::read(&st.text, sqltext::Dialect::default()).map_err(|e| {
                format!(
                    "line {}: cannot tell which names in this statement are databases ({e}): {}",
                    st.line,
                    st.preview(120)
                )
            })?;
            let mut names = Vec::new();
            for db in named.databases() {
                names.push((db.clone(), target(&db)?));
            }
            if named.database_statement {
                for (_, to) in &names {
                    if !r.databases.contains(to) {
                        r.databases.push(to.clone());
                    }
                }
            }
            if names.iter().any(|(from, to)| from != to) {
                r.renamed += 1;
                sqltext::rename(&st.text, &named, |db| {
                    names
                        .iter()
                        .find(|(from, _)| from == db)
                        .map(|(_, to)| to.clone())
                })
            } else {
                st.text
            }
        };
        let delim = sp.delimiter().to_vec();
        if delim == b";" {
            out.write_all(&text).map_err(io)?;
            out.write_all(b";\n").map_err(io)?;
        } else {
            out.write_all(b"DELIMITER ").map_err(io)?;
            out.write_all(&delim).map_err(io)?;
            out.write_all(b"\n").map_err(io)?;
            out.write_all(&text).map_err(io)?;
            out.write_all(&delim).map_err(io)?;
            out.write_all(b"\nDELIMITER ;\n").map_err(io)?;
        }
    }
    // Whole: the loader takes a dump without this line for one cut short.
    out.write_all(b"-- Dump completed (renamed by sqlfleet replicate seed)\n")
        .map_err(io)?;
    out.flush().map_err(io)?;
    Ok(r)
}

/// Why a seed step failed.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// The source or the target could not be reached.
    #[error("{side}: {error}")]
    Connect {
        side: &'static str,
        #[source]
        error: Box<sqlfleet_conn::ConnectError>,
    },
    /// The source or the target refused a statement.
    #[error("{side}: {error}")]
    Server {
        side: &'static str,
        #[source]
        error: mysql_async::Error,
    },
    /// The positions a seed would record are there already.
    #[error("source '{0}' already has replication positions on the target; --force replaces them with the snapshot's")]
    AlreadyStarted(String),
    /// The dump cannot be renamed (naming its line) or written.
    #[error("{0}")]
    Dump(String),
    /// The source answered what cannot be read for sure (`XA RECOVER`).
    #[error("source: {0}")]
    Unreadable(String),
}

pub(crate) fn server(side: &'static str) -> impl Fn(mysql_async::Error) -> SeedError {
    move |error| SeedError::Server { side, error }
}

pub(crate) async fn connect(
    t: &sqlfleet_conn::Target,
    side: &'static str,
) -> Result<mysql_async::Conn, SeedError> {
    t.connect(std::time::Duration::from_secs(10))
        .await
        .map_err(|e| SeedError::Connect {
            side,
            error: Box::new(e),
        })
}

/// Holds DDL off on the source while the dump runs (MariaDB's backup
/// stages: `BLOCK_DDL` delays every ALTER, CREATE, DROP, RENAME and
/// TRUNCATE until it ends; reads and writes go on). A consistent-snapshot
/// dump's data is the snapshot's, but a table's definition is read when
/// the dump gets to it: an `ALTER TABLE ... ADD COLUMN` committed between
/// the two made a dump whose table already had the column while its GTID
/// was before the ALTER, and replicate stopped on it (1060) — seen in the
/// seed-under-live-writes test. The connection holds the stage until it
/// ends or closes. The inner `Err` says why it could not (no RELOAD
/// privilege, a server without backup stages): the caller warns.
pub async fn block_ddl(
    source: &sqlfleet_conn::Target,
) -> Result<Result<DdlHeld, String>, SeedError> {
    use mysql_async::prelude::Queryable;
    let mut c = connect(source, "source").await?;
    let r = async {
        c.query_drop("BACKUP STAGE START").await?;
        c.query_drop("BACKUP STAGE BLOCK_DDL").await
    }
    .await;
    Ok(match r {
        Ok(()) => Ok(DdlHeld(c)),
        Err(mysql_async::Error::Server(e)) => {
            let _ = c.disconnect().await;
            Err(format!("ERROR {}: {}", e.code, e.message))
        }
        Err(e) => return Err(server("source: BACKUP STAGE BLOCK_DDL")(e)),
    })
}

/// DDL held off on the source (see [`block_ddl`]) until [`DdlHeld::end`]
/// or the connection closes.
pub struct DdlHeld(mysql_async::Conn);

impl DdlHeld {
    pub async fn end(mut self) {
        use mysql_async::prelude::Queryable;
        let _ = self.0.query_drop("BACKUP STAGE END").await;
        let _ = self.0.disconnect().await;
    }
}

/// The source's databases the config takes, sorted.
pub async fn source_databases(
    source: &sqlfleet_conn::Target,
    map: &DbMap,
) -> Result<Vec<String>, SeedError> {
    use mysql_async::prelude::Queryable;
    let mut c = connect(source, "source").await?;
    let all: Vec<String> = c
        .query("SHOW DATABASES")
        .await
        .map_err(server("source: SHOW DATABASES"))?;
    let _ = c.disconnect().await;
    let mut v: Vec<String> = all.into_iter().filter(|d| map.map(d).is_some()).collect();
    v.sort();
    Ok(v)
}

/// Target databases (of `names`) that already hold tables: a seed would
/// overwrite them.
pub async fn non_empty(
    target: &sqlfleet_conn::Target,
    names: &[String],
) -> Result<Vec<String>, SeedError> {
    use mysql_async::prelude::Queryable;
    let mut c = connect(target, "target").await?;
    let mut out = Vec::new();
    for n in names {
        let k: Option<u64> = c
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?",
                (n.as_str(),),
            )
            .await
            .map_err(server("target"))?;
        if k.unwrap_or(0) > 0 {
            out.push(n.clone());
        }
    }
    let _ = c.disconnect().await;
    Ok(out)
}

/// Records the snapshot's position as where `source` starts, after the
/// copy loaded whole. Refused when the source already has positions
/// (it replicates, or was seeded) unless `force`, which replaces them.
pub async fn record(
    target: &sqlfleet_conn::Target,
    source: &str,
    gtid: &GtidPos,
    force: bool,
) -> Result<(), SeedError> {
    if stored(target, source).await?.started && !force {
        return Err(SeedError::AlreadyStarted(source.to_string()));
    }
    let t = server("target");
    let mut c = connect(target, "target").await?;
    crate::position::Book::new(&mut c, source)
        .forget()
        .await
        .map_err(&t)?;
    crate::position::Book::new(&mut c, source)
        .write_start(gtid)
        .await
        .map_err(&t)?;
    let _ = c.disconnect().await;
    Ok(())
}

/// What the target holds for `source`.
pub async fn stored(target: &sqlfleet_conn::Target, source: &str) -> Result<Stored, SeedError> {
    let mut c = connect(target, "target").await?;
    crate::position::ensure(&mut c)
        .await
        .map_err(server("target"))?;
    let s = crate::position::Book::new(&mut c, source)
        .load()
        .await
        .map_err(server("target"))?;
    let _ = c.disconnect().await;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn map(pairs: &[(&str, &str)]) -> DbMap {
        let r: BTreeMap<String, String> = pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        DbMap::new(&[], &[], &r)
    }

    fn run(input: &str, m: &DbMap) -> Result<String, String> {
        let mut out = Vec::new();
        rewrite(input.as_bytes(), &mut out, m, "stamp").map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).expect("utf8"))
    }

    #[test]
    fn the_dumps_gtid_is_its_last_gtid_slave_pos_line() {
        let d = b"-- CHANGE MASTER TO MASTER_USE_GTID=slave_pos;\n...\n-- SET GLOBAL gtid_slave_pos='0-1-5,1-2-9';\n";
        assert_eq!(
            dump_gtid(d).map(|p| p.to_string()),
            Some("0-1-5,1-2-9".into())
        );
        assert_eq!(dump_gtid(b"-- no position here\n"), None);
        assert_eq!(dump_gtid(b"-- SET GLOBAL gtid_slave_pos='garbage';"), None);
    }

    #[test]
    fn a_renamed_dump_ends_as_a_whole_dump_does() {
        let out = run(
            "USE `app`;\nINSERT INTO `t` VALUES (1);\n",
            &map(&[("app", "app_eu")]),
        )
        .expect("renamed");
        assert!(
            out.ends_with("-- Dump completed (renamed by sqlfleet replicate seed)\n"),
            "{out}"
        );
    }

    #[test]
    fn renames_every_place_a_dump_names_a_database() {
        let m = map(&[("app", "app_eu")]);
        // (input statement(s), what the output must hold)
        let rows: &[(&str, &[&str])] = &[
            ("CREATE DATABASE /*!32312 IF NOT EXISTS*/ `app`;", &["`app_eu`"]),
            ("USE `app`;", &["USE `app_eu`;"]),
            ("INSERT INTO `t` VALUES (1,'app.t;');", &["INSERT INTO `t` VALUES (1,'app.t;');"]),
            (
                "/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50001 VIEW `v` AS select `app`.`t`.`id` AS `id` from `app`.`t` */;",
                &["`app_eu`.`t`.`id`", "from `app_eu`.`t`"],
            ),
            (
                "DELIMITER ;;\nCREATE PROCEDURE `p`() BEGIN SELECT COUNT(*) FROM `app`.`t`; END ;;\nDELIMITER ;\n",
                &["DELIMITER ;;\nCREATE PROCEDURE `p`() BEGIN SELECT COUNT(*) FROM `app_eu`.`t`; END ;;\nDELIMITER ;"],
            ),
            ("CREATE TABLE `t` (`id` int) ENGINE=InnoDB;", &["CREATE TABLE `t` (`id` int) ENGINE=InnoDB;"]),
        ];
        for (input, want) in rows {
            let got = run(input, &m).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert!(got.starts_with("-- MariaDB dump"), "{got}");
            for w in *want {
                assert!(got.contains(w), "{input}\n=> {got}\nlacks {w}");
            }
            assert!(!got.contains("`app`"), "{input}\n=> {got}");
        }
        let r = {
            let mut out = Vec::new();
            rewrite(
                "CREATE DATABASE `app`;\nUSE `app`;\n".as_bytes(),
                &mut out,
                &m,
                "stamp",
            )
            .expect("ok")
        };
        assert_eq!(r.databases, vec!["app_eu".to_string()]);
    }

    /// The stamp is the copy's second line, on one line whatever it holds:
    /// two copies of one dump with their own stamps differ in their first
    /// MiB (the loader's name for an input).
    #[test]
    fn each_copy_carries_its_own_stamp_at_its_head() {
        let m = DbMap::default();
        let copy = |stamp: &str| {
            let mut out = Vec::new();
            rewrite("CREATE TABLE t (i INT);\n".as_bytes(), &mut out, &m, stamp).expect("ok");
            String::from_utf8(out).expect("utf8")
        };
        let (a, b) = (copy("seed of 'sd', run 1"), copy("seed of 'sd', run 2"));
        assert_ne!(a, b);
        assert_eq!(a.lines().nth(1), Some("-- seed of 'sd', run 1"));
        assert!(a
            .lines()
            .next()
            .is_some_and(|l| l.starts_with("-- MariaDB dump")));
        assert_eq!(
            copy("a\nDROP DATABASE x;").lines().nth(1),
            Some("-- a DROP DATABASE x;")
        );
        assert!(!copy("a\nDROP DATABASE x;")
            .lines()
            .any(|l| l.starts_with("DROP")));
    }

    #[test]
    fn a_statement_it_cannot_read_or_a_database_not_taken_is_an_error() {
        let m = DbMap::new(&["app".to_string()], &[], &BTreeMap::new());
        let e = run("USE `other`;", &m).expect_err("not taken");
        assert!(e.contains("'other'"), "{e}");
        let e = run("SELECT `a`.`b` FROM t;", &DbMap::default()).expect_err("unsure");
        assert!(e.contains("line 1"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn any_dump_tail_or_statements_read_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)
        ) {
            let _ = dump_gtid(&bytes);
            let mut tail = b"-- SET GLOBAL gtid_slave_pos='".to_vec();
            tail.extend_from_slice(&bytes);
            let _ = dump_gtid(&tail);
            let _ = rewrite(&bytes[..], Vec::new(), &DbMap::default(), "stamp");
        }
    }

    #[test]
    fn steps_on_a_rerun() {
        let whole = State {
            dumped: true,
            gtid: "0-1-5".into(),
            databases: vec![],
        };
        // (state, dump file there, step)
        let rows = [
            (State::default(), false, Step::Dump),
            (whole.clone(), true, Step::Load),
            (whole.clone(), false, Step::Dump),
            (
                State {
                    dumped: false,
                    ..whole.clone()
                },
                true,
                Step::Dump,
            ),
        ];
        for (s, exists, want) in rows {
            assert_eq!(next_step(&s, exists), want, "{s:?} {exists}");
        }
    }

    #[test]
    fn positions_on_the_target_against_the_work_state() {
        use crate::gtid::Gtid;
        let whole = State {
            dumped: true,
            gtid: "0-1-5".into(),
            databases: vec![],
        };
        let at = |g: &str| Stored {
            floor: GtidPos::parse(g).expect("gtid"),
            started: true,
            ..Stored::default()
        };
        let mut streamed = at("0-1-5");
        streamed
            .streams
            .insert("db".into(), GtidPos::parse("0-1-6").expect("gtid"));
        let mut ddl = at("0-1-5");
        ddl.ddl = Some(Gtid {
            domain: 0,
            server: 1,
            seq: 6,
        });
        let mut skipped = at("0-1-5");
        skipped.skips.push(Gtid {
            domain: 0,
            server: 1,
            seq: 6,
        });
        // (stored, state, dump file there, judgement)
        let rows = [
            (Stored::default(), whole.clone(), true, Positions::None),
            (Stored::default(), State::default(), false, Positions::None),
            (at("0-1-5"), whole.clone(), true, Positions::ThisSeed),
            // Its dump file is gone: not this work directory's seed.
            (at("0-1-5"), whole.clone(), false, Positions::Other),
            (at("0-1-4"), whole.clone(), true, Positions::Other),
            (at("0-1-5,1-1-1"), whole.clone(), true, Positions::Other),
            (at("0-1-5"), State::default(), false, Positions::Other),
            (streamed, whole.clone(), true, Positions::Other),
            (ddl, whole.clone(), true, Positions::Other),
            (skipped, whole.clone(), true, Positions::Other),
        ];
        for (stored, s, exists, want) in rows {
            assert_eq!(positions(&stored, &s, exists), want, "{stored:?} {s:?}");
        }
    }
}
