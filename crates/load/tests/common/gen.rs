//! A seeded generator of .sql files that mix what dumps and hand-written
//! files contain: tables of every engine, with and without keys and
//! AUTO_INCREMENT; extended and single-row INSERTs, values that warn,
//! INSERT IGNORE duplicates; INSERT ... SELECT, user variables, temporary
//! tables, LAST_INSERT_ID, transactions; views, triggers and procedures
//! in DELIMITER blocks; client commands; BOM, CRLF, no final newline;
//! with [`generate_in`], text in one of the server's character sets (read
//! by both clients with `--default-character-set`), its tables in that set
//! or in utf8mb4. The same seed gives the same file.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub struct Generated {
    pub text: Vec<u8>,
    /// Has a mysqldump header (loads in parallel).
    pub dump: bool,
    /// Uses connection state (cannot be resumed).
    pub stateful: bool,
    /// Has a non-transactional table.
    pub nontx: bool,
    /// Has statements the server refuses (load with --force /
    /// --continue-on-error).
    pub failing: bool,
    /// The set its text is written in (the clients' `--default-character-set`);
    /// `None`: utf8mb4.
    pub charset: Option<String>,
}

/// The set a file is written in: its characters (`charsets.rs`), and the
/// string values drawn in it, each kept here and marked in the text by
/// `\u{1}index\u{1}` until the text becomes bytes.
struct InSet<'a> {
    name: &'a str,
    chars: &'a [Vec<u8>],
    rng: StdRng,
    pieces: Vec<Vec<u8>>,
}

impl InSet<'_> {
    /// 1–10 of the set's characters, with an ASCII letter, a space, an
    /// escape (`\\`, `\n`, `''`, a tab as it is, ...) or text that reads
    /// as a comment (`/* c */`, `-- d`, `#e`) among them now and then (more than `varchar(20)` holds is cut with a warning, by both
    /// clients alike).
    fn literal(&mut self) -> String {
        const ESCAPES: [&[u8]; 11] = [
            b"\\\\", b"\\n", b"''", b"\\'", b"\\t", b"\\0", b"\t", b"\\%", b"/* c */", b" -- d",
            b"#e",
        ];
        let mut v = Vec::new();
        for _ in 0..self.rng.gen_range(1..=10) {
            if self.rng.gen_bool(0.15) {
                v.extend_from_slice(ESCAPES[self.rng.gen_range(0..ESCAPES.len())]);
            } else if self.rng.gen_bool(0.2) {
                v.push(*b"a Z_".get(self.rng.gen_range(0..4)).unwrap_or(&b'a'));
            } else {
                v.extend_from_slice(&self.chars[self.rng.gen_range(0..self.chars.len())]);
            }
        }
        self.pieces.push(v);
        format!("'\u{1}{}\u{1}'", self.pieces.len() - 1)
    }

    /// The text with each marked value's bytes in place.
    fn bytes(&self, text: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        let mut parts = text.split(|b| *b == 1);
        while let Some(plain) = parts.next() {
            out.extend_from_slice(plain);
            if let Some(i) = parts.next() {
                let i: usize = std::str::from_utf8(i)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .expect("a marker");
                out.extend_from_slice(&self.pieces[i]);
            }
        }
        out
    }
}

struct Table {
    name: String,
    engine: &'static str,
    pk: bool,
    auto_inc: bool,
    next_id: u64,
}

pub fn generate(seed: u64) -> Generated {
    generate_in(seed, &[])
}

/// As [`generate`], and one file in three (when `sets` has any) in one of
/// `sets`, drawn by a generator of its own so the file's statements are
/// the ones [`generate`] gives for the seed.
pub fn generate_in(seed: u64, sets: &[(String, Vec<Vec<u8>>)]) -> Generated {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut in_set = {
        let mut r = StdRng::seed_from_u64(seed ^ 0xc4a5);
        let usable: Vec<&(String, Vec<Vec<u8>>)> =
            sets.iter().filter(|(_, c)| !c.is_empty()).collect();
        if !usable.is_empty() && r.gen_bool(1.0 / 3.0) {
            let (name, chars) = usable[r.gen_range(0..usable.len())];
            Some(InSet {
                name,
                chars,
                rng: r,
                pieces: Vec::new(),
            })
        } else {
            None
        }
    };
    let names = in_set.as_ref().map_or("utf8mb4", |s| s.name).to_string();
    let dump = rng.gen_bool(0.5);
    let mut out = String::new();
    let mut stateful = false;
    let mut nontx = false;
    if dump {
        out.push_str("-- MariaDB dump 10.19  Distrib 10.11.6-MariaDB, for debian-linux-gnu (x86_64)\n--\n-- Host: localhost    Database: gen\n");
        out.push_str("/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;\n/*!40101 SET NAMES ");
        out.push_str(&names);
        out.push_str(" */;\n");
        out.push_str(
            "/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;\n",
        );
        out.push_str(
            "/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;\n",
        );
    } else {
        out.push_str("-- a hand-written script\nSET sql_mode = '';\n");
    }
    let n_tables = rng.gen_range(1..=4);
    let engines = ["InnoDB", "MyISAM", "Aria", "InnoDB"];
    let mut tables: Vec<Table> = Vec::new();
    for i in 0..n_tables {
        let engine = engines[rng.gen_range(0..engines.len())];
        nontx |= engine != "InnoDB";
        let pk = rng.gen_bool(0.7);
        let auto_inc = pk && rng.gen_bool(0.5);
        let mut table_set = "utf8mb4".to_string();
        if let Some(s) = in_set.as_mut() {
            if s.rng.gen_bool(0.5) {
                table_set = s.name.to_string();
            }
        }
        let t = Table {
            name: format!("t{i}"),
            engine,
            pk,
            auto_inc,
            next_id: 1,
        };
        out.push_str(&format!("DROP TABLE IF EXISTS `{}`;\n", t.name));
        out.push_str(&format!(
            "CREATE TABLE `{}` (\n  `id` int(11) NOT NULL{},\n  `v` varchar(20) DEFAULT NULL,\n  `d` date DEFAULT NULL,\n  `n` int(11) DEFAULT NULL{}\n) ENGINE={} DEFAULT CHARSET={table_set};\n",
            t.name,
            if auto_inc { " AUTO_INCREMENT" } else { "" },
            if pk { ",\n  PRIMARY KEY (`id`)" } else { "" },
            engine
        ));
        tables.push(t);
    }
    // A log table that triggers write to (auto-increment: order shows).
    let with_trigger = rng.gen_bool(0.3);
    if with_trigger {
        out.push_str("CREATE TABLE `log` (`seq` int NOT NULL AUTO_INCREMENT PRIMARY KEY, `x` int) ENGINE=InnoDB;\n");
        out.push_str("DELIMITER ;;\nCREATE TRIGGER `t0_ai` AFTER INSERT ON `t0` FOR EACH ROW BEGIN\n  INSERT INTO `log` (`x`) VALUES (NEW.`id`);\nEND ;;\nDELIMITER ;\n");
    }
    let failing = rng.gen_bool(0.15);
    let steps = rng.gen_range(3..40);
    for _ in 0..steps {
        if failing && rng.gen_bool(0.1) {
            // A statement the server refuses: a missing table, or a
            // duplicate key in the middle of a multi-row INSERT (MyISAM
            // keeps the rows before it, InnoDB none).
            let t = &mut tables[rng.gen_range(0..n_tables)];
            if t.pk && t.next_id > 2 && rng.gen_bool(0.7) {
                let (a, dup, b) = (t.next_id, rng.gen_range(1..t.next_id), t.next_id + 1);
                t.next_id += 2;
                out.push_str(&format!(
                    "INSERT INTO `{}` VALUES ({a},'before',NULL,1),({dup},'dup',NULL,2),({b},'after',NULL,3);\n",
                    t.name
                ));
            } else {
                out.push_str("INSERT INTO `missing_table` VALUES (1);\n");
            }
            continue;
        }
        let ti = rng.gen_range(0..tables.len());
        let roll = rng.gen_range(0..100);
        if roll < 60 {
            // Plain INSERTs.
            let rows = rng.gen_range(1..12);
            let t = &mut tables[ti];
            let end = if rng.gen_bool(0.1) { "\\g" } else { ";" };
            if t.auto_inc && !dump && rng.gen_bool(0.3) {
                // Ids from AUTO_INCREMENT: the order of inserts decides them.
                let vals: Vec<String> = (0..rows)
                    .map(|_| {
                        format!(
                            "({},{},{})",
                            value(&mut rng, in_set.as_mut()),
                            date(&mut rng),
                            num(&mut rng)
                        )
                    })
                    .collect();
                t.next_id += rows + 1;
                out.push_str(&format!(
                    "INSERT INTO `{}` (`v`, `d`, `n`) VALUES {}{end}\n",
                    t.name,
                    vals.join(",")
                ));
                continue;
            }
            let ignore = t.pk && rng.gen_bool(0.1);
            let mut vals = Vec::new();
            for _ in 0..rows {
                let id = if ignore && t.next_id > 1 && rng.gen_bool(0.5) {
                    rng.gen_range(1..t.next_id) // a duplicate: IGNORE keeps the first
                } else {
                    t.next_id += 1;
                    t.next_id - 1
                };
                vals.push(format!(
                    "({id},{},{},{})",
                    value(&mut rng, in_set.as_mut()),
                    date(&mut rng),
                    num(&mut rng)
                ));
            }
            out.push_str(&format!(
                "INSERT {}INTO `{}` VALUES {}{end}\n",
                if ignore { "IGNORE " } else { "" },
                t.name,
                vals.join(",")
            ));
        } else if roll < 67 && tables.len() > 1 {
            // Reads another table.
            let fi = (ti + 1) % tables.len();
            let (from, from_max) = (tables[fi].name.clone(), tables[fi].next_id);
            let t = &mut tables[ti];
            let base = t.next_id;
            if base + from_max > 100_000_000 {
                continue;
            }
            t.next_id = base + from_max + 1;
            out.push_str(&format!(
                "INSERT INTO `{}` (`id`, `v`, `d`, `n`) SELECT `id` + {base}, `v`, `d`, `n` FROM `{from}`;\n",
                t.name
            ));
        } else if roll < 74 {
            // User variables (a CRC over a table).
            stateful = true;
            let from = tables[(ti + 1) % tables.len()].name.clone();
            let t = &mut tables[ti];
            let id = t.next_id;
            t.next_id += 1;
            out.push_str(&format!(
                "SET @c = (SELECT COUNT(*) FROM `{from}`);\nSELECT @crc := COALESCE(SUM(CRC32(CONCAT_WS('#', `id`, `v`))), 0) FROM `{from}`;\nINSERT INTO `{}` VALUES ({id}, LEFT(CONCAT('crc', @crc), 20), NULL, @c);\n",
                t.name
            ));
        } else if roll < 79 && !dump {
            // LAST_INSERT_ID after an AUTO_INCREMENT insert.
            if let Some(a) = tables.iter().position(|t| t.auto_inc) {
                stateful = true;
                let an = tables[a].name.clone();
                tables[a].next_id += 1;
                let b = &mut tables[ti];
                let id = b.next_id + 50_000;
                b.next_id = id + 1;
                out.push_str(&format!(
                    "INSERT INTO `{an}` (`v`) VALUES ('lid');\nINSERT INTO `{}` VALUES ({id}, 'after', NULL, LAST_INSERT_ID());\n",
                    b.name
                ));
                // Later explicit ids must not collide with generated ones.
                for t in tables.iter_mut() {
                    t.next_id += 100;
                }
            }
        } else if roll < 84 {
            // A temporary table.
            stateful = true;
            let t = &mut tables[ti];
            let base = t.next_id;
            if base > 50_000_000 {
                continue;
            }
            t.next_id = 2 * base + 1;
            out.push_str(&format!(
                "CREATE TEMPORARY TABLE `tmp` AS SELECT * FROM `{0}`;\nINSERT INTO `{0}` SELECT `id` + {base}, `v`, `d`, `n` FROM `tmp`;\nDROP TEMPORARY TABLE `tmp`;\n",
                t.name
            ));
        } else if roll < 90 {
            // A transaction, committed or rolled back.
            stateful = true;
            let t = &mut tables[ti];
            let id = t.next_id;
            t.next_id += 1;
            let end = if rng.gen_bool(0.5) {
                "ROLLBACK"
            } else {
                "COMMIT"
            };
            out.push_str(&format!(
                "START TRANSACTION;\nINSERT INTO `{}` VALUES ({id}, 'txn', NULL, 1);\n{end};\n",
                t.name
            ));
        } else if roll < 94 {
            // A view and a procedure (definitions only).
            let t = &tables[ti].name;
            let k: u32 = rng.gen();
            out.push_str(&format!(
                "CREATE OR REPLACE VIEW `v{k}` AS SELECT `id`, `v` FROM `{t}`;\n"
            ));
            out.push_str(&format!(
                "DELIMITER $$\nCREATE PROCEDURE `p{k}`()\nBEGIN\n  SELECT COUNT(*) FROM `{t}`; -- a comment\nEND$$\nDELIMITER ;\n"
            ));
        } else if !dump {
            // The client's own commands, rule by rule as its line reader
            // has them (mysql.cc read_and_execute/add_line): each form
            // below is judged by the stock client.
            let t = &mut tables[ti];
            let (a, b) = (t.next_id, t.next_id + 1);
            t.next_id += 2;
            let row = |id: u64| format!("({id},'c{id}',NULL,{id})");
            let name = t.name.clone();
            let form = match rng.gen_range(0..12) {
                // A command without arguments eats nothing after it.
                0 => format!("\\W INSERT INTO `{name}` VALUES {};\n", row(a)),
                // Inside a statement: done, and the statement goes on.
                1 => format!("INSERT INTO `{name}` VALUES {} \\p , {};\n", row(a), row(b)),
                // An output command's arguments end at the delimiter, which
                // ends nothing else.
                2 => format!("INSERT INTO `{name}` VALUES {} \\R sql> ; , {};\n", row(a), row(b)),
                // A command ended by the delimiter; a statement after it.
                3 => format!("nowarning; INSERT INTO `{name}` VALUES {};\n", row(a)),
                // A command line, then the statement on the next line.
                4 => format!("  warnings\nINSERT INTO `{name}` VALUES {};\n", row(a)),
                // -- is a comment at a statement's start even without a space.
                5 => format!("--comment without a space\nINSERT INTO `{name}` VALUES {}; --x\n", row(a)),
                // ... and SQL inside one: 1 --1 is 1 - (-1).
                6 => format!("INSERT INTO `{name}` VALUES ({a},'m',NULL,1 --1\n);\n"),
                // A quoted delimiter, and \d with a statement on its line.
                7 => format!("DELIMITER '$$'\nINSERT INTO `{name}` VALUES {}$$\n\\d ; INSERT INTO `{name}` VALUES {};\n", row(a), row(b)),
                // \c forgets, \g and \G send, mid-line.
                8 => format!("SELECT 'half' \\c INSERT INTO `{name}` VALUES {}\\g INSERT INTO `{name}` VALUES {}\\G\n", row(a), row(b)),
                // A command word after something typed is SQL.
                9 => format!("INSERT INTO `{name}` SELECT {a}, 'g', NULL, 1 AS\ngo\n;\n"),
                // status and clear ended by the delimiter are commands.
                10 => format!("clear;\nINSERT INTO `{name}` VALUES {};\n", row(a)),
                _ => format!("\\W\nSELECT 1\\G\nSELECT 'half' \\c\nINSERT INTO `{name}` VALUES {};\n", row(a)),
            };
            out.push_str(&form);
        }
    }
    if dump {
        out.push_str("/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;\n/*!40014 SET FOREIGN_KEY_CHECKS=@OLD_FOREIGN_KEY_CHECKS */;\n");
    }
    if !dump && rng.gen_bool(0.1) {
        // quit ends the input: what follows is never read.
        out.push_str("quit\nthis is not SQL and never runs;\n");
    }
    if rng.gen_bool(0.2) {
        out.push_str("DELIMITER ;");
    }
    let mut text = out.into_bytes();
    if rng.gen_bool(0.1) {
        text = String::from_utf8_lossy(&text)
            .replace('\n', "\r\n")
            .into_bytes();
    }
    if rng.gen_bool(0.1) && !dump && in_set.is_none() {
        let mut b = b"\xEF\xBB\xBF".to_vec();
        b.extend_from_slice(&text);
        text = b;
    }
    if rng.gen_bool(0.3) {
        while text.last().is_some_and(|b| b.is_ascii_whitespace()) {
            text.pop();
        }
    }
    if let Some(s) = &in_set {
        text = s.bytes(&text);
    }
    Generated {
        text,
        dump,
        stateful,
        nontx,
        failing,
        charset: in_set.map(|s| s.name.to_string()),
    }
}

/// A string value; in a set of the file's own, some in its characters.
fn value(rng: &mut StdRng, set: Option<&mut InSet>) -> String {
    let pick = rng.gen_range(0..6);
    if let (4 | 5, Some(s)) = (pick, set) {
        return s.literal();
    }
    match pick {
        0 => "NULL".into(),
        1 => "'it''s'".into(),
        2 => "'semi;colon'".into(),
        3 => "'back\\\\slash'".into(),
        4 => "'émoji 🎉'".into(),
        _ => format!("'v{}'", rng.gen_range(0..1000)),
    }
}

fn date(rng: &mut StdRng) -> String {
    match rng.gen_range(0..8) {
        // Invalid: a warning (non-strict mode), stored as 0000-00-00.
        0 => "'2020-02-30'".into(),
        1 => "NULL".into(),
        _ => format!(
            "'20{:02}-{:02}-{:02}'",
            rng.gen_range(0..30),
            rng.gen_range(1..13),
            rng.gen_range(1..29)
        ),
    }
}

fn num(rng: &mut StdRng) -> String {
    match rng.gen_range(0..5) {
        0 => "NULL".into(),
        // Out of range for int: a warning, clipped.
        1 => "99999999999".into(),
        _ => rng.gen_range(-1000..1000).to_string(),
    }
}
