//! What the relay tells its operators: counters and gauges in the
//! Prometheus text format ([`metrics`]), the JSON status ([`status`]) and
//! the small HTTP server both are read over ([`http`]).

pub mod http;
pub mod metrics;
pub mod status;
