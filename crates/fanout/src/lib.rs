//! `sqlfleet query`: [`hosts`] (host lists), [`run`] (bounded-concurrency
//! executor with connect/query/overall timeouts and KILL QUERY) and
//! [`output`] (mysql --batch TSV, CSV, JSON lines, tables, collapse, diff)
//! and [`discover`] (a replication fleet found from one of its servers);
//! [`read_only`] keeps read-only servers read-only.

pub mod discover;
pub mod hosts;
mod json;
pub mod output;
pub mod read_only;
pub mod run;
