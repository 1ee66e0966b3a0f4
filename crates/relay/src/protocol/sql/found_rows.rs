//! How a statement leaves FOUND_ROWS(), read from its text, as the server
//! was measured to leave it (MariaDB 10.11 and 11.4, a count of 5 and of 1
//! before each statement: `tests/differential.rs`
//! `every_kind_of_statement_leaves_found_rows_as_the_server_does` holds
//! the list of shapes).
//!
//! - The rows it returns ([`Count::Rows`]): a SELECT, and the SHOW forms
//!   the server answers through information_schema (SHOW TABLES, COLUMNS,
//!   VARIABLES, ...), DESCRIBE of a table.
//! - The count before it ([`Count::Kept`]): every statement that returns
//!   no rows and runs no SELECT, the SHOW forms the server writes itself
//!   (SHOW CREATE, GRANTS, PROCESSLIST, WARNINGS, ...), VALUES, table
//!   maintenance (ANALYZE/CHECK/OPTIMIZE/REPAIR/CHECKSUM TABLE), HELP.
//! - Only the server's ([`Count::Server`]): a SELECT grouped without GROUP
//!   BY (an aggregate at its top level) whose WHERE the optimizer finds
//!   impossible (`WHERE 0`, a primary key value that is not there, a
//!   constant table's row that fails the condition) sends its one row and
//!   leaves the count before it; a SELECT ... INTO sets the rows it found,
//!   or keeps the count; EXPLAIN and ANALYZE of a statement set 0 or keep
//!   it; any SHOW form not measured. (A stored function's own statements
//!   do not count: the SELECT calling it sets the count when it ends. A
//!   stored aggregate function, CREATE AGGREGATE FUNCTION, is not told
//!   from another by the text, and is counted as a plain call.)
//!   The relay asks the server after such a statement, on a connection
//!   that held the client's own count before it.

use std::ops::Range;

use sqlfleet_dump::lex::Tok;

use super::word;

/// How the last statement of a text leaves FOUND_ROWS().
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// The rows it returns.
    Rows,
    /// As it was before (or as the statement's other rules say:
    /// `found_rows_unknown` for INSERT ... SELECT and routines).
    Kept,
    /// Only the server knows, and it may be the count before the
    /// statement. `one_row`: the only reason is a grouping without GROUP
    /// BY in one SELECT (no UNION, HAVING, LIMIT, INTO), which returns one
    /// row: after a count of 1 the count is 1 either way.
    Server { one_row: bool },
}

/// The aggregate functions of MariaDB 10.11 and 11.4 (`calls.rs`'s
/// built-ins that group: checked against the server by
/// `tests/differential.rs`).
pub(super) const AGGREGATES: &[&str] = &[
    "AVG",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "COUNT",
    "GROUP_CONCAT",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
    "MAX",
    "MIN",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "SUM",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
];

/// SHOW forms the server answers as a SELECT of information_schema: the
/// count is the rows (the words after SHOW, past GLOBAL, SESSION, FULL,
/// STORAGE).
const SHOW_ROWS: &[&str] = &[
    "DATABASES",
    "SCHEMAS",
    "TABLES",
    "COLUMNS",
    "FIELDS",
    "INDEX",
    "INDEXES",
    "KEYS",
    "TABLE",
    "STATUS",
    "VARIABLES",
    "COLLATION",
    "CHARACTER",
    "CHARSET",
    "ENGINES",
    "PLUGINS",
    "OPEN",
    "TRIGGERS",
    "EVENTS",
    "PROCEDURE",
    "FUNCTION",
    "PACKAGE",
    "COUNT",
    "CLIENT_STATISTICS",
    "USER_STATISTICS",
    "INDEX_STATISTICS",
    "TABLE_STATISTICS",
    "LOCALES",
    "QUERY_RESPONSE_TIME",
];

/// SHOW forms the server writes itself: the count stays.
const SHOW_KEPT: &[&str] = &[
    "CREATE",
    "GRANTS",
    "ENGINE",
    "MASTER",
    "BINLOG",
    "RELAYLOG",
    "PROCESSLIST",
    "PRIVILEGES",
    "BINARY",
    "SLAVE",
    "REPLICA",
    "ALL",
    "PROFILES",
    "PROFILE",
    "WARNINGS",
    "ERRORS",
    "EXPLAIN",
    "ANALYZE",
    "AUTHORS",
    "CONTRIBUTORS",
];

/// How statement `t` (one of a text's, `SET STATEMENT ... FOR` taken off)
/// leaves FOUND_ROWS().
pub(super) fn count(t: &[(Tok, Range<usize>)]) -> Count {
    let lead = t.iter().take_while(|(k, _)| k.is_punct(b'(')).count();
    match word(t.get(lead)) {
        Some("SELECT" | "WITH") => select(t, lead),
        Some("VALUES") if !has_word_at_top(t, lead, &["UNION", "INTERSECT", "EXCEPT"]) => {
            Count::Kept
        }
        Some("VALUES") => Count::Server { one_row: false },
        Some("SHOW") => show(t),
        Some("DESCRIBE" | "DESC" | "EXPLAIN") => {
            // Of a table: its columns, counted. Of a statement: 0, or kept.
            match t.get(1).map(|(k, _)| k) {
                Some(Tok::Quoted(_)) => Count::Rows,
                Some(Tok::Word(w))
                    if !matches!(
                        w.as_str(),
                        "SELECT"
                            | "WITH"
                            | "VALUES"
                            | "INSERT"
                            | "REPLACE"
                            | "UPDATE"
                            | "DELETE"
                            | "FORMAT"
                            | "EXTENDED"
                            | "PARTITIONS"
                            | "ANALYZE"
                            | "FOR"
                            | "TABLE"
                    ) =>
                {
                    Count::Rows
                }
                _ => Count::Server { one_row: false },
            }
        }
        // ANALYZE SELECT/UPDATE/...: the rows it read, or kept.
        Some("ANALYZE")
            if !matches!(
                word(t.get(1)),
                Some("TABLE" | "LOCAL" | "NO_WRITE_TO_BINLOG")
            ) =>
        {
            Count::Server { one_row: false }
        }
        _ => Count::Kept,
    }
}

fn show(t: &[(Tok, Range<usize>)]) -> Count {
    let what = t.iter().skip(1).filter_map(|x| word(Some(x))).find(|w| {
        !matches!(
            *w,
            "GLOBAL" | "SESSION" | "LOCAL" | "FULL" | "STORAGE" | "EXTENDED"
        )
    });
    match what {
        Some(w) if SHOW_ROWS.contains(&w) => Count::Rows,
        Some(w) if SHOW_KEPT.contains(&w) => Count::Kept,
        _ => Count::Server { one_row: false },
    }
}

/// A SELECT (or WITH ... SELECT) starting after `lead` opening brackets.
fn select(t: &[(Tok, Range<usize>)], lead: usize) -> Count {
    let set_op = has_word_at_top(t, lead, &["UNION", "INTERSECT", "EXCEPT"]);
    let mut grouped = false;
    let mut depth = 0usize;
    let mut other = false;
    let (mut having, mut limit, mut group_by) = (false, false, false);
    for (i, (k, _)) in t.iter().enumerate() {
        match k {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth = depth.saturating_sub(1),
            Tok::Word(w) => {
                let top = depth <= lead;
                match w.as_str() {
                    // (INTO anywhere: a SELECT ... INTO in a routine body
                    // is not this statement's, but a CREATE is not a
                    // SELECT.)
                    "INTO" | "PROCEDURE" => other = true,
                    "HAVING" if top => having = true,
                    "LIMIT" | "OFFSET" | "FETCH" if top => limit = true,
                    "GROUP" if top && word(t.get(i + 1)) == Some("BY") => group_by = true,
                    a if AGGREGATES.contains(&a)
                        && t.get(i + 1).is_some_and(|(k, _)| k.is_punct(b'('))
                        && (top || set_op)
                        && !windowed(t, i + 1) =>
                    {
                        grouped = true
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    // A union's parts each group or not: any grouping counts.
    let grouped = grouped && (set_op || !group_by);
    if other {
        Count::Server { one_row: false }
    } else if grouped {
        Count::Server {
            one_row: !set_op && !having && !limit,
        }
    } else {
        Count::Rows
    }
}

/// Whether the call whose `(` is at `open` is followed by OVER (a window
/// function: no grouping).
fn windowed(t: &[(Tok, Range<usize>)], open: usize) -> bool {
    let mut depth = 0usize;
    for (i, (k, _)) in t.iter().enumerate().skip(open) {
        if k.is_punct(b'(') {
            depth += 1;
        } else if k.is_punct(b')') {
            depth -= 1;
            if depth == 0 {
                return word(t.get(i + 1)) == Some("OVER");
            }
        }
    }
    false
}

/// Whether one of `words` stands at the statement's top level (inside its
/// `lead` opening brackets at most).
fn has_word_at_top(t: &[(Tok, Range<usize>)], lead: usize, words: &[&str]) -> bool {
    let mut depth = 0usize;
    t.iter().any(|(k, _)| {
        match k {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth = depth.saturating_sub(1),
            Tok::Word(w) => return depth <= lead && words.contains(&w.as_str()),
            _ => {}
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row: a statement, and how the server was measured to leave
    /// FOUND_ROWS() after it (10.11.19).
    #[test]
    fn how_each_shape_of_statement_leaves_found_rows() {
        let server = Count::Server { one_row: false };
        let one = Count::Server { one_row: true };
        let rows: &[(&str, Count)] = &[
            ("SELECT * FROM t", Count::Rows),
            ("SELECT * FROM t WHERE 0", Count::Rows),
            ("SELECT * FROM t ORDER BY v LIMIT 2", Count::Rows),
            ("SELECT k, COUNT(*) FROM t GROUP BY k", Count::Rows),
            ("SELECT k, COUNT(*) FROM t WHERE 0 GROUP BY k", Count::Rows),
            ("SELECT COUNT(*) OVER () FROM t", Count::Rows),
            ("SELECT (SELECT COUNT(*) FROM t WHERE 0)", Count::Rows),
            (
                "SELECT * FROM t WHERE v = (SELECT MAX(v) FROM t)",
                Count::Rows,
            ),
            (
                "WITH w AS (SELECT COUNT(*) c FROM t WHERE 0) SELECT * FROM w",
                Count::Rows,
            ),
            ("SELECT count FROM t", Count::Rows),
            ("SELECT f(1) FROM t", Count::Rows),
            ("SELECT COUNT(*) FROM t WHERE 0", one),
            ("SELECT SUM(v) FROM t WHERE id = 99", one),
            ("select max(id) from t", one),
            ("(SELECT COUNT(*) FROM t WHERE 0)", one),
            ("SELECT COUNT(*) FROM (SELECT * FROM t WHERE 0) d", one),
            ("SELECT COUNT(*) FROM t WHERE 0 HAVING 1", server),
            ("SELECT COUNT(*) FROM t WHERE 0 LIMIT 1", server),
            ("SELECT COUNT(*) FROM t WHERE 0 ORDER BY 1", one),
            ("SELECT 1 UNION ALL SELECT COUNT(*) FROM t WHERE 0", server),
            (
                "SELECT 1 UNION ALL (SELECT COUNT(*) FROM t WHERE 0)",
                server,
            ),
            ("SELECT id FROM t WHERE id = 2 INTO @x", server),
            ("SELECT 1 INTO @a", server),
            ("SELECT * FROM t PROCEDURE ANALYSE()", server),
            ("VALUES (1), (2)", Count::Kept),
            ("VALUES (1) UNION SELECT 2", server),
            ("SHOW TABLES", Count::Rows),
            ("SHOW FULL COLUMNS FROM t", Count::Rows),
            ("SHOW GLOBAL VARIABLES LIKE 'x%'", Count::Rows),
            ("SHOW STORAGE ENGINES", Count::Rows),
            ("SHOW COUNT(*) WARNINGS", Count::Rows),
            ("SHOW WARNINGS", Count::Kept),
            ("SHOW CREATE TABLE t", Count::Kept),
            ("SHOW FULL PROCESSLIST", Count::Kept),
            ("SHOW MASTER STATUS", Count::Kept),
            ("SHOW SOMETHING_NEW", server),
            ("DESC t", Count::Rows),
            ("DESCRIBE `t`", Count::Rows),
            ("EXPLAIN t", Count::Rows),
            ("EXPLAIN SELECT 1", server),
            ("EXPLAIN FORMAT=JSON SELECT 1", server),
            ("ANALYZE SELECT * FROM t", server),
            ("ANALYZE TABLE t", Count::Kept),
            ("CHECK TABLE t", Count::Kept),
            ("INSERT INTO t VALUES (1)", Count::Kept),
            ("UPDATE t SET v = 1", Count::Kept),
            ("SET @a = 1", Count::Kept),
            ("DO 1", Count::Kept),
        ];
        for (sql, want) in rows {
            let lexed = sqlfleet_dump::lex::lex(sql.as_bytes());
            assert_eq!(count(&lexed.toks), *want, "{sql}");
        }
    }
}
