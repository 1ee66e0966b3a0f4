//! Text in messages: counted nouns ("1 host", "2 hosts", "1 process",
//! "3 processes", never "1 hosts" or "backend(s)") and UTC dates.

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

/// `2026-11-23 07:20:01 UTC` for seconds since the Unix epoch (the civil
/// calendar from a day count, as in Howard Hinnant's date algorithms).
pub fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn agreement() {
        assert_eq!(count(1u32, "host"), "1 host");
        assert_eq!(count(0u32, "host"), "0 hosts");
        assert_eq!(count(3u32, "process"), "3 processes");
        assert_eq!(count(1u32, "process"), "1 process");
        assert_eq!(count(2u32, "table"), "2 tables");
    }
}
