//! What the relay tells its operators: counters and gauges in the
//! Prometheus text format ([`metrics`]), the small HTTP server they and
//! the JSON status (`status.rs` at the crate root, which reads the whole
//! relay) are read over ([`http`]) and log lines ([`log`]).

pub mod http;
pub mod log;
pub mod metrics;
