//! Named failpoints: the instants where what is durable (a commit, a
//! journal row, a position) and what a process holds in memory can part.
//! A test kills, stops or delays sqlfleet exactly there, then checks what
//! was promised (see the testkit's `faults` module for the harness).
//!
//! [`point!`] marks one; it is the `fail` crate's `fail_point!`, so it
//! costs nothing and leaves no name in the binary unless this crate's
//! `failpoints` feature is on (only test builds turn it on; CI checks
//! that a release build's features leave it off).
//!
//! A process arms its points from `SQLFLEET_FAILPOINTS` at start
//! ([`arm_from_env`]): `;`-separated `name=action`, where action is
//! - `kill@N`: SIGKILL itself on the point's Nth hit (as `kill -9` from
//!   outside would, but at exactly that instant);
//! - `kill@N+Dms`: SIGKILL itself D milliseconds after the Nth hit, from
//!   another thread, while the code goes on past the point (a kill that
//!   lands while the query after the point is in flight on the server);
//! - `stop@N`: SIGSTOP itself on the Nth hit (a stalled process; whoever
//!   holds its pid sends SIGCONT);
//! - `int@N`, `term@N` (and `+Dms`): SIGINT or SIGTERM itself on the Nth
//!   hit (Ctrl-C, or a service manager's stop, at exactly that instant);
//! - anything else is the `fail` crate's own action grammar (`sleep(100)`,
//!   `3*off->panic`, `pause`, ...).
//!
//! The grammar is parsed by [`parse`], a pure function with its own tests.

pub use fail;

/// Marks a named failpoint (see the crate doc).
#[macro_export]
macro_rules! point {
    ($name:expr) => {
        $crate::fail::fail_point!($name)
    };
}

/// Marks a named failpoint reached on behalf of one `scope` (a source's
/// name): armed as `name` it acts for every scope, armed as
/// `name@scope` only for that one — a test in a process where other
/// tests' runs reach the same point arms it for its own run alone.
#[macro_export]
macro_rules! point_of {
    ($name:expr, $scope:expr) => {{
        $crate::fail::fail_point!($name);
        $crate::fail::fail_point!(&format!("{}@{}", $name, $scope));
    }};
}

/// The environment variable a process reads its armed points from.
pub const ENV: &str = "SQLFLEET_FAILPOINTS";

/// What an armed point does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL this process on the `n`th hit (1-based).
    Kill(u32),
    /// SIGKILL this process this long after the `n`th hit.
    KillLater(u32, std::time::Duration),
    /// SIGSTOP this process on the `n`th hit.
    Stop(u32),
    /// Send this signal (SIGINT, SIGTERM) to this process on the `n`th
    /// hit, or this long after it.
    Signal(libc::c_int, u32, Option<std::time::Duration>),
    /// A `fail` crate action, as written.
    Fail(String),
}

/// One armed point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Armed {
    pub name: String,
    pub action: Action,
}

/// Why failpoints could not be armed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    /// An entry of the spec that cannot be read, and why.
    #[error("failpoint '{entry}': {why}")]
    Spec { entry: String, why: &'static str },
    /// Failpoints asked of a build without them.
    #[error(
        "{ENV} is set, but this build has no failpoints (build with the `failpoints` feature)"
    )]
    NotBuilt,
    /// The failpoint library refused an action.
    #[error("failpoint '{name}': {why}")]
    Refused { name: String, why: String },
}

/// Parses `name=action;name=action`; an entry it cannot read is an error
/// naming it (a typo must not leave a test running with no fault).
pub fn parse(spec: &str) -> Result<Vec<Armed>, FaultError> {
    let mut out = Vec::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = |why| FaultError::Spec {
            entry: entry.to_string(),
            why,
        };
        let (name, action) = entry
            .split_once('=')
            .ok_or_else(|| bad("expected name=action"))?;
        let (name, action) = (name.trim(), action.trim());
        if name.is_empty() || action.is_empty() {
            return Err(bad("expected name=action"));
        }
        let nth = |rest: &str| -> Result<u32, FaultError> {
            match rest.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(bad("the hit after '@' is a number from 1")),
            }
        };
        // `N` or `N+Dms`.
        let when = |rest: &str| -> Result<(u32, Option<std::time::Duration>), FaultError> {
            match rest.split_once('+') {
                Some((n, later)) => {
                    let ms = later
                        .strip_suffix("ms")
                        .and_then(|m| m.parse::<u64>().ok())
                        .ok_or_else(|| bad("the delay after '+' is like 5ms"))?;
                    Ok((nth(n)?, Some(std::time::Duration::from_millis(ms))))
                }
                None => Ok((nth(rest)?, None)),
            }
        };
        let signal = [("int@", libc::SIGINT), ("term@", libc::SIGTERM)]
            .iter()
            .find_map(|(p, sig)| action.strip_prefix(p).map(|rest| (*sig, rest)));
        let action = if let Some(rest) = action.strip_prefix("kill@") {
            match when(rest)? {
                (n, Some(d)) => Action::KillLater(n, d),
                (n, None) => Action::Kill(n),
            }
        } else if let Some((sig, rest)) = signal {
            let (n, later) = when(rest)?;
            Action::Signal(sig, n, later)
        } else if let Some(rest) = action.strip_prefix("stop@") {
            Action::Stop(nth(rest)?)
        } else if action == "kill" {
            Action::Kill(1)
        } else if action == "stop" {
            Action::Stop(1)
        } else {
            Action::Fail(action.to_string())
        };
        out.push(Armed {
            name: name.to_string(),
            action,
        });
    }
    Ok(out)
}

/// True when this build has failpoints compiled in.
pub const fn enabled() -> bool {
    cfg!(feature = "failpoints")
}

/// Arms the points `SQLFLEET_FAILPOINTS` names; returns how many. In a
/// build without failpoints, a set variable is an error (the fault would
/// silently not happen).
pub fn arm_from_env() -> Result<usize, FaultError> {
    match std::env::var(ENV) {
        Ok(spec) if !spec.trim().is_empty() => arm(&parse(&spec)?),
        _ => Ok(0),
    }
}

/// Arms `points` in this process.
pub fn arm(points: &[Armed]) -> Result<usize, FaultError> {
    if !enabled() {
        return Err(FaultError::NotBuilt);
    }
    for p in points {
        match &p.action {
            Action::Kill(n) => on_hit(&p.name, *n, libc::SIGKILL, None)?,
            Action::KillLater(n, d) => on_hit(&p.name, *n, libc::SIGKILL, Some(*d))?,
            Action::Stop(n) => on_hit(&p.name, *n, libc::SIGSTOP, None)?,
            Action::Signal(sig, n, later) => on_hit(&p.name, *n, *sig, *later)?,
            Action::Fail(a) => fail::cfg(p.name.clone(), a).map_err(|why| FaultError::Refused {
                name: p.name.clone(),
                why,
            })?,
        }
    }
    Ok(points.len())
}

fn on_hit(
    name: &str,
    nth: u32,
    signal: libc::c_int,
    later: Option<std::time::Duration>,
) -> Result<(), FaultError> {
    let hits = std::sync::atomic::AtomicU32::new(0);
    let name_owned = name.to_string();
    fail::cfg_callback(name.to_string(), move || {
        let n = hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if n != nth {
            return;
        }
        eprintln!("sqlfleet: failpoint {name_owned}: hit {n}, signal {signal} after {later:?}");
        let send = move || {
            // SAFETY: kill(2) on our own pid with a valid signal number.
            unsafe {
                libc::kill(libc::getpid(), signal);
            }
        };
        match later {
            None => send(),
            Some(d) => {
                std::thread::spawn(move || {
                    std::thread::sleep(d);
                    send();
                });
            }
        }
    })
    .map_err(|why| FaultError::Refused {
        name: name.to_string(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_grammar() {
        type Want<'a> = Result<Vec<(&'a str, Action)>, &'a str>;
        let table: &[(&str, Want)] = &[
            ("", Ok(vec![])),
            ("a::b=kill@3", Ok(vec![("a::b", Action::Kill(3))])),
            ("a=kill", Ok(vec![("a", Action::Kill(1))])),
            (
                "a=int@2",
                Ok(vec![("a", Action::Signal(libc::SIGINT, 2, None))]),
            ),
            (
                "a=term@1+5ms",
                Ok(vec![(
                    "a",
                    Action::Signal(libc::SIGTERM, 1, Some(std::time::Duration::from_millis(5))),
                )]),
            ),
            ("a=int@0", Err("a number from 1")),
            ("a=term@1+5", Err("like 5ms")),
            (
                "a=kill@2+15ms",
                Ok(vec![(
                    "a",
                    Action::KillLater(2, std::time::Duration::from_millis(15)),
                )]),
            ),
            ("a=kill@2+15", Err("like 5ms")),
            ("a=kill@0+1ms", Err("a number from 1")),
            (
                " a = stop@2 ; b=sleep(10) ;",
                Ok(vec![
                    ("a", Action::Stop(2)),
                    ("b", Action::Fail("sleep(10)".into())),
                ]),
            ),
            ("a=kill@0", Err("a number from 1")),
            ("a=kill@x", Err("a number from 1")),
            ("a", Err("expected name=action")),
            ("=kill", Err("expected name=action")),
            ("a=", Err("expected name=action")),
        ];
        for (spec, want) in table {
            let got = parse(spec);
            match (want, got) {
                (Ok(w), Ok(g)) => {
                    let g: Vec<(&str, Action)> = g
                        .iter()
                        .map(|a| (a.name.as_str(), a.action.clone()))
                        .collect();
                    assert_eq!(&g, w, "{spec}");
                }
                (Err(w), Err(g)) => assert!(g.to_string().contains(w), "{spec}: {g}"),
                (w, g) => panic!("{spec}: wanted {w:?}, got {g:?}"),
            }
        }
    }

    #[test]
    fn a_build_without_failpoints_refuses_to_arm_rather_than_run_without_the_fault() {
        let r = arm(&parse("x=kill@1").expect("spec"));
        if enabled() {
            assert_eq!(r, Ok(1));
            fail::remove("x");
        } else {
            assert!(r.is_err(), "{r:?}");
        }
    }

    /// Every point the sources place is named in ARCHITECTURE.md's list
    /// (`prefix::{a, b}`), so a test author finds it there: three points
    /// added with their tests were missing from it.
    #[test]
    fn every_point_placed_is_named_in_the_architecture() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("doc");
        let listed = |name: &str| {
            let Some((prefix, point)) = name.split_once("::") else {
                return false;
            };
            doc.match_indices(&format!("{prefix}::{{")).any(|(at, m)| {
                doc[at + m.len()..].split('}').next().is_some_and(|group| {
                    group
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|w| w == point)
                })
            })
        };
        let mut placed = Vec::new();
        let mut dirs = vec![root.join("crates")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("dir").flatten() {
                let p = e.path();
                if p.is_dir() && !p.ends_with("target") {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    for part in text.split("point!(\"").skip(1) {
                        if let Some(name) = part.split('"').next() {
                            placed.push(name.to_string());
                        }
                    }
                }
            }
        }
        placed.sort();
        placed.dedup();
        assert!(placed.len() >= 30, "too few points found: {placed:?}");
        let missing: Vec<&String> = placed.iter().filter(|n| !listed(n)).collect();
        assert!(missing.is_empty(), "not in ARCHITECTURE.md: {missing:?}");
    }
}
