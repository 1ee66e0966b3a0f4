//! A seeded workload for one source: two databases (`alpha`, `beta`) and
//! sometimes a third created and dropped, written in the shapes the
//! MIXED-source report found lost and the ones a DBA's application uses —
//! aliases in single- and multi-table UPDATE/DELETE, INSERT ... SELECT with
//! subqueries, triggers with NEW/OLD writing other tables, views with
//! aliases, joins and views of views (one across databases), procedures
//! and functions with bodies, CALL, sequences as column defaults, foreign
//! keys with cascades, generated columns, partitions, a table without a
//! primary key, a MyISAM table (alone and in a transaction with InnoDB), CREATE TABLE ... SELECT, RENAME TABLE across databases,
//! user variables, LAST_INSERT_ID(), transactions over both databases and
//! one large transaction (a table without a primary key stays small: a
//! replica scans it once per changed row), binlogs rotated, and the
//! source killed -9 or shut down cleanly between two steps, and sessions
//! with settings other than the defaults (the auto_increment pair,
//! lc_time_names, NO_BACKSLASH_ESCAPES and ANSI_QUOTES with the renamed
//! database's name inside a literal, explicit_defaults_for_timestamp=0,
//! foreign_key_checks=0, a latin1 client, NO_AUTO_VALUE_ON_ZERO, any one
//! of the sql_mode flags the server lists, any session variable the server
//! lists at any value its description allows, an
//! excluded default database under statements that qualify every table, a
//! temporary table) set back
//! to the defaults after (on the code before the session context, 8 of 8
//! seeds differed), and LOAD DATA of a file the source wrote with SELECT
//! ... INTO OUTFILE (tabs and escapes inside fields, ids from
//! AUTO_INCREMENT, IGNORE or REPLACE): logged as a statement (its file in
//! Begin_load_query/Append_block events) on STATEMENT sources, and XA
//! transactions (prepared and ended by another session steps later,
//! committed in one phase, rolled back; ids with a branch qualifier, a
//! format id, in hex; some across both databases), and rows of a table
//! whose columns are drawn from the server's data types (types.rs), and
//! the table kinds and statement kinds of `kinds_step` (a system-versioned
//! table with its history, an application-time period, Aria and MEMORY
//! tables, TRUNCATE, savepoints, rollbacks, CREATE OR REPLACE, RETURNING,
//! LOCK TABLES, table maintenance).
//! Every statement is deterministic, so a replica
//! that applies them in the source's order must end identical.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::types::Typed;

/// A statement of a step that is not sent: the step's connection is
/// closed and a new one opened in the workload's database (an XA branch
/// prepared on the first is ended from the second).
pub const RECONNECT: &str = "-- reconnect";

/// One source's part of a seed.
pub struct Plan {
    pub format: &'static str,
    pub image: &'static str,
    pub alpha: String,
    pub beta: String,
    pub gamma: String,
    /// Groups of statements; each group runs on the one connection in
    /// order (a group is a transaction or a statement with its session).
    pub steps: Vec<Vec<String>>,
    /// After this step the source goes down and comes back: killed -9
    /// (true) or shut down cleanly (false).
    pub restart: Option<(usize, bool)>,
    /// How the source logs: drawn apart from the rest, so a seed's
    /// workload is what it was.
    pub logging: Logging,
}

/// How a source writes its binary log, beyond the format and row image:
/// server settings a user runs with, each changing the events (or their
/// framing) the reader gets.
#[derive(Debug, Clone)]
pub struct Logging {
    /// `log_bin_compress=ON` from this many bytes on
    /// (`log_bin_compress_min_len`): compressed Query and rows events.
    pub compress: Option<u32>,
    /// `binlog_checksum`: CRC32 (the default) or NONE.
    pub checksum: &'static str,
    /// `binlog_alter_two_phase`: each ALTER logged at its start and end.
    pub two_phase: bool,
    /// `binlog_row_metadata`: what a table map says of its columns.
    pub row_metadata: &'static str,
    /// `binlog_annotate_row_events`: the statement before its rows.
    pub annotate: bool,
    /// `binlog_direct_non_transactional_updates`: a MyISAM write inside
    /// a transaction logged at once, as a group of its own.
    pub direct_nontx: bool,
    /// Group commit held for a second committer
    /// (`binlog_commit_wait_count=2`, up to 5 ms): GTID events with a
    /// commit id.
    pub commit_wait: bool,
}

impl Logging {
    fn draw(seed: u64, src: usize) -> Self {
        let mut r = StdRng::seed_from_u64(seed ^ (0xC0 + src as u64));
        let compress = match r.gen_range(0..4) {
            0 => Some(10),
            1 => Some(256),
            _ => None,
        };
        let checksum = ["CRC32", "CRC32", "NONE"][r.gen_range(0..3)];
        let two_phase = r.gen_bool(0.5);
        Logging {
            compress,
            checksum,
            two_phase,
            row_metadata: ["NO_LOG", "MINIMAL", "FULL"][r.gen_range(0..3)],
            annotate: r.gen_bool(0.7),
            direct_nontx: r.gen_bool(0.3),
            commit_wait: r.gen_bool(0.25),
        }
    }

    /// What a session of the source runs first: its own settings, and the
    /// server's (global: set again after a restart). The checksum is not
    /// here: each SET of it rotates the binlog, so it is set only when it
    /// differs.
    pub fn sets(&self) -> String {
        let on = |b: bool| if b { "ON" } else { "OFF" };
        format!(
            "SET SESSION binlog_alter_two_phase = {}, SESSION binlog_annotate_row_events = {}, \
             SESSION binlog_direct_non_transactional_updates = {}; \
             SET GLOBAL log_bin_compress = {}, GLOBAL log_bin_compress_min_len = {}, \
             GLOBAL binlog_row_metadata = {}, GLOBAL binlog_commit_wait_count = {}, \
             GLOBAL binlog_commit_wait_usec = 5000",
            on(self.two_phase),
            on(self.annotate),
            on(self.direct_nontx),
            on(self.compress.is_some()),
            self.compress.unwrap_or(256),
            self.row_metadata,
            if self.commit_wait { 2 } else { 0 },
        )
    }
}

impl std::fmt::Display for Logging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "log_bin_compress={} binlog_checksum={} binlog_alter_two_phase={} binlog_row_metadata={} \
             binlog_annotate_row_events={} binlog_direct_non_transactional_updates={} binlog_commit_wait_count={}",
            self.compress.map_or("OFF".to_string(), |n| format!("ON(min_len {n})")),
            self.checksum,
            self.two_phase,
            self.row_metadata,
            self.annotate,
            self.direct_nontx,
            if self.commit_wait { 2 } else { 0 },
        )
    }
}

const FORMATS: &[&str] = &["ROW", "MIXED", "STATEMENT"];
const IMAGES: &[&str] = &["FULL", "MINIMAL", "NOBLOB"];

/// Statements under one non-default session setting, drawn from what a
/// Query event's status variables carry, then the setting back at its
/// default. `a` is the (renamed) database: its name inside a literal must
/// stay as written.
fn session_step(
    rng: &mut StdRng,
    vars: &[(String, String)],
    a: &str,
    i: usize,
    n: i32,
) -> Vec<String> {
    let (set, body, reset): (String, Vec<String>, &str) = match rng.gen_range(0..16) {
        0 => (
            format!(
                "SET SESSION auto_increment_increment = {}, auto_increment_offset = {}",
                rng.gen_range(2..9),
                rng.gen_range(1..3)
            ),
            vec!["INSERT INTO bulk (a, b) VALUES (1, 'inc'), (2, 'inc'), (3, 'inc')".into()],
            "SET SESSION auto_increment_increment = DEFAULT, auto_increment_offset = DEFAULT",
        ),
        1 => (
            format!(
                "SET SESSION lc_time_names = '{}'",
                ["de_DE", "fr_FR", "ja_JP", "es_ES"][rng.gen_range(0..4)]
            ),
            vec!["INSERT INTO bulk (a, b) VALUES (5, DATE_FORMAT('2024-03-01', '%W %M'))".into()],
            "SET SESSION lc_time_names = DEFAULT",
        ),
        2 => (
            "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'".into(),
            vec![format!(
                "INSERT INTO nopk (a, b) VALUES ({n}, 'C:\\dir\\'), ({n}, ' {a}.nopk {i}')"
            )],
            "SET SESSION sql_mode = DEFAULT",
        ),
        3 => (
            "SET SESSION explicit_defaults_for_timestamp = 0".into(),
            vec![
                format!("CREATE TABLE ts{i} (id INT PRIMARY KEY, t TIMESTAMP)"),
                format!("INSERT INTO ts{i} (id) VALUES (1)"),
            ],
            "SET SESSION explicit_defaults_for_timestamp = DEFAULT",
        ),
        4 => (
            "SET SESSION foreign_key_checks = 0".into(),
            vec![format!(
                "INSERT IGNORE INTO child (pid, v) VALUES ({}, 1)",
                900_000 + i
            )],
            "SET SESSION foreign_key_checks = DEFAULT",
        ),
        5 => (
            "SET NAMES latin1".into(),
            vec![format!(
                "INSERT INTO nopk (a, b) VALUES ({n}, 'caf\u{e9} {i}')"
            )],
            "SET NAMES utf8mb4",
        ),
        6 => (
            "SET SESSION sql_mode = 'ANSI_QUOTES'".into(),
            vec![format!(
                "INSERT INTO \"{a}\".\"nopk\" (a, b) VALUES ({n}, 'ansi')"
            )],
            "SET SESSION sql_mode = DEFAULT",
        ),
        // A multi-byte client character set whose second bytes include
        // `\`: sent as they are, the bytes of '中\' are two GBK (or Big5)
        // characters (E4 B8, AD 5C) and the quote after them ends the literal — the
        // renamed database's name inside the next one stays as written.
        9 => (
            format!("SET NAMES {}", ["gbk", "big5"][rng.gen_range(0..2)]),
            vec![format!(
                "INSERT INTO nopk (a, b) VALUES ({n}, '\u{4e2d}\\'), ({n}, ' {a}.nopk {i}')"
            )],
            "SET NAMES utf8mb4",
        ),
        // A temporary table filled, read into base tables, dropped (its
        // own name in a MIXED or STATEMENT binlog; a table named like
        // another session's would be the same).
        8 => (
            "CREATE TEMPORARY TABLE tmp (a INT, b VARCHAR(40))".into(),
            vec![
                format!(
                    "INSERT INTO tmp VALUES ({n}, 'tmp {i}'), ({}, 'tmp')",
                    n + 1
                ),
                "INSERT INTO nopk (a, b) SELECT a, b FROM tmp".into(),
                "UPDATE bulk JOIN tmp ON bulk.a = tmp.a SET bulk.b = CONCAT(bulk.b, '#')".into(),
            ],
            "DROP TEMPORARY TABLE tmp",
        ),
        // An excluded default database, every table qualified: only the
        // replicated one is written (native replication applies it), by
        // a multi-table DELETE too, whose targets stand unqualified, and
        // by joins with a comma after their ON or USING.
        7 => (
            format!("USE {}", excluded(a)),
            vec![
                format!("INSERT INTO {a}.nopk (a, b) VALUES ({n}, 'other default {i}')"),
                format!("UPDATE {a}.bulk SET b = CONCAT(b, '+') WHERE a = {}", n % 6),
                // A multi-table DELETE in both forms, its targets the
                // aliases its table list defines.
                format!(
                    "INSERT INTO {a}.nopk (a, b) VALUES ({n}, 'gone {i}'), ({n}, 'gone too {i}')"
                ),
                format!("DELETE x FROM {a}.nopk AS x WHERE x.b = 'gone {i}'"),
                // Tables after a join's USING (c) and ON, comma-joined.
                format!(
                    "UPDATE {a}.nopk AS x JOIN {a}.bulk AS y USING (a), {a}.bulk AS z \
                     SET x.b = CONCAT(x.b, '!') WHERE x.b = 'gone too {i}' AND z.a = y.a"
                ),
                format!(
                    "DELETE FROM x USING {a}.nopk AS x LEFT JOIN {a}.bulk AS y ON y.a = x.a, \
                     {a}.bulk AS z WHERE x.b LIKE 'gone too {i}%'"
                ),
            ],
            "USE_BACK",
        ),
        // A flag drawn from every sql_mode flag the server lists, with
        // statements whose result some flags change: '' (NULL under
        // EMPTY_STRING_IS_NULL), NOT ... BETWEEN (HIGH_NOT_PRECEDENCE), and
        // an UPDATE reading a column it sets (SIMULTANEOUS_ASSIGNMENT).
        11 => {
            let flags = sqlfleet_testkit::server_lists::sql_mode_flags();
            let flag = &flags[rng.gen_range(0..flags.len())];
            (
                format!("SET SESSION sql_mode = '{flag}'"),
                vec![
                    format!(
                        "INSERT INTO nopk (a, b) VALUES ({n}, ''), \
                         ({n}, IF(NOT 1 BETWEEN -5 AND 5, 'high not', 'not {i}'))"
                    ),
                    format!(
                        "UPDATE bulk SET a = a + 100, b = CONCAT('sa ', a) WHERE a = {}",
                        n % 6
                    ),
                ],
                "SET SESSION sql_mode = DEFAULT",
            )
        }
        // Texts the server writes itself, in each spelling of names it
        // has (ANSI_QUOTES: double quotes; `sql_quote_show_create = 0`:
        // none): the CREATE of a CREATE ... SELECT logged as rows, the
        // DROPs of a table and a temporary one dropped together,
        // SAVEPOINT and ROLLBACK TO around a MyISAM write.
        10 => {
            let (set, reset) = [
                (
                    "SET SESSION sql_quote_show_create = 0",
                    "SET SESSION sql_quote_show_create = DEFAULT",
                ),
                (
                    "SET SESSION sql_mode = 'ANSI_QUOTES'",
                    "SET SESSION sql_mode = DEFAULT",
                ),
                (
                    "SET SESSION sql_mode = 'ANSI_QUOTES', sql_quote_show_create = 0",
                    "SET SESSION sql_mode = DEFAULT, sql_quote_show_create = DEFAULT",
                ),
            ][rng.gen_range(0..3)];
            (
                set.into(),
                vec![
                    format!(
                        "CREATE TABLE cs{i} (s VARCHAR(20) DEFAULT 'it''s', id INT AUTO_INCREMENT PRIMARY KEY)                          SELECT a, b FROM bulk WHERE a = {} ORDER BY id",
                        n % 6
                    ),
                    format!("CREATE TEMPORARY TABLE tq{i} (a INT)"),
                    format!("INSERT INTO tq{i} VALUES ({n}), ({})", n + 1),
                    format!("INSERT INTO nopk (a, b) SELECT a, 'spelt {i}' FROM tq{i}"),
                    format!("CREATE TABLE dr{i} (a INT)"),
                    format!("DROP TABLE dr{i}, tq{i}"),
                    "BEGIN".into(),
                    format!("INSERT INTO nopk (a, b) VALUES ({n}, 'kept {i}')"),
                    "SAVEPOINT sp".into(),
                    format!("UPDATE myi SET v = v + 1 WHERE id % 5 = {}", n.rem_euclid(5)),
                    format!("INSERT INTO nopk (a, b) VALUES ({n}, 'undone {i}')"),
                    "ROLLBACK TO SAVEPOINT sp".into(),
                    "COMMIT".into(),
                ],
                reset,
            )
        }
        // Any session variable the server lists, at any value its
        // description allows (`server_lists::SessionVariable`), with
        // statements whose result or logging a setting may change: an
        // AUTO_INCREMENT insert of a division, a localized date, a
        // backslash and an empty string; an UPDATE; an INSERT ... SELECT;
        // a CREATE TABLE naming no engine with a TIMESTAMP column, a
        // column of the default character set and one naming a set but no
        // collation (`character_set_collations` decides it on 11.2+).
        12..=15 if !vars.is_empty() => {
            let (name, value) = &vars[rng.gen_range(0..vars.len())];
            (
                format!("SET SESSION {name} = {value}"),
                vec![
                    format!(
                        "INSERT INTO bulk (a, b) VALUES ({n}, CONCAT_WS(' ', 1/7, \
                         DATE_FORMAT('2024-03-01', '%W %M'), 'x\\y', '', 'v{i}'))"
                    ),
                    format!("UPDATE bulk SET b = CONCAT(b, '+') WHERE a = {}", n % 6),
                    format!("INSERT INTO nopk (a, b) SELECT a, LEFT(b, 40) FROM bulk WHERE a = {n}"),
                    format!("CREATE TABLE sv{i} (id INT AUTO_INCREMENT PRIMARY KEY, t TIMESTAMP NULL, s VARCHAR(20), \
                             u VARCHAR(20) CHARACTER SET utf8mb4)"),
                    format!("INSERT INTO sv{i} (s, u) VALUES ('a', 'a'), ('b\\c', 'B')"),
                ],
                // (Held for the reset below, which names the variable.)
                "VAR_BACK",
            )
        }
        _ => (
            "SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO'".into(),
            vec![format!(
                "INSERT IGNORE INTO audit (n, what, at_id) VALUES (0, 'zero', {i})"
            )],
            "SET SESSION sql_mode = DEFAULT",
        ),
    };
    let mut v = vec![set];
    v.extend(body);
    v.push(match reset {
        "USE_BACK" => format!("USE {a}"),
        "VAR_BACK" => {
            let name = v[0].trim_start_matches("SET SESSION ");
            let name = name.split(' ').next().unwrap_or_default();
            format!("SET SESSION {name} = DEFAULT")
        }
        _ => reset.into(),
    });
    v
}

/// Statements on the table kinds CREATE TABLE offers beyond the setup's
/// (a system-versioned table, whose history rows and their row_start and
/// row_end the copies must hold alike; an application-time period split
/// by `FOR PORTION OF`; Aria and MEMORY tables — a MEMORY table is empty
/// after a source restart, and the source logs that emptying as its own
/// statement) and statement kinds the server logs that the other steps
/// do not send: TRUNCATE, SAVEPOINT and ROLLBACK TO (with a MyISAM write
/// the rollback cannot undo), a transaction rolled back after a MyISAM
/// write, CREATE OR REPLACE ... SELECT, DROP TABLE IF EXISTS of a table
/// that is not there, RETURNING, LOCK TABLES, and the table maintenance
/// statements the server writes to its binary log; and DDL kinds
/// (partitions truncated, exchanged, rebuilt and coalesced; `ALTER
/// DATABASE` of the default database's character set around a CREATE
/// TABLE; a swap by one RENAME; index, column, key and engine changes;
/// CREATE TABLE ... LIKE; views replaced, altered and written through).
/// Each table is made by the first step that writes it.
fn kinds_step(rng: &mut StdRng, i: usize, n: i32, r: i32) -> Vec<String> {
    let sv =
        "CREATE TABLE IF NOT EXISTS sv (id INT PRIMARY KEY, v INT NOT NULL) WITH SYSTEM VERSIONING";
    match rng.gen_range(0..18) {
        0 | 1 => vec![
            sv.into(),
            format!(
                "INSERT INTO sv VALUES ({n}, {r}), ({}, 1) ON DUPLICATE KEY UPDATE v = v + 1",
                n + 50
            ),
            format!("UPDATE sv SET v = v + {n} WHERE id % 3 = {}", r % 3),
        ],
        2 => {
            let mut v = vec![
                sv.into(),
                format!("DELETE FROM sv WHERE id % 4 = {}", r % 4),
            ];
            if rng.gen_bool(0.3) {
                v.push("DELETE HISTORY FROM sv".into());
            }
            v
        }
        3 => {
            let to = rng.gen_range(4..10);
            vec![
                "CREATE TABLE IF NOT EXISTS ap (id INT, s DATE, e DATE, v INT, PERIOD FOR p (s, e))"
                    .into(),
                format!("INSERT INTO ap VALUES ({n}, '2024-01-01', '2024-12-31', {r})"),
                format!(
                    "UPDATE ap FOR PORTION OF p FROM '2024-03-01' TO '2024-0{to}-01' SET v = v + 1 WHERE id = {n}"
                ),
                format!(
                    "DELETE FROM ap FOR PORTION OF p FROM '2024-0{to}-15' TO '2024-11-01' WHERE id % 3 = {}",
                    r % 3
                ),
            ]
        }
        4 => vec![
            "CREATE TABLE IF NOT EXISTS aria_t (id INT PRIMARY KEY, v INT) ENGINE=Aria".into(),
            format!("INSERT INTO aria_t VALUES ({n}, {r}) ON DUPLICATE KEY UPDATE v = v + {r}"),
            "CREATE TABLE IF NOT EXISTS mem (id INT PRIMARY KEY, v INT) ENGINE=MEMORY".into(),
            format!("REPLACE INTO mem VALUES ({n}, {r}), ({}, {i})", n + 100),
        ],
        5 => {
            let mut v = vec![
                "CREATE TABLE IF NOT EXISTS scratch (id INT PRIMARY KEY, v INT)".into(),
                format!("INSERT IGNORE INTO scratch SELECT seq, seq * {r} FROM seq_1_to_{n}"),
            ];
            if rng.gen_bool(0.5) {
                v.push("TRUNCATE TABLE scratch".into());
            }
            v
        }
        6 => {
            let mut v = vec![
                "START TRANSACTION".into(),
                format!("INSERT INTO nopk (a, b) VALUES ({n}, 'sp a {i}')"),
                "SAVEPOINT s1".into(),
                format!("INSERT INTO nopk (a, b) VALUES ({n}, 'sp b {i}')"),
                format!("UPDATE bulk SET b = CONCAT(b, 's') WHERE a = {}", n % 6),
            ];
            if rng.gen_bool(0.5) {
                v.push(format!(
                    "INSERT INTO myi (id, v) VALUES ({}, {r}) ON DUPLICATE KEY UPDATE v = v + 1",
                    n + 2000
                ));
            }
            v.extend([
                "ROLLBACK TO SAVEPOINT s1".into(),
                format!("INSERT INTO nopk (a, b) VALUES ({n}, 'sp c {i}')"),
                "COMMIT".into(),
            ]);
            v
        }
        7 => vec![
            "START TRANSACTION".into(),
            format!("UPDATE myi SET v = v + 1 WHERE id % 2 = {}", r % 2),
            format!("INSERT INTO nopk (a, b) VALUES ({n}, 'rolled back {i}')"),
            "ROLLBACK".into(),
        ],
        8 => {
            let mut v = vec![format!(
                "CREATE OR REPLACE TABLE cor AS SELECT c.id, c.v FROM child c WHERE c.v > {n}"
            )];
            if rng.gen_bool(0.4) {
                v.push(format!("DROP TABLE IF EXISTS cor_none_{i}, cor"));
            }
            v
        }
        9 => vec![
            format!(
                "INSERT INTO nopk (a, b) VALUES ({n}, 'ret {i}'), ({r}, 'ret {i}') RETURNING a, b"
            ),
            format!("DELETE FROM nopk WHERE b = 'ret {i}' AND a = {r} RETURNING a"),
        ],
        10 => vec![
            "LOCK TABLES bulk WRITE, nopk WRITE".into(),
            format!("INSERT INTO bulk (a, b) VALUES ({n}, 'locked {i}')"),
            format!("INSERT INTO nopk (a, b) SELECT a, b FROM bulk WHERE b = 'locked {i}'"),
            "UNLOCK TABLES".into(),
        ],
        // DDL kinds: partition maintenance, a partition exchanged with a
        // table, a default database's character set changed under a
        // CREATE TABLE, tables swapped by one RENAME, index and engine
        // changes, CREATE TABLE ... LIKE, views replaced and altered.
        12 => {
            let mut v = vec![
                "CREATE TABLE IF NOT EXISTS rp (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) \
                 (PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (1000), \
                 PARTITION pmax VALUES LESS THAN MAXVALUE)"
                    .into(),
                "CREATE TABLE IF NOT EXISTS rpx (id INT PRIMARY KEY, v INT)".into(),
                format!(
                    "INSERT IGNORE INTO rp VALUES ({n}, {r}), ({}, {r}), ({}, {r})",
                    n + 100,
                    n + 1000
                ),
            ];
            v.push(
                [
                    "ALTER TABLE rp TRUNCATE PARTITION p1",
                    "ALTER TABLE rp EXCHANGE PARTITION p0 WITH TABLE rpx",
                    "ALTER TABLE rp REBUILD PARTITION pmax",
                    "ALTER TABLE rp ANALYZE PARTITION p0, p1",
                ][rng.gen_range(0..4)]
                .into(),
            );
            v
        }
        13 => vec![
            "ALTER DATABASE CHARACTER SET latin1".into(),
            format!("CREATE TABLE cs{i} (id INT PRIMARY KEY, s VARCHAR(10))"),
            format!("INSERT INTO cs{i} VALUES (1, 'caf\u{e9}')"),
            "ALTER DATABASE CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci".into(),
        ],
        14 => vec![
            "CREATE TABLE IF NOT EXISTS sw1 (id INT PRIMARY KEY, w VARCHAR(10))".into(),
            "CREATE TABLE IF NOT EXISTS sw2 LIKE sw1".into(),
            format!("INSERT INTO sw1 VALUES ({i}, 'one') ON DUPLICATE KEY UPDATE w = 'one'"),
            "RENAME TABLE sw1 TO swt, sw2 TO sw1, swt TO sw2".into(),
        ],
        15 => {
            let mut v = vec![
                "CREATE TABLE IF NOT EXISTS ix (id INT PRIMARY KEY, a INT, b INT)".into(),
                format!("INSERT INTO ix VALUES ({n}, {r}, {i}) ON DUPLICATE KEY UPDATE a = a + 1"),
            ];
            v.push(match rng.gen_range(0..4) {
                0 => format!("CREATE INDEX ia{i} ON ix (a)"),
                1 => format!(
                    "ALTER TABLE ix ENGINE={}",
                    ["Aria", "InnoDB", "MyISAM"][rng.gen_range(0..3)]
                ),
                2 => format!("ALTER TABLE ix ADD COLUMN IF NOT EXISTS c{r} INT DEFAULT {r}"),
                _ => "ALTER TABLE ix DROP PRIMARY KEY, ADD PRIMARY KEY (id)".into(),
            });
            v
        }
        16 => {
            let mut v = vec![
                format!("CREATE TABLE lk{i} LIKE bulk"),
                format!("INSERT INTO lk{i} SELECT * FROM bulk WHERE a = {}", n % 6),
            ];
            if rng.gen_bool(0.5) {
                v.push(format!("DROP TABLE lk{i}"));
            }
            v
        }
        17 => vec![
            "CREATE OR REPLACE VIEW vw AS SELECT a, COUNT(*) AS c FROM bulk GROUP BY a".into(),
            format!("ALTER VIEW vw AS SELECT a, COUNT(*) AS c FROM bulk WHERE a > {r} GROUP BY a"),
            "CREATE OR REPLACE VIEW vck AS SELECT a, b FROM nopk WHERE a > 10 WITH CHECK OPTION"
                .into(),
            format!("INSERT INTO vck VALUES ({}, 'through a view')", n + 11),
        ],
        _ => vec![[
            "ANALYZE TABLE bulk",
            "OPTIMIZE TABLE myi",
            "REPAIR TABLE myi",
            "ANALYZE TABLE child PERSISTENT FOR ALL",
        ][rng.gen_range(0..4)]
        .into()],
    }
}

/// A database on the source that the run's filters exclude (the include
/// pattern is `q<seed>_<source>_*`).
fn excluded(a: &str) -> String {
    format!("x{}", a.trim_start_matches('q'))
}

/// Functions whose value depends on where, when, by whom or after what a
/// statement runs, from the server's own list of what makes a statement
/// unsafe for statement-based logging, and the ones it logs as text
/// with what the event carries (the time, the thread id, the random
/// seed, the insert id, the session settings it takes as safe) or with
/// the default database.
const FUNCTIONS: &[&str] = &[
    "UUID()",
    "UUID_SHORT()",
    "SYSDATE()",
    "USER()",
    "CURRENT_USER()",
    "VERSION()",
    "FOUND_ROWS()",
    "ROW_COUNT()",
    "DATABASE()",
    "CONNECTION_ID()",
    "NOW(6)",
    "RAND()",
    "LAST_INSERT_ID()",
    "@@hostname",
    "@@sql_mode",
    "@@global.time_zone",
    "@@time_zone",
    "@@session.lc_time_names",
    "@@auto_increment_increment",
];

pub fn plan(
    rng: &mut StdRng,
    vars: &[(String, String)],
    seed: u64,
    src: usize,
    steps: usize,
) -> Plan {
    let format = FORMATS[rng.gen_range(0..FORMATS.len())];
    let image = IMAGES[rng.gen_range(0..IMAGES.len())];
    let alpha = format!("q{seed}_{src}_alpha");
    let beta = format!("q{seed}_{src}_beta");
    let gamma = format!("q{seed}_{src}_gamma");
    let (a, b) = (&alpha, &beta);
    // The typed table's columns and values: drawn apart from the rest,
    // so the other steps of a seed stay what they were.
    let mut types_rng = StdRng::seed_from_u64(seed.wrapping_mul(7919).wrapping_add(src as u64 + 1));
    let typed = Typed::draw(&mut types_rng);
    let mut out: Vec<Vec<String>> = vec![
        vec![
            format!("CREATE DATABASE {a}"),
            format!("CREATE DATABASE {b}"),
            format!("CREATE DATABASE IF NOT EXISTS {}", excluded(a)),
        ],
        vec![format!("USE {a}")],
        vec!["CREATE TABLE parent (id INT PRIMARY KEY, name VARCHAR(20)) ENGINE=InnoDB".into()],
        vec!["CREATE TABLE child (id INT AUTO_INCREMENT PRIMARY KEY, pid INT, v INT NOT NULL DEFAULT 0, \
              doubled INT AS (v * 2) VIRTUAL, plus INT AS (v + 1) PERSISTENT, note TEXT, \
              FOREIGN KEY (pid) REFERENCES parent (id) ON DELETE CASCADE) ENGINE=InnoDB"
            .into()],
        vec!["CREATE TABLE audit (n INT AUTO_INCREMENT PRIMARY KEY, what VARCHAR(20), at_id BIGINT) ENGINE=InnoDB".into()],
        vec!["CREATE TABLE nopk (a INT, b VARCHAR(40)) ENGINE=InnoDB".into()],
        vec!["CREATE TABLE bulk (id INT AUTO_INCREMENT PRIMARY KEY, a INT, b VARCHAR(40)) ENGINE=InnoDB".into()],
        vec!["CREATE TABLE myi (id INT PRIMARY KEY, v INT) ENGINE=MyISAM".into()],
        vec!["CREATE SEQUENCE seq1 START WITH 100 INCREMENT BY 7".into()],
        // A sequence is written row-based only (STATEMENT refuses it).
        vec![if format == "STATEMENT" {
            "CREATE TABLE seqd (id BIGINT NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB".into()
        } else {
            "CREATE TABLE seqd (id BIGINT NOT NULL DEFAULT NEXTVAL(seq1) PRIMARY KEY, v INT) ENGINE=InnoDB".into()
        }],
        vec!["CREATE TABLE part (id INT PRIMARY KEY, v INT) ENGINE=InnoDB PARTITION BY HASH (id) PARTITIONS 3".into()],
        vec![typed.create()],
        vec![format!("CREATE TABLE {b}.t3 (id INT PRIMARY KEY, w INT NOT NULL) ENGINE=InnoDB")],
        // Written only by XA transactions (one prepared at a time: no
        // other step waits on the rows a prepared branch holds).
        vec!["CREATE TABLE xa_t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40)) ENGINE=InnoDB".into()],
        vec![format!("CREATE TABLE {b}.xa_u (id INT PRIMARY KEY, w INT NOT NULL) ENGINE=InnoDB")],
        vec!["CREATE TRIGGER child_ai AFTER INSERT ON child FOR EACH ROW \
              INSERT INTO audit (what, at_id) VALUES ('child', NEW.id)"
            .into()],
        vec!["CREATE TRIGGER child_bu BEFORE UPDATE ON child FOR EACH ROW \
              SET NEW.v = IF(NEW.v > 100000, OLD.v, NEW.v)"
            .into()],
        vec![format!(
            "CREATE TRIGGER parent_ad AFTER DELETE ON parent FOR EACH ROW \
             INSERT INTO {b}.t3 (id, w) VALUES (100000 + OLD.id, 1) ON DUPLICATE KEY UPDATE w = w + 1"
        )],
        vec!["CREATE VIEW v_alias AS SELECT c.pid, c.v FROM child c WHERE c.v > 1".into()],
        vec!["CREATE VIEW v_join AS SELECT p.name, c.v FROM parent p JOIN child c ON c.pid = p.id".into()],
        vec!["CREATE VIEW v_of_v AS SELECT x.v FROM v_alias x WHERE x.v > 5".into()],
        vec![format!(
            "CREATE VIEW {b}.v_cross AS SELECT t.id, c.v FROM {b}.t3 t JOIN {a}.child c ON c.id = t.id"
        )],
        vec![format!(
            "CREATE PROCEDURE bump(IN n INT) BEGIN \
             UPDATE child c SET c.v = c.v + n WHERE c.id % 5 = 0; \
             INSERT INTO {b}.t3 (id, w) VALUES (1000 + n, n) ON DUPLICATE KEY UPDATE w = w + 1; END"
        )],
        vec!["CREATE FUNCTION twice(x INT) RETURNS INT DETERMINISTIC RETURN x * 2".into()],
        // The scheduler is off on every server here: the event's effects
        // replicate as its statements would; its definition must arrive
        // as a replica keeps one (not to run twice).
        vec![format!(
            "CREATE EVENT tick ON SCHEDULE EVERY 1 HOUR DO \
             INSERT INTO {b}.t3 (id, w) SELECT 500000 + MAX(c.id), 1 FROM child c"
        )],
    ];
    let mut parent_id = 0;
    let mut made_gamma = false;
    let mut renamed = false;
    let mut altered = false;
    // The XA branch prepared and not ended yet, and what makes its id this
    // run's own (fixture servers outlive a test process: a branch an
    // earlier run left prepared on the native replica holds its id).
    let mut xa_open: Option<String> = None;
    let xa_tag = format!("xa{}_{seed}_{src}_", run_token());
    for i in 0..steps {
        let n: i32 = rng.gen_range(1..50);
        let r = rng.gen_range(0..7);
        let step: Vec<String> = match rng.gen_range(0..32) {
            0 | 1 => {
                let rows: Vec<String> = (0..rng.gen_range(1..5))
                    .map(|_| {
                        parent_id += 1;
                        format!("({parent_id}, 'p{parent_id}')")
                    })
                    .collect();
                vec![format!("INSERT INTO parent (id, name) VALUES {}", rows.join(", "))]
            }
            2 | 3 => {
                let rows: Vec<String> = (0..rng.gen_range(1..6))
                    .map(|k| {
                        let pid = if parent_id > 0 {
                            rng.gen_range(1..=parent_id).to_string()
                        } else {
                            "NULL".into()
                        };
                        format!("({pid}, {}, 'n{k}')", rng.gen_range(0..500))
                    })
                    .collect();
                // Parents deleted by an earlier step: ignore FK failures
                // the same way on every server.
                vec![format!(
                    "INSERT IGNORE INTO child (pid, v, note) VALUES {}",
                    rows.join(", ")
                )]
            }
            4 => vec![format!(
                "UPDATE child c SET c.v = c.v + {n} WHERE c.id < {}",
                rng.gen_range(5..60)
            )],
            5 => vec![format!(
                "DELETE c FROM child c JOIN parent p ON c.pid = p.id WHERE p.id % 7 = {r}"
            )],
            6 => vec![format!("DELETE FROM parent WHERE id % 11 = {r}")],
            7 => vec![format!(
                "UPDATE child c JOIN {b}.t3 d ON c.id = d.id SET c.v = d.w + c.v WHERE d.w % 3 = {}",
                r % 3
            )],
            8 => vec![format!(
                "INSERT INTO {b}.t3 (id, w) SELECT c.id, c.v FROM child c \
                 WHERE c.id % 3 = {} AND c.v > (SELECT AVG(x.v) / 2 FROM child x) ORDER BY c.id \
                 ON DUPLICATE KEY UPDATE w = VALUES(w) + 1",
                r % 3
            )],
            9 => vec![
                "START TRANSACTION".into(),
                format!("INSERT INTO nopk (a, b) VALUES ({n}, 'tx{i}'), ({r}, NULL)"),
                format!("UPDATE {b}.t3 SET w = w + 1 WHERE id % 2 = {}", r % 2),
                "COMMIT".into(),
            ],
            10 if format != "STATEMENT" => {
                vec![format!("INSERT INTO seqd (v) VALUES ({n}), ({r})")]
            }
            11 => vec![
                format!("SET @x = {n} * 3"),
                "INSERT INTO child (pid, v, note) VALUES (NULL, @x, CONCAT('uv', @x))".into(),
            ],
            12 => vec![
                format!("INSERT INTO parent (id, name) VALUES ({}, 'lid')", {
                    parent_id += 1;
                    parent_id
                }),
                "INSERT INTO child (pid, v) VALUES (NULL, 1)".into(),
                "INSERT INTO audit (what, at_id) VALUES ('lid', LAST_INSERT_ID())".into(),
            ],
            13 => vec![format!("CALL bump({n})")],
            14 => vec![format!(
                "INSERT INTO part (id, v) VALUES ({n}, {r}), ({}, 1) ON DUPLICATE KEY UPDATE v = v + 1",
                n + 50
            )],
            15 => vec![format!(
                "UPDATE nopk SET b = CONCAT(IFNULL(b, ''), 'x') WHERE a % 3 = {}",
                r % 3
            )],
            16 => vec![format!(
                "INSERT INTO child (pid, v) SELECT NULL, twice(t.w) FROM {b}.t3 t WHERE t.id % 5 = {} ORDER BY t.id LIMIT 3",
                r % 5
            )],
            17 if !altered => {
                altered = true;
                // (Each a group of its own, or two under
                // binlog_alter_two_phase: a column; an index the server
                // names; a UNIQUE key the rows may break, so the source
                // may roll it back.)
                vec![
                    format!("ALTER TABLE nopk ADD COLUMN c{n} INT DEFAULT {n}"),
                    "ALTER TABLE nopk ADD INDEX (a)".into(),
                    "ALTER TABLE nopk ADD UNIQUE KEY (b)".into(),
                ]
            }
            18 if !renamed => {
                renamed = true;
                vec![
                    format!("CREATE TABLE {b}.ctas AS SELECT c.id, c.v FROM child c WHERE c.v > {n}"),
                    format!("CREATE TABLE {a}.moving (id INT PRIMARY KEY) ENGINE=InnoDB"),
                    format!("INSERT INTO {a}.moving VALUES (1), (2)"),
                    format!("RENAME TABLE {a}.moving TO {b}.moved"),
                ]
            }
            19 if !made_gamma => {
                made_gamma = true;
                vec![
                    format!("CREATE DATABASE {gamma}"),
                    format!("CREATE TABLE {gamma}.g (id INT PRIMARY KEY)"),
                    format!("INSERT INTO {gamma}.g VALUES (1), (2), (3)"),
                    format!("DROP DATABASE {gamma}"),
                ]
            }
            20 => vec![format!(
                "INSERT INTO bulk (a, b) SELECT seq, 'big' FROM seq_1_to_{}",
                rng.gen_range(2000..6000)
            )],
            21 if rng.gen_bool(0.3) => vec!["FLUSH BINARY LOGS".into()],
            22 if r % 2 == 0 => vec![format!(
                "INSERT INTO myi (id, v) VALUES ({n}, {r}) ON DUPLICATE KEY UPDATE v = v + {r}"
            )],
            // Fails at a duplicate key after its first row went in (a
            // MyISAM table keeps it): logged with its error (STATEMENT,
            // MIXED) or as the rows it wrote (ROW).
            22 => vec![format!(
                "INSERT INTO myi (id, v) VALUES ({}, {r}), (-1, 0), (-1, 0)",
                n + 1_000_000
            )],
            23 => vec![
                "START TRANSACTION".into(),
                format!("UPDATE myi m SET m.v = m.v + 1 WHERE m.id % 3 = {}", r % 3),
                format!("INSERT INTO nopk (a, b) VALUES ({n}, 'mixed')"),
                "COMMIT".into(),
            ],
            // A session with settings other than the defaults, one of
            // each kind a Query event carries (or leaves out when default),
            // then the defaults again: what the next step logs without
            // them must not run under them on the target.
            24 => session_step(rng, vars, a, i, n),
            // A file written by the source itself, loaded back (named for
            // this run: INTO OUTFILE refuses a file that exists).
            25 => {
                let f = format!(
                    "/tmp/sqlfleet-ld-{}-{seed}-{src}-{i}.tsv",
                    run_token()
                );
                let how = ["", "IGNORE ", "REPLACE "][rng.gen_range(0..3)];
                vec![
                    format!(
                        "SELECT c.v, CONCAT('ld', c.id, '\\t', IFNULL(c.note, '\\\\')) FROM child c \
                         WHERE c.id % 4 = {} ORDER BY c.id INTO OUTFILE '{f}'",
                        r % 4
                    ),
                    format!("LOAD DATA INFILE '{f}' {how}INTO TABLE bulk (a, b)"),
                ]
            }
            // A value the server computes: logged as the rows it gave,
            // or (statement-based, or one the server takes as safe) as
            // the text the target evaluates again. Rarer than the rest:
            // the ones whose value the binary log does not carry stop
            // the stream (refused clearly), and the seed compares less.
            26 if rng.gen_bool(0.1) => {
                let f = FUNCTIONS[rng.gen_range(0..FUNCTIONS.len())];
                vec![format!(
                    "INSERT INTO nopk (a, b) VALUES ({n}, LEFT(CAST({f} AS CHAR), 40))"
                )]
            }
            // An XA transaction: prepared, then ended by another
            // session steps later (other commits between), or ended in
            // one phase, or rolled back before its prepare.
            28 | 29 => match xa_open.take() {
                Some(id) => {
                    let end = if rng.gen_bool(0.7) { "COMMIT" } else { "ROLLBACK" };
                    vec![format!("XA {end} {id}")]
                }
                None => {
                    let id = match rng.gen_range(0..4) {
                        0 => format!("'{xa_tag}{i}'"),
                        1 => format!("'{xa_tag}{i}', 'branch{r}'"),
                        2 => format!("'{xa_tag}{i}', 'b', {}", n + 1),
                        _ => {
                            let hex: String = format!("{xa_tag}{i}")
                                .bytes()
                                .map(|b| format!("{b:02x}"))
                                .collect();
                            format!("X'00{hex}ff', X'', 3")
                        }
                    };
                    let mut v = vec![
                        format!("XA START {id}"),
                        format!("INSERT INTO xa_t VALUES ({i}, {n}, 'xa step {i}')"),
                        format!("UPDATE xa_t SET v = v + {n} WHERE id % 3 = {}", r % 3),
                    ];
                    if rng.gen_bool(0.5) {
                        v.push(format!("INSERT INTO {b}.xa_u VALUES ({i}, {n})"));
                    }
                    v.push(format!("XA END {id}"));
                    match rng.gen_range(0..10) {
                        0..=5 => {
                            v.push(format!("XA PREPARE {id}"));
                            // (The branch outlives its session: ended by another.)
                            v.push(RECONNECT.into());
                            xa_open = Some(id);
                        }
                        6..=8 => v.push(format!("XA COMMIT {id} ONE PHASE")),
                        _ => v.push(format!("XA ROLLBACK {id}")),
                    }
                    v
                }
            },
            // A table kind or statement kind the server defines that the
            // steps above do not write (kinds_step).
            27 => kinds_step(rng, i, n, r),
            // Values of the server's column types (types.rs).
            30 | 31 => typed.step(&mut types_rng, i),
            _ => vec![format!(
                "DELETE FROM {b}.t3 WHERE id IN (SELECT d.id FROM (SELECT t.id FROM {b}.t3 t WHERE t.w % 5 = {}) d)",
                r % 5
            )],
        };
        out.push(step);
    }
    if let Some(id) = xa_open {
        out.push(vec![format!("XA COMMIT {id}")]);
    }
    let restart = rng
        .gen_bool(0.12)
        .then(|| (rng.gen_range(2..out.len()), rng.gen_bool(0.5)));
    let logging = Logging::draw(seed, src);
    Plan {
        format,
        image,
        alpha,
        beta,
        gamma,
        steps: out,
        restart,
        logging,
    }
}

/// Unique to this test process and moment: the source's OUTFILE names.
fn run_token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}
