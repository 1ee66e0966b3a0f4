//! Each case where `sqlfleet load` once gave a different result from the
//! stock client with exit 0: now the same result, or a clear refusal.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlfleet_load::LoadError;
use sqlfleet_testkit::{server, TestServer};

const HEADER: &str =
    "-- MariaDB dump 10.19  Distrib 10.11.6-MariaDB, for debian-linux-gnu (x86_64)\n\
/*!40101 SET NAMES utf8mb4 */;\n\
/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;\n\
/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;\n";

fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p
}

/// Loads `file` with the stock client (`extra` flags) and with sqlfleet
/// (`tune` adjusts the options); asserts the same result.
fn same_as_stock(
    srv: &TestServer,
    file: &Path,
    extra: &[&str],
    tune: impl Fn(&mut sqlfleet_load::LoadOptions),
) {
    let stock = common::fresh_db(srv, "stock");
    let o = srv.stock_client(&stock, file, extra);
    assert!(
        o.status.success() || extra.contains(&"--force"),
        "stock client: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ours = common::fresh_db(srv, "ours");
    let mut opts = common::options(srv, &ours, file);
    tune(&mut opts);
    let r = common::load(opts);
    assert!(r.is_ok(), "{}: {r:?}", file.display());
    let want = common::fingerprint(srv, &stock);
    let got = common::fingerprint(srv, &ours);
    assert!(want.len() >= 2, "{want:?}");
    if let Some(d) = common::first_difference(&want, &got) {
        panic!("{}: differs from the stock client:\n{d}", file.display());
    }
}

/// A dump with one big MyISAM (or other) table, many statements.
fn big_dump(engine: &str, pk: bool, rows: usize, tweak_last: Option<&str>) -> Vec<u8> {
    let mut s = String::from(HEADER);
    s.push_str(&format!(
        "CREATE TABLE `big` (`id` int NOT NULL, `v` varchar(40){}) ENGINE={engine};\n",
        if pk { ", PRIMARY KEY (`id`)" } else { "" }
    ));
    let per = 200;
    let mut id = 0;
    while id < rows {
        let vals: Vec<String> = (id..(id + per).min(rows))
            .map(|i| format!("({i},'row {i} of the big table')"))
            .collect();
        id += per;
        s.push_str(&format!("INSERT INTO `big` VALUES {};\n", vals.join(",")));
    }
    if let Some(t) = tweak_last {
        s.push_str(t);
    }
    s.into_bytes()
}

#[test]
fn a_myisam_batch_with_warnings_is_loaded_once() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    for engine in ["MyISAM", "Aria"] {
        let f = write(
            dir.path(),
            &format!("warn-{engine}.sql"),
            format!("{HEADER}CREATE TABLE `m` (`a` int, `d` date) ENGINE={engine};\nINSERT INTO `m` VALUES (1,'2020-02-30'),(2,'2020-01-01'),(3,'2021-02-29'),(4,NULL);\n").as_bytes(),
        );
        same_as_stock(srv, &f, &[], |_| {});
    }
}

#[test]
fn continue_on_error_on_myisam_matches_the_client_with_force() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let f = write(
        dir.path(),
        "dup.sql",
        format!("{HEADER}CREATE TABLE `m` (`a` int PRIMARY KEY) ENGINE=MyISAM;\nINSERT INTO `m` VALUES (1),(2);\nINSERT INTO `m` VALUES (3),(1),(4);\nINSERT INTO `m` VALUES (5);\n").as_bytes(),
    );
    let q = dir.path().join("dup.quarantine.sql");
    same_as_stock(srv, &f, &["--force"], |o| {
        o.continue_on_error = true;
        o.quarantine = Some(q.clone());
    });
    let quarantined = std::fs::read_to_string(&q).expect("quarantine file");
    assert!(quarantined.contains("VALUES (3),(1),(4)"), "{quarantined}");
    assert!(quarantined.contains("non-transactional"), "{quarantined}");
}

#[test]
fn myisam_killed_mid_load_then_resumed_is_exact() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    for (engine, pk) in [("MyISAM", true), ("MyISAM", false), ("Aria", true)] {
        let f = write(
            dir.path(),
            &format!("big-{engine}-{pk}.sql"),
            &big_dump(engine, pk, 60_000, None),
        );
        let stock = common::fresh_db(srv, "stock");
        assert!(srv.stock_client(&stock, &f, &[]).status.success());
        // Killed three times at growing points of the load, then resumed.
        // The kill comes from a poll of the journal: a load that ended
        // before the first poll saw it (a busy machine) is done again into
        // a new database, with smaller batches, one connection.
        let mut killed = 0;
        let mut ours = String::new();
        let mut opts = common::options(srv, &ours, &f);
        for attempt in 0..4u32 {
            ours = common::fresh_db(srv, "ours");
            opts = common::options(srv, &ours, &f);
            opts.batch_bytes = 20_000 >> attempt;
            if attempt > 0 {
                opts.threads = 1;
            }
            for at in [100_000u64, 600_000, 1_400_000] {
                let mut o = opts.clone();
                o.resume = killed > 0;
                let f2 = f.clone();
                match common::load_killed_when(o, || common::journaled_up_to(srv, &f2) >= at) {
                    None => killed += 1,
                    Some(r) => {
                        assert!(r.is_ok(), "{r:?}");
                        break;
                    }
                }
            }
            if killed > 0 {
                break;
            }
            eprintln!("{engine}: the load ended before the first kill (attempt {attempt}); again");
        }
        let journal = common::query(srv, &format!("SELECT CONCAT_WS(' ', j.start_offset, j.end_offset, j.kind, l.state) FROM sqlfleet.load_journal j JOIN sqlfleet.loads l USING (load_id) WHERE l.source = '{}' ORDER BY j.start_offset LIMIT 4", f.display()));
        let r = common::resume(opts.clone());
        assert!(r.is_ok(), "{engine}: {r:?}; journal before: {journal:?}");
        assert!(
            killed > 0,
            "{engine}: the load ended before any kill: make the dump bigger"
        );
        let want = common::fingerprint(srv, &stock);
        let got = common::fingerprint(srv, &ours);
        assert_eq!(
            common::first_difference(&want, &got),
            None,
            "{engine} pk={pk} after {killed} kills"
        );
    }
}

#[test]
fn a_second_load_of_the_same_input_is_refused_while_the_first_runs() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let f = write(
        dir.path(),
        "slow.sql",
        &big_dump("InnoDB", false, 150_000, None),
    );
    let ours = common::fresh_db(srv, "ours");
    let mut opts = common::options(srv, &ours, &f);
    opts.batch_bytes = 8_000;
    opts.threads = 1;
    let first = {
        let o = opts.clone();
        std::thread::spawn(move || common::load(o))
    };
    // Wait until the first holds its lock.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if common::journaled_up_to(srv, &f) > 0 {
            break; // it holds its lock and has committed work
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the first load never took its lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut second = opts.clone();
    second.resume = true;
    second.batch_bytes = 100_000;
    match common::load(second) {
        Err(e @ LoadError::Running { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("is running") && msg.contains("connection"),
                "{msg}"
            );
            assert_eq!(e.exit_code(), 1);
        }
        other => panic!("a second load while the first runs: {other:?}"),
    }
    let r = first.join().expect("join");
    assert!(r.is_ok(), "{r:?}");
    let rows = common::query(srv, &format!("SELECT COUNT(*) FROM `{ours}`.`big`"));
    assert_eq!(rows, vec!["150000".to_string()], "loaded once");
}

#[test]
fn resume_with_another_input_is_refused_before_anything_runs() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    // Same size and first MiB (same load id), different last statement.
    let a = big_dump(
        "InnoDB",
        true,
        60_000,
        Some("INSERT INTO `big` VALUES (9999991,'a');\n"),
    );
    let b = big_dump(
        "InnoDB",
        true,
        60_000,
        Some("INSERT INTO `big` VALUES (9999992,'a');\n"),
    );
    assert_eq!(a.len(), b.len());
    assert!(a.len() > (1 << 20) + 1000);
    // A different middle: the first recorded end after it must not match.
    let mut c = a.clone();
    let at = (1 << 20) + 100;
    let i = at
        + c[at..]
            .iter()
            .position(|x| *x == b'7')
            .expect("a digit to change");
    c[i] = b'8';
    for (name, bytes) in [("B (another end)", &b), ("C (another middle)", &c)] {
        let fa = write(dir.path(), &format!("dump-{}.sql", &name[..1]), &a);
        let ours = common::fresh_db(srv, "ours");
        let mut opts = common::options(srv, &ours, &fa);
        opts.threads = 1;
        opts.batch_bytes = 20_000;
        opts.restart = true; // the same content was loaded in another round
                             // Load A past the changed place but not to its end, then put the
                             // other file in its place.
        let past = at as u64 + 50_000;
        assert!(
            common::load_killed_when(opts.clone(), || common::journaled_up_to(srv, &fa) > past)
                .is_none(),
            "the load ended before the kill"
        );
        // A batch the killed run had sent may still commit on the server:
        // count once its connections are gone.
        common::settled(srv, &ours);
        let count = format!("SELECT COUNT(*) FROM `{ours}`.`big`");
        let before = common::query(srv, &count);
        std::fs::write(&fa, bytes).expect("replace");
        match common::resume(opts.clone()) {
            Err(e @ LoadError::Changed { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("not the input") && msg.contains("differs"),
                    "{name}: {msg}"
                );
                assert_eq!(common::query(srv, &count), before, "{name}: nothing ran");
            }
            // B differs only in its last statement, after everything the
            // journal recorded: the resume reads it as new, as B says.
            Ok(_) if name.starts_with('B') => {}
            other => panic!("{name}: {other:?}"),
        }
        // Another size under the same name (another load id), different
        // in the part loaded: refused where it differs, nothing runs.
        let fresh = common::fresh_db(srv, "ours");
        let fa = write(dir.path(), &format!("shorter-{}.sql", &name[..1]), &a);
        let mut o = common::options(srv, &fresh, &fa);
        o.threads = 1;
        o.batch_bytes = 20_000;
        o.restart = true;
        assert!(
            common::load_killed_when(o.clone(), || common::journaled_up_to(srv, &fa) > 100_000)
                .is_none()
        );
        common::settled(srv, &fresh);
        let count = format!("SELECT COUNT(*) FROM `{fresh}`.`big`");
        let before = common::query(srv, &count);
        let mut early = a[..a.len() - 41].to_vec();
        // (another place each round: the same bytes are the same input,
        // whose load of the round before is bound to that round's -D)
        let from = if name.starts_with('B') {
            20_000
        } else {
            30_000
        };
        let i = from + early[from..].iter().position(|x| *x == b'7').expect("7");
        early[i] = b'8';
        std::fs::write(&fa, &early).expect("shorter, changed early");
        match common::resume(o) {
            Err(e @ LoadError::Changed { .. }) => {
                assert!(e.to_string().contains("differs"), "{e}")
            }
            other => panic!("another shorter input was resumed: {other:?}"),
        }
        assert_eq!(common::query(srv, &count), before, "{name}: nothing ran");
    }
}

/// A whole dump loaded, then a later, longer dump written at the same
/// path and loaded with `--resume` (a cron job that always passes it):
/// a new load, not the finished one taken over — only a load that ended
/// without the dump's trailer (a copy still under way) is.
#[test]
fn a_later_whole_dump_at_the_same_path_is_a_new_load_on_resume() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let trailer = "-- Dump completed on 2026-12-02  1:00:00\n";
    let mut yesterday = big_dump("InnoDB", true, 20_000, None);
    yesterday.extend_from_slice(trailer.as_bytes());
    let mut today = big_dump("InnoDB", true, 30_000, None);
    today.extend_from_slice(trailer.as_bytes());
    let f = write(dir.path(), "daily.sql", &yesterday);
    let first = common::fresh_db(srv, "daily");
    let mut opts = common::options(srv, &first, &f);
    opts.resume = true;
    common::load(opts).expect("yesterday's dump");
    std::fs::write(&f, &today).expect("today's dump in its place");
    let second = common::fresh_db(srv, "daily");
    let mut opts = common::options(srv, &second, &f);
    opts.resume = true;
    let s = common::load(opts).expect("today's dump, a new load");
    assert!(s.complete && s.skipped_on_resume == 0, "{s:?}");
    assert_eq!(
        common::query(srv, &format!("SELECT COUNT(*) FROM `{second}`.`big`")),
        ["30000"]
    );
}

/// A dump loaded while it was still being copied (cut inside a
/// statement, or at a statement's end), then copied whole: `--resume`
/// takes the earlier load over — its id was the shorter file's — checks
/// the part it loaded byte for byte and loads the rest, as one load of
/// the whole file. Before, "--resume" said "another input", and the only
/// way on was --restart.
#[test]
fn a_copy_that_grew_resumes_where_its_loaded_part_is_the_same() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let a = big_dump("InnoDB", true, 60_000, None);
    let whole = write(dir.path(), "whole.sql", &a);
    let want = common::fresh_db(srv, "grown_ref");
    common::load(common::options(srv, &want, &whole)).expect("the whole dump");
    let sum = |db: &str| common::query(srv, &format!("CHECKSUM TABLE `{db}`.`big`"))[0].clone();
    let inside = a.len() * 6 / 10;
    let at_end = a[..a.len() / 2]
        .windows(8)
        .rposition(|w| w == b";\nINSERT")
        .expect("a statement's end")
        + 2;
    for (name, cut) in [
        ("cut inside a statement", inside),
        ("cut at a statement's end", at_end),
    ] {
        let f = write(dir.path(), "copying.sql", &a[..cut]);
        let ours = common::fresh_db(srv, "grown");
        let mut opts = common::options(srv, &ours, &f);
        opts.threads = 2;
        opts.batch_bytes = 20_000;
        let first = common::load(opts.clone());
        match (&first, cut == inside) {
            (Err(e), true) => assert!(e.to_string().contains("truncated"), "{name}: {e}"),
            (Ok(s), false) => assert!(
                s.warnings.iter().any(|w| w.contains("still be copying")),
                "{name}: {s:?}"
            ),
            other => panic!("{name}: {other:?}"),
        }
        std::fs::write(&f, &a).expect("the copy finished");
        let s = common::resume(opts.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(s.complete && !s.already_done, "{name}: {s:?}");
        assert!(s.skipped_on_resume > 0, "{name}: {s:?}");
        assert_eq!(
            sum(&ours).split('\t').nth(1),
            sum(&want).split('\t').nth(1),
            "{name}"
        );
        assert_eq!(
            common::query(srv, &format!("SELECT COUNT(*) FROM `{ours}`.`big`")),
            ["60000"],
            "{name}: each row once"
        );
        // Now the whole file's own load: loaded, nothing runs again.
        let again = common::resume(opts).expect("again");
        assert!(again.already_done, "{name}: {again:?}");
    }
}

/// A load that finished is "already loaded" only for the same bytes:
/// another dump of the same size and first MiB (the same load id) is
/// refused on `--resume` before anything runs, naming where it differs,
/// wherever the change is — in the middle, in the last batch, in the
/// last statement. Before, it was called "already loaded completely"
/// and the target kept the first dump's rows.
#[test]
fn a_finished_load_is_already_loaded_only_for_the_same_bytes() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let a = big_dump(
        "InnoDB",
        true,
        60_000,
        Some("INSERT INTO `big` VALUES (9999991,'a');\n"),
    );
    let digit_after = |from: usize| {
        from + a[from..]
            .iter()
            .position(|x| *x == b'7')
            .expect("a digit to change")
    };
    let mut middle = a.clone();
    let i = digit_after((1 << 20) + 100);
    middle[i] = b'8';
    let mut last_batch = a.clone();
    let i = digit_after(a.len() - 30_000);
    last_batch[i] = b'8';
    let mut last_statement = a.clone();
    let i = a.len() - 9;
    assert_eq!(&a[i..i + 1], b"9");
    last_statement[i] = b'8';
    for (name, other) in [
        ("the middle", &middle),
        ("the last batch", &last_batch),
        ("the last statement", &last_statement),
    ] {
        assert_eq!(other.len(), a.len());
        let f = write(dir.path(), "finished.sql", &a);
        let ours = common::fresh_db(srv, "ours");
        let mut opts = common::options(srv, &ours, &f);
        opts.threads = 2;
        opts.batch_bytes = 20_000;
        opts.restart = true;
        common::load(opts.clone()).expect("the first load");
        let sum = format!("CHECKSUM TABLE `{ours}`.`big`");
        let before = common::query(srv, &sum);
        // The same bytes again: already loaded, nothing runs.
        let again = common::resume(opts.clone()).expect("the same input");
        assert!(again.already_done, "{name}: {again:?}");
        assert_eq!(common::query(srv, &sum), before);
        // Another input with the same id: refused, nothing runs, and the
        // finished load stays finished for its own input.
        std::fs::write(&f, other).expect("replace");
        match common::resume(opts.clone()) {
            Err(e @ LoadError::Changed { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("not the input")
                        && msg.contains("differs")
                        && msg.contains("line"),
                    "{name}: {msg}"
                );
            }
            other => panic!("{name}: another input was taken for the loaded one: {other:?}"),
        }
        assert_eq!(common::query(srv, &sum), before, "{name}: nothing ran");
        std::fs::write(&f, &a).expect("back");
        let again = common::resume(opts).expect("the loaded input again");
        assert!(again.already_done, "{name}: {again:?}");
    }
}

#[test]
fn a_journal_whose_chain_has_another_hash_is_not_resumed() {
    // sqlfleet before the chain was named wrote SHA-256 chains and no
    // chain_hash: this version cannot check such a journal's input.
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let f = write(
        dir.path(),
        "old.sql",
        &big_dump("InnoDB", true, 60_000, None),
    );
    let ours = common::fresh_db(srv, "ours");
    let mut opts = common::options(srv, &ours, &f);
    opts.threads = 1;
    opts.batch_bytes = 20_000;
    opts.restart = true;
    assert!(
        common::load_killed_when(opts.clone(), || common::journaled_up_to(srv, &f) > 200_000)
            .is_none(),
        "the load ended before the kill"
    );
    common::settled(srv, &ours);
    let source = f.display().to_string();
    let hash = format!(
        "SELECT COALESCE(chain_hash, 'NULL') FROM sqlfleet.loads WHERE source = '{source}'"
    );
    assert_eq!(common::query(srv, &hash), ["xxh3-128"]);
    common::query(
        srv,
        &format!("UPDATE sqlfleet.loads SET chain_hash = NULL WHERE source = '{source}'"),
    );
    let count = format!("SELECT COUNT(*) FROM `{ours}`.`big`");
    let before = common::query(srv, &count);
    match common::resume(opts.clone()) {
        Err(LoadError::Setup { what }) => assert!(
            what.contains("SHA-256") && what.contains("xxh3-128") && what.contains("--restart"),
            "{what}"
        ),
        other => panic!("an old journal was resumed: {other:?}"),
    }
    assert_eq!(common::query(srv, &count), before, "nothing ran");
    // Its own hash named again: the same journal resumes, exactly.
    common::query(
        srv,
        &format!("UPDATE sqlfleet.loads SET chain_hash = 'xxh3-128' WHERE source = '{source}'"),
    );
    let s = common::resume(opts).expect("resume");
    assert!(s.skipped_on_resume > 0, "{s:?}");
    assert_eq!(common::query(srv, &count), ["60000"]);
}

#[test]
fn files_that_use_connection_state_load_like_the_stock_client() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let body = "CREATE TABLE `parent` (`id` int PRIMARY KEY, `v` varchar(10)) ENGINE=InnoDB;\n\
CREATE TABLE `child` (`id` int PRIMARY KEY, `v` varchar(10)) ENGINE=InnoDB;\n\
CREATE TABLE `crcs` (`t` varchar(10), `crc` bigint, `n` int) ENGINE=InnoDB;\n\
INSERT INTO `parent` VALUES (1,'a'),(2,'b'),(3,'c');\n\
INSERT INTO `child` SELECT `id`, `v` FROM `parent`;\n\
SET @crc = (SELECT SUM(CRC32(`v`)) FROM `parent`);\n\
SELECT @n := COUNT(*) FROM `child`;\n\
INSERT INTO `crcs` VALUES ('parent', @crc, @n);\n\
CREATE TEMPORARY TABLE `tmp` (`id` int);\n\
INSERT INTO `tmp` VALUES (10),(11);\n\
INSERT INTO `parent` SELECT `id`, 'tmp' FROM `tmp`;\n\
START TRANSACTION;\n\
INSERT INTO `parent` VALUES (20,'rolled');\n\
ROLLBACK;\n";
    let auto =
        "CREATE TABLE `a` (`id` int AUTO_INCREMENT PRIMARY KEY, `v` varchar(10)) ENGINE=InnoDB;\n\
CREATE TABLE `b` (`id` int, `ref` int) ENGINE=InnoDB;\n\
INSERT INTO `a` (`v`) VALUES ('x');\n\
INSERT INTO `a` (`v`) VALUES ('y');\n\
INSERT INTO `b` VALUES (1, LAST_INSERT_ID());\n";
    let plain = write(dir.path(), "script.sql", format!("{body}{auto}").as_bytes());
    let dump = write(
        dir.path(),
        "dump-like.sql",
        format!("{HEADER}{body}").as_bytes(),
    );
    for threads in [1, 4] {
        same_as_stock(srv, &plain, &[], |o| o.threads = threads);
        same_as_stock(srv, &dump, &[], |o| o.threads = threads);
    }
    // The batch not yet sent runs on the same connection as the
    // LAST_INSERT_ID() after it: exact even in a dump.
    let lid = write(
        dir.path(),
        "dump-lid.sql",
        format!("{HEADER}{auto}").as_bytes(),
    );
    same_as_stock(srv, &lid, &[], |_| {});
    // After work sent to other connections it cannot see its statement:
    // refused clearly, and --serial loads it.
    let auto2 = auto.replace(
        "INSERT INTO `b` VALUES",
        "INSERT INTO `b` VALUES (0, 0);\nINSERT INTO `b` VALUES",
    );
    let mixed = write(
        dir.path(),
        "dump-lid2.sql",
        format!("{HEADER}{auto2}").as_bytes(),
    );
    let ours = common::fresh_db(srv, "ours");
    match common::load(common::options(srv, &ours, &mixed)) {
        Err(e) => assert!(e.to_string().contains("--serial"), "{e}"),
        Ok(s) => panic!("LAST_INSERT_ID after parallel work was loaded: {s:?}"),
    }
    same_as_stock(srv, &mixed, &[], |o| {
        o.serial = true;
        o.restart = true;
    });
}

#[test]
fn client_commands_and_hand_written_files() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let other = common::fresh_db(srv, "other");
    // `use` without a semicolon, as the last line and before a statement;
    // \g and \G; a BOM; DELIMITER at the very end without a newline.
    let text = format!(
        "\u{feff}CREATE TABLE `t` (`a` int);\nINSERT INTO `t` VALUES (1)\\g\nuse {other}\nCREATE TABLE IF NOT EXISTS `t` (`a` int);\nINSERT INTO `t` VALUES (2)\\G\nDELIMITER ;;\nCREATE PROCEDURE `p`() BEGIN SELECT 1; END;;\nDELIMITER ;"
    );
    let f = write(dir.path(), "hand.sql", text.as_bytes());
    let stock = common::fresh_db(srv, "stock");
    assert!(srv.stock_client(&stock, &f, &[]).status.success());
    let stock_other = common::query(srv, &format!("SELECT COUNT(*) FROM `{other}`.`t`"));
    assert_eq!(stock_other, vec!["1"]);
    common::query(srv, &format!("DROP PROCEDURE `{other}`.`p`"));
    common::query(srv, &format!("DELETE FROM `{other}`.`t`"));
    let ours = common::fresh_db(srv, "ours");
    let r = common::load(common::options(srv, &ours, &f));
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        common::query(srv, &format!("SELECT COUNT(*) FROM `{other}`.`t`")),
        vec!["1"]
    );
    assert_eq!(
        common::fingerprint(srv, &stock),
        common::fingerprint(srv, &ours)
    );
    assert_eq!(
        common::query(
            srv,
            &format!(
                "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = '{other}'"
            )
        ),
        vec!["1"]
    );
    // Commands that would change the connection are refused with the line.
    let f = write(
        dir.path(),
        "system.sql",
        b"CREATE TABLE `s` (`a` int);\nsystem rm -rf /tmp/x\n",
    );
    let ours = common::fresh_db(srv, "ours");
    match common::load(common::options(srv, &ours, &f)) {
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("line 2") && m.contains("not supported"), "{m}");
        }
        Ok(s) => panic!("{s:?}"),
    }
}

#[test]
fn inputs_that_are_not_sql_are_named() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let ours = common::fresh_db(srv, "ours");
    for (name, bytes, want) in [
        (
            "x.xml",
            b"<?xml version=\"1.0\"?>\n<mysqldump xmlns:xsi=\"x\">\n".to_vec(),
            "XML dump",
        ),
        (
            "u16.sql",
            b"\xFF\xFES\x00E\x00L\x00E\x00C\x00T\x00".to_vec(),
            "UTF-16",
        ),
    ] {
        let f = write(dir.path(), name, &bytes);
        match common::load(common::options(srv, &ours, &f)) {
            Err(e) => {
                assert!(e.to_string().contains(want), "{name}: {e}");
                assert_eq!(e.exit_code(), 3);
            }
            Ok(s) => panic!("{name}: {s:?}"),
        }
    }
}

/// A dump made with `--databases` (or `--all-databases`) goes to its own
/// database; with -D naming another, the mysql client follows the dump
/// there and replaces that database's tables. The loader stops at the
/// first statement that creates, alters, drops or goes to another
/// database, before it runs; without -D the dump loads where it says, and
/// a dump that stays in the named database loads as before.
/// On a server that takes database names without regard to case
/// (lower_case_table_names = 1), `-D Named` and the dump's `USE named` are
/// one database: it loads there; another database is still refused.
#[test]
fn a_dump_for_the_named_database_in_another_case_loads_where_the_server_folds_names() {
    let srv = sqlfleet_testkit::server_with(&["lower_case_table_names=1"]);
    let dir = tempfile::tempdir().expect("tmp");
    let ours = common::fresh_db(&srv, "named");
    let other = common::fresh_db(&srv, "other");
    let body =
        "DROP TABLE IF EXISTS `t`;\nCREATE TABLE `t` (`a` int);\nINSERT INTO `t` VALUES (1),(2);\n";
    let f = write(
        dir.path(),
        "case.sql",
        format!("{HEADER}USE `{}`;\n{body}", ours.to_uppercase()).as_bytes(),
    );
    common::load(common::options(&srv, &ours, &f)).expect("the named database in another case");
    assert_eq!(
        common::query(&srv, &format!("SELECT COUNT(*) FROM `{ours}`.`t`")),
        vec!["2"]
    );
    let f = write(
        dir.path(),
        "other.sql",
        format!("{HEADER}USE `{}`;\n{body}", other.to_uppercase()).as_bytes(),
    );
    let e = common::load(common::options(&srv, &ours, &f))
        .expect_err("another database")
        .to_string();
    assert!(e.contains("while -D named"), "{e}");
}

#[test]
fn a_dump_for_another_database_than_the_one_named_is_refused() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let ours = common::fresh_db(srv, "named");
    let theirs = common::fresh_db(srv, "theirs");
    common::query(
        srv,
        &format!("CREATE TABLE `{theirs}`.`t` (a INT); INSERT INTO `{theirs}`.`t` VALUES (7)"),
    );
    let body =
        "DROP TABLE IF EXISTS `t`;\nCREATE TABLE `t` (`a` int);\nINSERT INTO `t` VALUES (1),(2);\n";
    for (name, switch) in [
        ("use", format!("USE `{theirs}`;\n")),
        (
            "create",
            format!("CREATE DATABASE /*!32312 IF NOT EXISTS*/ `{theirs}`;\n\nUSE `{theirs}`;\n"),
        ),
        (
            "drop",
            format!("/*!40000 DROP DATABASE IF EXISTS `{theirs}`*/;\n\nCREATE DATABASE `{theirs}`;\nUSE `{theirs}`;\n"),
        ),
        ("alter", format!("ALTER DATABASE `{theirs}` CHARACTER SET latin1;\n")),
    ] {
        let f = write(
            dir.path(),
            &format!("{name}.sql"),
            format!("{HEADER}{switch}{body}").as_bytes(),
        );
        let e = common::load(common::options(srv, &ours, &f))
            .expect_err(&format!("{name}: a dump for another database"))
            .to_string();
        assert!(
            e.contains(&format!("acts on database `{theirs}` while -D named `{ours}`"))
                && e.contains("leave -D out")
                && e.contains("nothing was written to the target"),
            "{name}: {e}"
        );
        assert_eq!(
            common::query(srv, &format!("SELECT a FROM `{theirs}`.`t`")),
            vec!["7"],
            "{name}: nothing ran"
        );
        assert_eq!(
            common::query(
                srv,
                &format!("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{ours}'")
            ),
            vec!["0"],
            "{name}"
        );
    }
    // Without -D it loads where the dump says.
    let f = write(
        dir.path(),
        "there.sql",
        format!("{HEADER}USE `{theirs}`;\n{body}").as_bytes(),
    );
    let mut opts = common::options(srv, &ours, &f);
    opts.target = opts.target.with_database(None);
    common::load(opts).expect("without -D");
    assert_eq!(
        common::query(srv, &format!("SELECT COUNT(*) FROM `{theirs}`.`t`")),
        vec!["2"]
    );
    // A dump that goes to the named database loads there.
    let f = write(
        dir.path(),
        "here.sql",
        format!("{HEADER}USE `{ours}`;\n{body}").as_bytes(),
    );
    common::load(common::options(srv, &ours, &f)).expect("into the named database");
    assert_eq!(
        common::query(srv, &format!("SELECT COUNT(*) FROM `{ours}`.`t`")),
        vec!["2"]
    );
}

#[test]
fn a_dump_of_a_server_loaded_with_sqlfleet_keeps_the_journal() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let ours = common::fresh_db(srv, "ours");
    let text = format!(
        "{HEADER}CREATE DATABASE /*!32312 IF NOT EXISTS*/ `sqlfleet`;\nUSE `sqlfleet`;\nDROP TABLE IF EXISTS `load_journal`;\nCREATE TABLE `load_journal` (`x` int);\nINSERT INTO `load_journal` VALUES (1);\nDROP TABLE IF EXISTS `loads`;\nCREATE TABLE `loads` (`x` int);\nUSE `{ours}`;\nCREATE TABLE `t` (`a` int);\nINSERT INTO `t` VALUES (1),(2);\n"
    );
    let f = write(dir.path(), "all.sql", text.as_bytes());
    let s = common::load(common::options(srv, &ours, &f)).expect("loads");
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("sqlfleet's own load journal")),
        "{:?}",
        s.warnings
    );
    assert_eq!(
        common::query(srv, &format!("SELECT COUNT(*) FROM `{ours}`.`t`")),
        vec!["2"]
    );
    let state = common::query(
        srv,
        &format!(
            "SELECT state FROM sqlfleet.loads WHERE load_id = '{}'",
            s.load_id
        ),
    );
    assert_eq!(
        state,
        vec!["done"],
        "the live journal survived the dump's DROP TABLE"
    );
}

#[test]
fn source_reads_the_named_files_in_place() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    write(
        d,
        "rows_b.dump",
        b"INSERT INTO `t` (`a`) VALUES (3),(4);\nINSERT INTO `t` (`a`) VALUES (5);\n",
    );
    write(
        d,
        "rows_a.dump",
        format!(
            "INSERT INTO `t` (`a`) VALUES (1);\nsource {}\nINSERT INTO `t` (`a`) VALUES (2);\n",
            d.join("rows_b.dump").display()
        )
        .as_bytes(),
    );
    let main = format!(
        "CREATE TABLE `t` (`a` int, `seq` int AUTO_INCREMENT PRIMARY KEY);\nsource {}\n\\. {}\nINSERT INTO `t` (`a`) VALUES (6);\n",
        d.join("rows_a.dump").display(),
        d.join("rows_b.dump").display()
    );
    let f = write(d, "main.sql", main.as_bytes());
    // The order of rows shows in the AUTO_INCREMENT ids.
    same_as_stock(srv, &f, &[], |_| {});
    // Relative names are found beside the file that names them.
    let rel = write(
        d,
        "rel.sql",
        b"CREATE TABLE `t` (`a` int);\nsource rows_b.dump\n",
    );
    let ours = common::fresh_db(srv, "ours");
    common::load(common::options(srv, &ours, &rel)).expect("relative source");
    assert_eq!(
        common::query(srv, &format!("SELECT COUNT(*) FROM `{ours}`.`t`")),
        vec!["3"]
    );
    // A missing file is an error naming the line of the command.
    let bad = write(
        d,
        "bad.sql",
        b"CREATE TABLE `t` (`a` int);\nsource nowhere.dump\n",
    );
    let ours = common::fresh_db(srv, "ours");
    match common::load(common::options(srv, &ours, &bad)) {
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("line 2") && m.contains("nowhere.dump"), "{m}");
        }
        Ok(s) => panic!("{s:?}"),
    }
    // A failing statement in a sourced file names that file and line.
    write(
        d,
        "broken.dump",
        b"INSERT INTO `t` VALUES (1);\nINSERT INTO `nope` VALUES (1);\n",
    );
    let f = write(
        d,
        "calls-broken.sql",
        b"CREATE TABLE `t` (`a` int);\nsource broken.dump\n",
    );
    let ours = common::fresh_db(srv, "ours");
    match common::load(common::options(srv, &ours, &f)) {
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("broken.dump, line 2"), "{m}");
        }
        Ok(s) => panic!("{s:?}"),
    }
}

#[test]
fn the_connection_character_set_is_the_clients() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    // Latin-1 bytes (é = 0xE9), as a latin1 client sends them.
    let mut text = HEADER
        .replace("/*!40101 SET NAMES utf8mb4 */;\n", "")
        .into_bytes();
    text.extend_from_slice(b"CREATE TABLE `l` (`v` varchar(10)) DEFAULT CHARSET=utf8mb4;\nINSERT INTO `l` VALUES ('caf\xE9'),('na\xEFve');\n");
    let f = write(dir.path(), "latin1.sql", &text);
    same_as_stock(srv, &f, &["--default-character-set=latin1"], |o| {
        o.target.charset = Some("latin1".into());
    });
    let stock = common::fresh_db(srv, "stock");
    assert!(srv
        .stock_client(&stock, &f, &["--default-character-set=latin1"])
        .status
        .success());
    assert_eq!(
        common::query(srv, &format!("SELECT HEX(`v`) FROM `{stock}`.`l` LIMIT 1")),
        vec!["636166C3A9".to_string()]
    );
}

#[test]
fn a_non_transactional_table_with_triggers_is_not_emptied_on_resume() {
    let srv = server();
    let db = common::fresh_db(srv, "trig");
    common::query(
        srv,
        &format!("CREATE TABLE `{db}`.`m` (`a` int) ENGINE=Aria"),
    );
    common::query(
        srv,
        &format!("CREATE TABLE `{db}`.`log` (`a` int) ENGINE=InnoDB"),
    );
    common::query(srv, &format!("CREATE TRIGGER `{db}`.`m_ai` AFTER INSERT ON `{db}`.`m` FOR EACH ROW INSERT INTO `{db}`.`log` VALUES (NEW.a)"));
    common::query(srv, &format!("INSERT INTO `{db}`.`m` VALUES (1),(2)"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let r = rt.block_on(async {
        let mut c = srv.connect().await;
        for sql in sqlfleet_load::journal::SCHEMA_SQL {
            mysql_async::prelude::Queryable::query_drop(&mut c, *sql)
                .await
                .expect("schema");
        }
        let table = format!("`{db}`.`m`");
        let id = format!("{:032}", db.len());
        for kind in ["create", "pending-data"] {
            let rec = sqlfleet_load::journal::Record {
                load_id: &id,
                start: if kind == "create" { 0 } else { 10 },
                end: if kind == "create" { 9 } else { 20 },
                kind,
                rows: 0,
                table: Some(&table),
                chain: None,
            };
            mysql_async::prelude::Queryable::query_drop(&mut c, rec.sql())
                .await
                .expect("record");
        }
        sqlfleet_load::journal::reset_dirty_table(&mut c, "test", &id, &table).await
    });
    match r {
        Err(e) => assert!(
            e.to_string().contains("has triggers") && e.to_string().contains("--restart"),
            "{e}"
        ),
        Ok(n) => panic!("emptied {n} rows of a table whose triggers wrote elsewhere"),
    }
    assert_eq!(
        common::query(srv, &format!("SELECT COUNT(*) FROM `{db}`.`m`")),
        vec!["2"],
        "nothing deleted"
    );
}

/// The summary's row count is the rows the file put in, whichever way its
/// statements ran: batched in parallel, or as written on one connection
/// once a statement needed one connection's state (it said 0 rows there).
#[test]
fn the_summary_counts_the_rows_put_in_on_one_connection_too() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let body = "CREATE TABLE `t` (`id` int PRIMARY KEY, `v` int) ENGINE=InnoDB;\n\
INSERT INTO `t` VALUES (1,1),(2,2),(3,3);\n\
SET @x = 10;\n\
INSERT INTO `t` VALUES (@x, 1),(11, 2);\n\
INSERT INTO `t` VALUES (12, 3);\n\
UPDATE `t` SET `v` = 0 WHERE `id` < 3;\n";
    for (name, text) in [
        ("dump-state.sql", format!("{HEADER}{body}")),
        ("plain-state.sql", body.to_string()),
    ] {
        let file = write(dir.path(), name, text.as_bytes());
        let db = common::fresh_db(srv, "rows");
        let s = common::load(common::options(srv, &db, &file)).expect("load");
        assert_eq!(s.rows, 6, "{name}: {}", s.paragraph());
        assert!(
            s.paragraph().contains("6 rows into 1 table"),
            "{}",
            s.paragraph()
        );
    }
}

/// A table the target already has, whose column takes `DEFAULT
/// NEXTVAL(seq)`: rows that leave it to the default take sequence values
/// in the order they are inserted, so they load in file order as the
/// stock client's do (batches in parallel gave the same rows other ids,
/// silently: a different CHECKSUM TABLE).
#[test]
fn rows_that_take_a_sequence_value_keep_the_stock_clients_ids() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    // Two tables share the sequence; rows with their own ids (as a dump
    // writes them) come in between.
    let mut text = HEADER.to_string();
    for b in 0..40 {
        let rows: Vec<String> = (0..25).map(|i| format!("({})", b * 25 + i)).collect();
        let table = if b % 3 == 0 { "u" } else { "t" };
        text.push_str(&format!(
            "INSERT INTO `{table}` (`v`) VALUES {};\n",
            rows.join(",")
        ));
        text.push_str(&format!("INSERT INTO `w` VALUES ({}, {b});\n", 100_000 + b));
    }
    let file = write(dir.path(), "sequenced.sql", text.as_bytes());
    let setup = "CREATE SEQUENCE `s`; \
        CREATE TABLE `t` (`id` bigint NOT NULL DEFAULT NEXTVAL(`s`) PRIMARY KEY, `v` int) ENGINE=InnoDB; \
        CREATE TABLE `u` (`id` bigint NOT NULL DEFAULT NEXTVAL(`s`) PRIMARY KEY, `v` int) ENGINE=InnoDB; \
        CREATE TABLE `w` (`id` bigint NOT NULL DEFAULT NEXTVAL(`s`) PRIMARY KEY, `v` int) ENGINE=InnoDB";
    let stock = common::fresh_db(srv, "stock");
    common::query(srv, &format!("USE `{stock}`; {setup}"));
    let o = srv.stock_client(&stock, &file, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ours = common::fresh_db(srv, "ours");
    common::query(srv, &format!("USE `{ours}`; {setup}"));
    let mut opts = common::options(srv, &ours, &file);
    opts.threads = 4;
    opts.batch_bytes = 200;
    common::load(opts).expect("load");
    let sums = |db: &str| {
        common::query(
            srv,
            &format!("SELECT SUM(`id` * `v`) FROM `{db}`.`t` UNION ALL SELECT SUM(`id` * `v`) FROM `{db}`.`u`"),
        )
    };
    assert_eq!(sums(&ours), sums(&stock), "rows took other sequence values");
    let want = common::fingerprint(srv, &stock);
    let got = common::fingerprint(srv, &ours);
    if let Some(d) = common::first_difference(&want, &got) {
        panic!("differs from the stock client:\n{d}");
    }
}

/// `LAST_INSERT_ID()` (or `ROW_COUNT()`, `FOUND_ROWS()`) reads what an
/// earlier statement left on the connection. A run killed after that
/// statement and before the reader cannot be resumed exactly: the
/// resumed run's connection never ran it (it gave 0 where the stock
/// client gave the id, exit 0, seed 80 of the differential test). The
/// resume refuses with --restart as the way on, and again at once.
#[test]
fn a_resume_past_what_last_insert_id_reads_is_refused() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    for engine in ["InnoDB", "MyISAM"] {
        let text = format!(
            "CREATE TABLE `a` (`id` int AUTO_INCREMENT PRIMARY KEY, `v` varchar(10), `n` int) ENGINE={engine};\n\
CREATE TABLE `b` (`x` int) ENGINE=InnoDB;\n\
INSERT INTO `a` (`v`) VALUES ('x');\n\
INSERT INTO `b` SELECT SLEEP(1);\n\
INSERT INTO `a` VALUES (500, 'after', LAST_INSERT_ID());\n"
        );
        let f = write(dir.path(), &format!("lid-{engine}.sql"), text.as_bytes());
        let ours = common::fresh_db(srv, "ours");
        let opts = common::options(srv, &ours, &f);
        // Once the first INSERT is journaled, while the second sleeps.
        let at = text.find("INSERT INTO `a` (").expect("offset") as u64 + 1;
        let f2 = f.clone();
        let r = common::load_killed_when(opts.clone(), || common::journaled_up_to(srv, &f2) >= at);
        assert!(
            r.is_none(),
            "{engine}: the load ended before the kill: {r:?}"
        );
        for attempt in 0..2 {
            match common::resume(opts.clone()) {
                Err(LoadError::Changed { what, .. }) => {
                    assert!(
                        what.contains("--restart") && what.contains("LAST_INSERT_ID"),
                        "{what}"
                    )
                }
                other => panic!(
                    "{engine}, resume {attempt}: {other:?}; rows {:?}",
                    common::query(
                        srv,
                        &format!("SELECT CONCAT_WS(',', id, v, n) FROM `{ours}`.`a`")
                    )
                ),
            }
        }
    }
}

/// A statement refused under --force and an INSERT IGNORE's duplicate
/// use up AUTO_INCREMENT values the stock client never gives back. A
/// resume set the counter back to the CREATE's (the server then took the
/// largest id + 1), so the next generated id was lower than the stock
/// client's (seed 1012 of the differential test, exit 0). The counter
/// each record kept is what a resume restores now.
#[test]
fn a_resume_keeps_the_ids_refused_statements_used_up() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let text = "CREATE TABLE `a` (`id` int AUTO_INCREMENT PRIMARY KEY, `v` varchar(10) UNIQUE) ENGINE=InnoDB;\n\
CREATE TABLE `b` (`x` int) ENGINE=InnoDB;\n\
INSERT INTO `a` VALUES (1,'x');\n\
INSERT INTO `a` VALUES (12,'b'),(1,'dup');\n\
INSERT IGNORE INTO `a` (`v`) VALUES ('x');\n\
INSERT INTO `b` VALUES (1);\n\
INSERT INTO `b` SELECT SLEEP(1);\n\
INSERT INTO `a` (`v`) VALUES ('gen');\n";
    let f = write(dir.path(), "burnt.sql", text.as_bytes());
    let stock = common::fresh_db(srv, "stock");
    srv.stock_client(&stock, &f, &["--force"]);
    let ours = common::fresh_db(srv, "ours");
    let mut opts = common::options(srv, &ours, &f);
    opts.continue_on_error = true;
    opts.quarantine = Some(dir.path().join("burnt.quarantine.sql"));
    let at = text.find("INSERT INTO `b` VALUES (1)").expect("offset") as u64 + 1;
    let f2 = f.clone();
    let r = common::load_killed_when(opts.clone(), || common::journaled_up_to(srv, &f2) >= at);
    assert!(r.is_none(), "the load ended before the kill: {r:?}");
    let r = common::resume(opts);
    assert!(r.is_ok(), "{r:?}");
    let want = common::fingerprint(srv, &stock);
    assert!(
        want.iter().any(|l| l.contains("AUTO_INCREMENT=15")),
        "the stock client's counter: {want:?}"
    );
    let got = common::fingerprint(srv, &ours);
    assert_eq!(common::first_difference(&want, &got), None);
}

/// A non-transactional table with a batch in flight is emptied and its
/// data loaded again on resume: rows that a statement recorded as done
/// (an INSERT ... SELECT the dump runs alone) put in are rows of the
/// table too, and must come back.
#[test]
fn emptying_a_table_on_resume_keeps_what_its_other_statements_put_in() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let mut text = String::from_utf8(big_dump("MyISAM", true, 0, None)).expect("utf8");
    text.push_str("INSERT INTO `big` VALUES (-1,'x'),(-2,'y');\n");
    text.push_str("INSERT INTO `big` SELECT `id` - 10, `v` FROM `big`;\n");
    let rest = String::from_utf8(big_dump("MyISAM", true, 60_000, None)).expect("utf8");
    let body = &rest[rest.find("INSERT").expect("inserts")..];
    text.push_str(body);
    let f = write(dir.path(), "barrier.sql", text.as_bytes());
    let stock = common::fresh_db(srv, "stock");
    assert!(srv.stock_client(&stock, &f, &[]).status.success());
    let want = common::fingerprint(srv, &stock);
    // The kill must find a batch in flight: a few tries.
    let mut emptied = false;
    for _ in 0..8 {
        let ours = common::fresh_db(srv, "ours");
        let mut opts = common::options(srv, &ours, &f);
        opts.batch_bytes = 20_000;
        let at = text.len() as u64 / 3;
        let f2 = f.clone();
        let r = common::load_killed_when(opts.clone(), || common::journaled_up_to(srv, &f2) >= at);
        assert!(r.is_none(), "the load ended before the kill: {r:?}");
        let s = common::resume(opts).unwrap_or_else(|e| panic!("{e}"));
        let got = common::fingerprint(srv, &ours);
        assert_eq!(common::first_difference(&want, &got), None);
        if s.warnings.iter().any(|w| w.contains("rows were deleted")) {
            emptied = true;
            break;
        }
    }
    assert!(
        emptied,
        "no kill left a batch in flight: nothing was emptied"
    );
}

/// The binary log's events from `from` (file, position) on, as text.
fn binlog_since(srv: &TestServer, from: &(String, String)) -> String {
    let mut out = String::new();
    for log in common::query(srv, "SHOW BINARY LOGS") {
        if log < from.0 {
            continue;
        }
        let at = if log == from.0 {
            format!(" FROM {}", from.1)
        } else {
            String::new()
        };
        for r in common::rows(srv, &format!("SHOW BINLOG EVENTS IN '{log}'{at}")) {
            out.push_str(&r.join(" "));
            out.push('\n');
        }
    }
    out
}

/// `--skip-binlog` (sql_log_bin = 0 on every connection of the load):
/// neither the table's DDL nor its rows reach the binary log, so a
/// replica does not see them; the rows are on the server. Without it
/// both are logged (the control: the probe finds what it looks for).
#[test]
fn skip_binlog_keeps_the_load_out_of_the_binary_log() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    for (binlog, table) in [
        (sqlfleet_load::Binlog::Skip, "binlog_probe_skipped"),
        (sqlfleet_load::Binlog::Write, "binlog_probe_written"),
    ] {
        let rows: Vec<String> = (1..=2000).map(|i| format!("({i},'v{i}')")).collect();
        let text = format!(
            "{HEADER}CREATE TABLE `{table}` (`id` int PRIMARY KEY, `v` varchar(20)) ENGINE=InnoDB;\n\
             INSERT INTO `{table}` VALUES {};\n\
             CREATE TABLE `{table}_myisam` (`id` int) ENGINE=MyISAM;\n\
             INSERT INTO `{table}_myisam` VALUES (1),(2);\n",
            rows.join(",")
        );
        let file = write(dir.path(), &format!("{table}.sql"), text.as_bytes());
        let db = common::fresh_db(srv, "binlog");
        let status = common::rows(srv, "SHOW MASTER STATUS");
        let from = (status[0][0].clone(), status[0][1].clone());
        let mut opts = common::options(srv, &db, &file);
        opts.binlog = binlog;
        let s = common::load(opts).expect("load");
        assert_eq!(s.rows, 2002, "{}", s.paragraph());
        assert_eq!(
            common::query(srv, &format!("SELECT COUNT(*) FROM {db}.{table}")),
            ["2000"]
        );
        let log = binlog_since(srv, &from);
        let logged = log.contains(table);
        assert_eq!(
            logged,
            binlog == sqlfleet_load::Binlog::Write,
            "{binlog:?}: the binary log {} the load's table {table}",
            if logged { "holds" } else { "does not hold" }
        );
    }
}

/// An account that may not turn the binary log off is told so before
/// anything runs; the load does not go on with the binlog on.
#[test]
fn skip_binlog_without_the_privilege_stops_before_anything_runs() {
    let srv = server();
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::fresh_db(srv, "nobinlog");
    common::query(
        srv,
        "CREATE USER IF NOT EXISTS 'nobinlog'@'%' IDENTIFIED BY 'nb-pw'",
    );
    common::query(srv, &format!("GRANT ALL ON `{db}`.* TO 'nobinlog'@'%'"));
    common::query(srv, "GRANT ALL ON `sqlfleet`.* TO 'nobinlog'@'%'");
    let file = write(
        dir.path(),
        "nobinlog.sql",
        format!("{HEADER}CREATE TABLE `t` (`id` int PRIMARY KEY) ENGINE=InnoDB;\nINSERT INTO `t` VALUES (1),(2);\n").as_bytes(),
    );
    let mut opts = common::options(srv, &db, &file);
    opts.target.user = "nobinlog".into();
    opts.target.password = Some(sqlfleet_conn::PasswordSpec::Given(
        sqlfleet_conn::Secret::new("nb-pw"),
    ));
    opts.binlog = sqlfleet_load::Binlog::Skip;
    let e = common::load(opts.clone()).expect_err("loaded without the privilege");
    let m = e.to_string();
    assert!(
        m.contains("--skip-binlog") && m.contains("BINLOG ADMIN"),
        "{m}"
    );
    let tables =
        format!("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{db}'");
    assert_eq!(common::query(srv, &tables), ["0"]);
    // The same account loads it with the binary log on.
    opts.binlog = sqlfleet_load::Binlog::Write;
    common::load(opts).expect("load with the binlog on");
    assert_eq!(common::query(srv, &tables), ["1"]);
}
