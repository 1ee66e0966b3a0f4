//! What gets a stopped stream going again, named with the stop: a
//! transaction replicate refuses to apply (it crosses the filters, its
//! databases cannot be read for certain, a rename would merge two
//! databases) meets the same refusal on every retry, so only `replicate
//! skip` passes it; an error the target returned can be fixed there and
//! retried; a stream that waits for another moves when that one does.
//! Pure: the stop sites say which kind, this says the command.

use crate::gtid::Gtid;

/// Why a stream stopped, as far as resuming goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Replicate will not apply this transaction as it is.
    Refused,
    /// The target returned an error (or refused a table's engine).
    Target,
    /// It waits for this stream (or, for `*`, the whole source).
    Waits(String),
    /// It may be on the target in part or whole: only the operator can
    /// look and say which.
    Unsure,
}

/// The way on for a stream of `source` stopped at `gtid`.
pub fn way_on(stop: &Stop, source: &str, gtid: &Gtid) -> String {
    match stop {
        Stop::Refused => format!(
            "`replicate retry` meets the same refusal: pass over it with `sqlfleet replicate skip --config FILE --source {source} --gtid {gtid}` (after making its change on the target by hand if it matters), or change the source's filters and restart"
        ),
        Stop::Target => format!(
            "fix it on the target, then `sqlfleet replicate retry --config FILE --source {source}`; or pass over it with `sqlfleet replicate skip --config FILE --source {source} --gtid {gtid}`"
        ),
        Stop::Unsure => format!(
            "look on the target: if none of it is there, `sqlfleet replicate retry --config FILE --source {source}` applies it; if all of it is (it writes only such tables), pass over it with `sqlfleet replicate skip --config FILE --source {source} --gtid {gtid}`; otherwise undo what is there, then retry"
        ),
        Stop::Waits(stream) if stream == "*" => {
            "resumes when the source's stop is resolved (see its other streams)".to_string()
        }
        Stop::Waits(stream) => format!("resumes when stream '{stream}' does"),
    }
}

/// A stop reason with its way on.
pub fn reason(why: &str, stop: &Stop, source: &str, gtid: &Gtid) -> String {
    format!("{why} — {}", way_on(stop, source, gtid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stop_names_the_command_that_actually_resumes_it() {
        let g = Gtid {
            domain: 3,
            server: 13,
            seq: 2095,
        };
        // (stop, must contain, must not contain)
        let table: &[(Stop, &[&str], &[&str])] = &[
            (
                Stop::Refused,
                &[
                    "replicate skip --config FILE --source eu --gtid 3-13-2095",
                    "same refusal",
                ],
                &["fix it"],
            ),
            (
                Stop::Target,
                &[
                    "fix it on the target",
                    "replicate retry --config FILE --source eu",
                    "replicate skip --config FILE --source eu --gtid 3-13-2095",
                ],
                &[],
            ),
            (
                Stop::Unsure,
                &[
                    "look on the target",
                    "replicate skip --config FILE --source eu --gtid 3-13-2095",
                    "replicate retry --config FILE --source eu",
                    "undo what is there",
                ],
                &["fix it", "same refusal"],
            ),
            (
                Stop::Waits("app".into()),
                &["stream 'app'"],
                &["retry", "skip"],
            ),
            (
                Stop::Waits("*".into()),
                &["the source's stop"],
                &["retry", "skip"],
            ),
        ];
        for (stop, has, hasnt) in table {
            let w = way_on(stop, "eu", &g);
            for h in *has {
                assert!(w.contains(h), "{stop:?}: {h} missing from {w}");
            }
            for h in *hasnt {
                assert!(!w.contains(h), "{stop:?}: {h} in {w}");
            }
        }
        assert!(reason("boom", &Stop::Target, "eu", &g).starts_with("boom — fix it"));
    }
}
