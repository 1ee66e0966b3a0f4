//! KILL as a text names it: the target the relay maps to its own clients
//! (`KILL [QUERY|CONNECTION] <number>`, `KILL ... USER <account>`), and
//! every other way a text can make the server run a KILL, whose target
//! only the server reads: an expression or `QUERY ID` after KILL, a KILL
//! among several statements or inside a compound statement or a routine's
//! body, and dynamic SQL (`EXECUTE IMMEDIATE`, `PREPARE ... FROM`).
//!
//! The server lets an account kill its own connections without any
//! privilege. With one shared account every client's connections are that
//! account's, so such a text from one client could end another's session:
//! the session refuses it there. `KILL CONNECTION_ID()` is the client's
//! own session. Dynamic SQL run now is read when its text is
//! one plain string (read twice: with and without backslash escapes, as
//! the session's sql_mode may take it), and a string that is not plain,
//! or nested more than four deep, is unread: refused there unless the
//! config lets it run (`shared_dynamic_sql`; fail closed) — but for a
//! text that is one `PREPARE s FROM @v` or `EXECUTE IMMEDIATE @v`, whose
//! variable's value the session reads first and checks as a text. A
//! routine's, trigger's or event's body is read the same way: it runs
//! later, as the definer or the caller — with one shared account, the
//! account every client shares either way.

use std::ops::Range;

use sqlfleet_dump::lex::{lex, Tok};

use super::account_targets::{add_account_statement, starts_account_statement, AccountTargets};
use super::literal::unquote;
use super::{account_name, runs_statements, word};

/// Whom a KILL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillTarget {
    /// A thread id (a relay id, or a server thread id).
    Id(u64),
    /// `USER name[@host]`: every connection of that account (the host
    /// pattern, when given, as written).
    User(String, Option<String>),
    /// `CONNECTION_ID()`: the client's own session, whatever id it holds.
    Own,
}

/// The target of `KILL [HARD|SOFT] [CONNECTION|QUERY] <thread id>` or
/// `... USER <account>` (after KILL): (query only, whom). `KILL QUERY ID`
/// names a query, not a thread; an expression is the server's to read:
/// both are None.
pub(super) fn kill_target(sql: &[u8], t: &[(Tok, Range<usize>)]) -> Option<(bool, KillTarget)> {
    let mut i = 0;
    if matches!(word(t.first()), Some("HARD") | Some("SOFT")) {
        i += 1;
    }
    let mut query = false;
    match word(t.get(i)) {
        Some("QUERY") => {
            query = true;
            i += 1;
        }
        Some("CONNECTION") => i += 1,
        _ => {}
    }
    match t.get(i) {
        Some((Tok::Literal, r)) if t.len() == i + 1 => {
            let id = std::str::from_utf8(&sql[r.clone()]).ok()?.parse().ok()?;
            Some((query, KillTarget::Id(id)))
        }
        Some((Tok::Word(w), _))
            if w == "CONNECTION_ID"
                && t.len() == i + 3
                && t[i + 1].0.is_punct(b'(')
                && t[i + 2].0.is_punct(b')') =>
        {
            Some((query, KillTarget::Own))
        }
        Some((Tok::Word(w), _)) if w == "USER" => {
            let from = t.get(i + 1)?.1.start;
            let to = t.last()?.1.end;
            let (user, host) = account_name(sql.get(from..to)?)?;
            Some((query, KillTarget::User(user, host)))
        }
        _ => None,
    }
}

/// How deep dynamic SQL inside dynamic SQL is read before it counts as
/// unread.
const MAX_DEPTH: u8 = 4;

/// What the relay can tell of the KILLs a text may run, least sure last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Unread {
    /// None, or one the relay maps (a lone `KILL <number>`, `KILL ...
    /// USER`, `KILL CONNECTION_ID()`).
    #[default]
    No,
    /// Dynamic SQL run now from a text that is not one plain string (a
    /// variable, an expression): what it runs is not there to read.
    Dynamic,
    /// A KILL whose target only the server reads.
    Kill,
}

/// What the relay can tell of the KILLs the statements (`;`-separated,
/// each after any `SET STATEMENT ... FOR`) may run (see the module doc),
/// and, for a text that is one `PREPARE <name> FROM @v` or `EXECUTE
/// IMMEDIATE @v [USING ...]`, the variable as written: its value, read
/// in the session just before, is the text that runs (a session's user
/// variables are its own, so nothing changes it in between).
///
/// What else it finds is added to `found`.
pub(super) fn unread_kill(
    sql: &[u8],
    stmts: &[&[(Tok, Range<usize>)]],
    found: &mut Found,
) -> (Unread, Option<String>) {
    if let [t] = stmts {
        if let Some([(Tok::UserVar, r), rest @ ..]) = dynamic_source(t, 0) {
            if rest.is_empty() || rest[0].0.is_word("USING") {
                let rest_of_text = &t[1..];
                let others = unread_at(sql, &[rest_of_text], 0, found);
                let var = String::from_utf8_lossy(&sql[r.clone()]).into_owned();
                if others == Unread::No {
                    // (Its value is read only with a shared account.)
                    found.unreadable();
                    return (Unread::No, Some(var));
                }
            }
        }
    }
    (unread_at(sql, stmts, 0, found), None)
}

/// What the KILL pass finds besides, where the statement reader does not
/// look (inside compound statements, stored bodies, dynamic SQL's
/// strings).
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Account statements the text runs there — inside a compound
    /// statement run now or a routine's, trigger's or event's body (from
    /// any of their tokens but the SET clause of an UPDATE, INSERT or
    /// REPLACE: a doubt refuses), or in dynamic SQL's string at any depth
    /// (`account_targets.rs`) — added to what the statement reader found.
    pub accounts: Option<AccountTargets>,
    /// A `SET ROLE` anywhere (a compound statement, a body, a string of
    /// dynamic SQL at any depth), or text the pass cannot read (dynamic
    /// SQL's, or what follows a KILL it stops at): the session's role may
    /// change, and the server's COM_RESET_CONNECTION keeps it.
    pub sets_role: bool,
    /// `profiling` or `optimizer_trace` named anywhere (a variable, in
    /// dynamic SQL's string), or text the pass cannot read: the session
    /// may keep traces of its
    /// statements' texts on the connection — a profile history, which
    /// the server's COM_RESET_CONNECTION keeps too, and the optimizer's
    /// trace, which stays after tracing is turned off: SHOW PROFILES and
    /// information_schema.OPTIMIZER_TRACE list them to the next session
    /// there.
    pub traces: bool,
    /// Account statements read inside compound statements and bodies of
    /// this text so far (each read scans the rest of its statement).
    inner_account_reads: u16,
}

/// How many account statements inside compound statements and bodies of
/// one text are read; past it, a doubt (each read scans the rest of its
/// statement: unbounded, a long text of GRANT or SET PASSWORD words cost
/// seconds of an event loop's time).
const MAX_INNER_ACCOUNT_READS: u16 = 64;

impl Found {
    /// Nothing found yet besides what the statement reader found
    /// (`accounts`).
    pub(super) fn new(accounts: Option<AccountTargets>) -> Found {
        Found {
            accounts,
            ..Default::default()
        }
    }

    /// A KILL whose target only the server reads: the pass stops there,
    /// before the rest of the text, so what else it may do counts as done
    /// (per-user, such a text runs).
    fn unread_kill(&mut self) -> Unread {
        self.unreadable();
        Unread::Kill
    }

    /// Text the pass cannot read runs: it may set the role or trace.
    fn unreadable(&mut self) {
        self.sets_role = true;
        self.traces = true;
    }

    /// An account statement that starts inside a compound statement or a
    /// body (`t`, to the end of its `;`-separated part): read, up to
    /// `MAX_INNER_ACCOUNT_READS` per text; past them counted as acting on
    /// the session's own account (a doubt refuses).
    fn inner_account_statement(&mut self, sql: &[u8], t: &[(Tok, Range<usize>)]) {
        if self.inner_account_reads < MAX_INNER_ACCOUNT_READS {
            self.inner_account_reads += 1;
            add_account_statement(sql, t, &mut self.accounts);
        } else {
            self.accounts.get_or_insert_with(Default::default).own = true;
        }
    }
}

/// Whether the text is a compound statement run as it is sent (`BEGIN NOT
/// ATOMIC`, `IF`, `CASE`, `LOOP`, `WHILE`, `REPEAT`, `FOR`, labelled or
/// not): any token of it may start one of its statements (after THEN, a
/// label, a handler's condition...), so each is read as one.
fn compound(stmts: &[&[(Tok, Range<usize>)]]) -> bool {
    stmts.first().is_some_and(|t| {
        runs_statements(t) && !matches!(word(t.first()), Some("CALL") | Some("EXECUTE"))
    })
}

fn unread_at(sql: &[u8], stmts: &[&[(Tok, Range<usize>)]], depth: u8, found: &mut Found) -> Unread {
    let kills = |t: &&[(Tok, Range<usize>)]| word(t.first()) == Some("KILL");
    if stmts.len() > 1 && stmts.iter().any(kills) {
        return found.unread_kill();
    }
    // A compound statement runs its statements now; a routine's,
    // trigger's or event's body runs them later, as the account (the
    // definer's or the caller's: with one shared account, that account
    // either way). Any of their tokens may start one. (Each statement's
    // first token is the statement reader's; in a string of dynamic SQL,
    // `dynamic`'s.)
    let reads_all = compound(stmts) || stmts.first().is_some_and(|t| defines_body(t));
    let exec_comment = reads_all && has_executable_comment(sql);
    let mut most = Unread::No;
    for t in stmts {
        if kills(t) && kill_target(sql, &t[1..]).is_none() {
            return found.unread_kill();
        }
        let mut clauses = SetClauses::new(exec_comment);
        for (i, (k, _)) in t.iter().enumerate() {
            // (After a dot it is a column's name: `t.kill`.)
            let after_dot = i > 0 && t[i - 1].0.is_punct(b'.');
            if i > 0 && k.is_word("KILL") && !after_dot {
                return found.unread_kill();
            }
            if k.is_word("SET") && !after_dot && word(t.get(i + 1)) == Some("ROLE") {
                found.sets_role = true;
            }
            if !after_dot && names_a_trace(k) {
                found.traces = true;
            }
            if reads_all && i > 0 && !clauses.is_set_clause(k) && starts_account_statement(&t[i..])
            {
                found.inner_account_statement(sql, &t[i..]);
            }
            clauses.read(k, after_dot);
            if let Some(src) = dynamic_source(t, i) {
                most = most.max(dynamic(sql, src, depth, found));
            }
        }
    }
    most
}

/// Whether a SET, read forward inside a compound statement or a stored
/// body, is the SET clause of an UPDATE, INSERT or REPLACE (`UPDATE users
/// SET password = ...`) rather than a statement of its own: the nearest
/// of those words before it (not after a dot) comes after anything after
/// which a statement may start there (BEGIN, THEN, ELSE, DO, LOOP, REPEAT,
/// a handler's or trigger's FOR, a label's colon). A doubt reads it as a
/// statement. Never in a text with an executable comment, whose code the
/// lexer reads even where the server skips it (`/*!99999 UPDATE t */ SET
/// PASSWORD ...`). One pass: every SET of a long text was once read back
/// to its statement's start.
struct SetClauses {
    exec_comment: bool,
    /// The nearest such word so far is an UPDATE, INSERT or REPLACE.
    open: bool,
}

impl SetClauses {
    /// At the start of a `;`-separated part.
    fn new(exec_comment: bool) -> SetClauses {
        SetClauses {
            exec_comment,
            open: false,
        }
    }

    /// Whether `k`, the next token, is such a SET clause.
    fn is_set_clause(&self, k: &Tok) -> bool {
        self.open && !self.exec_comment && k.is_word("SET")
    }

    /// After `k` was read.
    fn read(&mut self, k: &Tok, after_dot: bool) {
        match k {
            Tok::Punct(b':') => self.open = false,
            Tok::Word(w) if !after_dot => match w.as_str() {
                "UPDATE" | "INSERT" | "REPLACE" => self.open = true,
                "BEGIN" | "THEN" | "ELSE" | "DO" | "LOOP" | "REPEAT" | "FOR" => self.open = false,
                _ => {}
            },
            _ => {}
        }
    }
}

/// Whether `sql` holds an executable comment (`/*!`, `/*M!`).
fn has_executable_comment(sql: &[u8]) -> bool {
    sql.windows(3).any(|w| w == b"/*!" || w == b"/*M")
}

/// `CREATE [OR REPLACE] [DEFINER = ...] [AGGREGATE] PROCEDURE | FUNCTION |
/// TRIGGER | EVENT | PACKAGE ...` or `ALTER EVENT`: its body (`;` and
/// all, when sent with DELIMITER) is stored, not run. The kind is the
/// first of those words before any parenthesis.
fn defines_body(t: &[(Tok, Range<usize>)]) -> bool {
    let kinds = ["PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"];
    match word(t.first()) {
        Some("CREATE") => t
            .iter()
            .take_while(|(k, _)| !k.is_punct(b'('))
            .any(|(k, _)| matches!(k, Tok::Word(w) if kinds.contains(&w.as_str()))),
        Some("ALTER") => word(t.get(1)) == Some("EVENT"),
        _ => false,
    }
}

/// The tokens that give dynamic SQL its text, when `t[i]` starts
/// `EXECUTE IMMEDIATE <text>` or `PREPARE <name> FROM <text>`.
fn dynamic_source(t: &[(Tok, Range<usize>)], i: usize) -> Option<&[(Tok, Range<usize>)]> {
    let at = |k: usize| word(t.get(k));
    match at(i)? {
        "EXECUTE" if at(i + 1) == Some("IMMEDIATE") => t.get(i + 2..),
        "PREPARE" if at(i + 2) == Some("FROM") => t.get(i + 3..),
        _ => None,
    }
}

/// What dynamic SQL from `src` may kill: Dynamic when its text is not
/// one plain string (followed by nothing but `USING ...`) or is nested too
/// deep; else what the string, read with or without backslash escapes,
/// holds (any KILL in it is the server's to run).
fn dynamic(sql: &[u8], src: &[(Tok, Range<usize>)], depth: u8, found: &mut Found) -> Unread {
    let plain = match src {
        [(Tok::Literal, r), rest @ ..] if rest.is_empty() || rest[0].0.is_word("USING") => {
            sql.get(r.clone()).filter(|raw| {
                raw.len() >= 2 && matches!(raw[0], b'\'' | b'"') && raw.last() == Some(&raw[0])
            })
        }
        _ => None,
    };
    let Some(raw) = plain.filter(|_| depth < MAX_DEPTH) else {
        found.unreadable();
        return Unread::Dynamic;
    };
    let quote = raw[0];
    let inner = &raw[1..raw.len() - 1];
    [true, false]
        .into_iter()
        .map(|backslashes| {
            let text = unquote(inner, quote, backslashes);
            let lexed = lex(&text);
            let stmts: Vec<_> = lexed
                .toks
                .split(|(t, _)| t.is_punct(b';'))
                .filter(|s| !s.is_empty())
                .collect();
            for t in &stmts {
                add_account_statement(&text, t, &mut found.accounts);
            }
            if stmts.iter().any(|t| word(t.first()) == Some("KILL")) {
                found.unread_kill()
            } else {
                unread_at(&text, &stmts, depth + 1, found)
            }
        })
        .max()
        .unwrap_or_default()
}

/// Whether a text may hold a KILL, dynamic SQL or an account statement
/// (a cheap test before lexing, for session mode: any of the words KILL,
/// EXECUTE, PREPARE, PASSWORD, ROLE, USER, GRANT, REVOKE in any case,
/// anywhere; account statements all hold one of the last five).
pub fn may_touch_the_account(sql: &[u8]) -> bool {
    holds_any(
        sql,
        &[
            b"kill",
            b"execute",
            b"prepare",
            b"password",
            b"role",
            b"user",
            b"grant",
            b"revoke",
        ],
    )
}

/// Whether a text may leave on its connection what must not reach
/// another client — the session's role, traces of its statements (a
/// cheap test before lexing, for session mode: ROLE, PROFILING,
/// OPTIMIZER_TRACE, or dynamic SQL's EXECUTE or PREPARE, in any case,
/// anywhere).
pub fn may_set_what_a_reset_keeps(sql: &[u8]) -> bool {
    holds_any(
        sql,
        &[
            b"role",
            b"profiling",
            b"optimizer_trace",
            b"execute",
            b"prepare",
        ],
    )
}

/// The variables that keep traces of a session's statements.
const TRACES: [&str; 2] = ["profiling", "optimizer_trace"];

/// `profiling` or `optimizer_trace` as a word, a system variable or a
/// quoted name.
fn names_a_trace(k: &Tok) -> bool {
    match k {
        Tok::Word(w) => TRACES.iter().any(|t| w.eq_ignore_ascii_case(t)),
        Tok::SysVar(_, name) => TRACES.contains(&name.as_str()),
        Tok::Quoted(q) => TRACES.iter().any(|t| q.eq_ignore_ascii_case(t)),
        _ => false,
    }
}

/// Whether `SET STATEMENT` names a variable that keeps traces.
pub(super) fn traces_named(vars: &[String]) -> bool {
    vars.iter().any(|v| TRACES.contains(&v.as_str()))
}

/// Whether `sql` holds any of `words` (lower case), in any case.
fn holds_any(sql: &[u8], words: &[&[u8]]) -> bool {
    (0..sql.len()).any(|i| {
        let first = sql[i] | 0x20;
        words.iter().any(|w| {
            w[0] == first
                && sql
                    .get(i..i + w.len())
                    .is_some_and(|s| s.eq_ignore_ascii_case(w))
        })
    })
}
