//! The oracle: generated .sql files loaded by the stock client and by
//! `sqlfleet load` (random thread counts; some runs killed at a random
//! moment and resumed; some run twice at once) must give the same
//! tables, checksums, definitions — or sqlfleet must refuse clearly.
//! One file in three is written in one of the server's character sets,
//! read by both with `--default-character-set` of that set.
//!
//! `SQLFLEET_DIFF_FILES` (default 120) sets the budget and
//! `SQLFLEET_DIFF_SEED` the first seed; a failure prints the seed and
//! the file, and `SQLFLEET_DIFF_SEED=<seed> SQLFLEET_DIFF_FILES=1`
//! replays it. `bench/load_differential.sh` runs a longer budget.

mod common;

use std::time::Duration;

use rand::{Rng, SeedableRng};
use sqlfleet_load::LoadError;
use sqlfleet_testkit::server;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn generated_files_load_like_the_stock_client() {
    let srv = server();
    let files = env_u64("SQLFLEET_DIFF_FILES", 120);
    let first = env_u64("SQLFLEET_DIFF_SEED", 1);
    let dir = tempfile::tempdir().expect("tempdir");
    // Less cp1256, where the stock client (10.11) cuts a backquoted name's
    // closing quote: `SELECT 1 AS \`a\`;` reaches the server as
    // `SELECT 1 AS \`a` (ERROR 1064), so it is no oracle there.
    let mut sets = tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(common::charsets::charsets(srv, first));
    sets.retain(|(name, _)| name != "cp1256");
    let mut per_set = std::collections::BTreeMap::<String, usize>::new();
    let mut failures = Vec::new();
    let (mut killed, mut concurrent, mut refused, mut compared, mut forced) = (0, 0, 0, 0, 0);
    for seed in first..first + files {
        let g = common::gen::generate_in(seed, &sets);
        let charset = g.charset.clone().unwrap_or_else(|| "utf8mb4".into());
        *per_set.entry(charset.clone()).or_default() += 1;
        let path = dir.path().join(format!("gen-{seed}.sql"));
        std::fs::write(&path, &g.text).expect("write");
        let stock = common::fresh_db(srv, "stock");
        // (A utf8mb4 file goes as before: the client's own default.)
        let mut extra: Vec<String> = g
            .charset
            .iter()
            .map(|c| format!("--default-character-set={c}"))
            .collect();
        if g.failing {
            extra.push("--force".into());
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let o = srv.stock_client(&stock, &path, &extra);
        assert!(
            o.status.success() || g.failing,
            "seed {seed}: the stock client failed (a generator bug): {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&g.text)
        );
        let ours = common::fresh_db(srv, "ours");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
        let mut opts = common::options(srv, &ours, &path);
        opts.target.charset = g.charset.clone();
        opts.threads = rng.gen_range(1..=4);
        opts.batch_bytes = [200, 2000, 4 << 20][rng.gen_range(0..3)];
        if g.failing {
            forced += 1;
            // As the client's --force: refused statements are set aside.
            opts.continue_on_error = true;
            opts.quarantine = Some(dir.path().join(format!("gen-{seed}.quarantine.sql")));
        }
        let how = rng.gen_range(0..10);
        // How this run went, for the failure message.
        let mut run = format!(
            "{charset}, {} threads, batches of {} bytes",
            opts.threads, opts.batch_bytes
        );
        let result = if how < 2 {
            // Killed, then resumed: at a random moment, or once the
            // journal has passed a random byte of the file (a point a
            // replay of the seed meets again).
            killed += 1;
            let outcome = if rng.gen_bool(0.5) {
                let after = Duration::from_millis(rng.gen_range(5..120));
                run.push_str(&format!(", killed after {after:?}"));
                common::load_killed_after(opts.clone(), after)
            } else {
                let at = rng.gen_range(0..g.text.len() as u64);
                run.push_str(&format!(", killed once the journal passed byte {at}"));
                common::load_killed_when(opts.clone(), || common::journaled_up_to(srv, &path) > at)
            };
            match outcome {
                Some(done) => {
                    run.push_str(" (it had ended)");
                    done
                }
                None => common::resume(opts.clone()),
            }
        } else if how < 3 {
            // Twice at once: the second is a --resume; it must be refused
            // while the first runs, or find the load done.
            concurrent += 1;
            run.push_str(", run twice at once");
            let mut second = opts.clone();
            second.resume = true;
            let a = std::thread::spawn(move || common::load(opts));
            let b = common::load(second);
            let a = a.join().expect("join");
            match (&a, &b) {
                (Ok(_), Err(LoadError::Running { .. })) | (Ok(_), Ok(_)) => a,
                (Err(LoadError::Running { .. }), Ok(_)) => b,
                _ => {
                    failures.push(format!(
                        "seed {seed}: two loads at once: first {a:?}, second {b:?}"
                    ));
                    continue;
                }
            }
        } else {
            common::load(opts)
        };
        match result {
            Ok(_) => {
                compared += 1;
                // After a kill, too: the AUTO_INCREMENT counters a rolled-back
                // batch moved are set back on resume, so all must match.
                let want = common::fingerprint(srv, &stock);
                let got = common::fingerprint(srv, &ours);
                if let Some(d) = common::first_difference(&want, &got) {
                    failures.push(format!(
                        "seed {seed} (dump={}, stateful={}, nontx={}; {run}): {d}",
                        g.dump, g.stateful, g.nontx
                    ));
                }
            }
            // A resume of a file that depends on connection state is
            // refused, clearly, with --restart as the way on.
            Err(LoadError::Changed { what, .. })
                if g.stateful && how < 2 && what.contains("--restart") =>
            {
                refused += 1;
            }
            // A non-transactional table with triggers that had a batch in
            // flight when killed: its triggers' writes cannot be undone.
            Err(LoadError::Setup { what }) if how < 2 && what.contains("has triggers") => {
                refused += 1;
            }
            Err(e) => failures.push(format!(
                "seed {seed} (dump={}, stateful={}; {run}): {e}",
                g.dump, g.stateful
            )),
        }
    }
    common::report(
        ("differential", "the stock client"),
        dir.path(),
        "sqlfleet-differential",
        |seed| format!("gen-{seed}.sql"),
        &failures,
        (files, compared),
        format!("{files} files from seed {first}: {compared} compared, {refused} clear refusals, {killed} killed and resumed, {concurrent} run twice at once, {forced} with refused statements (--force / --continue-on-error); per set: {per_set:?}"),
    );
}
