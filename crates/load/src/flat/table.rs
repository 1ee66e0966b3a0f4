//! The table a CSV/TSV load goes into, as the server describes it: its
//! columns and which of them the file fills, and what that decides —
//! whether chunks may load in parallel, whether the server gives rows
//! their ids, whether the file's text must be checked as UTF-8.

use mysql_async::prelude::Queryable;
use sqlfleet_conn::quote::ident;
use sqlfleet_flat::ServerAssigns;

use super::FlatOptions;
use crate::error::LoadError;
use crate::galera;

fn setup(what: String) -> LoadError {
    LoadError::Setup { what }
}

/// One column: its name, character set, EXTRA, and whether its default
/// takes a sequence's next value.
type Column = (String, Option<String>, String, Option<u8>);

/// The target table and the file's columns in it.
pub(super) struct FlatTable {
    /// `db`.`table`, quoted.
    pub sql: String,
    /// The file's fields, in order: each column's name and character set.
    pub chosen: Vec<(String, Option<String>)>,
    /// The column list of the LOAD DATA (empty: the table's own order).
    pub columns_sql: String,
    pub auto_inc: bool,
    /// Rows load in file order, one chunk at a time.
    pub in_file_order: bool,
    /// The AUTO_INCREMENT column the file leaves to the server.
    pub auto_inc_left_out: Option<String>,
    /// The file is checked as UTF-8 (the load's and a column's charset).
    pub utf8: bool,
    /// The file's field that holds the AUTO_INCREMENT column.
    pub server_assigns: Option<ServerAssigns>,
    /// The fields whose column the server reports in the binary set (a
    /// result's metadata: numbers, dates, BINARY, BLOB...): LOAD DATA
    /// reads them byte by byte, whatever the file's set.
    pub binary: Vec<bool>,
}

impl FlatTable {
    /// Reads the table `opts.into` names (a Galera node takes InnoDB
    /// tables only).
    pub async fn read(
        conn: &mut mysql_async::Conn,
        opts: &FlatOptions,
        endpoint: &str,
        cluster: Option<&galera::Cluster>,
    ) -> Result<FlatTable, LoadError> {
        let (db, table) = match opts.into.split_once('.') {
            Some((d, t)) => (d.to_string(), t.to_string()),
            None => match &opts.target.database {
                Some(d) => (d.clone(), opts.into.clone()),
                None => {
                    return Err(setup(format!(
                        "--into {}: name the database (DB.TABLE or -D DB)",
                        opts.into
                    )))
                }
            },
        };
        let sql = format!("{}.{}", ident(&db), ident(&table));
        let described = |what: &str, e: mysql_async::Error| {
            setup(format!(
                "{endpoint}: reading the {what} of {sql}: {}",
                crate::error::describe(&e).1
            ))
        };
        let cols: Vec<Column> = conn
            .exec(
                format!(
                    "SELECT COLUMN_NAME, CHARACTER_SET_NAME, EXTRA, {} FROM information_schema.COLUMNS \
                     WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
                    crate::queue::TAKES_SEQUENCE
                ),
                (&db, &table),
            )
            .await
            .map_err(|e| described("columns", e))?;
        if cols.is_empty() {
            return Err(setup(format!(
                "{endpoint}: table {sql} does not exist (create it before loading)"
            )));
        }
        if let Some(c) = cluster {
            let engine: Option<String> = conn
                .exec_first(
                    "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
                    (&db, &table),
                )
                .await
                .map_err(|e| described("engine", e))?;
            let e = galera::Engine::Named(engine.unwrap_or_default().to_ascii_uppercase());
            if let Some(why) = galera::refusal(&e, false, &c.default_engine) {
                let table = sql.clone();
                let found = [galera::Finding {
                    line: 0,
                    table,
                    why,
                }];
                return Err(setup(galera::message(c, &found)));
            }
        }
        let triggers: Option<u64> = conn
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.TRIGGERS \
                 WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?",
                (&db, &table),
            )
            .await
            .map_err(|e| described("triggers", e))?;
        let mut t = FlatTable::of(sql.clone(), &cols, opts, triggers.unwrap_or(0) > 0)?;
        let list = t
            .chosen
            .iter()
            .map(|(n, _)| ident(n))
            .collect::<Vec<_>>()
            .join(", ");
        t.binary = match crate::binary_columns::binary_columns(conn, &t.sql, &list).await {
            Ok(b) => b,
            // An account that may insert but not read (LOAD DATA needs no
            // more): information_schema's word, a NULL character set. It
            // differs from the server's reading only for INET6 and UUID,
            // whose text is ASCII (a multi-byte character there is not a
            // value the column takes).
            Err(mysql_async::Error::Server(e)) if matches!(e.code, 1142 | 1143) => {
                t.chosen.iter().map(|(_, cs)| cs.is_none()).collect()
            }
            Err(e) => return Err(described("column types", e)),
        };
        if t.binary.len() != t.chosen.len() {
            return Err(setup(format!(
                "{endpoint}: reading the column types of {sql}: {} columns described for {} fields",
                t.binary.len(),
                t.chosen.len()
            )));
        }
        if let Some((field, column)) = t.id_field(&cols) {
            let mode: Option<String> = conn
                .query_first("SELECT @@SESSION.sql_mode")
                .await
                .unwrap_or(None);
            t.server_assigns = Some(ServerAssigns {
                field,
                column,
                zero_is_value: mode
                    .is_some_and(|m| m.to_ascii_uppercase().contains("NO_AUTO_VALUE_ON_ZERO")),
            });
        }
        Ok(t)
    }

    /// What the columns decide (no `server_assigns` yet).
    fn of(
        sql: String,
        cols: &[Column],
        opts: &FlatOptions,
        triggers: bool,
    ) -> Result<FlatTable, LoadError> {
        let auto_inc_col = auto_increment(cols);
        // Values the server gives rows in the order they arrive: an
        // AUTO_INCREMENT or `DEFAULT NEXTVAL(...)` column the file leaves out.
        let server_given: Vec<&str> = cols
            .iter()
            .filter(|(_, _, extra, sequenced)| {
                extra.contains("auto_increment") || sequenced.unwrap_or(0) > 0
            })
            .map(|(n, ..)| n.as_str())
            .collect();
        let all: Vec<(String, Option<String>)> = cols
            .iter()
            .map(|(n, cs, ..)| (n.clone(), cs.clone()))
            .collect();
        let chosen: Vec<(String, Option<String>)> = match &opts.columns {
            None => all,
            Some(list) => list
                .iter()
                .map(|c| {
                    all.iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(c))
                        .cloned()
                        .ok_or_else(|| setup(format!("--columns: {sql} has no column '{c}'")))
                })
                .collect::<Result<_, _>>()?,
        };
        let has = |name: &str| chosen.iter().any(|(c, _)| c.eq_ignore_ascii_case(name));
        // Rows that get server-given values or fire triggers load in file
        // order, one chunk at a time, as LOAD DATA INFILE puts them in
        // (chunks in parallel gave the same rows other ids, silently).
        let in_file_order = server_given.iter().any(|n| !has(n)) || triggers;
        let columns_sql = match &opts.columns {
            Some(_) => format!(
                "({})",
                chosen
                    .iter()
                    .map(|(n, _)| ident(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        };
        let utf8 = opts.charset.starts_with("utf8")
            && chosen
                .iter()
                .any(|(_, cs)| cs.as_deref().is_some_and(|c| c.starts_with("utf8")));
        Ok(FlatTable {
            sql,
            auto_inc: auto_inc_col.is_some(),
            auto_inc_left_out: auto_inc_col.filter(|col| !has(col)),
            chosen,
            columns_sql,
            in_file_order,
            utf8,
            server_assigns: None,
            binary: Vec::new(),
        })
    }

    /// Ids the file leaves to the server (NULL or 0 in the
    /// AUTO_INCREMENT column) cannot be one LOAD DATA's when the file is
    /// loaded in several statements: the chunker refuses such a record,
    /// naming its line. The field and the column.
    fn id_field(&self, cols: &[Column]) -> Option<(usize, String)> {
        let col = auto_increment(cols)?;
        let field = self
            .chosen
            .iter()
            .position(|(c, _)| c.eq_ignore_ascii_case(&col))?;
        Some((field, col))
    }

    /// InnoDB reserves AUTO_INCREMENT values for a LOAD DATA in growing
    /// blocks and drops what a statement did not use: ids left to the
    /// server follow one LOAD DATA only when the file is one statement.
    pub fn refuse_split_ids(&self, opts: &FlatOptions) -> Result<(), LoadError> {
        let Some(col) = &self.auto_inc_left_out else {
            return Ok(());
        };
        for f in &opts.files {
            // stdin is not opened here (it can be read once only) and is
            // of unknown size; a file that does not open is named later.
            let (compressed, size) = if sqlfleet_dump::reader::is_stdin(f) {
                (false, None)
            } else {
                match sqlfleet_dump::reader::open(f) {
                    Ok(o) => (
                        o.compression != sqlfleet_dump::reader::Compression::None,
                        o.size,
                    ),
                    Err(_) => continue,
                }
            };
            if super::several_statements(compressed, size, opts.chunk_bytes) {
                return Err(setup(format!(
                    "{}: the file leaves the AUTO_INCREMENT column `{col}` of {} to the server, which reserves ids per LOAD DATA statement: loaded in several statements the rows would get other ids than one LOAD DATA gives them. Put the ids in the file, or load it as one statement with --chunk-bytes {} or more",
                    f.display(),
                    self.sql,
                    size.map_or("(its size)".to_string(), |n| n.to_string()),
                )));
            }
        }
        Ok(())
    }
}

/// The table's AUTO_INCREMENT column.
fn auto_increment(cols: &[Column]) -> Option<String> {
    cols.iter()
        .find(|(_, _, extra, _)| extra.contains("auto_increment"))
        .map(|(n, ..)| n.clone())
}
