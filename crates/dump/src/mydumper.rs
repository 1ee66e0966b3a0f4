//! mydumper's directory format: which file is what, the order myloader
//! runs them in (as a plan of steps for the loader), and the source
//! position its `metadata` file records.
//!
//! Pure: file names and the metadata text in, a plan or a position out.
//! A name it cannot place (another version's file kinds, `.dat` files of
//! `--load-data`, an unfinished dump's `metadata.partial`, a name that
//! reads two ways) stops with an error naming the file: a file the loader
//! does not understand is never skipped.
//!
//! The order, as myloader's: each database's `DB-schema-create.sql`, then
//! per table its `DB.T-schema.sql` and its data (`DB.T.sql`, then the
//! chunks `DB.T.NNNNN.sql` by number); after all data the views
//! (`DB.V-schema-view.sql`, which replace the placeholder tables their
//! `-schema.sql` made), the triggers (`DB.T-schema-triggers.sql`) and the
//! routines and events (`DB-schema-post.sql`). Every file may be plain,
//! gzip (`.gz`) or zstd (`.zst`). The files name no database inside, so
//! the plan says `USE` before each database's files.

use std::collections::BTreeMap;
#[cfg(test)]
use std::collections::BTreeSet;

/// One step of loading a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A statement of the plan's own (`USE`, or `CREATE DATABASE IF NOT
    /// EXISTS` for a database loaded under another name).
    Sql(String),
    /// A file of the directory, by name, run as its statements.
    File(String),
}

/// What loading a directory runs, in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// The databases in the dump, as named there.
    pub databases: Vec<String>,
    /// Tables (and view placeholders) with a schema file.
    pub tables: usize,
    /// Files of table data.
    pub data_files: usize,
}

/// Why a directory cannot be loaded: names the file and the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError(pub String);

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

/// The name of the file that says a directory is a finished mydumper dump.
pub const METADATA: &str = "metadata";

/// `mydumper --updated-since`'s list of the tables it left out (not
/// updated since): a note, no statement; myloader does not read it either.
pub const NOT_UPDATED: &str = "not_updated_tables";

/// Is this directory listing a mydumper dump (finished or not)?
pub fn looks_like(names: &[String]) -> bool {
    names
        .iter()
        .any(|n| n == METADATA || n == "metadata.partial")
}

/// `name` without its compression suffix, and whether it had one.
fn uncompressed(name: &str) -> &str {
    name.strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".zst"))
        .unwrap_or(name)
}

/// A backtick-quoted identifier.
pub fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

#[derive(Default)]
struct Database {
    create: Option<String>,
    post: Option<String>,
    /// table → its schema file
    schemas: BTreeMap<String, String>,
    /// table → (chunk, file); the unchunked file is chunk `None`
    data: BTreeMap<String, Vec<(Option<u64>, String)>>,
    views: BTreeMap<String, String>,
    triggers: BTreeMap<String, String>,
}

enum TableFile {
    Schema,
    View,
    Triggers,
    /// Data of a table still to be found: the name's rest after `DB.`.
    Data,
}

fn err<T>(what: String) -> Result<T, PlanError> {
    Err(PlanError(what))
}

/// Plans the load of a directory holding the files `names` (file names,
/// not paths). `into` loads the dump's one database under another name
/// (myloader's `-B`); a dump of several databases is refused with it.
pub fn plan(names: &[String], into: Option<&str>) -> Result<Plan, PlanError> {
    if names.iter().any(|n| n == "metadata.partial") && !names.iter().any(|n| n == METADATA) {
        return err("metadata.partial: this mydumper dump did not finish (mydumper renames metadata.partial to metadata at its end); dump again".into());
    }
    if !names.iter().any(|n| n == METADATA) {
        return err("no metadata file: not a finished mydumper dump directory".into());
    }
    // Each file once: a plain and a compressed copy of one file would
    // load it twice.
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for n in names {
        let base = uncompressed(n);
        if let Some(other) = seen.insert(base, n) {
            return err(format!(
                "{other} and {n} are the same file twice (one compressed): remove one"
            ));
        }
    }
    let mut dbs: BTreeMap<String, Database> = BTreeMap::new();
    let mut rest: Vec<&String> = Vec::new();
    for n in names {
        if n == METADATA || n == "metadata.partial" || n == NOT_UPDATED {
            continue;
        }
        let Some(base) = uncompressed(n).strip_suffix(".sql") else {
            let what = if uncompressed(n).ends_with(".dat") || uncompressed(n).ends_with(".csv") {
                "a data file of mydumper --load-data/--csv, which sqlfleet load does not read (dump with mydumper's default SQL format)"
            } else {
                "not a file of a mydumper dump (its SQL files end in .sql, .sql.gz or .sql.zst)"
            };
            return err(format!("{n}: {what}"));
        };
        if let Some(db) = base.strip_suffix("-schema-create") {
            if db.is_empty() {
                return err(format!("{n}: names no database"));
            }
            dbs.entry(db.to_owned()).or_default().create = Some(n.clone());
        } else {
            rest.push(n);
        }
    }
    if dbs.is_empty() {
        return data_only(&rest, into);
    }
    let known: Vec<String> = dbs.keys().cloned().collect();
    let mut data_files: Vec<(String, String, &String)> = Vec::new();
    for n in rest {
        let base = uncompressed(n).strip_suffix(".sql").unwrap_or_default();
        if let Some(db) = base.strip_suffix("-schema-post") {
            if let Some(d) = dbs.get_mut(db) {
                d.post = Some(n.clone());
                continue;
            }
        }
        let owners: Vec<&String> = known
            .iter()
            .filter(|d| {
                base.len() > d.len() + 1
                    && base.starts_with(d.as_str())
                    && base.as_bytes()[d.len()] == b'.'
            })
            .collect();
        let db = match owners.as_slice() {
            [one] => (*one).clone(),
            [] => {
                return err(format!(
                    "{n}: names no database of this dump (no DB-schema-create.sql for it)"
                ))
            }
            many => {
                return err(format!(
                    "{n}: reads as a file of several databases ({}): the names are ambiguous",
                    many.iter()
                        .map(|d| d.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        };
        let table_part = &base[db.len() + 1..];
        let (kind, table) = if let Some(t) = table_part.strip_suffix("-schema-triggers") {
            (TableFile::Triggers, t)
        } else if let Some(t) = table_part.strip_suffix("-schema-view") {
            (TableFile::View, t)
        } else if let Some(t) = table_part.strip_suffix("-schema") {
            (TableFile::Schema, t)
        } else {
            (TableFile::Data, table_part)
        };
        if table.is_empty() {
            return err(format!("{n}: names no table"));
        }
        let d = dbs.entry(db.clone()).or_default();
        let slot = match kind {
            TableFile::Schema => &mut d.schemas,
            TableFile::View => &mut d.views,
            TableFile::Triggers => &mut d.triggers,
            TableFile::Data => {
                data_files.push((db, table_part.to_owned(), n));
                continue;
            }
        };
        slot.insert(table.to_owned(), n.clone());
    }
    // A schema-like name that is also a table's own data file reads two
    // ways (table `t-schema` has data file `DB.t-schema.sql`).
    for (db, d) in &dbs {
        for (t, file) in d.schemas.iter().chain(&d.views).chain(&d.triggers) {
            let whole = uncompressed(file)
                .strip_suffix(".sql")
                .unwrap_or_default()
                .get(db.len() + 1..)
                .unwrap_or_default();
            if whole != t && d.schemas.contains_key(whole) {
                return err(format!(
                    "{file}: reads both as a file of table {t} and as the data of table {whole}: the names are ambiguous"
                ));
            }
        }
        for (v, file) in &d.views {
            if !d.schemas.contains_key(v) {
                return err(format!(
                    "{file}: view {v} has no placeholder {db}.{v}-schema.sql (dumped by another mydumper version?)"
                ));
            }
        }
        for (t, file) in &d.triggers {
            if !d.schemas.contains_key(t) {
                return err(format!(
                    "{file}: triggers of table {t}, which has no schema file"
                ));
            }
        }
    }
    for (db, part, file) in data_files {
        let d = dbs.entry(db.clone()).or_default();
        let whole = d.schemas.contains_key(&part).then(|| (part.clone(), None));
        let chunked = part.rsplit_once('.').and_then(|(t, n)| {
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && d.schemas.contains_key(t))
                .then(|| n.parse::<u64>().ok().map(|n| (t.to_owned(), Some(n))))
                .flatten()
        });
        let (table, chunk) = match (whole, chunked) {
            (Some(_), Some((t, _))) => {
                return err(format!(
                    "{file}: reads both as the data of table {part} and as a chunk of table {t}: the names are ambiguous"
                ))
            }
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => {
                return err(format!(
                    "{file}: not a file sqlfleet load knows in a mydumper dump (no table of database {db} it could hold data of has a schema file)"
                ))
            }
        };
        let list = d.data.entry(table).or_default();
        if list.iter().any(|(c, _)| *c == chunk) {
            return err(format!("{file}: a second file for the same chunk"));
        }
        list.push((chunk, file.clone()));
    }
    let p = start(&dbs, into)?;
    Ok(order(p, dbs, into))
}

/// A plan's beginning: the databases, myloader's session; `-D` refused
/// for a dump of several databases.
fn start(dbs: &BTreeMap<String, Database>, into: Option<&str>) -> Result<Plan, PlanError> {
    if into.is_some() && dbs.len() > 1 {
        return err(format!(
            "-D loads a dump's one database under another name, and this dump holds {}: {}; load it without -D",
            dbs.len(),
            dbs.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut p = Plan {
        databases: dbs.keys().cloned().collect(),
        ..Plan::default()
    };
    p.steps
        .extend(SESSION.iter().map(|q| Step::Sql((*q).to_owned())));
    Ok(p)
}

/// The data half of a split dump (`mydumper --no-schemas`): only data
/// files, loaded into tables that exist, as myloader does. With no schema
/// file to tell a table from a chunk, a name reads as myloader reads it —
/// `DB.T.sql` or `DB.T.NNNNN.sql` — and any other (a dot in a name, a
/// schema file of a database the dump has no `-schema-create` for) is
/// refused as ambiguous rather than guessed.
fn data_only(files: &[&String], into: Option<&str>) -> Result<Plan, PlanError> {
    if files.is_empty() {
        return err("no DB-schema-create.sql file and no data file: this mydumper directory holds no database".into());
    }
    let mut dbs: BTreeMap<String, Database> = BTreeMap::new();
    for n in files {
        let base = uncompressed(n).strip_suffix(".sql").unwrap_or_default();
        // Routines and events (mydumper -m with -R/-E writes them still):
        // run after the data, as myloader runs them.
        if let Some(db) = base.strip_suffix("-schema-post") {
            if !db.is_empty() && !db.contains('.') && !db.contains("-schema") {
                dbs.entry(db.to_owned()).or_default().post = Some((*n).clone());
                continue;
            }
        }
        if base.contains("-schema") {
            return err(format!(
                "{n}: a schema file, and the dump has no DB-schema-create.sql for its database (a dump with schemas holds one per database; one without holds only data files)"
            ));
        }
        let parts: Vec<&str> = base.split('.').collect();
        let (db, table, chunk) = match parts.as_slice() {
            [db, t] => (*db, *t, None),
            [db, t, c] if !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) => {
                (*db, *t, c.parse::<u64>().ok())
            }
            _ => {
                return err(format!(
                    "{n}: a data file of a dump without schemas names its database and table as DB.T.sql or DB.T.NNNNN.sql; this name reads more than one way (a dot in a name?)"
                ))
            }
        };
        if db.is_empty() || table.is_empty() {
            return err(format!("{n}: names no database or no table"));
        }
        let list = dbs
            .entry(db.to_owned())
            .or_default()
            .data
            .entry(table.to_owned())
            .or_default();
        if list.iter().any(|(c, _)| *c == chunk) {
            return err(format!("{n}: a second file for the same chunk"));
        }
        list.push((chunk, (*n).clone()));
    }
    let mut p = start(&dbs, into)?;
    for (db, d) in &mut dbs {
        p.steps
            .push(Step::Sql(format!("USE {}", quote(into.unwrap_or(db)))));
        for files in d.data.values_mut() {
            p.tables += 1;
            files.sort();
            for (_, f) in files.iter() {
                p.data_files += 1;
                p.steps.push(Step::File(f.clone()));
            }
        }
    }
    if dbs.values().any(|d| d.post.is_some()) {
        p.steps.push(Step::Sql(OBJECTS_SQL_MODE.to_owned()));
        for (db, d) in &dbs {
            if let Some(f) = &d.post {
                p.steps
                    .push(Step::Sql(format!("USE {}", quote(into.unwrap_or(db)))));
                p.steps.push(Step::File(f.clone()));
            }
        }
    }
    Ok(p)
}

/// The session myloader sets on each of its connections before any file
/// (the files assume it: no ANSI_QUOTES for their `"` strings, an id 0
/// kept as 0, foreign keys unchecked while tables fill).
/// Notes are off, as a mysqldump file turns them off: `CREATE DATABASE IF
/// NOT EXISTS` of a database that is there is not a warning of the dump.
pub const SESSION: [&str; 5] = [
    "/*!40101 SET NAMES binary*/",
    "/*!40101 SET SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */",
    "/*!40014 SET FOREIGN_KEY_CHECKS=0*/",
    "/*!40014 SET UNIQUE_CHECKS=0 */",
    "/*!40111 SET SQL_NOTES=0 */",
];

/// myloader creates views, triggers, routines and events on a connection
/// of the server's own sql_mode (which triggers and routines keep).
pub const OBJECTS_SQL_MODE: &str = "/*!40101 SET SQL_MODE=@@GLOBAL.SQL_MODE */";

/// The steps, in myloader's order.
fn order(mut p: Plan, mut dbs: BTreeMap<String, Database>, into: Option<&str>) -> Plan {
    let target = |db: &str| quote(into.unwrap_or(db));
    for (db, d) in &mut dbs {
        match (into, &d.create) {
            (Some(name), _) => p.steps.push(Step::Sql(format!(
                "CREATE DATABASE IF NOT EXISTS {}",
                quote(name)
            ))),
            (None, Some(f)) => p.steps.push(Step::File(f.clone())),
            (None, None) => {}
        }
        p.steps.push(Step::Sql(format!("USE {}", target(db))));
        for (t, schema) in &d.schemas {
            p.tables += 1;
            p.steps.push(Step::File(schema.clone()));
            if let Some(files) = d.data.get_mut(t) {
                files.sort();
                for (_, f) in files.iter() {
                    p.data_files += 1;
                    p.steps.push(Step::File(f.clone()));
                }
            }
        }
    }
    // Views, triggers and routines, each database's after a USE of it.
    let after = |p: &mut Plan, db: &str, file: &String, last: &mut Option<String>| {
        if last.as_deref() != Some(db) {
            p.steps.push(Step::Sql(format!("USE {}", target(db))));
            *last = Some(db.to_owned());
        }
        p.steps.push(Step::File(file.clone()));
    };
    let mut current: Option<String> = None;
    if dbs
        .values()
        .any(|d| !d.views.is_empty() || !d.triggers.is_empty() || d.post.is_some())
    {
        p.steps.push(Step::Sql(OBJECTS_SQL_MODE.to_owned()));
    }
    for (db, d) in &dbs {
        for f in d.views.values() {
            after(&mut p, db, f, &mut current);
        }
    }
    for (db, d) in &dbs {
        for f in d.triggers.values() {
            after(&mut p, db, f, &mut current);
        }
    }
    for (db, d) in &dbs {
        if let Some(f) = &d.post {
            after(&mut p, db, f, &mut current);
        }
    }
    p
}

/// Where the dumped server's binary log stood when the dump was taken
/// (a replica of the loaded copy starts there).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Position {
    pub log: Option<String>,
    pub pos: Option<u64>,
    pub gtid: Option<String>,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let (Some(l), Some(p)) = (&self.log, self.pos) {
            parts.push(format!("{l}:{p}"));
        }
        if let Some(g) = &self.gtid {
            parts.push(format!("GTID {g}"));
        }
        f.write_str(&parts.join(", "))
    }
}

/// Reads a `metadata` file: the source position of mydumper 0.10's
/// `SHOW MASTER STATUS:` block or of later versions' `[master]` /
/// `[source]` section (`None` when it records none). Later versions may
/// quote identifiers with `"` (`quote_character = DOUBLE_QUOTE`), which
/// the files' statements would then need ANSI_QUOTES for: refused.
pub fn metadata(text: &str) -> Result<Option<Position>, PlanError> {
    let mut pos = Position::default();
    let mut section = "";
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            section = match &line[1..line.len() - 1] {
                "master" | "source" => "source",
                "config" => "config",
                _ => "other",
            };
            continue;
        }
        if line.ends_with(':') && !raw.starts_with(char::is_whitespace) {
            section = if line == "SHOW MASTER STATUS:" || line == "SHOW BINARY LOG STATUS:" {
                "source"
            } else {
                "other"
            };
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) if !section.is_empty() => (k.trim(), v.trim()),
            _ => match line.split_once(':') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => continue,
            },
        };
        let value = value.trim_matches('\'').trim_matches('"').trim();
        match (section, key) {
            ("config", "quote_character") if !value.eq_ignore_ascii_case("BACKTICK") => {
                return err(format!(
                    "metadata: quote_character = {value}: the dump's statements quote names with double quotes, which sqlfleet load does not read (dump with mydumper's default backtick quoting)"
                ));
            }
            ("source", "Log" | "File") if !value.is_empty() => pos.log = Some(value.to_owned()),
            ("source", "Pos" | "Position") => {
                pos.pos = Some(value.parse().map_err(|_| {
                    PlanError(format!(
                        "metadata: the binary log position {value:?} is not a number"
                    ))
                })?)
            }
            ("source", "GTID" | "Executed_Gtid_Set") if !value.is_empty() => {
                pos.gtid = Some(value.to_owned())
            }
            _ => {}
        }
    }
    Ok((pos != Position::default()).then_some(pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &str) -> Vec<String> {
        list.split_whitespace().map(str::to_owned).collect()
    }

    fn steps(p: &Plan) -> Vec<String> {
        p.steps[SESSION.len()..]
            .iter()
            .map(|s| match s {
                Step::Sql(q) => format!("sql:{q}"),
                Step::File(f) => f.clone(),
            })
            .collect()
    }

    #[test]
    fn plans_in_myloaders_order() {
        let dir = names(
            "metadata src-schema-create.sql.gz src-schema-post.sql.gz src.t1-schema.sql.gz \
             src.t1.00001.sql.gz src.t1.00000.sql.gz src.t2-schema.sql src.t2.sql \
             src.t2-schema-triggers.sql src.v1-schema.sql src.v1-schema-view.sql src.e-schema.sql.zst",
        );
        let p = plan(&dir, None).expect("plan");
        assert_eq!(
            steps(&p),
            [
                "src-schema-create.sql.gz",
                "sql:USE `src`",
                "src.e-schema.sql.zst",
                "src.t1-schema.sql.gz",
                "src.t1.00000.sql.gz",
                "src.t1.00001.sql.gz",
                "src.t2-schema.sql",
                "src.t2.sql",
                "src.v1-schema.sql",
                "sql:/*!40101 SET SQL_MODE=@@GLOBAL.SQL_MODE */",
                "sql:USE `src`",
                "src.v1-schema-view.sql",
                "src.t2-schema-triggers.sql",
                "src-schema-post.sql.gz",
            ]
        );
        assert_eq!((p.tables, p.data_files), (4, 3));
        let p = plan(&dir, Some("x`y")).expect("plan into");
        assert_eq!(
            steps(&p)[..2],
            ["sql:CREATE DATABASE IF NOT EXISTS `x``y`", "sql:USE `x``y`"]
        );
    }

    #[test]
    fn a_dump_without_schemas_loads_its_data_into_the_tables_there() {
        let p = plan(
            &names("metadata d.t.00001.sql.gz d.t.00000.sql.gz d.u.sql e.v.sql"),
            None,
        )
        .expect("plan");
        assert_eq!(
            steps(&p),
            [
                "sql:USE `d`",
                "d.t.00000.sql.gz",
                "d.t.00001.sql.gz",
                "d.u.sql",
                "sql:USE `e`",
                "e.v.sql",
            ]
        );
        assert_eq!((p.tables, p.data_files), (3, 4));
        assert_eq!(p.databases, ["d", "e"]);
        let p = plan(&names("metadata d.t.sql"), Some("x")).expect("into");
        assert_eq!(steps(&p), ["sql:USE `x`", "d.t.sql"]);
        // mydumper -m -R -E still writes the routines and events: after
        // the data, in the server's sql_mode, as myloader runs them.
        let p = plan(&names("metadata d-schema-post.sql d.t.sql"), Some("x")).expect("post");
        assert_eq!(
            steps(&p),
            [
                "sql:USE `x`",
                "d.t.sql",
                &format!("sql:{OBJECTS_SQL_MODE}"),
                "sql:USE `x`",
                "d-schema-post.sql"
            ]
        );
        assert_eq!((p.tables, p.data_files), (1, 1));
    }

    #[test]
    fn updated_since_list_of_tables_left_out_is_read_by_no_step() {
        let p = plan(&names("metadata not_updated_tables d.t.sql"), None).expect("plan");
        assert_eq!(steps(&p), ["sql:USE `d`", "d.t.sql"]);
        // Only that one name: another file without .sql is still refused.
        let e = plan(&names("metadata not_updated_tables.txt d.t.sql"), None).expect_err("txt");
        assert!(e.0.contains("not_updated_tables.txt: not a file"), "{e}");
    }

    #[test]
    fn several_databases_each_get_their_use() {
        let p = plan(
            &names("metadata a-schema-create.sql b-schema-create.sql a.t-schema.sql b.t-schema.sql b.t.sql a.v-schema.sql a.v-schema-view.sql b-schema-post.sql"),
            None,
        )
        .expect("plan");
        assert_eq!(
            steps(&p),
            [
                "a-schema-create.sql",
                "sql:USE `a`",
                "a.t-schema.sql",
                "a.v-schema.sql",
                "b-schema-create.sql",
                "sql:USE `b`",
                "b.t-schema.sql",
                "b.t.sql",
                "sql:/*!40101 SET SQL_MODE=@@GLOBAL.SQL_MODE */",
                "sql:USE `a`",
                "a.v-schema-view.sql",
                "sql:USE `b`",
                "b-schema-post.sql",
            ]
        );
        let e = plan(
            &names("metadata a-schema-create.sql b-schema-create.sql"),
            Some("x"),
        )
        .expect_err("two databases into one");
        assert!(e.0.contains("a, b"), "{e}");
    }

    #[test]
    fn what_it_refuses_names_the_file() {
        let cases = [
            ("src-schema-create.sql", "no metadata file"),
            ("metadata.partial src-schema-create.sql", "did not finish"),
            (
                "metadata src-schema-create.sql src.t-schema.sql src.t.00000.dat",
                "src.t.00000.dat: a data file of mydumper --load-data",
            ),
            (
                "metadata src-schema-create.sql notes.txt",
                "notes.txt: not a file of a mydumper dump",
            ),
            (
                "metadata src-schema-create.sql src.t.sql",
                "src.t.sql: not a file sqlfleet load knows",
            ),
            (
                "metadata src-schema-create.sql other.t-schema.sql",
                "other.t-schema.sql: names no database",
            ),
            (
                "metadata src-schema-create.sql src.t-schema.sql src.t-schema.sql.gz",
                "same file twice",
            ),
            (
                "metadata a-schema-create.sql a.b-schema-create.sql a.b.c-schema.sql",
                "several databases (a, a.b)",
            ),
            (
                "metadata d-schema-create.sql d.t-schema.sql d.t-schema-schema.sql",
                "d.t-schema.sql: reads both",
            ),
            (
                "metadata d-schema-create.sql d.t-schema.sql d.t.1-schema.sql d.t.1.sql",
                "d.t.1.sql: reads both",
            ),
            (
                "metadata d-schema-create.sql d.v-schema-view.sql",
                "no placeholder",
            ),
            (
                "metadata d-schema-create.sql d.t-schema-triggers.sql",
                "no schema file",
            ),
            ("metadata", "holds no database"),
            (
                "metadata d.t-schema.sql d.t.sql",
                "d.t-schema.sql: a schema file",
            ),
            (
                "metadata d.t-schema-post.sql d.t.sql",
                "d.t-schema-post.sql: a schema file",
            ),
            (
                "metadata d.t.x.sql",
                "d.t.x.sql: a data file of a dump without schemas",
            ),
            ("metadata d.t.sql d.t.sql.gz", "same file twice"),
            ("metadata .t.sql", "names no database"),
            ("metadata a.t.sql b.t.sql", "ok"),
            (
                "metadata d-schema-create.sql d.-schema.sql",
                "names no table",
            ),
        ];
        for (list, want) in cases {
            if want == "ok" {
                plan(&names(list), None).expect(list);
                let e = plan(&names(list), Some("x")).expect_err("two databases into one");
                assert!(e.0.contains("a, b"), "{e}");
                continue;
            }
            let e = plan(&names(list), None).expect_err(list);
            assert!(e.0.contains(want), "{list}: {e}");
        }
    }

    #[test]
    fn metadata_positions() {
        let v010 = "Started dump at: 2026-11-28 14:40:09\nSHOW MASTER STATUS:\n\tLog: mariadb-bin.000001\n\tPos: 101558\n\tGTID:0-1-10\n\nFinished dump at: 2026-11-28 14:40:09\n";
        let p = metadata(v010).expect("0.10").expect("position");
        assert_eq!(p.to_string(), "mariadb-bin.000001:101558, GTID 0-1-10");
        let with_replica = "Started dump at: x\nSHOW SLAVE STATUS:\n\tHost: h\n\tLog: other.000009\n\tPos: 4\n\tGTID:9-9-9\n\nSHOW MASTER STATUS:\n\tLog: b.000002\n\tPos: 7\n\tGTID:\n\n";
        assert_eq!(
            metadata(with_replica).expect("replica").expect("pos"),
            Position {
                log: Some("b.000002".into()),
                pos: Some(7),
                gtid: None
            }
        );
        let ini = "# Started dump at: 2024-01-01\n[config]\nquote_character = BACKTICK\n\n[source]\n# Channel_Name = ''\nFile = mysql-bin.000003\nPosition = 157\nExecuted_Gtid_Set = 0-1-5\n\n[`db`.`t`]\nreal_table_name=t\nrows = 3\n";
        assert_eq!(
            metadata(ini).expect("ini").expect("pos").to_string(),
            "mysql-bin.000003:157, GTID 0-1-5"
        );
        assert_eq!(
            metadata("Started dump at: x\nFinished dump at: y\n").expect("none"),
            None
        );
        for (bad, want) in [
            (
                "[config]\nquote_character = DOUBLE_QUOTE\n",
                "double quotes",
            ),
            ("SHOW MASTER STATUS:\n\tLog: a\n\tPos: x1\n", "not a number"),
        ] {
            assert!(metadata(bad).expect_err(bad).0.contains(want), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_listing_plans_or_says_why(list in proptest::collection::vec("[a-z.\\-_0-9`]{0,24}(\\.sql)?(\\.gz|\\.zst)?", 0..12), into in proptest::option::of("[a-z`]{1,6}")) {
            let mut list = list;
            list.push(METADATA.into());
            match plan(&list, into.as_deref()) {
                Ok(p) => {
                    // Every file of the listing runs once, but metadata.
                    let files: BTreeSet<&String> = p.steps.iter().filter_map(|s| match s { Step::File(f) => Some(f), Step::Sql(_) => None }).collect();
                    let runs = p.steps.iter().filter(|s| matches!(s, Step::File(_))).count();
                    proptest::prop_assert_eq!(files.len(), runs);
                    let mut want: BTreeSet<&String> = list.iter().filter(|n| *n != METADATA).collect();
                    if into.is_some() {
                        want.retain(|n| !n.ends_with("-schema-create.sql") && !n.ends_with("-schema-create.sql.gz") && !n.ends_with("-schema-create.sql.zst"));
                    }
                    proptest::prop_assert_eq!(files, want);
                }
                Err(e) => proptest::prop_assert!(!e.0.is_empty()),
            }
        }

        #[test]
        fn any_metadata_reads_or_says_why(text in "[\\[\\]a-zA-Z_:=# \t\n0-9.'\"-]{0,200}") {
            let _ = metadata(&text);
        }
    }
}
