//! What brings a pooled connection to a client's session, row by row.

use super::*;

fn set(name: &str, value: &str) -> Setting {
    Setting {
        name: name.into(),
        text: format!("@@session.{name} = {value}"),
    }
}

struct Row {
    name: &'static str,
    have: Vec<Setting>,
    have_id: u64,
    caps: u32,
    want: Vec<Setting>,
    want_id: u64,
    reset_first: bool,
    set: Vec<&'static str>,
}

#[test]
fn what_brings_a_connection_to_a_clients_session() {
    let ignore_space = sqlfleet_wire::handshake::IGNORE_SPACE;
    let names = Setting {
        name: "names".into(),
        text: "NAMES latin1".into(),
    };
    let rows = vec![
        Row {
            name: "a fresh connection for a fresh client: nothing",
            have: vec![],
            have_id: 0,
            caps: 0,
            want: vec![],
            want_id: 0,
            reset_first: false,
            set: vec![],
        },
        Row {
            name: "the client's settings the connection lacks",
            have: vec![],
            have_id: 0,
            caps: 0,
            want: vec![set("sql_mode", "'ANSI'"), set("autocommit", "0")],
            want_id: 0,
            reset_first: false,
            set: vec!["@@session.sql_mode = 'ANSI'", "@@session.autocommit = 0"],
        },
        Row {
            name: "the same settings: nothing",
            have: vec![set("sql_mode", "'ANSI'")],
            have_id: 7,
            caps: 0,
            want: vec![set("sql_mode", "'ANSI'")],
            want_id: 7,
            reset_first: false,
            set: vec![],
        },
        Row {
            name: "another value of the same variable replaces it",
            have: vec![set("sql_mode", "'ANSI'")],
            have_id: 0,
            caps: 0,
            want: vec![set("sql_mode", "''")],
            want_id: 0,
            reset_first: false,
            set: vec!["@@session.sql_mode = ''"],
        },
        Row {
            name: "what another client left goes back to DEFAULT",
            have: vec![set("time_zone", "'+02:00'")],
            have_id: 0,
            caps: 0,
            want: vec![],
            want_id: 0,
            reset_first: false,
            set: vec!["@@session.time_zone = DEFAULT"],
        },
        Row {
            name: "sql_mode of a CLIENT_IGNORE_SPACE login goes back to its own start",
            have: vec![set("sql_mode", "'ANSI'")],
            have_id: 0,
            caps: ignore_space,
            want: vec![],
            want_id: 0,
            reset_first: false,
            set: vec!["@@session.sql_mode = CONCAT(@@global.sql_mode, ',IGNORE_SPACE')"],
        },
        Row {
            name: "the client's LAST_INSERT_ID() goes with it",
            have: vec![],
            have_id: 3,
            caps: 0,
            want: vec![],
            want_id: 9,
            reset_first: false,
            set: vec!["@@session.last_insert_id = 9"],
        },
        Row {
            name: "a character set another client left: a reset first",
            have: vec![names.clone()],
            have_id: 0,
            caps: 0,
            want: vec![],
            want_id: 0,
            reset_first: true,
            set: vec!["@@session.names = DEFAULT"],
        },
        Row {
            name: "the client's own character set: no reset",
            have: vec![names.clone()],
            have_id: 0,
            caps: 0,
            want: vec![names.clone()],
            want_id: 0,
            reset_first: false,
            set: vec![],
        },
        Row {
            name: "the client's order: a collation after the character set it follows",
            have: vec![],
            have_id: 0,
            caps: 0,
            want: vec![
                set("character_set_connection", "'utf8mb3'"),
                set("collation_connection", "'utf8mb3_general_mysql500_ci'"),
            ],
            want_id: 0,
            reset_first: false,
            set: vec![
                "@@session.character_set_connection = 'utf8mb3'",
                "@@session.collation_connection = 'utf8mb3_general_mysql500_ci'",
            ],
        },
    ];
    for r in rows {
        let got = diff(&r.have, Some(r.have_id), r.caps, &r.want, r.want_id);
        assert_eq!(got.reset_first, r.reset_first, "{}: reset", r.name);
        assert_eq!(got.set, r.set, "{}: SET", r.name);
    }
    // A connection whose LAST_INSERT_ID() is not known gets the client's
    // whatever it is.
    assert_eq!(
        diff(&[], None, 0, &[], 0).set,
        vec!["@@session.last_insert_id = 0"]
    );
}
