//! The fault layer's harness: run sqlfleet's work in a child process,
//! kill -9 / SIGSTOP it at a named failpoint (armed through
//! `SQLFLEET_FAILPOINTS`, see the `sqlfleet-faults` crate) or at a seeded
//! random instant, and check afterwards what was promised.
//!
//! - [`Child`]: the current test binary run again as the child, entering
//!   one `#[ignore]`d test that does the work (a test binary has no other
//!   entry point, and a fault must not kill the test that checks it).
//! - [`plan`]: a seeded fault schedule, pure, so a failing campaign
//!   prints its seed and the same seed replays the same faults.
//! - [`Ledger`]: what clients were told (acknowledged writes) against what
//!   is there: every acknowledged write present exactly once.
//! - [`Campaign`]: counts faults and violations and says how to replay.

use std::fmt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

/// The seed of a campaign: `SQLFLEET_FAULT_SEED`, else `default` (CI runs
/// a fixed slice; bench/faults.sh passes new seeds).
pub fn seed(default: u64) -> u64 {
    std::env::var("SQLFLEET_FAULT_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// How many faults a campaign injects: `SQLFLEET_FAULT_ROUNDS`, else
/// `default`.
pub fn rounds(default: usize) -> usize {
    std::env::var("SQLFLEET_FAULT_ROUNDS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// One fault of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The child kills itself (SIGKILL) on the `hit`th pass of `point`;
    /// if it has not after `deadline`, the harness kills it there.
    KillAt {
        point: String,
        hit: u32,
        /// The kill lands this long after the hit, while the code goes
        /// on (zero: at the point itself).
        later: Duration,
        deadline: Duration,
    },
    /// The harness sends SIGKILL after `after`.
    KillAfter { after: Duration },
}

impl Fault {
    /// The `SQLFLEET_FAILPOINTS` value arming this fault in the child.
    pub fn failpoints(&self) -> String {
        match self {
            Fault::KillAt {
                point, hit, later, ..
            } if !later.is_zero() => format!("{point}=kill@{hit}+{}ms", later.as_millis()),
            Fault::KillAt { point, hit, .. } => format!("{point}=kill@{hit}"),
            Fault::KillAfter { .. } => String::new(),
        }
    }

    /// When the harness kills the child itself.
    pub fn deadline(&self) -> Duration {
        match self {
            Fault::KillAt { deadline, .. } => *deadline,
            Fault::KillAfter { after } => *after,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::KillAt {
                point,
                hit,
                later,
                deadline,
            } => write!(
                f,
                "kill -9 at {point} hit {hit}{} (else at {} ms)",
                if later.is_zero() {
                    String::new()
                } else {
                    format!(" + {} ms", later.as_millis())
                },
                deadline.as_millis()
            ),
            Fault::KillAfter { after } => write!(f, "kill -9 after {} ms", after.as_millis()),
        }
    }
}

/// A seeded schedule of `n` faults: every `points` entry in turn (so each
/// named boundary is hit), every third one at a random instant in
/// `window` instead; hits drawn from 1..=`max_hit`, and every other kill
/// at a point lands 1-20 ms after it (while the next query is in flight).
/// Pure: the same arguments give the same schedule.
pub fn plan(
    seed: u64,
    n: usize,
    points: &[&str],
    max_hit: u32,
    window: (Duration, Duration),
) -> Vec<Fault> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (lo, hi) = (window.0.as_millis() as u64, window.1.as_millis() as u64);
    let at = |rng: &mut rand::rngs::StdRng| {
        Duration::from_millis(if hi > lo { rng.gen_range(lo..=hi) } else { lo })
    };
    let mut out = Vec::with_capacity(n);
    let mut next_point = 0;
    for i in 0..n {
        if points.is_empty() || i % 3 == 2 {
            out.push(Fault::KillAfter {
                after: at(&mut rng),
            });
        } else {
            let point = points[next_point % points.len()].to_string();
            next_point += 1;
            let later = if next_point % 2 == 0 {
                Duration::from_millis(rng.gen_range(1..=20))
            } else {
                Duration::ZERO
            };
            out.push(Fault::KillAt {
                point,
                hit: rng.gen_range(1..=max_hit.max(1)),
                later,
                deadline: at(&mut rng) + window.1,
            });
        }
    }
    out
}

/// The current test binary run again, entering the `#[ignore]`d test
/// `entry`, with `env` set (and `SQLFLEET_FAILPOINTS` when given). Its
/// output goes to `log`.
pub struct Child {
    child: std::process::Child,
    started: Instant,
}

impl Child {
    pub fn spawn(entry: &str, env: &[(&str, String)], failpoints: &str, log: &Path) -> Child {
        let exe = std::env::current_exe().expect("the test binary's path");
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("child log {}: {e}", log.display()));
        let err = out.try_clone().expect("child log");
        let mut cmd = Command::new(exe);
        cmd.args([
            entry,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RUST_BACKTRACE", "1")
        .env_remove("SQLFLEET_FAILPOINTS")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
        for (k, v) in env {
            cmd.env(k, v);
        }
        if !failpoints.is_empty() {
            cmd.env("SQLFLEET_FAILPOINTS", failpoints);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning the child {entry}: {e}"));
        Child {
            child,
            started: Instant::now(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` (SIGKILL, SIGSTOP, SIGCONT, SIGTERM).
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid, which we have not reaped.
        unsafe {
            libc::kill(self.pid(), signal);
        }
    }

    /// Its exit status if it has ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until it ends by itself or `deadline` (from its start)
    /// passes, when it is killed; the status and whether we killed it.
    pub fn wait_or_kill(&mut self, deadline: Duration) -> (ExitStatus, bool) {
        loop {
            if let Some(st) = self.try_wait() {
                return (st, false);
            }
            if self.started.elapsed() >= deadline {
                self.signal(libc::SIGKILL);
                let st = self.child.wait().expect("reaping the child");
                return (st, true);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for it to end by itself within `limit`; panics naming the
    /// log otherwise.
    pub fn wait(&mut self, limit: Duration, log: &Path) -> ExitStatus {
        let (st, killed) = self.wait_or_kill(limit);
        assert!(
            !killed,
            "the child did not finish within {limit:?}; its log: {}",
            log.display()
        );
        st
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.try_wait().is_none() {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// True when `st` is a death by SIGKILL.
pub fn killed(st: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    st.signal() == Some(libc::SIGKILL)
}

/// What clients were told, against what is there.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    acknowledged: Vec<String>,
}

/// A broken promise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Acknowledged, and not there.
    Lost(String),
    /// There more than once.
    Duplicated(String, usize),
    /// There and never written by anyone (a state that never existed).
    Invented(String),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Lost(k) => write!(f, "acknowledged write {k} is missing"),
            Violation::Duplicated(k, n) => write!(f, "write {k} is present {n} times"),
            Violation::Invented(k) => write!(f, "{k} is present and was never written"),
        }
    }
}

impl Ledger {
    /// Records that a client was told `key` was written.
    pub fn acknowledge(&mut self, key: impl Into<String>) {
        self.acknowledged.push(key.into());
    }

    pub fn len(&self) -> usize {
        self.acknowledged.len()
    }

    pub fn is_empty(&self) -> bool {
        self.acknowledged.is_empty()
    }

    /// Checks `present` (every key found, duplicates included) against
    /// the acknowledged writes; `attempted` are writes whose outcome the
    /// client never learnt (they may or may not be there, once at most).
    pub fn check(&self, present: &[String], attempted: &[String]) -> Vec<Violation> {
        use std::collections::BTreeMap;
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for k in present {
            *count.entry(k.as_str()).or_default() += 1;
        }
        let mut out = Vec::new();
        for k in &self.acknowledged {
            if !count.contains_key(k.as_str()) {
                out.push(Violation::Lost(k.clone()));
            }
        }
        for (k, n) in &count {
            let known =
                self.acknowledged.iter().any(|a| a == k) || attempted.iter().any(|a| a == k);
            if !known {
                out.push(Violation::Invented(k.to_string()));
            } else if *n > 1 {
                out.push(Violation::Duplicated(k.to_string(), *n));
            }
        }
        out
    }
}

/// A campaign's tally: faults injected, violations found, and the line
/// that replays it.
#[derive(Debug)]
pub struct Campaign {
    pub name: String,
    pub seed: u64,
    pub faults: Vec<String>,
    pub violations: Vec<String>,
}

impl Campaign {
    pub fn new(name: &str, seed: u64) -> Campaign {
        Campaign {
            name: name.to_string(),
            seed,
            faults: Vec::new(),
            violations: Vec::new(),
        }
    }

    /// Records an injected fault (as it happened).
    pub fn fault(&mut self, what: impl Into<String>) {
        let what = what.into();
        eprintln!("{}: fault {}: {what}", self.name, self.faults.len() + 1);
        self.faults.push(what);
    }

    /// How to run exactly this campaign again.
    pub fn replay(&self) -> String {
        format!(
            "SQLFLEET_FAULT_SEED={} SQLFLEET_FAULT_ROUNDS={} cargo test -- --exact {}",
            self.seed,
            self.faults.len(),
            self.name
        )
    }

    /// The one line a campaign prints, also what bench/faults.sh collects.
    pub fn summary(&self) -> String {
        format!(
            "faults-survived: campaign={} seed={} faults={} violations={}",
            self.name,
            self.seed,
            self.faults.len(),
            self.violations.len()
        )
    }

    /// Panics with the seed, the schedule and the replay line when any
    /// invariant broke.
    pub fn assert_clean(&self) {
        println!("{}", self.summary());
        if !self.violations.is_empty() {
            panic!(
                "{}: {} violation(s):\n  {}\nschedule (seed {}):\n  {}\nreplay: {}",
                self.name,
                self.violations.len(),
                self.violations.join("\n  "),
                self.seed,
                self.faults.join("\n  "),
                self.replay()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule_and_every_point_is_visited() {
        let pts = ["a", "b", "c"];
        let w = (Duration::from_millis(100), Duration::from_millis(900));
        let one = plan(7, 12, &pts, 5, w);
        assert_eq!(one, plan(7, 12, &pts, 5, w), "same seed, same faults");
        assert_ne!(one, plan(8, 12, &pts, 5, w), "another seed, other faults");
        for p in pts {
            assert!(
                one.iter()
                    .any(|f| matches!(f, Fault::KillAt { point, .. } if point == p)),
                "{p} is never a fault point: {one:?}"
            );
        }
        assert_eq!(
            one.iter()
                .filter(|f| matches!(f, Fault::KillAfter { .. }))
                .count(),
            4,
            "every third fault lands at a random instant"
        );
        assert!(
            one.iter()
                .any(|f| matches!(f, Fault::KillAt { later, .. } if !later.is_zero())),
            "some kills land while the next query is in flight"
        );
        for f in &one {
            match f {
                Fault::KillAt {
                    hit,
                    deadline,
                    later,
                    ..
                } => {
                    assert!((1..=5).contains(hit));
                    assert!(*deadline > w.1);
                    let fp = f.failpoints();
                    if later.is_zero() {
                        assert!(fp.ends_with(&format!("=kill@{hit}")), "{fp}");
                    } else {
                        assert!(later.as_millis() <= 20);
                        assert!(
                            fp.ends_with(&format!("=kill@{hit}+{}ms", later.as_millis())),
                            "{fp}"
                        );
                    }
                }
                Fault::KillAfter { after } => {
                    assert!(*after >= w.0 && *after <= w.1);
                    assert_eq!(f.failpoints(), "");
                }
            }
        }
    }

    #[test]
    fn the_ledger_finds_lost_duplicated_and_invented_writes() {
        let mut l = Ledger::default();
        for k in ["a", "b", "c"] {
            l.acknowledge(k);
        }
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let table: &[(&[&str], &[&str], Vec<Violation>)] = &[
            (&["a", "b", "c"], &[], vec![]),
            (&["a", "b", "c", "d"], &["d"], vec![]),
            (&["a", "c"], &[], vec![Violation::Lost("b".into())]),
            (
                &["a", "b", "b", "c"],
                &[],
                vec![Violation::Duplicated("b".into(), 2)],
            ),
            (
                &["a", "b", "c", "d", "d"],
                &["d"],
                vec![Violation::Duplicated("d".into(), 2)],
            ),
            (
                &["a", "b", "c", "z"],
                &[],
                vec![Violation::Invented("z".into())],
            ),
        ];
        for (present, attempted, want) in table {
            assert_eq!(&l.check(&s(present), &s(attempted)), want, "{present:?}");
        }
    }

    #[test]
    fn a_failing_campaign_names_its_seed_schedule_and_replay() {
        let mut c = Campaign::new("kill9_campaign", 42);
        c.fault("kill -9 at x hit 2");
        c.violations.push("row 7 differs".into());
        let r = std::panic::catch_unwind(|| c.assert_clean());
        let msg = r
            .err()
            .and_then(|e| e.downcast_ref::<String>().cloned())
            .expect("a failing campaign panics with a message");
        for want in [
            "seed 42",
            "kill -9 at x hit 2",
            "row 7 differs",
            "SQLFLEET_FAULT_SEED=42",
        ] {
            assert!(msg.contains(want), "{want} missing from: {msg}");
        }
    }
}
