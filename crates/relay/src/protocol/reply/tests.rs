use super::*;

fn ok(status: u16, insert_id: u8) -> Vec<u8> {
    let mut p = vec![0x00, 1, insert_id];
    p.extend_from_slice(&status.to_le_bytes());
    p.extend_from_slice(&[0, 0]);
    p
}

fn eof(status: u16) -> Vec<u8> {
    let mut p = vec![0xFE, 0, 0];
    p.extend_from_slice(&status.to_le_bytes());
    p
}

fn ok_as_eof(status: u16) -> Vec<u8> {
    let mut p = ok(status, 0);
    p[0] = 0xFE;
    p
}

/// Feeds whole packets; returns the index of the packet that ended the
/// reply and the events.
fn run(t: &mut Tracker, packets: &[Vec<u8>]) -> Option<usize> {
    for (i, p) in packets.iter().enumerate() {
        let mut pre = p[..p.len().min(PREFIX)].to_vec();
        match t.packet(p.len(), &mut pre).expect("well formed") {
            Event::End => return Some(i),
            Event::More | Event::LocalInfile => {}
        }
    }
    None
}

#[test]
fn result_set_with_and_without_eof_packets() {
    let classic = vec![
        vec![2],
        b"col-a".to_vec(),
        b"col-b".to_vec(),
        eof(2),
        b"\x01x\x01y".to_vec(),
        vec![0xFE; 9], // a row whose first column is long, not an EOF
        eof(2 | STATUS_IN_TRANS),
    ];
    let mut t = Tracker::new(Expect::Results { cursor: false }, false);
    assert_eq!(run(&mut t, &classic), Some(6));
    assert_eq!(t.outcome.status, Some(3));
    assert_eq!(t.outcome.result_sets, 1);

    let modern = vec![vec![1], b"col".to_vec(), b"\x01x".to_vec(), ok_as_eof(2)];
    let mut t = Tracker::new(Expect::Results { cursor: false }, true);
    assert_eq!(run(&mut t, &modern), Some(3));
    assert_eq!(t.outcome.status, Some(2));
}

#[test]
fn multiple_results_and_errors() {
    // CALL: a result set, then the procedure's OK.
    let packets = vec![
        vec![1],
        b"c".to_vec(),
        eof(0),
        b"\x011".to_vec(),
        eof(2 | STATUS_MORE_RESULTS),
        ok(2, 7),
    ];
    let mut t = Tracker::new(Expect::Results { cursor: false }, false);
    assert_eq!(run(&mut t, &packets), Some(5));
    assert_eq!(t.outcome.insert_id, 7);
    // The last statement result is the procedure's OK: ROW_COUNT() is its
    // affected rows.
    assert!(t.outcome.last_is_ok);
    assert_eq!(t.outcome.affected, 1);
    // Two statements' OKs: the last one's affected rows, not their sum;
    // an OK then a result set ends in rows.
    let two_oks = |a: u8, b: u8| {
        let mut first = ok(2 | STATUS_MORE_RESULTS, 0);
        first[1] = a;
        let mut last = ok(2, 0);
        last[1] = b;
        vec![first, last]
    };
    let mut t = Tracker::new(Expect::Results { cursor: false }, false);
    assert_eq!(run(&mut t, &two_oks(1, 2)), Some(1));
    assert_eq!((t.outcome.affected, t.outcome.last_is_ok), (2, true));
    let mut then_rows = vec![ok(2 | STATUS_MORE_RESULTS, 0)];
    then_rows.extend([vec![1], b"c".to_vec(), eof(0), b"\x011".to_vec(), eof(2)]);
    let mut t = Tracker::new(Expect::Results { cursor: false }, false);
    assert_eq!(run(&mut t, &then_rows), Some(5));
    assert!(!t.outcome.last_is_ok);

    let mut err = vec![0xFF, 0x7A, 0x04, b'#'];
    err.extend_from_slice(b"42S02Table 'x' doesn't exist");
    let mut t = Tracker::new(Expect::Results { cursor: false }, true);
    assert_eq!(run(&mut t, &[err.clone()]), Some(0));
    assert_eq!(
        t.outcome.error,
        Some((1146, "Table 'x' doesn't exist".to_string()))
    );
    // An error in the middle of rows ends the reply too.
    let mut t = Tracker::new(Expect::Results { cursor: false }, true);
    assert_eq!(
        run(&mut t, &[vec![1], b"c".to_vec(), b"\x011".to_vec(), err]),
        Some(3)
    );
}

#[test]
fn prepare_replies_and_id_rewrite() {
    let mut head = vec![0x00];
    head.extend_from_slice(&77u32.to_le_bytes());
    head.extend_from_slice(&1u16.to_le_bytes()); // columns
    head.extend_from_slice(&2u16.to_le_bytes()); // params
    head.extend_from_slice(&[0, 0, 0]);
    let classic = [
        head.clone(),
        b"p1".to_vec(),
        b"p2".to_vec(),
        eof(2),
        b"c1".to_vec(),
        eof(2),
    ];
    let mut t = Tracker::new(Expect::Prepare, false);
    t.rewrite_id = Some(5);
    let mut first = head.clone();
    assert_eq!(t.packet(first.len(), &mut first), Ok(Event::More));
    assert_eq!(&first[1..5], &5u32.to_le_bytes());
    assert_eq!(run(&mut t, &classic[1..]), Some(4));
    assert_eq!(t.outcome.prepared, Some((77, 2, 1)));

    let mut t = Tracker::new(Expect::Prepare, true);
    assert_eq!(
        run(
            &mut t,
            &[head.clone(), b"p1".to_vec(), b"p2".to_vec(), b"c1".to_vec()]
        ),
        Some(3)
    );
    // No parameters, no columns: the header is the whole reply.
    let mut bare = head;
    bare[5..9].copy_from_slice(&[0, 0, 0, 0]);
    let mut t = Tracker::new(Expect::Prepare, false);
    assert_eq!(run(&mut t, &[bare]), Some(0));
}

#[test]
fn cursors_local_infile_and_continuations() {
    let mut t = Tracker::new(Expect::Results { cursor: true }, false);
    assert_eq!(
        run(
            &mut t,
            &[vec![1], b"c".to_vec(), eof(2 | STATUS_CURSOR_EXISTS)]
        ),
        Some(2)
    );
    let mut t = Tracker::new(Expect::Rows, false);
    assert_eq!(run(&mut t, &[b"\x011".to_vec(), eof(2 | 0x80)]), Some(1));

    let mut t = Tracker::new(Expect::Results { cursor: false }, true);
    let mut req = b"\xFBdata.csv".to_vec();
    assert_eq!(t.packet(req.len(), &mut req), Ok(Event::LocalInfile));
    assert_eq!(run(&mut t, &[ok(2, 0)]), Some(0));

    // A row of exactly 0xFFFFFF bytes continues in the next packet, whose
    // first byte is data even if it looks like an EOF.
    let mut t = Tracker::new(Expect::Results { cursor: false }, false);
    assert_eq!(run(&mut t, &[vec![1], b"c".to_vec(), eof(2)]), None);
    let mut big = vec![0x05; PREFIX];
    assert_eq!(t.packet(MAX_CHUNK, &mut big), Ok(Event::More));
    let mut tail = eof(2);
    assert_eq!(t.packet(tail.len(), &mut tail), Ok(Event::More));
    assert_eq!(run(&mut t, &[eof(2)]), Some(0));
}

proptest::proptest! {
    #[test]
    fn never_panics_on_any_bytes(
        packets in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40), 0..30),
        kind in 0u8..5,
        deprecate in proptest::prelude::any::<bool>(),
    ) {
        let expect = match kind {
            0 => Expect::Results { cursor: false },
            1 => Expect::Results { cursor: true },
            2 => Expect::Prepare,
            3 => Expect::FieldList,
            _ => Expect::Rows,
        };
        let mut t = Tracker::new(expect, deprecate);
        for mut p in packets {
            let len = p.len();
            if t.packet(len, &mut p).is_err() {
                break;
            }
        }
    }
}

proptest::proptest! {
    /// The forwarding loop passes plain rows by with `plain_row` instead
    /// of `packet`: a result set's header, then any packets (rows, EOFs,
    /// OKs, errors, long rows starting with 0xFE), give the same events
    /// and the same outcome either way.
    #[test]
    fn passing_plain_rows_by_changes_nothing(
        columns in 1u8..4,
        rows in proptest::collection::vec(
            (
                proptest::prop_oneof![
                    proptest::prelude::Just(0xFEu8),
                    proptest::prelude::Just(0xFFu8),
                    proptest::prelude::Just(0x00u8),
                    proptest::prelude::any::<u8>(),
                ],
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
            ),
            0..20,
        ),
        deprecate in proptest::prelude::any::<bool>(),
        expect_rows in proptest::prelude::any::<bool>(),
    ) {
        let expect = if expect_rows { Expect::Rows } else { Expect::Results { cursor: false } };
        let mut packets = vec![vec![columns]];
        packets.extend((0..columns).map(|_| b"col".to_vec()));
        if !deprecate {
            packets.push(eof(2));
        }
        packets.extend(rows.into_iter().map(|(first, rest)| [vec![first], rest].concat()));
        let mut a = Tracker::new(expect, deprecate);
        let mut b = Tracker::new(expect, deprecate);
        for p in &packets {
            let len = p.len();
            let ea = a.packet(len, &mut p.clone());
            let eb = if len > 0 && b.plain_row(len, p[0]) {
                Ok(Event::More)
            } else {
                b.packet(len, &mut p.clone())
            };
            proptest::prop_assert_eq!(&ea, &eb);
            if ea != Ok(Event::More) {
                break;
            }
        }
        proptest::prop_assert_eq!(&a.outcome, &b.outcome);
    }
}

#[test]
fn an_error_is_read_whole_so_its_message_is_never_cut() {
    // Its message may be repeated by the relay (a lease's COM_INIT_DB):
    // the prefix alone cut it at 55 characters.
    for expect in [
        Expect::Results { cursor: false },
        Expect::Prepare,
        Expect::Single,
    ] {
        let t = Tracker::new(expect, false);
        assert!(t.needs_whole(200, 0xFF), "{expect:?}");
        assert!(
            !t.needs_whole(MAX_CHUNK, 0xFF),
            "{expect:?}: a split packet is no ERR"
        );
        assert!(!t.needs_whole(200, 0x03), "{expect:?}");
    }
    let mut err = vec![0xFF, 0x14, 0x04, b'#'];
    err.extend_from_slice(b"42000Access denied for user 'nc3app'@'%' to database 'nc3_secret'");
    let mut t = Tracker::new(Expect::Single, false);
    assert_eq!(t.packet(err.len(), &mut err.clone()).ok(), Some(Event::End));
    assert_eq!(
        t.outcome.error,
        Some((
            1044,
            "Access denied for user 'nc3app'@'%' to database 'nc3_secret'".to_string()
        ))
    );
}

/// A reply that is only "this server will not serve now" is held back for
/// a retry when the caller asks; any other error, any later packet, or a
/// caller that did not ask, goes to the client as it came.
#[test]
fn a_refusal_of_service_is_held_back_only_when_asked() {
    let err = |code: u16| {
        let mut p = vec![0xFF, code as u8, (code >> 8) as u8, b'#'];
        p.extend_from_slice(b"08S01WSREP has not yet prepared node for application use");
        p
    };
    let table: &[(u16, bool, bool)] = &[
        // (code, caller asks, held)
        (1047, true, true),
        (1053, true, true),
        (1927, true, true),
        (1047, false, false),
        (1064, true, false),
        (1213, true, false),
        (1146, true, false),
    ];
    for &(code, asks, held) in table {
        let mut t = Tracker::new(Expect::Results { cursor: false }, true);
        t.hold_refusal = asks;
        let mut p = err(code);
        assert_eq!(t.packet(p.len(), &mut p).ok(), Some(Event::End));
        assert_eq!(t.held, held, "ERROR {code}, asked {asks}");
        assert_eq!(t.outcome.error.map(|e| e.0), Some(code));
    }
    // An error after a result set started is the statement's own.
    let mut t = Tracker::new(Expect::Results { cursor: false }, true);
    t.hold_refusal = true;
    let mut cols = vec![0x01];
    assert_eq!(t.packet(1, &mut cols).ok(), Some(Event::More));
    let mut def = vec![0x03, b'd', b'e', b'f'];
    let _ = t.packet(def.len(), &mut def);
    let mut p = err(1053);
    let _ = t.packet(p.len(), &mut p);
    assert!(!t.held, "an ERR inside a result set is never held");
}
