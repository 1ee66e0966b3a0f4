//! The database names a replicated statement names in its text, and the
//! statement with some of them renamed.
//!
//! MariaDB's query events carry the statement's default database and no
//! list of the databases it updates: MySQL's `Q_UPDATED_DB_NAMES` is not
//! written (checked on 10.11.19: a statement-based INSERT ... SELECT across
//! databases carries status variables 0, 1, 6 and 4 only; a multi-table
//! UPDATE adds 9, a table bitmap without names; DDL adds 129). So for
//! statements — DDL, and DML a MIXED or STATEMENT binlog logs as text —
//! the text is all there is. A bare `x.y` decides nothing:
//! it is `database.table` only where the grammar puts a table name (after
//! `FROM`, `JOIN`, `INTO`, `UPDATE`, `TABLE`, `VIEW`, `CALL`, the `ON` of a
//! trigger or index, `REFERENCES`, `NEXTVAL(`, …), and `table.column` (a
//! table, an alias, `NEW`/`OLD`) everywhere else; `x.y.z` and `x.y(` name a
//! database wherever they stand. The reading is a small state machine over
//! the shared lexer's tokens (`sqlfleet_dump::lex`: strings, backquotes and
//! comments handled), written by hand because no SQL parser reads
//! MariaDB's dialect (routine bodies, sequences, executable comments).
//!
//! The text is read in the source session's own dialect ([`Dialect`]:
//! `NO_BACKSLASH_ESCAPES`, `ANSI_QUOTES`, and character sets whose
//! characters hold a `\\` or backquote byte), so a rename never lands
//! inside a string literal or a comment. It fails closed ([`Unsure`]): a
//! `x.y` read as `table.column` whose `x` the statement never introduces
//! (as a table, an alias or a variable) and a statement kind it does not
//! know that qualifies names stop the caller instead of being guessed.
//! Property-tested (no panic; a rename touches only the named tokens).

use std::collections::HashSet;
use std::ops::Range;

pub use sqlfleet_dump::lex::Dialect;
use sqlfleet_dump::lex::{lex_in, Tok};

/// One identifier: its byte range in the text and its unquoted name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    pub at: Range<usize>,
    pub name: String,
}

/// The text could not be read with certainty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsure(pub String);

/// What a statement's text names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    /// Database qualifiers, in text order.
    pub refs: Vec<Ident>,
    /// True for `CREATE|DROP|ALTER DATABASE|SCHEMA ...`.
    pub database_statement: bool,
    /// The statement may read or write its default database: a name
    /// stands unqualified where a table, view, routine or sequence goes,
    /// or it calls `DATABASE()`/`SCHEMA()`. False only when every such
    /// name is qualified (the default database then means nothing to it,
    /// except for an unqualified stored function, which a server without
    /// that default database refuses rather than guesses).
    pub uses_default: bool,
}

impl Named {
    /// The distinct database names, sorted.
    pub fn databases(&self) -> Vec<String> {
        let mut v: Vec<String> = self.refs.iter().map(|i| i.name.clone()).collect();
        v.sort();
        v.dedup();
        v
    }
}

type T = (Tok, Range<usize>);

/// The identifier a token is, in the text's own case.
fn ident(sql: &[u8], t: &T) -> Option<Ident> {
    let name = match &t.0 {
        Tok::Word(w) if !RESERVED.contains(&w.as_str()) => {
            String::from_utf8_lossy(&sql[t.1.clone()]).into_owned()
        }
        Tok::Quoted(n) => n.to_string(),
        _ => return None,
    };
    Some(Ident {
        at: t.1.clone(),
        name,
    })
}

fn word(t: Option<&T>) -> Option<&str> {
    match t {
        Some((Tok::Word(w), _)) => Some(w.as_str()),
        _ => None,
    }
}

fn kw(t: Option<&T>, w: &str) -> bool {
    word(t) == Some(w)
}

fn punct(t: Option<&T>, c: u8) -> bool {
    t.is_some_and(|x| x.0.is_punct(c))
}

/// Reserved words that are never a bare name (the ones this reader meets
/// where a name could stand).
const RESERVED: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "CROSS",
    "NATURAL",
    "OUTER",
    "STRAIGHT_JOIN",
    "ON",
    "USING",
    "INTO",
    "VALUES",
    "VALUE",
    "SET",
    "UPDATE",
    "DELETE",
    "INSERT",
    "REPLACE",
    "TABLE",
    "GROUP",
    "ORDER",
    "BY",
    "LIMIT",
    "HAVING",
    "UNION",
    "AS",
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS",
    "NULL",
    "LIKE",
    "TO",
    "FOR",
    "IF",
    "EXISTS",
    "CREATE",
    "DROP",
    "ALTER",
    "RENAME",
    "CALL",
    "WITH",
    "DISTINCT",
    "ALL",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "IGNORE",
    "LOW_PRIORITY",
    "HIGH_PRIORITY",
    "DELAYED",
    "PARTITION",
    "REFERENCES",
    "KEY",
    "INDEX",
    "PRIMARY",
    "UNIQUE",
    "FOREIGN",
    "DEFAULT",
    "EACH",
    "ROW",
    "BEGIN",
    "DO",
    "LOOP",
    "REPEAT",
    "WHILE",
    "RETURN",
    "DECLARE",
    "INTERVAL",
    "READ",
    "WRITE",
    "LOCK",
    "FORCE",
    "USE",
    "RETURNING",
    "WINDOW",
    "OVER",
    "TRUNCATE",
    "TRIGGER",
    "PROCEDURE",
    "FUNCTION",
    "VIEW",
    "SEQUENCE",
    "EVENT",
    "DATABASE",
    "SCHEMA",
    "TEMPORARY",
    "TABLES",
    "ELSEIF",
    "UNTIL",
    "LEAVE",
    "ITERATE",
    "OPEN",
    "CLOSE",
    "FETCH",
    "CURSOR",
    "HANDLER",
    "SIGNAL",
    "RESIGNAL",
    "DUPLICATE",
    "BETWEEN",
    "REGEXP",
    "RLIKE",
    "DIV",
    "MOD",
    "XOR",
    "BINARY",
    "COLLATE",
    "ESCAPE",
    "SEPARATOR",
    "LATERAL",
    "QUICK",
    "ADD",
    "MODIFY",
    "CHANGE",
    "COLUMN",
    "CONSTRAINT",
    "CHECK",
    "AFTER",
    "BEFORE",
    "FOLLOWS",
    "PRECEDES",
    "DEFINER",
    "SQL",
    "SECURITY",
    "ALGORITHM",
    "RETURNS",
    "DETERMINISTIC",
    "COMMENT",
    "LANGUAGE",
];

/// Statements this reader knows the grammar of (by first word).
const KNOWN: &[&str] = &[
    "SELECT",
    "INSERT",
    "REPLACE",
    "UPDATE",
    "DELETE",
    "CREATE",
    "ALTER",
    "DROP",
    "RENAME",
    "TRUNCATE",
    "CALL",
    "WITH",
    "GRANT",
    "REVOKE",
    "ANALYZE",
    "OPTIMIZE",
    "REPAIR",
    "CHECK",
    "FLUSH",
    "SET",
    "DO",
    "LOCK",
    "UNLOCK",
    "SAVEPOINT",
    "RELEASE",
    "ROLLBACK",
    "COMMIT",
    "BEGIN",
    "START",
    "XA",
    "LOAD",
    "INSTALL",
    "UNINSTALL",
    "TABLE",
    "VALUES",
    "EXECUTE",
    "PREPARE",
    "DEALLOCATE",
    "USE",
    "KILL",
    "SHUTDOWN",
    "PURGE",
    "RESET",
    "BINLOG",
    "SHOW",
    "BACKUP",
    "HANDLER",
    "CHANGE",
    "STOP",
    "SIGNAL",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A statement (or subquery): `FROM` introduces tables.
    Stmt,
    /// An expression, a column list or a function's arguments.
    Expr,
}

#[derive(Clone, Copy)]
struct Frame {
    kind: Kind,
    /// The next name is a table (or view, routine, sequence) name.
    expect: bool,
    /// In a list of tables: a comma expects another.
    list: bool,
}

impl Frame {
    fn stmt() -> Frame {
        Frame {
            kind: Kind::Stmt,
            expect: false,
            list: false,
        }
    }
}

/// Facts about the (sub-)statement being read, from its first words.
#[derive(Default)]
struct Head {
    /// `CREATE ... TRIGGER`: the `ON` after its event names the table.
    trigger: bool,
    /// `CREATE|DROP ... INDEX`, `GRANT`, `REVOKE`: the first `ON`.
    on_names_table: bool,
    /// `GRANT`, `REVOKE`: a `FROM` names accounts (`REVOKE ... FROM
    /// u@h`), no table.
    grant: bool,
    on_seen: bool,
    /// The token index of `LIKE` in `CREATE TABLE t LIKE u`, if here.
    like_at: Option<usize>,
    rename: bool,
    ddl: bool,
    object_seen: bool,
    /// The token index of `TABLE` in `CREATE|ALTER ... TABLE`: it names
    /// one table (a comma after it separates clauses or options).
    one_table_at: Option<usize>,
    /// A multi-table DELETE's targets (token indices): `DELETE a, b FROM
    /// ...` or `DELETE FROM a, b USING ...`. Each names a table or alias
    /// of the table list that follows (else the server refuses the
    /// statement, 1109), so an unqualified one uses no default database of
    /// its own: `DELETE x FROM app.t AS x` writes `app` only.
    delete_targets: Option<Range<usize>>,
    /// The token index of that `DELETE FROM ... USING`'s `USING`, which
    /// opens its table list.
    delete_using: Option<usize>,
}

impl Head {
    /// Whether token `k` stands in a multi-table DELETE's target list.
    fn is_delete_target(&self, k: usize) -> bool {
        self.delete_targets.as_ref().is_some_and(|r| r.contains(&k))
    }
}

fn head(t: &[T], at: usize) -> Head {
    let w = |k: usize| word(t.get(at + k)).unwrap_or("");
    let first = w(0);
    let mut h = Head {
        ddl: matches!(first, "CREATE" | "ALTER" | "DROP"),
        rename: first == "RENAME",
        on_names_table: matches!(first, "GRANT" | "REVOKE"),
        grant: matches!(first, "GRANT" | "REVOKE"),
        ..Head::default()
    };
    if first == "DELETE" {
        (h.delete_targets, h.delete_using) = delete_targets(t, at + 1);
    }
    if h.ddl {
        // Up to the object word: CREATE [OR REPLACE] [DEFINER=..] [UNIQUE] ...
        let mut k = at + 1;
        while k < t.len() && k < at + 24 {
            match word(t.get(k)) {
                Some("TRIGGER") => h.trigger = true,
                Some("INDEX") => h.on_names_table = true,
                Some("TABLE") => {
                    if matches!(first, "CREATE" | "ALTER") {
                        h.one_table_at = Some(k);
                    }
                    // CREATE TABLE [IF NOT EXISTS] name [(] LIKE
                    let mut e = k + 1;
                    if kw(t.get(e), "IF") {
                        e += 1;
                        if kw(t.get(e), "NOT") {
                            e += 1;
                        }
                        e += 1;
                    }
                    e += 1;
                    while punct(t.get(e), b'.') {
                        e += 2;
                    }
                    if punct(t.get(e), b'(') {
                        e += 1;
                    }
                    if kw(t.get(e), "LIKE") {
                        h.like_at = Some(e);
                    }
                }
                Some(
                    "VIEW" | "PROCEDURE" | "FUNCTION" | "EVENT" | "SEQUENCE" | "DATABASE"
                    | "SCHEMA" | "USER" | "ROLE" | "SERVER",
                ) => {}
                _ => {
                    k += 1;
                    continue;
                }
            }
            break;
        }
    }
    h
}

/// A multi-table DELETE's target list (token indices) and the `USING`
/// of its second form, reading from `k` (after `DELETE`); None for a
/// single-table DELETE. Only this statement's top level counts (a
/// subquery's FROM, what follows a `;`); the table list after `USING`
/// may open with a parenthesis.
fn delete_targets(t: &[T], mut k: usize) -> (Option<Range<usize>>, Option<usize>) {
    while matches!(word(t.get(k)), Some("LOW_PRIORITY" | "QUICK" | "IGNORE")) {
        k += 1;
    }
    let after_from = kw(t.get(k), "FROM");
    let start = if after_from { k + 1 } else { k };
    let mut depth = 0i32;
    for (e, x) in t.iter().enumerate().skip(start) {
        match &x.0 {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            Tok::Punct(b';') if depth == 0 => break,
            Tok::Word(w) if depth == 0 => match w.as_str() {
                // (A join's `USING (c)` cannot stand among the targets.)
                "USING" if after_from => {
                    return (Some(start..e), Some(e));
                }
                "FROM" if !after_from => return (Some(start..e), None),
                "WHERE" | "ORDER" | "LIMIT" | "RETURNING" => break,
                _ => {}
            },
            _ => {}
        }
    }
    (None, None)
}

/// The names `WITH [RECURSIVE] name [(columns)] AS (...) [, ...]`
/// defines anywhere in the text, lower case: in a table's place they name
/// no table of the default database. (`WITH ROLLUP`, `WITH CHECK OPTION`
/// and the like have no `AS`.) Read once per text, not per statement
/// start: a CASE of ten thousand WHEN ... THEN starts as many.
fn cte_names(t: &[T]) -> HashSet<String> {
    let name = |x: Option<&T>| match x.map(|x| &x.0) {
        Some(Tok::Word(w) | Tok::Quoted(w)) => Some(w.to_ascii_lowercase().to_string()),
        _ => None,
    };
    // The index after the parenthesis that opens at `k`.
    let after = |k: usize| {
        let mut depth = 0i32;
        for (e, x) in t.iter().enumerate().skip(k) {
            match x.0 {
                Tok::Punct(b'(') => depth += 1,
                Tok::Punct(b')') => {
                    depth -= 1;
                    if depth == 0 {
                        return e + 1;
                    }
                }
                _ => {}
            }
        }
        t.len()
    };
    let mut out = HashSet::new();
    for w in 0..t.len() {
        if !kw(t.get(w), "WITH") {
            continue;
        }
        let mut k = w + 1;
        if kw(t.get(k), "RECURSIVE") {
            k += 1;
        }
        while let Some(n) = name(t.get(k)) {
            k += 1;
            if punct(t.get(k), b'(') {
                k = after(k);
            }
            if !kw(t.get(k), "AS") || !punct(t.get(k + 1), b'(') {
                break;
            }
            out.insert(n);
            k = after(k + 1);
            if !punct(t.get(k), b',') {
                break;
            }
            k += 1;
        }
    }
    out
}

/// Where a statement may start inside a routine, trigger or event body.
fn starts_statement(w: &str, prev: Option<&T>) -> bool {
    match w {
        "BEGIN" | "DO" | "LOOP" | "REPEAT" | "ELSE" => true,
        // THEN after a condition (IF, WHEN of a CASE statement); in a CASE
        // expression nothing table-like follows either.
        "THEN" => true,
        "ROW" => kw(prev, "EACH"),
        _ => false,
    }
}

/// `ALTER DATABASE|SCHEMA` with no name: its options start at once, and
/// it alters the default database (`ALTER DATABASE CHARACTER SET latin1`,
/// `ALTER SCHEMA COMMENT 'c'`). As MariaDB 10.11 parses it (checked): a
/// reserved option word (DEFAULT, CHARACTER, COLLATE) cannot be a name,
/// COMMENT is an option when `=` or a string follows it, and any other
/// word (CHARSET included: `ALTER DATABASE CHARSET x` is refused) is the
/// database's name.
fn alters_the_default_database(t: &[T]) -> bool {
    if !kw(t.first(), "ALTER") {
        return false;
    }
    match word(t.get(2)) {
        Some("DEFAULT" | "CHARACTER" | "COLLATE") => true,
        Some("COMMENT") => {
            punct(t.get(3), b'=') || matches!(t.get(3).map(|x| &x.0), Some(Tok::Literal))
        }
        _ => false,
    }
}

/// The database a CREATE/DROP/ALTER DATABASE names (after IF [NOT]
/// EXISTS).
fn database_named(sql: &[u8], t: &[T]) -> Option<Ident> {
    let mut k = 2;
    if kw(t.get(k), "IF") {
        k += 1;
        if kw(t.get(k), "NOT") {
            k += 1;
        }
        if kw(t.get(k), "EXISTS") {
            k += 1;
        }
    }
    // Any word there is the name (the server's grammar puts one there; an
    // ALTER without one is told apart before): `comment`, `security`, ...
    // which elsewhere this reader takes for keywords.
    t.get(k)
        .filter(|x| matches!(x.0, Tok::Word(_) | Tok::Quoted(_)))
        .map(|x| Ident {
            at: x.1.clone(),
            name: name_of(sql, x),
        })
}

/// What a keyword does to the table positions: opens one (FROM, JOIN,
/// INTO, ...), a list of them, or ends them; a keyword where a table
/// name stands is that name. `prev` the token before, `k` its place.
fn keyword(
    w: &str,
    (prev, k, paren_next, next): (Option<&T>, usize, bool, Option<&T>),
    top: &mut Frame,
    h: &mut Head,
    (introduced, named, ctes): (&mut HashSet<String>, &mut Named, &HashSet<String>),
) {
    match w {
        "FROM" if top.kind == Kind::Stmt && !h.grant => {
            top.expect = true;
            top.list = true;
        }
        // (Not an index hint's `FOR JOIN (i)`.)
        "JOIN" | "STRAIGHT_JOIN" if !kw(prev, "FOR") => {
            top.expect = true;
            top.list = true;
        }
        "INTO" | "CALL" => top.expect = true,
        // (Not ALTER TABLE's `TRUNCATE PARTITION p, q`.)
        "TRUNCATE" if !kw(next, "PARTITION") => top.expect = true,
        "TABLE" | "TABLES" => {
            top.expect = true;
            top.list = h.one_table_at != Some(k);
        }
        "REFERENCES" => top.expect = true,
        "INSERT" | "REPLACE"
            if !paren_next
                && !kw(prev, "OR")
                && !matches!(word(prev), Some("BEFORE" | "AFTER")) =>
        {
            top.expect = true;
        }
        "UPDATE" | "DELETE"
            if !paren_next
                && !matches!(word(prev), Some("KEY" | "FOR" | "ON" | "BEFORE" | "AFTER")) =>
        {
            top.expect = true;
            top.list = true;
        }
        "VIEW" | "PROCEDURE" | "FUNCTION" | "TRIGGER" | "EVENT" | "SEQUENCE"
            if h.ddl && !h.object_seen =>
        {
            h.object_seen = true;
            top.expect = true;
            top.list = w == "VIEW" || w == "SEQUENCE";
        }
        // (Not ALTER TABLE's `RENAME INDEX|KEY|COLUMN a TO b`.)
        "RENAME" if !matches!(word(next), Some("INDEX" | "KEY" | "COLUMN")) => {
            h.rename = true;
            top.expect = true;
        }
        "TO" | "AS" if h.rename && w == "TO" || kw(prev, "RENAME") => top.expect = true,
        "LIKE" if h.like_at == Some(k) => top.expect = true,
        "FOR" if kw(prev, "VALUE") => top.expect = true,
        "USING" if h.delete_using == Some(k) => {
            top.expect = true;
            top.list = true;
        }
        "ON" => {
            let trigger_event =
                h.trigger && matches!(word(prev), Some("INSERT" | "UPDATE" | "DELETE"));
            if (trigger_event || h.on_names_table) && !h.on_seen {
                h.on_seen = true;
                top.expect = true;
                top.list = false;
            } else {
                // A join's condition: a comma after it at this depth is
                // the next table of the list (`FROM a JOIN b ON a.x = b.x,
                // app.c`); an expression has none outside parentheses.
                // `ON DUPLICATE KEY UPDATE a = 1, b = 2` ends the list.
                top.expect = false;
                top.list &= !kw(next, "DUPLICATE");
            }
        }
        // A join's `USING (c)` keeps the list, as its ON does.
        "USING" if paren_next => top.expect = false,
        "WHERE" | "SET" | "USING" | "GROUP" | "ORDER" | "LIMIT" | "HAVING" | "VALUES" | "VALUE"
        | "SELECT" | "UNION" | "WINDOW" | "RETURNING" | "RETURNS" | "WHEN" => {
            top.expect = false;
            top.list = false;
        }
        // Modifiers between a keyword and its name keep the
        // expectation; other keywords end it.
        "IGNORE" | "LOW_PRIORITY" | "HIGH_PRIORITY" | "DELAYED" | "QUICK" | "IF" | "NOT"
        | "EXISTS" | "TEMPORARY" | "LATERAL" | "ONLY" => {}
        _ => {
            // A keyword where a table name stands is that name
            // (`FROM event`).
            if top.expect {
                introduced.insert(w.to_ascii_lowercase());
                named.uses_default |= !h.is_delete_target(k)
                    && w != "DUAL"
                    && !ctes.contains(&w.to_ascii_lowercase());
            }
            top.expect = false;
        }
    }
}

/// Where the statement itself starts: after a `SET STATEMENT v = x
/// [, ...] FOR` in front (which the binary log keeps as the client wrote
/// it, and which names nothing), else at the first token.
fn statement_start(t: &[T]) -> usize {
    if !(kw(t.first(), "SET") && kw(t.get(1), "STATEMENT")) {
        return 0;
    }
    let mut depth = 0i32;
    (2..t.len())
        .find(|&k| {
            match &t[k].0 {
                Tok::Punct(b'(') => depth += 1,
                Tok::Punct(b')') => depth -= 1,
                _ => {}
            }
            depth == 0 && kw(t.get(k), "FOR")
        })
        .map_or(0, |k| k + 1)
}

/// The statement's tokens from [`statement_start`]: what follows FOR is
/// read as if it stood alone. The tokens keep their places in `sql`, so
/// renames land where they would.
fn statement_tokens(sql: &[u8], d: Dialect) -> Vec<T> {
    let mut t = lex_in(sql, d).toks;
    t.drain(..statement_start(&t));
    t
}

/// The dialects a text could have been written in, whatever its
/// session's sql_mode: every NO_BACKSLASH_ESCAPES and ANSI_QUOTES, with
/// `d`'s character set.
fn sql_mode_dialects(d: Dialect) -> impl Iterator<Item = Dialect> {
    [(false, false), (true, false), (false, true), (true, true)]
        .into_iter()
        .map(move |(no_backslash_escapes, ansi_quotes)| Dialect {
            no_backslash_escapes,
            ansi_quotes,
            charset: d.charset,
        })
}

/// `SET STATEMENT sql_mode = ... FOR ...` (`t`: the text's tokens in
/// `d`): the event carries the statement's sql_mode (checked on MariaDB
/// 10.11: `SET @@session.sql_mode` before it is the FOR clause's), but the
/// source read the text under the session's own, which the binary log
/// does not carry. A text that reads the same under every
/// NO_BACKSLASH_ESCAPES and ANSI_QUOTES is sure; one that does not (a `"`
/// quoted word, a backslash in a literal) is not — a replica that reads it
/// under the event's sql_mode stores another value or fails (replaying the
/// binary log as a replica does stored `c\\d` where the source has `c\d`,
/// and refused `"q"` with 1054). The character set variables, which
/// change how a text reads too, cannot be set so (the server refuses
/// them with 1971).
fn sql_mode_for_itself(sql: &[u8], d: Dialect, t: &[T]) -> Option<String> {
    let start = statement_start(t);
    let sets_sql_mode = t[..start]
        .iter()
        .any(|x| matches!(&x.0, Tok::Word(w) if w == "SQL_MODE"));
    if !sets_sql_mode {
        return None;
    }
    let escapes = t.iter().any(|(tok, r)| {
        matches!(tok, Tok::Literal) && sql.get(r.clone()).is_some_and(|b| b.contains(&b'\\'))
    });
    let same = sql_mode_dialects(d).all(|other| lex_in(sql, other).toks == t);
    (escapes || !same).then(|| {
        "its SET STATEMENT sets sql_mode: the source read the text under the session's own \
         sql_mode, which the binary log does not carry, and the text reads otherwise under \
         another (a backslash in a literal, or a double-quoted word)"
            .to_string()
    })
}

/// Reads what a statement's text names, written in dialect `d`.
pub fn read(sql: &[u8], d: Dialect) -> Result<Named, Unsure> {
    // Lexed once: a statement-based INSERT can be megabytes.
    let mut t = lex_in(sql, d).toks;
    if let Some(why) = sql_mode_for_itself(sql, d, &t) {
        return Err(Unsure(why));
    }
    t.drain(..statement_start(&t));
    read_tokens(sql, t)
}

/// The databases the text names when read in any sql_mode dialect (with
/// `d`'s character set): those a statement [`read`] was unsure of may
/// write. Empty when no reading is sure.
pub fn named_in_any_dialect(sql: &[u8], d: Dialect) -> Vec<String> {
    let mut all: Vec<String> = sql_mode_dialects(d)
        .filter_map(|other| read_tokens(sql, statement_tokens(sql, other)).ok())
        .flat_map(|n| n.databases())
        .collect();
    all.sort();
    all.dedup();
    all
}

/// [`read`] of the statement's tokens `t` (from [`statement_start`]).
fn read_tokens(sql: &[u8], t: Vec<T>) -> Result<Named, Unsure> {
    let mut named = Named {
        database_statement: is_database(&t),
        ..Named::default()
    };
    if named.database_statement {
        if alters_the_default_database(&t) {
            named.uses_default = true;
        } else {
            named.refs.extend(database_named(sql, &t));
        }
        return Ok(named);
    }
    let mut stack = vec![Frame::stmt()];
    let mut h = head(&t, 0);
    let ctes = cte_names(&t);
    let mut introduced: HashSet<String> = HashSet::new();
    let mut qualifiers: Vec<Ident> = Vec::new();
    let mut k = 0;
    while k < t.len() {
        let prev = k.checked_sub(1).and_then(|p| t.get(p));
        let next = t.get(k + 1);
        let depth = stack.len();
        let Some(top) = stack.last_mut() else {
            break;
        };
        match &t[k].0 {
            Tok::Punct(b';') => {
                stack.truncate(1);
                stack[0] = Frame::stmt();
                h = head(&t, k + 1);
            }
            Tok::Punct(b'(') => {
                let first = word(next);
                let mut f = Frame {
                    kind: Kind::Expr,
                    expect: false,
                    list: false,
                };
                if matches!(first, Some("SELECT" | "WITH" | "VALUES" | "TABLE")) {
                    f.kind = Kind::Stmt;
                } else if top.expect && top.kind == Kind::Stmt {
                    // FROM ( a JOIN b ... ): a nested list of tables.
                    f = Frame {
                        kind: Kind::Stmt,
                        expect: true,
                        list: true,
                    };
                } else if matches!(word(prev), Some("NEXTVAL" | "LASTVAL" | "SETVAL")) {
                    f.expect = true;
                } else if h.like_at == Some(k + 1) {
                    f.kind = Kind::Stmt;
                }
                top.expect = false;
                stack.push(f);
            }
            Tok::Punct(b')') if depth > 1 => {
                stack.pop();
            }
            Tok::Punct(b',') if top.list => top.expect = true,
            // A keyword right before a dot is a name (`comment.t`,
            // `event.id`): read as one below.
            Tok::Word(w) if ident(sql, &t[k]).is_none() && !punct(next, b'.') => {
                let w = w.as_str();
                if depth == 1 && starts_statement(w, prev) {
                    stack[0] = Frame::stmt();
                    h = head(&t, k + 1);
                    k += 1;
                    continue;
                }
                let paren_next = punct(next, b'(');
                if paren_next && matches!(w, "DATABASE" | "SCHEMA") {
                    named.uses_default = true;
                }
                keyword(
                    w,
                    (prev, k, paren_next, next),
                    top,
                    &mut h,
                    (&mut introduced, &mut named, &ctes),
                );
            }
            Tok::Word(_) | Tok::Quoted(_) => {
                // A name, maybe qualified: x, x.y, x.y.z, x.*
                let mut parts = vec![k];
                let mut e = k + 1;
                let mut star = false;
                while punct(t.get(e), b'.') {
                    match t.get(e + 1) {
                        Some(x) if ident(sql, x).is_some() || matches!(x.0, Tok::Word(_)) => {
                            parts.push(e + 1);
                            e += 2;
                        }
                        Some((Tok::Punct(b'*'), _)) => {
                            star = true;
                            e += 2;
                            break;
                        }
                        _ => break,
                    }
                }
                let call = punct(t.get(e), b'(');
                let first = ident(sql, &t[k]).or_else(|| {
                    Some(Ident {
                        at: t[k].1.clone(),
                        name: name_of(sql, &t[k]),
                    })
                });
                let last = parts
                    .last()
                    .and_then(|p| t.get(*p))
                    .map(|x| name_of(sql, x));
                if let Some(first) = first {
                    let cte = ctes.contains(&first.name.to_ascii_lowercase());
                    let grant_star = star && parts.len() == 1 && h.on_names_table && top.expect;
                    if parts.len() >= 3 || (parts.len() == 2 && (top.expect || call)) || grant_star
                    {
                        named.refs.push(first);
                    } else if parts.len() == 2 || star {
                        qualifiers.push(first);
                    }
                    // A delete target, a WITH clause's name, DUAL and a
                    // table function (`JSON_TABLE(...) AS jt`) are no
                    // table of the default database.
                    let own = h.is_delete_target(k)
                        || cte
                        || kw(Some(&t[k]), "DUAL")
                        || (call && kw(Some(&t[k]), "JSON_TABLE"));
                    if parts.len() == 1 && (top.expect || grant_star) && !own {
                        named.uses_default = true;
                    }
                }
                if let Some(l) = last {
                    if parts.len() <= 2 && !star {
                        introduced.insert(l.to_ascii_lowercase());
                    }
                }
                if punct(t.get(e), b'.') {
                    return Err(Unsure(format!(
                        "a qualified name at byte {} that cannot be split into its parts",
                        t[k].1.start
                    )));
                }
                top.expect = false;
                k = e;
                continue;
            }
            _ => {}
        }
        k += 1;
    }
    check_qualifiers(&t, &named, &qualifiers, &introduced)?;
    Ok(named)
}

/// `x.y` read as table.column: x must be something the statement
/// introduces, or the reading may have missed a table position; and a
/// statement whose grammar the reader does not know may name none.
fn check_qualifiers(
    t: &[T],
    named: &Named,
    qualifiers: &[Ident],
    introduced: &HashSet<String>,
) -> Result<(), Unsure> {
    for q in qualifiers {
        let n = q.name.to_ascii_lowercase();
        if n == "new" || n == "old" || introduced.contains(&n) {
            continue;
        }
        return Err(Unsure(format!(
            "cannot tell whether '{}' at byte {} is a database or a table: the statement names no table or alias '{}'",
            q.name, q.at.start, q.name
        )));
    }
    if !named.refs.is_empty() || !qualifiers.is_empty() {
        let first = word(t.first()).unwrap_or("");
        if !KNOWN.contains(&first) {
            return Err(Unsure(format!(
                "qualified names in a statement starting with '{first}', whose grammar this reader does not know"
            )));
        }
    }
    Ok(())
}

/// A name token's text, unquoted.
fn name_of(sql: &[u8], t: &T) -> String {
    match &t.0 {
        Tok::Quoted(n) => n.to_string(),
        _ => String::from_utf8_lossy(&sql[t.1.clone()]).into_owned(),
    }
}

/// `CREATE|ALTER EVENT` as a replica keeps it: an event the source made
/// ENABLE or DISABLE becomes `DISABLE ON SLAVE` (what MariaDB's replica
/// records as SLAVESIDE_DISABLED), so the copy does not run it a second
/// time — its effects arrive from the source. None: not such a statement,
/// or nothing to change (an ALTER that leaves the status alone).
pub fn event_as_replica(sql: &[u8], d: Dialect) -> Option<Vec<u8>> {
    let t = statement_tokens(sql, d);
    if !(kw(t.first(), "CREATE") || kw(t.first(), "ALTER")) {
        return None;
    }
    let ev = (1..t.len().min(16)).find(|k| kw(t.get(*k), "EVENT"))?;
    if (1..ev).any(|k| {
        matches!(
            word(t.get(k)),
            Some("TABLE" | "VIEW" | "PROCEDURE" | "FUNCTION" | "TRIGGER" | "DATABASE")
        )
    }) {
        return None;
    }
    let mut depth = 0i32;
    let mut end = t.len();
    let mut status: Option<Range<usize>> = None;
    for k in ev + 1..t.len() {
        match &t[k].0 {
            Tok::Punct(b'(') => depth += 1,
            Tok::Punct(b')') => depth -= 1,
            Tok::Word(w) if depth == 0 => match w.as_str() {
                "DO" => {
                    end = k;
                    break;
                }
                "ENABLE" => status = Some(t[k].1.clone()),
                "DISABLE" => {
                    let on_slave = kw(t.get(k + 1), "ON") && kw(t.get(k + 2), "SLAVE");
                    if on_slave {
                        return None;
                    }
                    status = Some(t[k].1.clone());
                }
                _ => {}
            },
            _ => {}
        }
    }
    let mut out = Vec::with_capacity(sql.len() + 20);
    match status {
        Some(r) => {
            out.extend_from_slice(&sql[..r.start]);
            out.extend_from_slice(b"DISABLE ON SLAVE");
            out.extend_from_slice(&sql[r.end..]);
        }
        // CREATE without a status is ENABLE; an ALTER without one keeps it.
        None if kw(t.first(), "CREATE") => {
            let at = t.get(end)?.1.start;
            out.extend_from_slice(&sql[..at]);
            out.extend_from_slice(b"DISABLE ON SLAVE ");
            out.extend_from_slice(&sql[at..]);
        }
        None => return None,
    }
    Some(out)
}

/// The table (or sequence) `CREATE [OR REPLACE] [TEMPORARY] TABLE|SEQUENCE
/// [IF NOT EXISTS] [db.]name` creates: its database if qualified, and its
/// name.
pub fn created_table(sql: &[u8], d: Dialect) -> Option<(Option<String>, String)> {
    let t = statement_tokens(sql, d);
    let mut k = 0;
    if !kw(t.get(k), "CREATE") {
        return None;
    }
    k += 1;
    if kw(t.get(k), "OR") && kw(t.get(k + 1), "REPLACE") {
        k += 2;
    }
    if kw(t.get(k), "TEMPORARY") {
        k += 1;
    }
    if !kw(t.get(k), "TABLE") && !kw(t.get(k), "SEQUENCE") {
        return None;
    }
    k += 1;
    if kw(t.get(k), "IF") && kw(t.get(k + 1), "NOT") && kw(t.get(k + 2), "EXISTS") {
        k += 3;
    }
    table_name_at(sql, &t, k)
}

/// The `[db.]name` at token `k`: its database if qualified, and its name.
fn table_name_at(sql: &[u8], t: &[T], k: usize) -> Option<(Option<String>, String)> {
    let first = t.get(k).and_then(|x| ident(sql, x))?.name;
    if punct(t.get(k + 1), b'.') {
        let table = t.get(k + 2).map(|x| name_of(sql, x))?;
        Some((Some(first), table))
    } else {
        Some((None, first))
    }
}

/// The table `ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] [db.]name ...`
/// changes: its database if qualified, and its name.
pub fn altered_table(sql: &[u8], d: Dialect) -> Option<(Option<String>, String)> {
    let t = statement_tokens(sql, d);
    let mut k = 0;
    if !kw(t.get(k), "ALTER") {
        return None;
    }
    k += 1;
    for word in ["ONLINE", "IGNORE"] {
        if kw(t.get(k), word) {
            k += 1;
        }
    }
    if !kw(t.get(k), "TABLE") {
        return None;
    }
    k += 1;
    if kw(t.get(k), "IF") && kw(t.get(k + 1), "EXISTS") {
        k += 2;
    }
    table_name_at(sql, &t, k)
}

/// The temporary table `CREATE [OR REPLACE] TEMPORARY TABLE [IF NOT
/// EXISTS] [db.]name` creates. None: not such a statement.
pub fn created_temporary(sql: &[u8], d: Dialect) -> Option<(Option<String>, String)> {
    let t = statement_tokens(sql, d);
    let k = if kw(t.get(1), "OR") { 3 } else { 1 };
    if !(kw(t.first(), "CREATE") && kw(t.get(k), "TEMPORARY")) {
        return None;
    }
    created_table(sql, d)
}

/// Whether the text names identifier `name` anywhere (any case; quoted or
/// not; outside literals and comments).
pub fn names_identifier(sql: &[u8], d: Dialect, name: &str) -> bool {
    lex_in(sql, d).toks.iter().any(|t| {
        matches!(&t.0, Tok::Word(_) | Tok::Quoted(_)) && name_of(sql, t).eq_ignore_ascii_case(name)
    })
}

/// The temporary tables `DROP [/*!40005 */] TEMPORARY TABLE [IF EXISTS]
/// [db.]a, ...` drops (the server's own form at a session's end included):
/// each one's database if qualified, and its name. None: not such a
/// statement.
pub fn dropped_temporary(sql: &[u8], d: Dialect) -> Option<Vec<(Option<String>, String)>> {
    let t = statement_tokens(sql, d);
    if !(kw(t.first(), "DROP") && kw(t.get(1), "TEMPORARY") && kw(t.get(2), "TABLE")) {
        return None;
    }
    let mut k = 3;
    if kw(t.get(k), "IF") && kw(t.get(k + 1), "EXISTS") {
        k += 2;
    }
    let mut out = Vec::new();
    loop {
        let first = t.get(k).and_then(|x| ident(sql, x))?.name;
        if punct(t.get(k + 1), b'.') {
            let table = t.get(k + 2).map(|x| name_of(sql, x))?;
            out.push((Some(first), table));
            k += 3;
        } else {
            out.push((None, first));
            k += 1;
        }
        if !punct(t.get(k), b',') {
            return Some(out);
        }
        k += 1;
    }
}

fn is_database(t: &[T]) -> bool {
    (kw(t.first(), "CREATE") || kw(t.first(), "DROP") || kw(t.first(), "ALTER"))
        && (kw(t.get(1), "DATABASE") || kw(t.get(1), "SCHEMA"))
}

/// The statement with each database reference renamed to what `to`
/// gives for its name (backquoted); names it gives None for stay.
pub fn rename(sql: &[u8], named: &Named, to: impl Fn(&str) -> Option<String>) -> Vec<u8> {
    let mut out = Vec::with_capacity(sql.len() + 16);
    let mut at = 0;
    for r in &named.refs {
        let Some(new) = to(&r.name) else { continue };
        if r.at.start < at || r.at.end > sql.len() {
            continue;
        }
        out.extend_from_slice(&sql[at..r.at.start]);
        // A name right after or before a backquoted one (`a`db: two
        // tokens) keeps a space from it: quoted, the two backquotes side
        // by side would read as one escaped inside a single name.
        if r.at.start > 0 && sql[r.at.start - 1] == b'`' {
            out.push(b' ');
        }
        out.push(b'`');
        out.extend_from_slice(new.replace('`', "``").as_bytes());
        out.push(b'`');
        if sql.get(r.at.end) == Some(&b'`') {
            out.push(b' ');
        }
        at = r.at.end;
    }
    out.extend_from_slice(&sql[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sqlfleet_dump::lex::Multibyte;

    /// A name the reader finds right after a closing backquote is renamed
    /// apart from it (found by fuzzing: renamed as `\`x\``, the two
    /// backquotes read as one inside the name before, and the renamed
    /// text named another database).
    #[test]
    fn a_renamed_name_beside_a_backquote_stays_a_name_of_its_own() {
        let sql: &[u8] = b"lOAD(TTTTTTTTTTTTTTTTTMFROM.O(!WM.O(!TT;TT`TTTTTTTTTTTTTTTM.O(!TTTT1TmFO.RMTTTMFROM.O(!WM.O(!TT;TT`TTTTTTTTTTTTTTM.O(!TTTTTTmFO.RMO(!WM.O(!TT;TTTTTR\tOU";
        let d = Dialect::default();
        let named = read(sql, d).expect("read");
        let renamed = rename(sql, &named, |n| Some(format!("{n}_x")));
        let again = read(&renamed, d).expect("read again");
        let mut want: Vec<String> = named.databases().iter().map(|n| format!("{n}_x")).collect();
        want.sort();
        assert_eq!(
            again.databases(),
            want,
            "{}",
            String::from_utf8_lossy(&renamed)
        );
        // Not beside one: as before.
        let sql: &[u8] = b"SELECT 1 AS`a`FROM app.t";
        let named = read(sql, d).expect("read");
        let got = rename(sql, &named, |n| Some(format!("{n}_x")));
        assert_eq!(
            String::from_utf8_lossy(&got),
            "SELECT 1 AS`a`FROM `app_x`.t"
        );
    }

    fn dbs(sql: &str) -> Vec<String> {
        read(sql.as_bytes(), Dialect::default())
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .databases()
    }

    fn unsure(sql: &str) -> bool {
        read(sql.as_bytes(), Dialect::default()).is_err()
    }

    /// Each row: a statement and the databases its text names.
    #[test]
    fn qualifiers_are_databases_only_where_the_grammar_puts_a_table() {
        let rows: &[(&str, &[&str])] = &[
            ("ALTER TABLE app.t ADD c INT, ALGORITHM=INPLACE", &["app"]),
            ("insert into `a b`.t select * from other.u where x = 'app.t'", &["a b", "other"]),
            ("CREATE DATABASE IF NOT EXISTS app", &["app"]),
            ("drop schema `app`", &["app"]),
            ("create table t (id int) /* app.t */ -- app.x\n", &[]),
            ("select app.t.c from app.t", &["app"]),
            // Finding 1: a table alias is no database.
            ("UPDATE child c SET c.v = c.v + 100 WHERE c.id < 50", &[]),
            ("UPDATE app.child AS c SET c.v = 1", &["app"]),
            ("UPDATE a.t x JOIN b.u y ON x.id = y.id SET x.v = y.v", &["a", "b"]),
            ("UPDATE t1, other.t2 SET t1.a = t2.a WHERE t1.id = t2.id", &["other"]),
            ("DELETE c FROM child c JOIN parent p ON c.pid = p.id WHERE p.x > 1", &[]),
            ("DELETE x.* FROM app.t x WHERE x.id IN (SELECT y.id FROM o.u y)", &["app", "o"]),
            ("DELETE FROM app.t WHERE t.id = 1", &["app"]),
            ("DELETE app.t1 FROM app.t1 JOIN t2 ON t1.a = t2.a", &["app"]),
            // Finding 2: a view whose query uses aliases.
            ("CREATE VIEW v_alias AS SELECT c.pid, c.v FROM child c WHERE c.v > 1", &[]),
            (
                "CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `app`.`v` AS select `c`.`pid` AS `pid` from `app`.`child` `c`",
                &["app"],
            ),
            // Finding 3: NEW and OLD in a trigger body.
            (
                "CREATE DEFINER=`root`@`localhost` TRIGGER child_ai AFTER INSERT ON child FOR EACH ROW INSERT INTO audit (what, at_id) VALUES ('child', NEW.id)",
                &[],
            ),
            (
                "CREATE TRIGGER tr BEFORE UPDATE ON app.t FOR EACH ROW BEGIN INSERT INTO log.a VALUES (OLD.v); SET NEW.v = NEW.v + 1; END",
                &["app", "log"],
            ),
            ("INSERT INTO t SELECT s.a, s.b FROM src s LEFT JOIN o.x ON x.k = s.k", &["o"]),
            ("INSERT INTO t (a) SELECT a FROM u ON DUPLICATE KEY UPDATE t.a = u.a", &[]),
            ("INSERT INTO t SELECT * FROM (SELECT q.a FROM db2.q) AS d", &["db2"]),
            ("INSERT INTO t VALUES (NEXTVAL(s1.seq)), (NEXT VALUE FOR s2.seq)", &["s1", "s2"]),
            ("INSERT INTO t VALUES (fdb.f(1)), (EXTRACT(YEAR FROM t.d))", &["fdb"]),
            ("SELECT t.a FROM t WHERE EXISTS (SELECT 1 FROM o.u WHERE u.k = t.k)", &["o"]),
            ("CALL app.p(1)", &["app"]),
            ("CALL app.p", &["app"]),
            ("RENAME TABLE a.t TO b.t, a.u TO c.u", &["a", "b", "c"]),
            ("ALTER TABLE t RENAME TO other.t", &["other"]),
            ("ALTER TABLE t RENAME COLUMN a TO b", &[]),
            ("CREATE TABLE x.t LIKE y.t", &["x", "y"]),
            ("CREATE TABLE t (LIKE y.t)", &["y"]),
            ("CREATE TABLE t (id INT, pid INT REFERENCES p.parent (id) ON DELETE CASCADE)", &["p"]),
            ("CREATE TABLE t (a INT CHECK (a LIKE 'x'), b INT) SELECT s.a FROM o.s", &["o"]),
            ("CREATE TABLE t (id INT DEFAULT NEXTVAL(q.seq1))", &["q"]),
            ("CREATE INDEX i ON d.t (a)", &["d"]),
            ("DROP TABLE IF EXISTS a.t, b.u", &["a", "b"]),
            ("DROP VIEW a.v, b.w", &["a", "b"]),
            ("TRUNCATE TABLE a.t", &["a"]),
            ("TRUNCATE a.t", &["a"]),
            ("LOCK TABLES a.t READ, b.u AS x WRITE", &["a", "b"]),
            ("GRANT SELECT ON app.* TO u@localhost", &["app"]),
            (
                "CREATE PROCEDURE app.p(IN n INT) BEGIN DECLARE r ROW TYPE OF t; UPDATE t c SET c.v = n; INSERT INTO other.t SELECT r.a; END",
                &["app", "other"],
            ),
            (
                "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO DELETE FROM app.log WHERE log.at < NOW()",
                &["app"],
            ),
            ("CREATE FUNCTION f(x INT) RETURNS INT RETURN (SELECT COUNT(*) FROM o.t WHERE t.a = x)", &["o"]),
            ("SELECT SETVAL(app.s, 10)", &["app"]),
            ("WITH w AS (SELECT a FROM o.t) UPDATE u JOIN w ON u.a = w.a SET u.b = 1", &["o"]),
            ("INSERT INTO t SELECT 1.5, 'x.y', s.c FROM `q.r`.s", &["q.r"]),
            ("REPLACE INTO a.t SELECT REPLACE(u.s, 'a', 'b') FROM u", &["a"]),
            ("SELECT w.a FROM t w WINDOW x AS (PARTITION BY w.b)", &[]),
            ("SELECT c.* FROM child c", &[]),
            // Names that are also keywords, before a dot.
            ("INSERT INTO comment.t VALUES (1)", &["comment"]),
            ("UPDATE event.t SET v = 1", &["event"]),
            ("SELECT event.id FROM event", &[]),
        ];
        for (sql, want) in rows {
            assert_eq!(dbs(sql), *want, "{sql}");
            // The same statement behind SET STATEMENT ... FOR (kept so in
            // the binary log): the prefix names nothing.
            for prefix in [
                "SET STATEMENT max_statement_time = 10 FOR ",
                "set statement sql_mode = 'a.b', foreign_key_checks = (0) for\n",
            ] {
                let with = format!("{prefix}{sql}");
                assert_eq!(dbs(&with), *want, "{with}");
            }
        }
    }

    /// A SET STATEMENT of sql_mode: the event's sql_mode is the clause's,
    /// the text was read under the session's own.
    #[test]
    fn a_text_read_under_a_sql_mode_the_event_does_not_carry_is_unsure() {
        for (sql, sure) in [
            ("SET STATEMENT sql_mode = 'NO_BACKSLASH_ESCAPES' FOR INSERT INTO a.t VALUES (1, 'c\\\\d')", false),
            ("SET STATEMENT sql_mode = 'ANSI_QUOTES' FOR INSERT INTO a.t VALUES (1, \"q\")", false),
            ("SET STATEMENT sql_mode = '' FOR INSERT INTO a.t VALUES (1, \"q\")", false),
            ("set statement SQL_MODE = 'ANSI' for insert into a.t values (1, 'it''s')", true),
            ("SET STATEMENT sql_mode = 'NO_BACKSLASH_ESCAPES' FOR INSERT INTO a.t VALUES (1, 'cd')", true),
            // Not the sql_mode: the text reads as the event says.
            ("SET STATEMENT max_statement_time = 1 FOR INSERT INTO a.t VALUES (1, 'c\\\\d')", true),
            ("INSERT INTO a.t VALUES (1, 'c\\\\d', \"q\")", true),
        ] {
            assert_eq!(!unsure(sql), sure, "{sql}");
            // Those it may write are known all the same.
            assert_eq!(named_in_any_dialect(sql.as_bytes(), Dialect::default()), ["a"], "{sql}");
        }
    }

    #[test]
    fn events_arrive_as_a_replica_keeps_them() {
        let e = |sql: &str| {
            event_as_replica(sql.as_bytes(), Dialect::default())
                .map(|v| String::from_utf8(v).expect("utf8"))
        };
        let rows: &[(&str, Option<&str>)] = &[
            (
                "CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DO INSERT INTO t VALUES (1)",
                Some("CREATE EVENT e ON SCHEDULE EVERY 1 HOUR DISABLE ON SLAVE DO INSERT INTO t VALUES (1)"),
            ),
            (
                "CREATE DEFINER=`r`@`h` EVENT e ON SCHEDULE AT NOW() + INTERVAL 1 DAY ON COMPLETION PRESERVE ENABLE COMMENT 'x DO' DO BEGIN DISABLE; END",
                Some("CREATE DEFINER=`r`@`h` EVENT e ON SCHEDULE AT NOW() + INTERVAL 1 DAY ON COMPLETION PRESERVE DISABLE ON SLAVE COMMENT 'x DO' DO BEGIN DISABLE; END"),
            ),
            ("ALTER EVENT e DISABLE", Some("ALTER EVENT e DISABLE ON SLAVE")),
            ("ALTER EVENT e RENAME TO f", None),
            ("CREATE EVENT e ON SCHEDULE EVERY 1 DAY DISABLE ON SLAVE DO SELECT 1", None),
            ("CREATE TABLE event (a INT)", None),
            ("CREATE TRIGGER event BEFORE INSERT ON t FOR EACH ROW SET @a = 1", None),
        ];
        for (sql, want) in rows {
            assert_eq!(e(sql).as_deref(), *want, "{sql}");
        }
    }

    #[test]
    fn the_created_table_is_named() {
        assert_eq!(
            created_table(
                b"CREATE TABLE part (id INT) PARTITION BY HASH (id) PARTITIONS 3",
                Dialect::default()
            ),
            Some((None, "part".into()))
        );
        assert_eq!(
            created_table(
                b"create or replace table if not exists `a b`.`t` like u",
                Dialect::default()
            ),
            Some((Some("a b".into()), "t".into()))
        );
        assert_eq!(
            created_table(b"CREATE VIEW v AS SELECT 1", Dialect::default()),
            None
        );
        assert_eq!(
            created_table(
                b"CREATE SEQUENCE seq1 START WITH 100 INCREMENT BY 7",
                Dialect::default()
            ),
            Some((None, "seq1".into()))
        );
    }

    #[test]
    fn the_altered_table_is_named() {
        let d = Dialect::default();
        type Named<'a> = Option<(Option<&'a str>, &'a str)>;
        let rows: &[(&str, Named)] = &[
            ("ALTER TABLE nopk ADD INDEX (a)", Some((None, "nopk"))),
            (
                "alter online ignore table if exists `a b`.`t` add c int",
                Some((Some("a b"), "t")),
            ),
            (
                "ALTER TABLE app.t RENAME TO other.t",
                Some((Some("app"), "t")),
            ),
            ("/* c */ ALTER TABLE t ENGINE=InnoDB", Some((None, "t"))),
            ("ALTER DATABASE app CHARACTER SET utf8mb4", None),
            ("ALTER SEQUENCE s RESTART", None),
            ("ALTER VIEW v AS SELECT 1", None),
            ("ALTER TABLE", None),
            ("CREATE TABLE t (i int)", None),
        ];
        for (sql, want) in rows {
            let want = want.map(|(db, t)| (db.map(str::to_string), t.to_string()));
            assert_eq!(altered_table(sql.as_bytes(), d), want, "{sql}");
        }
    }

    #[test]
    fn dropped_temporary_tables_are_named() {
        let d = Dialect::default();
        assert_eq!(
            dropped_temporary(b"DROP TEMPORARY TABLE `tt` /* generated by server */", d),
            Some(vec![(None, "tt".into())])
        );
        assert_eq!(
            dropped_temporary(
                b"DROP /*!40005 TEMPORARY */ TABLE IF EXISTS `a`.`t1`,`t2`",
                d
            ),
            Some(vec![(Some("a".into()), "t1".into()), (None, "t2".into())])
        );
        assert_eq!(dropped_temporary(b"DROP TABLE t", d), None);
        // Behind SET STATEMENT ... FOR, as the binary log keeps it.
        assert_eq!(
            created_temporary(
                b"SET STATEMENT max_statement_time = 5 FOR CREATE TEMPORARY TABLE a.tt (id INT)",
                d
            ),
            Some((Some("a".into()), "tt".into()))
        );
        assert_eq!(
            dropped_temporary(
                b"SET STATEMENT sql_mode = '' FOR DROP TEMPORARY TABLE tt",
                d
            ),
            Some(vec![(None, "tt".into())])
        );
        assert_eq!(
            created_temporary(b"CREATE OR REPLACE TEMPORARY TABLE a.t (x INT)", d),
            Some((Some("a".into()), "t".into()))
        );
        assert_eq!(created_temporary(b"CREATE TABLE t (x INT)", d), None);
        assert!(names_identifier(
            b"UPDATE q JOIN `Tmp` USING (id)",
            d,
            "tmp"
        ));
        assert!(!names_identifier(b"UPDATE q SET o = 'tmp'", d, "tmp"));
        assert_eq!(dropped_temporary(b"DROP TEMPORARY TABLE", d), None);
    }

    /// Every statement of `rows` read for sure, naming only database `app`
    /// and not the default one; all that do not, listed.
    /// Statements of every common shape — joins of each kind, index
    /// hints, derived tables, set operations, table functions, sequences,
    /// CTEs, window clauses, locking reads, modifiers — every table
    /// qualified: read for sure, naming only `app` (each checked to parse
    /// on MariaDB 10.11). Before this table, four read as using the
    /// default database (`FROM DUAL`, a CTE's name, `JSON_TABLE(...) AS
    /// jt`, an index hint's `FOR JOIN (i)`), which stops the stream under
    /// an excluded default database.
    #[test]
    fn statements_of_every_common_shape_name_only_their_database() {
        assert_name_only_app(&[
            "INSERT INTO app.t SELECT * FROM app.u NATURAL JOIN app.v",
            "UPDATE app.t SET a = 1 WHERE id IN (SELECT id FROM app.u) AND EXISTS (SELECT 1 FROM app.v WHERE v.id = t.id)",
            "REPLACE INTO app.t SELECT * FROM app.u WHERE u.a IN (SELECT a FROM app.v)",
            "DELETE FROM app.t WHERE (a, b) IN (SELECT a, b FROM app.u)",
            "UPDATE app.t t JOIN (SELECT id, MAX(v) m FROM app.u GROUP BY id) d ON d.id = t.id SET t.v = d.m",
            "UPDATE app.t t INNER JOIN app.u u ON u.id = t.id LEFT JOIN app.v v ON v.id = u.id SET t.a = v.a",
            "INSERT INTO app.t SELECT u.* FROM app.u u",
            "INSERT INTO app.t (a) SELECT a FROM app.u u CROSS JOIN app.v v",
            "INSERT INTO app.t SELECT JSON_ARRAYAGG(u.a) FROM app.u u",
            "INSERT INTO app.t SELECT * FROM app.u FOR SYSTEM_TIME AS OF TIMESTAMP '2020-01-01 00:00:00'",
            "INSERT INTO app.t SELECT jt.a FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a INT PATH '$')) AS jt, app.u",
            "INSERT INTO app.t SELECT * FROM app.u USE INDEX (i) JOIN app.v FORCE INDEX FOR JOIN (j) ON u.a = v.a",
            "INSERT INTO app.t SELECT * FROM app.u PARTITION (p0), app.v",
            "INSERT INTO app.t SELECT * FROM app.u u1 STRAIGHT_JOIN app.v v1 ON u1.a = v1.a",
            "INSERT INTO app.t SELECT a FROM app.u UNION SELECT a FROM app.v EXCEPT SELECT a FROM app.w",
            "INSERT INTO app.t SELECT a FROM app.u INTERSECT SELECT a FROM app.v",
            "INSERT INTO app.t SELECT * FROM (SELECT * FROM app.u) AS d, app.v",
            "INSERT INTO app.t SELECT * FROM app.u AS x, (SELECT 1) AS y",
            "UPDATE app.t, app.u SET t.a = u.a WHERE t.id = u.id",
            "INSERT INTO app.t SELECT * FROM app.u WHERE a = ANY (SELECT a FROM app.v)",
            "INSERT INTO app.t SELECT a FROM app.u LIMIT 10 OFFSET 5",
            "INSERT INTO app.t SELECT NEXT VALUE FOR app.s",
            "INSERT INTO app.t SELECT NEXTVAL(app.s)",
            "INSERT INTO app.t SELECT PREVIOUS VALUE FOR app.s",
            "INSERT INTO app.t VALUES (app.f(1))",
            "INSERT INTO app.t SELECT ROW_NUMBER() OVER w FROM app.u WINDOW w AS (ORDER BY a)",
            "ALTER TABLE app.t ADD CONSTRAINT c FOREIGN KEY (a) REFERENCES app.u (id) ON DELETE SET NULL ON UPDATE CASCADE",
            "CREATE TABLE app.t2 AS SELECT * FROM app.u",
            "CREATE TABLE app.t2 SELECT * FROM app.u JOIN app.v USING (id)",
            "INSERT INTO app.t SELECT * FROM app.u NATURAL LEFT JOIN app.v",
            "INSERT INTO app.t SELECT * FROM app.u LEFT OUTER JOIN app.v ON u.id = v.id",
            "INSERT INTO app.t SELECT * FROM app.u u WHERE NOT EXISTS (SELECT * FROM app.v v WHERE v.id = u.id)",
            "UPDATE app.t SET v = v + 1 ORDER BY id DESC LIMIT 1",
            "DELETE app.t, app.u FROM app.t INNER JOIN app.u ON t.id = u.id",
            "DELETE QUICK FROM app.t",
            "INSERT DELAYED INTO app.t VALUES (1)",
            "INSERT INTO app.t PARTITION (p0) VALUES (1)",
            "INSERT INTO app.t SET a = (SELECT MAX(a) FROM app.u)",
            "INSERT INTO app.t (a) VALUES (1) RETURNING *",
            "REPLACE app.t SET a = 1",
            "INSERT app.t VALUES (1)",
            "UPDATE IGNORE app.t SET a = 1",
            "INSERT INTO app.t SELECT a FROM app.u GROUP BY a WITH ROLLUP",
            "INSERT INTO app.t SELECT CAST(a AS CHAR CHARACTER SET utf8mb4) FROM app.u",
            "INSERT INTO app.t SELECT CONVERT(a USING utf8mb4) FROM app.u",
            "INSERT INTO app.t SELECT a FROM app.u WHERE MATCH (b) AGAINST ('x' IN BOOLEAN MODE)",
            "INSERT INTO app.t SELECT TRIM(LEADING 'x' FROM b) FROM app.u",
            "INSERT INTO app.t SELECT EXTRACT(YEAR FROM d) FROM app.u",
            "INSERT INTO app.t SELECT SUBSTRING(b FROM 2 FOR 3) FROM app.u",
            "INSERT INTO app.t SELECT * FROM app.u WHERE d > NOW() - INTERVAL 1 DAY",
            "INSERT INTO app.t SELECT * FROM app.u u JOIN app.v v ON (u.a = v.a) JOIN app.w w ON (w.b = v.b)",
            "INSERT INTO app.t SELECT * FROM app.u JOIN (app.v, app.w) ON u.a = v.a",
            "INSERT INTO app.t SELECT * FROM app.u JOIN (app.v JOIN app.w ON v.b = w.b) ON u.a = v.a",
            "INSERT INTO app.t SELECT a FROM app.u ORDER BY a DESC, b ASC",
            "INSERT INTO app.t SELECT * FROM app.u WHERE a BETWEEN 1 AND 2 AND b LIKE 'x%' ESCAPE '!'",
            "INSERT INTO app.t SELECT a, GROUP_CONCAT(b ORDER BY b SEPARATOR ',') FROM app.u GROUP BY a",
            "INSERT INTO app.t (a) SELECT 1 FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM app.u)",
            "INSERT INTO app.t SELECT a FROM app.u HAVING a > 1",
            "INSERT INTO app.t (a) SELECT a FROM app.u ON DUPLICATE KEY UPDATE a = VALUES(a) + 1, b = 2",
            "INSERT INTO app.t SELECT * FROM app.u WHERE a IN (1, 2, 3) LOCK IN SHARE MODE",
            "UPDATE app.t AS a1, app.u AS a2, app.v AS a3 SET a1.x = a2.x + a3.x WHERE a1.id = a2.id AND a2.id = a3.id",
            "INSERT INTO app.t WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3) SELECT n FROM c",
            "INSERT INTO app.t SELECT * FROM app.u WHERE a > (SELECT AVG(a) FROM app.v) FOR UPDATE SKIP LOCKED",
        ]);
        // What still uses the default database beside them.
        assert_uses_default(&[
            ("INSERT INTO app.t SELECT * FROM c", true),
            ("INSERT INTO app.t WITH c AS (SELECT 1) SELECT * FROM c, d", true),
            ("INSERT INTO app.t SELECT jt.a FROM JSON_TABLE('[1]', '$[*]' COLUMNS (a INT PATH '$')) AS jt, u", true),
            ("INSERT INTO app.t SELECT * FROM app.u USE INDEX FOR JOIN (i), v", true),
            ("INSERT INTO app.t SELECT * FROM `DUAL`", true),
            ("INSERT INTO app.t SELECT * FROM app.u GROUP BY a WITH ROLLUP", false),
        ]);
    }

    /// Each row's statement reads for sure, using its default database
    /// as the row says.
    fn assert_uses_default(rows: &[(&str, bool)]) {
        for (sql, uses) in rows {
            let n = read(sql.as_bytes(), Dialect::default()).expect(sql);
            assert_eq!(n.uses_default, *uses, "{sql}");
        }
    }

    fn assert_name_only_app(rows: &[&str]) {
        let wrong: Vec<String> = rows
            .iter()
            .filter_map(|sql| match read(sql.as_bytes(), Dialect::default()) {
                Err(e) => Some(format!("{sql}: unsure: {e}")),
                Ok(n) if n.uses_default => Some(format!("{sql}: uses the default")),
                Ok(n) if n.databases() != ["app"] => {
                    Some(format!("{sql}: names {:?}", n.databases()))
                }
                Ok(_) => None,
            })
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// DDL as schema-migration tools and DBAs write it (Rails, Django,
    /// Flyway, Liquibase, gh-ost, pt-online-schema-change, by hand), every
    /// name qualified: read for sure, naming only `app` (and `arch` where
    /// it says so), never the default database. A statement read as using
    /// the default is refused when the source had none, and stops its
    /// stream where native replication goes on.
    #[test]
    fn migration_ddl_with_qualified_names_names_only_its_databases() {
        let rows: &[&str] = &[
            "ALTER TABLE app.t ADD COLUMN c INT NOT NULL DEFAULT 0 AFTER b, ADD INDEX idx_c (c)",
            "ALTER TABLE app.t ADD CONSTRAINT fk_p FOREIGN KEY (pid) REFERENCES app.p (id) ON DELETE CASCADE ON UPDATE SET NULL",
            "ALTER TABLE app.t ADD FOREIGN KEY (pid) REFERENCES app.p (id)",
            "ALTER TABLE app.t MODIFY COLUMN c VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL",
            "ALTER TABLE app.t CHANGE COLUMN a b INT UNSIGNED NOT NULL",
            "ALTER TABLE app.t ALTER COLUMN c SET DEFAULT 5",
            "ALTER TABLE app.t ALTER COLUMN c DROP DEFAULT",
            "ALTER TABLE app.t DROP FOREIGN KEY fk_p, DROP INDEX idx_c",
            "ALTER TABLE app.t DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)",
            "ALTER TABLE app.t PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
            "ALTER TABLE app.t REMOVE PARTITIONING",
            "ALTER TABLE app.t TRUNCATE PARTITION p0, p1",
            "ALTER TABLE app.t RENAME INDEX a TO b",
            "ALTER TABLE app.t RENAME COLUMN a TO b",
            "ALTER TABLE app.t ENGINE=InnoDB, ALGORITHM=INPLACE, LOCK=NONE",
            "ALTER TABLE app.t ADD FULLTEXT INDEX ft (c)",
            "ALTER TABLE app.t ADD SPATIAL INDEX (g)",
            "ALTER TABLE app.t ADD COLUMN g POINT NOT NULL",
            "ALTER TABLE app.t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
            "ALTER TABLE app.t ADD SYSTEM VERSIONING",
            "ALTER TABLE app.t COMMENT = 'a table', AUTO_INCREMENT = 10",
            "ALTER TABLE app.t ADD COLUMN IF NOT EXISTS c INT, DROP COLUMN IF EXISTS d",
            "ALTER TABLE app.t ADD UNIQUE KEY uk (a), ADD KEY k2 (b)",
            "ALTER TABLE app.t ADD INDEX (a), ADD CONSTRAINT CHECK (a >= 0)",
            "ALTER TABLE app.t ADD CONSTRAINT chk CHECK (a BETWEEN 1 AND 10)",
            "ALTER TABLE app.t ORDER BY id",
            "ALTER TABLE app.t FORCE",
            "ALTER ONLINE TABLE app.t ADD INDEX i (a)",
            "ALTER TABLE app.t ADD COLUMN v INT AS (a + 1) VIRTUAL",
            "CREATE INDEX idx ON app.t (a, b)",
            "CREATE UNIQUE INDEX idx ON app.t (a) USING BTREE",
            "DROP INDEX idx ON app.t",
            "CREATE TABLE app.t (id INT AUTO_INCREMENT PRIMARY KEY, c INT, KEY (c), CONSTRAINT fk FOREIGN KEY (c) REFERENCES app.p (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
            "CREATE TABLE app.t (id INT, CHECK (id > 0)) ENGINE=InnoDB",
            "CREATE TABLE app.t LIKE app.u",
            "CREATE TABLE IF NOT EXISTS app.t (id INT PRIMARY KEY) PARTITION BY HASH(id) PARTITIONS 4",
            "CREATE OR REPLACE TABLE app.t (id INT) ENGINE=InnoDB, COMMENT='x'",
            "CREATE TABLE app.t (a INT, b INT, INDEX (a), UNIQUE (b))",
            "RENAME TABLE app.a TO app.b, app.c TO app.d",
            "DROP TABLE IF EXISTS app.a, app.b",
            "TRUNCATE TABLE app.t",
            "TRUNCATE app.t",
            "OPTIMIZE TABLE app.t",
            "ANALYZE TABLE app.t, app.u",
            "CREATE VIEW app.v AS SELECT a FROM app.t WHERE a > 1",
            "CREATE TRIGGER app.tr BEFORE INSERT ON app.t FOR EACH ROW SET NEW.c = 1",
            "CREATE SEQUENCE app.s START WITH 1 INCREMENT BY 1",
            "CREATE DATABASE IF NOT EXISTS app",
            "ALTER DATABASE app CHARACTER SET utf8mb4",
        ];
        assert_name_only_app(rows);
    }

    /// DML as ORMs and applications write it, every table qualified:
    /// read for sure, naming only `app`.
    #[test]
    fn application_dml_with_qualified_names_names_only_its_database() {
        let rows: &[&str] = &[
            "INSERT INTO app.t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)",
            "INSERT INTO app.t (a, b) VALUES (1, 2) ON DUPLICATE KEY UPDATE a = a + VALUES(a), b = IF(VALUES(b) > b, VALUES(b), b)",
            "INSERT IGNORE INTO app.t SET a = 1, b = 'x'",
            "INSERT INTO app.t VALUES (DEFAULT, 1)",
            "INSERT INTO app.t (a, b) VALUES (1, 'x'), (2, 'y') RETURNING id",
            "INSERT INTO app.t (d) VALUES (CURRENT_TIMESTAMP), (DATE_ADD(NOW(), INTERVAL 1 DAY))",
            "INSERT INTO app.t (a) VALUES (CAST('1' AS SIGNED)), (CONVERT('2', UNSIGNED))",
            "INSERT INTO app.t (g) VALUES (ST_GeomFromText('POINT(1 1)'))",
            "INSERT INTO app.t (a) SELECT MAX(a) + 1 FROM app.t FOR UPDATE",
            "INSERT INTO app.t (a) SELECT a FROM app.u UNION ALL SELECT a FROM app.v",
            "INSERT INTO app.t (id, r) SELECT id, ROW_NUMBER() OVER (ORDER BY id) FROM app.u",
            "INSERT INTO app.t (a) SELECT a FROM app.u WHERE a IN (1, 2) GROUP BY a HAVING COUNT(*) > 1",
            "INSERT INTO app.t SELECT * FROM app.u WHERE NOT EXISTS (SELECT 1 FROM app.t AS z WHERE z.id = app.u.id)",
            "REPLACE INTO app.t (a, b) SELECT a, b FROM app.u WHERE b LIKE 'x%'",
            "UPDATE app.t SET a = a + 1 WHERE id IN (1, 2) ORDER BY id LIMIT 10",
            "UPDATE LOW_PRIORITY IGNORE app.t SET a = 1",
            "UPDATE app.t AS x JOIN app.u AS y ON x.id = y.id SET x.a = y.b",
            "UPDATE app.t t1, app.u t2 SET t1.a = t2.a WHERE t1.id = t2.id",
            "UPDATE app.t SET a = (SELECT COUNT(*) FROM app.u WHERE app.u.t_id = app.t.id)",
            "UPDATE app.t SET j = JSON_SET(j, '$.a', 1) WHERE JSON_EXTRACT(j, '$.b') = 2",
            "UPDATE app.t SET a = CASE WHEN b > 1 THEN 1 ELSE 0 END",
            "UPDATE app.t SET a = 1 WHERE id = 1 AND (b = 'x' OR c IS NULL)",
            "UPDATE app.t SET a = 'table app.x'",
            "UPDATE app.t SET a = 1 WHERE id = 1 -- a comment",
            "/* app */ UPDATE app.t SET a = 1",
            "DELETE FROM app.t WHERE id IN (SELECT id FROM (SELECT id FROM app.t WHERE a > 1) AS d)",
            "DELETE app.t FROM app.t LEFT JOIN app.u ON app.t.id = app.u.id WHERE app.u.id IS NULL",
            "DELETE FROM app.t WHERE created_at < NOW() - INTERVAL 30 DAY",
            "DELETE FROM app.t ORDER BY id LIMIT 100",
            "DELETE FROM app.t WHERE a REGEXP '^x'",
        ];
        assert_name_only_app(rows);
    }

    /// A multi-table DELETE's targets name tables or aliases of its table
    /// list (the server refuses any other, 1109): an alias there, defined
    /// only later, uses no default database, in both forms; the table
    /// list of `DELETE FROM ... USING` is read as one. Before: the alias
    /// read as a table of the default database, and a stream whose source
    /// ran it under an excluded default database stopped.
    #[test]
    fn a_multi_table_deletes_targets_name_its_own_tables() {
        assert_name_only_app(&[
            "DELETE x FROM app.t AS x JOIN app.u AS y ON x.id = y.id WHERE y.b IS NULL",
            "DELETE x, y FROM app.t x, app.u y WHERE x.id = y.id",
            "DELETE LOW_PRIORITY QUICK IGNORE x FROM app.t AS x WHERE x.a > 1",
            "DELETE x.* FROM app.t AS x LEFT JOIN app.u AS y USING (id) WHERE y.id IS NULL",
            "DELETE FROM x USING app.t AS x JOIN app.u AS y ON x.id = y.id",
            "DELETE FROM x, y USING app.t AS x, app.u AS y WHERE x.id = y.id",
            "DELETE FROM x.* USING app.t x WHERE x.id IN (SELECT id FROM app.v JOIN app.w USING (id))",
            "DELETE `event` FROM app.t AS `event` WHERE `event`.id = 1",
            "DELETE event FROM app.t AS event WHERE event.id = 1",
            "DELETE FROM status USING app.t AS status WHERE status.id = 1",
        ]);
        for (sql, uses) in [
            // The table list's own unqualified names still use it.
            ("DELETE t FROM t JOIN app.u ON t.id = app.u.id", true),
            ("DELETE FROM t USING t JOIN app.u ON t.id = app.u.id", true),
            ("DELETE FROM x USING app.t AS x JOIN u ON x.id = u.id", true),
            // A single-table DELETE's table is a table.
            ("DELETE FROM t WHERE id = 1", true),
            (
                "DELETE FROM t WHERE id IN (SELECT id FROM app.u JOIN app.v USING (id))",
                true,
            ),
            (
                "DELETE FROM app.t WHERE id IN (SELECT a.id FROM app.u a JOIN app.v b USING (id))",
                false,
            ),
            // An index type is no table list.
            ("CREATE INDEX i ON app.t (a) USING BTREE", false),
        ] {
            let n = read(sql.as_bytes(), Dialect::default()).expect(sql);
            assert_eq!(n.uses_default, uses, "{sql}");
            assert_eq!(
                n.databases(),
                if sql.contains("app.") {
                    vec!["app".to_string()]
                } else {
                    vec![]
                },
                "{sql}"
            );
        }
        // A comma after a join's ON or USING (c) opens the next table of
        // the list, as MariaDB reads it; ON DUPLICATE KEY UPDATE's commas
        // separate assignments.
        assert_name_only_app(&[
            "SELECT 1 FROM app.a JOIN app.b ON a.x = b.x, app.t",
            "INSERT INTO app.r SELECT a.x FROM app.a LEFT JOIN app.b ON a.x = b.x AND b.y IN (1, 2), app.c AS c WHERE c.z = a.x",
            "UPDATE app.a JOIN app.b USING (id), app.c SET a.v = c.v WHERE c.id = a.id",
            "DELETE FROM x USING app.t AS x JOIN app.u AS y ON y.a = x.a, app.u AS z WHERE z.a = y.a",
            "DELETE FROM x USING (app.t AS x JOIN app.u AS y ON y.a = x.a)",
            "INSERT INTO app.t (a, b) SELECT a, b FROM app.u JOIN app.v ON u.a = v.a ON DUPLICATE KEY UPDATE a = v.a, b = 2",
        ]);
        assert_uses_default(&[
            (
                "INSERT INTO app.t SELECT * FROM app.u JOIN app.v ON u.a = v.a, w",
                true,
            ),
            (
                "INSERT INTO app.t SELECT u.a FROM app.u ON DUPLICATE KEY UPDATE a = 1, b = 2",
                false,
            ),
            ("UPDATE app.a JOIN app.b USING (id), c SET a.v = 1", true),
        ]);
        // A qualified name in USING's table list is a database.
        let n = read(
            b"DELETE FROM x USING app.t AS x JOIN other.u AS y ON x.id = y.id",
            Dialect::default(),
        )
        .expect("read");
        assert_eq!(n.databases(), ["app", "other"]);
    }

    /// `ALTER DATABASE` names its database, or none (then it alters the
    /// default one), as the server parses it.
    #[test]
    fn an_alter_database_names_its_database_or_the_default() {
        let rows: &[(&str, &[&str], bool)] = &[
            ("ALTER DATABASE CHARACTER SET latin1", &[], true),
            ("ALTER SCHEMA COMMENT 'c'", &[], true),
            ("ALTER DATABASE app COLLATE utf8mb4_bin", &["app"], false),
            ("ALTER DATABASE comment COMMENT 'x'", &["comment"], false),
            ("CREATE DATABASE security", &["security"], false),
            ("DROP DATABASE IF EXISTS language", &["language"], false),
            (
                "ALTER DATABASE `default` DEFAULT COLLATE utf8mb4_bin",
                &["default"],
                false,
            ),
            ("CREATE DATABASE IF NOT EXISTS app", &["app"], false),
            ("DROP SCHEMA app", &["app"], false),
        ];
        for (sql, dbs, uses) in rows {
            let n = read(sql.as_bytes(), Dialect::default()).expect(sql);
            assert!(n.database_statement, "{sql}");
            assert_eq!(
                (n.databases(), n.uses_default),
                (dbs.iter().map(|d| d.to_string()).collect::<Vec<_>>(), *uses),
                "{sql}"
            );
        }
    }

    #[test]
    fn an_unsure_reading_is_an_error() {
        // `app.t` after a comma join that follows an ON: the reader sees
        // an expression, and `app` is introduced nowhere.
        // `app.c` in a join's condition: no table `app` is introduced.
        assert!(unsure("SELECT 1 FROM a JOIN b ON a.x = app.c"));
        assert!(unsure("UPDATE t SET v = q.w"));
        // A MERGE table's UNION=(...) is no place this reader knows.
        assert!(unsure(
            "CREATE TABLE app.m (id INT, v INT) ENGINE=MERGE UNION=(app.t, other.w)"
        ));
        assert!(unsure("FROBNICATE app.t"));
        assert!(read(br#"INSERT INTO t VALUES ("a")"#, Dialect::default()).is_ok());
    }

    /// Whether a statement may use its default database: any table,
    /// view, routine or sequence name standing unqualified, a keyword
    /// standing as one, `DATABASE()`; never a column, alias or builtin.
    #[test]
    fn the_default_database_is_used_only_by_an_unqualified_name() {
        assert_uses_default(&[
            ("INSERT INTO app.t VALUES (1)", false),
            (
                "INSERT INTO app.t (a, b) SELECT x.a, x.b FROM app.s AS x",
                false,
            ),
            (
                "UPDATE app.t SET v = UPPER(v) WHERE id IN (SELECT id FROM app.u)",
                false,
            ),
            ("DELETE FROM app.t WHERE id = 1", false),
            ("REPLACE INTO app.t SET id = 1, v = NOW()", false),
            (
                "CREATE TABLE app.t (id INT, p INT REFERENCES app.p (id))",
                false,
            ),
            ("CREATE DATABASE other", false),
            ("TRUNCATE TABLE app.t", false),
            // A comma after ALTER|CREATE TABLE's one name separates its
            // clauses or options.
            ("ALTER TABLE app.t ADD INDEX (a), ADD INDEX (b)", false),
            (
                "ALTER TABLE app.t ADD INDEX (a), ADD CONSTRAINT CHECK (a >= 0)",
                false,
            ),
            (
                "ALTER ONLINE TABLE app.t ADD c INT, DROP d, ALGORITHM=INPLACE",
                false,
            ),
            (
                "CREATE TABLE app.t (id INT) ENGINE=InnoDB, DEFAULT CHARSET=utf8mb4",
                false,
            ),
            ("DROP TABLE app.t, u", true),
            ("LOCK TABLES app.t READ, u WRITE", true),
            (
                "CREATE PROCEDURE app.p() BEGIN DROP TABLE app.x, y; END",
                true,
            ),
            ("INSERT INTO t VALUES (1)", true),
            ("INSERT INTO app.t SELECT * FROM s", true),
            (
                "INSERT INTO app.t SELECT * FROM app.s JOIN u USING (id)",
                true,
            ),
            ("INSERT INTO app.t SELECT * FROM app.s, u", true),
            ("INSERT INTO app.t VALUES (DATABASE())", true),
            ("INSERT INTO app.t VALUES (SCHEMA())", true),
            ("INSERT INTO app.t VALUES (NEXTVAL(sq))", true),
            ("INSERT INTO app.t SELECT * FROM event", true),
            ("CALL p()", true),
            ("CREATE TABLE app.t (p INT REFERENCES p (id))", true),
            (
                "CREATE TRIGGER app.tr BEFORE INSERT ON t FOR EACH ROW SET NEW.v = 1",
                true,
            ),
            ("CREATE VIEW v AS SELECT 1", true),
            ("GRANT SELECT ON * TO u", true),
            // ALTER DATABASE without a name alters the default one.
            ("ALTER DATABASE CHARACTER SET latin1", true),
            ("ALTER DATABASE DEFAULT COLLATE utf8mb4_bin", true),
            ("ALTER SCHEMA COLLATE utf8mb4_bin", true),
            ("ALTER SCHEMA COMMENT 'c'", true),
            ("ALTER SCHEMA COMMENT = 'c'", true),
            ("ALTER DATABASE app CHARACTER SET latin1", false),
            ("ALTER DATABASE comment COMMENT 'x'", false),
            ("ALTER DATABASE `character` CHARACTER SET latin1", false),
            ("CREATE DATABASE app CHARACTER SET latin1", false),
            // REVOKE's FROM names accounts, however quoted.
            ("REVOKE SELECT ON app.t FROM u", false),
            ("REVOKE SELECT ON app.t FROM `u`@`%`, v@localhost", false),
            (
                "REVOKE ALL PRIVILEGES, GRANT OPTION FROM u@localhost",
                false,
            ),
            ("REVOKE INSERT ON t FROM u", true),
            ("REVOKE r FROM u", false),
            ("GRANT SELECT ON app.t TO `u`@`%`", false),
        ]);
    }

    const ANSI: Dialect = Dialect {
        ansi_quotes: true,
        no_backslash_escapes: false,
        charset: Multibyte::AsciiSafe,
    };

    /// The issue's examples: under ANSI_QUOTES a double-quoted name is a
    /// name; under NO_BACKSLASH_ESCAPES `'C:\dir\'` ends at its quote;
    /// in sjis 0x95 0x5C is one character. None of them is rewritten
    /// inside a literal.
    #[test]
    fn every_dialect_renames_names_only() {
        let nbe = Dialect {
            no_backslash_escapes: true,
            ..Dialect::default()
        };
        let sjis = Dialect {
            charset: Multibyte::Sjis,
            ..Dialect::default()
        };
        let cases: Vec<(Dialect, &[u8], &[u8])> = vec![
            (
                ANSI,
                br#"INSERT INTO "app"."t" VALUES ("x")"#,
                br#"INSERT INTO `s1`."t" VALUES ("x")"#,
            ),
            (
                nbe,
                br"INSERT INTO app.t VALUES ('C:\dir'), (' app.t.s2 1')",
                br"INSERT INTO `s1`.t VALUES ('C:\dir'), (' app.t.s2 1')",
            ),
            (
                sjis,
                b"INSERT INTO app.t VALUES ('\x95\\'), (' app.t 1')",
                b"INSERT INTO `s1`.t VALUES ('\x95\\'), (' app.t 1')",
            ),
        ];
        for (d, sql, want) in cases {
            let n =
                read(sql, d).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(sql)));
            assert_eq!(
                n.databases(),
                vec!["app".to_string()],
                "{}",
                String::from_utf8_lossy(sql)
            );
            let out = rename(sql, &n, |db| (db == "app").then(|| "s1".to_string()));
            assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(want));
        }
    }

    #[test]
    fn renames_touch_only_database_tokens() {
        let r = |sql: &str, from: &str, to: &str| {
            let n = read(sql.as_bytes(), Dialect::default()).expect("read");
            let one = |d: &str| (d == from).then(|| to.to_string());
            String::from_utf8(rename(sql.as_bytes(), &n, one)).expect("utf8")
        };
        assert_eq!(
            r("CREATE DATABASE app", "app", "app_eu"),
            "CREATE DATABASE `app_eu`"
        );
        assert_eq!(
            r(
                "create table app.t like app2.t /* app.t */ -- 'app'",
                "app",
                "x"
            ),
            "create table `x`.t like app2.t /* app.t */ -- 'app'"
        );
        assert_eq!(
            r("rename table `app`.a to `app`.b", "app", "z"),
            "rename table `z`.a to `z`.b"
        );
        assert_eq!(
            r(
                "UPDATE app.t app SET app.v = 1 WHERE app.id IN (SELECT id FROM app.u)",
                "app",
                "s1"
            ),
            "UPDATE `s1`.t app SET app.v = 1 WHERE app.id IN (SELECT id FROM `s1`.u)"
        );
        assert_eq!(
            r("CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW INSERT INTO app.a VALUES (NEW.id)", "app", "s1"),
            "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW INSERT INTO `s1`.a VALUES (NEW.id)"
        );
    }

    fn dialect() -> impl Strategy<Value = Dialect> {
        (any::<bool>(), any::<bool>(), 0usize..5).prop_map(|(nbe, ansi, cs)| Dialect {
            no_backslash_escapes: nbe,
            ansi_quotes: ansi,
            charset: [
                Multibyte::AsciiSafe,
                Multibyte::Big5,
                Multibyte::Gbk,
                Multibyte::Gb18030,
                Multibyte::Sjis,
            ][cs],
        })
    }

    /// Statement-ish text with literals that hold what breaks a naive
    /// reader: names that look like `app.t`, backslashes before quotes,
    /// multi-byte characters whose second byte is 0x5C or 0x60.
    fn tricky() -> impl Strategy<Value = Vec<u8>> {
        let piece = proptest::sample::select(vec![
            b"INSERT INTO app.t VALUES ".to_vec(),
            b"SELECT * FROM app.u WHERE x = ".to_vec(),
            b"'app.t'".to_vec(),
            b"'C:\\dir\\'".to_vec(),
            b"'it''s app.t'".to_vec(),
            b"'\x95\\'".to_vec(),
            b"'\xa4\\ app.t'".to_vec(),
            b"`\x95\x60`".to_vec(),
            b"\"app.t\"".to_vec(),
            b" /* app.t */ ".to_vec(),
            b"(".to_vec(),
            b")".to_vec(),
            b", ".to_vec(),
            b" app.t ".to_vec(),
        ]);
        proptest::collection::vec(piece, 0..12).prop_map(|v| v.concat())
    }

    proptest! {
        /// For any text and dialect, a rename changes database names
        /// only: every literal is the same bytes before and after.
        #[test]
        fn renames_never_touch_a_literal(sql in tricky(), d in dialect()) {
            if let Ok(n) = read(&sql, d) {
                let out = rename(&sql, &n, |db| (db == "app").then(|| "zz".to_string()));
                let lits = |b: &[u8]| -> Vec<Vec<u8>> {
                    sqlfleet_dump::lex::lex_in(b, d)
                        .toks
                        .into_iter()
                        .filter(|t| t.0 == Tok::Literal)
                        .map(|t| b[t.1].to_vec())
                        .collect()
                };
                prop_assert_eq!(lits(&sql), lits(&out));
            }
        }

        #[test]
        fn any_text_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(n) = read(&b, Dialect::default()) {
                let r = rename(&b, &n, |d| (d == "a").then(|| "b".to_string()));
                if !n.databases().iter().any(|d| d == "a") {
                    prop_assert_eq!(r, b.clone());
                }
            }
            let _ = read(&b, ANSI);
        }

        #[test]
        fn sql_like_text_never_panics(words in proptest::collection::vec(
            proptest::sample::select(vec!["SELECT", "FROM", "a", ".", "b", "(", ")", ",", "ON",
                "JOIN", "UPDATE", "SET", "=", "INTO", "INSERT", "`x`", ";", "BEGIN", "END",
                "CREATE", "TABLE", "LIKE", "TRIGGER", "NEW", "*", "NEXTVAL", "1.5", "'s'",
                "DELETE", "USING", "AS", "WHERE", "QUICK", "WITH", "RECURSIVE", "DUAL", "FOR"]),
            0..40)) {
            let sql = words.join(" ");
            if let Ok(n) = read(sql.as_bytes(), Dialect::default()) {
                let out = rename(sql.as_bytes(), &n, |d| (d == "a").then(|| "zz".to_string()));
                // Only database tokens change: the text outside them stays.
                let kept = String::from_utf8_lossy(&out).replace("`zz`", "a");
                prop_assert_eq!(kept, sql);
            }
        }
    }
}
/// How long the reader takes on the big statements applications send as
/// text: a bulk UPDATE with a CASE of 20,000 WHEN ... THEN (each THEN a
/// place a routine body's statement may start), and a DELETE of 50,000
/// ids under a WITH. A measurement, not a claim (no timing is asserted):
/// `cargo test -p sqlfleet-replicate --release --lib read_time -- --ignored --nocapture`.
#[cfg(test)]
mod read_time {
    use super::{read, Dialect};

    #[test]
    #[ignore]
    fn the_time_to_read_big_statements() {
        let mut case = String::from("UPDATE app.t SET v = CASE id");
        for i in 0..20_000 {
            case.push_str(&format!(" WHEN {i} THEN 'v{i}'"));
        }
        case.push_str(" END WHERE id IN (SELECT id FROM app.u)");
        let mut ids = String::from("WITH c AS (SELECT 1) DELETE FROM app.t WHERE id IN (");
        for i in 0..50_000 {
            ids.push_str(&format!("{i}, "));
        }
        ids.push_str("0)");
        for sql in [case, ids] {
            let t0 = std::time::Instant::now();
            let n = read(sql.as_bytes(), Dialect::default()).expect("read");
            eprintln!(
                "{} bytes: read in {:?}, names {:?}",
                sql.len(),
                t0.elapsed(),
                n.databases()
            );
            assert_eq!(n.databases(), ["app"]);
        }
    }
}
