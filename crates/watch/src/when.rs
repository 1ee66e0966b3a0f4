//! Times in watch's JSON (`--json` lines, `/api`, the pages): ISO 8601 in
//! UTC with milliseconds (`2026-11-23T07:20:01.250Z`), one format
//! everywhere a person or a program reads a time. Kept as Unix seconds
//! inside, where they are compared and subtracted.

use serde::Serializer;

pub use sqlfleet_conn::text::iso_utc;

/// Now, in Unix seconds.
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// `#[serde(serialize_with = "crate::when::iso")]` for Unix seconds.
pub fn iso<S: Serializer>(t: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&iso_utc(*t))
}

/// The same for a time that may be missing (`null`).
pub fn iso_opt<S: Serializer>(t: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&iso_utc(*t)),
        None => s.serialize_none(),
    }
}
