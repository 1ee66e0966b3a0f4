//! What a statement needs from the connection it runs on and from the
//! statements before it: user variables, temporary tables, transaction
//! control, the previous statement's result (`LAST_INSERT_ID()`), reads
//! of other tables. The loader runs in parallel only what needs none of
//! these; the rest runs in order on one connection, or is refused.
//!
//! Written by hand (not a SQL parser) because it runs over every byte of
//! every INSERT on the reader thread: strings are skipped with memchr and
//! only the code between them is looked at.

use crate::classify::{is_word_byte, word_end};

/// What [`inspect`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traits {
    /// Names a user variable (`@v`, not `@@v`) outside a routine,
    /// trigger, view or event definition.
    pub user_vars: bool,
    /// Reads what the previous statement on this connection left:
    /// `LAST_INSERT_ID()`, `ROW_COUNT()`, `FOUND_ROWS()`, or undoes it
    /// (`ROLLBACK`). The function's name.
    pub previous_result: Option<&'static str>,
    /// Creates or uses state that lives in one connection: temporary
    /// tables, transaction control, locks, prepared statements,
    /// procedures, sequences. A short reason.
    pub session_state: Option<&'static str>,
    /// Contains a SELECT (INSERT ... SELECT, a subquery): reads tables.
    pub reads_tables: bool,
    /// An INSERT/REPLACE whose values are not all literals (function
    /// calls, column references, expressions).
    pub expressions: bool,
    /// INSERT IGNORE, REPLACE or ON DUPLICATE KEY UPDATE: the order of
    /// rows with the same key decides the result.
    pub order_sensitive: bool,
    /// `CREATE TEMPORARY TABLE` / `DROP TEMPORARY TABLE`.
    pub temporary: bool,
}

impl Traits {
    /// Nothing here ties the statement to one connection or to order.
    pub fn is_plain(&self) -> bool {
        !self.user_vars
            && self.previous_result.is_none()
            && self.session_state.is_none()
            && !self.reads_tables
            && !self.expressions
    }
}

const PREVIOUS: &[&str] = &["LAST_INSERT_ID", "ROW_COUNT", "FOUND_ROWS"];
const STATEFUL_FUNCS: &[&str] = &[
    "CONNECTION_ID",
    "GET_LOCK",
    "RELEASE_LOCK",
    "RELEASE_ALL_LOCKS",
    "IS_USED_LOCK",
    "IS_FREE_LOCK",
    "NEXTVAL",
    "LASTVAL",
    "SETVAL",
    "RAND",
    "UUID",
    "UUID_SHORT",
    "SYSDATE",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a [u8]),
    At,
    AtAt,
    Open,
    Close,
    Comma,
    Literal,
    Number(&'a [u8]),
    /// A `quoted` identifier's content.
    Quoted(&'a [u8]),
    Other,
}

/// Calls `f` for each token of the code (comments skipped, executable
/// comments read as code, strings and numbers as `Literal`).
/// Where the string literal opening at `i` ends (after its closing
/// quote; a doubled quote or a backslash escape inside it).
#[inline]
fn literal_end(text: &[u8], i: usize) -> usize {
    let (n, q) = (text.len(), text[i]);
    let mut j = i + 1;
    loop {
        match memchr::memchr2(q, b'\\', &text[j.min(n)..]) {
            None => return n,
            Some(k) => {
                j += k;
                if text[j] == b'\\' || text.get(j + 1) == Some(&q) {
                    j += 2;
                } else {
                    return j + 1;
                }
            }
        }
    }
}

/// Where the backquoted name opening at `i` ends (its closing backquote;
/// a doubled one inside it).
#[inline]
fn quoted_end(text: &[u8], i: usize) -> usize {
    let n = text.len();
    let mut j = i + 1;
    while j < n {
        if text[j] == b'`' {
            if text.get(j + 1) == Some(&b'`') {
                j += 2;
                continue;
            }
            break;
        }
        j += 1;
    }
    j
}

fn scan<'a>(text: &'a [u8], mut f: impl FnMut(Tok<'a>)) {
    let n = text.len();
    let mut i = 0;
    while i < n {
        let b = text[i];
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'\'' | b'"' => {
                f(Tok::Literal);
                i = literal_end(text, i);
            }
            b'`' => {
                let j = quoted_end(text, i);
                f(Tok::Quoted(&text[(i + 1).min(n)..j.min(n)]));
                i = j + 1;
            }
            b'/' if text.get(i + 1) == Some(&b'*') => {
                let j = i + 2;
                if text.get(j) == Some(&b'!')
                    || (text.get(j) == Some(&b'M') && text.get(j + 1) == Some(&b'!'))
                {
                    let mut k = j + if text[j] == b'M' { 2 } else { 1 };
                    while k < n && text[k].is_ascii_digit() {
                        k += 1;
                    }
                    i = k;
                } else {
                    i = match memchr::memmem::find(&text[j..], b"*/") {
                        Some(k) => j + k + 2,
                        None => n,
                    };
                }
            }
            b'*' if text.get(i + 1) == Some(&b'/') => i += 2,
            b'#' => i = memchr::memchr(b'\n', &text[i..]).map_or(n, |k| i + k + 1),
            b'-' if text.get(i + 1) == Some(&b'-')
                && text.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                i = memchr::memchr(b'\n', &text[i..]).map_or(n, |k| i + k + 1)
            }
            b'@' if i > 0
                && (text[i - 1].is_ascii_alphanumeric()
                    || matches!(text[i - 1], b'`' | b'\'' | b'"' | b'_')) =>
            {
                // user@host in DEFINER= / GRANT: not a variable.
                f(Tok::Other);
                i += 1;
            }
            b'@' => {
                if text.get(i + 1) == Some(&b'@') {
                    f(Tok::AtAt);
                    i += 2;
                } else {
                    f(Tok::At);
                    i += 1;
                }
                // The variable's name (possibly quoted) is not a word to look at.
                if let Some(&q @ (b'\'' | b'"' | b'`')) = text.get(i) {
                    let mut j = i + 1;
                    while j < n && text[j] != q {
                        j += 1;
                    }
                    i = j + 1;
                } else {
                    while i < n
                        && (text[i].is_ascii_alphanumeric()
                            || matches!(text[i], b'_' | b'$' | b'.')
                            || text[i] >= 0x80)
                    {
                        i += 1;
                    }
                }
            }
            b'(' => {
                f(Tok::Open);
                i += 1;
            }
            b')' => {
                f(Tok::Close);
                i += 1;
            }
            b',' => {
                f(Tok::Comma);
                i += 1;
            }
            b'0'..=b'9' => {
                let mut j = i + 1;
                while j < n
                    && (text[j].is_ascii_alphanumeric()
                        || text[j] == b'.'
                        || ((text[j] == b'-' || text[j] == b'+')
                            && matches!(text[j - 1], b'e' | b'E')))
                {
                    j += 1;
                }
                f(Tok::Number(&text[i..j]));
                i = j;
            }
            c if is_word_byte(c) => {
                // (digits were taken as numbers above)
                let j = word_end(text, i);
                let w = &text[i..j];
                // x'..', b'..', n'..', _charset'..': a literal's prefix.
                let mut k = j;
                while k < n && text[k].is_ascii_whitespace() && w[0] == b'_' {
                    k += 1;
                }
                let prefix = matches!(text.get(k), Some(b'\'')) && (w.len() == 1 || w[0] == b'_')
                    || (w[0] == b'_'
                        && w.len() > 1
                        && text.get(k).is_some_and(|c| c.is_ascii_digit()));
                if !prefix {
                    f(Tok::Word(w));
                }
                i = j;
            }
            _ => {
                f(Tok::Other);
                i += 1;
            }
        }
    }
}

fn is(w: &[u8], k: &str) -> bool {
    w.eq_ignore_ascii_case(k.as_bytes())
}

/// Looks at a whole statement.
pub fn inspect(text: &[u8]) -> Traits {
    // A dump's `DO SETVAL(seq, ...)` sets its sequence and nothing of the
    // session (and the same value however often it runs).
    if crate::classify::setval_of(text).is_some() {
        return Traits::default();
    }
    let mut t = Traits::default();
    let mut first: Vec<&[u8]> = Vec::with_capacity(4);
    let mut definition = false; // CREATE TRIGGER/PROCEDURE/FUNCTION/VIEW/EVENT
                                // In CREATE TABLE's column list: a `DEFAULT nextval(s)` is evaluated
                                // by the INSERTs that leave the column out (the scheduler sees those),
                                // not by the CREATE — until a SELECT fills the table.
    let mut columns = false;
    let mut insert = false;
    let mut after_values = false;
    let mut depth = 0usize;
    let mut prev: Option<Tok> = None;
    let mut prev_word: &[u8] = b"";
    scan(text, |tok| {
        if first.len() < 12 {
            if let Tok::Word(w) = tok {
                first.push(w);
                if first.len() == 1 {
                    insert = is(w, "INSERT") || is(w, "REPLACE");
                    if is(w, "REPLACE") {
                        t.order_sensitive = true;
                    }
                }
                if first.len() > 1
                    && is(first[0], "CREATE")
                    && ["TRIGGER", "PROCEDURE", "FUNCTION", "VIEW", "EVENT"]
                        .iter()
                        .any(|k| is(w, k))
                {
                    definition = true;
                }
                if first.len() > 1 && is(first[0], "CREATE") && is(w, "TABLE") {
                    columns = true;
                }
                if first.len() <= 3
                    && is(w, "TEMPORARY")
                    && (is(first[0], "CREATE") || is(first[0], "DROP"))
                {
                    t.temporary = true;
                    t.session_state = Some("a temporary table");
                }
                if insert && first.len() <= 3 && is(w, "IGNORE") {
                    t.order_sensitive = true;
                }
            }
        }
        if definition {
            return;
        }
        match tok {
            Tok::At => t.user_vars = true,
            Tok::Open => {
                if let Some(Tok::Word(w)) = prev {
                    if let Some(p) = PREVIOUS.iter().find(|p| is(w, p)) {
                        t.previous_result = Some(p);
                    } else if let Some(p) = STATEFUL_FUNCS
                        .iter()
                        .find(|p| is(w, p))
                        .filter(|_| !columns)
                    {
                        t.session_state.get_or_insert(p);
                    } else if insert && after_values && !is(w, "VALUES") && !is(w, "VALUE") {
                        t.expressions = true;
                    }
                }
                depth += 1;
            }
            Tok::Close => depth = depth.saturating_sub(1),
            Tok::Word(w) => {
                if is(w, "SELECT") {
                    t.reads_tables = true;
                    columns = false;
                }
                if ((is(w, "VALUE") && is(prev_word, "NEXT"))
                    || (is(w, "VALUE") && is(prev_word, "PREVIOUS")))
                    && !columns
                {
                    t.session_state.get_or_insert("a sequence");
                }
                if insert {
                    if depth == 0 && (is(w, "VALUES") || is(w, "VALUE")) {
                        after_values = true;
                    } else if depth == 0 && is(w, "SET") {
                        after_values = true; // INSERT ... SET a = 1: expressions follow
                    } else if depth == 0 && is(w, "DUPLICATE") {
                        t.order_sensitive = true;
                    } else if after_values
                        && depth > 0
                        && w != b"`"
                        && !["NULL", "TRUE", "FALSE", "DEFAULT"]
                            .iter()
                            .any(|k| is(w, k))
                    {
                        t.expressions = true;
                    }
                }
                prev_word = w;
            }
            _ => {}
        }
        prev = Some(tok);
    });
    if insert && !after_values {
        // INSERT ... SELECT / TABLE t / a form we do not know: reads tables.
        t.reads_tables = true;
    }
    if let Some(w) = first.first() {
        let second = first.get(1).copied().unwrap_or(b"");
        let reason: Option<&'static str> = if is(w, "BEGIN") && !is(second, "NOT") {
            Some("a transaction (BEGIN)")
        } else if is(w, "START") && is(second, "TRANSACTION") {
            Some("a transaction (START TRANSACTION)")
        } else if is(w, "SAVEPOINT") || is(w, "RELEASE") || is(w, "XA") {
            Some("a transaction (savepoints/XA)")
        } else if is(w, "PREPARE") || is(w, "EXECUTE") || is(w, "DEALLOCATE") {
            Some("a prepared statement")
        } else if is(w, "CALL") {
            Some("a procedure call (it may change the session)")
        } else if is(w, "HANDLER") {
            Some("a HANDLER")
        } else if is(w, "DO") {
            Some("DO (evaluated for its effects)")
        } else {
            None
        };
        if let Some(r) = reason {
            t.session_state = Some(r);
        }
        if is(w, "ROLLBACK") {
            t.previous_result = Some("ROLLBACK");
        }
    }
    t
}

/// Does this INSERT leave the AUTO_INCREMENT column `name` (at `pos`
/// among the table's columns) to the server in some row — no value, NULL,
/// DEFAULT or 0 — so that the order of inserts decides the ids?
/// Conservative: anything it cannot read counts as yes.
pub fn generates_ids(text: &[u8], pos: usize, name: &str) -> bool {
    let mut after_table = false;
    let mut words = 0;
    let mut list: Option<Vec<Vec<u8>>> = None; // the column list, if any
    let mut in_list = false;
    let mut after_values = false;
    let mut depth = 0usize;
    let mut field = 0usize;
    let mut at_field_start = true;
    let mut target: Option<usize> = Some(pos);
    let mut generated = false;
    let mut saw_row = false;
    scan(text, |tok| {
        if generated {
            return;
        }
        if !after_values {
            match tok {
                Tok::Word(w) | Tok::Quoted(w) => {
                    words += 1;
                    if in_list {
                        if let Some(l) = list.as_mut() {
                            l.push(w.to_vec());
                        }
                    } else if is(w, "VALUES") || is(w, "VALUE") {
                        after_values = true;
                        target = match &list {
                            None => Some(pos),
                            Some(cols) => cols
                                .iter()
                                .position(|c| c.eq_ignore_ascii_case(name.as_bytes())),
                        };
                        if target.is_none() {
                            generated = true;
                        }
                    } else if matches!(tok, Tok::Word(_)) && (is(w, "SET") || is(w, "SELECT")) {
                        generated = true;
                    } else if words >= 2 {
                        after_table = true;
                    }
                }
                Tok::Open if after_table && list.is_none() => {
                    list = Some(Vec::new());
                    in_list = true;
                }
                Tok::Close if in_list => in_list = false,
                _ => {}
            }
            return;
        }
        match tok {
            Tok::Open => {
                depth += 1;
                if depth == 1 {
                    field = 0;
                    at_field_start = true;
                    saw_row = true;
                }
            }
            Tok::Close => depth = depth.saturating_sub(1),
            Tok::Comma if depth == 1 => {
                field += 1;
                at_field_start = true;
            }
            other if depth == 1 && at_field_start => {
                at_field_start = false;
                if Some(field) == target {
                    generated = match other {
                        Tok::Word(w) => is(w, "NULL") || is(w, "DEFAULT"),
                        Tok::Number(n) => n.iter().all(|b| *b == b'0'),
                        Tok::Literal => false,
                        _ => true,
                    };
                }
            }
            _ => {}
        }
    });
    generated || !saw_row
}

/// `SET autocommit = 0` (or OFF): the statements after it form a
/// transaction that only a later COMMIT or ROLLBACK ends.
pub fn sets_autocommit_off(text: &[u8]) -> bool {
    let mut words: Vec<Vec<u8>> = Vec::new();
    scan(text, |tok| {
        if words.len() < 8 {
            match tok {
                Tok::Word(w) => words.push(w.to_ascii_uppercase()),
                Tok::Literal => words.push(b"?".to_vec()),
                _ => {}
            }
        }
    });
    let upper = text.to_ascii_uppercase();
    words.iter().any(|w| w == b"AUTOCOMMIT")
        && (memchr::memmem::find(&upper, b"=0").is_some()
            || memchr::memmem::find(&upper, b"= 0").is_some()
            || memchr::memmem::find(&upper, b"OFF").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Traits {
        inspect(s.as_bytes())
    }

    #[test]
    fn dump_statements_are_plain() {
        for s in [
            "INSERT INTO `t` VALUES (1,'a;@x',NULL,0x1F,_binary 'x',-1.5e-3,X'00'),(2,'b',DEFAULT,TRUE,b'1',N'z',1)",
            "/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */",
            "CREATE TABLE `t` (`a` int DEFAULT NULL) ENGINE=InnoDB",
            "INSERT INTO `t` (`a`, `b`) VALUES (1,2)",
        ] {
            let tr = t(s);
            assert!(tr.previous_result.is_none() && tr.session_state.is_none() && !tr.reads_tables && !tr.expressions, "{s}: {tr:?}");
        }
        assert!(t("SET @OLD_SQL_MODE=@@SQL_MODE").user_vars);
    }

    #[test]
    fn a_sequence_as_a_column_default_is_not_called_by_the_create() {
        // (statement, ties it to one connection)
        let rows = [
            ("CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `n` int(11) DEFAULT nextval(`d`.`s1`),\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB", false),
            ("CREATE TABLE t (n int DEFAULT (NEXT VALUE FOR s1))", false),
            ("CREATE OR REPLACE TABLE t (n int DEFAULT NEXTVAL(s1), m int DEFAULT lastval(s1))", false),
            ("/*!40101 CREATE TABLE t (n bigint DEFAULT nextval(s)) */", false),
            ("CREATE TABLE t (n int) SELECT NEXTVAL(s1) AS n", true),
            ("CREATE TABLE t SELECT NEXT VALUE FOR s1 AS n", true),
            ("CREATE TABLE t (a int DEFAULT nextval(s)) SELECT NEXTVAL(s1) AS n", true),
            ("CREATE TEMPORARY TABLE t (n int DEFAULT nextval(s))", true),
            ("ALTER TABLE t ADD COLUMN n int DEFAULT nextval(s1)", true),
            ("INSERT INTO t VALUES (NEXTVAL(s1))", true),
            ("INSERT INTO t VALUES (NEXT VALUE FOR s1)", true),
            ("INSERT INTO t (id) VALUES (1)", false),
        ];
        for (s, tied) in rows {
            assert_eq!(t(s).session_state.is_some(), tied, "{s}: {:?}", t(s));
        }
    }

    #[test]
    fn what_ties_a_statement_to_its_connection_or_its_place() {
        assert!(t("INSERT INTO c SELECT * FROM p").reads_tables);
        assert!(t("INSERT INTO c (a) VALUES ((SELECT MAX(id) FROM p))").reads_tables);
        assert!(t("INSERT INTO c VALUES (@v)").user_vars);
        assert!(t("SELECT @v := COUNT(*) FROM t").user_vars);
        assert_eq!(
            t("INSERT INTO c VALUES (LAST_INSERT_ID(), 1)").previous_result,
            Some("LAST_INSERT_ID")
        );
        assert_eq!(t("SELECT ROW_COUNT()").previous_result, Some("ROW_COUNT"));
        assert_eq!(t("ROLLBACK").previous_result, Some("ROLLBACK"));
        assert!(t("CREATE TEMPORARY TABLE tt (a int)").temporary);
        assert!(t("START TRANSACTION").session_state.is_some());
        assert!(t("BEGIN").session_state.is_some());
        assert!(t("BEGIN NOT ATOMIC SELECT 1; END").session_state.is_none());
        assert!(t("CALL p()").session_state.is_some());
        assert!(t("INSERT INTO t VALUES (NEXTVAL(s))")
            .session_state
            .is_some());
        assert!(t("INSERT INTO t VALUES (NEXT VALUE FOR s)")
            .session_state
            .is_some());
        assert!(t("INSERT INTO t VALUES (CONCAT('a','b'))").expressions);
        assert!(
            t("INSERT INTO t SET a = 1").expressions || t("INSERT INTO t SET a = 1").is_plain()
        );
        assert!(t("INSERT IGNORE INTO t VALUES (1)").order_sensitive);
        assert!(t("REPLACE INTO t VALUES (1)").order_sensitive);
        assert!(
            t("INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)").order_sensitive
        );
        // Definitions are not evaluated when created.
        let d = t("CREATE DEFINER=`r`@`h` PROCEDURE p() BEGIN SET @x = LAST_INSERT_ID(); END");
        assert!(
            d.previous_result.is_none() && d.session_state.is_none() && !d.user_vars,
            "{d:?}"
        );
        let v = t("/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ /*!50001 VIEW `v` AS select @x */");
        assert!(!v.user_vars, "{v:?}");
        let tr = t("/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER `trg` BEFORE INSERT ON `t` FOR EACH ROW SET @n = @n + 1 */");
        assert!(!tr.user_vars, "{tr:?}");
        assert!(sets_autocommit_off(b"SET autocommit=0"));
        let ins = "INSERT INTO `t` VALUES (1,'a'),(2,'b')";
        assert!(!generates_ids(ins.as_bytes(), 0, "id"));
        assert!(generates_ids(
            b"INSERT INTO `t` VALUES (1,'a'),(NULL,'b')",
            0,
            "id"
        ));
        assert!(generates_ids(b"INSERT INTO `t` VALUES (0,'a')", 0, "id"));
        assert!(!generates_ids(b"INSERT INTO `t` VALUES ('a',5)", 1, "id"));
        assert!(generates_ids(
            b"INSERT INTO `t` (`v`) VALUES ('a')",
            0,
            "id"
        ));
        assert!(!generates_ids(
            b"INSERT INTO `t` (`v`, `id`) VALUES ('a', 7)",
            0,
            "id"
        ));
        assert!(generates_ids(b"INSERT INTO t SET v = 1", 0, "id"));
        assert!(!generates_ids(
            b"INSERT INTO `select` (`id`, `v`) VALUES (3, 'x')",
            0,
            "id"
        ));
        assert!(sets_autocommit_off(b"set autocommit = OFF"));
        assert!(!sets_autocommit_off(b"SET autocommit=1"));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = inspect(&bytes);
            let _ = sets_autocommit_off(&bytes);
        }
    }
}
