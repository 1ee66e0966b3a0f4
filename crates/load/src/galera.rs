//! Loading into a node of a Galera cluster. Galera replicates InnoDB
//! only: rows written into a MyISAM or Aria table stay on the node that
//! loaded them, and the other nodes silently differ. So a load into a
//! Galera node reads every `CREATE TABLE` / `ALTER TABLE ... ENGINE` of a
//! dump file before anything runs and refuses one that names another
//! engine (or leaves it to a node whose default is another); input that
//! cannot be read twice (standard input) is checked statement by
//! statement and stops before the first such statement runs. Batches are
//! kept under the node's write-set limits (`wsrep_max_ws_size`,
//! `wsrep_max_ws_rows`). A certification conflict reaches the loader as
//! a deadlock (1213) and is retried as one (`retry`).

use std::path::Path;

use mysql_async::prelude::Queryable;
use sqlfleet_dump::lex::{lex, Tok};
use sqlfleet_dump::{Kind, Splitter};

/// What the target node says about its cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    /// `wsrep_max_ws_size` in bytes.
    pub max_ws_size: u64,
    /// `wsrep_max_ws_rows` (0: no limit).
    pub max_ws_rows: u64,
    /// `default_storage_engine`, upper-cased.
    pub default_engine: String,
    /// The node is MariaDB's (`@@version` says so).
    pub mariadb: bool,
}

/// The cluster the target belongs to; `None` when `wsrep_on` is OFF (or
/// the server has no such variable).
pub async fn detect(c: &mut mysql_async::Conn) -> Result<Option<Cluster>, mysql_async::Error> {
    let rows: Vec<(String, String)> = c
        .query(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_cluster_name', \
             'wsrep_max_ws_size', 'wsrep_max_ws_rows', 'default_storage_engine', 'version')",
        )
        .await?;
    let get = |k: &str| {
        rows.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    if !get("wsrep_on").eq_ignore_ascii_case("ON") {
        return Ok(None);
    }
    Ok(Some(Cluster {
        name: get("wsrep_cluster_name"),
        max_ws_size: get("wsrep_max_ws_size").parse().unwrap_or(u64::MAX),
        max_ws_rows: get("wsrep_max_ws_rows").parse().unwrap_or(0),
        default_engine: get("default_storage_engine").to_ascii_uppercase(),
        mariadb: get("version").contains("MariaDB"),
    }))
}

impl Cluster {
    /// Why a load with `binlog` must not run on this node, if it must
    /// not: `--skip-binlog` on a node that is not MariaDB's. MariaDB
    /// (10.1.7 on) replicates a write set whatever `sql_log_bin` says;
    /// MySQL's and Percona's Galera take `sql_log_bin = 0` as "do not
    /// replicate", and the other nodes would silently miss the rows.
    pub fn binlog_refusal(&self, binlog: crate::session::Binlog) -> Option<String> {
        (binlog == crate::session::Binlog::Skip && !self.mariadb).then(|| {
            format!(
                "--skip-binlog: this node of cluster '{}' is not MariaDB's Galera, where sql_log_bin = 0 also stops the rows reaching the other nodes; load without it",
                self.name
            )
        })
    }

    /// The batch size to use: at most half the write-set limit (a
    /// write set carries keys and row images beside the statement text);
    /// with a row limit, one statement per batch (the smallest unit the
    /// loader controls; a statement over the limit is the server's error).
    pub fn batch_bytes(&self, asked: usize) -> usize {
        if self.max_ws_rows > 0 {
            return 1;
        }
        let cap = usize::try_from(self.max_ws_size / 2).unwrap_or(usize::MAX);
        asked.min(cap.max(1))
    }
}

/// What a table statement says about the engine it leaves the table in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Engine {
    /// `ENGINE [=] name`, upper-cased.
    Named(String),
    /// None named: the server's default (a CREATE), or unchanged (ALTER).
    Unnamed,
    /// The statement takes its definition from elsewhere
    /// (`CREATE TABLE ... LIKE`): its engine cannot be read from its text.
    Unknown,
}

/// The engine option of a `CREATE TABLE` or `ALTER TABLE` statement: the
/// `ENGINE` word outside every bracket (so never a column's name or a
/// comment's text, which the lexer keeps apart).
pub fn table_engine(text: &[u8]) -> Engine {
    let toks = lex(text).toks;
    let mut depth = 0i32;
    let mut like = false;
    for (k, (t, _)) in toks.iter().enumerate() {
        match t {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            Tok::Word(w) if depth == 0 && w == "LIKE" => like = true,
            Tok::Word(w) if depth == 0 && (w == "ENGINE" || w == "TYPE") => {
                let mut next = toks.get(k + 1);
                let eq = next.is_some_and(|(t, _)| t.is_punct(b'='));
                // Without `=`, a word after a column clause's keyword is
                // a column named `engine` (ALTER TABLE ... ADD engine INT).
                let named_column =
                    k.checked_sub(1)
                        .and_then(|p| toks.get(p))
                        .is_some_and(|(t, _)| {
                            [
                                "ADD", "COLUMN", "CHANGE", "MODIFY", "AFTER", "DROP", "RENAME",
                                "TO", "ALTER", "EXISTS",
                            ]
                            .iter()
                            .any(|kw| t.is_word(kw))
                        });
                if eq {
                    next = toks.get(k + 2);
                } else if named_column {
                    continue;
                }
                match next {
                    Some((Tok::Word(n), _)) | Some((Tok::Quoted(n), _)) => {
                        return Engine::Named(n.to_ascii_uppercase().to_string());
                    }
                    _ => {}
                }
            }
            Tok::Word(w) if depth == 0 && (w == "SELECT" || w == "AS") => break,
            _ => {}
        }
    }
    if like {
        Engine::Unknown
    } else {
        Engine::Unnamed
    }
}

/// Why a table statement may not run on a Galera node; `None` when it
/// may. `create`: a CREATE (an unnamed engine is the node's default).
pub fn refusal(engine: &Engine, create: bool, default_engine: &str) -> Option<String> {
    let innodb = |e: &str| matches!(e, "INNODB" | "XTRADB");
    match engine {
        Engine::Named(e) if innodb(e) => None,
        Engine::Named(e) => Some(format!("ENGINE={e}")),
        Engine::Unnamed if !create || innodb(default_engine) => None,
        Engine::Unnamed => Some(format!(
            "no ENGINE, and the node's default_storage_engine is {default_engine}"
        )),
        Engine::Unknown => Some("CREATE TABLE ... LIKE: its engine is another table's, which the dump does not show here".into()),
    }
}

/// One statement a Galera node must not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub line: u64,
    pub table: String,
    pub why: String,
}

/// The message for refused statements, naming up to five.
pub fn message(cluster: &Cluster, found: &[Finding]) -> String {
    let shown: Vec<String> = found
        .iter()
        .take(5)
        .map(|f| match f.line {
            0 => format!("{} ({})", f.table, f.why),
            l => format!("{} (line {l}: {})", f.table, f.why),
        })
        .collect();
    format!(
        "the target is a node of Galera cluster '{}', which replicates InnoDB tables only: {} would be written on this node alone and the other nodes would silently differ ({}{}); make {} InnoDB in the dump, or load into a server outside the cluster",
        cluster.name,
        sqlfleet_conn::text::count(found.len() as u64, "table statement"),
        shown.join(", "),
        if found.len() > shown.len() { ", ..." } else { "" },
        if found.len() == 1 { "it" } else { "them" },
    )
}

/// Reads a whole dump file for table statements a Galera node must not
/// run (before anything of it runs).
/// `line_delimiter`: statements end only at a `;` that ends a line (a
/// mydumper directory's files).
pub fn scan(
    path: &Path,
    cluster: &Cluster,
    line_delimiter: bool,
    charset: sqlfleet_dump::lex::Multibyte,
) -> Result<Vec<Finding>, sqlfleet_dump::split::SplitError> {
    let opened =
        sqlfleet_dump::reader::open(path).map_err(|e| sqlfleet_dump::split::SplitError::Io {
            offset: 0,
            line: 0,
            what: e.to_string(),
        })?;
    let mut split = Splitter::new(opened.reader);
    split.set_line_delimiter(line_delimiter);
    split.set_charset(charset);
    let mut found = Vec::new();
    while let Some(stmt) = split.next_statement()? {
        if let Some(f) = check(&stmt.scan_text(), stmt.line, cluster) {
            found.push(f);
        }
        if let Some(on) = sqlfleet_dump::classify::backslash_escapes_after(&stmt.text) {
            split.set_backslash_escapes(on);
        }
    }
    Ok(found)
}

/// One statement against the cluster's rule.
pub fn check(text: &[u8], line: u64, cluster: &Cluster) -> Option<Finding> {
    // A temporary table is never replicated, whatever its engine.
    let head = lex(&text[..text.len().min(64)]).toks;
    if head.iter().take(4).any(|(t, _)| t.is_word("TEMPORARY")) {
        return None;
    }
    let (table, create) = match sqlfleet_dump::classify::classify(text) {
        Kind::TableDdl { table, create } => (
            match &table.db {
                Some(d) => format!("{d}.{}", table.name),
                None => table.name.clone(),
            },
            create,
        ),
        // CREATE TABLE ... SELECT / LIKE run alone, but make a table too.
        _ => (created_table(text)?, true),
    };
    let why = refusal(&table_engine(text), create, &cluster.default_engine)?;
    Some(Finding { line, table, why })
}

/// The table a `CREATE [OR REPLACE] TABLE [IF NOT EXISTS] name ...` makes.
fn created_table(text: &[u8]) -> Option<String> {
    let toks = lex(text).toks;
    let mut it = toks.iter().map(|(t, _)| t).peekable();
    if !it.next()?.is_word("CREATE") {
        return None;
    }
    if it.peek().is_some_and(|t| t.is_word("OR")) {
        it.next();
        it.next();
    }
    if !it.next()?.is_word("TABLE") {
        return None;
    }
    if it.peek().is_some_and(|t| t.is_word("IF")) {
        it.next();
        it.next();
        it.next();
    }
    let name = |t: &Tok| match t {
        Tok::Word(w) | Tok::Quoted(w) => Some(w.to_string()),
        _ => None,
    };
    let first = name(it.next()?)?;
    if it.peek().is_some_and(|t| t.is_punct(b'.')) {
        it.next();
        return Some(format!("{first}.{}", name(it.next()?)?));
    }
    Some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MariaDB cluster 'g' of InnoDB default with a write-set limit of
    /// `max_ws_size` bytes and no row limit.
    fn cluster(max_ws_size: u64) -> Cluster {
        Cluster {
            name: "g".into(),
            max_ws_size,
            max_ws_rows: 0,
            default_engine: "INNODB".into(),
            mariadb: true,
        }
    }

    #[test]
    fn the_engine_a_table_statement_names() {
        use Engine::*;
        let n = |e: &str| Named(e.to_string());
        let rows: Vec<(&str, Engine)> = vec![
            (
                "CREATE TABLE t (id int) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4",
                n("MYISAM"),
            ),
            ("CREATE TABLE t (id int) ENGINE = InnoDB", n("INNODB")),
            (
                "CREATE TABLE `t` (`engine` int, c varchar(9) COMMENT 'ENGINE=MyISAM') ENGINE=Aria",
                n("ARIA"),
            ),
            ("CREATE TABLE t (engine int)", Unnamed),
            ("CREATE TABLE t (id int) COMMENT='ENGINE=MyISAM'", Unnamed),
            (
                "CREATE TABLE t (id int) /*!50100 ENGINE=MyISAM */",
                n("MYISAM"),
            ),
            ("ALTER TABLE t ENGINE=MyISAM", n("MYISAM")),
            ("ALTER TABLE t ADD COLUMN engine int", Unnamed),
            ("CREATE TABLE t LIKE u", Unknown),
            ("CREATE TABLE t (id int) ENGINE InnoDB", n("INNODB")),
        ];
        for (sql, want) in rows {
            assert_eq!(table_engine(sql.as_bytes()), want, "{sql}");
        }
    }

    #[test]
    fn what_a_galera_node_refuses() {
        let c = cluster(2 << 30);
        let myisam_default = Cluster {
            default_engine: "MYISAM".into(),
            ..c.clone()
        };
        // (statement, cluster, refused)
        let rows = [
            ("CREATE TABLE t (id int) ENGINE=InnoDB", &c, false),
            ("CREATE TABLE t (id int) ENGINE=MyISAM", &c, true),
            ("CREATE TABLE t (id int) ENGINE=Aria", &c, true),
            ("CREATE TABLE t (id int)", &c, false),
            ("CREATE TABLE t (id int)", &myisam_default, true),
            ("ALTER TABLE t ENGINE=MyISAM", &c, true),
            ("ALTER TABLE t ADD KEY (id)", &myisam_default, false),
            ("CREATE TABLE t LIKE u", &c, true),
            ("CREATE TABLE t ENGINE=MyISAM AS SELECT 1 AS a", &c, true),
            ("CREATE TABLE t AS SELECT 1 AS a", &c, false),
            ("CREATE TEMPORARY TABLE t (id int) ENGINE=MyISAM", &c, false),
            ("INSERT INTO t VALUES (1)", &c, false),
            ("DROP TABLE IF EXISTS t", &c, false),
        ];
        for (sql, cluster, refused) in rows {
            assert_eq!(
                check(sql.as_bytes(), 1, cluster).is_some(),
                refused,
                "{sql}"
            );
        }
        let m = message(
            &c,
            &[Finding {
                line: 7,
                table: "db.t".into(),
                why: "ENGINE=MYISAM".into(),
            }],
        );
        assert!(m.contains("db.t (line 7: ENGINE=MYISAM)"), "{m}");
    }

    #[test]
    fn skipping_the_binlog_is_refused_where_it_stops_replication() {
        use crate::session::Binlog;
        let c = cluster(1 << 20);
        assert_eq!(c.binlog_refusal(Binlog::Skip), None);
        let mysql = Cluster {
            mariadb: false,
            ..c
        };
        assert_eq!(mysql.binlog_refusal(Binlog::Write), None);
        let why = mysql.binlog_refusal(Binlog::Skip).unwrap_or_default();
        assert!(
            why.contains("cluster 'g'") && why.contains("other nodes"),
            "{why}"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_read_without_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = table_engine(&data);
            let _ = check(&data, 1, &cluster(1 << 20));
        }

        #[test]
        fn an_engine_option_is_found_whatever_the_columns(cols in proptest::collection::vec("[a-z]{1,8}", 1..6), engine in "(MyISAM|Aria|InnoDB|MEMORY)") {
            let defs: Vec<String> = cols.iter().map(|c| format!("`{c}` int COMMENT 'ENGINE=X'")).collect();
            let sql = format!("CREATE TABLE t ({}) ENGINE={engine} COMMENT='ENGINE=Y'", defs.join(", "));
            proptest::prop_assert_eq!(table_engine(sql.as_bytes()), Engine::Named(engine.to_ascii_uppercase()));
        }
    }

    #[test]
    fn batches_stay_under_half_the_write_set_limit() {
        let c = cluster;
        assert_eq!(c(2 << 30).batch_bytes(4 << 20), 4 << 20);
        assert_eq!(c(1 << 20).batch_bytes(4 << 20), 1 << 19);
        assert_eq!(c(1).batch_bytes(4 << 20), 1);
        let rows = Cluster {
            max_ws_rows: 1000,
            ..c(2 << 30)
        };
        assert_eq!(rows.batch_bytes(4 << 20), 1);
    }
}
