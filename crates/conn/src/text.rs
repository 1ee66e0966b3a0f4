//! Text in messages: counted nouns ("1 host", "2 hosts", "1 process",
//! "3 processes", never "1 hosts" or "backend(s)"), UTC dates, and a
//! caught panic's own words.

/// `n` and the noun, singular or plural (regular English plurals: `-es`
/// after s, x, ch, sh; `-s` otherwise).
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        return format!("1 {noun}");
    }
    let es = ["s", "x", "ch", "sh"].iter().any(|e| noun.ends_with(e));
    format!("{n} {noun}{}", if es { "es" } else { "s" })
}

/// What every error that a caught panic became says of it, in brackets
/// after "an internal error".
pub const A_BUG: &str = "a bug in sqlfleet: please report it with this line";

/// The words a caught panic carries (`panic!` with a literal or a
/// formatted message), for the error that stops the work it hit.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// A task's end that was not its own: the panic's words, or why the
/// runtime ended it.
pub fn join_message(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => panic_message(p.as_ref()),
        Err(e) => e.to_string(),
    }
}

/// `2026-11-23T07:20:01.250Z` (ISO 8601, UTC, milliseconds) for seconds
/// since the Unix epoch: the one format watch's pages, JSON and messages
/// use.
pub fn iso_utc(secs: f64) -> String {
    let ms = (secs.max(0.0) * 1000.0).round() as u64;
    let (y, mo, d) = civil(ms / 1000 / 86_400);
    let rem = ms / 1000 % 86_400;
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

/// Year, month and day of a day count since 1970-01-01 (the civil
/// calendar, as in Howard Hinnant's date algorithms).
fn civil(days: u64) -> (i64, i64, i64) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `2026-11-23 07:20:01 UTC` for seconds since the Unix epoch.
pub fn utc_date(secs: u64) -> String {
    let (y, m, d) = civil(secs / 86_400);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::{count, iso_utc, utc_date};

    #[test]
    fn agreement() {
        assert_eq!(count(1u32, "host"), "1 host");
        assert_eq!(count(0u32, "host"), "0 hosts");
        assert_eq!(count(3u32, "process"), "3 processes");
        assert_eq!(count(1u32, "process"), "1 process");
        assert_eq!(count(2u32, "table"), "2 tables");
    }

    #[test]
    fn dates_in_utc() {
        assert_eq!(iso_utc(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_utc(951_782_400.25), "2000-02-29T00:00:00.250Z");
        assert_eq!(iso_utc(1_795_418_401.0), "2026-11-23T07:20:01.000Z");
        assert_eq!(utc_date(1_795_418_401), "2026-11-23 07:20:01 UTC");
        assert_eq!(iso_utc(-5.0), "1970-01-01T00:00:00.000Z");
    }
}
