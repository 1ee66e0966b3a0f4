use super::*;
use proptest::prelude::*;

fn split_all(input: &[u8]) -> Result<Vec<Statement>, SplitError> {
    Splitter::new(input).collect()
}

fn texts(input: &str) -> Vec<String> {
    split_all(input.as_bytes())
        .expect("splits")
        .into_iter()
        .map(|s| String::from_utf8(s.text).expect("utf8"))
        .collect()
}

#[test]
fn basic_statements_offsets_and_lines() {
    let input = "SELECT 1;\n  SELECT 2 ;\n\nINSERT INTO t VALUES (1);";
    let st = split_all(input.as_bytes()).expect("splits");
    assert_eq!(st.len(), 3);
    assert_eq!(st[0].text, b"SELECT 1");
    assert_eq!((st[0].offset, st[0].line, st[0].end), (0, 1, 9));
    assert_eq!(st[1].text, b"SELECT 2 ");
    assert_eq!((st[1].offset, st[1].line), (12, 2));
    assert_eq!((st[2].offset, st[2].line), (24, 4));
    assert_eq!(st[2].end as usize, input.len());
}

#[test]
fn quotes_hide_delimiters_and_comments() {
    assert_eq!(
        texts(
            r#"INSERT INTO t VALUES ('a;b', "c;d", 'it''s', 'x\';y', `we;ird`);SELECT '-- no', '/* no */', '# no';"#
        ),
        vec![
            r#"INSERT INTO t VALUES ('a;b', "c;d", 'it''s', 'x\';y', `we;ird`)"#,
            "SELECT '-- no', '/* no */', '# no'",
        ]
    );
}

#[test]
fn comments_are_skipped_or_kept() {
    let t = texts("-- header\n--\n# hash\n/* block ; */\nSELECT 1 -- tail ;\n;\nSELECT 2--3\n;\n/* only a comment */;\n");
    assert_eq!(t, vec!["SELECT 1 -- tail ;\n", "SELECT 2--3\n"]);
}

#[test]
fn leading_comments_do_not_move_the_statement_start() {
    let st = split_all(b"--\n-- Table structure\n--\n\nDROP TABLE t;").expect("splits");
    assert_eq!(st[0].text, b"DROP TABLE t");
    assert_eq!(st[0].line, 5);
}

#[test]
fn executable_comments_are_code_and_lexed() {
    let t = texts("/*!40101 SET NAMES utf8mb4 */;\n/*M!100100 SET x=1 */;\n/*!50003 CREATE*/ /*!50003 TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = '*/;' */;\n");
    assert_eq!(
        t,
        vec![
            "/*!40101 SET NAMES utf8mb4 */",
            "/*M!100100 SET x=1 */",
            "/*!50003 CREATE*/ /*!50003 TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = '*/;' */",
        ]
    );
}

#[test]
fn sandbox_mode_line_of_new_dumps() {
    let t = texts(
        "/*M!999999\\- enable the sandbox mode */ \n-- MariaDB dump\n/*!40101 SET @OLD=@@X */;\n",
    );
    assert_eq!(t.len(), 1);
    assert!(t[0].starts_with("/*M!999999"));
}

#[test]
fn delimiter_blocks() {
    let input = "DELIMITER ;;\nCREATE PROCEDURE p() BEGIN SELECT 1; SELECT ';;'; END ;;\ndelimiter ;\nSELECT 2;\nDELIMITER $$\nCREATE FUNCTION f() RETURNS INT RETURN 1$$\nDELIMITER ;\n";
    assert_eq!(
        texts(input),
        vec![
            "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT ';;'; END ",
            "SELECT 2",
            "CREATE FUNCTION f() RETURNS INT RETURN 1",
        ]
    );
}

#[test]
fn no_backslash_escapes_mode() {
    let mut s = Splitter::new(&b"SELECT 'a\\';SELECT 2;"[..]);
    s.set_backslash_escapes(false);
    let v: Vec<Statement> = s.collect::<Result<_, _>>().expect("splits");
    assert_eq!(v[0].text, b"SELECT 'a\\'");
    assert_eq!(v[1].text, b"SELECT 2");
}

#[test]
fn binary_inside_strings_is_fine() {
    let mut input = b"INSERT INTO t VALUES ('".to_vec();
    input.extend_from_slice(&[0xff, 0xfe, b'\\', b'0', 0x80, b'\\', b'\'', b'\n']);
    input.extend_from_slice(b"');\nSELECT 1;");
    let st = split_all(&input).expect("splits");
    assert_eq!(st.len(), 2);
    assert_eq!(st[1].line, 3);
}

#[test]
fn last_statement_without_delimiter_runs() {
    assert_eq!(
        texts("SELECT 1;\nSELECT 2\n"),
        vec!["SELECT 1", "SELECT 2\n"]
    );
    assert_eq!(texts(""), Vec::<String>::new());
    assert_eq!(texts("-- just a comment\n"), Vec::<String>::new());
}

#[test]
fn truncation_errors_say_where() {
    let cases: &[(&str, &str, u64, u64)] = &[
        (
            "SELECT 1;\nINSERT INTO t VALUES ('abc",
            "inside a '-quoted string",
            32,
            2,
        ),
        ("SELECT 1;\n/* unfinished", "inside a /* comment", 10, 2),
        (
            "SELECT 1;\n/*!40101 SET x=1 ",
            "inside a /*! comment",
            10,
            2,
        ),
        (
            "DELIMITER ;;\nCREATE PROCEDURE p() BEGIN SELECT 1; END",
            "inside a DELIMITER ;; block",
            13,
            2,
        ),
        (
            "SELECT 1;\nDELIMITER \n",
            "DELIMITER must be followed by",
            10,
            2,
        ),
        (
            "SELECT 1;\nSELECT \0\0\0;",
            "NUL byte outside a string",
            17,
            2,
        ),
    ];
    for (input, want, off, line) in cases {
        let e = split_all(input.as_bytes()).expect_err(input);
        match &e {
            SplitError::Syntax {
                offset,
                line: l,
                what,
            } => {
                assert!(what.contains(want), "{input:?}: {e}");
                assert_eq!((*offset, *l), (*off, *line), "{input:?}: {e}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn statement_size_is_bounded() {
    let mut s =
        Splitter::new(&b"SELECT 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' FROM t;"[..]);
    s.max_statement = 10;
    let e = s.next_statement().expect_err("too long");
    assert!(e.to_string().contains("longer than 10 bytes"), "{e}");
}

#[test]
fn reads_across_block_boundaries() {
    // Statements larger than the read block, with quotes and escapes
    // straddling block edges.
    let big = "x\\'y''z".repeat(100_000);
    let input = format!(
        "INSERT INTO t VALUES ('{big}');\nDELIMITER //\nSELECT '{big}'//\nDELIMITER ;\nSELECT 3;"
    );
    let st = split_all(input.as_bytes()).expect("splits");
    assert_eq!(st.len(), 3);
    assert_eq!(st[0].text.len(), big.len() + 25);
    assert_eq!(st[2].text, b"SELECT 3");
    assert_eq!(st[2].line, 5);
}

/// A reader that returns one byte at a time: the worst case for refills.
struct Trickle<'a>(&'a [u8]);
impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.0.is_empty() || buf.is_empty() {
            return Ok(0);
        }
        buf[0] = self.0[0];
        self.0 = &self.0[1..];
        Ok(1)
    }
}

fn value_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,6}".prop_map(|s| s),
        "[a-z ;/*#\\-]{0,12}".prop_map(|s| format!("'{}'", s.replace('\'', "''"))),
        "[a-z ;'`]{0,12}".prop_map(|s| format!("\"{}\"", s.replace('"', "\"\""))),
        "[a-z ;'\"]{0,8}"
            .prop_map(|s| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))),
        "[a-z ;]{1,8}".prop_map(|s| format!("`{}`", s)),
        Just("NULL".to_string()),
        Just("_binary 'a\\0b'".to_string()),
    ]
}

fn statement_strategy() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(value_strategy(), 1..5),
        prop::bool::ANY,
    )
        .prop_map(|(vals, comment)| {
            let c = if comment { "/*!40000 x */ " } else { "" };
            format!("INSERT INTO t VALUES {c}({})", vals.join(","))
        })
}

proptest! {
    #[test]
    fn random_statements_split_back(stmts in prop::collection::vec(statement_strategy(), 0..8),
                                    seps in prop::collection::vec("[ \n]{0,3}(-- c\n|# c\n|/\\* c; \\*/)?[ \n]{0,2}", 8)) {
        let mut input = String::new();
        for (i, s) in stmts.iter().enumerate() {
            input.push_str(&seps[i]);
            input.push_str(s);
            input.push(';');
        }
        let got: Vec<String> = split_all(input.as_bytes()).expect("splits")
            .into_iter().map(|s| String::from_utf8(s.text).expect("utf8")).collect();
        prop_assert_eq!(&got, &stmts);
        // Same result one byte at a time.
        let slow: Vec<String> = Splitter::new(Trickle(input.as_bytes())).collect::<Result<Vec<_>, _>>().expect("splits")
            .into_iter().map(|s| String::from_utf8(s.text).expect("utf8")).collect();
        prop_assert_eq!(&slow, &stmts);
    }

    #[test]
    fn offsets_point_at_the_text(stmts in prop::collection::vec(statement_strategy(), 1..6)) {
        let input = stmts.join(";\n\n") + ";";
        for s in split_all(input.as_bytes()).expect("splits") {
            let at = &input.as_bytes()[s.offset as usize..s.offset as usize + s.text.len()];
            prop_assert_eq!(at, &s.text[..]);
            let line = input.as_bytes()[..s.offset as usize].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
            prop_assert_eq!(line, s.line);
        }
    }

    #[test]
    fn never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = split_all(&bytes);
    }
}

#[test]
fn delimiter_at_the_very_end_without_newline_is_no_panic() {
    for input in [
        "DELIMITER ;;\nCREATE PROCEDURE p() BEGIN SELECT 1; END;;\nDELIMITER ;",
        "DELIMITER ;",
        "SELECT 1;\nDELIMITER $$",
    ] {
        let st = split_all(input.as_bytes()).expect("splits");
        assert!(st.len() <= 1, "{input}: {st:?}");
    }
    // Across a block boundary too (the buffer moves while the line is read).
    let mut big = "INSERT INTO t VALUES ('".to_string();
    big.push_str(&"x".repeat(BLOCK - 30));
    big.push_str("');\nDELIMITER ;");
    let st = split_all(big.as_bytes()).expect("splits");
    assert_eq!(st.len(), 1);
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let st = split_all(b"\xEF\xBB\xBFSELECT 1;").expect("splits");
    assert_eq!(st[0].text, b"SELECT 1");
    assert_eq!(st[0].offset, 3);
}

#[test]
fn client_commands_as_the_mysql_client_does_them() {
    let t = texts("use shop\nINSERT INTO t VALUES (1);\nSELECT 1\\g\nSELECT 2\\G\nSELECT 3 \\c\ncharset utf8mb4\n\\u other\nSELECT \\N;\n");
    assert_eq!(
        t,
        vec![
            "USE `shop`",
            "INSERT INTO t VALUES (1)",
            "SELECT 1",
            "SELECT 2",
            "SET NAMES utf8mb4",
            "USE `other`",
            "SELECT \\N",
        ]
    );
    // `use` as the last line without a semicolon, and the statement before it.
    assert_eq!(
        texts("INSERT INTO t VALUES (1);\nuse `d`"),
        vec!["INSERT INTO t VALUES (1)", "USE `d`"]
    );
    // Only at a line start with nothing typed: here it is SQL.
    assert_eq!(
        texts("SELECT 1, use_count FROM t;"),
        vec!["SELECT 1, use_count FROM t"]
    );
    // quit ends the input.
    assert_eq!(texts("SELECT 1;\nquit\nSELECT 2;"), vec!["SELECT 1"]);
    // \d changes the delimiter.
    assert_eq!(texts("\\d $$\nSELECT 1$$\n"), vec!["SELECT 1"]);
}

#[test]
fn source_commands_are_marked() {
    let st = split_all(b"source load_a.dump\nSELECT 1;\n\\. b.sql\n").expect("splits");
    assert_eq!(st[0].source.as_deref(), Some("load_a.dump"));
    assert_eq!(st[0].line, 1);
    assert_eq!(st[1].source, None);
    assert_eq!(st[2].source.as_deref(), Some("b.sql"));
    assert_eq!(st[2].line, 3);
}

#[test]
fn unsupported_client_commands_are_refused_with_the_line() {
    for (input, line) in [
        ("SELECT 1;\nsystem ls\n", 2),
        ("\\! ls\n", 1),
        ("connect other\n", 1),
        ("SELECT 1 \\u db;\n", 1),
    ] {
        match split_all(input.as_bytes()) {
            Err(SplitError::Syntax { line: l, what, .. }) => {
                assert_eq!(l, line, "{input}: {what}");
                assert!(what.contains("not supported"), "{what}");
            }
            other => panic!("{input}: {other:?}"),
        }
    }
}

/// The mysql client's line reader, rule by rule: each row was run through
/// the stock `mariadb` client (10.11) and these are the statements it
/// sent, or the place where it stopped (where sqlfleet refuses too).
#[test]
fn the_client_reader_rule_by_rule() {
    let rows: &[(&str, &[&str])] = &[
        // A command line's statement after it on the same line still runs.
        (
            "use db; SELECT 1;\nSELECT 2;\n",
            &["USE `db`", "SELECT 1", "SELECT 2"],
        ),
        // \u's argument is its first word up to a space, and its arguments
        // end at the delimiter, which ends nothing else.
        (
            "\\u db; SELECT 1;\nSELECT 2;\n",
            &["USE `db;`", "SELECT 1", "SELECT 2"],
        ),
        // Commands without arguments eat nothing after them.
        ("\\W SELECT 1;\nSELECT 2;\n", &["SELECT 1", "SELECT 2"]),
        ("\\- SELECT 1;\n", &["SELECT 1"]),
        ("SELECT 1 \\p , 2;\n", &["SELECT 1    , 2"]),
        // An output command inside a statement eats its arguments through
        // the delimiter, and the statement goes on.
        (
            "SELECT 1 \\T out.txt; , 2;\n",
            &["SELECT 1             , 2"],
        ),
        // quit with an argument is SQL; quit; goes to the server, then ends.
        (
            "SELECT 1;\nquit foo;\nSELECT 2;\n",
            &["SELECT 1", "quit foo", "SELECT 2"],
        ),
        ("SELECT 1;\nquit;\nSELECT 2;\n", &["SELECT 1", "quit"]),
        ("SELECT 1;\n  QUIT  \nSELECT 2;\n", &["SELECT 1"]),
        (
            "SELECT 1;\ngo;\nSELECT 2;\n",
            &["SELECT 1", "go", "SELECT 2"],
        ),
        // A command ended by the delimiter: done, nothing sent.
        ("SELECT 1;\nstatus;\nSELECT 2;\n", &["SELECT 1", "SELECT 2"]),
        (
            "SELECT 1;\nuse db;\nSELECT 2;\n",
            &["SELECT 1", "USE `db`", "SELECT 2"],
        ),
        // `use` reads one word up to a space: the next line joins it.
        (
            "SELECT 1; use db\nSELECT 2;\nSELECT 3;\n",
            &["SELECT 1", "USE `db\nSELECT`", "SELECT 3"],
        ),
        ("USE `my db`;\n", &["USE `my db`"]),
        ("use 'db'\nSELECT 1;\n", &["USE `db`", "SELECT 1"]),
        // DELIMITER only on a line of its own; its argument may be quoted.
        (
            "SELECT 1 delimiter $$\nSELECT 2$$\n;",
            &["SELECT 1 delimiter $$\nSELECT 2$$\n"],
        ),
        ("DELIMITER '$$'\nSELECT 1$$\n", &["SELECT 1"]),
        ("DELIMITER $$ foo\nSELECT 1$$\n", &["SELECT 1"]),
        (
            "SELECT 1;\n\\d $$ SELECT 2$$\nSELECT 3$$\n",
            &["SELECT 1", "SELECT 2", "SELECT 3"],
        ),
        // The delimiter ends a statement inside /*! */ too.
        (
            "/*!40101 SELECT 1; SELECT 2 */;\n",
            &["/*!40101 SELECT 1", "SELECT 2 */"],
        ),
        // -- is a comment before whitespace, or anywhere at a statement's start.
        (
            "SELECT 1 --\x01 ; SELECT 2;\n",
            &["SELECT 1 --\x01 ", "SELECT 2"],
        ),
        ("SELECT 1;\n--x\nSELECT 2;\n", &["SELECT 1", "SELECT 2"]),
        ("SELECT 1; --x\nSELECT 2;\n", &["SELECT 1", "SELECT 2"]),
        ("SELECT 1 --x\n;", &["SELECT 1 --x\n"]),
        // A command word after something typed is SQL.
        ("SELECT 1\nclear\n;", &["SELECT 1\nclear\n"]),
        (
            "SELECT 1, use_count FROM t;",
            &["SELECT 1, use_count FROM t"],
        ),
        // \. keeps what follows the file name on its line, ; included.
        ("\\. f.sql;\n", &["\\. f.sql;"]),
    ];
    for (input, want) in rows {
        let got: Vec<String> = split_all(input.as_bytes())
            .unwrap_or_else(|e| panic!("{input:?}: {e}"))
            .iter()
            .map(|s| String::from_utf8_lossy(&s.text).into_owned())
            .collect();
        assert_eq!(&got, want, "{input:?}");
    }
    let st = split_all(b"\\. f.sql;\nsource g.sql;\n").expect("splits");
    assert_eq!(st[0].source.as_deref(), Some("f.sql;"));
    assert_eq!(st[1].source.as_deref(), Some("g.sql"));

    // Where the client stops, sqlfleet refuses, naming the line.
    let refused: &[(&str, u64, &str)] = &[
        ("SELECT 1 \\X ;\n", 1, "unknown mysql client command '\\X'"),
        ("SELECT 1;\n\\-\n\\. x.sql\n", 3, "sandbox mode"),
        ("sandbox\ntee out.txt\n", 2, "sandbox mode"),
        ("SELECT 1;\nUSE\n db;\n", 2, "USE must be followed"),
        ("DELIMITER $\\\\$\n", 1, "backslash"),
        ("DELIMITER 0123456789abcdefg\n", 1, "15 bytes"),
    ];
    for (input, line, want) in refused {
        match split_all(input.as_bytes()) {
            Err(SplitError::Syntax { line: l, what, .. }) => {
                assert_eq!(l, *line, "{input:?}: {what}");
                assert!(what.contains(want), "{input:?}: {what}");
            }
            other => panic!("{input:?}: {other:?}"),
        }
    }
}

#[test]
fn line_delimiters_keep_mydumpers_routine_bodies_whole() {
    let input = "SET a = 1;\nCREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW BEGIN\n  INSERT INTO x VALUES ('a;\\n'); \n  SET @b = 2; \nEND;\r\nINSERT INTO t VALUES (1);SELECT 2;";
    let mut sp = Splitter::new(input.as_bytes());
    sp.set_line_delimiter(true);
    let got: Vec<String> = sp
        .map(|s| String::from_utf8(s.expect("splits").text).expect("utf8"))
        .collect();
    assert_eq!(
        got,
        [
            "SET a = 1",
            "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW BEGIN\n  INSERT INTO x VALUES ('a;\\n'); \n  SET @b = 2; \nEND",
            // A `;` inside a line is not an end; the one at the input's end is.
            "INSERT INTO t VALUES (1);SELECT 2",
        ]
    );
    // Without it, as the mysql client: the body is cut at its first `;`.
    assert_eq!(texts(input).len(), 6);
}

#[test]
fn a_last_statement_without_its_delimiter_is_told_apart() {
    for (input, last_unterminated) in [
        (&b"SELECT 1;\nSELECT 2"[..], true),
        (&b"SELECT 1;\nSELECT 2;\n"[..], false),
        (&b"SELECT 1;\n-- trailer\n"[..], false),
        (&b"INSERT INTO t VALUES (1),(2"[..], true),
    ] {
        let mut sp = Splitter::new(input);
        let mut last = false;
        while let Ok(Some(_)) = sp.next_statement() {
            last = sp.ended_without_delimiter();
        }
        assert_eq!(
            last,
            last_unterminated,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn a_statement_ended_by_backslash_capital_g_asks_for_vertical_rows() {
    // (input, each statement's text and whether it ends in \G)
    let rows: &[(&str, &[(&str, bool)])] = &[
        ("SELECT 1\\G", &[("SELECT 1", true)]),
        ("SELECT 1\\g", &[("SELECT 1", false)]),
        ("SELECT 1;", &[("SELECT 1", false)]),
        (
            "SELECT 1\\G SELECT 2; SELECT 3\\g",
            &[("SELECT 1", true), ("SELECT 2", false), ("SELECT 3", false)],
        ),
        // Inside a string or a comment it is text.
        ("SELECT '\\G';", &[("SELECT '\\G'", false)]),
        ("SELECT 1 /* \\G */;", &[("SELECT 1 /* \\G */", false)]),
    ];
    for (input, want) in rows {
        let got: Vec<(String, bool)> = split_all(input.as_bytes())
            .expect("splits")
            .into_iter()
            .map(|s| {
                (
                    String::from_utf8(s.text).expect("utf8").trim().to_string(),
                    s.vertical,
                )
            })
            .collect();
        let want: Vec<(String, bool)> = want.iter().map(|(t, v)| (t.to_string(), *v)).collect();
        assert_eq!(got, want, "{input}");
    }
}

/// In the client's big5, gbk, gb18030, sjis or cp932 a character's second
/// byte may be `\`, a backquote or `|`: the client reads the character
/// whole, in and out of quotes (checked with the stock client: an sjis
/// dump of `表`, 0x95 0x5C, loads with `--default-character-set=sjis`
/// and stops at "Unknown command" without it); the `charset` command
/// switches the set for the lines after it. One row each: (set, input,
/// the statements).
#[test]
fn a_multibyte_characters_tail_is_never_a_quote_an_escape_or_a_command() {
    use crate::lex::Multibyte::{AsciiSafe, Big5, Gb18030, Gbk, Sjis};
    type Row<'a> = (crate::lex::Multibyte, &'a [u8], &'a [&'a [u8]]);
    let rows: &[Row] = &[
        (
            Sjis,
            b"INSERT INTO t VALUES ('\x95\\');SELECT 1;",
            &[b"INSERT INTO t VALUES ('\x95\\')", b"SELECT 1"],
        ),
        (
            Sjis,
            b"SELECT `a\x95``;SELECT 2;",
            &[b"SELECT `a\x95``", b"SELECT 2"],
        ),
        (
            Big5,
            b"SELECT '\xa4\\', \xa4\\;",
            &[b"SELECT '\xa4\\', \xa4\\"],
        ),
        (
            Gbk,
            b"SELECT '\x81\\\\\\';SELECT '\x81|';",
            &[b"SELECT '\x81\\\\\\'", b"SELECT '\x81|'"],
        ),
        (
            Gb18030,
            b"SELECT '\x81\x30\x81\x30\\'';",
            &[b"SELECT '\x81\x30\x81\x30\\''"],
        ),
        // A first byte whose second is not a character's: the `\` escapes.
        (Sjis, b"SELECT '\x95\t\\';';", &[b"SELECT '\x95\t\\';'"]),
        // Read byte by byte, the same bytes are an escaped quote.
        (AsciiSafe, b"SELECT '\x95\\';';", &[b"SELECT '\x95\\';'"]),
        // `charset` switches the set for what follows.
        (
            AsciiSafe,
            b"charset sjis\nSELECT '\x95\\';",
            &[b"SET NAMES sjis", b"SELECT '\x95\\'"],
        ),
    ];
    for (set, input, want) in rows {
        let mut sp = Splitter::new(*input);
        sp.set_charset(*set);
        let got: Vec<Vec<u8>> = sp.map(|s| s.expect("splits").text).collect();
        let want: Vec<Vec<u8>> = want.iter().map(|w| w.to_vec()).collect();
        assert_eq!(got, want, "{set:?} {}", String::from_utf8_lossy(input));
    }
}
