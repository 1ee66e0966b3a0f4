//! The transaction a client has open, as a value: the statements it sent
//! since the transaction began and the digest of each reply it was given
//! (`protocol/digest.rs`), so that when the server under it dies the
//! transaction can run again on another and be shown to give the same
//! answers (transaction replay, `replay.rs` does the I/O).
//!
//! The rules live here, pure, with a table row each in `journal/tests.rs`:
//! what may be recorded (text statements, nothing on the connection the
//! relay cannot bring elsewhere), how much (`max_bytes`), and what a lost
//! connection means for the statement it interrupted ([`OnLoss`]): run it
//! again where nothing of the client's was lost (a BEGIN, a plain read, a
//! write under autocommit = 0 that cannot have committed), replay the
//! transaction and then run it, answer a ROLLBACK (the server rolls back
//! what a lost connection leaves), or give up — a COMMIT whose outcome is
//! unknown, a statement that commits implicitly, a transaction the
//! journal could not follow — and let the client see the lost connection
//! it would see directly.

use std::collections::BTreeSet;

use crate::config::Mode;
use crate::protocol::sql::{self, Pin};

/// One statement of the open transaction: what was sent, what came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The command packet as sent to the server (COM_QUERY and its text).
    pub payload: Vec<u8>,
    pub digest: u128,
    /// The first key the statement generated (0: none): a replay asks
    /// for the same one (`SET insert_id`), as a statement-based binlog
    /// does, since a rolled-back transaction's keys are not handed out
    /// again and another server hands out others.
    pub insert_id: u64,
}

/// What a statement is, for recording and for a lost connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stmt {
    /// BEGIN, START TRANSACTION.
    Begin,
    /// COMMIT (its outcome is unknown once the connection is lost).
    Commit,
    /// ROLLBACK of the whole transaction.
    Rollback,
    /// Reads and writes inside a transaction that neither commit nor
    /// change the session: SELECT, WITH, INSERT, UPDATE, DELETE, REPLACE,
    /// DO, VALUES, TABLE, SAVEPOINT, RELEASE SAVEPOINT, ROLLBACK TO.
    Dml,
    /// Anything else (DDL and other statements that commit implicitly,
    /// SET, USE, LOCK, CALL, ...).
    Other,
}

/// What to do about a statement whose server connection was lost before
/// any of its reply reached the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OnLoss {
    /// Nothing of the client's was on the connection and the statement
    /// changed nothing that could have lasted: run it again elsewhere.
    Retry,
    /// Run the recorded transaction again elsewhere, compare each reply,
    /// then run the statement.
    Replay,
    /// A ROLLBACK: the server rolls back what a lost connection leaves;
    /// the client is told OK and is outside a transaction.
    RolledBack,
    /// The client sees the lost connection, as it would directly.
    GiveUp(Why),
}

/// Why a transaction is not replayed: said in words, or the state the
/// session holds on its connection (named as the pin metric's `reason`
/// label names it, so the log and `/metrics` say the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    Said(&'static str),
    Holds(Pin),
}

impl From<&'static str> for Why {
    fn from(s: &'static str) -> Why {
        Why::Said(s)
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Said(s) => f.write_str(s),
            Why::Holds(p) => write!(
                f,
                "the session holds state on its server connection that another connection cannot be given: {}",
                p.name()
            ),
        }
    }
}

/// The open transaction's statements, or why it cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Journal {
    entries: Vec<Entry>,
    bytes: usize,
    /// Why the open transaction cannot be replayed.
    broken: Option<Why>,
    /// Most statement bytes recorded per transaction; 0: replay is off.
    max_bytes: usize,
}

/// Pins whose state a replay brings along: diagnostics and counts the
/// replayed statements leave again, transaction bookkeeping.
const REPLAYABLE_PINS: [Pin; 5] = [
    Pin::Diagnostics,
    Pin::MaybeInTransaction,
    Pin::Savepoint,
    Pin::FoundRows,
    Pin::LastInsertId,
];

/// Whether the client's session, as far as the connection holds it, can
/// be brought to another connection: transaction mode (settings and
/// database are replayed there) and no pin but [`REPLAYABLE_PINS`]; and
/// not a session that set an idle transaction timeout (`idle_timeout`):
/// a server that ends such a transaction's connection means it, and the
/// client must see it (as a direct one gets 2006), not a replay.
pub(crate) fn session_fits(
    mode: Mode,
    pins: &BTreeSet<Pin>,
    pin_next: Option<Pin>,
    idle_timeout: bool,
) -> Result<(), Why> {
    if mode != Mode::Transaction {
        return Err("session pooling mode keeps the session on its server connection".into());
    }
    if idle_timeout {
        return Err("the session set an idle transaction timeout: the server ends such transactions on purpose".into());
    }
    let other = |p: &Pin| !REPLAYABLE_PINS.contains(p);
    match pins.iter().copied().find(other).or(pin_next.filter(other)) {
        Some(p) => Err(Why::Holds(p)),
        None => Ok(()),
    }
}

/// The statement's kind, from its first words (a statement the words do
/// not make plain is `Other`, which is never replayed).
pub(crate) fn kind(text: &[u8]) -> Stmt {
    let w = |s: &str| sql::starts_with_word(text, s);
    if w("BEGIN") || w("START") {
        return Stmt::Begin;
    }
    if w("COMMIT") {
        return Stmt::Commit;
    }
    if w("ROLLBACK") {
        // ROLLBACK [WORK] TO [SAVEPOINT] name stays in the transaction.
        let words: Vec<String> = String::from_utf8_lossy(text)
            .split_ascii_whitespace()
            .take(3)
            .map(|x| x.to_ascii_uppercase())
            .collect();
        let to = words.get(1).map(String::as_str) == Some("TO")
            || (words.get(1).map(String::as_str) == Some("WORK")
                && words.get(2).map(String::as_str) == Some("TO"));
        return if to { Stmt::Dml } else { Stmt::Rollback };
    }
    const DML: [&str; 11] = [
        "SELECT",
        "WITH",
        "INSERT",
        "UPDATE",
        "DELETE",
        "REPLACE",
        "DO",
        "VALUES",
        "TABLE",
        "SAVEPOINT",
        "RELEASE",
    ];
    if DML.iter().any(|d| w(d)) {
        Stmt::Dml
    } else {
        Stmt::Other
    }
}

impl Journal {
    /// `max_bytes` of statements per transaction; 0: replay is off.
    pub fn new(max_bytes: usize) -> Journal {
        Journal {
            entries: Vec::new(),
            bytes: 0,
            broken: None,
            max_bytes,
        }
    }

    pub fn enabled(&self) -> bool {
        self.max_bytes > 0
    }

    /// The recorded statements, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The transaction ended outside a statement's reply (a lost
    /// connection rolled it back).
    pub fn end(&mut self) {
        self.clear();
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
        self.broken = None;
    }

    fn break_with(&mut self, why: impl Into<Why>) {
        self.entries.clear();
        self.bytes = 0;
        self.broken = Some(why.into());
    }

    /// A text statement ran: `was_in_trans` and `in_trans` are the
    /// transaction status before and after it, `digest` its reply's and
    /// the key it generated (None: not digested), `fits` what
    /// [`session_fits`] says now.
    pub fn statement(
        &mut self,
        was_in_trans: bool,
        in_trans: bool,
        payload: &[u8],
        digest: Option<(u128, u64)>,
        fits: Result<(), Why>,
    ) {
        if !in_trans || !self.enabled() {
            // Ended (or never began): nothing to keep.
            self.clear();
            return;
        }
        if !was_in_trans {
            // This statement opened it.
            self.clear();
        }
        if self.broken.is_some() {
            return;
        }
        let Some((digest, insert_id)) = digest else {
            return self.break_with("a statement's reply was not digested");
        };
        if let Err(why) = fits {
            return self.break_with(why);
        }
        if !matches!(
            kind(payload.get(1..).unwrap_or_default()),
            Stmt::Begin | Stmt::Dml
        ) {
            return self.break_with(
                "a statement other than reads and writes ran in the transaction (SET, USE, ...)",
            );
        }
        if self.bytes + payload.len() > self.max_bytes {
            return self.break_with("the transaction's statements exceed replay.max_bytes");
        }
        self.bytes += payload.len();
        self.entries.push(Entry {
            payload: payload.to_vec(),
            digest,
            insert_id,
        });
    }

    /// A command other than a text statement ran (`command`, its first
    /// byte): in a transaction, one that may change data or the session
    /// makes the transaction unreplayable (a prepared statement's
    /// execution is not recorded).
    pub fn other_command(&mut self, command: u8, in_trans: bool) {
        use sqlfleet_wire::command::*;
        if !in_trans {
            self.clear();
            return;
        }
        let harmless = matches!(
            command,
            COM_PING | COM_STATISTICS | COM_FIELD_LIST | COM_STMT_PREPARE | COM_STMT_CLOSE
        );
        if !harmless && self.broken.is_none() {
            self.break_with("a command other than a text statement ran in the transaction");
        }
    }

    /// The connection under `stmt` was lost before any of its reply
    /// reached the client. `in_trans` / `autocommit`: the client's
    /// status before it; `read`: a plain read; `sent`: the statement
    /// reached the connection before it was lost (a connection lost
    /// between statements, or one that refused the statement's bytes,
    /// never ran it); `fits`: [`session_fits`].
    pub fn on_loss(
        &self,
        in_trans: bool,
        autocommit: bool,
        stmt: Stmt,
        read: bool,
        sent: bool,
        fits: Result<(), Why>,
    ) -> OnLoss {
        if !self.enabled() {
            return OnLoss::GiveUp("transaction replay is off".into());
        }
        if let Err(why) = fits {
            return OnLoss::GiveUp(why);
        }
        if !sent {
            return match (in_trans, stmt) {
                (false, _) => OnLoss::Retry,
                (true, Stmt::Rollback) => OnLoss::RolledBack,
                (true, _) => self.replay_or_give_up(),
            };
        }
        if !in_trans {
            return match stmt {
                Stmt::Begin => OnLoss::Retry,
                _ if read => OnLoss::Retry,
                // Under autocommit = 0 nothing a statement wrote lasts
                // without a COMMIT: the server rolled it back.
                Stmt::Dml if !autocommit => OnLoss::Retry,
                Stmt::Rollback | Stmt::Commit => OnLoss::RolledBack,
                _ => OnLoss::GiveUp("an autocommit statement's outcome is unknown".into()),
            };
        }
        match stmt {
            Stmt::Rollback => OnLoss::RolledBack,
            Stmt::Commit => OnLoss::GiveUp("the COMMIT's outcome is unknown".into()),
            // BEGIN in a transaction commits it first.
            Stmt::Begin | Stmt::Other => {
                OnLoss::GiveUp("the statement may have committed the transaction".into())
            }
            Stmt::Dml => self.replay_or_give_up(),
        }
    }

    fn replay_or_give_up(&self) -> OnLoss {
        match self.replayable() {
            Ok(()) => OnLoss::Replay,
            Err(why) => OnLoss::GiveUp(why),
        }
    }

    /// The open transaction can be replayed, or why not.
    fn replayable(&self) -> Result<(), Why> {
        match self.broken {
            Some(why) => Err(why),
            None if self.entries.is_empty() => {
                Err("nothing of the transaction was recorded".into())
            }
            None => Ok(()),
        }
    }

    /// Whether a transaction whose connection was lost between statements
    /// can wait for the client's next statement to be replayed, or why not.
    pub fn replay_later(&self, fits: Result<(), Why>) -> Result<(), Why> {
        if !self.enabled() {
            return Err("transaction replay is off".into());
        }
        fits.and_then(|()| self.replayable())
    }
}

#[cfg(test)]
mod tests;
