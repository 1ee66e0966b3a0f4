//! A password that cannot be printed by accident.
//!
//! `Debug` and `Display` both render as `****`, so a `Secret` can sit inside
//! any struct that gets logged or formatted into an error without leaking.

use std::fmt;

#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The plain text, for handing to the driver. Never format this.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_formats_plaintext() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "****");
        assert_eq!(format!("{s:?}"), "****");
        assert_eq!(s.expose(), "hunter2");
    }
}
