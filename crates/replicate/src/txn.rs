//! Binlog events of one source → transactions ready for the target.
//!
//! A MariaDB transaction starts at its GTID event and ends at its XID
//! event, a `COMMIT` query, or — for a standalone group (DDL, a statement
//! on a non-transactional table) — after its single statement. Row events
//! are kept as raw bytes grouped per statement (table maps + rows up to
//! the end-of-statement flag) for a `BINLOG` statement on the target;
//! table maps are filtered and renamed here. Statements keep the session
//! state the source ran them with (status variables, INSERT_ID, RAND
//! seeds, user variables). Anything the applier could not reproduce
//! exactly (temporary tables, LOAD DATA, XA) marks the transaction unsupported: its
//! stream stops there with that reason, never applies it differently.

use std::collections::{BTreeSet, HashMap};

use mysql_common::binlog::consts::{BinlogChecksumAlg, BinlogVersion, EventType};
use mysql_common::binlog::decimal::Decimal;
use mysql_common::binlog::events::{Event, QueryEvent, RotateEvent};
use mysql_common::constants::ItemResult;
use mysql_common::proto::MySerialize;

use crate::config::DbMap;
use crate::context::{self, Context};
use crate::event::{self, mariadb};
use crate::gtid::flags::{COMPLETED_XA, PREPARED_XA};
use crate::gtid::{self, decode_gtid_event, Gtid, XaId};
use crate::load_query::{self, LOAD_REFUSAL};
use crate::server_written;
use crate::sqltext;
use sqlfleet_wire::binlog_compressed as compressed;

/// The session a statement ran in on the source.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Session {
    pub timestamp: u32,
    pub thread_id: u32,
    /// What its status variables say (see [`context`]).
    pub ctx: Context,
    pub insert_id: Option<u64>,
    pub last_insert_id: Option<u64>,
    pub rand: Option<(u64, u64)>,
    /// User variables the statement reads, with the values they had.
    pub user_vars: Vec<(String, VarValue)>,
}

/// A user variable's value as the source logged it (User_var event).
#[derive(Debug, Clone, PartialEq)]
pub enum VarValue {
    Null,
    Int(i64),
    UInt(u64),
    Real(f64),
    /// In decimal notation, exact.
    Decimal(String),
    /// Bytes in the character set of collation id `collation`.
    Str {
        collation: u32,
        bytes: Vec<u8>,
    },
}

impl Eq for VarValue {}

/// The data types whose name MariaDB writes after a User_var event's
/// flags (flag 0x02, then the name's length and the name): the geometry
/// family. Their value is the server's own geometry bytes, which the
/// variable holds as a binary string too (as `mariadb-binlog` writes it).
const GEOMETRY_TYPE_NAMES: &[&[u8]] = &[
    b"geometry",
    b"point",
    b"linestring",
    b"polygon",
    b"multipoint",
    b"multilinestring",
    b"multipolygon",
    b"geometrycollection",
];

/// A User_var event's flag: the value is unsigned.
const USER_VAR_UNSIGNED: u8 = 1;
/// A User_var event's flag (MariaDB): a data type name follows.
const USER_VAR_TYPE_NAME: u8 = 2;

/// Reads a User_var event's body (name length, name, NULL flag; then the
/// value's result type, collation, length, bytes and flags, and — MariaDB,
/// for a geometry value — its data type's name). Read here rather than by
/// the binlog library, which refuses the type name ("bytes remaining").
fn user_var(data: &[u8]) -> Result<(String, VarValue), String> {
    let short = || "a User_var event cut short".to_string();
    let u32_at = |at: usize| -> Result<u32, String> {
        data.get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
            .ok_or_else(short)
    };
    let name_len = u32_at(0)? as usize;
    let name_bytes = data.get(4..4 + name_len).ok_or_else(short)?;
    let name = String::from_utf8_lossy(name_bytes).into_owned();
    let mut at = 4 + name_len;
    if *data.get(at).ok_or_else(short)? != 0 {
        // (MariaDB writes nothing after a NULL's flag.)
        if data.len() > at + 1 {
            return Err(format!(
                "user variable @{name}: NULL with {} more bytes this reader does not know",
                data.len() - at - 1
            ));
        }
        return Ok((name, VarValue::Null));
    }
    let kind = *data.get(at + 1).ok_or_else(short)?;
    let collation = u32_at(at + 2)?;
    let len = u32_at(at + 6)? as usize;
    at += 10;
    let v = data.get(at..at + len).ok_or_else(short)?;
    at += len;
    let flags = data.get(at).copied().unwrap_or(0);
    at += 1;
    if flags & USER_VAR_TYPE_NAME != 0 {
        let n = *data.get(at).ok_or_else(short)? as usize;
        let type_name = data.get(at + 1..at + 1 + n).ok_or_else(short)?;
        if !GEOMETRY_TYPE_NAMES.contains(&type_name) {
            return Err(format!(
                "user variable @{name}: of data type '{}', which this reader does not know how to set",
                String::from_utf8_lossy(type_name)
            ));
        }
        at += 1 + n;
    }
    if flags & !(USER_VAR_UNSIGNED | USER_VAR_TYPE_NAME) != 0 || at < data.len() {
        return Err(format!(
            "user variable @{name}: flags 0x{flags:02x} and {} more bytes this reader does not know",
            data.len().saturating_sub(at)
        ));
    }
    let fixed8 = || -> Result<[u8; 8], String> {
        v.get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| format!("user variable @{name}: short value"))
    };
    let value = match ItemResult::try_from(kind as i8) {
        Ok(ItemResult::STRING_RESULT) => VarValue::Str {
            collation,
            bytes: v.to_vec(),
        },
        Ok(ItemResult::INT_RESULT) => {
            let b = fixed8()?;
            if flags & USER_VAR_UNSIGNED != 0 {
                VarValue::UInt(u64::from_le_bytes(b))
            } else {
                VarValue::Int(i64::from_le_bytes(b))
            }
        }
        Ok(ItemResult::REAL_RESULT) => VarValue::Real(f64::from_le_bytes(fixed8()?)),
        Ok(ItemResult::DECIMAL_RESULT) => {
            // Precision and scale as the server bounds them (65 and 38):
            // the library sizes its buffer from them unchecked.
            match v {
                [p, sc, ..] if *p <= 65 && *sc <= 38 && sc <= p => {}
                _ => {
                    return Err(format!(
                        "user variable @{name}: a decimal whose precision and scale no server writes ({:?})",
                        v.get(..2)
                    ))
                }
            }
            let d = Decimal::read_packed(v, false)
                .map_err(|e| format!("user variable @{name}: bad decimal: {e}"))?;
            VarValue::Decimal(d.to_string())
        }
        _ => return Err(format!("user variable @{name}: value type {kind}")),
    };
    Ok((name, value))
}

/// One statement to run as text.
#[derive(Debug, Clone)]
pub struct Stmt {
    /// The target's default database (renamed), if the source had one
    /// the target has. None: the statement runs in our own schema
    /// ([`crate::position::SCHEMA`]; `batch_sql::stmt_use_sql`), so no default
    /// another statement left on the connection is read, and an
    /// unqualified name the text reader missed is refused by the server.
    pub db: Option<String>,
    pub sql: Vec<u8>,
    pub session: Session,
    /// A LOAD DATA logged as a statement: the file's bytes, which `sql`
    /// (rewritten to `LOCAL INFILE`) reads from the applier.
    pub infile: Option<std::sync::Arc<Vec<u8>>>,
    /// How the statement ended on the source when not simply well: the
    /// target must end it the same way (`Applier::statement`).
    pub expect: Option<SourceEnd>,
}

/// How a logged statement ended on the source, when not simply well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceEnd {
    /// With this error, logged anyway: it had changed a table a ROLLBACK
    /// does not undo, or was DDL that did part of its work (`DROP VIEW v,
    /// gone`). The target must end it with the same error, as a native
    /// replica checks.
    Error(u16),
    /// A DROP the server wrote out itself (`/* generated by server */`)
    /// naming tables or sequences it did not find beside those it dropped
    /// (its error is not logged): on the target it ends well or with
    /// "not there" ([`sqlfleet_conn::codes::GONE`]) — either way what it
    /// names is gone, as on the source (a native replica's default
    /// `slave_ddl_exec_mode=IDEMPOTENT` runs it as `IF EXISTS`).
    DropOfSomeGone,
    /// A LOAD DATA without IGNORE or REPLACE that ended well: the source
    /// met no duplicate key (one would have stopped it there). The
    /// applier gives its file as LOCAL INFILE, under which the target
    /// takes a duplicate for a warning: one means the copy already
    /// differs from the source.
    NoDuplicateKey,
    /// A LOAD DATA with IGNORE (or LOCAL, which ignores as well) that
    /// ended well: rows it could not take were passed over on the source,
    /// among them those outside a `PARTITION (...)` it named, which the
    /// server leaves out of the text it logs (seen on 10.11: a native
    /// replica loaded them, silently). Applied only into a table the
    /// target does not partition; into one it does, what the source
    /// loaded cannot be told and the stream stops.
    Ignoring,
}

impl SourceEnd {
    /// How a statement logged with `code` (0: none) and text `sql` ended.
    pub fn of(code: u16, sql: &[u8]) -> Option<SourceEnd> {
        if code != 0 {
            return Some(SourceEnd::Error(code));
        }
        let generated = sql.trim_ascii_end().ends_with(b"/* generated by server */");
        (generated && first_word(sql) == "DROP").then_some(SourceEnd::DropOfSomeGone)
    }
}

#[derive(Debug, Clone)]
pub enum Item {
    Rows(Rows),
    Stmt(Box<Stmt>),
}

/// Raw table map + rows events of one statement, for `BINLOG '...'`.
#[derive(Debug, Clone)]
pub struct Rows {
    pub bytes: Vec<u8>,
    /// What they are, as a replica names them in an error: "Write_rows
    /// event on table app_eu.orders".
    pub what: String,
    /// How its events are laid out, when every one of them is known to
    /// follow it (see merge.rs); `None`: sent as it is.
    pub layout: Option<Layout>,
}

/// The framing of a statement's table map and rows events, from the
/// source's format description: what merge.rs needs to read and edit them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Each event ends with a CRC32.
    pub crc: bool,
    /// Post-header length of table map events.
    pub map_ph: u8,
    /// Post-header length of every rows event of the statement.
    pub rows_ph: u8,
}

/// A rows event type's name, as native replication's errors give it.
fn rows_kind(ty: u8) -> &'static str {
    match ty {
        23 | 30 => "Write_rows",
        24 | 31 => "Update_rows",
        _ => "Delete_rows",
    }
}

/// One source transaction, filtered and renamed for the target.
#[derive(Debug, Clone)]
pub struct Txn {
    pub gtid: Gtid,
    /// Applied outside a transaction (DDL): not atomic with a position.
    pub standalone: bool,
    /// The source's commit time (event header), seconds since the epoch.
    pub timestamp: u32,
    pub file: String,
    /// Position after the transaction in `file`.
    pub end_pos: u64,
    pub items: Vec<Item>,
    /// Target databases written (after filters and renames).
    pub dbs: BTreeSet<String>,
    /// Why this transaction cannot be applied exactly, if so.
    pub unsupported: Option<String>,
    /// It holds something whose databases are not known (an event the
    /// applier does not read, a statement it could not read with
    /// certainty): `dbs` may miss some, so an unsupported transaction
    /// stops the whole source rather than only `dbs`' streams.
    pub unknown_scope: bool,
    /// The statement text to show in errors (first statement or table).
    pub first: String,
    /// Its source session's temporary tables (statement-based binlogs).
    pub temp: Temp,
    /// A group of an XA transaction prepared and ended apart (MariaDB
    /// 10.5+ logs each as its own GTID): which one.
    pub xa: Option<XaStep>,
    /// The source ended it with ROLLBACK: it is logged only because it
    /// changed a table a ROLLBACK does not undo (MyISAM, Aria, a temporary
    /// table's CREATE), and a native replica applies it and rolls back —
    /// what the rollback does not undo stays, as on the source. Applied
    /// alone, so the ROLLBACK ends nothing but it.
    pub rolled_back: bool,
}

/// The two groups of an XA transaction the source prepared, then
/// committed or rolled back: `XA PREPARE` logs its changes, and the end,
/// a group of its own with only its `XA COMMIT` or `XA ROLLBACK`, says
/// whether they count. The reader holds a prepared group until its end
/// (source/xa.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XaStep {
    /// The prepared branch's changes, not committed yet on the source.
    Prepared(XaId),
    /// Its end: committed (`true`) or rolled back.
    Ended { xid: XaId, commit: bool },
}

/// What a transaction does with its source session's own state, as the
/// server marks it: a statement the server flags thread-specific uses a
/// temporary table or CONNECTION_ID() (`LOG_EVENT_THREAD_SPECIFIC_F`).
/// Names are the source's, `(database, table)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Temp {
    /// The source session (pseudo thread id) of a thread-specific
    /// statement in it.
    pub thread: Option<u32>,
    /// Temporary tables its statements create.
    pub created: Vec<(String, String)>,
    /// Temporary tables its statements drop (the server's own DROP at a
    /// session's end included).
    pub dropped: Vec<(String, String)>,
    /// A thread-specific statement other than a temporary table's CREATE
    /// or DROP: it may read or write a temporary table.
    pub uses: bool,
}

impl Txn {
    /// Bytes of its rows events and statement texts.
    pub fn bytes(&self) -> usize {
        self.items
            .iter()
            .map(|i| match i {
                Item::Rows(r) => r.bytes.len(),
                Item::Stmt(st) => st.sql.len(),
            })
            .sum()
    }

    /// It holds a LOAD DATA logged as a statement (applied on the
    /// source's own connection, which gives the file; never batched).
    pub fn loads_a_file(&self) -> bool {
        self.items
            .iter()
            .any(|i| matches!(i, Item::Stmt(s) if s.infile.is_some()))
    }

    /// Whether a statement of it is to end with the source's error
    /// (applied statement by statement: never in a one-trip batch).
    pub fn expects_an_error(&self) -> bool {
        self.items
            .iter()
            .any(|i| matches!(i, Item::Stmt(s) if s.expect.is_some()))
    }

    /// Nothing of it is replicated (all filtered out, or empty): no
    /// replicated database is touched, and none may have been.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.dbs.is_empty() && !self.unknown_scope
    }

    /// Marks it unapplicable (the first reason is kept); `unknown` when
    /// the databases it touches are not all known.
    fn refuse(&mut self, why: impl Into<String>, unknown: bool) {
        self.unsupported.get_or_insert_with(|| why.into());
        self.unknown_scope |= unknown;
    }
}

/// The assembler failed: the stream does not look like a MariaDB binlog.
#[derive(Debug, Clone, thiserror::Error)]
#[error("binlog {file}:{pos}: {what}")]
pub struct StreamError {
    pub file: String,
    pub pos: u64,
    pub what: String,
}

struct Building {
    txn: Txn,
    /// A START ALTER or ROLLBACK ALTER group: its statement is not run
    /// (`gtid::Phase::applies`).
    passed: bool,
    /// Its GTID event's extra flags.
    phase: u8,
    /// Table id → target database (None: filtered), for this statement.
    tables: HashMap<u64, Option<String>>,
    /// What the statement's rows are, for errors: "Write_rows event on
    /// table db.t" (the first kept rows event).
    what: Option<String>,
    /// BINLOG bytes of the statement being read, and where its last kept
    /// rows event starts.
    group: Vec<u8>,
    last_rows_at: Option<usize>,
    last_rows_flagged: bool,
    /// The framing of the statement's kept events (see [`Layout`]).
    seen: Seen,
    pending: Session,
    /// The file of a LOAD DATA logged as a statement, as its
    /// Begin_load_query and Append_block events bring it: (file id, bytes).
    load_file: Option<(u32, Vec<u8>)>,
    /// An XA group's closing event was read (the XA_PREPARE event of a
    /// prepared group, the XA COMMIT or ROLLBACK of an ended one).
    xa_closed: bool,
}

/// The framing of a statement's kept events as they are read: each value
/// once; two events that disagree make it unknown.
#[derive(Debug, Default)]
struct Seen {
    crc: Option<bool>,
    map_ph: Option<u8>,
    rows_ph: Option<u8>,
    mixed: bool,
}

impl Seen {
    fn same<T: PartialEq + Copy>(slot: &mut Option<T>, v: T, mixed: &mut bool) {
        match slot {
            Some(s) if *s != v => *mixed = true,
            _ => *slot = Some(v),
        }
    }

    fn map(&mut self, crc: bool, ph: u8) {
        Self::same(&mut self.crc, crc, &mut self.mixed);
        Self::same(&mut self.map_ph, ph, &mut self.mixed);
    }

    fn rows(&mut self, crc: bool, ph: u8) {
        Self::same(&mut self.crc, crc, &mut self.mixed);
        Self::same(&mut self.rows_ph, ph, &mut self.mixed);
    }

    fn layout(&self) -> Option<Layout> {
        match (self.mixed, self.crc, self.map_ph, self.rows_ph) {
            (false, Some(crc), Some(map_ph), Some(rows_ph)) => Some(Layout {
                crc,
                map_ph,
                rows_ph,
            }),
            _ => None,
        }
    }
}

/// Turns one source's events into transactions.
pub struct Assembler {
    map: DbMap,
    file: String,
    fde: Option<Vec<u8>>,
    cur: Option<Building>,
    /// The GTID of the last transaction read (or the position reading
    /// resumed after): an Incident event, which has none, is named by it.
    last: Option<Gtid>,
    /// Incidents the operator passed over (`replicate skip` of the GTID
    /// before one).
    passed_incidents: Vec<Gtid>,
}

/// What one event produced.
#[derive(Debug)]
pub enum Out {
    Nothing,
    /// A new format description: appliers must see it before rows.
    /// `server_start`: it is the first of a server start (its `created`
    /// is set; a dump from a file's middle gets it cleared), so every
    /// session of the source before it has ended.
    Format {
        raw: Vec<u8>,
        server_start: bool,
    },
    Txn(Box<Txn>),
}

fn raw_bytes(ev: &Event) -> Vec<u8> {
    let mut v = Vec::with_capacity(ev.data().len() + 23);
    // Writing into a Vec cannot fail.
    let _ = ev.write(BinlogVersion::Version4, &mut v);
    v
}

fn has_crc(ev: &Event) -> bool {
    matches!(
        ev.footer().get_checksum_alg(),
        Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32))
    )
}

const ROWS_TYPES: [u8; 6] = [23, 24, 25, 30, 31, 32];

/// The event that ends an `XA PREPARE` group.
const XA_PREPARE_LOG_EVENT: u8 = 38;
const APPEND_BLOCK: u8 = 9;
const BEGIN_LOAD_QUERY: u8 = 17;
const EXECUTE_LOAD_QUERY: u8 = 18;

/// Why an XA group is refused: its events are not the ones MariaDB
/// writes for the two steps of an XA transaction (an XA statement in a
/// group its GTID event does not flag, an id that differs from the GTID
/// event's, changes in an end group). What it touches is not known for
/// sure, so the source stops as a whole.
pub const XA_REFUSAL: &str = "an XA group whose events are not the ones MariaDB writes for XA PREPARE and its XA COMMIT or ROLLBACK (an XA statement or id that does not match its GTID event)";

/// An XA_PREPARE event's body: one_phase (1), format id (4), gtrid and
/// bqual lengths (4 each), then the two parts. `None` when it does not
/// read as one.
fn xa_prepare_event(data: &[u8]) -> Option<(bool, XaId)> {
    let u32_at = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(data.get(i..i + 4)?.try_into().ok()?))
    };
    let one_phase = *data.first()? != 0;
    let format = u32_at(1)?;
    let (g, b) = (u32_at(5)? as usize, u32_at(9)? as usize);
    let parts = data.get(13..13usize.checked_add(g)?.checked_add(b)?)?;
    Some((one_phase, XaId::new(format, &parts[..g], &parts[g..])?))
}

/// An event header flag: a reader that does not know the event may skip it.
const LOG_EVENT_IGNORABLE_F: u16 = 0x80;
/// The statement depends on its session: a temporary table or
/// CONNECTION_ID() (log_event.h).
const LOG_EVENT_THREAD_SPECIFIC_F: u16 = 0x4;

/// The `created` time of a format description event (0 when it only
/// opens a binlog file the server went on writing).
fn fde_created(data: &[u8]) -> u32 {
    // binlog version (2), server version (50), created (4)
    data.get(52..56)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

impl Assembler {
    pub fn new(map: DbMap) -> Self {
        Assembler {
            map,
            file: String::new(),
            fde: None,
            cur: None,
            last: None,
            passed_incidents: Vec::new(),
        }
    }

    /// Reading resumes after `after` (the newest GTID of the position it
    /// starts from); an Incident right after one of `skips` is passed over.
    pub fn resume(&mut self, after: Option<Gtid>, skips: &[Gtid]) {
        self.last = after;
        self.passed_incidents = skips.to_vec();
    }

    /// The GTID of the last transaction read, or the one reading resumed
    /// after.
    pub fn last(&self) -> Option<Gtid> {
        self.last
    }

    /// The binlog file being read (from the last rotate).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The last format description event, raw.
    pub fn format(&self) -> Option<&[u8]> {
        self.fde.as_deref()
    }

    /// True between a GTID event and the end of its transaction.
    pub fn in_transaction(&self) -> bool {
        self.cur.is_some()
    }

    /// Drops the transaction being read (after a [`StreamError`]: its
    /// source stops there); its GTID, if one was open.
    pub fn abandon(&mut self) -> Option<Gtid> {
        self.cur.take().map(|b| b.txn.gtid)
    }

    pub fn push(&mut self, ev: &Event) -> Result<Out, StreamError> {
        let h = ev.header();
        let pos = h.log_pos() as u64;
        let err = |what: String| StreamError {
            file: self.file.clone(),
            pos,
            what,
        };
        let ty = h.event_type_raw();
        if compressed::plain_type(ty).is_some() {
            // log_bin_compress=ON: read as the plain event it stands for,
            // as a native replica's I/O thread does.
            let lens = ev.fde().event_type_header_lengths();
            let plain = compressed::plain_event(&raw_bytes(ev), has_crc(ev), lens)
                .map_err(|e| err(format!("compressed event type {ty}: {e}")))?;
            let plain = Event::read(ev.fde(), plain.as_slice())
                .map_err(|e| err(format!("compressed event type {ty}: {e}")))?;
            return self.push(&plain);
        }
        match ty {
            t if t == EventType::FORMAT_DESCRIPTION_EVENT as u8 => {
                // A server start's description in the middle of a
                // transaction: the source crashed while writing it, and
                // never committed it (a replica rolls such a group back).
                if self.cur.is_some() && fde_created(ev.data()) != 0 {
                    let g = self.cur.take().map(|b| b.txn.gtid);
                    tracing::warn!(
                        "binlog {}: the source restarted inside transaction {}; it was never committed there and is dropped, as a replica does",
                        self.file,
                        g.map_or_else(String::new, |g| g.to_string())
                    );
                }
                let raw = raw_bytes(ev);
                self.fde = Some(raw.clone());
                return Ok(Out::Format {
                    raw,
                    server_start: fde_created(ev.data()) != 0,
                });
            }
            t if t == EventType::STOP_EVENT as u8 && self.cur.is_none() => return Ok(Out::Nothing),
            t if t == EventType::INCIDENT_EVENT as u8 => {
                let after = self.last.map_or_else(|| "the start".to_string(), |g| g.to_string());
                if self.cur.is_none() && self.last.is_some_and(|g| self.passed_incidents.contains(&g)) {
                    tracing::warn!(
                        "binlog {}:{pos}: passing over the incident after {after}, as `replicate skip` of {after} asked",
                        self.file
                    );
                    return Ok(Out::Nothing);
                }
                return Err(err(format!(
                    "an incident event after {after}: the source lost events here (its binlog is incomplete: a statement changed tables it could not log); a replica stops here too"
                )));
            }
            t if t == EventType::ROTATE_EVENT as u8 => {
                let r: RotateEvent = ev
                    .read_event()
                    .map_err(|e| err(format!("bad rotate event: {e}")))?;
                let mut name = r.name_raw().to_vec();
                // The rotate that opens a stream comes before the format
                // description, so the reader cannot know it ends in a
                // CRC32: drop those 4 bytes when they are one.
                if self.fde.is_none() && name.len() > event::CRC_LEN {
                    let mut raw = Vec::with_capacity(event::HEADER_LEN + ev.data().len());
                    h.serialize(&mut raw);
                    raw.extend_from_slice(ev.data());
                    if event::crc_ok(&raw) {
                        name.truncate(name.len() - event::CRC_LEN);
                    }
                }
                self.file = String::from_utf8_lossy(&name).into_owned();
                return Ok(Out::Nothing);
            }
            mariadb::GTID => {
                if self.cur.is_some() {
                    return Err(err("a GTID event inside an unfinished transaction".into()));
                }
                return match self.open(ev, pos) {
                    Ok(()) => Ok(Out::Nothing),
                    Err(what) => Err(StreamError {
                        file: self.file.clone(),
                        pos,
                        what,
                    }),
                };
            }
            mariadb::ANNOTATE_ROWS
            | mariadb::BINLOG_CHECKPOINT
            | mariadb::GTID_LIST
            | 27 // heartbeat
            | 28 // ignorable
            | 29 // rows query (MySQL)
            => return Ok(Out::Nothing),
            // Not known, but the source says it may be passed over.
            _ if self.cur.is_none() && h.flags_raw() & LOG_EVENT_IGNORABLE_F != 0 => {
                return Ok(Out::Nothing)
            }
            mariadb::START_ENCRYPTION => {
                return Err(err(format!(
                    "event type {ty} (an encrypted binlog read as it lies on disk) cannot be applied"
                )));
            }
            _ => {}
        }
        let Some(b) = self.cur.as_mut() else {
            // Outside a transaction only the events above may appear.
            return Err(err(format!("event type {ty} outside a transaction")));
        };
        match b.event(ev, ty, &self.map).map_err(err)? {
            Then::Go => Ok(Out::Nothing),
            Then::Finish => Ok(self.finish(pos)),
        }
    }

    /// A GTID event opens the transaction it heads.
    fn open(&mut self, ev: &Event, pos: u64) -> Result<(), String> {
        let h = ev.header();
        let g = decode_gtid_event(ev.data()).map_err(|e| e.to_string())?;
        let mut txn = Txn {
            gtid: Gtid {
                domain: g.domain,
                server: h.server_id(),
                seq: g.seq,
            },
            standalone: g.standalone(),
            timestamp: h.timestamp(),
            file: self.file.clone(),
            end_pos: pos,
            items: Vec::new(),
            dbs: BTreeSet::new(),
            unsupported: None,
            unknown_scope: false,
            first: String::new(),
            temp: Temp::default(),
            xa: None,
            rolled_back: false,
        };
        txn.xa = match (g.flags & (PREPARED_XA | COMPLETED_XA), g.xid) {
            (0, _) => None,
            (PREPARED_XA, Some(xid)) => Some(XaStep::Prepared(xid)),
            // (Commit or rollback: its statement says which.)
            (COMPLETED_XA, Some(xid)) => Some(XaStep::Ended { xid, commit: false }),
            (f, _) => {
                txn.refuse(
                    format!("its GTID event flags XA steps 0x{f:02x} at once"),
                    true,
                );
                None
            }
        };
        // One phase of an ALTER logged in two: only its commit runs on
        // the target.
        let passed = match g.phase() {
            Ok(phase) => !phase.applies(),
            Err(why) => {
                txn.refuse(why, false);
                false
            }
        };
        self.last = Some(txn.gtid);
        self.cur = Some(Building {
            passed,
            phase: g.extra,
            txn,
            tables: HashMap::new(),
            what: None,
            group: Vec::new(),
            last_rows_at: None,
            last_rows_flagged: false,
            seen: Seen::default(),
            pending: Session::default(),
            load_file: None,
            xa_closed: false,
        });
        Ok(())
    }

    fn finish(&mut self, pos: u64) -> Out {
        match self.cur.take() {
            Some(mut b) => {
                if !b.group.is_empty() {
                    // A statement without its end flag (should not happen);
                    // apply what was read as one group, never merged.
                    b.seen.mixed = true;
                    let _ = close_group(&mut b, false, 8);
                }
                b.txn.end_pos = pos;
                if b.txn.xa.is_some() && !b.xa_closed {
                    b.txn.refuse(
                        "an XA group that ends without its XA PREPARE event or its XA COMMIT or ROLLBACK",
                        true,
                    );
                }
                Out::Txn(Box::new(b.txn))
            }
            None => Out::Nothing,
        }
    }
}

/// What the transaction being read does after an event.
enum Then {
    /// Goes on.
    Go,
    /// Ends with this event.
    Finish,
}

impl Building {
    /// One event inside the transaction; `Err` says why the stream
    /// cannot go on.
    fn event(&mut self, ev: &Event, ty: u8, map: &DbMap) -> Result<Then, String> {
        let h = ev.header();
        let crc = has_crc(ev);
        let fde = ev.fde();
        if self.passed && ty != EventType::QUERY_EVENT as u8 {
            // (The source writes a START or ROLLBACK ALTER as its one
            // statement: anything more is not understood.)
            self.txn.refuse(
                format!("an ALTER's START or ROLLBACK group with an event of type {ty} in it"),
                true,
            );
        }
        match ty {
            t if t == EventType::TABLE_MAP_EVENT as u8 => self.table_map(ev, map)?,
            t if ROWS_TYPES.contains(&t) => {
                let et = EventType::try_from(t).map_err(|_| "rows event type".to_string())?;
                let ph = fde.get_event_type_header_length(et);
                let raw = raw_bytes(ev);
                let (id, flags) = event::rows_header(&raw, ph).map_err(|e| e.to_string())?;
                let kept = match self.tables.get(&id) {
                    Some(t) => t.clone(),
                    None => {
                        return Err(format!("rows event for table id {id} without a table map"))
                    }
                };
                let end = flags & event::STMT_END_F != 0;
                if let Some(table) = kept {
                    if self.what.is_none() {
                        self.what = Some(format!("{} event on table {table}", rows_kind(t)));
                    }
                    self.last_rows_at = Some(self.group.len());
                    self.last_rows_flagged = end;
                    self.group.extend_from_slice(&raw);
                    self.seen.rows(crc, ph);
                }
                if end {
                    close_group(self, crc, ph).map_err(|e| e.to_string())?;
                }
            }
            t if t == EventType::QUERY_EVENT as u8 => return self.query(ev, map),
            t if t == EventType::XID_EVENT as u8 => return Ok(Then::Finish),
            // XA PREPARE ends its group (MariaDB 10.5+).
            XA_PREPARE_LOG_EVENT => {
                match (self.txn.xa, xa_prepare_event(ev.data())) {
                    (Some(XaStep::Prepared(held)), Some((false, xid))) if xid == held => {
                        self.xa_closed = true;
                    }
                    // Prepared and committed in one: applied as it stands.
                    (Some(XaStep::Prepared(held)), Some((true, xid))) if xid == held => {
                        self.xa_closed = true;
                        self.txn.xa = None;
                    }
                    _ => self.txn.refuse(XA_REFUSAL, true),
                }
                return Ok(Then::Finish);
            }
            t if t == EventType::INTVAR_EVENT as u8 => {
                let d = ev.data();
                if d.len() >= 9 {
                    let v = u64::from_le_bytes(d[1..9].try_into().unwrap_or([0; 8]));
                    match d[0] {
                        1 => self.pending.last_insert_id = Some(v),
                        2 => self.pending.insert_id = Some(v),
                        _ => {}
                    }
                } else {
                    return Err("short INTVAR event".into());
                }
            }
            t if t == EventType::RAND_EVENT as u8 => {
                let d = ev.data();
                if d.len() >= 16 {
                    self.pending.rand = Some((
                        u64::from_le_bytes(d[0..8].try_into().unwrap_or([0; 8])),
                        u64::from_le_bytes(d[8..16].try_into().unwrap_or([0; 8])),
                    ));
                } else {
                    return Err("short RAND event".into());
                }
            }
            t if t == EventType::USER_VAR_EVENT as u8 => {
                match user_var(ev.data()) {
                    Ok(v) => self.pending.user_vars.push(v),
                    // The statement it belongs to decides whether it matters.
                    Err(why) => self.txn.refuse(why, false),
                }
            }
            // The file of a LOAD DATA logged as a statement, in blocks:
            // kept for the Execute_load_query after them.
            BEGIN_LOAD_QUERY | APPEND_BLOCK => {
                let et = if ty == BEGIN_LOAD_QUERY {
                    EventType::BEGIN_LOAD_QUERY_EVENT
                } else {
                    EventType::APPEND_BLOCK_EVENT
                };
                let ph = fde.get_event_type_header_length(et) as usize;
                let d = ev.data();
                match (d.get(..4), d.get(ph.max(4)..)) {
                    (Some(id), Some(block)) => {
                        let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
                        match (&mut self.load_file, ty == BEGIN_LOAD_QUERY) {
                            (f, true) => *f = Some((id, block.to_vec())),
                            (Some((have, bytes)), false) if *have == id => {
                                bytes.extend_from_slice(block)
                            }
                            _ => self.txn.refuse(
                                format!(
                                    "{LOAD_REFUSAL}: a block of file {id} without its beginning"
                                ),
                                true,
                            ),
                        }
                    }
                    _ => self
                        .txn
                        .refuse(format!("{LOAD_REFUSAL}: a short file block event"), true),
                }
            }
            EXECUTE_LOAD_QUERY => self.execute_load(ev, map),
            _ if h.flags_raw() & LOG_EVENT_IGNORABLE_F != 0 => {}
            other => self.txn.refuse(
                format!("binlog event type {other}, which the applier does not know"),
                true,
            ),
        }
        Ok(Then::Go)
    }

    /// A table map: the table's target database (renamed in the event
    /// when it goes elsewhere), or none when filtered.
    fn table_map(&mut self, ev: &Event, map: &DbMap) -> Result<(), String> {
        let crc = has_crc(ev);
        let fde = ev.fde();
        let ph = fde.get_event_type_header_length(EventType::TABLE_MAP_EVENT);
        let raw = raw_bytes(ev);
        let tm = event::table_map(&raw, crc, ph).map_err(|e| e.to_string())?;
        let db = String::from_utf8_lossy(&tm.db).into_owned();
        let target = map.map(&db).map(str::to_string);
        if let (Some(t), Some(other)) = (&target, map.collides(&db)) {
            self.txn.dbs.insert(t.clone());
            self.txn.refuse(
                format!("rows of source database '{db}', which would be written into '{t}' together with '{other}' (renamed onto that name)"),
                false,
            );
        }
        if let Some(t) = &target {
            let raw = if *t == db {
                raw
            } else {
                event::rename_table_map(&raw, crc, ph, t.as_bytes()).map_err(|e| e.to_string())?
            };
            self.group.extend_from_slice(&raw);
            self.seen.map(crc, ph);
            self.txn.dbs.insert(t.clone());
            if self.txn.first.is_empty() {
                self.txn.first = format!("rows of {}.{}", t, String::from_utf8_lossy(&tm.table));
            }
        }
        self.tables.insert(
            tm.table_id,
            target.map(|t| format!("{t}.{}", String::from_utf8_lossy(&tm.table))),
        );
        Ok(())
    }

    /// A statement event: BEGIN, COMMIT, a rollback, XA, or a statement
    /// to apply, with its session context.
    fn query(&mut self, ev: &Event, map: &DbMap) -> Result<Then, String> {
        let h = ev.header();
        let q: QueryEvent = ev
            .read_event()
            .map_err(|e| format!("bad query event: {e}"))?;
        let sql = q.query_raw();
        // The statement repeats its GTID event's ALTER phase: the two
        // must agree (a statement that says otherwise is refused).
        let phases = gtid::flags_extra::START_ALTER
            | gtid::flags_extra::COMMIT_ALTER
            | gtid::flags_extra::ROLLBACK_ALTER;
        let ctx = context::read(q.status_vars_raw());
        let said = ctx.gtid_flags3.unwrap_or(0) & phases;
        if said != self.phase & phases {
            self.txn.refuse(
                format!(
                    "its GTID event and its statement disagree on an ALTER's phase (0x{:02x} and 0x{said:02x})",
                    self.phase & phases
                ),
                false,
            );
        }
        if self.passed {
            return Ok(if self.txn.standalone {
                Then::Finish
            } else {
                Then::Go
            });
        }
        let word = first_word(sql);
        match word.as_str() {
            "BEGIN" => return Ok(Then::Go),
            "COMMIT" => return Ok(Then::Finish),
            "ROLLBACK" if !is_rollback_to(sql) => {
                self.txn.rolled_back = true;
                return Ok(Then::Finish);
            }
            "XA" => {
                // XA END inside a prepared group; XA COMMIT or ROLLBACK
                // as a group of its own (MariaDB writes no other event
                // after it). Each as the server writes it, for the id its
                // GTID event holds: anything else is refused.
                let second = second_word(sql);
                let said = |verb: &str, xid: &XaId| sql == format!("XA {verb} {xid}").as_bytes();
                match (self.txn.xa, second.as_str()) {
                    (Some(XaStep::Prepared(xid)), "END") if said("END", &xid) => {}
                    (Some(XaStep::Ended { xid, .. }), verb @ ("COMMIT" | "ROLLBACK"))
                        if said(verb, &xid) && self.txn.items.is_empty() && !self.xa_closed =>
                    {
                        self.txn.xa = Some(XaStep::Ended {
                            xid,
                            commit: verb == "COMMIT",
                        });
                        self.xa_closed = true;
                        return Ok(Then::Finish);
                    }
                    _ => {
                        self.txn.refuse(XA_REFUSAL, true);
                        if matches!(second.as_str(), "COMMIT" | "ROLLBACK") {
                            return Ok(Then::Finish);
                        }
                    }
                }
            }
            _ => {
                let mut session = std::mem::take(&mut self.pending);
                session.timestamp = h.timestamp();
                session.thread_id = q.thread_id();
                session.ctx = ctx;
                if !self.txn.standalone && server_written::create_select(sql) {
                    session.ctx.read_as_server_written();
                }
                // A routine's COMMENT the server wrote with backslash
                // escapes, in a session without them.
                let rewritten = (!session.ctx.backslash_escapes() && word == "CREATE")
                    .then(|| server_written::routine_comment(sql))
                    .flatten();
                let sql: &[u8] = rewritten.as_deref().unwrap_or(sql);
                let src_db = q.schema().into_owned();
                // A temporary table lives in its source session:
                // noted here, applied in that session's own
                // connection (source/temp.rs).
                // (The first word first: most statements are
                // neither, and a big INSERT is not lexed again.)
                let dialect = session.ctx.dialect();
                // (Or SET: `SET STATEMENT ... FOR CREATE ...`.)
                let created = (word == "CREATE" || word == "SET")
                    .then(|| sqltext::created_temporary(sql, dialect))
                    .flatten();
                let dropped = (word == "DROP" || word == "SET")
                    .then(|| sqltext::dropped_temporary(sql, dialect))
                    .flatten();
                let specific = h.flags_raw() & LOG_EVENT_THREAD_SPECIFIC_F != 0;
                if specific || dropped.is_some() {
                    let t = &mut self.txn.temp;
                    t.thread = Some(q.thread_id());
                    let name =
                        |(d, n): (Option<String>, String)| (d.unwrap_or_else(|| src_db.clone()), n);
                    match dropped {
                        Some(names) => t.dropped.extend(names.into_iter().map(name)),
                        None if created.is_some() => {}
                        None => t.uses = true,
                    }
                }
                match route_statement(map, &src_db, sql, session) {
                    Routed::Apply { mut stmt, dbs } => {
                        stmt.expect = self.source_end(q.error_code(), sql);
                        if let Some((d, n)) = created {
                            let d = d.unwrap_or_else(|| src_db.clone());
                            self.txn.temp.created.push((d, n));
                        }
                        if self.txn.first.is_empty() {
                            self.txn.first = String::from_utf8_lossy(&stmt.sql)
                                .chars()
                                .take(200)
                                .collect();
                        }
                        // A context the target cannot be given
                        // stops these streams before anything runs.
                        if let Err(why) = context::reproducible(&stmt.session.ctx) {
                            self.txn.refuse(why, false);
                        }
                        self.refuse_unlogged(sql, &stmt.session.ctx, map, &src_db);
                        self.txn.dbs.extend(dbs);
                        self.txn.items.push(Item::Stmt(stmt));
                    }
                    Routed::Filtered => {}
                    Routed::Refused { why, dbs } => {
                        if self.txn.first.is_empty() {
                            self.txn.first =
                                String::from_utf8_lossy(sql).chars().take(200).collect();
                        }
                        let unknown = dbs.is_empty();
                        self.txn.dbs.extend(dbs);
                        self.txn.refuse(why, unknown);
                    }
                }
            }
        }
        if self.txn.standalone {
            return Ok(Then::Finish);
        }
        Ok(Then::Go)
    }

    /// How a statement is to end on the target: as it ended on the source
    /// (error `code`, 0: none; see [`SourceEnd`]). An error that stopped it part-way
    /// for a reason of its moment (a kill, a timeout, a deadlock) cannot
    /// be replayed to the same end: the transaction is refused.
    fn source_end(&mut self, code: u16, sql: &[u8]) -> Option<SourceEnd> {
        if sqlfleet_conn::codes::STOPPED_PART_WAY.contains(&code) {
            self.txn.refuse(
                format!(
                    "the statement was stopped part-way on the source (error {code} there): what it did before is not in the binary log, and running it again would do all of it; a native replica stops here too"
                ),
                false,
            );
        }
        SourceEnd::of(code, sql)
    }

    /// Stops the transaction's streams when its statement calls a
    /// function whose value the target would compute differently.
    fn refuse_unlogged(&mut self, sql: &[u8], ctx: &context::Context, map: &DbMap, src_db: &str) {
        let renamed = map.map(src_db).is_some_and(|to| to != src_db);
        if let Some((f, why)) = crate::unlogged::call(sql, ctx.dialect(), renamed) {
            self.txn.refuse(
                format!("a statement logged as text calls {f}, whose value the binary log does not carry: {why}"),
                false,
            );
        }
    }

    /// A LOAD DATA logged as a statement, with the file its blocks
    /// brought.
    fn execute_load(&mut self, ev: &Event, map: &DbMap) {
        let h = ev.header();
        let fde = ev.fde();
        let ph = fde.get_event_type_header_length(EventType::EXECUTE_LOAD_QUERY_EVENT);
        let file = self.load_file.take();
        match event::execute_load_query(ev.data(), ph) {
            Err(e) => self
                .txn
                .refuse(format!("{LOAD_REFUSAL}: unreadable: {e}"), true),
            Ok(q) => {
                let mut session = std::mem::take(&mut self.pending);
                session.ctx = context::read(&q.status_vars);
                session.timestamp = h.timestamp();
                let src_db = String::from_utf8_lossy(&q.db).into_owned();
                let show: String = String::from_utf8_lossy(&q.sql).chars().take(200).collect();
                // Applied as `mariadb-binlog | mariadb` replays it: the
                // file name part read from the applier's own bytes (and
                // the clauses as the session reads them).
                // One that cannot be sent is still routed by its logged
                // text: into an excluded database it is passed by.
                let bytes: &[u8] = match &file {
                    Some((id, b)) if *id == q.file_id => b,
                    _ => &[],
                };
                let (sql, charset_named, unsendable) =
                    match load_query::statement(&q, session.ctx.backslash_escapes(), bytes) {
                        Ok(sent) => (sent.sql, sent.charset_named, None),
                        Err(why) => (q.sql.clone(), true, Some(why)),
                    };
                match route_statement(map, &src_db, &sql, session) {
                    // Into a database the filters exclude: passed by.
                    Routed::Filtered => {}
                    Routed::Apply { mut stmt, dbs } => {
                        if self.txn.first.is_empty() {
                            self.txn.first = show;
                        }
                        let unsendable = unsendable.or_else(|| {
                            load_query::unknown_charset(&load_query::CharsetCase {
                                named: charset_named,
                                default_db: &src_db,
                                default_db_on_target: stmt.db.is_some(),
                                logged: stmt.session.ctx.charset_database.is_some(),
                                file_ascii: bytes.is_ascii(),
                            })
                        });
                        if let Some(why) = unsendable {
                            self.txn.dbs.extend(dbs);
                            self.txn.refuse(why, false);
                            return;
                        }
                        stmt.expect = self
                            .source_end(q.error_code, &sql)
                            .or((q.dup == 0).then_some(SourceEnd::NoDuplicateKey))
                            .or((q.dup == 1).then_some(SourceEnd::Ignoring));
                        if q.error_code != 0 {
                            // Replayed as LOCAL INFILE, the target takes
                            // its errors for warnings and loads past the
                            // row where the source stopped.
                            self.txn.refuse(
                                format!(
                                    "{LOAD_REFUSAL} that stopped part-way on the source (error {}): the applier gives the file as LOCAL INFILE, under which the target turns that error into a warning and loads the rows after it",
                                    q.error_code
                                ),
                                false,
                            );
                        }
                        self.txn.dbs.extend(dbs);
                        match file.filter(|(id, _)| *id == q.file_id) {
                            Some((_, bytes)) => {
                                if let Err(why) = context::reproducible(&stmt.session.ctx) {
                                    self.txn.refuse(why, false);
                                }
                                self.refuse_unlogged(&sql, &stmt.session.ctx, map, &src_db);
                                stmt.infile = Some(std::sync::Arc::new(bytes));
                                self.txn.items.push(Item::Stmt(stmt));
                            }
                            None => self.txn.refuse(
                                format!(
                                    "{LOAD_REFUSAL}: file {} was not in the binlog before it",
                                    q.file_id
                                ),
                                false,
                            ),
                        }
                    }
                    Routed::Refused { why, dbs } => {
                        if self.txn.first.is_empty() {
                            self.txn.first = show;
                        }
                        let unknown = dbs.is_empty();
                        self.txn.dbs.extend(dbs);
                        self.txn.refuse(why, unknown);
                    }
                }
            }
        }
    }
}

fn close_group(b: &mut Building, crc: bool, rows_ph: u8) -> Result<(), crate::gtid::DecodeError> {
    if let Some(at) = b.last_rows_at {
        if !b.last_rows_flagged {
            event::set_stmt_end(&mut b.group[at..], crc, rows_ph)?;
        }
        b.txn.items.push(Item::Rows(Rows {
            bytes: std::mem::take(&mut b.group),
            what: b.what.take().unwrap_or_default(),
            layout: b.seen.layout(),
        }));
    }
    b.seen = Seen::default();
    b.group.clear();
    b.tables.clear();
    b.what = None;
    b.last_rows_at = None;
    b.last_rows_flagged = false;
    Ok(())
}

fn is_rollback_to(sql: &[u8]) -> bool {
    let s = String::from_utf8_lossy(&sql[..sql.len().min(64)]).to_ascii_uppercase();
    let w: Vec<&str> = s.split_whitespace().take(3).collect();
    matches!(
        w.as_slice(),
        ["ROLLBACK", "TO", ..] | ["ROLLBACK", "WORK", "TO"]
    )
}

fn second_word(sql: &[u8]) -> String {
    let s = String::from_utf8_lossy(&sql[..sql.len().min(64)]).to_ascii_uppercase();
    s.split_whitespace().nth(1).unwrap_or("").to_string()
}

fn first_word(sql: &[u8]) -> String {
    let s = String::from_utf8_lossy(&sql[..sql.len().min(32)]);
    s.trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_uppercase()
}

enum Routed {
    Apply {
        stmt: Box<Stmt>,
        dbs: Vec<String>,
    },
    Filtered,
    /// Not applied; `dbs` are the replicated target databases it touches
    /// (empty: not known which).
    Refused {
        why: String,
        dbs: Vec<String>,
    },
}

/// Where a statement goes. The server says only its default database, so
/// the databases it names come from its text ([`sqltext`]); it applies
/// when every one of them is replicated (renamed ones rewritten), is
/// filtered when none is, and is refused — its streams stop — when some
/// are and some are not, or when the text cannot be read with certainty.
fn route_statement(map: &DbMap, src_db: &str, sql: &[u8], session: Session) -> Routed {
    let show = || String::from_utf8_lossy(&sql[..sql.len().min(200)]).into_owned();
    let default = (!src_db.is_empty()).then_some(src_db);
    let dialect = session.ctx.dialect();
    let named = match sqltext::read(sql, dialect) {
        Ok(n) => n,
        Err(why) => {
            return Routed::Refused {
                why: format!(
                    "cannot tell which databases a statement writes ({why}): {}",
                    show()
                ),
                // Its default database's stream stops, and those of every
                // database any reading of its text names.
                dbs: {
                    let named = sqltext::named_in_any_dialect(sql, dialect);
                    let mut dbs: Vec<String> = default
                        .into_iter()
                        .chain(named.iter().map(String::as_str))
                        .filter_map(|d| map.map(d))
                        .map(str::to_string)
                        .collect();
                    dbs.sort();
                    dbs.dedup();
                    dbs
                },
            };
        }
    };
    let text_dbs = named.databases();
    // The default database counts when the statement may use it, or when
    // it is replicated (it then keeps its context, as a replica's `USE`).
    // A CREATE/DROP/ALTER DATABASE writes only the one it names (an ALTER
    // that names none, the default one: it uses it); a statement whose
    // every table is qualified writes only those, whatever its default
    // (`USE other; INSERT INTO app.t ...`).
    let default = default
        .filter(|d| named.uses_default || (!named.database_statement && map.map(d).is_some()));
    let mut all: Vec<&str> = text_dbs.iter().map(String::as_str).collect();
    if let Some(d) = default {
        all.push(d);
    }
    all.sort();
    all.dedup();
    if all.is_empty() {
        // No database at all (e.g. CREATE USER, SET GLOBAL): not data.
        return Routed::Filtered;
    }
    let mapped: Vec<(&str, Option<&str>)> = all.iter().map(|d| (*d, map.map(d))).collect();
    let kept: Vec<String> = mapped
        .iter()
        .filter_map(|(_, t)| t.map(str::to_string))
        .collect();
    if kept.is_empty() {
        return Routed::Filtered;
    }
    if let Some((d, other)) = all.iter().find_map(|d| map.collides(d).map(|o| (*d, o))) {
        return Routed::Refused {
            why: format!(
                "a statement on source database '{d}', which would be written into '{d}' together with '{other}' (renamed onto that name): {}",
                show()
            ),
            dbs: kept,
        };
    }
    if kept.len() != mapped.len() {
        let dropped: Vec<&str> = mapped
            .iter()
            .filter(|(_, t)| t.is_none())
            .map(|(d, _)| *d)
            .collect();
        return Routed::Refused {
            why: format!(
                "a statement writing replicated databases and databases this source's filters exclude ({}): {}",
                dropped.join(", "),
                show()
            ),
            dbs: kept,
        };
    }
    // A new name goes into the text as UTF-8: in a statement written in
    // another character set a non-ASCII one would name another database.
    if !session.ctx.utf8_text() {
        if let Some(t) = named
            .refs
            .iter()
            .filter_map(|r| map.map(&r.name).filter(|t| *t != r.name))
            .find(|t| !t.is_ascii())
        {
            return Routed::Refused {
                why: format!(
                    "a statement in character set {} naming a database renamed onto '{t}', which that character set would not write as in UTF-8: {}",
                    session.ctx.client_charset().unwrap_or(0),
                    show()
                ),
                dbs: kept,
            };
        }
    }
    if default.is_none() && named.uses_default {
        // No default database on the source (DATABASE() read NULL there),
        // or none the target has: nothing here means the same.
        return Routed::Refused {
            why: format!(
                "a statement using its default database (an unqualified table name or DATABASE()) where the source had none: {}",
                show()
            ),
            dbs: kept,
        };
    }
    let mut text = sqltext::rename(sql, &named, |d| {
        map.map(d).filter(|t| *t != d).map(str::to_string)
    });
    if let Some(replica) = sqltext::event_as_replica(&text, dialect) {
        text = replica;
    }
    Routed::Apply {
        stmt: Box::new(Stmt {
            db: default.and_then(|d| map.map(d)).map(str::to_string),
            sql: text,
            session,
            infile: None,
            expect: None,
        }),
        dbs: kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A User_var event body for `@a` of result type `kind`, collation
    /// `coll`, value `value`, then `tail` (the flags and what follows).
    fn var_body(kind: u8, coll: u32, value: &[u8], tail: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&1u32.to_le_bytes());
        body.push(b'a');
        body.push(0); // not NULL
        body.push(kind);
        body.extend_from_slice(&coll.to_le_bytes());
        body.extend_from_slice(&(value.len() as u32).to_le_bytes());
        body.extend_from_slice(value);
        body.extend_from_slice(tail);
        body
    }

    /// A User_var event `@a` holding a DECIMAL value of these bytes
    /// (precision, scale, then the binary decimal).
    fn decimal_var(value: &[u8]) -> Result<(String, VarValue), String> {
        user_var(&var_body(ItemResult::DECIMAL_RESULT as u8, 33, value, &[0]))
    }

    /// User_var event bodies as MariaDB 10.11 writes them (a geometry
    /// value with its data type's name after the flags, read off a real
    /// binlog), and the ones it does not: refused, never guessed.
    #[test]
    fn a_user_variable_is_read_with_the_data_type_name_mariadb_writes() {
        let point = b"\0\0\0\0\x01\x01\0\0\0\0\0\0\0\0\0\xf0\x3f\0\0\0\0\0\0\0\x40";
        let named = |name: &[u8]| {
            let mut t = vec![USER_VAR_TYPE_NAME, name.len() as u8];
            t.extend_from_slice(name);
            t
        };
        let s = ItemResult::STRING_RESULT as u8;
        let i = ItemResult::INT_RESULT as u8;
        let rows: Vec<(&str, Vec<u8>, Result<VarValue, &str>)> = vec![
            (
                "a point",
                var_body(s, 63, point, &named(b"point")),
                Ok(VarValue::Str {
                    collation: 63,
                    bytes: point.to_vec(),
                }),
            ),
            (
                "a geometry",
                var_body(s, 63, point, &named(b"geometry")),
                Ok(VarValue::Str {
                    collation: 63,
                    bytes: point.to_vec(),
                }),
            ),
            (
                "text",
                var_body(s, 8, b"::1", &[0]),
                Ok(VarValue::Str {
                    collation: 8,
                    bytes: b"::1".to_vec(),
                }),
            ),
            (
                "text without flags",
                var_body(s, 8, b"x", &[]),
                Ok(VarValue::Str {
                    collation: 8,
                    bytes: b"x".to_vec(),
                }),
            ),
            (
                "unsigned",
                var_body(i, 63, &u64::MAX.to_le_bytes(), &[1]),
                Ok(VarValue::UInt(u64::MAX)),
            ),
            (
                "signed",
                var_body(i, 63, &(-2i64).to_le_bytes(), &[0]),
                Ok(VarValue::Int(-2)),
            ),
            (
                "a type it does not know",
                var_body(s, 63, b"x", &named(b"inet7")),
                Err("does not know how to set"),
            ),
            (
                "a flag it does not know",
                var_body(s, 63, b"x", &[4]),
                Err("flags 0x04"),
            ),
            (
                "bytes after",
                var_body(s, 63, b"x", &[0, 9]),
                Err("1 more bytes"),
            ),
            (
                "a name cut short",
                var_body(s, 63, b"x", &[2, 8, b'g']),
                Err("cut short"),
            ),
            (
                "a value cut short",
                var_body(s, 63, b"x", &[])[..14].to_vec(),
                Err("cut short"),
            ),
        ];
        for (what, body, want) in rows {
            let got = user_var(&body).map(|(n, v)| {
                assert_eq!(n, "a");
                v
            });
            match (&want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "{what}"),
                (Err(words), Err(e)) => assert!(e.contains(words), "{what}: {e}"),
                _ => panic!("{what}: {got:?}, want {want:?}"),
            }
        }
        // NULL: nothing after the flag.
        let mut null = 1u32.to_le_bytes().to_vec();
        null.extend([b'a', 1]);
        assert_eq!(user_var(&null), Ok(("a".into(), VarValue::Null)));
        null.push(0);
        assert!(user_var(&null).is_err_and(|e| e.contains("1 more bytes")));
    }

    /// A decimal user variable's precision and scale are checked before
    /// the library reads it (it sized a buffer from them unchecked: a
    /// precision of 255 with a scale of 200 asked for 8 EiB; fuzzed).
    #[test]
    fn a_decimal_user_variable_is_read_only_within_the_servers_bounds() {
        let rows: &[(&[u8], Result<&str, &str>)] = &[
            (&[10, 2, 0x80, 0, 0, 0x0C, 0x22], Ok("12.34")),
            (&[65, 30, 0x80], Err("bad decimal")),
            (&[255, 200, 0x80, 0, 0], Err("no server writes")),
            (&[66, 0, 0x80], Err("no server writes")),
            (&[40, 39, 0x80], Err("no server writes")),
            (&[2, 5, 0x80], Err("no server writes")),
            (&[10], Err("no server writes")),
        ];
        for (bytes, want) in rows {
            let got = decimal_var(bytes);
            match (want, &got) {
                (Ok(text), Ok((_, VarValue::Decimal(d)))) => assert_eq!(d, text, "{bytes:?}"),
                (Err(words), Err(e)) => assert!(e.contains(words), "{bytes:?}: {e}"),
                _ => panic!("{bytes:?}: {got:?}, want {want:?}"),
            }
        }
    }

    fn map() -> DbMap {
        let mut r = BTreeMap::new();
        r.insert("app".to_string(), "app_eu".to_string());
        DbMap::new(&[], &["skip*".to_string()], &r)
    }

    /// How a logged statement ended on the source, from its error code
    /// and text, as MariaDB 10.11 logs each (read off a real binlog).
    /// One event as a MariaDB 10.11 source sends it (no CRC).
    fn raw_event(ty: u8, body: &[u8]) -> Vec<u8> {
        let mut raw = vec![0u8; 19];
        raw[4] = ty;
        raw[5] = 1; // server id 1
        raw[9..13].copy_from_slice(&((19 + body.len()) as u32).to_le_bytes());
        raw.extend_from_slice(body);
        raw
    }

    /// The transaction an assembler makes of `events` (GTID and Query
    /// events of a MariaDB format description), with no filters.
    fn assembled(name: &str, events: &[Vec<u8>]) -> Txn {
        use mysql_common::binlog::events::FormatDescriptionEvent;
        let mut lengths = vec![0u8; 171];
        lengths[1] = 13; // QUERY
        lengths[161] = 19; // GTID
        let fde = FormatDescriptionEvent::new(BinlogVersion::Version4)
            .with_event_type_header_lengths(lengths);
        let mut a = Assembler::new(DbMap::new(&[], &[], &Default::default()));
        let mut got = None;
        for raw in events {
            let ev = Event::read(&fde, raw.as_slice()).expect("an event");
            match a.push(&ev) {
                Ok(Out::Txn(t)) => got = Some(t),
                Ok(_) => {}
                Err(e) => panic!("{name}: {e}"),
            }
        }
        *got.unwrap_or_else(|| panic!("{name}: no transaction"))
    }

    /// A GTID event 0-1-`seq` with XA `flags` for id 'x' (format 1).
    fn gtid_event(seq: u64, flags: u8, xid: &[u8]) -> Vec<u8> {
        let mut b = seq.to_le_bytes().to_vec();
        b.extend(0u32.to_le_bytes());
        b.push(flags | gtid::flags::TRANSACTIONAL);
        if flags & (PREPARED_XA | COMPLETED_XA) != 0 {
            b.extend(1u32.to_le_bytes());
            b.extend([xid.len() as u8, 0]);
            b.extend(xid);
        }
        b.resize(b.len().max(19), 0);
        raw_event(mariadb::GTID, &b)
    }

    /// A statement in database `app`.
    fn query_event(sql: &str) -> Vec<u8> {
        let status = crate::fixtures::default_status();
        let mut b = 9u32.to_le_bytes().to_vec();
        b.extend(0u32.to_le_bytes());
        b.push(3);
        b.extend(0u16.to_le_bytes());
        b.extend((status.len() as u16).to_le_bytes());
        b.extend(&status);
        b.extend(b"app\0");
        b.extend(sql.as_bytes());
        raw_event(EventType::QUERY_EVENT as u8, &b)
    }

    /// An XA_PREPARE event for `xid` (format 1, no branch qualifier).
    fn xa_prepare(one_phase: bool, xid: &[u8]) -> Vec<u8> {
        let mut b = vec![one_phase as u8];
        b.extend(1u32.to_le_bytes());
        b.extend((xid.len() as u32).to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(xid);
        raw_event(XA_PREPARE_LOG_EVENT, &b)
    }

    /// The groups of an XA transaction as the assembler reads them, and
    /// what it makes of events MariaDB does not write that way: an id
    /// that differs from its GTID event's, an XA statement in a group the
    /// GTID event does not flag, a prepared group without its XA_PREPARE
    /// event — each refused for the whole source, never passed as empty.
    #[test]
    fn xa_groups_are_read_as_their_gtid_event_flags_them() {
        let x = b"x".as_slice();
        let end_x = "XA END X'78',X'',1";
        let p = PREPARED_XA;
        let c = COMPLETED_XA;
        // (name, events, (xa step, refused whole))
        type Row = (&'static str, Vec<Vec<u8>>, &'static str);
        let rows: Vec<Row> = vec![
            (
                "a prepared group",
                vec![
                    gtid_event(5, p, x),
                    query_event("INSERT INTO t VALUES (1)"),
                    query_event(end_x),
                    xa_prepare(false, x),
                ],
                "prepared X'78',X'',1",
            ),
            (
                "its commit",
                vec![gtid_event(6, c, x), query_event("XA COMMIT X'78',X'',1")],
                "commit X'78',X'',1",
            ),
            (
                "its rollback",
                vec![gtid_event(6, c, x), query_event("XA ROLLBACK X'78',X'',1")],
                "rollback X'78',X'',1",
            ),
            (
                "prepared and committed in one phase: applied as it stands",
                vec![
                    gtid_event(5, p, x),
                    query_event("INSERT INTO t VALUES (1)"),
                    query_event(end_x),
                    xa_prepare(true, x),
                ],
                "plain",
            ),
            (
                "an XA_PREPARE event for another id",
                vec![
                    gtid_event(5, p, x),
                    query_event(end_x),
                    xa_prepare(false, b"y"),
                ],
                "refused whole",
            ),
            (
                "an XA END for another id",
                vec![
                    gtid_event(5, p, x),
                    query_event("XA END X'79',X'',1"),
                    xa_prepare(false, x),
                ],
                "refused whole",
            ),
            (
                "a commit naming another id",
                vec![gtid_event(6, c, x), query_event("XA COMMIT X'79',X'',1")],
                "refused whole",
            ),
            (
                "a commit in other words",
                vec![gtid_event(6, c, x), query_event("XA COMMIT 'x'")],
                "refused whole",
            ),
            (
                "an end group with a change before its commit",
                vec![
                    gtid_event(6, c, x),
                    query_event("INSERT INTO t VALUES (1)"),
                    query_event("XA COMMIT X'78',X'',1"),
                ],
                "refused whole",
            ),
            (
                "an XA COMMIT in a group its GTID event does not flag",
                vec![gtid_event(6, 0, x), query_event("XA COMMIT X'78',X'',1")],
                "refused whole",
            ),
            (
                "a prepared group that ends as a plain commit",
                vec![
                    gtid_event(5, p, x),
                    query_event("INSERT INTO t VALUES (1)"),
                    query_event("COMMIT"),
                ],
                "refused whole",
            ),
            (
                "both XA flags at once",
                vec![
                    gtid_event(5, p | c, x),
                    query_event(end_x),
                    xa_prepare(false, x),
                ],
                "refused whole",
            ),
        ];
        for (name, events, want) in rows {
            let t = assembled(name, &events);
            let said = match (&t.unsupported, t.xa) {
                (Some(_), _) if t.unknown_scope => "refused whole".to_string(),
                (Some(why), _) => format!("refused {why}"),
                (None, None) => "plain".into(),
                (None, Some(XaStep::Prepared(id))) => format!("prepared {id}"),
                (None, Some(XaStep::Ended { xid, commit })) => {
                    format!("{} {xid}", if commit { "commit" } else { "rollback" })
                }
            };
            assert_eq!(said, want, "{name}");
            if want.starts_with("prepared") || want == "plain" {
                assert_eq!(t.items.len(), 1, "{name}: the change, and no XA statement");
            }
        }
    }

    /// A group the source ended with ROLLBACK (logged because it changed
    /// a table a ROLLBACK does not undo) is read as rolled back, with its
    /// changes, for the applier to end the same way; a ROLLBACK TO a
    /// savepoint is one of its statements, not its end.
    #[test]
    fn a_group_the_source_rolled_back_is_read_as_rolled_back() {
        // (name, statements after BEGIN, (rolled back, items))
        let rows: &[(&str, &[&str], (bool, usize))] = &[
            ("committed", &["UPDATE m SET v = 1", "COMMIT"], (false, 1)),
            (
                "rolled back",
                &["UPDATE m SET v = 1", "INSERT INTO i VALUES (1)", "ROLLBACK"],
                (true, 2),
            ),
            (
                "rolled back, in lower case",
                &["UPDATE m SET v = 1", "rollback"],
                (true, 1),
            ),
            (
                "a savepoint rolled back to, then committed",
                &[
                    "SAVEPOINT s",
                    "UPDATE m SET v = 1",
                    "ROLLBACK TO s",
                    "COMMIT",
                ],
                (false, 3),
            ),
            (
                "a savepoint rolled back to, then rolled back",
                &[
                    "SAVEPOINT s",
                    "UPDATE m SET v = 1",
                    "ROLLBACK WORK TO SAVEPOINT s",
                    "ROLLBACK",
                ],
                (true, 3),
            ),
        ];
        for (name, stmts, want) in rows {
            let mut events = vec![gtid_event(5, 0, b"x"), query_event("BEGIN")];
            events.extend(stmts.iter().map(|s| query_event(s)));
            let t = assembled(name, &events);
            assert_eq!(t.unsupported, None, "{name}");
            assert_eq!((t.rolled_back, t.items.len()), *want, "{name}");
        }
    }

    #[test]
    fn how_a_statement_ended_on_the_source_is_read_from_its_event() {
        let rows: &[(u16, &str, Option<SourceEnd>)] = &[
            (0, "INSERT INTO m VALUES (1)", None),
            // A MyISAM INSERT stopped at a duplicate, its first rows kept.
            (
                1062,
                "INSERT INTO m VALUES (5), (1)",
                Some(SourceEnd::Error(1062)),
            ),
            // DROP VIEW logs the client's text and its error.
            (
                4092,
                "DROP VIEW z.vv, z.nosuchv",
                Some(SourceEnd::Error(4092)),
            ),
            // DROP TABLE and DROP SEQUENCE log a text of their own,
            // naming what was not there, and no error.
            (
                0,
                "DROP TABLE `z`.`dd`,`z`.`nosuch` /* generated by server */",
                Some(SourceEnd::DropOfSomeGone),
            ),
            (
                0,
                "DROP SEQUENCE `z`.`sq`,`z`.`nosuchs` /* generated by server */ ",
                Some(SourceEnd::DropOfSomeGone),
            ),
            // (A DROP of a temporary table and another, split by the server.)
            (
                0,
                "DROP TABLE `z`.`d2` /* generated by server */",
                Some(SourceEnd::DropOfSomeGone),
            ),
            // Not a DROP, or not the server's text.
            (
                0,
                "INSERT INTO t VALUES ('/* generated by server */')",
                None,
            ),
            (0, "DROP TABLE t /* generated by server */ -- no", None),
        ];
        for (code, sql, want) in rows {
            assert_eq!(SourceEnd::of(*code, sql.as_bytes()), *want, "{code} {sql}");
        }
    }

    #[test]
    fn statements_route_by_default_database_and_rename() {
        let s = Session::default();
        match route_statement(&map(), "app", b"ALTER TABLE t ADD c INT", s.clone()) {
            Routed::Apply { stmt, dbs } => {
                assert_eq!(stmt.db.as_deref(), Some("app_eu"));
                assert_eq!(dbs, vec!["app_eu"]);
            }
            _ => panic!("applies"),
        }
        match route_statement(&map(), "", b"CREATE DATABASE app", s.clone()) {
            Routed::Apply { stmt, dbs } => {
                assert_eq!(stmt.sql, b"CREATE DATABASE `app_eu`");
                assert_eq!(dbs, vec!["app_eu"]);
                assert_eq!(stmt.db, None);
            }
            _ => panic!("applies"),
        }
        assert!(matches!(
            route_statement(&map(), "skipme", b"CREATE TABLE t (a int)", s.clone()),
            Routed::Filtered
        ));
        assert!(matches!(
            route_statement(&map(), "", b"CREATE USER x", s.clone()),
            Routed::Filtered
        ));
        assert!(matches!(
            route_statement(
                &map(),
                "app",
                b"INSERT INTO skip1.t SELECT * FROM t",
                s.clone()
            ),
            Routed::Refused { .. }
        ));
        assert!(matches!(
            route_statement(&map(), "", b"INSERT INTO skip1.t SELECT * FROM app.t", s),
            Routed::Refused { .. }
        ));
    }

    /// A rename onto a non-ASCII name goes into UTF-8 text only: in a
    /// latin1 statement its bytes would name another database.
    #[test]
    fn a_non_ascii_rename_needs_utf8_text() {
        let mut r = BTreeMap::new();
        r.insert("app".to_string(), "caf\u{e9}".to_string());
        let m = DbMap::new(&[], &[], &r);
        let session = |cs: u16| Session {
            ctx: Context {
                charset: Some((cs, cs, cs)),
                ..Context::default()
            },
            ..Session::default()
        };
        let sql = b"INSERT INTO app.t VALUES (1)";
        assert!(matches!(
            route_statement(&m, "", sql, session(8)),
            Routed::Refused { .. }
        ));
        match route_statement(&m, "", sql, session(45)) {
            Routed::Apply { stmt, .. } => {
                assert_eq!(stmt.sql, "INSERT INTO `caf\u{e9}`.t VALUES (1)".as_bytes())
            }
            _ => panic!("utf8mb4 text takes the name"),
        }
    }

    /// Finding 1 of the MIXED-source report: an alias was taken for a
    /// database, the statement refused with no stream to stop, and dropped.
    #[test]
    fn aliases_route_by_the_default_database_and_unsure_text_refuses() {
        let s = Session::default();
        let sql = b"UPDATE child c SET c.v = c.v + 100 WHERE c.id < 50";
        match route_statement(&map(), "app", sql, s.clone()) {
            Routed::Apply { stmt, dbs } => {
                assert_eq!(dbs, vec!["app_eu"]);
                assert_eq!(stmt.sql, sql.to_vec(), "the alias is not renamed");
            }
            _ => panic!("applies"),
        }
        // Text that cannot be read with certainty stops the default
        // database's stream, or (none replicated) says it knows none.
        let unsure = b"UPDATE t SET v = app.w";
        match route_statement(&map(), "app", unsure, s.clone()) {
            Routed::Refused { dbs, why } => {
                assert_eq!(dbs, vec!["app_eu"]);
                assert!(why.contains("cannot tell"), "{why}");
            }
            _ => panic!("refused"),
        }
        match route_statement(&map(), "", unsure, s.clone()) {
            Routed::Refused { dbs, .. } => assert!(dbs.is_empty()),
            _ => panic!("refused"),
        }
        // A filtered default database the statement uses, with a
        // replicated one named: refused with the replicated stream (never
        // filtered away).
        for sql in [
            &b"INSERT INTO app.t SELECT v FROM t"[..],
            b"INSERT INTO app.t VALUES (DATABASE())",
            b"UPDATE app.t JOIN u ON u.id = t.id SET t.v = 1",
            b"CALL p()",
        ] {
            match route_statement(&map(), "skip1", sql, s.clone()) {
                Routed::Refused { dbs, .. } if sql != b"CALL p()" => {
                    assert_eq!(dbs, vec!["app_eu"])
                }
                Routed::Filtered if sql == b"CALL p()" => {}
                _ => panic!("{}", String::from_utf8_lossy(sql)),
            }
        }
    }

    /// `USE other; INSERT INTO app.t ...`: every table qualified, the
    /// excluded default database is not written — applied with no default
    /// database of its own (the batch's `USE` is our schema's).
    #[test]
    fn a_statement_naming_only_replicated_databases_applies_under_any_default() {
        let s = Session::default();
        for (default, sql) in [
            ("skip1", &b"INSERT INTO app.t VALUES (1)"[..]),
            ("skip1", b"INSERT INTO app.t SELECT v + 1 FROM app.t"),
            ("skip1", b"UPDATE app.t SET v = CONCAT('t', v) WHERE id = 1"),
            ("", b"DELETE FROM app.t WHERE id = 1"),
        ] {
            match route_statement(&map(), default, sql, s.clone()) {
                Routed::Apply { stmt, dbs } => {
                    assert_eq!(dbs, vec!["app_eu"]);
                    assert_eq!(stmt.db, None);
                    assert!(crate::batch_sql::stmt_use_sql(&stmt).ends_with("USE `sqlfleet`"));
                    assert!(String::from_utf8_lossy(&stmt.sql).contains("`app_eu`.t"));
                }
                _ => panic!("{}", String::from_utf8_lossy(sql)),
            }
        }
        // No default database and DATABASE(): NULL on the source, which
        // no target database reproduces.
        match route_statement(
            &map(),
            "",
            b"INSERT INTO app.t VALUES (DATABASE())",
            s.clone(),
        ) {
            Routed::Refused { dbs, why } => {
                assert_eq!(dbs, vec!["app_eu"]);
                assert!(why.contains("default database"), "{why}");
            }
            _ => panic!("refused"),
        }
        // A replicated default keeps its USE.
        match route_statement(&map(), "app", b"INSERT INTO app.t VALUES (1)", s) {
            Routed::Apply { stmt, .. } => assert_eq!(stmt.db.as_deref(), Some("app_eu")),
            _ => panic!("applies"),
        }
    }
}
