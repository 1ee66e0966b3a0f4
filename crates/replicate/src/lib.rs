//! sqlfleet replicate: many MariaDB primaries into one server.
//!
//! Each source's binlog is read as a GTID replica would ([`source`]),
//! assembled into transactions and split by target database ([`txn`],
//! after filters and renames from [`config`]); each database is a stream
//! whose transactions apply in the source's order (`apply`): workers
//! take chunks of consecutive transactions from the streams' queues
//! (`lanes`), several chunks of one stream at once where
//! `order` lets them run ahead (commits stay in source order), and
//! `engines` says which may; a transaction across databases and DDL
//! are barriers. Every applied transaction commits
//! together with its stream's position (`position`), so a restart
//! after kill -9, a target restart or a lost source resumes exactly.
//! [`run`] wires sources and workers; [`status`] reads the positions;
//! [`report`] renders progress, summary and status as text;
//! [`metrics`] serves them to Prometheus.

mod apply;
mod batch_sql;
mod chunk;
pub mod config;
pub mod context;
mod engines;
pub mod event;
#[cfg(test)]
mod fixtures;
mod floor;
pub mod gtid;
#[cfg(test)]
mod guard_tests;
mod lanes;
pub mod load_query;
#[cfg(test)]
mod logged_tests;
#[cfg(test)]
mod mark_tests;
pub mod merge;
pub mod metrics;
mod order;
mod position;
pub mod report;
mod resume;
pub mod retired;
pub mod run;
pub mod seed;
pub mod seed_xa;
mod sequence;
pub mod server_written;
pub mod source;
pub mod sqltext;
pub mod status;
mod target_start;
pub mod txn;
pub mod unlogged;
mod work;
