//! OK packets read whole: affected rows, insert id, status, warnings and
//! the session-state tracker data a server adds when the connection has
//! CLIENT_SESSION_TRACK (MariaDB 10.2+, MySQL 5.7+). The relay turns
//! tracking on for every backend connection so that the server, not the
//! statement text, says what changed in a session: system variables with
//! their new values, the default database, and "something else changed"
//! (user variables, temporary tables, prepared statements...).
//!
//! For a client that did not ask for session tracking the same OK is
//! rewritten to the shape it expects ([`strip`]); for one that did, to
//! what its own session tracks ([`filter`] with a [`TrackView`]: the
//! server's settings a new session starts with), since the relay's
//! connections track everything.
//!
//! Written by hand because it sits on the forwarding path and must accept
//! any bytes: every read is bounds-checked and a malformed OK is `None`.

use sqlfleet_wire::packet::lenenc;

/// Status flag: the OK carries session-state data.
pub const STATUS_SESSION_STATE_CHANGED: u16 = 0x4000;

/// Tracker entry types.
const SYSTEM_VARIABLES: u8 = 0;
const SCHEMA: u8 = 1;
const STATE_CHANGE: u8 = 2;

/// One change the server reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A session system variable and its new value, as text.
    SysVar(String, String),
    /// The new default database ("" when there is none).
    Schema(String),
    /// Session state changed in some way (user variables, temporary
    /// tables, prepared statements, or any of the above).
    State,
    /// A tracker type the relay does not interpret (GTIDs, transaction
    /// characteristics or state).
    Other(u8),
}

/// An OK packet's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OkPacket {
    pub affected: u64,
    pub insert_id: u64,
    pub status: u16,
    pub warnings: u16,
    pub changes: Vec<Change>,
}

fn lenenc_bytes<'a>(p: &'a [u8], i: &mut usize) -> Option<&'a [u8]> {
    sqlfleet_wire::packet::lenenc_bytes(p, i).ok()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Where an OK's parts are: the offset just past the warnings, and the
/// info text's range when the packet has the tracked layout.
struct Layout {
    ok: OkPacket,
    after_warnings: usize,
    info: std::ops::Range<usize>,
}

fn layout(p: &[u8], session_track: bool) -> Option<Layout> {
    let mut i = 1;
    let affected = lenenc(p, &mut i).ok()?;
    let insert_id = lenenc(p, &mut i).ok()?;
    let status = u16::from_le_bytes([*p.get(i)?, *p.get(i + 1)?]);
    let warnings = u16::from_le_bytes([*p.get(i + 2)?, *p.get(i + 3)?]);
    i += 4;
    let after_warnings = i;
    let mut ok = OkPacket {
        affected,
        insert_id,
        status,
        warnings,
        changes: Vec::new(),
    };
    if !session_track {
        return Some(Layout {
            ok,
            after_warnings,
            info: i..p.len(),
        });
    }
    let mut info = i..i;
    if i < p.len() {
        let start = i;
        let s = lenenc_bytes(p, &mut i)?;
        info = (i - s.len()).max(start)..i;
    }
    if status & STATUS_SESSION_STATE_CHANGED != 0 && i < p.len() {
        let all = lenenc_bytes(p, &mut i)?;
        let mut j = 0;
        while j < all.len() {
            let kind = all[j];
            j += 1;
            let data = lenenc_bytes(all, &mut j)?;
            let mut k = 0;
            ok.changes.push(match kind {
                SYSTEM_VARIABLES => {
                    let name = lenenc_bytes(data, &mut k)?;
                    let value = lenenc_bytes(data, &mut k)?;
                    Change::SysVar(text(name).to_ascii_lowercase(), text(value))
                }
                SCHEMA => Change::Schema(text(lenenc_bytes(data, &mut k)?)),
                STATE_CHANGE => Change::State,
                other => Change::Other(other),
            });
        }
    }
    Some(Layout {
        ok,
        after_warnings,
        info,
    })
}

/// Reads a whole OK packet (header 0x00, or 0xFE for an OK that ends a
/// result set); `session_track` when the connection has CLIENT_SESSION_TRACK.
pub fn parse_ok(p: &[u8], session_track: bool) -> Option<OkPacket> {
    layout(p, session_track).map(|l| l.ok)
}

/// What a client's session reports in its OKs: the session tracking a new
/// session starts with (the server's globals), read on the relay's
/// connection before it turns tracking up to everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackView {
    /// Variables reported, lower case; `None`: every one (`*`).
    pub vars: Option<Vec<String>>,
    pub schema: bool,
    pub state_change: bool,
}

impl TrackView {
    /// From the values of `session_track_system_variables`,
    /// `session_track_schema` and `session_track_state_change`.
    pub fn from_values(vars: &str, schema: &str, state_change: &str) -> TrackView {
        let on = |v: &str| v == "1" || v.eq_ignore_ascii_case("ON");
        let mut list: Vec<String> = Vec::new();
        let mut all = false;
        for v in vars.split(',').map(|v| v.trim().to_ascii_lowercase()) {
            if v == "*" {
                all = true;
            } else if !v.is_empty() && !list.contains(&v) {
                list.push(v);
            }
        }
        TrackView {
            vars: (!all).then_some(list),
            schema: on(schema),
            state_change: on(state_change),
        }
    }

    /// The view after a tracker setting the server reported changed (a
    /// session's own `SET session_track_... = ...`); other names change
    /// nothing.
    fn apply(&mut self, name: &str, value: &str) {
        let on = value == "1" || value.eq_ignore_ascii_case("ON");
        match name {
            "session_track_state_change" => self.state_change = on,
            "session_track_schema" => self.schema = on,
            "session_track_system_variables" => {
                self.vars = TrackView::from_values(value, "OFF", "OFF").vars;
            }
            _ => {}
        }
    }
}

/// One tracker entry of an OK's state block: its type, its bytes
/// (length-prefixed data), and the variable's name for a system-variable
/// entry.
struct Entry<'a> {
    kind: u8,
    bytes: &'a [u8],
    /// A system variable's name and value.
    name: Option<String>,
    value: Option<String>,
}

fn entries(all: &[u8]) -> Option<Vec<Entry<'_>>> {
    let mut out = Vec::new();
    let mut j = 0;
    while j < all.len() {
        let kind = all[j];
        j += 1;
        let start = j;
        let data = lenenc_bytes(all, &mut j)?;
        let (name, value) = if kind == SYSTEM_VARIABLES {
            let mut k = 0;
            let name = text(lenenc_bytes(data, &mut k)?).to_ascii_lowercase();
            (Some(name), lenenc_bytes(data, &mut k).map(text))
        } else {
            (None, None)
        };
        out.push(Entry {
            kind,
            bytes: &all[start..j],
            name,
            value,
        });
    }
    Some(out)
}

/// The same OK for a tracking client whose session tracks `view`: the
/// entries it would not get dropped, and no state block (nor the flag)
/// when nothing is left. The variables keep the server's order, which is
/// no promise: two direct sessions may list the same changes in different
/// orders. `None` when
/// the packet is not a well-formed tracked OK.
pub fn filter(p: &[u8], view: &TrackView) -> Option<Vec<u8>> {
    let l = layout(p, true)?;
    if l.ok.status & STATUS_SESSION_STATE_CHANGED == 0 || l.info.end >= p.len() {
        return Some(p.to_vec());
    }
    let mut i = l.info.end;
    let all = lenenc_bytes(p, &mut i)?;
    if i != p.len() {
        return None;
    }
    let entries = entries(all)?;
    // A statement that changes the client's own tracking (`SET
    // session_track_state_change = 1`) gets its OK as the server words it:
    // by the settings the statement leaves.
    let amended;
    let view = if entries.iter().any(|e| {
        e.name
            .as_deref()
            .is_some_and(|n| n.starts_with("session_track_"))
    }) {
        let mut v = view.clone();
        for e in &entries {
            if let (Some(n), Some(value)) = (&e.name, &e.value) {
                v.apply(n, value);
            }
        }
        amended = v;
        &amended
    } else {
        view
    };
    let kept: Vec<Entry> = entries
        .into_iter()
        .filter(|e| match e.kind {
            SYSTEM_VARIABLES => match (&view.vars, &e.name) {
                (None, _) => true,
                (Some(list), Some(n)) => list.contains(n),
                (Some(_), None) => false,
            },
            SCHEMA => view.schema,
            STATE_CHANGE => view.state_change,
            _ => true,
        })
        .collect();
    let mut out = Vec::with_capacity(p.len());
    out.extend_from_slice(p.get(..l.info.end)?);
    if kept.is_empty() {
        let st = l.after_warnings - 4;
        let status = l.ok.status & !STATUS_SESSION_STATE_CHANGED;
        out[st..st + 2].copy_from_slice(&status.to_le_bytes());
        // The info string stays length-prefixed; an empty one at the very
        // end is left out, as the server leaves it.
        if l.info.is_empty() && out.len() == l.after_warnings + 1 {
            out.truncate(l.after_warnings);
        }
        return Some(out);
    }
    let mut block = Vec::with_capacity(all.len());
    for e in &kept {
        block.push(e.kind);
        block.extend_from_slice(e.bytes);
    }
    sqlfleet_wire::packet::put_lenenc(&mut out, block.len() as u64);
    out.extend_from_slice(&block);
    Some(out)
}

/// The same OK for a client without CLIENT_SESSION_TRACK, as the server
/// writes it to such a client: the info text, if any, still
/// length-prefixed (MariaDB and MySQL store it so in both layouts, and
/// libmariadb and mysqlnd read it so; the protocol's documentation says
/// "string to the end"), no state data, the state-changed flag cleared.
pub fn strip(p: &[u8]) -> Option<Vec<u8>> {
    let l = layout(p, true)?;
    let mut out = Vec::with_capacity(l.after_warnings + 9 + l.info.len());
    out.extend_from_slice(p.get(..l.after_warnings)?);
    let st = l.after_warnings - 4;
    let status = l.ok.status & !STATUS_SESSION_STATE_CHANGED;
    out[st..st + 2].copy_from_slice(&status.to_le_bytes());
    let info = p.get(l.info)?;
    if !info.is_empty() {
        sqlfleet_wire::packet::put_lenenc(&mut out, info.len() as u64);
        out.extend_from_slice(info);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lenenc_str(out: &mut Vec<u8>, s: &[u8]) {
        assert!(s.len() < 251);
        out.push(s.len() as u8);
        out.extend_from_slice(s);
    }

    fn tracked_ok(info: &[u8], entries: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut p = vec![0x00, 3, 0];
        let status = 0x0002
            | if entries.is_empty() {
                0
            } else {
                STATUS_SESSION_STATE_CHANGED
            };
        p.extend_from_slice(&status.to_le_bytes());
        p.extend_from_slice(&1u16.to_le_bytes());
        lenenc_str(&mut p, info);
        if !entries.is_empty() {
            let mut all = Vec::new();
            for (k, d) in entries {
                all.push(*k);
                lenenc_str(&mut all, d);
            }
            lenenc_str(&mut p, &all);
        }
        p
    }

    #[test]
    fn reads_variables_schema_and_state() {
        let mut var = Vec::new();
        lenenc_str(&mut var, b"TIME_ZONE");
        lenenc_str(&mut var, b"+05:00");
        let mut db = Vec::new();
        lenenc_str(&mut db, b"shop");
        let p = tracked_ok(
            b"",
            &[
                (0, var),
                (1, db),
                (2, b"\x011".to_vec()),
                (5, b"\x08________".to_vec()),
            ],
        );
        let ok = parse_ok(&p, true).expect("ok");
        assert_eq!(ok.affected, 3);
        assert_eq!(ok.warnings, 1);
        assert_eq!(
            ok.changes,
            vec![
                Change::SysVar("time_zone".into(), "+05:00".into()),
                Change::Schema("shop".into()),
                Change::State,
                Change::Other(5)
            ]
        );
    }

    #[test]
    fn strip_keeps_info_and_drops_state() {
        let p = tracked_ok(b"Rows matched: 3", &[(2, b"\x011".to_vec())]);
        let s = strip(&p).expect("strip");
        assert_eq!(parse_ok(&s, false).expect("ok").status, 0x0002);
        // Length-prefixed, as the server writes it without tracking.
        assert!(s.ends_with(b"\x0fRows matched: 3"));
        assert_eq!(s.len(), 7 + 1 + 15);
        // An OK without info or state is unchanged.
        let bare = vec![0x00, 0, 0, 2, 0, 0, 0];
        assert_eq!(strip(&bare), Some(bare.clone()));
    }

    fn sysvar(name: &str, value: &str) -> (u8, Vec<u8>) {
        let mut d = Vec::new();
        lenenc_str(&mut d, name.as_bytes());
        lenenc_str(&mut d, value.as_bytes());
        (SYSTEM_VARIABLES, d)
    }

    #[test]
    fn filter_keeps_what_the_clients_session_tracks() {
        let view = TrackView::from_values(
            "autocommit,character_set_client,character_set_connection,character_set_results,time_zone",
            "ON",
            "OFF",
        );
        let server = tracked_ok(
            b"",
            &[
                sysvar("character_set_client", "utf8mb4"),
                sysvar("character_set_results", "utf8mb4"),
                sysvar("sql_mode", "ANSI"),
                sysvar("character_set_connection", "utf8mb4"),
                (SCHEMA, vec![2, b'd', b'b']),
                (STATE_CHANGE, vec![1, b'1']),
            ],
        );
        let want = tracked_ok(
            b"",
            &[
                sysvar("character_set_client", "utf8mb4"),
                sysvar("character_set_results", "utf8mb4"),
                sysvar("character_set_connection", "utf8mb4"),
                (SCHEMA, vec![2, b'd', b'b']),
            ],
        );
        assert_eq!(filter(&server, &view), Some(want));
        // Nothing left: no state block, no flag, no empty info string.
        let only_untracked = tracked_ok(
            b"",
            &[sysvar("sql_mode", "ANSI"), (STATE_CHANGE, vec![1, b'1'])],
        );
        let bare = filter(&only_untracked, &view).expect("filtered");
        assert_eq!(bare, vec![0x00, 3, 0, 0x02, 0x00, 1, 0]);
        // Every variable tracked: the entries stay.
        let all = TrackView::from_values("*", "ON", "ON");
        assert_eq!(filter(&server, &all), Some(server.clone()));
    }

    #[test]
    fn a_statement_that_turns_tracking_on_gets_its_own_ok_tracked() {
        let view = TrackView::from_values("autocommit", "ON", "OFF");
        // SET session_track_state_change = 1 on a connection tracking '*'.
        let server = tracked_ok(
            b"",
            &[
                sysvar("session_track_state_change", "ON"),
                (STATE_CHANGE, vec![1, b'1']),
            ],
        );
        let want = tracked_ok(b"", &[(STATE_CHANGE, vec![1, b'1'])]);
        assert_eq!(filter(&server, &view), Some(want));
        // ... and one that turns it off loses the entry, as on the server.
        let on = TrackView::from_values("autocommit", "ON", "ON");
        let off = tracked_ok(
            b"",
            &[
                sysvar("session_track_state_change", "OFF"),
                (STATE_CHANGE, vec![1, b'1']),
            ],
        );
        let bare = filter(&off, &on).expect("filtered");
        assert_eq!(bare, vec![0x00, 3, 0, 0x02, 0x00, 1, 0]);
        // A list of variables set: its own entries follow the new list.
        let vars = tracked_ok(
            b"",
            &[
                sysvar("session_track_system_variables", "sql_mode"),
                sysvar("sql_mode", "ANSI"),
            ],
        );
        let want = tracked_ok(b"", &[sysvar("sql_mode", "ANSI")]);
        assert_eq!(filter(&vars, &view), Some(want));
    }

    proptest! {
        #[test]
        fn filter_never_panics(p in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = filter(&p, &TrackView::from_values("autocommit", "ON", "OFF"));
        }
    }

    proptest! {
        #[test]
        fn never_panics(p in proptest::collection::vec(any::<u8>(), 0..80), t in any::<bool>()) {
            let _ = parse_ok(&p, t);
            let _ = strip(&p);
        }
    }
}
