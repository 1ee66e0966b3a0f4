//! Every rule of the statement plan as a row: a session brought to a
//! state by the statements before (through `ClientState` as the session
//! drives it), the facts of the moment, a statement, and the plan.

use super::*;
use crate::protocol::reply::{Outcome, STATUS_AUTOCOMMIT, STATUS_IN_TRANS};
use crate::protocol::sql::Query;

/// How the session stands before the statement.
#[derive(Clone, Copy, Debug)]
enum Before {
    /// A new client in transaction mode.
    Fresh,
    /// A client in session mode.
    SessionMode,
    /// BEGIN answered: a transaction is open.
    InTransaction,
    /// `SET autocommit = 0` answered, no transaction open yet.
    NoAutocommit,
    /// A user variable set: the session is pinned.
    UserVariable,
}

fn state(b: Before) -> ClientState {
    let (sql, status) = match b {
        Before::Fresh => return ClientState::new(Mode::Transaction, Some("db".into())),
        Before::SessionMode => return ClientState::new(Mode::Session, Some("db".into())),
        Before::InTransaction => ("BEGIN", STATUS_AUTOCOMMIT | STATUS_IN_TRANS),
        Before::NoAutocommit => ("SET autocommit = 0", 0),
        Before::UserVariable => ("SET @a = 1", STATUS_AUTOCOMMIT),
    };
    let mut st = ClientState::new(Mode::Transaction, Some("db".into()));
    let fx = Query::new(sql.as_bytes()).effects();
    st.begin_command();
    st.begin_statement(&fx);
    st.take_statement_pins(&fx);
    let o = Outcome {
        status: Some(status),
        replies: 1,
        ..Outcome::default()
    };
    st.observe(&o, &[]);
    st.counts_after(&o, &fx, Some(false));
    st.after_text(&fx, &o, true);
    st
}

const NONE: Facts = Facts {
    held: false,
    streamed: false,
    journal: false,
    caching: false,
};
const ALL: Facts = Facts {
    held: false,
    streamed: true,
    journal: true,
    caching: true,
};

struct Row {
    rule: &'static str,
    before: Before,
    facts: Facts,
    sql: &'static str,
    want: StatementPlan,
}

const PLAIN: StatementPlan = StatementPlan {
    local: false,
    read_whole: false,
    cache: false,
    digest: false,
};

const ROWS: &[Row] = &[
    Row {
        rule: "a plain read with nothing on goes to the server as it is",
        before: Before::Fresh,
        facts: NONE,
        sql: "SELECT v FROM t WHERE k = 1",
        want: PLAIN,
    },
    Row {
        rule: "with cache rules, a plain read looks in the cache",
        before: Before::Fresh,
        facts: Facts {
            caching: true,
            ..NONE
        },
        sql: "SELECT v FROM t WHERE k = 1",
        want: StatementPlan {
            cache: true,
            ..PLAIN
        },
    },
    Row {
        rule: "a connect-time variable read may be answered from the recorded reply, not the cache",
        before: Before::Fresh,
        facts: Facts {
            caching: true,
            ..NONE
        },
        sql: "SELECT @@max_allowed_packet",
        want: StatementPlan {
            local: true,
            ..PLAIN
        },
    },
    Row {
        rule: "a session SET may be answered from the recorded reply",
        before: Before::Fresh,
        facts: NONE,
        sql: "SET NAMES utf8mb4",
        want: StatementPlan {
            local: true,
            ..PLAIN
        },
    },
    Row {
        rule: "no recorded answer while a connection is held: its session is what counts",
        before: Before::Fresh,
        facts: Facts { held: true, ..NONE },
        sql: "SELECT @@max_allowed_packet",
        want: PLAIN,
    },
    Row {
        rule: "no recorded answer in session mode",
        before: Before::SessionMode,
        facts: NONE,
        sql: "SELECT @@max_allowed_packet",
        want: PLAIN,
    },
    Row {
        rule: "no recorded answer on a pinned session",
        before: Before::UserVariable,
        facts: NONE,
        sql: "SET NAMES utf8mb4",
        want: PLAIN,
    },
    Row {
        rule: "no recorded answer inside a transaction, and its reply is digested",
        before: Before::InTransaction,
        facts: Facts {
            journal: true,
            ..NONE
        },
        sql: "SELECT @@max_allowed_packet",
        want: StatementPlan {
            digest: true,
            ..PLAIN
        },
    },
    Row {
        rule: "an autocommit statement's reply is not digested",
        before: Before::Fresh,
        facts: Facts {
            journal: true,
            ..NONE
        },
        sql: "UPDATE t SET v = 1",
        want: PLAIN,
    },
    Row {
        rule: "BEGIN's reply is digested: the transaction starts with it",
        before: Before::Fresh,
        facts: Facts {
            journal: true,
            ..NONE
        },
        sql: "BEGIN",
        want: StatementPlan {
            digest: true,
            ..PLAIN
        },
    },
    Row {
        rule: "with autocommit off, every statement may be in a transaction",
        before: Before::NoAutocommit,
        facts: Facts {
            journal: true,
            ..NONE
        },
        sql: "UPDATE t SET v = 1",
        want: StatementPlan {
            digest: true,
            ..PLAIN
        },
    },
    Row {
        rule: "without the journal nothing is digested",
        before: Before::InTransaction,
        facts: NONE,
        sql: "UPDATE t SET v = 1",
        want: PLAIN,
    },
    Row {
        rule: "a whole statement reading ROW_COUNT() is not read again",
        before: Before::Fresh,
        facts: NONE,
        sql: "SELECT ROW_COUNT()",
        want: PLAIN,
    },
    Row {
        rule: "a streamed statement the relay writes its counts into is read whole",
        before: Before::Fresh,
        facts: Facts {
            streamed: true,
            ..NONE
        },
        sql: "SELECT ROW_COUNT(), 'a long literal'",
        want: StatementPlan {
            read_whole: true,
            ..PLAIN
        },
    },
    Row {
        rule: "a streamed statement the relay may answer is read whole",
        before: Before::Fresh,
        facts: Facts {
            streamed: true,
            ..NONE
        },
        sql: "SET NAMES utf8mb4",
        want: StatementPlan {
            local: true,
            read_whole: true,
            ..PLAIN
        },
    },
    Row {
        rule:
            "a streamed statement that is neither streams on (the cache is asked, and refuses it)",
        before: Before::Fresh,
        facts: ALL,
        sql: "INSERT INTO t VALUES (1, 'a long literal')",
        want: StatementPlan {
            cache: true,
            ..PLAIN
        },
    },
];

#[test]
fn every_plan_rule() {
    for r in ROWS {
        let st = state(r.before);
        let q = Query::new(r.sql.as_bytes());
        let fx = q.effects();
        let text = (r.sql.as_bytes(), q.tokens(), Dialect::default());
        let got = plan(text, &fx, &st, r.facts);
        assert_eq!(
            got, r.want,
            "{}: {:?} {:?} {}",
            r.rule, r.before, r.facts, r.sql
        );
    }
}
