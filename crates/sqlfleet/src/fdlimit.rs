//! Open-file limit for commands that hold many sockets at once (the relay:
//! two per active client; watch: one kept connection per server, plus an
//! SSH pipe per host with host metrics). The soft limit is often 1,024
//! while the hard limit is far higher: lift the soft one to the hard one,
//! and say so when even that is too few for the work asked.

/// Lifts the soft RLIMIT_NOFILE to the hard limit; returns the limit now
/// in force (`None` when it cannot be read).
pub fn raise() -> Option<u64> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return None;
        }
        if l.rlim_cur < l.rlim_max {
            let want = libc::rlimit {
                rlim_cur: l.rlim_max,
                rlim_max: l.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return Some(want.rlim_cur);
            }
        }
    }
    Some(l.rlim_cur)
}

/// Raises the limit and returns a warning when `needed` descriptors do
/// not fit under it (with the way to raise it).
pub fn ensure(needed: u64, what: &str) -> Option<String> {
    let limit = raise()?;
    (needed > limit).then(|| {
        format!(
            "{what} needs about {needed} open files but this process may open {limit} \
             (ulimit -n; raise the hard limit, e.g. LimitNOFILE= in a systemd unit): \
             connections beyond it will fail with 'Too many open files'"
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        let got = super::raise().expect("getrlimit");
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: reads into the struct passed.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) }, 0);
        assert_eq!(l.rlim_cur, l.rlim_max);
        assert_eq!(got, l.rlim_cur);
        assert!(super::ensure(u64::MAX, "this").is_some_and(|w| w.contains("Too many open files")));
        assert!(super::ensure(3, "this").is_none());
    }
}
