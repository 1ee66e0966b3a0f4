//! The session context a source statement ran in, read from its Query
//! event's status variables, and the `SET` items that give a target
//! session exactly that context — every time, not only when the event
//! carries a value.
//!
//! The server writes some status variables always (flags2, sql_mode, the
//! three character sets) and others only when they differ from the
//! default (the auto_increment pair, lc_time_names, charset_database, the
//! time zone when the statement used one): an absent one means "the
//! default", never "whatever the previous statement left". A replica's SQL
//! thread sets them all for each event; so does [`set_items`], so one
//! source session's settings never leak into the next statement applied
//! on the same target connection.
//!
//! The layout of each status variable is the server's (log_event.h,
//! Query_log_event): every key is read by its own length, an unknown key
//! stops the reading (its length is not known, nothing after it can be
//! trusted), and a known one the applier cannot reproduce refuses the
//! statement with its name ([`Context::refused`]) — fail closed. Written
//! by hand because the binlog library stops at the first MariaDB key.

/// flags2 bits (the session's `option_bits` the server logs), as MariaDB
/// 10.11 writes them: each one read off a real binlog by setting the
/// variable alone in a session (see the test that enumerates them).
pub const OPTION_AUTO_IS_NULL: u32 = 1 << 14;
pub const OPTION_NO_CHECK_CONSTRAINT_CHECKS: u32 = 1 << 15;
pub const OPTION_NOT_AUTOCOMMIT: u32 = 1 << 19;
pub const OPTION_EXPLICIT_DEF_TIMESTAMP: u32 = 1 << 24;
pub const OPTION_NO_FOREIGN_KEY_CHECKS: u32 = 1 << 26;
pub const OPTION_RELAXED_UNIQUE_CHECKS: u32 = 1 << 27;
pub const OPTION_IF_EXISTS: u32 = 1 << 28;
pub const OPTION_INSERT_HISTORY: u32 = 1 << 30;

const KNOWN_FLAGS2: u32 = OPTION_AUTO_IS_NULL
    | OPTION_NO_CHECK_CONSTRAINT_CHECKS
    | OPTION_NOT_AUTOCOMMIT
    | OPTION_EXPLICIT_DEF_TIMESTAMP
    | OPTION_NO_FOREIGN_KEY_CHECKS
    | OPTION_RELAXED_UNIQUE_CHECKS
    | OPTION_IF_EXISTS
    | OPTION_INSERT_HISTORY;

/// sql_mode bits the statement reader must know.
pub const MODE_ANSI_QUOTES: u64 = 1 << 2;
pub const MODE_NO_BACKSLASH_ESCAPES: u64 = 1 << 20;

/// Status variable keys (log_event.h).
pub mod key {
    pub const FLAGS2: u8 = 0;
    pub const SQL_MODE: u8 = 1;
    pub const CATALOG: u8 = 2;
    pub const AUTO_INCREMENT: u8 = 3;
    pub const CHARSET: u8 = 4;
    pub const TIME_ZONE: u8 = 5;
    pub const CATALOG_NZ: u8 = 6;
    pub const LC_TIME_NAMES: u8 = 7;
    pub const CHARSET_DATABASE: u8 = 8;
    pub const TABLE_MAP_FOR_UPDATE: u8 = 9;
    pub const MASTER_DATA_WRITTEN: u8 = 10;
    pub const INVOKER: u8 = 11;
    pub const UPDATED_DB_NAMES: u8 = 12;
    pub const MICROSECONDS: u8 = 13;
    pub const COMMIT_TS: u8 = 14;
    pub const COMMIT_TS2: u8 = 15;
    pub const EXPLICIT_DEFAULTS_FOR_TIMESTAMP: u8 = 16;
    pub const DDL_LOGGED_WITH_XID: u8 = 17;
    pub const DEFAULT_COLLATION_FOR_UTF8MB4: u8 = 18;
    pub const SQL_REQUIRE_PRIMARY_KEY: u8 = 19;
    pub const DEFAULT_TABLE_ENCRYPTION: u8 = 20;
    pub const HRNOW: u8 = 128;
    pub const XID: u8 = 129;
    pub const GTID_FLAGS3: u8 = 130;
    pub const CHARACTER_SET_COLLATIONS: u8 = 131;
}

/// What a Query event's status variables say of its session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub flags2: Option<u32>,
    pub sql_mode: Option<u64>,
    /// (increment, offset); absent: (1, 1).
    pub auto_increment: Option<(u16, u16)>,
    /// (character_set_client, collation_connection, collation_server) ids.
    pub charset: Option<(u16, u16, u16)>,
    /// Present when the statement used a time zone.
    pub time_zone: Option<String>,
    /// Absent: en_US (0).
    pub lc_time_names: Option<u16>,
    /// Absent: the default database's collation.
    pub charset_database: Option<u16>,
    /// MySQL's own key for the session's explicit_defaults_for_timestamp
    /// (MariaDB puts it in flags2).
    pub explicit_defaults: Option<bool>,
    /// Microseconds of the statement's start (MariaDB's Q_HRNOW, MySQL's
    /// Q_MICROSECONDS).
    pub usec: Option<u32>,
    /// MariaDB's Q_GTID_FLAGS3: its GTID event's extra flags, repeated
    /// (`gtid::flags_extra`; an ALTER logged in two phases carries them).
    pub gtid_flags3: Option<u8>,
    /// MariaDB 11.2+'s Q_CHARACTER_SET_COLLATIONS: the session's
    /// `character_set_collations` as (character set's primary collation
    /// id, collation id) pairs, written whenever the statement named a
    /// character set without a collation — empty (`83 00`) in a default
    /// session, so every such DDL of an 11.4 source carries it; absent:
    /// the map decided nothing (taken as empty).
    pub collations: Option<Vec<(u16, u16)>>,
    /// Why this statement's context cannot be reproduced on the target,
    /// if so (the first reason).
    pub refused: Option<String>,
}

impl Context {
    fn refuse(&mut self, why: String) {
        self.refused.get_or_insert(why);
    }

    /// The statement text's dialect, as far as the statement reader needs it.
    pub fn ansi_quotes(&self) -> bool {
        self.sql_mode.is_some_and(|m| m & MODE_ANSI_QUOTES != 0)
    }

    pub fn backslash_escapes(&self) -> bool {
        self.sql_mode
            .is_none_or(|m| m & MODE_NO_BACKSLASH_ESCAPES == 0)
    }

    /// For a text the server wrote itself (SHOW CREATE TABLE's, for a
    /// CREATE ... SELECT logged as rows): it escapes backslashes whatever
    /// the mode, so it is read with backslash escapes. A native replica
    /// reads it under the session's NO_BACKSLASH_ESCAPES (seen on 10.11:
    /// a default of `a\b` became `a\\b` there, silently).
    pub fn read_as_server_written(&mut self) {
        if let Some(m) = self.sql_mode.as_mut() {
            *m &= !MODE_NO_BACKSLASH_ESCAPES;
        }
    }

    /// The id of the character set the statement's text is in.
    pub fn client_charset(&self) -> Option<u16> {
        self.charset.map(|c| c.0)
    }

    /// Whether the statement's text is UTF-8 (utf8mb3 or utf8mb4: every
    /// collation id MariaDB 10.11 and 11.4 list, with 11.4's MySQL 8.0
    /// aliases (255..) and the UCA 14.0 ones (2048..) — checked against
    /// both servers' own lists in the tests), so a name written into it in
    /// UTF-8 reads as that name.
    pub fn utf8_text(&self) -> bool {
        matches!(
            self.client_charset(),
            Some(
                33
                | 45..=46
                | 83
                | 192..=215
                | 223..=247
                | 255..=271
                | 273..=275
                | 277..=294
                | 296..=298
                | 300
                | 305
                | 309
                | 576..=578
                | 608..=610
                | 1057
                | 1069..=1070
                | 1107
                | 1216
                | 1238
                | 1248
                | 1270
                | 2048..=2215
                | 2232..=2247
                | 2304..=2471
                | 2488..=2503,
            )
        )
    }

    /// How the statement's text is written, for the statement reader.
    pub fn dialect(&self) -> sqlfleet_dump::lex::Dialect {
        sqlfleet_dump::lex::Dialect {
            no_backslash_escapes: !self.backslash_escapes(),
            ansi_quotes: self.ansi_quotes(),
            charset: sqlfleet_dump::lex::Multibyte::of_collation(
                self.client_charset().unwrap_or(0),
            ),
        }
    }
}

fn u16le(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

/// Reads every status variable of a Query event. Never panics; a
/// variable it cannot read or reproduce sets [`Context::refused`].
pub fn read(raw: &[u8]) -> Context {
    let mut c = Context::default();
    let mut p = 0usize;
    while let Some(&k) = raw.get(p) {
        p += 1;
        let byte = |at: usize| raw.get(at).map(|b| *b as usize);
        // The variable's length from p, as the server lays it out.
        let len = match k {
            key::FLAGS2 | key::AUTO_INCREMENT | key::MASTER_DATA_WRITTEN => Some(4),
            key::SQL_MODE | key::TABLE_MAP_FOR_UPDATE | key::DDL_LOGGED_WITH_XID | key::XID => {
                Some(8)
            }
            key::CATALOG => byte(p).map(|n| 1 + n + 1),
            key::CHARSET => Some(6),
            key::TIME_ZONE | key::CATALOG_NZ => byte(p).map(|n| 1 + n),
            key::LC_TIME_NAMES | key::CHARSET_DATABASE | key::DEFAULT_COLLATION_FOR_UTF8MB4 => {
                Some(2)
            }
            key::INVOKER => byte(p).and_then(|u| byte(p + 1 + u).map(|h| 1 + u + 1 + h)),
            // The flags, then a START ALTER's sequence number when they
            // say COMMIT or ROLLBACK ALTER.
            key::GTID_FLAGS3 => byte(p).map(|f| {
                let ends = crate::gtid::flags_extra::COMMIT_ALTER
                    | crate::gtid::flags_extra::ROLLBACK_ALTER;
                1 + if f as u8 & ends != 0 { 8 } else { 0 }
            }),
            key::UPDATED_DB_NAMES => updated_db_names_len(&raw[p.min(raw.len())..]),
            // A count, then that many pairs of 2-byte ids (read off an
            // 11.4 server's binlog: `utf8mb4=utf8mb4_uca1400_ai_ci` is
            // `01 2d00 0009`).
            key::CHARACTER_SET_COLLATIONS => byte(p).map(|n| 1 + 4 * n),
            key::MICROSECONDS | key::HRNOW => Some(3),
            key::COMMIT_TS | key::COMMIT_TS2 => Some(0),
            key::EXPLICIT_DEFAULTS_FOR_TIMESTAMP
            | key::SQL_REQUIRE_PRIMARY_KEY
            | key::DEFAULT_TABLE_ENCRYPTION => Some(1),
            _ => None,
        };
        let Some(len) = len else {
            c.refuse(format!(
                "a statement with status variable {k}, which the applier does not know (nothing after it can be read)"
            ));
            return c;
        };
        let Some(v) = raw.get(p..p + len) else {
            c.refuse(format!(
                "a statement whose status variable {k} is cut short"
            ));
            return c;
        };
        p += len;
        match k {
            key::FLAGS2 => {
                let f = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                if f & !KNOWN_FLAGS2 != 0 {
                    c.refuse(format!(
                        "a statement whose session flags (flags2 {f:#x}) have bits the applier does not know ({:#x})",
                        f & !KNOWN_FLAGS2
                    ));
                }
                c.flags2 = Some(f);
            }
            key::SQL_MODE => {
                c.sql_mode = Some(u64::from_le_bytes(v.try_into().unwrap_or([0; 8])));
            }
            key::AUTO_INCREMENT => c.auto_increment = Some((u16le(v), u16le(&v[2..]))),
            key::CHARSET => c.charset = Some((u16le(v), u16le(&v[2..]), u16le(&v[4..]))),
            key::TIME_ZONE => c.time_zone = Some(String::from_utf8_lossy(&v[1..]).into_owned()),
            key::LC_TIME_NAMES => c.lc_time_names = Some(u16le(v)),
            key::CHARSET_DATABASE => c.charset_database = Some(u16le(v)),
            key::EXPLICIT_DEFAULTS_FOR_TIMESTAMP => c.explicit_defaults = Some(v[0] != 0),
            key::GTID_FLAGS3 => c.gtid_flags3 = Some(v[0]),
            key::CHARACTER_SET_COLLATIONS => {
                c.collations = Some(
                    v[1..]
                        .chunks_exact(4)
                        .map(|p| (u16le(p), u16le(&p[2..])))
                        .collect(),
                )
            }
            key::MICROSECONDS | key::HRNOW => {
                let u = u32::from_le_bytes([v[0], v[1], v[2], 0]);
                if u < 1_000_000 {
                    c.usec = Some(u);
                }
            }
            // MySQL's session settings MariaDB has no equivalent of:
            // reproducible only at their default.
            key::DEFAULT_COLLATION_FOR_UTF8MB4 => c.refuse(format!(
                "a statement under MySQL's default_collation_for_utf8mb4 (collation {}), which MariaDB has no setting for",
                u16le(v)
            )),
            key::SQL_REQUIRE_PRIMARY_KEY | key::DEFAULT_TABLE_ENCRYPTION if v[0] != 0 => {
                c.refuse(format!(
                    "a statement under MySQL's {} = ON, which MariaDB has no session setting for",
                    if k == key::SQL_REQUIRE_PRIMARY_KEY {
                        "sql_require_primary_key"
                    } else {
                        "default_table_encryption"
                    }
                ))
            }
            // No meaning for the applier: the catalog ("std"), a replica
            // filter's table bitmap (the target has no filters), the
            // definer of a statement whose text names it (MariaDB writes
            // DEFINER= into CREATE VIEW/ROUTINE/TRIGGER/EVENT), the
            // databases MySQL says it updated (read from the text here),
            // commit timestamps and DDL's xid.
            _ => {}
        }
    }
    c
}

/// Q_UPDATED_DB_NAMES: a count, then that many NUL-terminated names
/// (254: "too many", no names).
fn updated_db_names_len(b: &[u8]) -> Option<usize> {
    let n = *b.first()? as usize;
    let mut l = 1;
    if n != 254 {
        for _ in 0..n {
            let end = b.get(l..)?.iter().position(|x| *x == 0)?;
            l += end + 1;
        }
    }
    Some(l)
}

/// The three status variables every server writes: flags2, sql_mode, and
/// the (client, connection, server) character set ids.
pub type Core = (u32, u64, (u16, u16, u16));

/// Whether a target session can be given this context, without building
/// its `SET` (the assembler asks for every statement; [`set_items`] builds
/// it when the statement is applied): flags2, sql_mode and the character
/// sets when it can.
pub fn reproducible(c: &Context) -> Result<Core, String> {
    if let Some(why) = &c.refused {
        return Err(why.clone());
    }
    match (c.flags2, c.sql_mode, c.charset) {
        (Some(f), Some(mode), Some(cs)) => Ok((f, mode, cs)),
        // Every MariaDB (and MySQL since 5.0) writes these three.
        _ => Err(
            "a statement without its flags2, sql_mode or character set status variable (written by every server since MySQL 5.0): its session cannot be known".into(),
        ),
    }
}

/// The `SET` items (without `SET`) that put a target session in the
/// statement's context: every variable, from the event where it is there
/// and the server's default where it is not. `Err` when the context
/// cannot be reproduced (the statement must not run).
pub fn set_items(c: &Context) -> Result<Vec<String>, String> {
    let (f, mode, (client, conn, server)) = reproducible(c)?;
    let on = |bit: u32| u8::from(f & bit != 0);
    let off = |bit: u32| u8::from(f & bit == 0);
    let explicit = c
        .explicit_defaults
        .map_or(on(OPTION_EXPLICIT_DEF_TIMESTAMP), u8::from);
    let (inc, offset) = c.auto_increment.unwrap_or((1, 1));
    let mut v = vec![
        format!(
            "@@session.foreign_key_checks = {}",
            off(OPTION_NO_FOREIGN_KEY_CHECKS)
        ),
        format!(
            "@@session.unique_checks = {}",
            off(OPTION_RELAXED_UNIQUE_CHECKS)
        ),
        format!("@@session.sql_auto_is_null = {}", on(OPTION_AUTO_IS_NULL)),
        format!(
            "@@session.check_constraint_checks = {}",
            off(OPTION_NO_CHECK_CONSTRAINT_CHECKS)
        ),
        // Set on every statement, so a target that cannot (before MariaDB
        // 10.10 the variable is global and read-only) stops with the
        // server's error instead of creating other columns.
        format!("@@session.explicit_defaults_for_timestamp = {explicit}"),
        format!("@@session.sql_mode = {mode}"),
        format!("@@session.character_set_client = {client}"),
        format!("@@session.collation_connection = {conn}"),
        format!("@@session.collation_server = {server}"),
        match c.charset_database {
            Some(d) => format!("@@session.collation_database = {d}"),
            None => "@@session.collation_database = DEFAULT".into(),
        },
        match &c.time_zone {
            Some(tz) => format!(
                "@@session.time_zone = {}",
                sqlfleet_conn::quote::literal(tz)
            ),
            None => "@@session.time_zone = DEFAULT".into(),
        },
        format!("@@session.lc_time_names = {}", c.lc_time_names.unwrap_or(0)),
        format!("@@session.auto_increment_increment = {inc}"),
        format!("@@session.auto_increment_offset = {offset}"),
    ];
    if let Some(pairs) = c.collations.as_deref().filter(|p| !p.is_empty()) {
        v.push(format!(
            "@@session.character_set_collations = {}",
            collations_by_id(pairs)
        ));
    }
    // Variables older targets lack: at their default they go in a
    // versioned comment (a target without the variable behaves as the
    // default), otherwise plainly (such a target stops with its error).
    for (bit, name, since) in [
        (OPTION_IF_EXISTS, "sql_if_exists", "100502"),
        (
            OPTION_INSERT_HISTORY,
            "system_versioning_insert_history",
            "101100",
        ),
    ] {
        if f & bit != 0 {
            v.push(format!("@@session.{name} = 1"));
        } else {
            at_default(&mut v, since, &format!("@@session.{name} = 0"));
        }
    }
    if c.collations.as_deref().is_none_or(|p| p.is_empty()) {
        // Empty as SPACE(0), not '': a source session's EMPTY_STRING_IS_NULL
        // (set above) makes '' NULL, which the variable refuses (1231: a
        // seed on 11.4 stopped so).
        at_default(
            &mut v,
            "110200",
            "@@session.character_set_collations = SPACE(0)",
        );
    }
    Ok(v)
}

/// Appends an item older targets lack, at its default, to the previous
/// one in a versioned comment: `a = 1 /*!NNNNNN , b = 0 */`.
fn at_default(v: &mut [String], since: &str, item: &str) {
    if let Some(last) = v.last_mut() {
        last.push_str(&format!(" /*!{since} , {item} */"));
    }
}

/// `character_set_collations` from the event's ids, named by the target
/// itself (its own collation table, so no list of ours can be out of
/// date): one `CONCAT`, NULL — refused by the server with 1231, the
/// statement not run — when the target lacks any of the ids; a target
/// without the variable (before 11.2) stops with 1193.
fn collations_by_id(pairs: &[(u16, u16)]) -> String {
    let name = |column: &str, id: u16| {
        format!(
            "(SELECT {column} FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID = {id})"
        )
    };
    let items: Vec<String> = pairs
        .iter()
        .map(|(set, coll)| {
            format!(
                "{}, '=', {}",
                name("CHARACTER_SET_NAME", *set),
                name("FULL_COLLATION_NAME", *coll)
            )
        })
        .collect();
    format!("CONCAT({})", items.join(", ',', "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status variables MariaDB 10.11 writes for a statement in a
    /// default session: flags2, sql_mode, catalog "std", charset.
    fn base() -> Vec<u8> {
        let mut raw = vec![key::FLAGS2];
        raw.extend(OPTION_EXPLICIT_DEF_TIMESTAMP.to_le_bytes());
        raw.push(key::SQL_MODE);
        raw.extend(1_411_383_296u64.to_le_bytes());
        raw.extend([key::CATALOG_NZ, 3, b's', b't', b'd']);
        raw.extend([key::CHARSET, 33, 0, 33, 0, 8, 0]);
        raw
    }

    fn items(raw: &[u8]) -> Vec<String> {
        set_items(&read(raw)).unwrap_or_else(|e| panic!("{e}"))
    }

    fn has(v: &[String], want: &str) -> bool {
        v.iter().any(|i| i.contains(want))
    }

    /// No item is an empty string literal: a source session's
    /// EMPTY_STRING_IS_NULL, set by the items themselves, makes `''` NULL
    /// for those after it (`character_set_collations = ''` stopped a
    /// stream on 11.4 with 1231).
    #[test]
    fn no_item_reads_an_empty_string_literal() {
        let mut c = read(&base());
        for mode in [0, 1u64 << 33, u64::MAX] {
            c.sql_mode = Some(mode);
            for item in set_items(&c).unwrap_or_default() {
                assert!(!item.contains("''"), "{item}");
            }
        }
    }

    /// One row per status variable: the bytes it adds to a default
    /// statement, and what the SET must then say. The defaults row is the
    /// same statement without it: what a statement after a session that
    /// set it must get (never the previous value).
    #[test]
    fn every_status_variable_and_its_absence() {
        let d = items(&base());
        for want in [
            "foreign_key_checks = 1",
            "unique_checks = 1",
            "sql_auto_is_null = 0",
            "check_constraint_checks = 1",
            "explicit_defaults_for_timestamp = 1",
            "sql_mode = 1411383296",
            "character_set_client = 33",
            "collation_connection = 33",
            "collation_server = 8",
            "collation_database = DEFAULT",
            "time_zone = DEFAULT",
            "lc_time_names = 0",
            "auto_increment_increment = 1",
            "auto_increment_offset = 1",
            "sql_if_exists = 0",
            "system_versioning_insert_history = 0",
            "/*!110200 , @@session.character_set_collations = SPACE(0) */",
        ] {
            assert!(has(&d, want), "defaults lack {want}: {d:?}");
        }
        let flags = |f: u32| {
            let mut raw = base();
            raw[1..5].copy_from_slice(&f.to_le_bytes());
            raw
        };
        let rows: Vec<(Vec<u8>, &str)> = vec![
            (
                flags(OPTION_NO_FOREIGN_KEY_CHECKS),
                "foreign_key_checks = 0",
            ),
            (flags(OPTION_RELAXED_UNIQUE_CHECKS), "unique_checks = 0"),
            (
                flags(OPTION_AUTO_IS_NULL | OPTION_EXPLICIT_DEF_TIMESTAMP),
                "sql_auto_is_null = 1",
            ),
            (
                flags(OPTION_NO_CHECK_CONSTRAINT_CHECKS),
                "check_constraint_checks = 0",
            ),
            (flags(0), "explicit_defaults_for_timestamp = 0"),
            (flags(OPTION_IF_EXISTS), "@@session.sql_if_exists = 1"),
            (
                flags(OPTION_INSERT_HISTORY),
                "@@session.system_versioning_insert_history = 1",
            ),
            (
                [base(), vec![key::AUTO_INCREMENT, 5, 0, 3, 0]].concat(),
                "auto_increment_increment = 5",
            ),
            (
                [base(), vec![key::AUTO_INCREMENT, 5, 0, 3, 0]].concat(),
                "auto_increment_offset = 3",
            ),
            (
                [
                    base(),
                    vec![key::TIME_ZONE, 6, b'+', b'0', b'2', b':', b'0', b'0'],
                ]
                .concat(),
                "time_zone = '+02:00'",
            ),
            (
                [base(), vec![key::LC_TIME_NAMES, 4, 0]].concat(),
                "lc_time_names = 4",
            ),
            (
                [base(), vec![key::CHARSET_DATABASE, 48, 0]].concat(),
                "collation_database = 48",
            ),
            (
                [base(), vec![key::EXPLICIT_DEFAULTS_FOR_TIMESTAMP, 0]].concat(),
                "explicit_defaults_for_timestamp = 0",
            ),
            // MariaDB 11.4's bytes for `utf8mb4=utf8mb4_uca1400_ai_ci`.
            (
                [base(), vec![key::CHARACTER_SET_COLLATIONS, 1, 45, 0, 0, 9]].concat(),
                "@@session.character_set_collations = CONCAT((SELECT CHARACTER_SET_NAME \
                 FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID = 45), \
                 '=', (SELECT FULL_COLLATION_NAME FROM \
                 information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID = 2304))",
            ),
            (
                [
                    base(),
                    vec![
                        key::CHARACTER_SET_COLLATIONS,
                        2,
                        33,
                        0,
                        83,
                        0,
                        45,
                        0,
                        224,
                        0,
                    ],
                ]
                .concat(),
                "WHERE ID = 83), ',', (SELECT CHARACTER_SET_NAME \
                 FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID = 45)",
            ),
        ];
        for (raw, want) in &rows {
            let got = items(raw);
            assert!(has(&got, want), "{raw:?} should give {want}: {got:?}");
            if raw.contains(&key::CHARACTER_SET_COLLATIONS) {
                assert!(
                    !has(&got, "character_set_collations = SPACE(0)"),
                    "{raw:?}: the map both set and emptied: {got:?}"
                );
            }
        }
        // Variables without a meaning for the applier are read past.
        for extra in [
            vec![key::TABLE_MAP_FOR_UPDATE, 1, 0, 0, 0, 0, 0, 0, 0],
            vec![key::INVOKER, 1, b'u', 1, b'h'],
            vec![key::UPDATED_DB_NAMES, 2, b'a', 0, b'b', 0],
            vec![key::UPDATED_DB_NAMES, 254],
            vec![key::MASTER_DATA_WRITTEN, 0, 0, 0, 0],
            vec![key::COMMIT_TS],
            vec![key::DDL_LOGGED_WITH_XID, 1, 0, 0, 0, 0, 0, 0, 0],
            vec![key::XID, 1, 0, 0, 0, 0, 0, 0, 0],
            vec![key::SQL_REQUIRE_PRIMARY_KEY, 0],
            vec![key::DEFAULT_TABLE_ENCRYPTION, 0],
            vec![key::CATALOG, 3, b's', b't', b'd', 0],
            // An ALTER's START, COMMIT and ROLLBACK (MariaDB 10.11's bytes).
            vec![key::GTID_FLAGS3, 2],
            vec![key::GTID_FLAGS3, 4, 0x12, 0, 0, 0, 0, 0, 0, 0],
            vec![key::GTID_FLAGS3, 8, 0x0f, 0, 0, 0, 0, 0, 0, 0],
            // MariaDB 11.4's map in a default session (empty).
            vec![key::CHARACTER_SET_COLLATIONS, 0],
        ] {
            let raw = [base(), extra.clone(), vec![key::HRNOW, 0x40, 0xe2, 0x01]].concat();
            let c = read(&raw);
            assert_eq!(c.refused, None, "{extra:?}");
            assert_eq!(c.usec, Some(123_456), "{extra:?} hid the microseconds");
            assert_eq!(items(&raw), d, "{extra:?} changed the context");
        }
    }

    #[test]
    fn what_cannot_be_reproduced_refuses() {
        for (extra, why) in [
            (
                vec![key::SQL_REQUIRE_PRIMARY_KEY, 1],
                "sql_require_primary_key",
            ),
            (
                vec![key::DEFAULT_TABLE_ENCRYPTION, 1],
                "default_table_encryption",
            ),
            (vec![key::DEFAULT_COLLATION_FOR_UTF8MB4, 255, 0], "utf8mb4"),
            (vec![key::GTID_FLAGS3, 8, 1, 0], "cut short"),
            (
                vec![key::CHARACTER_SET_COLLATIONS, 2, 45, 0, 0, 9],
                "cut short",
            ),
            (vec![77, 0], "status variable 77"),
            (vec![key::TIME_ZONE, 9, b'x'], "cut short"),
        ] {
            let raw = [base(), extra].concat();
            let e = set_items(&read(&raw)).expect_err(why);
            assert!(e.contains(why), "{e}");
        }
        let mut raw = base();
        raw[4] |= 0x80; // bit 31
        assert!(set_items(&read(&raw)).is_err(), "an unknown flags2 bit");
        // The three variables every server writes.
        assert!(set_items(&read(&[])).is_err());
        assert!(set_items(&read(&base()[..5])).is_err());
    }

    #[test]
    fn dialect_follows_sql_mode() {
        let mut c = read(&base());
        assert!(c.backslash_escapes() && !c.ansi_quotes());
        c.sql_mode = Some(MODE_NO_BACKSLASH_ESCAPES | MODE_ANSI_QUOTES);
        assert!(!c.backslash_escapes() && c.ansi_quotes());
        assert_eq!(c.client_charset(), Some(33));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_without_panic(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96)) {
            let c = read(&raw);
            let _ = set_items(&c);
        }
    }
}
