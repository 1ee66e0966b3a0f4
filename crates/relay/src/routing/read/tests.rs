//! The route kind and read-your-writes decisions, row by row.

use super::*;
use Consistency::{Global, None as NoWait, Session};

const PLAIN_READ: Facts = Facts {
    split: true,
    read: true,
    reads_server: false,
    may_read_elsewhere: true,
    holds_conn: false,
    current: Route::Primary,
    fixed: false,
};

#[test]
fn which_route_kind_a_statement_takes() {
    let rows: &[(&str, Facts, Route)] = &[
        ("a plain read with the split on", PLAIN_READ, Route::Replica),
        (
            "no split: replicas stand by",
            Facts {
                split: false,
                ..PLAIN_READ
            },
            Route::Primary,
        ),
        (
            "a write",
            Facts {
                read: false,
                ..PLAIN_READ
            },
            Route::Primary,
        ),
        (
            "a read of the server itself (@@global.read_only, IS_FREE_LOCK, information_schema)",
            Facts {
                reads_server: true,
                ..PLAIN_READ
            },
            Route::Primary,
        ),
        (
            "inside a transaction or with session state",
            Facts {
                may_read_elsewhere: false,
                ..PLAIN_READ
            },
            Route::Primary,
        ),
        (
            "the client holds a connection",
            Facts {
                holds_conn: true,
                ..PLAIN_READ
            },
            Route::Primary,
        ),
        (
            "a rule fixed the primary",
            Facts {
                fixed: true,
                ..PLAIN_READ
            },
            Route::Primary,
        ),
        (
            "a rule's group stays",
            Facts {
                current: Route::Group(1),
                fixed: true,
                ..PLAIN_READ
            },
            Route::Group(1),
        ),
        (
            "one backend: no routing",
            Facts {
                current: Route::Any,
                ..PLAIN_READ
            },
            Route::Any,
        ),
    ];
    for (name, facts, want) in rows {
        assert_eq!(route_for(*facts), *want, "{name}");
    }
}

#[test]
fn what_a_query_rule_routes() {
    // (name, split, rule, holds_conn, tied, route)
    type Row = (&'static str, bool, RuleRoute, bool, bool, Option<Route>);
    let rows: &[Row] = &[
        (
            "primary",
            true,
            RuleRoute::Primary,
            false,
            false,
            Some(Route::Primary),
        ),
        (
            "primary inside a transaction",
            true,
            RuleRoute::Primary,
            true,
            true,
            Some(Route::Primary),
        ),
        (
            "replica",
            true,
            RuleRoute::Replica,
            false,
            false,
            Some(Route::Replica),
        ),
        (
            "a group",
            true,
            RuleRoute::Group(Some(2)),
            false,
            false,
            Some(Route::Group(2)),
        ),
        (
            "a group no backend has: any replica",
            true,
            RuleRoute::Group(None),
            false,
            false,
            Some(Route::Replica),
        ),
        (
            "replica while holding a connection",
            true,
            RuleRoute::Replica,
            true,
            false,
            None,
        ),
        (
            "replica inside a transaction",
            true,
            RuleRoute::Replica,
            false,
            true,
            None,
        ),
        (
            "replica with autocommit off (the read would open a transaction there)",
            true,
            RuleRoute::Replica,
            false,
            true,
            None,
        ),
        (
            "a group inside a transaction",
            true,
            RuleRoute::Group(Some(0)),
            false,
            true,
            None,
        ),
        (
            "no split: rules do not route",
            false,
            RuleRoute::Primary,
            false,
            false,
            None,
        ),
        (
            "no split, replica",
            false,
            RuleRoute::Replica,
            false,
            false,
            None,
        ),
    ];
    for (name, split, to, holds, tied, want) in rows {
        assert_eq!(rule_route(*split, *to, *holds, *tied), *want, "{name}");
    }
}

#[test]
fn what_a_replica_read_waits_for() {
    let w = |g: &str| BeforeRead::WaitFor(g.to_string());
    // (name, consistency, galera, text, own_write_unknown, last_write, step)
    type Row = (
        &'static str,
        Consistency,
        bool,
        bool,
        bool,
        Option<&'static str>,
        BeforeRead,
    );
    let rows: Vec<Row> = vec![
        (
            "none: reads as it is",
            NoWait,
            false,
            true,
            false,
            Some("0-1-5"),
            BeforeRead::Nothing,
        ),
        (
            "session, no write yet",
            Session,
            false,
            true,
            false,
            None,
            BeforeRead::Nothing,
        ),
        (
            "session, after a write",
            Session,
            false,
            true,
            false,
            Some("0-1-5"),
            w("0-1-5"),
        ),
        (
            "session, a prepared read waits too",
            Session,
            false,
            false,
            false,
            Some("0-1-5"),
            w("0-1-5"),
        ),
        (
            "session, the write's position unknown",
            Session,
            false,
            true,
            true,
            Some("0-1-5"),
            BeforeRead::OnPrimary,
        ),
        (
            "session, unknown and no earlier write",
            Session,
            false,
            true,
            true,
            None,
            BeforeRead::OnPrimary,
        ),
        (
            "global: the primary's position",
            Global,
            false,
            true,
            false,
            None,
            BeforeRead::WaitForPrimary,
        ),
        (
            "global, after a write too",
            Global,
            false,
            true,
            false,
            Some("0-1-5"),
            BeforeRead::WaitForPrimary,
        ),
        (
            "galera, none",
            NoWait,
            true,
            true,
            false,
            Some("1-1-5"),
            BeforeRead::Nothing,
        ),
        (
            "galera, session, no write yet",
            Session,
            true,
            true,
            false,
            None,
            BeforeRead::Nothing,
        ),
        (
            "galera, session, after a write: the read waits itself",
            Session,
            true,
            true,
            false,
            Some("1-1-5"),
            BeforeRead::CausalRead,
        ),
        (
            "galera, session, a prepared read goes to the writer",
            Session,
            true,
            false,
            false,
            Some("1-1-5"),
            BeforeRead::OnPrimary,
        ),
        (
            "galera, global",
            Global,
            true,
            true,
            false,
            None,
            BeforeRead::CausalRead,
        ),
        (
            "galera, global, prepared",
            Global,
            true,
            false,
            false,
            None,
            BeforeRead::OnPrimary,
        ),
    ];
    for (name, c, galera, text, unknown, last, want) in rows {
        assert_eq!(before_read(c, galera, text, unknown, last), want, "{name}");
    }
}

#[test]
fn whether_a_replica_must_wait() {
    // (name, read_only, applied, wanted, must wait)
    let rows: &[(&str, bool, &str, &str, bool)] = &[
        ("applied already", true, "0-1-42", "0-1-42", false),
        ("behind", true, "0-1-41", "0-1-42", true),
        ("another domain", true, "1-1-100", "0-1-1", true),
        (
            "ahead in the wanted domain",
            true,
            "0-1-43,1-2-5",
            "1-2-5",
            false,
        ),
        (
            "a writable server is the primary",
            false,
            "0-1-1",
            "0-1-42",
            false,
        ),
        ("nothing wanted", true, "", "", false),
        (
            "every domain of a list",
            true,
            "0-1-42,1-2-9",
            "0-1-40,1-2-9",
            false,
        ),
        (
            "one domain of a list behind",
            true,
            "0-1-42,1-2-8",
            "0-1-40,1-2-9",
            true,
        ),
    ];
    for (name, ro, applied, want, wait) in rows {
        assert_eq!(must_wait(*ro, applied, want), *wait, "{name}");
    }
}

#[test]
fn which_writes_are_remembered() {
    // (name, split, consistency, read, failed, in_trans, on_replica, remember)
    type Row = (
        &'static str,
        bool,
        Consistency,
        bool,
        bool,
        bool,
        bool,
        bool,
    );
    let rows: &[Row] = &[
        (
            "a committed write",
            true,
            Session,
            false,
            false,
            false,
            false,
            true,
        ),
        (
            "no split: nothing asked",
            false,
            Session,
            false,
            false,
            false,
            false,
            false,
        ),
        (
            "consistency none",
            true,
            NoWait,
            false,
            false,
            false,
            false,
            false,
        ),
        (
            "global asks the primary instead",
            true,
            Global,
            false,
            false,
            false,
            false,
            false,
        ),
        ("a read", true, Session, true, false, false, false, false),
        (
            "a failed write",
            true,
            Session,
            false,
            true,
            false,
            false,
            false,
        ),
        (
            "inside a transaction (its COMMIT is remembered)",
            true,
            Session,
            false,
            false,
            true,
            false,
            false,
        ),
        (
            "on a replica",
            true,
            Session,
            false,
            false,
            false,
            true,
            false,
        ),
    ];
    for (name, split, c, read, failed, trans, replica, want) in rows {
        assert_eq!(
            remember_write(*split, *c, *read, *failed, *trans, *replica),
            *want,
            "{name}"
        );
    }
}

/// What may run on a replica's connection a client holds: reads and the
/// statement that ends the transaction there, alone.
#[test]
fn what_runs_on_a_held_replica() {
    // (name, leased on a replica, read, ends_transaction, statements, runs)
    let rows: &[(&str, bool, bool, bool, usize, bool)] = &[
        ("a read", true, true, false, 1, true),
        ("COMMIT", true, false, true, 1, true),
        ("ROLLBACK", true, false, true, 1, true),
        ("COMMIT; INSERT ...", true, false, true, 2, false),
        ("INSERT", true, false, false, 1, false),
        (
            "ROLLBACK TO SAVEPOINT s (the transaction goes on)",
            true,
            false,
            false,
            1,
            false,
        ),
        ("SET @a = 1", true, false, false, 1, false),
        (
            "INSERT, got on the primary, which turned read_only since",
            false,
            false,
            false,
            1,
            true,
        ),
    ];
    for (name, leased_on_replica, read, ends, n, want) in rows {
        assert_eq!(
            runs_on_held(*leased_on_replica, *read, *ends, *n),
            *want,
            "{name}"
        );
    }
}
