//! Counted nouns in messages: "1 host", "2 hosts", "1 process",
//! "3 processes" (never "1 hosts" or "backend(s)").

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
