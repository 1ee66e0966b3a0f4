//! The journal's rules, a row each: what a statement is, what is
//! recorded, and what a lost connection means for the statement it
//! interrupted.

use super::*;

fn q(text: &str) -> Vec<u8> {
    [&[sqlfleet_wire::command::COM_QUERY][..], text.as_bytes()].concat()
}

#[test]
fn statement_kinds_by_their_first_words() {
    let rows = [
        ("BEGIN", Stmt::Begin),
        ("  start transaction read only", Stmt::Begin),
        ("COMMIT", Stmt::Commit),
        ("commit work", Stmt::Commit),
        ("ROLLBACK", Stmt::Rollback),
        ("rollback work", Stmt::Rollback),
        ("ROLLBACK TO SAVEPOINT a", Stmt::Dml),
        ("rollback work to a", Stmt::Dml),
        ("SELECT * FROM t FOR UPDATE", Stmt::Dml),
        ("with x as (select 1) select * from x", Stmt::Dml),
        ("INSERT INTO t VALUES (1)", Stmt::Dml),
        ("update t set a = 1", Stmt::Dml),
        ("DELETE FROM t", Stmt::Dml),
        ("REPLACE INTO t VALUES (1)", Stmt::Dml),
        ("SAVEPOINT a", Stmt::Dml),
        ("RELEASE SAVEPOINT a", Stmt::Dml),
        ("CREATE TABLE t (a INT)", Stmt::Other),
        ("SET autocommit = 1", Stmt::Other),
        ("USE db", Stmt::Other),
        ("LOCK TABLES t WRITE", Stmt::Other),
        ("CALL p()", Stmt::Other),
        ("/* a comment */ SELECT 1", Stmt::Other),
        ("SELECTX", Stmt::Other),
        ("", Stmt::Other),
    ];
    for (text, want) in rows {
        assert_eq!(kind(text.as_bytes()), want, "{text:?}");
    }
}

#[test]
fn a_session_fits_elsewhere_only_in_transaction_mode_without_connection_state() {
    let pins = |ps: &[Pin]| ps.iter().copied().collect::<BTreeSet<Pin>>();
    let rows: Vec<(Mode, BTreeSet<Pin>, Option<Pin>, bool)> = vec![
        (Mode::Transaction, pins(&[]), None, true),
        (
            Mode::Transaction,
            pins(&[Pin::Diagnostics, Pin::Savepoint]),
            None,
            true,
        ),
        (
            Mode::Transaction,
            pins(&[Pin::MaybeInTransaction]),
            Some(Pin::LastInsertId),
            true,
        ),
        (Mode::Session, pins(&[Pin::Session]), None, false),
        (Mode::Transaction, pins(&[Pin::TemporaryTable]), None, false),
        (Mode::Transaction, pins(&[Pin::UserVariable]), None, false),
        (Mode::Transaction, pins(&[Pin::GetLock]), None, false),
        (Mode::Transaction, pins(&[Pin::SetTransaction]), None, false),
        (Mode::Transaction, pins(&[Pin::WriteEffects]), None, false),
        (Mode::Transaction, pins(&[]), Some(Pin::Sequence), false),
    ];
    for (mode, p, next, fits) in rows {
        let got = session_fits(mode, &p, next, false);
        assert_eq!(got.is_ok(), fits, "{mode:?} {p:?} {next:?}");
        // The reason names the state held, as the pin metric does.
        if let (Err(why), Mode::Transaction) = (got, mode) {
            let held = p
                .iter()
                .copied()
                .chain(next)
                .find(|x| why == Why::Holds(*x));
            let name = held.map(Pin::name).unwrap_or("none");
            assert!(why.to_string().ends_with(name), "{why}");
        }
    }
    // A session that set an idle transaction timeout is the server's to
    // end, whatever it holds.
    assert!(session_fits(Mode::Transaction, &pins(&[]), None, true).is_err());
}

/// A journal after these statements: (text, in transaction before,
/// after, digested, session fits).
fn after(steps: &[(&str, bool, bool, bool, bool)]) -> Journal {
    let mut j = Journal::new(200);
    for (i, (text, was, now, digested, fits)) in steps.iter().enumerate() {
        let fits = if *fits { Ok(()) } else { Err("pinned".into()) };
        j.statement(
            *was,
            *now,
            &q(text),
            digested.then_some((i as u128, 0)),
            fits,
        );
    }
    j
}

#[test]
fn what_is_recorded() {
    // (steps, the recorded texts, or None: broken)
    type Steps = &'static [(&'static str, bool, bool, bool, bool)];
    let rows: &[(Steps, Option<&[&str]>)] = &[
        // A transaction from its BEGIN.
        (
            &[
                ("BEGIN", false, true, true, true),
                ("SELECT 1", true, true, true, true),
                ("UPDATE t SET a = 1", true, true, true, true),
            ],
            Some(&["BEGIN", "SELECT 1", "UPDATE t SET a = 1"]),
        ),
        // Autocommit statements leave nothing.
        (&[("INSERT INTO t VALUES (1)", false, false, true, true)], Some(&[])),
        // Ended by COMMIT: nothing kept; the next one starts afresh.
        (
            &[
                ("BEGIN", false, true, true, true),
                ("COMMIT", true, false, true, true),
                ("START TRANSACTION", false, true, true, true),
            ],
            Some(&["START TRANSACTION"]),
        ),
        // Under autocommit = 0 the first write opens it.
        (
            &[("INSERT INTO t VALUES (1)", false, true, true, true)],
            Some(&["INSERT INTO t VALUES (1)"]),
        ),
        // A reply not digested, a pin, a SET: broken until it ends.
        (
            &[("BEGIN", false, true, true, true), ("SELECT 1", true, true, false, true)],
            None,
        ),
        (
            &[("BEGIN", false, true, true, true), ("SELECT @a := 1", true, true, true, false)],
            None,
        ),
        (
            &[
                ("BEGIN", false, true, true, true),
                ("SET sql_mode = ''", true, true, true, true),
                ("SELECT 1", true, true, true, true),
            ],
            None,
        ),
        // A broken transaction's end mends the journal.
        (
            &[
                ("BEGIN", false, true, true, true),
                ("SET sql_mode = ''", true, true, true, true),
                ("ROLLBACK", true, false, true, true),
                ("BEGIN", false, true, true, true),
            ],
            Some(&["BEGIN"]),
        ),
        // Larger than max_bytes (200).
        (
            &[
                ("BEGIN", false, true, true, true),
                (
                    "INSERT INTO t VALUES ('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa')",
                    true,
                    true,
                    true,
                    true,
                ),
                (
                    "INSERT INTO t VALUES ('bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb')",
                    true,
                    true,
                    true,
                    true,
                ),
            ],
            None,
        ),
    ];
    for (steps, want) in rows {
        let j = after(steps);
        match want {
            Some(texts) => {
                assert_eq!(j.broken, None, "{steps:?}");
                let got: Vec<Vec<u8>> = j.entries().iter().map(|e| e.payload.clone()).collect();
                let want: Vec<Vec<u8>> = texts.iter().map(|t| q(t)).collect();
                assert_eq!(got, want, "{steps:?}");
            }
            None => {
                assert!(j.broken.is_some(), "{steps:?}");
                assert!(j.entries().is_empty(), "{steps:?}");
            }
        }
    }
}

#[test]
fn other_commands_in_a_transaction() {
    use sqlfleet_wire::command::*;
    let open = || after(&[("BEGIN", false, true, true, true)]);
    for (cmd, breaks) in [
        (COM_PING, false),
        (COM_STMT_PREPARE, false),
        (COM_STMT_CLOSE, false),
        (COM_STMT_EXECUTE, true),
        (COM_INIT_DB, true),
        (COM_CHANGE_USER, true),
    ] {
        let mut j = open();
        j.other_command(cmd, true);
        assert_eq!(j.broken.is_some(), breaks, "command {cmd:#04x}");
    }
    let mut j = open();
    j.other_command(COM_STMT_EXECUTE, false);
    assert_eq!(
        j,
        Journal::new(200),
        "outside a transaction nothing is kept"
    );
}

#[test]
fn what_a_lost_connection_means() {
    let open = after(&[
        ("BEGIN", false, true, true, true),
        ("SELECT 1", true, true, true, true),
    ]);
    let broken = after(&[
        ("BEGIN", false, true, true, true),
        ("SET @a = 1", true, true, true, true),
    ]);
    let empty = Journal::new(200);
    let off = Journal::new(0);
    let ok = Ok(());
    let pinned: Result<(), Why> = Err("pinned".into());
    // (journal, in transaction, autocommit, statement, plain read, fits, want),
    // the statement sent before the loss
    type Row<'a> = (&'a Journal, bool, bool, Stmt, bool, Result<(), Why>, OnLoss);
    let rows: Vec<Row> = vec![
        // Outside a transaction.
        (&empty, false, true, Stmt::Begin, false, ok, OnLoss::Retry),
        (&empty, false, true, Stmt::Dml, true, ok, OnLoss::Retry),
        (&empty, false, false, Stmt::Dml, false, ok, OnLoss::Retry),
        (
            &empty,
            false,
            true,
            Stmt::Commit,
            false,
            ok,
            OnLoss::RolledBack,
        ),
        (
            &empty,
            false,
            true,
            Stmt::Rollback,
            false,
            ok,
            OnLoss::RolledBack,
        ),
        (
            &empty,
            false,
            true,
            Stmt::Dml,
            false,
            ok,
            OnLoss::GiveUp("an autocommit statement's outcome is unknown".into()),
        ),
        (
            &empty,
            false,
            false,
            Stmt::Other,
            false,
            ok,
            OnLoss::GiveUp("an autocommit statement's outcome is unknown".into()),
        ),
        (
            &empty,
            false,
            true,
            Stmt::Dml,
            true,
            pinned,
            OnLoss::GiveUp("pinned".into()),
        ),
        (
            &off,
            false,
            true,
            Stmt::Begin,
            false,
            ok,
            OnLoss::GiveUp("transaction replay is off".into()),
        ),
        // Inside one.
        (&open, true, true, Stmt::Dml, false, ok, OnLoss::Replay),
        (&open, true, true, Stmt::Dml, true, ok, OnLoss::Replay),
        (
            &open,
            true,
            true,
            Stmt::Rollback,
            false,
            ok,
            OnLoss::RolledBack,
        ),
        (
            &open,
            true,
            true,
            Stmt::Commit,
            false,
            ok,
            OnLoss::GiveUp("the COMMIT's outcome is unknown".into()),
        ),
        (
            &open,
            true,
            true,
            Stmt::Begin,
            false,
            ok,
            OnLoss::GiveUp("the statement may have committed the transaction".into()),
        ),
        (
            &open,
            true,
            true,
            Stmt::Other,
            false,
            ok,
            OnLoss::GiveUp("the statement may have committed the transaction".into()),
        ),
        (
            &open,
            true,
            true,
            Stmt::Dml,
            false,
            pinned,
            OnLoss::GiveUp("pinned".into()),
        ),
        (
            &empty,
            true,
            true,
            Stmt::Dml,
            false,
            ok,
            OnLoss::GiveUp("nothing of the transaction was recorded".into()),
        ),
        (
            &off,
            true,
            true,
            Stmt::Dml,
            false,
            ok,
            OnLoss::GiveUp("transaction replay is off".into()),
        ),
    ];
    for (j, in_trans, autocommit, stmt, read, fits, want) in rows {
        assert_eq!(
            j.on_loss(in_trans, autocommit, stmt, read, true, fits),
            want,
            "in_trans {in_trans} autocommit {autocommit} {stmt:?} read {read} {:?}",
            j.entries().len()
        );
    }
    assert!(matches!(
        broken.on_loss(true, true, Stmt::Dml, false, true, Ok(())),
        OnLoss::GiveUp(_)
    ));
}

#[test]
fn a_statement_that_never_reached_the_lost_connection() {
    let open = after(&[
        ("BEGIN", false, true, true, true),
        ("SELECT 1", true, true, true, true),
    ]);
    let broken = after(&[
        ("BEGIN", false, true, true, true),
        ("SET @a = 1", true, true, true, true),
    ]);
    let empty = Journal::new(200);
    // (journal, in transaction, statement, want)
    let rows: Vec<(&Journal, bool, Stmt, OnLoss)> = vec![
        // Outside a transaction anything runs again: it never ran.
        (&empty, false, Stmt::Dml, OnLoss::Retry),
        (&empty, false, Stmt::Other, OnLoss::Retry),
        (&empty, false, Stmt::Commit, OnLoss::Retry),
        // Inside one, even a COMMIT: the lost connection never got it.
        (&open, true, Stmt::Commit, OnLoss::Replay),
        (&open, true, Stmt::Dml, OnLoss::Replay),
        (&open, true, Stmt::Other, OnLoss::Replay),
        (&open, true, Stmt::Begin, OnLoss::Replay),
        (&open, true, Stmt::Rollback, OnLoss::RolledBack),
        (
            &empty,
            true,
            Stmt::Commit,
            OnLoss::GiveUp("nothing of the transaction was recorded".into()),
        ),
    ];
    for (j, in_trans, stmt, want) in rows {
        assert_eq!(
            j.on_loss(in_trans, true, stmt, false, false, Ok(())),
            want,
            "in_trans {in_trans} {stmt:?}"
        );
    }
    assert!(matches!(
        broken.on_loss(true, true, Stmt::Commit, false, false, Ok(())),
        OnLoss::GiveUp(_)
    ));
    assert_eq!(open.replay_later(Ok(())), Ok(()));
    assert_eq!(
        open.replay_later(Err("pinned".into())),
        Err("pinned".into())
    );
    assert!(broken.replay_later(Ok(())).is_err());
    assert_eq!(
        empty.replay_later(Ok(())),
        Err("nothing of the transaction was recorded".into())
    );
}
