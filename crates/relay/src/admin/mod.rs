//! What the relay tells its operators: counters and gauges in the
//! Prometheus text format ([`metrics`]), the JSON status ([`status`]), the
//! small HTTP server both are read over ([`http`]) and log lines ([`log`]).

pub mod http;
pub mod log;
pub mod metrics;
pub mod status;
