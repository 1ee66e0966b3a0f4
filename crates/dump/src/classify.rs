//! What a dump statement is, so the loader knows what may run in parallel.
//!
//! Looks at the statement's first words, reading through executable
//! comments (`/*!50003 CREATE*/ /*!50017 DEFINER=...*/ /*!50003 TRIGGER`)
//! as the server would, and skipping ordinary comments.

/// A table, with its database when the statement names one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableRef {
    pub db: Option<String>,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `SET ...` (not GLOBAL): replayed on every connection.
    Session,
    /// `USE db`: replayed on every connection.
    Use(String),
    /// Speed hints for a single connection, skipped by a parallel loader:
    /// `LOCK TABLES` / `UNLOCK TABLES` (would serialize the workers) and
    /// `ALTER TABLE t DISABLE KEYS` / `ENABLE KEYS` (a no-op for InnoDB;
    /// for MyISAM the indexes are simply maintained during the load).
    /// Skipping them changes no data or definition.
    Hint,
    /// `CREATE`/`DROP`/`ALTER`/`TRUNCATE TABLE`: ordered with the table's data.
    TableDdl { table: TableRef, create: bool },
    /// `INSERT`/`REPLACE` into a table: the parallel part.
    Data(TableRef),
    /// `CREATE TRIGGER ... ON table`: after the table's data.
    Trigger(TableRef),
    /// `CREATE DATABASE`, views, routines, events, anything else: runs
    /// alone, after everything before it.
    Barrier,
}

impl Kind {
    pub fn table(&self) -> Option<&TableRef> {
        match self {
            Kind::TableDdl { table, .. } | Kind::Data(table) | Kind::Trigger(table) => Some(table),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Ident(String),
    /// `"..."`: a name under ANSI_QUOTES, else a string.
    Quoted(String),
    Punct(u8),
    Other,
}

/// The code of a statement with comments removed and executable comments
/// opened, up to `limit` tokens.
fn tokens(text: &[u8], limit: usize) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = text.len();
    while i < n && out.len() < limit {
        let b = text[i];
        if b.is_ascii_whitespace() {
            i += 1;
        } else if b == b'/' && text.get(i + 1) == Some(&b'*') {
            let mut j = i + 2;
            let exec = text.get(j) == Some(&b'!')
                || (text.get(j) == Some(&b'M') && text.get(j + 1) == Some(&b'!'));
            if exec {
                j += if text[j] == b'M' { 2 } else { 1 };
                let ds = j;
                while j < n && text[j].is_ascii_digit() {
                    j += 1;
                }
                let version: u64 = std::str::from_utf8(&text[ds..j])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                if version < 900_000 {
                    i = j; // read the content as code
                    continue;
                }
            }
            // Ordinary (or never-executed) comment: skip to */.
            match memchr::memmem::find(&text[j..], b"*/") {
                Some(k) => i = j + k + 2,
                None => break,
            }
        } else if b == b'*' && text.get(i + 1) == Some(&b'/') {
            i += 2; // end of an executable comment
        } else if b == b'#' || (b == b'-' && text.get(i + 1) == Some(&b'-')) {
            match memchr::memchr(b'\n', &text[i..]) {
                Some(k) => i += k + 1,
                None => break,
            }
        } else if b == b'`' {
            let mut s = Vec::new();
            let mut j = i + 1;
            while j < n {
                if text[j] == b'`' {
                    if text.get(j + 1) == Some(&b'`') {
                        s.push(b'`');
                        j += 2;
                        continue;
                    }
                    break;
                }
                s.push(text[j]);
                j += 1;
            }
            out.push(Tok::Ident(String::from_utf8_lossy(&s).into_owned()));
            i = j + 1;
        } else if is_word_byte(b) {
            let j = word_end(text, i);
            out.push(Tok::Word(String::from_utf8_lossy(&text[i..j]).into_owned()));
            i = j;
        } else if b == b'\'' || b == b'"' {
            // A string: skip it. A double-quoted one may be a name
            // (ANSI_QUOTES, as `--compatible=ansi` dumps write them).
            let mut j = i + 1;
            while j < n && text[j] != b {
                if text[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let inner = &text[(i + 1).min(n)..j.min(n)];
            let doubled = text.get(j + 1) == Some(&b'"');
            out.push(
                if b == b'"' && j < n && !doubled && !inner.contains(&b'\\') {
                    Tok::Quoted(String::from_utf8_lossy(inner).into_owned())
                } else {
                    Tok::Other
                },
            );
            i = j + 1;
        } else {
            out.push(Tok::Punct(b));
            i += 1;
        }
    }
    out
}

/// Can this byte be part of an unquoted identifier or keyword?
pub(crate) fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The end of the word that starts at `i`.
pub(crate) fn word_end(text: &[u8], i: usize) -> usize {
    i + text[i..].iter().take_while(|b| is_word_byte(**b)).count()
}

struct Cursor {
    toks: Vec<Tok>,
    i: usize,
}

impl Cursor {
    fn kw(&self, k: &str) -> bool {
        matches!(self.toks.get(self.i), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k))
    }
    fn eat(&mut self, k: &str) -> bool {
        if self.kw(k) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn eat_seq(&mut self, ks: &[&str]) -> bool {
        let save = self.i;
        for k in ks {
            if !self.eat(k) {
                self.i = save;
                return false;
            }
        }
        true
    }
    fn name(&mut self) -> Option<String> {
        match self.toks.get(self.i) {
            Some(Tok::Word(w)) | Some(Tok::Ident(w)) => {
                self.i += 1;
                Some(w.clone())
            }
            _ => None,
        }
    }
    fn punct(&mut self, p: u8) -> bool {
        if self.toks.get(self.i) == Some(&Tok::Punct(p)) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    /// An unsigned whole number.
    fn number(&mut self) -> bool {
        match self.toks.get(self.i) {
            Some(Tok::Word(w)) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) => {
                self.i += 1;
                true
            }
            _ => false,
        }
    }
    /// A table's name part: as [`Cursor::name`], or double-quoted. Where
    /// the grammar wants a table, `"t"` is a name (ANSI_QUOTES) or a
    /// syntax error the server reports all the same: the text is sent as
    /// written either way, so reading it as the name only orders the
    /// statement with that table's others.
    fn table_part(&mut self) -> Option<String> {
        if let Some(Tok::Quoted(w)) = self.toks.get(self.i) {
            self.i += 1;
            return Some(w.clone());
        }
        self.name()
    }
    /// `name` or `db.name`.
    fn table(&mut self) -> Option<TableRef> {
        let first = self.table_part()?;
        if self.toks.get(self.i) == Some(&Tok::Punct(b'.')) {
            self.i += 1;
            let second = self.table_part()?;
            Some(TableRef {
                db: Some(first),
                name: second,
            })
        } else {
            Some(TableRef {
                db: None,
                name: first,
            })
        }
    }
    /// Skips `DEFINER = user@host` and similar clauses up to a keyword.
    fn skip_until(&mut self, any: &[&str]) -> bool {
        while self.i < self.toks.len() {
            if any.iter().any(|k| self.kw(k)) {
                return true;
            }
            self.i += 1;
        }
        false
    }
}

/// The sequence of a dump's `DO SETVAL(seq, n, is_used[, round])` — the
/// exact shape mariadb-dump writes after `CREATE SEQUENCE` — else None.
/// It sets that sequence and nothing else, and sets it to the same value
/// however often it runs.
pub fn setval_of(text: &[u8]) -> Option<TableRef> {
    let mut c = Cursor {
        toks: tokens(text, 24),
        i: 0,
    };
    if !c.eat_seq(&["DO", "SETVAL"]) || !c.punct(b'(') {
        return None;
    }
    let seq = c.table()?;
    let mut args = 0;
    while c.punct(b',') {
        c.punct(b'-');
        if !c.number() {
            return None;
        }
        args += 1;
    }
    c.punct(b')').then_some(())?;
    c.punct(b';');
    ((2..=3).contains(&args) && c.i == c.toks.len()).then_some(seq)
}

/// Classifies one statement.
pub fn classify(text: &[u8]) -> Kind {
    if let Some(seq) = setval_of(text) {
        // With its sequence's DDL, in order; not a barrier.
        return Kind::TableDdl {
            table: seq,
            create: false,
        };
    }
    let mut c = Cursor {
        toks: tokens(text, 48),
        i: 0,
    };
    if c.eat("SET") {
        // SET GLOBAL x / SET @@GLOBAL.x (e.g. GTID_PURGED): server-wide, once.
        let global = |w: Option<&Tok>| matches!(w, Some(Tok::Word(w)) if w.eq_ignore_ascii_case("GLOBAL") || w.eq_ignore_ascii_case("PERSIST"));
        if global(c.toks.get(c.i))
            || (c.toks.get(c.i) == Some(&Tok::Punct(b'@'))
                && c.toks.get(c.i + 1) == Some(&Tok::Punct(b'@'))
                && global(c.toks.get(c.i + 2)))
        {
            return Kind::Barrier;
        }
        return Kind::Session;
    }
    if c.eat("USE") {
        return match c.name() {
            Some(db) => Kind::Use(db),
            None => Kind::Barrier,
        };
    }
    if c.eat_seq(&["LOCK", "TABLES"]) || c.eat_seq(&["UNLOCK", "TABLES"]) {
        return Kind::Hint;
    }
    if c.eat("INSERT") || c.eat("REPLACE") {
        while c.eat("LOW_PRIORITY") || c.eat("DELAYED") || c.eat("HIGH_PRIORITY") || c.eat("IGNORE")
        {
        }
        c.eat("INTO");
        return match c.table() {
            Some(t) => Kind::Data(t),
            None => Kind::Barrier,
        };
    }
    if c.eat("ALTER") {
        c.eat("ONLINE");
        c.eat("IGNORE");
        if c.eat("TABLE") {
            if let Some(t) = c.table() {
                let keys_next = matches!(c.toks.get(c.i + 1), Some(Tok::Word(w)) if w.eq_ignore_ascii_case("KEYS"));
                if (c.kw("DISABLE") || c.kw("ENABLE")) && keys_next && c.toks.len() == c.i + 2 {
                    return Kind::Hint;
                }
                return Kind::TableDdl {
                    table: t,
                    create: false,
                };
            }
        }
        return Kind::Barrier;
    }
    if c.eat("TRUNCATE") {
        c.eat("TABLE");
        if let Some(t) = c.table() {
            return Kind::TableDdl {
                table: t,
                create: false,
            };
        }
        return Kind::Barrier;
    }
    if c.eat("DROP") {
        c.eat("TEMPORARY");
        if c.eat("TABLE") {
            c.eat_seq(&["IF", "EXISTS"]);
            if let Some(t) = c.table() {
                // A list of tables touches several: keep it simple, run alone.
                if c.toks.get(c.i) == Some(&Tok::Punct(b',')) {
                    return Kind::Barrier;
                }
                return Kind::TableDdl {
                    table: t,
                    create: false,
                };
            }
        }
        return Kind::Barrier;
    }
    if c.eat("CREATE") {
        c.eat_seq(&["OR", "REPLACE"]);
        c.eat("TEMPORARY");
        if c.eat("TABLE") {
            c.eat_seq(&["IF", "NOT", "EXISTS"]);
            if let Some(t) = c.table() {
                // CREATE TABLE ... SELECT / LIKE reads other tables.
                if c.toks.get(c.i) == Some(&Tok::Punct(b'(')) || c.i >= c.toks.len() {
                    return Kind::TableDdl {
                        table: t,
                        create: true,
                    };
                }
            }
            return Kind::Barrier;
        }
        // CREATE [DEFINER=...] TRIGGER name ... ON table
        if c.skip_until(&[
            "TRIGGER",
            "VIEW",
            "PROCEDURE",
            "FUNCTION",
            "EVENT",
            "DATABASE",
            "SCHEMA",
            "TABLE",
        ]) && c.eat("TRIGGER")
        {
            c.eat_seq(&["IF", "NOT", "EXISTS"]);
            let _ = c.table();
            if c.skip_until(&["ON"]) && c.eat("ON") {
                if let Some(t) = c.table() {
                    return Kind::Trigger(t);
                }
            }
        }
        return Kind::Barrier;
    }
    Kind::Barrier
}

/// Does running this statement a second time leave what running it once
/// leaves — a `DROP ... IF EXISTS`, a `CREATE ... IF NOT EXISTS`, a
/// `CREATE OR REPLACE`, a `SET GLOBAL` to a constant — so that a load
/// killed after it, before its journal was written, may run it again
/// from the start? (A dump's first statements mostly are: `DROP TABLE IF
/// EXISTS`, `CREATE DATABASE IF NOT EXISTS`.) By form only: anything else
/// is `false`.
pub fn reruns_harmlessly(text: &[u8]) -> bool {
    let toks = tokens(text, 12);
    let word =
        |i: usize, k: &str| matches!(toks.get(i), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(k));
    const OBJECTS: [&str; 9] = [
        "TABLE",
        "VIEW",
        "DATABASE",
        "SCHEMA",
        "PROCEDURE",
        "FUNCTION",
        "TRIGGER",
        "EVENT",
        "SEQUENCE",
    ];
    let object = |i: usize| OBJECTS.iter().any(|k| word(i, k));
    if word(0, "SET") {
        // A server-wide setting to one constant (`SET GLOBAL x = 'v'`,
        // `SET @@GLOBAL.x = 5`): the same setting again. MySQL 8's
        // GTID_PURGED append (`/*!80000 '+'*/ 'set'`, two strings) run
        // again is refused by the server (the set overlaps), never
        // applied twice. Anything more (two settings, an expression) is
        // not harmless.
        let value = |i: usize| {
            toks.len() > i
                && (toks[i..]
                    .iter()
                    .all(|t| matches!(t, Tok::Other | Tok::Quoted(_)))
                    || (toks.len() == i + 1 && matches!(toks[i], Tok::Word(_))))
        };
        let eq = |i: usize| toks.get(i) == Some(&Tok::Punct(b'='));
        let name = |i: usize| matches!(toks.get(i), Some(Tok::Word(_)));
        let plain = word(1, "GLOBAL") && name(2) && eq(3) && value(4);
        let at = toks.get(1) == Some(&Tok::Punct(b'@'))
            && toks.get(2) == Some(&Tok::Punct(b'@'))
            && word(3, "GLOBAL")
            && toks.get(4) == Some(&Tok::Punct(b'.'))
            && name(5)
            && eq(6)
            && value(7);
        return plain || at;
    }
    if word(0, "DROP") {
        let i = if word(1, "TEMPORARY") { 2 } else { 1 };
        return object(i) && word(i + 1, "IF") && word(i + 2, "EXISTS");
    }
    if word(0, "CREATE") {
        if word(1, "OR") && word(2, "REPLACE") {
            return true;
        }
        return (1..toks.len().saturating_sub(2)).any(|i| {
            object(i) && word(i + 1, "IF") && word(i + 2, "NOT") && word(i + 3, "EXISTS")
        });
    }
    false
}

/// Is this `DROP TABLE` (or `DROP TEMPORARY TABLE`)?
pub fn is_drop_table(text: &[u8]) -> bool {
    let mut c = Cursor {
        toks: tokens(text, 4),
        i: 0,
    };
    c.eat("DROP") && {
        c.eat("TEMPORARY");
        c.eat("TABLE")
    }
}

/// The database a `CREATE DATABASE` / `DROP DATABASE` (or SCHEMA) names.
pub fn database_named(text: &[u8]) -> Option<String> {
    let mut c = Cursor {
        toks: tokens(text, 12),
        i: 0,
    };
    if !(c.eat("CREATE") || c.eat("DROP") || c.eat("ALTER")) {
        return None;
    }
    c.eat_seq(&["OR", "REPLACE"]);
    if !(c.eat("DATABASE") || c.eat("SCHEMA")) {
        return None;
    }
    c.eat_seq(&["IF", "NOT", "EXISTS"]);
    c.eat_seq(&["IF", "EXISTS"]);
    c.name()
}

/// `ENGINE=...` of a CREATE TABLE, upper-cased, if given.
pub fn engine(text: &[u8]) -> Option<String> {
    let tail = &text[text.len().saturating_sub(2048)..];
    let upper: Vec<u8> = tail.to_ascii_uppercase();
    let at = memchr::memmem::rfind(&upper, b"ENGINE")?;
    let rest = &upper[at + 6..];
    let rest = rest.trim_ascii_start();
    let rest = rest.strip_prefix(b"=").unwrap_or(rest).trim_ascii_start();
    let end = rest
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// Does this CREATE TABLE give a column AUTO_INCREMENT (not just the
/// `AUTO_INCREMENT=N` table option)?
pub fn has_auto_increment(create: &[u8]) -> bool {
    let text = String::from_utf8_lossy(create).to_ascii_uppercase();
    let body_end = text.rfind("\n)").unwrap_or(text.len());
    text[..body_end].contains(" AUTO_INCREMENT")
}

/// Engines whose writes cannot be journaled in the same transaction.
pub fn is_transactional(engine: &str) -> bool {
    matches!(engine, "INNODB" | "XTRADB" | "ROCKSDB" | "TOKUDB")
}

/// For a `SET` statement: `Some(false)` if it turns NO_BACKSLASH_ESCAPES
/// on (backslashes stop escaping), `Some(true)` if it sets sql_mode
/// without it, `None` if it does not touch sql_mode.
pub fn backslash_escapes_after(text: &[u8]) -> Option<bool> {
    let upper = text.to_ascii_uppercase();
    memchr::memmem::find(&upper, b"SQL_MODE")?;
    Some(memchr::memmem::find(&upper, b"NO_BACKSLASH_ESCAPES").is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> TableRef {
        TableRef {
            db: None,
            name: name.into(),
        }
    }

    #[test]
    fn auto_increment_detection() {
        assert!(has_auto_increment(b"CREATE TABLE t (\n  id int NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (id)\n) ENGINE=InnoDB AUTO_INCREMENT=5"));
        assert!(!has_auto_increment(b"CREATE TABLE t (\n  id int NOT NULL,\n  PRIMARY KEY (id)\n) ENGINE=InnoDB AUTO_INCREMENT=5"));
    }

    #[test]
    fn what_runs_twice_as_once() {
        let rows = [
            ("DROP TABLE IF EXISTS `t`", true),
            ("DROP TEMPORARY TABLE IF EXISTS t", true),
            ("/*!40000 DROP DATABASE IF EXISTS `d`*/", true),
            ("/*!50001 DROP VIEW IF EXISTS `v`*/", true),
            ("DROP SEQUENCE IF EXISTS s", true),
            ("drop procedure if exists p", true),
            ("CREATE DATABASE /*!32312 IF NOT EXISTS*/ `d` /*!40100 DEFAULT CHARACTER SET utf8mb4 */", true),
            ("CREATE TABLE IF NOT EXISTS t (a int)", true),
            ("CREATE OR REPLACE TABLE t (a int)", true),
            ("CREATE OR REPLACE VIEW v AS SELECT 1", true),
            ("CREATE TABLE t (a int)", false),
            ("CREATE TABLE `if` (a int)", false),
            ("CREATE DATABASE d", false),
            ("DROP TABLE t", false),
            ("DROP TABLE t, `if`", false),
            ("INSERT INTO t VALUES (1)", false),
            ("SET GLOBAL gtid_slave_pos = '0-1-1'", true),
            ("SET @@GLOBAL.GTID_PURGED='3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5'", true),
            ("SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5'", true),
            ("SET GLOBAL x = 1 2", false),
            ("SET GLOBAL max_connections = 500", true),
            ("SET GLOBAL max_connections = @@GLOBAL.max_connections + 1", false),
            ("SET GLOBAL a = 1, b = 2", false),
            ("SET @x = 1", false),
            ("SET NAMES utf8mb4", false),
            ("ALTER TABLE t ADD COLUMN IF NOT EXISTS b int", false),
            ("TRUNCATE TABLE t", false),
            ("", false),
        ];
        for (sql, twice) in rows {
            assert_eq!(reruns_harmlessly(sql.as_bytes()), twice, "{sql}");
        }
    }

    #[test]
    fn mysqldump_statements() {
        let cases: Vec<(&str, Kind)> = vec![
            ("/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */", Kind::Session),
            ("/*M!100616 SET @OLD_NOTE_VERBOSITY=@@NOTE_VERBOSITY, NOTE_VERBOSITY=0 */", Kind::Session),
            ("SET @saved_cs_client     = @@character_set_client", Kind::Session),
            ("SET GLOBAL max_connections = 10", Kind::Barrier),
            ("SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ 'x:1-5'", Kind::Barrier),
            ("SET @@SESSION.SQL_LOG_BIN= 0", Kind::Session),
            ("/*!40101 SET SQL_MODE=@@GLOBAL.SQL_MODE */", Kind::Session),
            ("USE `shop`", Kind::Use("shop".into())),
            // A --compatible=ansi (ANSI_QUOTES) dump's names.
            ("INSERT INTO \"t\" VALUES (1,'a')", Kind::Data(t("t"))),
            ("CREATE TABLE \"t\" (\n  \"id\" int(11)\n)", Kind::TableDdl { table: t("t"), create: true }),
            ("DROP TABLE IF EXISTS \"t\"", Kind::TableDdl { table: t("t"), create: false }),
            ("INSERT INTO \"d\".\"t\" VALUES (1)", Kind::Data(TableRef { db: Some("d".into()), name: "t".into() })),
            // Unsure names stay barriers: a doubled quote, a backslash.
            ("INSERT INTO \"a\"\"b\" VALUES (1)", Kind::Barrier),
            ("INSERT INTO \"a\\b\" VALUES (1)", Kind::Barrier),
            ("USE \"shop\"", Kind::Barrier),
            ("LOCK TABLES `t` WRITE", Kind::Hint),
            ("UNLOCK TABLES", Kind::Hint),
            ("ALTER TABLE `t` ENABLE KEYS", Kind::Hint),
            ("ALTER TABLE `t` ADD KEY (a)", Kind::TableDdl { table: t("t"), create: false }),
            ("DROP TABLE IF EXISTS `t`", Kind::TableDdl { table: t("t"), create: false }),
            ("CREATE TABLE `t` (\n  `id` int NOT NULL\n) ENGINE=InnoDB", Kind::TableDdl { table: t("t"), create: true }),
            ("/*!40000 ALTER TABLE `t` DISABLE KEYS */", Kind::Hint),
            ("INSERT INTO `t` VALUES (1),(2)", Kind::Data(t("t"))),
            ("INSERT IGNORE INTO db.`t` (`a`) VALUES (1)", Kind::Data(TableRef { db: Some("db".into()), name: "t".into() })),
            ("REPLACE INTO `we``ird` VALUES (1)", Kind::Data(t("we`ird"))),
            (
                "/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER `trg` BEFORE INSERT ON `t` FOR EACH ROW SET NEW.a = 1 */",
                Kind::Trigger(t("t")),
            ),
            ("CREATE DEFINER=`root`@`localhost` TRIGGER trg AFTER UPDATE ON x.y FOR EACH ROW BEGIN END", Kind::Trigger(TableRef { db: Some("x".into()), name: "y".into() })),
            ("/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ /*!50001 VIEW `v` AS select 1 */", Kind::Barrier),
            ("CREATE DEFINER=`root`@`localhost` PROCEDURE `p`() BEGIN SELECT 1; END", Kind::Barrier),
            ("CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop` /*!40100 DEFAULT CHARACTER SET utf8mb4 */", Kind::Barrier),
            ("CREATE TABLE t2 AS SELECT * FROM t", Kind::Barrier),
            ("DROP TABLE a, b", Kind::Barrier),
            ("-- comment\nINSERT INTO t VALUES (1)", Kind::Data(t("t"))),
            ("/*M!999999\\- enable the sandbox mode */ /*!40101 SET x=1 */", Kind::Session),
        ];
        for (sql, want) in cases {
            assert_eq!(classify(sql.as_bytes()), want, "{sql}");
        }
    }

    #[test]
    fn database_names() {
        assert_eq!(database_named(b"CREATE DATABASE /*!32312 IF NOT EXISTS*/ `sqlfleet` /*!40100 DEFAULT CHARACTER SET utf8mb4 */"), Some("sqlfleet".into()));
        assert_eq!(database_named(b"DROP SCHEMA IF EXISTS x"), Some("x".into()));
        assert_eq!(database_named(b"DROP TABLE x"), None);
        assert!(is_drop_table(b"/*!50001 DROP TABLE IF EXISTS `v`*/"));
        assert!(!is_drop_table(b"ALTER TABLE t ADD KEY (a)"));
    }

    #[test]
    fn engines_and_sql_mode() {
        assert_eq!(
            engine(b"CREATE TABLE t (a int) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4"),
            Some("MYISAM".into())
        );
        assert_eq!(
            engine(b"CREATE TABLE t (a int) ENGINE = Aria"),
            Some("ARIA".into())
        );
        assert_eq!(engine(b"CREATE TABLE t (a int)"), None);
        assert!(is_transactional("INNODB") && !is_transactional("MYISAM"));
        assert_eq!(
            backslash_escapes_after(
                b"/*!40101 SET SQL_MODE='NO_AUTO_VALUE_ON_ZERO,NO_BACKSLASH_ESCAPES' */"
            ),
            Some(false)
        );
        assert_eq!(
            backslash_escapes_after(b"/*!40101 SET SQL_MODE=@OLD_SQL_MODE */"),
            Some(true)
        );
        assert_eq!(backslash_escapes_after(b"SET NAMES utf8mb4"), None);
    }

    /// mariadb-dump's `DO SETVAL` goes with its sequence; any other DO,
    /// or a SETVAL that does more than set one value, stays a barrier.
    #[test]
    fn a_dumps_setval_is_about_its_sequence() {
        let seq = |db: Option<&str>, name: &str| TableRef {
            db: db.map(str::to_string),
            name: name.into(),
        };
        let rows: Vec<(&str, Option<TableRef>)> = vec![
            ("DO SETVAL(`seq1`, 5100, 0)", Some(seq(None, "seq1"))),
            ("DO SETVAL(\"seq1\", 1010, 0)", Some(seq(None, "seq1"))),
            ("DO SETVAL(`seq1`, 5100, 0);", Some(seq(None, "seq1"))),
            ("do setval(`d`.`s`, -3, 1, 0)", Some(seq(Some("d"), "s"))),
            ("DO SETVAL(s, 1, 1)", Some(seq(None, "s"))),
            ("DO SETVAL(`seq1`, 5100)", None),
            ("DO SETVAL(`seq1`, 5100, 0), SLEEP(1)", None),
            ("DO SETVAL(`seq1`, (SELECT MAX(id) FROM t), 0)", None),
            ("DO SETVAL(`seq1`, @v, 0)", None),
            ("DO RELEASE_LOCK('x')", None),
            ("DO 1", None),
            ("SELECT SETVAL(`seq1`, 5100, 0)", None),
        ];
        for (text, want) in rows {
            assert_eq!(setval_of(text.as_bytes()), want, "{text}");
            let kind = classify(text.as_bytes());
            match &want {
                Some(t) => assert_eq!(
                    kind,
                    Kind::TableDdl {
                        table: t.clone(),
                        create: false
                    },
                    "{text}"
                ),
                None => assert_eq!(kind, Kind::Barrier, "{text}"),
            }
            let traits = crate::inspect::inspect(text.as_bytes());
            assert_eq!(
                traits.session_state.is_none(),
                want.is_some(),
                "{text}: {:?}",
                traits.session_state
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = classify(&bytes);
            let _ = engine(&bytes);
        }
    }
}
