//! Follows a server's reply to one command packet by packet, without
//! decoding rows: where the reply ends, whether more result sets follow,
//! the final status flags (in a transaction or not), errors, and the ids a
//! relay must see (a prepared statement's id, the last insert id).
//!
//! It is fed each physical packet's length and the first bytes of its
//! payload ([`PREFIX`] at most), so large rows stream through untouched.

use sqlfleet_wire::packet::lenenc;
use sqlfleet_wire::packet::MAX_CHUNK;

use crate::protocol::track::Change;

/// How many payload bytes the tracker needs to see of each packet.
pub const PREFIX: usize = 64;

pub const STATUS_IN_TRANS: u16 = 0x0001;
pub const STATUS_AUTOCOMMIT: u16 = 0x0002;
pub const STATUS_MORE_RESULTS: u16 = 0x0008;
pub const STATUS_CURSOR_EXISTS: u16 = 0x0040;
pub const STATUS_IN_TRANS_READONLY: u16 = 0x2000;

/// The shape of reply a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// OK, ERR, LOCAL INFILE request or result sets (COM_QUERY,
    /// COM_STMT_EXECUTE); `cursor` when the execute opened a cursor.
    Results { cursor: bool },
    /// COM_STMT_PREPARE: OK with parameter and column definitions.
    Prepare,
    /// COM_FIELD_LIST: column definitions up to EOF.
    FieldList,
    /// COM_STMT_FETCH: rows up to EOF.
    Rows,
    /// One packet (COM_PING, COM_INIT_DB, COM_STATISTICS, ...).
    Single,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    First,
    Columns(u64),
    ColumnsEof,
    Rows,
    PrepParams(u64, u64),
    PrepParamsEof(u64),
    PrepColumns(u64),
    PrepColumnsEof,
    FieldList,
    Single,
}

/// What one reply ended with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Status flags of the final OK/EOF (none after an error).
    pub status: Option<u16>,
    /// ERR code and message.
    pub error: Option<(u16, String)>,
    pub insert_id: u64,
    /// Rows the last OK says it affected (a text of several statements,
    /// or a CALL, ends with its last statement's: what ROW_COUNT() and the
    /// client library's affected rows say).
    pub affected: u64,
    /// The last statement result was an OK after result sets (a CALL's
    /// own, or a later statement's in a text of several): ROW_COUNT() is
    /// its affected rows, not -1.
    pub last_is_ok: bool,
    /// COM_STMT_PREPARE: (statement id as the server sent it, params, columns).
    pub prepared: Option<(u32, u16, u16)>,
    /// Result sets seen (0 for an OK-only reply).
    pub result_sets: u32,
    /// Rows seen, over all result sets.
    pub rows: u64,
    /// Rows of the last result set (a text of several SELECTs leaves
    /// FOUND_ROWS() at its last one's).
    pub last_rows: u64,
    /// Statement results that ended with a status (an OK, or a result
    /// set's end): 1 for one statement, more for a text of several or a
    /// CALL. How many statements the server ran, as it says.
    pub replies: u32,
    /// Warnings of the last OK or EOF.
    pub warnings: u16,
    /// Session-state changes the server reported, over the whole reply.
    pub changes: Vec<Change>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The reply goes on.
    More,
    /// The server asks for a local file; the client's data comes next,
    /// then the reply goes on.
    LocalInfile,
    /// That was the last packet of the reply.
    End,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed reply from the backend: {0}")]
pub struct ReplyError(pub &'static str);

#[derive(Debug, Clone)]
pub struct Tracker {
    deprecate_eof: bool,
    expect: Expect,
    phase: Phase,
    /// The previous physical packet was full: this one continues it.
    continuation: bool,
    /// The statement id to show the client in a prepare reply.
    pub rewrite_id: Option<u32>,
    /// The connection has CLIENT_SESSION_TRACK: OKs are read whole.
    track: bool,
    /// How OKs are rewritten for the client (see [`ClientTracking`]).
    client: ClientTracking,
    /// The packet just seen, rewritten: forward this payload instead.
    pub replacement: Option<Vec<u8>>,
    /// When set, every byte forwarded to the client is copied here too
    /// (the relay records a reply it may give again itself).
    pub capture: Option<Vec<u8>>,
    /// A capture that grows past this many bytes is dropped (a reply too
    /// big to keep is not held whole for nothing).
    pub capture_max: usize,
    /// Set by the caller: a reply that is only an ERR saying the server
    /// will not serve now ([`refuses_service`]) is held back, not
    /// forwarded (the caller retries elsewhere, or sends it itself).
    pub hold_refusal: bool,
    /// The reply was such an ERR and was held back.
    pub held: bool,
    /// When set, the reply's answer is digested as it passes
    /// (`protocol/digest.rs`; the forwarding loop feeds it).
    pub digest: Option<crate::protocol::digest::ReplyDigest>,
    /// The packet just taken was a status packet (OK, EOF, ERR): not part
    /// of a digested answer.
    pub last_status: bool,
    pub outcome: Outcome,
}

/// Server errors that mean "not this server, not now" rather than
/// anything about the statement: a Galera node outside the Primary
/// Component or rejecting queries (1047), a server shutting down (1053),
/// a connection killed by the server's shutdown or `wsrep_reject_queries
/// = ALL_KILL` (1927). A read that gets one as its whole reply ran
/// nowhere and may run on another server.
pub fn refuses_service(code: u16) -> bool {
    matches!(code, 1047 | 1053 | 1927)
}

/// What a client sees of the tracker data in a tracking connection's OKs.
#[derive(Debug, Clone)]
pub enum ClientTracking {
    /// As the server sent it (the client's own tracking settings are on
    /// the connection).
    Raw,
    /// None: the client did not ask for CLIENT_SESSION_TRACK.
    Strip,
    /// What a new session of the client's would track.
    Filter(std::sync::Arc<crate::protocol::track::TrackView>),
}

fn u16_at(p: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*p.get(i)?, *p.get(i + 1)?]))
}

impl Outcome {
    /// What a reply's digest counts of it (`protocol/digest.rs`).
    pub fn answer(&self) -> crate::protocol::digest::Answer {
        crate::protocol::digest::Answer {
            affected: self.affected,
            insert_id: self.insert_id,
            error: self.error.as_ref().map_or(0, |e| e.0),
            result_sets: self.result_sets,
            rows: self.rows,
        }
    }
}

fn err_fields(p: &[u8]) -> (u16, String) {
    let code = u16_at(p, 1).unwrap_or(0);
    let msg = if p.get(3) == Some(&b'#') {
        p.get(9..).unwrap_or_default()
    } else {
        p.get(3..).unwrap_or_default()
    };
    (code, String::from_utf8_lossy(msg).into_owned())
}

impl Tracker {
    pub fn new(expect: Expect, deprecate_eof: bool) -> Tracker {
        Tracker {
            deprecate_eof,
            expect,
            phase: match expect {
                Expect::Results { .. } | Expect::Prepare => Phase::First,
                Expect::FieldList => Phase::FieldList,
                Expect::Rows => Phase::Rows,
                Expect::Single => Phase::Single,
            },
            continuation: false,
            rewrite_id: None,
            track: false,
            client: ClientTracking::Raw,
            replacement: None,
            capture: None,
            capture_max: usize::MAX,
            hold_refusal: false,
            held: false,
            digest: None,
            last_status: false,
            outcome: Outcome::default(),
        }
    }

    /// Session tracking is on for the connection (`track`), and what the
    /// client is to see of it.
    pub fn tracking(mut self, track: bool, client: ClientTracking) -> Tracker {
        self.track = track;
        self.client = if track { client } else { ClientTracking::Raw };
        self
    }

    /// Must the next packet (of payload length `len`, first byte `first`)
    /// be handed over whole? True for an OK that may carry tracker data.
    /// Whether the packet of `len` bytes starting with `first` is one more
    /// row of the result set being read, whole and with no marker byte
    /// (0xFE ends the rows, 0xFF is an error): counted here, so the
    /// forwarding loop passes it without a closer look ([`Tracker::packet`]
    /// would do the same with it).
    #[inline]
    pub fn plain_row(&mut self, len: usize, first: u8) -> bool {
        if self.phase == Phase::Rows
            && !self.continuation
            && len > 0
            && len < MAX_CHUNK
            && first != 0xFE
            && first != 0xFF
        {
            self.outcome.rows += 1;
            self.outcome.last_rows += 1;
            return true;
        }
        false
    }

    pub fn needs_whole(&self, len: usize, first: u8) -> bool {
        if self.continuation || len >= MAX_CHUNK {
            return false;
        }
        // An ERR (no row starts with 0xFF) is read whole: the relay repeats
        // its message in errors of its own (a lease's COM_INIT_DB, a
        // prepare), which were cut at the prefix ("... to database 'nc3_se").
        if first == 0xFF {
            return true;
        }
        if !self.track {
            return false;
        }
        match self.phase {
            Phase::First => first == 0x00 && self.expect != Expect::Prepare,
            Phase::Single => first == 0x00,
            Phase::Rows | Phase::FieldList => first == 0xFE && self.deprecate_eof,
            _ => false,
        }
    }

    /// An OK packet (or OK ending a result set): its fields, changes and,
    /// for a client without tracking, its rewritten form.
    fn take_ok(&mut self, p: &[u8]) -> Option<u16> {
        let ok = crate::protocol::track::parse_ok(p, self.track)?;
        let rewritten = match &self.client {
            ClientTracking::Raw => None,
            // Info is length-prefixed and state data may follow: rewrite.
            ClientTracking::Strip => crate::protocol::track::strip(p),
            ClientTracking::Filter(view) => crate::protocol::track::filter(p, view),
        };
        self.replacement = rewritten.filter(|s| s.as_slice() != p);
        self.outcome.affected = ok.affected;
        if ok.insert_id != 0 {
            self.outcome.insert_id = ok.insert_id;
        }
        self.outcome.warnings = ok.warnings;
        self.outcome.changes.extend(ok.changes);
        Some(ok.status)
    }

    /// Is this an EOF (or OK-as-EOF) terminator rather than a row?
    fn is_eof(&self, len: usize, p: &[u8]) -> bool {
        p.first() == Some(&0xFE)
            && if self.deprecate_eof {
                len < MAX_CHUNK
            } else {
                len < 9
            }
    }

    /// Status flags (and warnings) of a terminator packet.
    fn eof_status(&mut self, len: usize, p: &[u8]) -> Option<u16> {
        // With CLIENT_DEPRECATE_EOF every terminator is an OK packet.
        if len < 9 && !self.deprecate_eof {
            self.outcome.warnings = u16_at(p, 1).unwrap_or(0);
            u16_at(p, 3)
        } else {
            self.take_ok(p)
        }
    }

    fn end_with_status(&mut self, status: Option<u16>) -> Event {
        let s = status.unwrap_or(0);
        self.outcome.status = status;
        self.outcome.replies += 1;
        if s & STATUS_MORE_RESULTS != 0 {
            self.phase = Phase::First;
            Event::More
        } else {
            Event::End
        }
    }

    /// Takes one physical packet: its payload length and its first
    /// `min(len, PREFIX)` bytes (which a prepare reply may have rewritten).
    pub fn packet(&mut self, len: usize, p: &mut [u8]) -> Result<Event, ReplyError> {
        let was_continuation = self.continuation;
        self.continuation = len == MAX_CHUNK;
        if was_continuation {
            self.last_status = false;
            return Ok(Event::More);
        }
        self.last_status = match self.phase {
            Phase::Single | Phase::ColumnsEof => true,
            Phase::First => matches!(p.first(), Some(0x00 | 0xFF)),
            Phase::Rows | Phase::FieldList => p.first() == Some(&0xFF) || self.is_eof(len, p),
            _ => false,
        };
        match self.phase {
            Phase::Single => {
                if p.first() == Some(&0xFF) {
                    self.outcome.error = Some(err_fields(p));
                } else if p.first() == Some(&0x00) {
                    self.outcome.status = self.take_ok(p);
                } else if p.first() == Some(&0xFE) && len < 9 {
                    self.outcome.warnings = u16_at(p, 1).unwrap_or(0);
                    self.outcome.status = u16_at(p, 3);
                }
                Ok(Event::End)
            }
            Phase::First => match p.first() {
                None => Err(ReplyError("empty packet where a reply should start")),
                Some(0xFF) => {
                    let e = err_fields(p);
                    self.held = self.hold_refusal && refuses_service(e.0);
                    self.outcome.error = Some(e);
                    Ok(Event::End)
                }
                Some(0x00) if self.expect == Expect::Prepare => {
                    let id = p.get(1..5).ok_or(ReplyError("short prepare reply"))?;
                    let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
                    let cols = u16_at(p, 5).ok_or(ReplyError("short prepare reply"))?;
                    let params = u16_at(p, 7).ok_or(ReplyError("short prepare reply"))?;
                    self.outcome.prepared = Some((id, params, cols));
                    // (reserved byte, then the warning count)
                    self.outcome.warnings = u16_at(p, 10).unwrap_or(0);
                    if let Some(to) = self.rewrite_id {
                        p[1..5].copy_from_slice(&to.to_le_bytes());
                    }
                    self.phase = Phase::PrepParams(params as u64, cols as u64);
                    self.after_prep_defs()
                }
                Some(0x00) => {
                    let status = self.take_ok(p).ok_or(ReplyError("short OK packet"))?;
                    self.outcome.last_is_ok = true;
                    Ok(self.end_with_status(Some(status)))
                }
                Some(0xFB) if matches!(self.expect, Expect::Results { .. }) => {
                    Ok(Event::LocalInfile)
                }
                Some(_) => {
                    let mut i = 0;
                    let n = lenenc(p, &mut i).map_err(|_| ReplyError("bad column count"))?;
                    if n == 0 {
                        return Err(ReplyError("zero column count"));
                    }
                    self.outcome.result_sets += 1;
                    self.outcome.last_rows = 0;
                    self.phase = Phase::Columns(n);
                    Ok(Event::More)
                }
            },
            Phase::Columns(n) => {
                self.phase = match (n - 1, self.deprecate_eof) {
                    (0, true) => Phase::Rows,
                    (0, false) => Phase::ColumnsEof,
                    (left, _) => Phase::Columns(left),
                };
                Ok(Event::More)
            }
            Phase::ColumnsEof => {
                if !self.is_eof(len, p) {
                    return Err(ReplyError("column definitions not followed by EOF"));
                }
                let status = self.eof_status(len, p);
                let cursor = matches!(self.expect, Expect::Results { cursor: true });
                if cursor && status.unwrap_or(0) & STATUS_CURSOR_EXISTS != 0 {
                    self.outcome.status = status;
                    return Ok(Event::End);
                }
                self.phase = Phase::Rows;
                Ok(Event::More)
            }
            Phase::Rows | Phase::FieldList => {
                if p.first() == Some(&0xFF) {
                    self.outcome.error = Some(err_fields(p));
                    return Ok(Event::End);
                }
                if self.is_eof(len, p) {
                    let status = self.eof_status(len, p);
                    if self.phase == Phase::FieldList || self.expect == Expect::Rows {
                        self.outcome.status = status;
                        return Ok(Event::End);
                    }
                    self.outcome.last_is_ok = false;
                    return Ok(self.end_with_status(status));
                }
                self.outcome.rows += 1;
                self.outcome.last_rows += 1;
                Ok(Event::More)
            }
            Phase::PrepParams(left, cols) => {
                self.phase = Phase::PrepParams(left.saturating_sub(1), cols);
                if left == 1 {
                    self.phase = if self.deprecate_eof {
                        Phase::PrepColumns(cols)
                    } else {
                        Phase::PrepParamsEof(cols)
                    };
                    return self.after_prep_defs();
                }
                Ok(Event::More)
            }
            Phase::PrepParamsEof(cols) => {
                if !self.is_eof(len, p) {
                    return Err(ReplyError("parameter definitions not followed by EOF"));
                }
                self.phase = Phase::PrepColumns(cols);
                self.after_prep_defs()
            }
            Phase::PrepColumns(left) => {
                self.phase = if left == 1 {
                    if self.deprecate_eof {
                        return Ok(Event::End);
                    }
                    Phase::PrepColumnsEof
                } else {
                    Phase::PrepColumns(left - 1)
                };
                Ok(Event::More)
            }
            Phase::PrepColumnsEof => {
                if !self.is_eof(len, p) {
                    return Err(ReplyError("column definitions not followed by EOF"));
                }
                Ok(Event::End)
            }
        }
    }

    /// After a prepare reply's header or a definitions block: skip empty
    /// blocks, end when nothing is left.
    fn after_prep_defs(&mut self) -> Result<Event, ReplyError> {
        loop {
            match self.phase {
                Phase::PrepParams(0, cols) => self.phase = Phase::PrepColumns(cols),
                Phase::PrepColumns(0) => return Ok(Event::End),
                _ => return Ok(Event::More),
            }
        }
    }
}

#[cfg(test)]
mod tests;
