//! The relay follows backend replies packet by packet (OK packets whole,
//! with their session-tracker data), reads client statements and execute
//! packets, rewrites ROW_COUNT()/FOUND_ROWS() calls and OKs for what a
//! client's session tracks, and tells the
//! connect-time variable reads it may answer itself: none of it may panic
//! on any bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_relay::protocol::reply::{ClientTracking, Expect, Tracker};

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let expect = match kind % 5 {
        0 => Expect::Results { cursor: false },
        1 => Expect::Results { cursor: true },
        2 => Expect::Prepare,
        3 => Expect::FieldList,
        _ => Expect::Rows,
    };
    // The rest is a stream of packets: 1-byte length, then the payload.
    let view = std::sync::Arc::new(sqlfleet_relay::protocol::track::TrackView::from_values(
        "autocommit,character_set_client",
        "ON",
        "OFF",
    ));
    let client = match kind & 0x30 {
        0x00 => ClientTracking::Raw,
        0x10 => ClientTracking::Strip,
        _ => ClientTracking::Filter(view.clone()),
    };
    let mut t = Tracker::new(expect, kind & 0x80 != 0).tracking(kind & 0x40 != 0, client);
    let mut i = 0;
    while i < rest.len() {
        let n = rest[i] as usize;
        let p = &rest[(i + 1).min(rest.len())..(i + 1 + n).min(rest.len())];
        let mut p = p.to_vec();
        if t.packet(p.len(), &mut p).is_err() {
            break;
        }
        i += 1 + n;
    }
    let _ = sqlfleet_relay::protocol::sql::analyze(rest);
    // A trigger body or column default the relay reads from the server.
    let _ = sqlfleet_relay::protocol::sql::Query::new(rest).written_tables();
    let _ = sqlfleet_relay::backend::write_effects::judge(&[vec![
        ("k".into(), Some("trigger".into())),
        ("s".into(), Some(String::from_utf8_lossy(rest).into_owned())),
    ]]);
    let _ = sqlfleet_relay::frontend::answers::is_variable_read(rest);
    // Written in as each dialect reads the text.
    for d in [0u8, 1, 2, 3] {
        let dialect = sqlfleet_dump::lex::Dialect {
            no_backslash_escapes: d & 1 != 0,
            ansi_quotes: false,
            charset: if d & 2 != 0 {
                sqlfleet_dump::lex::Multibyte::Sjis
            } else {
                sqlfleet_dump::lex::Multibyte::AsciiSafe
            },
        };
        let toks = sqlfleet_dump::lex::lex_in(rest, dialect).toks;
        let cs = dialect.charset;
        let _ = sqlfleet_relay::protocol::sql::substitute_call(rest, &toks, cs, "ROW_COUNT", 3);
        let _ =
            sqlfleet_relay::protocol::sql::substitute_var(rest, &toks, cs, "last_gtid", "0-1-2");
    }
    let _ = sqlfleet_relay::protocol::track::parse_ok(rest, kind & 1 != 0);
    let _ = sqlfleet_relay::protocol::track::strip(rest);
    let _ = sqlfleet_relay::protocol::track::filter(rest, &view);
    let mut c = sqlfleet_relay::protocol::stmt::ClientStmt::new(
        None,
        b"SELECT ?",
        u16::from(kind % 20),
        0,
        Default::default(),
        (
            sqlfleet_dump::lex::lex(b"SELECT ?").toks,
            Some("SELECT ?".into()),
        ),
    );
    let mut b = sqlfleet_relay::protocol::stmt::BackendStmts::default();
    b.insert(c.def.key.clone(), 1, 4);
    let def = c.def.clone();
    if let Some(bs) = b.get_mut(&def.key) {
        let _ = sqlfleet_relay::protocol::stmt::rewrite_execute(rest, def.params, &mut c, bs);
    }
});
