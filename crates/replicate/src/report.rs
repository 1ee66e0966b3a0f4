//! What replicate says to people: the progress line, the run's summary
//! and `status` — each a text rendering of the values `--json` prints
//! ([`SourceView`], [`Summary`], [`SourceStatus`]), so the two never
//! disagree. A stopped stream is said loudly, with its first reason and
//! the way on; lag is Seconds_Behind_Master's: 0 when caught up.

use crate::run::Summary;
use crate::source::SourceView;
use crate::status::SourceStatus;

/// At most `n` characters of a message, on one line, printable: a
/// server's error quotes the statement's values (`Duplicate entry
/// '...'`), which a source's application wrote, and a terminal must show
/// an escape sequence in them, never obey it.
fn short(s: &str, n: usize) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let one = if one.chars().count() <= n {
        one
    } else {
        format!("{}...", one.chars().take(n).collect::<String>())
    };
    sqlfleet_dump::printable::printable(&one).into_owned()
}

/// Text for a terminal: every line printable (a stream is named after a
/// source's database, whose name may hold any character but NUL).
fn terminal(s: String) -> String {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return s;
    }
    s.split('\n')
        .map(|l| sqlfleet_dump::printable::printable(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line for all sources, every few seconds.
pub fn progress_line(views: &[SourceView]) -> String {
    terminal(progress_line_raw(views))
}

fn progress_line_raw(views: &[SourceView]) -> String {
    views
        .iter()
        .map(|v| {
            let mut stopped: Vec<(&String, &crate::source::StreamView)> = v
                .streams
                .iter()
                .filter(|(_, s)| s.error.is_some())
                .collect();
            stopped.sort_by(|a, b| a.1.error_gtid.cmp(&b.1.error_gtid));
            let lag = v.lag_seconds.map_or("?".to_string(), |l| format!("{l}s"));
            let mut head = format!(
                "{}: {}, applied {}, behind {}, lag {lag}",
                v.name,
                v.state,
                v.applied,
                v.behind()
            );
            if v.xa_held > 0 {
                head += &format!(", {} XA prepared on the source held", v.xa_held);
            }
            match stopped.first() {
                None => head,
                Some((stream, s)) => format!(
                    "{head}, STOPPED {} of {} streams: {stream} at {}: {}",
                    stopped.len(),
                    v.streams.len(),
                    s.error_gtid.as_deref().unwrap_or("?"),
                    short(s.error.as_deref().unwrap_or(""), 400),
                ),
            }
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The end of a run: totals, then every stopped stream on a line of its own.
pub fn summary_text(s: &Summary) -> String {
    terminal(summary_text_raw(s))
}

fn summary_text_raw(s: &Summary) -> String {
    let mut out =
        format!(
        "replicate: applied {} transactions from {} in {:.1}s ({:.0}/s); {} stopped; floors: {}\n",
        s.applied,
        sqlfleet_conn::text::count(s.sources.len() as u64, "source"),
        s.elapsed_seconds,
        s.transactions_per_second,
        sqlfleet_conn::text::count(s.stopped_streams as u64, "stream"),
        s.sources
            .iter()
            .map(|v| format!("{} {}", v.name, if v.floor.is_empty() { "-" } else { &v.floor }))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let p = &s.parallel;
    if p.chunks > 0 {
        out.push_str(&format!(
            "replicate: {} target transactions, {} of them run beside an earlier one of their stream; {} conflicts and {} yields run again in turn; {} rows statements applied inside another of their chunk\n",
            p.chunks, p.ahead, p.conflicts, p.yields, p.merged
        ));
    }
    if let Some(why) = &p.in_turn_after {
        out.push_str(&format!(
            "replicate: chunks of a stream ran in turn after {}\n",
            short(why, 600)
        ));
    }
    for v in s
        .sources
        .iter()
        .filter(|v| v.state == crate::source::GAVE_UP)
    {
        out.push_str(&format!(
            "replicate: GAVE UP: source {}: {}\n",
            v.name,
            short(v.last_error.as_deref().unwrap_or(""), 600)
        ));
    }
    for v in &s.sources {
        for (stream, x) in v.streams.iter().filter(|(_, x)| x.error.is_some()) {
            out.push_str(&format!(
                "replicate: STOPPED: source {} stream {} at {}: {}; statement: {}\n",
                v.name,
                stream,
                x.error_gtid.as_deref().unwrap_or("?"),
                short(x.error.as_deref().unwrap_or(""), 600),
                short(x.statement.as_deref().unwrap_or(""), 120),
            ));
        }
        if let Some(e) = v.last_error.as_ref().filter(|_| v.state == "stopped") {
            out.push_str(&format!(
                "replicate: source {} ended: {}\n",
                v.name,
                short(e, 300)
            ));
        }
    }
    out
}

/// `replicate status` as text: per source its floor, the source's
/// position, how far behind and the lag; per stream its state and
/// position, the error of a stopped one; the skips recorded.
pub fn status_text(st: &[SourceStatus]) -> String {
    terminal(status_text_raw(st))
}

fn status_text_raw(st: &[SourceStatus]) -> String {
    let mut out = String::new();
    for s in st {
        out.push_str(&format!(
            "source {}: floor {}, source at {}, behind {}, lag {}{}\n",
            s.source,
            if s.floor.is_empty() { "-" } else { &s.floor },
            match s.source_position.as_deref() {
                None => "?",
                Some("") => "- (no transaction yet)",
                Some(p) => p,
            },
            s.behind.map_or("?".into(), |b| b.to_string()),
            s.lag_seconds.map_or("?".into(), |l| format!("{l}s")),
            match (&s.source_error, &s.behind_the_floor) {
                (Some(e), _) => format!(" (unreachable: {})", short(e, 200)),
                (None, Some(why)) => format!(" (REFUSED: {})", short(why, 600)),
                (None, None) => String::new(),
            }
        ));
        for x in &s.streams {
            let state = if x.state == "ok" {
                "ok".to_string()
            } else {
                x.state.to_uppercase()
            };
            out.push_str(&format!(
                "  {:<24} {:<8} {}{}\n",
                x.stream,
                state,
                if x.position.is_empty() {
                    "-"
                } else {
                    &x.position
                },
                match (&x.error_gtid, &x.error) {
                    (Some(g), Some(e)) => format!(
                        "  at {g}: {}; statement: {}",
                        short(e, 300),
                        short(x.statement.as_deref().unwrap_or(""), 120)
                    ),
                    _ => String::new(),
                }
            ));
        }
        for g in &s.skipped {
            out.push_str(&format!("  skipped {g} (replicate skip)\n"));
        }
        for g in &s.retired {
            out.push_str(&format!(
                "  retired domain {} at {g} (deleted on the source; its new transactions are read as new)\n",
                g.split('-').next().unwrap_or("?")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::StreamView;
    use crate::status::StreamStatus;

    fn view(name: &str, stopped: bool, lag: Option<u64>) -> SourceView {
        let mut v = SourceView {
            name: name.into(),
            state: "running".into(),
            floor: "1-101-5".into(),
            source_pos: "1-101-7".into(),
            applied: 5,
            lag_seconds: lag,
            ..SourceView::default()
        };
        v.streams.insert(
            "app_eu".into(),
            StreamView {
                position: "1-101-5".into(),
                error: stopped.then(|| {
                    crate::resume::reason(
                        "ERROR 1146: Table 'app_eu.orders' doesn't exist",
                        &crate::resume::Stop::Target,
                        "eu",
                        &crate::gtid::Gtid {
                            domain: 1,
                            server: 101,
                            seq: 6,
                        },
                    )
                }),
                error_gtid: stopped.then(|| "1-101-6".into()),
                statement: stopped.then(|| "INSERT INTO orders VALUES (1)".into()),
                ..StreamView::default()
            },
        );
        v
    }

    #[test]
    fn a_database_named_with_an_escape_sequence_is_shown_not_obeyed() {
        let mut v = view("eu", true, Some(3));
        let x = v.streams.remove("app_eu").expect("stream");
        v.streams.insert("app\x1b[2J".into(), x);
        let text = progress_line(std::slice::from_ref(&v));
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(text.contains("app\\x1b[2J"), "{text}");
    }

    #[test]
    fn a_servers_message_is_one_printable_line() {
        assert_eq!(short("a\n b\tc", 10), "a b c");
        assert_eq!(
            short("Duplicate entry '\x1b]0;x\x07' for key", 100),
            "Duplicate entry '\\x1b]0;x\\x07' for key"
        );
        assert_eq!(short("abcdef", 3), "abc...");
    }

    #[test]
    fn progress_says_stopped_loudly_with_the_reason_and_the_way_on() {
        // (stopped, lag, what the line must say, what it must not)
        type Row<'a> = (bool, Option<u64>, &'a [&'a str], &'a [&'a str]);
        let rows: &[Row] = &[
            (
                false,
                Some(0),
                &["eu: running, applied 5, behind 2, lag 0s"],
                &["STOPPED"],
            ),
            (
                true,
                Some(12),
                &[
                    "lag 12s",
                    "STOPPED 1 of 1 streams: app_eu at 1-101-6: ERROR 1146",
                    "replicate retry --config FILE --source eu",
                ],
                &[],
            ),
            (false, None, &["lag ?"], &["STOPPED"]),
        ];
        for (stopped, lag, has, hasnt) in rows {
            let line = progress_line(&[view("eu", *stopped, *lag)]);
            for h in *has {
                assert!(line.contains(h), "{line} lacks {h}");
            }
            for h in *hasnt {
                assert!(!line.contains(h), "{line} has {h}");
            }
        }
    }

    #[test]
    fn the_summary_lists_every_stopped_stream() {
        let s = Summary {
            elapsed_seconds: 2.0,
            applied: 5,
            transactions_per_second: 2.5,
            stopped_streams: 1,
            given_up_sources: 0,
            parallel: crate::lanes::Parallel {
                chunks: 3,
                ahead: 2,
                conflicts: 1,
                yields: 1,
                merged: 4,
                in_turn_after: Some("the stall watcher stopped at an internal error".into()),
            },
            warnings: Vec::new(),
            sources: vec![view("eu", true, Some(3)), view("us", false, Some(0))],
        };
        let text = summary_text(&s);
        assert!(
            text.starts_with("replicate: applied 5 transactions from 2 sources"),
            "{text}"
        );
        assert!(
            text.contains(
                "3 target transactions, 2 of them run beside an earlier one of their stream; 1 conflicts and 1 yields run again in turn; 4 rows statements applied inside another of their chunk"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "chunks of a stream ran in turn after the stall watcher stopped at an internal error"
            ),
            "{text}"
        );
        let stopped: Vec<&str> = text.lines().filter(|l| l.contains("STOPPED")).collect();
        assert_eq!(stopped.len(), 1, "{text}");
        assert!(
            stopped[0].contains("source eu stream app_eu at 1-101-6"),
            "{text}"
        );
        assert!(
            stopped[0].contains("statement: INSERT INTO orders"),
            "{text}"
        );
    }

    #[test]
    fn status_text_renders_what_json_holds() {
        let st = SourceStatus {
            source: "eu".into(),
            floor: "1-101-5".into(),
            source_position: Some("1-101-7".into()),
            source_error: None,
            behind_the_floor: None,
            behind: Some(2),
            lag_seconds: Some(40),
            skipped: vec!["1-101-4".into()],
            retired: vec!["9-101-3".into()],
            streams: vec![StreamStatus {
                stream: "app_eu".into(),
                position: "1-101-5".into(),
                applied_at: String::new(),
                state: "stopped".into(),
                error: Some("ERROR 1146: no table".into()),
                error_gtid: Some("1-101-6".into()),
                statement: Some("INSERT".into()),
            }],
        };
        let text = status_text(std::slice::from_ref(&st));
        let json = serde_json::to_value(&st).expect("json");
        // Every figure of the JSON is in the text.
        for key in ["floor", "source_position"] {
            assert!(
                text.contains(json[key].as_str().expect("str")),
                "{key}: {text}"
            );
        }
        assert!(text.contains("behind 2, lag 40s"), "{text}");
        assert!(
            text.contains("STOPPED") && text.contains("at 1-101-6: ERROR 1146"),
            "{text}"
        );
        assert!(text.contains("skipped 1-101-4"), "{text}");
        assert!(text.contains("retired domain 9 at 9-101-3"), "{text}");
        // A source that has logged nothing yet is said so, not left blank.
        let fresh = SourceStatus {
            source_position: Some(String::new()),
            ..st
        };
        let text = status_text(std::slice::from_ref(&fresh));
        assert!(text.contains("source at - (no transaction yet),"), "{text}");
    }
}
