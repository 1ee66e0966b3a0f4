//! `sqlfleet bench`: the [`insert`] sweep (concurrent inserters × table
//! sizes × index, with a loss check) and the [`pool`] sweep (queries per
//! connection, direct vs relays), recorded with `stats` and [`server`]
//! gauges, written by [`report`] as CSV, JSON, SVG charts (`sqlfleet_chart`) and HTML.

pub mod insert;
pub mod pool;
pub mod report;
pub mod server;
mod stats;
pub mod sweep;
